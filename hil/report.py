"""Timing report of a real-time run: percentiles, histogram, overruns over time, safety events.

:func:`timing_stats` works on the per-tick arrays (from a recording's
``/hil`` group or a run kept in memory) and is shared with ``bench/``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from hapflow.errors import HapflowError

PERCENTILES = (50.0, 99.0, 99.9)
COLUMNS = ("wake", "lateness", "compute", "skipped", "overrun")
"""Per-tick datasets under ``/hil`` a report needs (``missed`` is optional: older files)."""


@dataclass
class Timing:
    """Per-tick timing of one run (ns; see :mod:`hapflow.hil.recording`).

    One row per sample clock edge; the rows of edges the loop missed
    (``missed``) are left out of the wake-up, lateness and compute figures,
    which describe the loop's own ticks.
    """

    wake: np.ndarray
    lateness: np.ndarray
    compute: np.ndarray
    skipped: np.ndarray
    overrun: np.ndarray
    missed: np.ndarray
    period_ns: int
    attrs: dict

    @property
    def ticks(self) -> np.ndarray:
        """Rows of the loop's own ticks (not of missed edges)."""
        return np.flatnonzero(~self.missed)

    @property
    def period_error(self) -> np.ndarray:
        """Time between successive wake-ups of the loop minus the period (ns)."""
        return np.diff(self.wake[self.ticks]) - self.period_ns


def load_timing(path: str | Path) -> Timing:
    """Read the ``/hil`` timing of a recording (in this process: see :mod:`hapflow.h5check`
    for a file that may crash the HDF5 library).

    Raises
    ------
    HapflowError
        If the file is missing or was not written by a real-time run.
    """
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise HapflowError(f"{path}: cannot open the recording: {exc}") from None
    try:
        with f:
            if "hil" not in f:
                raise HapflowError(f"{path} has no real-time timing (/hil): it was not recorded "
                                   "with 'hapflow run --mode hil'")
            g = f["hil"]
            absent = [k for k in COLUMNS if not isinstance(g.get(k), h5py.Dataset)]
            if absent or "period_ns" not in f.attrs:
                raise HapflowError(f"{path}: the real-time timing is incomplete (no "
                                   f"{', '.join(absent) or 'period_ns attribute'}): the file is "
                                   "damaged or was not written by 'hapflow run --mode hil'")
            columns = [g[k][()] for k in COLUMNS]
            missed = g["missed"][()] if "missed" in g else np.zeros(np.size(columns[0]), bool)
            period, attrs = f.attrs["period_ns"], dict(f.attrs)
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as exc:
        # HDF5's own errors on a file damaged inside (a bad symbol table, a cut-off dataset)
        raise HapflowError(f"{path}: cannot read the real-time timing, the file is damaged: "
                           f"{exc}") from None
    timing = Timing(*columns, missed, _period_ns(period, path), attrs)
    _check(timing, path)
    return timing


MAX_PERIOD_NS = 10**12
"""Longest loop period a timing file can hold (1000 s)."""


def _period_ns(value: Any, path: str | Path) -> int:
    """The file's ``period_ns`` attribute as a whole number of ns in (0, MAX_PERIOD_NS]."""
    number = np.asarray(value)
    if (number.ndim != 0 or number.dtype.kind not in "iuf" or not np.isfinite(number)
            or not 0 < number <= MAX_PERIOD_NS or number != np.round(number)):
        raise HapflowError(f"{path}: the real-time timing is damaged: its period_ns attribute "
                           f"is {value!r}, not a whole number of ns in (0, {MAX_PERIOD_NS:.0e}]")
    return int(number)


def _check(t: Timing, path: str | Path) -> None:
    """Reject timing no run can have written (a damaged file printed nonsense and exit 0)."""
    n = np.size(t.wake)
    problem = None
    columns = (t.wake, t.lateness, t.compute, t.skipped, t.overrun, t.missed)
    if any(np.asarray(c).dtype.kind not in "biu" for c in columns):
        problem = "its columns are not all integers (ns, counts and flags)"
    elif any(np.ndim(c) != 1 or c.size != n for c in (t.lateness, t.compute, t.skipped, t.overrun,
                                                     t.missed)):
        problem = "its columns have different lengths"
    elif n and (t.skipped.min() < 0 or t.skipped.sum() > n + (t.wake.max() - t.wake.min())
                // t.period_ns):
        problem = ("more edges skipped than the run's wake-up times span "
                   f"({int(t.skipped.sum())} in {n} ticks)")
    if problem:
        raise HapflowError(f"{path}: the real-time timing is damaged: {problem}")


def stats(values_ns: np.ndarray) -> dict[str, float]:
    """p50, p99, p99.9 and max of ``values_ns``, in us."""
    if values_ns.size == 0:
        return {**{f"p{p:g}": float("nan") for p in PERCENTILES}, "max": float("nan")}
    v = np.asarray(values_ns, dtype=np.float64) / 1e3
    out = {f"p{p:g}": float(np.percentile(v, p)) for p in PERCENTILES}
    out["max"] = float(v.max())
    return out


def timing_stats(t: Timing) -> dict[str, dict[str, float]]:
    """Percentiles (us) of |period error|, lateness and compute time."""
    own = t.ticks
    return {"|period error|": stats(np.abs(t.period_error)), "lateness": stats(t.lateness[own]),
            "compute": stats(t.compute[own])}


def text(t: Timing) -> str:
    """The printed report: percentiles, overruns, histogram, overruns per second, safety."""
    n = t.wake.size
    rate = 1e9 / t.period_ns
    lines = [f"{n} ticks at {rate:g} Hz ({n / rate:g} s), status {t.attrs.get('status', '?')}; "
             f"{t.attrs.get('realtime', '')}; CPU {float(t.attrs.get('cpu_percent', np.nan)):.0f} %",
             "", f"{'us':16s}" + "".join(f"{k:>10s}" for k in (*[f'p{p:g}' for p in PERCENTILES], 'max'))]
    for name, row in timing_stats(t).items():
        lines.append(f"{name:16s}" + "".join(f"{v:10.1f}" for v in row.values()))
    over = t.overrun
    pe = t.period_error
    lines += ["", f"overruns (missed edges, late samples, late writes): {int(over.sum())}; edges skipped: "
                  f"{int(t.skipped.sum())} (run late by the kernel: {int(t.missed.sum())}); "
                  f"periods over 1.5x: {int((pe > 0.5 * t.period_ns).sum())}"]
    lines += ["", "lateness histogram:"]
    edges = np.array([0, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, np.inf]) * 1e3
    counts, _ = np.histogram(np.clip(t.lateness[t.ticks], 0, None), edges)
    for lo, hi, c in zip(edges[:-1], edges[1:], counts):
        label = f"{lo / 1e3:g}-{hi / 1e3:g} us" if np.isfinite(hi) else f">= {lo / 1e3:g} us"
        bar = "#" * int(round(40 * c / max(1, counts.max())))
        lines.append(f"  {label:>16s} {c:9d} {bar}")
    per_second = _per_second(over, rate)
    if per_second.any():
        lines += ["", "overruns per second: " + " ".join(str(int(v)) for v in per_second)]
    kind = t.attrs.get("safety_kind")
    lines += ["", (f"safety event at t = {float(t.attrs['safety_time']):.4f} s (tick "
                   f"{int(t.attrs['safety_tick'])}): {kind}: {t.attrs['safety_message']}")
              if kind else "safety events: none"]
    return "\n".join(lines)


def _per_second(flags: np.ndarray, rate: float) -> np.ndarray:
    per = max(1, int(round(rate)))             # a loop slower than 1 Hz: one tick a bin
    n = -(-flags.size // per) if flags.size else 0
    padded = np.zeros(n * per, dtype=bool)
    padded[:flags.size] = flags
    return padded.reshape(n, per).sum(axis=1)


def trip_marks(attrs: dict) -> list[tuple[float, str]]:
    """The safety stop of a recording's attributes as a plot mark (time, label), if any."""
    kind = attrs.get("safety_kind")
    if not kind:
        return []
    return [(float(attrs["safety_time"]),
             f"safety stop at {float(attrs['safety_time']):.4f} s: {kind}")]


def plot(t: Timing, path: str | Path, rec=None) -> Path:
    """Histogram of lateness and period error, overruns per second, compute time, and
    with ``rec`` (the :class:`~hapflow.recorder.Recording`) its signals over time, one
    axis per unit; the safety stop marked; PNG."""
    from hapflow.plotting import plot_signals, signal_units
    import matplotlib.pyplot as plt
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rate = 1e9 / t.period_ns
    traces = len(signal_units(rec)) if rec is not None else 0
    fig = plt.figure(figsize=(11, 7 + 2.2 * traces))
    grid = fig.add_gridspec(2 + traces, 2, height_ratios=[3.5, 3.5] + [2.2] * traces)
    ax = np.array([[fig.add_subplot(grid[i, j]) for j in range(2)] for i in range(2)])
    if traces:
        first = fig.add_subplot(grid[2, :])
        signal_axes = [first] + [fig.add_subplot(grid[2 + i, :], sharex=first)
                                 for i in range(1, traces)]
        plot_signals(signal_axes, rec, trip_marks(t.attrs))
        signal_axes[-1].set_xlabel("time (s)")
        signal_axes[0].set_title("recorded signals")
    bins = np.logspace(-1, 5, 70)
    ax[0, 0].hist(np.clip(t.lateness[t.ticks] / 1e3, 0.1, None), bins=bins)
    ax[0, 0].set(xscale="log", yscale="log", xlabel="lateness (us)", ylabel="ticks",
                 title="lateness")
    ax[0, 1].hist(np.clip(np.abs(t.period_error) / 1e3, 0.1, None), bins=bins, color="C1")
    ax[0, 1].set(xscale="log", yscale="log", xlabel="|period error| (us)", title="period error")
    per = _per_second(t.overrun, rate)
    ax[1, 0].bar(np.arange(per.size), per, width=1.0, align="edge", color="C3")
    ax[1, 0].set(xlabel="time (s)", ylabel="overruns per second", title="overruns over time")
    time = np.arange(t.compute.size) / rate
    ax[1, 1].plot(time, t.compute / 1e3, lw=0.5)
    ax[1, 1].axhline(t.period_ns / 1e3, color="k", ls="--", lw=0.8, label="period")
    ax[1, 1].set(xlabel="time (s)", ylabel="compute (us)", title="compute time per tick")
    ax[1, 1].legend()
    for when, label in trip_marks(t.attrs):
        for a in (ax[1, 0], ax[1, 1]):
            a.axvline(when, color="r", lw=1)
        fig.suptitle(label, color="r")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
