"""``hapflow camera``: probe, identify, render and verify on the simulated rig (short runs)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from hapflow.cli import main
from hapflow.ident.camera import camera

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = ROOT / "graphs"


@pytest.fixture(scope="module")
def ewls_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("camera") / "ewls"
    steps = []

    def on_step(line):                 # each step's line and the files there when it starts
        steps.append((line, {p.name for p in out.iterdir()}))

    result = camera(GRAPHS / "colton2005_sweep.yaml", GRAPHS / "colton2005_validation.yaml",
                    method="ewls", duration=10.0, validation_duration=4.0, out=out,
                    on_step=on_step)
    result.steps = steps
    return out, result


def test_camera_says_what_it_does_as_each_step_starts(ewls_run):
    """``make run`` was silent for ~17 s (compiling, simulating, fitting) before its summary
    (issue 18): each step is announced before it writes its file."""
    out, result = ewls_run
    (probe, before_probe), (ident, before_ident), (valid, before_valid), (verify, before_verify) \
        = result.steps
    assert probe.startswith("probe: running ") and "probe.h5" not in before_probe
    assert ident.startswith("identify: ewls") and "probe.h5" in before_ident
    assert "model.yaml" not in before_ident and "model.yaml" in before_valid
    assert valid.startswith("validation: running ") and "validation.h5" not in before_valid
    assert verify.startswith("verify: ") and "validation.h5" in before_verify
    assert "verify_force.png" not in before_verify and (out / "verify_force.png").is_file()


def test_camera_writes_every_file(ewls_run):
    out, result = ewls_run
    for name in ("probe.h5", "validation.h5", "model.yaml", "parameters.png", "fit_force.png",
                 "verify_force.png", "summary.md"):
        path = out / name
        assert path.is_file() and path.stat().st_size > 0, name
    assert result.files["summary"] == out / "summary.md"


def test_camera_figures_are_sane(ewls_run):
    _, result = ewls_run
    assert result.probe_run.ticks == 40000          # 10 s at 4 kHz
    assert result.validation_run.ticks == 16000     # 4 s
    assert result.probe_run.realtime_factor > 1.0
    assert 0.0 < result.fit_nrmse < 5.0
    assert 0.0 < result.validation_nrmse < 10.0
    lo, hi, rms, count = result.worst_range
    assert -0.03 < lo < hi < 0.03 and rms > 0 and count > 0
    assert result.truth is not None                 # HardeningSpringDevice states its impedance
    errs = result.truth_errors()
    assert set(errs) == {1, -1}
    assert all(math.isfinite(errs[d]["k"]["rms"]) for d in (1, -1))


def test_camera_summary_markdown(ewls_run):
    out, result = ewls_run
    text = (out / "summary.md").read_text()
    assert text.startswith("# Haptic camera: colton2005_sweep.yaml -> colton2005_validation.yaml")
    for piece in ("## Runs", "| probe |", "| validation |", "40000", "16000", "real-time factor",
                  "## Model (ewls)", "positive:", "negative:", "## Parameters against the truth",
                  "| positive | k |", "## Force prediction",
                  f"{result.fit_nrmse:.3f} %", f"{result.validation_nrmse:.3f} %",
                  "Worst position range", "(parameters.png)", "(fit_force.png)",
                  "(verify_force.png)"):
        assert piece in text, piece


def test_camera_cli_segmented(tmp_path, capsys):
    out = tmp_path / "seg"
    code = main(["camera", str(GRAPHS / "colton2004_sine.yaml"), "--validate",
                 str(GRAPHS / "colton2004_sine_validation.yaml"), "--method", "segmented",
                 "--segments", "4", "--duration", "10", "--validation-duration", "4",
                 "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"probe: running {GRAPHS / 'colton2004_sine.yaml'}")
    assert "fit: force NRMSE" in printed and "validation: force NRMSE" in printed
    assert "summary.md" in printed
    text = (out / "summary.md").read_text()
    assert "hapflow camera" in text and "--segments 4" in text
    assert "segment [mm]" in text                    # the segmented model table
    for name in ("model.yaml", "parameters.png", "fit_force.png", "verify_force.png"):
        assert (out / name).is_file(), name


def test_camera_cli_needs_validation_graph(capsys):
    with pytest.raises(SystemExit):
        main(["camera", str(GRAPHS / "colton2005_sweep.yaml")])
