"""Hunt-Crossley k and b from paddle motion and contact force only (seed 001)."""
import numpy as np
import pytest

import hapflow as hf
from hapflow.ident.contact import fit_hunt_crossley
from hapflow.ident.errors import IdentError

K, B, MASS = 1e5, 3e4, 0.05          # restitution ~0.8 at 1 m/s (alpha = 2 b / 3 k = 0.2 s/m)


@pytest.fixture(scope="module")
def bouncing():
    g = hf.Graph(name="hc", rate=10000, duration=2.0)
    g.add("paddle", hf.blocks.Sine(amplitude=0.01, frequency=4.0, unit="m"))
    g.add("ball", hf.blocks.BallOnPaddle(contact="hunt_crossley", stiffness=K, damping=B,
                                         h0=0.08, mass=MASS))
    for a, c in [("paddle.y", "ball.paddle_pos"), ("paddle.dy", "ball.paddle_vel"),
                 ("paddle.ddy", "ball.paddle_acc")]:
        g.wire(f"{a} -> {c}")
    g.record("paddle.y", "paddle.dy", "ball.force", "ball.impact_time", "ball.impacts")
    return hf.Simulation(g).run(progress=False)


def test_exact_signals_give_k_and_b(bouncing):
    r = bouncing
    fit = fit_hunt_crossley(r.time, r["paddle.y"][:, 0], r["paddle.dy"][:, 0],
                            r["ball.force"][:, 0], MASS)
    assert fit.contacts >= 10
    assert fit.k == pytest.approx(K, rel=1e-3) and fit.b == pytest.approx(B, rel=2e-3)
    located = np.unique(r["ball.impact_time"][:, 0])[2:]      # touch-downs located by the engine
    assert np.max(np.abs(fit.touchdowns - located[:fit.contacts])) < 2e-5


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_noisy_force_and_motion_within_2_percent(bouncing, seed):
    r, rng = bouncing, np.random.default_rng(seed)
    n = len(r.time)
    force = r["ball.force"][:, 0] + rng.normal(0, 0.1, n)           # 0.5 % of the 21 N peak
    pos = r["paddle.y"][:, 0] + rng.normal(0, 5e-6, n)              # 5 um
    vel = r["paddle.dy"][:, 0] + rng.normal(0, 5e-5, n)
    fit = fit_hunt_crossley(r.time, pos, vel, force, MASS)
    print(f"seed {seed}: k {fit.k / K - 1:+.2%}, b {fit.b / B - 1:+.2%} from {fit.contacts} contacts")
    assert abs(fit.k / K - 1) < 0.02 and abs(fit.b / B - 1) < 0.02


def test_too_few_contacts_is_a_clear_error(bouncing):
    r = bouncing
    short = slice(0, 2000)
    with pytest.raises(IdentError, match="need at least 3"):
        fit_hunt_crossley(r.time[short], r["paddle.y"][short, 0], r["paddle.dy"][short, 0],
                          r["ball.force"][short, 0], MASS)
