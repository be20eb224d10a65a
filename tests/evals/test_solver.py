"""Whole-system checks of the global solver against closed-form answers."""
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import hapflow as hf
from hapflow.blocks import Constant, Integrator, MassSpringDamper, Product, Sine, Sum

M, B, K = 1.0, 0.5, 100.0


def msd_exact(t, x0, v0, f0, w):
    """Closed-form response of m x'' + b x' + k x = f0 sin(w t) (underdamped)."""
    det = (K - M * w * w) ** 2 + (B * w) ** 2
    a = f0 * (K - M * w * w) / det          # particular: a sin + c cos
    c = -f0 * B * w / det
    sigma = B / (2 * M)
    wd = math.sqrt(K / M - sigma ** 2)
    c1 = x0 - c
    c2 = (v0 - a * w + sigma * c1) / wd
    return (np.exp(-sigma * t) * (c1 * np.cos(wd * t) + c2 * np.sin(wd * t))
            + a * np.sin(w * t) + c * np.cos(w * t))


@pytest.mark.parametrize("x0, v0, f0", [(0.01, 0.0, 0.0), (0.0, 0.05, 0.0), (0.005, 0.0, 2.0)],
                         ids=["free-x0", "free-v0", "forced"])
def test_mass_spring_damper_matches_closed_form(x0, v0, f0):
    w = 2 * math.pi * 3.0
    g = hf.Graph(rate=1000, duration=5)
    g.add("drive", Sine(amplitude=f0, frequency=3.0, unit="N"))
    g.add("msd", MassSpringDamper(mass=M, damping=B, stiffness=K, x0=x0, v0=v0))
    g.wire("drive.y -> msd.force")
    g.record("msd.pos")
    r = hf.Simulation(g).run()
    exact = msd_exact(r.time, x0, v0, f0, w)
    rel = np.max(np.abs(r["msd.pos"][:, 0] - exact)) / np.max(np.abs(exact))
    assert rel <= 1e-6, rel


def cubic_graph(rate):
    """x' = -x^3 + sin(2 t), x(0) = 1, built from Integrator, Product, Sum, Sine."""
    g = hf.Graph(rate=rate, duration=2.0)
    g.add("x", Integrator(initial=1.0))
    g.add("cube", Product(ops="***"))
    g.add("drive", Sine(amplitude=1.0, frequency=1.0 / math.pi))
    g.add("rhs", Sum(signs="+-"))
    for port in ("u1", "u2", "u3"):
        g.wire(f"x.y -> cube.{port}")
    g.wire("drive.y -> rhs.u1")
    g.wire("cube.y -> rhs.u2")
    g.wire("rhs.y -> x.u")
    g.record("x.y")
    return g


def test_rk4_observed_order_is_four_on_nonlinear_ode():
    ref = solve_ivp(lambda t, x: -x ** 3 + np.sin(2 * t), (0, 2), [1.0], rtol=1e-13, atol=1e-15,
                    dense_output=True)
    errors = []
    rates = [25, 50, 100, 200]
    for rate in rates:
        sim = hf.Simulation(cubic_graph(rate))
        sim.run(2.0)
        errors.append(abs(sim.arrays["x"][0] - ref.sol(2.0)[0]))
    orders = [math.log2(errors[k] / errors[k + 1]) for k in range(len(rates) - 1)]
    assert all(3.8 <= q <= 4.2 for q in orders), (errors, orders)


def test_semi_implicit_euler_is_first_order_and_symplectic():
    """Semi-implicit Euler: first order, and bounded energy on an undamped oscillator."""
    errs = []
    for rate in (1000, 2000):
        g = hf.Graph(rate=rate, duration=2.0, solver="euler")
        g.add("zero", Constant(value=0.0, unit="N"))
        g.add("msd", MassSpringDamper(mass=1.0, stiffness=100.0, x0=0.01))
        g.wire("zero.y -> msd.force")
        g.record("msd.pos", "msd.vel")
        r = hf.Simulation(g).run()
        errs.append(np.max(np.abs(r["msd.pos"][:, 0] - 0.01 * np.cos(10 * r.time))))
        energy = 0.5 * r["msd.vel"][:, 0] ** 2 + 50 * r["msd.pos"][:, 0] ** 2
    order = math.log2(errs[0] / errs[1])
    assert 0.8 <= order <= 1.2, order
    assert np.ptp(energy) / energy[0] < 0.02


def test_bouncing_ball_impact_times_located_within_tick():
    e, h0, grav = 0.8, 1.0, 9.81

    def impacts(events):
        g = hf.Graph(rate=1000, duration=4.5, events=events)
        g.add("ball", hf.blocks.BouncingBall(restitution=e, h0=h0, gravity=grav))
        g.record("ball.bounces", "ball.impact_time")
        r = hf.Simulation(g).run()
        n = r["ball.bounces"][:, 0]
        first = [np.argmax(n >= k) for k in range(1, 11)]
        assert n[-1] >= 10
        return r["ball.impact_time"][first, 0]

    t1 = math.sqrt(2 * h0 / grav)
    v1 = grav * t1
    exact = [t1]
    for k in range(1, 10):
        exact.append(exact[-1] + 2 * e ** k * v1 / grav)
    located = np.max(np.abs(impacts("locate") - exact))
    at_ticks = np.max(np.abs(impacts("tick") - exact))
    print(f"located: {located:.2e} s, at tick ends: {at_ticks:.2e} s")
    assert located <= 1e-9
    assert at_ticks >= 1000 * located and at_ticks > 1e-5
