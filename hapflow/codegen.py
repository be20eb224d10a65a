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

import re

from .graph import Checked
from .inline import ArrayArg, ExprArg, inline
from .layout import FLOAT_ARRAYS, Layout, Slot, float_bases
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

    def __init__(self, checked: Checked, schedule: Schedule, layout: Layout, inline: bool = True):
        self.inline = inline
        self.globals: dict[str, object] = {}
        self.sites = 0
        self.graph = checked.graph
        self.schedule = schedule
        self.layout = layout
        self.index = {name: k for k, name in enumerate(self.graph.nodes)}
        self.nx = layout.sizes["x"]
        self.ng = layout.sizes["g"]
        self.stages = 4 if self.graph.solver == "rk4" else 2
        self.views: dict[str, str] = {}
        self.base = float_bases(layout)
        work = self.base["work"]
        n, g = self.nx, self.ng
        self.work = {"x0": work, "ka": work + n, "kb": work + 2 * n, "kc": work + 3 * n,
                     "kd": work + 4 * n, "gs": work + 5 * n, "ge": work + 5 * n + g,
                     "ev": work + 5 * n + 2 * g}

    # ------------------------------------------------------------ names
    def kernel(self, block: str, kind: str) -> str:
        """Global name of a block's kernel in the generated module."""
        return f"b{self.index[block]}_{kind}"

    def _view(self, name: str, code: str) -> str:
        self.views[name] = code
        return name

    def _slot(self, prefix: str, slot: Slot) -> str:
        return self._view(f"{prefix}{slot.array}_{slot.start}_{slot.stop}", slot.code())

    def _flat(self, array: str, start: int) -> tuple[str, int]:
        """(array, start) in the run-time arrays: float arrays live in ``f``."""
        if array in FLOAT_ARRAYS:
            return "f", self.base[array] + start
        if array in self.work:
            return "f", self.work[array] + start
        return array, start

    def _slot_arg(self, slot: Slot) -> ArrayArg:
        return ArrayArg(*self._flat(slot.array, slot.start), slot.size)

    def _w(self, array: str, index: int | str) -> str:
        """Source for element ``index`` of a float or work array (index: int or ``"j"``)."""
        name, base = self._flat(array, 0)
        if isinstance(index, int):
            return f"{name}[{base + index}]"
        return f"{name}[{base} + {index}]" if base else f"{name}[{index}]"

    def _arguments(self, block: str, t: str, extra: list) -> list:
        slots = self.layout.blocks[block]
        node = self.graph.nodes[block].block
        ins = [self._slot_arg(self.layout.inputs[(block, port)]) for port in node.inputs]
        return [ExprArg(t), *(self._slot_arg(slots[k]) for k in "xdm"), self._slot_arg(slots["p"]),
                *ins, *extra]

    def _outputs(self, block: str) -> list[ArrayArg]:
        spec = self.graph.nodes[block].block.outputs
        return [self._slot_arg(self.layout.signals[(block, port)]) for port in spec]

    def _part(self, array: str, block: str, key: str) -> ArrayArg:
        slot = self.layout.blocks[block][key]
        return ArrayArg(*self._flat(array, slot.start), slot.size)

    def _resolve(self, name: str, value: object) -> str:
        alias = f"g_{name}"
        k = 1
        while alias in self.globals and self.globals[alias] is not value:
            k += 1
            alias = f"g_{name}_{k}"
        self.globals[alias] = value
        return alias

    def _invoke(self, block: str, kind: str, t: str, *extra) -> list[str]:
        """Lines running ``kind`` of ``block``: its inlined body, or a call on views."""
        args = self._arguments(block, t, list(extra))
        fn = self.graph.nodes[block].block.kernels()[kind]
        self.sites += 1
        multi_dim = any(len(self.graph.nodes[block].block.inputs[p].shape) > 1
                        for p in self.graph.nodes[block].block.inputs) or any(
            len(o.shape) > 1 for o in self.graph.nodes[block].block.outputs.values())
        marker = f"# {block}.{kind}"
        if self.inline and not multi_dim:
            lines = inline(fn, args, f"c{self.sites}_", self._resolve, self._arg_code)
            if lines is not None:
                return [marker, *lines]
        return [marker, f"{self.kernel(block, kind)}({', '.join(self._arg_code(a) for a in args)})"]

    def _arg_code(self, arg) -> str:
        if isinstance(arg, ExprArg):
            return arg.code
        slot = Slot(arg.array, arg.start, arg.start + arg.size)
        return self._view(f"v_{arg.array}_{arg.start}_{arg.start + arg.size}", slot.code())

    # ------------------------------------------------------------ pieces
    def _hit(self, block: str) -> str | None:
        node = self.graph.nodes[block]
        if node.divider == 1:
            return None
        return f"if (i - {node.offset}) % {node.divider} == 0:"

    def _guarded(self, src: _Source, depth: int, block: str, lines: list[str]) -> None:
        hit = self._hit(block)
        if hit:
            src.emit(depth, hit)
            src.emit(depth + 1, *lines)
        else:
            src.emit(depth, *lines)

    def _call_output(self, call: Call, t: str) -> list[str]:
        return self._invoke(call.block, "output", t, *self._outputs(call.block))

    def _chain(self, src: _Source, depth: int, t: str) -> None:
        for call in self.schedule.chain:
            src.emit(depth, *self._call_output(call, t))

    def _derivs(self, src: _Source, depth: int, t: str, stage: str) -> None:
        for block in self.schedule.continuous:
            src.emit(depth, *self._invoke(block, "deriv", t, self._part(stage, block, "x")))

    def _guards(self, src: _Source, depth: int, t: str, target: str) -> None:
        for block in self.schedule.hybrid:
            src.emit(depth, *self._invoke(block, "guard", t, self._part(target, block, "g")))

    def _resets(self, src: _Source, depth: int, t: str) -> None:
        keyword = "if"
        for block in self.schedule.hybrid:
            g = self.layout.blocks[block]["g"]
            src.emit(depth, f"{keyword} jj < {g.stop}:")
            src.emit(depth + 1, *self._invoke(block, "reset", t, ExprArg(f"jj - {g.start}")))
            keyword = "elif"

    def _axpy(self, src: _Source, depth: int, indices: list[int] | None, rhs: str,
              target: str = "x") -> None:
        """``target[j] = rhs(j)`` for the given state indices (all when None).

        ``rhs`` names work arrays as ``x0[j]``, ``ka[j]``...; they become
        constant-offset elements of ``f``.
        """
        def element(index: int | str) -> str:
            return re.sub(r"\b(x0|ka|kb|kc|kd|x)\[j\]", lambda mt: self._w(mt.group(1), index), rhs)

        if indices is None:
            src.emit(depth, f"for j in range({self.nx}):",
                     f"    {self._w(target, 'j')} = {element('j')}")
        else:
            src.emit(depth, *[f"{self._w(target, j)} = {element(j)}" for j in indices])

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
        self._axpy(src, depth, None, "x[j]", target="x0")
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
                array, index = self._flat(sig.array, sig.start + e)
                src.emit(2, f"log[k, {col.start + e}] = {array}[{index}]")
        for block in self.schedule.updates:
            self._guarded(src, 2, block, self._invoke(block, "update", "t"))
        if self.nx or self.ng:
            self._continuous(src)
        return src

    def _work_views(self) -> list[str]:
        """Views the event helpers take whole."""
        g, w = self.ng, self.work
        return [f"gs = f[{w['gs']}:{w['gs'] + g}]", f"ge = f[{w['ge']}:{w['ge'] + g}]",
                f"ev = f[{w['ev']}:{w['ev'] + 16}]"]

    def _init(self) -> _Source:
        self.views = {}
        body = _Source()
        for block in self.graph.nodes:
            if "init" in self.graph.nodes[block].block.kernels():
                slots = self.layout.blocks[block]
                views = [self._arg_code(self._slot_arg(slots[k])) for k in "xdmp"]
                body.emit(1, f"{self.kernel(block, 'init')}({', '.join(views)})")
        for call in self.schedule.calls:       # held outputs start from the initial state
            if call.block in self.schedule.held:
                body.emit(1, *self._call_output(call, "0.0"))
        src = _Source()
        src.emit(0, "@jit", "def init_all(f, m, si, sb):")
        src.emit(1, *[f"{k} = {v}" for k, v in self.views.items()])
        src.lines += body.lines
        src.emit(1, "return 0")
        return src

    def generate(self) -> str:
        """The module source: ``init_all(f, m, si, sb)`` and ``run(n_ticks, tick0, f, m, si, sb, log, stats)``."""
        init = self._init()
        self.views = {}
        tick = self._tick()
        src = _Source()
        src.emit(0, '"""Generated by hapflow. Do not edit."""', "")
        src.lines += init.lines
        src.emit(0, "", "", "@jit",
                 "def run(n_ticks, tick0, f, m, si, sb, log, stats):")
        src.emit(1, *self._work_views())
        src.emit(1, *[f"{k} = {v}" for k, v in self.views.items()])
        src.lines += tick.lines
        src.emit(1, "return 0")
        return src.text()


def block_at_line(source: str, line: int) -> str | None:
    """Name of the block whose kernel produced ``line`` (1-based) of ``source``."""
    lines = source.splitlines()
    for text in reversed(lines[:line]):
        text = text.strip()
        if text.startswith("# ") and "." in text:
            return text[2:].split(".")[0]
    return None


def kernel_table(checked: Checked) -> dict[str, object]:
    """Global name -> kernel function for every block kernel the source calls."""
    table = {}
    for k, (name, node) in enumerate(checked.graph.nodes.items()):
        for kind, fn in node.block.kernels().items():
            table[f"b{k}_{kind}"] = fn
    return table
