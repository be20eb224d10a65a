"""Generate the Python source of a graph's ``run(n_ticks, ...)`` kernel.

The kernel calls each block's kernels in schedule order on constant slices
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

Each step is a **phase**: a list of kernel call *sites* (block, kernel,
arguments, sample-hit condition).  Two ways to turn phases into code:

``fused``
    every site's kernel body is pasted into ``run`` at constant offsets of
    the float buffer ``f`` (see :mod:`hapflow.inline`).  Fastest code, but
    numba compiles one straight-line function in time that grows as
    N^1.4-1.8 with the number of sites.
``units``
    the sites are cut into compile units of bounded size
    (:mod:`hapflow.partition`); each unit is a function of its own, in a
    module of its own named by the hash of its source
    (:class:`UnitSource`).  A unit addresses its regions relative to base
    offsets it takes as arguments, so identical subsystems (replicated
    devices) generate the same text and share one compiled function, and a
    graph edit recompiles only the units that changed.  ``run`` calls one
    function per phase, which calls the units with their offsets; a small
    unit's code is pasted into the phase function by LLVM instead
    (:data:`INLINED_UNIT_LINES`).
    ``init_all`` calls the units of the ``init`` kernels, then the tick's
    outputs phase with its start flag set (held outputs only): the held
    outputs are compiled once, not again for the start.

In both modes the ``init`` kernels are inlined like the tick's kernels.  They
used to be called as written, each a compile of its own per graph: a Kalman
filter's ``init`` is a closure over its sizes and offsets, so the test suite
compiled 39 of them (8.6 s CPU) where the inlined text calls one shared
helper (``init_from``).

:func:`hapflow.compiler.choose_mode` picks between them (its
``FUSED_MAX_LINES`` says what was measured).

Every element access and view goes through an *addressing*
(:mod:`hapflow.lanes`), so the same phases and sites give the per-run kernel
``run`` and the batched kernel ``run_lanes`` (every tick over a group of
interleaved runs, :mod:`hapflow.batch`), in either mode: the batched kernel
is generated, not rewritten from the text of ``run``.

The same source runs compiled (``numba.njit``) or interpreted (plain Python,
kernels' ``py_func``): the names ``jit`` and the kernels are injected by
:mod:`hapflow.compiler`.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field, replace

import numpy as np

from . import events
from .graph import Checked
from .inline import ArrayArg, ExprArg, inline
from .inline import size as kernel_size
from .lanes import Flat, Lanes, registers
from .layout import FLOAT_ARRAYS, STATS_SIZE, Layout, float_bases
from .partition import cut
from .reuse import pure_names, reuse_calls
from .schedule import Call, Schedule

EVENT_TOL = 1e-10
"""Event time tolerance as a fraction of the tick length."""
UNIT_ARGS = ("f", "m", "si", "sb", "F", "M", "SI", "SB", "i", "t", "k", "r", "start")
"""Leading parameters a compile unit may take: the run-time arrays (of one run, or of
a group of lanes), the tick index, the time, a guard index (resets), the lane and the
start flag (outputs: 1 runs only the held outputs, for ``init_all``); it takes those
its code names, then its base offsets.  Every argument costs: an array is
passed as seven machine words, and units are called a few times per tick."""

INIT_TICKS = -1
"""``run(INIT_TICKS, ...)`` runs ``init_all`` (when compiled) and no tick: ``run`` holds
``init_all``'s code, so a warm start loads one function from numba's cache, not two
(:mod:`hapflow.compiler` says what that saves)."""
TICK_ONLY = "if start == 0:"
"""Condition of a site of the outputs phase that ``init_all`` does not run (units)."""

INLINED_UNIT_LINES = 44
"""Largest unit, in lines of its body, compiled as ``@ijit`` rather than ``@cjit``: with
LLVM's ``alwaysinline`` (:data:`hapflow.compiler.INLINED_OPTIONS`), so that its code is
pasted into the phase functions that call it instead of being called.  numba still
compiles the unit once; LLVM then optimises each copy with its base offsets as constants
(addresses folded, no wrap-around checks on the indices, values kept in registers from
one unit to the next).  A big unit stays a call: its copies cost LLVM more time and
memory than the call costs at run time.

Measured with ``bench/compile.py --child cold`` (fresh caches, one process each; cold
CPU s, peak RSS in MB of 10^6 bytes, us per tick):

===========================  =====================  =====================  =====================
graph                        every unit called      inlined up to 44       every unit inlined
===========================  =====================  =====================  =====================
distinct N = 300, 67 units   157 s, 742 MB, 44.2    163 s, 741 MB, 26.8    205 s, 976 MB, 22.3
replicated N = 300           6.0 s, 1.85            7.4 s, 1.40            (all are small)
replicated N = 1000          16.0 s, 295 MB, 10.6   25.4 s, 374 MB, 7.0    (all are small)
===========================  =====================  =====================  =====================

Up to 74 lines: distinct N = 300 177 s, 743 MB, 28.9 us.  Distinct N = 1000 (221 units,
children compiling them) inlined up to 44: 425 s, 1002 MB (955 MiB), one run.  The
replicated loops' units are 12 to 39 lines, the distinct graph's 5 to 132."""

RUN_ARRAYS = frozenset({"f", "m", "si", "sb", "log", "stats"})
"""The distinct arrays a run or a unit indexes (see :func:`hapflow.reuse.reuse_calls`)."""
POINTED_ARRAYS = ("f", "m", "si")
"""The numeric run arrays a generated function indexes through a pointer
(:mod:`hapflow.elements`) when it does nothing else with them."""
LANE_ARRAYS = ("F", "M", "SI", "LOG", "STATS")
"""The same for a group's arrays in ``run_lanes``: its lanes' views are then strided
pointer views, without the atomic reference counts that kept the loop over lanes scalar."""


class _Source:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def emit(self, depth: int, *lines: str) -> None:
        self.lines.extend("    " * depth + line for line in lines)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass(frozen=True)
class Site:
    """One kernel call: ``kind`` of ``block`` on ``args`` at time ``t``.

    ``regions`` gives, per argument, what it addresses (for relocation):
    ``("x",)``, ``("d",)``, ``("m",)``, ``("p",)`` (the block's own state
    and parameters), ``("sig", array, block)`` (an output signal of
    ``block``), ``("dx",)`` / ``("gv",)`` (the derivative or guard target of
    a solver stage, offsets relative to the stage's base), ``()`` (scalar).
    """

    block: str
    kind: str
    t: str
    args: tuple
    regions: tuple
    hit: str | None = None


@dataclass
class UnitSource:
    """A compile unit: one function ``unit(<params>, b0, b1, ...)`` in a module of its own.

    Attributes
    ----------
    name : str
        Module name, ``hu_`` and a hash of everything that shapes its code.
    source : str
        Module source.
    namespace : dict
        Kernels and other globals the source names.
    blocks : list of str
        The blocks of its sites, in order, for the graph it was made for
        (another graph's identical unit has other names).
    lines : list of int
        First source line (1-based) of each site.
    bases : int
        Number of base offsets it takes.
    params : tuple of str
        Those of :data:`UNIT_ARGS` its code uses, which it takes before the bases.
    """

    name: str
    source: str
    namespace: dict
    blocks: list[str]
    lines: list[int]
    bases: int = 0
    params: tuple[str, ...] = UNIT_ARGS
    origins: dict[str, tuple] = field(default_factory=dict)
    """Where each name of :attr:`namespace` comes from: ``("kernel", block, kind)`` or
    ``("global", block, kind, name)`` (a global of that kernel), so the namespace can be
    rebuilt without generating the source again (:mod:`hapflow.sourcecache`)."""

    def call(self, values: dict[str, str], bases: list[str]) -> str:
        """Source of a call: ``values`` maps each of :data:`UNIT_ARGS` to an expression."""
        return f"{self.name}({', '.join([*(values[p] for p in self.params), *bases])})"

    def block_at(self, line: int) -> str | None:
        """Block whose site produced ``line`` (1-based) of the source."""
        found = None
        for first, block in zip(self.lines, self.blocks):
            if first <= line:
                found = block
        return found


@dataclass
class Generated:
    """The generated code of a graph.

    Attributes
    ----------
    source : str
        Source of the main module (``init_all``, ``run``, phase functions).
    namespace : dict
        Kernels and other globals it names (units included, by name).
    units : dict of str to UnitSource
        Compile units the main module calls (empty when fused).
    mode : str
        ``fused`` or ``units``.
    """

    source: str
    namespace: dict
    units: dict[str, UnitSource] = field(default_factory=dict)
    mode: str = "fused"
    origins: dict[str, tuple] = field(default_factory=dict)
    """As :attr:`UnitSource.origins`, for the aliases of the main module (its kernels are
    :func:`kernel_table`)."""


class Generator:
    """Writes the kernel source for a checked, scheduled and laid-out graph.

    Parameters
    ----------
    mode : {'fused', 'units'}
        How phases become code (see the module docstring).
    unit_lines : int
        Most kernel source lines of one compile unit (mode ``units``; see
        :mod:`hapflow.partition`).
    lanes : int
        0: the per-run kernel ``run``; else the kernel ``run_lanes`` over
        groups of that many runs (see :mod:`hapflow.lanes`).
    memory : set of int, optional
        With ``lanes``: the elements of ``f`` that views and computed indices
        reach (:attr:`hapflow.lanes.Lanes.reached` of a first pass).
    constants : dict of int to float, optional
        With ``lanes``: elements of ``f`` with one value in every run (see
        :class:`hapflow.lanes.Lanes`).
    """

    def __init__(self, checked: Checked, schedule: Schedule, layout: Layout, inline: bool = True,
                 mode: str = "fused", unit_lines: int = 120, lanes: int = 0,
                 memory: set[int] | None = None, constants: dict[int, float] | None = None):
        self.address = Lanes(lanes, layout.sizes["log"], mode == "fused", memory, constants) \
            if lanes else Flat()
        self.inline = inline
        self.mode = mode
        self.unit_lines = unit_lines
        self.globals: dict[str, object] = {}
        self.origins: dict[str, tuple] = {}
        self.units: dict[str, UnitSource] = {}
        self.kernel_names: dict[str, object] | None = None
        self.offsets: dict[int, int] = {}
        self.unit_memo: dict[tuple, UnitSource] = {}
        self.structures: dict[str, str] = {}
        self.phases: dict[str, tuple[str, list[str]]] = {}
        self.sites = 0
        self.checked = checked
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

    def _flat(self, array: str, start: int) -> tuple[str, int]:
        """(array, start) in the run-time arrays: float arrays live in ``f``."""
        if array in FLOAT_ARRAYS:
            return "f", self.base[array] + start
        if array in self.work:
            return "f", self.work[array] + start
        return array, start

    def _slot_arg(self, slot) -> ArrayArg:
        return ArrayArg(*self._flat(slot.array, slot.start), slot.size)

    def _w(self, array: str, index: int | str) -> str:
        """Source for element ``index`` of a float or work array (index: int or ``"j"``)."""
        name, base = self._flat(array, 0)
        if isinstance(index, int):
            return self._at(name, base + index, base, self.nx)
        return self._at(name, f"{base} + {index}" if base else index, base, self.nx)

    def _at(self, array: str, index: int | str, start: int, size: int) -> str:
        """Source for element ``index`` (an int or an expression) of run-time array
        ``array``, within ``[start, start + size)``."""
        node = ast.Constant(index) if isinstance(index, int) else \
            ast.parse(index, mode="eval").body
        return ast.unparse(self.address.element(array, start, size, node, ast.Load()))

    def _element(self, arg: ArrayArg, index: ast.expr, ctx: ast.expr_context) -> ast.expr:
        return self.address.element(arg.array, arg.start, arg.size, index, ctx)

    def _resolve(self, name: str, value: object, site: Site) -> str:
        """The generated module's name for global ``name`` (``value``) of ``site``'s kernel."""
        alias = f"g_{name}"
        k = 1
        while alias in self.globals and self.globals[alias] is not value:
            k += 1
            alias = f"g_{name}_{k}"
        self.globals[alias] = value
        self.origins.setdefault(alias, ("global", site.block, site.kind, name))
        return alias

    def _arg_code(self, arg) -> str:
        if isinstance(arg, ExprArg):
            return arg.code
        base = f"{arg.base}_" if arg.base else ""
        code = self.address.view(arg.array, arg.start, arg.size,
                                 arg.index(ast.Constant(arg.start)),
                                 arg.index(ast.Constant(arg.start + arg.size)))
        return self._view(f"v_{arg.array}_{base}{arg.start}_{arg.start + arg.size}", code)

    # ------------------------------------------------------------ sites
    def _site(self, block: str, kind: str, t: str, extra: list[tuple[object, tuple]],
              hit: bool = False) -> Site:
        """The call of ``kind`` of ``block``; ``extra`` are (argument, region) pairs."""
        slots = self.layout.blocks[block]
        node = self.graph.nodes[block].block
        args: list[tuple[object, tuple]] = [] if kind == "init" else [(ExprArg(t), ())]
        args += [(self._slot_arg(slots[key]), (key,)) for key in "xdm"]
        args.append((self._slot_arg(slots["p"]), ("p",)))
        for port in () if kind == "init" else node.inputs:
            wire = self.checked.drivers.get((block, port))    # None: optional, unwired, zeros
            arg = self._slot_arg(self.layout.inputs[(block, port)])
            args.append((arg, ("sig", arg.array, wire.src[0] if wire else block)))
        args += extra
        return Site(block, kind, t, tuple(a for a, _ in args), tuple(r for _, r in args),
                    self._hit(block) if hit else None)

    def _output_site(self, call: Call, t: str, hit: bool = False) -> Site:
        spec = self.graph.nodes[call.block].block.outputs
        outs = []
        for port in spec:
            arg = self._slot_arg(self.layout.signals[(call.block, port)])
            outs.append((arg, ("sig", arg.array, call.block)))
        return self._site(call.block, "output", t, outs, hit)

    def _target(self, stage: str | None, block: str, kind: str) -> tuple[ArrayArg, tuple]:
        """The part of a solver-stage array a ``deriv`` or ``guard`` of ``block`` writes
        (stage None: relative to the stage base)."""
        slot = self.layout.blocks[block]["x" if kind == "deriv" else "g"]
        region = ("dx",) if kind == "deriv" else ("gv",)
        if stage is None:
            return ArrayArg("f", slot.start, slot.size), region
        return ArrayArg(*self._flat(stage, slot.start), slot.size), region

    def _lines(self, site: Site, prefix: str) -> list[str]:
        """Lines running ``site``: its inlined body, or a call on views."""
        fn = self.graph.nodes[site.block].block.kernels()[site.kind]
        block = self.graph.nodes[site.block].block
        multi_dim = any(len(block.inputs[p].shape) > 1 for p in block.inputs) or any(
            len(o.shape) > 1 for o in block.outputs.values())
        if self.inline and not multi_dim:
            lines = inline(fn, list(site.args), prefix,
                           lambda name, value: self._resolve(name, value, site), self._arg_code,
                           self._element if self.address.width else None)
            if lines is not None:
                return lines
        name = self._kernel_name(site)
        return [f"{name}({', '.join(self._arg_code(a) for a in site.args)})"]

    def _kernel_name(self, site: Site) -> str:
        """The kernel's global name: per graph (fused), or per unit in order of first use."""
        if self.kernel_names is None:
            return self.kernel(site.block, site.kind)
        fn = self.graph.nodes[site.block].block.kernels()[site.kind]
        for name, known in self.kernel_names.items():
            if known is fn:
                return name
        name = f"k{len(self.kernel_names)}_{site.kind}"
        self.kernel_names[name] = fn
        self.origins[name] = ("kernel", site.block, site.kind)
        return name

    def _fused(self, site: Site) -> list[str]:
        if site.kind != "init":
            self.sites += 1
        lines = [f"# {site.block}.{site.kind}", *self._lines(site, f"c{self.sites}_")]
        if site.hit:
            return [lines[0], site.hit, *("    " + line for line in lines[1:])]
        return lines

    # ------------------------------------------------------------ phases
    def _phase(self, src: _Source, depth: int, name: str, sites: list[Site],
               t: str, target: str | None = None, start: int | None = None) -> None:
        """Emit ``sites`` (fused) or a call of phase function ``name`` (units).

        ``start`` (units, phase ``outputs`` only): the value of the phase's start
        flag, when its sites are conditioned on one (see :meth:`_outputs`)."""
        if self.mode == "fused":
            for site in sites:
                src.emit(depth, *self._fused(site))
            return
        if not sites:
            return
        if name not in self.phases:
            extra = ", dx" if name == "derivs" else ", gv" if name == "guards" else ""
            extra += ", start" if start is not None else ""
            self.phases[name] = (extra, self._unit_calls(sites))
        args = f"{self._arrays}, i, {t}" + "".join(
            f", {self._constant(int(v))}" for v in (target, start) if v is not None)
        src.emit(depth, f"ph_{name}({args})")

    @property
    def _arrays(self) -> str:
        """The run-time arrays phase functions take (and, over lanes, the lane)."""
        a = self.address.arrays
        return f"{a['f']}, {a['m']}, {a['si']}, {a['sb']}" + (", r" if self.address.width else "")

    def _unit_calls(self, sites: list[Site]) -> list[str]:
        """Calls of the compile units that run ``sites`` (the body of a phase function).

        A unit whose every site runs only in the tick proper (``if start == 0:``)
        is called under that condition and generated without it: the same code as
        those sites anywhere else, and no start flag to pass."""
        lines = []
        for group in cut(sites, self._site_cost, self._site_key, self.unit_lines):
            tick_only = all(site.hit == TICK_ONLY for site in group)
            if tick_only:
                group = [replace(site, hit=None) for site in group]
            unit, bases = self._unit(group)
            call = unit.call(dict(zip(UNIT_ARGS, UNIT_ARGS), k="0"), bases)
            lines += [TICK_ONLY, "    " + call] if tick_only else [call]
        return lines

    def _site_cost(self, site: Site) -> int:
        return kernel_size(self.graph.nodes[site.block].block.kernels()[site.kind])

    def _structure(self, block: str) -> str:
        known = self.structures.get(block)
        if known is None:
            known = self.structures[block] = repr(self.graph.nodes[block].block.structural_key())
        return known

    def _site_key(self, site: Site) -> str:
        """What makes two sites generate the same code, up to offsets."""
        return f"{self._structure(site.block)} {site.kind} {site.hit} {site.t}"

    def _relocate(self, sites: list[Site]) -> tuple[list[Site], list[str]]:
        """``sites`` with array arguments relative to base offsets, and the base values."""
        own = {s.block for s in sites}
        groups: dict[tuple, int] = {}
        keys = []
        for site in sites:
            row = []
            for arg, region in zip(site.args, site.regions):
                if not region:
                    row.append(None)
                    continue
                key = region[:2] if region[0] != "sig" or region[2] in own \
                    else ("ext", arg.array, arg.start)
                groups[key] = min(groups.get(key, arg.start), arg.start)
                row.append(key)
            keys.append(row)
        names = {key: f"b{j}" for j, key in enumerate(groups)}
        moved = []
        for site, row in zip(sites, keys):
            args = tuple(a if key is None else
                         ArrayArg(a.array, a.start - groups[key], a.size, names[key])
                         for a, key in zip(site.args, row))
            moved.append(Site(site.block, site.kind, site.t, args, site.regions, site.hit))
        # literal offsets: a unit is compiled for one int64 signature and no other
        # (hapflow.compiler), so they convert; numba types them faster than OFFSETS[j]
        # (the 300-block replicated graph compiled in 4.4 s against 7.2 s)
        values = [f"{'dx + ' if key == ('dx',) else 'gv + ' if key == ('gv',) else ''}{v}"
                  for key, v in groups.items()]
        return moved, values

    def _constant(self, value: int) -> str:
        """``OFFSETS[j]`` holding ``value``: an int64 that numba does not specialise on.

        A literal argument would be typed ``Literal[int](value)`` and compile
        the callee once per distinct value."""
        if value not in self.offsets:
            self.offsets[value] = len(self.offsets)
        return f"OFFSETS[{self.offsets[value]}]"

    def _unit(self, sites: list[Site]) -> tuple[UnitSource, list[str]]:
        """The compile unit running ``sites``, and the base offsets to call it with."""
        moved, bases = self._relocate(sites)
        key = tuple((self._site_key(site), site.args) for site in moved)
        known = self.unit_memo.get(key)
        if known is not None:      # a repeated subsystem: same code, other offsets
            return replace(known, blocks=[s.block for s in sites]), bases
        saved = self.globals, self.views, self.kernel_names, self.origins
        self.globals, self.views, self.kernel_names, self.origins = {}, {}, {}, {}
        try:
            body, firsts = [], []
            hit = None
            for j, site in enumerate(moved):
                block = self.graph.nodes[site.block].block
                firsts.append(len(body))
                if site.hit and site.hit != hit:    # consecutive sites under one condition
                    body.append(site.hit)
                hit = site.hit
                indent = "    " if site.hit else ""
                body.append(f"{indent}# {type(block).__name__}.{site.kind}")
                self.views = {}
                lines = self._lines(site, f"c{j}_")
                # views where they are used: a unit runs every tick, and a slice costs
                # a dozen instructions to normalise (hoisted before the loop when fused)
                lines = [f"{k} = {v}" for k, v in self.views.items()] + lines
                body += [indent + line for line in lines]
            body = reuse_calls(body, pure_names({**self.globals, **self.kernel_names}),
                               RUN_ARRAYS)
            names = {n.id for n in ast.walk(ast.parse("\n".join(body))) if isinstance(n, ast.Name)}
            used = tuple(p for p in UNIT_ARGS if p in names)
            params = ", ".join([*used, *(f"b{j}" for j in range(len(bases)))])
            decorator = "@ijit" if len(body) <= INLINED_UNIT_LINES else "@cjit"
            head = ['"""Generated by hapflow: one compile unit. Do not edit."""', "", "",
                    decorator, f"def unit({params}):",
                    *("    " + line for line in element_prologue(body))]
            text = "\n".join(head + ["    " + line for line in body] + ["    return 0"]) + "\n"
            offset = len(head) + 1
            namespace = {**self.globals, **self.kernel_names}
            origins = self.origins
        finally:
            self.globals, self.views, self.kernel_names, self.origins = saved
        structure = [self._structure(s.block) for s in sites]
        digest = hashlib.sha256(f"{text}\n{structure!r}".encode()).hexdigest()[:20]
        unit = UnitSource(f"hu_{digest}", text, namespace, [s.block for s in sites],
                          [offset + f for f in firsts], len(bases), used, origins)
        self.units.setdefault(unit.name, unit)
        self.unit_memo[key] = unit
        return unit, bases

    # ------------------------------------------------------------ pieces
    def _hit(self, block: str, start: bool = False) -> str | None:
        """The sample-hit condition of ``block`` (None: every tick); with ``start``, also
        true when the start flag is set (a held output in ``init_all``)."""
        node = self.graph.nodes[block]
        if node.divider == 1:
            return None
        either = "start != 0 or " if start else ""
        return f"if {either}(i - {node.offset}) % {node.divider} == 0:"

    def _chain(self, src: _Source, depth: int, t: str) -> None:
        self._phase(src, depth, "chain", [self._output_site(c, "t" if self.mode == "units" else t)
                                          for c in self.schedule.chain], t)

    def _derivs(self, src: _Source, depth: int, t: str, stage: str) -> None:
        self._staged(src, depth, "derivs", "deriv", self.schedule.continuous, t, stage)

    def _guards(self, src: _Source, depth: int, t: str, target: str) -> None:
        self._staged(src, depth, "guards", "guard", self.schedule.hybrid, t, target)

    def _staged(self, src: _Source, depth: int, phase: str, kind: str, blocks: list[str],
                t: str, stage: str) -> None:
        """``kind`` of every block in ``blocks``, writing into solver-stage array ``stage``."""
        units = self.mode == "units"
        sites = [self._site(b, kind, "t" if units else t,
                            [self._target(None if units else stage, b, kind)])
                 for b in blocks]
        self._phase(src, depth, phase, sites, t, str(self.work[stage]))

    def _resets(self, src: _Source, depth: int, t: str) -> None:
        keyword = "if"
        for block in self.schedule.hybrid:
            g = self.layout.blocks[block]["g"]
            src.emit(depth, f"{keyword} jj < {g.stop}:")
            if self.mode == "fused":
                src.emit(depth + 1, *self._fused(self._site(block, "reset", t,
                                                            [(ExprArg(f"jj - {g.start}"), ())])))
            else:
                site = self._site(block, "reset", "t", [(ExprArg("k"), ())])
                unit, bases = self._unit([site])
                values = dict(zip(UNIT_ARGS, UNIT_ARGS), t=t, k=f"jj - {g.start}")
                src.emit(depth + 1, unit.call(values, bases))
            keyword = "elif"

    def _axpy(self, src: _Source, depth: int, indices: list[int] | None, rhs: str,
              target: str = "x") -> None:
        """``target[j] = rhs(j)`` for the given state indices (all when None).

        ``rhs`` is a function of a work-array element accessor: it names work
        arrays as ``w("x0", j)``..., which become constant-offset elements of ``f``.
        """
        if indices is None and self.address.width and self.mode == "fused":
            indices = list(range(self.nx))           # constant offsets: registers over lanes
        if indices is None:
            src.emit(depth, f"for j in range({self.nx}):",
                     f"    {self._w(target, 'j')} = {rhs(lambda a: self._w(a, 'j'))}")
        else:
            src.emit(depth, *[f"{self._w(target, j)} = {rhs(lambda a, j=j: self._w(a, j))}"
                              for j in indices])

    def _step(self, src: _Source, depth: int) -> None:
        """Integrate from (ta, x0) over th into x; ``ka`` already holds f(ta, x0)."""
        if self.stages == 4:
            for stage, prev, frac in (("kb", "ka", "0.5"), ("kc", "kb", "0.5"), ("kd", "kc", "1.0")):
                self._axpy(src, depth, None,
                           lambda w, prev=prev, frac=frac: f"{w('x0')} + ({frac} * th) * {w(prev)}")
                src.emit(depth, f"ts = ta + {frac} * th")
                self._chain(src, depth, "ts")
                self._derivs(src, depth, "ts", stage)
            self._axpy(src, depth, None, lambda w: f"{w('x0')} + (th / 6.0) * ({w('ka')} + 2.0 * "
                                                   f"{w('kb')} + 2.0 * {w('kc')} + {w('kd')})")
            return
        positions = list(self.layout.position_states)
        velocities = [j for j in range(self.nx) if j not in positions]
        if not positions:
            self._axpy(src, depth, None, lambda w: f"{w('x0')} + th * {w('ka')}")
            return
        self._axpy(src, depth, None, lambda w: w("x0"))
        self._axpy(src, depth, velocities, lambda w: f"{w('x0')} + th * {w('ka')}")
        self._chain(src, depth, "ta")
        self._derivs(src, depth, "ta", "kb")
        self._axpy(src, depth, positions, lambda w: f"{w('x0')} + th * {w('kb')}")

    def _restart_stage(self, src: _Source, depth: int, chain: bool) -> None:
        self._axpy(src, depth, None, lambda w: w("x"), target="x0")
        if chain:
            self._chain(src, depth, "ta")
        self._guards(src, depth, "ta", "gs")
        self._derivs(src, depth, "ta", "ka")

    def _continuous(self, src: _Source) -> None:
        d = 0
        chain_first = any(c.block in self.schedule.updates for c in self.schedule.chain)
        if not self.schedule.hybrid:
            src.emit(d, "ta = t", f"th = {self.h!r}")
            self._restart_stage(src, d, chain_first)
            self._step(src, d)
            return
        src.emit(d, f"ev_begin(ev, t, {self.h!r})", "ta = t")
        self._restart_stage(src, d, True)
        src.emit(d, "while True:")
        src.emit(d + 1, "ta = ev[EV_TA]", "th = ev[EV_TH]")
        self._step(src, d + 1)
        src.emit(d + 1, "te = ta + th")
        self._chain(src, d + 1, "te")
        self._guards(src, d + 1, "te", "ge")
        locate = self.graph.events == "locate"
        src.emit(d + 1, f"act = ev_decide(ev, gs, ge, {locate}, {EVENT_TOL * self.h!r}, stats)",
                 "if act == 0:", "    break", "if act == 2:")
        src.emit(d + 2, "jj = int(ev[EV_J])")
        self._resets(src, d + 2, "te")
        src.emit(d + 2, f"if ev_restart(ev, stats, {self.graph.max_events}) == 0:", "    break",
                 "ta = ev[EV_TA]")
        self._restart_stage(src, d + 2, True)

    @property
    def h(self) -> float:
        return 1.0 / self.graph.rate

    # ------------------------------------------------------------ functions
    def _log(self, src: _Source, depth: int) -> None:
        for key, col in self.layout.log.items():
            sig = self.layout.signals[key]
            for e in range(sig.size):
                array, index = self._flat(sig.array, sig.start + e)
                value = self._at(array, index, index, 1)
                src.emit(depth, f"{self.address.log(col.start + e)} = {value}")

    def _tick(self) -> _Source:
        """The statements of one tick (at depth 0)."""
        src = _Source()
        src.emit(0, "i = tick0 + k", f"t = i / {self.graph.rate!r}")
        t = "t"
        self._phase(src, 0, "outputs", self._outputs(t), t, start=0 if self._starts else None)
        if self.mode == "fused" or len(self.layout.log) <= 8 or self.address.width:
            self._log(src, 0)
        else:
            src.emit(0, "record(f, m, si, sb, log, k)")
        self._phase(src, 0, "updates", [self._site(b, "update", t, [], hit=True)
                                        for b in self.schedule.updates], t)
        if self.nx or self.ng:
            self._continuous(src)
        return src

    def _work_views(self) -> list[str]:
        """Views the event helpers take whole (and, over lanes, the lane's statistics)."""
        def view(array: str, start: int, size: int) -> str:
            return self.address.view(array, start, size, ast.Constant(start),
                                     ast.Constant(start + size))
        g, w = self.ng, self.work
        lines = [f"gs = {view('f', w['gs'], g)}", f"ge = {view('f', w['ge'], g)}",
                 f"ev = {view('f', w['ev'], 16)}"]
        if self.address.width:
            lines.append(f"stats = {view('stats', 0, STATS_SIZE)}")
        return lines

    @property
    def _starts(self) -> bool:
        """Whether the outputs phase takes a start flag: units with held outputs."""
        return self.mode == "units" and any(c.block in self.schedule.held
                                            for c in self.schedule.calls)

    def _outputs(self, t: str) -> list[Site]:
        """The output calls of a tick, held blocks' at their sample hits.

        With a start flag (:attr:`_starts`) the same sites also give ``init_all``
        its held outputs: a held site runs at its hits or when ``start`` is set,
        any other site only when it is not (:data:`TICK_ONLY`).  ``init_all``
        calls the tick's own phase function: no second copy of the held outputs
        to compile."""
        sites = [self._output_site(c, t, hit=True) for c in self.schedule.calls]
        if not self._starts:
            return sites
        held = self.schedule.held
        return [replace(site, hit=self._hit(site.block, start=True) if site.block in held
                        else TICK_ONLY) for site in sites]

    def _init_lines(self) -> list[str]:
        """The body of ``init_all``: every ``init`` kernel, then the held outputs from the
        initial state (units: the tick's outputs phase with its start flag set); empty when
        there is nothing to initialise."""
        self.views = {}
        body = _Source()
        units = self.mode == "units"
        t = "t" if units else "0.0"
        sites = [self._site(block, "init", t, []) for block in self.graph.nodes
                 if "init" in self.graph.nodes[block].block.kernels()]
        if not units:
            sites += [self._output_site(call, t) for call in self.schedule.calls
                      if call.block in self.schedule.held]
        if units and (sites or self._starts):
            # an int64, not the literal 0 numba types a constant as: ph_outputs, called with
            # run's tick index too, would be compiled a second time for the literal
            body.emit(0, "i = np.int64(0)")
        self._phase(body, 0, "start", sites, "0.0")
        if self._starts:
            self._phase(body, 0, "outputs", self._outputs(t), "0.0", start=1)
        return [f"{k} = {v}" for k, v in self.views.items()] + body.lines

    @staticmethod
    def _init(lines: list[str]) -> _Source:
        """``init_all`` with body ``lines``."""
        src = _Source()
        if not lines:      # nothing to initialise: no numba compile, no cache load
            src.emit(0, "def init_all(f, m, si, sb):", "    return 0")
            return src
        src.emit(0, "@jit", "def init_all(f, m, si, sb):")
        src.emit(1, *element_prologue(lines), *lines, "return 0")
        return src

    def _phase_functions(self) -> _Source:
        src = _Source()
        for name, (extra, calls) in self.phases.items():
            src.emit(0, "", "", "@cjit", f"def ph_{name}({self._arrays}, i, t{extra}):")
            src.emit(1, *calls, "return 0")
        if self.mode == "units" and len(self.layout.log) > 8 and not self.address.width:
            log = _Source()
            self._log(log, 0)
            src.emit(0, "", "", "@jit", "def record(f, m, si, sb, log, k):")
            src.emit(1, *element_prologue(log.lines), *log.lines, "return 0")
        return src

    def _symbols(self) -> list[str]:
        """The symbol header: where every state, parameter and signal lives, by name."""
        rows = []
        for name, slots in self.layout.blocks.items():
            for key, what in (("x", "continuous state"), ("d", "discrete state"),
                              ("p", "parameters"), ("m", "integer state")):
                slot = slots[key]
                array, start = self._flat(slot.array, slot.start)
                named = self.layout.fields.get((name, key), [])
                for field, offset, size, unit in named:
                    role = f"[{unit}]" if unit else what[:-1] if key == "p" else what
                    rows.append((array, start + offset, size, f"{name}.{key}.{field}", role))
                rest = slot.size - sum(size for _, _, size, _ in named)
                if rest:                  # unnamed: the whole slot, or what follows the names
                    rows.append((array, start + slot.size - rest, rest, f"{name}.{key}",
                                 what if not named else "random streams"))
        for (block, port), slot in self.layout.signals.items():
            rows.append((*self._flat(slot.array, slot.start), slot.size, f"{block}.{port}",
                         f"[{slot.unit}]" if slot.unit else ""))
        for key in ("x0", "ka", "kb", "kc", "kd"):
            if self.nx:
                rows.append(("f", self.work[key], self.nx, key, "solver stage"))
        lines = ["# symbols (array[offset], name, unit or role):"]
        for array, start, size, name, what in sorted(rows):
            where = f"{array}[{start}]" if size == 1 else f"{array}[{start}:{start + size}]"
            lines.append(f"#   {where:<14} {name:<28} {what}".rstrip())
        return lines + [""]

    def generate(self) -> str:
        """The module source (see :meth:`build`)."""
        return self.build().source

    def build(self) -> Generated:
        """The main module's source and namespace, and the compile units it calls:
        ``init_all`` and ``run``, or over lanes ``run_lanes`` and ``run_blocks``."""
        init_lines = [] if self.address.width else self._init_lines()
        init = _Source() if self.address.width else self._init(init_lines)
        self.views = {}
        tick = self._tick()
        phases = self._phase_functions()
        src = _Source()
        src.emit(0, '"""Generated by hapflow. Do not edit."""', "")
        src.lines += self._symbols()
        if self.offsets:
            src.emit(0, f"OFFSETS = np.array({list(self.offsets)!r}, dtype=np.int64)", "")
        for name, values in self.address.constant_views.items():
            text = ", ".join(ast.unparse(ast.Constant(v)) for v in values)
            src.emit(0, f"{name} = np.array([{text}])", "")
        src.lines += init.lines
        src.lines += phases.lines
        src.lines += self._lanes_run(tick) if self.address.width else \
            self._run(tick, initialises=bool(init_lines))
        namespace = {**base_namespace(self.checked), **self.globals}
        return Generated(src.text(), namespace, dict(self.units), self.mode, dict(self.origins))

    def _run(self, tick: _Source, initialises: bool) -> list[str]:
        """``run``: views made once, then the ticks; or, called with
        :data:`INIT_TICKS` ticks, ``init_all`` (compiled ``init_all`` only)."""
        src = _Source()
        body = _Source()
        if self.schedule.hybrid:
            body.emit(0, *self._work_views())
        body.emit(0, *[f"{k} = {v}" for k, v in self.views.items()])
        body.emit(0, "for k in range(n_ticks):")
        body.emit(1, *tick.lines)
        body.emit(0, "return 0")
        src.emit(0, "", "", "@jit", "def run(n_ticks, tick0, f, m, si, sb, log, stats):")
        if initialises:
            src.emit(1, "if n_ticks == INIT_TICKS:", "    return init_all(f, m, si, sb)")
        lines = reuse_calls(body.lines, pure_names(self.globals), RUN_ARRAYS)
        src.emit(1, *element_prologue(lines), *lines)
        return src.lines

    def _lanes_run(self, tick: _Source) -> list[str]:
        """``run_lanes`` (one group: every tick over its lanes, registers loaded and stored
        around the tick) and ``run_blocks`` (groups one after the other)."""
        body = (self._work_views() if self.schedule.hybrid else []) + \
            [f"{k} = {v}" for k, v in self.views.items()] + tick.lines
        loads, stores, finals = registers(ast.parse("\n".join(body)).body)
        w = self.address.width

        def at(name: str) -> str:
            return f"F[{int(name[2:]) * w} + r]"
        lane = [f"{name} = {at(name)}" for name in loads] + \
            reuse_calls(body, pure_names(self.globals), frozenset(Lanes.arrays.values())) + \
            [f"{at(name)} = {name}" for name in stores]
        if finals:                   # computed afresh every tick: the last tick's values only
            lane += ["if k == n_ticks - 1:", *[f"    {at(name)} = {name}" for name in finals]]
        src = _Source()
        src.emit(0, "", "", "@jit", "def run_lanes(n_ticks, tick0, F, M, SI, SB, LOG, STATS):")
        # the lane count as one the compiler cannot see (F holds at least the solver's work
        # space for each lane): with a constant it unrolls a short tick's loop over the
        # lanes whole, and leaves the copies scalar
        src.emit(1, f"n_lanes = min(F.size, {w})")
        src.emit(1, *element_prologue(lane, LANE_ARRAYS))
        src.emit(1, "for k in range(n_ticks):")
        src.emit(2, "for r in range(n_lanes):")
        src.emit(3, *lane)
        src.emit(1, "return 0", "", "")
        src.emit(0, "@jit", "def run_blocks(n_ticks, tick0, F, M, SI, SB, LOG, STATS):")
        src.emit(1, "for b in range(F.shape[0]):")
        src.emit(2, "run_lanes(n_ticks, tick0, F[b], M[b], SI[b], SB[b], LOG[b], STATS[b])")
        src.emit(1, "return 0")
        return src.lines


def element_prologue(lines: list[str], names: tuple[str, ...] = POINTED_ARRAYS) -> list[str]:
    """``f = elements(f)`` for each of ``names`` that the function body ``lines``
    (at depth 0) indexes and never uses otherwise.

    An array passed whole (to a phase function or a unit) stays an array: its
    callee is compiled for the array type."""
    tree = ast.parse("\n".join(lines))
    bases = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Subscript)}
    indexed, other = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (indexed if id(node) in bases else other).add(node.id)
    return [f"{name} = elements({name})" for name in names
            if name in indexed and name not in other]


def block_at_line(source: str, line: int) -> str | None:
    """Name of the block whose kernel produced ``line`` (1-based) of ``source``."""
    lines = source.splitlines()
    for text in reversed(lines[:line]):
        text = text.strip()
        if text.startswith("# ") and "." in text:
            return text[2:].split(".")[0]
    return None


def base_namespace(checked: Checked) -> dict[str, object]:
    """What the main module names besides its aliases: the kernels, numpy, event fields."""
    return {**kernel_table(checked), "np": np, "EV_TA": events.TA, "EV_TH": events.TH,
            "EV_J": events.J, "INIT_TICKS": INIT_TICKS}


def kernel_table(checked: Checked) -> dict[str, object]:
    """Global name -> kernel function for every block kernel the source calls."""
    table = {}
    for k, (name, node) in enumerate(checked.graph.nodes.items()):
        for kind, fn in node.block.kernels().items():
            table[f"b{k}_{kind}"] = fn
    return table
