"""Code generation as compile units: same bits as the reference, shared units, bounded size,
a readable source, and compile errors that name the block."""
import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import njit
from numba.core import event

import hapflow as hf
from hapflow.block import Block
from hapflow.compiler import compile_graph
from hapflow.layout import float_bases
from hapflow.partition import cut
from hapflow.ports import Out
from tests.helpers import Allocating, mixed_graph

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = sorted(p for p in ROOT.glob("graphs/*.yaml"))


def _families():
    spec = importlib.util.spec_from_file_location("families", ROOT / "bench" / "families.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


families = _families()


def _same(a: hf.RunResult, b: hf.RunResult) -> None:
    assert set(a.signals) == set(b.signals)
    for name in a.signals:
        assert np.array_equal(a[name], b[name], equal_nan=True), name


class _Compiles(event.Listener):
    """Names of the compile units numba compiles while it is installed."""

    def __init__(self):
        self.units: list[str] = []

    def on_start(self, ev):
        pass

    def on_end(self, ev):
        module = ev.data["dispatcher"].py_func.__module__
        if module.startswith("hu_"):
            self.units.append(module)


def _compiled_units(build) -> list[str]:
    listener = _Compiles()
    with event.install_listener("numba:compile", listener):
        build()
    return listener.units


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.name)
def test_every_graph_file_runs_as_units_bit_identical_to_the_interpreter(path, tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)                  # sinks write their files here
    units = hf.Simulation(hf.load(path), mode="units")
    reference = hf.Simulation(hf.load(path), interpret=True, mode="units")
    assert units.program.mode == "units" and units.program.units
    _same(units.run(0.02, progress=False), reference.run(0.02, progress=False))


def test_every_library_block_runs_as_units_bit_identical_to_the_interpreter():
    graph = families.distinct(100, seed=1)
    types = {type(node.block).__name__ for node in graph.nodes.values()}
    assert types >= set(families.eligible_types())
    compiled = hf.Simulation(graph, mode="units").run(0.02, progress=False)
    interpreted = hf.Simulation(families.distinct(100, seed=1), interpret=True,
                                mode="units").run(0.02, progress=False)
    _same(compiled, interpreted)
    assert any(np.ptp(values) > 0 for values in compiled.signals.values())


def test_units_fused_and_interpreted_agree_on_a_multirate_feedback_graph():
    fused = hf.Simulation(families.replicated(20), mode="fused").run(0.25, progress=False)
    units = hf.Simulation(families.replicated(20), mode="units").run(0.25, progress=False)
    _same(fused, units)
    assert np.ptp(units["c1_plant.pos"]) > 1e-4


def test_replicated_subsystems_share_units_and_a_bigger_graph_adds_almost_none():
    small = compile_graph(families.replicated(60), mode="units", interpret=True)
    calls = sum(1 for line in small.source.splitlines() if line.strip().startswith("hu_"))
    assert calls >= 2 * len(small.units) - 2        # copies call the same units
    big = compile_graph(families.replicated(120), mode="units", interpret=True)
    assert len(set(big.units) - set(small.units)) <= 3      # a few cut differently at most


def test_a_unit_is_compiled_once_per_process_and_shared_between_graphs():
    first = compile_graph(families.replicated(60), mode="units")
    again = _compiled_units(lambda: compile_graph(families.replicated(60), mode="units"))
    assert again == []
    second = compile_graph(families.replicated(120), mode="units")
    shared = set(first.units) & set(second.units)
    assert shared
    for name in shared:
        assert first.run.py_func.__globals__[name] is second.run.py_func.__globals__[name]


def test_an_edit_changes_only_the_units_that_hold_the_edited_block():
    base = compile_graph(families.replicated(60), mode="units", interpret=True)
    edited = families.replicated(60)
    edited.nodes["c2_filt"].block = type(edited.nodes["c2_filt"].block)(
        num=[0.05, 0.05], den=[1.0, -0.9])            # another filter order: other code
    program = compile_graph(edited, mode="units", interpret=True)
    changed = [u for name, u in program.units.items() if name not in base.units]
    assert 1 <= len(changed) <= 4
    assert all("c2_filt" in u.blocks for u in changed)


def test_units_stay_within_their_line_budget():
    program = compile_graph(families.distinct(100, seed=2), mode="units", interpret=True)
    sizes = [len(u.source.splitlines()) for u in program.units.values()]
    assert max(sizes) < 400 and len(sizes) > 10


def test_cut_bounds_groups_and_repeats_a_period():
    period = ["a", "b", "c", "d", "e"]
    sites = period * 8
    groups = cut(sites, lambda s: 10, lambda s: s, max_lines=60)
    assert all(sum(10 for _ in g) <= 60 for g in groups)
    assert [s for g in groups for s in g] == sites
    assert len({tuple(g) for g in groups[1:-1]}) == 1         # every copy cut alike
    big = cut(["x", "y", "z"], lambda s: 100, lambda s: s, max_lines=60)
    assert big == [["x"], ["y"], ["z"]]                      # an oversized site stands alone


class OutputCalls(Block, register=False):
    """Test block counting the calls of its output kernel in its integer state: a side
    effect, like a random draw, that must happen as often in every mode.

    Ports
    -----
    y : out, (1,), any unit    calls so far
    """

    outputs = {"y": Out(1)}
    istate = 1

    @staticmethod
    @njit
    def output(t, x, d, m, p, y):
        m[0] += 1
        y[0] = m[0]


@pytest.mark.parametrize("interpret", [False, True], ids=["compiled", "interpreted"])
@pytest.mark.parametrize("mode", ["fused", "units"])
def test_init_all_runs_each_held_output_once_and_no_other_output(mode, interpret):
    g = hf.Graph(name="output_calls", rate=1000, duration=0.02)
    g.add("fast", OutputCalls())
    g.add("slow", OutputCalls(), rate=250, offset=2)       # held: hits at ticks 2, 6, 10 ...
    g.record("fast.y", "slow.y")
    result = hf.Simulation(g, mode=mode, interpret=interpret).run(0.02, progress=False)
    k = np.arange(20)
    assert np.array_equal(result["fast.y"].ravel(), k + 1)         # every tick, not at start
    assert np.array_equal(result["slow.y"].ravel(),                # at start, then its hits
                          1 + np.where(k >= 2, (k - 2) // 4 + 1, 0))


def _unit_calls(source: str) -> dict[str, set[str]]:
    """The compile units each function of a generated main module calls, by function name."""
    calls = {}
    for fn in ast.parse(source).body:
        if isinstance(fn, ast.FunctionDef):
            calls[fn.name] = {node.func.id for node in ast.walk(fn) if isinstance(node, ast.Call)
                              and isinstance(node.func, ast.Name)}
    return calls


def test_init_all_runs_the_held_outputs_with_the_units_of_the_tick():
    program = compile_graph(families.distinct(100, seed=2), mode="units", interpret=True)
    calls = _unit_calls(program.source)
    assert "ph_outputs" in calls["init_all"]
    outputs = [name for name, unit in program.units.items() if ".output\n" in unit.source]
    assert len(outputs) > 10
    tick = set().union(*(calls[f"ph_{phase}"] for phase in ("outputs", "chain")))
    assert set(outputs) <= tick             # no second copy of an output site to compile
    assert not any(unit.startswith("hu_") and unit in tick for unit in calls["ph_start"])



def test_init_kernels_are_pasted_into_init_all_like_the_ticks_kernels():
    # two filters of other sizes and offsets: their init kernels are closures over them,
    # each a compile of its own if called; pasted, both call the one shared helper
    program = compile_graph(hf.load(ROOT / "graphs" / "slider_crank_torque.yaml"),
                            interpret=True, mode="fused")
    init_all = next(fn for fn in ast.parse(program.source).body
                    if isinstance(fn, ast.FunctionDef) and fn.name == "init_all")
    called = [node.func.id for node in ast.walk(init_all)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
    assert called.count("g_init_from") >= 2
    assert not any(name.endswith("_init") for name in called)

def test_a_kernel_that_allocates_still_runs_in_units():
    g = mixed_graph()
    g.add("alloc", Allocating())
    g.wire("plant.pos -> alloc.u")
    g.record("alloc.y")
    a = hf.Simulation(g, mode="units").run(0.1, progress=False)
    g2 = mixed_graph()
    g2.add("alloc", Allocating())
    g2.wire("plant.pos -> alloc.u")
    g2.record("alloc.y")
    _same(a, hf.Simulation(g2, interpret=True).run(0.1, progress=False))


class Broken(hf.Block, register=False):
    """Output kernel that adds a string to a number.

    Ports
    -----
    u : in, (1,)
    y : out, (1,)
    """

    inputs = {"u": hf.In(1)}
    outputs = {"y": hf.Out(1)}

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        y[0] = u[0] + "text"


@pytest.mark.parametrize("mode", ["fused", "units"])
def test_a_kernel_that_does_not_compile_is_named(mode):
    g = mixed_graph()
    g.add("broken", Broken())
    g.wire("plant.pos -> broken.u")
    g.record("broken.y")
    with pytest.raises(hf.GraphError, match=r"kernels of block 'broken' \(Broken\) do not compile"):
        hf.Simulation(g, mode=mode)


def test_source_names_every_offset_and_event_field():
    program = compile_graph(hf.load(ROOT / "graphs" / "bouncing_ball.yaml"), interpret=True)
    head = program.source.split("def ")[0]
    y = float_bases(program.layout)["sf"] + program.layout.signals[("paddle", "y")].start
    assert f"#   {f'f[{y}]':<14} {'paddle.y':<28} [m]" in head
    omega = float_bases(program.layout)["p"] + program.layout.blocks["paddle"]["p"].start \
        + type(program.checked.graph.nodes["paddle"].block).P.omega
    assert f"#   {f'f[{omega}]':<14} {'paddle.p.omega':<28} [rad/s]" in head      # by name
    assert "ev[EV_J]" in program.source and "ev[8]" not in program.source


def _inliner_artefacts(source: str) -> list[str]:
    """Lines an inliner leaves and a person would not write: a loop of at most one trip over
    constant bounds, an inlined local set to integer constants, a wrap-around guard on a
    constant index."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) \
                and getattr(node.iter.func, "id", None) == "range" \
                and all(isinstance(a, ast.Constant) for a in node.iter.args) \
                and len(range(*(a.value for a in node.iter.args))) <= 1:
            found.append(ast.unparse(node).splitlines()[0])
        if isinstance(node, ast.Assign):
            names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            inlined = all(n.partition("_")[0][:1] == "c" and n.partition("_")[0][1:].isdigit()
                          for n in names)     # the inliner names a kernel's locals c<k>_<name>
            if inlined and all(isinstance(v, ast.Constant) and type(v.value) is int
                               for v in values):
                found.append(ast.unparse(node))
        if isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare) \
                and isinstance(node.test.ops[0], ast.Lt) \
                and not any(isinstance(n, ast.Name) for n in ast.walk(node.test.left)):
            found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("mode", ["fused", "units"])
def test_no_graph_file_leaves_inliner_artefacts_in_its_source(mode):
    for path in GRAPHS:
        program = compile_graph(hf.load(path), interpret=True, mode=mode)
        sources = [program.source] + [unit.source for unit in program.units.values()]
        assert [line for s in sources for line in _inliner_artefacts(s)] == [], path.name


SOURCE_CHILD = """
import sys
import numpy as np
import hapflow as hf
from hapflow import codegen
from tests.helpers import mixed_graph
if sys.argv[1] == "cached":
    codegen.Generator.build = None          # a warm start must not generate code
result = hf.Simulation(mixed_graph(), mode="units").run(0.5, progress=False)
np.save(sys.argv[2], result["plant.pos"])
"""


def test_a_warm_start_loads_the_generated_source_instead_of_generating_it(tmp_path):
    env = {**os.environ, "HAPFLOW_CACHE_DIR": str(tmp_path / "cache")}

    def child(kind: str) -> np.ndarray:
        out = tmp_path / f"{kind}.npy"
        subprocess.run([sys.executable, "-c", SOURCE_CHILD, kind, str(out)], cwd=ROOT, env=env,
                       check=True, capture_output=True, text=True)
        return np.load(out)

    first = child("fresh")
    assert list((tmp_path / "cache").glob("src_*.json"))
    assert np.array_equal(child("cached"), first)
    reference = hf.Simulation(mixed_graph(), interpret=True).run(0.5, progress=False)
    assert np.array_equal(first, reference["plant.pos"])


def test_units_compiled_by_child_processes_are_loaded_here_from_the_cache(tmp_path, monkeypatch):
    from hapflow import compiler

    def graph():
        g = families.replicated(20)
        filt = g.nodes["c1_filt"].block               # an order no other test compiles
        g.nodes["c1_filt"].block = type(filt)(num=[0.03, 0.03, 0.03], den=[1.0, -0.6, 0.08])
        g.nodes["c1_filt"].block.sample_time = filt.sample_time
        # and a tick offset no other test gives a PID: the units of its sites are new too,
        # so two of the units to compile share its helpers (a seed) whatever the other
        # tests of this process compiled before (init_all shares the tick's units)
        g.nodes["c0_pid"].offset = 1
        return g

    seeds = []

    def spy(units):
        chosen = real_seeds(units)
        seeds.extend(units[k].name for k in chosen)
        return chosen

    real_seeds = compiler._seeds
    monkeypatch.setattr(compiler, "_seeds", spy)
    monkeypatch.setattr(compiler, "CHILD_UNITS", 1)
    monkeypatch.setenv("HAPFLOW_CACHE_DIR", str(tmp_path))
    sims = []
    here = _compiled_units(lambda: sims.append(hf.Simulation(graph(), mode="units")))
    units = sims[0].program.units
    assert 0 < len(seeds) < len(units)
    assert sorted(m.split("_")[1] for m in here) == sorted(n.split("_")[1] for n in seeds)
    # the small units' code is in the phase functions (LLVM inlined it), also where the
    # unit came from a child through the disk cache; a big unit is called
    driver = sims[0].program.run.py_func.__globals__
    small = {n for n, u in units.items() if "\n@ijit\n" in u.source}
    assert small
    for phase in ("ph_outputs", "ph_updates", "ph_derivs"):
        llvm = "".join(driver[phase].inspect_llvm().values())
        called = {n for n in units if n in driver[phase].py_func.__code__.co_names}
        calls = "\n".join(line for line in llvm.splitlines() if " call " in line)
        assert called and all((name in calls) == (name not in small) for name in called), phase
    _same(sims[0].run(0.1, progress=False),       # the others compiled by the children
          hf.Simulation(graph(), interpret=True, mode="units").run(0.1, progress=False))
    # init_all and run call the outputs phase with the same argument types: compiled once
    compiled = {name: len(fn.signatures) for name, fn in driver.items() if name.startswith("ph_")}
    assert compiled["ph_outputs"] == 1 and set(compiled.values()) == {1}, compiled


def test_helpers_two_units_call_are_all_called_by_a_unit_compiled_before_the_children():
    from hapflow import compiler
    graph = families.distinct(100, seed=1)
    sources = list(hf.Simulation(graph, interpret=True, mode="units").program.units.values())
    reached = [compiler._unit_helpers(u) for u in sources]
    shared = {h for k, a in enumerate(reached) for b in reached[k + 1:] for h in a & b}
    assert shared                              # the Kalman steps, the filter sections ...
    seeds = compiler._seeds(sources)
    assert shared <= set().union(*(reached[k] for k in seeds))
    assert len(seeds) < len(sources) // 2


RECOMPILE_CHILD = """
import sys
from numba.core import event
import hapflow as hf
sys.path.insert(0, "bench")
import families
units = []

class Count(event.Listener):
    def on_start(self, ev):
        pass

    def on_end(self, ev):
        if ev.data["dispatcher"].py_func.__module__.startswith("hu_"):
            units.append(1)

with event.install_listener("numba:compile", Count()):
    hf.Simulation(families.replicated(60), mode="units")
print(len(units))
"""


def test_a_lost_numba_cache_recompiles_each_unit_once(tmp_path):
    """The warm path leaves units uncompiled; if numba's cache of ``run`` is gone, they are
    compiled for their one signature first, not once per literal offset a phase passes."""
    env = {**os.environ, "HAPFLOW_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NUMBA_CACHE_DIR", None)

    def compiles() -> int:
        done = subprocess.run([sys.executable, "-c", RECOMPILE_CHILD], cwd=ROOT, env=env,
                              check=True, capture_output=True, text=True)
        return int(done.stdout.split()[-1])

    first = compiles()
    assert first > 0
    assert compiles() == 0                          # warm: nothing compiled
    for folder in (tmp_path / "cache").glob("__pycache__"):
        for path in folder.iterdir():
            path.unlink()
    assert compiles() == first
