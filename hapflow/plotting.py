"""Pictures: recorded signals over time, and the block diagram of a graph."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402

from .graph import Checked  # noqa: E402
from .recorder import Recording  # noqa: E402
from .schedule import Schedule  # noqa: E402


def plot_recording(rec: Recording, path: str | Path, title: str | None = None,
                   marks: Sequence[tuple[float, str]] = ()) -> None:
    """Plot every recorded signal against time, one axis per unit, into a PNG.

    ``marks`` are (time in s, label) drawn as red vertical lines on every axis (a safety
    stop), their labels in the title.
    """
    units = signal_units(rec)
    fig, axes = plt.subplots(max(1, len(units)), 1, sharex=True, squeeze=False,
                             figsize=(9, 2.2 * max(1, len(units)) + 0.6))
    plot_signals(list(axes[:, 0]), rec, marks)
    if marks and title is None:
        title = f"{rec.attrs.get('name', '')}: " + "; ".join(label for _, label in marks)
    _save_time_figure(fig, axes, rec, path, title)


def signal_units(rec: Recording) -> dict[str, list[str]]:
    """Recorded signal names grouped by unit (one axis each)."""
    by_unit: dict[str, list[str]] = {}
    for name in rec.signals:
        by_unit.setdefault(rec.units.get(name, ""), []).append(name)
    return by_unit


def plot_signals(axes: Sequence[Any], rec: Recording,
                 marks: Sequence[tuple[float, str]] = ()) -> None:
    """Each unit's signals on one of ``axes`` (as many as :func:`signal_units` has groups),
    ``marks`` (time, label) as red vertical lines on each."""
    for ax, (unit, names) in zip(axes, signal_units(rec).items()):
        for name in names:
            values = rec.signals[name].reshape(len(rec.time), -1)
            for j in range(values.shape[1]):
                label = name if values.shape[1] == 1 else f"{name}[{j}]"
                ax.plot(rec.time, values[:, j], lw=0.9, label=label)
        for t, label in marks:
            ax.axvline(t, color="r", lw=1.2, label=label)
        ax.set_ylabel(unit or "-")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)


def _save_time_figure(fig, axes, rec: Recording, path: str | Path, title: str | None) -> None:
    """Label the shared time axis, title the figure (default: the graph name), write the PNG."""
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(title or str(rec.attrs.get("name", "")))
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_graph(checked: Checked, schedule: Schedule, path: str | Path) -> None:
    """Render the block diagram: blocks in columns by signal flow, wires labelled by port."""
    graph = checked.graph
    order = {c.block: k for k, c in reversed(list(enumerate(schedule.calls)))}
    flow = nx.DiGraph()
    flow.add_nodes_from(graph.nodes)
    for w in graph.wires:
        a, b = w.src[0], w.dst[0]
        if order.get(a, -1) < order.get(b, len(order)) and a != b:
            flow.add_edge(a, b)
    layer = {}
    for name in nx.topological_sort(flow):
        layer[name] = max((layer[p] + 1 for p in flow.predecessors(name)), default=0)
    for name, k in layer.items():
        flow.nodes[name]["layer"] = k
    pos = nx.multipartite_layout(flow, subset_key="layer")
    fig, ax = plt.subplots(figsize=(2.6 * (max(layer.values()) + 1) + 2, 5))
    for w in graph.wires:
        (x0, y0), (x1, y1) = pos[w.src[0]], pos[w.dst[0]]
        back = layer[w.src[0]] >= layer[w.dst[0]]
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                    arrowprops=dict(arrowstyle="-|>", lw=1.0, shrinkA=28, shrinkB=28,
                                    color="tab:red" if back else "0.3",
                                    connectionstyle="arc3,rad=0.35" if back else "arc3"))
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"{w.src[1]}→{w.dst[1]}", fontsize=7,
                ha="center", va="bottom", color="0.25")
    for name, (x, y) in pos.items():
        node = graph.nodes[name]
        held = name in schedule.held
        label = f"{name}\n{type(node.block).__name__}"
        if node.divider > 1:
            label += f"\n{graph.rate / node.divider:g} Hz"
        ax.text(x, y, label, ha="center", va="center", fontsize=8,
                bbox=dict(boxstyle="round,pad=0.5", fc="#e8f0fb" if not held else "#fbf3e0",
                          ec="0.3"))
    ax.set_title(f"{graph.name} ({graph.rate:g} Hz; orange = held/discrete, red = feedback)")
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    pad = 0.3 + 0.15 * (max(xs) - min(xs))
    ax.set_xlim(min(xs) - pad, max(xs) + pad)
    ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    ax.axis("off")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_modes(rec: Recording, panels: list[list[str]], mode: str, path: str | Path,
               title: str | None = None) -> None:
    """Signals of a piece-wise ODE device over time with its mode epochs (seed 003, figure 6).

    Parameters
    ----------
    rec : Recording
        A recording holding every signal named in ``panels`` and ``mode``.
    panels : list of list of str
        Signals per axis, top to bottom (e.g. force and indicator; angles).
    mode : str
        Integer mode signal: each epoch is shaded by its mode and every
        switch is marked with a vertical line.
    path : str or Path
        PNG file to write.
    title : str, optional
        Figure title (default: the recording's graph name).
    """
    modes = rec.signals[mode].reshape(-1)
    switches = rec.time[1:][modes[1:] != modes[:-1]]
    starts = [rec.time[0], *switches]
    ends = [*switches, rec.time[-1]]
    colours = dict(zip(sorted(set(modes.tolist())), plt.cm.Pastel1.colors))
    fig, axes = plt.subplots(len(panels), 1, sharex=True, squeeze=False,
                             figsize=(9, 2.6 * len(panels) + 0.6))
    for ax, names in zip(axes[:, 0], panels):
        for a, b in zip(starts, ends):
            value = int(modes[min(int(np.searchsorted(rec.time, a)), modes.size - 1)])
            ax.axvspan(a, b, color=colours[value], alpha=0.6, lw=0)
        for t in switches:
            ax.axvline(t, color="0.2", lw=0.8)
        for name in names:
            unit = rec.units.get(name, "")
            ax.plot(rec.time, rec.signals[name].reshape(len(rec.time), -1)[:, 0], lw=1.0,
                    label=f"{name} [{unit or '-'}]")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    axes[0, 0].set_title(f"shading: {mode} " + ", ".join(f"{v}" for v in colours)
                         + "; lines: located switch ticks", fontsize=9)
    _save_time_figure(fig, axes, rec, path, title)
