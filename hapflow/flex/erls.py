"""Planar flexible-link mechanisms on an equivalent rigid-link system (seed 004, section 4.1).

The nodal positions of the deformed mechanism are ``b = r(q) + u`` (eq. 4.1):
``r(q)`` places the nodes on the ERLS, a rigid mechanism whose generalised
coordinates are ``q``; ``u`` holds the elastic nodal displacements measured
from it.  Per node the dofs are the global translations ``(X, Y)`` and the
rotation; nodes joined by a revolute joint share their translations and keep
their own rotations; a node pinned to the ground has no translations.  Of
the ``nu'`` elastic dofs, ``nq`` rotations are forced to zero (``u0``) so that
``[I S]`` becomes square (eq. 4.7): there the ERLS coincides with the real
link (the thesis zeroes the rotations of the actuated links).

The full model (eq. 4.23) is ordered ``x = (q, u_in)`` -- the ERLS coordinates
first, as in the thesis's numbering of chapter 6 (``q1 q2 q3 x4 y5 ...``)::

    [ S'MS      (S'M)_in ] [q'' ]   [ S'(2MG+C)u' + S'M S' q' ]   [ 0  0    ] [q]   [ S'   ]
    [ (MS)_in   M_in     ] [u_in''] + [ (2MG+C)_in u' + (M S')_in q' ] + [ 0  K_in ] [u] = [ I_in ] f

Kinematics: every ERLS link angle is affine in ``q`` (``a . q + b``) and every
node's position is a sum of link vectors ``l (cos phi, sin phi)`` from a
ground point.  That holds for open chains and for parallelogram loops (the
thesis's manipulator) and gives ``S`` and its time derivative in closed
form; a general closed loop would need its constraint equations solved.

Not modelled (stated where the thesis is silent or the term is small): the
Coriolis term ``MG`` (the thesis's reference [69]; it scales with ``q'``
times elastic velocities and vanishes in a modal analysis about a
configuration), the geometric term ``u' dPhi K u`` (neglected by the thesis
itself, eq. 4.15), gravity and springs (the horizontal plane of chapters 5-6).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .beam import Section, curvature_row, local_mass, local_stiffness, rotation


@dataclass(frozen=True)
class Node:
    """A node of the finite-element model.

    Attributes
    ----------
    link : int
        Index of the link the node belongs to (its rotation dof follows that link's ERLS angle).
    path : tuple of (int, float)
        ``(link, length)`` terms: the ERLS position is ``origin + sum(length * unit(angle[link]))``.
    origin : tuple of float
        Ground point the path starts from, m.
    mass, inertia : float
        Lumped mass (kg) and rotary inertia (kg m^2) at the node.
    grounded : bool
        Translations fixed to the ground (a ground pin).
    joined_to : int or None
        Index of an earlier node whose translations this node shares (a revolute joint).
    zeroed : bool
        Its rotation is an ERLS coordinate's own: the elastic rotation is forced to zero.
    """
    link: int
    path: tuple[tuple[int, float], ...]
    origin: tuple[float, float] = (0.0, 0.0)
    mass: float = 0.0
    inertia: float = 0.0
    grounded: bool = False
    joined_to: int | None = None
    zeroed: bool = False


@dataclass(frozen=True)
class Element:
    """A beam element between nodes ``i`` and ``j`` (on the same link) with its section."""
    i: int
    j: int
    section: Section


@dataclass
class Mechanism:
    """A planar flexible-link mechanism on an ERLS with affine link angles.

    Parameters
    ----------
    angle_coeffs : (n_links, nq) array
        ``a`` of each link's ERLS angle ``a . q + b``.
    angle_offsets : (n_links,) array
        ``b`` of each link's angle, rad.
    nodes, elements : lists of :class:`Node` and :class:`Element`
    alpha, beta : float
        Rayleigh damping ``C = alpha M + beta K`` (1/s and s).

    Attributes
    ----------
    dofs : (n_nodes, 3) int array
        Index into ``u'`` of each node's ``(X, Y, theta)``; ``-1`` where the node is grounded.
    inner : int array
        Indices of ``u'`` kept in ``u_in`` (all but the zeroed rotations), in order.
    """
    angle_coeffs: np.ndarray
    angle_offsets: np.ndarray
    nodes: list[Node]
    elements: list[Element]
    alpha: float = 0.0
    beta: float = 0.0
    dofs: np.ndarray = field(init=False)
    inner: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.angle_coeffs = np.atleast_2d(np.asarray(self.angle_coeffs, dtype=float))
        self.angle_offsets = np.asarray(self.angle_offsets, dtype=float)
        dofs = np.full((len(self.nodes), 3), -1, dtype=int)
        zeroed, k = [], 0
        for n, node in enumerate(self.nodes):
            if node.joined_to is not None:
                dofs[n, :2] = dofs[node.joined_to, :2]
            elif not node.grounded:
                dofs[n, :2] = (k, k + 1)
                k += 2
            dofs[n, 2] = k
            if node.zeroed:
                zeroed.append(k)
            k += 1
        self.dofs = dofs
        self.inner = np.setdiff1d(np.arange(k), zeroed)
        if len(zeroed) != self.nq:
            raise ValueError(f"{len(zeroed)} zeroed rotations for {self.nq} ERLS coordinates: "
                             "[I S] must be square (eq. 4.7)")

    @property
    def nq(self) -> int:
        """Number of ERLS coordinates."""
        return self.angle_coeffs.shape[1]

    @property
    def n_elastic(self) -> int:
        """Number of elastic dofs ``nu'`` before zeroing."""
        return int(self.dofs.max()) + 1

    @property
    def n(self) -> int:
        """Size of the full model ``(q, u_in)``."""
        return self.nq + len(self.inner)

    def angles(self, q: np.ndarray) -> np.ndarray:
        """ERLS link angles at ``q``, rad."""
        return self.angle_coeffs @ np.asarray(q, dtype=float) + self.angle_offsets

    def positions(self, q: np.ndarray) -> np.ndarray:
        """ERLS node positions, (n_nodes, 2), m."""
        phi = self.angles(q)
        out = np.zeros((len(self.nodes), 2))
        for n, node in enumerate(self.nodes):
            out[n] = node.origin
            for link, length in node.path:
                out[n] += length * np.array([np.cos(phi[link]), np.sin(phi[link])])
        return out

    def sensitivity(self, q: np.ndarray, qdot: np.ndarray | None = None) -> np.ndarray:
        """``S = dr/dq`` (eq. 4.3), ``(nu', nq)``; with ``qdot``, its time derivative instead."""
        phi = self.angles(q)
        a = self.angle_coeffs
        S = np.zeros((self.n_elastic, self.nq))
        for n, node in enumerate(self.nodes):
            ix, iy, it = self.dofs[n]
            if qdot is None:
                S[it] = a[node.link]
            if ix < 0 or node.joined_to is not None:     # translations owned by another node
                continue
            for link, length in node.path:
                c, s = np.cos(phi[link]), np.sin(phi[link])
                if qdot is None:     # d/dq of l (cos, sin) = l (-sin, cos) a
                    S[ix] -= length * s * a[link]
                    S[iy] += length * c * a[link]
                else:                # d/dt of l (-sin, cos) a = -l (cos, sin) (a . qdot) a
                    w = a[link] @ qdot
                    S[ix] -= length * c * w * a[link]
                    S[iy] -= length * s * w * a[link]
        return S

    def element_dofs(self, e: Element) -> np.ndarray:
        """Indices into ``u'`` of an element's six global dofs (``-1`` where grounded)."""
        return np.concatenate([self.dofs[e.i], self.dofs[e.j]])

    def element_rotation(self, e: Element, q: np.ndarray) -> np.ndarray:
        """``T_i(q)``: the element's global dofs to its frame (it lies along its link's ERLS)."""
        return rotation(self.angles(q)[self.nodes[e.i].link])

    def assemble(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Global mass and stiffness over ``u'`` at configuration ``q`` (eqs. 4.16-4.17).

        Returns
        -------
        M, K : (nu', nu') arrays
            Beam elements rotated by their ERLS link angles, plus the lumped
            masses (on both translations) and inertias (on the rotation) of the nodes.
        """
        nu = self.n_elastic
        M = np.zeros((nu, nu))
        K = np.zeros((nu, nu))
        pos = self.positions(q)
        for e in self.elements:
            length = float(np.hypot(*(pos[e.j] - pos[e.i])))
            T = self.element_rotation(e, q)
            idx = self.element_dofs(e)
            keep = idx >= 0
            sel = np.ix_(idx[keep], idx[keep])
            M[sel] += (T.T @ local_mass(e.section, length) @ T)[np.ix_(keep, keep)]
            K[sel] += (T.T @ local_stiffness(e.section, length) @ T)[np.ix_(keep, keep)]
        for n, node in enumerate(self.nodes):
            ix, iy, it = self.dofs[n]
            if ix >= 0:
                M[ix, ix] += node.mass
                M[iy, iy] += node.mass
            M[it, it] += node.inertia
        return M, K

    def matrices(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Full-model mass, stiffness and input matrices about ``q`` in the order ``(q, u_in)``.

        Returns
        -------
        Mf, Kf : (n, n) arrays
            Eq. 4.23's mass matrix and its stiffness matrix (zero on the ERLS rows).
        L : (n, nu') array
            Maps nodal forces and torques ``f`` over ``u'`` to generalised forces ``[S' f; f_in]``.
        """
        M, K = self.assemble(q)
        S = self.sensitivity(q)
        inn = self.inner
        nq = self.nq
        MS = M @ S
        Mf = np.zeros((self.n, self.n))
        Mf[:nq, :nq] = S.T @ MS
        Mf[:nq, nq:] = MS[inn].T
        Mf[nq:, :nq] = MS[inn]
        Mf[nq:, nq:] = M[np.ix_(inn, inn)]
        Kf = np.zeros_like(Mf)
        Kf[nq:, nq:] = K[np.ix_(inn, inn)]
        L = np.vstack([S.T, np.eye(self.n_elastic)[inn]])
        return Mf, Kf, L

    def curvature(self, q: np.ndarray, element: int, xi: float) -> np.ndarray:
        """Row over ``u'`` giving the bending curvature (1/m) at ``xi`` along an element (eq. 4.11)."""
        e = self.elements[element]
        pos = self.positions(q)
        row = curvature_row(float(np.hypot(*(pos[e.j] - pos[e.i]))), xi) @ self.element_rotation(e, q)
        out = np.zeros(self.n_elastic)
        idx = self.element_dofs(e)
        keep = idx >= 0
        np.add.at(out, idx[keep], row[keep])
        return out

    def elastic(self, x: np.ndarray) -> np.ndarray:
        """Elastic displacements over ``u'`` (zeros at the zeroed rotations) from ``x = (q, u_in)``."""
        u = np.zeros(self.n_elastic)
        u[self.inner] = np.asarray(x)[self.nq:]
        return u
