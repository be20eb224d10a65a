"""Global parametric model: polynomial stiffness and damping in position.

One least-squares fit over every moving sample of both directions::

    F = m a + sum_j b_j x^j v + sum_i c_i x^i + F0 + Fc d

``d`` is the direction label (+1/-1: ``Fc`` is a Coulomb-like offset),
``stiffness`` lists the powers ``i`` of the spring force (e.g. ``(1, 3)`` for
``k1 x + k3 x^3``) and ``damping`` the powers ``j`` (``(0,)``: constant
damping).  Where piecewise models spend four parameters per segment and
direction, a device whose spring is a smooth function of position is
described by a handful; it extrapolates smoothly and simulates without the
force jumps of segment edges.

The result is written in the locally linear form every consumer reads
(:mod:`hapflow.blocks.impedance_model`) on knots across the data's range:
``k(x) = dF_s/dx`` (the local stiffness), ``F0(x) = F_s(x) - k(x) x + F0 +-
Fc``, ``b(x) = sum_j b_j x^j``, so ``k(x) x + F0(x)`` reproduces the spring
force at the knots; with 401 knots the interpolation error between them is
below 1e-5 of the spring force of a cubic.  The coefficients themselves are the
model file's ``polynomial`` section (``ImpedanceModel.polynomial``), which the
``PolynomialImpedance`` and ``PolynomialAdmittance`` blocks evaluate exactly at any
position; their standard errors, the condition number and the BIC are kept in
the model's diagnostics.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import IdentError
from .prep import Motion, band_limited


def parse_powers(spec: str | tuple[int, ...] | list[int], what: str) -> tuple[int, ...]:
    """Powers of x from ``"1,3"`` or ``(1, 3)``: distinct integers 0..9, ascending."""
    try:
        items = [int(p) for p in (spec.split(",") if isinstance(spec, str) else spec)]
    except (TypeError, ValueError):
        items = []
    if not items or len(set(items)) != len(items) or not all(0 <= p <= 9 for p in items):
        raise IdentError(f"{what} powers {spec!r}: give distinct integers 0..9 separated by "
                         "commas, e.g. '1,3' for k1 x + k3 x^3")
    return tuple(sorted(items))


@dataclass
class PolyFit:
    """Coefficients of the global model, by name (``m``, ``b0``, ``k1``, ..., ``F0``, ``Fc``)."""

    names: list[str]
    theta: np.ndarray
    stderr: np.ndarray
    cond: float
    n: int
    rss: float

    @property
    def coefficients(self) -> dict[str, float]:
        return dict(zip(self.names, self.theta.tolist()))

    @property
    def bic(self) -> float:
        """``n log(RSS / n) + p log n``."""
        return self.n * math.log(self.rss / self.n) + len(self.names) * math.log(self.n)


def _columns(motion: Motion, stiffness: tuple[int, ...],
             damping: tuple[int, ...]) -> tuple[list[str], list[np.ndarray]]:
    x = motion.x
    names, cols = [], []
    if not motion.quasi_static:
        names.append("m")
        cols.append(motion.acc)
        for j in damping:
            names.append(f"b{j}")
            cols.append(motion.vel * x ** j)
    for i in stiffness:
        if i == 0:
            continue
        names.append(f"k{i}")
        cols.append(x ** i)
    names += ["F0", "Fc"]
    cols += [np.ones_like(x), np.sign(motion.direction).astype(np.float64)]
    return names, cols


def fit_poly(motion: Motion, stiffness: tuple[int, ...] = (1, 3),
             damping: tuple[int, ...] = (0,)) -> PolyFit:
    """Least squares of the global model over the moving, valid samples.

    Every column and the force pass through the low-pass that shaped the
    velocity and acceleration estimates (:func:`~hapflow.ident.prep.band_limited`),
    so content above the estimator's band biases nothing.  Columns are scaled
    to unit RMS before one QR factorisation; standard errors assume
    independent residuals.
    """
    idx = np.flatnonzero((motion.direction != 0) & motion.valid)
    if idx.size == 0:
        raise IdentError("no sample moves faster than the dead band: nothing to fit")
    names, cols = _columns(motion, stiffness, damping)
    if np.all(motion.direction[idx] == motion.direction[idx][0]):
        names, cols = names[:-1], cols[:-1]  # one direction only: Fc cannot be told from F0
    quasi = motion.quasi_static
    A = np.column_stack([(c if quasi else band_limited(motion, c))[idx] for c in cols])
    y = (motion.force if quasi else band_limited(motion, motion.force))[idx]
    n, p = A.shape
    if n <= 2 * p:
        raise IdentError(f"{n} moving samples are too few for {p} polynomial coefficients; "
                         f"at least {2 * p + 1} are needed")
    scale = np.sqrt(np.mean(A * A, axis=0))
    scale[scale == 0.0] = 1.0
    R = np.linalg.qr(np.column_stack([A / scale, y]), mode="r")
    sv = np.linalg.svd(R[:p, :p], compute_uv=False)
    cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else math.inf
    if not cond < 1e12:
        raise IdentError(f"the polynomial model's regressors {', '.join(names)} cannot be told "
                         f"apart in this data (condition number {cond:.3g}): drop powers or "
                         "excite the device more widely")
    ts = np.linalg.solve(R[:p, :p], R[:p, p])
    rss = float(R[p, p] ** 2)
    Rinv = np.linalg.inv(R[:p, :p])
    se = np.sqrt(rss / (n - p) * np.sum(Rinv * Rinv, axis=1)) / scale
    return PolyFit(names, ts / scale, se, cond, n, max(rss, 1e-300))


def knots(fit: PolyFit, lo: float, hi: float, direction: int, count: int = 401):
    """The fit as :class:`~hapflow.blocks.impedance_model.Knots` of one direction on ``[lo, hi]``."""
    from hapflow.blocks.impedance_model import Knots
    c = fit.coefficients
    x = np.linspace(lo, hi, count)
    spring = sum(c[n] * x ** int(n[1:]) for n in c if n.startswith("k"))
    k = sum(int(n[1:]) * c[n] * x ** (int(n[1:]) - 1) for n in c if n.startswith("k"))
    k = k + np.zeros_like(x)
    b = sum(c[n] * x ** int(n[1:]) for n in c if n.startswith("b")) + np.zeros_like(x)
    F0 = spring - k * x + c["F0"] + direction * c.get("Fc", 0.0)
    return Knots(x, np.full(x.shape, c.get("m", 0.0)), b, k, F0)
