"""HardeningSpringDevice and DetentSwitch (blocks/devices.py) against closed forms."""
import math

import numpy as np
import pytest

import hapflow as hf
from hapflow.block import ParamError
from hapflow.blocks import Constant, HardeningSpringDevice, Sine

RATE = 4000.0
# seed 000: 0.581 kg, 11.5 N s/m; springs ks = 2400 N/m in series with kc = 800 N/m
# below the 12 mm transition (KIN = ks kc / (ks + kc) = 600 N/m), ks alone above
M, B, KS, KC, XT, FC, FV = 0.581, 11.5, 2400.0, 800.0, 0.012, 0.3, 1e-3
KIN, KOUT = KS * KC / (KS + KC), KS


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


# ---------------------------------------------------------------- hardening device: truth
def assembly(d, kser=KIN, ks=KOUT, xt=XT):
    """One compression-only assembly (ks in series with kc, kc bottoming at xt)."""
    d = np.asarray(d, dtype=float)
    return np.where(d <= 0, 0.0, np.where(d <= xt, kser * d, kser * xt + ks * (d - xt)))


def kernel_force(dev, x, v):
    """device_force from the block's own output kernel at state (x, v)."""
    p = dev.pack()
    out = [np.zeros(1) for _ in range(4)]
    HardeningSpringDevice.output(0.0, np.array([x, v]), np.zeros(0), np.zeros(0, dtype=np.int64),
                                 p, np.zeros(1), *out)
    return out[3][0]


def test_series_rates_from_ks_and_kc():
    dev = HardeningSpringDevice()
    assert dev.rates() == (pytest.approx(600.0, rel=1e-15), 2400.0)
    alias = HardeningSpringDevice(k_inner=600.0, k_outer=2400.0)
    old = HardeningSpringDevice(k_inner=1500.0, k_outer=6000.0, x_transition=0.01)
    same = HardeningSpringDevice(k_stiff=6000.0, k_compliant=2000.0, x_transition=0.01)
    for a, b in ((alias, dev), (old, same)):          # the same device to the kernels
        for x, v in ((0.005, 0.1), (0.02, -0.2), (-0.03, 0.0)):
            assert kernel_force(a, x, v) == pytest.approx(kernel_force(b, x, v), rel=1e-15)
    with pytest.raises(ParamError, match="k_inner"):
        HardeningSpringDevice(k_inner=600.0)
    with pytest.raises(ParamError, match="k_outer"):
        dev.set("k_outer", 100.0)


@pytest.mark.parametrize("preload", [0.0, 0.004, -0.002])
def test_spring_force_closed_form_with_preload(preload):
    dev = HardeningSpringDevice(preload=preload)
    x = np.linspace(-0.03, 0.03, 601)
    expected = assembly(preload + x) - assembly(preload - x)
    np.testing.assert_allclose(dev.spring_force(x), expected, rtol=1e-13, atol=1e-13)
    nf = HardeningSpringDevice(preload=preload, friction=0.0, damping=0.0)
    np.testing.assert_allclose([kernel_force(nf, xi, 0.0) for xi in x[::20]], expected[::20],
                               rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("direction", [1, -1])
@pytest.mark.parametrize("preload", [0.0, 0.004])
def test_impedance_is_consistent_with_the_force_law(direction, preload):
    """m a + b v + k x + F0 equals the device's force (kernel) at speed, for any a."""
    dev = HardeningSpringDevice(preload=preload)
    x = np.concatenate([np.linspace(-0.03, 0.03, 241), [0.0, XT, -XT, XT - preload]])
    truth = dev.impedance(x, direction)
    v, a = direction * 0.05, 3.7                  # tanh(v / v_f) = +-1 exactly at 50 v_f
    model = truth["m"] * a + truth["b"] * v + truth["k"] * x + truth["F0"]
    applied = np.array([kernel_force(dev, xi, v) for xi in x]) + M * a
    np.testing.assert_allclose(model, applied, rtol=1e-12, atol=1e-12)
    assert set(truth) == {"m", "b", "k", "F0"}
    np.testing.assert_array_equal(truth["m"], M)
    np.testing.assert_array_equal(truth["b"], B)


def test_impedance_stiffness_is_the_slope_of_the_spring():
    dev = HardeningSpringDevice(preload=0.003)
    x = np.linspace(-0.028, 0.028, 113) + 1.234e-5     # off the corners
    h = 1e-7
    slope = (dev.spring_force(x + h) - dev.spring_force(x - h)) / (2 * h)
    k = dev.impedance(x, 1)["k"]
    np.testing.assert_allclose(k, slope, rtol=1e-6)
    # at the corners: the mean of the one-sided slopes
    zero = HardeningSpringDevice()
    assert zero.impedance(np.array([XT]), 1)["k"][0] == pytest.approx(0.5 * (KIN + KOUT))
    assert zero.impedance(np.array([0.0]), -1)["k"][0] == pytest.approx(KIN)
    # stiffness seen by seed 002's model: 600 N/m inside +-12 mm, 2400 N/m outside
    np.testing.assert_allclose(zero.impedance(np.array([-0.02, -0.005, 0.005, 0.02]), 1)["k"],
                               [KOUT, KIN, KIN, KOUT])


def test_impedance_offset_lumps_spring_offset_and_friction():
    dev = HardeningSpringDevice()
    x = np.array([-0.02, 0.0, 0.02])
    up, down = dev.impedance(x, 1)["F0"], dev.impedance(x, -1)["F0"]
    np.testing.assert_allclose(up - down, 2 * FC)
    # F0 = F_s(x) - k x: the spring offset of the outer segment is (KIN - KOUT) XT sign(x)
    np.testing.assert_allclose(0.5 * (up + down), [-(KIN - KOUT) * XT, 0.0, (KIN - KOUT) * XT],
                               atol=1e-12)
    with pytest.raises(ValueError, match="direction"):
        dev.impedance(x, 0)


def test_static_equilibrium_with_preload_matches_closed_form():
    from scipy.optimize import brentq
    d0 = 0.004
    for force in (3.0, 10.0, -25.0):
        expected = brentq(lambda z: assembly(d0 + z) - assembly(d0 - z) - force, -0.05, 0.05,
                          xtol=1e-15)
        r = hf.Simulation(device_graph(Constant(value=force, unit="N"), 4.0, preload=d0)).run()
        assert r["dev.pos"][-1, 0] == pytest.approx(expected, abs=1e-9)
    # inside +-d0 both assemblies act: 2 KIN
    assert brentq(lambda z: assembly(d0 + z) - assembly(d0 - z) - 3.0, -0.05, 0.05) \
        == pytest.approx(3.0 / (2 * KIN))


# ---------------------------------------------------------------- seed 000's stiffening beyond 20 mm
XH, KH = 0.020, 4800.0      # third rate beyond 20 mm: seed 000 fig. 9's shape (its rates are lost)


def stiffened(d):
    """One assembly with the third rate: k_ser to XT, KS to XH, KH beyond."""
    d = np.asarray(d, dtype=float)
    return assembly(d) + np.where(d > XH, (KH - KOUT) * (d - XH), 0.0)


def test_stiffening_beyond_20_mm_follows_the_three_piece_law():
    dev = HardeningSpringDevice(x_stiffen=XH, k_stiffened=KH, friction=0.0, damping=0.0)
    x = np.linspace(-0.03, 0.03, 601)
    expected = stiffened(x) - stiffened(-x)
    np.testing.assert_allclose(dev.spring_force(x), expected, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose([kernel_force(dev, xi, 0.0) for xi in x[::20]], expected[::20],
                               rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(dev.impedance(np.array([-0.025, -0.015, 0.005, 0.015, 0.025]), 1)["k"],
                               [KH, KOUT, KIN, KOUT, KH])
    assert dev.spring_force(np.array([XH]))[0] == pytest.approx(KIN * XT + KOUT * (XH - XT))
    default = HardeningSpringDevice()                      # off by default: two rates only
    np.testing.assert_array_equal(default.spring_force(x), assembly(x) - assembly(-x))
    assert default.stiffening() == (math.inf, KOUT)


@pytest.mark.parametrize("force", [40.0, -33.0])
def test_static_equilibrium_beyond_the_stiffening(force):
    r = hf.Simulation(device_graph(Constant(value=force, unit="N"), 4.0,
                                   x_stiffen=XH, k_stiffened=KH)).run()
    at_xh = KIN * XT + KOUT * (XH - XT)                    # 26.4 N
    expected = math.copysign(XH + (abs(force) - at_xh) / KH, force)
    assert r["dev.pos"][-1, 0] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("params, name", [({"x_stiffen": 0.02}, "x_stiffen"),
                                          ({"k_stiffened": 4800.0}, "k_stiffened"),
                                          ({"x_stiffen": 0.01, "k_stiffened": 4800.0},
                                           "x_stiffen")])
def test_stiffening_needs_both_values_beyond_the_transition(params, name):
    with pytest.raises(ParamError, match=name):
        HardeningSpringDevice(**params)


# ---------------------------------------------------------------- detent switch
from hapflow.blocks import DetentSwitch  # noqa: E402

SW = dict(m2=0.05, m1=0.1, k0=100.0, A=3.0, pitch=0.010, Fp=0.4, Fn=0.25, g=0.25e-3, kk=5e4,
          xs=0.013, ks=2e4)


def switch_static(x2):
    """Spring + detent + end-stop spring (N), written out independently of the block."""
    x2 = np.asarray(x2, dtype=float)
    f = SW["k0"] * x2 + SW["A"] * np.sin(2 * np.pi * x2 / SW["pitch"])
    return f + SW["ks"] * (np.maximum(x2 - SW["xs"], 0) + np.minimum(x2 + SW["xs"], 0))


def newton(f, df, x):
    for _ in range(60):
        x = x - f(x) / df(x)
    return x


def test_detent_equilibria_are_the_zeros_of_the_detent_law():
    w = 2 * np.pi / SW["pitch"]
    f = lambda z: SW["k0"] * z + SW["A"] * np.sin(w * z)              # noqa: E731
    df = lambda z: SW["k0"] + SW["A"] * w * np.cos(w * z)             # noqa: E731
    stable, unstable = DetentSwitch().equilibria()
    right = newton(f, df, 0.0095)
    crest = newton(f, df, 0.0052)
    np.testing.assert_allclose(stable, [-right, 0.0, right], atol=1e-12)
    np.testing.assert_allclose(unstable, [-crest, crest], atol=1e-12)
    assert right == pytest.approx(0.0094879, abs=1e-6)
    assert crest == pytest.approx(0.0052817, abs=1e-6)


def switch_graph(force, duration, amplitude=0.0, frequency=4.0, **params):
    """The switch pushed by ``force + amplitude sin(2 pi frequency t)`` (one structure)."""
    g = hf.Graph(name="switch", rate=RATE, duration=duration)
    g.add("src", Sine(amplitude=amplitude, frequency=frequency, offset=force, unit="N"))
    g.add("dev", DetentSwitch(**params))
    g.wire("src.y -> dev.force")
    g.record("dev.pos", "dev.vel", "dev.acc", "dev.device_force", "dev.lever_pos")
    return g


@pytest.fixture(scope="module")
def switch_sim_factory():
    """Simulations of the switch under a constant force (one structure: compiled once)."""
    def make(force=0.0, duration=3.0, **params):
        return hf.Simulation(switch_graph(force, duration, **params))
    return make


@pytest.mark.parametrize("start, target", [(0.0125, 1), (0.0061, 1), (0.0035, 0), (-0.0045, 0),
                                           (-0.0058, -1), (-0.011, -1)])
def test_mechanism_settles_in_the_nearest_detent(switch_sim_factory, start, target):
    stable, _ = DetentSwitch().equilibria()
    sim = switch_sim_factory(friction_pos=0.0, friction_neg=0.0, x0=start)
    r = sim.run()
    assert r["dev.lever_pos"][-1, 0] == pytest.approx(stable[target + 1], abs=1e-5)


def test_end_stop_static_push_matches_closed_form(switch_sim_factory):
    """20 N on the handle: mechanism at static_force(x2) = 20 N, handle g + 20/k_k ahead."""
    from scipy.optimize import brentq
    sim = switch_sim_factory(force=20.0)
    r = sim.run()
    x2 = brentq(lambda z: switch_static(z) - 20.0, 0.0, 0.02, xtol=1e-15)
    assert x2 > SW["xs"]
    assert r["dev.lever_pos"][-1, 0] == pytest.approx(x2, abs=1e-8)
    assert r["dev.pos"][-1, 0] == pytest.approx(x2 + SW["g"] + 20.0 / SW["kk"], abs=1e-8)
    assert r["dev.device_force"][-1, 0] == pytest.approx(20.0, abs=1e-5)


def switch_kernel(dev, state):
    p = dev.pack()
    out = [np.zeros(1) for _ in range(5)]
    DetentSwitch.output(0.0, np.asarray(state, dtype=float), np.zeros(0),
                        np.zeros(0, dtype=np.int64), p, np.zeros(1), *out)
    dx = np.zeros(4)
    DetentSwitch.deriv(0.0, np.asarray(state, dtype=float), np.zeros(0),
                       np.zeros(0, dtype=np.int64), p, np.zeros(1), dx)
    return out[3][0], dx


@pytest.mark.parametrize("direction", [1, -1])
def test_switch_impedance_is_consistent_with_the_kernel(direction):
    """On each contact branch the kernel's contact force is k x + F0 and the mechanism
    balances it with its own force law; in the free branch there is no contact."""
    dev = DetentSwitch()
    x = np.linspace(-0.0135, 0.0135, 541)
    q = dev.quasi_static(x, direction)
    truth = dev.impedance(x, direction)
    v = 0.05 * direction
    for xi, x2, side, k, f0, b in zip(x, q["x2"], q["side"], truth["k"], truth["F0"], truth["b"]):
        if side == 0:
            assert k == 0.0 and f0 == 0.0
            continue
        fk, dx = switch_kernel(dev, [xi, v, x2, v])
        assert fk == pytest.approx(k * xi + f0, abs=1e-9)
        assert np.sign(fk) == side                               # the wall that is touching
        # the mechanism's acceleration is then -b v / m2: the static forces balance
        # (beyond a stop only while its damper does not try to pull: it is unilateral)
        if abs(x2) < SW["xs"]:
            assert dx[3] == pytest.approx(-b * v / SW["m2"], abs=1e-6)
    assert np.count_nonzero(q["side"] == 0) < x.size // 5


def test_switch_hysteresis_from_play_and_friction():
    """Rigid-contact limit: F(x, d) = G(x - s_d g) + d F_d with s_d the wall in contact, so
    F(x, +) - F(x, -) = G(x - s_+ g) - G(x - s_- g) + F+ + F-."""
    dev = DetentSwitch()
    x = np.linspace(-0.0135, 0.0135, 271)
    up, down = dev.impedance(x, 1), dev.impedance(x, -1)
    qu, qd = dev.quasi_static(x, 1), dev.quasi_static(x, -1)
    both = (qu["side"] != 0) & (qd["side"] != 0)
    assert both.sum() > 200
    f_up = (up["k"] * x + up["F0"])[both]
    f_down = (down["k"] * x + down["F0"])[both]
    rigid = (switch_static(x - qu["side"] * SW["g"]) - switch_static(x - qd["side"] * SW["g"])
             + SW["Fp"] + SW["Fn"])[both]
    # the contact compliance moves each branch by G / k_k: at most |G'| |G| / k_k
    slack = 2 * (1985.0 * 25.0 / SW["kk"] + 0.02)
    np.testing.assert_allclose(f_up - f_down, rigid, atol=slack)
    # where the handle pushes the mechanism both ways the loop is dissipative
    pushing = (qu["side"] == 1) & (qd["side"] == -1)
    assert pushing.sum() >= 5
    assert np.all((up["k"] * x + up["F0"] - down["k"] * x - down["F0"])[pushing] > 0)
    # k is the slope of the static force along a branch (finite differences)
    k_fd = np.gradient(up["k"] * x + up["F0"], x)
    smooth = (np.abs(np.gradient(qu["side"], x)) == 0) & (qu["side"] != 0)
    smooth &= np.abs(np.abs(qu["x2"]) - SW["xs"]) > 3e-4
    smooth[[0, -1]] = False
    assert smooth.sum() > 150
    np.testing.assert_allclose(up["k"][smooth], k_fd[smooth], rtol=0.05, atol=30.0)


def test_switch_probed_by_the_rig_matches_its_truth():
    """turn_signal.yaml, its slow first 12 s: the force the motor applies follows
    m a + b v + k x + F0 of the quasi-static truth (snaps and contact ringing aside)."""
    from pathlib import Path
    g = hf.load(Path(__file__).resolve().parents[1] / "graphs" / "turn_signal.yaml")
    r = hf.Simulation(g).run(12.0)
    dev = g.nodes["dev"].block
    x, v, a = (r[f"dev.{k}"][:, 0] for k in ("pos", "vel", "acc"))
    force = r["motor.force"][:, 0]
    predicted = np.full(x.shape, np.nan)
    for d in (1, -1):
        sel = np.sign(v) == d
        t = dev.impedance(x[sel], d)
        predicted[sel] = t["m"] * a[sel] + t["b"] * v[sel] + t["k"] * x[sel] + t["F0"]
    moving = (np.abs(v) > 0.01) & (r.time > 2.0)
    err = np.abs(force - predicted)[moving]
    assert np.median(err) < 0.1                         # N, of a +-6 N profile
    assert np.percentile(err, 90) < 0.4
    rms = np.sqrt(np.mean((r["traj.pos"][:, 0] - x)[r.time > 2.0] ** 2))
    assert rms < 2e-4                                   # tracking: 0.2 mm of 13.5 mm


def test_switch_compiled_equals_interpreted():
    g = switch_graph(0.5, 0.1, amplitude=6.0, x0=0.004)
    a = hf.Simulation(g).run()
    b = hf.Simulation(g, interpret=True).run()
    for key in a.signals:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("name, value", [("mass", 0.0), ("detent_pitch", 0.0), ("backlash", -1e-3),
                                         ("contact_stiffness", 1000.0)])
def test_switch_rejects_bad_parameters(name, value):
    with pytest.raises(ParamError, match=name):
        DetentSwitch(**{name: value})
