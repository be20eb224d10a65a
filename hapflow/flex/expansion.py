"""Configuration-dependent matrices of an ERLS mechanism as trigonometric sums, for kernels.

Every configuration dependence of an ERLS model with affine link angles
``phi = A q + b`` is a trigonometric polynomial of degree two in each link
angle: an element matrix ``T(phi)' k T(phi)`` has entries in ``1, cos 2phi,
sin 2phi`` (translation-translation) and ``cos phi, sin phi``
(translation-rotation); ``S`` and the rotations of eq. 5.48 are linear in
``cos phi, sin phi``.  So with the features::

    f(q) = [1, cos phi_l, sin phi_l, cos 2 phi_l, sin 2 phi_l  for each link l]

each such matrix is ``X(q) = sum_k f_k(q) X_k`` *exactly*.  :func:`fit` finds the
``X_k`` from the Python model by least squares over sampled configurations
(and checks the fit reproduces the model to round-off), so an evaluation --
numpy here, a compiled kernel later -- computes the very same matrices as
:mod:`hapflow.flex.erls` with multiply-adds only.  Links whose angles differ by a constant (a parallelogram) make the
features dependent; least squares then picks one of the equivalent splits.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .erls import Mechanism

ROUND_OFF = 1e-12    # coefficients below this fraction of the largest are least-squares round-off


def n_features(n_links: int) -> int:
    """Number of features of a mechanism with ``n_links`` links."""
    return 1 + 4 * n_links


def features(angles: np.ndarray) -> np.ndarray:
    """``f`` of the module notes for the link ``angles`` (rad)."""
    a = np.asarray(angles, dtype=float)
    per_link = np.stack([np.cos(a), np.sin(a), np.cos(2 * a), np.sin(2 * a)], axis=1)
    return np.concatenate([[1.0], per_link.ravel()])


def feature_rates(angles: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Time derivatives of the features for link angular ``rates`` (rad/s)."""
    a, w = np.asarray(angles, dtype=float), np.asarray(rates, dtype=float)
    per_link = np.stack([-np.sin(a) * w, np.cos(a) * w,
                         -2 * np.sin(2 * a) * w, 2 * np.cos(2 * a) * w], axis=1)
    return np.concatenate([[0.0], per_link.ravel()])


def fit(mech: Mechanism, fn: Callable[[np.ndarray], np.ndarray], samples: int = 48,
        seed: int = 0) -> np.ndarray:
    """Coefficients ``X_k`` with ``fn(q) = sum_k f_k(q) X_k`` for every ``q``.

    Parameters
    ----------
    fn : callable
        ``q -> array`` (any shape), a trigonometric polynomial of the link angles as above.
    samples : int
        Configurations sampled uniformly in ``[-pi, pi)^nq`` (at least the feature count).

    Returns
    -------
    (n_features, *shape) array

    Raises
    ------
    ValueError
        If the fit misses ``fn`` at a fresh configuration by more than 1e-9 relative:
        ``fn`` is not such a polynomial.
    """
    rng = np.random.default_rng(seed)
    nf = n_features(len(mech.angle_offsets))
    qs = rng.uniform(-np.pi, np.pi, size=(max(samples, 2 * nf), mech.nq))
    F = np.array([features(mech.angles(q)) for q in qs])
    values = np.array([fn(q) for q in qs])
    coeffs, *_ = np.linalg.lstsq(F, values.reshape(len(qs), -1), rcond=None)
    coeffs = coeffs.reshape((nf,) + values.shape[1:])
    # the exact expansion is sparse (a matrix entry depends on the links it couples only); least
    # squares leaves round-off (here 1e-17 of the largest) where it has zeros: make them zeros,
    # which kernels then skip
    coeffs[np.abs(coeffs) <= ROUND_OFF * np.abs(coeffs).max()] = 0.0
    q = rng.uniform(-np.pi, np.pi, size=mech.nq)
    f = features(mech.angles(q))
    exact = fn(q)
    if np.abs(np.tensordot(f, coeffs, 1) - exact).max() > 1e-9 * max(np.abs(exact).max(), 1e-300):
        raise ValueError("the function is not a degree-2 trigonometric polynomial of the link angles")
    return coeffs
