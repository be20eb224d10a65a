"""Two-node planar Euler-Bernoulli frame element (axial bar + bending beam).

Local dofs ``(u1, v1, theta1, u2, v2, theta2)``: axial and transverse
displacements and the rotation of each node in the element frame, whose
``x`` axis runs from node 1 to node 2.  The matrices are the textbook
consistent ones (Przemieniecki; seed 004 calls them "common knowledge"
and does not print them): linear axial shape functions, cubic Hermite
bending shape functions, rotary inertia of the section neglected.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Section:
    """Cross-section and material of a prismatic link.

    Attributes
    ----------
    E : float
        Young's modulus, Pa.
    area : float
        Cross-sectional area, m^2 (sets the axial stiffness ``E A``).
    inertia : float
        Second moment of area about the bending axis, m^4.
    mass_per_length : float
        Mass per unit length, kg/m.
    """
    E: float
    area: float
    inertia: float
    mass_per_length: float

    @classmethod
    def rod(cls, E: float, diameter: float, mass_per_length: float) -> "Section":
        """Solid circular rod of ``diameter`` (m) with the given mass per length (kg/m)."""
        r = diameter / 2.0
        return cls(E, math.pi * r ** 2, math.pi * r ** 4 / 4.0, mass_per_length)


def local_stiffness(sec: Section, length: float) -> np.ndarray:
    """Element stiffness matrix in the element frame, 6 x 6, N/m (N m/rad on rotations)."""
    L = length
    a = sec.E * sec.area / L
    b = sec.E * sec.inertia / L ** 3
    k = np.zeros((6, 6))
    k[np.ix_([0, 3], [0, 3])] = a * np.array([[1.0, -1.0], [-1.0, 1.0]])
    k[np.ix_([1, 2, 4, 5], [1, 2, 4, 5])] = b * np.array([
        [12.0, 6 * L, -12.0, 6 * L],
        [6 * L, 4 * L * L, -6 * L, 2 * L * L],
        [-12.0, -6 * L, 12.0, -6 * L],
        [6 * L, 2 * L * L, -6 * L, 4 * L * L]])
    return k


def local_mass(sec: Section, length: float) -> np.ndarray:
    """Consistent element mass matrix in the element frame, 6 x 6, kg (kg m^2 on rotations)."""
    L = length
    m = sec.mass_per_length * L
    out = np.zeros((6, 6))
    out[np.ix_([0, 3], [0, 3])] = m / 6.0 * np.array([[2.0, 1.0], [1.0, 2.0]])
    out[np.ix_([1, 2, 4, 5], [1, 2, 4, 5])] = m / 420.0 * np.array([
        [156.0, 22 * L, 54.0, -13 * L],
        [22 * L, 4 * L * L, 13 * L, -3 * L * L],
        [54.0, 13 * L, 156.0, -22 * L],
        [-13 * L, -3 * L * L, -22 * L, 4 * L * L]])
    return out


def rotation(angle: float) -> np.ndarray:
    """``T``: global nodal dofs ``(X, Y, theta)`` of both nodes to element-frame dofs, 6 x 6."""
    c, s = math.cos(angle), math.sin(angle)
    r = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
    t = np.zeros((6, 6))
    t[:3, :3] = r
    t[3:, 3:] = r
    return t


def curvature_row(length: float, xi: float) -> np.ndarray:
    """Curvature ``v''`` at ``x = xi L`` as a row over the element-frame dofs, 1/m per unit dof.

    The second derivative of the cubic Hermite interpolation; a strain gauge
    at the surface of a rod of diameter ``d`` reads ``d/2`` times it.
    """
    L = length
    return np.array([0.0, (12 * xi - 6) / L ** 2, (6 * xi - 4) / L,
                     0.0, (6 - 12 * xi) / L ** 2, (6 * xi - 2) / L])
