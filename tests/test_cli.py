"""The hapflow command line: exit codes, one-line errors, outputs."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hapflow as hf
from hapflow.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "graphs" / "demo_oscillator.yaml"


def test_run_writes_recording_and_summary(tmp_path, capsys):
    """--out and --plot into folders that do not exist yet (a traceback in issue 18)."""
    out = tmp_path / "new" / "demo.h5"
    code = main(["run", str(DEMO), "--duration", "0.5", "--out", str(out), "--no-progress",
                 "--set", "drive.amplitude=0", "--plot", str(tmp_path / "figs" / "demo.png")])
    assert code == 0
    printed = capsys.readouterr().out
    assert "500 ticks (0.5 s simulated)" in printed and "real-time factor" in printed
    rec = hf.recorder.load(out)
    assert rec.attrs["complete"] and rec.attrs["rate"] == 1000.0
    assert "demo-oscillator" in rec.attrs["graph_yaml"]
    assert rec.units["plant.pos"] == "m"
    assert not rec["drive.y"].any()          # --set applied before the run
    assert (tmp_path / "figs" / "demo.png").stat().st_size > 10_000


def test_bad_graph_prints_one_line_error_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rate: 1000\nblocks:\n  a: {type: Sine, amplitud: 1}\n")
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hapflow: error: {bad}:3:")
    assert "did you mean 'amplitude'?" in err and "Traceback" not in err


def test_bad_set_names_the_key(capsys):
    assert main(["run", str(DEMO), "--set", "plant.mas=2", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "'mas'" in err and "did you mean 'mass'?" in err
    assert main(["run", str(DEMO), "--set", "nonsense", "--no-progress"]) == 2
    assert "block.param=value" in capsys.readouterr().err


def test_check_prints_order_layout_and_draws(tmp_path, capsys):
    png = tmp_path / "d.png"
    assert main(["check", str(DEMO), "--draw", str(png)]) == 0
    out = capsys.readouterr().out
    assert "execution order" in out and "filter.{y}  [held, every 4 tick(s)]" in out
    assert "plant.x" in out and png.stat().st_size > 5_000


def test_blocks_reference(capsys):
    assert main(["blocks"]) == 0
    listing = capsys.readouterr().out
    assert "MassSpringDamper" in listing and "BouncingBall" in listing
    assert main(["blocks", "MassSpringDamper"]) == 0
    ref = capsys.readouterr().out
    assert "force" in ref and "[N s/m]" in ref and "Ports" in ref
    assert main(["blocks", "MassSprngDamper"]) == 2
    assert "did you mean 'MassSpringDamper'?" in capsys.readouterr().err


def test_blocks_finds_a_type_by_any_case_or_part_of_its_name(capsys):
    assert main(["blocks", "pid"]) == 0              # the one match: its reference
    assert capsys.readouterr().out.startswith("PIDFeedforward\n")
    assert main(["blocks", "massspringdamper"]) == 0
    assert capsys.readouterr().out.startswith("MassSpringDamper\n")
    assert main(["blocks", "kalman"]) == 0           # several: the list of them
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) == 3 and all("KalmanFilter" in line for line in listing)


def test_set_of_a_structural_parameter_rebuilds_the_block(tmp_path, capsys):
    """A structural --set cannot be applied to a compiled kernel, but the CLI sets it before
    compiling: the delay is rebuilt with two elements, which its 1-element driver cannot feed."""
    assert main(["run", str(DEMO), "--set", "delay.size=2", "--out", str(tmp_path / "r.h5"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "delay.u takes (2,) f8" in err and "rebuild" not in err
    assert main(["run", str(DEMO), "--set", "drive.unit=N", "--duration", "0.01",
                 "--out", str(tmp_path / "r.h5"), "--no-progress"]) == 0


def test_summary_of_a_short_run_shows_its_wall_time():
    from hapflow.simulation import RunResult
    assert "in 0.0002 s wall, real-time factor 5x" in RunResult(1, 0.0002, 1000.0).summary()
    assert "in 3 s wall, real-time factor 0.33x" in RunResult(1000, 3.0, 1000.0).summary()
    assert "real-time factor 1,000x" in RunResult(100_000, 0.1, 1000.0).summary()


def test_ctrl_c_inside_a_finaliser_still_stops_the_run(tmp_path):
    """A SIGINT whose handler runs inside a ``__del__`` (or a weakref callback): Python's
    default handler raises KeyboardInterrupt there, which is printed and dropped, and the
    run went on to its end (an endless run in CI ignored its Ctrl-C this way).  The run's
    own handler notes it and the chunk loop stops at the end of the chunk."""
    class Finaliser:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)                    # the handler runs here, inside __del__

    chunks = []

    def on_chunk(t, signals):
        chunks.append(t.size)
        if len(chunks) == 2:
            Finaliser()

    sim = hf.Simulation(hf.yamlio.load(DEMO), chunk=0.05)
    with pytest.raises(KeyboardInterrupt):
        sim.run(10.0, out=tmp_path / "r.h5", progress=False, on_chunk=on_chunk)
    assert len(chunks) == 2
    rec = hf.recorder.load(tmp_path / "r.h5")
    assert rec.attrs["status"] == "interrupted" and rec.time.size == sum(chunks)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_keeps_the_recording(tmp_path, spawn):
    out = tmp_path / "int.h5"
    child = spawn([sys.executable, "-m", "hapflow.cli", "run", str(DEMO), "--interpret",
                   "--duration", "1e7", "--chunk", "0.05", "--out", str(out),
                   "--no-progress"],
                  stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    deadline = time.time() + 120
    while not (out.exists() and out.stat().st_size) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(2.0)          # chunks of 50 ticks are flushed every few milliseconds
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    rec = hf.recorder.load(out)
    assert rec.attrs["status"] == "interrupted" and not rec.attrs["complete"]
    assert len(rec.time) >= 50 and len(rec.time) % 50 == 0


def test_an_install_without_hapflows_entry_points_says_to_reinstall(monkeypatch, capsys):
    """An install made before the 'hapflow.libraries' and 'hapflow.commands' entry points
    existed found no block type and no identify/hil/study command, with no word why."""
    from hapflow import registry
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    monkeypatch.setattr(registry, "_LOADED", False)
    with pytest.raises(hf.HapflowError, match="'hapflow.libraries' entry points .* predates"):
        registry.lookup("Chirp")
    assert main(["check", str(DEMO)]) == 2
    err = capsys.readouterr().err
    assert "'hapflow.commands' entry points" in err and "reinstall" in err
