"""A JACK server with its dummy driver, for tests that need a real, paced audio device.

On a machine with no sound card, ``jackd -d dummy`` gives PortAudio (and so
``sounddevice``) a JACK output device driven by a timer at the set rate, and
rtmidi (``mido``, API ``UNIX_JACK``) its MIDI ports.  The server gets a name
unique to the test process (``JACK_DEFAULT_SERVER`` points clients to it)
and is stopped afterwards.  PortAudio is re-initialised after the server
starts, and terminated before it stops (its JACK teardown aborts the process
if the server is gone) and initialised again after, so its device list
follows.  Close every stream and MIDI port inside the ``with`` block.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import pytest

JACK_HOSTAPI = "JACK Audio Connection Kit"


def rescan_audio() -> bool:
    """Re-initialise PortAudio; True if it now sees a JACK server."""
    import sounddevice as sd
    sd._terminate()
    sd._initialize()
    return any(api["name"] == JACK_HOSTAPI for api in sd.query_hostapis())


def _running_check(proc: subprocess.Popen, log: str) -> None:
    if proc.poll() is not None:
        with open(log) as fh:
            tail = fh.read()[-2000:]
        raise RuntimeError(f"jackd exited with code {proc.returncode}:\n{tail}")


@dataclass(frozen=True)
class JackServer:
    """A running server: its name and the file its output goes to."""

    name: str
    log: str

    def xruns(self) -> int:
        """Xruns the server has reported so far (its own, e.g. the dummy driver's timer late)."""
        with open(self.log) as fh:
            return sum("XRun" in line for line in fh)


@contextmanager
def jack_server(rate: int = 48000, period: int = 256, timeout: float = 20.0) -> Iterator[JackServer]:
    """Run ``jackd --no-realtime -n NAME -d dummy -r RATE -p PERIOD``; yield it.

    Skips the test if ``jackd`` is not installed (Debian package ``jackd2``).

    Raises
    ------
    RuntimeError
        If the server exits or PortAudio does not see it within ``timeout`` s.
    """
    exe = shutil.which("jackd")
    if exe is None:
        pytest.skip("jackd is not installed (Debian package jackd2; .ci/run installs it)")
    name = f"hapflow-test-{os.getpid()}"
    saved = os.environ.get("JACK_DEFAULT_SERVER")
    os.environ["JACK_DEFAULT_SERVER"] = name
    log = tempfile.NamedTemporaryFile("w", prefix="jackd-", suffix=".log", delete=False)
    proc = subprocess.Popen([exe, "--no-realtime", "-n", name, "-d", "dummy", "-r", str(rate),
                             "-p", str(period)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            time.sleep(0.2)
            _running_check(proc, log.name)
            if rescan_audio():
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"PortAudio did not see the JACK server {name!r} "
                                   f"within {timeout:g} s (log: {log.name})")
        log.flush()
        yield JackServer(name, log.name)
    finally:
        import sounddevice as sd
        sd._terminate()            # before the server goes: PortAudio's JACK teardown needs it
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if saved is None:
            os.environ.pop("JACK_DEFAULT_SERVER", None)
        else:
            os.environ["JACK_DEFAULT_SERVER"] = saved
        sd._initialize()
        log.close()
        os.unlink(log.name)
