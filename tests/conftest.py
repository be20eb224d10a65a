"""Shared test setup: a per-session numba/hapflow cache folder, and child processes that
do not outlive their test."""
import os
import subprocess
import tempfile

import pytest

os.environ.setdefault("HAPFLOW_CACHE_DIR", os.path.join(tempfile.gettempdir(), "hapflow-test-cache"))


@pytest.fixture
def spawn():
    """``subprocess.Popen`` for a test; a child still running when the test ends is killed.

    Without it a failed test leaves its child running: an endless ``hapflow run`` that
    missed its Ctrl-C used a core for the rest of a CI run and the next benchmarks.
    """
    children = []

    def start(*args, **kwargs):
        proc = subprocess.Popen(*args, **kwargs)
        children.append(proc)
        return proc

    yield start
    for proc in children:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
