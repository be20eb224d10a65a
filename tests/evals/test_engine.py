"""Whole-engine checks: compiled vs interpreted, allocation, round trip, determinism, crash safety."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import h5py
import numpy as np
from numba import njit
from numba.core.runtime import _nrt_python, rtsys

import hapflow as hf
from hapflow.blocks import (Chirp, Gain, Integrator, MassSpringDamper, Saturation, Sum,
                            TransferFunction, UnitDelay)
from hapflow.ports import In, Out


def mixed_graph():
    """8 blocks, two rates (1 kHz and 250 Hz), continuous and discrete state, a feedback loop."""
    g = hf.Graph(name="mixed", rate=1000, duration=2.0, seed=3)
    g.add("drive", Chirp(amplitude=1.5, f_start=0.5, f_end=6.0, sweep_time=2.0, unit="N"))
    g.add("err", Sum(signs="+-"))
    g.add("plant", MassSpringDamper(mass=0.5, damping=0.8, stiffness=200.0))
    g.add("fb", Gain(gain=40.0, unit="N"), rate=250)
    g.add("lp", TransferFunction(num=[0.1, 0.1], den=[1.0, -0.8]), rate=250, offset=1)
    g.add("delay", UnitDelay())
    g.add("sat", Saturation(lower=-0.01, upper=0.01))
    g.add("area", Integrator(unit="m s"))
    g.wire("drive.y -> err.u1")
    g.wire("fb.y -> err.u2")
    g.wire("err.y -> plant.force")
    g.wire("plant.pos -> fb.u")
    g.wire("plant.pos -> lp.u")
    g.wire("lp.y -> delay.u")
    g.wire("delay.y -> sat.u")
    g.wire("sat.y -> area.u")
    g.record("plant.pos", "plant.acc", "lp.y", "delay.y", "sat.y", "area.y", "err.y")
    return g


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


class Allocating(hf.Block):
    """Test block whose output kernel allocates a temporary array every call (negative control).

    Ports
    -----
    u : in, (1,), any unit
    y : out, (1,), any unit
    """

    inputs = {"u": In(1)}
    outputs = {"y": Out(1)}

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        tmp = np.ones(3)
        y[0] = u[0] * tmp.sum()


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


def test_python_graph_round_trips_through_yaml(tmp_path):
    g = mixed_graph()
    path = tmp_path / "mixed.yaml"
    hf.save(g, path)
    loaded = hf.load(path)
    a = hf.Simulation(g).run(1.0)
    b = hf.Simulation(loaded).run(1.0)
    for name in a.signals:
        assert np.array_equal(a[name], b[name]), name
    assert hf.to_yaml(loaded) == hf.to_yaml(g)


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


CHILD = textwrap.dedent("""
    import sys, hapflow as hf
    sim = hf.Simulation(hf.load(sys.argv[1]), interpret=True, chunk=0.05)
    sim.run(duration=1000.0, out=sys.argv[2],
            on_chunk=lambda t, cols: print(len(t) and round(t[-1] * 1000) + 1, flush=True))
""")


def test_run_killed_with_sigkill_leaves_readable_file_with_completed_chunks(tmp_path, spawn):
    graph_file = tmp_path / "mixed.yaml"
    hf.save(mixed_graph(), graph_file)
    out = tmp_path / "killed.h5"
    child = spawn([sys.executable, "-c", CHILD, str(graph_file), str(out)],
                  stdout=subprocess.PIPE, text=True)
    printed = []
    deadline = time.time() + 120
    while len(printed) < 4 and time.time() < deadline:
        printed.append(int(child.stdout.readline()))
    os.kill(child.pid, signal.SIGKILL)
    rest = child.stdout.read().split()
    child.wait()
    printed += [int(v) for v in rest]
    assert len(printed) >= 4
    rec = hf.recorder.load(out)
    n = len(rec.time)
    assert n >= printed[-1] and n % 50 == 0
    assert rec.attrs["complete"] == False and rec.attrs["ticks"] == n  # noqa: E712
    reference = hf.Simulation(mixed_graph()).run(n / 1000.0)
    for name in reference.signals:
        assert np.array_equal(rec[name], reference[name]), name


def test_blocks_without_unit_round_trip_through_yaml():
    g = hf.Graph(rate=100)
    g.add("c", hf.blocks.Constant(value=[1.0, 2.0]))
    g.add("s", hf.blocks.Step(time=0.05))
    g.record("c.y", "s.y")
    loaded = hf.loads(hf.to_yaml(g))
    assert loaded.nodes["c"].block.unit is None and loaded.nodes["c"].block.value == (1.0, 2.0)
    assert hf.to_yaml(loaded) == hf.to_yaml(g)


def test_sum_inputs_must_share_a_unit():
    g = hf.Graph(rate=100)
    g.add("f", hf.blocks.Constant(value=1.0, unit="N"))
    g.add("x", hf.blocks.Constant(value=1.0, unit="m"))
    g.add("s", Sum(signs="+-"))
    g.wire("f.y -> s.u1")
    g.wire("x.y -> s.u2")
    try:
        g.check()
    except hf.GraphError as err:
        assert "'m'" in str(err) and "expects 'N' (the unit of s.u1)" in str(err)
    else:
        raise AssertionError("a sum of N and m was accepted")


CACHE_CHILD = textwrap.dedent("""
    import sys, time, hapflow as hf
    sim = hf.Simulation(hf.load(sys.argv[1]))
    stats = sim.program.run.stats
    print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
""")


def test_second_process_loads_the_kernel_from_the_disk_cache(tmp_path):
    graph_file = tmp_path / "mixed.yaml"
    hf.save(mixed_graph(), graph_file)
    env = {**os.environ, "HAPFLOW_CACHE_DIR": str(tmp_path / "cache")}

    def counts():
        out = subprocess.run([sys.executable, "-c", CACHE_CHILD, str(graph_file)], env=env,
                             capture_output=True, text=True, check=True).stdout.split()
        return int(out[0]), int(out[1])

    assert counts() == (0, 1)        # first process: compiled and stored
    assert counts() == (1, 0)        # second process: machine code loaded from disk
    assert len(list((tmp_path / "cache").glob("hf_*.py"))) == 1


def test_importing_the_block_library_stays_light():
    """Design-time maths (scipy.signal) is imported when a block is built, not with the library."""
    code = "import sys, hapflow.blocks; print(sorted(m for m in ('scipy.signal', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


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
