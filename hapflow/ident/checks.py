"""Warnings for identified models that would mislead: non-physical or unsupported estimates.

:func:`warnings_for` reads a model's diagnostics and returns one sentence per
problem (``hapflow identify`` prints them; with ``--strict`` it exits 1):

- a mass or stiffness negative by more than its standard error (segments, or
  the global model's ``m`` and ``k1``); a mass negative anywhere on a grid
  model (EWLS has no standard errors);
- a condition number above :data:`MAX_CONDITION`: the data cannot tell the
  parameters apart, so their values and error bars mean little;
- a segment with an infinite standard error, or an inner one narrower than
  :data:`MIN_WIDTH_FRACTION` of the identified range (it holds too little of
  the data to support its own four parameters; ``auto`` never makes one).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

MAX_CONDITION = 1e3
"""Above this a segment's (or the global fit's) regressors are nearly collinear."""
MIN_WIDTH_FRACTION = 0.01
"""Segments narrower than this fraction of their direction's range are flagged."""


def _segment_warnings(name: str, diag: dict[str, Any]) -> list[str]:
    edges = np.asarray(diag["edges"], dtype=np.float64)
    span = edges[-1] - edges[0]
    out = []
    for j in range(edges.size - 1):
        where = f"{name} segment {edges[j] * 1e3:.4g} .. {edges[j + 1] * 1e3:.4g} mm"
        for p, what in (("m", "mass"), ("k", "stiffness")):
            value, se = diag["value"][p][j], diag["stderr"][p][j]
            if math.isfinite(se) and value + se < 0:
                out.append(f"{where}: {what} {value:.4g} +- {se:.2g} is negative beyond its "
                           "standard error")
        if any(not math.isfinite(diag["stderr"][p][j]) for p in diag["stderr"]):
            out.append(f"{where}: infinite standard errors (the segment's data cannot "
                       "determine its parameters)")
        elif 0 < j < edges.size - 2 and edges[j + 1] - edges[j] < MIN_WIDTH_FRACTION * span:
            out.append(f"{where}: narrower than {100 * MIN_WIDTH_FRACTION:g} % of the range, "
                       "more than the data supports")
        cond = diag["condition"][j]
        if math.isfinite(cond) and cond > MAX_CONDITION:
            out.append(f"{where}: condition number {cond:.3g} > {MAX_CONDITION:g} (the data "
                       "cannot tell m, b, k and F0 apart here; excite a wider band)")
    return out


def warnings_for(model: Any) -> list[str]:
    """Sentences naming each non-physical or unsupported estimate of ``model`` (empty if none)."""
    diag = model.diagnostics
    out: list[str] = []
    if model.method == "poly":
        coef, se = model.polynomial, diag["stderr"]
        for p, what in (("m", "mass"), ("k1", "linear stiffness")):
            if p in coef and coef[p] + se[p] < 0:
                out.append(f"{what} {p} = {coef[p]:.4g} +- {se[p]:.2g} is negative beyond its "
                           "standard error")
        if diag["condition"] > MAX_CONDITION:
            out.append(f"condition number {diag['condition']:.3g} > {MAX_CONDITION:g}: the "
                       "coefficients cannot be told apart well in this data")
        return out
    for d, name in ((1, "positive"), (-1, "negative")):
        sub = diag.get(name, {})
        if "edges" in sub:
            kn = model.direction(d)
            value = {p: getattr(kn, p)[::2].tolist() for p in ("m", "k")}
            out += _segment_warnings(name, {**sub, "value": value})
        elif "grid_points" in sub:
            kn = model.direction(d)
            bad = np.flatnonzero(kn.m < 0)
            if bad.size:
                out.append(f"{name}: mass negative at {bad.size} of {kn.x.size} grid points "
                           f"between {kn.x[bad[0]] * 1e3:.4g} and {kn.x[bad[-1]] * 1e3:.4g} mm")
    return out
