"""Planar Euler-Bernoulli frame element against closed-form beam and bar frequencies."""
import math

import numpy as np
import pytest

from hapflow.flex.beam import Section, curvature_row, local_mass, local_stiffness, rotation
from hapflow.flex.modal import modes

STEEL = Section.rod(210e9, 0.02, 7800 * math.pi * 0.01 ** 2)
LENGTH = 1.0


def straight_beam(n_el, angle=0.0):
    """Global M, K of a straight beam of ``n_el`` equal elements at ``angle`` (3 dofs a node)."""
    n = 3 * (n_el + 1)
    M, K = np.zeros((n, n)), np.zeros((n, n))
    T = rotation(angle)
    le = LENGTH / n_el
    for e in range(n_el):
        sl = slice(3 * e, 3 * e + 6)
        M[sl, sl] += T.T @ local_mass(STEEL, le) @ T
        K[sl, sl] += T.T @ local_stiffness(STEEL, le) @ T
    return M, K


def bending_hz(beta_l):
    """Euler-Bernoulli frequency for an eigenvalue ``beta L``."""
    return beta_l ** 2 / (2 * math.pi * LENGTH ** 2) * math.sqrt(STEEL.E * STEEL.inertia
                                                                  / STEEL.mass_per_length)


def bending_only(f, U, dof=1):
    """Frequencies of the modes with transverse motion (drops the axial ones)."""
    return f[np.abs(U[dof::3]).max(axis=0) > 1e-6 * np.abs(U).max(axis=0)]


# 16 elements: cubic Hermite elements converge as h^4; the third cantilever mode is within 1e-4.
@pytest.mark.parametrize("angle", [0.0, 0.7])
def test_cantilever_bending_frequencies(angle):
    M, K = straight_beam(16, angle)
    free = np.arange(3, M.shape[0])                       # node 0 clamped
    f, U = modes(M[np.ix_(free, free)], K[np.ix_(free, free)], 8)
    # bending shapes are perpendicular to the beam axis: transverse global dof for angle 0
    transverse = np.array([-math.sin(angle), math.cos(angle)])
    tr = transverse[0] * U[0::3] + transverse[1] * U[1::3]
    fb = f[np.abs(tr).max(axis=0) > 1e-3 * np.abs(U).max(axis=0)][:3]
    assert fb == pytest.approx([bending_hz(b) for b in (1.87510, 4.69409, 7.85476)], rel=1e-4)


def test_free_free_bending_and_axial_frequencies():
    M, K = straight_beam(16)
    f, U = modes(M, K, 12)
    assert np.all(f[:3] < 1e-3)                           # two translations and a rotation
    fb = bending_only(f[3:], U[:, 3:])[:3]
    # third free-free mode: 1.5e-4 high with 16 elements (h^4 convergence)
    assert fb == pytest.approx([bending_hz(b) for b in (4.73004, 7.85320, 10.99561)], rel=3e-4)
    c = math.sqrt(STEEL.E * STEEL.area / STEEL.mass_per_length)
    axial = f[3:][np.abs(U[1::3, 3:]).max(axis=0) < 1e-9 * np.abs(U[:, 3:]).max(axis=0)]
    # linear bar elements converge as h^2: 1.6e-3 high with 16 elements
    assert axial[0] == pytest.approx(c / (2 * LENGTH), rel=3e-3)


def test_curvature_row_is_the_second_derivative_of_a_cubic():
    # v(x) = x^3 - x^2 on [0, L] interpolated exactly by Hermite cubics: v'' = 6x - 2
    L = 0.7
    v = lambda x: x ** 3 - x ** 2                         # noqa: E731
    dv = lambda x: 3 * x ** 2 - 2 * x                     # noqa: E731
    ue = np.array([0.0, v(0.0), dv(0.0), 0.0, v(L), dv(L)])
    for xi in (0.0, 0.3, 0.5, 1.0):
        assert curvature_row(L, xi) @ ue == pytest.approx(6 * xi * L - 2)
