"""Batched runs: many parameter sets of one graph advanced together in one compiled kernel.

Every run gets its own set of the flat run-time arrays, filled exactly as a
fresh :class:`~hapflow.simulation.Simulation` would fill them (live
parameters packed, initial state, random streams from the run's seed, the
``init`` kernels), but for all runs at once (:meth:`Filler.fill`): a
block's packed parameters and initial state are computed once per distinct
value of the parameters they read, and a block with the default
:meth:`~hapflow.block.Block.pack` gets its varied values written into the
run-by-parameter matrix by numpy indexing, with no Python call per run.

Two layouts advance the runs:

``lanes`` (graphs whose generated tick loop indexes ``f`` only at constant
    offsets and uses no whole-array views: no events, every kernel inlined)
    - the runs are cut into groups of :data:`WIDTH` lanes; a group's arrays
    are flat with element ``i`` of lane ``r`` at ``i * WIDTH + r``.
    :func:`lane_source` rewrites the graph's tick loop so that each tick
    runs over the lanes of a group: ``f[12]`` becomes a local ``f_12``,
    loaded from ``F[12 * WIDTH + r]`` and stored back when a tick may read
    it before writing it (a state; see :func:`_carried`), else stored at the
    last tick only (a signal or solver stage computed afresh), ``m[3]`` becomes
    ``M[3 * WIDTH + r]``, ``log[k, c]`` becomes ``LOG[(k * columns + c) *
    WIDTH + r]``.  With a constant lane count and constant offsets the
    compiler proves the lanes independent and runs them in SIMD registers:
    for the small RK4 testbed of ``bench/study.py``, about 4 ns per run and tick
    on one core against 52 ns for one run after another (the four divisions
    of a tick bound it).
``rows`` (any graph) - :func:`hapflow.compiler.compile_batch` calls the
    graph's own compiled ``run`` on row ``r`` of every array.

With ``parallel``, the groups (or rows) are cut into parts that Python
threads take one after another (the kernels release the GIL).

Both use the very same arithmetic in the same order as the single-run
kernel, so recordings are bit-identical to single runs (the tests check
it).  The recordings stay columnar (:class:`Records`): ``lanes`` keeps the
log as written, ``(groups, ticks, columns, WIDTH)``, ``rows`` as ``(runs,
ticks, columns)``; statistics over time are reductions over axis 1 for all
runs at once, and one run's log is a strided view.  Only live parameters
and the seed may differ between the runs of a batch; structural parameters
change the generated code (build another ``Simulation``).

The ``lanes`` contract with :mod:`hapflow.codegen`: the source of ``run``
has the signature ``run(n_ticks, tick0, f, m, si, sb, log, stats)``, views
assigned one per line before the line ``    for k in range(n_ticks):``, and
the tick body up to the line ``    return 0``.  A tick body that names a view
or one of the arrays other than as ``name[constant]`` (``log[k,
constant]``) does not qualify (:func:`lane_source` returns None, and
``rows`` is used); one-line ``for j in range(N):`` loops are unrolled and
``[a + b]`` constants folded first.  This is a text rewrite of the
generated source because the inliner emits text; a change to the code
generator that breaks the pattern makes graphs fall back to ``rows``, which
the tests notice (they require ``lanes`` for an inlined graph).
"""
from __future__ import annotations

import functools
import math
import re
import threading
import time as _time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numba
import numpy as np

from .block import Block, ParamError
from .compiler import compile_batch, compile_variant
from .errors import GraphError, SimulationError
from .events import EVENTS, OVERFLOW
from .layout import float_bases
from .rng import stream_seeds
from .simulation import RunResult, Simulation, checked_pack

ARRAYS = ("f", "m", "si", "sb", "stats")
"""Run-time arrays, in the kernel's argument order (log aside)."""
WIDTH = 32
"""Lanes per group in the ``lanes`` layout (a constant trip count the compiler vectorises;
32 measured fastest against 8, 16, 64 and 128 for the small RK4 testbed)."""
KEEP_LOG_BYTES = 64 * 2**20
"""A batch keeps its log buffer for the next call up to this size (fresh pages cost a page
fault each: about 2 ms per 8 MB here)."""
PARTS_PER_THREAD = 4
"""The runs of a parallel batch are cut into this many parts per thread (threads that get
less of a shared processor run fewer parts)."""
TRIAL_RUNS, TRIAL_TICKS = 128, 2000
"""Size of the timing trial that picks the faster layout (``layout='auto'``)."""
ELEMENTWISE_CHECKS = frozenset({"positive", "nonnegative", "between.<locals>.check",
                                "at_least.<locals>.check"})
"""Checks of :mod:`hapflow.params` that test every element of an array (one call checks a
whole column of values)."""
INIT_SOURCE = '''"""Generated by hapflow: the graph's init kernels over many runs. Do not edit."""


@jit
def init_rows(F, M, SI, SB):
    for r in range(F.shape[0]):
        init_all(F[r], M[r], SI[r], SB[r])
    return 0
'''


# ---------------------------------------------------------------- the lanes source
def _unroll(lines: list[str]) -> list[str]:
    """Expand ``for j in range(N):`` loops with a one-line body into N lines."""
    out: list[str] = []
    k = 0
    while k < len(lines):
        m = re.match(r"^(\s*)for (\w+) in range\((\d+)\):$", lines[k])
        if m and k + 1 < len(lines):
            indent = len(m.group(1))
            body = lines[k + 1]
            after = lines[k + 2] if k + 2 < len(lines) else ""
            if len(body) - len(body.lstrip()) > indent and \
                    len(after) - len(after.lstrip()) <= indent:
                out += [m.group(1) + re.sub(rf"\b{m.group(2)}\b", str(j), body.strip())
                        for j in range(int(m.group(3)))]
                k += 2
                continue
        out.append(lines[k])
        k += 1
    return out


def _fold(text: str) -> str:
    """``[12 + 3]`` -> ``[15]``."""
    return re.sub(r"\[(\d+) \+ (\d+)\]", lambda m: f"[{int(m.group(1)) + int(m.group(2))}]", text)


def _tick_body(source: str) -> str | None:
    """The tick loop's body of the generated ``run`` (unrolled, folded), or None when it
    uses a whole-array view."""
    head = "def run(n_ticks, tick0, f, m, si, sb, log, stats):\n"
    if head not in source:
        return None
    lines = source.split(head, 1)[1].splitlines()
    try:
        loop = lines.index("    for k in range(n_ticks):")
        end = lines.index("    return 0", loop)
    except ValueError:
        return None
    views = [line.strip().partition(" = ")[0] for line in lines[:loop]]
    text = _fold("\n".join(_unroll(lines[loop + 1:end])))
    if any(re.search(rf"\b{re.escape(v)}\b", text) for v in views):
        return None
    return text


def _carried(body: str) -> set[int]:
    """Elements of ``f`` that a tick may read before it writes them (their values carry
    over from the previous tick).

    An element whose first appearance in the tick body is a plain unconditional
    assignment ``f[i] = expression-without-f[i]`` at the body's own indentation
    is not carried: each tick computes it afresh, so the lanes kernel keeps it
    in a register and stores only its final value.  Every other appearance
    (inside a block, on the right-hand side, augmented or tuple assignment)
    counts as a read.  A body with a statement over several lines (brackets
    left open) is taken as carrying everything.
    """
    lines = [line for line in body.splitlines() if line.strip()]
    if any(line.count(a) != line.count(b) for line in lines for a, b in ("()", "[]", "{}")):
        return {int(i) for i in re.findall(r"\bf\[(\d+)\]", body)}
    indent = min((len(line) - len(line.lstrip()) for line in lines), default=0)
    written: set[int] = set()
    carried: set[int] = set()
    for line in lines:
        m = re.match(r"^ *f\[(\d+)\] = (.*)$", line)
        plain = m is not None and len(line) - len(line.lstrip()) == indent
        reads = re.findall(r"\bf\[(\d+)\]", m.group(2) if plain else line)
        carried.update(int(i) for i in reads if int(i) not in written)
        if plain and int(m.group(1)) not in carried:
            written.add(int(m.group(1)))
    return carried


def _assigned(body: str) -> set[int]:
    """Elements of ``f`` that appear left of an assignment somewhere in the tick body (the
    others, parameters among them, are never stored back)."""
    out: set[int] = set()
    for line in body.splitlines():
        parts = re.split(r"(?<![=!<>])=(?!=)", line, maxsplit=1)
        if len(parts) == 2:
            out.update(int(i) for i in re.findall(r"\bf\[(\d+)\]", parts[0]))
    return out


def lane_source(source: str, columns: int, width: int = WIDTH) -> str | None:
    """The graph's tick loop rewritten over ``width`` lanes (see the module docstring).

    Parameters
    ----------
    source : str
        The generated module source (:attr:`hapflow.compiler.Program.source`).
    columns : int
        Log columns of the graph (``layout.sizes['log']``).
    width : int
        Lanes per group.

    Returns
    -------
    str or None
        Source of ``run_lanes(n_ticks, tick0, F, M, SI, SB, LOG, STATS)``
        (one group: flat arrays, element ``i`` of lane ``r`` at ``i * width
        + r``; ``LOG`` holds ``ticks * columns * width`` values) and
        ``run_blocks`` (the same with a leading group axis, groups one after
        the other), or None when the kernel does not qualify.
    """
    text = _tick_body(source)
    if text is None:
        return None
    used = sorted({int(i) for i in re.findall(r"\bf\[(\d+)\]", text)})
    carried = _carried(text)
    stored = _assigned(text)
    text = re.sub(r"\bf\[(\d+)\]", r"f_\1", text)
    text = re.sub(r"\blog\[k, (\d+)\]",
                  lambda m: f"LOG[k * {columns * width} + {int(m.group(1)) * width} + hf_r]", text)
    text = re.sub(r"\b(m|si|sb|stats)\[(\d+)\]",
                  lambda m: f"{m.group(1).upper()}[{int(m.group(2)) * width} + hf_r]", text)
    if re.search(r"(?<![.\w])(f|m|si|sb|stats|log)\b", text):
        return None                               # a whole array or a computed index
    out = ['"""Generated by hapflow: the graph\'s ticks over lanes of runs. Do not edit."""',
           "", "", "@jit", "def run_lanes(n_ticks, tick0, F, M, SI, SB, LOG, STATS):",
           "    for k in range(n_ticks):", f"        for hf_r in range({width}):"]
    out += [f"            f_{i} = F[{i * width} + hf_r]" for i in used if i in carried]
    out += ["    " + line for line in text.splitlines()]
    out += [f"            F[{i * width} + hf_r] = f_{i}" for i in used
            if i in carried and i in stored]
    rest = [i for i in used if i not in carried and i in stored]
    if rest:                                      # final values only: stored at the last tick
        out += ["            if k == n_ticks - 1:"]
        out += [f"                F[{i * width} + hf_r] = f_{i}" for i in rest]
    out += ["    return 0", "", "", "@jit",
            "def run_blocks(n_ticks, tick0, F, M, SI, SB, LOG, STATS):",
            "    for b in range(F.shape[0]):",
            "        run_lanes(n_ticks, tick0, F[b], M[b], SI[b], SB[b], LOG[b], STATS[b])",
            "    return 0"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- filling the runs' arrays
class _Reads(dict):
    """A block's parameter values that note which names are read."""

    def __init__(self, values: dict[str, Any]):
        super().__init__(values)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)

    def _all(self) -> None:
        self.read.update(super().keys())

    def items(self):
        self._all()
        return super().items()

    def values(self):
        self._all()
        return super().values()

    def keys(self):
        self._all()
        return super().keys()

    def __iter__(self):
        self._all()
        return super().__iter__()


def _traced(block: Block, method: Callable[[], Any]) -> tuple[Any, set[str]]:
    """``method()`` of ``block`` and the parameter names it read.

    A pure function of the block's values whose run at the current values
    never reads parameter ``q`` returns the same for every value of ``q``.
    """
    values = block.values
    block.values = _Reads(values)
    try:
        result = method()
        read = block.values.read
    finally:
        block.values = values
    return result, read


def _elementwise(spec: Any) -> bool:
    check = spec.check
    return check is None or (getattr(check, "__module__", None) == "hapflow.params"
                             and getattr(check, "__qualname__", "") in ELEMENTWISE_CHECKS)


def _column_ok(spec: Any, column: list[Any]) -> np.ndarray | None:
    """The column of a ``float`` parameter as an array when every value is valid (one
    vectorised check), else None."""
    if spec.kind != "float" or not _elementwise(spec):
        return None
    if not all(type(v) in (float, int) or (isinstance(v, (np.floating, np.integer))
                                           and not isinstance(v, bool)) for v in column):
        return None
    values = np.asarray(column, dtype=np.float64)
    if not np.all(np.isfinite(values)) or (spec.check is not None and spec.check(values)):
        return None
    return values


@dataclass
class _Column:
    """Values of one varied live parameter of one block, per run."""

    param: str
    values: list[Any]             # per run, coerced (None where invalid)
    array: np.ndarray | None      # the same as float64 when every value is valid and scalar


class Filler:
    """Builds the initial arrays of many runs of one compiled graph (see the module docstring).

    Parameters
    ----------
    sim : Simulation
        The compiled graph; its blocks' current values are the values of
        parameters a run does not set.  Nothing of it changes.
    """

    def __init__(self, sim: Simulation):
        self.sim = sim
        program = sim.program
        if program.interpreted:
            def init_rows(F, M, SI, SB):
                for r in range(F.shape[0]):
                    program.init_all(F[r], M[r], SI[r], SB[r])
                return 0
            self.init_rows = init_rows
        else:
            self.init_rows = compile_variant(program, "init", INIT_SOURCE).init_rows
        self.base = float_bases(sim.layout)

    def fill(self, settings: Sequence[Mapping[str, Any]], seeds: Sequence[int]
             ) -> tuple[dict[str, np.ndarray], list[Exception | None]]:
        """Initial arrays of every run (one row per run), and per run the error of a bad setting.

        A run with an error keeps a row (a copy of the first valid one, or the
        defaults), so the rows stay aligned with ``settings``.
        """
        sim = self.sim
        n = len(settings)
        errors: list[Exception | None] = [None] * n
        by_block = self._keys(settings, errors)
        a = sim.arrays
        rows = {key: np.zeros((n, a[key].size), dtype=a[key].dtype) for key in ARRAYS}
        seed_rows = np.asarray(seeds, dtype=np.int64)
        for name, node in sim.graph.nodes.items():
            columns = self._columns(name, by_block.get(name, []), settings, errors)
            self._block(name, node.block, columns, rows, seed_rows, errors)
        bad = [r for r, e in enumerate(errors) if e is not None]
        if bad:
            good = [r for r, e in enumerate(errors) if e is None]
            for table in rows.values():
                table[bad] = table[good[0]] if good else 0
        self.init_rows(rows["f"], rows["m"], rows["si"], rows["sb"])
        return rows, errors

    def _keys(self, settings: Sequence[Mapping[str, Any]], errors: list
              ) -> dict[str, list[str]]:
        """Varied parameters by block; a key that is not a live parameter fails its runs
        with the error :meth:`Simulation.set` gives."""
        keys = list(dict.fromkeys(k for values in settings for k in values))
        by_block: dict[str, list[str]] = {}
        for key in keys:
            block, _, param = key.partition(".")
            node = self.sim.graph.nodes.get(block)
            spec = node.block.params.get(param) if node is not None else None
            if spec is not None and spec.live:
                by_block.setdefault(block, []).append(param)
                continue
            first = next(values[key] for values in settings if key in values)
            try:
                self.sim.set(key, first)          # not live: raises, changing nothing
                problem: GraphError = GraphError(f"cannot set {key!r}", block=block)
            except GraphError as exc:
                problem = exc
            for r, values in enumerate(settings):
                if key in values and errors[r] is None:
                    errors[r] = problem
        return by_block

    def _columns(self, name: str, params: list[str], settings: Sequence[Mapping[str, Any]],
                 errors: list) -> list[_Column]:
        """The coerced values of ``params`` of block ``name``; invalid ones fail their runs."""
        block = self.sim.graph.nodes[name].block
        plain = type(block).set is Block.set           # else its own set() checks more
        out = []
        for param in params:
            spec = block.params[param]
            current = block.values[param]
            column = [values.get(f"{name}.{param}", current) for values in settings]
            array = _column_ok(spec, column) if plain else None
            if array is not None:
                out.append(_Column(param, array.tolist(), array))
                continue
            coerced: dict[str, Any] = {}
            values: list[Any] = []
            for r, value in enumerate(column):
                key = repr(value)
                if key not in coerced:
                    coerced[key] = self._coerce(name, param, value, plain)
                got = coerced[key]
                if isinstance(got, GraphError):
                    errors[r] = errors[r] or got
                    values.append(None)
                else:
                    values.append(got)
            out.append(_Column(param, values, None))
        return out

    def _coerce(self, name: str, param: str, value: Any, plain: bool) -> Any:
        """``value`` of ``name.param`` as the block stores it, or the GraphError
        :meth:`Simulation.set` gives for it."""
        block = self.sim.graph.nodes[name].block
        if plain:
            try:
                return block._coerce(param, block.params[param], value)
            except ParamError as exc:
                return GraphError(f"block {name!r}: {exc}", block=name)
        current = block.values[param]
        try:
            self.sim.set(f"{name}.{param}", value)
            return block.values[param]
        except GraphError as exc:
            return exc
        finally:
            self.sim.set(f"{name}.{param}", current)

    def _block(self, name: str, block: Block, columns: list[_Column],
               rows: dict[str, np.ndarray], seeds: np.ndarray, errors: list) -> None:
        """Write block ``name``'s packed parameters, initial state and streams into ``rows``."""
        slots = self.sim.layout.blocks[name]
        p = slots["p"]
        start = self.base["p"] + p.start

        def pack() -> np.ndarray:
            return checked_pack(block, name, p.size)

        def put_p(runs: Any, values: np.ndarray) -> None:
            rows["f"][runs, start:start + p.size] = values

        def put_state(runs: Any, state: tuple) -> None:
            for key, part in zip("xdm", state):
                slot = slots[key]
                array, at = ("m", slot.start) if key == "m" else ("f", self.base[key] + slot.start)
                rows[array][runs, at:at + len(part)] = part

        packed, read = _traced(block, pack)
        varied = [c for c in columns if c.param in read]
        if varied and type(block).pack is Block.pack and all(c.array is not None for c in varied):
            put_p(slice(None), packed)
            for c in varied:
                rows["f"][:, start + self._offset(block, c.param)] = c.array
        else:
            self._per_value(name, varied, errors, packed, pack, put_p)
        state, read = _traced(block, block.initial_state)
        self._per_value(name, [c for c in columns if c.param in read], errors, state,
                        block.initial_state, put_state)
        if block.random_streams:
            m = slots["m"]
            for seed in np.unique(seeds):
                rows["m"][seeds == seed, m.start + block.istate:m.stop] = \
                    stream_seeds(int(seed), name, block.random_streams)

    @staticmethod
    def _offset(block: Block, param: str) -> int:
        """Offset of scalar live ``param`` in the default :meth:`Block.pack` of ``block``."""
        at = 0
        for n, s in block.params.items():
            if n == param:
                return at
            if s.live:
                at += np.atleast_1d(np.asarray(block.values[n], dtype=np.float64)).size
        raise KeyError(param)

    def _per_value(self, name: str, varied: list[_Column], errors: list, base: Any,
                   method: Callable[[], Any], put: Callable[[Any, Any], None]) -> None:
        """``put(runs, method())`` once per distinct combination of the varied values of
        block ``name`` (``base``, computed at the current values, for every run when none
        varies); a combination that makes ``method`` raise fails its runs."""
        if not varied:
            put(slice(None), base)
            return
        block = self.sim.graph.nodes[name].block
        groups: dict[tuple, list[int]] = {}
        for r in range(len(errors)):
            if errors[r] is None:
                groups.setdefault(tuple(repr(c.values[r]) for c in varied), []).append(r)
        saved = {c.param: block.values[c.param] for c in varied}
        for runs in groups.values():
            try:
                for c in varied:                  # valid values: set() as Simulation.set does
                    block.set(c.param, c.values[runs[0]])
                value = method()
            except Exception as exc:  # noqa: BLE001 - fails these runs only
                self._restore(block, saved)
                problem = self._set_error(name, varied, runs[0], exc)
                for r in runs:
                    errors[r] = problem
                continue
            finally:
                self._restore(block, saved)
            put(runs, value)

    @staticmethod
    def _restore(block: Block, saved: dict[str, Any]) -> None:
        for param, value in saved.items():
            block.set(param, value)

    def _set_error(self, name: str, varied: list[_Column], run: int, exc: Exception
                   ) -> Exception:
        """The error :meth:`Simulation.set` gives for run ``run``'s values of block ``name``
        (``exc`` itself when setting them succeeds: it came from ``initial_state``)."""
        sim = self.sim
        saved = {c.param: sim.graph.nodes[name].block.values[c.param] for c in varied}
        problem = exc
        try:
            for c in varied:
                sim.set(f"{name}.{c.param}", c.values[run])
        except GraphError as err:
            problem = err
        finally:
            for param, value in saved.items():
                sim.set(f"{name}.{param}", value)
        return problem


# ---------------------------------------------------------------- records
class Records:
    """The recordings of a batch's runs, columnar (see the module docstring).

    Attributes
    ----------
    sim : Simulation
        The compiled graph.
    runs, ticks : int
        Runs simulated and ticks per run.
    time : ndarray
        Sample times, s (shared by every run).
    events, event_overflows : ndarray of int64
        Per run.
    finite : ndarray of bool
        Per run: the state is finite at the end.
    """

    def __init__(self, sim: Simulation, log: np.ndarray, stats: np.ndarray, finite: np.ndarray,
                 lanes: bool):
        self.sim = sim
        self.log = log      # rows: (runs, ticks, columns); lanes: (groups, ticks, columns, width)
        self.lanes = lanes
        self.runs = len(finite)
        self.ticks = log.shape[1]
        self.time = np.arange(self.ticks) / sim.graph.rate
        self.events = stats[:, EVENTS].astype(np.int64)
        self.event_overflows = stats[:, OVERFLOW].astype(np.int64)
        self.finite = finite

    def per_run(self, values: np.ndarray) -> np.ndarray:
        """Values ``(a, b)`` of a reduction over the time axis of :meth:`component`'s
        array as one value per run."""
        return values.reshape(-1)[:self.runs]

    def run_log(self, j: int) -> np.ndarray:
        """The log rows ``(ticks, columns)`` of run ``j`` (a view)."""
        if self.lanes:
            width = self.log.shape[3]
            return self.log[j // width, :, :, j % width]
        return self.log[j]

    def signals(self, j: int) -> dict[str, np.ndarray]:
        """Recorded signals of run ``j`` as :meth:`Simulation.columns` gives them."""
        return self.sim.columns(self.run_log(j))

    def component(self, signal: str, index: int | None) -> tuple[np.ndarray, int]:
        """Component ``index`` (default 0) of recorded signal ``block.port`` of every run:
        an array ``(a, ticks, columns, b)`` (C order, the log itself for ``float64``
        signals) and the column to read; a run is one ``(a, b)`` pair, in the order of
        :meth:`per_run`.  Values are those :meth:`signals` holds (cast to the port's
        dtype and back to ``float64``)."""
        block, _, port = signal.partition(".")
        col = self.sim.layout.log[(block, port)].start + (index or 0)
        log = self.log if self.lanes else self.log[:, :, :, None]
        dtype = self.sim.graph.nodes[block].block.outputs[port].dtype
        if dtype == "f8":
            return log, col
        kind = {"i8": np.int64, "b1": np.bool_}[dtype]
        return log[:, :, col:col + 1, :].astype(kind).astype(np.float64), 0


# ---------------------------------------------------------------- the batch
@functools.lru_cache(maxsize=None)
def _pool(helpers: int) -> ThreadPoolExecutor:
    """``helpers`` worker threads for batches (created once per process and size)."""
    return ThreadPoolExecutor(helpers, thread_name_prefix="hapflow-batch")


class Batch:
    """Runs of one compiled graph with different live parameters and seeds.

    Parameters
    ----------
    sim : Simulation
        The compiled graph (left unchanged; its blocks' values are the values
        of parameters a run does not set).
    parallel : bool
        Spread the runs over ``numba.get_num_threads()`` threads (Python threads
        running the kernel on parts of the runs); else one thread.
    layout : {'auto', 'lanes', 'rows'}
        ``auto``: for a graph that qualifies for ``lanes`` (see
        :func:`lane_source`) a short timing trial of both layouts picks the
        faster (results are bit-identical either way), else ``rows``;
        ``lanes`` raises ValueError for a graph that does not qualify.

    Attributes
    ----------
    layout : str
        The layout in use, ``lanes`` or ``rows``.
    """

    def __init__(self, sim: Simulation, parallel: bool = True, layout: str = "auto"):
        if layout not in ("auto", "lanes", "rows"):
            raise ValueError(f"layout must be auto, lanes or rows, got {layout!r}")
        self.sim = sim
        self.parallel = parallel
        self.filler = Filler(sim)
        self.columns = sim.layout.sizes["log"]
        source = None if sim.program.interpreted or layout == "rows" else \
            lane_source(sim.program.source, self.columns)
        if layout == "lanes" and source is None:
            raise ValueError(f"graph {sim.graph.name!r} does not qualify for the lanes layout "
                             "(events, a kernel that is not inlined, or a computed index)")
        self.threads = numba.get_num_threads() if parallel else 1
        self._buffer = np.empty(0)
        kernels = {"rows": compile_batch(sim.program, parallel=False)}
        if source is not None:
            kernels["lanes"] = compile_variant(sim.program, "lanes", source).run_blocks
        a = sim.arrays
        one = {key: a[key][None, :].copy() for key in ARRAYS}
        for item in kernels.items():                   # compile now (or load from the cache)
            self.layout, self.kernel = item
            self._advance(one, 0)
        chosen = layout if layout != "auto" else min(kernels.items(), key=self._trial)[0] \
            if len(kernels) > 1 else "rows"
        self.layout, self.kernel = chosen, kernels[chosen]

    def _trial(self, item: tuple[str, Callable]) -> float:
        """Best of two wall times of ``TRIAL_RUNS`` copies of the current state for
        ``TRIAL_TICKS`` ticks."""
        self.layout, self.kernel = item
        a = self.sim.arrays
        walls = []
        for _ in range(2):
            rows = {key: np.repeat(a[key][None, :], TRIAL_RUNS, axis=0) for key in ARRAYS}
            start = _time.perf_counter()
            self._advance(rows, TRIAL_TICKS)
            walls.append(_time.perf_counter() - start)
        return min(walls)

    def _advance(self, rows: dict[str, np.ndarray], n: int) -> Records:
        """Run ``n`` ticks from tick 0 on ``rows`` (one row per run)."""
        runs = rows["f"].shape[0]
        base = float_bases(self.sim.layout)
        if self.layout == "rows":
            log = self._log((runs, n, self.columns))
            self._call(n, [*(rows[k] for k in ARRAYS[:4]), log, rows["stats"]])
            finite = np.isfinite(rows["f"][:, base["x"]:base["p"]]).all(axis=1)    # x then d
            return Records(self.sim, log, rows["stats"], finite, lanes=False)
        groups = math.ceil(runs / WIDTH)
        pad = np.minimum(np.arange(groups * WIDTH), runs - 1)     # spare lanes repeat a run
        lanes = {k: np.ascontiguousarray(v[pad].reshape(groups, WIDTH, v.shape[1])
                                         .transpose(0, 2, 1)).reshape(groups, -1)
                 for k, v in rows.items()}
        log = self._log((groups, n * self.columns * WIDTH))
        self._call(n, [*(lanes[k] for k in ARRAYS[:4]), log, lanes["stats"]])

        def per_run(key: str) -> np.ndarray:
            v = lanes[key].reshape(groups, -1, WIDTH).transpose(0, 2, 1)
            return v.reshape(groups * WIDTH, -1)[:runs]
        x = lanes["f"].reshape(groups, -1, WIDTH)[:, base["x"]:base["p"]]
        finite = np.isfinite(x).all(axis=1).reshape(-1)[:runs]
        return Records(self.sim, log.reshape(groups, n, self.columns, WIDTH), per_run("stats"),
                       finite, lanes=True)

    def _log(self, shape: tuple[int, ...]) -> np.ndarray:
        """An uninitialised log of ``shape``: the kept buffer when it is large enough."""
        size = math.prod(shape)
        if self._buffer.size < size:
            buffer = np.empty(size)
            if buffer.nbytes <= KEEP_LOG_BYTES:
                self._buffer = buffer
            return buffer.reshape(shape)
        return self._buffer[:size].reshape(shape)

    def _call(self, n: int, arrays: list[np.ndarray]) -> None:
        """The kernel on ``arrays`` (leading axis: runs or groups), cut into parts that this
        thread and ``threads - 1`` helpers take one after another (the kernels release the
        GIL), so a thread that gets more of the processor runs more parts.

        Python threads wait asleep where numba's OpenMP ``prange`` threads spin:
        with the other core busy, 1000 runs of the small testbed took 255 ms
        through ``prange`` on two threads against 17 ms on one thread."""
        count = arrays[0].shape[0]
        parts = min(count, PARTS_PER_THREAD * self.threads)
        if self.threads <= 1 or parts <= 1:
            self.kernel(n, 0, *arrays)
            return
        edges = [count * k // parts for k in range(parts + 1)]
        todo = iter([[a[lo:hi] for a in arrays] for lo, hi in zip(edges[:-1], edges[1:])])
        lock = threading.Lock()

        def work() -> None:
            while True:
                with lock:
                    part = next(todo, None)
                if part is None:
                    return
                self.kernel(n, 0, *part)
        futures = [_pool(self.threads - 1).submit(work) for _ in range(self.threads - 1)]
        work()
        for future in futures:
            future.result()

    def log_bytes(self, duration: float) -> int:
        """Bytes of recorded samples one run of ``duration`` s needs while its batch runs."""
        return self.ticks(duration) * self.columns * 8

    def ticks(self, duration: float | None) -> int:
        """Ticks of a run of ``duration`` s (default: the graph's)."""
        g = self.sim.graph
        return int(round((g.duration if duration is None else float(duration)) * g.rate))

    def simulate(self, settings: Sequence[Mapping[str, Any]], seeds: Sequence[int],
                 duration: float | None = None) -> tuple[Records | None, list[int],
                                                         list[Exception | None]]:
        """Run one batch from tick 0, recordings kept columnar.

        Parameters
        ----------
        settings : sequence of dict
            Per run, live parameters ``{"block.param": value}`` (others keep the
            blocks' current values).
        seeds : sequence of int
            Per run, the graph seed of its random streams.
        duration : float, optional
            Simulated seconds (default: the graph's).

        Returns
        -------
        records : Records or None
            The runs that were simulated (None if none was).  Its log may be
            a buffer the next :meth:`simulate` or :meth:`run` of this batch
            overwrites: use it (or copy it) before.
        good : list of int
            Their positions in ``settings`` (run ``j`` of ``records`` is
            ``settings[good[j]]``).
        errors : list of Exception or None
            Per run of ``settings``, the error that kept it from running: the
            :class:`GraphError` of a setting that names an unknown or
            structural parameter or a bad value (as :meth:`Simulation.set`
            gives it), or what a block's ``initial_state`` raised.
        """
        if len(settings) != len(seeds):
            raise ValueError(f"{len(settings)} settings but {len(seeds)} seeds")
        rows, errors = self.filler.fill(settings, seeds)
        good = [r for r, e in enumerate(errors) if e is None]
        if not good:
            return None, good, errors
        if len(good) < len(errors):
            rows = {key: np.ascontiguousarray(table[good]) for key, table in rows.items()}
        return self._advance(rows, self.ticks(duration)), good, errors

    def run(self, settings: Sequence[Mapping[str, Any]], seeds: Sequence[int],
            duration: float | None = None) -> list[RunResult | Exception]:
        """Run one batch from tick 0; every run's recording as a :class:`RunResult`.

        Parameters are those of :meth:`simulate`.

        Returns
        -------
        list of RunResult or Exception
            Per run its result, or its error: a :class:`GraphError` for a bad
            setting (the run is left out), a :class:`SimulationError` for a
            state that became non-finite.  The other runs are unaffected.
            ``wall`` is the batch's wall time (filling the runs' arrays, the
            kernel, the records) divided by the number of runs.
        """
        start = _time.perf_counter()
        records, good, errors = self.simulate(settings, seeds, duration)
        out: list[RunResult | Exception] = list(errors)
        for j, r in enumerate(good):
            out[r] = self.result(records, j)
        wall = (_time.perf_counter() - start) / max(1, len(settings))
        for result in out:
            if isinstance(result, RunResult):
                result.wall = wall
        return out

    def result(self, records: Records, j: int) -> RunResult | SimulationError:
        """Run ``j`` of ``records`` as a :class:`RunResult` (``wall`` 0), or its error."""
        sim = self.sim
        if not records.finite[j]:
            return SimulationError(f"state became non-finite by t = "
                                   f"{records.ticks / sim.graph.rate:g} s (batched run); check "
                                   "the parameters (an unstable loop, a too-large step for a "
                                   "stiff system)")
        return RunResult(records.ticks, 0.0, sim.graph.rate, time=records.time,
                         signals=records.signals(j), events=int(records.events[j]),
                         event_overflows=int(records.event_overflows[j]))
