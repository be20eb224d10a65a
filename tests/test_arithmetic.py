"""Memoryless arithmetic (blocks/arithmetic.py): Gain, Sum, Product, Saturation.

Inputs are random tables replayed tick by tick by a test-only source, so the
expected outputs are plain numpy expressions of the same numbers.  One graph
holds every case so that it is compiled once.
"""
from __future__ import annotations

import numpy as np
import pytest

import hapflow
from tests.helpers import table
from hapflow.block import ParamError
from hapflow.blocks.arithmetic import Gain, Product, Saturation, Sum
from hapflow.blocks.mechanical import MassSpringDamper
from hapflow.blocks.sources import Constant, Sine

RATE = 1000.0
N = 400
rng = np.random.default_rng(20240601)
P1, P2, P3 = (rng.uniform(-2.0, 2.0, (N, 3)) for _ in range(3))
Q = rng.uniform(0.5, 2.0, (N, 3)) * rng.choice([-1.0, 1.0], (N, 3))
SINE = dict(amplitude=3.0, frequency=5.0, phase=0.2)


def _graph() -> hapflow.Graph:
    g = hapflow.Graph(name="test_arithmetic", rate=RATE, duration=N / RATE)
    for name, values in (("p1", P1), ("p2", P2), ("p3", P3), ("q", Q)):
        g.add(name, table(values))
    g.add("sine", Sine(**SINE, unit="m"))
    g.add("gain", Gain(gain=-2.5))
    g.add("gain3", Gain(gain=0.3, size=3))
    g.add("sum", Sum(signs="+-+", size=3))
    g.add("sum2", Sum())
    g.add("prod", Product(ops="*/", size=3))
    g.add("prod2", Product())
    g.add("sat", Saturation(lower=-1.0, upper=0.5, size=3))
    g.add("sat1", Saturation(lower=-1.5, upper=2.0))
    g.wire("sine.y -> gain.u")
    g.wire("p1.y -> gain3.u")
    g.wire("p1.y -> sum.u1")
    g.wire("p2.y -> sum.u2")
    g.wire("p3.y -> sum.u3")
    g.wire("sine.y -> sum2.u1")
    g.wire("gain.y -> sum2.u2")
    g.wire("p2.y -> prod.u1")
    g.wire("q.y -> prod.u2")
    g.wire("sine.y -> prod2.u1")
    g.wire("sine.dy -> prod2.u2")
    g.wire("p3.y -> sat.u")
    g.wire("sine.y -> sat1.u")
    g.record("sine.y", "sine.dy", "gain.y", "gain3.y", "sum.y", "sum2.y", "prod.y", "prod2.y",
             "sat.y", "sat1.y")
    return g


@pytest.fixture(scope="module")
def graph():
    return _graph()


@pytest.fixture(scope="module")
def run(graph):
    return hapflow.Simulation(graph).run()


def _sine(t):
    return SINE["amplitude"] * np.sin(2 * np.pi * SINE["frequency"] * t + SINE["phase"])


def test_table_source_replays_its_rows(run):
    # the test source itself: sum.y - p2 + ... relies on it, so check it is exact
    assert run.time.size == N
    np.testing.assert_allclose(run.signals["sine.y"][:, 0], _sine(run.time), rtol=0, atol=1e-13)


def test_compiled_and_interpreted_are_bit_identical(graph, run):
    short = hapflow.Simulation(graph, interpret=True).run(0.05)
    n = short.time.size
    assert n == 50
    for key, values in short.signals.items():
        assert np.array_equal(values, run.signals[key][:n]), key


# ---------------------------------------------------------------- Gain
def test_gain_scalar_and_vector(run):
    np.testing.assert_allclose(run.signals["gain.y"][:, 0], -2.5 * _sine(run.time),
                               rtol=0, atol=1e-12)
    assert run.signals["gain3.y"].shape == (N, 3)
    assert np.array_equal(run.signals["gain3.y"], 0.3 * P1)


def test_gain_is_live(graph):
    sim = hapflow.Simulation(graph)
    sim.run(0.01)
    sim.set("gain3.gain", -4.0)
    r = sim.run(0.01)
    assert np.array_equal(r.signals["gain3.y"], -4.0 * P1[10:20])
    graph.nodes["gain3"].block.set("gain", 0.3)


def _gain_into_force(gain: Gain) -> hapflow.Graph:
    g = hapflow.Graph()
    g.add("s", Sine(unit="m"))
    g.add("k", gain)
    g.add("msd", MassSpringDamper())
    g.wire("s.y -> k.u")
    g.wire("k.y -> msd.force")
    return g


def test_gain_unit_follows_input_unless_given():
    with pytest.raises(hapflow.GraphError, match="unit mismatch.*'m'.*'N'"):
        _gain_into_force(Gain(gain=100.0)).check()
    assert _gain_into_force(Gain(gain=100.0, unit="N")).check().units[("k", "y")] == "N"


# ---------------------------------------------------------------- Sum
def test_sum_signs_vector(run):
    assert run.signals["sum.y"].shape == (N, 3)
    np.testing.assert_allclose(run.signals["sum.y"], P1 - P2 + P3, rtol=0, atol=1e-15)


def test_sum_default_adds_two(run):
    np.testing.assert_allclose(run.signals["sum2.y"][:, 0], (1 - 2.5) * _sine(run.time),
                               rtol=0, atol=1e-12)


def test_sum_ports_and_unit():
    s = Sum(signs="+--+", size=2)
    assert list(s.inputs) == ["u1", "u2", "u3", "u4"]
    assert all(p.shape == (2,) for p in s.inputs.values())
    g = hapflow.Graph()
    g.add("a", Constant(value=[1.0], unit="N"))
    g.add("b", Constant(value=[2.0], unit="N"))
    g.add("s", Sum(signs="-+"))
    g.wire("a.y -> s.u1")
    g.wire("b.y -> s.u2")
    assert g.check().units[("s", "y")] == "N"


@pytest.mark.parametrize("signs", ["", "+*", "+ -", "plus"])
def test_sum_rejects_bad_signs(signs):
    with pytest.raises(ParamError, match="signs"):
        Sum(signs=signs)


def test_sum_feeding_itself_is_an_algebraic_loop():
    g = hapflow.Graph()
    g.add("c", Constant(value=[1.0]))
    g.add("s", Sum())
    g.add("k", Gain(gain=0.5))
    g.wire("c.y -> s.u1")
    g.wire("k.y -> s.u2")
    g.wire("s.y -> k.u")
    with pytest.raises(hapflow.GraphError, match="algebraic loop") as info:
        g.check()
    assert "s.y is wired to k.u" in str(info.value)
    assert "UnitDelay" in str(info.value)


# ---------------------------------------------------------------- Product
def test_product_multiply_divide_vector(run):
    assert run.signals["prod.y"].shape == (N, 3)
    np.testing.assert_allclose(run.signals["prod.y"], P2 / Q, rtol=1e-15, atol=0)


def test_product_default_multiplies(run):
    t = run.time
    w = 2 * np.pi * SINE["frequency"]
    a = SINE["amplitude"]
    expect = a * np.sin(w * t + SINE["phase"]) * a * w * np.cos(w * t + SINE["phase"])
    np.testing.assert_allclose(run.signals["prod2.y"][:, 0], expect, rtol=0, atol=1e-10)


@pytest.mark.parametrize("ops", ["", "*-", "x"])
def test_product_rejects_bad_ops(ops):
    with pytest.raises(ParamError, match="ops"):
        Product(ops=ops)


# ---------------------------------------------------------------- Saturation
def test_saturation_clips_vector(run):
    y = run.signals["sat.y"]
    assert np.array_equal(y, np.clip(P3, -1.0, 0.5))
    # the random input does exceed both limits, and passes through between them
    assert (P3 < -1).any() and (P3 > 0.5).any() and ((P3 > -1) & (P3 < 0.5)).any()


def test_saturation_clips_sine(run):
    s = _sine(run.time)
    y = run.signals["sat1.y"][:, 0]
    np.testing.assert_allclose(y, np.clip(s, -1.5, 2.0), rtol=0, atol=1e-13)
    assert y.min() == -1.5 and y.max() == 2.0


def test_saturation_limits_are_live(graph):
    sim = hapflow.Simulation(graph)
    sim.set("sat.lower", -0.25)
    sim.set("sat.upper", 0.25)
    r = sim.run(0.02)
    assert np.array_equal(r.signals["sat.y"], np.clip(P3[:20], -0.25, 0.25))
    graph.nodes["sat"].block.set("lower", -1.0)
    graph.nodes["sat"].block.set("upper", 0.5)


def test_saturation_live_limits_cannot_cross(graph):
    sim = hapflow.Simulation(graph)
    with pytest.raises(hapflow.GraphError, match="'lower'.*must be <= 'upper'"):
        sim.set("sat.lower", 0.75)
    with pytest.raises(hapflow.GraphError, match="must be <= 'upper'"):
        sim.set("sat.upper", -1.5)
    block = graph.nodes["sat"].block
    assert (block.lower, block.upper) == (-1.0, 0.5)
    r = sim.run(0.01)
    assert np.array_equal(r.signals["sat.y"], np.clip(P3[:10], -1.0, 0.5))
    # moving both limits up works in the right order
    sim.set("sat.upper", 3.0)
    sim.set("sat.lower", 2.0)
    r = sim.run(0.01)
    assert np.array_equal(r.signals["sat.y"], np.clip(P3[10:20], 2.0, 3.0))
    block.set("lower", -1.0)
    block.set("upper", 0.5)


def test_saturation_equal_limits_allowed():
    s = Saturation(lower=0.5, upper=0.5)
    assert s.lower == s.upper == 0.5


def test_saturation_rejects_lower_above_upper():
    with pytest.raises(ParamError, match="lower") as info:
        Saturation(lower=1.0, upper=0.0)
    assert info.value.param == "lower"
    with pytest.raises(hapflow.GraphError, match="'lim'.*lower"):
        hapflow.loads("rate: 1000\nblocks:\n  lim: {type: Saturation, lower: 2, upper: 1}\n")
