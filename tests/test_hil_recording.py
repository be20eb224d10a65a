"""The real-time recording's writer process: the file and shared memory on every exit path."""
import signal
import subprocess
import time
from pathlib import Path

import hapflow as hf

TESTBED = Path(__file__).resolve().parents[1] / "graphs" / "hil_testbed.yaml"


def shared_segments(pid: int) -> set[str]:
    """The /dev/shm files process ``pid`` has mapped."""
    with open(f"/proc/{pid}/maps") as maps:
        return {line.split()[-1] for line in maps if "/dev/shm/" in line}


def test_kill_9_of_a_hil_run_releases_its_shared_memory(tmp_path, endless_run):
    """The writer process outlives a ``kill -9`` of the loop: it closes the file and unlinks
    the two shared-memory buffers nobody else can release any more (they leaked); the
    loop's status (rows, trip, stop flag: see hapflow.hil.dashboard) is released too."""
    out = tmp_path / "hil.h5"
    child = endless_run(TESTBED, out, "--mode", "hil", stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    segments = shared_segments(child.pid)
    assert len(segments) == 3
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    deadline = time.time() + 60
    while any(Path(s).exists() for s in segments) and time.time() < deadline:
        time.sleep(0.05)
    assert not [s for s in segments if Path(s).exists()]
    rec = hf.recorder.load(out)
    assert rec.attrs["status"] == "killed" and rec.time.size == rec.attrs["ticks"]
