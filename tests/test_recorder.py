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


TYPED = {"a.y": ((1,), "f8", "m"), "b.y": ((2, 2), "i8", ""), "c.y": ((3,), "b1", "")}


def _chunk(k: int, n: int = 4000):
    """Chunk ``k`` of ``n`` rows of every TYPED signal, each row telling its tick."""
    ticks = np.arange(k * n, (k + 1) * n)
    return ticks / 1000.0, {"a.y": ticks[:, None] * 0.5,
                            "b.y": ticks[:, None, None] * np.array([[1, -1], [2, 3]]),
                            "c.y": ticks[:, None] % np.array([2, 3, 5]) == 0}


def _stored(rec, count, timeout=60.0):
    deadline = time.monotonic() + timeout
    while rec.stored < count and time.monotonic() < deadline:
        time.sleep(0.001)
    return rec.stored


def test_submitted_chunks_reach_the_file_on_the_writer_thread(tmp_path):
    """Without wait(): the writer thread stores each queued chunk, rows in order, each signal
    in its shape and dtype, and `ticks` keeps up with the rows."""
    out = tmp_path / "w.h5"
    rec = Recorder(out, TYPED, {"rate": 1000.0}, rows=4000)
    chunks = [_chunk(k) for k in range(3)]
    for t, cols in chunks:
        rec.submit(t, cols)
    assert _stored(rec, 3) == 3
    with h5py.File(out, "r") as f:             # the file holds them before the run closes it
        assert f.attrs["ticks"] == f["time"].shape[0] == 12000
    rec.close()
    got = hf.recorder.load(out)
    assert np.array_equal(got.time, np.concatenate([t for t, _ in chunks]))
    for name, (shape, dtype, _) in TYPED.items():
        want = np.concatenate([cols[name] for _, cols in chunks])
        assert got[name].shape == (12000, *shape) and got[name].dtype == np.dtype(
            {"f8": "float64", "i8": "int64", "b1": "bool"}[dtype])
        assert np.array_equal(got[name], want), name


def test_a_failed_write_reaches_the_caller_and_the_file_still_closes(tmp_path):
    """A chunk the writer thread cannot store (rows of the wrong shape) raises in the caller's
    next call; close() still closes the file, marked 'error', with the chunks stored before."""
    out = tmp_path / "e.h5"
    rec = Recorder(out, TYPED, {"rate": 1000.0})
    t, cols = _chunk(0)
    rec.submit(t, cols)
    rec.wait()
    t, cols = _chunk(1)
    rec.submit(t, dict(cols, **{"c.y": np.zeros((4000, 4), dtype=bool)}))
    assert _stored(rec, 2, timeout=2.0) == 1
    with pytest.raises(ValueError):
        rec.close()
    got = hf.recorder.load(out)
    assert got.attrs["status"] == "error" and got.time.size == got.attrs["ticks"] == 4000


FORKED_CHILD_RECORDS = textwrap.dedent("""
    import multiprocessing, sys, numpy as np
    from tests.test_recorder import TYPED, _chunk, _stored
    from hapflow.recorder import Recorder, load

    def child(path):
        rec = Recorder(path, TYPED, {"rate": 1000.0})
        rec.submit(*_chunk(0))
        ok = _stored(rec, 1, timeout=20.0) == 1        # the child's own writer thread
        rec.close()
        sys.exit(0 if ok and load(path).time.size == 4000 else 1)

    if __name__ == "__main__":
        parent = Recorder(sys.argv[1] + ".parent.h5", TYPED, {"rate": 1000.0})
        parent.submit(*_chunk(0))                        # the parent's writer thread runs
        parent.wait()
        proc = multiprocessing.get_context("fork").Process(target=child, args=(sys.argv[1],))
        proc.start()
        proc.join(120)
        code = proc.exitcode
        if code is None:                                 # stuck (a lock copied while held)
            proc.kill()
            proc.join()
        parent.close()
        sys.exit(0 if code == 0 else 1)
""")


def test_a_forked_child_records_with_a_writer_thread_of_its_own(tmp_path):
    """A fork copies the parent's writer state but not its thread: the child starts its own."""
    script = tmp_path / "fork_child.py"
    script.write_text(FORKED_CHILD_RECORDS)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "child.h5")], cwd=root,
                          env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
