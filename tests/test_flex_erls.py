"""ERLS mechanism: sensitivity coefficients, and its modal analysis equals the plain FE model's."""
import math

import numpy as np
import pytest

from hapflow.flex.beam import Section
from hapflow.flex.erls import Element, Mechanism, Node
from hapflow.flex.manipulator import Q_STAR, manipulator
from hapflow.flex.modal import modes

ROD = Section.rod(69e9, 0.02, 2700 * math.pi * 0.01 ** 2)


def pinned_link(n_el=12, length=1.0):
    """One link pinned to the ground at its first node, its angle the ERLS coordinate."""
    nodes = [Node(0, ((0, length * k / n_el),), grounded=(k == 0), zeroed=(k == 0))
             for k in range(n_el + 1)]
    elements = [Element(k, k + 1, ROD) for k in range(n_el)]
    return Mechanism(np.array([[1.0]]), np.array([0.0]), nodes, elements)


def test_pinned_free_link_matches_the_closed_form():
    # the rigid rotation is the ERLS coordinate; elastic modes are those of a pinned-free beam
    mech = pinned_link()
    Mf, Kf, _ = mech.matrices(np.array([0.4]))
    f, U = modes(Mf, Kf)
    assert f[0] < 1e-6
    scale = math.sqrt(ROD.E * ROD.inertia / ROD.mass_per_length) / (2 * math.pi)
    bending = f[1:][np.abs(U[2::3][:, 1:]).max(axis=0) > 1e-9]    # x = (q, x1 y1 th1, ...)
    assert bending[:3] == pytest.approx([b ** 2 * scale for b in (3.92660, 7.06858, 10.21018)],
                                        rel=5e-4)     # 12 elements: 3.5e-4 on the third


def test_sensitivity_is_the_derivative_of_the_erls_positions():
    mech = manipulator()
    q, dq = Q_STAR, 1e-6
    S = mech.sensitivity(q)
    for k in range(3):
        step = np.eye(3)[k] * dq
        dpos = (mech.positions(q + step) - mech.positions(q - step)) / (2 * dq)
        moving = mech.dofs[:, 0] >= 0
        assert S[mech.dofs[moving, 0], k] == pytest.approx(dpos[moving, 0], abs=1e-8)
        assert S[mech.dofs[moving, 1], k] == pytest.approx(dpos[moving, 1], abs=1e-8)
        dphi = mech.angle_coeffs[[n.link for n in mech.nodes], k]
        assert S[mech.dofs[:, 2], k] == pytest.approx(dphi)


def test_sensitivity_rate_is_the_time_derivative_of_s():
    mech = manipulator()
    qdot, dt = np.array([0.3, -1.1, 2.0]), 1e-6
    num = (mech.sensitivity(Q_STAR + qdot * dt) - mech.sensitivity(Q_STAR - qdot * dt)) / (2 * dt)
    assert mech.sensitivity(Q_STAR, qdot) == pytest.approx(num, abs=1e-7)


def test_rigid_motion_strains_nothing_and_erls_modes_equal_the_fe_frame_modes():
    # x = (q, u_in) -> b = S q + u is square and invertible, so the ERLS model is the FE
    # frame (every node rotation free) in other coordinates: same spectrum, 3 mechanism modes
    mech = manipulator()
    M, K = mech.assemble(Q_STAR)
    S = mech.sensitivity(Q_STAR)
    assert np.abs(K @ S).max() < 1e-6 * np.abs(K).max()
    Mf, Kf, _ = mech.matrices(Q_STAR)
    f_erls, _ = modes(Mf, Kf)
    f_fe, _ = modes(M, K)
    assert np.all(f_erls[:3] < 1e-3) and np.all(f_erls[3:] > 5.0)
    assert f_erls[3:] == pytest.approx(f_fe[3:], rel=1e-9)


def test_zeroed_rotations_must_match_the_erls_coordinates():
    nodes = [Node(0, (), grounded=True), Node(0, ((0, 1.0),))]
    with pytest.raises(ValueError, match="must be square"):
        Mechanism(np.array([[1.0]]), np.array([0.0]), nodes, [Element(0, 1, ROD)])
