"""The HDF5 recorder: a file at the output path is always one h5py opens."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import hapflow as hf
from hapflow.recorder import Recorder
from tests.helpers import mixed_graph

DEMO = Path(__file__).resolve().parents[1] / "graphs" / "demo_oscillator.yaml"
SIGNALS = {"a.y": ((1,), "f8", "m"), "b.y": ((3,), "f8", "N")}


def test_file_appears_only_with_its_layout_written(tmp_path, monkeypatch):
    """A failure (or a kill) while the layout is written leaves no file at the path: it used to
    leave a few bytes of superblock that h5py cannot open."""
    out = tmp_path / "r.h5"
    out.write_bytes(b"an old recording")
    calls = []

    def create_dataset(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(self, *args, **kwargs)

    real = h5py.Group.create_dataset
    monkeypatch.setattr(h5py.Group, "create_dataset", create_dataset)
    with pytest.raises(OSError, match="disk full"):
        Recorder(out, SIGNALS, {"rate": 1000.0})
    assert not out.exists() and os.listdir(tmp_path) == []
    monkeypatch.undo()
    rec = Recorder(out, SIGNALS, {"rate": 1000.0})
    with h5py.File(out, "r") as f:            # readable while still open for writing
        assert f.attrs["status"] == "running" and set(f["signals"]) == {"a.y", "b.y"}
    rec.append(np.arange(3) / 1000.0, {"a.y": np.ones((3, 1)), "b.y": np.zeros((3, 3))})
    rec.close()
    assert hf.recorder.load(out).time.size == 3 and os.listdir(tmp_path) == ["r.h5"]


@pytest.mark.parametrize("delay", [0.0, 0.3])
def test_sigkill_at_any_moment_leaves_a_readable_file(tmp_path, endless_run, delay):
    """SIGKILL the moment the file appears, and a little later while chunks stream in."""
    out = tmp_path / "kill.h5"
    child = endless_run(DEMO, out, "--chunk", "0.01", stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    rec = hf.recorder.load(out)
    assert rec.attrs["status"] == "running" and rec.time.size == rec.attrs["ticks"]


def test_sigterm_stops_a_simulation_like_ctrl_c(tmp_path, endless_run):
    out = tmp_path / "term.h5"
    child = endless_run(DEMO, out, "--chunk", "0.05", stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)          # chunks of 50 ticks are flushed every few milliseconds
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 143, err
    assert "terminated at t = " in err and "Traceback" not in err
    rec = hf.recorder.load(out)
    assert rec.attrs["status"] == "interrupted" and not rec.attrs["complete"]
    assert rec.time.size > 0 and rec.time.size % 50 == 0


KILLED_CHILD = textwrap.dedent("""
    import sys, hapflow as hf
    sim = hf.Simulation(hf.load(sys.argv[1]), interpret=True, chunk=0.05)
    sim.run(duration=1000.0, out=sys.argv[2],
            on_chunk=lambda t, cols: print(len(t) and round(t[-1] * 1000) + 1, flush=True))
""")


def test_run_killed_with_sigkill_leaves_readable_file_with_completed_chunks(tmp_path, spawn):
    graph_file = tmp_path / "mixed.yaml"
    hf.save(mixed_graph(), graph_file)
    out = tmp_path / "killed.h5"
    child = spawn([sys.executable, "-c", KILLED_CHILD, str(graph_file), str(out)],
                  stdout=subprocess.PIPE, text=True)
    printed = []
    deadline = time.time() + 120
    while len(printed) < 4 and time.time() < deadline:
        printed.append(int(child.stdout.readline()))
    os.kill(child.pid, signal.SIGKILL)
    rest = child.stdout.read().split()
    child.wait()
    printed += [int(v) for v in rest]
    assert len(printed) >= 4
    rec = hf.recorder.load(out)
    n = len(rec.time)
    assert n >= printed[-1] and n % 50 == 0
    assert rec.attrs["complete"] == False and rec.attrs["ticks"] == n  # noqa: E712
    reference = hf.Simulation(mixed_graph()).run(n / 1000.0)
    for name in reference.signals:
        assert np.array_equal(rec[name], reference[name]), name
