"""Tables and plots of an identified model (``hapflow identify`` output).

- :func:`model_table` — per direction: segments (position range, samples,
  ``m, b, k, F0`` with standard errors, condition number) or grid summary;
- :func:`truth_table` — RMS and worst error of each parameter against the
  true impedance of a simulated device (:mod:`hapflow.ident.truth`);
- :func:`plot_parameters` — each identified parameter against position for
  both directions, the truth dashed when known, and the static force
  ``k(x) x + F0(x)``;
- :func:`plot_force` — measured and predicted force against time and position.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from hapflow.blocks.impedance_model import DIRECTION_NAMES, ImpedanceModel
from .prep import Motion
from .truth import Truth

_UNITS = {"m": "kg", "b": "N s/m", "k": "N/m", "F0": "N"}
_LABELS = {"m": "mass m", "b": "damping b", "k": "stiffness k", "F0": "offset F0"}


def identified(model: ImpedanceModel) -> list[str]:
    """Parameters the model actually identified (from its regressors)."""
    regs = str(model.settings.get("regressors", "avx1"))
    return [p for r, p in zip("avx1", ("m", "b", "k", "F0")) if r in regs]


def _fmt(value: float, se: float | None = None) -> str:
    if se is None or not math.isfinite(se):
        return f"{value:.5g}" if se is None else f"{value:.5g} +- inf"
    return f"{value:.5g} +- {se:.2g}"


def poly_table(model: ImpedanceModel) -> str:
    """Coefficients of a global polynomial model with standard errors (SI units)."""
    coef, se = model.polynomial, model.diagnostics["stderr"]
    units = {"m": "kg", "F0": "N", "Fc": "N"}
    lines = [f"global model over {model.positive.x[0] * 1e3:.4g} .. {model.positive.x[-1] * 1e3:.4g} "
             f"mm, {model.diagnostics['samples']} samples, condition "
             f"{model.diagnostics['condition']:.3g}"]
    for name, value in coef.items():
        power = int(name[1:]) + (name[0] == "b") if name[0] in "bk" else 0
        unit = units.get(name) or ("N s" if name[0] == "b" else "N") + (
            "/m" if power == 1 else f"/m^{power}")
        lines.append(f"  {name:>4s} [{unit}]: {_fmt(value, se.get(name))}")
    return "\n".join(lines)


def model_table(model: ImpedanceModel) -> str:
    """Text table of the identified parameters."""
    if model.method == "poly":
        return poly_table(model)
    params = identified(model)
    lines = []
    for d in (1, -1):
        name = DIRECTION_NAMES[d]
        diag = model.diagnostics.get(name, {})
        kn = model.direction(d)
        if diag.get("copied_from"):
            lines.append(f"{name}: no samples; copied from {diag['copied_from']}")
            continue
        if "edges" in diag:
            edges = diag["edges"]
            head = (f"{'segment [mm]':>19s} {'n':>7s} " + " ".join(
                f"{p + ' [' + _UNITS[p] + ']':>22s}" for p in params) + f" {'cond':>8s}")
            lines.append(f"{name} (v > 0)" if d > 0 else f"{name} (v < 0)")
            lines.append(head)
            for j in range(len(edges) - 1):
                vals = " ".join(f"{_fmt(getattr(kn, p)[2 * j], diag['stderr'][p][j]):>22s}"
                                for p in params)
                lines.append(f"{edges[j] * 1e3:9.3f} .. {edges[j + 1] * 1e3:6.3f} "
                             f"{diag['n'][j]:7d} {vals} {diag['condition'][j]:8.3g}")
        else:
            lines.append(f"{name}: {kn.x.size} grid points {kn.x[0] * 1e3:.4g} .. "
                         f"{kn.x[-1] * 1e3:.4g} mm, {diag.get('samples', '?')} samples")
            for p in params:
                v = getattr(kn, p)
                lines.append(f"  {p:>3s} [{_UNITS[p]}]: min {v.min():.5g}  median "
                             f"{np.median(v):.5g}  max {v.max():.5g}")
    return "\n".join(lines)


def truth_errors(model: ImpedanceModel, truth: Truth, x_range: tuple[float, float] | None = None,
                 points: int = 400) -> dict[int, dict[str, dict[str, float]]]:
    """Per direction and parameter: errors of the model against the truth over positions.

    Positions: ``points`` evenly spaced over ``x_range`` (default: the range of
    the model's knots, shrunk by 2 % at each end).  For each parameter:
    ``rms`` and ``median`` (of |error|), ``max`` |error| and ``scale`` (RMS of
    the truth), in the parameter's unit.
    """
    out = {}
    for d in (1, -1):
        kn = model.direction(d)
        lo, hi = x_range or (float(kn.x[0]), float(kn.x[-1]))
        pad = 0.02 * (hi - lo)
        xs = np.linspace(lo + pad, hi - pad, points)
        est, tru = kn.at(xs), truth.at(xs, d)
        out[d] = {}
        for p in ("m", "b", "k", "F0"):
            e = np.abs(est[p] - tru[p])
            out[d][p] = {"rms": math.sqrt(float(np.mean(e * e))), "median": float(np.median(e)),
                         "max": float(np.max(e)),
                         "scale": math.sqrt(float(np.mean(tru[p] ** 2)))}
    return out


def truth_table(model: ImpedanceModel, truth: Truth) -> str:
    """Text table of the parameter errors against the truth."""
    errs = truth_errors(model, truth)
    params = identified(model)
    lines = [f"against the truth ({truth.name}), over the identified position range:",
             f"{'direction':>10s} {'param':>6s} {'RMS error':>14s} {'median |error|':>16s} "
             f"{'max |error|':>14s} {'RMS of truth':>14s}"]
    for d in (1, -1):
        for p in params:
            e = errs[d][p]
            u = _UNITS[p]
            rel = f" ({100 * e['rms'] / e['scale']:.2g} %)" if e["scale"] > 0 else ""
            lines.append(f"{DIRECTION_NAMES[d]:>10s} {p:>6s} {e['rms']:>9.4g}{rel:<7s} "
                         f"{e['median']:>12.4g} {e['max']:>14.4g} {e['scale']:>10.4g} {u}")
    return "\n".join(lines)


def _save(plt, fig, path: str | Path) -> Path:
    """Lay out, write (folders created as needed) and close a figure; a PNG, PDF or SVG file
    keeps the figure's title in its metadata (``Title``)."""
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    title = fig.get_suptitle()
    keeps = title and path.suffix.lower() in (".png", ".pdf", ".svg")
    fig.savefig(path, dpi=110, metadata={"Title": title} if keeps else None)
    plt.close(fig)
    return path


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


def _robust_limits(ax, values: list[np.ndarray]) -> None:
    """Zoom on the bulk when a few extreme values (stops, snaps) would flatten the rest."""
    v = np.concatenate([np.ravel(a) for a in values])
    v = v[np.isfinite(v)]
    if v.size == 0:
        return
    lo, hi = np.percentile(v, [5, 95])
    full = float(v.max() - v.min())
    if hi > lo and full > 6 * (hi - lo):
        pad = 0.4 * (hi - lo)
        ax.set_ylim(lo - pad, hi + pad)
        ax.text(0.99, 0.02, "zoomed: extremes off scale", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=7, color="0.4")


def plot_parameters(model: ImpedanceModel, path: str | Path, truth: Truth | None = None,
                    title: str | None = None) -> Path:
    """Each identified parameter against position for both directions (truth dashed), and the
    static force ``k(x) x + F0(x)`` of each direction."""
    plt = _pyplot()
    params = identified(model)
    panels = params + ["static"]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.1 * len(panels) + 0.8), sharex=True,
                             squeeze=False)
    colours = {1: "tab:red", -1: "tab:blue"}
    has_se = False
    for ax, p in zip(axes[:, 0], panels):
        shown = []
        for d in (1, -1):
            kn = model.direction(d)
            lo, hi = float(kn.x[0]), float(kn.x[-1])
            xs = np.linspace(lo, hi, 2000)
            # include the knots (and just left of them) so jumps are drawn vertically
            xs = np.unique(np.concatenate([xs, kn.x, np.nextafter(kn.x, -np.inf)]))
            xs = xs[(xs >= lo) & (xs <= hi)]
            at = kn.at(xs)
            y = at["k"] * xs + at["F0"] if p == "static" else at[p]
            shown.append(y)
            ax.plot(xs * 1e3, y, color=colours[d], lw=1.4,
                    label=f"{DIRECTION_NAMES[d]} (v {'>' if d > 0 else '<'} 0)")
            diag = model.diagnostics.get(DIRECTION_NAMES[d], {})
            se, edges = diag.get("stderr", {}).get(p), diag.get("edges")
            if se is not None and edges is not None:
                mid = 0.5 * (np.asarray(edges[:-1]) + np.asarray(edges[1:]))
                se = np.asarray(se, dtype=float)
                ok = np.isfinite(se)
                ax.errorbar(mid[ok] * 1e3, kn.at(mid)[p][ok], yerr=2 * se[ok], fmt="none",
                            ecolor=colours[d], alpha=0.6, capsize=2)
                has_se = True
            if truth is not None:
                tr = truth.at(xs, d)
                yt = tr["k"] * xs + tr["F0"] if p == "static" else tr[p]
                ax.plot(xs * 1e3, yt, color=colours[d], ls="--", lw=1.0, alpha=0.8,
                        label=f"true, {DIRECTION_NAMES[d]}")
        _robust_limits(ax, shown)
        if p == "static":
            ax.set_ylabel("k x + F0 [N]")
        else:
            ax.set_ylabel(f"{_LABELS[p]} [{_UNITS[p]}]")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8, ncol=2)
    axes[-1, 0].set_xlabel("position [mm]")
    fig.suptitle(title or f"identified parameters ({model.method})"
                 + (" - error bars 2 sigma" if has_se else ""))
    return _save(plt, fig, path)


def plot_force(model: ImpedanceModel, motion: Motion, predicted: np.ndarray, path: str | Path,
               title: str, max_points: int = 20000, window: float = 3.0) -> Path:
    """Measured vs predicted force: a ``window`` of seconds mid-run, the error over the
    whole run, and force against position (quasi-static data: against the sample index).
    ``title`` says which (``"fit: run.h5"``, ``"validation: ..."``); the NRMSE is added."""
    plt = _pyplot()
    n = len(motion)
    step = max(1, n // max_points)
    sl = slice(None, None, step)
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(9, 9.5),
                                     gridspec_kw={"height_ratios": [1.0, 0.6, 1.2]})
    if motion.time is not None:
        t, label = motion.time, "time [s]"
        mid = 0.5 * (t[0] + t[-1])
        win = np.flatnonzero(np.abs(t - mid) <= 0.5 * window)
    else:
        t, label = np.arange(n), "sample"
        win = np.arange(n)
    a1.plot(t[win], motion.force[win], color="0.3", lw=1.0, label="measured")
    a1.plot(t[win], predicted[win], color="tab:orange", lw=1.0, alpha=0.85, label="model")
    a1.set_xlabel(label)
    a1.set_ylabel("force [N]")
    a1.legend(fontsize=8)
    a1.grid(alpha=0.3)
    err = predicted - motion.force
    a2.plot(t[sl], err[sl], color="tab:red", lw=0.6)
    a2.set_xlabel(label)
    a2.set_ylabel("model - measured [N]")
    a2.grid(alpha=0.3)
    a3.plot(motion.x[sl] * 1e3, motion.force[sl], ".", ms=1.5, color="0.3", label="measured")
    a3.plot(motion.x[sl] * 1e3, predicted[sl], ".", ms=1.0, color="tab:orange", alpha=0.6,
            label="model")
    a3.set_xlabel("position [mm]")
    a3.set_ylabel("force [N]")
    a3.grid(alpha=0.3)
    a3.legend(fontsize=8, markerscale=6)
    nrmse = model.fit.get("nrmse_percent")
    fig.suptitle(f"{title}: measured vs predicted force"
                 + (f" (NRMSE {nrmse:.3g} %)" if nrmse is not None else ""))
    return _save(plt, fig, path)


def plot_free_run(run: Any, path: str | Path, window: float = 1.0) -> Path:
    """Measured and simulated position: a ``window`` of seconds mid-run, and the error over the run."""
    plt = _pyplot()
    t = run.time
    mid = 0.5 * (t[0] + t[-1])
    win = np.flatnonzero(np.abs(t - mid) <= 0.5 * window)
    name, per = run.unit                      # the data's position unit
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(9, 6.5))
    a1.plot(t[win], run.measured[win] / per, color="0.3", lw=1.0, label="measured")
    a1.plot(t[win], run.simulated[win] / per, color="tab:orange", lw=1.0, alpha=0.85,
            label="model, free run from the measured force")
    a1.set_xlabel("time [s]")
    a1.set_ylabel(f"position [{name}]")
    a1.legend(fontsize=8)
    a1.grid(alpha=0.3)
    a2.plot(t, (run.simulated - run.measured) / per, color="tab:red", lw=0.6)
    a2.set_xlabel("time [s]")
    a2.set_ylabel(f"simulated - measured [{name}]")
    a2.grid(alpha=0.3)
    fig.suptitle(f"free-run simulation (RMS position error {run.rms_error / per:.3g} {name})")
    return _save(plt, fig, path)
