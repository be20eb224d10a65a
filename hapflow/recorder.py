"""Stream recorded signals to HDF5, one flushed append per chunk.

File layout::

    /time                    (N,) float64, s
    /signals/<block.port>    (N, *shape), the port's dtype; attr 'unit'
    attrs: graph_yaml, name, rate, seed, duration, hapflow_version,
           numba_version, ticks, complete, status, events, event_overflows

The file is flushed after every chunk, so a run stopped at any point (error,
Ctrl-C, even SIGKILL between writes) leaves a readable file holding every
completed chunk; ``complete`` says whether the run finished.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .ports import DTYPES


class Recorder:
    """HDF5 writer for one run.

    Parameters
    ----------
    path : str or Path
        Output file (overwritten).
    signals : dict
        ``"block.port"`` -> (shape, dtype code, unit) of each recorded signal.
    attrs : dict
        File attributes (graph YAML text, rate, seed, versions ...).
    """

    def __init__(self, path: str | Path, signals: dict[str, tuple[tuple[int, ...], str, str | None]],
                 attrs: dict[str, Any]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = h5py.File(self.path, "w")
        self.file.attrs.update({k: v for k, v in attrs.items() if v is not None})
        self.file.attrs.update(ticks=0, complete=False, status="running")
        self.time = self.file.create_dataset("time", shape=(0,), maxshape=(None,), dtype="f8",
                                             chunks=(8192,))
        self.time.attrs["unit"] = "s"
        group = self.file.create_group("signals")
        self.datasets = {}
        for name, (shape, dtype, unit) in signals.items():
            ds = group.create_dataset(name, shape=(0, *shape), maxshape=(None, *shape),
                                      dtype=DTYPES[dtype], chunks=(max(1, 8192 // max(1, int(np.prod(shape)))), *shape))
            ds.attrs["unit"] = unit if unit is not None else ""
            self.datasets[name] = ds
        self.file.flush()

    def append(self, time: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        """Append one chunk (``time`` and each signal's rows) and flush."""
        n0, n = self.time.shape[0], time.shape[0]
        self.time.resize(n0 + n, axis=0)
        self.time[n0:] = time
        for name, rows in columns.items():
            ds = self.datasets[name]
            ds.resize(n0 + n, axis=0)
            ds[n0:] = rows
        self.file.attrs["ticks"] = n0 + n
        self.file.flush()

    def close(self, status: str = "complete", **attrs: Any) -> None:
        """Write final attributes and close (safe to call twice)."""
        if not self.file.id.valid:
            return
        self.file.attrs.update(attrs)
        self.file.attrs["status"] = status
        self.file.attrs["complete"] = status == "complete"
        self.file.close()


@dataclass
class Recording:
    """A recording loaded into memory.

    Attributes
    ----------
    time : ndarray
        Sample times in s.
    signals : dict of ndarray
        ``"block.port"`` -> samples (first axis is time).
    units : dict of str
        ``"block.port"`` -> unit.
    attrs : dict
        File attributes.
    """

    time: np.ndarray
    signals: dict[str, np.ndarray] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.signals[name]


def load(path: str | Path) -> Recording:
    """Read a recording written by :class:`Recorder`."""
    with h5py.File(path, "r") as f:
        signals = {name: ds[()] for name, ds in f["signals"].items()}
        units = {name: str(ds.attrs.get("unit", "")) for name, ds in f["signals"].items()}
        return Recording(f["time"][()], signals, units, dict(f.attrs))
