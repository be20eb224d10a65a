"""Probe trajectories (blocks/sources.py): SweptSine and Multisine.

Expectations are closed forms written out here (the phase law of a linear or
exponential sweep, the raised-cosine envelope, sums of sines, Schroeder's
phase rule) and properties (finite differences of the recorded signals, a
crest factor), never values captured from the code.  One graph holds every
source so that it is compiled once.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import hapflow
from hapflow.block import ParamError
from hapflow.blocks.sources import Multisine, SweptSine, schroeder_phases

RATE = 8000.0
H = 1.0 / RATE
DURATION = 3.0
SWEEPS = {
    "lin": dict(amplitude=0.025, f_start=1.0, f_end=4.0, sweep_time=2.0, phase=0.3, center=0.001),
    "log": dict(amplitude=0.012, f_start=2.0, f_end=16.0, sweep_time=2.5, method="log"),
    "fade": dict(amplitude=0.02, f_start=1.5, f_end=6.0, sweep_time=2.0, fade=0.4, center=-0.002),
    "flat": dict(amplitude=0.02, f_start=1.5, f_end=1.5, sweep_time=2.7, fade=0.5),
    "flatlog": dict(amplitude=0.01, f_start=3.0, f_end=3.0, sweep_time=1.0, method="log"),
}
MULTI = {
    "ms": dict(frequencies=[1.0, 2.5, 4.0], amplitudes=[0.004, 0.002, 0.001],
               phases=[0.1, -0.7, 2.0], center=0.003),
    "schr": dict(frequencies=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], amplitudes=[0.002],
                 schroeder=True, fade=0.5),
    "peaky": dict(frequencies=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], amplitudes=[0.002],
                  phases=[0.5 * math.pi] * 8),
}


def _graph() -> hapflow.Graph:
    g = hapflow.Graph(name="test_sources_rig", rate=RATE, duration=DURATION)
    for name, values in SWEEPS.items():
        g.add(name, SweptSine(**values))
    for name, values in MULTI.items():
        g.add(name, Multisine(**values))
    for name in (*SWEEPS, *MULTI):
        g.record(f"{name}.pos", f"{name}.vel", f"{name}.acc")
    return g


@pytest.fixture(scope="module")
def run():
    return hapflow.Simulation(_graph()).run()


def sig(run, name):
    return run[name][:, 0]


# ---------------------------------------------------------------- closed forms
def sweep_phase(t, f_start, f_end, sweep_time, method="linear", **_):
    """Phase (rad) of the sweep and its continuation at f_end after sweep_time."""
    tau = np.minimum(t, sweep_time)
    if method == "linear":
        phi = 2 * np.pi * (f_start * tau + (f_end - f_start) / (2 * sweep_time) * tau ** 2)
    elif f_end == f_start:
        phi = 2 * np.pi * f_start * tau
    else:
        r = math.log(f_end / f_start) / sweep_time
        phi = 2 * np.pi * f_start * (np.exp(r * tau) - 1.0) / r
    return phi + 2 * np.pi * f_end * np.maximum(t - sweep_time, 0.0)


def envelope(t, fade, t_end):
    """Raised-cosine fade-in over [0, fade] and fade-out over [t_end - fade, t_end]."""
    if fade == 0:
        return np.ones_like(t)
    w = np.ones_like(t)
    rise = t < fade
    w[rise] = 0.5 * (1 - np.cos(np.pi * t[rise] / fade))
    fall = t > t_end - fade
    w[fall] *= 0.5 * (1 - np.cos(np.pi * np.maximum(t_end - t[fall], 0.0) / fade))
    w[t >= t_end] = 0.0
    return w


def sweep_law(t, amplitude, f_start, f_end, sweep_time, method="linear", fade=0.0, phase=0.0,
              center=0.0):
    phi = sweep_phase(t, f_start, f_end, sweep_time, method)
    return center + amplitude * envelope(t, fade, sweep_time) * np.sin(phi + phase)


@pytest.mark.parametrize("name", list(SWEEPS))
def test_sweep_follows_its_phase_law(run, name):
    p = SWEEPS[name]
    exact = sweep_law(run.time, **p)
    np.testing.assert_allclose(sig(run, f"{name}.pos"), exact, rtol=0,
                               atol=1e-9 * p["amplitude"])


@pytest.mark.parametrize("name", ["lin", "log", "flat"])
def test_sweep_instantaneous_frequency(run, name):
    """Zero crossings of pos - center are half a period of f(t) apart."""
    p = SWEEPS[name]
    t = run.time
    y = sig(run, f"{name}.pos") - p.get("center", 0.0)
    fade = p.get("fade", 0.0)
    sel = (t > fade + 0.05) & (t < p["sweep_time"] - fade - 0.05)
    t, y = t[sel], y[sel]
    k = np.nonzero(np.sign(y[:-1]) != np.sign(y[1:]))[0]
    tz = t[k] - y[k] * (t[k + 1] - t[k]) / (y[k + 1] - y[k])     # linear interpolation
    mid = 0.5 * (tz[1:] + tz[:-1])
    f_meas = 0.5 / np.diff(tz)
    T, f0, f1 = p["sweep_time"], p["f_start"], p["f_end"]
    if p.get("method", "linear") == "linear":
        f_law = f0 + (f1 - f0) * mid / T
    else:
        f_law = f0 * (f1 / f0) ** (mid / T)
    np.testing.assert_allclose(f_meas, f_law, rtol=2e-3)


@pytest.mark.parametrize("name", list(SWEEPS) + list(MULTI))
def test_derivatives_match_finite_differences(run, name):
    """Central differences of pos (vel) and vel (acc): error O(h^2), far below the signal."""
    pos, vel, acc = (sig(run, f"{name}.{p}") for p in ("pos", "vel", "acc"))
    dpos = (pos[2:] - pos[:-2]) / (2 * H)
    dvel = (vel[2:] - vel[:-2]) / (2 * H)
    # skip the samples next to the instants where acc jumps: end of the sweep (df
    # steps to 0, or the fade-out ends) and both ends of each fade (w'' steps)
    p = {**SWEEPS.get(name, {}), **MULTI.get(name, {})}
    t = run.time[1:-1]
    keep = np.ones(dpos.size, dtype=bool)
    fade = p.get("fade", 0.0)
    for jump in (p.get("sweep_time"), fade or None,
                 (p["sweep_time"] - fade) if fade and "sweep_time" in p else None):
        if jump is not None:
            keep &= np.abs(t - jump) > 2 * H
    vscale = np.max(np.abs(vel))
    ascale = np.max(np.abs(acc))
    assert np.max(np.abs(dpos - vel[1:-1])[keep]) <= 5e-5 * vscale
    assert np.max(np.abs(dvel - acc[1:-1])[keep]) <= 1e-4 * ascale


@pytest.mark.parametrize("name", ["fade", "flat"])
def test_fade_starts_and_stops_at_rest(run, name):
    p = SWEEPS[name]
    t = run.time
    pos, vel, acc = (sig(run, f"{name}.{q}") for q in ("pos", "vel", "acc"))
    off = p.get("center", 0.0)
    assert pos[0] == off and vel[0] == 0.0 and acc[0] == 0.0
    after = t >= p["sweep_time"]
    assert after.any()
    assert np.all(pos[after] == off) and np.all(vel[after] == 0.0) and np.all(acc[after] == 0.0)
    # pos and vel are continuous at the end of the fade-out; acc may step by at most
    # A w''(T-) = A (pi / fade)^2 / 2 (the raised cosine is C1, not C2)
    last = np.nonzero(~after)[0][-1]
    assert abs(pos[last] - off) < 1e-6 and abs(vel[last]) < 1e-3
    assert abs(acc[last]) <= 0.5 * p["amplitude"] * (np.pi / p["fade"]) ** 2 * 1.01
    # between the fades the amplitude is the full amplitude
    inside = (t > p["fade"]) & (t < p["sweep_time"] - p["fade"])
    assert np.max(np.abs(pos[inside] - off)) == pytest.approx(p["amplitude"], rel=1e-3)


def test_without_fade_the_sine_continues_at_f_end(run):
    p = SWEEPS["lin"]
    t = run.time
    late = t > p["sweep_time"] + 0.1
    y = sig(run, "lin.pos")[late] - p["center"]
    k = np.nonzero(np.sign(y[:-1]) != np.sign(y[1:]))[0]
    period = 2 * np.mean(np.diff(t[late][k]))
    assert period == pytest.approx(1.0 / p["f_end"], rel=1e-3)
    assert np.max(np.abs(y)) == pytest.approx(p["amplitude"], rel=1e-3)


# ---------------------------------------------------------------- multisine
@pytest.mark.parametrize("name", list(MULTI))
def test_multisine_is_the_sum_of_its_sines(run, name):
    p = MULTI[name]
    t = run.time
    f = np.asarray(p["frequencies"])
    a = np.broadcast_to(np.asarray(p["amplitudes"]), f.shape)
    if p.get("schroeder"):
        n = f.size
        phases = -np.pi * np.arange(1, n + 1) * np.arange(0, n) / n       # equal amplitudes
    else:
        phases = np.asarray(p.get("phases", np.zeros(f.size)))
    y = (a[:, None] * np.sin(2 * np.pi * f[:, None] * t[None, :] + phases[:, None])).sum(axis=0)
    w = envelope(t, p.get("fade", 0.0), np.inf)
    np.testing.assert_allclose(sig(run, f"{name}.pos"), p.get("center", 0.0) + w * y,
                               rtol=0, atol=1e-15 + 1e-12 * np.sum(a) * 1e3)


def test_schroeder_phases_lower_the_crest_factor(run):
    t = run.time
    steady = t >= 1.0                  # one full period of the 1 Hz base, after the fade
    crest = {}
    for name in ("schr", "peaky"):
        y = sig(run, f"{name}.pos")[steady]
        crest[name] = np.max(np.abs(y)) / np.sqrt(np.mean(y ** 2))
    assert crest["peaky"] == pytest.approx(4.0, rel=1e-3)   # cosines peak together: sqrt(2 N)
    assert crest["schr"] < 0.5 * crest["peaky"]


def test_schroeder_phases_closed_form():
    n = 7
    np.testing.assert_allclose(schroeder_phases(np.ones(n)),
                               -np.pi * np.arange(1, n + 1) * np.arange(n) / n, atol=1e-12)
    # unequal amplitudes: phi_k = -2 pi sum_{l<k} (k - l) p_l
    a = np.array([1.0, 2.0, 0.5])
    share = a ** 2 / np.sum(a ** 2)
    expected = [0.0, -2 * np.pi * share[0], -2 * np.pi * (2 * share[0] + share[1])]
    np.testing.assert_allclose(schroeder_phases(a), expected, atol=1e-12)


# ---------------------------------------------------------------- parameters
def test_sweep_rejects_a_fade_longer_than_half_the_sweep():
    with pytest.raises(ParamError, match="fade"):
        SweptSine(sweep_time=2.0, fade=1.5)
    s = SweptSine(sweep_time=2.0, fade=0.5)
    with pytest.raises(ParamError, match="fade"):
        s.set("sweep_time", 0.8)
    assert s.sweep_time == 2.0


@pytest.mark.parametrize("values, param", [
    (dict(frequencies=[1.0, 2.0], amplitudes=[1.0, 2.0, 3.0]), "amplitudes"),
    (dict(frequencies=[1.0, 2.0], phases=[0.0]), "phases"),
    (dict(frequencies=[1.0, 2.0], phases=[0.0, 1.0], schroeder=True), "phases"),
    (dict(frequencies=[1.0, -2.0]), "frequencies"),
])
def test_multisine_rejects_inconsistent_lists(values, param):
    with pytest.raises(ParamError, match=param):
        Multisine(**values)


def test_sources_compiled_equals_interpreted():
    g = _graph()
    a = hapflow.Simulation(g).run(0.05)
    b = hapflow.Simulation(g, interpret=True).run(0.05)
    for key in a.signals:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
