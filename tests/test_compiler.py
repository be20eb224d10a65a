"""hapflow.compiler: the disk cache, and kernel names that follow what kernels call."""
import gc
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import hapflow as hf
from hapflow.blocks import Constant, MassSpringDamper
from tests.helpers import edit, mixed_graph


CACHE_CHILD = textwrap.dedent("""
    import sys, time, hapflow as hf
    sim = hf.Simulation(hf.load(sys.argv[1]))
    stats = sim.program.run.stats
    print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
""")


def _children(tmp_path: Path, script: str, graph: hf.Graph):
    """``child(*args)``: the words ``script`` prints, run by a fresh Python on ``graph`` (saved
    to a file, its path the first argument, then ``args``); every child shares one cache."""
    graph_file = tmp_path / "graph.yaml"
    hf.save(graph, graph_file)
    env = {**os.environ, "HAPFLOW_CACHE_DIR": str(tmp_path / "cache")}

    def child(*args: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", script, str(graph_file), *args], env=env,
                              capture_output=True, text=True, check=True).stdout.split()
    return child


def _short_mixed() -> hf.Graph:
    g = mixed_graph()
    g.duration = 0.05
    return g


def test_second_process_loads_the_kernel_from_the_disk_cache(tmp_path):
    child = _children(tmp_path, CACHE_CHILD, mixed_graph())

    def counts():
        out = child()
        return int(out[0]), int(out[1])

    assert counts() == (0, 1)        # first process: compiled and stored
    assert counts() == (1, 0)        # second process: machine code loaded from disk
    assert len(list((tmp_path / "cache").glob("hf_*.py"))) == 1


INIT_CHILD = textwrap.dedent("""
    import sys, hapflow as hf
    sim = hf.Simulation(hf.load(sys.argv[1]))
    init_all = vars(sys.modules[sim.program.path.stem])["init_all"]
    print(sim.program.from_cache, len(init_all.signatures), repr(sim.run()["lp.y"].sum()))
""")


def test_a_warm_start_loads_run_alone_which_holds_the_code_of_init_all(tmp_path):
    """numba parses all the code a cached function links in: ``init_all`` loaded apart
    parsed its outputs phase a second time."""
    child = _children(tmp_path, INIT_CHILD, _short_mixed())
    cold, warm = child(), child()
    assert cold[:2] == ["False", "1"]         # compiled: run compiles init_all, its callee
    assert warm[:2] == ["True", "0"]          # loaded: run alone, init_all never called
    assert warm[2] == cold[2] == repr(hf.Simulation(_short_mixed()).run()["lp.y"].sum())


ENTRY_CHILD = textwrap.dedent("""
    import sys, numpy as np, hapflow as hf
    from hapflow.batch import Batch
    sim = hf.Simulation(hf.load(sys.argv[1]))
    library = next(iter(sim.program.run.overloads.values())).library
    code = [f for f in library._get_module_for_linking().functions if len(list(f.blocks)) > 1]
    print(sim.program.from_cache, len(code))
    if sys.argv[2:] == ["batch"]:         # its kernel compiled here, linking run's code
        one = sim.run()["lp.y"]
        rows = Batch(sim, parallel=False, layout="rows").run([{}, {}], [3, 3])
        print(all(np.array_equal(r.signals["lp.y"], one) for r in rows))
""")


def test_a_warm_start_parses_no_code_linked_into_run_and_a_batch_still_links_it(tmp_path):
    """A warm start loads ``run`` with a symbol table for bitcode (``hapflow.jit.EntryCache``);
    the rows batch, whose code links ``run``'s, loads it whole, in a process that never
    compiled it."""
    child = _children(tmp_path, ENTRY_CHILD, _short_mixed())
    cold = child()
    assert cold[0] == "False" and int(cold[1]) > 0         # compiled here: the code itself
    assert child("batch") == ["True", "0", "True"]


def test_kernel_name_follows_a_change_in_a_module_its_kernels_call(tmp_path, monkeypatch):
    """A stale cache must not survive an edit of a helper module a kernel calls (transitively)."""
    from hapflow import compiler
    (tmp_path / "hf_dep_leaf.py").write_text(
        "from numba import njit\n@njit\ndef leaf(x):\n    return 2.0 * x\n")
    (tmp_path / "hf_dep_kernel.py").write_text(
        "from numba import njit\nfrom hf_dep_leaf import leaf\n"
        "@njit\ndef kernel(x):\n    return leaf(x) + 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import hf_dep_kernel
    before = compiler._dependency_texts([hf_dep_kernel.kernel])
    assert len(before) == 2                                    # the kernel's module and the leaf's
    (tmp_path / "hf_dep_leaf.py").write_text(
        "from numba import njit\n@njit\ndef leaf(x):\n    return 3.0 * x\n")
    assert compiler._dependency_texts([hf_dep_kernel.kernel]) != before


def test_a_module_edited_after_import_is_named_by_the_code_this_process_runs(tmp_path,
                                                                            monkeypatch):
    """A process that imported a kernel module before the file was edited must not store its
    (old) kernel under the name a fresh process gives the new text."""
    from hapflow import compiler
    module = ("from numba import njit\n@njit\ndef kernel(x):\n    return 2.0 * x\n"
              "class Block:\n    @staticmethod\n    @njit\n    def output(x):\n"
              "        return {} * x\n")
    (tmp_path / "hf_edited.py").write_text(module.format(4.0))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(compiler, "_STARTED_NS", 0)      # as if imported before any edit
    # no bytecode: the edit below keeps the size and may fall in the same second as the
    # import, which a .pyc cannot tell apart, and the reload would run the old code
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    import hf_edited
    (tmp_path / "hf_edited.py").write_text(module.format(5.0))   # a block's kernel edited
    in_this_process = compiler._dependency_texts([hf_edited.kernel])
    fresh = subprocess.run(
        [sys.executable, "-c", "import hf_edited\nfrom hapflow import compiler\n"
         "print(repr(sorted(compiler._dependency_texts([hf_edited.kernel]))))"],
        env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True,
        check=True).stdout
    assert repr(sorted(in_this_process)) + "\n" != fresh
    assert (tmp_path / "hf_edited.py").read_text() in eval(fresh)   # fresh: the file's text
    loaded = compiler._loaded_code_digest(str(tmp_path / "hf_edited.py"))
    importlib.reload(hf_edited)                          # now runs the edited kernel
    assert compiler._loaded_code_digest(str(tmp_path / "hf_edited.py")) != loaded


def test_a_generated_module_runs_its_kept_code_only_for_the_text_it_was_compiled_from(
        tmp_path, monkeypatch):
    from hapflow import compiler
    monkeypatch.setenv("HAPFLOW_CACHE_DIR", str(tmp_path))
    assert compiler.load_module("hm_kept", "VALUE = 1\n", {}).VALUE == 1
    assert len(list(tmp_path.glob("hm_kept.py.*.code"))) == 1

    def no_compile(*args):
        raise AssertionError("compiled the text again")

    # a fresh process (the module not loaded yet) runs the kept code
    monkeypatch.delitem(sys.modules, "hm_kept")
    with monkeypatch.context() as patched:
        patched.setattr(compiler, "compile", no_compile, raising=False)
        assert compiler.load_module("hm_kept", "VALUE = 1\n", {}).VALUE == 1
    # another text under that name runs as written, not as the code kept for the first
    monkeypatch.delitem(sys.modules, "hm_kept")
    assert compiler.load_module("hm_kept", "VALUE = 2\n", {}).VALUE == 2


HELPER_CHILD = textwrap.dedent("""
    import hf_cached_caller, hf_cached_leaf
    from hapflow import compiler
    compiler.cache_helpers()
    caller, leaf = hf_cached_caller.twice_leaf, hf_cached_leaf.leaf
    print(caller(1.0), leaf(1.0), sum(caller.stats.cache_hits.values()),
          sum(leaf.stats.cache_hits.values()))
""")


def test_helpers_are_cached_on_disk_and_renewed_by_an_edit_of_any_file_they_call(tmp_path):
    """The next process loads a helper's machine code from disk, also that of a helper
    calling another file's helper; an edit of the callee's file compiles both again
    (numba's own cache would keep running the old callee inside the caller's code)."""
    leaf = tmp_path / "hf_cached_leaf.py"
    leaf.write_text("from hapflow.jit import njit_noalloc\n"
                    "@njit_noalloc\ndef leaf(x):\n    return 2.0 * x\n")
    (tmp_path / "hf_cached_caller.py").write_text(
        "from hapflow.jit import njit_noalloc\nfrom hf_cached_leaf import leaf\n"
        "@njit_noalloc\ndef twice_leaf(x):\n    return 2.0 * leaf(x)\n")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    env.pop("NUMBA_CACHE_DIR", None)             # numba's cache beside the files in tmp_path

    def child():
        return subprocess.run([sys.executable, "-c", HELPER_CHILD], env=env, cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout.split()

    assert child() == ["4.0", "2.0", "0", "0"]
    assert child() == ["4.0", "2.0", "1", "1"]       # both from disk
    edit(leaf, leaf.read_text().replace("2.0", "3.0"))
    assert child() == ["6.0", "3.0", "0", "0"]
    assert child() == ["6.0", "3.0", "1", "1"]


class _GcWatch(MassSpringDamper, register=False):
    """A mass-spring-damper noting whether automatic garbage collection is on when the
    engine reads its kernels (checking, scheduling or generating the graph) and its initial
    state (right before the kernel's first calls, which compile or load machine code)."""

    seen: list[tuple[str, bool]] = []

    def kernels(self):
        _GcWatch.seen.append(("kernels", gc.isenabled()))
        return super().kernels()

    def initial_state(self):
        _GcWatch.seen.append(("initial_state", gc.isenabled()))
        return super().initial_state()


def test_a_warm_start_loads_with_collections_paused_and_a_compile_runs_with_them_on(
        tmp_path, monkeypatch):
    """Loading makes long-lived objects and next to no garbage, so full collections there
    only walk the heap; a compile leaves garbage that must be freed as it goes."""
    monkeypatch.setenv("HAPFLOW_CACHE_DIR", str(tmp_path / "cache"))     # cold, then warm
    g = hf.Graph(rate=1000, duration=0.01)
    g.add("push", Constant(value=0.5, unit="N"))
    g.add("msd", _GcWatch(mass=1.0, stiffness=100.0, x0=0.01))
    g.wire("push.y -> msd.force")
    g.record("msd.pos")
    _GcWatch.seen.clear()
    cold = hf.Simulation(g)
    assert not cold.program.from_cache
    assert ("kernels", True) in _GcWatch.seen and ("initial_state", True) in _GcWatch.seen
    _GcWatch.seen.clear()
    warm = hf.Simulation(g)
    assert warm.program.from_cache
    assert ("initial_state", False) in _GcWatch.seen
    assert not any(on for _, on in _GcWatch.seen), _GcWatch.seen
    assert gc.isenabled()
    np.testing.assert_array_equal(warm.run()["msd.pos"], cold.run()["msd.pos"])


def test_llvm_remarks_written_while_the_lanes_kernel_compiles_are_dropped(capfd):
    """LLVM writes its remarks to file descriptor 2 itself (a forced vector width on a loop
    that stays scalar); other output there, Python's too, comes through."""
    from hapflow import compiler
    with compiler._without_llvm_remarks():
        os.write(2, b"remark: <unknown>:0:0: loop not vectorized: call instruction\n")
        os.write(2, b"warning: kept\n")
        print("from python", file=sys.stderr)
    assert sorted(capfd.readouterr().err.splitlines()) == ["from python", "warning: kept"]
