"""Devices with changing contact against the solve_ivp reference (seed 001, seed 003).

The reference (:mod:`hapflow.ivp`) runs the same blocks on the same ticks but
integrates with DOP853 at rtol 1e-12 and locates guards with solve_ivp's
root finder, so these compare the engine's RK4 + Illinois event location
with an independent integrator.
"""
import numpy as np
import pytest

import hapflow as hf
from hapflow.ivp import reference
from hapflow.yamlio import load
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def event_times(result, signal):
    """Distinct values taken by a recorded 'latest event time' signal, in order."""
    v = result[signal][:, 0]
    return v[np.nonzero(np.diff(v))[0] + 1]


def driven_ball(contact="rigid", duration=2.0, rate=1000, **params):
    g = hf.Graph(name="ball", rate=rate, duration=duration)
    g.add("paddle", hf.blocks.Sine(amplitude=0.01, frequency=5.0, unit="m"))
    g.add("ball", hf.blocks.BallOnPaddle(contact=contact, h0=0.05, **params))
    g.wire("paddle.y -> ball.paddle_pos")
    g.wire("paddle.dy -> ball.paddle_vel")
    g.wire("paddle.ddy -> ball.paddle_acc")
    g.record("ball.impact_time", "ball.impacts", "ball.height", "ball.force", "ball.mode")
    return g


def test_ball_on_driven_paddle_first_20_impacts_match_solve_ivp():
    g = driven_ball(restitution=0.8)
    engine = hf.Simulation(g).run(progress=False)
    ref = reference(g, rtol=1e-12)
    ours = event_times(engine, "ball.impact_time")
    theirs = np.array([t for t, block, k in ref.event_log if k == 0])
    assert len(ours) >= 20 and len(theirs) >= 20
    err = np.max(np.abs(ours[:20] - theirs[:20]))
    print(f"first 20 impacts: max |engine - solve_ivp| = {err:.2e} s")
    assert err <= 1e-6
    assert engine.event_overflows == 0


def test_hunt_crossley_contact_times_match_solve_ivp():
    # A contact lasts ~18 ms here; at 1 kHz RK4's truncation error over the
    # contact (not the event location) moves later touch-downs by up to 4e-5 s
    # on this chaotic driven system, at 4 kHz (error / 256) by < 2e-7 s.
    g = driven_ball("hunt_crossley", duration=1.0, rate=4000, stiffness=2e4, damping=2e3)
    engine = hf.Simulation(g).run(progress=False)
    ref = reference(g, rtol=1e-12)
    touch = np.array([t for t, _, k in ref.event_log if k == 0])
    ours = event_times(engine, "ball.impact_time")
    assert len(touch) >= 5 and len(ours) == len(touch)
    assert np.max(np.abs(ours - touch)) <= 1e-6
    assert np.all(engine["ball.force"] >= 0.0)         # never sticky
    mask = np.isfinite(ref["ball.height"][:, 0])
    assert np.max(np.abs(engine["ball.height"][mask] - ref["ball.height"][mask])) < 1e-6


# Model B's stiff slider spring (key-side mode ~120 rad/s) gives RK4 at 1 ms a
# relative truncation error of ~1e-7 per step; catches amplify it, so after
# a second of contact cycles the event times drift by up to ~3e-5 s from
# the reference.  Its first throw and catch are compared; model A (the
# issue's requirement) over the whole scenario.
@pytest.mark.parametrize("model, until", [("a", 3.0), ("b", 1.0)])
def test_piano_release_catch_strike_times_match_solve_ivp(model, until, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)         # the graph's sinks write out/piano_action_*.mid|wav
    g = load(ROOT / "graphs" / f"piano_action_{model}.yaml")
    engine = hf.Simulation(g).run(progress=False)
    ref = reference(g, rtol=1e-12)
    assert [t for t, _, _ in ref.event_log if t < until], "no located events to compare"
    for signal in ("piano.release_time", "piano.catch_time", "piano.strike_time"):
        ours, theirs = event_times(engine, signal), event_times(ref, signal)
        assert len(ours) == len(theirs), (signal, ours, theirs)
        early = theirs < until
        err = np.max(np.abs(ours[early] - theirs[early]), initial=0.0)
        print(f"model {model.upper()} {signal}: {early.sum()} events, max error {err:.1e} s")
        assert err <= 1e-6


def test_switching_first_order_matches_solve_ivp():
    g = hf.Graph(name="thermostat", rate=100, duration=6.0)
    g.add("sys", hf.blocks.SwitchingFirstOrder())
    g.record("sys.x", "sys.switch_time")
    engine = hf.Simulation(g).run(progress=False)
    ref = reference(g)
    ours = event_times(engine, "sys.switch_time")
    theirs = np.array([t for t, _, _ in ref.event_log])
    assert len(ours) == len(theirs) >= 4
    assert np.max(np.abs(ours - theirs)) <= 1e-9
