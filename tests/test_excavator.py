"""The synthetic excavator arm (blocks/excavator.py) against closed forms."""
import numpy as np
import pytest

import hapflow as hf
from hapflow.blocks.excavator import (ARM_PARAMETERS, accelerations_from_readings,
                                      accelerometer_readings, arm_accelerations, arm_torques,
                                      arm_values, moment_arm)

ARM = arm_values()
V = dict(zip(ARM_PARAMETERS, ARM))         # the arm's values by name
LINKS = ("boom", "stick", "bucket")
LENGTHS = np.array([V[f"{link}_length"] for link in LINKS])
G = V["gravity"]
TH, OM, AL = np.array([0.4, -1.6, -0.9]), np.array([0.2, -0.3, 0.5]), np.array([0.5, -1.0, 2.0])


def mass_matrix(th):
    return np.array([arm_torques(ARM, 0, th, np.zeros(3), e, 0.0, 0.0, 0.0, 0.0)
                     for e in np.eye(3)]).T


def potential(th):
    """Gravity's potential energy of the three links (J), from the geometry alone."""
    coms, masses = ([V[f"{link}_{what}"] for link in LINKS] for what in ("com", "mass"))
    offsets = [0.0, 0.0, V["bucket_com_offset"]]
    phi, z, total = np.cumsum(th), 0.0, 0.0
    for k in range(3):
        total += masses[k] * G * (z + coms[k] * np.sin(phi[k]) + offsets[k] * np.cos(phi[k]))
        z += LENGTHS[k] * np.sin(phi[k])
    return total


def test_torques_are_lagrange_equations():
    """tau = M th'' + M' th' - dT/dth + dV/dth, each term by finite differences of the
    energies (T = th' M th' / 2)."""
    h = 1e-6
    m = mass_matrix(TH)
    assert np.allclose(m, m.T, rtol=0, atol=1e-9 * np.abs(m).max())
    assert np.all(np.linalg.eigvalsh(m) > 0)

    def kinetic(th):
        return 0.5 * OM @ mass_matrix(th) @ OM
    d_kin = np.array([(kinetic(TH + h * e) - kinetic(TH - h * e)) / (2 * h) for e in np.eye(3)])
    d_pot = np.array([(potential(TH + h * e) - potential(TH - h * e)) / (2 * h) for e in np.eye(3)])
    m_dot = (mass_matrix(TH + h * OM) - mass_matrix(TH - h * OM)) / (2 * h)
    expected = m @ AL + m_dot @ OM - d_kin + d_pot
    got = np.array(arm_torques(ARM, 0, TH, OM, AL, 0.0, 0.0, 0.0, G))
    np.testing.assert_allclose(got, expected, rtol=1e-7)


def test_loads_enter_through_the_tip_and_bucket_moments():
    """A soil force F on the tip needs -J_tip' F from the actuators; a payload m at the
    bucket's centre of mass adds its weight's moments."""
    base = np.array(arm_torques(ARM, 0, TH, OM, AL, 0.0, 0.0, 0.0, G))
    phi = np.cumsum(TH)
    joints = np.vstack([[0.0, 0.0], np.cumsum(LENGTHS[:, None] * np.c_[np.cos(phi), np.sin(phi)],
                                                axis=0)])
    tip, force = joints[3], np.array([2.0e4, -5.0e3])
    expected = [-((tip - joints[i])[0] * force[1] - (tip - joints[i])[1] * force[0])
                for i in range(3)]
    with_force = np.array(arm_torques(ARM, 0, TH, OM, AL, force[0], force[1], 0.0, G))
    np.testing.assert_allclose(with_force - base, expected, rtol=1e-12)
    offset = V["bucket_com_offset"]
    com = (joints[2] + V["bucket_com"] * np.array([np.cos(phi[2]), np.sin(phi[2])])
           + offset * np.array([-np.sin(phi[2]), np.cos(phi[2])]))
    still = np.zeros(3)
    payload = (np.array(arm_torques(ARM, 0, TH, still, still, 0.0, 0.0, 800.0, G))
               - np.array(arm_torques(ARM, 0, TH, still, still, 0.0, 0.0, 0.0, G)))
    np.testing.assert_allclose(payload, [(com - joints[i])[0] * 800.0 * G for i in range(3)],
                               rtol=1e-12)


def test_forward_dynamics_inverts_the_torques_and_accelerometers_invert_too():
    tau = np.array(arm_torques(ARM, 0, TH, OM, AL, 1e4, 2e3, 300.0, G))
    np.testing.assert_allclose(arm_accelerations(ARM, 0, TH, OM, tau, 1e4, 2e3, 300.0), AL,
                               rtol=1e-10)
    readings, back = np.zeros(3), np.zeros(3)
    accelerometer_readings(ARM, 0, TH, OM, AL, readings)
    accelerations_from_readings(ARM, 0, TH, OM, readings, back)
    np.testing.assert_allclose(back, AL, rtol=1e-12)
    # at rest an accelerometer reads g along its axis: g cos(phi_k)
    accelerometer_readings(ARM, 0, TH, np.zeros(3), np.zeros(3), readings)
    np.testing.assert_allclose(readings, G * np.cos(np.cumsum(TH)), rtol=1e-12)


def test_moment_arm_is_the_cylinder_geometry():
    """r = d(cylinder length)/d(theta): the lever by virtual work."""
    h = 1e-7
    for j, theta in ((0, 0.4), (1, -1.6), (2, -0.9)):
        a, b, psi0 = (V[f"{LINKS[j]}_{what}"] for what in ("pin_a", "pin_b", "psi0"))

        def length(t):
            return np.sqrt(a * a + b * b - 2 * a * b * np.cos(psi0 + t))
        assert moment_arm(ARM, 0, j, theta) == pytest.approx(
            (length(theta + h) - length(theta - h)) / (2 * h), rel=1e-7)


# ------------------------------------------------------------------ observers against filterpy
class SphericalSimplexPoints:
    """Julier's spherical simplex sigma points (n + 2) for ``filterpy``'s UKF (the reference):
    ``w0`` weights the mean point, the other n + 1 share ``1 - w0``; the unit points are
    built dimension by dimension (Julier 2003) and scaled by the lower Cholesky factor."""

    def __init__(self, n: int, w0: float = 0.5):
        self.n = n
        w1 = (1.0 - w0) / (n + 1)
        unit = np.zeros((n + 2, n))
        unit[1, 0], unit[2, 0] = -1.0 / np.sqrt(2.0 * w1), 1.0 / np.sqrt(2.0 * w1)
        for j in range(2, n + 1):
            unit[1:j + 1, j - 1] = -1.0 / np.sqrt(j * (j + 1) * w1)
            unit[j + 1, j - 1] = j / np.sqrt(j * (j + 1) * w1)
        self.unit = unit
        self.Wm = np.full(n + 2, w1)
        self.Wm[0] = w0
        self.Wc = self.Wm.copy()

    def num_sigmas(self) -> int:
        return self.n + 2

    def sigma_points(self, x, P):
        return x + self.unit @ np.linalg.cholesky(P).T


def _filterpy(n, fx, x0, p0, q, r, z, u, dt):
    """filterpy's SS-UKF over the rows from row 1 (row 0: the start)."""
    from filterpy.kalman import UnscentedKalmanFilter
    ukf = UnscentedKalmanFilter(n, 3, dt, hx=lambda s: s[:3], fx=fx,
                                points=SphericalSimplexPoints(n))
    ukf.x, ukf.P, ukf.Q, ukf.R = np.array(x0), np.diag(p0), np.diag(q), np.diag(r)
    out = [ukf.x.copy()]
    for k in range(1, len(z)):
        ukf.predict(u=u[k])
        ukf.update(z[k])
        out.append(ukf.x.copy())
    return np.array(out)


def _motion(n, dt):
    """A smooth joint motion and the loads on it: angles, speeds, accelerations (n, 3) each."""
    t = np.arange(n)[:, None] * dt
    w, a = np.array([[1.3, 2.1, 2.9]]), np.array([[0.15, 0.25, 0.35]])
    th = TH + a * np.sin(w * t)
    return th, a * w * np.cos(w * t), -a * w * w * np.sin(w * t)


def test_observers_run_in_hapflows_ukf_as_in_filterpys():
    pytest.importorskip("filterpy")
    from hapflow.ident.excavator import force_observer, kinematic_observer
    dt, n = 1e-3, 600
    rng = np.random.default_rng(4)
    th, om, al = _motion(n, dt)
    readings = np.empty((n, 3))
    for k in range(n):
        accelerometer_readings(ARM, 0, th[k], om[k], al[k], readings[k])
    enc = th + rng.normal(0.0, 0.0063, th.shape)
    acc = readings + rng.normal(0.0, 0.03, readings.shape)
    ours = kinematic_observer(enc, acc, dt)
    beta, gamma, a_new = 0.25, 0.5, np.empty(3)

    def kinematic_fx(s, dt, u):
        t, o, a = s[:3], s[3:6], s[6:]
        accelerations_from_readings(ARM, 0, t + dt * o + 0.5 * dt * dt * a, o + dt * a, u, a_new)
        return np.concatenate([t + dt * o + dt * dt * ((0.5 - beta) * a + beta * a_new),
                               o + dt * ((1.0 - gamma) * a + gamma * a_new), a_new])
    ref = _filterpy(9, kinematic_fx, [*enc[0], *np.zeros(6)], [0.0063 ** 2] * 3 + [1e-2] * 3
                    + [1.0] * 3, [1e-12] * 3 + [1e-8] * 3 + [1e-2] * 3, [0.0063 ** 2] * 3,
                    enc, acc, dt)
    scale = np.abs(ref).max(axis=0)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-8 * scale.max())
    assert np.sqrt(np.mean((ours[300:, 3:6] - om[300:]) ** 2)) < 0.05      # it tracks
    kin = np.hstack([th, om, al])
    load, payload = (2e4, -1e4), 500.0
    forces = np.array([[arm_torques(ARM, 0, th[k], om[k], al[k], *load, payload, G)[j]
                        / moment_arm(ARM, 0, j, th[k, j]) for j in range(3)] for k in range(n)])
    meas = forces + rng.normal(0.0, 12.3e3, forces.shape)
    ours = force_observer(kin, meas, dt)
    lp = 1.0 - np.exp(-2.0 * np.pi * 10.0 * dt)

    def force_fx(s, dt, u):
        out = s.copy()
        out[3:5] = s[3:5] + lp * (s[5:7] - s[3:5])
        tau = arm_torques(ARM, 0, u[:3], u[3:6], u[6:], out[3], out[4], out[7], G)
        out[:3] = [tau[j] / moment_arm(ARM, 0, j, u[j]) for j in range(3)]
        return out
    ref = _filterpy(8, force_fx, [*meas[0], *np.zeros(5)], [12.3e3 ** 2] * 3 + [1e8] * 4
                    + [1e5], [1e7] * 3 + [1e4] * 2 + [1e6] * 2 + [100.0], [12.3e3 ** 2] * 3,
                    meas, kin, dt)
    np.testing.assert_allclose(ours, ref, rtol=1e-7, atol=1e-6 * np.abs(ref).max())
