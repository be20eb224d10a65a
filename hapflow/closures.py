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
the text as that function's body, recursively (:class:`_Bodies`, by
:func:`hapflow.inline.inline`, which also folds the sizes into the
loops).  numba would inline it too, but at every call site it runs its
untyped pipeline over the callee and deep-copies the callee's IR twice,
and each product inlined the generic product in turn: about 90 s of the
237 s the test suite spent compiling Kalman steps on 1e7d9c0 (numba's
``InlineWorker.inline_function`` timed at the top level).  Cold compile
of ``graphs/slider_crank_torque.yaml`` (four observers): 49.9, 43.5 ->
32.6, 32.9 s CPU (alternating); the per-update times of
``bench/estimation.py --only update`` did not change (three alternations
each).  Flags stay names, as numba saw them: written as literals, their
branches folded away and the compile took 2 s less, but the finite-
difference EKF and the UKFs ran 20-35 % slower per update.  Inlining is
Python work (0.8 s for the filters of ``bench/compile.py``'s 300-block
graph), so it is done once per cache: the module keeps the name of its
plain text, and a process that finds the file reads the inlined text.

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
import dis
import functools
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from numba.core.dispatcher import Dispatcher
from numba.core.typing.typeof import Purpose, typeof

from .compiler import load_module, module_digest, module_path
from .inline import ExprArg, global_of, inline, source
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


@dataclass
class _Def:
    """A closure emitted as module function ``name``: what its text is made from."""

    py: types.FunctionType
    name: str
    renames: dict[str, str]
    options: dict[str, Any]

    def recipe(self) -> str:
        """What the function's text is made from, as text: its source, its name in the
        module, its renamed captures and its options.

        Raises
        ------
        TypeError
            If the function has no source (it could not be written out either).
        """
        return repr((_text(self.py), self.name, sorted(self.renames.items()),
                     sorted(self.options.items())))

    def value_of(self, var: str) -> Any:
        """What name ``var`` of the function's body refers to (None: a local)."""
        if var in self.py.__code__.co_varnames:
            return None
        try:
            return global_of(self.py, var)
        except KeyError:                                    # a builtin, or nothing
            return None


class _Module:
    """The text and namespace of one generated module, built function by function."""

    def __init__(self) -> None:
        self.parts: list[str | _Def] = []
        self.namespace: dict[str, Any] = {"frozen_njit": frozen_njit}
        self.globals: dict[str, Any] = {}                 # globals the functions read
        self.taken: set[str] = set()
        self.emitted: dict[int, str] = {}                 # id of a dispatcher -> its name
        self.bound: dict[str, Dispatcher] = {}            # functions called by name

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
        self.parts.append(_Def(py, name, renames, fn.targetoptions))
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
        """Write the module to the cache folder (once) and import it.

        The module is named by what its text is made from (each function's
        source, name, renamed captures and options: :meth:`_Def.recipe`), and
        the files it reaches.  A process that finds the file reads the text from
        it, without inlining bodies again (about 0.8 s at the start of a process
        building the 300-block graph of ``bench/compile.py``) or parsing and
        printing the functions again (a fifth of what building the 1000-block
        graph spent in hapflow).  The inlined text reads no name the plain
        text's namespace lacks (:class:`_Bodies`).
        """
        recipe = self._source(part if isinstance(part, str) else part.recipe()
                              for part in self.parts)
        name = f"hk_{module_digest(recipe, list(self.bound.values()))[:20]}"
        path = module_path(name)
        text = path.read_text() if path.exists() else _Bodies(self).source() or self._plain()
        return load_module(name, text, {**self.namespace, "__name__": name})

    def _plain(self) -> str:
        """The module's text without inlined bodies: each function parsed, renamed, printed."""
        return self._source(part if isinstance(part, str) else _definition(
            _parsed(part.py), part.name, part.renames, part.options) for part in self.parts)

    def _source(self, parts: Iterable[str]) -> str:
        # which function each bound name is: part of the text, so of the module's name
        # (closures over different model functions differ in nothing else)
        bound = "".join(f"# {name}: {_identity(fn)}\n" for name, fn in sorted(self.bound.items()))
        return ('"""Generated by hapflow.closures. Do not edit."""\n\n' + bound + "\n"
                + "\n\n".join(parts) + "\n")


class _Bodies:
    """A module's text with every call statement of a function compiled with
    ``inline="always"`` replaced by that function's body (:func:`hapflow.inline.inline`),
    recursively.

    numba inlines such a call itself, but at every call site it runs its untyped
    pipeline over the callee and deep-copies the callee's IR twice, and a Kalman
    step's dozen matrix products each inlined the generic product in turn.  The
    text written here is what numba's inliner makes of it; arguments that are not
    names, constants or ``name.attr`` are bound to locals first, so each is
    evaluated once, as in a call.  A body may read only what the module already
    binds, new constants (written into the text) and names its own calls inline
    away; otherwise the module keeps its plain text (:meth:`source` gives None).
    """

    def __init__(self, module: _Module):
        self.module = module
        self.names = {id(v): k for k, v in module.namespace.items()}  # bound value -> name
        self.names.update(module.emitted)                 # emitted closures, by id too
        self.constants: dict[tuple[str, type, str], str] = {}
        self.lines: list[str] = []                        # the new constants' text
        self.values: dict[str, Any] = {}                  # names that inlined bodies read
        self.foreign: set[str] = set()                    # names the namespace lacks
        self.sites = 0

    def source(self) -> str | None:
        """The module's text with the bodies inlined, or None if a body reads a name the
        module's namespace lacks."""
        parts = []
        for part in self.module.parts:
            if isinstance(part, _Def):
                node = _parsed(part.py)
                node.body = self._inlined(node.body, part.value_of)
                part = _definition(node, part.name, part.renames, part.options)
            parts.append(part)
        text = self.module._source([*self.lines, *parts])
        return None if _global_reads(text) & self.foreign else text

    def _inlined(self, body: list[ast.stmt], value_of: Callable[[str], Any]) -> list[ast.stmt]:
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
            return self._name(var, value, callee.py_func)

        lines = inline(callee, passed, prefix, resolve, _no_view)
        if lines is None:
            return None
        inner = ast.parse("\n".join(lines)).body
        return bound + self._inlined(inner, lambda var: self.values.get(var, value_of(var)))

    def _name(self, var: str, value: Any, owner: types.FunctionType) -> str:
        """The module name holding ``value``, read by an inlined body as ``var``."""
        if id(value) in self.names:
            name = self.names[id(value)]
        elif _exact(value):
            key = (var, type(value), repr(value))
            name = self.constants.get(key)
            if name is None:
                name = self.constants[key] = self.module._fresh(var)
                self.lines.append(f"{name} = {value!r}")
        elif isinstance(value, (Dispatcher, types.ModuleType, types.BuiltinFunctionType)):
            name = self.names[id(value)] = self.module._fresh(var)
            self.foreign.add(name)
        else:
            raise TypeError(f"{owner.__qualname__} reads {var}, a {type(value).__name__}, "
                            "which has no exact text")
        self.values[name] = value
        return name


def _global_reads(text: str) -> set[str]:
    """The global names the functions of module ``text`` read."""
    reads: set[str] = set()
    codes = [compile(text, "<module>", "exec")]
    while codes:
        code = codes.pop()
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        reads.update(i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL")
    return reads


def _identity(fn: Dispatcher) -> str:
    """A bound function's module, name and compile options."""
    return f"{fn.py_func.__module__}.{fn.py_func.__qualname__} ({_options(fn.targetoptions)})"


def _options(options: dict[str, Any]) -> str:
    """Compile options as keyword arguments of ``njit`` (``nopython`` is implied)."""
    return ", ".join(f"{key}={value!r}" for key, value in sorted(options.items())
                     if key != "nopython")


def _no_view(arg: Any) -> str:
    raise AssertionError("inlined with expression arguments only")


def _text(py: types.FunctionType) -> str:
    """The source of ``py`` (TypeError if it has none: it cannot be written out)."""
    text = source(py)
    if text is None:
        raise TypeError(f"{py.__qualname__} has no source")
    return text


def _parsed(py: types.FunctionType) -> ast.FunctionDef:
    """The definition of ``py``, parsed from its source."""
    node = ast.parse(_text(py)).body[0]
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
