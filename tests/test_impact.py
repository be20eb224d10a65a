"""RestitutionObserver: Newton observer on the impact map (seed 001)."""
from pathlib import Path

import numpy as np
import pytest

import hapflow as hf

ROOT = Path(__file__).resolve().parents[1]


def estimates(result):
    """Estimate of e after each impact (the tick after the impact is seen)."""
    n = result["observer.impacts"][:, 0]
    seen = np.nonzero(np.diff(n))[0] + 2
    seen = seen[seen < len(n)]
    return n[seen], result["observer.restitution"][seen, 0]


def observed_ball(e_true, e0, duration=3.0, window=4):
    g = hf.Graph(name="newton", rate=1000, duration=duration)
    g.add("paddle", hf.blocks.Sine(amplitude=0.02, frequency=5.0, unit="m"))
    g.add("ball", hf.blocks.BallOnPaddle(restitution=e_true, h0=0.05))
    g.add("observer", hf.blocks.RestitutionObserver(e0=e0, window=window))
    for a, b in [("paddle.y", "ball.paddle_pos"), ("paddle.dy", "ball.paddle_vel"),
                 ("paddle.ddy", "ball.paddle_acc"), ("paddle.y", "observer.paddle_pos"),
                 ("paddle.dy", "observer.paddle_vel"), ("ball.impact_time", "observer.impact_time"),
                 ("ball.impulse", "observer.impulse")]:
        g.wire(f"{a} -> {b}")
    g.record("observer.restitution", "observer.impacts", "ball.impacts", "ball.mode")
    return hf.Simulation(g).run(progress=False)


@pytest.mark.parametrize("e_true, e0", [(0.8, 0.5), (0.75, 0.95), (0.9, 0.3)])
def test_exact_measurements_converge_within_four_impacts(e_true, e0):
    r = observed_ball(e_true, e0)
    assert not np.any(r["ball.mode"] == 2)                # every contact is an impact (no resting)
    n, e = estimates(r)
    assert n[0] == 1 and e[0] == e0                       # one impact: nothing to fit yet
    print(f"e = {e_true}, from {e0}: after 2, 3, 4 impacts {e[1]:.6f}, {e[2]:.6f}, {e[3]:.6f}")
    assert np.all(np.abs(e[3:] / e_true - 1) < 1e-5)      # then every estimate (Hermite paddle)
    assert r["observer.impacts"][-1, 0] == r["ball.impacts"][-1, 0]


def test_noisy_rig_estimates_from_the_10th_impact_on_are_within_half_a_percent_rms():
    """Over eight noise realizations (seeds 1-8) of the rig graph: RMS error 0.4 %, 95 % of
    the estimates within 1 % (one realization alone is no measure of a noisy estimator:
    the worst single estimate over seeds 1-12 is 1.4 % off)."""
    sim = hf.Simulation(hf.load(ROOT / "graphs" / "ball_restitution_newton.yaml"))
    errors = []
    for seed in range(1, 9):
        sim.reset(seed=seed)
        n, e = estimates(sim.run(progress=False))
        assert np.count_nonzero(n >= 10) >= 10
        errors.append(np.abs(e[n >= 10] / 0.8 - 1))
    errors = np.concatenate(errors)
    rms, p95 = np.sqrt(np.mean(errors ** 2)), np.percentile(errors, 95)
    print(f"{errors.size} estimates from the 10th impact on: RMS {rms:.2%}, 95th percentile {p95:.2%}")
    assert rms <= 0.005 and p95 <= 0.01


def test_impact_map_reproduces_the_simulated_flights():
    """The observer's impact map (Hermite-interpolated paddle) against the engine's located impacts."""
    from hapflow.blocks import impact
    g = hf.Graph(name="truth", rate=1000, duration=1.0)
    g.add("paddle", hf.blocks.Sine(amplitude=0.02, frequency=5.0, unit="m"))
    g.add("ball", hf.blocks.BallOnPaddle(restitution=0.8, h0=0.05, mass=0.05))
    for a, b in [("paddle.y", "ball.paddle_pos"), ("paddle.dy", "ball.paddle_vel"),
                 ("paddle.ddy", "ball.paddle_acc")]:
        g.wire(f"{a} -> {b}")
    g.record("paddle.y", "paddle.dy", "ball.impacts", "ball.impact_time", "ball.impulse")
    r = hf.Simulation(g).run(progress=False)
    block = hf.blocks.RestitutionObserver(buffer=2048)
    block.sample_time = 1e-3
    p, d = block.pack(), np.zeros(block.dstate)
    d[impact.HEADER.ring:impact.HEADER.ring + len(r.time)] = r["paddle.y"][:, 0]
    d[impact.HEADER.ring + 2048:impact.HEADER.ring + 2048 + len(r.time)] = r["paddle.dy"][:, 0]
    d[impact.HEADER.now] = len(r.time) - 1
    k = np.nonzero(np.diff(r["ball.impacts"][:, 0]))[0] + 1
    t, j = r["ball.impact_time"][k, 0], r["ball.impulse"][k, 0]
    for a in range(len(t) - 1):
        vp = 0.02 * 2 * np.pi * 5 * np.cos(2 * np.pi * 5 * t[a])
        v_after = vp + 0.8 * j[a] / (0.05 * 1.8)
        tb, _, jb = impact.impact_map(d, p, t[a], v_after, 0.8)
        assert tb == pytest.approx(t[a + 1], abs=1e-8) and jb == pytest.approx(j[a + 1], rel=1e-6)
