"""The HDF5 recorder: a file at the output path is always one h5py opens."""
import os
import signal
import subprocess
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import hapflow as hf
from hapflow.recorder import Recorder

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
