"""Warnings for identified models that would mislead: non-physical or unsupported estimates.

:func:`warnings_for` reads a model's diagnostics and returns one sentence per
problem (``hapflow identify`` prints them; with ``--strict`` it exits 1):

- a mass, damping or stiffness (segments, or the global model's ``m``,
  ``b0`` and ``k1``) that is negative beyond its standard error, or whose
  standard error exceeds its magnitude (the data cannot tell it from zero,
  or from its negative); on a grid model (EWLS has no standard errors) a
  negative mass, damping or stiffness at any grid point.  These come from
  data too short or too poor for the model (2 s of a sweep gave
  m = -9618 +- 7100 kg): :data:`ADVICE` says what to do;
- a condition number above :data:`MAX_CONDITION`: the data cannot tell the
  parameters apart, so their values and error bars mean little;
- a segment with an infinite standard error, or an inner one narrower than
  :data:`MIN_WIDTH_FRACTION` of the identified range (it holds too little of
  the data to support its own four parameters; ``auto`` never makes one).

Why warnings and not an error: the model file is still written, since a
user looking into a bad fit wants its numbers and plots; ``identify
--strict`` (what a script or CI job should use) exits 1 on any of them.
(A negative stiffness can be real, over the buckling range of a key
switch; it is warned all the same, since there the user can tell.)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

MAX_CONDITION = 1e3
"""Above this a segment's (or the global fit's) regressors are nearly collinear."""
MIN_WIDTH_FRACTION = 0.01
"""Segments narrower than this fraction of their direction's range are flagged."""
PHYSICAL = {"m": ("mass", "kg"), "b": ("damping", "N s/m"), "k": ("stiffness", "N/m")}
"""Parameters that are positive in a passive device: name and unit."""
ADVICE = ("record a longer or richer excitation (more cycles over the whole range, a wider "
          "frequency band), or fit fewer parameters (fewer --segments, --method auto or poly)")
"""What to do about any of these warnings (``identify`` prints it after them)."""


def unsupported(what: str, symbol: str, value: float, se: float, unit: str) -> str | None:
    """Why the estimate ``value +- se`` of a positive quantity is not to be trusted, as a
    sentence naming it; None when it is fine (or its error is unknown)."""
    if not (math.isfinite(value) and math.isfinite(se)):
        return None
    if value + se < 0:
        return (f"{what} {symbol} = {value:.4g} +- {se:.2g} {unit} is negative beyond its "
                "standard error")
    if se > abs(value):
        return (f"{what} {symbol} = {value:.4g} +- {se:.2g} {unit}: the standard error exceeds "
                "the value, so the data cannot tell it from zero" +
                (" (and a negative one is not physical)" if value < 0 else ""))
    return None


def _segment_warnings(name: str, diag: dict[str, Any]) -> list[str]:
    edges = np.asarray(diag["edges"], dtype=np.float64)
    span = edges[-1] - edges[0]
    out = []
    for j in range(edges.size - 1):
        where = f"{name} segment {edges[j] * 1e3:.4g} .. {edges[j + 1] * 1e3:.4g} mm"
        for p, (what, unit) in PHYSICAL.items():
            if p in diag["value"]:
                why = unsupported(what, p, diag["value"][p][j], diag["stderr"][p][j], unit)
                out += [f"{where}: {why}"] if why else []
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
        for p, what, unit in (("m", "mass", "kg"), ("b0", "damping", "N s/m"),
                              ("k1", "linear stiffness", "N/m")):
            why = unsupported(what, p, coef[p], se[p], unit) if p in coef else None
            out += [why] if why else []
        if diag["condition"] > MAX_CONDITION:
            out.append(f"condition number {diag['condition']:.3g} > {MAX_CONDITION:g}: the "
                       "coefficients cannot be told apart well in this data")
        return out
    for d, name in ((1, "positive"), (-1, "negative")):
        sub = diag.get(name, {})
        if "edges" in sub:
            kn = model.direction(d)
            value = {p: getattr(kn, p)[::2].tolist() for p in PHYSICAL}
            out += _segment_warnings(name, {**sub, "value": value})
        elif "grid_points" in sub:
            kn = model.direction(d)
            for p, (what, _unit) in PHYSICAL.items():
                bad = np.flatnonzero(getattr(kn, p) < 0)
                if bad.size:
                    out.append(f"{name}: {what} negative at {bad.size} of {kn.x.size} grid "
                               f"points between {kn.x[bad[0]] * 1e3:.4g} and "
                               f"{kn.x[bad[-1]] * 1e3:.4g} mm")
    return out
