"""Craig-Bampton reduction with interior-mode ranking (IMR) and energy-based ranking (EBR).

Seed 004, chapter 5.  The dofs ``x`` of ``M x'' + K x = f`` split into masters
``x1`` (kept) and slaves ``x2``, replaced by the fixed-interface modes
(eqs. 5.3-5.5)::

    x = H y,   H = [[I, 0], [B, Phi]],   B = -K22^-1 K21,   K22 Phi = M22 Phi Omega

with ``Phi`` mass-normalised on ``M22``.  Which interior modes to keep is the
ranking's job: IMR (eqs. 5.8-5.23) ranks them by their participation in
chosen modes of the full model; EBR (eqs. 5.26-5.39) by their share of the
mean energy of the forced response to a periodic force on the masters.
Everything here works on (M, K) pairs, dense; matrices are ordered as given
and :meth:`CraigBampton.basis` returns ``H`` in that original order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .modal import modes


@dataclass(frozen=True)
class CraigBampton:
    """The full (untruncated) Craig-Bampton transformation of an (M, K) pair.

    Attributes
    ----------
    masters, slaves : int arrays
        Indices of the master and slave dofs in the original ordering.
    guyan : (s, m) array
        ``B = -K22^-1 K21``: the constraint modes on the slaves.
    phi : (s, s) array
        Interior (fixed-interface) modes, ``phi.T M22 phi = I``.
    omega2 : (s,) array
        Their squared angular frequencies, ascending, rad^2/s^2.
    """
    masters: np.ndarray
    slaves: np.ndarray
    guyan: np.ndarray
    phi: np.ndarray
    omega2: np.ndarray

    @property
    def n(self) -> int:
        """Number of dofs of the full model."""
        return len(self.masters) + len(self.slaves)

    def basis(self, keep: np.ndarray | None = None) -> np.ndarray:
        """``H~`` (eq. 5.5): masters first, then the kept interior modes in the order given.

        Parameters
        ----------
        keep : int array, optional
            Indices of the interior modes to retain (all by default).

        Returns
        -------
        (n, m + len(keep)) array, rows in the original dof order.
        """
        keep = np.arange(self.phi.shape[1]) if keep is None else np.asarray(keep, dtype=int)
        m = len(self.masters)
        H = np.zeros((self.n, m + len(keep)))
        H[self.masters, np.arange(m)] = 1.0
        H[np.ix_(self.slaves, np.arange(m))] = self.guyan
        H[np.ix_(self.slaves, m + np.arange(len(keep)))] = self.phi[:, keep]
        return H


def craig_bampton(M: np.ndarray, K: np.ndarray, masters: np.ndarray) -> CraigBampton:
    """Craig-Bampton transformation of ``(M, K)`` with the given master dofs (eqs. 5.3-5.4, 5.47)."""
    masters = np.asarray(masters, dtype=int)
    slaves = np.setdiff1d(np.arange(M.shape[0]), masters)
    K22 = K[np.ix_(slaves, slaves)]
    guyan = -scipy.linalg.solve(K22, K[np.ix_(slaves, masters)], assume_a="pos")
    w2, phi = scipy.linalg.eigh(K22, M[np.ix_(slaves, slaves)])
    return CraigBampton(masters, slaves, guyan, phi, w2)


def project(M: np.ndarray, K: np.ndarray, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reduced matrices ``H' M H`` and ``H' K H`` (eqs. 5.6-5.7)."""
    return H.T @ M @ H, H.T @ K @ H


@dataclass(frozen=True)
class Ranking:
    """Interior modes in order of importance.

    Attributes
    ----------
    order : int array
        Interior-mode indices (ascending-frequency numbering), most important first.
    score : array
        The ranking coefficient of each interior mode (``Upsilon_Lambda`` or ``Gamma``),
        indexed like the interior modes, not like ``order``.
    """
    order: np.ndarray
    score: np.ndarray


def participation(M: np.ndarray, K: np.ndarray, cb: CraigBampton, targets: list[int],
                  shift: float = 1e-4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IMR participation coefficients ``Upsilon_{i,s}`` (eq. 5.19) and modal responses.

    Each target mode ``i`` of the full model is excited by the fictitious
    force ``M u_i cos(w_f t)`` at ``w_f = w_i (1 + shift)`` (eqs. 5.9-5.11);
    ``Upsilon_{i,s}`` is the part of its modal response ``q_i`` carried by
    interior mode ``s`` (eqs. 5.12-5.17).  The frequency factor is
    ``1 / (w_s^2 / w_f^2 - 1)`` as in eq. 5.14 (eqs. 5.17-5.19 print ``w_i``,
    which differs by ``shift`` and breaks the identity below).

    Returns
    -------
    ups : (len(targets), s) array
        Participation coefficients.
    q : (len(targets),) array
        The full modal responses ``1 / (w_i^2 - w_f^2)``.
    masters : (len(targets),) array
        The masters' share ``Gamma1_i x1``; ``masters + ups.sum(axis=1) == q`` (eq. 5.16).
    """
    f, U = modes(M, K, max(targets) + 1)
    w2 = (2 * np.pi * f) ** 2
    mi, si = cb.masters, cb.slaves
    M21, M22 = M[np.ix_(si, mi)], M[np.ix_(si, si)]
    gamma = U.T @ M @ cb.basis()                     # rows of U^-1 H (U is M-orthonormal)
    gamma1, gamma2 = gamma[:, :len(mi)], gamma[:, len(mi):]
    ups, q, masters = [], [], []
    for i in targets:
        wi2 = w2[i]
        wf2 = wi2 * (1 + shift) ** 2
        ui1, ui2 = U[mi, i], U[si, i]
        m = (wi2 * M21 + wf2 * M22 @ cb.guyan) @ ui1 / (wf2 * (wi2 - wf2)) + M22 @ ui2 / wf2
        ups.append(gamma2[i] / (cb.omega2 / wf2 - 1.0) * (m @ cb.phi))
        q.append(1.0 / (wi2 - wf2))
        masters.append(gamma1[i] @ ui1 / (wi2 - wf2))
    return np.array(ups), np.array(q), np.array(masters)


def imr(M: np.ndarray, K: np.ndarray, cb: CraigBampton, targets: list[int],
        weights: np.ndarray | None = None) -> Ranking:
    """Interior mode ranking for a set ``Lambda`` of full-model modes (eqs. 5.21-5.22).

    Parameters
    ----------
    targets : list of int
        0-based indices of the full model's modes (ascending frequency) to represent.
    weights : array, optional
        ``alpha_i`` of each target, normalised to sum 1; equal by default.
    """
    alpha = _weights(targets, weights)
    ups, _, _ = participation(M, K, cb, targets)
    score = (alpha[:, None] * np.abs(ups) / np.linalg.norm(ups, axis=1, keepdims=True)).sum(axis=0)
    return Ranking(np.argsort(-score, kind="stable"), score)


def truncation_error(M: np.ndarray, K: np.ndarray, cb: CraigBampton, targets: list[int],
                     ranking: Ranking, weights: np.ndarray | None = None) -> np.ndarray:
    """Relative truncation error ``epsilon_q`` (eq. 5.23) after keeping 0, 1, ... ranked modes.

    Returns
    -------
    (s + 1,) array
        Element ``tau``: the bound ``sum_i alpha_i sum_{dropped} |Upsilon_{i,s}| / |q_i|`` with
        the first ``tau`` modes of ``ranking.order`` kept, as a fraction (not percent).
    """
    alpha = _weights(targets, weights)
    ups, q, _ = participation(M, K, cb, targets)
    dropped = np.abs(ups[:, ranking.order])[:, ::-1].cumsum(axis=1)[:, ::-1]
    dropped = np.hstack([dropped, np.zeros((len(targets), 1))])
    return (alpha[:, None] * dropped / np.abs(q)[:, None]).sum(axis=0)


def energy_contributions(M: np.ndarray, K: np.ndarray, cb: CraigBampton, force: np.ndarray,
                         omega: float) -> tuple[np.ndarray, float]:
    """Each interior mode's share of the mean energy of one harmonic response (eq. 5.36).

    Parameters
    ----------
    force : (n,) array
        Amplitude over all dofs (zero on the slaves).
    omega : float
        Angular frequency, rad/s, off the natural frequencies (the model is undamped).

    Returns
    -------
    terms : (s,) array
        ``1/2 (w_s^2 + w^2) eta_s^2 + w^2 (x1' M12_s) eta_s`` of each interior mode, signed.
    masters : float
        ``x1' (K11 + w^2 M11) x1 / 4``; the mean energy is ``masters + terms.sum() / 2``.

    Notes
    -----
    Undamped, every response is in phase or in antiphase with its force, so
    the ``cos(beta - gamma)`` of eq. 5.36 is the product of signs and
    ``|x1|' D |eta|`` is the signed ``x1' . eta``.
    """
    m = len(cb.masters)
    H = cb.basis()
    Mh, Kh = project(M, K, H)
    y = np.linalg.solve(Kh - omega ** 2 * Mh, H.T @ force)        # eq. 5.37
    x1, eta = y[:m], y[m:]
    coupling = Mh[:m, m:]                                          # (M12 + B' M22) Phi, eq. 5.7
    terms = 0.5 * (cb.omega2 + omega ** 2) * eta ** 2 + omega ** 2 * (x1 @ coupling) * eta
    return terms, float(x1 @ (Kh[:m, :m] + omega ** 2 * Mh[:m, :m]) @ x1) / 4.0


def ebr(M: np.ndarray, K: np.ndarray, cb: CraigBampton, forces: np.ndarray,
        omegas: np.ndarray) -> Ranking:
    """Energy-based ranking for a periodic force on the masters (eq. 5.39).

    Parameters
    ----------
    forces : (n_f, n) array
        Amplitude of each harmonic component over all dofs (zero on the slaves).
    omegas : (n_f,) array
        Angular frequency of each component, rad/s.
    """
    score = sum(np.abs(energy_contributions(M, K, cb, f, w)[0])
                for f, w in zip(np.atleast_2d(forces), np.atleast_1d(omegas)))
    return Ranking(np.argsort(-score, kind="stable"), score)


def sbe(cb: CraigBampton) -> Ranking:
    """The rule-of-thumb sorting by eigenfrequency (SBE): lowest interior modes first."""
    return Ranking(np.argsort(cb.omega2, kind="stable"), -cb.omega2)


def _weights(targets: list[int], weights: np.ndarray | None) -> np.ndarray:
    alpha = np.ones(len(targets)) if weights is None else np.asarray(weights, dtype=float)
    return alpha / alpha.sum()
