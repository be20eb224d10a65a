"""Undamped modal analysis and the comparison metrics of seed 004 (eqs. 5.24, 5.25, 5.40).

Frequencies are in Hz, mode shapes are columns normalised to unit modal
mass (``U' M U = I``).  Rigid-body modes come out at (numerically) zero
frequency; negative round-off eigenvalues are clipped to zero.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg


def modes(M: np.ndarray, K: np.ndarray, count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Natural frequencies and mass-normalised mode shapes of ``K u = w^2 M u``.

    Parameters
    ----------
    M, K : (n, n) arrays
        Symmetric mass (positive definite) and stiffness (positive semi-definite) matrices.
    count : int, optional
        Only the lowest ``count`` modes.

    Returns
    -------
    f : (k,) array
        Frequencies in ascending order, Hz.
    U : (n, k) array
        Mode shapes, ``U.T @ M @ U = I``.
    """
    subset = None if count is None else [0, count - 1]
    w2, U = scipy.linalg.eigh(K, M, subset_by_index=subset)
    return np.sqrt(np.clip(w2, 0.0, None)) / (2 * np.pi), U


def frequency_error(f_ref: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Relative frequency error ``|f_ref - f| / f_ref``, percent (eq. 5.24)."""
    f_ref = np.asarray(f_ref, dtype=float)
    return np.abs(f_ref - np.asarray(f)) / f_ref * 100.0


def nco(u: np.ndarray, v: np.ndarray, M: np.ndarray) -> float:
    """Normalised cross orthogonality ``(u'Mv)^2 / ((u'Mu)(v'Mv))`` of two shapes (eq. 5.25)."""
    return float((u @ M @ v) ** 2 / ((u @ M @ u) * (v @ M @ v)))


def mac(u: np.ndarray, v: np.ndarray) -> float:
    """Modal assurance criterion ``(u'v)^2 / ((u'u)(v'v))`` (eqs. 5.40 and section 4.4)."""
    return float((u @ v) ** 2 / ((u @ u) * (v @ v)))


def pair_modes(U_ref: np.ndarray, U: np.ndarray, M: np.ndarray) -> np.ndarray:
    """For each column of ``U_ref``, the column of ``U`` with the highest NCO."""
    G = U_ref.T @ M @ U
    n_ref = np.einsum("ij,jk,ki->i", U_ref.T, M, U_ref)
    n = np.einsum("ij,jk,ki->i", U.T, M, U)
    return np.argmax(G ** 2 / np.outer(n_ref, n), axis=1)
