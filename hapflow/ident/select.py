"""Model-order selection: piecewise and polynomial models compared by BIC on the same data.

``hapflow identify --method bic`` fits every candidate of :data:`CANDIDATES`
(automatic piecewise segments, and global polynomial spring forces of
increasing order) with :func:`~hapflow.ident.pipeline.identify` and keeps the
one of least Bayesian information criterion, every candidate scored on the
same samples with one Gaussian noise variance::

    BIC = n log(RSS / n) + k log n

- data with a time base: ``RSS`` sums the squared position error of the
  model's free run from the measured force over the valid samples
  (:func:`~hapflow.ident.verify.free_run`; the output-error likelihood of
  position noise).  The one-step force residual is no likelihood here: its
  regressors are estimates, and on a hardening oscillator sampled at 9x its
  resonance 118 piecewise parameters fitted the errors of the acceleration
  estimate to a third of the true model's force residual, then diverged in
  free run;
- quasi-static data: ``RSS`` sums the squared force residual over the moving
  samples (there position is exact and the force is the output).

``k`` counts the free parameters: the polynomial's coefficients; for a
piecewise model, per fitted direction, its regressors in every segment plus
its inner boundaries.  A candidate that cannot be fitted or simulated (a mass
not positive somewhere, a diverging free run) is reported and left out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import IdentError
from hapflow.blocks.impedance_model import DIRECTION_NAMES, ImpedanceModel
from .pipeline import identify
from .prep import Motion
from .verify import free_run, predict_motion

CANDIDATES = ("auto", "poly 1", "poly 1,3", "poly 1,2,3", "poly 1,3,5")
"""Candidates of ``--method bic``: automatic piecewise segments, and polynomial spring forces
with these powers of x (the damping powers are ``--damping``'s)."""


@dataclass
class Scored:
    """A fitted candidate and its score on the common samples."""

    name: str
    model: ImpedanceModel
    parameters: int
    samples: int
    rss: float

    @property
    def bic(self) -> float:
        """``n log(RSS / n) + k log n``."""
        n = self.samples
        return n * math.log(max(self.rss, 1e-300) / n) + self.parameters * math.log(n)


def parameter_count(model: ImpedanceModel) -> int:
    """Free parameters of a polynomial or piecewise model (see the module docstring)."""
    diag = model.diagnostics
    if model.method == "poly":
        return len(model.polynomial)
    regressors = len(model.settings["regressors"])
    count = 0
    for name in DIRECTION_NAMES.values():
        edges = diag.get(name, {}).get("edges")
        if edges is not None:
            segments = len(edges) - 1
            count += regressors * segments + segments - 1
    return count


def score(name: str, model: ImpedanceModel, motion: Motion) -> Scored:
    """``model``'s residual on ``motion`` (see the module docstring).

    Raises
    ------
    IdentError
        If the model cannot be simulated from the measured force.
    """
    if motion.quasi_static:
        use = (motion.direction != 0) & motion.valid
        residual = motion.force[use] - predict_motion(model, motion)[use]
    else:
        run = free_run(model, motion)
        residual = run.simulated - run.measured
    return Scored(name, model, parameter_count(model), int(residual.size),
                  float(np.dot(residual, residual)))


def select(motion: Motion, candidates: tuple[str, ...] = CANDIDATES,
           damping: str | tuple[int, ...] = (0,), **auto
           ) -> tuple[ImpedanceModel, list[Scored], list[str]]:
    """Fit each candidate and return the one of least BIC, every candidate scored, and why
    the others failed.

    Parameters
    ----------
    motion : Motion
        Prepared data.
    candidates : tuple of str
        ``"auto"`` and ``"poly <powers>"`` entries (:data:`CANDIDATES`).
    damping : str or tuple of int
        Damping powers of the polynomial candidates.
    **auto
        Settings of ``identify`` for every candidate (``regressors``, ``resolution``,
        ``penalty``, ``max_segments``, ``v_blend``).

    Returns
    -------
    model, scored, failed
        The chosen model (its ``diagnostics['selection']`` lists every candidate's
        parameters, RSS and BIC), the scored candidates in the order given, and one
        sentence per candidate that could not be fitted or simulated.

    Raises
    ------
    IdentError
        If no candidate can be fitted (each one's reason is named).
    """
    scored, failed = [], []
    for name in candidates:
        method, _, powers = name.partition(" ")
        try:
            model = identify(motion, method, damping=damping,
                             **({"stiffness": powers} if powers else {}), **auto)
            scored.append(score(name, model, motion))
        except IdentError as exc:
            failed.append(f"{name}: {exc}")
    if not scored:
        raise IdentError("no candidate model could be fitted: " + "; ".join(failed))
    best = min(scored, key=lambda s: s.bic)
    best.model.diagnostics["selection"] = [
        {"candidate": s.name, "parameters": s.parameters, "samples": s.samples, "rss": s.rss,
         "bic": s.bic} for s in scored] + [{"failed": reason} for reason in failed]
    best.model.settings["selected_by"] = "bic"
    return best.model, scored, failed


def selection_table(scored: list[Scored]) -> str:
    """One line per candidate: parameters, RMS residual (free-run position, or force for
    quasi-static data), BIC relative to the best; the chosen one marked."""
    best = min(s.bic for s in scored)
    unit = "N" if scored[0].model.settings["prep"].get("quasi_static") else "mm"
    scale = 1.0 if unit == "N" else 1e3
    lines = [f"{'candidate':>14s} {'parameters':>10s} {'RMS [' + unit + ']':>10s} "
             f"{'BIC - best':>11s}"]
    for s in scored:
        mark = "  <- chosen" if s.bic == best else ""
        lines.append(f"{s.name:>14s} {s.parameters:10d} "
                     f"{scale * math.sqrt(s.rss / s.samples):10.4g} {s.bic - best:11.1f}{mark}")
    return "\n".join(lines)
