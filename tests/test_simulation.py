"""hapflow.simulation: compiled equals interpreted, multirate timing, no allocation per tick,
live parameters, determinism across processes."""
import os
import subprocess
import sys

import h5py
import numpy as np
from numba import njit
from numba.core.runtime import _nrt_python, rtsys

import hapflow as hf
from tests.helpers import Allocating, mixed_graph


def test_compiled_kernel_and_interpreter_are_bit_identical():
    compiled = hf.Simulation(mixed_graph()).run(1.0)
    interpreted = hf.Simulation(mixed_graph(), interpret=True).run(1.0)
    assert set(compiled.signals) == set(interpreted.signals)
    for name in compiled.signals:
        assert np.array_equal(compiled[name], interpreted[name]), name
    assert np.ptp(compiled["plant.pos"]) > 1e-3      # something happened
    assert np.any(compiled["sat.y"] != compiled["delay.y"])  # saturation was active


def test_multirate_hold_and_offset():
    r = hf.Simulation(mixed_graph()).run(0.1)
    lp = r["lp.y"][:, 0]
    # lp runs every 4th tick starting at tick 1: it holds its value in between
    changes = np.flatnonzero(np.diff(lp)) + 1
    assert len(changes) > 5 and np.all(changes % 4 == 1)


def _allocations(sim, n):
    _nrt_python.memsys_enable_stats()
    before = rtsys.get_allocation_stats()
    sim.advance(n)
    after = rtsys.get_allocation_stats()
    return after.alloc - before.alloc


def test_no_heap_allocation_inside_ticks():
    sim = hf.Simulation(mixed_graph())
    assert _allocations(sim, 1) == _allocations(sim, 1000)
    # the measurement does see allocations when a kernel makes them
    g = mixed_graph()
    g.add("alloc", Allocating())
    g.wire("plant.pos -> alloc.u")
    g.record("alloc.y")
    bad = hf.Simulation(g)
    assert _allocations(bad, 1000) - _allocations(bad, 1) >= 999


def test_live_parameter_change_between_chunks_without_recompiling():
    sim = hf.Simulation(mixed_graph())
    run = sim.program.run
    first = sim.run(0.5)
    sim.set("drive.amplitude", 0.0)
    sim.set("fb.gain", 0.0)
    second = sim.run(0.5)
    assert sim.program.run is run
    # with no drive and no feedback the plant is a free damped oscillator: energy decays
    acc = second["plant.acc"][:, 0]
    assert np.all(second["err.y"] == 0.0)
    assert np.max(np.abs(acc[-100:])) < np.max(np.abs(acc[:100]))
    assert np.ptp(first["err.y"]) > 0


def _run_in_subprocess(graph_file, out):
    code = f"import hapflow as hf; hf.Simulation(hf.load({str(graph_file)!r})).run(out={str(out)!r})"
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())


def test_same_graph_and_seed_in_two_processes_give_identical_files(tmp_path):
    graph_file = tmp_path / "mixed.yaml"
    hf.save(mixed_graph(), graph_file)
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    _run_in_subprocess(graph_file, a)
    _run_in_subprocess(graph_file, b)
    with h5py.File(a) as fa, h5py.File(b) as fb:
        assert dict(fa.attrs) .keys() == dict(fb.attrs).keys()
        for key in fa.attrs:
            assert np.array_equal(fa.attrs[key], fb.attrs[key]), key
        assert np.array_equal(fa["time"][()], fb["time"][()])
        for name in fa["signals"]:
            assert np.array_equal(fa["signals"][name][()], fb["signals"][name][()]), name
        assert fa.attrs["complete"] and fa.attrs["ticks"] == 2000


def test_set_and_reset_leave_the_given_graph_as_it_was():
    graph = mixed_graph()
    amplitude, seed = graph.nodes["drive"].block.amplitude, graph.seed
    sim = hf.Simulation(graph)
    sim.set("drive.amplitude", 2.5 * amplitude)
    sim.reset(seed=seed + 7)
    assert graph.nodes["drive"].block.amplitude == amplitude and graph.seed == seed
    assert sim.graph.nodes["drive"].block.amplitude == 2.5 * amplitude and sim.graph.seed == seed + 7
    # the simulation runs with its own values, the given graph with its own
    changed = mixed_graph()
    changed.nodes["drive"].block.set("amplitude", 2.5 * amplitude)
    changed.seed = seed + 7
    run = sim.run(0.05)["plant.pos"]
    assert np.array_equal(run, hf.Simulation(changed).run(0.05)["plant.pos"])
    assert not np.allclose(run, hf.Simulation(graph).run(0.05)["plant.pos"])


def test_a_run_kept_in_memory_gives_the_times_of_its_own_ticks():
    """The times are made when read, from the run's first tick: a run that goes on from
    tick 100 starts at 0.1 s, and reading them twice gives the same array."""
    sim = hf.Simulation(mixed_graph())
    first, second = sim.run(0.1), sim.run(0.2)
    np.testing.assert_array_equal(first.time, np.arange(0, 100) / 1000.0)
    np.testing.assert_array_equal(second.time, np.arange(100, 300) / 1000.0)
    assert second.time is second.time and len(second["plant.pos"]) == 200


def test_a_run_recorded_to_a_file_gives_its_time_and_signals_from_the_file(tmp_path):
    sim = hf.Simulation(mixed_graph())
    memory = sim.run(0.1)
    to_file = sim.run(0.1, out=tmp_path / "r.h5")           # ticks 100 .. 199
    np.testing.assert_array_equal(to_file.time, np.arange(100, 200) / 1000.0)
    assert set(to_file.signals) == set(memory.signals)
    with h5py.File(tmp_path / "r.h5") as f:
        for name, values in to_file.signals.items():
            assert np.array_equal(values, f["signals"][name][()]), name


def test_a_run_to_a_file_in_chunks_records_what_the_same_run_keeps_in_memory(tmp_path):
    """Each chunk's log rows are split into signals by the writer thread while the next chunk
    runs: every chunk must keep rows of its own, not the buffer the next chunk overwrites."""
    graph = mixed_graph()
    memory = hf.Simulation(graph, chunk=0.01).run(0.095, progress=False)
    hf.Simulation(graph, chunk=0.01).run(0.095, out=tmp_path / "r.h5", progress=False)
    recording = hf.recorder.load(tmp_path / "r.h5")
    np.testing.assert_array_equal(recording.time, memory.time)
    assert set(recording.signals) == set(memory.signals)
    for name, values in memory.signals.items():
        assert recording[name].dtype == values.dtype, name
        np.testing.assert_array_equal(recording[name], values, err_msg=name)


class _Counted(hf.Block, register=False):
    """Test block: outputs a derived value and keeps each gain it was packed with.

    Ports
    -----
    y : out, (1,), any unit    twice the gain
    """

    outputs = {"y": hf.Out(1, depends="state", doc="twice the gain")}
    params = {"gain": hf.Live(2.0, doc="gain")}
    derived = {"twice": hf.Derived(lambda b: b.packs.append(b.gain) or 2.0 * b.gain,
                                   doc="twice the gain")}

    def configure(self) -> None:
        self.packs = []

    @staticmethod
    @njit
    def output(t, x, d, m, p, y):
        y[0] = p[COUNTED.twice]


COUNTED = _Counted.P


def test_a_block_is_packed_once_per_set_of_values():
    # the check, the layout, the simulation and a batch all read one packing
    from hapflow.batch import Filler
    from hapflow.layout import float_bases
    block = _Counted(gain=3.0)
    g = hf.Graph(name="packed_once", rate=100.0, duration=0.03)
    g.add("c", block)
    g.record("c.y")
    sim = hf.Simulation(g, interpret=True)
    assert block.packs == [3.0]
    np.testing.assert_array_equal(sim.run(0.03)["c.y"][:, 0], 6.0)
    sim.set("c.gain", 4.0)
    assert block.packs == [3.0, 4.0]
    rows, errors = Filler(sim).fill([{}, {"c.gain": 5.0}, {"c.gain": 5.0}], [0, 0, 0])
    assert errors == [None] * 3 and block.packs == [3.0, 4.0, 5.0]
    at = float_bases(sim.layout)["p"] + sim.layout.blocks["c"]["p"].start + COUNTED.twice
    assert rows["f"][:, at].tolist() == [8.0, 10.0, 10.0]
