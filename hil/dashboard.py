"""The live dashboard: a Bokeh server in its own process, beside a real-time run.

::

    hapflow run GRAPH --mode hil --dashboard [PORT]     # then open http://localhost:PORT/

The page shows the recorded signals (decimated to about 100 points a second, the last
10 s), the percentiles of the loop's compute time and lateness, the overruns, the safety
state, a slider for each scalar live parameter of the controller, and an e-stop.  It
updates 4 times a second: each update repaints every plot, most of what the browser
costs the host.

The server yields to the loop (:func:`hapflow.hil.realtime.background`): SCHED_IDLE,
off the loop's CPU when the loop is pinned.  A browser on the HIL host itself should
yield likewise, started from the run's session, e.g.
``chrt --idle 0 taskset -c 0 chromium http://localhost:5006/`` beside ``--cpu 1``
(``bench/hil_timing.py`` starts its headless Chromium so).  The page's e-stop is a
convenience, not a safety function: it goes through the browser and this server, which
run when the host has time to spare; an e-stop switch in the amplifier's enable circuit
is what must cut the power.

Nothing of the page runs on the loop's thread, nor in its process: a Python thread there would
take the GIL for milliseconds while Bokeh serialises a document (the recorder found
that a writer thread doubles a 4 kHz loop's missed edges).  The process is forked
before the loop starts and reads the loop's rows where the loop writes them (the
recorder's buffers in shared memory, and :class:`~hapflow.hil.recording.Status`: first
tick of the buffer in use, rows in it, overruns, trip tick).  The e-stop writes the loop's stop flag in that shared
memory; the loop sees it in the same tick and takes the safe path of a Ctrl-C (outputs
to 0 V, amplifier off, ``safety_kind`` "e-stop" in the recording).  The loop never waits
for the dashboard: it only stores a row count per tick (and its overrun count when one
happens); the dashboard reads rows without locking (:class:`NewRows` checks afterwards
that the loop did not move to the other buffer meanwhile).  If the dashboard process
dies, the run goes on; if the run's process dies, the kernel ends the dashboard (its own
output goes to /dev/null: a full stdout/stderr pipe must not stop it either).  A slider's value is
sent over a pipe to a thread of the run's process that asks
:meth:`hapflow.hil.live.LiveParameters.request` (the block validates it; the loop
applies it at a tick boundary) and sends back the tick or the rejection.
"""
from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hapflow.errors import HapflowError

from . import realtime
from .live import LiveParameters
from .recording import Status

POINTS_PER_SECOND = 100
"""Trace points a second sent to the browser."""
WINDOW = 10.0
"""Seconds of trace kept in the browser."""
REFRESH_MS = 250
"""Page update period (each update repaints every plot: the browser's main cost)."""
READY_TIMEOUT = 60.0
"""Seconds the run waits for the dashboard's server to listen before it gives up."""
PR_SET_PDEATHSIG = 1
"""prctl(2) option: a signal for this process when its parent dies."""


def start(live: LiveParameters, port: int, host: str = "localhost") -> Callable:
    """A ``watch`` for :meth:`hapflow.hil.runner.HilRunner.run`: serves the dashboard of
    the run on ``host:port`` from a forked process, listening when ``watch`` returns.

    Raises
    ------
    HapflowError
        From ``watch``, when the server cannot listen on ``host:port`` (the run does not
        start).
    """
    def watch(view) -> Callable[[], None]:
        import bokeh.server.server  # noqa: F401  (imported once, before the fork)
        import bokeh.plotting  # noqa: F401
        ctx = mp.get_context("fork")
        mine, theirs = ctx.Pipe()
        params = {k: float(v) for k, v in live.live_parameters().items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool)}
        proc = ctx.Process(target=_serve, name="hapflow-dashboard", daemon=True,
                           args=(theirs, view, params, port, host, os.getpid()))
        proc.start()
        theirs.close()

        def stop() -> None:
            proc.terminate()
            proc.join(timeout=10)
            mine.close()
        ready = mine.recv() if mine.poll(READY_TIMEOUT) else "no answer"
        if ready != "ready":
            stop()
            raise HapflowError(f"--dashboard: cannot serve on {host}:{port} ({ready}); "
                               "choose another port, e.g. --dashboard 5007")
        threading.Thread(target=_answer, args=(mine, live), daemon=True,
                         name="hapflow-dashboard-live").start()
        return stop
    return watch


def _answer(conn, live: LiveParameters) -> None:
    """Run the dashboard's slider requests (this thread, not the loop's)."""
    while True:
        try:
            key, value = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = f"{live.request(key, value).line()}"
        except HapflowError as exc:
            reply = f"rejected: {exc}"
        try:
            conn.send(reply)
        except OSError:
            return


def _serve(conn, view, params: dict[str, float], port: int, host: str, parent: int) -> None:
    """The dashboard process: a Bokeh server until terminated or the run's process is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the loop decides when to stop
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    _exit_with(parent)
    realtime.background(view.cpu)                      # the loop comes first
    quiet = os.open(os.devnull, os.O_WRONLY)          # its log must never block it: the run's
    os.dup2(quiet, 1)                                  # stdout/stderr may be a pipe nobody
    os.dup2(quiet, 2)                                  # reads (seen: an orphan stuck in write)
    from bokeh.application import Application
    from bokeh.application.handlers.function import FunctionHandler
    from bokeh.server.server import Server
    from tornado.ioloop import PeriodicCallback
    page = _Page(conn, view, params)
    try:
        origins = [f"{host}:{port}", f"localhost:{port}", f"127.0.0.1:{port}"]
        server = Server({"/": Application(FunctionHandler(page.document))}, port=port,
                        address=host, allow_websocket_origin=origins)
        server.start()
    except Exception as exc:      # noqa: BLE001  (told to the run, which refuses to start)
        conn.send(str(exc) or type(exc).__name__)
        os._exit(1)
    PeriodicCallback(lambda: os.getppid() != parent and os._exit(0), 500).start()
    conn.send("ready")
    server.io_loop.start()


def _exit_with(parent: int) -> None:
    """Have the kernel kill this process when the run's process dies (Linux), even if its
    event loop is stuck; the event loop's check of the parent covers other systems."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:       # died before the request
        os._exit(0)


@dataclass
class Rows:
    """Rows of the loop's buffers, copied: ``ticks`` and the signals' ``columns`` on the
    decimation grid, the ``timing`` (lateness, compute; ns) of the loop's own ticks of the
    buffer in use, ``end`` the tick after the last one written."""

    ticks: np.ndarray
    columns: dict[str, np.ndarray]
    timing: np.ndarray
    end: int


class NewRows:
    """The rows a running loop wrote since the last :meth:`read`, every ``step``-th tick.

    The loop does not wait for the reader: a buffer stays as it is until the loop has
    filled the other one, so rows copied from the buffer in use, and from the end of the
    one before, are good if the loop is still in the same buffer after the copy.

    Parameters
    ----------
    view : LoopView
        The running loop (:class:`hapflow.hil.runner.LoopView`).
    step : int
        Decimation: ticks that are multiples of ``step`` are read.
    """

    def __init__(self, view, step: int = 1):
        self.view, self.step = view, step
        self.next = 0                    # the next tick to read

    def read(self) -> Rows | None:
        """The new rows, or None if the loop changed buffers while they were copied, or
        was between the two writes of a change when read (the next call reads them).  Rows
        the loop wrote over before they were read (a reader held up for a whole buffer)
        are skipped."""
        v, values = self.view, self.view.status.values
        tick0, rows = int(values[Status.TICK0]), int(values[Status.ROWS])
        if tick0 + rows < self.next:    # between a switch's two writes: rows 0, the old tick0
            return None
        size = v.buffers[0].shape[0]
        parts = []
        if self.next < tick0:           # the rest of the buffer before (recordings have two)
            parts.append((tick0 - size, max(self.next, tick0 - size), tick0))
        parts.append((tick0, max(self.next, tick0), tick0 + rows))
        ticks, columns = [], {name: [] for name in v.signals}
        for base, lo, hi in parts:
            buf = v.buffers[base // size % len(v.buffers)]
            k = np.arange(-(-lo // self.step) * self.step, hi, self.step) - base
            ticks.append(k + base)
            for name, (_, (src, col)) in v.signals.items():
                columns[name].append((buf.log if src == "log" else buf.commands)[k, col])
        buf = v.buffers[tick0 // size % len(v.buffers)]
        own = ~buf.missed[:rows]
        timing = buf.timing[:rows, 1:3][own]
        if int(values[Status.TICK0]) != tick0:
            return None
        self.next = tick0 + rows
        return Rows(np.concatenate(ticks), {n: np.concatenate(c) for n, c in columns.items()},
                    timing, tick0 + rows)


class _Page:
    """One document per browser tab, all reading the same run."""

    def __init__(self, conn, view, params: dict[str, float]):
        self.conn, self.view, self.params = conn, view, params
        self.lock = threading.Lock()

    def document(self, doc) -> None:
        _Document(self, doc)


class _Document:
    def __init__(self, page: _Page, doc):
        from bokeh.layouts import column, row
        from bokeh.models import Button, ColumnDataSource, Div, Slider
        from bokeh.plotting import figure
        self.page, self.view = page, page.view
        v = self.view
        self.rows = NewRows(v, max(1, int(round(v.rate / POINTS_PER_SECOND))))
        self.names = list(v.signals)
        self.source = ColumnDataSource({"t": [], **{_key(n): [] for n in self.names}},
                                       name="traces")
        units: dict[str, list[str]] = {}
        for name, (unit, _) in v.signals.items():
            units.setdefault(unit or "-", []).append(name)
        plots = []
        for unit, names in units.items():
            shared = {"x_range": plots[0].x_range} if plots else {}
            fig = figure(height=220, sizing_mode="stretch_width", title=", ".join(names),
                         x_axis_label="time (s)", y_axis_label=unit, **shared)
            for k, name in enumerate(names):
                fig.line("t", _key(name), source=self.source, legend_label=name,
                         color=("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")[k % 5])
            fig.legend.location = "top_left"
            plots.append(fig)
        self.timing = Div(text="", name="timing")
        self.safety = Div(text="", name="safety")
        self.answer = Div(text="", name="answer")
        estop = Button(label="E-STOP", button_type="danger", name="estop", width=160)
        estop.on_click(self.estop)
        sliders = []
        for key, value in page.params.items():
            hi = 2 * abs(value) if value else 1.0
            s = Slider(start=min(0.0, -hi if value < 0 else 0.0), end=hi, value=value,
                       step=hi / 200, title=key, name=f"slider:{key}")
            s.on_change("value_throttled", lambda attr, old, new, key=key: self.ask(key, new))
            sliders.append(s)
        doc.add_root(column(row(estop, self.safety), self.timing, *plots, *sliders,
                            self.answer, sizing_mode="stretch_width"))
        doc.title = "hapflow live"
        doc.add_periodic_callback(self.update, REFRESH_MS)

    def estop(self) -> None:
        self.view.status.stop[0] = Status.ESTOP

    def ask(self, key: str, value: float) -> None:
        with self.page.lock:
            self.page.conn.send((key, float(value)))
            self.answer.text = self.page.conn.recv() if self.page.conn.poll(10) else \
                f"{key}: no answer from the run"

    def update(self) -> None:
        v = self.view
        got = self.rows.read()
        if got is None:
            return
        if got.ticks.size:
            self.source.stream({"t": got.ticks / v.rate,
                                **{_key(n): got.columns[n] for n in self.names}},
                               rollover=int(WINDOW * POINTS_PER_SECOND))
        if got.timing.size:
            late, comp = (np.percentile(got.timing[:, c], (50, 99, 99.9)) / 1e3 for c in (0, 1))
            self.timing.text = (
                f"tick {got.end} of {v.total} &nbsp; overruns "
                f"{int(v.status.values[Status.OVERRUNS])} &nbsp; compute p50/p99/p99.9 "
                f"{comp[0]:.1f}/{comp[1]:.1f}/{comp[2]:.1f} us &nbsp; lateness "
                f"{late[0]:.1f}/{late[1]:.1f}/{late[2]:.1f} us (this chunk)")
        trip = int(v.status.values[Status.TRIP])
        if trip:
            self.safety.text = (f"<b style='color:#c00'>SAFETY STOP at tick {trip - 1} (t = "
                                f"{(trip - 1) / v.rate:.3f} s): outputs 0 V, amplifier off</b>")
        elif got.end >= v.total:
            self.safety.text = "<b>run complete</b>"
        else:
            self.safety.text = "<b style='color:#080'>running</b>"


def _key(name: str) -> str:
    """A column name Bokeh accepts for a signal name."""
    return "s_" + "".join(c if c.isalnum() else "_" for c in name)
