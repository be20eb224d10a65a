"""Pictures of recorded signals over time (the block diagram is :mod:`hapflow.diagram`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .recorder import Recording  # noqa: E402


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


def _plot_by_unit(ax: Any, rec: Recording, names: list[str]) -> None:
    """``names`` on ``ax``, a second unit on a twin axis at the right (force and an
    indicator function): every axis is labelled with its signals and their one unit."""
    by_unit: dict[str, list[str]] = {}
    for name in names:
        by_unit.setdefault(rec.units.get(name) or "-", []).append(name)
    if len(by_unit) > 2:
        raise ValueError(f"one panel shows at most two units (one per side); {names} have "
                         f"{', '.join(by_unit)}")
    sides = [ax, ax.twinx()][:len(by_unit)]
    handles, colour = [], 0
    for side, (unit, group) in zip(sides, by_unit.items()):
        for name in group:
            handles += side.plot(rec.time, rec.signals[name].reshape(len(rec.time), -1)[:, 0],
                                 lw=1.0, color=f"C{colour}", label=f"{name} [{unit}]")
            colour += 1
        side.set_ylabel(f"{', '.join(group)} [{unit}]", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, loc="upper right", fontsize=8)


def _save_time_figure(fig, axes, rec: Recording, path: str | Path, title: str | None) -> None:
    """Label the shared time axis, title the figure (default: the graph name), write the PNG."""
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(title or str(rec.attrs.get("name", "")))
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
        _plot_by_unit(ax, rec, names)
    axes[0, 0].set_title(f"shading: {mode} " + ", ".join(f"{v}" for v in colours)
                         + "; lines: located switch ticks", fontsize=9)
    _save_time_figure(fig, axes, rec, path, title)
