"""Identify an impedance model from prepared data: segmented, automatic segments, or EWLS.

:func:`identify` groups a :class:`~hapflow.ident.prep.Motion` by direction,
sorts each group by position, fits each direction with the chosen method and
returns an :class:`~hapflow.blocks.impedance_model.ImpedanceModel` whose ``settings``
record the method and the data preparation (so ``verify`` can repeat it),
whose ``diagnostics`` hold standard errors and condition numbers (segmented
methods) and whose ``fit`` holds the NRMSE on the identification data.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import ewls as _ewls
from . import poly as _poly
from . import segmented as _seg
from .errors import IdentError
from hapflow.blocks.impedance_model import DIRECTION_NAMES, ImpedanceModel, Knots
from .prep import Motion, group
from .verify import fit_quality

METHODS = ("segmented", "auto", "ewls", "poly")


def identify(motion: Motion, method: str = "segmented", segments: int = 8,
             regressors: str | tuple[str, ...] | None = None, forgetting: float = 0.999,
             p0: float = 1e6, grid: float = 1e-3, two_sided: bool = False,
             resolution: float | None = None, penalty: float = 1.0,
             min_samples: int | None = None, max_segments: int = 12,
             v_blend: float = 1e-3, edges: np.ndarray | None = None,
             window: float | None = None, stiffness: str | tuple[int, ...] = (1, 3),
             damping: str | tuple[int, ...] = (0,)) -> ImpedanceModel:
    """Fit the locally linear model per direction.

    Parameters
    ----------
    motion : Motion
        Prepared data (:mod:`hapflow.ident.prep`).
    method : {'segmented', 'auto', 'ewls', 'poly'}
        Fixed equal segments (seed 000), automatic BIC segments, EWLS on a
        grid (seed 002), or one global polynomial model (:mod:`hapflow.ident.poly`).
    segments : int
        Number of segments (``segmented``).
    regressors : str, optional
        Subset of ``avx1`` (default all four, ``x1`` for quasi-static data).
    forgetting, p0, grid, two_sided, window : float, float, float, bool, float
        EWLS settings (see :mod:`hapflow.ident.ewls`); ``window`` (m), when
        given, sets the forgetting factor of each direction from its data density.
    resolution, penalty, min_samples, max_segments
        Automatic segmentation settings (see :mod:`hapflow.ident.segmented`).
    v_blend : float
        Direction blend velocity stored in the model, m/s.
    edges : ndarray, optional
        Explicit segment edges for ``segmented`` (instead of ``segments``).
    stiffness, damping : str or tuple of int
        ``poly``: powers of x of the spring force and of the damping.

    Returns
    -------
    ImpedanceModel
    """
    if method not in METHODS:
        raise IdentError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if method == "poly":
        return _identify_poly(motion, stiffness, damping, v_blend)
    regs = _seg.parse_regressors(regressors, motion.quasi_static)
    groups = group(motion)
    knots: dict[int, Knots] = {}
    diag: dict[str, Any] = {}
    settings: dict[str, Any] = {"regressors": "".join(regs)}
    if method == "segmented":
        settings.update(segments=segments if edges is None else len(edges) - 1)
    elif method == "auto":
        settings.update(resolution=resolution, penalty=penalty, max_segments=max_segments)
    else:
        _ewls.check_settings(forgetting, p0)
        settings.update(forgetting=forgetting, p0=p0, grid=grid, two_sided=two_sided,
                        window=window)
    if min_samples is not None:
        settings["min_samples"] = min_samples
    for d, g in groups.items():
        name = DIRECTION_NAMES[d]
        if method == "ewls":
            gf = _ewls.fit_ewls(g, regs, forgetting, p0, grid, two_sided, window=window)
            knots[d] = Knots(gf.x, *gf.theta.T)
            diag[name] = {"samples": len(g), "grid_points": int(gf.x.size),
                          "forgetting": gf.info["forgetting"],
                          "scales": dict(zip(regs, gf.scales.tolist()))}
        else:
            if method == "segmented":
                sf = _seg.fit_segments(g, edges, segments, regs, min_samples)
            else:
                sf = _seg.auto_segments(g, regs, resolution, min_samples, penalty, max_segments)
            knots[d] = Knots.piecewise_constant(sf.edges, sf.theta)
            diag[name] = {"samples": len(g), "edges": sf.edges.tolist(), "n": sf.n.tolist(),
                          "condition": sf.cond.tolist(),
                          "stderr": {p: sf.stderr[:, j].tolist() for j, p in enumerate(_seg.PARAMS)},
                          "rss": sf.rss.tolist(), **sf.info}
    for d in (1, -1):
        if d not in knots:
            other = knots[-d]
            knots[d] = Knots(other.x, other.m, other.b, other.k, other.F0)
            diag[DIRECTION_NAMES[d]] = {"samples": 0, "copied_from": DIRECTION_NAMES[-d]}
    settings["prep"] = {k: v for k, v in motion.settings.items()}
    model = ImpedanceModel(knots[1], knots[-1], float(v_blend), method, settings,
                           dict(motion.source), diag)
    model.fit = fit_quality(model, motion)
    return model


def _identify_poly(motion: Motion, stiffness: str | tuple[int, ...],
                   damping: str | tuple[int, ...], v_blend: float) -> ImpedanceModel:
    stiffness = _poly.parse_powers(stiffness, "stiffness")
    damping = _poly.parse_powers(damping, "damping")
    fit = _poly.fit_poly(motion, stiffness, damping)
    moving = motion.x[(motion.direction != 0) & motion.valid]
    lo, hi = float(moving.min()), float(moving.max())
    settings = {"stiffness": list(stiffness), "damping": list(damping),
                "prep": dict(motion.settings)}
    diag = {"stderr": dict(zip(fit.names, fit.stderr.tolist())),
            "condition": fit.cond, "samples": fit.n, "bic": fit.bic}
    model = ImpedanceModel(_poly.knots(fit, lo, hi, 1), _poly.knots(fit, lo, hi, -1),
                           float(v_blend), "poly", settings, dict(motion.source), diag,
                           polynomial=fit.coefficients)
    model.fit = fit_quality(model, motion)
    return model
