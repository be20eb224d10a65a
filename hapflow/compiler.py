"""Compile a graph: check, schedule, lay out, generate, and load the kernel.

The generated source is written to a content-hashed file in the cache folder
(``$HAPFLOW_CACHE_DIR``, else ``$XDG_CACHE_HOME/hapflow``, else
``~/.cache/hapflow``) and compiled with ``numba.njit(cache=True,
error_model="numpy")``, so a second process loads machine code from disk
instead of compiling.  The hash covers the source, the numba and Python
versions, the structural parameters of every block and the text of every
module that defines a kernel, because numba's own cache does not notice
changes in called functions.

``interpret=True`` runs the very same source as plain Python with each
kernel's ``py_func``: the reference the compiled kernel is tested against.

A graph generated as compile units (:mod:`hapflow.codegen`) has one more
module per distinct unit, ``<cache>/hu_<unit hash>_<dependency hash>.py``:
units repeated within a graph or across graphs load the same module, so
they are compiled once per cache.

Where a cold compile of units goes (``distinct(300, 0)`` of
``bench/compile.py``, 78 units, 99 s CPU at load 7; CPU time per numba
pass from its ``numba:run_pass`` events, exclusive of nested compiles):

- the units, 51 s: numba's lowering 37 s (of it LLVM 16 s: function
  passes, then the module at O3 with every helper it calls linked in, then
  machine code), type inference 8 s;
- ``run``, ``init_all`` and the phase functions, 11 s, nearly all LLVM:
  numba links a callee's code into every caller, so each unit's code is
  optimised and emitted again in its phase function and again in ``run``;
- the Kalman steps of :mod:`hapflow.closures` 18 s (9 s numba inlining
  their ``inline="always"`` matrix helpers; the steps' text has held those
  bodies since: see :mod:`hapflow.closures`) and the other helpers and
  kernels 14 s: about 50 block types, a cost that does not grow with N;
- compiling a helper again for another literal argument value (``False``
  flags, section offsets): 40 extra compiles of 17 functions, 4 s.

``init_all`` compiles no output code of its own: it calls the ``init``
kernels' units, then the tick's own outputs phase with its start flag set,
which runs every held output once and no other
(:meth:`hapflow.codegen.Generator._outputs`).  Its units used to hold
every held output a second time, without its sample-hit condition: a fifth
of the units' compile by the earlier estimate (with an empty ``init_all``
this graph compiled 63 units in 79 s against 78 in 96-98 s).  Measured
before / after, alternating in one session at load 8-11 (cold CPU s of
``Simulation``, fresh caches): distinct N = 300 (``bench/compile.py
--sizes 300 --fused-max 0``) 78 -> 67 units, 110, 99 -> 101, 100 s, a
gain lost in the noise; distinct N = 100 32 -> 26 units, 59, 57 -> 56,
53 s; replicated N = 300 10 -> 8 units, 5.0, 3.9 -> 4.8, 4.6 s; run speed
unchanged (replicated N = 300, 5 alternating warm runs: median 8.5
against 8.5 ns per block and tick).  Presumably (not measured) much of
what the old start units cost was the helpers they compiled first, which
the tick's units now compile instead.  The fused mode keeps its inlined
``init_all``: there numba's compile of ``init_all`` itself (helpers
excluded) took 0.23-1.7 s of 2.3-47 s per graph (``graphs/virtual_wall``,
``colton2005_sweep``, ``kkf_probe``, ``flexible_link_ekf``,
``slider_crank_torque``), the helpers it shares with ``run`` being the
bulk; sharing the outputs with ``run`` would take them out of the one fused
function (views made every tick, no reuse of a pure call across phases) for
at most that.  Compiling it without LLVM optimisation (``optnone``) saved
nothing (1.69 against 1.73 s): the cost is numba's typing and lowering.

A warm start loads ``run`` alone, and without the code linked into it.
numba loads a cached function by parsing the LLVM bitcode of everything
linked into it (kept for callers that link the function in turn):
``distinct(1000)`` loaded ``run`` (3.1 MB of bitcode) in 0.15 s and
``init_all`` (1.6 MB: the outputs phase again) in 0.075 s.  ``run`` now
calls ``init_all`` when given :data:`hapflow.codegen.INIT_TICKS` ticks, so
it holds that code too, and it is cached by :class:`hapflow.jit.EntryCache`,
which loads a symbol table in place of the bitcode (the rows batch, whose
code links ``run``'s, names :func:`hapflow.jit.linkable` instead).  Warm
starts of ``bench/compile.py`` (``distinct`` N = 1000, 5 alternating with
a9f2852, medians): ``Simulation`` 0.41 -> 0.355 s, first tick 1.01 -> 0.95 s
with ``init_all`` in ``run`` (a quiet hour); then with the symbol table,
``Simulation`` 0.46 -> 0.24 s, first tick 1.19 -> 0.96 s (an hour when
numba's own set-up took 0.25-0.30 s instead of 0.22).

Unit size is no lever there (K below is ``unit_lines``; CPU s, ns per block
and tick at load 6-7): K = 120 lines 101 s / 109 ns, 240 97 s / 108 ns,
480 102 s / 151 ns; nor is the phase level: ``run`` calling the units
directly compiled in 96 s against 98 s, and ran at 113 against 102 ns
(medians of 6 alternating runs at load 11-13).
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import hashlib
import inspect
import itertools
import marshal
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

from . import elements as element_access
from . import events, sourcecache
from .cachedir import cache_dir, write_whole
from .codegen import INIT_TICKS, Generated, Generator, UnitSource, block_at_line
from .errors import GraphError
from .graph import Checked, Graph
from .inline import size as kernel_size
from .jit import entry_cached, linkable, take_undecided
from .layout import STATS_SIZE, Layout, build_layout
from .schedule import Schedule, build_schedule

JIT_OPTIONS = {"cache": True, "error_model": "numpy", "nogil": True}
"""The kernels release the GIL: the recorder writes a chunk to HDF5 on its own thread while
the next chunk runs (:mod:`hapflow.recorder`)."""
CALLEE_OPTIONS = {**JIT_OPTIONS, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
"""Options of the generated functions only compiled code calls (units, phases): numba
builds no wrapper for calls from Python or C.  Measured on a 17-argument unit: a wrapper
pair took 45 ms of a one-line unit's 70 ms to compile and 85 ms of a 30-line unit's
320 ms, and its code is loaded with the unit on every warm start.  Such a function must
never be called from Python: its entry point has no code behind it."""
INLINED_OPTIONS = {**CALLEE_OPTIONS, "forceinline": True}
"""Options of a small compile unit (``@ijit``, :data:`hapflow.codegen.INLINED_UNIT_LINES`):
LLVM pastes its code into each phase function that calls it."""


@dataclass
class Program:
    """A compiled (or interpreted) graph, ready to run.

    ``run`` and ``init_all`` are called from Python; compiled code calls
    :func:`hapflow.jit.linkable` of ``run`` (see :class:`hapflow.jit.EntryCache`).
    """

    checked: Checked
    schedule: Schedule
    layout: Layout
    source: str
    path: Path | None
    run: Callable
    init_all: Callable
    interpreted: bool
    units: dict[str, UnitSource]
    mode: str
    inline: bool = True
    from_cache: bool = False
    """Whether numba's disk cache held the machine code of ``run``, which holds
    ``init_all``'s (a warm start: the first call loads it instead of compiling)."""
    compiled_init: bool = False
    """Whether the kernel module's ``init_all`` is compiled (the graph has something to
    initialise); ``init_all`` here then calls ``run``, which holds its code."""

    def block_at(self, path: str, line: int) -> str | None:
        """The block whose kernel produced ``line`` of generated file ``path``, if any."""
        for unit in self.units.values():
            if Path(path).name.startswith(unit.name):
                return unit.block_at(line)
        if self.path is not None and Path(path) == self.path:
            return block_at_line(self.source, line)
        return None


_STARTED_NS = time.time_ns()
"""Files changed after this may no longer hold the code this process runs."""


def _file_text(path: str) -> str:
    """A module's text, as the code this process runs from it.

    The text is read again only when the file changed (graphs share a few
    kernel modules).  A file edited after this process started may differ
    from the code the process imported, and a kernel compiled from the old
    code must not be stored under the new text's name, where a later process
    would load it as current: such a file's text carries the digest of the
    loaded code too.  Generated modules in the cache folder are exempt: each is
    named by the hash of its text and written once (:func:`load_module`), so its
    text is the code loaded from it.  Without the exemption a frozen Kalman step
    binding another one got one name in the process that wrote the callee and
    another in every later process: each graph's Kalman steps compiled twice
    from an empty cache (slider_crank_torque: 40 s, then 33 s again).
    """
    stat = os.stat(path)
    text = _read(path, stat.st_mtime_ns, stat.st_size)
    if stat.st_mtime_ns >= _STARTED_NS and Path(path).parent != cache_dir():
        text += "\0loaded " + _loaded_code_digest(path)
    return text


def _loaded_code_digest(path: str) -> str:
    """Digest of the functions and methods of the imported modules defined by ``path``."""
    h = hashlib.sha256()
    target = os.path.realpath(path)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file is None or _real_path(file) != target:
            continue
        for name, value in sorted(vars(module).items(), key=lambda item: item[0]):
            for code in _codes(value):
                h.update(name.encode())
                _hash_code(h, code)
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def _real_path(file: str) -> str:
    """A loaded module's file with its links resolved, once per file: a digest above walks
    every loaded module (thousands in a long session: each generated kernel is one), and
    resolving a path takes an ``lstat`` per folder of it, for every file digested."""
    return os.path.realpath(file)


def _codes(value: object) -> list[types.CodeType]:
    """Code objects of a function, a numba dispatcher (a block's kernels are static methods
    around one) or a class's methods."""
    value = getattr(value, "__func__", value)             # staticmethod, classmethod
    value = getattr(value, "py_func", value)
    if isinstance(value, types.FunctionType):
        return [value.__code__]
    if isinstance(value, type):
        return [code for _, member in sorted(vars(value).items(), key=lambda item: item[0])
                if not isinstance(member, type) for code in _codes(member)]
    return []


def _hash_code(h, code: types.CodeType) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _hash_code(h, const)
        elif isinstance(const, frozenset):          # set order follows string hashing
            h.update(repr(sorted(map(repr, const))).encode())
        else:
            h.update(repr(const).encode())


@functools.lru_cache(maxsize=None)
def _read(path: str, mtime_ns: int, size: int) -> str:
    return Path(path).read_text()


def _module_text(fn: Callable) -> str:
    py = getattr(fn, "py_func", fn)
    try:
        return _file_text(_source_file(py))
    except (TypeError, OSError):
        return py.__code__.co_code.hex()


@functools.lru_cache(maxsize=None)
def _source_file(py: Callable) -> str | None:
    """The file defining ``py`` (looked up once per function: ``inspect`` is slow, and every
    unit of a graph names the functions of the same few modules)."""
    return inspect.getsourcefile(py)


def fingerprint(source: str, checked: Checked, functions: list[Callable]) -> str:
    """Content hash naming the generated module."""
    structure = [node.block.structural_key() for node in checked.graph.nodes.values()]
    return _digest(source, repr(structure), functions)


def module_digest(source: str, functions: list[Callable]) -> str:
    """Content hash naming a generated module: its source, the numba and Python versions and
    the text of every module whose functions ``functions`` reach (see :func:`_digest`)."""
    return _digest(source, "", functions)


def _digest(source: str, structure: str, functions: list[Callable]) -> str:
    h = hashlib.sha256()
    for part in (source, structure, numba.__version__, sys.version):
        h.update(part.encode())
    engine = [_file_text(m.__file__) for m in (events, element_access, sys.modules[__name__])]
    for text in (*engine, *sorted(_dependency_texts(functions))):
        h.update(_text_digest(text).encode())
    return h.hexdigest()[:20]


@functools.lru_cache(maxsize=256)
def _text_digest(text: str) -> str:
    """Hash of a module's text (every unit names the modules its kernels reach: hashed once,
    not once per unit)."""
    return hashlib.sha256(text.encode()).hexdigest()


def _dependency_texts(functions: list[Callable]) -> set[str]:
    """Source of every module whose ``@njit`` functions the kernels reach, transitively.

    A kernel calling a model function of another module (``estimation`` ->
    ``estimation_models`` -> ``multibody``) must get a new name when any of
    them changes, or a warm cache would keep running the old code.
    """
    owners = {py for fn in functions for py in _reached(getattr(fn, "py_func", fn))}
    return {_module_text(py) for py in owners}


@functools.lru_cache(maxsize=None)
def _reached(root: Callable) -> tuple[Callable, ...]:
    """One Python function per source file (or per function without one) among ``root`` and
    every ``@njit`` function it reaches through globals and closures, transitively.

    Walked once per function: every unit of a graph names the same kernels, and
    a walk visits every global of their modules."""
    seen: set[int] = set()
    modules: set[int] = set()                 # each module's globals are read once
    owners: dict[object, Callable] = {}
    todo = [root]
    while todo:
        py = todo.pop()
        if id(py) in seen:
            continue
        seen.add(id(py))
        try:
            owner: object = _source_file(py)
        except TypeError:
            owner = py
        owners.setdefault(owner, py)
        values = _closure_values(py)
        names = getattr(py, "__globals__", None)
        if names is not None and id(names) not in modules:
            modules.add(id(names))
            values += list(names.values())
        todo += [value.py_func for value in values if hasattr(value, "py_func")]
    return tuple(owners.values())


def _closure_values(py: Callable) -> list:
    """Values captured by a function's closure (kernels made by a factory)."""
    values = []
    for cell in getattr(py, "__closure__", None) or ():
        with contextlib.suppress(ValueError):          # an empty cell has no contents
            values.append(cell.cell_contents)
    return values


def _namespace(kernels: dict[str, object], interpret: bool, name: str,
               cache: bool = True) -> dict:
    """What a generated module's text reads: its kernels and the decorators of its functions
    (``cache=False``: callees without numba's disk cache, see :func:`_define_units`)."""
    def plain(fn: object) -> object:
        return getattr(fn, "py_func", fn) if interpret else fn

    ns = {name: plain(fn) for name, fn in kernels.items()}
    ns.update(ev_begin=plain(events.begin), ev_decide=plain(events.decide),
              ev_restart=plain(events.restart), __name__=name)
    ns["elements"] = (lambda array: array) if interpret else element_access.elements
    ns["jit"] = (lambda f: f) if interpret else numba.njit(**JIT_OPTIONS)
    for key, options in (("cjit", CALLEE_OPTIONS), ("ijit", INLINED_OPTIONS)):
        ns[key] = (lambda f: f) if interpret else numba.njit(_nrt=False,
                                                              **{**options, "cache": cache})
    return ns


def compile_graph(graph: Graph, interpret: bool = False, inline: bool = True,
                  mode: str = "auto") -> Program:
    """Check, schedule, lay out and generate ``graph``; load the kernel.

    Parameters
    ----------
    graph : Graph
        The graph to compile.
    interpret : bool
        Run the generated source as plain Python (reference and debugger).
    inline : bool
        Paste kernel bodies into the generated code (see :mod:`hapflow.inline`);
        False calls every kernel on array views.
    mode : {'auto', 'fused', 'units'}
        One fused ``run`` or compile units (see :mod:`hapflow.codegen`);
        ``auto`` chooses by the size of the graph (:func:`choose_mode`).

    Returns
    -------
    Program
    """
    with collections_paused():
        checked = graph.check()
        schedule = build_schedule(checked)
        layout = build_layout(checked)
        if mode == "auto":
            mode = choose_mode(checked, schedule)
        digest = sourcecache.key(checked, layout, inline, mode, _text_of)
        generated = sourcecache.load(cache_dir(), digest, checked)
    if generated is None:
        generated = Generator(checked, schedule, layout, inline=inline, mode=mode).build()
        _store_source(digest, generated)
    if interpret:
        ns = _interpreted(generated, graph.name)
        return Program(checked, schedule, layout, generated.source, None, ns["run"],
                       ns["init_all"], True, generated.units, generated.mode, inline)
    module, cached = _loaded(checked, generated, ("run",))
    run = entry_cached(module.run)          # a warm start parses no code linked into it
    compiled_init = isinstance(module.init_all, Dispatcher)
    init_all = initialising(run) if compiled_init else module.init_all
    return Program(checked, schedule, layout, generated.source, Path(module.__file__), run,
                   init_all, False, generated.units, generated.mode, inline, cached,
                   compiled_init)


def initialising(run: Dispatcher) -> Callable:
    """``init_all(f, m, si, sb)`` as a call of the compiled ``run``, which holds its code
    (:data:`hapflow.codegen.INIT_TICKS`)."""
    no_log, no_stats = np.zeros((0, 0)), np.zeros(STATS_SIZE, dtype=np.int64)

    def init_all(f: np.ndarray, m: np.ndarray, si: np.ndarray, sb: np.ndarray) -> int:
        return run(INIT_TICKS, 0, f, m, si, sb, no_log, no_stats)
    return init_all


def compile_lanes(program: Program, width: int,
                  constants: dict[int, float] | None = None) -> Callable:
    """The graph's kernel over groups of ``width`` runs, from the same phases and sites.

    Returns ``run_blocks(n_ticks, tick0, F, M, SI, SB, LOG, STATS)``: each
    array has one row per group, element ``i`` of lane ``r`` at ``i * width
    + r`` (see :mod:`hapflow.lanes`; ``LOG`` rows hold ``ticks * columns *
    width`` values).  Compiled like the graph's own kernel (same mode, units
    shared through the cache), or interpreted when the program is.  Elements
    of ``f`` in ``constants`` are read as those values (fused code): the
    kernel may only run groups that hold them in every lane.
    """
    def generator(memory: set[int] | None) -> Generator:
        return Generator(program.checked, program.schedule, program.layout, program.inline,
                         program.mode, lanes=width, memory=memory, constants=constants)
    first = generator(None)
    generated = first.build()
    if program.mode == "fused":              # again, with what views reach kept in memory
        generated = generator(first.address.reached).build()
    if program.interpreted:
        return _interpreted(generated, f"{program.checked.graph.name} lanes")["run_blocks"]
    _let_lanes_vectorise()
    namespace = {name: _inlined(value) for name, value in generated.namespace.items()}
    module, _ = _loaded(program.checked, dataclasses.replace(generated, namespace=namespace),
                        ("run_blocks",))
    t = numba.types
    rows = (t.float64, t.int64, t.int64, t.boolean, t.float64, t.int64)     # F .. STATS
    with _vector_width(width):          # run_lanes alone: see _vector_width
        module.run_lanes.compile((t.int64, t.int64, *(kind[::1] for kind in rows)))
    module.run_blocks.compile((t.int64, t.int64, *(kind[:, ::1] for kind in rows)))
    return module.run_blocks


LANE_MEMORY_CHECKS = 1000
"""Run-time overlap checks LLVM's loop vectoriser may add to one loop, and may merge
(its defaults are 8 and 100).

A lanes tick reads and writes five pointers (``F``, ``M``, ``SI``, ``LOG``, ``STATS``) and
the booleans ``SB``, which could overlap for all the compiler knows; the rig graph's tick
needs more checks than the default, and stayed scalar.  The checks run once per tick of a
group, before the loop over its lanes."""


@functools.cache
def _let_lanes_vectorise() -> None:
    """Raise LLVM's limit of overlap checks for the loops compiled from now on (a global
    option of LLVM: it only lets more loops run in SIMD registers, same results)."""
    import llvmlite.binding
    for option in ("runtime-memory-check-threshold", "memory-check-merge-threshold"):
        llvmlite.binding.set_option("hapflow", f"-{option}={LANE_MEMORY_CHECKS}")


@contextlib.contextmanager
def _vector_width(width: int) -> Iterator[None]:
    """LLVM's vectoriser takes ``width`` iterations per step in the loops compiled inside
    the block (a global option of LLVM, back to its own choice after).

    For the loop over a group's lanes: its cost model picks 8 doubles (one AVX-512
    register) on this machine, and a tick is a long chain of dependent operations
    (a logarithm, a square root, a division) that one register's worth of lanes
    leaves waiting; the whole group at once gives the processor independent work.
    Measured on the rig graph's kernel (one thread, the same kernel with the width
    forced): 8 lanes per step 54.7-55.2 ns per lane-tick, 16: 43.3-43.5, 32: 39.4.
    Only ``run_lanes`` compiles inside: LLVM reports on stderr every loop it was told
    to widen and could not (the loop over the groups calls ``run_lanes``; a graph
    with events has loops that stay scalar), which :func:`_without_llvm_remarks`
    keeps off the terminal."""
    import llvmlite.binding
    llvmlite.binding.set_option("hapflow", f"-force-vector-width={width}")
    try:
        with _without_llvm_remarks():
            yield
    finally:
        llvmlite.binding.set_option("hapflow", "-force-vector-width=0")


@contextlib.contextmanager
def _without_llvm_remarks() -> Iterator[None]:
    """Drop the lines LLVM writes to the process's standard error that are remarks
    (``remark: ...``; LLVM writes them itself, past Python's ``sys.stderr``), and pass on
    the rest once the block ends (output of other threads meanwhile comes late, not lost)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode(errors="replace").splitlines(keepends=True)
            rest = "".join(line for line in lines if not line.startswith("remark: "))
            if rest:
                sys.stderr.write(rest)
                sys.stderr.flush()


def _inlined(value: object) -> object:
    """A compiled function the kernel calls (a helper, a kernel called on views) as LLVM
    inlines it, anything else as it is: in the lanes kernel, a call that stays a call
    keeps the loop over the lanes scalar."""
    if not isinstance(value, Dispatcher) or value.targetoptions.get("forceinline"):
        return value
    return _inlined_copy(value)


@functools.cache
def _inlined_copy(fn: Dispatcher) -> Dispatcher:
    """``fn`` compiled with ``forceinline``: one copy per process, so the lanes kernels of
    several graphs or sets of literal values share its machine code."""
    options = {k: v for k, v in fn.targetoptions.items() if k != "nopython"}  # njit's own
    return numba.njit(**options, forceinline=True)(fn.py_func)


def _interpreted(generated: Generated, title: str) -> dict:
    """The namespace of ``generated`` executed as plain Python (whose kernels call the
    compiled helpers from Python)."""
    cache_helpers()
    ns = _interpreted_namespace(generated)
    exec(compile(generated.source, f"<hapflow {title}>", "exec"), ns)
    return ns


def _loaded(checked: Checked, generated: Generated,
            entries: tuple[str, ...]) -> tuple[types.ModuleType, bool]:
    """The module of ``generated``, its units compiled unless numba's cache holds
    every function of ``entries``; and whether it held them (a warm start)."""
    with collections_paused():
        functions = _functions(generated.namespace)
        name = f"hf_{fingerprint(generated.source, checked, functions)}"
        units = _define_units(generated.units)
        namespace = {**generated.namespace,
                     **{n: getattr(m, "compiled", m.unit) for n, m in units.items()}}
        module = load_module(name, generated.source, _namespace(namespace, False, name))
    compiled = [fn for fn in map(vars(module).get, entries) if isinstance(fn, Dispatcher)]
    cached = all(map(_on_disk, compiled))
    if not cached:
        cache_helpers()
        # compiled, not loaded from numba's cache: the units first, each for its one
        # signature, or every literal offset a phase passes would compile a copy of one.
        # Loaded from the cache, the entries hold their code: a warm start compiles no
        # unit, but defines their modules (numba imports them to rebuild environments).
        vars(module).update(_compile_units(checked.graph, generated.units, units))
    return module, cached


FUSED_MAX_LINES = 800
"""Largest graph compiled fused, in kernel source lines per tick (:func:`tick_lines`).

Measured with ``bench/compile.py`` (CPU s to compile, fused / units): replicated
loops of 30 blocks (388 lines) 3.1 / 5.2, of 100 blocks (1305 lines) 13.2 / 6.4;
distinct blocks, 10 (339 lines) 5.9 / 6.6, 30 (730 lines) 20.6 / 18.8.  The
fused kernel ran faster (4.3 against 6.1 ns per block and tick on the replicated
loops), so it is kept up to a little past where compile times cross.  Since small
units are inlined into their phase functions (:data:`hapflow.codegen.INLINED_UNIT_LINES`)
the speed no longer decides: replicated N = 100 ran at 6.3 ns as units against 8.6 ns
fused in one ``bench/compile.py`` run."""
MODE_VARIABLE = "HAPFLOW_KERNEL"
"""Environment variable that overrides the automatic choice (``fused`` or ``units``):
for checking that both give the same bits on a whole test suite."""


def tick_lines(checked: Checked, schedule: Schedule, limit: int | None = None) -> int:
    """Kernel source lines one tick runs: what the fused ``run`` grows with.

    Counting stops once the total is past ``limit``: reading the kernels' sources is its
    cost, and a warm start of a large graph reads no other kernel source.
    """
    nodes = checked.graph.nodes
    stages = 4 if checked.graph.solver == "rk4" else 2
    terms = itertools.chain(
        ((c.block, "output", 1) for c in schedule.calls),
        ((b, "update", 1) for b in schedule.updates),
        ((b, kind, 1) for b in schedule.hybrid for kind in ("guard", "reset")),
        ((c.block, "output", stages) for c in schedule.chain),
        ((b, "deriv", stages) for b in schedule.continuous))
    total = 0
    for block, kind, times in terms:
        total += times * kernel_size(nodes[block].block.kernels()[kind])
        if limit is not None and total > limit:
            break
    return total


def choose_mode(checked: Checked, schedule: Schedule) -> str:
    """``fused`` for a small graph, else ``units`` (see :data:`FUSED_MAX_LINES`)."""
    forced = os.environ.get(MODE_VARIABLE, "")
    if forced in ("fused", "units"):
        return forced
    return "fused" if tick_lines(checked, schedule, FUSED_MAX_LINES) <= FUSED_MAX_LINES \
        else "units"


def _store_source(digest: str, generated: Generated) -> None:
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        sourcecache.store(folder, digest, generated)
    except OSError:                       # a read-only cache: generate every time
        pass


def _text_of(obj: object) -> str:
    """Text of a module, or of the module defining a function."""
    if isinstance(obj, types.ModuleType):
        return _file_text(obj.__file__)
    return _module_text(obj)


def _functions(namespace: dict) -> list[Callable]:
    return [v for v in namespace.values() if hasattr(v, "py_func") or inspect.isfunction(v)]


def _interpreted_namespace(generated: Generated) -> dict:
    ns = _namespace(generated.namespace, True, "hapflow_interpreted")
    for unit in generated.units.values():
        unit_ns = _namespace(unit.namespace, True, unit.name)
        exec(compile(unit.source, f"<hapflow unit {unit.name}>", "exec"), unit_ns)
        ns[unit.name] = unit_ns["unit"]
    return ns


@contextlib.contextmanager
def collections_paused() -> Iterator[None]:
    """No automatic garbage collection inside the block (as it was, after it).

    Loading a graph (checking it, reading its generated source and defining
    its modules, numba's registries and cached machine code) makes
    long-lived objects and next to no garbage, while each full collection
    walks every object the process holds: a large graph's warm start ran
    several (``bench/compile.py`` times the warm start).  Never around a
    compile: numba's compiles leave cyclic garbage that must be freed as it
    goes, or a large graph's compile would hold it all.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _on_disk(fn: Callable) -> bool:
    """Whether numba's disk cache holds an index for dispatcher ``fn`` (False if unknown:
    then the units are compiled, which is always correct)."""
    try:
        return Path(fn._cache._cache_file._index_path).exists()
    except AttributeError:
        return False


def _define_units(units: dict[str, UnitSource]) -> dict[str, types.ModuleType]:
    """Each unit's module by unit name (shared through the cache), not compiled yet.

    A unit's function gets numba's disk cache when it is compiled (:func:`_compiled`),
    not here: numba finds a function's cache folder by checking that it can create a
    file in it, a third of the time defining the 226 units of a 1000-block graph took,
    and a warm start never compiles a unit (``run`` and ``init_all`` hold their code).
    """
    modules = {}
    for unit in units.values():
        name = f"{unit.name}_{module_digest(unit.source, _functions(unit.namespace))[:12]}"
        modules[unit.name] = load_module(name, unit.source,
                                          _namespace(unit.namespace, False, name, cache=False))
    return modules


def _compile_units(graph: Graph, units: dict[str, UnitSource],
                   modules: dict[str, types.ModuleType]) -> dict[str, Callable]:
    """Each unit's compiled function by unit name.

    Every unit is compiled here, for the one signature its callers use, and
    may not compile another: a kernel that does not compile is named from
    its own unit, and a literal argument never makes a second copy.
    """
    todo = [(units[n], m) for n, m in modules.items() if not hasattr(m, "compiled")]
    if len(todo) >= CHILD_UNITS:
        seeds = set(_seeds([unit for unit, _ in todo]))
        for k in sorted(seeds):
            unit, module = todo[k]
            module.compiled = _compile_unit(graph, unit, module)
        _compile_in_children([item for k, item in enumerate(todo) if k not in seeds])
    for unit, module in todo:                     # from the disk cache, if children did
        if not hasattr(module, "compiled"):
            module.compiled = _compile_unit(graph, unit, module)
    return {name: module.compiled for name, module in modules.items()}


CHILD_UNITS = 100
"""A graph with this many units to compile has them compiled by forked child processes:
compiled in this process, 100 units would hold about 650 MiB (6.5 MiB each, measured on
the random graphs of ``bench/compile.py``), and children cost CPU time (a 27-unit graph:
68 s against 45 s in-process), so they are kept for graphs that need them."""


def _compile_in_children(todo: list[tuple[UnitSource, types.ModuleType]]) -> None:
    """Compile units in forked children, one per core, into numba's disk cache.

    numba keeps several MB per compiled function (IR, type annotations, LLVM
    modules): the 300-block random graph of ``bench/compile.py`` held 490 MiB
    more after compiling its 75 units in-process.  A child's memory goes when
    it exits, and the children run on all cores; this process then loads
    the machine code from the cache.  A unit a child could not compile is
    compiled here again, which names the failing block.  Measured on that
    graph: peak RSS 829 -> 508 MiB, wall time 107 -> 74 s, CPU time (all
    processes) 107 -> 125 s (each child compiles the helpers again).
    """
    count = max(os.cpu_count() or 1, -(-len(todo) // UNITS_PER_CHILD))
    parts = [todo[k::count] for k in range(count)]
    context = multiprocessing.get_context("fork")
    running: list = []
    for part in parts:
        if len(running) >= (os.cpu_count() or 1):
            running.pop(0).join()
        child = context.Process(target=_compile_part, args=(part,), daemon=True)
        child.start()
        running.append(child)
    for child in running:
        child.join()


UNITS_PER_CHILD = 80
"""Most units one child compiles: its memory grows by several MB a unit, and every child
compiles again the helper functions its units call (more children, more CPU time)."""


def _seeds(units: list[UnitSource]) -> list[int]:
    """Units to compile before forking the children, so that every helper two units call
    is compiled once, here, and inherited by the children.

    A child compiles every helper its units call that it has not compiled
    yet; helpers are not in numba's disk cache (the units that call them are),
    so children split from one process each compiled them again: on the
    300-block random graph of ``bench/compile.py`` about 25 s of CPU time per
    child went to the same Kalman-filter steps and matrix products.  Greedy
    cover: the unit calling most of the shared helpers not yet covered, until
    all are.
    """
    reached = [_unit_helpers(unit) for unit in units]
    counts = collections.Counter(h for helpers in reached for h in helpers)
    shared = {h for h, c in counts.items() if c > 1}
    seeds = []
    while shared:
        k = max(range(len(units)), key=lambda j: len(reached[j] & shared))
        seeds.append(k)
        shared -= reached[k]
    return seeds


def _unit_helpers(unit: UnitSource) -> frozenset:
    """The compiled helpers a unit's code calls, transitively (numba inlines those marked
    ``inline="always"`` into each caller, so they are not among them; what they call is)."""
    found: set = set()
    for value in unit.namespace.values():
        if isinstance(value, numba.core.dispatcher.Dispatcher):
            found |= _helpers(value.py_func) | ({value} if _separate(value) else set())
    return frozenset(found)


def _separate(dispatcher: numba.core.dispatcher.Dispatcher) -> bool:
    return dispatcher.targetoptions.get("inline", "never") != "always"


@functools.lru_cache(maxsize=None)
def _helpers(py: Callable) -> frozenset:
    """The dispatchers ``py`` calls that numba compiles as functions of their own."""
    return frozenset(d for d in _callees(py) if _separate(d))


@functools.lru_cache(maxsize=None)
def _callees(py: Callable) -> frozenset:
    """The dispatchers ``py`` names (globals its code reads, closure cells), transitively."""
    found: set = set()
    todo, seen = [py], set()
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        names = getattr(fn, "__globals__", {})
        values = [names[n] for n in _code_names(fn.__code__) if n in names]
        for value in values + _closure_values(fn):
            if isinstance(value, numba.core.dispatcher.Dispatcher):
                found.add(value)
                todo.append(value.py_func)
    return frozenset(found)


def cache_helpers() -> None:
    """Cache on disk the machine code of each new :func:`hapflow.jit.njit` helper made without
    a ``cache`` option, unless it or a function it calls is a closure (whose captured
    values numba's key covers for the function itself only).

    Each entry is keyed also by the digest of every file the helper's calls reach
    (:func:`module_digest`): its machine code holds its callees', and numba's cache
    notices changes of the helper's own file only.  Without it, every process
    compiled each helper again wherever no cached kernel held it: a graph run
    interpreted (whose kernels call the helpers from Python), a kernel compiled
    afresh, a test's child process, each test worker.  Called where something is
    about to compile, not at every start: numba tries a file in each new cache
    folder, and deciding for every helper made a warm start about 0.1 s slower.
    """
    for helper in take_undecided():
        with contextlib.suppress(TypeError, RuntimeError):  # no source file: not cached
            if helper.py_func.__closure__ is None and all(
                    d.py_func.__closure__ is None for d in _callees(helper.py_func)):
                helper.cache_keyed_by(module_digest("", [helper]))


def _code_names(code: types.CodeType) -> set[str]:
    """Global names ``code`` and the functions defined in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _compile_part(part: list[tuple[UnitSource, types.ModuleType]]) -> None:
    for unit, module in part:
        with contextlib.suppress(numba.core.errors.NumbaError):
            _compiled(module.unit, unit_signature(unit))


def _compile_unit(graph: Graph, unit: UnitSource, module: types.ModuleType) -> Callable:
    try:
        return _compiled(module.unit, unit_signature(unit))
    except numba.core.errors.NumbaError as exc:
        line = exc.loc.line if exc.loc is not None and \
            Path(str(exc.loc.filename)).name == f"{module.__name__}.py" else None
        raise compile_error(graph, unit.block_at(line) if line else unit.blocks[0],
                            exc) from None


def _compiled(fn: Callable, signature: numba.core.typing.Signature) -> Callable:
    """``fn`` compiled for ``signature`` only (loaded from numba's disk cache if it holds
    it, else stored there): without reference counting when its kernels allocate nothing
    (see :mod:`hapflow.jit`), else as a plain ``njit``."""
    fn.enable_caching()                      # units are defined without (_define_units)
    try:
        fn.compile(signature)
    except numba.core.errors.NumbaError:
        fn = _plain(fn)                                 # a kernel that allocates: slower, works
        fn.compile(signature)
    fn.disable_compile()
    return fn


def _plain(fn: Callable) -> Callable:
    """A reference-counted ``njit`` of ``fn``'s Python function."""
    return numba.njit(**CALLEE_OPTIONS)(fn.py_func)


def unit_signature(unit: UnitSource) -> numba.core.typing.Signature:
    """The unit's parameters (some of :data:`hapflow.codegen.UNIT_ARGS`, then its bases) on
    C-contiguous run-time arrays."""
    t = numba.types
    kinds = dict(f=t.float64[::1], m=t.int64[::1], si=t.int64[::1], sb=t.boolean[::1],
                 i=t.int64, t=t.float64, k=t.int64, r=t.int64, start=t.int64)
    kinds.update(F=kinds["f"], M=kinds["m"], SI=kinds["si"], SB=kinds["sb"])
    return t.int64(*(kinds[p] for p in unit.params), *[t.int64] * unit.bases)


def compile_error(graph: Graph, block: str | None, exc: Exception) -> GraphError:
    """The error for a kernel of ``block`` (None: unknown) that numba cannot compile."""
    node = graph.nodes.get(block) if block else None
    what = f"block {block!r} ({type(node.block).__name__})" if node else "a block"
    text = str(exc)
    detail = next((ln.strip() for ln in text.splitlines()[1:] if ln.strip()), text.strip())
    return GraphError(f"the kernels of {what} do not compile: {detail}\n"
                      "Check the kernel signatures: (t, x, d, m, p, *inputs, *outputs) "
                      "with every declared input, in declaration order "
                      "(see hapflow/block.py).", block=block if node else None)


_LOADING = threading.RLock()
"""Held while a generated module is made: threads building one structure at once (a study's
threads) share one module and so one compiled kernel."""


def module_path(name: str) -> Path:
    """Where generated module ``name`` is kept: ``<cache>/<name>.py``."""
    return cache_dir() / f"{name}.py"


def load_module(name: str, source: str, namespace: dict) -> types.ModuleType:
    """Write ``source`` to :func:`module_path` (once) and execute it as module ``name``."""
    path = module_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        write_whole(path, source)
    with _LOADING:
        module = sys.modules.get(name)
        if module is None:
            # numba's cache rebuilds a function's environment by importing its module by name
            module = types.ModuleType(name)
            module.__dict__.update(namespace, __file__=str(path))
            exec(_code_of(source, path), module.__dict__)
            sys.modules[name] = module
    return module


def _code_of(source: str, path: Path) -> types.CodeType:
    """``source`` compiled as file ``path``, its code object kept beside it.

    Python's own bytecode cache serves imported files only, so every warm start
    compiled the text of every generated module again (one per compile unit).
    The kept code (``<path>.<cache tag>.code``) starts with the digest of the
    text it was compiled from and is used only for that text and that file name.
    """
    digest = hashlib.sha256(source.encode()).digest()
    kept = path.with_name(f"{path.name}.{sys.implementation.cache_tag}.code")
    with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
        data = kept.read_bytes()
        if data[:len(digest)] == digest:
            code = marshal.loads(data[len(digest):])
            if isinstance(code, types.CodeType) and code.co_filename == str(path):
                return code
    code = compile(source, str(path), "exec")
    with contextlib.suppress(OSError):
        write_whole(kept, digest + marshal.dumps(code))
    return code


BATCH_SOURCE = '''"""Generated by hapflow: one graph kernel over many runs. Do not edit."""


@pjit
def run_batch(n_ticks, tick0, F, M, SI, SB, LOG, STATS):
    for r in prange(F.shape[0]):
        run(n_ticks, tick0, F[r], M[r], SI[r], SB[r], LOG[r], STATS[r])
    return 0
'''


def compile_variant(program: Program, suffix: str, source: str,
                    parallel: bool = False) -> types.ModuleType:
    """Compile ``source`` as a module beside the graph's kernel, with the same globals.

    The module (``<cache>/<kernel name>_<suffix>_<source hash>.py``) sees every global of
    the generated kernel module (kernels, ``g_`` constants, ``run``, ``init_all``), plus
    ``jit`` (``numba.njit``), ``pjit`` (``numba.njit(parallel=parallel)``),
    ``prange`` (``numba.prange`` when ``parallel``, else ``range``); both decorators
    release the GIL (``nogil``), so callers may run a variant on several Python threads.
    Its machine code is cached on disk like the kernel's.
    """
    base = sys.modules[program.path.stem]
    flags = f"nogil parallel={parallel}"               # numba's cache index ignores flags
    digest = hashlib.sha256(f"{suffix}\n{flags}\n{source}".encode()).hexdigest()[:12]
    name = f"{program.path.stem}_{suffix}_{digest}"        # a changed source is a new module
    namespace = {k: v for k, v in vars(base).items() if not k.startswith("__")}
    namespace.update(run=linkable(program.run), prange=numba.prange if parallel else range,
                     jit=numba.njit(**JIT_OPTIONS),
                     pjit=numba.njit(parallel=parallel, **JIT_OPTIONS),
                     __name__=name)
    return load_module(name, source, namespace)


def compile_batch(program: Program, parallel: bool = True) -> Callable:
    """A kernel advancing many runs of ``program``: one row of each array per run.

    ``run_batch(n_ticks, tick0, F, M, SI, SB, LOG, STATS)`` calls the graph's
    compiled ``run`` on row ``r`` of every array (``F`` has shape
    ``(runs, len(f))``, ``LOG`` ``(runs, ticks, columns)``), in a
    ``numba.prange`` loop over runs when ``parallel`` (threads: numba's
    ``NUMBA_NUM_THREADS``), else in a plain loop that releases the GIL (run
    slices of the rows on Python threads).  Machine code is cached on disk
    beside the graph's kernel.  An interpreted program gets a Python loop.
    """
    if program.interpreted:
        def run_batch(n_ticks, tick0, F, M, SI, SB, LOG, STATS):
            for r in range(F.shape[0]):
                program.run(n_ticks, tick0, F[r], M[r], SI[r], SB[r], LOG[r], STATS[r])
            return 0
        return run_batch
    suffix = "batch_par" if parallel else "batch"
    return compile_variant(program, suffix, BATCH_SOURCE, parallel).run_batch
