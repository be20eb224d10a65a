"""The Al7075 slotted ultrasonic bar horn of seed 004 (section 5.2.2.2) as a scikit-fem plane model.

From the thesis: 104 x 70 x 30 mm (length, width, thickness), one central
slot 72 x 7 mm through the thickness, Al7075 (2810 kg/m^3, 71.7 GPa,
nu = 0.33), free-free, a non-uniform mesh of four-node plane elements with
about 316 dofs, 6 master dofs on the face coupled to the booster; the first
longitudinal mode is the 8th at 24.878 kHz, the second longitudinal the
14th at 48.543 kHz.

Reconstruction (figure 5.2 is lost):

- The plane of the model is the 104 x 70 mm face, ``x`` along the length
  (the longitudinal axis), the slot centred with its 72 mm along ``x``.
- A tensor mesh whose lines follow the slot edges (x = 16, 88 mm;
  y = 31.5, 38.5 mm): 2 / 10 / 2 columns across x and 4 / 2 / 4 rows across
  y, the slot's elements removed -- 156 nodes, 312 dofs (the nearest
  tensor mesh to 316 that has a node at the middle of the input face).
  Four times the elements (1104 dofs) moves mode 8 by -0.3 %.
- Master dofs: the three nodes of the input face x = 0 at y = 31.5, 35 and
  38.5 mm (the booster's stud sits at the middle of that face), both
  directions: 6 dofs.
- **Plane strain.**  The thesis says "plane elements" only.  Plane stress
  puts mode 8 at 23.6 kHz (-5 %), plane strain at 24.9 kHz (+0.2 %); the
  30 mm thickness is not small against the 70 mm width, so neither is exact,
  and plane strain is the one that matches the thesis's (and its
  experiment's) frequencies.  :func:`horn` takes ``plane="stress"`` for the other.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from skfem import Basis, BilinearForm, ElementQuad1, ElementVector, MeshQuad, asm
from skfem.helpers import dot
from skfem.models.elasticity import lame_parameters, linear_elasticity, plane_stress

RHO, E, NU = 2810.0, 71.7e9, 0.33
LENGTH, WIDTH = 104e-3, 70e-3
SLOT_X, SLOT_Y = (16e-3, 88e-3), (31.5e-3, 38.5e-3)
#: the thesis's full-model frequencies of modes 8 and 14 (1-based), Hz
MODE_8_HZ, MODE_14_HZ = 24.878e3, 48.543e3


def _lines(edges: tuple[float, ...], counts: tuple[int, ...]) -> np.ndarray:
    """Grid coordinates with ``counts[k]`` equal cells between ``edges[k]`` and ``edges[k+1]``."""
    parts = [np.linspace(a, b, n + 1)[:-1] for a, b, n in zip(edges[:-1], edges[1:], counts)]
    return np.concatenate(parts + [[edges[-1]]])


@dataclass(frozen=True)
class Horn:
    """The plane model: dense matrices per unit thickness and the input face's dofs.

    Attributes
    ----------
    M, K : (n, n) arrays
        Mass (kg/m) and stiffness (N/m^2) per unit thickness; frequencies do not depend on it.
    masters : (6,) int array
        Both dofs of the three input-face nodes.
    axial : (3,) int array
        Their longitudinal (``x``) dofs, where the booster pushes.
    basis : skfem.Basis
        The vector basis (``basis.doflocs`` gives each dof's position).
    """
    M: np.ndarray
    K: np.ndarray
    masters: np.ndarray
    axial: np.ndarray
    basis: Basis


def horn(columns: tuple[int, int, int] = (2, 10, 2), rows: tuple[int, int, int] = (4, 2, 4),
         plane: str = "strain") -> Horn:
    """The bar horn's plane finite-element model.

    Parameters
    ----------
    columns, rows : tuples of 3 ints
        Cells before, along and after the slot in ``x`` and in ``y``.
    plane : {"strain", "stress"}
        Plane assumption (see the module notes).

    Returns
    -------
    Horn
    """
    xs = _lines((0.0, *SLOT_X, LENGTH), columns)
    ys = _lines((0.0, *SLOT_Y, WIDTH), rows)
    mesh = MeshQuad.init_tensor(xs, ys)
    mid = mesh.p[:, mesh.t].mean(axis=1)
    slot = ((mid[0] > SLOT_X[0]) & (mid[0] < SLOT_X[1])
            & (mid[1] > SLOT_Y[0]) & (mid[1] < SLOT_Y[1]))
    mesh = mesh.remove_elements(np.nonzero(slot)[0])
    basis = Basis(mesh, ElementVector(ElementQuad1()))
    lam, mu = {"strain": lame_parameters, "stress": plane_stress}[plane](E, NU)
    K = asm(linear_elasticity(lam, mu), basis).toarray()

    @BilinearForm
    def mass(u, v, w):
        return RHO * dot(u, v)

    M = asm(mass, basis).toarray()
    x, y = mesh.p
    face = np.nonzero(np.isclose(x, 0.0) & (y >= SLOT_Y[0] - 1e-9) & (y <= SLOT_Y[1] + 1e-9))[0]
    dofs = basis.nodal_dofs[:, face]         # rows: x and y components
    return Horn(M, K, np.sort(dofs.ravel()), dofs[0], basis)
