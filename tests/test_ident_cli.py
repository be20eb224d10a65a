"""hapflow identify / verify end to end (hapflow/ident/commands.py)."""
from pathlib import Path

import numpy as np
import pytest

import hapflow as hf
from hapflow.cli import main
from hapflow.ident import ImpedanceModel
from hapflow.ident import synthetic as syn

ROOT = Path(__file__).resolve().parents[1]
from tests.helpers import KEYSWITCH as KEYS


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("ident") / "run.h5"
    syn.recording(path, duration=12.0, rate=2000.0)
    return path


def test_identify_writes_model_and_plots_then_verify(run, tmp_path, capsys):
    model_path = tmp_path / "model.yaml"
    assert main(["identify", str(run), "--segments", "5", "--out", str(model_path),
                 "--plots", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    assert "acceleration: fusion: an accelerometer is present" in out
    assert "positive (v > 0)" in out and "cond" in out
    assert "fit: force NRMSE" in out
    assert "against the truth (recording attribute impedance_truth)" in out
    for name in ("parameters.png", "force.png"):
        assert (tmp_path / "plots" / name).stat().st_size > 10_000
    model = ImpedanceModel.load(model_path)
    assert model.method == "segmented" and model.source["sha256"]
    assert model.settings["prep"]["velocity"] == "fusion"
    truth = syn.piecewise_model()
    xs = np.array([-0.02, -0.01, 0.0, 0.01, 0.02])
    np.testing.assert_allclose(model.positive.at(xs)["k"], truth.positive.at(xs)["k"], rtol=0.01)

    assert main(["verify", str(model_path), "--against", str(run)]) == 0
    out = capsys.readouterr().out
    nrmse = float(out.split("force NRMSE ")[1].split(" %")[0])
    assert nrmse == pytest.approx(model.fit["nrmse_percent"], abs=1e-3) and nrmse < 0.1
    assert "worst position range" in out
    assert main(["verify", str(model_path), "--against", str(run), "--max-nrmse", "1e-6"]) == 1
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize("method", ["auto", "ewls"])
def test_other_methods(run, tmp_path, capsys, method):
    out_path = tmp_path / f"{method}.yaml"
    assert main(["identify", str(run), "--method", method, "--out", str(out_path)]) == 0
    model = ImpedanceModel.load(out_path)
    assert model.method == method and model.fit["nrmse_percent"] < 2.0
    if method == "ewls":
        assert np.allclose(np.diff(model.positive.x), 1e-3)


def test_keyswitch_csv(tmp_path, capsys):
    out_path = tmp_path / "red.yaml"
    csv = KEYS + "cherry_mx_red.csv"
    assert main(["identify", csv, "--method", "auto", "--out", str(out_path)]) == 0
    out = capsys.readouterr().out
    assert "quasi-static" in out and "k [N/m]" in out and "m [kg]" not in out
    assert main(["verify", str(out_path), "--against", csv, "--max-nrmse", "1.0"]) == 0
    assert "1 mm bins" in capsys.readouterr().out


def test_truth_of_a_simulated_device(tmp_path, capsys):
    """A short run of the seed-002 graph: the truth comes from HardeningSpringDevice.impedance."""
    rec = tmp_path / "sweep.h5"
    assert main(["run", str(ROOT / "graphs" / "colton2005_sweep.yaml"), "--duration", "12",
                 "--out", str(rec), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["identify", str(rec), "--method", "segmented", "--segments", "6",
                 "--out", str(tmp_path / "m.yaml"), "--plots", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "against the truth (dev.impedance (HardeningSpringDevice))" in out
    model = ImpedanceModel.load(tmp_path / "m.yaml")
    dev = hf.load(ROOT / "graphs" / "colton2005_sweep.yaml").nodes["dev"].block
    x = np.array([-0.003, 0.003])                      # inside the soft centre segment(s)
    for d in (1, -1):
        np.testing.assert_allclose(model.direction(d).at(x)["k"], dev.impedance(x, d)["k"],
                                   rtol=0.1)


@pytest.mark.parametrize("command", ["identify", "verify"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0 and "--pos" in capsys.readouterr().out


def test_errors_are_one_line_with_what_to_do(run, tmp_path, capsys):
    assert main(["identify", str(run), "--pos", "enc.position"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "did you mean 'enc.pos'?" in err and "It has: dev.acc" in err
    assert main(["identify", str(tmp_path / "none.h5")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "none.yaml"), "--against", str(run)]) == 2
    assert "cannot read model file" in capsys.readouterr().err
    assert main(["identify", KEYS + "cherry_mx_red.csv", "--units", "force"]) == 2
    assert "quantity=unit" in capsys.readouterr().err
    assert main(["identify", KEYS + "cherry_mx_red.csv", "--regressors", "avx1"]) == 2
    assert "quasi-static" in capsys.readouterr().err
