"""Continuous-time blocks (blocks/continuous.py): Integrator.

Integrals of known inputs and small linear ODEs built from integrators are
checked against their closed-form solutions, to the accuracy of the global
RK4 solver at 1 kHz.
"""
from __future__ import annotations

import numpy as np
import pytest

import hapflow
from hapflow.block import ParamError
from hapflow.blocks.arithmetic import Gain
from hapflow.blocks.continuous import Integrator
from hapflow.blocks.sources import Constant, Sine
from hapflow.graph import feedthrough

RATE = 1000.0
DURATION = 1.0
SINE = dict(amplitude=1.5, frequency=2.0, phase=0.3, offset=0.2)
C2 = [1.5, -0.5]
W_OSC = 2 * np.pi * 2.0
DECAY = 3.0


def _graph() -> hapflow.Graph:
    g = hapflow.Graph(name="test_integrator", rate=RATE, duration=DURATION)
    g.add("sine", Sine(**SINE))
    g.add("int_s", Integrator(initial=-0.4))
    g.wire("sine.y -> int_s.u")
    # vector of two, with an initial value
    g.add("c2", Constant(value=C2))
    g.add("int2", Integrator(size=2, initial=0.25))
    g.wire("c2.y -> int2.u")
    # harmonic oscillator x'' = -w^2 x from two integrators and a gain
    g.add("pos", Integrator(initial=1.0, unit="m"))
    g.add("vel", Integrator(initial=0.0, unit="m/s"))
    g.add("spring", Gain(gain=-W_OSC ** 2, unit="m/s^2"))
    g.wire("vel.y -> pos.u")
    g.wire("pos.y -> spring.u")
    g.wire("spring.y -> vel.u")
    # exponential decay y' = -a y
    g.add("dec", Integrator(initial=1.0))
    g.add("rate_k", Gain(gain=-DECAY))
    g.wire("dec.y -> rate_k.u")
    g.wire("rate_k.y -> dec.u")
    g.record("int_s.y", "int2.y", "pos.y", "vel.y", "dec.y")
    return g


@pytest.fixture(scope="module")
def graph():
    return _graph()


@pytest.fixture(scope="module")
def run(graph):
    return hapflow.Simulation(graph).run()


def test_compiled_and_interpreted_are_bit_identical(graph, run):
    short = hapflow.Simulation(graph, interpret=True).run(0.05)
    n = short.time.size
    assert n == 50
    for key, values in short.signals.items():
        assert np.array_equal(values, run.signals[key][:n]), key


def test_integral_of_sine_to_rk4_accuracy(run):
    t = run.time
    a, f, ph, off = SINE["amplitude"], SINE["frequency"], SINE["phase"], SINE["offset"]
    w = 2 * np.pi * f
    exact = -0.4 + off * t + a / w * (np.cos(ph) - np.cos(w * t + ph))
    y = run.signals["int_s.y"][:, 0]
    assert y[0] == -0.4
    assert np.abs(y - exact).max() < 1e-9


def test_vector_integral_with_initial_value(run):
    t = run.time
    y = run.signals["int2.y"]
    assert y.shape == (t.size, 2)
    np.testing.assert_allclose(y, 0.25 + np.outer(t, C2), rtol=0, atol=1e-12)


def test_integrators_in_a_loop_harmonic_oscillator(run):
    # each solver stage re-evaluates the integrators' outputs through the gain:
    # RK4 phase error after one second is ~ t w^5 h^4 / 120 = 3e-9
    t = run.time
    np.testing.assert_allclose(run.signals["pos.y"][:, 0], np.cos(W_OSC * t), rtol=0, atol=2e-8)
    np.testing.assert_allclose(run.signals["vel.y"][:, 0], -W_OSC * np.sin(W_OSC * t),
                               rtol=0, atol=2e-8 * W_OSC)


def test_integrator_feedback_exponential_decay(run):
    t = run.time
    np.testing.assert_allclose(run.signals["dec.y"][:, 0], np.exp(-DECAY * t), rtol=1e-11, atol=0)


def test_initial_value_is_read_when_the_simulation_starts(graph):
    graph.nodes["int2"].block.set("initial", -2.0)
    try:
        sim = hapflow.Simulation(graph)
        y = sim.run(0.01).signals["int2.y"]
        np.testing.assert_allclose(y, -2.0 + np.outer(np.arange(10) / RATE, C2), rtol=0,
                                   atol=1e-13)
    finally:
        graph.nodes["int2"].block.set("initial", 0.25)


def test_integrator_ports_and_state():
    b = Integrator(size=3, unit="m")
    assert b.cstate == 3
    assert b.inputs["u"].shape == (3,) and b.outputs["y"].shape == (3,)
    assert b.outputs["y"].unit == "m"
    assert feedthrough(b, "y") == ()
    with pytest.raises(ParamError, match="size"):
        Integrator(size=0)


def test_integrator_cannot_run_at_a_rate_divider():
    g = hapflow.Graph(rate=1000)
    with pytest.raises(hapflow.GraphError, match="continuous state"):
        g.add("i", Integrator(), rate=500)
