"""SwitchingFirstOrder and BallOnPaddle against closed-form solutions."""
import math

import numpy as np
import pytest

import hapflow as hf
from hapflow.errors import GraphError


def switch_times(tau, u1, u2, s1, s2, x0, n):
    """Closed-form switching times of seed 001's thermostat system (table 1)."""
    times, t, x, mode = [], 0.0, x0, 1
    for _ in range(n):
        u, s = (u1, s1) if mode == 1 else (u2, s2)
        t += math.log((x - u / tau) / (s - u / tau)) / tau
        times.append(t)
        x, mode = s, 3 - mode
    return np.array(times)


def test_switching_first_order_switch_times_closed_form():
    g = hf.Graph(name="thermostat", rate=100, duration=8.0)
    g.add("sys", hf.blocks.SwitchingFirstOrder(tau=0.7, u1=2.0, u2=-0.5, s1=2.0, s2=0.4))
    g.record("sys.x", "sys.switches", "sys.switch_time", "sys.mode")
    r = hf.Simulation(g).run(progress=False)
    n = r["sys.switches"][:, 0]
    located = r["sys.switch_time"][np.nonzero(np.diff(n))[0] + 1, 0]
    exact = switch_times(0.7, 2.0, -0.5, 2.0, 0.4, 0.0, len(located))
    assert len(located) >= 5
    assert np.max(np.abs(located - exact)) < 1e-9
    assert np.all((r["sys.x"] >= 0.4 - 1e-9) | (r.time[:, None] < exact[0]))
    assert set(np.unique(r["sys.mode"])) == {1, 2}


def test_switching_first_order_rejects_unreachable_levels():
    with pytest.raises(hf.block.ParamError, match="u1/tau > s1 > s2 > u2/tau"):
        hf.blocks.SwitchingFirstOrder(tau=1.0, u1=1.0, s1=1.5)


def paddle_graph(amplitude=0.0, frequency=5.0, duration=2.0, rate=1000, **ball):
    g = hf.Graph(name="ball", rate=rate, duration=duration)
    g.add("paddle", hf.blocks.Sine(amplitude=amplitude, frequency=frequency, unit="m"))
    g.add("ball", hf.blocks.BallOnPaddle(**ball))
    g.wire("paddle.y -> ball.paddle_pos")
    g.wire("paddle.dy -> ball.paddle_vel")
    g.wire("paddle.ddy -> ball.paddle_acc")
    g.record("ball.height", "ball.vel", "ball.force", "ball.mode", "ball.impacts",
             "ball.impact_time", "ball.impulse")
    return g


def test_ball_on_still_paddle_bounces_as_closed_form_then_rests():
    e, h0, grav, mass = 0.8, 0.05, 9.81, 0.05
    r = hf.Simulation(paddle_graph(restitution=e, h0=h0, mass=mass)).run(progress=False)
    n = r["ball.impacts"][:, 0]
    first = np.nonzero(np.diff(n))[0] + 1
    t1, v1 = math.sqrt(2 * h0 / grav), math.sqrt(2 * grav * h0)
    exact = t1 + np.concatenate([[0.0], np.cumsum([2 * e ** k * v1 / grav for k in range(1, 10)])])
    assert np.max(np.abs(r["ball.impact_time"][first[:10], 0] - exact)) < 1e-9
    assert r["ball.impulse"][first[0], 0] == pytest.approx(mass * (1 + e) * v1, rel=1e-9)
    # the Zeno cascade ends: the ball rests on the paddle pressing with m g
    assert r["ball.mode"][-1, 0] == 2
    assert r["ball.height"][-1, 0] == 0.0 and r["ball.force"][-1, 0] == pytest.approx(mass * grav)
    rebound_at_rest = e ** (n[-1] - 1) * v1 * e
    assert rebound_at_rest < 0.01 <= rebound_at_rest / e   # rested at the first rebound under v_stick


def test_ball_placed_on_still_paddle_rests_without_event_overflow():
    r = hf.Simulation(paddle_graph(h0=0.0, duration=3.0)).run(progress=False)
    assert r.event_overflows == 0
    # tick 0 reports the initial flight mode; its update finds the ball on the paddle
    assert np.all(r["ball.mode"][1:, 0] == 2) and np.all(r["ball.height"] == 0.0)
    assert r["ball.impacts"][-1, 0] == 1


def test_resting_ball_is_thrown_when_paddle_accelerates_down_faster_than_gravity():
    # paddle acceleration amplitude (2 pi 5)^2 0.02 = 19.7 m/s^2 > g: lift-off at sin = g / a_max
    w = 2 * math.pi * 5.0
    r = hf.Simulation(paddle_graph(amplitude=0.02, h0=0.0, v0=0.02 * w,      # riding along
                                   duration=0.2)).run(progress=False)
    assert r["ball.mode"][1, 0] == 2
    flying = np.nonzero(r["ball.mode"][1:, 0] == 0)[0] + 1
    lift = math.asin(9.81 / (0.02 * w * w)) / w              # first time -a(t) = g
    assert flying.size and abs(r.time[flying[0]] - lift) <= 1e-3


def test_hunt_crossley_elastic_contact_returns_to_drop_height_and_never_pulls():
    # b = 0: the contact is conservative, so every apex is the drop height.  The
    # 10 ms contact needs short steps for RK4 to conserve energy to 1e-6.
    r = hf.Simulation(paddle_graph(contact="hunt_crossley", h0=0.05, damping=0.0,
                                   duration=1.0, rate=10000)).run(progress=False)
    y, v = r["ball.height"][:, 0], r["ball.vel"][:, 0]
    apex = np.nonzero((v[:-1] > 0) & (v[1:] <= 0))[0]
    assert len(apex) >= 2
    energy = 0.5 * v ** 2 + 9.81 * y
    flight = r["ball.mode"][:, 0] == 0
    assert np.ptp(energy[flight]) / energy[0] < 1e-6
    assert np.all(r["ball.force"] >= 0.0)


def test_hunt_crossley_contact_duration_matches_hertz():
    # Hertz impact (n = 1.5, b = 0): duration 2.9432 d_max / v, d_max = (5 m v^2 / (4 k))^(2/5)
    mass, k, h0 = 0.05, 2e4, 0.05
    g = paddle_graph(contact="hunt_crossley", h0=h0, damping=0.0, stiffness=k, mass=mass,
                     duration=0.3, gravity=9.81, rate=20000)
    r = hf.Simulation(g).run(progress=False)
    mode = r["ball.mode"][:, 0]
    on = np.nonzero(mode == 1)[0]
    duration = (on[-1] - on[0] + 1) / g.rate
    v = math.sqrt(2 * 9.81 * h0)
    hertz = 2.9432 * (5 * mass * v * v / (4 * k)) ** 0.4 / v
    assert duration == pytest.approx(hertz, rel=0.03)     # gravity during contact shifts it ~1 %


def test_unknown_contact_model_is_rejected():
    with pytest.raises(hf.block.ParamError, match="contact"):
        hf.blocks.BallOnPaddle(contact="sticky")


def test_ball_graph_file_runs_with_located_impacts():
    from pathlib import Path
    g = hf.yamlio.load(Path(__file__).resolve().parents[1] / "graphs" / "bouncing_ball.yaml")
    r = hf.Simulation(g).run(2.0, progress=False)
    assert r.events >= 10 and r.event_overflows == 0
    with pytest.raises(GraphError):
        hf.Simulation(g).set("ball.restitution", 1.5)
