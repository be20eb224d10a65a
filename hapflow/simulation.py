"""Offline scheduler: run the compiled kernel in chunks, stream records, report.

A chunk is about one simulated second of ticks.  Between chunks Python
drains the log buffer into the recorder (HDF5) or memory, calls the
Python-side sinks' :meth:`~hapflow.block.Block.drain` hooks (and their
``close`` when the run ends, also on an error or Ctrl-C), applies live
parameter changes, checks the state is finite, and advances the progress
bar.  Memory stays bounded when recording to a file, however long the run.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import math
import signal
import sys
import threading
import time as _time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numba
import numpy as np

from .version import __version__
from .block import Block
from .compiler import Program, collections_paused, compile_error, compile_graph
from .errors import GraphError, SimulationError
from .events import EVENTS, OVERFLOW
from .graph import Graph
from .layout import allocate, float_bases
from .rng import stream_seeds

if TYPE_CHECKING:
    from .recorder import Recorder


def _factor(x: float) -> str:
    """A real-time factor with the digits that matter: 0.33, 4.2, 1,234."""
    return f"{x:,.0f}" if x >= 10 else f"{x:.2g}"


class RunResult:
    """What a run produced.

    Attributes
    ----------
    ticks : int
        Ticks run.
    wall : float
        Wall-clock time of the run in s.
    rate : float
        The graph's rate in Hz.
    time : ndarray
        Sample times (s), made when first asked for (a caller that reads only signals
        does not pay for them): of a run kept in memory, from its first tick; of a run
        recorded to a file, read from the file (the run itself keeps nothing in memory).
    signals : dict of ndarray
        Recorded signals by ``"block.port"``; of a run recorded to a file, read from the
        file (all of them, into memory) when first asked for.
    path : Path or None
        The HDF5 file written, if any.
    events, event_overflows : int
        Located events and events dropped because a tick had too many.
    first : int or None
        Tick of the first sample of a run kept in memory (its times are made from it).
    """

    def __init__(self, ticks: int, wall: float, rate: float, time: np.ndarray | None = None,
                 signals: dict[str, np.ndarray] | None = None, path: Path | None = None,
                 events: int = 0, event_overflows: int = 0, first: int | None = None):
        self.ticks, self.wall, self.rate, self.path = ticks, wall, rate, path
        self.events, self.event_overflows, self.first = events, event_overflows, first
        self._time, self._signals = time, signals

    @property
    def time(self) -> np.ndarray:
        """Sample times (s)."""
        if self._time is None and self.first is not None:
            self._time = np.arange(self.first, self.first + self.ticks, dtype=np.float64)
            self._time /= self.rate
        if self._time is None:
            self._read()
        return self._time

    @property
    def signals(self) -> dict[str, np.ndarray]:
        """Recorded signals by ``"block.port"``."""
        if self._signals is None:
            self._read()
        return self._signals

    def _read(self) -> None:
        if self.path is None:                   # a result made without its records
            self._time = np.zeros(0) if self._time is None else self._time
            self._signals = {} if self._signals is None else self._signals
            return
        from .recorder import load
        rec = load(self.path)
        self._time = rec.time if self._time is None else self._time
        self._signals = rec.signals if self._signals is None else self._signals

    @property
    def realtime_factor(self) -> float:
        """Simulated seconds per wall second."""
        return (self.ticks / self.rate) / self.wall if self.wall > 0 else float("inf")

    def summary(self) -> str:
        """One line: ticks, simulated and wall time, real-time factor, events, file."""
        line = (f"{self.ticks} ticks ({self.ticks / self.rate:g} s simulated) in "
                f"{self.wall:.3g} s wall, real-time factor {_factor(self.realtime_factor)}x")
        if self.events or self.event_overflows:
            line += f", {self.events} events ({self.event_overflows} overflow)"
        if self.path:
            line += f" -> {self.path}"
        return line

    def __getitem__(self, name: str) -> np.ndarray:
        return self.signals[name]


class Simulation:
    """A graph compiled and ready to run in chunks.

    Parameters
    ----------
    graph : Graph
        The graph.  The simulation keeps its own copy (``self.graph``, :func:`own_copy`):
        :meth:`set` and :meth:`reset` change that copy, not ``graph`` (but for a sink's
        parameters: a sink is shared, so that it collects for its caller).
    interpret : bool
        Run the generated source as plain Python (reference, debugging).
    chunk : float
        Simulated seconds per chunk.
    inline : bool
        Inline kernel bodies into the generated code (default; see
        :mod:`hapflow.inline`); False calls kernels on array views.
    mode : {'auto', 'fused', 'units'}
        One fused kernel or compile units (see :mod:`hapflow.codegen`).
    """

    def __init__(self, graph: Graph, interpret: bool = False, chunk: float = 1.0,
                 inline: bool = True, mode: str = "auto"):
        self.graph = own_copy(graph)      # set() and reset(seed) leave the caller's graph as it is
        graph = self.graph
        self.program: Program = compile_graph(graph, interpret, inline, mode)
        self.layout = self.program.layout
        self.arrays = allocate(self.layout)
        bases = float_bases(self.layout)
        self._states = self.arrays["f"][bases["x"]:bases["p"]]      # x, then d
        self.chunk_ticks = max(1, int(round(chunk * graph.rate)))
        # blocks with a Python side (Block.drain / Block.close), called between chunks
        self.sinks = [name for name, node in graph.nodes.items() if node.block.has_drain()]
        self.chunk_ticks = min([self.chunk_ticks, *self._drain_ticks()])
        self._drained = 0
        self.log = np.zeros((self.chunk_ticks, self.layout.sizes["log"]))
        self.tick = 0
        # a warm start's first calls load machine code (see compiler.collections_paused)
        with collections_paused() if self.program.from_cache else nullcontext():
            for name in graph.nodes:
                self._pack(name)
            self._warm_up()           # before init_all, whose code run holds
            self._initial_state()

    def _warm_up(self) -> None:
        """Compile now (or load machine code from the cache), naming the block on failure."""
        try:
            self.advance(0)
        except numba.core.errors.NumbaError as exc:
            loc = exc.loc
            name = self.program.block_at(str(loc.filename), loc.line) if loc is not None else None
            raise compile_error(self.graph, name, exc) from None

    def _pack(self, name: str) -> None:
        slot = self.layout.blocks[name]["p"]
        values = checked_pack(self.graph.nodes[name].block, name, slot.size)
        self.arrays["p"][slot.start:slot.stop] = values

    def _initial_state(self) -> None:
        a = self.arrays
        for name, node in self.graph.nodes.items():
            block = node.block
            for key, value in zip("xdm", block.initial_state()):
                slot = self.layout.blocks[name][key]
                a[key][slot.start:slot.start + len(value)] = value
            if block.random_streams:
                m = self.layout.blocks[name]["m"]
                a["m"][m.start + block.istate:m.stop] = stream_seeds(self.graph.seed, name,
                                                                     block.random_streams)
        self.program.init_all(a["f"], a["m"], a["si"], a["sb"])

    def set(self, key: str, value: Any) -> None:
        """Change live parameter ``"block.param"``; it applies from the next tick run.

        Raises
        ------
        GraphError
            If the block or parameter is unknown, structural, or the value invalid.
        """
        span, values, _ = self.prepare(key, value)
        self.arrays["p"][span] = values

    def prepare(self, key: str, value: Any) -> tuple[slice, np.ndarray, Any]:
        """Validate live parameter ``"block.param" = value`` and pack its block, without
        touching the running arrays (a caller on another thread applies them later).

        Returns
        -------
        span : slice
            The block's parameter slot in ``arrays["p"]``.
        values : ndarray
            The block's packed parameters with the new value.
        old : Any
            The parameter's value before (the block keeps the new one).

        Raises
        ------
        GraphError
            If the block or parameter is unknown, structural, or the value invalid (the
            block keeps the old value).
        """
        block, _, param = key.partition(".")
        if block not in self.graph.nodes or not param:
            from .errors import suggest
            raise GraphError(f"cannot set {key!r}: write block.param with an existing block"
                             f"{suggest(block, self.graph.nodes)}", block=block)
        target = self.graph.nodes[block].block
        old = target.values.get(param)
        slot = self.layout.blocks[block]["p"]
        target.set(param, value)
        try:
            values = checked_pack(target, block, slot.size)
        except GraphError:
            target.values[param] = old
            raise
        return slice(slot.start, slot.stop), values, old

    def reset(self, seed: int | None = None) -> None:
        """Go back to tick 0 with the current parameters, without recompiling.

        Signals, states and event counters are zeroed and the initial state is
        set up again (``initial_state`` and ``init`` kernels, random streams),
        so the next run is bit-identical to one on a fresh ``Simulation`` of
        the graph with the same parameter values.

        Parameters
        ----------
        seed : int, optional
            New graph seed for the random streams (default: keep the graph's).
        """
        if seed is not None:
            self.graph.seed = int(seed)
        a = self.arrays
        p = a["p"].copy()
        for key in ("f", "m", "si", "sb", "stats"):
            a[key][:] = 0
        a["p"][:] = p
        self.tick = 0
        self._initial_state()

    def _drain_ticks(self) -> list[int]:
        """Tick limits between drains that the sinks' buffers impose."""
        limits = []
        for name in self.sinks:
            node = self.graph.nodes[name]
            hits = node.block.drain_limit()
            if hits is not None:
                limits.append(max(1, int(hits)) * node.divider)
        return limits

    def drain(self, tick: int | None = None) -> None:
        """Call :meth:`Block.drain` of every sink for the ticks run since the last drain.

        :meth:`run` calls it after every chunk.  A caller stepping the kernel
        itself (the HIL runner) must call it at least every
        :attr:`chunk_ticks` ticks, or the sinks drop records (and say so).

        Parameters
        ----------
        tick : int, optional
            Ticks run so far, when the caller runs the kernel without
            :meth:`advance` (default: :attr:`tick`).  A count below the last
            drain's means a new run from tick 0.
        """
        if not self.sinks:
            return
        end = self.tick if tick is None else int(tick)
        if end < self._drained:
            self._drained = 0
        if self._drained == end:
            return
        t0, t1 = self._drained / self.graph.rate, end / self.graph.rate
        with deferred_interrupt():               # every sink gets the chunk, or none does
            for name in self.sinks:
                slots = self.layout.blocks[name]
                d, m = slots["d"], slots["m"]
                self.graph.nodes[name].block.drain(self.arrays["d"][d.start:d.stop],
                                                   self.arrays["m"][m.start:m.stop], t0, t1)
            self._drained = end

    def close(self, status: str = "complete", tick: int | None = None) -> None:
        """Drain what is left, then call every sink's :meth:`Block.close` (all, even if one fails).

        Parameters
        ----------
        status : {'complete', 'interrupted', 'error'}
            How the run ended.
        tick : int, optional
            As for :meth:`drain`.

        Raises
        ------
        Exception
            The first problem a sink had, only when ``status`` is 'complete'
            (otherwise the run's own error is the one that matters).
        """
        problems = []
        try:
            self.drain(tick)
        except Exception as exc:                  # keep closing: files must be readable
            problems.append(exc)
        for name in self.sinks:
            try:
                self.graph.nodes[name].block.close(status)
            except Exception as exc:
                problems.append(exc)
        if problems and status == "complete":
            raise problems[0]

    def advance(self, n_ticks: int, log: np.ndarray | None = None) -> np.ndarray:
        """Run ``n_ticks`` (at most one chunk) and return their log rows (a view).

        Parameters
        ----------
        n_ticks : int
            Ticks to run (at most :attr:`chunk_ticks`).
        log : ndarray, optional
            C-contiguous ``(n_ticks, columns)`` array to write the log rows into
            (default: the simulation's own chunk buffer).
        """
        a = self.arrays
        n = min(int(n_ticks), self.chunk_ticks)
        log = self.log if log is None else log
        if self.tick == 0:
            self._drained = 0                     # a run from tick 0 (new or after a reset)
        self.program.run(n, self.tick, a["f"], a["m"], a["si"], a["sb"], log, a["stats"])
        self.tick += n
        # one sum is finite when every state is (a sum that overflows gets the full check)
        if not math.isfinite(self._states.sum()) and not np.isfinite(self._states).all():
            raise SimulationError(self._nonfinite())
        return log[:n]

    def _nonfinite(self) -> str:
        for name, slots in self.layout.blocks.items():
            for key in "xd":
                s = slots[key]
                if not np.all(np.isfinite(self.arrays[key][s.start:s.stop])):
                    return (f"block {name!r}: state became non-finite by t = "
                            f"{self.tick / self.graph.rate:g} s; check its parameters and inputs "
                            "(an unstable loop, a too-large step for a stiff system)")
        return "state became non-finite"

    def columns(self, rows: np.ndarray, copy: bool = True) -> dict[str, np.ndarray]:
        """Split log rows into ``"block.port"`` arrays of the ports' shapes and dtypes.

        With ``copy`` false (rows the caller owns: the simulation's own log buffer is
        overwritten by the next chunk), a signal that is already a contiguous float
        column of ``rows`` is returned as a view of it.
        """
        out = {}
        for (block, port), col in self.layout.log.items():
            spec = self.graph.nodes[block].block.outputs[port]
            values = rows[:, col.start:col.stop].reshape((rows.shape[0], *spec.shape))
            dtype = {"f8": np.float64, "i8": np.int64, "b1": np.bool_}[spec.dtype]
            out[f"{block}.{port}"] = (np.ascontiguousarray(values, dtype) if not copy
                                      else values.astype(dtype))
        return out

    def _chunk(self, tick0: int, rows: np.ndarray, copy: bool = False
               ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The times and signals of log ``rows`` that start at tick ``tick0`` (signals as
        :meth:`columns` gives them: ``copy`` false for rows the run owns)."""
        return np.arange(tick0, tick0 + rows.shape[0]) / self.graph.rate, \
            self.columns(rows, copy=copy)

    def recorder(self, path: str | Path) -> Recorder:
        """A :class:`Recorder` for this graph's recorded signals."""
        from .recorder import Recorder      # h5py: imported by runs that record to a file
        from .yamlio import to_yaml
        signals = {}
        for (block, port), col in self.layout.log.items():
            spec = self.graph.nodes[block].block.outputs[port]
            signals[f"{block}.{port}"] = (spec.shape, spec.dtype, col.unit)
        g = self.graph
        return Recorder(path, signals, dict(
            graph_yaml=to_yaml(g), graph_source=getattr(g, "source_text", None), name=g.name,
            rate=g.rate, seed=g.seed, duration=g.duration, solver=g.solver,
            hapflow_version=__version__, numba_version=numba.__version__,
            interpreted=self.program.interpreted), rows=self.chunk_ticks)

    def run(self, duration: float | None = None, out: str | Path | None = None,
            progress: bool | None = None,
            on_chunk: Callable[[np.ndarray, dict[str, np.ndarray]], None] | None = None) -> RunResult:
        """Run for ``duration`` s (default: the graph's) from the current tick.

        Parameters
        ----------
        duration : float, optional
            Simulated seconds.
        out : str or Path, optional
            HDF5 file to stream records to; if None they are kept in memory.
        progress : bool, optional
            Show a progress bar (default: when stderr is a terminal).
        on_chunk : callable, optional
            Called after each chunk is stored with its times (s) and signals
            (a file is then written chunk by chunk, not while the next chunk
            runs),
            e.g. to drain Python-side sinks or update a live plot.

        Returns
        -------
        RunResult
        """
        duration = self.graph.duration if duration is None else float(duration)
        total = int(round(duration * self.graph.rate))
        rec = self.recorder(out) if out is not None else None
        kept = None if rec is not None else _Kept(total, self.layout.sizes["log"])
        bar = _progress(total, self.graph.rate, progress)
        stats0 = self.arrays["stats"].copy()
        first = self.tick
        start = _time.perf_counter()
        status = "error"
        done = 0
        try:
            with interrupt_flag() as interrupted:
                while done < total:
                    tick0 = self.tick
                    n = min(self.chunk_ticks, total - done)
                    # a file's chunk gets rows of its own, split and stored while the next runs
                    own = kept.target(done, n) if kept is not None else np.empty_like(self.log[:n])
                    rows = self.advance(n, own)
                    done += n
                    if rec is not None and on_chunk is None:
                        rec.submit_later(functools.partial(self._chunk, tick0, rows), rows.nbytes)
                    elif rec is not None:           # it is told of stored chunks only
                        t, cols = self._chunk(tick0, rows)
                        rec.submit(t, cols)
                        rec.wait()
                        on_chunk(t, cols)
                    else:
                        kept.keep(rows)
                        if on_chunk is not None:
                            on_chunk(*self._chunk(tick0, rows, copy=True))
                    self.drain()
                    bar.update(n)
                    if interrupted:
                        raise KeyboardInterrupt
                if rec is not None:
                    rec.wait()
            status = "complete"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            bar.close()
            stats = self.arrays["stats"] - stats0
            try:
                if self.sinks:
                    self.close(status)
            finally:
                if rec is not None:
                    rec.close(status, events=int(stats[EVENTS]),
                              event_overflows=int(stats[OVERFLOW]))
        wall = _time.perf_counter() - start
        signals = None                      # of a file: read from it when asked for
        if kept is not None:      # the run's own rows: its signals need no copy of them
            signals = self.columns(kept.rows(done), copy=False)
        return RunResult(done, wall, self.graph.rate, None, signals,
                         path=Path(out) if out else None, events=int(stats[EVENTS]),
                         event_overflows=int(stats[OVERFLOW]),
                         first=first if kept is not None else None)


def own_copy(graph: Graph) -> Graph:
    """A copy of ``graph`` whose seed and blocks' parameter values can change without changing
    ``graph`` (shallow: blocks share their ports, arrays and resources).  A block with a Python
    side (a sink, :meth:`Block.has_drain`) is not copied: the caller reads what it collected
    from the block it made."""
    own = copy.copy(graph)
    own.nodes = {}
    for name, node in graph.nodes.items():
        block = node.block
        if not block.has_drain():
            block = copy.copy(block)
            block.values = dict(node.block.values)
        own.nodes[name] = dataclasses.replace(node, block=block)
    return own


class _Kept:
    """The log rows of an in-memory run: the kernel writes them straight into one array
    (chunks of their own only when that array would exceed :data:`KEPT_BYTES`)."""

    def __init__(self, total: int, columns: int):
        fits = total * columns * 8 <= KEPT_BYTES
        self.all = np.empty((total, columns)) if fits else None
        self.columns = columns
        self.chunks: list[np.ndarray] = []

    def target(self, done: int, n: int) -> np.ndarray | None:
        return None if self.all is None else self.all[done:done + n]

    def keep(self, rows: np.ndarray) -> None:
        if self.all is None:
            self.chunks.append(rows.copy())

    def rows(self, done: int) -> np.ndarray:
        if self.all is not None:
            return self.all[:done]
        return np.concatenate(self.chunks) if self.chunks else np.zeros((0, self.columns))


KEPT_BYTES = 2**30
"""Largest in-memory recording allocated whole at the start of a run."""


def checked_pack(block: Block, name: str, size: int) -> np.ndarray:
    """``block.pack()``, checked to fill the ``size`` values of block ``name``'s parameter slot.

    Raises
    ------
    ParamError
        From ``pack`` (an invalid value).
    GraphError
        If ``pack`` returned another number of values (live parameters cannot change sizes).
    """
    values = block.packed()
    if values.size != size:
        raise GraphError(f"block {name!r}: pack() returned {values.size} values, "
                         f"expected {size} (live parameters cannot change sizes)", block=name)
    return values


@contextmanager
def interrupt_flag() -> Iterator[list[int]]:
    """Turn the first Ctrl-C (SIGINT) into an entry of the yielded list; a second one is
    delivered to the previous handler at once.

    Python's default handler raises KeyboardInterrupt in whatever Python code
    runs next; in a weakref callback or a ``__del__`` the exception is printed
    ("Exception ignored in ...") and dropped, and the run went on (seen in
    CI: an endless run ignored its Ctrl-C).  :meth:`Simulation.run` checks the
    list after every chunk and raises KeyboardInterrupt itself.  Only the
    main thread can install signal handlers; elsewhere, or when SIGINT is
    ignored, the list stays empty and nothing changes.
    """
    caught: list[int] = []
    previous = (signal.getsignal(signal.SIGINT)
                if threading.current_thread() is threading.main_thread() else None)
    if previous in (None, signal.SIG_IGN):          # not ours to change, or ignored
        yield caught
        return

    def handler(number, frame):
        if caught and callable(previous):
            previous(number, frame)
        caught.append(number)

    signal.signal(signal.SIGINT, handler)
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) until the block is done, then deliver it to the previous handler.

    A Ctrl-C in the middle of draining the sinks would leave one sink's
    buffer emptied and the next one's not; held, it arrives between chunks
    (Python's default handler raises KeyboardInterrupt then; the HIL
    runner's handler sets its stop flag).  Only the main thread can install
    signal handlers; elsewhere this is a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: caught.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(signal.SIGINT, None)
    elif caught and previous != signal.SIG_IGN:
        raise KeyboardInterrupt


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, rate: float, show: bool | None):
    if show is None:
        show = sys.stderr.isatty()
    if not show:
        return _NoBar()
    from tqdm import tqdm
    return tqdm(total=total, unit=" ticks", unit_scale=True, file=sys.stderr, leave=False,
                desc="simulating")


def simulate(graph: Graph, duration: float | None = None, out: str | Path | None = None,
             interpret: bool = False, **settings: Any) -> RunResult:
    """Compile and run ``graph`` once; ``settings`` are ``{"block.param": value}``."""
    sim = Simulation(graph, interpret=interpret)
    for key, value in settings.items():
        sim.set(key, value)
    return sim.run(duration, out=out, progress=False)
