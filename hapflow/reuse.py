"""Reuse the result of a pure helper call made again on unchanged arguments.

Inlined kernels call their model functions once per evaluation, and a tick
evaluates some blocks several times on the same state: RK4 takes a
block's derivative at the state its output was just computed from, and an
algebraic chain evaluates an output again after a neighbour's.  On the
4 kHz rig (``graphs/colton2005_sweep.yaml``) the device's force law -
spring, damper and a ``tanh`` friction - ran nine times per tick where
four states occur.  This pass turns a repeated call into a copy of the
earlier result::

    c6_fd = g__device_force(f[1], f[2], v_f_57_69)
    ...                                   # nothing writes f[1], f[2], f[57:69]
    c8_fd = g__device_force(f[1], f[2], v_f_57_69)   ->   c8_fd = c6_fd

A helper is *pure* when its Python source stores into no subscript or
attribute and calls only ``math`` or :mod:`hapflow.kmath` functions, a few
builtins and other pure helpers (:func:`is_pure`); the same arguments then give the same bits, so
compiled and interpreted runs are unchanged.  A reuse is valid while no
statement in between may have changed what the call reads: the names in
its arguments, the array elements it indexes, the ranges of the views it
is passed, and the name holding the result.  Stores at indices the pass
cannot bound and stores through unknown names end every reuse of the
arrays concerned (or all); a call to an impure function writes what it is
passed (the views' ranges, whole arrays, any other name it is given).  Loops are entered only
with what their whole body leaves valid; what a branch or loop body finds
stays inside it.  Each replaced statement stays on its line, so the
line-to-block maps of the generated source still hold.
"""
from __future__ import annotations

import ast
import functools
import inspect
import math
import textwrap
from dataclasses import dataclass, field
from typing import Callable

from . import kmath
from .inline import source

_PURE_BUILTINS = frozenset({"min", "max", "abs", "float", "int", "bool", "len", "range"})

@functools.lru_cache(maxsize=None)
def is_pure(fn: Callable) -> bool:
    """Whether ``fn`` (a numba dispatcher or a function) only computes from its arguments.

    Its source stores into no subscript or attribute, declares no global or
    nonlocal, defines no function, and calls only ``math`` and
    :mod:`hapflow.kmath` functions, ``min``/``max``/``abs``/``float``/``int``/
    ``bool``/``len``/``range`` and other pure functions.
    """
    py = getattr(fn, "py_func", fn)
    text = source(py)
    if text is None:
        return False
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    root = tree.body[0]
    if not isinstance(root, ast.FunctionDef):
        return False
    names = getattr(py, "__globals__", {})
    body = ast.Module(body=root.body, type_ignores=[])        # not its decorators' calls
    for node in ast.walk(body):
        if isinstance(node, (ast.FunctionDef, ast.Lambda, ast.Global, ast.Nonlocal,
                             ast.Yield, ast.ClassDef)):
            return False
        if isinstance(node, (ast.Subscript, ast.Attribute)) and \
                not isinstance(node.ctx, ast.Load):
            return False
        if isinstance(node, ast.Call) and not _pure_callee(node.func, names):
            return False
    return True


def _pure_callee(func: ast.expr, names: dict) -> bool:
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return _pure_name(names, f"{func.value.id}.{func.attr}")
    return isinstance(func, ast.Name) and _pure_name(names, func.id)


def _pure_name(namespace: dict, name: str) -> bool:
    """Whether ``name`` (or ``alias.fn``) calls a pure function in ``namespace``: one of
    ``math`` or :mod:`hapflow.kmath` (whose bit reinterpretations the source test
    would not recognise), or one whose source passes :func:`is_pure`."""
    if "." in name:
        return any(namespace.get(name.split(".", 1)[0]) is module for module in (math, kmath))
    if name not in namespace:
        return name in _PURE_BUILTINS
    value = namespace[name]
    if getattr(getattr(value, "py_func", value), "__module__", None) == kmath.__name__:
        return True
    return (hasattr(value, "py_func") or inspect.isfunction(value)) and is_pure(value)


@dataclass(frozen=True)
class _Span:
    """Elements ``[lo, hi)`` of ``array`` past the offset held in ``base`` (None: 0)."""

    array: str
    base: str | None
    lo: int
    hi: int

    def meets(self, other: _Span) -> bool:
        if self.array != other.array:
            return False
        if self.base != other.base:
            return True                       # offsets we cannot compare
        return self.lo < other.hi and other.lo < self.hi


@dataclass
class _Effects:
    """What a statement may change."""

    names: set[str] = field(default_factory=set)
    spans: list[_Span] = field(default_factory=list)
    arrays: set[str] = field(default_factory=set)     # any element of these
    everything: bool = False

    def add(self, other: _Effects) -> None:
        self.names |= other.names
        self.spans += other.spans
        self.arrays |= other.arrays
        self.everything |= other.everything


@dataclass(frozen=True)
class _Call:
    """An earlier call's result and what it read."""

    result: str
    names: frozenset[str]
    spans: tuple[_Span, ...]
    arrays: frozenset[str]

    def survives(self, fx: _Effects) -> bool:
        """Whether this result still holds after a statement with effects ``fx``."""
        return not (fx.everything or fx.names & self.names or fx.arrays & self.arrays
                    or any(s.array in fx.arrays for s in self.spans)
                    or any(w.array in self.arrays for w in fx.spans)
                    or any(s.meets(w) for s in self.spans for w in fx.spans))


class _Pass:
    def __init__(self, lines: list[str], pure: Callable[[str], bool], arrays: set[str]):
        self.lines, self.pure, self.arrays = lines, pure, arrays
        self.views: dict[str, _Span] = {}

    # ------------------------------------------------------------ addressing
    def _interval(self, index: ast.expr, loops: dict[str, tuple[int, int]]
                  ) -> tuple[str | None, int, int] | None:
        """``(base, lo, hi)`` bounding an index expression, None if unbounded."""
        if isinstance(index, ast.Constant) and type(index.value) is int:
            return None, index.value, index.value + 1
        if isinstance(index, ast.Name):
            if index.id in loops:
                return None, *loops[index.id]
            return index.id, 0, 1
        if isinstance(index, ast.BinOp) and isinstance(index.op, ast.Add):
            left, right = self._interval(index.left, loops), self._interval(index.right, loops)
            if left is None or right is None or (left[0] and right[0]):
                return None
            return left[0] or right[0], left[1] + right[1], left[2] + right[2] - 1
        return None

    def _span(self, node: ast.Subscript, loops: dict[str, tuple[int, int]]) -> _Span | None:
        """The elements ``node`` addresses, or None if unknown."""
        if not isinstance(node.value, ast.Name) or isinstance(node.slice, (ast.Slice, ast.Tuple)):
            return None
        name = node.value.id
        bounds = self._interval(node.slice, loops)
        if bounds is None:
            return None
        base, lo, hi = bounds
        if name in self.views:
            view = self.views[name]
            if base is not None or lo < 0:
                return None
            return _Span(view.array, view.base, view.lo + lo, view.lo + hi)
        if name in self.arrays and lo >= 0:
            return _Span(name, base, lo, hi)
        return None

    def _view(self, stmt: ast.stmt) -> tuple[str, _Span] | None:
        """``name = array[lo:hi]`` with bounded ends: the view's name and span."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Subscript)
                and isinstance(stmt.value.value, ast.Name) and stmt.value.value.id in self.arrays
                and isinstance(stmt.value.slice, ast.Slice) and stmt.value.slice.step is None
                and stmt.value.slice.lower is not None and stmt.value.slice.upper is not None):
            return None
        lo = self._interval(stmt.value.slice.lower, {})
        hi = self._interval(stmt.value.slice.upper, {})
        if lo is None or hi is None or lo[0] != hi[0]:
            return None
        return stmt.targets[0].id, _Span(stmt.value.value.id, lo[0], lo[1], hi[1])

    # ------------------------------------------------------------ effects
    def _effects(self, stmt: ast.stmt, loops: dict[str, tuple[int, int]]) -> _Effects:
        """What ``stmt`` may change, loop counters bounded by ``loops``."""
        fx = _Effects()
        if isinstance(stmt, ast.While):
            fx.everything = True
        elif isinstance(stmt, (ast.For, ast.If)):
            if isinstance(stmt, ast.For):
                bounds = _range(stmt)
                if bounds is not None and isinstance(stmt.target, ast.Name):
                    loops = {**loops, stmt.target.id: bounds}
                self._visit_effects(stmt.target, loops, fx)
                self._visit_effects(stmt.iter, loops, fx)
            else:
                self._visit_effects(stmt.test, loops, fx)
            for child in (*stmt.body, *stmt.orelse):
                fx.add(self._effects(child, loops))
        else:
            self._visit_effects(stmt, loops, fx)
        return fx

    def _visit_effects(self, root: ast.AST, loops: dict[str, tuple[int, int]],
                       fx: _Effects) -> None:
        """Add the stores and impure calls anywhere in ``root`` to ``fx``."""
        for node in ast.walk(root):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                fx.names.add(node.id)
            elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
                span = self._span(node, loops)
                if span is not None:
                    fx.spans.append(span)
                elif isinstance(node.value, ast.Name) and node.value.id in self.arrays:
                    fx.arrays.add(node.value.id)
                elif isinstance(node.value, ast.Name) and node.value.id in self.views:
                    fx.arrays.add(self.views[node.value.id].array)
                else:
                    fx.everything = True
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                fx.everything = True
            elif isinstance(node, ast.Call) and not self._pure_call(node):
                self._call_effects(node, fx)

    def _call_effects(self, call: ast.Call, fx: _Effects) -> None:
        """An impure call writes at most the arrays it is passed: a compiled helper
        reaches no array of the run but through its arguments (the run's arrays are
        never module globals), and scalars are passed by value."""
        if call.keywords or not isinstance(call.func, (ast.Name, ast.Attribute)):
            fx.everything = True
            return
        for arg in call.args:
            if isinstance(arg, ast.Starred):
                fx.everything = True
            elif isinstance(arg, ast.Name):
                if arg.id in self.views:
                    fx.spans.append(self.views[arg.id])
                elif arg.id in self.arrays:
                    fx.arrays.add(arg.id)
                else:
                    fx.names.add(arg.id)          # another array it may write into

    def _pure_call(self, node: ast.Call) -> bool:
        func = node.func
        if isinstance(func, ast.Attribute):
            return isinstance(func.value, ast.Name) and self.pure(func.value.id + "." + func.attr)
        return isinstance(func, ast.Name) and self.pure(func.id)

    # ------------------------------------------------------------ the pass
    def _reads(self, call: ast.Call, result: str) -> _Call | None:
        """What ``result = call`` read, or None if it cannot be tracked."""
        names, spans, arrays = {result}, [], set()
        todo: list[ast.AST] = list(call.args)
        while todo:
            node = todo.pop()
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                span = self._span(node, {})
                owner = node.value.id
                if span is not None:
                    spans.append(span)
                elif owner in self.views or owner in self.arrays:
                    arrays.add(self.views[owner].array if owner in self.views else owner)
                else:
                    return None
                names.add(owner)
                todo.append(node.slice)
            elif isinstance(node, ast.Name):
                names.add(node.id)
                if node.id in self.views:
                    spans.append(self.views[node.id])
                elif node.id in self.arrays:
                    arrays.add(node.id)
            elif isinstance(node, (ast.Call, ast.Subscript, ast.Attribute)):
                return None
            else:
                todo += list(ast.iter_child_nodes(node))
        return _Call(result, frozenset(names), tuple(spans), frozenset(arrays))

    def _candidate(self, stmt: ast.stmt) -> tuple[str, ast.Call] | None:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call) \
                and isinstance(stmt.value.func, ast.Name) and not stmt.value.keywords \
                and self.pure(stmt.value.func.id) and stmt.lineno == stmt.end_lineno:
            return stmt.targets[0].id, stmt.value
        return None

    def block(self, body: list[ast.stmt], table: dict[str, _Call]) -> None:
        """Reuse calls in ``body`` given the ``table`` of valid earlier calls."""
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef):
                self.block(stmt.body, {})
                continue
            view = self._view(stmt)
            found = self._candidate(stmt)
            if found is not None:
                target, call = found
                key = ast.dump(call)
                earlier = table.get(key)
                if earlier is not None and earlier.result != target:
                    line = self.lines[stmt.lineno - 1]
                    indent = line[:len(line) - len(line.lstrip())]
                    self.lines[stmt.lineno - 1] = f"{indent}{target} = {earlier.result}"
            if isinstance(stmt, (ast.If, ast.For, ast.While)):
                fx = self._effects(stmt, {})
                inner = {k: c for k, c in table.items() if c.survives(fx)}
                if isinstance(stmt, ast.If):
                    self.block(stmt.body, dict(table))
                    self.block(stmt.orelse, dict(table))
                else:
                    self.block(stmt.body, dict(inner))
                table = inner
                continue
            fx = self._effects(stmt, {})
            table = {k: c for k, c in table.items() if c.survives(fx)}
            if view is not None:
                self.views[view[0]] = view[1]
            if found is not None:
                reads = self._reads(found[1], found[0])
                if reads is not None and found[0] not in reads.names - {found[0]}:
                    table[ast.dump(found[1])] = reads


def _range(node: ast.For) -> tuple[int, int] | None:
    """``(lo, hi)`` of a loop over ``range`` with constant bounds."""
    it = node.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and 1 <= len(it.args) <= 2 and not it.keywords
            and all(isinstance(a, ast.Constant) and type(a.value) is int for a in it.args)):
        return None
    bounds = [a.value for a in it.args]
    return (0, bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])


def reuse_calls(lines: list[str], pure: Callable[[str], bool],
                arrays: set[str] | frozenset[str]) -> list[str]:
    """``lines`` (statements of one function body, any indentation) with repeated pure calls
    replaced by the earlier result.

    Parameters
    ----------
    lines : list of str
        Source lines; each replaced statement keeps its line.
    pure : callable
        ``pure(name)``: whether the function the body calls as ``name`` (or
        ``module.attr``) is pure (see :func:`is_pure`).
    arrays : set of str
        Names of the distinct arrays the body indexes (``f``, ``m``, ...);
        any other subscripted name that is not a view of one of them is
        treated as possibly aliasing everything.
    """
    out = list(lines)
    tree = ast.parse(textwrap.dedent("\n".join(lines)))
    _Pass(out, pure, set(arrays)).block(tree.body, {})
    return out


def pure_names(namespace: dict) -> Callable[[str], bool]:
    """``pure(name)`` for a generated module's ``namespace``: its pure helpers, the pure
    builtins, and ``alias.fn`` of a ``math`` alias."""
    return functools.partial(_pure_name, namespace)
