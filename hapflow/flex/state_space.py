"""First-order model of an ERLS mechanism, full or Craig-Bampton reduced (eqs. 4.23, 6.3).

State ``w = (z, z')``: ``z`` is ``x = (q, u_in)`` for the full model or
``(x1, eta)`` for a reduction (masters, then interior-mode coordinates).  Its
rate is::

    H' Mf H z'' = H' (L f - Kf H z - Cv H z')        (eq. 6.3 with eq. 6.4's matrices)

``H = I`` for the full model, ``H(q)`` of :class:`~hapflow.flex.erls_reduction.ErlsReduction`
otherwise (``H'`` terms neglected, as in eq. 5.50).  ``Cv`` is eq. 4.23's velocity
matrix without the Coriolis part ``MG`` (see :mod:`hapflow.flex.erls`)::

    Cv = [[S'M S',      (S'C)_in ],
          [(M S')_in,   C_in     ]],     C = alpha M + beta K

Every configuration-dependent matrix comes from its exact trigonometric
expansion (:mod:`hapflow.flex.expansion`): multiply-adds of constant arrays,
the form a compiled block kernel needs.  Here it is numpy, for offline
simulation and as the reference such a kernel will be tested against.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.linalg

from . import expansion
from .erls import Mechanism
from .erls_reduction import ErlsReduction


@dataclass(frozen=True)
class FlexModel:
    """Expanded arrays of an ERLS model (see the module notes).

    Attributes
    ----------
    nq, size : int
        ERLS coordinates (the first ``nq`` entries of ``z``) and entries of ``z``.
    A, b : arrays
        Link angles ``A q + b``.
    Mc, Kc, Sc, Gc, Pc : arrays
        Expansion coefficients of ``M``, ``K`` (over ``u'``), ``S``, the gauge rows and
        the rotated interior modes ``R(q - q*) Phi~`` (empty for the full model).
    inner, masters, slaves, torque_dofs : int arrays
        ``u_in`` in ``u'``; master and slave dofs of ``(q, u_in)``; ``u'`` rotation dof of
        each input torque.
    alpha, beta : float
        Rayleigh damping.
    """
    nq: int
    size: int
    A: np.ndarray
    b: np.ndarray
    Mc: np.ndarray
    Kc: np.ndarray
    Sc: np.ndarray
    Gc: np.ndarray
    Pc: np.ndarray | None
    inner: np.ndarray
    masters: np.ndarray
    slaves: np.ndarray
    torque_dofs: np.ndarray
    alpha: float
    beta: float

    def basis(self, q: np.ndarray) -> np.ndarray:
        """``H(q)`` over ``(q, u_in)``: the identity for the full model."""
        n = self.nq + len(self.inner)
        if self.Pc is None:
            return np.eye(n)
        K = np.tensordot(expansion.features(self.A @ q + self.b), self.Kc, 1)
        ks = self.inner[self.slaves - self.nq]
        Kss = K[np.ix_(ks, ks)]
        Ksm = np.zeros((len(ks), len(self.masters)))
        elastic = self.masters >= self.nq
        Ksm[:, elastic] = K[np.ix_(ks, self.inner[self.masters[elastic] - self.nq])]
        H = np.zeros((n, self.size))
        H[self.masters, np.arange(len(self.masters))] = 1.0
        H[self.slaves, :len(self.masters)] = -scipy.linalg.solve(Kss, Ksm, assume_a="pos")
        H[self.slaves, len(self.masters):] = np.tensordot(
            expansion.features(self.A @ q + self.b), self.Pc, 1)
        return H

    def rate(self, w: np.ndarray, torque: np.ndarray) -> np.ndarray:
        """``w'`` for the state ``w = (z, z')`` and input torques (N m)."""
        nq = self.nq
        z, zd = w[:self.size], w[self.size:]
        angles = self.A @ z[:nq] + self.b
        f = expansion.features(angles)
        M = np.tensordot(f, self.Mc, 1)
        K = np.tensordot(f, self.Kc, 1)
        S = np.tensordot(f, self.Sc, 1)
        Sd = np.tensordot(expansion.feature_rates(angles, self.A @ zd[:nq]), self.Sc, 1)
        H = self.basis(z[:nq])
        x, xd = H @ z, H @ zd
        u, ud = np.zeros(M.shape[0]), np.zeros(M.shape[0])
        u[self.inner], ud[self.inner] = x[nq:], xd[nq:]
        inertial = M @ (Sd @ xd[:nq])                          # M S' q'
        damping = self.alpha * (M @ ud) + self.beta * (K @ ud)
        force = np.zeros(M.shape[0])
        force[self.torque_dofs] = torque
        g = np.concatenate([S.T @ (force - inertial - damping),
                            (-(K @ u) - inertial - damping)[self.inner]])
        MS = M @ S
        Mf = np.block([[S.T @ MS, MS[self.inner].T],
                       [MS[self.inner], M[np.ix_(self.inner, self.inner)]]])
        zdd = np.linalg.solve(H.T @ Mf @ H, H.T @ g)
        return np.concatenate([zd, zdd])

    def gauges(self, w: np.ndarray) -> np.ndarray:
        """Curvature gauges (1/m) at the state ``w``."""
        z = w[:self.size]
        x = self.basis(z[:self.nq]) @ z
        u = np.zeros(self.Gc.shape[2])
        u[self.inner] = x[self.nq:]
        return np.tensordot(expansion.features(self.A @ z[:self.nq] + self.b), self.Gc, 1) @ u

    def simulate(self, w0: np.ndarray, torques: np.ndarray, dt: float) -> np.ndarray:
        """Classical RK4, torques held over each step; returns the states, (steps + 1, 2 size)."""
        out = np.empty((len(torques) + 1, len(w0)))
        out[0] = w = np.asarray(w0, dtype=float)
        for i, tq in enumerate(np.asarray(torques, dtype=float)):
            k1 = self.rate(w, tq)
            k2 = self.rate(w + 0.5 * dt * k1, tq)
            k3 = self.rate(w + 0.5 * dt * k2, tq)
            k4 = self.rate(w + dt * k3, tq)
            out[i + 1] = w = w + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        return out


def expand(mech: Mechanism, torque_nodes: list[int],
           gauges: Callable[[Mechanism, np.ndarray], np.ndarray],
           reduction: ErlsReduction | None = None) -> FlexModel:
    """Expand a mechanism (and optionally its reduction) into a :class:`FlexModel`.

    Parameters
    ----------
    torque_nodes : list of int
        Nodes (0-based) whose rotation dof receives each input torque.
    gauges : callable
        ``(mech, q) -> (n_g, nu')`` curvature rows (e.g. :func:`~hapflow.flex.manipulator.gauge_rows`).
    reduction : ErlsReduction, optional
        The configuration-dependent basis; the full model if omitted.
    """
    def fit(fn):
        return expansion.fit(mech, fn)

    if reduction is None:
        masters, slaves, Pc, size = np.arange(mech.n), np.zeros(0, dtype=int), None, mech.n
    else:
        phi = reduction.reference.phi[:, reduction.keep]
        masters, slaves = reduction.masters, reduction.reference.slaves
        Pc, size = fit(lambda q: reduction.rotation(q) @ phi), reduction.size
    return FlexModel(mech.nq, size, mech.angle_coeffs.copy(), mech.angle_offsets.copy(),
                     fit(lambda q: mech.assemble(q)[0]), fit(lambda q: mech.assemble(q)[1]),
                     fit(mech.sensitivity), fit(lambda q: gauges(mech, q)), Pc,
                     mech.inner.copy(), np.asarray(masters), np.asarray(slaves),
                     np.array([mech.dofs[n, 2] for n in torque_nodes]), mech.alpha, mech.beta)
