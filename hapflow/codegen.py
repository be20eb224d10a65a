"""Generate the Python source of one ``run(n_ticks, ...)`` function for a graph.

The source calls each block's kernels in schedule order on constant slices
of the flat arrays; every view is made once before the tick loop, so a tick
allocates nothing.  One global fixed-step solver (RK4, or semi-implicit
Euler) integrates all continuous states together and re-evaluates the solver
chain (see :mod:`hapflow.schedule`) at every stage.  Graphs with guards get
the in-step event loop of :mod:`hapflow.events`.

Tick ``i`` at ``t = i / rate``:

1. outputs of every block (held blocks only at their sample hits);
2. recorded signals into ``log[k]``;
3. discrete updates at sample hits;
4. continuous states from ``t`` to ``t + 1/rate``, locating events.

The same source runs compiled (``numba.njit``) or interpreted (plain Python,
kernels' ``py_func``): the names ``jit`` and the kernels are injected by
:mod:`hapflow.compiler`.
"""
from __future__ import annotations

from .graph import Checked
from .layout import Layout, Slot
from .schedule import Call, Schedule

EVENT_TOL = 1e-10
"""Event time tolerance as a fraction of the tick length."""


class _Source:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def emit(self, depth: int, *lines: str) -> None:
        self.lines.extend("    " * depth + line for line in lines)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class Generator:
    """Writes the kernel source for a checked, scheduled and laid-out graph."""

    def __init__(self, checked: Checked, schedule: Schedule, layout: Layout):
        self.graph = checked.graph
        self.schedule = schedule
        self.layout = layout
        self.index = {name: k for k, name in enumerate(self.graph.nodes)}
        self.nx = layout.sizes["x"]
        self.ng = layout.sizes["g"]
        self.stages = 4 if self.graph.solver == "rk4" else 2
        self.views: dict[str, str] = {}

    # ------------------------------------------------------------ names
    def kernel(self, block: str, kind: str) -> str:
        """Global name of a block's kernel in the generated module."""
        return f"b{self.index[block]}_{kind}"

    def _view(self, name: str, code: str) -> str:
        self.views[name] = code
        return name

    def _slot(self, prefix: str, slot: Slot) -> str:
        return self._view(f"{prefix}{slot.array}_{slot.start}_{slot.stop}", slot.code())

    def _state(self, block: str) -> str:
        slots = self.layout.blocks[block]
        return ", ".join(self._slot("v_", slots[k]) for k in "xdmp")

    def _inputs(self, block: str) -> list[str]:
        spec = self.graph.nodes[block].block.inputs
        return [self._slot("v_", self.layout.inputs[(block, port)]) for port in spec]

    def _outputs(self, block: str) -> list[str]:
        spec = self.graph.nodes[block].block.outputs
        return [self._slot("v_", self.layout.signals[(block, port)]) for port in spec]

    def _args(self, block: str, t: str, *extra: str) -> str:
        return ", ".join([t, self._state(block), *self._inputs(block), *extra])

    def _part(self, array: str, block: str, key: str) -> str:
        slot = self.layout.blocks[block][key]
        return self._view(f"{array}_{slot.start}_{slot.stop}", f"{array}[{slot.start}:{slot.stop}]")

    # ------------------------------------------------------------ pieces
    def _hit(self, block: str) -> str | None:
        node = self.graph.nodes[block]
        if node.divider == 1:
            return None
        return f"if (i - {node.offset}) % {node.divider} == 0:"

    def _guarded(self, src: _Source, depth: int, block: str, line: str) -> None:
        hit = self._hit(block)
        if hit:
            src.emit(depth, hit)
            src.emit(depth + 1, line)
        else:
            src.emit(depth, line)

    def _call_output(self, call: Call, t: str) -> str:
        return f"{self.kernel(call.block, 'output')}({self._args(call.block, t, *self._outputs(call.block))})"

    def _chain(self, src: _Source, depth: int, t: str) -> None:
        for call in self.schedule.chain:
            src.emit(depth, self._call_output(call, t))

    def _derivs(self, src: _Source, depth: int, t: str, stage: str) -> None:
        for block in self.schedule.continuous:
            dx = self._part(stage, block, "x")
            src.emit(depth, f"{self.kernel(block, 'deriv')}({self._args(block, t, dx)})")

    def _guards(self, src: _Source, depth: int, t: str, target: str) -> None:
        for block in self.schedule.hybrid:
            g = self._part(target, block, "g")
            src.emit(depth, f"{self.kernel(block, 'guard')}({self._args(block, t, g)})")

    def _resets(self, src: _Source, depth: int, t: str) -> None:
        keyword = "if"
        for block in self.schedule.hybrid:
            g = self.layout.blocks[block]["g"]
            src.emit(depth, f"{keyword} jj < {g.stop}:")
            src.emit(depth + 1, f"{self.kernel(block, 'reset')}({self._args(block, t, f'jj - {g.start}')})")
            keyword = "elif"

    def _axpy(self, src: _Source, depth: int, indices: list[int] | None, rhs: str) -> None:
        """``x[j] = rhs(j)`` for the given state indices (all when None)."""
        if indices is None:
            src.emit(depth, f"for j in range({self.nx}):", f"    x[j] = {rhs}")
        else:
            src.emit(depth, *[f"x[{j}] = {rhs.replace('[j]', f'[{j}]')}" for j in indices])

    def _step(self, src: _Source, depth: int) -> None:
        """Integrate from (ta, x0) over th into x; ``ka`` already holds f(ta, x0)."""
        if self.stages == 4:
            for stage, prev, frac in (("kb", "ka", "0.5"), ("kc", "kb", "0.5"), ("kd", "kc", "1.0")):
                self._axpy(src, depth, None, f"x0[j] + ({frac} * th) * {prev}[j]")
                src.emit(depth, f"ts = ta + {frac} * th")
                self._chain(src, depth, "ts")
                self._derivs(src, depth, "ts", stage)
            self._axpy(src, depth, None,
                       "x0[j] + (th / 6.0) * (ka[j] + 2.0 * kb[j] + 2.0 * kc[j] + kd[j])")
            return
        positions = list(self.layout.position_states)
        velocities = [j for j in range(self.nx) if j not in positions]
        if not positions:
            self._axpy(src, depth, None, "x0[j] + th * ka[j]")
            return
        self._axpy(src, depth, None, "x0[j]")
        self._axpy(src, depth, velocities, "x0[j] + th * ka[j]")
        self._chain(src, depth, "ta")
        self._derivs(src, depth, "ta", "kb")
        self._axpy(src, depth, positions, "x0[j] + th * kb[j]")

    def _restart_stage(self, src: _Source, depth: int, chain: bool) -> None:
        src.emit(depth, f"for j in range({self.nx}):", "    x0[j] = x[j]")
        if chain:
            self._chain(src, depth, "ta")
        self._guards(src, depth, "ta", "gs")
        self._derivs(src, depth, "ta", "ka")

    def _continuous(self, src: _Source) -> None:
        d = 2
        chain_first = any(c.block in self.schedule.updates for c in self.schedule.chain)
        if not self.schedule.hybrid:
            src.emit(d, "ta = t", f"th = {self.h!r}")
            self._restart_stage(src, d, chain_first)
            self._step(src, d)
            return
        src.emit(d, f"ev_begin(ev, t, {self.h!r})", "ta = t")
        self._restart_stage(src, d, True)
        src.emit(d, "while True:")
        src.emit(d + 1, "ta = ev[0]", "th = ev[2]")
        self._step(src, d + 1)
        src.emit(d + 1, "te = ta + th")
        self._chain(src, d + 1, "te")
        self._guards(src, d + 1, "te", "ge")
        locate = self.graph.events == "locate"
        src.emit(d + 1, f"act = ev_decide(ev, gs, ge, {locate}, {EVENT_TOL * self.h!r}, stats)",
                 "if act == 0:", "    break", "if act == 2:")
        src.emit(d + 2, "jj = int(ev[8])")
        self._resets(src, d + 2, "te")
        src.emit(d + 2, f"if ev_restart(ev, stats, {self.graph.max_events}) == 0:", "    break",
                 "ta = ev[0]")
        self._restart_stage(src, d + 2, True)

    @property
    def h(self) -> float:
        return 1.0 / self.graph.rate

    # ------------------------------------------------------------ functions
    def _tick(self) -> _Source:
        src = _Source()
        src.emit(1, "for k in range(n_ticks):")
        src.emit(2, "i = tick0 + k", f"t = i / {self.graph.rate!r}")
        for call in self.schedule.calls:
            self._guarded(src, 2, call.block, self._call_output(call, "t"))
        for key, col in self.layout.log.items():
            sig = self.layout.signals[key]
            for e in range(sig.size):
                src.emit(2, f"log[k, {col.start + e}] = {sig.array}[{sig.start + e}]")
        for block in self.schedule.updates:
            self._guarded(src, 2, block, f"{self.kernel(block, 'update')}({self._args(block, 't')})")
        if self.nx or self.ng:
            self._continuous(src)
        return src

    def _work_views(self) -> list[str]:
        n, g = self.nx, self.ng
        names = ["x0", "ka", "kb", "kc", "kd"]
        lines = [f"{nm} = work[{k * n}:{(k + 1) * n}]" for k, nm in enumerate(names)]
        lines += [f"gs = work[{5 * n}:{5 * n + g}]", f"ge = work[{5 * n + g}:{5 * n + 2 * g}]",
                  f"ev = work[{5 * n + 2 * g}:{5 * n + 2 * g + 16}]"]
        return lines

    def _init(self) -> _Source:
        self.views = {}
        body = _Source()
        for block in self.graph.nodes:
            if "init" in self.graph.nodes[block].block.kernels():
                body.emit(1, f"{self.kernel(block, 'init')}({self._state(block)})")
        for call in self.schedule.calls:       # held outputs start from the initial state
            if call.block in self.schedule.held:
                body.emit(1, self._call_output(call, "0.0"))
        src = _Source()
        src.emit(0, "@jit", "def init_all(x, d, m, p, sf, si, sb):")
        src.emit(1, *[f"{k} = {v}" for k, v in self.views.items()])
        src.lines += body.lines
        src.emit(1, "return 0")
        return src

    def generate(self) -> str:
        """The module source: ``init_all(x, d, m, p, sf, si, sb)`` and ``run(...)``."""
        init = self._init()
        self.views = {}
        tick = self._tick()
        src = _Source()
        src.emit(0, f'"""Generated by hapflow for graph {self.graph.name!r}. Do not edit."""', "")
        src.lines += init.lines
        src.emit(0, "", "", "@jit",
                 "def run(n_ticks, tick0, x, d, m, p, sf, si, sb, work, log, stats):")
        src.emit(1, *self._work_views())
        src.emit(1, *[f"{k} = {v}" for k, v in self.views.items()])
        src.lines += tick.lines
        src.emit(1, "return 0")
        return src.text()


def kernel_table(checked: Checked) -> dict[str, object]:
    """Global name -> kernel function for every block kernel the source calls."""
    table = {}
    for k, (name, node) in enumerate(checked.graph.nodes.items()):
        for kind, fn in node.block.kernels().items():
            table[f"b{k}_{kind}"] = fn
    return table
