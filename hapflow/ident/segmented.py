"""Segmented ordinary least squares (Colton & Hollerbach 2004), fixed or automatic segments.

Within each direction the position range is cut into segments; in segment
``j`` the force is fitted by ``F = m_j a + b_j v + k_j x + F0_j`` (any subset
of the regressors ``[a v x 1]``; a dropped regressor's parameter is 0).
Because the samples of a :class:`~hapflow.ident.prep.Group` are sorted by
position, a segment is a contiguous slice.

Numerics (:func:`fit_slice`): the non-constant columns are centred on their
segment means and scaled to unit RMS, ``[A | y]`` is reduced by one QR
factorisation (no Q is formed: ``R[:p, :p] theta = R[:p, p]`` and the residual
sum of squares is ``R[p, p]^2``), and the estimate is mapped back to the
uncentred, unscaled parameters by a linear map ``T``.  Standard errors are
``sqrt(diag(T s^2 (R^T R)^-1 T^T))`` with ``s^2 = RSS / (n - p)``: they assume
independent residuals.  The condition number is ``cond(R)`` of the centred,
scaled design: 1 means orthogonal regressors; a large value means the data
cannot tell the parameters apart (a single-frequency sine makes ``a``
proportional to ``x`` and ``v`` a function of ``x`` in each direction, so
``m``, ``b``, ``k`` and ``F0`` blur together).

Automatic segmentation (:func:`auto_segments`): candidate boundaries every
``resolution`` metres; the partition into runs of candidate bins minimising
the Bayesian information criterion (each segment with its own noise
variance)::

    BIC = sum_j n_j log(RSS_j / n_j) + penalty (p + 2) S log n

(``p`` coefficients, a variance and a boundary per segment, ``S`` segments,
``n`` samples) is found exactly by dynamic programming over the candidates
(optimal partitioning), from per-bin sufficient statistics; segments have at
least ``min_samples`` samples.  A true boundary rarely falls on a candidate,
and a bin that straddles it fits neither side, so the partition is then
refined at sample level until nothing changes (split/merge): each boundary
moves to the best position within 1.5 candidate spacings; a boundary whose
removal lowers the BIC is removed (merge); a short segment straddling a
boundary is dissolved into its neighbours with one boundary placed where it
fits best.  The chosen segments are refitted with :func:`fit_slice`.
``penalty > 1`` gives fewer segments.  The partition is the best with at most
``max_segments`` segments (12 by default; the dynamic programme counts
segments), and no inner segment is narrower than ``min_width`` (1 % of the
range by default), in the search and in the refinement: measured force
curves of key switches otherwise got 30-40 segments per direction, one of
zero width with infinite standard errors.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import IdentError
from .prep import Group

REGRESSORS = ("a", "v", "x", "1")
"""Regressor order; the parameters are ``m, b, k, F0`` in the same order."""
PARAMS = ("m", "b", "k", "F0")
PARAM_OF = dict(zip(REGRESSORS, PARAMS))


def parse_regressors(spec: str | list[str] | tuple[str, ...] | None, quasi_static: bool = False) -> tuple[str, ...]:
    """Normalise a regressor selection (``"avx1"``, ``"x1"``, ``["x", "1"]``) to canonical order.

    ``None`` gives ``avx1``, or ``x1`` for quasi-static data.
    """
    if spec is None:
        return ("x", "1") if quasi_static else REGRESSORS
    items = list(spec.replace(",", "").replace(" ", "")) if isinstance(spec, str) else list(spec)
    bad = [r for r in items if r not in REGRESSORS]
    if bad or not items or len(set(items)) != len(items):
        raise IdentError(f"regressors {spec!r}: choose a subset of 'a', 'v', 'x', '1' "
                         "(acceleration, velocity, position, constant), e.g. 'avx1' or 'x1'")
    if quasi_static and ({"a", "v"} & set(items)):
        raise IdentError("quasi-static data has no velocity or acceleration: use the "
                         "regressors 'x1' (or 'x' / '1')")
    return tuple(r for r in REGRESSORS if r in items)


def design(group: Group, regressors: tuple[str, ...]) -> np.ndarray:
    """Regressor matrix (n, p) of a group, columns in ``regressors`` order."""
    return np.column_stack([group.column(r) for r in regressors])


@dataclass
class SliceFit:
    """OLS result for one segment (parameters in ``m, b, k, F0`` order; unused ones 0)."""

    theta: np.ndarray
    stderr: np.ndarray
    cond: float
    n: int
    rss: float


def fit_slice(phi: np.ndarray, y: np.ndarray, regressors: tuple[str, ...]) -> SliceFit:
    """Least squares ``y ~ phi theta`` with centring, column scaling and one QR.

    Parameters
    ----------
    phi : ndarray (n, p)
        Regressor columns in ``regressors`` order.
    y : ndarray (n,)
        Force, N.
    regressors : tuple of str
        Names of the columns.

    Returns
    -------
    SliceFit
        Full-length (4) parameter and standard-error vectors.
    """
    n, p = phi.shape
    if n <= p:
        raise IdentError(f"a segment has {n} samples for {p} parameters")
    const = [j for j, r in enumerate(regressors) if r == "1"]
    mean = phi.mean(axis=0)
    centre = np.zeros(p)
    if const:
        centre = mean.copy()
        centre[const] = 0.0
    A = phi - centre
    scale = np.sqrt(np.mean(A * A, axis=0))
    # a column that does not vary within the segment (all samples at one position,
    # the constant) cannot be told from the constant: it is left out (parameter 0,
    # standard error and condition number infinite)
    flat = scale <= 1e-9 * (np.abs(mean) + 1e-300)
    flat[const] = False
    scale[scale == 0.0] = 1.0
    A /= scale
    A[:, flat] = 0.0
    R = np.linalg.qr(np.column_stack([A, y]), mode="r")
    Rp, z = R[:p, :p], R[:p, p]
    rss = float(R[p, p] ** 2)
    sv = np.linalg.svd(Rp, compute_uv=False)
    cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf")
    if flat.any():
        use = ~flat
        ts = np.zeros(p)
        if use.any():
            sub = np.linalg.qr(np.column_stack([A[:, use], y]), mode="r")
            q = int(use.sum())
            ts[use] = np.linalg.lstsq(sub[:q, :q], sub[:q, q], rcond=None)[0]
            rss = float(sub[q, q] ** 2)
        cov_s = np.full((p, p), np.inf)
        cond = float("inf")
    elif cond < 1e13:
        ts = np.linalg.solve(Rp, z)
        Rinv = np.linalg.inv(Rp)
        cov_s = Rinv @ Rinv.T
    else:
        ts = np.linalg.lstsq(Rp, z, rcond=None)[0]
        cov_s = np.full((p, p), np.inf)
    # theta_j = ts_j / scale_j for non-constant j; the constant absorbs the centring
    T = np.diag(1.0 / scale)
    if const:
        c = const[0]
        for j in range(p):
            if j != c:
                T[c, j] = -centre[j] / scale[j]
    theta_p = T @ ts
    s2 = rss / (n - p)
    with np.errstate(invalid="ignore"):
        cov = T @ (s2 * cov_s) @ T.T
    full = np.zeros(4)
    se = np.zeros(4)
    for j, r in enumerate(regressors):
        k = REGRESSORS.index(r)
        full[k] = theta_p[j]
        se[k] = np.sqrt(cov[j, j]) if np.isfinite(cov[j, j]) else np.inf
    return SliceFit(full, se, cond, n, rss)


@dataclass
class SegmentFit:
    """Piecewise-constant parameters of one direction.

    Attributes
    ----------
    direction : int
        +1 or -1.
    edges : ndarray (S + 1,)
        Segment boundaries, m (segment j is ``[edges[j], edges[j+1])``).
    theta, stderr : ndarray (S, 4)
        ``m, b, k, F0`` per segment and their standard errors.
    cond : ndarray (S,)
        Condition number of each segment's centred, scaled design.
    n : ndarray (S,)
        Samples per segment.
    rss : ndarray (S,)
        Residual sum of squares, N^2.
    regressors : tuple of str
    """

    direction: int
    edges: np.ndarray
    theta: np.ndarray
    stderr: np.ndarray
    cond: np.ndarray
    n: np.ndarray
    rss: np.ndarray
    regressors: tuple[str, ...]
    info: dict = field(default_factory=dict)

    @property
    def segments(self) -> int:
        return self.theta.shape[0]


def _default_min_samples(p: int) -> int:
    return max(5 * p, 2 * p + 2)


def equal_edges(group: Group, segments: int) -> np.ndarray:
    """``segments`` equal-width segments over the group's position range."""
    if not isinstance(segments, (int, np.integer)) or segments < 1:
        raise IdentError(f"the number of segments must be a positive integer, got {segments!r}")
    lo, hi = float(group.x[0]), float(group.x[-1])
    if hi <= lo:
        raise IdentError("all samples of one direction are at the same position: "
                         "no position range to segment")
    return np.linspace(lo, hi, segments + 1)


def _cuts(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    cuts = np.searchsorted(x, edges[1:-1], side="left")
    return np.concatenate([[0], cuts, [x.size]])


def _merge_small(cuts: np.ndarray, edges: np.ndarray, min_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge segments with fewer than ``min_samples`` samples into a neighbour."""
    cuts, edges = list(cuts), list(edges)
    while len(cuts) > 2:
        counts = np.diff(cuts)
        small = int(np.argmin(counts))
        if counts[small] >= min_samples:
            break
        if small == len(counts) - 1:
            drop = small          # merge the last segment into the one before
        elif small == 0:
            drop = 1
        else:
            drop = small if counts[small - 1] <= counts[small + 1] else small + 1
        del cuts[drop]
        del edges[drop]
    return np.asarray(cuts), np.asarray(edges, dtype=np.float64)


def fit_segments(group: Group, edges: np.ndarray | None = None, segments: int = 8,
                 regressors: tuple[str, ...] = REGRESSORS,
                 min_samples: int | None = None) -> SegmentFit:
    """Ordinary least squares per position segment of one direction.

    Parameters
    ----------
    group : Group
        Direction-grouped, position-sorted samples.
    edges : ndarray, optional
        Segment boundaries (m, increasing); default ``segments`` equal widths
        over the group's range.  The outer edges are widened to the data.
    segments : int
        Number of equal segments when ``edges`` is not given.
    regressors : tuple of str
        Subset of ``('a', 'v', 'x', '1')``.
    min_samples : int, optional
        Segments with fewer samples are merged into a neighbour (default
        ``max(5 p, 2 p + 2)``).

    Returns
    -------
    SegmentFit
    """
    p = len(regressors)
    min_samples = _default_min_samples(p) if min_samples is None else int(min_samples)
    if len(group) < max(min_samples, p + 1):
        raise IdentError(f"direction {group.direction:+d} has only {len(group)} samples: "
                         f"too few for {p} parameters; at least {max(min_samples, p + 1)} are "
                         "needed")
    too_many = isinstance(segments, (int, np.integer)) and segments * min_samples > len(group)
    if edges is None and too_many:
        raise IdentError(f"{segments} segments need at least {min_samples} samples each, and "
                         f"direction {group.direction:+d} has {len(group)} samples: ask for at "
                         f"most {max(1, len(group) // min_samples)} segments")
    edges = equal_edges(group, segments) if edges is None else np.asarray(edges, dtype=np.float64).copy()
    if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
        raise IdentError("segment edges must be an increasing list of at least two positions")
    edges[0] = min(edges[0], float(group.x[0]))
    edges[-1] = max(edges[-1], float(group.x[-1]))
    cuts, edges = _merge_small(_cuts(group.x, edges), edges, min_samples)
    phi = design(group, regressors)
    y = group.force
    fits = [fit_slice(phi[i:j], y[i:j], regressors) for i, j in zip(cuts[:-1], cuts[1:])]
    return SegmentFit(group.direction, edges,
                      np.array([f.theta for f in fits]), np.array([f.stderr for f in fits]),
                      np.array([f.cond for f in fits]), np.array([f.n for f in fits]),
                      np.array([f.rss for f in fits]), tuple(regressors))


def _gram(Z: np.ndarray, i: int, j: int) -> np.ndarray:
    block = Z[i:j]
    return block.T @ block


def _cost(G: np.ndarray, n: np.ndarray | int, p: int) -> np.ndarray:
    """``n log(RSS / n)`` of least squares from Gram matrices of ``[phi | y]`` (batched)."""
    G = np.asarray(G)
    single = G.ndim == 2
    G = G[None] if single else G
    A, z, yy = G[:, :p, :p], G[:, :p, p], G[:, p, p]
    ridge = (1e-12 * np.trace(A, axis1=1, axis2=2) + 1e-300)[:, None, None] * np.eye(p)
    theta = np.linalg.solve(A + ridge, z[:, :, None])[:, :, 0]
    rss = np.maximum(yy - np.einsum("ij,ij->i", z, theta), 1e-300 + 1e-15 * np.abs(yy))
    n = np.asarray(n, dtype=np.float64)
    out = n * np.log(rss / n)
    return out[0] if single else out


def _bin_stats(Z: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Cumulative Gram matrices of ``Z = [phi | y]`` at the bin cuts, shape (B + 1, q, q)."""
    q = Z.shape[1]
    starts = cuts[:-1]
    G = np.zeros((starts.size, q, q))
    for i in range(q):
        for j in range(i, q):
            s = np.add.reduceat(Z[:, i] * Z[:, j], starts)
            G[:, i, j] = s
            G[:, j, i] = s
    C = np.zeros((starts.size + 1, q, q))
    np.cumsum(G, axis=0, out=C[1:])
    return C


def _partition(C: np.ndarray, counts: np.ndarray, p: int, pen: float, min_samples: int,
               at: np.ndarray, min_width: float, max_segments: int) -> tuple[list[int], float]:
    """Optimal partition of the bins into at most ``max_segments`` segments; bin boundaries, BIC.

    Dynamic programming over (segments used, last boundary): ``best[s, j]``
    is the least cost of bins ``[0, j)`` in ``s`` segments.  ``at`` holds each
    bin boundary's position; an inner segment spans at least ``min_width``
    metres (the first and last may be narrower: the data ends there).
    """
    B = counts.size - 1
    cost = np.full((B + 1, B + 1), np.inf)         # cost[i, j]: one segment over bins [i, j)
    for j in range(1, B + 1):
        starts = np.arange(j)
        nseg = counts[j] - counts[starts]
        wide = (at[j] - at[starts] >= min_width) | (starts == 0) | (j == B)
        ok = starts[(nseg >= min_samples) & wide]
        if ok.size:
            cost[ok, j] = _cost(C[j] - C[ok], counts[j] - counts[ok], p)
    best = np.full((max_segments + 1, B + 1), np.inf)
    arg = np.zeros((max_segments + 1, B + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for k in range(1, max_segments + 1):
        total = best[k - 1][:, None] + cost          # [start, end]
        arg[k] = np.argmin(total, axis=0)
        best[k] = total[arg[k], np.arange(B + 1)]
    bic = best[:, B] + pen * np.arange(max_segments + 1)
    k = int(np.argmin(bic))
    if not np.isfinite(bic[k]):
        return [0, B], np.inf
    bounds = [B]
    for level in range(k, 0, -1):
        bounds.append(int(arg[level, bounds[-1]]))
    return bounds[::-1], float(bic[k])


def _allowed(x: np.ndarray, ks: np.ndarray, a: int, b: int, min_width: float) -> np.ndarray:
    """Cuts in ``ks`` between distinct positions leaving both sides ``min_width`` wide.

    The outer segments (``a == 0``, ``b == n``) are exempt: the data ends there.
    """
    n = x.size
    ks = ks[(ks > 0) & (ks < n)]
    ks = ks[x[ks - 1] < x[ks]]
    cut = 0.5 * (x[ks - 1] + x[ks])
    left = 0.5 * (x[a - 1] + x[a]) if a > 0 else -np.inf
    right = 0.5 * (x[b - 1] + x[b]) if b < n else np.inf
    return ks[(cut - left >= min_width) & (right - cut >= min_width)]


def _refine(Z: np.ndarray, x: np.ndarray, cuts: list[int], p: int, reach: float,
            min_samples: int, min_width: float, max_candidates: int = 400) -> bool:
    """Move each boundary (sample cut) within +-reach metres to the least-cost position."""
    moved = False
    for i in range(1, len(cuts) - 1):
        a, c, b = cuts[i - 1], cuts[i], cuts[i + 1]
        lo = max(a + min_samples, int(np.searchsorted(x, x[c] - reach, side="left")))
        hi = min(b - min_samples, int(np.searchsorted(x, x[c] + reach, side="right")))
        if hi <= lo:
            continue
        ks = _allowed(x, np.arange(lo, hi + 1), a, b, min_width)
        if ks.size == 0:
            continue
        if ks.size > max_candidates:
            ks = ks[np.linspace(0, ks.size - 1, max_candidates).round().astype(int)]
        w0, w1 = int(ks[0]), int(ks[-1])
        left0 = _gram(Z, a, w0)
        right1 = _gram(Z, w1, b)
        W = Z[w0:w1]
        prefix = np.zeros((w1 - w0 + 1, Z.shape[1], Z.shape[1]))
        np.cumsum(W[:, :, None] * W[:, None, :], axis=0, out=prefix[1:])
        off = ks - w0
        GL = left0 + prefix[off]
        GR = right1 + (prefix[-1] - prefix[off])
        cost = _cost(GL, ks - a, p) + _cost(GR, b - ks, p)
        k = int(ks[int(np.argmin(cost))])
        if k != c:
            cuts[i] = k
            moved = True
    return moved


def _merge(Z: np.ndarray, cuts: list[int], p: int, pen: float) -> bool:
    """Remove boundaries while that lowers the BIC (greedy, best first)."""
    merged = False
    while len(cuts) > 2:
        costs = [float(_cost(_gram(Z, i, j), j - i, p)) for i, j in zip(cuts[:-1], cuts[1:])]
        gains = []
        for k in range(1, len(cuts) - 1):
            joint = float(_cost(_gram(Z, cuts[k - 1], cuts[k + 1]), cuts[k + 1] - cuts[k - 1], p))
            gains.append(costs[k - 1] + costs[k] + pen - joint)
        k = int(np.argmax(gains))
        if gains[k] <= 0:
            break
        del cuts[k + 1]
        merged = True
    return merged


def _dissolve(Z: np.ndarray, x: np.ndarray, cuts: list[int], p: int, pen: float,
              min_samples: int, min_width: float, max_candidates: int = 400) -> bool:
    """Replace an inner segment and its two boundaries by one boundary inside it, if the BIC drops.

    A short segment straddling a true boundary mixes both sides; moving either
    of its boundaries alone or merging it into one neighbour does not help, but
    sharing its samples between the neighbours at the right place does.
    """
    changed = False
    k = 1
    while k < len(cuts) - 2:
        a, c1, c2, b = cuts[k - 1], cuts[k], cuts[k + 1], cuts[k + 2]
        ks = _allowed(x, np.arange(max(c1, a + min_samples), min(c2, b - min_samples) + 1),
                      a, b, min_width)
        if ks.size == 0:
            k += 1
            continue
        if ks.size > max_candidates:
            ks = ks[np.linspace(0, ks.size - 1, max_candidates).round().astype(int)]
        GL0, GR0 = _gram(Z, a, c1), _gram(Z, c2, b)
        W = Z[c1:c2]
        prefix = np.zeros((c2 - c1 + 1, Z.shape[1], Z.shape[1]))
        np.cumsum(W[:, :, None] * W[:, None, :], axis=0, out=prefix[1:])
        off = ks - c1
        cost = (_cost(GL0 + prefix[off], ks - a, p)
                + _cost(GR0 + prefix[-1] - prefix[off], b - ks, p))
        now = (float(_cost(GL0, c1 - a, p)) + float(_cost(prefix[-1], c2 - c1, p))
               + float(_cost(GR0, b - c2, p)) + pen)
        j = int(np.argmin(cost))
        if cost[j] < now:
            cuts[k:k + 2] = [int(ks[j])]
            changed = True
        else:
            k += 1
    return changed


def auto_segments(group: Group, regressors: tuple[str, ...] = REGRESSORS,
                  resolution: float | None = None, min_samples: int | None = None,
                  penalty: float = 1.0, max_segments: int = 12,
                  min_width: float | None = None) -> SegmentFit:
    """Segment boundaries chosen from the data by minimum BIC (see the module docstring).

    Parameters
    ----------
    group : Group
        Direction-grouped, position-sorted samples.
    regressors : tuple of str
        Subset of ``('a', 'v', 'x', '1')``.
    resolution : float, optional
        Spacing of the candidate boundaries, m (default: range / 200).
    min_samples : int, optional
        Fewest samples in a segment (default ``max(5 p, 2 p + 2)``).
    penalty : float
        Multiplier of the BIC complexity term (1 = BIC).
    max_segments : int
        Most segments: the partition of least BIC among those with at most this many.
    min_width : float, optional
        Narrowest inner segment, m (default: 1 % of the range, two candidate
        spacings at the default resolution).  Boundaries are never placed closer:
        a sliver holds too few distinct positions to support four parameters,
        and its error bars are infinite.

    Returns
    -------
    SegmentFit
        With ``info`` holding the BIC, the final penalty and the resolution.
    """
    p = len(regressors)
    min_samples = _default_min_samples(p) if min_samples is None else int(min_samples)
    x = group.x
    n = x.size
    lo, hi = float(x[0]), float(x[-1])
    if hi <= lo:
        raise IdentError("all samples of one direction are at the same position")
    if n < min_samples:
        raise IdentError(f"direction {group.direction:+d} has only {n} samples "
                         f"(a segment needs at least {min_samples})")
    resolution = (hi - lo) / 200.0 if resolution is None else float(resolution)
    if not resolution > 0:
        raise IdentError(f"resolution must be > 0 m, got {resolution!r}")
    min_width = 0.01 * (hi - lo) if min_width is None else float(min_width)
    if not min_width >= 0:
        raise IdentError(f"minimum segment width must be >= 0 m, got {min_width!r}")
    if not penalty > 0:
        raise IdentError(f"penalty must be > 0, got {penalty!r}")
    nb = max(1, int(np.ceil((hi - lo) / resolution)))
    edges = lo + resolution * np.arange(nb + 1)
    edges[-1] = max(edges[-1], hi)
    cuts = _cuts(x, edges)
    keep = np.concatenate([[True], np.diff(cuts) > 0])  # drop empty bins
    cuts = cuts[keep]
    # position of each bin boundary (where the sample cut falls)
    inner = cuts[1:-1]
    at = np.concatenate([[lo], 0.5 * (x[inner - 1] + x[inner]), [hi]])
    # globally centred and scaled [phi | y]: the statistics of every candidate segment
    phi = design(group, regressors)
    const = [j for j, r in enumerate(regressors) if r == "1"]
    centre = phi.mean(axis=0)
    centre[const] = 0.0
    scale = np.sqrt(np.mean((phi - centre) ** 2, axis=0))
    scale[scale == 0.0] = 1.0
    yc = group.force - group.force.mean()
    Z = np.column_stack([(phi - centre) / scale, yc / (np.sqrt(np.mean(yc * yc)) or 1.0)])
    C = _bin_stats(Z, cuts)
    pen0 = (p + 2) * np.log(n)
    mult = float(penalty)
    bounds, _ = _partition(C, cuts, p, mult * pen0, min_samples, at, min_width, max_segments)
    sample_cuts = [int(cuts[b]) for b in bounds]
    # split/merge refinement at sample level: move boundaries off the candidate grid,
    # drop those that no longer pay for themselves, dissolve slivers across a boundary
    for _ in range(6):
        moved = _refine(Z, x, sample_cuts, p, 1.5 * resolution, min_samples, min_width)
        merged = _merge(Z, sample_cuts, p, mult * pen0)
        merged |= _dissolve(Z, x, sample_cuts, p, mult * pen0, min_samples, min_width)
        if not (moved or merged):
            break
    inner = [0.5 * (x[c - 1] + x[c]) for c in sample_cuts[1:-1]]
    seg_edges = np.array([lo, *inner, hi])
    fit = fit_segments(group, seg_edges, regressors=regressors, min_samples=min_samples)
    costs = sum(float(_cost(_gram(Z, i, j), j - i, p)) for i, j in
                zip(sample_cuts[:-1], sample_cuts[1:]))
    fit.info = {"bic": costs + mult * pen0 * (len(sample_cuts) - 1), "penalty": mult,
                "resolution": resolution, "min_width": min_width,
                "candidates": int(cuts.size - 1)}
    return fit
