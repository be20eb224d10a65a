"""PIDFeedforward (blocks/control.py) against closed forms and scipy."""
import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.signal import cont2discrete, lfilter

import hapflow as hf
from hapflow.block import ParamError
from hapflow.blocks import (Constant, Encoder, HardeningSpringDevice, Integrator, LinearMotor,
                            PIDFeedforward, Sine, Step)


def pid_graph(pid, ref=None, vel=None, acc=None, meas=None, rate=1000.0, duration=1.0,
              pid_rate=None):
    """PID driven by sources (zero constants where none is given), recording its output."""
    g = hf.Graph(name="pid", rate=rate, duration=duration)
    g.add("pid", pid, rate=pid_rate)
    for port, src, unit in (("ref_pos", ref, "m"), ("ref_vel", vel, "m/s"),
                            ("ref_acc", acc, "m/s^2"), ("meas_pos", meas, "m")):
        if src is None:
            name = f"zero_{port}"
            g.add(name, Constant(value=0.0, unit=unit))
        else:
            name = f"src_{port}"
            g.add(name, src)
        g.wire(f"{name}.y -> pid.{port}")
    g.record("pid.force_cmd")
    return g


def pid_state(sim):
    slot = sim.layout.blocks["pid"]["d"]
    return sim.arrays["d"][slot.start:slot.stop]


def test_proportional_only_is_kp_times_error():
    ref = Sine(amplitude=0.01, frequency=3.0, phase=0.4, unit="m")
    meas = Sine(amplitude=0.004, frequency=5.0, unit="m")
    g = pid_graph(PIDFeedforward(kp=1234.5, limit=1e6), ref=ref, meas=meas)
    g.record("src_ref_pos.y", "src_meas_pos.y")
    r = hf.Simulation(g).run()
    e = r["src_ref_pos.y"][:, 0] - r["src_meas_pos.y"][:, 0]
    np.testing.assert_array_equal(r["pid.force_cmd"][:, 0], 1234.5 * e)


def test_proportional_loop_on_an_integrator_matches_discrete_closed_form():
    """x' = u, u held over each tick: x[k] = r (1 - (1 - h kp)^k)."""
    rate, kp, r_ = 1000.0, 100.0, 0.02
    g = hf.Graph(name="p_loop", rate=rate, duration=0.2)
    g.add("ref", Constant(value=r_, unit="m"))
    g.add("zv", Constant(value=0.0, unit="m/s"))
    g.add("za", Constant(value=0.0, unit="m/s^2"))
    g.add("pid", PIDFeedforward(kp=kp, limit=100.0))
    g.add("plant", Integrator(unit="m"))
    for w in ("ref.y -> pid.ref_pos", "zv.y -> pid.ref_vel", "za.y -> pid.ref_acc",
              "plant.y -> pid.meas_pos", "pid.force_cmd -> plant.u"):
        g.wire(w)
    g.record("plant.y")
    r = hf.Simulation(g).run()
    k = np.arange(r.time.size)
    exact = r_ * (1.0 - (1.0 - kp / rate) ** k)
    np.testing.assert_allclose(r["plant.y"][:, 0], exact, rtol=0, atol=1e-15)


def test_feed_forward_terms_are_exact():
    mff, fff, vs = 0.581, 0.3, 2e-3
    ref = Sine(amplitude=0.02, frequency=2.5, phase=0.1, unit="m")
    g = hf.Graph(name="ff", rate=4000.0, duration=1.0)
    g.add("ref", ref)
    g.add("pid", PIDFeedforward(kp=5000.0, ki=300.0, kd=40.0, mass_ff=mff, friction_ff=fff,
                                friction_smooth_vel=vs, limit=1e3))
    for w in ("ref.y -> pid.ref_pos", "ref.dy -> pid.ref_vel", "ref.ddy -> pid.ref_acc",
              "ref.y -> pid.meas_pos"):
        g.wire(w)
    g.record("pid.force_cmd", "ref.dy", "ref.ddy")
    r = hf.Simulation(g).run()
    vel, acc = r["ref.dy"][:, 0], r["ref.ddy"][:, 0]
    # zero error: no P or I; the derivative term is kd (ref_vel - vf) with vf the filtered
    # measured velocity, so remove it by comparing against the run with kd = 0 below
    sim = hf.Simulation(g)
    sim.set("pid.kd", 0.0)
    r0 = sim.run()
    expected = np.array([mff * a + fff * math.tanh(v / vs) for v, a in zip(vel, acc)])
    np.testing.assert_allclose(r0["pid.force_cmd"][:, 0], expected, rtol=1e-15, atol=1e-15)
    assert np.max(np.abs(r["pid.force_cmd"][:, 0] - expected)) > 1e-3   # kd does act


def test_derivative_filter_matches_lfilter_of_its_discretisation():
    rate, fc = 4000.0, 150.0
    meas = Sine(amplitude=0.003, frequency=17.0, phase=0.7, offset=0.001, unit="m")
    g = pid_graph(PIDFeedforward(kd=1.0, deriv_cutoff=fc, limit=1e3),
                  meas=meas, rate=rate, duration=0.5)
    g.record("src_meas_pos.y")
    r = hf.Simulation(g).run()
    x = r["src_meas_pos.y"][:, 0]
    ts = 1.0 / rate
    a = math.exp(-2.0 * math.pi * fc * ts)
    b = (1.0 - a) / ts
    # first sample: no previous measurement, velocity taken as 0 (= history equal to x[0])
    vf = lfilter([b, -b], [1.0, -a], x - x[0])
    np.testing.assert_allclose(-r["pid.force_cmd"][:, 0], vf, rtol=1e-9, atol=1e-12)
    # well below the cut-off the filtered velocity approaches the true one
    w = 2 * math.pi * 17.0
    true_v = 0.003 * w * np.cos(w * r.time + 0.7)
    late = r.time > 0.1
    lag = np.max(np.abs(vf[late] - true_v[late])) / (0.003 * w)
    assert lag < 1.5 * (17.0 / fc + w * ts / 2)     # filter + half-sample phase lag


def test_no_derivative_kick_on_a_reference_step():
    g = pid_graph(PIDFeedforward(kd=50.0), ref=Step(time=0.1, initial=0.0, final=0.01, unit="m"),
                  rate=4000.0, duration=0.2)
    r = hf.Simulation(g).run()
    np.testing.assert_array_equal(r["pid.force_cmd"][:, 0], 0.0)


def test_integrator_stops_when_saturated_and_recovers_at_once():
    """ref 1 m then -1 m at t = 1 s, meas 0: u = kp e + ki I clipped to 50 N."""
    rate, kp, ki, lim = 1000.0, 10.0, 100.0, 50.0
    g = pid_graph(PIDFeedforward(kp=kp, ki=ki, limit=lim),
                  ref=Step(time=1.0, initial=1.0, final=-1.0, unit="m"), rate=rate,
                  duration=2.0)
    sim = hf.Simulation(g)
    r = sim.run()
    u = r["pid.force_cmd"][:, 0]
    # reference recurrence (same arithmetic as the block)
    h, integ, expected = 1.0 / rate, 0.0, []
    for t in r.time:
        e = 1.0 if t < 1.0 else -1.0
        raw = kp * e + ki * integ
        expected.append(min(max(raw, -lim), lim))
        if not ((raw > lim and e > 0) or (raw < -lim and e < 0)):
            integ += h * e
    np.testing.assert_allclose(u, expected, rtol=0, atol=1e-12)
    before = r.time < 1.0
    frozen = (lim - kp) / ki
    # saturated for most of the first second, with the integral frozen just past the limit
    assert np.mean(u[before] == lim) > 0.5
    # after the reversal the integral runs down until the output saturates at -limit,
    # where it freezes again, symmetrically
    assert -(frozen + 2 * h) < pid_state(sim)[0] < -frozen
    assert u[-1] == -lim
    # right after the reversal the output leaves saturation (no wound-up integral)
    k1 = np.searchsorted(r.time, 1.0)
    assert u[k1] == pytest.approx(-kp + ki * (frozen + h), abs=ki * h)
    assert -lim < u[k1] < lim


def test_integrator_keeps_integrating_when_error_opposes_saturation():
    """Feed-forward saturates the output upwards while the error is negative: I decreases."""
    rate = 1000.0
    g = pid_graph(PIDFeedforward(kp=1.0, ki=10.0, mass_ff=1.0, limit=5.0),
                  ref=Constant(value=-0.1, unit="m"), acc=Constant(value=100.0, unit="m/s^2"),
                  rate=rate, duration=0.5)
    sim = hf.Simulation(g)
    r = sim.run()
    assert np.all(r["pid.force_cmd"][:, 0] == 5.0)
    assert pid_state(sim)[0] == pytest.approx(-0.1 * 0.5, rel=1e-12)


def test_held_at_a_slower_rate():
    """At 1 kHz in a 4 kHz graph the output changes only at every 4th tick."""
    ref = Sine(amplitude=0.01, frequency=5.0, unit="m")
    g = pid_graph(PIDFeedforward(kp=1000.0, ki=100.0), ref=ref,
                  rate=4000.0, duration=0.1, pid_rate=1000.0)
    g.record("src_ref_pos.y")
    r = hf.Simulation(g).run()
    u = r["pid.force_cmd"][:, 0]
    hits = np.arange(u.size) // 4 * 4
    np.testing.assert_array_equal(u, u[hits])
    assert len(np.unique(u)) > 20
    # the integral uses the block's sample time (1 ms), not the base tick
    ref_at_hits = r["src_ref_pos.y"][::4, 0]
    integ = np.concatenate([[0.0], np.cumsum(ref_at_hits)[:-1]]) * 1e-3
    np.testing.assert_allclose(u[::4], 1000.0 * ref_at_hits + 100.0 * integ, rtol=1e-12, atol=1e-15)


def test_closed_loop_compiled_equals_interpreted():
    g = hf.Graph(name="rig_loop", rate=4000.0, duration=0.25)
    g.add("ref", Sine(amplitude=0.012, frequency=3.0, unit="m"))
    g.add("enc", Encoder())
    g.add("pid", PIDFeedforward(kp=20000.0, ki=1e5, kd=150.0, deriv_cutoff=300.0,
                                mass_ff=0.581, friction_ff=0.3))
    g.add("motor", LinearMotor())
    g.add("dev", HardeningSpringDevice())
    for w in ("ref.y -> pid.ref_pos", "ref.dy -> pid.ref_vel", "ref.ddy -> pid.ref_acc",
              "enc.pos -> pid.meas_pos", "pid.force_cmd -> motor.force_cmd",
              "motor.force -> dev.force", "dev.pos -> enc.true_pos"):
        g.wire(w)
    g.record("dev.pos", "pid.force_cmd", "enc.counts")
    a = hf.Simulation(g).run()
    b = hf.Simulation(g, interpret=True).run()
    for key in a.signals:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert np.max(np.abs(a["dev.pos"][:, 0])) > 0.005       # it moved


@pytest.mark.parametrize("name, value", [("kp", -1.0), ("limit", 0.0), ("deriv_cutoff", 0.0),
                                         ("friction_smooth_vel", 0.0)])
def test_pid_rejects_bad_parameters(name, value):
    with pytest.raises(ParamError, match=name):
        PIDFeedforward(**{name: value})


def test_acceleration_feedback_term_is_exact():
    """With accel_feedback the command gains ka (ref_acc - meas_acc); without it the port is absent."""
    assert "meas_acc" not in PIDFeedforward().inputs
    g = hf.Graph(rate=1000.0, duration=0.05)
    for name, value, unit in (("r", 0.0, "m"), ("rv", 0.0, "m/s"), ("ra", 2.0, "m/s^2"),
                              ("mp", 0.0, "m"), ("ma", -0.5, "m/s^2")):
        g.add(name, Constant(value=value, unit=unit))
    g.add("pid", PIDFeedforward(accel_feedback=True, ka=0.3, mass_ff=0.1, limit=100.0))
    for src, port in (("r", "ref_pos"), ("rv", "ref_vel"), ("ra", "ref_acc"), ("mp", "meas_pos"),
                      ("ma", "meas_acc")):
        g.wire(f"{src}.y -> pid.{port}")
    g.record("pid.force_cmd")
    r = hf.Simulation(g).run()
    np.testing.assert_array_equal(r["pid.force_cmd"][:, 0], 0.1 * 2.0 + 0.3 * (2.0 - (-0.5)))


# ---------------------------------------------------------------- options (Simulink's choices)
SCIPY_METHOD = {"forward_euler": "euler", "backward_euler": "backward_diff",
                "trapezoidal": "bilinear"}


def run_pid(pid, ref=None, meas=None, rate=1000.0, duration=0.5):
    """Interpreted run of ``pid`` between sources (one kernel per block type, no graph compile:
    every option is another structure); returns (time, e, force_cmd, meas)."""
    g = pid_graph(pid, ref=ref, meas=meas, rate=rate, duration=duration)
    g.record(*[f"src_{p}.y" for p, s in (("ref_pos", ref), ("meas_pos", meas)) if s is not None])
    r = hf.Simulation(g, interpret=True).run()
    zero = np.zeros(r.time.size)
    x_ref = r["src_ref_pos.y"][:, 0] if ref is not None else zero
    x_meas = r["src_meas_pos.y"][:, 0] if meas is not None else zero
    return r.time, x_ref - x_meas, r["pid.force_cmd"][:, 0], x_meas


@pytest.mark.parametrize("method", list(SCIPY_METHOD))
def test_integrator_methods_match_scipy_discretisations_of_1_over_s(method):
    """No anti-windup: ki I is ki/s discretised by scipy's euler, backward_diff, bilinear.
    (Giving backward_euler the forward-Euler weights in INTEGRATOR fails its case.)"""
    rate, ki = 1000.0, 37.0
    ref = Sine(amplitude=0.01, frequency=7.0, phase=0.3, offset=0.002, unit="m")
    _, e, u, _ = run_pid(PIDFeedforward(ki=ki, integrator=method, anti_windup="none", limit=1e6),
                         ref=ref, rate=rate)
    num, den, _ = cont2discrete(([ki], [1.0, 0.0]), 1.0 / rate, method=SCIPY_METHOD[method])
    np.testing.assert_allclose(u, lfilter(num.ravel(), den, e), rtol=1e-12, atol=1e-15)
    assert abs(u[-1]) > 1e-3


@pytest.mark.parametrize("method", list(SCIPY_METHOD))
def test_derivative_filter_methods_match_scipy_discretisations(method):
    """kd vf is kd N s / (s + N) of the measurement, discretised by scipy (the first sample
    sees no velocity: the history equals meas[0]).  The backward-Euler pole of a 200 Hz
    filter at 4 kHz is 1 / (1 + N Ts), not the matched exp(-N Ts) (173.9 Hz-equivalent)."""
    rate, fc, kd = 4000.0, 200.0, 3.0
    meas = Sine(amplitude=0.003, frequency=37.0, phase=0.7, offset=0.001, unit="m")
    _, _, u, y = run_pid(PIDFeedforward(kd=kd, deriv_cutoff=fc, deriv_filter=method, limit=1e6),
                         meas=meas, rate=rate, duration=0.25)
    n = 2.0 * math.pi * fc
    num, den, _ = cont2discrete(([kd * n, 0.0], [1.0, n]), 1.0 / rate, method=SCIPY_METHOD[method])
    np.testing.assert_allclose(-u, lfilter(num.ravel(), den, y - y[0]), rtol=1e-9, atol=1e-12)


def test_forward_euler_derivative_filter_above_its_stability_limit_is_refused():
    g = pid_graph(PIDFeedforward(kd=1.0, deriv_cutoff=1300.0, deriv_filter="forward_euler"),
                  rate=4000.0)
    with pytest.raises(hf.GraphError, match=r"deriv_cutoff.*below 1 / \(pi Ts\) = 1273.2"):
        g.check()


def reference_pid(e, ki, kp, limit, method, windup, kb, ts):
    """The docstring's difference equations, solved naively: the integral by its method, the
    clamping decision on u computed with w = e, back-calculation's implicit u by brentq."""
    now, nxt = {"forward_euler": (0.0, 1.0), "backward_euler": (1.0, 0.0),
                "trapezoidal": (0.5, 0.5)}[method]
    i_prev, w_prev, out = 0.0, 0.0, []
    for ek in e:
        def integral(w):
            return i_prev + ts * (nxt * w_prev + now * w)

        def unsat(w):
            return kp * ek + ki * integral(w)
        w = ek
        u = unsat(w)
        if windup == "clamping" and ((u > limit and ek > 0) or (u < -limit and ek < 0)):
            w = 0.0
            u = unsat(w)
        elif windup == "back_calculation" and abs(u) > limit:
            def track(v):            # w as a function of the unsaturated command v
                return ek + kb / ki * (np.clip(v, -limit, limit) - v)
            u = brentq(lambda v: v - unsat(track(v)), -1e6, 1e6, xtol=1e-14, rtol=1e-15)
            w = track(u)
        out.append(min(max(u, -limit), limit))
        i_prev, w_prev = integral(w), w
    return np.array(out)


@pytest.mark.parametrize("method", list(SCIPY_METHOD))
@pytest.mark.parametrize("windup", ["none", "clamping", "back_calculation"])
def test_anti_windup_modes_follow_their_difference_equations(method, windup):
    """A reference of +-1 m into kp 10, ki 100, limit 5 N saturates for long stretches.
    (Dropping the implicit solve of back-calculation, h = 0 in the kernel, fails the
    backward_euler and trapezoidal cases by ~0.05 N.)"""
    rate, kp, ki, lim, kb = 1000.0, 10.0, 100.0, 5.0, 30.0
    ref = Sine(amplitude=1.0, frequency=2.0, phase=0.1, unit="m")
    _, e, u, _ = run_pid(PIDFeedforward(kp=kp, ki=ki, limit=lim, kb=kb, integrator=method,
                                        anti_windup=windup), ref=ref, rate=rate, duration=1.0)
    expected = reference_pid(e, ki, kp, lim, method, windup, kb, 1.0 / rate)
    np.testing.assert_allclose(u, expected, rtol=0, atol=1e-11)
    assert np.mean(np.abs(u) == lim) > 0.2                  # it saturates ...
    assert np.mean(np.abs(u) < lim) > 0.05                  # ... and leaves saturation


def test_anti_windup_modes_differ_after_saturation():
    """The same saturating run: without anti-windup the integral winds up and the output stays
    saturated longest; back-calculation with a large gain recovers no later than clamping."""
    ref = Step(time=0.2, initial=1.0, final=-0.2, unit="m")
    stuck = {}
    for windup in ("none", "clamping", "back_calculation"):
        t, _, u, _ = run_pid(PIDFeedforward(kp=10.0, ki=100.0, limit=5.0, kb=200.0,
                                            anti_windup=windup), ref=ref, duration=0.6)
        stuck[windup] = np.sum((t >= 0.2) & (u == 5.0))
    assert stuck["none"] > stuck["clamping"] + 50
    assert stuck["back_calculation"] <= stuck["clamping"]


def test_optional_reference_inputs_read_zero_when_unwired():
    """A pure position loop wires ref_pos and meas_pos only: the same command as with zero
    constants on ref_vel and ref_acc; the layout gives the unwired inputs slots of zeros."""
    pid = dict(kp=300.0, ki=50.0, kd=4.0, mass_ff=0.5, friction_ff=0.2, limit=100.0)
    ref = Sine(amplitude=0.01, frequency=3.0, unit="m")
    meas = Sine(amplitude=0.004, frequency=5.0, unit="m")
    wired = hf.Simulation(pid_graph(PIDFeedforward(**pid), ref=ref, meas=meas)).run()
    g = hf.Graph(name="pid_bare", rate=1000.0, duration=1.0)
    g.add("src_ref_pos", Sine(amplitude=0.01, frequency=3.0, unit="m"))
    g.add("src_meas_pos", Sine(amplitude=0.004, frequency=5.0, unit="m"))
    g.add("pid", PIDFeedforward(**pid))
    g.wire("src_ref_pos.y -> pid.ref_pos")
    g.wire("src_meas_pos.y -> pid.meas_pos")
    g.record("pid.force_cmd")
    sim = hf.Simulation(g)
    bare = sim.run()
    np.testing.assert_array_equal(bare["pid.force_cmd"], wired["pid.force_cmd"])
    assert np.max(np.abs(bare["pid.force_cmd"])) > 1.0
    for port in ("ref_vel", "ref_acc"):
        slot = sim.layout.inputs[("pid", port)]
        assert slot not in sim.layout.signals.values()
        assert sim.arrays[slot.array][slot.start:slot.stop].tolist() == [0.0]


def test_an_unwired_required_input_is_still_an_error():
    g = hf.Graph(rate=1000.0)
    g.add("r", Constant(value=0.0, unit="m"))
    g.add("pid", PIDFeedforward())
    g.wire("r.y -> pid.ref_pos")
    with pytest.raises(hf.GraphError, match="input pid.meas_pos .* has no driver"):
        g.check()
