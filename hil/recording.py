"""HDF5 recording of a real-time run, written by a helper process.

The file has the layout of :mod:`hapflow.recorder` (``/time``,
``/signals/<block.port>``, attributes) plus the per-tick timing::

    /hil/wake        (N,) int64, ns   wake-up time of the tick since the first one
    /hil/lateness    (N,) int64, ns   wake-up minus the sample clock edge it expected
    /hil/compute     (N,) int64, ns   wake-up to the write (read, kernel, checks, write)
    /hil/skipped     (N,) int64       sample clock edges missed before the tick
    /hil/overrun     (N,) bool        the tick missed an edge, its sample was late, or its
                                      write landed after the next edge (the watchdog's count)
    /hil/missed      (N,) bool        a sample clock edge the loop missed: the kernel ran it
                                      late, on inputs interpolated across the stall, and its
                                      command never reached the card (which held the last one;
                                      see :mod:`hapflow.hil.runner`)
    /hil/card/ai_volts  (N, AI) float64, V   each analog input as the card read it
    /hil/card/counts    (N, CI) int64        each encoder's count as the card read it
    /hil/card/ao_volts  (N, AO) float64, V   each analog output as the card put it out:
                                             written, held over a missed edge, or safe
    /hil/card/enable    (N, DO) bool         each enable line's level on the card
                     (attribute ``channels``: the physical channel and port of each
                     column; a dataset with no channel is left out)
    /hil/live/tick, block, parameter, old, new
                     live parameter changes (:mod:`hapflow.hil.live`): the first tick
                     that ran with the new value, and the values as YAML text
    attrs: mode, backend, period_ns, realtime, policy, cpu_percent, overruns,
           safety_kind, safety_tick, safety_time, safety_message (after a trip)

One row per sample clock edge, so the time axis is the card's.  Signals are
the controller's recorded signals, every card input under its hardware name
(``head.force``) and every command as written to the card
(``motor.force_cmd``, after the safety layer), all in SI units.  A row of a
missed edge holds the interpolated inputs, the command the card held, the
wake-up and lateness of the tick that ran it late, its own compute time,
``skipped`` 0 and ``overrun`` False (the stall counts once, on that tick); its
``/hil/card`` inputs are the samples read by that tick (the card's samples of
the missed edge were never read).

Writing HDF5 from the loop's thread costs 0.1-0.8 ms per dataset and holds
the GIL (measured: a writer thread doubles the missed edges of a 4 kHz
loop), so a forked **writer process** does it.  The loop fills one of two
buffers in shared memory; when one is full it sends its index over a pipe
and goes on with the other; the writer appends the rows, flushes, and says
so.  If the loop's process dies (even ``kill -9``), the writer sees the
pipe close and closes the file with every chunk it was sent; if it exits
without finishing the recording (an exception), an exit handler does it.
"""
from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import signal
import threading
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import numpy as np

from hapflow.errors import HapflowError

TIMING = ("wake", "lateness", "compute", "skipped")
"""Per-tick int64 timing datasets under ``/hil``."""
FLAGS = ("overrun", "missed")
"""Per-tick bool datasets under ``/hil``."""


CARD = {"ai_volts": np.float64, "counts": np.int64, "ao_volts": np.float64,
        "enable": np.bool_}
"""Per-tick datasets of ``/hil/card``: what the card read and put out, one column a channel."""


class Buffer:
    """One chunk of rows in shared memory: controller log, commands, timing, card I/O.

    ``card`` gives the columns of each :data:`CARD` array (``ao_volts`` has one per
    command; a missing name has none).
    """

    def __init__(self, ticks: int, log_cols: int, commands: int,
                 card: dict[str, int] | None = None):
        self.shape = (ticks, max(1, log_cols), commands)
        widths = {name: (card or {}).get(name, 0) for name in CARD}
        widths["ao_volts"] = commands
        arrays = {"log": ((ticks, max(1, log_cols)), np.float64),
                  "commands": ((ticks, commands), np.float64),
                  "timing": ((ticks, 4), np.int64),
                  **{name: ((ticks, widths[name]), CARD[name]) for name in CARD},
                  "overrun": ((ticks,), np.bool_), "missed": ((ticks,), np.bool_)}
        order = sorted(arrays, key=lambda k: np.dtype(arrays[k][1]).itemsize, reverse=True)
        sizes = [int(np.prod(arrays[k][0])) * np.dtype(arrays[k][1]).itemsize for k in order]
        self.shm = shared_memory.SharedMemory(create=True, size=max(1, sum(sizes)))
        for name, at in zip(order, np.cumsum([0, *sizes])):     # widest first: aligned
            shape, dtype = arrays[name]
            setattr(self, name, np.ndarray(shape, dtype, self.shm.buf, int(at)))
        self.rows = [self.log[k:k + 1] for k in range(ticks)]     # views made once
        self.tick0 = 0
        self.n = 0

    def release(self, unlink: bool) -> None:
        """Drop the views and the shared memory."""
        self.log = self.commands = self.timing = self.overrun = self.missed = None
        for name in CARD:
            setattr(self, name, None)
        self.rows = []
        self.shm.close()
        if unlink:
            self.shm.unlink()


class Status:
    """A few int64 in shared memory that a watcher process reads (and the e-stop it sets):
    ``values[TICK0]`` first tick of the buffer in use (buffer ``TICK0 // chunk % 2`` of a
    recording, the only one of a run kept in memory), ``[ROWS]`` rows written in it,
    ``[OVERRUNS]`` overruns so far, ``[TRIP]`` tick + 1 of the safety stop (0: none),
    ``stop`` the stop request (a signal number, or :attr:`ESTOP`)."""

    TICK0, ROWS, OVERRUNS, TRIP, STOP = range(5)
    ESTOP = -1
    """``stop[0]`` value of the dashboard's e-stop (signals store their number)."""

    def __init__(self):
        self.shm = shared_memory.SharedMemory(create=True, size=8 * 8)
        self.values = np.ndarray((8,), np.int64, self.shm.buf)
        self.values[:] = 0
        self.stop = self.values[self.STOP:self.STOP + 1]

    def switch(self, tick0: int) -> None:
        """The loop goes on in the other buffer from ``tick0`` (rows first: a reader that
        sees the new first tick never takes the old buffer's row count for the new one's)."""
        self.values[self.ROWS] = 0
        self.values[self.TICK0] = tick0

    def release(self) -> None:
        """Free the shared memory (the loop's views of it must be dropped first)."""
        self.values = self.stop = None
        self.shm.close()
        self.shm.unlink()


class HilRecorder:
    """Records a real-time run through a writer process (see the module docstring).

    Parameters
    ----------
    path : str or Path
        Output file (overwritten).
    signals : dict
        ``name`` -> (unit, (source, column)) with source ``"log"`` or ``"command"``.
    rate : float
        Tick rate (Hz), for the time axis.
    attrs : dict
        File attributes.
    ticks : int
        Rows per buffer.
    log_cols, commands : int
        Columns of the controller log and number of commands.
    card : dict, optional
        :data:`CARD` name -> a label (physical channel and port) per column, for
        ``/hil/card``.

    Raises
    ------
    HapflowError
        If the file cannot be created.
    """

    def __init__(self, path: str | Path, signals: dict[str, tuple[str | None, tuple[str, int]]],
                 rate: float, attrs: dict[str, Any], ticks: int, log_cols: int, commands: int,
                 card: dict[str, list[str]] | None = None):
        self.path = Path(path)
        card = {name: list((card or {}).get(name, ())) for name in CARD}
        widths = {name: len(labels) for name, labels in card.items()}
        self.buffers = [Buffer(ticks, log_cols, commands, widths) for _ in range(2)]
        self.busy = [False, False]
        self.pipe = threading.Lock()    # the loop's chunks and other threads' notes
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_writer, daemon=True, name="hapflow-recorder",
                                args=(child, self.conn, str(self.path), signals, rate,
                                      attrs, self.buffers, card))
        self.proc.start()
        child.close()
        kind, msg = self._recv()
        if kind == "error":
            self.close_buffers()
            raise HapflowError(f"cannot record to {self.path}: {msg}")
        self.owner = os.getpid()
        atexit.register(self.abandon)

    def _recv(self) -> tuple[str, Any]:
        try:
            return self.conn.recv()
        except EOFError:
            return "error", "the recorder process ended unexpectedly"

    def send(self, which: int) -> None:
        """Hand buffer ``which`` (its ``tick0`` and ``n`` rows) to the writer."""
        buf = self.buffers[which]
        if buf.n:
            self.busy[which] = True
            with self.pipe:
                self.conn.send(("chunk", which, buf.tick0, buf.n))

    def note(self, row: tuple[int, str, str, str, str]) -> None:
        """Append a live parameter change (tick, block, parameter, old and new value as YAML
        text) to ``/hil/live``, from any thread; the writer flushes it at once."""
        with self.pipe:
            self.conn.send(("live", *row))

    def claim(self, which: int) -> Buffer:
        """Buffer ``which``, once the writer is done with it (blocks until then)."""
        while self.busy[which]:
            kind, msg = self._recv()
            if kind == "done":
                self.busy[msg] = False
            elif kind == "error":
                raise HapflowError(f"recording to {self.path} failed: {msg}")
        buf = self.buffers[which]
        buf.n = 0
        return buf

    def finish(self, status: str, **attrs: Any) -> None:
        """Write the last chunk, set the final attributes, close the file and the writer."""
        atexit.unregister(self.abandon)
        error = None
        try:
            for k in (0, 1):
                if self.busy[k]:
                    self.claim(k)
            self.conn.send(("finish", status, {k: v for k, v in attrs.items() if v is not None}))
            kind, msg = self._recv()
            error = msg if kind == "error" else None
        finally:
            self.proc.join(timeout=30)
            self.close_buffers()
        if error:
            raise HapflowError(f"recording to {self.path} failed: {error}")

    def abandon(self) -> None:
        """At exit without :meth:`finish` (an exception after the recorder started): close
        the file with status ``error``.

        Without it the process never exits: multiprocessing's exit handler joins the
        writer after a SIGTERM the writer ignores, and the writer waits for this end of
        the pipe to close, which happens only once the process is gone.
        """
        if os.getpid() != self.owner:          # a fork of the loop's process: not its writer
            return
        try:
            self.finish("error")
        except (HapflowError, OSError):        # the writer is gone: nothing more to close
            pass

    def close_buffers(self) -> None:
        """Release the shared memory."""
        for b in self.buffers:
            if b.log is not None:
                b.release(unlink=True)


def _writer(conn, loop_end, path: str, signals: dict, rate: float, attrs: dict,
            buffers: list[Buffer], card: dict[str, list[str]] | None = None) -> None:
    """The writer process: create the file, append chunks on request, close.

    ``buffers`` are the loop's own objects: the fork shares their memory.
    ``loop_end`` is the loop's end of the pipe, inherited by the fork: closed
    here, so that the pipe reports end-of-file when the loop's process dies.
    """
    loop_end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the loop decides when to stop
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.nice(5)                                         # the loop comes first
    from hapflow.recorder import Recorder
    timing = {}

    def timing_group(file) -> None:                    # in the file before it takes its name
        group = file.create_group("hil")
        for name in TIMING:
            timing[name] = group.create_dataset(name, shape=(0,), maxshape=(None,),
                                                chunks=(8192,), dtype="int64")
            timing[name].attrs["unit"] = "" if name == "skipped" else "ns"
        for name in FLAGS:
            timing[name] = group.create_dataset(name, shape=(0,), maxshape=(None,),
                                                chunks=(8192,), dtype="bool")
        for name, labels in (card or {}).items():
            if labels:
                ds = group.create_dataset(f"card/{name}", shape=(0, len(labels)),
                                          maxshape=(None, len(labels)),
                                          chunks=(1024, len(labels)), dtype=CARD[name])
                ds.attrs["channels"] = labels
                ds.attrs["unit"] = "V" if name.endswith("volts") else ""
                timing[name] = ds
    try:
        rec = Recorder(path, {n: ((1,), "f8", unit) for n, (unit, _) in signals.items()}, attrs,
                       extend=timing_group)
    except Exception as exc:                            # report any failure to the loop
        _tell(conn, ("error", f"{type(exc).__name__}: {exc}"))
        return
    loop_alive = _tell(conn, ("ready", None))          # killed while the file was made
    status, final = "killed", {}
    try:
        while loop_alive:
            try:
                msg = conn.recv()
            except (EOFError, OSError):                 # the loop's process is gone
                break
            if msg[0] == "finish":
                status, final = msg[1], msg[2]
                break
            if msg[0] == "live":
                _live(rec.file, msg[1:])
                continue
            _, which, tick0, n = msg
            _append(rec, timing, buffers[which], signals, tick0, n, rate)
            loop_alive = _tell(conn, ("done", which))   # the loop died while we appended
        rec.close(status, **final)
        reply = ("closed", None)
    except Exception as exc:                            # disk full, ...: close what we have
        rec.close("error")
        reply = ("error", f"{type(exc).__name__}: {exc}")
    _tell(conn, reply)
    if status == "killed":                 # nobody else is left to release the shared memory
        for buf in buffers:
            buf.release(unlink=True)


def _tell(conn, msg: tuple) -> bool:
    """Send ``msg`` to the loop; False if its process is gone (the pipe is closed)."""
    try:
        conn.send(msg)
    except OSError:
        return False
    return True


def _append(rec, timing: dict, buf: Buffer, signals: dict, tick0: int, n: int,
            rate: float) -> None:
    n0 = rec.time.shape[0]
    columns = {}
    for name, (_, (source, col)) in signals.items():
        data = buf.log[:n, col] if source == "log" else buf.commands[:n, col]
        columns[name] = data[:, None]
    rec.append((tick0 + np.arange(n)) / rate, columns)
    for k, name in enumerate(TIMING):
        _extend(timing[name], n0, buf.timing[:n, k])
    _extend(timing["overrun"], n0, buf.overrun[:n])
    _extend(timing["missed"], n0, buf.missed[:n])
    for name in CARD:
        if name in timing:
            _extend(timing[name], n0, getattr(buf, name)[:n])
    rec.file.flush()


LIVE = ("tick", "block", "parameter", "old", "new")
"""Datasets of ``/hil/live``, one row per applied change."""


def _live(file, row: tuple) -> None:
    """Append one live parameter change to ``/hil/live`` (created on the first)."""
    import h5py
    if "live" not in file["hil"]:
        group = file["hil"].create_group("live")
        for name in LIVE:
            group.create_dataset(name, shape=(0,), maxshape=(None,), chunks=(64,),
                                 dtype="int64" if name == "tick" else h5py.string_dtype())
    group = file["hil/live"]
    for name, value in zip(LIVE, row):
        _extend(group[name], group[name].shape[0], np.array([value], dtype=group[name].dtype))
    file.flush()


def _extend(ds, n0: int, data: np.ndarray) -> None:
    ds.resize(n0 + data.shape[0], axis=0)
    ds[n0:] = data
