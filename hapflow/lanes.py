"""How generated code reaches a run's arrays: one run alone, or lane ``r`` of a group.

:class:`hapflow.codegen.Generator` writes every element access and every
view through one of these *addressings*, so the same phases and sites give
both kernels of a graph:

:class:`Flat` (``run``)
    element ``i`` of array ``f`` is ``f[i]``; a view is ``f[a:b]``.
:class:`Lanes` (``run_lanes``, :mod:`hapflow.batch`)
    a group of ``width`` runs keeps its arrays flat and interleaved:
    element ``i`` of lane ``r`` is ``F[i * width + r]``, a view is the
    strided slice ``F[a * width + r:b * width + r:width]``.  Each tick runs
    over the lanes (``for r in range(n_lanes)``).  In fused code an element of
    ``f`` at a constant offset that no view and no computed index reaches
    becomes a local ``f_<i>`` instead (a *register*): loaded from ``F`` when
    the tick may read it before writing it (:func:`carried`), stored back
    when written.  With constant offsets the compiler can prove the lanes
    independent and run them in SIMD registers, when nothing in the tick
    stops it: :mod:`hapflow.compiler` inlines the helpers, the arrays are
    pointers (:mod:`hapflow.elements`, views without reference counts), the
    kernels' math is :mod:`hapflow.kmath`'s and their noise has no retry
    loop (:func:`hapflow.rng.normal`).

Which elements views and computed indices reach is known only once the
whole kernel is written, so the lanes kernel is written twice: a first
pass (``memory=None``) records them (:attr:`Lanes.reached`), the second
keeps them in memory.
"""
from __future__ import annotations

import ast


class Flat:
    """Addressing of one run's own arrays (the per-run ``run`` kernel)."""

    width = 0
    arrays = {"f": "f", "m": "m", "si": "si", "sb": "sb", "log": "log", "stats": "stats"}
    constant_views: dict[str, tuple[float, ...]] = {}     # none: a run reads its own arrays

    def element(self, array: str, start: int, size: int, index: ast.expr,
                ctx: ast.expr_context) -> ast.expr:
        """Element ``index`` of ``array`` (``index`` within ``[start, start + size)``)."""
        return ast.Subscript(ast.Name(array, ast.Load()), index, ctx)

    def view(self, array: str, start: int, size: int, lo: ast.expr, hi: ast.expr) -> str:
        """Source of the view ``array[lo:hi]`` (the elements ``[start, start + size)``)."""
        return f"{array}[{ast.unparse(lo)}:{ast.unparse(hi)}]"

    def log(self, column: int) -> str:
        """Source of the log element of tick ``k``, ``column``."""
        return f"log[k, {column}]"


class Lanes(Flat):
    """Addressing of lane ``r`` of a group of ``width`` interleaved runs.

    Parameters
    ----------
    width : int
        Lanes per group.
    columns : int
        Log columns of one run.
    registers : bool
        Keep elements of ``f`` at constant offsets in locals (fused code; a
        compile unit reads the arrays only).
    memory : set of int, optional
        Elements of ``f`` a view or a computed index reaches (they stay in
        ``F``); None records them in :attr:`reached` instead.
    constants : dict of int to float, optional
        Elements of ``f`` that hold this value in every lane of every group
        the kernel will run (fused code): read as a literal, and a view whose
        elements all are is a module constant (:attr:`constant_views`).

    Attributes
    ----------
    constant_views : dict of str to tuple of float
        Name and values of each such view: the module defines it as an array,
        which the compiler freezes into the code like a literal (a block's
        helper reads its parameters through a view: the device's spring
        corners and friction, its filter's coefficients).
    """

    arrays = {"f": "F", "m": "M", "si": "SI", "sb": "SB", "log": "LOG", "stats": "STATS"}

    def __init__(self, width: int, columns: int, registers: bool,
                 memory: set[int] | None = None, constants: dict[int, float] | None = None):
        self.width = width
        self.columns = columns
        self.registers = registers
        self.memory = memory
        self.constants = constants if registers and constants else {}
        self.reached: set[int] = set()
        self.constant_views: dict[str, tuple[float, ...]] = {}

    def _lane(self, index: ast.expr) -> ast.expr:
        """``index * width + r``, folded for a constant index."""
        r = ast.Name("r", ast.Load())
        if isinstance(index, ast.Constant):
            return ast.BinOp(ast.Constant(index.value * self.width), ast.Add(), r) \
                if index.value else r
        scaled = ast.BinOp(index, ast.Mult(), ast.Constant(self.width))
        return ast.BinOp(scaled, ast.Add(), r)

    def _reach(self, array: str, start: int, size: int) -> None:
        if array == "f":
            self.reached.update(range(start, start + size))

    def element(self, array: str, start: int, size: int, index: ast.expr,
                ctx: ast.expr_context) -> ast.expr:
        if isinstance(index, ast.Constant):
            if array == "f" and isinstance(ctx, ast.Load) and index.value in self.constants:
                return ast.Constant(self.constants[index.value])
            if array == "f" and self.registers and \
                    (self.memory is None or index.value not in self.memory):
                return ast.Name(f"f_{index.value}", ctx)
        else:
            self._reach(array, start, size)
        return ast.Subscript(ast.Name(self.arrays[array], ast.Load()), self._lane(index), ctx)

    def view(self, array: str, start: int, size: int, lo: ast.expr, hi: ast.expr) -> str:
        if array == "f" and isinstance(lo, ast.Constant) and isinstance(hi, ast.Constant) \
                and lo.value < hi.value and all(i in self.constants
                                                for i in range(lo.value, hi.value)):
            name = f"K_f_{lo.value}_{hi.value}"
            self.constant_views[name] = tuple(self.constants[i]
                                              for i in range(lo.value, hi.value))
            return name
        self._reach(array, start, size)
        lo, hi = ast.unparse(self._lane(lo)), ast.unparse(self._lane(hi))
        return f"{self.arrays[array]}[{lo}:{hi}:{self.width}]"

    def log(self, column: int) -> str:
        return f"LOG[k * {self.columns * self.width} + {column * self.width} + r]"


def registers(body: list[ast.stmt]) -> tuple[list[str], list[str], list[str]]:
    """The registers of a lanes tick body: those to load before it (:func:`carried`),
    those to store after it every tick (carried and written), and those to store
    after the last tick only (written afresh every tick)."""
    names = sorted({n.id for s in body for n in ast.walk(s)
                    if isinstance(n, ast.Name) and n.id.startswith("f_")},
                   key=lambda name: int(name[2:]))
    written = {n.id for s in body for n in ast.walk(s)
               if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loads = carried(body, set(names))
    return ([n for n in names if n in loads], [n for n in names if n in loads and n in written],
            [n for n in names if n not in loads and n in written])


def carried(body: list[ast.stmt], names: set[str]) -> set[str]:
    """Those of ``names`` a tick may read before it writes them (their values carry over
    from the previous tick).

    A name whose first appearance is the target of a plain assignment at the
    top level of the body (``f_3 = expression`` not reading ``f_3``) is
    computed afresh every tick; every other first appearance (a read, or a
    write inside a branch or loop that may not run) counts as a read.
    """
    written: set[str] = set()
    out: set[str] = set()
    for stmt in body:
        target = stmt.targets[0].id if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0], ast.Name) else None
        scope = stmt.value if target is not None else stmt
        out.update(n.id for n in ast.walk(scope)
                   if isinstance(n, ast.Name) and n.id in names and n.id not in written)
        if target in names and target not in out:
            written.add(target)
    return out
