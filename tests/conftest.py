"""Shared test setup: a per-session numba/hapflow cache folder, and child processes that
do not outlive their test."""
import os
import subprocess
import sys
import tempfile
import time

import pytest

from hapflow import registry

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


@pytest.fixture
def endless_run(spawn):
    """Start ``hapflow run GRAPH --duration 1e6 --out OUT ARGS...`` in a child process and
    return it as soon as OUT exists (the test stops it)."""
    def start(graph, out, *args, **popen):
        child = spawn([sys.executable, "-m", "hapflow.cli", "run", str(graph), "--duration", "1e6",
                       "--out", str(out), "--no-progress", *args], env=os.environ.copy(), **popen)
        deadline = time.time() + 180
        while not out.exists() and time.time() < deadline:
            time.sleep(0.0005)
        return child
    return start


def pytest_collection_finish(session):
    """No block class of a test module is in the registry: registry-wide tests (the block
    contract) are parametrised over it while other modules are collected, so a test's block
    there would be tested as a library block in one worker and not in another."""
    local = [f"{c.__module__}.{c.__qualname__}" for c in registry.types().values()
             if not c.__module__.startswith("hapflow.")]
    if local:
        raise pytest.UsageError(f"test blocks registered for good: {', '.join(local)}; declare "
                                "them with `register=False` (and use registry.registered())")


@pytest.fixture(autouse=True)
def _registry_unchanged():
    """A test leaves the block registry as it found it (see pytest_collection_finish)."""
    before = registry.types()
    yield
    changed = {n: c for n, c in registry.types().items() if before.get(n) is not c}
    assert not changed, (f"the test registered block types {sorted(changed)} for good; declare "
                         "them with `register=False` (and use registry.registered())")
