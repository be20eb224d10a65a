"""Bounded, regularised model updating of mass and stiffness (seed 004, section 4.4).

The nominal matrices ``M^N, K^N`` are corrected by ``Delta M = sum_j A_j alpha_j`` and
``Delta K = sum_k B_k beta_k`` (eqs. 4.26-4.28), with dimensionless corrections
``chi = (alpha, beta)`` (relative changes of the parameters, eq. 4.27) and
``A_j = m_j dM/dm_j``, ``B_k = k_k dK/dk_k``.  Every measured eigenpair
``(w_i^2, phi_i)`` must satisfy ``(K^N + Delta K) phi_i = w_i^2 (M^N + Delta M) phi_i``;
premultiplied by ``phi_i'`` it is one linear equation in ``chi`` (eqs. 4.30-4.32)::

    a_i chi = b_i,  a_i = [-w_i^2 phi_i' A_j phi_i | phi_i' B_k phi_i],
                    b_i = phi_i' (w_i^2 M^N - K^N) phi_i

(the thesis writes ``0 = a_i chi - b_i`` with the opposite signs in both).  The
weighted rows are preconditioned by their pseudo-inverse (eq. 4.34) and the
bounded, Tikhonov-regularised problem (eq. 4.35) is solved by
:func:`scipy.optimize.lsq_linear` -- convex, so the optimum is global.

The thesis's measured shapes are not available; :func:`update` takes
shapes over all model dofs (the thesis reaches that by least-squares
expansion of the measured translations and the ERLS transformation, eq.
4.25, neither of which is needed for synthetic data in model coordinates).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.optimize import lsq_linear


def parameter_parts(build: Callable[[np.ndarray], np.ndarray], nominal: np.ndarray) -> list[np.ndarray]:
    """``p_j d(build)/dp_j`` at the nominal parameters, for a ``build`` affine in each parameter.

    Exact for matrices linear in a parameter (mass density, Young's modulus, a lumped mass):
    the part is ``build(p) - build(p with p_j = 0)``.
    """
    nominal = np.asarray(nominal, dtype=float)
    full = build(nominal)
    parts = []
    for j in range(len(nominal)):
        p = nominal.copy()
        p[j] = 0.0
        parts.append(full - build(p))
    return parts


def update(MN: np.ndarray, KN: np.ndarray, A: list[np.ndarray], B: list[np.ndarray],
           omega2: np.ndarray, shapes: np.ndarray, lower: np.ndarray, upper: np.ndarray,
           weights: np.ndarray | None = None, lam: float = 0.0,
           omega_reg: np.ndarray | None = None) -> np.ndarray:
    """Relative corrections ``chi = (alpha, beta)`` from measured eigenpairs (eq. 4.35).

    Parameters
    ----------
    MN, KN : (n, n) arrays
        Nominal mass and stiffness.
    A, B : lists of (n, n) arrays
        Mass and stiffness parts of the updating parameters (:func:`parameter_parts`).
    omega2 : (n_ex,) array
        Measured squared angular frequencies, (rad/s)^2.
    shapes : (n, n_ex) array
        Measured mode shapes over the model dofs, any normalisation.
    lower, upper : (n_m + n_k,) arrays
        Bounds of ``chi`` (eq. 4.29).
    weights : (n_ex,) array, optional
        ``w_i`` of each eigenpair; 1 by default.
    lam : float
        Regularisation parameter ``lambda``.
    omega_reg : (n_m + n_k, n_m + n_k) array, optional
        Regularisation operator ``Omega``; identity by default.

    Returns
    -------
    (n_m + n_k,) array
    """
    w = np.ones(len(omega2)) if weights is None else np.asarray(weights, dtype=float)
    rows, rhs = [], []
    for wi, w2, phi in zip(w, omega2, np.asarray(shapes).T):
        rows.append(wi * np.array([-w2 * phi @ Aj @ phi for Aj in A] + [phi @ Bk @ phi for Bk in B]))
        rhs.append(wi * phi @ (w2 * MN - KN) @ phi)
    target = np.linalg.pinv(np.array(rows)) @ np.array(rhs)        # eq. 4.34
    n = len(target)
    reg = np.eye(n) if omega_reg is None else np.asarray(omega_reg, dtype=float)
    lhs = np.vstack([np.eye(n), lam * reg])
    return lsq_linear(lhs, np.concatenate([target, np.zeros(n)]),
                      bounds=(np.asarray(lower, float), np.asarray(upper, float))).x


def corrected(MN: np.ndarray, KN: np.ndarray, A: list[np.ndarray], B: list[np.ndarray],
              chi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``M^N + sum A_j alpha_j`` and ``K^N + sum B_k beta_k`` (eq. 4.28)."""
    nm = len(A)
    return (MN + sum(a * c for a, c in zip(A, chi[:nm])),
            KN + sum(b * c for b, c in zip(B, chi[nm:])))
