"""Simplify an inlined kernel body: integer constants folded, one-trip loops and dead
branches removed.

A kernel written for any port size reads, inlined at a call site where the
sizes are constants, like ``for c5_j in range(1): f[b4 + (11 + c5_j)] = ...``
or ``f[b1 + (c0_n - 1 + (1 if c0_n - 1 < 0 else 0))]`` after ``c0_n = 1``.
This pass rewrites such code to what one would write by hand
(``f[b4 + 11] = ...``), so the generated source can be read, and numba has
less to type.  Only integer arithmetic is folded (exact in Python and in
numba's int64 alike), so the simplified code computes the same bits.

Rules, repeated until nothing changes:

- a local assigned exactly once, at the top level of the body, to an
  integer constant (alone, or in a tuple of constants: ``a, b = (2, 5)``,
  a kernel's named offsets, also once its elements have folded to constants,
  as TransferFunction's ``b, a = (0, 0 + n + 1)``) is replaced by that
  constant where it is read, and the assignment is dropped;
- ``+ - * // %`` and unary ``-`` of integer constants, comparisons of
  integer constants, ``a if <constant> else b`` and ``if <constant>:`` are
  folded; in an index, ``x + 0`` becomes ``x``, ``(x + 3) - 1`` becomes
  ``x + 2``, ``2 + x`` becomes ``x + 2`` and ``4 + (x + 2)`` becomes
  ``x + 6``, and ``x < 0`` is false for a loop counter over a range from 0
  plus constants (the wrap-around guard of a run-time index);
- ``for v in range(...)`` with constant bounds and zero trips is dropped;
  with one trip its body replaces it, ``v`` read as the constant (only when
  ``v`` is set by ``for`` loops alone and read only inside them).
"""
from __future__ import annotations

import ast
import operator

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
            ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}


def _int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


class _Fold(ast.NodeTransformer):
    """Folds integer constant expressions and constant conditions; substitutes ``known``."""

    def __init__(self, known: dict[str, int], counters: frozenset[str] = frozenset()):
        self.known = known
        self.counters = counters    # loop counters over a range from >= 0: never negative
        self.index = False          # inside a subscript: integer arithmetic only

    def _nonnegative(self, node: ast.AST) -> bool:
        value = _int(node)
        if value is not None:
            return value >= 0
        if isinstance(node, ast.Name):
            return node.id in self.counters
        return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)) \
            and self._nonnegative(node.left) and self._nonnegative(node.right)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        node.value = self.visit(node.value)
        outer, self.index = self.index, True
        node.slice = self.visit(node.slice)
        self.index = outer
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.known:
            return ast.Constant(self.known[node.id])
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        a, b = _int(node.left), _int(node.right)
        op = _BINARY.get(type(node.op))
        if a is not None and b is not None and op is not None \
                and not (b == 0 and isinstance(node.op, (ast.FloorDiv, ast.Mod))):
            return ast.Constant(op(a, b))
        if not self.index:                    # (not for floats: -0.0 + 0 is 0.0)
            return node
        if isinstance(node.op, (ast.Add, ast.Sub)) and b == 0:
            return node.left
        if isinstance(node.op, ast.Add) and a == 0:
            return node.right
        if isinstance(node.op, ast.Add) and a is not None and b is None \
                and not isinstance(node.right, ast.BinOp):          # 2 + j -> j + 2
            return ast.BinOp(node.right, ast.Add(), node.left)
        inner = node.right
        if a is not None and isinstance(node.op, ast.Add) and isinstance(inner, ast.BinOp) \
                and isinstance(inner.op, (ast.Add, ast.Sub)) and _int(inner.right) is not None:
            return self.visit_BinOp(ast.BinOp(ast.BinOp(inner.left, inner.op, inner.right),
                                              ast.Add(), ast.Constant(a)))   # 4 + (j + 2)
        inner = node.left
        if b is not None and isinstance(node.op, (ast.Add, ast.Sub)) \
                and isinstance(inner, ast.BinOp) and isinstance(inner.op, (ast.Add, ast.Sub)) \
                and _int(inner.right) is not None:          # (x + 3) - 1 -> x + 2
            sign = 1 if isinstance(inner.op, ast.Add) else -1
            total = sign * inner.right.value + (b if isinstance(node.op, ast.Add) else -b)
            return self.visit_BinOp(ast.BinOp(inner.left, ast.Add() if total >= 0 else ast.Sub(),
                                              ast.Constant(abs(total))))
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        value = _int(node.operand)
        if isinstance(node.op, ast.USub) and value is not None:
            return ast.Constant(-value)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) == 1 and _int(node.comparators[0]) == 0 \
                and self._nonnegative(node.left) and isinstance(node.ops[0], (ast.Lt, ast.GtE)):
            return ast.Constant(isinstance(node.ops[0], ast.GtE))     # a counter + 2 < 0
        values = [_int(node.left), *(_int(c) for c in node.comparators)]
        ops = [_COMPARE.get(type(o)) for o in node.ops]
        if all(v is not None for v in values) and all(ops):
            return ast.Constant(all(op(x, y) for op, x, y in zip(ops, values, values[1:])))
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.test, ast.Constant):
            return node.body if node.test.value else node.orelse
        return node

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        if isinstance(node.test, ast.Constant):
            return (node.body if node.test.value else node.orelse) or []
        return node

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        trips = _trips(node)
        if trips == 0:
            return []
        return node


def _trips(node: ast.For) -> tuple[int, int] | int | None:
    """Trip count of ``for v in range(<constants>)`` without ``else``, else None."""
    it = node.iter
    if node.orelse or not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                           and it.func.id == "range" and not it.keywords
                           and 1 <= len(it.args) <= 2):
        return None
    bounds = [_int(a) for a in it.args]
    if any(b is None for b in bounds):
        return None
    start, stop = (0, bounds[0]) if len(bounds) == 1 else bounds
    return max(0, stop - start)


def _start(node: ast.For) -> int:
    args = node.iter.args
    return 0 if len(args) == 1 else _int(args[0])


class _Unroll(ast.NodeTransformer):
    """Replaces one-trip loops by their body, the counter read as the constant, where
    the counter is read nowhere outside a loop that sets it (see :func:`_loop_scoped`)."""

    def __init__(self, body: list[ast.stmt]):
        self.scoped = _loop_scoped(body)

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        if _trips(node) != 1 or not isinstance(node.target, ast.Name) \
                or node.target.id not in self.scoped \
                or any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(node)):
            return node
        fold = _Fold({node.target.id: _start(node)})
        return _flatten([fold.visit(stmt) for stmt in node.body])   # a folded `if` is a list


def _loop_scoped(body: list[ast.stmt]) -> frozenset[str]:
    """Variables set only as the target of ``for`` loops over ``range`` and read only
    inside such a loop, none of them nested in another over the same variable.

    Kernels reuse a counter name for several loops (``for i in range(n)`` then
    ``for i in range(m)``): each loop's counter is its own, so one loop can be
    unrolled without changing what the others read.
    """
    stores = _counts(body, ast.Store)
    bound: dict[str, int] = {}
    loose: set[str] = set()

    def walk(node: ast.AST, scope: tuple[str, ...]) -> None:
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and _is_range(node):
            name = node.target.id
            bound[name] = bound.get(name, 0) + 1
            if name in scope:
                loose.add(name)
            scope = (*scope, name)
            for child in (node.iter, *node.body, *node.orelse):
                walk(child, scope[:-1] if child is node.iter else scope)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in scope:
            loose.add(node.id)
        for child in ast.iter_child_nodes(node):
            walk(child, scope)

    for stmt in body:
        walk(stmt, ())
    return frozenset(n for n, c in bound.items() if c == stores.get(n) and n not in loose)


def _is_range(node: ast.For) -> bool:
    it = node.iter
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
        and not it.keywords and 1 <= len(it.args) <= 2 and not node.orelse


def _counts(body: list[ast.stmt], ctx: type) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in ast.walk(ast.Module(body, [])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ctx):
            counts[node.id] = counts.get(node.id, 0) + 1
    return counts


def _constants(body: list[ast.stmt], names: set[str]) -> dict[str, int]:
    """Locals of ``names`` assigned once, at the top level, to an integer constant."""
    stores = _counts(body, ast.Store)
    known = {}
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id in names \
                and stores.get(stmt.targets[0].id) == 1 and _int(stmt.value) is not None:
            known[stmt.targets[0].id] = stmt.value.value
    return known


def _counters(body: list[ast.stmt]) -> frozenset[str]:
    """Variables set only as the target of ``for v in range(...)`` loops starting at >= 0."""
    stores = _counts(body, ast.Store)
    targets: dict[str, int] = {}
    for node in ast.walk(ast.Module(body, [])):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and _is_range(node) \
                and (len(node.iter.args) == 1 or (_int(node.iter.args[0]) or -1) >= 0):
            targets[node.target.id] = targets.get(node.target.id, 0) + 1
    return frozenset(n for n, c in targets.items() if c == stores.get(n))


def _flatten(body: list) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in body:
        out.extend(stmt if isinstance(stmt, list) else [stmt])
    return out


def _split(stmt: ast.stmt) -> ast.stmt | list[ast.stmt]:
    """``a, b = (2, 5)`` as ``a = 2`` and ``b = 5`` (constants: no order to keep)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0], ast.Tuple) and isinstance(stmt.value, ast.Tuple) \
            and len(stmt.targets[0].elts) == len(stmt.value.elts) \
            and all(isinstance(t, ast.Name) for t in stmt.targets[0].elts) \
            and all(isinstance(v, ast.Constant) for v in stmt.value.elts):
        return [ast.copy_location(ast.Assign([t], v), stmt)
                for t, v in zip(stmt.targets[0].elts, stmt.value.elts)]
    return stmt


def simplify(body: list[ast.stmt], names: set[str]) -> list[ast.stmt]:
    """``body`` simplified (see the module docstring); ``names`` are the kernel's locals.

    Statements whose bodies empty out get ``pass``.
    """
    for _ in range(8):
        before = ast.dump(ast.Module(body, []))
        body = _flatten([_split(s) for s in body])     # again: folding may make a tuple constant
        known = _constants(body, names)
        body = [s for s in body if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                                        and isinstance(s.targets[0], ast.Name)
                                        and s.targets[0].id in known)]
        body = _flatten([_Fold(known, _counters(body)).visit(s) for s in body])
        body = _flatten([_Unroll(body).visit(s) for s in body])
        body = [_fill(s) for s in body]
        if ast.dump(ast.Module(body, [])) == before:
            break
    return body


def _fill(stmt: ast.stmt) -> ast.stmt:
    """Give compound statements whose bodies emptied out a ``pass``."""
    for node in ast.walk(stmt):
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                block[:] = _flatten(block)
        if isinstance(node, (ast.If, ast.For, ast.While)) and not node.body:
            node.body = [ast.Pass()]
    return stmt
