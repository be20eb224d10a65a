"""The synthetic excavator arm (blocks/excavator.py) against closed forms."""
import numpy as np
import pytest

import hapflow as hf
from hapflow.blocks.excavator import (ARM_PARAMETERS, accelerations_from_readings,
                                      accelerometer_readings, arm_accelerations, arm_torques,
                                      arm_values, moment_arm)

ARM = arm_values()
G = ARM[ARM_PARAMETERS.index("gravity")]
TH, OM, AL = np.array([0.4, -1.6, -0.9]), np.array([0.2, -0.3, 0.5]), np.array([0.5, -1.0, 2.0])


def mass_matrix(th):
    return np.array([arm_torques(ARM, 0, th, np.zeros(3), e, 0.0, 0.0, 0.0, 0.0)
                     for e in np.eye(3)]).T


def potential(th):
    """Gravity's potential energy of the three links (J), from the geometry alone."""
    lengths, coms, masses = ARM[0:3], ARM[3:6], ARM[6:9]
    offsets = [0.0, 0.0, ARM[ARM_PARAMETERS.index("bucket_com_offset")]]
    phi, z, total = np.cumsum(th), 0.0, 0.0
    for k in range(3):
        total += masses[k] * G * (z + coms[k] * np.sin(phi[k]) + offsets[k] * np.cos(phi[k]))
        z += lengths[k] * np.sin(phi[k])
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
    joints = np.vstack([[0.0, 0.0], np.cumsum(ARM[0:3, None] * np.c_[np.cos(phi), np.sin(phi)],
                                                axis=0)])
    tip, force = joints[3], np.array([2.0e4, -5.0e3])
    expected = [-((tip - joints[i])[0] * force[1] - (tip - joints[i])[1] * force[0])
                for i in range(3)]
    with_force = np.array(arm_torques(ARM, 0, TH, OM, AL, force[0], force[1], 0.0, G))
    np.testing.assert_allclose(with_force - base, expected, rtol=1e-12)
    offset = ARM[ARM_PARAMETERS.index("bucket_com_offset")]
    com = (joints[2] + ARM[5] * np.array([np.cos(phi[2]), np.sin(phi[2])])
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
        a, b, psi0 = ARM[16 + 3 * j: 19 + 3 * j]

        def length(t):
            return np.sqrt(a * a + b * b - 2 * a * b * np.cos(psi0 + t))
        assert moment_arm(ARM, 0, j, theta) == pytest.approx(
            (length(theta + h) - length(theta - h)) / (2 * h), rel=1e-7)
