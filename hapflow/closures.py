"""Kernels made by factories (closures) as module functions that numba can cache on disk.

A block that builds its kernels per structure (a Kalman step over matrix
operations of fixed shapes and a chosen model) makes closures.  numba cannot
keep a closure in its disk cache: the cache key of a closure includes the
pickled values it captures, and a captured numba function pickles with an
id drawn anew in every process, so every process (every test worker, every
child compiling units) compiled such a kernel again.

:func:`frozen` writes closures, and every closure they capture, as plain
functions of one generated module in the kernel cache folder: captured
constants become assignments in the text, captured functions are emitted
(closures) or bound by name (module functions).  The module is named by a
digest of its text and of every module its functions reach
(:func:`hapflow.compiler.module_digest`), as compile units are, so an edit of
any of them gives a new module and the old machine code is never loaded
for the new code.

A call statement of a function compiled with ``inline="always"`` (a
Kalman step calls a dozen fixed-shape matrix products so) is written into
the text as that function's body, recursively (:meth:`_Module._inlined`,
by :func:`hapflow.inline.inline`, which also folds the sizes into the
loops).  numba would inline it too, but at every call site it runs its
untyped pipeline over the callee and deep-copies the callee's IR twice,
and each product inlined the generic product in turn.  In the suite run
on 1e7d9c0 that took 136 s of the 237 s compiling Kalman steps (numba's
``InlineWorker.inline_function``, nested calls counted in each level).
Cold compile of ``graphs/slider_crank_torque.yaml`` (four observers):
49.9, 43.5 -> 32.6, 32.9 s CPU (alternating); the per-update times of
``bench/estimation.py --only update`` did not change (three alternations
each).  Flags stay names, as numba saw them: written as literals, their
branches folded away and the compile took 2 s less, but the finite-
difference EKF and the UKFs ran 20-35 % slower per update.

The generated functions are compiled once per argument *types*
(:class:`FrozenDispatcher`), not once per literal value: numba types a
constant argument (``_fx(p, d, X, ...)`` with ``X = 0``) as that literal
value and compiles the callee again for it, so a step called with an
offset that is a constant at one call site and computed at another was
compiled two or three times per process.  Sizes and offsets that should be
constants reach the code through the filter's layout tuple, whose fields
are literal in its type (``blocks/estimation.py``) and which is kept as it
is, or, in a function shared by every filter of one shape (the Kalman
corrections), as captured constants, written into its text.  The price is run-time offsets in the steps' helpers that are not
inlined: 0-7 % more time per filter update in ``bench/estimation.py
--only update`` (finite-difference EKF most; keeping literal booleans
apart recovered a third of that, not worth a second rule), for about a
third less compiling of the Kalman steps in the test suite.
"""
from __future__ import annotations

import ast
import functools
import types
from typing import Any, Callable

from numba.core.dispatcher import Dispatcher
from numba.core.typing.typeof import Purpose, typeof

from .compiler import load_module, module_digest
from .inline import ExprArg, inline, source
from .jit import UnliteralDispatcher, njit

CONSTANTS = (bool, int, float, str, type(None))
"""Types of captured values written into the generated text (tuples of them too)."""


def frozen(*kernels: Dispatcher) -> tuple[Dispatcher, ...]:
    """The njit-compiled ``kernels`` as functions of one cacheable generated module.

    Parameters
    ----------
    kernels : numba dispatchers
        Functions compiled with ``numba.njit`` (or :func:`hapflow.jit.njit_noalloc`),
        closures or not; each keeps its compile options, plus ``cache=True``.

    Returns
    -------
    tuple of numba dispatchers
        The same functions, in order, defined by the generated module (a function
        that is no closure is returned as it is).

    Raises
    ------
    TypeError
        If a closure captures a value that has no exact text (an array, a NaN, an
        object): such a kernel cannot be named by its text.
    """
    return _frozen(kernels)


@functools.lru_cache(maxsize=None)
def _frozen(kernels: tuple[Dispatcher, ...]) -> tuple[Dispatcher, ...]:
    module = _Module()
    names = [module.function(fn) if _is_closure(fn) else None for fn in kernels]
    if not any(names):
        return kernels
    loaded = module.load()
    return tuple(fn if name is None else getattr(loaded, name) for fn, name in zip(kernels, names))


def _is_closure(fn: Any) -> bool:
    return isinstance(fn, Dispatcher) and fn.py_func.__closure__ is not None


def _exact(value: Any) -> bool:
    """Whether ``repr(value)`` evaluates back to ``value`` (constants and tuples of them)."""
    if isinstance(value, tuple):
        return all(_exact(item) for item in value)
    try:
        return isinstance(value, CONSTANTS) and ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError):
        return False


class FrozenDispatcher(UnliteralDispatcher):
    """A frozen function's dispatcher: one compiled version per argument types, whoever calls.

    Called from compiled code, a literal integer or boolean argument (numba's
    ``Literal[int](4)``) is typed as ``int64`` (``bool``), so call sites that
    pass a constant and call sites that pass a computed value share one
    compiled function (:class:`hapflow.jit.UnliteralDispatcher`).  Called
    from Python (an interpreted kernel calling a filter step), a named-tuple
    argument is typed as compiled code types it as a constant, with literal
    fields (``blocks/estimation.py``'s layouts),
    so the interpreted reference runs the very code the compiled kernel
    compiled instead of compiling the steps again for run-time sizes.
    numba's own call path cannot do that: it types a call's arguments by
    their Python types, and would run the version compiled for one layout
    on another.
    """

    def __call__(self, *args: Any) -> Any:
        if not any(isinstance(arg, tuple) for arg in args):
            return super().__call__(*args)
        signature = tuple(typeof(arg, Purpose.constant if isinstance(arg, tuple)
                                 else Purpose.argument) for arg in args)
        return self.compile(signature)(*args)


def frozen_njit(**options: Any) -> Callable[[Callable], FrozenDispatcher]:
    """``numba.njit(**options)`` making a :class:`FrozenDispatcher`."""
    return njit(dispatcher_class=FrozenDispatcher, **options)


class _Module:
    """The text and namespace of one generated module, built function by function."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.namespace: dict[str, Any] = {"frozen_njit": frozen_njit}
        self.globals: dict[str, Any] = {}                 # globals the functions read
        self.taken: set[str] = set()
        self.emitted: dict[int, str] = {}                 # id of a dispatcher -> its name
        self.bound: dict[str, Dispatcher] = {}            # functions called by name
        self.aliases: dict[Any, str] = {}                 # bound value (id, or constant) -> name
        self.values: dict[str, Any] = {}                  # names that inlined bodies read
        self.sites = 0                                    # call sites inlined so far

    def function(self, fn: Dispatcher) -> str:
        """The name of closure ``fn`` in the module, emitting it (and its captures) first."""
        if id(fn) in self.emitted:
            return self.emitted[id(fn)]
        py = fn.py_func
        renames = {var: self._capture(var, cell, py)
                   for var, cell in zip(py.__code__.co_freevars, py.__closure__)}
        for name in py.__code__.co_names:
            if name in py.__globals__:
                self._global(name, py.__globals__[name], py)
        name = self.emitted[id(fn)] = self._fresh(py.__name__)
        node = _parsed(py)
        captured = dict(zip(py.__code__.co_freevars, (c.cell_contents for c in py.__closure__)))

        def value_of(var: str) -> Any:
            if var in py.__code__.co_varnames:                  # a local of the function
                return None
            return captured[var] if var in captured else py.__globals__.get(var)

        node.body = self._inlined(node.body, value_of)
        self.parts.append(_definition(node, name, renames, fn.targetoptions))
        return name

    def _inlined(self, body: list[ast.stmt], value_of: Callable[[str], Any]) -> list[ast.stmt]:
        """``body`` with every call statement of a function compiled with
        ``inline="always"`` replaced by that function's body (:func:`hapflow.inline.inline`),
        recursively; ``value_of(name)`` is what a name of ``body`` refers to.

        numba inlines such a call itself, but runs its untyped pipeline over the
        callee and deep-copies the callee's IR twice at every call site (a Kalman
        step inlines a dozen matrix products, each inlining the generic product in
        turn): most of the time compiling a step.  The text inlined here is what
        numba's inliner makes of it, the arguments that are not names or constants
        bound to locals first so each is evaluated once, as in a call.
        """
        out: list[ast.stmt] = []
        for stmt in body:
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            callee = (value_of(call.func.id) if isinstance(call, ast.Call)
                      and isinstance(call.func, ast.Name) and not call.keywords
                      and not any(isinstance(a, ast.Starred) for a in call.args) else None)
            if isinstance(callee, Dispatcher) and callee.targetoptions.get("inline") == "always":
                lines = self._site(callee, call.args, value_of)
                if lines is not None:
                    out.extend(lines)
                    continue
            for field in ("body", "orelse"):
                block = getattr(stmt, field, None)
                if isinstance(block, list) and block:
                    setattr(stmt, field, self._inlined(block, value_of))
            out.append(stmt)
        return out

    def _site(self, callee: Dispatcher, args: list[ast.expr],
              value_of: Callable[[str], Any]) -> list[ast.stmt] | None:
        """The statements replacing one call of ``callee``, or None if it cannot be inlined."""
        prefix = f"_in{self.sites}_"
        self.sites += 1
        bound, passed = [], []
        for k, arg in enumerate(args):
            if isinstance(arg, (ast.Name, ast.Constant)) or (
                    isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name)):
                passed.append(ExprArg(ast.unparse(arg)))
            else:
                local = f"{prefix}arg{k}"
                bound.append(ast.Assign([ast.Name(local, ast.Store())], arg, lineno=0))
                passed.append(ExprArg(local))

        def resolve(var: str, value: Any) -> str:
            return self._value(var, value, callee.py_func)

        lines = inline(callee, passed, prefix, resolve, _no_view)
        if lines is None:
            return None
        inner = ast.parse("\n".join(lines)).body
        return bound + self._inlined(inner, lambda var: self.values.get(var, value_of(var)))

    def _value(self, var: str, value: Any, owner: types.FunctionType) -> str:
        """The module name holding ``value``, read by an inlined body as ``var``."""
        if _is_closure(value):
            name = self.function(value)
        elif isinstance(value, (Dispatcher, types.ModuleType, types.BuiltinFunctionType)):
            name = self.aliases.get(id(value))
            if name is None:
                name = self.aliases[id(value)] = self._fresh(var)
                self.namespace[name] = value
                if isinstance(value, Dispatcher):
                    self.bound[name] = value
        elif _exact(value):
            key = (type(value), repr(value))
            name = self.aliases.get(key)
            if name is None:
                name = self.aliases[key] = self._fresh(var)
                self.parts.insert(0, f"{name} = {value!r}")
        else:
            raise TypeError(f"{owner.__qualname__} reads {var}, a {type(value).__name__}, "
                            "which has no exact text")
        self.values[name] = value
        return name

    def _capture(self, var: str, cell: types.CellType, owner: types.FunctionType) -> str:
        """The module name holding the value ``owner`` captured as ``var``."""
        try:
            value = cell.cell_contents
        except ValueError:
            raise TypeError(f"{owner.__qualname__}: {var} is not bound yet") from None
        if _is_closure(value):
            return self.function(value)
        name = self._fresh(var)
        if isinstance(value, Dispatcher):
            self.namespace[name] = self.bound[name] = value
        elif _exact(value):
            self.parts.append(f"{name} = {value!r}")
        else:
            raise TypeError(f"{owner.__qualname__} captures {var}, a {type(value).__name__}, "
                            "which has no exact text")
        return name

    def _global(self, name: str, value: Any, owner: types.FunctionType) -> None:
        """Bind a global ``owner`` reads: constants as text, functions and modules by value."""
        if name in self.globals:
            if self.globals[name] is not value:
                raise TypeError(f"{owner.__qualname__}: global {name} differs between the "
                                "functions of one module")
            return
        self.globals[name] = value
        self.taken.add(name)
        if isinstance(value, Dispatcher):
            self.namespace[name] = self.bound[name] = value
        elif isinstance(value, (types.ModuleType, types.BuiltinFunctionType)):
            self.namespace[name] = value
        elif _exact(value):
            self.parts.insert(0, f"{name} = {value!r}")
        else:
            raise TypeError(f"{owner.__qualname__} reads global {name}, a "
                            f"{type(value).__name__}, which has no exact text")

    def _fresh(self, base: str) -> str:
        """A module name not used yet: ``base`` with a numbered suffix."""
        k = len(self.taken)
        while f"{base}__{k}" in self.taken:
            k += 1
        self.taken.add(f"{base}__{k}")
        return f"{base}__{k}"

    def load(self) -> types.ModuleType:
        """Write the module to the cache folder (once) and import it."""
        # which function each bound name is: part of the text, so of the module's name
        # (closures over different model functions differ in nothing else)
        bound = "".join(f"# {name}: {_identity(fn)}\n" for name, fn in sorted(self.bound.items()))
        source = ('"""Generated by hapflow.closures. Do not edit."""\n\n' + bound + "\n"
                  + "\n\n".join(self.parts))
        name = f"hk_{module_digest(source, list(self.bound.values()))[:20]}"
        return load_module(name, source + "\n", {**self.namespace, "__name__": name})


def _identity(fn: Dispatcher) -> str:
    """A bound function's module, name and compile options."""
    return f"{fn.py_func.__module__}.{fn.py_func.__qualname__} ({_options(fn.targetoptions)})"


def _options(options: dict[str, Any]) -> str:
    """Compile options as keyword arguments of ``njit`` (``nopython`` is implied)."""
    return ", ".join(f"{key}={value!r}" for key, value in sorted(options.items())
                     if key != "nopython")


def _no_view(arg: Any) -> str:
    raise AssertionError("inlined with expression arguments only")


def _parsed(py: types.FunctionType) -> ast.FunctionDef:
    """The definition of ``py``, parsed from its source."""
    text = source(py)
    if text is None:
        raise TypeError(f"{py.__qualname__} has no source")
    node = ast.parse(text).body[0]
    if not isinstance(node, ast.FunctionDef):
        raise TypeError(f"{py.__qualname__} is not defined by a def statement")
    return node


def _definition(node: ast.FunctionDef, name: str, renames: dict[str, str],
                options: dict[str, Any]) -> str:
    """Function ``node`` as module function ``name`` with its captures renamed and its options."""
    node.decorator_list, node.name = [], name
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in renames:
            sub.id = renames[sub.id]
    return f"@frozen_njit({_options(options)}, cache=True)\n{ast.unparse(node)}\n"
