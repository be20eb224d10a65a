"""The real-time recording's writer process: the file and shared memory on every exit path."""
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hapflow as hf

TESTBED = Path(__file__).resolve().parents[1] / "graphs" / "hil_testbed.yaml"


def shared_segments(pid: int) -> set[str]:
    """The /dev/shm files process ``pid`` has mapped."""
    with open(f"/proc/{pid}/maps") as maps:
        return {line.split()[-1] for line in maps if "/dev/shm/" in line}


@pytest.mark.parametrize("delay", [0.0, 0.5])
def test_kill_9_of_a_hil_run_releases_its_shared_memory(tmp_path, endless_run, delay):
    """The writer process outlives a ``kill -9`` of the loop: it closes the file and unlinks
    the two shared-memory buffers nobody else can release any more (they leaked); the
    loop's status (rows, trip, stop flag: see hapflow.hil.dashboard) is released too.  Killed
    the moment the file appears, and later while rows stream in."""
    out = tmp_path / "hil.h5"
    # unpaced: a paced run on a loaded 2-core host (load 12) tripped its watchdog before the
    # kill, and the file said 'safety'; the writer's behaviour does not depend on the pacing
    child = endless_run(TESTBED, out, "--mode", "hil", "--unpaced", stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
    time.sleep(delay)
    segments = shared_segments(child.pid)
    assert len(segments) == 3 or (delay == 0 and len(segments) == 2)  # the status comes last
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    deadline = time.time() + 60
    while any(Path(s).exists() for s in segments) and time.time() < deadline:
        time.sleep(0.05)
    assert not [s for s in segments if Path(s).exists()]
    rec = hf.recorder.load(out)
    assert rec.attrs["status"] == "killed" and rec.time.size == rec.attrs["ticks"]


LOOP_DIES_BEFORE_THE_WRITER_IS_READY = """
import os, signal, sys, time
import hapflow.recorder
from hapflow.hil.recording import HilRecorder


class KillsTheLoop(hapflow.recorder.Recorder):
    # runs in the writer: the file exists, then the loop dies before 'ready' reaches it
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with open("/proc/self/maps") as maps:
            print(" ".join({l.split()[-1] for l in maps if "/dev/shm/" in l}), flush=True)
        loop = os.getppid()
        os.kill(loop, signal.SIGKILL)
        while os.getppid() == loop:
            time.sleep(0.01)


hapflow.recorder.Recorder = KillsTheLoop
HilRecorder(sys.argv[1], {"x.y": ("m", ("log", 0))}, 1000.0, {}, 8, 1, 1)
"""


def test_kill_9_of_the_loop_before_its_writer_is_ready_still_closes_the_file(tmp_path, spawn):
    """The loop killed between the file's creation and the writer's 'ready' (what the
    kill -9 test above hits at random when it kills the moment the file appears): the
    writer's 'ready' met a closed pipe, it died of BrokenPipeError with the file still
    'running', and the resource tracker, not the writer, unlinked the buffers."""
    out = tmp_path / "hil.h5"
    child = spawn([sys.executable, "-c", LOOP_DIES_BEFORE_THE_WRITER_IS_READY, str(out)],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = child.communicate(timeout=60)    # the writer holds stdout to its end
    assert child.returncode == -signal.SIGKILL and "Error" not in stderr, stderr
    segments = stdout.split()
    assert len(segments) == 2 and not [s for s in segments if Path(s).exists()]
    rec = hf.recorder.load(out)
    assert rec.attrs["status"] == "killed" and rec.time.size == 0


FAILS_WHILE_RECORDING = """
import sys
from hapflow.hil.recording import HilRecorder
rec = HilRecorder(sys.argv[1], {"x.y": ("m", ("log", 0))}, 1000.0, {}, 8, 1, 1)
print(" ".join(b.shm.name for b in rec.buffers), flush=True)
raise RuntimeError("a failure between the recorder's start and its finish")
"""


def test_a_process_failing_while_it_records_still_exits_and_closes_the_file(tmp_path, spawn):
    """An exception between the writer's start and ``finish`` (the HIL run's set-up after the
    recorder, a bug in its ``finally``) ended the script but never the process: at exit,
    multiprocessing joins its daemonic children after a SIGTERM the writer ignores, and the
    writer waits for the end of the pipe the exiting process still holds (issue 18's
    ``--max-lateness nan`` hang)."""
    out = tmp_path / "hil.h5"
    child = spawn([sys.executable, "-c", FAILS_WHILE_RECORDING, str(out)],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not exit: it waits on its recorder")
    assert child.returncode == 1 and "a failure between" in stderr
    rec = hf.recorder.load(out)
    assert rec.attrs["status"] == "error" and rec.time.size == 0
    segments = stdout.split()
    assert len(segments) == 2 and not [s for s in segments if Path("/dev/shm", s).exists()]


def test_ctrl_c_while_the_file_is_finished_loses_nothing_and_frees_the_memory(tmp_path,
                                                                              monkeypatch):
    """A Ctrl-C after the loop stopped, while the writer finishes the file, used to raise
    KeyboardInterrupt out of the run before the loop's status memory was released (Python's
    resource tracker then warned of a leaked shared_memory object at exit).  Ctrl-C stays
    trapped until the file is finished and the memory freed."""
    import os

    from hapflow.hil import recording
    from hapflow.hil import runner as runner_module
    from hapflow.hil.runner import HilRunner
    from hapflow.hil.simdaq import SimDaq
    from hapflow.yamlio import load

    made = []

    class Tracked(recording.Status):
        def __init__(self):
            super().__init__()
            made.append(self.shm.name)

    finish = recording.HilRecorder.finish

    def interrupted(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)              # Ctrl-C while the file is finished
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(runner_module, "Status", Tracked)
    monkeypatch.setattr(recording.HilRecorder, "finish", interrupted)
    graph = load(TESTBED)
    try:
        result = HilRunner(graph, SimDaq(graph, paced=False)).run(0.05, out=tmp_path / "r.h5")
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C after the loop stopped escaped the run")
    assert result.event is None
    assert hf.recorder.load(result.path).attrs["status"] == "complete"
    assert made and not any(Path("/dev/shm", name.lstrip("/")).exists() for name in made)


def test_kill_9_of_a_hil_run_with_a_sink_leaves_its_sound_file_finished(tmp_path, endless_run):
    """The sinks' helper process (hapflow.hil.sinkdrain) outlives a ``kill -9`` of the loop:
    it sees its parent gone, closes the sink (a complete WAV file) and exits."""
    from scipy.io import wavfile
    wav, out = tmp_path / "snd.wav", tmp_path / "hil.h5"
    graph = tmp_path / "bed.yaml"
    graph.write_text(TESTBED.read_text()
                     .replace("blocks:\n", "blocks:\n  snd: {type: SoundSink, mode: signal, "
                              f"live: false, gain: 0.01, capacity: 500, file: '{wav}'}}\n")
                     .replace("wires:\n", "wires:\n  - pid.force_cmd -> snd.u\n"))
    child = endless_run(graph, out, "--mode", "hil", "--unpaced", stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (wav.exists() and wav.stat().st_size > 48000) and time.time() < deadline:
        time.sleep(0.05)
    helpers = Path(f"/proc/{child.pid}/task/{child.pid}/children").read_text().split()
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    deadline = time.time() + 60
    while any(Path(f"/proc/{p}").exists() for p in helpers) and time.time() < deadline:
        time.sleep(0.05)
    assert not [p for p in helpers if Path(f"/proc/{p}").exists()], "a helper outlived the run"
    fs, audio = wavfile.read(wav)               # a finished header, every sample on file
    assert fs == 48000 and audio.size * 2 + 44 <= wav.stat().st_size <= audio.size * 2 + 46
