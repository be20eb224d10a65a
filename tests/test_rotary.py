"""DCMotor and RotaryLoad (blocks/rotary.py) against closed forms."""
import math

import numpy as np
import pytest
from scipy.optimize import brentq

import hapflow as hf
from hapflow.block import ParamError
from hapflow.blocks import Constant, DCMotor, RotaryLoad
from hapflow.units import dimension

RATE = 200e3            # s: RK4 at R/L h = 0.017 is within 1e-9 of the exact response
MOTOR = dict(resistance=1.2, inductance=4e-4, torque_constant=0.05, emf_constant=0.052,
             inertia=1.4e-5, damping=2e-6, friction=0.0, gear_ratio=5.0, efficiency=0.8,
             load_inertia=2e-4)


def motor_graph(motor, voltage=12.0, load_torque=None, load=None, duration=0.05, rate=RATE):
    g = hf.Graph(name="dc_motor", rate=rate, duration=duration)
    g.add("supply", Constant(value=voltage, unit="V"))
    g.add("motor", motor)
    g.wire("supply.y -> motor.voltage")
    if load_torque is not None:
        g.add("torque", Constant(value=load_torque, unit="N m"))
        g.wire("torque.y -> motor.load_torque")
    if load is not None:
        g.add("load", load)
        g.wire("motor.angle -> load.angle")
        g.wire("motor.speed -> load.speed")
        g.wire("load.torque -> motor.load_torque")
    g.record("motor.current", "motor.angle", "motor.speed", "motor.torque")
    return g


def linear_model(p, k=0.0, c=0.0):
    """State matrix of (i, theta, w) and the input map of (voltage, load torque), from the
    docstring's equations without Coulomb friction; a spring k and damper c load the shaft."""
    n, eta = p["gear_ratio"], p["efficiency"]
    j = p["load_inertia"] + eta * n * n * p["inertia"]
    r, ind = p["resistance"], p["inductance"]
    a = np.array([[-r / ind, 0.0, -p["emf_constant"] * n / ind],
                  [0.0, 0.0, 1.0],
                  [eta * n * p["torque_constant"] / j, -k / j,
                   -(eta * n * n * p["damping"] + c) / j]])
    b = np.array([[1.0 / ind, 0.0], [0.0, 0.0], [0.0, -1.0 / j]])
    return a, b


def step_response(a, b, u, t):
    """Exact response from rest to the constant input u: the (i, w) modes by eigen
    decomposition, theta their integral (a's theta column is zero) or, with a spring, the
    full 3x3 system."""
    if np.all(a[:, 1] == 0.0):                       # free shaft: theta = integral of w
        sub = a[np.ix_([0, 2], [0, 2])]
        f = (b @ u)[[0, 2]]
        z_ss = -np.linalg.solve(sub, f)
        lam, vec = np.linalg.eig(sub)
        c0 = np.linalg.solve(vec, -z_ss)
        modes = vec * c0                              # column k: mode k's amplitude vector
        z = z_ss[:, None] + (modes @ np.exp(np.outer(lam, t))).real
        theta = z_ss[1] * t + (modes[1] @ (np.expm1(np.outer(lam, t)) / lam[:, None])).real
        return np.vstack([z[0], theta, z[1]])
    z_ss = -np.linalg.solve(a, b @ u)
    lam, vec = np.linalg.eig(a)
    c0 = np.linalg.solve(vec, -z_ss)
    return z_ss[:, None] + ((vec * c0) @ np.exp(np.outer(lam, t))).real


def assert_close(r, exact):
    for row, key in enumerate(("motor.current", "motor.angle", "motor.speed")):
        sim = r[key][:, 0]
        scale = np.max(np.abs(exact[row]))
        assert np.max(np.abs(sim - exact[row])) <= 1e-9 * scale, key


def test_step_response_with_gearbox_and_load_torque_matches_closed_form():
    """12 V and a 0.1 N m load torque from rest: current, angle, speed within 1e-9 relative.
    (With the efficiency left out of the reflected inertia the speed is off by 5 %.)"""
    r = hf.Simulation(motor_graph(DCMotor(**MOTOR), load_torque=0.1)).run()
    a, b = linear_model(MOTOR)
    assert_close(r, step_response(a, b, np.array([12.0, 0.1]), r.time))
    eta_n_kt = 0.8 * 5.0 * 0.05
    np.testing.assert_allclose(r["motor.torque"][:, 0], eta_n_kt * r["motor.current"][:, 0],
                               rtol=1e-15)
    assert r["motor.speed"][-1, 0] > 10.0                 # it runs up against the load


def test_rotary_load_spring_and_damper_match_closed_form():
    """A torsion spring 2 N m/rad and damper 0.01 N m s/rad on the output: the 3-state
    response, settling at theta = eta N Kt V / (R k)."""
    load = RotaryLoad(stiffness=2.0, damping=0.01)
    r = hf.Simulation(motor_graph(DCMotor(**MOTOR), voltage=6.0, load=load, duration=0.05)).run()
    a, b = linear_model(MOTOR, k=2.0, c=0.01)
    exact = step_response(a, b, np.array([6.0, 0.0]), r.time)
    assert_close(r, exact)
    settled = 0.8 * 5.0 * 0.05 * 6.0 / (1.2 * 2.0)
    assert -np.linalg.solve(a, b @ np.array([6.0, 0.0]))[1] == pytest.approx(settled, rel=1e-12)


def test_coulomb_friction_sets_the_steady_speed():
    """With Tc = 0.02 N m (tanh over 0.1 rad/s) the steady speed solves
    eta N Kt (V - Ke N w) / R = eta N^2 b w + eta N Tc tanh(N w / w_c)."""
    p = {**MOTOR, "friction": 0.02, "friction_speed": 0.1}
    r = hf.Simulation(motor_graph(DCMotor(**p), voltage=3.0, duration=0.5, rate=20e3)).run()
    n, eta = p["gear_ratio"], p["efficiency"]

    def balance(w):
        i = (3.0 - p["emf_constant"] * n * w) / p["resistance"]
        return (eta * n * p["torque_constant"] * i - eta * n * n * p["damping"] * w
                - eta * n * p["friction"] * math.tanh(n * w / p["friction_speed"]))
    w_ss = brentq(balance, 0.0, 3.0 / (p["emf_constant"] * n))
    assert r["motor.speed"][-1, 0] == pytest.approx(w_ss, rel=1e-6)
    assert w_ss < 0.95 * 3.0 / (p["emf_constant"] * n)   # friction costs speed


def test_a_rate_too_low_for_the_electrical_time_constant_is_refused_at_check():
    g = motor_graph(DCMotor(), rate=1000.0)
    with pytest.raises(hf.GraphError, match="inductance.*at least 1667 Hz"):
        g.check()


def test_rotary_units():
    assert dimension("H") == dimension("V s/A") == dimension("ohm s")
    assert dimension("N m/A") == dimension("V s")        # Kt; Ke is per radian: V s/rad
    with pytest.raises(ParamError, match="efficiency"):
        DCMotor(efficiency=1.5)
