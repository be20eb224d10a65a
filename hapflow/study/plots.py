"""Study plots (matplotlib, Agg): metric vs parameter, heat maps, a summary page.

- ``DIR/plots/<metric>.png``: the metric against each varied parameter (one
  axis per parameter, successful runs as dots; with one parameter, a line
  through the mean at each value).  The seed is not plotted against.
- ``DIR/plots/<metric>_heatmap.png``: for a grid over exactly two
  parameters (the seed aside), the mean of the metric on the grid.
- ``DIR/summary.png``: the study's name, design and run counts, and a
  histogram of every metric.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from .metrics import column_units
from .spec import SEED, Study

FIXED = ("run", "status", "error", "seed", "sim_wall_s", "path", "ticks", "key")
MAX_PLOTS = 12
"""Most per-metric figures written (the summary page shows every metric)."""


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


def _numeric(series: Any) -> bool:
    return series.dtype.kind in "iuf"


def metric_columns(study: Study, table: Any) -> list[str]:
    """Metric columns of a results table (everything but the fixed and parameter columns)."""
    params = {p.key for p in study.parameters}
    return [c for c in table.columns if c not in FIXED and c not in params]


def _file(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name)


def labelled(name: str, units: dict[str, str]) -> str:
    """``name [unit]`` (``[-]`` dimensionless), or the bare name when the unit is unknown."""
    return f"{name} [{units[name] or '-'}]" if name in units else name


def plot_metric(table: Any, metric: str, params: list[str], path: Path,
                units: dict[str, str], log: set[str]) -> None:
    """The metric against each parameter (successful runs); ``log``: parameters sampled
    on a log scale, drawn so."""
    plt = _pyplot()
    ok = table[table["status"] == "ok"]
    fig, axes = plt.subplots(1, len(params), figsize=(4.2 * len(params), 3.4), squeeze=False)
    for ax, param in zip(axes[0], params):
        ax.plot(ok[param], ok[metric], "o", ms=3, alpha=0.6)
        if len(params) == 1:
            means = ok.groupby(param)[metric].mean()
            ax.plot(means.index, means.values, "-", lw=1.2)
        if param in log:
            ax.set_xscale("log")
        ax.set_xlabel(labelled(param, units))
        ax.set_ylabel(labelled(metric, units))
        ax.grid(alpha=0.3)
    fig.suptitle(f"{metric} ({len(ok)} runs ok, {len(table) - len(ok)} not)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_heatmap(table: Any, metric: str, px: str, py: str, path: Path,
                 units: dict[str, str]) -> None:
    """Mean of ``metric`` over a grid of ``px`` (columns) and ``py`` (rows)."""
    plt = _pyplot()
    ok = table[table["status"] == "ok"]
    grid = ok.pivot_table(index=py, columns=px, values=metric, aggfunc="mean")
    full = table.pivot_table(index=py, columns=px, values="run", aggfunc="count")
    grid = grid.reindex(index=full.index, columns=full.columns)
    fig, ax = plt.subplots(figsize=(5.5, 4.4))
    im = ax.imshow(grid.values, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(grid.columns)), [f"{v:.4g}" for v in grid.columns], rotation=45)
    ax.set_yticks(range(len(grid.index)), [f"{v:.4g}" for v in grid.index])
    for (i, j), value in np.ndenumerate(grid.values):
        ax.text(j, i, "failed" if np.isnan(value) else f"{value:.3g}", ha="center",
                va="center", fontsize=7, color="k" if np.isnan(value) else "w")
    ax.set_xlabel(labelled(px, units))
    ax.set_ylabel(labelled(py, units))
    fig.colorbar(im, ax=ax, label=labelled(metric, units))
    ax.set_title(metric)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _header(study: Study, table: Any) -> str:
    counts = table["status"].value_counts().to_dict()
    varied = ", ".join(p.key for p in study.parameters)
    text = (f"study {study.name}: {study.design} design over {varied}; graph "
            f"{study.graph_path.name}, {study.duration:g} s per run\n"
            f"{len(table)} runs: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    failed = table[table["status"] == "failed"]
    if len(failed):
        text += (f"\nfirst failure (run {failed.iloc[0]['run']}): "
                 f"{str(failed.iloc[0]['error'])[:110]}")
    return text


def plot_summary(study: Study, table: Any, metrics: list[str], path: Path,
                 units: dict[str, str]) -> None:
    """One page: study, design, run counts, a histogram of every metric (whole runs on
    the count axis)."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator
    cols = min(3, max(1, len(metrics)))
    rows = -(-len(metrics) // cols)
    fig = plt.figure(figsize=(max(9.0, 4.2 * cols), 1.2 + 3.0 * rows))
    grid = fig.add_gridspec(rows + 1, cols, height_ratios=[1.2] + [3.0] * rows)
    head = fig.add_subplot(grid[0, :])
    head.axis("off")
    head.text(0.0, 1.0, _header(study, table), va="top", fontsize=9, family="monospace")
    ok = table[table["status"] == "ok"]
    for k, metric in enumerate(metrics):
        ax = fig.add_subplot(grid[1 + k // cols, k % cols])
        values = ok[metric].to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        ax.hist(values, bins=min(30, max(5, len(values) // 5)) if len(values) else 1)
        if len(values):
            ax.set_title(f"{labelled(metric, units)}\nmedian {np.median(values):.4g}, "
                         f"5-95 % {np.percentile(values, 5):.3g}..{np.percentile(values, 95):.3g}",
                         fontsize=8)
        else:
            ax.set_title(f"{metric}: no finite values", fontsize=8)
        ax.set_xlabel(labelled(metric, units))
        ax.set_ylabel("runs")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_study(study: Study, table: Any, out: Path) -> dict[str, Path]:
    """Write the study's plots into ``out``; returns name -> path."""
    metrics = [m for m in metric_columns(study, table) if _numeric(table[m])]
    params = [p.key for p in study.parameters if p.key != SEED and p.key in table.columns
              and _numeric(table[p.key])]
    files: dict[str, Path] = {}
    if not len(table):
        return files
    units = {**column_units(study.metrics, study.graph), **parameter_units(study)}
    log = {p.key for p in study.parameters
           if isinstance(p.spec, dict) and p.spec.get("scale") == "log"}
    folder = out / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    if params:
        for metric in metrics[:MAX_PLOTS]:
            files[metric] = folder / f"{_file(metric)}.png"
            plot_metric(table, metric, params, files[metric], units, log)
            if study.design == "grid" and len(params) == 2:
                key = f"{metric}_heatmap"
                files[key] = folder / f"{_file(key)}.png"
                plot_heatmap(table, metric, params[0], params[1], files[key], units)
    files["summary"] = out / "summary.png"
    plot_summary(study, table, metrics, files["summary"], units)
    return files


def parameter_units(study: Study) -> dict[str, str]:
    """The unit of every varied block parameter (the seed has none)."""
    units = {}
    for p in study.parameters:
        if p.key != SEED:
            block, _, param = p.key.partition(".")
            units[p.key] = study.graph.nodes[block].block.params[param].unit or ""
    return units
