"""How block helpers are compiled: once per argument types, and without reference counting.

:func:`njit` is numba's ``njit`` with one version per argument types: a
constant argument does not compile the helper again
(:class:`UnliteralDispatcher`).  Every block module and engine helper uses it.

numba's runtime (NRT) counts references to arrays with atomic increments and
decrements; a compiled function that takes arrays does a pair for each array
argument it touches, on every call, and numba's pruning pass removes them
only within straight-line code.  For small helpers called many times per
tick (a Kalman step calls its matrix operations and model functions a few
dozen times) these atomics cost more than the arithmetic: a slider-crank
KKF step (3 states, 5 sigma points, the step alone in a loop) took 0.98 us
with them and 0.49 us without; the 5 s slider-crank run of
``bench/estimation.py`` went from about 5 ms to 2.2 ms.

:func:`njit_noalloc` compiles without the runtime (numba's ``_nrt=False``
flag): arrays passed in are borrowed from the caller, which keeps them
alive for the call.  Such a function must not create arrays (``np.empty``,
copies, ``np.dot`` ...; numba refuses to compile it) and must not return
one; indexing, views, scalars and tuples are fine.  The block kernels that
call these helpers are compiled normally.

Inlining a helper into its callers: two ways, chosen per helper.

* ``forceinline=True`` (LLVM's ``alwaysinline``): numba compiles the helper
  once per argument types (literal constants included, so a caller's
  constant sizes still reach it as constants) and LLVM pastes its code into
  each caller.  The default for small scalar helpers: the model functions of
  the Kalman filters (``blocks/estimation_models.py``, ``blocks/excavator.py``)
  and the slider-crank kinematics (``blocks/multibody.py``).
* ``inline="always"`` (numba's own IR inliner): numba copies the helper's
  IR into every call site and types it there.  The copy is made with
  ``copy.deepcopy`` of every block of the helper, which costs numba far more
  than compiling the helper once (a large share of a Kalman filter graph's
  compile in cProfile).  Kept in the Kalman steps (``blocks/estimation.py``:
  the fixed-shape matrix products and the steps' own helpers), whose steps
  ran slower with LLVM's inlining (``bench/estimation.py --only update``:
  the linear KF and the EKF), and, not measured that way, for the matrix
  products of the flexible link (``blocks/flexible.py``).

Disk cache.  A helper made without a ``cache`` option is cached on disk
when neither it nor any function it calls, transitively, is a closure
(:func:`hapflow.compiler.cache_helpers`, before a kernel compiles or a
graph runs interpreted): numba renews a cached function when its own file
changes, not when a file it calls into does, and its machine code holds its
callees', so its entries are keyed also by a digest of every file its calls
reach (:class:`KeyedCache`).  Cached, a helper compiles once per cache
instead of once in every process that calls it outside a cached kernel: an
interpreted run (its kernels call the helpers from Python), a kernel
compiled afresh, each child process of a test, each test worker.

Entry points.  A kernel's ``run`` holds the machine code of every unit and
helper it calls, and numba keeps the LLVM bitcode of all of it beside that
code, for callers that link ``run`` in turn; a load parses it all, a
sixth of a warm start of a 1000-block graph.  :class:`EntryCache` loads a
symbol table instead; the one caller that links ``run`` (the rows batch of
:mod:`hapflow.batch`) names :func:`linkable` ``run``, which loads numba's
own entry.  Code that links the symbol table instead fails to load: the
process stops with LLVM naming :data:`STUB_CALLEE`.

Wrappers.  numba builds a wrapper for calls from Python and one for calls
from C into every function it compiles, and optimises and emits them again
inside every caller that links the function in.  Helpers compiled without
them (a call from Python going through a one-line forwarder compiled with
them) cold-compiled in 8-12 % less CPU time (``graphs/slider_crank_torque``
35.4, 38.2 -> 31.3, 32.4 s; ``distinct(300)`` of ``bench/compile.py`` 85.2 ->
78.1 s).  In the test suite, whose interpreted references call the helpers
from Python, the Kalman steps compiled in 91 s less and the other helpers in
27 s less, but the 668 forwarders took 143 s (each links its helper's code
again): 802 against 784 s of compiling in all, two runs the same afternoon.
The helpers keep their wrappers until a call from Python costs less than
that (forwarders kept in the disk cache, or made only for helpers compiled
before Python first called them).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import llvmlite.binding as llvm
import numba
from llvmlite import ir
from numba.core import types
from numba.core.caching import CompileResultCacheImpl, FunctionCache
from numba.core.dispatcher import Dispatcher
from numba.core.registry import CPUDispatcher


class UnliteralDispatcher(CPUDispatcher):
    """A dispatcher compiling its function once per argument types, whoever calls.

    numba types a constant argument of a compiled call (``sos_df2t(p, 17, 1, d, 0, u,
    False)``) as its value (``Literal[int](17)``) and compiles the callee again for
    every other value and for the plain types a Python call passes: in the test suite
    283 compiles of block helpers (53 s of 700 s compiling) had literal arguments,
    ``sos_df2t`` alone 30.  Here a literal integer or boolean is typed as ``int64``
    (``bool``), so those calls share one compiled function with each other and with the
    interpreted reference.  A helper LLVM inlines (``forceinline``, or small) still
    sees its constants after inlining.
    """

    def get_call_template(self, args, kws):
        return super().get_call_template(tuple(map(plain_type, args)),
                                         {key: plain_type(value) for key, value in kws.items()})

    def cache_keyed_by(self, key: str) -> None:
        """Cache the machine code on disk, each entry under numba's key and ``key``."""
        self._cache = KeyedCache(self.py_func, key)


class KeyedCache(FunctionCache):
    """numba's disk cache of one function, its entries keyed also by ``key``.

    numba keys an entry by the signature, the machine and the function's own
    bytecode, and drops the whole index when the function's file changes; a
    change in a file the function calls into goes unnoticed.  ``key`` (a digest
    of those files) makes it a different entry.
    """

    def __init__(self, py_func: Callable, key: str) -> None:
        super().__init__(py_func)
        self.key = key

    def _index_key(self, sig, codegen):
        return (*super()._index_key(sig, codegen), self.key)


STUB_CALLEE = "hapflow.entry_code_is_not_linkable"
"""What each function of an entry's symbol table calls: a symbol defined nowhere, so that
machine code linking one fails to load instead of running it."""


class EntryCache(FunctionCache):
    """numba's disk cache of an entry point (a kernel's ``run``), loaded without the bitcode
    of the code linked into it.

    numba keeps with a function's machine code the LLVM bitcode of everything linked
    into it, for callers that link the function in turn, and a load parses all of it.
    An entry point is called from Python: its load needs the names its machine code
    defines (numba finds the wrapper and the environment by name), not their code.
    Each signature is saved twice: numba's entry, which :func:`linkable` loads for a
    caller that links the function (a batch variant), and under this cache's own key
    with that bitcode cut down to a symbol table (:func:`symbol_table`), which this
    cache loads.
    """

    class _Impl(CompileResultCacheImpl):
        def reduce(self, cres):
            (name, kind, (code, bitcode)), *rest = super().reduce(cres)
            return ((name, kind, (code, symbol_table(bitcode))), *rest)

    _impl_class = _Impl

    def _index_key(self, sig, codegen):
        return (*super()._index_key(sig, codegen), "entry")

    def _save_overload(self, sig, data):
        FunctionCache(self._py_func)._save_overload(sig, data)     # numba's, to link
        super()._save_overload(sig, data)


def symbol_table(bitcode: bytes) -> bytes:
    """Bitcode defining the functions and globals ``bitcode`` defines, by name only: each
    function calls :data:`STUB_CALLEE`; each global is a byte."""
    module = llvm.parse_bitcode(bitcode)
    table = ir.Module(name=module.name)
    table.triple, table.data_layout = module.triple, module.data_layout
    nowhere = ir.Function(table, ir.FunctionType(ir.VoidType(), []), name=STUB_CALLEE)
    for fn in module.functions:
        if not fn.is_declaration:
            builder = ir.IRBuilder(ir.Function(table, ir.FunctionType(ir.VoidType(), []),
                                               name=fn.name).append_basic_block())
            builder.call(nowhere, [])
            builder.unreachable()
    for gv in module.global_variables:
        if not gv.is_declaration:
            ir.GlobalVariable(table, ir.IntType(8), name=gv.name).initializer = \
                ir.Constant(ir.IntType(8), 0)
    return llvm.parse_assembly(str(table)).as_bitcode()


def entry_cached(dispatcher: Dispatcher) -> Dispatcher:
    """``dispatcher`` (compiled with numba's disk cache, not yet called) with an
    :class:`EntryCache` instead."""
    if not isinstance(dispatcher._cache, EntryCache):
        dispatcher._cache = EntryCache(dispatcher.py_func)
    return dispatcher


@functools.cache
def linkable(dispatcher: Dispatcher) -> Dispatcher:
    """A dispatcher of ``dispatcher``'s function with numba's own disk cache: what a
    compiled caller must name instead of an :func:`entry_cached` one (one per process,
    so its code is loaded once)."""
    return numba.jit(**dispatcher.targetoptions, cache=True)(dispatcher.py_func)


def plain_type(typ: Any) -> Any:
    """``typ`` without its literal value (``Literal[int](4)`` -> ``int64``)."""
    return types.unliteral(typ) if isinstance(typ, types.Literal) else typ


def njit(fn: Callable | None = None, *,
         dispatcher_class: type[UnliteralDispatcher] = UnliteralDispatcher,
         **options: Any) -> Any:
    """``numba.njit(fn, **options)`` making an :class:`UnliteralDispatcher` (or
    ``dispatcher_class``, a subclass of it).

    Usable as ``@njit`` or ``@njit(forceinline=True, ...)``.  numba's own decorator
    processes the options and builds the dispatcher; only its class is changed (a
    second dispatcher per helper would cost about 0.1 ms each at import).  Without a
    ``cache`` option, whether the helper is cached on disk is decided before it is
    first needed (:func:`take_undecided`).
    """
    decide = "cache" not in options

    def make(py: Callable) -> Dispatcher:
        dispatcher = numba.njit(**options)(py)
        dispatcher.__class__ = dispatcher_class
        if decide:
            _UNDECIDED.append(dispatcher)
        return dispatcher
    return make if fn is None else make(fn)


_UNDECIDED: list[Dispatcher] = []
"""Helpers made without a ``cache`` option whose disk caching :func:`take_undecided` has not
handed out."""


def njit_noalloc(fn: Callable | None = None, **options: Any) -> Any:
    """:func:`njit` without numba's runtime (see the module doc).

    Usable as ``@njit_noalloc`` or ``@njit_noalloc(forceinline=True, ...)``.
    """
    options["_nrt"] = False
    return njit(fn, **options)


def take_undecided() -> list[Dispatcher]:
    """The helpers made by :func:`njit` without a ``cache`` option since the last call.

    Whether one is cached on disk, and under which key, is decided by the caller
    (:func:`hapflow.compiler.cache_helpers`) before it is first needed: numba tries
    the disk for each new cache folder, and deciding at import made every start slower.
    """
    taken = _UNDECIDED[:]
    del _UNDECIDED[:len(taken)]
    return taken
