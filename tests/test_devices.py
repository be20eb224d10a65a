"""HardeningSpringDevice (blocks/devices.py) against closed forms."""
import math

import numpy as np
import pytest

import hapflow as hf
from hapflow.block import ParamError
from hapflow.blocks import Constant, HardeningSpringDevice, Sine

RATE = 4000.0
M, B, KIN, KOUT, XT, FC, FV = 0.581, 11.5, 1500.0, 6000.0, 0.010, 0.3, 1e-3


def spring(x):
    """Piecewise-linear hardening spring force (N)."""
    ax = np.abs(x)
    return np.where(ax <= XT, KIN * x, np.sign(x) * (KIN * XT + KOUT * (ax - XT)))


def device_graph(force, duration, **params):
    g = hf.Graph(name="device", rate=RATE, duration=duration)
    g.add("src", force)
    g.add("dev", HardeningSpringDevice(**params))
    g.wire("src.y -> dev.force")
    g.record("src.y", "dev.pos", "dev.vel", "dev.acc", "dev.device_force")
    return g


@pytest.mark.parametrize("x0, v0", [(0.005, 0.0), (-0.002, 0.15), (0.0, -0.2)])
def test_free_response_in_linear_region_is_damped_oscillator(x0, v0):
    r = hf.Simulation(device_graph(Constant(value=0.0, unit="N"), 1.0, friction=0.0,
                                   x0=x0, v0=v0)).run()
    sigma = B / (2 * M)
    wd = math.sqrt(KIN / M - sigma ** 2)
    t = r.time
    exact = np.exp(-sigma * t) * (x0 * np.cos(wd * t) + (v0 + sigma * x0) / wd * np.sin(wd * t))
    pos = r["dev.pos"][:, 0]
    assert np.max(np.abs(pos)) <= XT                       # stays on the inner spring
    scale = np.max(np.abs(exact))
    assert np.max(np.abs(pos - exact)) <= 1e-7 * scale
    a, c = x0, (v0 + sigma * x0) / wd
    exact_v = np.exp(-sigma * t) * ((c * wd - sigma * a) * np.cos(wd * t)
                                    - (a * wd + sigma * c) * np.sin(wd * t))
    assert np.max(np.abs(r["dev.vel"][:, 0] - exact_v)) <= 1e-7 * np.max(np.abs(exact_v))


@pytest.mark.parametrize("force", [30.0, -45.0, 15.5, 10.0])
def test_static_equilibrium_matches_piecewise_spring(force):
    r = hf.Simulation(device_graph(Constant(value=force, unit="N"), 4.0)).run()
    if abs(force) <= KIN * XT:
        expected = force / KIN
    else:
        expected = math.copysign(XT + (abs(force) - KIN * XT) / KOUT, force)
    assert abs(r["dev.pos"][-1, 0] - expected) <= 1e-9
    assert abs(r["dev.vel"][-1, 0]) <= 1e-7
    assert abs(r["dev.device_force"][-1, 0] - force) <= 1e-5
    assert abs(r["dev.acc"][-1, 0]) <= 1e-4


def test_outputs_follow_the_force_law_across_both_springs():
    src = Sine(amplitude=90.0, frequency=3.0, unit="N")
    r = hf.Simulation(device_graph(src, 1.0)).run()
    x, v = r["dev.pos"][:, 0], r["dev.vel"][:, 0]
    assert np.max(np.abs(x)) > 1.5 * XT                    # the run reaches the outer spring
    fd = spring(x) + B * v + FC * np.tanh(v / FV)
    np.testing.assert_allclose(r["dev.device_force"][:, 0], fd, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r["dev.acc"][:, 0], (r["src.y"][:, 0] - fd) / M,
                               rtol=1e-12, atol=1e-9)


def test_spring_force_is_continuous_and_odd_at_the_transition():
    dev = HardeningSpringDevice(friction=0.0, damping=0.0)
    p = dev.pack()

    def reaction(xv):
        out = [np.zeros(1) for _ in range(4)]
        HardeningSpringDevice.output(0.0, np.array([xv, 0.0]), np.zeros(0),
                                     np.zeros(0, dtype=np.int64), p, np.zeros(1), *out)
        return out[3][0]

    for s in (1.0, -1.0):
        inside, outside = reaction(s * XT), reaction(s * XT * (1 + 1e-12))
        assert inside == pytest.approx(s * KIN * XT, rel=1e-15)
        assert abs(outside - inside) < 1e-9
        # slopes on both sides of the corner
        h = 1e-6
        assert (reaction(s * (XT - h)) - inside) / (-s * h) == pytest.approx(KIN, rel=1e-6)
        assert (reaction(s * (XT + h)) - inside) / (s * h) == pytest.approx(KOUT, rel=1e-6)
    for xv in (0.003, 0.0137, 0.05):
        assert reaction(-xv) == -reaction(xv)


def test_friction_is_smoothed_coulomb():
    dev = HardeningSpringDevice(damping=0.0, k_inner=0.0, k_outer=0.0, friction=0.3,
                                friction_vel=1e-3)
    p = dev.pack()
    for v in (1e-4, 1e-3, 0.05, -0.05):
        out = [np.zeros(1) for _ in range(4)]
        HardeningSpringDevice.output(0.0, np.array([0.0, v]), np.zeros(0),
                                     np.zeros(0, dtype=np.int64), p, np.zeros(1), *out)
        assert out[3][0] == pytest.approx(0.3 * math.tanh(v / 1e-3), rel=1e-15)


def test_coulomb_friction_takes_two_fc_over_k_per_half_cycle():
    """Undamped oscillator with Coulomb friction: the first trough is at -(x0 - 2 Fc / k)."""
    x0, fc = 0.008, 0.3
    r = hf.Simulation(device_graph(Constant(value=0.0, unit="N"), 0.1, damping=0.0,
                                   friction=fc, x0=x0)).run()
    trough = np.min(r["dev.pos"][:, 0])
    decrement = 2.0 * fc / KIN
    assert abs(trough + (x0 - decrement)) <= 0.01 * decrement


@pytest.mark.parametrize("name, value", [("mass", 0.0), ("x_transition", 0.0),
                                         ("friction_vel", 0.0), ("damping", -1.0),
                                         ("k_outer", -5.0)])
def test_device_rejects_bad_parameters(name, value):
    with pytest.raises(ParamError, match=name):
        HardeningSpringDevice(**{name: value})


def test_device_compiled_equals_interpreted():
    g = device_graph(Sine(amplitude=80.0, frequency=5.0, unit="N"), 0.1, x0=0.004)
    a = hf.Simulation(g).run()
    b = hf.Simulation(g, interpret=True).run()
    for key in a.signals:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
