"""Digital filters (blocks/filters.py) against scipy.signal and closed forms.

ButterworthFilter is compared with ``scipy.signal.butter`` + ``sosfilt`` run
on the recorded input, LeadLag with ``scipy.signal.bilinear`` + ``lfilter``,
Differentiator with its recurrence and closed-form ramp response.  One graph
holds every filter so that it is compiled once.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.signal

import hapflow
from hapflow.block import ParamError
from hapflow.blocks import Constant, Multisine, SweptSine
from hapflow.blocks.filters import ButterworthFilter, Differentiator, LeadLag

RATE = 4000.0
TS = 1.0 / RATE
DURATION = 2.0
BUTTER = {
    "lp1": dict(btype="lowpass", order=1, cutoff=[50.0]),
    "lp5": dict(btype="lowpass", order=5, cutoff=[30.0]),
    "hp3": dict(btype="highpass", order=3, cutoff=[20.0]),
    "bp2": dict(btype="bandpass", order=2, cutoff=[5.0, 40.0]),
    "bs3": dict(btype="bandstop", order=3, cutoff=[8.0, 25.0]),
}
VEC = [1.5, -2.0, 0.25]
SLOPE = 0.3


def _graph() -> hapflow.Graph:
    g = hapflow.Graph(name="test_filters", rate=RATE, duration=DURATION)
    # a broadband input: multisine 1-300 Hz plus a swept sine
    g.add("src", Multisine(frequencies=list(np.geomspace(1.0, 300.0, 12)), amplitudes=[1.0],
                           schroeder=True))
    for name, values in BUTTER.items():
        g.add(name, ButterworthFilter(**values))
        g.wire(f"src.pos -> {name}.u")
        g.record(f"{name}.y")
    g.add("vec", Constant(value=VEC, unit="N"))
    g.add("lpv", ButterworthFilter(order=3, cutoff=[40.0], size=3))
    g.wire("vec.y -> lpv.u")
    g.add("lead", LeadLag(f_zero=29.0, f_pole=250.0))
    g.wire("src.pos -> lead.u")
    g.add("lag", LeadLag(f_zero=200.0, f_pole=20.0))
    g.wire("src.pos -> lag.u")
    g.add("sweep", SweptSine(amplitude=0.01, f_start=2.0, f_end=2.0, sweep_time=10.0))
    g.add("dif", Differentiator(unit="m/s"))
    g.add("diff", Differentiator(cutoff=50.0, unit="m/s"))
    g.wire("sweep.pos -> dif.u")
    g.wire("sweep.pos -> diff.u")
    g.add("ramp", Multisine(frequencies=[1e-9], amplitudes=[SLOPE / (2e-9 * math.pi)]))
    g.add("difr", Differentiator(cutoff=30.0, size=1))
    g.wire("ramp.pos -> difr.u")
    g.record("src.pos", "lpv.y", "lead.y", "lag.y", "sweep.pos", "sweep.vel", "dif.y", "diff.y",
             "ramp.pos", "difr.y")
    return g


@pytest.fixture(scope="module")
def graph():
    return _graph()


@pytest.fixture(scope="module")
def run(graph):
    return hapflow.Simulation(graph).run()


@pytest.mark.parametrize("name", list(BUTTER))
def test_butterworth_matches_scipy_sosfilt(run, name):
    p = BUTTER[name]
    wn = p["cutoff"][0] if len(p["cutoff"]) == 1 else p["cutoff"]
    sos = scipy.signal.butter(p["order"], wn, btype=p["btype"], output="sos", fs=RATE)
    u = run["src.pos"][:, 0]
    expected = scipy.signal.sosfilt(sos, u)
    y = run[f"{name}.y"][:, 0]
    assert np.max(np.abs(y - expected)) <= 1e-12 * np.max(np.abs(expected))


def test_butterworth_vector_elements_are_independent_step_responses(run):
    sos = scipy.signal.butter(3, 40.0, output="sos", fs=RATE)
    step = scipy.signal.sosfilt(sos, np.ones(run.time.size))
    y = run["lpv.y"]
    for j, v in enumerate(VEC):
        np.testing.assert_allclose(y[:, j], v * step, rtol=1e-12, atol=1e-14)
    assert y[-1] == pytest.approx(VEC, rel=1e-9)                 # unity DC gain


def test_butterworth_is_minus_3_db_at_the_cutoff():
    g = hapflow.Graph(rate=RATE)
    f = g.add("f", ButterworthFilter(order=4, cutoff=[123.0]))
    sos = f.sos()
    _, h = scipy.signal.sosfreqz(sos, worN=[123.0, 0.0], fs=RATE)
    assert abs(h[0]) == pytest.approx(1.0 / math.sqrt(2.0), rel=1e-9)
    assert abs(h[1]) == pytest.approx(1.0, rel=1e-12)
    assert sos.shape == (2, 6)


@pytest.mark.parametrize("values, param", [
    (dict(btype="bandpass", cutoff=[10.0]), "cutoff"),
    (dict(btype="lowpass", cutoff=[10.0, 20.0]), "cutoff"),
    (dict(btype="bandstop", cutoff=[30.0, 20.0]), "cutoff"),
    (dict(btype="notch"), "btype"),
    (dict(order=0), "order"),
])
def test_butterworth_rejects_bad_designs(values, param):
    with pytest.raises(ParamError, match=param):
        ButterworthFilter(**values)


def test_butterworth_cutoff_must_be_below_nyquist():
    g = hapflow.Graph(rate=RATE)
    g.add("src", Constant(value=1.0))
    g.add("f", ButterworthFilter(cutoff=[2500.0]))
    g.wire("src.y -> f.u")
    with pytest.raises(hapflow.GraphError, match="Nyquist"):
        hapflow.Simulation(g)


@pytest.mark.parametrize("name, fz, fp", [("lead", 29.0, 250.0), ("lag", 200.0, 20.0)])
def test_leadlag_matches_scipy_bilinear(run, name, fz, fp):
    b, a = scipy.signal.bilinear([1 / (2 * np.pi * fz), 1], [1 / (2 * np.pi * fp), 1], RATE)
    u = run["src.pos"][:, 0]
    expected = scipy.signal.lfilter(b, a, u)
    y = run[f"{name}.y"][:, 0]
    assert np.max(np.abs(y - expected)) <= 1e-12 * np.max(np.abs(expected))
    # unity DC gain and high-frequency gain f_pole / f_zero (at Nyquist, exactly, for Tustin)
    _, h = scipy.signal.freqz(b, a, worN=[0.0, RATE / 2], fs=RATE)
    assert abs(h[0]) == pytest.approx(1.0, rel=1e-12)
    assert abs(h[1]) == pytest.approx(fp / fz, rel=1e-9)


def test_differentiator_is_a_backward_difference(run):
    u = run["sweep.pos"][:, 0]
    y = run["dif.y"][:, 0]
    assert y[0] == 0.0                                   # no kick at the first sample
    np.testing.assert_allclose(y[1:], np.diff(u) / TS, rtol=1e-12, atol=1e-15)


def test_filtered_differentiator_follows_its_recurrence(run):
    a = math.exp(-2 * math.pi * 50.0 * TS)
    u = run["sweep.pos"][:, 0]                           # u[0] = 0, so lfilter's start agrees
    expected = scipy.signal.lfilter([(1 - a) / TS, -(1 - a) / TS], [1.0, -a], u)
    np.testing.assert_allclose(run["diff.y"][:, 0], expected, rtol=0, atol=1e-12)


def test_filtered_differentiator_ramp_response(run):
    """Ramp of slope s: y[k] = s (1 - a^k) (closed form of the recurrence)."""
    a = math.exp(-2 * math.pi * 30.0 * TS)
    k = np.arange(run.time.size)
    np.testing.assert_allclose(run["difr.y"][:, 0], SLOPE * (1 - a ** k), rtol=1e-6, atol=1e-9)


def test_differentiator_delay_is_documented_group_delay(run, graph):
    """A 2 Hz sine: the estimate equals the true velocity delayed by Ts (1/2 + a/(1-a))."""
    block = graph.nodes["diff"].block
    a = math.exp(-2 * math.pi * 50.0 * TS)
    tau = block.delay()
    assert tau == pytest.approx(TS * (0.5 + a / (1 - a)), rel=1e-12)
    t = run.time
    w = 2 * math.pi * 2.0
    sel = t > 0.5
    delayed = 0.01 * w * np.cos(w * (t[sel] - tau))
    amplitude_error = 1 - 1 / math.sqrt(1 + (w * tau) ** 2)    # first-order magnitude droop
    assert np.max(np.abs(run["diff.y"][sel, 0] - delayed)) <= 0.01 * w * (amplitude_error + 1e-3)
    assert graph.nodes["dif"].block.delay() == pytest.approx(TS / 2)


def test_differentiator_cutoff_is_live_and_checked():
    g = _graph()
    sim = hapflow.Simulation(g)
    sim.set("diff.cutoff", 10.0)
    with pytest.raises(hapflow.GraphError, match="Nyquist"):
        sim.set("diff.cutoff", 3000.0)
    assert sim.graph.nodes["diff"].block.cutoff == 10.0      # the simulation's copy
    r = sim.run(0.5)
    a = math.exp(-2 * math.pi * 10.0 * TS)
    expected = scipy.signal.lfilter([(1 - a) / TS, -(1 - a) / TS], [1.0, -a], r["sweep.pos"][:, 0])
    np.testing.assert_allclose(r["diff.y"][:, 0], expected, rtol=0, atol=1e-12)


def test_filters_compiled_equals_interpreted(graph):
    a = hapflow.Simulation(graph).run(0.05)
    b = hapflow.Simulation(graph, interpret=True).run(0.05)
    for key in a.signals:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
