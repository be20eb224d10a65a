"""The real-time runner: one Python loop, one kernel tick per sample clock edge.

:class:`HilRunner` splits the graph (:mod:`hapflow.hil.split`), compiles the
controller half with the engine (:class:`hapflow.simulation.Simulation`: same
generated, cached kernel) and runs it against a :class:`Backend`.  Each tick::

    late = backend.wait()                   # sample clock edge (or monotonic pacing)
    backend.read(ai_volts, counts)          # raw card values
    inputs -> SI -> the card stand-ins' state in the flat array
    a staged live parameter change -> the kernel's parameters   # hapflow.hil.live
    program.run(1, tick, ...)               # the generated kernel, one tick
    commands <- the card sinks' driver slots (SI)
    commands clipped to the card range; safety.check(...)   # limits, non-finite, saturation
    commands -> volts; backend.write(ao_volts, enable_lines)
    each quarter of its timeout: backend.pet()   # the card's hardware watchdog
    watchdog; timing and log row -> shared buffer (a writer process does the HDF5)
    each chunk: MIDI/sound sink records -> shared memory (a helper process drains them,
                :mod:`hapflow.hil.sinkdrain`)

Everything the loop touches is preallocated; ``gc`` is off while it runs.
Calling the generated ``run(1, ...)`` costs about 1-2 us (measured: a 4 kHz
tick of the Colton rig's controller, card I/O and checks included, takes
10-20 us at the median), so no special entry point into the kernel is needed.

Missed sample clock edges
    When the host wakes a period or more late (a host stall), the card has
    already clocked the edges in between, holding the last command.  The
    loop counts the stall as one overrun and does not write those edges'
    commands in a burst; but before the current edge it runs the kernel
    once for each missed edge, on inputs interpolated linearly between the
    last sample and the current one, and drops their commands
    (:meth:`_Loop._catch_up`).  This departs from DESIGN.md's "one kernel
    tick per loop, never caught up", for a measured reason: with one tick
    per loop the kernel's clock fell behind the card's by every missed
    edge, and a sampled controller's differences spanned one period where
    the measurement had moved over several.  On the HIL test bed a 10 ms
    stall kicked the PD command by 7.6 N (15 ms: 12.4 N; up to 14 N in
    paced runs on this VM), past the bed's 15 N force limit in some runs,
    and the reference lagged by the stall from then on.  Caught up, the
    command after a 10 ms stall is within 0.18 N of a stall-free run
    (``tests/test_hil_runner.py``), sources, integrators, estimators and
    virtual devices stay on the card's clock, and the recording has one
    row per edge (a time axis identification can trust).  The cost is one
    kernel call per missed edge in the tick that finds them; the
    watchdog's 20 ms lateness bound caps them at 20 (1 kHz) to 80 (4 kHz).
    Missed edges are counted from the card's edge times when it gives them
    (the simulated card), else from the wake-up times, and then only when
    the card reports the sample late, so a free-running card never makes
    the loop run edges it did not clock.
"""
from __future__ import annotations

import gc
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numba
import numpy as np
from numba import njit

from hapflow import __version__
from hapflow.graph import Graph

from . import homing, realtime, safety, scales
from .arm import arm
from .backend import Backend, DaqError, WatchdogExpired, by_kind
from .bindings import Bindings, bind
from .cardports import sink_index, value_index
from .clock import now_ns
from .live import LiveParameters
from .recording import Buffer, HilRecorder, Status
from .scales import volts_of
from .sinkdrain import SinkDrainer
from .split import controller_graph


@dataclass(frozen=True)
class RealTime:
    """Real-time settings requested for the loop (see :mod:`hapflow.hil.realtime`)."""

    fifo: int | None = None
    cpu: int | None = None
    lock: bool = False


@dataclass
class HilResult:
    """What a real-time run produced.

    Attributes
    ----------
    ticks : int
        Sample clock edges run by the kernel, missed ones included (the last one is the
        tick of the safety event, if any).
    rate : float
        Tick rate in Hz.
    wall : float
        Wall time of the loop in s.
    cpu_percent : float
        Process CPU time over wall time, in % of one CPU.
    event : SafetyEvent or None
        Why the loop stopped early.
    path : Path or None
        The recording.
    settings : str
        Real-time settings applied and refused.
    timing : dict
        Per-edge ``wake``, ``lateness``, ``compute`` (ns), ``skipped``, ``overrun``,
        ``missed`` of the whole run (kept in memory only without a file; see
        :mod:`hapflow.hil.recording`).
    overruns : int
        Ticks that overran (see :class:`~hapflow.hil.safety.Watchdog`).
    dropped : list of str
        Recorded signals of the graph that a real rig cannot provide.
    paced : bool
        The card's sample clock ran in real time (False: a simulated card's virtual clock).
    """

    ticks: int
    rate: float
    wall: float
    cpu_percent: float
    event: safety.SafetyEvent | None
    path: Path | None
    settings: str
    overruns: int
    timing: dict[str, np.ndarray] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    paced: bool = True

    def summary(self) -> str:
        """One line: ticks, wall time, overruns, CPU, file."""
        clock = "in real time" if self.paced else "unpaced, on the virtual sample clock"
        line = (f"{self.ticks} ticks ({self.ticks / self.rate:g} s) {clock} at "
                f"{self.rate:g} Hz in {self.wall:.3g} s: {self.overruns} overruns, CPU "
                f"{self.cpu_percent:.0f} %; {self.settings}")
        return line + (f" -> {self.path}" if self.path else "")


@njit(cache=True)
def _inputs(ai, counts, ai_scale, ai_off, ci_scale, ci_off, f, index, values, prev):
    """Card values to SI, into ``values`` and the stand-ins' state slots of ``f``; the
    previous ``values`` into ``prev``."""
    n = ai.size
    for k in range(n):
        prev[k] = values[k]
        values[k] = ai_off[k] + ai_scale[k] * ai[k]
        f[index[k]] = values[k]
    for k in range(counts.size):
        prev[n + k] = values[n + k]
        values[n + k] = ci_off[k] + ci_scale[k] * counts[k]
        f[index[n + k]] = values[n + k]


@njit(cache=True)
def _blend(prev, values, w, index, f):
    """``prev + w (values - prev)`` into the stand-ins' slots of ``f`` (a missed edge's inputs)."""
    for k in range(values.size):
        f[index[k]] = prev[k] + w * (values[k] - prev[k])


@njit(cache=True)
def _place(values, index, f):
    """``values`` into the stand-ins' slots of ``f``."""
    for k in range(values.size):
        f[index[k]] = values[k]


@njit(cache=True)
def _gather(f, index, out):
    for k in range(index.size):
        out[k] = f[index[k]]


@njit(cache=True)
def _clip(values, lo, hi):
    """Clip finite values to [lo, hi] in place (the card's range in SI units)."""
    for k in range(values.size):
        if np.isfinite(values[k]):
            values[k] = min(max(values[k], lo[k]), hi[k])


@njit(cache=True)
def _volts(commands, scale, offset, low, high, kind, tvolts, tvalues, npoints, out):
    """Commands in SI to card volts (a custom scale's inverse where ``kind``), clipped to the
    range (non-finite -> 0 V)."""
    for k in range(commands.size):
        x = commands[k] - offset[k]
        if not np.isfinite(x):
            out[k] = 0.0
            continue
        v = volts_of(x, k, kind, tvolts, tvalues, npoints) if kind[k] else x / scale[k]
        out[k] = min(max(v, low[k]), high[k])


@njit(cache=True)
def _ramp_start(commands, held, lo, hi, out):
    """Where a ramp to zero starts: the command clamped to its limit (the last good one if not finite)."""
    for k in range(commands.size):
        c = commands[k] if np.isfinite(commands[k]) else held[k]
        out[k] = min(max(c, lo[k]), hi[k])


def _edges_between(edge: int, prev_edge: int, period: int) -> int:
    """Sample clock edges between two edge times (ns), to the nearest whole period."""
    return max(0, (edge - prev_edge + period // 2) // period - 1)


def _par(chs, attr: str) -> np.ndarray:
    return np.array([getattr(c, attr) for c in chs], dtype=np.float64)


class HilRunner:
    """Run a graph's controller in real time against a DAQ backend.

    Parameters
    ----------
    graph : Graph
        The whole graph, with its ``hardware:`` section.
    backend : Backend
        The card (:class:`~hapflow.hil.simdaq.SimDaq`, ``NidaqBackend``).
    policy : Policy
        Watchdog and saturation policy.
    realtime : RealTime
        Scheduling settings to request.
    chunk : float
        Seconds per recording chunk.
    bindings : Bindings, optional
        Parsed bindings (default: parsed from the graph).
    """

    def __init__(self, graph: Graph, backend: Backend, policy: safety.Policy = safety.Policy(),
                 realtime: RealTime = RealTime(), chunk: float = 1.0,
                 bindings: Bindings | None = None):
        from hapflow.simulation import Simulation
        self.graph = graph
        self.backend = backend
        self.policy = policy
        self.rt = realtime
        self.bindings = bindings or bind(graph)
        chs = self.bindings.channels
        self.half = controller_graph(graph, chs)
        self.sim = Simulation(self.half.graph, chunk=chunk)
        self.rate = graph.rate
        self.period = int(round(1e9 / self.rate))
        self.chunk_ticks = self.sim.chunk_ticks
        self.ai, self.ci = by_kind(chs, "ai"), by_kind(chs, "ci_encoder")
        self.ao, self.do = by_kind(chs, "ao"), by_kind(chs, "do")
        self.inputs = self.ai + self.ci
        self.live = LiveParameters(self.sim)
        # sinks whose records another process can drain, off the loop (hapflow.hil.sinkdrain);
        # the others (a playback refilling the kernel's window) the loop drains itself
        self.record_sinks = [n for n in self.sim.sinks
                             if hasattr(self.sim.graph.nodes[n].block, "hand_over")]
        self.sim.sinks = [n for n in self.sim.sinks if n not in self.record_sinks]
        self._layout()

    # ------------------------------------------------------------------ set-up
    def _layout(self) -> None:
        layout = self.sim.layout
        self.in_index = np.array([value_index(layout, self.half.values[c.port])
                                  for c in self.inputs], dtype=np.int64)
        self.out_index = np.array([sink_index(layout, self.half.sinks[c.port]) for c in self.ao],
                                  dtype=np.int64)
        b = self.bindings
        inf = np.inf
        self.in_lo = np.array([b.limits.get(c.port, (-inf, inf))[0] for c in self.inputs])
        self.in_hi = np.array([b.limits.get(c.port, (-inf, inf))[1] for c in self.inputs])
        self.out_lo = np.array([b.limits.get(c.port, (-inf, inf))[0] for c in self.ao])
        self.out_hi = np.array([b.limits.get(c.port, (-inf, inf))[1] for c in self.ao])
        self.pos_index = np.array([k for k, c in enumerate(self.inputs)
                                   if c.port in b.velocity_limits], dtype=np.int64)
        self.vel_limit = np.array([b.velocity_limits[self.inputs[k].port] for k in self.pos_index])
        ends = [sorted((c.offset + c.scaled(c.low), c.offset + c.scaled(c.high))) for c in self.ao]
        self.card_lo = np.array([e[0] for e in ends])
        self.card_hi = np.array([e[1] for e in ends])
        self.ramp_ticks = max([safety.ramp_steps(b.ramps.get(c.port, 0.0), self.rate)
                               for c in self.ao] or [0])
        self.custom = scales.ScaleArrays([c.custom for c in self.ai], [c.low for c in self.ai],
                                         [c.high for c in self.ai])
        self.custom_out = scales.ScaleArrays([c.custom for c in self.ao],
                                             [c.low for c in self.ao], [c.high for c in self.ao])

    def _signals(self) -> dict[str, tuple[str | None, tuple[str, int]]]:
        signals = {}
        for (block, port), col in self.sim.layout.log.items():
            ref = f"{block}.{port}"
            signals[self.half.names.get(ref, ref)] = (col.unit, ("log", col.start))
        for k, c in enumerate(self.ao):
            signals[c.port] = (c.unit, ("command", k))
        return signals

    def card_columns(self) -> dict[str, list[str]]:
        """The channels of each ``/hil/card`` dataset, as ``Dev1/ai0 (head.force)``."""
        label = lambda chs: [f"{c.physical} ({c.port})" for c in chs]
        return {"ai_volts": label(self.ai), "counts": label(self.ci),
                "ao_volts": label(self.ao), "enable": label(self.do)}

    def _attrs(self, backend_name: str, duration: float) -> dict[str, Any]:
        from hapflow.yamlio import to_yaml
        g = self.graph
        return dict(graph_yaml=to_yaml(g), graph_source=getattr(g, "source_text", None),
                    name=g.name, rate=g.rate, seed=g.seed, duration=duration, solver=g.solver,
                    hapflow_version=__version__, numba_version=numba.__version__,
                    interpreted=False, mode="hil", backend=backend_name, period_ns=self.period,
                    policy=f"max_overruns={self.policy.overruns_at(self.rate)}, "
                           f"max_lateness={self.policy.max_lateness:g} s, "
                           f"saturation={self.policy.saturation}, "
                           f"hardware_watchdog={self.policy.watchdog_timeout():g} s",
                    hardware_watchdog_note=self.backend.watchdog_note,
                    arm_log="\n".join(self.arm_log),
                    channels="\n".join(f"{c.port}: {c.kind} {c.physical} "
                                       + (c.custom.describe() if c.custom else
                                          f"scale {c.scale:g}")
                                       + f" offset {c.offset:g} range [{c.low:g}, {c.high:g}]"
                                       for c in self.bindings.channels))

    # ------------------------------------------------------------------ run
    def run(self, duration: float | None = None, out: str | Path | None = None,
            on_start: Callable[[str], None] | None = None,
            watch: Callable[["LoopView"], Callable[[], None]] | None = None) -> HilResult:
        """Run in real time for ``duration`` s (default: the graph's), recording to ``out``.

        ``on_start`` is called with the real-time settings just before the first tick.
        ``watch`` (the dashboard) is given a :class:`LoopView` before the loop starts and
        returns what to call once it has ended.

        Returns
        -------
        HilResult
            With ``event`` set when the safety layer stopped the loop.

        Raises
        ------
        GraphError
            When the arm sequence finds a bound channel the card does not have.
        DaqError
            When the card cannot be queried, self-tested, opened or started (nothing ran).
        """
        duration = self.graph.duration if duration is None else float(duration)
        total = int(round(duration * self.rate))
        self.arm_log = arm(self.backend, self.bindings)
        self.backend.open(self.bindings.channels, self.rate)
        drainer = rec = None
        try:        # until the loop exists: a failure (a file that cannot be made) closes the card
            self.backend.arm_watchdog(self.policy.watchdog_timeout())
            # forked before the recorder: its writer finishes the file when the loop dies,
            # seen as the end of a pipe no other process may hold
            drainer = SinkDrainer(self.sim, self.record_sinks) if self.record_sinks else None
            if out is not None:
                rec = HilRecorder(out, self._signals(), self.rate,
                                  self._attrs(type(self.backend).__name__, duration),
                                  self.chunk_ticks, self.sim.layout.sizes["log"], len(self.ao),
                                  self.card_columns())
            loop = _Loop(self, rec, total, drainer)
        except BaseException:
            _leave_safe(self.backend)
            if rec is not None:
                rec.abandon()
            if drainer is not None:
                drainer.close("interrupted", 0)
            raise
        unwatch = self._watch(watch, loop, rec) if watch is not None else None
        self.live.on_change = (lambda change: rec.note(change.row())) if rec is not None else None
        settings = realtime.apply(self.rt.fifo, self.rt.cpu, self.rt.lock)
        handlers = _trap_signals(loop.stop)
        # off, not collected first: a full collection walks every object the process holds
        # (every compiled kernel's, in a long session or a test process) and the loop
        # allocates nothing it could free
        gc.disable()
        cpu0, wall0 = time.process_time(), time.perf_counter()   # for a start that fails
        try:
            self.live.start()
            if on_start is not None:        # may fail (a print to a closed pipe): the card is
                on_start(settings.summary())  # still made safe and closed, the file finished
            cpu0, wall0 = time.process_time(), time.perf_counter()       # the loop's own
            loop.run()
        finally:
            try:        # Ctrl-C stays trapped until the file is finished and the memory freed
                self.live.stop()
                if unwatch is not None:
                    unwatch()
                wall = time.perf_counter() - wall0
                cpu = 100.0 * (time.process_time() - cpu0) / wall if wall > 0 else 0.0
                gc.enable()
                settings.restore()
                loop.shutdown()
                status = ("complete" if loop.event is None and loop.done == total else
                          "safety" if loop.event else "error")
                try:
                    loop.close_sinks("complete" if status == "complete" else "interrupted")
                finally:
                    if rec is not None:
                        rec.finish(status, realtime=settings.summary(), cpu_percent=cpu,
                                   arm_log="\n".join(self.arm_log),
                                   overruns=loop.overruns, **_event_attrs(loop.event))
            finally:
                _restore_signals(handlers)
                timing = loop.kept_timing()
                loop.release()
        return HilResult(loop.done, self.rate, wall, cpu, loop.event,
                         Path(out) if out is not None else None, settings.summary(),
                         loop.overruns, timing, self.half.dropped, self.backend.paced)

    def _watch(self, watch: Callable, loop: "_Loop", rec: HilRecorder | None) -> Callable:
        """Start the watcher (before the real-time settings: its process must not inherit
        them); if it cannot start, close the card and the recording, nothing ran."""
        try:
            return watch(LoopView(loop.buffers, loop.status, self.rate, loop.total,
                                  self._signals(), self.rt.cpu))
        except BaseException:
            loop.shutdown()
            loop.close_sinks("interrupted")
            if rec is not None:
                rec.finish("error")
            loop.release()
            raise


@dataclass
class LoopView:
    """What a watcher in another process reads of a running loop (all in shared memory).

    Attributes
    ----------
    buffers : list of Buffer
        The loop's row buffers (see :mod:`hapflow.hil.recording`).
    status : Status
        Buffer in use, rows in it, its first tick, ticks done, trip tick; the e-stop flag.
    rate : float
        Tick rate (Hz).
    total : int
        Ticks the run is to last.
    signals : dict
        ``name`` -> (unit, (source, column)), source ``"log"`` or ``"command"``.
    cpu : int, optional
        The CPU the loop is pinned to (a watcher keeps off it), None when not pinned.
    """

    buffers: list
    status: Status
    rate: float
    total: int
    signals: dict
    cpu: int | None = None


def _event_attrs(event: safety.SafetyEvent | None) -> dict[str, Any]:
    if event is None:
        return {}
    return dict(safety_kind=event.kind, safety_tick=event.tick, safety_time=event.time,
                safety_message=event.message)


def _leave_safe(backend: Backend) -> None:
    """Outputs to their safe values, then the card closed (errors ignored: it is the last
    thing done with it)."""
    try:
        backend.safe_state()
    except DaqError:
        pass
    try:
        backend.close()
    except DaqError:
        pass


def _trap_signals(flag: np.ndarray) -> dict[int, Any]:
    """SIGINT/SIGTERM set ``flag[0]`` to the signal number; the loop checks it every tick."""
    def handler(signum, frame):
        flag[0] = signum
    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            old[sig] = signal.signal(sig, handler)
        except ValueError:          # not the main thread: leave signals alone
            pass
    return old


def _restore_signals(old: dict[int, Any]) -> None:
    for sig, h in old.items():
        signal.signal(sig, h)


class _Loop:
    """The state of one real-time run (kept apart from the runner so it is allocated up front)."""

    def __init__(self, runner: HilRunner, rec: HilRecorder | None, total: int,
                 drainer: SinkDrainer | None = None):
        self.r = runner
        self.rec = rec
        self.drainer = drainer
        self.total = total
        self.buffers = (rec.buffers if rec is not None else
                        [Buffer(max(1, total), runner.sim.layout.sizes["log"], len(runner.ao),
                                {k: len(v) for k, v in runner.card_columns().items()})])
        self.ai = np.zeros(len(runner.ai))
        self.counts = np.zeros(len(runner.ci), dtype=np.int64)
        self.values = np.zeros(len(runner.inputs))
        self.prev = np.zeros(len(runner.inputs))
        self.commands = np.zeros(len(runner.ao))
        self.held = np.zeros(len(runner.ao))
        self.ramp_from = np.zeros(len(runner.ao))
        self.buf = self.buffers[0]
        self.j = self.which = 0             # row in the buffer, buffer in use
        self.ao = np.zeros(len(runner.ao))
        self.enable = np.array([c.active for c in runner.do], dtype=np.bool_)
        self.safe_ao = np.array([c.safe for c in runner.ao])
        self.safe_do = np.array([bool(c.safe) for c in runner.do], dtype=np.bool_)
        self.card_ao = self.safe_ao.copy()  # what the card puts out (recorded): safe
        self.card_do = self.safe_do.copy()  # until the first write
        interval = runner.policy.pet_interval()
        self.pet_ns = int(interval * 1e9) if np.isfinite(interval) else 2 ** 62
        self.petted = -2 ** 62              # card time (ns) of the last pet
        self.prev_pos = np.zeros(runner.pos_index.size)
        self.where = np.zeros(1, dtype=np.int64)
        self.v_lo = np.array([c.low for c in runner.ai])
        self.v_hi = np.array([c.high for c in runner.ai])
        ch = runner.inputs
        self.par_in = (_par(runner.ai, "scale"), _par(runner.ai, "offset"),
                       _par(runner.ci, "scale"), _par(runner.ci, "offset"))
        self.par_out = (tuple(_par(runner.ao, a) for a in ("scale", "offset", "low", "high"))
                        + runner.custom_out.inverse())
        self.status = Status()
        self.stop = self.status.stop            # a signal number, or ESTOP from the dashboard
        self.event: safety.SafetyEvent | None = None
        self.watchdog = safety.Watchdog(runner.policy, runner.period)
        self.done = 0
        self.overruns = 0
        self._warm(ch)

    def _warm(self, ch) -> None:
        """Compile the helpers before the clock starts."""
        r = self.r
        scratch = np.zeros(r.sim.arrays["f"].size)
        _inputs(self.ai, self.counts, *self.par_in, scratch, r.in_index, self.values, self.prev)
        scales.add_scaled(self.ai, *r.custom.forward(), r.in_index, self.values, scratch)
        _blend(self.prev, self.values, 0.5, r.in_index, scratch)
        _place(self.values, r.in_index, scratch)
        _gather(scratch, r.out_index, self.commands)
        _clip(self.commands, r.card_lo, r.card_hi)
        _volts(self.commands, *self.par_out, self.ao)
        _ramp_start(self.commands, self.held, r.out_lo, r.out_hi, self.ramp_from)
        safety.ramp(self.held, 0, 1, self.commands)
        safety.check(self.values, r.in_lo, r.in_hi, self.ai, self.v_lo, self.v_hi, False,
                     r.pos_index, self.prev_pos, r.vel_limit, r.rate, True, self.commands,
                     r.out_lo, r.out_hi, self.where)
        self.commands[:] = 0.0

    def _arm_steps(self) -> bool:
        """Tare, then home, on the started card (:mod:`hapflow.hil.homing`): their offsets
        replace the bindings' from tick 0 on, their lines join the arm log.  False (a
        safety event 'arm' before tick 0, outputs safe) when one failed."""
        r = self.r
        b = r.bindings
        if not b.tares and not b.homes:
            return True
        pet_every = int(min(self.pet_ns // r.period, 2 ** 31))
        edges = homing.ArmEdges(r.backend, len(r.ai), len(r.ci), self.safe_ao, self.safe_do,
                                pet_every, self.stop)
        ai_off, ci_off = self.par_in[1], self.par_in[3]
        try:
            if b.tares:
                offsets, log = homing.tare(edges, r.ai, b.tares, r.rate)
                for k, c in enumerate(r.ai):
                    ai_off[k] = offsets.get(c.port, ai_off[k])
                r.arm_log += log
            for h in b.homes.values():
                offset, line = homing.home(edges, h, r.ci, r.ao, r.do, r.rate,
                                           b.velocity_limits.get(h.port))
                ci_off[[c.port for c in r.ci].index(h.port)] = offset
                r.arm_log.append(line)
        except homing.ArmStopped as exc:
            self._stopped(0, f" while {exc.what} (arm edge {exc.edges})")
            self._safe(0)
            return False
        except (homing.ArmFailed, DaqError) as exc:
            self.trip(0, "arm", str(exc))
            self._safe(0)
            return False
        return True

    def _safe(self, tick: int) -> None:
        """Outputs to the safe state now; a failure to do so is recorded, not raised."""
        try:
            self.r.backend.safe_state()
        except DaqError as exc:
            self.trip(tick, "DAQ error", f"could not reach the safe state: {exc}")
        else:
            self.card_ao[:] = self.safe_ao
            self.card_do[:] = self.safe_do

    def _stopped(self, tick: int, during: str = "") -> None:
        """Trip for the e-stop or the signal in ``stop[0]`` (its name is the event's kind,
        which sets the exit status: 130 for SIGINT)."""
        if self.stop[0] == Status.ESTOP:
            self.trip(tick, "e-stop", f"the dashboard's e-stop was pressed{during}")
        else:
            name = signal.Signals(int(self.stop[0])).name
            self.trip(tick, name, f"received {name}{during}")

    def trip(self, tick: int, kind: str, message: str) -> None:
        """Record the first safety event."""
        if self.event is None:
            self.event = safety.SafetyEvent(tick, tick / self.r.rate, kind, message)
            self.status.values[Status.TRIP] = tick + 1

    def _reason(self, code: int, values: np.ndarray, commands: np.ndarray,
                rate: float) -> tuple[str, str]:
        r, k = self.r, int(self.where[0])
        kind = safety.REASONS[code]
        if code in (safety.NONFINITE_INPUT, safety.INPUT_LIMIT):
            c = r.inputs[k]
            lo, hi = r.in_lo[k], r.in_hi[k]
            return kind, (f"{c.port} ({c.physical}) = {values[k]:.6g} {c.unit}"
                          + (f" outside [{lo:g}, {hi:g}] {c.unit}" if code == safety.INPUT_LIMIT else ""))
        if code == safety.SATURATED:
            c = r.ai[k]
            return kind, (f"{c.port} ({c.physical}) at {self.ai[k]:.4g} V, the end of its "
                          f"range [{c.low:g}, {c.high:g}] V")
        if code == safety.VELOCITY:
            i = int(r.pos_index[k])
            c, speed = r.inputs[i], (values[i] - self.prev_pos[k]) * rate
            return kind, (f"{c.port} ({c.physical}) moved at {speed:.4g} {c.unit}/s between "
                          f"two samples, more than {r.vel_limit[k]:g} {c.unit}/s")
        c = r.ao[k]
        return kind, (f"{c.port} ({c.physical}) = {commands[k]:.6g} {c.unit}"
                      + (f" outside [{r.out_lo[k]:g}, {r.out_hi[k]:g}] {c.unit}"
                         if code == safety.COMMAND_LIMIT else ""))

    def run(self) -> None:
        r, be = self.r, self.r.backend
        a = r.sim.arrays
        f, m, si, sb, stats = a["f"], a["m"], a["si"], a["sb"], a["stats"]
        run1, period, sat = r.sim.program.run, r.period, r.policy.saturation
        live, staged = r.live, r.live.ready
        paced = be.paced
        custom, scaling = r.custom.any, r.custom.forward()
        tick, step, prev_edge, t_first = 0, -1, 0, 0
        try:
            be.start()
        except DaqError as exc:
            self.trip(0, "DAQ error", str(exc))
            return
        if not self._arm_steps():
            return
        while tick < self.total:
            try:
                late = be.wait()
                wake = now_ns()
                edge = be.edge_time()
                be.read(self.ai, self.counts)
            except DaqError as exc:
                self.trip(tick, "DAQ error", str(exc))
                break
            if tick == 0:
                t_first, prev_edge = wake, (wake if edge is None else edge) - period
            if edge is None:            # no edge times from the card: it says whether it was
                edge = wake if paced else prev_edge + period      # late, the clock how much
                skipped = _edges_between(edge, prev_edge, period) if late else 0
            else:
                skipped = _edges_between(edge, prev_edge, period)
            lateness = wake - (prev_edge + period) if paced else 0   # against the expected edge
            _inputs(self.ai, self.counts, *self.par_in, f, r.in_index, self.values, self.prev)
            if custom:                  # polynomial/table scales after the linear ones
                scales.add_scaled(self.ai, *scaling, r.in_index, self.values, f)
            if staged[0]:               # a live parameter change: from this tick on
                live.swap(tick)
            if skipped:
                tick = self._catch_up(tick, skipped, wake - t_first, lateness)
                if tick == self.total:
                    break
                _place(self.values, r.in_index, f)
            run1(1, tick, f, m, si, sb, self.buf.rows[self.j], stats)
            _gather(f, r.out_index, self.commands)
            _clip(self.commands, r.card_lo, r.card_hi)          # what the card can put out
            cut = False
            if self.event is None:
                code = safety.check(self.values, r.in_lo, r.in_hi, self.ai, self.v_lo,
                                    self.v_hi, sat, r.pos_index, self.prev_pos, r.vel_limit,
                                    r.rate / (skipped + 1), tick == 0, self.commands, r.out_lo,
                                    r.out_hi, self.where)
                if code:
                    self.trip(tick, *self._reason(code, self.values, self.commands,
                                                  r.rate / (skipped + 1)))
                    if code in safety.RAMPED and r.ramp_ticks > 0:
                        _ramp_start(self.commands, self.held, r.out_lo, r.out_hi, self.ramp_from)
                        step = 0
                    else:
                        cut = True
                else:
                    self.held[:] = self.commands
            if self.stop[0]:
                self._stopped(tick)
                cut = True
            if step > 0:
                step += skipped         # the ramp runs on card edges: a stall does not stretch it
            if step >= 0 and not cut:
                safety.ramp(self.ramp_from, step, r.ramp_ticks, self.commands)
                step += 1
                cut = step > r.ramp_ticks + 1
            if cut:
                self.commands[:] = 0.0
                self._safe(tick)
            else:
                try:
                    _volts(self.commands, *self.par_out, self.ao)
                    be.write(self.ao, self.enable)
                    self.card_ao[:] = self.ao
                    self.card_do[:] = self.enable
                    if edge - self.petted >= self.pet_ns:   # by the card's clock, which
                        be.pet()                              # a slow loop does not slow
                        self.petted = edge
                except DaqError as exc:
                    expired = isinstance(exc, WatchdogExpired)
                    self.trip(tick, "hardware watchdog" if expired else "DAQ error", str(exc))
                    self._safe(tick)
                    self.commands[:] = 0.0
                    cut = True
            done = now_ns()
            overrun = late or skipped > 0 or (paced and done - edge > period)
            if overrun:
                self.overruns += 1
                self.status.values[Status.OVERRUNS] = self.overruns
            if self.event is None:
                why = self.watchdog.tick(lateness, bool(overrun))
                if why:
                    self.trip(tick, "watchdog", why)
                    self._safe(tick)
                    self.commands[:] = 0.0
                    cut = True
            self._log(tick, wake - t_first, lateness, done - wake, skipped, overrun, False)
            if cut:
                break
            prev_edge = edge
            tick += 1

    def _catch_up(self, tick: int, skipped: int, wake: int, lateness: int) -> int:
        """Run the kernel for the ``skipped`` edges before this one (at most to the end of
        the run), on inputs interpolated between the last sample and this one; returns the
        tick of this edge.  The commands are not written (the card held the last one)."""
        r = self.r
        a = r.sim.arrays
        f, run1 = a["f"], r.sim.program.run
        for i in range(1, min(skipped, self.total - tick) + 1):
            start = now_ns()
            _blend(self.prev, self.values, i / (skipped + 1), r.in_index, f)
            run1(1, tick, f, a["m"], a["si"], a["sb"], self.buf.rows[self.j], a["stats"])
            self._log(tick, wake, lateness - (i - 1) * r.period, now_ns() - start, 0, False,
                      True)
            tick += 1
        return tick

    def _log(self, tick: int, wake: int, lateness: int, compute: int, skipped: int,
             overrun: bool, missed: bool) -> None:
        """Finish the row of ``tick`` (its log row is already written by the kernel); hand a
        full buffer to the recorder (a run kept in memory has one buffer for every tick)."""
        buf, j = self.buf, self.j
        buf.commands[j] = self.commands
        buf.timing[j, 0] = wake
        buf.timing[j, 1] = lateness
        buf.timing[j, 2] = compute
        buf.timing[j, 3] = skipped
        buf.overrun[j] = overrun
        buf.missed[j] = missed
        buf.ai_volts[j] = self.ai
        buf.counts[j] = self.counts
        buf.ao_volts[j] = self.card_ao
        buf.enable[j] = self.card_do
        self.j = j = j + 1
        buf.n = j
        self.done = tick + 1
        self.status.values[Status.ROWS] = j
        if self.done % self.r.chunk_ticks == 0:     # once per chunk (the sinks' buffers' limit)
            if self.drainer is not None:
                self.drainer.hand_off(self.done)    # MIDI/sound: drained by another process
            if self.r.sim.sinks:
                self.r.sim.drain(tick=self.done)    # a playback's window, refilled here
        if j == len(buf.rows) and self.rec is not None:
            self.rec.send(self.which)               # the writer process appends it
            self.which = 1 - self.which
            self.buf = self.rec.claim(self.which)
            self.buf.tick0, self.j = tick + 1, 0
            self.status.switch(tick + 1)

    def close_sinks(self, status: str) -> None:
        """The last records to the sinks and their files closed (also after a failure)."""
        try:
            if self.drainer is not None:
                self.drainer.close(status, self.done)
        finally:
            if self.r.sim.sinks:
                self.r.sim.close(status, tick=self.done)

    def kept_timing(self) -> dict[str, np.ndarray]:
        """The timing of a run kept in memory (no recording file), else {}."""
        if self.rec is not None:
            return {}
        buf = self.buffers[0]
        n = buf.n
        return {"wake": buf.timing[:n, 0].copy(), "lateness": buf.timing[:n, 1].copy(),
                "compute": buf.timing[:n, 2].copy(), "skipped": buf.timing[:n, 3].copy(),
                "overrun": buf.overrun[:n].copy(), "missed": buf.missed[:n].copy()}

    def shutdown(self) -> None:
        """Safe state and close the card (:func:`_leave_safe`); the last rows to the file."""
        _leave_safe(self.r.backend)
        if self.rec is not None:
            self.rec.send(self.which)

    def release(self) -> None:
        """Free the buffers of a run kept in memory, and the status."""
        self.stop = None
        self.status.release()
        if self.rec is None:
            for b in self.buffers:
                b.release(unlink=True)
