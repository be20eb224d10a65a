"""Stream recorded signals to HDF5: a writer thread appends while the kernel runs.

File layout::

    /time                    (N,) float64, s
    /signals/<block.port>    (N, *shape), the port's dtype; attr 'unit'
    attrs: graph_yaml, name, rate, seed, duration, hapflow_version,
           numba_version, ticks, complete, status, events, event_overflows

Durability.  The file appears under its name only once its layout is
written (it is built under a temporary name and renamed), every append is
flushed, and ``ticks`` always equals the rows in the file (a failed append
shrinks the datasets back).  So a run stopped at any point (error, Ctrl-C,
SIGTERM, SIGKILL) leaves either no file or a readable one; ``complete`` says
whether the run finished.  After an error, Ctrl-C or SIGTERM every submitted
chunk is stored before the file closes; a SIGKILL or a crash loses only the
chunks submitted since the writer's last round (:data:`WRITE_INTERVAL`).

Hand-off.  :meth:`Recorder.submit` only queues a chunk, and
:meth:`Recorder.submit_later` queues one that the writer makes itself (a
simulation hands over its chunk's raw log rows; the writer splits them into
signals and computes their times).  One writer thread per process wakes every
:data:`WRITE_INTERVAL` and appends what queued as one append (one extent
change, one write per dataset and one flush, however many chunks) while the
caller runs the next chunk's kernel, which releases the GIL.  Chosen against
the alternatives by measurement (the per-chunk overhead of ``bench/engine.py``,
a 60 s run of the 4 kHz rig in 1 s chunks to a file; the medians over 61 runs
of one process per row, the rows alternating, each figure a share of the
kernel's time per chunk):

* a thread started per run (the first design) cost about as much as the
  10 s rig run's whole kernel: the thread is started once and kept;
* the caller split the log rows into signals and made the time column, 39 us
  of a 460-630 us chunk: the writer does it now, while the caller's next
  kernel runs (19-22 % before, 7.6-8.9 % after, with a 1 ms round);
* waking the writer at every submit (a ``threading.Condition`` or a bare
  lock released by the caller) cost the caller 14-27 us per submit against
  3.5 us for queueing alone: the writer wakes on a timer;
* the round: the caller waits for the GIL when its kernel returns while the
  writer is inside an HDF5 call (h5py holds the GIL throughout), so short
  rounds stall it often and long ones long: 0.5 ms 9.6-10.9 %, 1 ms
  6.1-12.6 %, **2 ms 2.8-9.7 %**, 3 ms 4.7-9.4 %, 4 ms 4.2-6.4 % (2 ms
  was the lower in 5 of 5 alternations against 1 ms); with the split still
  on the caller, medians of 16 runs: 1 ms 8 %, 20 ms 18 %, 100 ms 36 %;
* flushing at most every 50 ms instead of at every round: 16.0-16.4 %
  against 7.6-8.9 % (2 of 2 alternations, 1 ms rounds), so every round
  flushes, which also keeps ``ticks`` on disk equal to the rows stored.

Writes.  h5py's low-level calls on dataset ids kept from the layout, with the
row count kept here and ``ticks`` written through a kept attribute handle:
slicing, asking a dataset its shape, and rewriting an attribute the high-level
way (delete and create) each cost several times more than copying a 4000-row
chunk.  A dataset's HDF5 chunk holds a whole number of the caller's chunks
(``rows``), so appends fill chunks instead of rewriting a part-filled one at
every flush.

What is left.  A round that writes one 4000-row chunk of the rig (the time
and one signal) takes 250-340 us of the writer's time, nearly all of it in
h5py and HDF5 (copying the 64 kB costs 6-17 us), holding the GIL: hidden
only while the other core is free, so on a machine whose cores are all busy
the writer's work adds to the run, and while the caller's kernel returns
into a round it waits.  Each file also has a fixed cost (creating it with
its attributes, removing the recording it replaces, closing it) of the order
of the 10 s rig run's whole kernel, which is why a 10 s run to a file cannot
come within 1.35x of the hand-written loop; ``bench/engine.py`` reports the
per-chunk overhead of a 60 s run, free of that fixed cost.
"""

from __future__ import annotations

import atexit
import os
import threading
import time as _time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

from .errors import HapflowError
from .ports import DTYPES

WRITE_INTERVAL = 0.002
"""Seconds between the writer thread's rounds (see the module docstring)."""

QUEUED_BYTES = 64 * 2**20
"""Most chunk data waiting for the writer before :meth:`Recorder.submit` writes it itself."""

CHUNK_BYTES = (16 * 2**10, 2**20)
"""Smallest and largest HDF5 chunk of a dataset, in bytes."""

ChunkMaker = Callable[[], tuple[np.ndarray, dict[str, np.ndarray]]]
"""Makes a chunk's times and signals (see :meth:`Recorder.submit_later`)."""


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
    rows : int
        Rows the caller appends at a time: a dataset's HDF5 chunk holds a
        whole number of them, so that appends fill chunks instead of
        rewriting a part-filled one at every flush.

    Attributes
    ----------
    ticks : int
        Rows in the file.
    submitted, stored : int
        Chunks given to :meth:`submit`, and those of them in the file.
    """

    def __init__(self, path: str | Path, signals: dict[str, tuple[tuple[int, ...], str, str | None]],
                 attrs: dict[str, Any], extend: Callable[[h5py.File], None] | None = None,
                 rows: int = 4096):
        self.path = Path(path)
        self._lock = threading.Lock()            # guards the queue
        self._writing = threading.Lock()         # one writer at a time: the thread or wait()
        self._failure: BaseException | None = None
        self._queue: list[tuple[ChunkMaker, int]] = []
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
            self._layout(signals, attrs, max(1, int(rows)))
            if extend is not None:
                extend(self.file)
                self.file.flush()
        except BaseException:
            self.file.close()
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, self.path)           # the open file keeps writing to it

    def _layout(self, signals: dict[str, tuple[tuple[int, ...], str, str | None]],
                attrs: dict[str, Any], rows: int) -> None:
        self.file.attrs.update({k: v for k, v in attrs.items() if v is not None})
        self.file.attrs.update(ticks=0, complete=False, status="running")
        self._ticks_attr = h5py.h5a.open(self.file.id, b"ticks")
        self.time = self._dataset(self.file, "time", (), "float64", "s", rows)
        group = self.file.create_group("signals")
        self.datasets = {name: self._dataset(group, name, shape, DTYPES[dtype], unit, rows)
                         for name, (shape, dtype, unit) in signals.items()}
        self._ids = {name: (ds.id, ds.shape[1:])
                     for name, ds in (("/time", self.time), *self.datasets.items())}
        self._spaces: dict[tuple[int, ...], h5py.h5s.SpaceID] = {}     # in memory, by shape
        self.ticks = 0
        self.file.flush()

    @staticmethod
    def _dataset(group: h5py.Group, name: str, shape: tuple[int, ...], dtype: str,
                 unit: str | None, rows: int) -> h5py.Dataset:
        """An empty dataset of rows of ``shape``, growing along its first axis, in HDF5
        chunks of a whole number of ``rows`` within :data:`CHUNK_BYTES`."""
        row_bytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        small, large = CHUNK_BYTES
        per_chunk = rows * -(-small // (rows * row_bytes))       # ceil: at least `small`
        per_chunk = max(1, min(per_chunk, large // row_bytes))
        ds = group.create_dataset(name, shape=(0, *shape), maxshape=(None, *shape), dtype=dtype,
                                  chunks=(per_chunk, *shape))
        ds.attrs["unit"] = unit if unit is not None else ""
        return ds

    def submit(self, time: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        """Queue a chunk for the writer thread (the arrays must not change afterwards).

        The thread appends what queued every :data:`WRITE_INTERVAL`, as one
        append; :attr:`stored` counts the chunks in the file.  The caller
        writes the queue itself when :data:`QUEUED_BYTES` are queued.
        """
        size = time.nbytes + sum(c.nbytes for c in columns.values())
        self.submit_later(lambda: (time, columns), size)

    def submit_later(self, make: ChunkMaker, size: int) -> None:
        """Queue a chunk that the writer makes when it stores it, as :meth:`submit` does.

        ``make()`` returns the chunk's times and signals (as :meth:`submit` takes them); it
        runs on the writer's thread, so it must read only data that no longer changes.
        ``size`` is the bytes it holds, counted against :data:`QUEUED_BYTES`.  Splitting
        a simulation's log rows into signals costs the caller a noticeable share of a 1 s
        rig chunk's kernel time: made here, it runs while the caller's next kernel runs.
        """
        self._raise_failure()
        with self._lock:
            self._queue.append((make, size))
            self._queued += size
        if not self.submitted:
            WRITER.add(self)
        self.submitted += 1
        if self._queued > QUEUED_BYTES:
            self.wait()

    def wait(self) -> None:
        """Store every submitted chunk now, on the calling thread (raising what writing raised)."""
        self._write_queued()
        self._raise_failure()

    def _write_queued(self) -> None:
        """Append and flush the queued chunks as one (the writer thread or :meth:`wait`)."""
        with self._writing:
            if self._failure is not None or not self.file.id.valid:
                return
            with self._lock:
                batch, self._queue = self._queue, []
            if not batch:
                return
            try:
                self._append([make() for make, _ in batch])
            except BaseException as exc:
                self._failure = exc
                raise
            with self._lock:
                self.stored += len(batch)
                self._queued -= sum(size for _, size in batch)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def append(self, time: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        """Append one chunk (``time`` and each signal's rows) and flush."""
        with self._writing:
            self._append([(time, columns)])

    def _append(self, chunks: list[tuple[np.ndarray, dict[str, np.ndarray]]]) -> None:
        """Append chunks, one after the other, as one write per dataset, and flush once.

        Rows of a wrong shape fail before the file changes; a write that fails
        shrinks the datasets back, so that they keep ``ticks`` rows.
        """
        n0 = self.ticks
        rows = self._joined(chunks)
        n1 = n0 + rows["/time"].shape[0]
        spaces = {}
        try:
            for ds, shape in self._ids.values():
                ds.set_extent((n1, *shape))
                if shape not in spaces:
                    spaces[shape] = h5py.h5s.create_simple((n1, *shape),
                                                           (h5py.h5s.UNLIMITED, *shape))
            for name, values in rows.items():
                ds, shape = self._ids[name]
                space = spaces[shape]
                space.select_hyperslab((n0,) + (0,) * len(shape), values.shape)
                ds.write(self._memory(values.shape), space, values)
        except BaseException:
            for ds, shape in self._ids.values():
                ds.set_extent((n0, *shape))
            raise
        self._ticks_attr.write(np.array(n1, dtype=np.int64))
        self.file.flush()
        self.ticks = n1

    def _joined(self, chunks: list[tuple[np.ndarray, dict[str, np.ndarray]]]
                ) -> dict[str, np.ndarray]:
        """Each dataset's rows of ``chunks``, one chunk after the other, as a C-contiguous
        array of the dataset's row shape; a ValueError names a signal that does not fit."""
        joined = {}
        for name, (_, shape) in self._ids.items():
            pieces = [time if name == "/time" else columns.get(name) for time, columns in chunks]
            try:
                shaped = [np.reshape(rows, (len(time), *shape))
                          for rows, (time, _) in zip(pieces, chunks)]
            except (ValueError, TypeError):
                raise ValueError(f"signal {name!r}: {[np.shape(r) for r in pieces]} "
                                 f"are not the chunks' rows of shape {shape}") from None
            joined[name] = np.ascontiguousarray(
                shaped[0] if len(shaped) == 1 else np.concatenate(shaped))
        unknown = {name for _, columns in chunks for name in columns} - set(self.datasets)
        if unknown:
            raise ValueError(f"no signals {sorted(unknown)} in this recording")
        return joined

    def _memory(self, shape: tuple[int, ...]) -> h5py.h5s.SpaceID:
        space = self._spaces.get(shape)
        if space is None:
            space = self._spaces[shape] = h5py.h5s.create_simple(shape)
        return space

    def close(self, status: str = "complete", **attrs: Any) -> None:
        """Store the submitted chunks, write final attributes and close (safe to call twice)."""
        WRITER.remove(self)
        try:
            self.wait()
        finally:
            with self._writing:
                if self.file.id.valid:
                    status = "error" if self._failure is not None else status
                    try:
                        self.file.attrs.update(attrs)
                        self.file.attrs["status"] = status
                        self.file.attrs["complete"] = status == "complete"
                    finally:
                        self.file.close()


class _WriterThread:
    """The process's one HDF5 writer thread: every :data:`WRITE_INTERVAL` it stores what the
    recorders that :meth:`Recorder.submit` to queued, and sleeps while there are none.
    Started once and kept: starting a thread for every run cost about as much as the
    4 kHz rig's kernel.  One thread serves every recorder (h5py runs one HDF5 call at a
    time anyway).  A forked child starts its own (the parent's thread is not there)."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)
        atexit.register(self._write_all)          # what an unclosed recorder queued

    def _reset(self) -> None:
        self._recorders: list[Recorder] = []
        self._open = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, rec: Recorder) -> None:
        with self._open:
            self._recorders.append(rec)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hapflow-recorder",
                                                daemon=True)
                self._thread.start()
            self._open.notify()

    def remove(self, rec: Recorder) -> None:
        with self._open:
            if rec in self._recorders:
                self._recorders.remove(rec)

    def _run(self) -> None:
        while True:
            with self._open:
                self._open.wait_for(lambda: self._recorders)
            _time.sleep(WRITE_INTERVAL)
            self._write_all()

    def _write_all(self) -> None:
        with self._open:
            recorders = list(self._recorders)
        for rec in recorders:
            try:
                rec._write_queued()
            except Exception:                      # kept: the recorder's caller gets it
                pass


WRITER = _WriterThread()


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
