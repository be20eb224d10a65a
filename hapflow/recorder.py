"""Stream recorded signals to HDF5, one flushed append per chunk.

File layout::

    /time                    (N,) float64, s
    /signals/<block.port>    (N, *shape), the port's dtype; attr 'unit'
    attrs: graph_yaml, name, rate, seed, duration, hapflow_version,
           numba_version, ticks, complete, status, events, event_overflows

The file appears under its name only once its layout is written (it is built
under a temporary name and renamed) and is flushed after every chunk, so a
run stopped at any point (error, Ctrl-C, SIGTERM, SIGKILL) leaves either no
file or a readable one holding every completed chunk; ``complete`` says
whether the run finished.

:meth:`Recorder.submit` hands a chunk to a writer thread while the caller
runs the next chunk's kernel (which releases the GIL): appending and
flushing one 4000-row chunk took about 0.5 ms here, longer than the 4 kHz
rig's kernel needs for it, so chunks that queue up meanwhile are appended
and flushed together.  :attr:`Recorder.stored` counts the chunks in the
file; :meth:`Recorder.wait` returns when all are.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

from .errors import HapflowError
from .ports import DTYPES

QUEUED_BYTES = 64 * 2**20
"""Most chunk data waiting for the writer before :meth:`Recorder.submit` waits too."""


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
    extend : callable, optional
        Adds groups of the caller's own (the real-time timing) before the file
        takes its name.
    """

    def __init__(self, path: str | Path, signals: dict[str, tuple[tuple[int, ...], str, str | None]],
                 attrs: dict[str, Any], extend: Callable[[h5py.File], None] | None = None):
        self.path = Path(path)
        self._writer: ThreadPoolExecutor | None = None
        self._pending: Future | None = None
        self._lock = threading.Lock()
        self._queue: list[tuple[np.ndarray, dict[str, np.ndarray], int]] = []
        self._queued = 0
        self.submitted = 0
        self.stored = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Built under a temporary name and renamed when complete: a process killed while
        # HDF5 writes its first metadata left a 96-byte file h5py could not open.
        self.path.unlink(missing_ok=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        try:
            self.file = h5py.File(partial, "w")
        except OSError as exc:                 # a folder without write permission, /proc ...
            raise HapflowError(f"cannot write the recording {self.path}: {exc}") from None
        try:
            self._layout(signals, attrs)
            if extend is not None:
                extend(self.file)
                self.file.flush()
        except BaseException:
            self.file.close()
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, self.path)           # the open file keeps writing to it

    def _layout(self, signals: dict[str, tuple[tuple[int, ...], str, str | None]],
                attrs: dict[str, Any]) -> None:
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

    def submit(self, time: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        """Queue a chunk for the writer thread (the arrays must not change afterwards).

        Chunks that queue up while the writer is busy are appended and flushed
        together; :attr:`stored` counts the chunks in the file.  The caller
        waits only when :data:`QUEUED_BYTES` are queued.
        """
        self._raise_failure()
        size = time.nbytes + sum(c.nbytes for c in columns.values())
        with self._lock:
            self._queue.append((time, columns, size))
            self._queued += size
            idle = self._pending is None or self._pending.done()
        self.submitted += 1
        if idle:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="hapflow-recorder")
            self._pending = self._writer.submit(self._write_queued)
        if self._queued > QUEUED_BYTES:
            self.wait()

    def _write_queued(self) -> None:
        while True:
            with self._lock:
                batch, self._queue = self._queue, []
            if not batch:
                return
            time = np.concatenate([b[0] for b in batch])
            columns = {k: np.concatenate([b[1][k] for b in batch]) for k in batch[0][1]}
            self.append(time, columns)
            with self._lock:
                self.stored += len(batch)
                self._queued -= sum(b[2] for b in batch)

    def wait(self) -> None:
        """Return when every submitted chunk is stored (raising what writing raised)."""
        while self.stored < self.submitted:
            self._raise_failure()
            pending = self._pending
            if pending is not None:
                pending.result()
            if self._queue and (pending is None or pending.done()):
                self._pending = self._writer.submit(self._write_queued)

    def _raise_failure(self) -> None:
        pending = self._pending
        if pending is not None and pending.done() and pending.exception() is not None:
            raise pending.exception()

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
        """Store the submitted chunks, write final attributes and close (safe to call twice)."""
        try:
            self.wait()
        finally:
            if self._writer is not None:
                self._writer.shutdown()
                self._writer = None
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
    """Read a recording written by :class:`Recorder`.

    The file is read in this process: a damaged one can crash the HDF5
    library, which no exception reports.  For a file hapflow did not just
    write, :func:`hapflow.h5check.check_readable` reads it in a child process
    first (the command line does; see :mod:`hapflow.h5check` for why here it
    is the caller's choice).
    """
    with h5py.File(path, "r") as f:
        signals = {name: ds[()] for name, ds in f["signals"].items()}
        units = {name: str(ds.attrs.get("unit", "")) for name, ds in f["signals"].items()}
        return Recording(f["time"][()], signals, units, dict(f.attrs))
