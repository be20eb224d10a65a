"""Configuration-dependent Craig-Bampton reduction of ERLS models (seed 004, eqs. 5.42-5.51).

Masters are all the ERLS coordinates ``q`` plus chosen elastic dofs; the
slaves are elastic.  Per configuration ``q`` the reduction basis is::

    H(q) = [[I, 0], [B(q), Psi~(q)]],   B(q) = [0, -K_ss(q)^-1 K_sm(q)]      (5.46, 5.49)

with the Guyan part solved afresh at every ``q`` (numerically: the thesis
notes an analytic inverse is possible; 21 x 21 costs microseconds) and the
interior modes computed once, at a reference ``q*``, ranked, truncated and
carried to ``q`` by rotating them with the ERLS (eq. 5.48)::

    Psi(q) = R(q - q*) Phi(q*)

``R`` rotates the (X, Y) pair of each slave node by the change of its link's
ERLS angle and leaves rotations alone.  A joint's shared translations
turn with the link of the node that owns them (the first node at the joint) --
the thesis does not say; links meeting at a joint turn by different angles.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .craig_bampton import CraigBampton, craig_bampton, imr, project
from .erls import Mechanism


@dataclass
class ErlsReduction:
    """A configuration-dependent Craig-Bampton basis of a :class:`Mechanism`.

    Attributes
    ----------
    mech : Mechanism
    masters : int array
        Indices into the full vector ``(q, u_in)``; must begin with ``0 .. nq-1``.
    q_ref : array
        Reference configuration ``q*`` of the interior modes, rad.
    reference : CraigBampton
        The full transformation at ``q*``.
    keep : int array
        Retained interior modes (indices into ``reference``'s), in ranking order.
    """
    mech: Mechanism
    masters: np.ndarray
    q_ref: np.ndarray
    reference: CraigBampton
    keep: np.ndarray

    @property
    def size(self) -> int:
        """Dofs of the reduced model."""
        return len(self.masters) + len(self.keep)

    def rotation(self, q: np.ndarray) -> np.ndarray:
        """``R(q - q*)`` over the slave dofs, (s, s)."""
        slaves = self.reference.slaves
        dphi = self.mech.angles(q) - self.mech.angles(self.q_ref)
        full = np.eye(self.mech.n)
        nq = self.mech.nq
        pos = {u: nq + k for k, u in enumerate(self.mech.inner)}   # u' index -> full index
        for n, node in enumerate(self.mech.nodes):
            ix, iy, _ = self.mech.dofs[n]
            if ix < 0 or node.joined_to is not None:
                continue
            c, s = np.cos(dphi[node.link]), np.sin(dphi[node.link])
            i, j = pos[ix], pos[iy]
            full[np.ix_([i, j], [i, j])] = [[c, -s], [s, c]]
        return full[np.ix_(slaves, slaves)]

    def basis(self, q: np.ndarray, K: np.ndarray | None = None) -> np.ndarray:
        """``H(q)`` (eq. 5.49), (n, masters + kept modes), rows in the full order ``(q, u_in)``.

        ``K`` is the full stiffness at ``q`` if the caller has it already.
        """
        if K is None:
            K = self.mech.matrices(q)[1]
        ref = self.reference
        guyan = -scipy.linalg.solve(K[np.ix_(ref.slaves, ref.slaves)],
                                    K[np.ix_(ref.slaves, ref.masters)], assume_a="pos")
        psi = self.rotation(q) @ ref.phi[:, self.keep]
        moved = CraigBampton(ref.masters, ref.slaves, guyan, psi, ref.omega2[self.keep])
        return moved.basis()

    def matrices(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Reduced ``H'MH``, ``H'KH``, ``H'L`` and ``H`` at ``q`` (eqs. 5.50, 6.4)."""
        M, K, L = self.mech.matrices(q)
        H = self.basis(q, K)
        Mr, Kr = project(M, K, H)
        return Mr, Kr, H.T @ L, H

    def orthogonality(self, q: np.ndarray) -> np.ndarray:
        """``Psi~' M_ss(q) Psi~`` (eq. 5.51): the identity while the reference modes still hold."""
        M = self.mech.matrices(q)[0]
        ref = self.reference
        psi = self.rotation(q) @ ref.phi[:, self.keep]
        return psi.T @ M[np.ix_(ref.slaves, ref.slaves)] @ psi


def reduce_erls(mech: Mechanism, masters: np.ndarray, q_ref: np.ndarray, targets: list[int],
                n_modes: int) -> ErlsReduction:
    """Configuration-dependent CB of an ERLS model with IMR-ranked interior modes.

    Parameters
    ----------
    masters : int array
        Master dofs of ``(q, u_in)``; the ERLS coordinates must be among them.
    q_ref : array
        Reference configuration ``q*``.
    targets : list of int
        Full-model modes (0-based, ascending, rigid modes included) the ranking serves.
    n_modes : int
        Interior modes to keep.
    """
    masters = np.asarray(masters, dtype=int)
    if not set(range(mech.nq)) <= set(masters.tolist()):
        raise ValueError("every ERLS coordinate must be a master dof (section 5.3)")
    M, K, _ = mech.matrices(q_ref)
    cb = craig_bampton(M, K, masters)
    order = imr(M, K, cb, targets).order
    return ErlsReduction(mech, masters, np.asarray(q_ref, dtype=float), cb, order[:n_modes])
