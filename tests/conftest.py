"""Shared test setup: a per-session numba/hapflow cache folder, child processes that do not
outlive their test, a suite that writes nothing into the working tree, and garbage
collections that skip what earlier tests left alive."""
import gc
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hapflow import registry

os.environ.setdefault("HAPFLOW_CACHE_DIR", os.path.join(tempfile.gettempdir(), "hapflow-test-cache"))
# Hypothesis keeps its example database and constants cache out of the working tree too
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      os.path.join(tempfile.gettempdir(), "hapflow-test-hypothesis"))
ROOT = Path(__file__).resolve().parents[1]
NOT_OUTPUT = {".git", ".venv", ".pytest_cache", "__pycache__"}
"""Folders of the working tree that tools write (bytecode, pytest's cache): not test output."""
TREE = pytest.StashKey[dict[str, int]]()
"""The working tree's files at the start of the session (see pytest_sessionfinish)."""


def working_tree_files() -> dict[str, int]:
    """Modification time of each file under the project folder (tools' folders and the
    kernel cache aside), by path relative to it."""
    cache = Path(os.environ["HAPFLOW_CACHE_DIR"]).resolve()
    files = {}
    for folder, subfolders, names in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if d not in NOT_OUTPUT
                         and not d.endswith(".egg-info") and Path(folder, d).resolve() != cache]
        for name in names:
            path = Path(folder, name)
            files[str(path.relative_to(ROOT))] = path.lstat().st_mtime_ns
    return files


def pytest_sessionstart(session):
    # a suite started as a background job of a non-interactive shell inherits SIGINT ignored
    # (and so would every `hapflow run` a test starts): the Ctrl-C tests need Python's default.
    # Reset here, not by a Popen preexec_fn: that makes Popen fork (not vfork) and run Python
    # before exec, and in a worker serving the simulated gRPC card, gRPC's fork handlers then
    # aborted the child ("epoll_wait error: Bad file descriptor", 6 of 300 such forks)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not hasattr(session.config, "workerinput"):          # once, in the xdist controller
        session.config.stash[TREE] = working_tree_files()


def pytest_sessionfinish(session):
    """The suite fails if a test wrote a file into the working tree that git does not track
    (a graph's out/... run from the project folder): tests write under tmp_path."""
    before = session.config.stash.get(TREE, None)
    if before is None:
        return
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if tracked.returncode != 0:                             # not a git checkout: nothing to tell
        return
    tracked_names = set(tracked.stdout.decode().split("\0"))
    written = sorted(p for p, mtime in working_tree_files().items()
                     if before.get(p) != mtime and p not in tracked_names)
    if written:
        writer = session.config.get_terminal_writer()
        writer.line()
        writer.line("tests wrote into the working tree (write under tmp_path instead): "
            + ", ".join(written), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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


SHARED_KERNELS = frozenset({"test_block_contract.py", "test_codegen.py", "test_lanes.py",
                            "test_runnable.py"})
"""Files that compile every library block or every graph file (fused, as units, over lanes):
one worker runs them one after another, and they share the blocks' helpers and Kalman
steps in memory.  Spread over both workers, each often compiled the same ones at the same
time, before the other had stored them in the kernel cache."""


@pytest.hookimpl(optionalhook=True)          # known only where xdist is loaded
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the files of :data:`SHARED_KERNELS` as one unit of work (xdist's
    groups, ``--dist loadgroup``, do not work with pytest 9: xdist renames a test's id through
    an attribute pytest no longer reads)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedKernelsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "shared kernels" if Path(scope).name in SHARED_KERNELS else scope
    return SharedKernelsTogether(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After each test: collect, then freeze what is left alive (numba keeps every compiled
    function's IR, millions of objects in a worker), so that later collections walk only
    the objects made since.  Without this, each full collection walked the whole heap
    again."""
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _registry_unchanged():
    """A test leaves the block registry as it found it (see pytest_collection_finish)."""
    before = registry.types()
    yield
    changed = {n: c for n, c in registry.types().items() if before.get(n) is not c}
    assert not changed, (f"the test registered block types {sorted(changed)} for good; declare "
                         "them with `register=False` (and use registry.registered())")


@pytest.fixture
def figures(monkeypatch):
    """Every figure the plots close, kept open for the test to read (and closed after it)."""
    import matplotlib.pyplot as plt     # here: most workers never plot
    close, kept = plt.close, []
    monkeypatch.setattr(plt, "close", kept.append)
    yield kept
    for fig in kept:
        close(fig)
