"""Reference mode: run a graph with ``scipy.integrate.solve_ivp`` and its event location.

The peer reference for the engine's fixed-step solver and in-step event
location.  It runs the same blocks (their kernels' plain-Python functions)
on the same tick grid with the same semantics — outputs, recording and
discrete updates at every tick, held blocks only at their sample hits — but
integrates the continuous states over each tick with an adaptive
high-order method (DOP853 by default) at tight tolerance, and finds guard
crossings with ``solve_ivp``'s terminal events (root finding on the dense
output).  After an event the block's reset is applied at the located time
and integration resumes from there, exactly as in the engine: a guard that
is not positive at the start of an interval cannot fire in it, and at most
``graph.max_events`` events are handled per tick.

It is slow (plain Python, ~1 ms per tick) and meant for tests and
validation, e.g. ``hapflow.ivp.reference(graph, 2.0)``.
"""
from __future__ import annotations

import time as _time
from typing import Any, Callable

import numpy as np
from scipy.integrate import solve_ivp

from .errors import GraphError
from .graph import Graph
from .simulation import RunResult, Simulation


class ReferenceResult(RunResult):
    """A :class:`RunResult` plus every located event as ``(time s, block, guard index)``."""

    def __init__(self, *args: Any, event_log: list[tuple[float, str, int]] | None = None,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.event_log = list(event_log or [])


class _Bound:
    """A graph's kernels bound to views of one set of run-time arrays."""

    def __init__(self, sim: Simulation):
        self.sim = sim
        graph, layout, a = sim.graph, sim.layout, sim.arrays
        self.g = np.zeros(layout.sizes["g"])
        self.calls: dict[str, tuple[Callable, list]] = {}

        def view(slot):
            v = (self.g if slot.array == "g" else a[slot.array])[slot.start:slot.stop]
            return v.reshape(slot.shape) if len(slot.shape) > 1 else v

        self.args, self.outs, self.gviews = {}, {}, {}
        for name, node in graph.nodes.items():
            slots = layout.blocks[name]
            ins = [view(layout.inputs[(name, port)]) for port in node.block.inputs]
            self.args[name] = [view(slots[k]) for k in "xdmp"] + ins
            self.outs[name] = [view(layout.signals[(name, port)]) for port in node.block.outputs]
            self.gviews[name] = view(slots["g"])
        self.kernels = {name: {k: getattr(fn, "py_func", fn) for k, fn in node.block.kernels().items()}
                        for name, node in graph.nodes.items()}

    def output(self, block: str, t: float) -> None:
        self.kernels[block]["output"](t, *self.args[block], *self.outs[block])

    def chain(self, t: float) -> None:
        for call in self.sim.program.schedule.chain:
            self.output(call.block, t)

    def derivs(self, t: float, dx: np.ndarray) -> None:
        for block in self.sim.program.schedule.continuous:
            s = self.sim.layout.blocks[block]["x"]
            self.kernels[block]["deriv"](t, *self.args[block], dx[s.start:s.stop])

    def guards(self, t: float) -> np.ndarray:
        for block in self.sim.program.schedule.hybrid:
            self.kernels[block]["guard"](t, *self.args[block], self.gviews[block])
        return self.g

    def reset(self, t: float, j: int) -> str:
        for block in self.sim.program.schedule.hybrid:
            s = self.sim.layout.blocks[block]["g"]
            if s.start <= j < s.stop:
                self.kernels[block]["reset"](t, *self.args[block], j - s.start)
                return block
        raise AssertionError(j)


class Reference:
    """Run ``graph`` tick by tick with ``solve_ivp`` between ticks.

    Parameters
    ----------
    graph : Graph
        The graph (any blocks; continuous states are integrated by scipy).
    rtol, atol : float
        ``solve_ivp`` tolerances.
    method : str
        ``solve_ivp`` method (an explicit high-order one: 'DOP853', 'RK45').
    """

    def __init__(self, graph: Graph, rtol: float = 1e-12, atol: float = 1e-14,
                 method: str = "DOP853"):
        self.sim = Simulation(graph, interpret=True)
        self.bound = _Bound(self.sim)
        self.rtol, self.atol, self.method = rtol, atol, method
        self.x = self.sim.arrays["x"]
        self.dx = np.zeros_like(self.x)
        self.event_log: list[tuple[float, str, int]] = []
        self.overflows = 0
        sched = self.sim.program.schedule
        if sched.hybrid and not self.x.size:
            raise GraphError("reference mode needs continuous state to locate events in")

    def _rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        self.x[:] = y
        self.bound.chain(t)
        self.bound.derivs(t, self.dx)
        return self.dx.copy()

    def _event(self, j: int) -> Callable[[float, np.ndarray], float]:
        def g(t: float, y: np.ndarray) -> float:
            self.x[:] = y
            self.bound.chain(t)
            return float(self.bound.guards(t)[j])
        g.terminal, g.direction = True, -1.0
        return g

    def _interval(self, t0: float, t1: float) -> None:
        """Integrate from ``t0`` to ``t1``, handling events like the engine."""
        graph = self.sim.graph
        ta, handled = t0, 0
        while ta < t1:
            self.bound.chain(ta)
            active = [j for j, v in enumerate(self.bound.guards(ta)) if v > 0.0]
            events = [self._event(j) for j in active] if handled < graph.max_events else []
            sol = solve_ivp(self._rhs, (ta, t1), self.x.copy(), method=self.method,
                            rtol=self.rtol, atol=self.atol, events=events or None)
            if sol.status != 1:
                self.x[:] = sol.y[:, -1]
                if handled >= graph.max_events:
                    self._count_overflow(active, t1)
                return
            k = min((k for k in range(len(events)) if sol.t_events[k].size),
                    key=lambda k: sol.t_events[k][0])
            te = float(sol.t_events[k][0])
            self.x[:] = sol.y_events[k][0]
            self.bound.chain(te)
            block = self.bound.reset(te, active[k])
            self.event_log.append((te, block, active[k] - self.sim.layout.blocks[block]["g"].start))
            handled += 1
            ta = te

    def _count_overflow(self, active: list[int], t1: float) -> None:
        self.bound.chain(t1)
        g = self.bound.guards(t1)
        self.overflows += any(g[j] <= 0.0 for j in active)

    def run(self, duration: float | None = None) -> ReferenceResult:
        """Run ``duration`` s (default: the graph's) and return the recorded signals in memory."""
        sim, graph, bound = self.sim, self.sim.graph, self.bound
        sched, layout = sim.program.schedule, sim.layout
        total = int(round((graph.duration if duration is None else duration) * graph.rate))
        rows = np.zeros((total, layout.sizes["log"]))
        start = _time.perf_counter()
        for k in range(total):
            i = sim.tick
            t = i / graph.rate
            hit = {n for n in graph.nodes
                   if (i - graph.nodes[n].offset) % graph.nodes[n].divider == 0}
            for call in sched.calls:
                if call.block not in sched.held or call.block in hit:
                    bound.output(call.block, t)
            for key, col in layout.log.items():
                sig = layout.signals[key]
                rows[k, col.start:col.stop] = sim.arrays[sig.array][sig.start:sig.stop]
            for block in sched.updates:
                if block in hit:
                    bound.kernels[block]["update"](t, *bound.args[block])
            if self.x.size:
                self._interval(t, (i + 1) / graph.rate)
            sim.tick += 1
        wall = _time.perf_counter() - start
        times = np.arange(sim.tick - total, sim.tick) / graph.rate
        return ReferenceResult(total, wall, graph.rate, time=times, signals=sim.columns(rows),
                               events=len(self.event_log), event_overflows=self.overflows,
                               event_log=list(self.event_log))


def reference(graph: Graph, duration: float | None = None, **options) -> ReferenceResult:
    """Run ``graph`` once in reference mode (see :class:`Reference` for ``options``)."""
    return Reference(graph, **options).run(duration)
