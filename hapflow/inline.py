"""Inline a block kernel's body into the generated code at constant offsets.

Calling a kernel on views of the flat arrays costs a pointer and a run-time
offset per view; with dozens of views live across the tick loop they spill
and every store may alias every load.  Measured on the 4 kHz rig benchmark:
view calls ran at 2.0x a hand-written loop, inlined bodies at about 1.2x.
So the generator pastes each kernel's body into ``run``, rewriting

- ``port[i]`` -> ``sf[offset + i]`` (constant offset into the flat array),
- ``port.size``, ``port.shape[0]``, ``len(port)`` -> the constant size,
- any other use of a port (passing it to a helper) -> a view made before the loop,
- local names -> names unique to the call site,
- numeric constants the kernel reads from its module or closure -> literals,
- other globals (``math``, helper functions, closure arrays) -> aliases
  injected into the generated module,
- scalar arguments (time ``t``, guard index ``k``) -> the caller's expression.

A ``*star`` parameter is bound to the call's remaining arguments
(:func:`_expand_star`).  A kernel that cannot be inlined faithfully (a
star tuple indexed at run time or passed on, multi-dimensional ports, a
``return`` before its end, nested functions, assignment to a parameter
name) returns ``None`` and is called normally on views.
"""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
import linecache
import textwrap
import types
from dataclasses import dataclass
from typing import Callable

from .names import constant_field
from .simplify import simplify


@dataclass(frozen=True)
class ArrayArg:
    """A kernel argument that is the slice ``array[base + start:base + start + size]``.

    ``base`` names an integer variable of the caller (a relocatable compile
    unit receives the offsets of its regions as arguments); None means 0.
    """

    array: str
    start: int
    size: int
    base: str | None = None

    def index(self, offset: ast.expr) -> ast.expr:
        """``base + offset`` (``offset`` alone without a base)."""
        if self.base is None:
            return offset
        if isinstance(offset, ast.Constant) and offset.value == 0:
            return ast.Name(self.base, ast.Load())
        return ast.BinOp(ast.Name(self.base, ast.Load()), ast.Add(), offset)

    def code(self) -> str:
        """Source of the view of this slice."""
        lo = ast.unparse(self.index(ast.Constant(self.start)))
        hi = ast.unparse(self.index(ast.Constant(self.start + self.size)))
        return f"{self.array}[{lo}:{hi}]"


@dataclass(frozen=True)
class ExprArg:
    """A kernel argument that is a scalar expression in the caller's scope."""

    code: str


class _NotInlinable(Exception):
    pass


_UNSUPPORTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Global, ast.Nonlocal,
                ast.Yield, ast.YieldFrom, ast.ClassDef, ast.Try, ast.With, ast.Await)


@functools.lru_cache(maxsize=None)
def source(py: Callable) -> str | None:
    """A function's dedented source, or None if it has none (read once per function).

    Cut from its file by its code's line table: from its first line (its
    decorators) to the last line any instruction of it, or of a function
    nested in it, spans, then on over the lines indented deeper than its
    ``def`` (a closing ``pass`` or comment compiles to no instruction).
    ``inspect.getsource`` finds the end by tokenising the file from the
    function on: a fifth of what a warm start of a 1000-block graph spent in
    hapflow.  ``inspect`` reads a function whose cut is not one definition of
    it: one whose instructions all sit on its first line (a one-line ``def``;
    a body of only a docstring or ``...``, whose instructions Python places on
    the ``def`` or the first decorator), or whose code was moved onto other
    lines (Hypothesis moves a test's generated wrapper onto the test's).
    """
    code = getattr(inspect.unwrap(py), "__code__", None)   # as inspect: the wrapped function's
    if code is not None:
        linecache.checkcache(code.co_filename)            # the file may have been edited
        text = _cut(linecache.getlines(code.co_filename), code)
        if text is not None:
            return text
    try:
        return textwrap.dedent(inspect.getsource(py))
    except (OSError, TypeError):
        return None


def _cut(lines: list[str], code: types.CodeType) -> str | None:
    """The dedented lines of the function of ``code`` in ``lines`` (its file), or None where
    its line table gives no end, the file is shorter or the lines are not its definition."""
    first, end = code.co_firstlineno - 1, _last_line(code)
    if end <= first + 1 or end > len(lines):
        return None
    depth = _indent(lines[first])
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > depth):
        end += 1
    while not lines[end - 1].strip():
        end -= 1
    if not _defines(lines[first:end], depth, code.co_name):
        return None
    return textwrap.dedent("".join(lines[first:end]))


def _defines(lines: list[str], depth: int, name: str) -> bool:
    """Whether the first line at ``depth`` after the decorators defines function ``name``
    (lines cut by a moved line table may stop before it)."""
    for line in lines:
        text = line.lstrip()
        if _indent(line) == depth and not text.startswith("@"):
            return text.startswith((f"def {name}(", f"async def {name}("))
    return False


def _last_line(code: types.CodeType) -> int:
    """The last source line the instructions of ``code`` and of its nested functions span."""
    ends = [end for _, end, _, _ in code.co_positions() if end is not None]
    ends += [_last_line(const) for const in code.co_consts if isinstance(const, types.CodeType)]
    return max(ends, default=code.co_firstlineno)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def size(fn: Callable) -> int:
    """Lines of a kernel's source: what its inlined body costs, roughly."""
    text = source(getattr(fn, "py_func", fn))
    return 1 if text is None else text.count("\n")


def _function(fn: Callable) -> ast.FunctionDef:
    py = getattr(fn, "py_func", fn)
    text = source(py)
    if text is None:
        raise _NotInlinable
    try:
        tree = ast.parse(text)
    except SyntaxError:
        raise _NotInlinable from None
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise _NotInlinable
    a = node.args
    if a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
        raise _NotInlinable
    return node


def _constant_int(expr: ast.expr) -> int | None:
    """The value of an integer expression of literals and ``+ - *``, else None."""
    allowed = (ast.Expression, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub,
               ast.Mult, ast.USub)
    tree = ast.Expression(expr)
    if not all(isinstance(n, allowed) for n in ast.walk(tree)) or any(
            isinstance(n, ast.Constant) and type(n.value) is not int for n in ast.walk(tree)):
        return None
    return eval(compile(ast.fix_missing_locations(tree), "<constant>", "eval"), {})


class _Star(ast.NodeTransformer):
    """Uses of a ``*star`` parameter bound to ``len(names)`` arguments, rewritten to
    those arguments (see :func:`_expand_star`)."""

    def __init__(self, star: str, names: list[str]):
        self.star, self.names = star, names

    def _element(self, index: ast.expr) -> str | None:
        value = _constant_int(index)
        if value is None or not -len(self.names) <= value < len(self.names):
            return None
        return self.names[value]

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == self.star:
            return ast.Constant(len(self.names))
        return self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == self.star:
            name = self._element(node.slice)
            if name is not None:
                return ast.Name(name, node.ctx)
        return node

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        node = self.generic_visit(node)
        trips = self._trips(node)
        if trips is None:
            return node
        counter = node.target.id
        body: list[ast.stmt] = []
        for value in trips:
            copy = ast.parse(ast.unparse(ast.Module(node.body, [])), mode="exec").body
            body += [self.visit(_Bind(counter, value).visit(stmt)) for stmt in copy]
        return body

    def _trips(self, node: ast.For) -> range | None:
        """The counter values of a loop over a constant ``range`` whose body indexes the
        star tuple with the counter (None: leave the loop)."""
        it = node.iter
        if not (isinstance(node.target, ast.Name) and isinstance(it, ast.Call)
                and isinstance(it.func, ast.Name) and it.func.id == "range"
                and 1 <= len(it.args) <= 2 and not it.keywords and not node.orelse):
            return None
        bounds = [_constant_int(arg) for arg in it.args]
        counter = node.target.id
        walked = [n for stmt in node.body for n in ast.walk(stmt)]
        if None in bounds or any(isinstance(n, (ast.Break, ast.Continue)) for n in walked) \
                or any(isinstance(n, ast.Name) and n.id == counter
                       and not isinstance(n.ctx, ast.Load) for n in walked) \
                or not any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
                           and n.value.id == self.star and isinstance(n.slice, ast.Name)
                           and n.slice.id == counter for n in walked):
            return None
        return range(*bounds)


class _Bind(ast.NodeTransformer):
    """Reads of one name replaced by a constant."""

    def __init__(self, name: str, value: int):
        self.name, self.value = name, value

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Constant(self.value) if node.id == self.name else node


def _expand_star(fn: ast.FunctionDef, count: int) -> ast.FunctionDef:
    """``fn`` with its ``*star`` parameter replaced by ``count`` positional ones.

    ``len(star)`` becomes ``count``; a loop over a constant ``range`` whose body
    indexes ``star`` with its counter is unrolled; ``star[i]`` with a constant
    ``i`` becomes argument ``i``; a local assigned once from an argument
    (``y = ports[-1]``) is that argument.  Sum and Product take their inputs
    this way: inlined rather than called on views, which a compile unit would
    otherwise make on every tick.  Any other use of ``star`` (a run-time
    index, the tuple passed on) raises :class:`_NotInlinable`.
    """
    star = fn.args.vararg.arg
    taken = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | \
        {a.arg for a in fn.args.args}
    names = [f"{star}_{k}" for k in range(count)]
    if taken & set(names):
        raise _NotInlinable
    fn = _Star(star, names).visit(fn)
    fn.body = _aliases_resolved(fn.body, set(names))
    if any(isinstance(n, ast.Name) and n.id == star for stmt in fn.body for n in ast.walk(stmt)):
        raise _NotInlinable
    fn.args.vararg = None
    fn.args.args += [ast.arg(name) for name in names]
    return fn


def _aliases_resolved(body: list[ast.stmt], params: set[str]) -> list[ast.stmt]:
    """``body`` without top-level ``alias = param`` statements of a local assigned only
    there, every read of the alias reading the parameter."""
    stores: dict[str, int] = {}
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
    aliases = {stmt.targets[0].id: stmt.value.id for stmt in body
               if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
               and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Name)
               and stmt.value.id in params and stores[stmt.targets[0].id] == 1}

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.Name(aliases[node.id], node.ctx) if node.id in aliases else node

    kept = [stmt for stmt in body if not (isinstance(stmt, ast.Assign)
                                          and isinstance(stmt.targets[0], ast.Name)
                                          and stmt.targets[0].id in aliases)]
    return [Rename().visit(stmt) for stmt in kept]


def _locals(fn: ast.FunctionDef, params: set[str]) -> tuple[set[str], set[str]]:
    """Local names, and those assigned only as a ``for`` target (loop counters)."""
    stores: dict[str, int] = {}
    targets = set()
    for node in ast.walk(fn):
        if isinstance(node, _UNSUPPORTED) and node is not fn:
            raise _NotInlinable
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if node.id in params:
                raise _NotInlinable
            stores[node.id] = stores.get(node.id, 0) + 1
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            targets.add(node.target.id)
    return set(stores), {n for n in targets if stores[n] == 1}


class _Rewriter(ast.NodeTransformer):
    def __init__(self, arrays: dict[str, ArrayArg], scalars: dict[str, ast.expr],
                 local_names: set[str], loop_only: set[str], prefix: str,
                 resolve: Callable[[str], str], view: Callable[[ArrayArg], str],
                 value_of: Callable[[str], object]):
        self.value_of = value_of
        self.loop_only = loop_only
        self.arrays, self.scalars = arrays, scalars
        self.local_names, self.prefix, self.resolve = local_names, prefix, resolve
        self.view = view
        self.counters: set[str] = set()     # loop counters over range(n): never negative

    def _nonnegative(self, index: ast.expr) -> bool:
        if isinstance(index, ast.Constant):
            return isinstance(index.value, int) and index.value >= 0
        if isinstance(index, ast.Name):
            return index.id in self.counters
        if isinstance(index, ast.BinOp) and isinstance(index.op, (ast.Add, ast.Mult)):
            return self._nonnegative(index.left) and self._nonnegative(index.right)
        return False

    def _offset(self, arg: ArrayArg, index: ast.expr) -> ast.expr:
        index = self.visit(index)
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) \
                and isinstance(index.operand, ast.Constant):
            index = ast.Constant(-index.operand.value)
        if isinstance(index, ast.Constant) and isinstance(index.value, int):
            value = index.value if index.value >= 0 else arg.size + index.value
            return arg.index(ast.Constant(arg.start + value))
        shifted = index if arg.start == 0 else ast.BinOp(ast.Constant(arg.start), ast.Add(), index)
        if self._nonnegative(index):
            return arg.index(shifted)
        # a run-time index may be negative: wrap around like an array view would
        wrap = ast.IfExp(ast.Compare(index, [ast.Lt()], [ast.Constant(0)]),
                         ast.Constant(arg.size), ast.Constant(0))
        return arg.index(ast.BinOp(shifted, ast.Add(), wrap))

    def visit_For(self, node: ast.For) -> ast.AST:
        it = node.iter
        if isinstance(node.target, ast.Name) and node.target.id in self.loop_only \
                and isinstance(it, ast.Call) \
                and isinstance(it.func, ast.Name) and it.func.id == "range" and not it.keywords \
                and (len(it.args) == 1 or (len(it.args) == 2 and self._nonnegative(it.args[0]))):
            self.counters.add(self.prefix + node.target.id)
        return self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in self.arrays \
                and not isinstance(node.slice, (ast.Slice, ast.Tuple)):
            arg = self.arrays[node.value.id]
            element = ast.Subscript(ast.Name(arg.array, ast.Load()), self._offset(arg, node.slice),
                                    node.ctx)
            element.hf_arg = arg             # addressed once simplified (see _Addressed)
            return element
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                and isinstance(node.value.value, ast.Name) and node.value.value.id in self.arrays:
            return ast.Constant(self.arrays[node.value.value.id].size)
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in self.arrays and node.attr == "size":
            return ast.Constant(self.arrays[node.value.id].size)
        if isinstance(node.value, ast.Name) and node.value.id not in self.local_names:
            offset = constant_field(self.value_of(node.value.id), node.attr)
            if offset is not None:                  # P.mass: a named offset (hapflow.names)
                return ast.Constant(offset)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id in self.arrays:
            return ast.Constant(self.arrays[node.args[0].id].size)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.arrays:
            return ast.Name(self.view(self.arrays[node.id]), ast.Load())
        if node.id in self.scalars:
            return self.scalars[node.id]
        if node.id in self.local_names:
            return ast.Name(self.prefix + node.id, node.ctx)
        resolved = self.resolve(node.id)
        return resolved if isinstance(resolved, ast.expr) else ast.Name(resolved, node.ctx)


class _Addressed(ast.NodeTransformer):
    """Elements of the call site's arrays written through the caller's addressing."""

    def __init__(self, element: Callable[[ArrayArg, ast.expr, ast.expr_context], ast.expr]):
        self.element = element

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        arg = getattr(node, "hf_arg", None)
        return node if arg is None else self.element(arg, node.slice, node.ctx)


def global_of(fn: Callable, name: str) -> object:
    """The value global (or closure) ``name`` has for kernel ``fn``."""
    py = getattr(fn, "py_func", fn)
    closure = dict(zip(py.__code__.co_freevars, (c.cell_contents for c in py.__closure__ or ())))
    return closure[name] if name in closure else py.__globals__[name]


def inline(fn: Callable, args: list[ArrayArg | ExprArg], prefix: str,
           resolve: Callable[[str, object], str],
           view: Callable[[ArrayArg], str],
           element: Callable[[ArrayArg, ast.expr, ast.expr_context], ast.expr] | None = None
           ) -> list[str] | None:
    """Source lines of ``fn``'s body applied to ``args``, or None if it cannot be inlined.

    Parameters
    ----------
    fn : callable
        The kernel (numba dispatcher or plain function).
    args : list
        One :class:`ArrayArg` or :class:`ExprArg` per parameter, in order.
    prefix : str
        Prefix making the kernel's local names unique at this call site.
    resolve : callable
        ``resolve(name, value) -> alias``: registers a global the kernel uses
        and returns the name under which the generated module holds it.
    view : callable
        ``view(arg) -> name`` of a view made once before the tick loop, for a
        port the kernel uses whole (passes to a helper).
    element : callable, optional
        ``element(arg, index, ctx)``: the expression for element ``index``
        (simplified, base included) of ``arg``'s array, when it is not
        ``array[index]`` (see :mod:`hapflow.lanes`).
    """
    try:
        node = _function(fn)
        if node.args.vararg is not None:
            if len(args) < len(node.args.args):
                raise _NotInlinable
            node = _expand_star(node, len(args) - len(node.args.args))
        params = [a.arg for a in node.args.args]
        if len(params) != len(args):
            raise _NotInlinable
        body = list(node.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        if body and isinstance(body[-1], ast.Return) and body[-1].value is None:
            body = body[:-1]
        for stmt in body:
            if any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
                raise _NotInlinable
        local_names, loop_only = _locals(node, set(params))
        arrays = {n: a for n, a in zip(params, args) if isinstance(a, ArrayArg)}
        scalars = {n: ast.parse(f"({a.code})", mode="eval").body
                   for n, a in zip(params, args) if isinstance(a, ExprArg)}
        py = getattr(fn, "py_func", fn)
        closure = dict(zip(py.__code__.co_freevars, (c.cell_contents for c in py.__closure__ or ())))

        def value_of(name: str) -> object:
            return closure[name] if name in closure else py.__globals__.get(name)

        def lookup(name: str) -> str | ast.expr:
            if name in closure or name in py.__globals__:
                value = closure[name] if name in closure else py.__globals__[name]
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    return ast.Constant(value)
                return resolve(name, value)
            if hasattr(builtins, name):
                return name
            raise _NotInlinable

        rewriter = _Rewriter(arrays, scalars, local_names, loop_only, prefix, lookup, view,
                             value_of)
        body = [rewriter.visit(stmt) for stmt in body]
        body = simplify(body, {prefix + name for name in local_names})
        if element is not None:
            body = [_Addressed(element).visit(stmt) for stmt in body]
        lines: list[str] = []
        for stmt in body:
            lines.extend(ast.unparse(ast.fix_missing_locations(stmt)).splitlines())
        return lines or ["pass"]
    except _NotInlinable:
        return None
