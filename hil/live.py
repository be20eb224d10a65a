"""Live parameters: changed while a real-time run goes on, applied at a tick boundary.

A change is asked for from any thread but the loop's (the command line's
stdin reader, the dashboard)::

    change = live.request("pid.kp", 4000.0)   # validates, stages, waits for the loop
    change.tick                               # the first tick that ran with it

:meth:`LiveParameters.request` runs the block's own parameter validation
(:meth:`hapflow.simulation.Simulation.prepare`: ``Block.set``, ``validate``,
``pack``) on the caller's thread; an invalid value raises a ``GraphError`` and
is never applied.  The packed slot goes into a back buffer, and the loop,
at the start of a tick, copies it into the kernel's parameters in one call
(:meth:`LiveParameters.swap`: a flag test per tick, a copy of one block's
parameters when a change is staged); the caller waits for that and learns
the tick.  Requests are serialised: one change is staged at a time.

Every applied change goes to the recording as it happens (``/hil/live``:
tick, block, parameter, old and new value; see
:mod:`hapflow.hil.recording`), so a change is in the file even if the run is
killed afterwards.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TextIO

import numpy as np
import yaml
from numba import njit

from hapflow.errors import GraphError, HapflowError


@dataclass(frozen=True)
class Change:
    """A live parameter change as applied by the loop."""

    tick: int
    block: str
    parameter: str
    old: Any
    new: Any

    def row(self) -> tuple[int, str, str, str, str]:
        """(tick, block, parameter, old, new), the values as YAML text (as recorded)."""
        return self.tick, self.block, self.parameter, _text(self.old), _text(self.new)

    def line(self) -> str:
        """``tick 1200: pid.kp 2000 -> 4000``."""
        return f"tick {self.tick}: {self.block}.{self.parameter} {self.old!r} -> {self.new!r}"


def _text(value: Any) -> str:
    """A parameter value as one line of YAML (floats exact: PyYAML writes ``repr``)."""
    plain = np.asarray(value).tolist() if isinstance(value, (np.ndarray, np.generic)) else value
    return yaml.safe_dump(plain, default_flow_style=True, width=1 << 20).strip().removesuffix("...").strip()


@njit(cache=True)
def _swap(staged, p, span, ready, applied, tick):
    """The staged slot into ``p`` at ``tick`` (called by the loop once a change is ready)."""
    for k in range(span[1] - span[0]):
        p[span[0] + k] = staged[k]
    applied[0] = tick
    ready[0] = 0


class LiveParameters:
    """Parameter changes handed to a running loop (see the module docstring).

    Parameters
    ----------
    sim : Simulation
        The controller's compiled simulation the loop runs.
    on_change : callable, optional
        Called with each applied :class:`Change` on the requesting thread (the recorder).
    """

    def __init__(self, sim, on_change: Callable[[Change], None] | None = None):
        self.sim = sim
        self.p = sim.arrays["p"]
        self.staged = np.zeros(max(1, self.p.size))
        self.span = np.zeros(2, dtype=np.int64)
        self.ready = np.zeros(1, dtype=np.int64)
        self.applied = np.full(1, -1, dtype=np.int64)
        self.on_change = on_change
        self.changes: list[Change] = []
        self.running = False
        self._lock = threading.Lock()
        _swap(self.staged, self.staged.copy(), self.span, self.ready, self.applied, -1)

    def live_parameters(self) -> dict[str, Any]:
        """``"block.param"`` -> current value of every live parameter of the controller."""
        out = {}
        for name, node in self.sim.graph.nodes.items():
            block = node.block
            for param, spec in block.params.items():
                if spec.live:
                    out[f"{name}.{param}"] = block.values[param]
        return out

    def request(self, key: str, value: Any, timeout: float = 5.0) -> Change:
        """Validate ``key = value``, stage it and wait until the loop applied it.

        Raises
        ------
        GraphError
            If the block or parameter is unknown, structural, or the value invalid.
        HapflowError
            If the loop is not running or did not reach a tick boundary within ``timeout``
            (the change is then withdrawn).
        """
        with self._lock:
            if not self.running:
                raise HapflowError(f"cannot set {key}: the real-time loop is not running")
            span, values, old = self.sim.prepare(key, value)
            block, _, param = key.partition(".")
            new = self.sim.graph.nodes[block].block.values[param]
            self.staged[:values.size] = values
            self.span[0], self.span[1] = span.start, span.stop
            self.ready[0] = 1
            end = time.monotonic() + timeout
            while self.ready[0] and self.running and time.monotonic() < end:
                time.sleep(0.001)       # not an Event: the loop only flips a flag
            if self.ready[0]:
                self.ready[0] = 0
                self.sim.graph.nodes[block].block.values[param] = old
                raise HapflowError(f"{key} = {value!r} not applied: the loop "
                                   + ("ended" if not self.running else
                                      f"did not reach a tick in {timeout:g} s"))
            change = Change(int(self.applied[0]), block, param, old, new)
            self.changes.append(change)
            if self.on_change is not None:
                self.on_change(change)
            return change

    def start(self) -> None:
        """The loop is about to run: requests are accepted."""
        self.running = True

    def stop(self) -> None:
        """The loop has ended: later requests are refused, and one in progress has finished
        (applied and reported, or withdrawn) when this returns."""
        self.running = False
        with self._lock:
            pass

    def swap(self, tick: int) -> None:
        """Apply the staged change at ``tick`` (the loop calls it when ``ready[0]`` is set)."""
        _swap(self.staged, self.p, self.span, self.ready, self.applied, tick)


def parse(line: str) -> tuple[str, Any]:
    """``"block.param=value"`` (value in YAML: a number or a list) -> (key, value).

    Raises
    ------
    GraphError
        If the line is not of that form.
    """
    key, sep, text = line.partition("=")
    key = key.strip()
    if not sep or "." not in key:
        raise GraphError(f"{line.strip()!r}: write block.param=value, e.g. pid.kp=2000")
    try:
        return key, yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise GraphError(f"{line.strip()!r}: the value is not a plain YAML number or list "
                         f"({getattr(exc, 'problem', None) or exc})") from None


def serve_stream(live: LiveParameters, stream: TextIO, reply: TextIO) -> threading.Thread:
    """Read ``block.param=value`` lines from ``stream`` on a daemon thread; answer each
    on ``reply`` with the tick it was applied at, or why it was rejected."""
    def loop() -> None:
        for line in stream:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                change = live.request(*parse(line))
                print(f"live: {change.line()}", file=reply, flush=True)
            except HapflowError as exc:
                print(f"live: rejected: {exc}", file=reply, flush=True)
    thread = threading.Thread(target=loop, name="hapflow-live-stdin", daemon=True)
    thread.start()
    return thread
