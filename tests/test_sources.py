"""Signal sources (blocks/sources.py): Constant, Step, Sine, Chirp.

Every expectation is a closed form (the documented law of the block), a peer
library (``scipy.signal.chirp``) or a property (zero crossings, finite
differences of the recorded signal), never a value captured from the code.
One graph holds every source so that it is compiled once.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.signal

import hapflow
from hapflow.block import ParamError
from hapflow.blocks.sources import Chirp, Constant, Sine, Step

hf = hapflow

RATE = 10000.0
H = 1.0 / RATE
DURATION = 2.0
CONST = [1.5, -2.0, 3.25]
SINE = dict(amplitude=2.5, frequency=3.0, phase=0.4, offset=-0.75)
LIN = dict(amplitude=0.7, f_start=2.0, f_end=20.0, sweep_time=1.5)
LOG = dict(amplitude=1.3, f_start=1.0, f_end=16.0, sweep_time=1.25, method="log")
FLAT = dict(amplitude=0.9, f_start=5.0, f_end=5.0, sweep_time=0.5, method="log")
STEPS = {"step_grid": dict(time=0.1233, initial=-1.0, final=2.0),
         "step_off": dict(time=0.12345, initial=0.5, final=-0.5),
         "step_zero": dict(time=0.0, initial=7.0, final=3.0)}
CHIRPS = {"lin": LIN, "log": LOG, "flat": FLAT}


def _graph() -> hapflow.Graph:
    g = hapflow.Graph(name="test_sources", rate=RATE, duration=DURATION)
    g.add("const", Constant(value=CONST, unit="N"))
    g.add("zero", Constant())
    for name, values in STEPS.items():
        g.add(name, Step(**values))
    g.add("sine", Sine(**SINE, unit="m"))
    for name, values in CHIRPS.items():
        g.add(name, Chirp(**values))
    g.record("const.y", "zero.y", *(f"{n}.y" for n in STEPS))
    for name in ("sine", *CHIRPS):
        g.record(f"{name}.y", f"{name}.dy", f"{name}.ddy")
    return g


@pytest.fixture(scope="module")
def graph():
    return _graph()


@pytest.fixture(scope="module")
def run(graph):
    return hapflow.Simulation(graph).run()


# ---------------------------------------------------------------- closed forms
def chirp_law(t, amplitude, f_start, f_end, sweep_time, method="linear"):
    """Analytic phase, frequency and frequency rate of the documented chirp law.

    The frequency law f(tau) is integrated in closed form up to ``sweep_time``;
    afterwards the sine continues at ``f_end`` from the phase reached.
    """
    f0, f1, T = f_start, f_end, sweep_time
    tau = np.minimum(t, T)
    if method == "linear":
        k = (f1 - f0) / T
        f = f0 + k * tau
        df = np.full_like(t, k)
        phase = 2 * np.pi * (f0 * tau + 0.5 * k * tau ** 2)
    else:
        r = math.log(f1 / f0) / T
        f = f0 * np.exp(r * tau)
        df = r * f
        phase = 2 * np.pi * f0 * tau if r == 0 else 2 * np.pi * f0 * np.expm1(r * tau) / r
    after = t > T
    phase = phase + 2 * np.pi * f1 * np.where(after, t - T, 0.0)
    df = np.where(after, 0.0, df)
    return phase, f, df


def d1(y, h):
    """Fourth-order central first derivative on the interior points [2:-2]."""
    return (-y[4:] + 8 * y[3:-1] - 8 * y[1:-3] + y[:-4]) / (12 * h)


def zero_crossings(t, y):
    """Times of sign changes of y, by linear interpolation between ticks."""
    k = np.flatnonzero(np.sign(y[:-1]) * np.sign(y[1:]) < 0)
    return t[k] - y[k] * (t[k + 1] - t[k]) / (y[k + 1] - y[k])


# ---------------------------------------------------------------- compiled vs interpreted
def test_compiled_and_interpreted_are_bit_identical(graph, run):
    short = hapflow.Simulation(graph, interpret=True).run(0.05)
    n = short.time.size
    assert n == 500
    np.testing.assert_array_equal(short.time, run.time[:n])
    assert set(short.signals) == set(run.signals)
    for key, values in short.signals.items():
        assert np.array_equal(values, run.signals[key][:n]), key


def test_time_axis_is_tick_count_over_rate(run):
    n = int(round(DURATION * RATE))
    assert run.time.shape == (n,)
    assert np.array_equal(run.time, np.arange(n) / RATE)


# ---------------------------------------------------------------- Constant
def test_constant_vector_value_and_shape(run):
    y = run.signals["const.y"]
    assert y.shape == (run.time.size, 3)
    assert np.array_equal(y, np.broadcast_to(CONST, y.shape))


def test_constant_default_is_scalar_zero(run):
    y = run.signals["zero.y"]
    assert y.shape == (run.time.size, 1)
    assert not np.any(y)


def test_constant_value_is_live_but_its_size_is_not(graph):
    sim = hapflow.Simulation(graph)
    first = sim.run(0.001)
    sim.set("const.value", [4.0, 5.0, -6.0])
    second = sim.run(0.001)
    assert np.array_equal(first.signals["const.y"][-1], CONST)
    assert np.array_equal(second.signals["const.y"], np.tile([4.0, 5.0, -6.0], (10, 1)))
    with pytest.raises(hapflow.GraphError, match="'const'.*must keep its 3 element"):
        sim.set("const.value", [1.0, 2.0])
    with pytest.raises(hapflow.GraphError, match="got 1"):
        sim.set("const.value", 2.0)
    # the rejected value left the block and the running simulation unchanged
    assert sim.graph.nodes["const"].block.value == (4.0, 5.0, -6.0)
    assert np.array_equal(sim.run(0.001).signals["const.y"][-1], [4.0, 5.0, -6.0])
    assert graph.nodes["const"].block.value == tuple(CONST)    # the given graph: never set


def test_constant_output_unit():
    g = hapflow.Graph()
    g.add("c", Constant(value=[1.0, 2.0], unit="N s/m"))
    assert g.check().units[("c", "y")] == "N s/m"


# ---------------------------------------------------------------- Step
@pytest.mark.parametrize("name, first", [("step_grid", 1233), ("step_off", 1235),
                                         ("step_zero", 0)])
def test_step_switches_at_first_tick_with_t_at_least_time(run, name, first):
    p = STEPS[name]
    y = run.signals[f"{name}.y"][:, 0]
    # first tick index i with i / rate >= time, worked out by hand for each case
    assert np.all(y[:first] == p["initial"])
    assert np.all(y[first:] == p["final"])


def test_step_time_is_live(graph):
    sim = hapflow.Simulation(graph)
    sim.set("step_grid.time", 0.0042)
    y = sim.run(0.01).signals["step_grid.y"][:, 0]
    assert np.all(y[:42] == -1.0) and np.all(y[42:] == 2.0)
    graph.nodes["step_grid"].block.set("time", STEPS["step_grid"]["time"])


def test_step_rejects_negative_time():
    with pytest.raises(ParamError, match="time"):
        Step(time=-0.1)


# ---------------------------------------------------------------- Sine
def test_sine_and_analytic_derivatives(run):
    t = run.time
    a, f, ph, off = SINE["amplitude"], SINE["frequency"], SINE["phase"], SINE["offset"]
    w = 2 * np.pi * f
    tol = dict(rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.signals["sine.y"][:, 0], off + a * np.sin(w * t + ph), **tol)
    np.testing.assert_allclose(run.signals["sine.dy"][:, 0], a * w * np.cos(w * t + ph),
                               rtol=0, atol=1e-10)
    np.testing.assert_allclose(run.signals["sine.ddy"][:, 0], -a * w * w * np.sin(w * t + ph),
                               rtol=0, atol=1e-9)


def test_sine_derivatives_match_finite_differences(run):
    y, dy, ddy = (run.signals[f"sine.{k}"][:, 0] for k in ("y", "dy", "ddy"))
    np.testing.assert_allclose(d1(y, H), dy[2:-2], rtol=0, atol=1e-7 * np.abs(dy).max())
    np.testing.assert_allclose(d1(dy, H), ddy[2:-2], rtol=0, atol=1e-7 * np.abs(ddy).max())


def test_sine_zero_crossings_are_half_periods_apart(run):
    tc = zero_crossings(run.time, run.signals["sine.y"][:, 0] - SINE["offset"])
    np.testing.assert_allclose(np.diff(tc), 0.5 / SINE["frequency"], rtol=1e-7)


def test_sine_units_of_derivatives():
    g = hapflow.Graph()
    g.add("s", Sine(unit="m"))
    units = g.check().units
    assert (units[("s", "y")], units[("s", "dy")], units[("s", "ddy")]) == ("m", "m/s", "m/s^2")


def test_sine_rejects_negative_frequency():
    with pytest.raises(ParamError, match="frequency"):
        Sine(frequency=-1.0)


# ---------------------------------------------------------------- Chirp
@pytest.mark.parametrize("name", ["lin", "log", "flat"])
def test_chirp_matches_analytic_phase(run, name):
    p = CHIRPS[name]
    phase, f, df = chirp_law(run.time, **p)
    a = p["amplitude"]
    w = 2 * np.pi * f
    y, dy, ddy = (run.signals[f"{name}.{k}"][:, 0] for k in ("y", "dy", "ddy"))
    np.testing.assert_allclose(y, a * np.sin(phase), rtol=0, atol=1e-9)
    np.testing.assert_allclose(dy, a * w * np.cos(phase), rtol=0, atol=1e-9 * np.abs(dy).max())
    expect = -a * w * w * np.sin(phase) + a * 2 * np.pi * df * np.cos(phase)
    np.testing.assert_allclose(ddy, expect, rtol=0, atol=1e-9 * np.abs(ddy).max())


@pytest.mark.parametrize("name, method", [("lin", "linear"), ("log", "logarithmic"),
                                          ("flat", "logarithmic")])
def test_chirp_matches_scipy_during_sweep(run, name, method):
    p = CHIRPS[name]
    t = run.time
    sweep = t <= p["sweep_time"]
    # scipy's chirp is cos(phase + phi degrees): phi = -90 gives sin(phase)
    ref = p["amplitude"] * scipy.signal.chirp(t[sweep], f0=p["f_start"], t1=p["sweep_time"],
                                              f1=p["f_end"], method=method, phi=-90)
    np.testing.assert_allclose(run.signals[f"{name}.y"][sweep, 0], ref, rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", ["lin", "log"])
def test_chirp_derivatives_match_finite_differences(run, name):
    p = CHIRPS[name]
    t = run.time
    y, dy, ddy = (run.signals[f"{name}.{k}"][:, 0] for k in ("y", "dy", "ddy"))
    # ddy jumps at sweep_time (the frequency stops rising), so y and dy have a
    # kink there that the stencils do not resolve: skip them across it
    inner = t[2:-2]
    smooth = np.abs(inner - p["sweep_time"]) > 3 * H
    assert smooth.sum() >= inner.size - 7
    np.testing.assert_allclose(d1(y, H)[smooth], dy[2:-2][smooth], rtol=0,
                               atol=1e-7 * np.abs(dy).max())
    np.testing.assert_allclose(d1(dy, H)[smooth], ddy[2:-2][smooth], rtol=0,
                               atol=1e-7 * np.abs(ddy).max())
    # and the second difference of y agrees too, more loosely (round-off / h^2)
    d2 = (-y[4:] + 16 * y[3:-1] - 30 * y[2:-2] + 16 * y[1:-3] - y[:-4]) / (12 * H * H)
    np.testing.assert_allclose(d2[smooth], ddy[2:-2][smooth], rtol=0,
                               atol=1e-5 * np.abs(ddy).max())


@pytest.mark.parametrize("name", ["lin", "log"])
def test_chirp_zero_crossings_follow_frequency_law(run, name):
    p = CHIRPS[name]
    f0, f1, T = p["f_start"], p["f_end"], p["sweep_time"]
    tc = zero_crossings(run.time, run.signals[f"{name}.y"][:, 0])
    # half a period of phase (pi) elapses between consecutive crossings:
    # integral of f over [ta, tb] = 1/2, with f integrated in closed form
    ta, tb = tc[:-1], tc[1:]
    sweep = tb <= T
    if name == "lin":
        k = (f1 - f0) / T
        cycles = f0 * (tb - ta) + 0.5 * k * (tb ** 2 - ta ** 2)
    else:
        r = math.log(f1 / f0) / T
        cycles = f0 * (np.exp(r * tb) - np.exp(r * ta)) / r
    np.testing.assert_allclose(cycles[sweep], 0.5, rtol=1e-5)
    # after the sweep the frequency is f_end: crossings exactly 1/(2 f_end) apart
    after = ta > T
    assert after.sum() > 10
    np.testing.assert_allclose(tb[after] - ta[after], 0.5 / f1, rtol=1e-5)
    # the crossing that straddles sweep_time is consistent with continuous phase:
    # the phase gained from its left neighbour to it is pi as well
    k = np.flatnonzero((ta <= T) & (tb > T))[0]
    if name == "lin":
        kk = (f1 - f0) / T
        before = f0 * (T - ta[k]) + 0.5 * kk * (T ** 2 - ta[k] ** 2)
    else:
        r = math.log(f1 / f0) / T
        before = f0 * (np.exp(r * T) - np.exp(r * ta[k])) / r
    assert abs(before + f1 * (tb[k] - T) - 0.5) < 1e-5


@pytest.mark.parametrize("name", ["lin", "log"])
def test_chirp_phase_is_continuous_after_sweep(run, name):
    p = CHIRPS[name]
    a, f1, T = p["amplitude"], p["f_end"], p["sweep_time"]
    t = run.time
    y, dy = run.signals[f"{name}.y"][:, 0], run.signals[f"{name}.dy"][:, 0]
    # no jump: a tick changes y by at most max|dy| h, and dy by at most max|ddy| h
    ddy = run.signals[f"{name}.ddy"][:, 0]
    assert np.abs(np.diff(y)).max() <= a * 2 * np.pi * f1 * H * (1 + 1e-9)
    assert np.abs(np.diff(dy)).max() <= np.abs(ddy).max() * H * (1 + 1e-6)
    # after the sweep: a sine at f_end through the phase reached at sweep_time
    phase_T, _, _ = chirp_law(np.array([T]), **p)
    after = t > T
    np.testing.assert_allclose(y[after], a * np.sin(phase_T[0] + 2 * np.pi * f1 * (t[after] - T)),
                               rtol=0, atol=1e-9)
    np.testing.assert_allclose(dy[after],
                               a * 2 * np.pi * f1 * np.cos(phase_T[0] + 2 * np.pi * f1 * (t[after] - T)),
                               rtol=0, atol=1e-7)


def test_chirp_flat_log_sweep_is_a_sine(run):
    a, f = FLAT["amplitude"], FLAT["f_start"]
    t = run.time
    np.testing.assert_allclose(run.signals["flat.y"][:, 0], a * np.sin(2 * np.pi * f * t),
                               rtol=0, atol=1e-10)
    np.testing.assert_allclose(run.signals["flat.ddy"][:, 0],
                               -a * (2 * np.pi * f) ** 2 * np.sin(2 * np.pi * f * t),
                               rtol=0, atol=1e-8)


@pytest.mark.parametrize("values, param", [(dict(f_start=0.0), "f_start"),
                                           (dict(f_end=-1.0), "f_end"),
                                           (dict(sweep_time=0.0), "sweep_time"),
                                           (dict(method="cubic"), "method")])
def test_chirp_rejects_bad_parameters(values, param):
    with pytest.raises(ParamError, match=param):
        Chirp(**values)


def test_waypoints_minimum_jerk_moves_and_holds():
    g = hf.Graph(name="wp", rate=1000, duration=2.0)
    g.add("wp", hf.blocks.Waypoints(times=[0.2, 0.7, 1.2, 1.5], points=[0.0, 0.03, 0.03, -0.01],
                                    unit="rad"))
    g.record("wp.y", "wp.dy", "wp.ddy")
    r = hf.Simulation(g).run(progress=False)
    t, y = r.time, r["wp.y"][:, 0]
    tau = np.clip((t - 0.2) / 0.5, 0, 1)
    move = 0.03 * (10 * tau ** 3 - 15 * tau ** 4 + 6 * tau ** 5)
    first = t <= 0.7
    assert np.allclose(y[first], move[first], atol=1e-15)
    assert np.allclose(y[(t >= 0.7) & (t <= 1.2)], 0.03, rtol=0, atol=1e-15)
    assert np.allclose(y[t >= 1.5], -0.01, rtol=0, atol=1e-15)
    # peak speed 1.875 dy/dt, velocity and acceleration are the derivatives
    assert r["wp.dy"][:, 0].max() == pytest.approx(1.875 * 0.03 / 0.5, rel=1e-6)
    assert np.allclose(np.gradient(y, t)[5:-5], r["wp.dy"][5:-5, 0], atol=2e-4)
    assert np.allclose(np.gradient(r["wp.dy"][:, 0], t)[5:-5], r["wp.ddy"][5:-5, 0], atol=0.05)


def test_waypoints_reject_bad_times():
    with pytest.raises(hf.block.ParamError, match="increase"):
        hf.blocks.Waypoints(times=[0.0, 1.0, 1.0], points=[0, 1, 2])
    with pytest.raises(hf.block.ParamError, match="same length"):
        hf.blocks.Waypoints(times=[0.0, 1.0], points=[0, 1, 2])


def test_white_noise_statistics_and_repeatability():
    def run(seed):
        g = hf.Graph(name="noise", rate=1000, duration=20.0, seed=seed)
        g.add("n", hf.blocks.WhiteNoise(std=0.5, unit="N"))
        g.record("n.y")
        return hf.Simulation(g).run(progress=False)["n.y"][:, 0]
    y = run(1)
    assert y.std() == pytest.approx(0.5, rel=0.02) and abs(y.mean()) < 0.02
    lag1 = np.corrcoef(y[:-1], y[1:])[0, 1]
    assert abs(lag1) < 0.03                                     # white: one new sample per tick
    assert np.array_equal(y, run(1)) and not np.array_equal(y, run(2))
