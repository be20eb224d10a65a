"""The lanes kernel (hapflow/lanes.py, Generator with ``lanes``): every graph runs over lanes
with the bits of its single runs, including helpers on views, events and compile units."""
import ast
import math
from pathlib import Path

import numpy as np
import pytest

import hapflow as hf
from hapflow import batch
from hapflow.batch import Batch
from hapflow.codegen import Generator
from hapflow.lanes import Flat, Lanes, registers
from hapflow.layout import float_bases

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = sorted(ROOT.glob("graphs/*.yaml"))


def test_registers_are_loaded_when_a_tick_reads_them_first():
    body = ast.parse("\n".join(["f_3 = f_1 + 1.0",
                                "if (i - 0) % 4 == 0:",
                                "    f_5 = f_3",                # conditional: not a fresh value
                                "f_6 = f_6 + f_5",              # reads itself first
                                "f_7 += 1.0",
                                "f_8 = f_2 if t >= f_9 else f_8",
                                "f_10 = g(v)"])).body
    loads, stores, finals = registers(body)
    assert loads == ["f_1", "f_2", "f_5", "f_6", "f_7", "f_8", "f_9"]
    assert stores == ["f_5", "f_6", "f_7", "f_8"]       # carried and written: every tick
    assert finals == ["f_3", "f_10"]                     # computed afresh: after the last tick


def test_constant_elements_are_read_as_literals_and_written_as_ever():
    lanes = Lanes(4, 3, registers=True, memory=set(), constants={9: -0.0})
    read = lanes.element("f", 9, 1, ast.Constant(9), ast.Load())
    assert isinstance(read, ast.Constant) and math.copysign(1.0, read.value) == -1.0
    assert ast.unparse(lanes.element("f", 9, 1, ast.Constant(9), ast.Store())) == "f_9"
    units = Lanes(4, 3, registers=False, constants={9: 0.0})   # units are shared: no literals
    assert ast.unparse(units.element("f", 9, 1, ast.Constant(9), ast.Load())) == "F[36 + r]"


def test_a_view_of_constant_elements_is_a_module_constant():
    lanes = Lanes(4, 3, registers=True, memory=set(), constants={10: 2.5, 11: math.inf})
    assert lanes.view("f", 10, 2, ast.Constant(10), ast.Constant(12)) == "K_f_10_12"
    assert lanes.constant_views == {"K_f_10_12": (2.5, math.inf)} and not lanes.reached
    assert lanes.view("f", 10, 3, ast.Constant(10), ast.Constant(13)) == "F[40 + r:52 + r:4]"
    sim = hf.Simulation(hf.load(ROOT / "graphs" / "colton2005_sweep.yaml"), interpret=True,
                        mode="fused")             # the view is in the main module's text
    p = sim.program
    dev = sim.layout.blocks["dev"]["p"]
    start = float_bases(sim.layout)["p"] + dev.start
    values = {start + i: float(v) for i, v in enumerate(sim.arrays["f"][start:start + dev.size])}
    source = Generator(p.checked, p.schedule, p.layout, p.inline, p.mode, lanes=4,
                       constants=values).build().source
    name = f"K_f_{start}_{start + dev.size}"
    module = {"np": np}
    exec(next(line for line in source.splitlines() if line.startswith(f"{name} = ")), module)
    np.testing.assert_array_equal(module[name], list(values.values()))    # inf too
    assert f" = {name}" in source


def test_lane_addressing_keeps_what_views_reach_in_memory():
    probe = Lanes(4, 3, registers=True)
    view = probe.view("f", 10, 3, ast.Constant(10), ast.Constant(13))
    assert view == "F[40 + r:52 + r:4]" and probe.reached == {10, 11, 12}
    lanes = Lanes(4, 3, registers=True, memory=probe.reached)

    def element(array, index):
        return ast.unparse(lanes.element(array, 0, 20, ast.Constant(index), ast.Load()))
    assert element("f", 9) == "f_9" and element("f", 11) == "F[44 + r]"
    assert element("m", 2) == "M[8 + r]" and element("f", 0) == "f_0"
    computed = lanes.element("f", 14, 2, ast.parse("14 + j", mode="eval").body, ast.Load())
    assert ast.unparse(computed) == "F[(14 + j) * 4 + r]" and 15 in lanes.reached
    assert lanes.log(2) == "LOG[k * 12 + 8 + r]" and Flat().log(2) == "log[k, 2]"


def _same_runs(results: list, reference: list) -> None:
    for got, want in zip(results, reference):
        assert got.events == want.events and got.event_overflows == want.event_overflows
        for name in want.signals:
            np.testing.assert_array_equal(got.signals[name], want.signals[name], err_msg=name)


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.name)
def test_every_graph_file_runs_in_lanes_bit_identical_to_its_rows(path, monkeypatch):
    monkeypatch.setattr(batch, "WIDTH", 2)        # interpreted: two lanes are enough
    sim = hf.Simulation(hf.load(path), interpret=True)
    duration = 8 / sim.graph.rate
    seeds = [3, 4, 5]                               # two groups, the second one padded
    lanes = Batch(sim, parallel=False, layout="lanes").run([{}] * 3, seeds, duration)
    rows = Batch(sim, parallel=False, layout="rows").run([{}] * 3, seeds, duration)
    _same_runs(lanes, rows)


@pytest.mark.parametrize("drift", ["zero in every run", "zero in every other run"])
def test_helpers_on_views_run_compiled_in_lanes_bit_identical_to_single_runs(drift):
    """The head's drift is zero in every run of the graph file: the kernel reads it as a
    literal zero (and skips the drift's draws in every lane); where runs differ it may not."""
    path = ROOT / "graphs" / "colton2005_sweep.yaml"       # helpers take parameter views
    sim = hf.Simulation(hf.load(path))
    every_other = drift == "zero in every other run"
    settings = [{"pid.kp": 30000.0 + 1000.0 * j, "head.force_noise": 0.01 * j,
                 "head.force_drift": 0.05 * (j % 2) if every_other else 0.0}
                for j in range(batch.WIDTH + 2)]
    seeds = list(range(len(settings)))
    got = Batch(sim, parallel=False, layout="lanes").run(settings, seeds, 0.05)
    for j in (0, batch.WIDTH - 1, batch.WIDTH + 1):
        _same_runs([got[j]], [_single(path, settings[j], seeds[j], 0.05)])


def _single(path: Path, settings: dict, seed: int, duration: float):
    g = hf.load(path)
    g.seed = seed
    for key, value in settings.items():
        block, _, param = key.partition(".")
        g.nodes[block].block.set(param, value)
    return hf.Simulation(g).run(duration, progress=False)


def test_values_no_varied_parameter_reaches_are_literals_and_runs_stay_exact():
    """With ``varied``, the fixed values (the sweep's, the device's) are literals of the lanes
    kernel; PID values kp reaches are not, and neither are the values of a parameter the
    runs set although it is not declared varied (head.force_noise)."""
    path = ROOT / "graphs" / "colton2005_sweep.yaml"
    sim = hf.Simulation(hf.load(path))
    settings = [{"pid.kp": 30000.0 + 1000.0 * j, "head.force_noise": 0.01 * j}
                for j in range(batch.WIDTH + 2)]
    seeds = list(range(len(settings)))
    lanes = Batch(sim, parallel=False, layout="lanes", varied=["pid.kp"])
    got = lanes.run(settings, seeds, 0.05)
    for j in (0, batch.WIDTH - 1, batch.WIDTH + 1):
        _same_runs([got[j]], [_single(path, settings[j], seeds[j], 0.05)])
    p = float_bases(sim.layout)["p"]

    def at(block: str, field: str) -> int:
        start = sim.layout.blocks[block]["p"].start
        return p + start + next(a for name, a, _, _ in sim.layout.fields[(block, "p")]
                                if name == field)
    literal = {position for position, _ in list(lanes._lanes)[-1]}
    assert {at("traj", "amplitude"), at("dev", "friction"), at("pid", "ki")} <= literal
    assert not {at("pid", "kp"), at("head", "force_noise"), at("head", "force_std")} & literal


def test_compile_units_run_in_lanes_bit_identical_to_the_fused_kernel():
    path = ROOT / "graphs" / "bouncing_ball.yaml"         # events: a located reset per lane
    units = hf.Simulation(hf.load(path), mode="units")
    fused = hf.Simulation(hf.load(path), mode="fused")
    settings = [{}] * 3
    got = Batch(units, parallel=False, layout="lanes").run(settings, [1, 2, 3], 1.0)
    want = Batch(fused, parallel=False, layout="rows").run(settings, [1, 2, 3], 1.0)
    assert want[0].events > 0
    _same_runs(got, want)


@pytest.mark.parametrize("layout", ["rows", "lanes"])
def test_no_two_runs_of_a_batch_write_one_cache_line(layout, monkeypatch):
    """Every run (every group of lanes) gets rows of its own cache lines in the arrays the
    kernel writes each tick: the rig graph's one boolean and one integer of state per run
    put 64 and 8 runs on one line, and two threads took the line from each other."""
    monkeypatch.setattr(batch, "WIDTH", 2)
    sim = hf.Simulation(hf.load(ROOT / "graphs" / "colton2005_sweep.yaml"), interpret=True)
    b = Batch(sim, parallel=False, layout=layout)
    given, call = [], b._call

    def spy(n, arrays):                             # F, M, SI, SB, LOG, STATS
        given.append(arrays[:4] + arrays[5:])
        return call(n, arrays)
    monkeypatch.setattr(b, "_call", spy)
    got = b.run([{}] * 3, [1, 2, 3], 4 / sim.graph.rate)
    assert given and all(isinstance(r, hf.RunResult) for r in got)
    for arrays in given:
        for a in arrays:
            assert a.ctypes.data % batch.CACHE_LINE == 0 and a.strides[0] % batch.CACHE_LINE == 0
