"""State estimation: linear, extended and unscented Kalman filters (held blocks).

Every filter runs predict-then-update once per sample hit, on flat row-major
matrices kept in the parameter vector ``p`` (model and noise matrices,
initial state) and in the discrete state ``d`` (estimate, covariance and the
work matrices of one step, so the kernels never allocate).  ``output``
computes the whole step from the state left by the previous sample and the
current measurement (direct feedthrough: the estimate at sample ``k`` already
includes ``z[k]``), writes the posterior into work entries of ``d``, and
``update`` copies it into the state.  Sizes are structural; the matrices are
live (same sizes only) and checked at build time and whenever they are set.
The nonlinear filters take their process and measurement functions from the
model registry of :mod:`hapflow.blocks.estimation_models`.

Speed: a block's kernels are made for its structure (:func:`_specialised`).
The steps (:func:`filter_steps`) call their matrix operations through a
set whose shapes are compile-time constants (:func:`fixed_ops`), so the
loops have literal trip counts that LLVM unrolls and vectorises; sizes,
flags and parameter offsets are constants of the compiled step, covariance
products compute one triangle, and the Joseph update distributes the
identity instead of forming ``I - K H``.  Everything specialised on follows
from structural parameters (part of the kernel cache key); live matrices
stay in ``p``.  The model's functions are bound into the steps directly (no
dispatch), a model measuring ``z = H x`` gets the UKF update in closed form
(exact for a linear map), and a model may prepare its input-only terms once
per step instead of once per sigma point.  All of it is compiled with
:func:`hapflow.jit.njit_noalloc`: without numba's atomic reference counting
on the few dozen calls of a step, which cost as much as the arithmetic.
``bench/estimation.py`` measures the result.
"""
from __future__ import annotations

import math
from collections import namedtuple
from functools import lru_cache
from typing import Callable

import numpy as np
from numba import types
from numba.core.typing.typeof import Purpose
from numba.extending import typeof_impl

from hapflow.block import Block, ParamError
from hapflow.closures import frozen
from hapflow.errors import GraphError
from hapflow.jit import njit_noalloc
from hapflow.names import Derived
from hapflow.params import Live, Structural, at_least, nonnegative, one_of, positive
from hapflow.ports import In, Out

from .estimation_models import MODELS, PREPARED, Model, known_model, model_named


# ------------------------------------------------------------------ matrix helpers
@njit_noalloc
def _mm(a, ao, b, bo, c, co, r, k, q, bt, acc, sym):
    """``c[r x q] (+)= a[r x k] @ b[k x q]`` (``b`` stored as ``q x k`` and transposed if ``bt``).

    Every matrix is flat row-major at an offset (``ao``, ``bo``, ``co``) of
    its array; the result is added to ``c`` when ``acc`` is true.  ``c``
    must not overlap ``a`` or ``b``.  Each element is a dot product summed
    in a local (a register): the arrays are usually one and the same, so
    a sum kept in ``c`` would go through memory on every term (this form
    is 12-15 % faster per filter step than accumulating rows in ``c``,
    with the same summation order, so the same bits).  ``sym``: the result
    (``r == q``) is known to be symmetric, so only its lower triangle is
    computed, then copied to the upper one.
    """
    for i in range(r):
        ci = co + i * q
        ai = ao + i * k
        for j in range(i + 1 if sym else q):
            s = c[ci + j] if acc else 0.0
            if bt:
                bj = bo + j * k
                for t in range(k):
                    s += a[ai + t] * b[bj + t]
            else:
                for t in range(k):
                    s += a[ai + t] * b[bo + t * q + j]
            c[ci + j] = s
    if sym:
        for i in range(r):
            for j in range(i):
                c[co + j * q + i] = c[co + i * q + j]


@njit_noalloc
def chol(a, ao, scale, c, co, n):
    """Lower Cholesky factor of ``scale * a[n x n]`` into ``c`` (upper part zeroed).

    A pivot that is not positive (the matrix is not positive definite) gives
    NaN, which then propagates to the estimate instead of raising.
    """
    for i in range(n * n):
        c[co + i] = 0.0
    for j in range(n):
        s = scale * a[ao + j * n + j]
        for k in range(j):
            s -= c[co + j * n + k] * c[co + j * n + k]
        ljj = math.sqrt(s) if s > 0.0 else math.nan
        c[co + j * n + j] = ljj
        for i in range(j + 1, n):
            s = scale * a[ao + i * n + j]
            for k in range(j):
                s -= c[co + i * n + k] * c[co + j * n + k]
            c[co + i * n + j] = s / ljj


@njit_noalloc
def right_solve(lf, lo, m, k, ko, rows):
    """``k[rows x m] <- k S^-1`` in place, ``S = L L'`` given its Cholesky factor ``L`` at ``lf[lo]``.

    Row by row (``S`` is symmetric): solve ``L w = k_i``, then ``L' v = w``.
    """
    for i in range(rows):
        r = ko + i * m
        for j in range(m):
            s = k[r + j]
            for t in range(j):
                s -= lf[lo + j * m + t] * k[r + t]
            k[r + j] = s / lf[lo + j * m + j]
        for j in range(m - 1, -1, -1):
            s = k[r + j]
            for t in range(j + 1, m):
                s -= lf[lo + t * m + j] * k[r + t]
            k[r + j] = s / lf[lo + j * m + j]


@njit_noalloc
def _sigma_points(d, p, xo, lo, so, n, ns, simplex, pchi):
    """Sigma points ``x + L chi_i`` as rows of ``d[so:]`` from the factor ``L`` at ``d[lo:]``.

    ``simplex``: Julier's spherical simplex ``chi`` (n x ns, lower-staircase)
    at ``p[pchi:]``; else Merwe's symmetric set ``x``, ``x + col_k(L)``,
    ``x - col_k(L)`` (``ns = 2 n + 1``).
    """
    if simplex:
        for i in range(ns):
            for j in range(n):
                s = d[xo + j]
                for k in range(j + 1):
                    s += d[lo + j * n + k] * p[pchi + k * ns + i]
                d[so + i * n + j] = s
        return
    for j in range(n):
        d[so + j] = d[xo + j]
    for k in range(n):
        for j in range(n):
            c = d[lo + j * n + k]
            d[so + (1 + k) * n + j] = d[xo + j] + c
            d[so + (1 + n + k) * n + j] = d[xo + j] - c


@njit_noalloc
def _weighted_mean(d, so, dim, ns, p, pw, mo):
    """``d[mo:mo+dim]`` = sum_i W_i chi_i over the ``ns`` points of ``dim`` at ``d[so:]``."""
    for j in range(dim):
        s = 0.0
        for i in range(ns):
            s += p[pw + i] * d[so + i * dim + j]
        d[mo + j] = s


@njit_noalloc
def _weighted_cov(d, ao, am, na, bo, bm, nb, ns, p, pw, co, noise, sym):
    """``d[co:]`` = sum_i W_i (a_i - a_mean)(b_i - b_mean)' (na x nb), plus the matrix
    ``p[noise:]`` when ``noise >= 0`` (Q or R).  Accumulated point by point (independent
    sums per element, in the order of the points).  ``sym``: ``a`` and ``b`` are the same
    points (a covariance): the lower triangle is computed and copied to the upper one."""
    for e in range(na * nb):
        d[co + e] = 0.0
    for i in range(ns):
        w = p[pw + i]
        for a in range(na):
            da = w * (d[ao + i * na + a] - d[am + a])
            row = co + a * nb
            for b in range(a + 1 if sym else nb):
                d[row + b] += da * (d[bo + i * nb + b] - d[bm + b])
    if sym:
        for a in range(na):
            for b in range(a):
                d[co + b * nb + a] = d[co + a * nb + b]
    if noise >= 0:
        for e in range(na * nb):
            d[co + e] += p[noise + e]


# ------------------------------------------------------------------ fixed-shape operations
# A filter step calls its matrix operations through an ``_Ops`` tuple, one field per
# operation shape.  ``GENERIC`` holds the functions above (shapes read from their
# arguments at run time); ``fixed_ops`` gives, for one filter structure, versions with
# the shape frozen as compile-time constants: the same body (numba inlines it into a
# small closure, compiled once per shape and process), literal trip counts, so LLVM
# unrolls and vectorises the loops.  A fixed operation keeps the generic signature and
# ignores its shape arguments.  bench/estimation.py: 2x (EKF) to 4x (UKF) faster per
# update on the 6-state arm than the run-time-size steps.  The matrix products are
# inlined into the steps in turn (an EKF step calls a dozen): 35 % less time per EKF
# step on the 6-state arm; the others stay calls.  The step's text gets the products'
# bodies (hapflow.closures inlines calls of ``inline="always"`` functions when it
# freezes a step: numba's own inlining took most of a step's compile).  Before that, with
# numba copying and typing the product's IR at every call site, tests/test_estimation_nonlinear's
# graph of nine filters compiles in 55.7 s CPU with it, 36.9 s with the products called
# (3.53 against 3.20 us per tick) and 38.6 s with LLVM's inlining (forceinline), whose
# EKF updates were slower (bench/estimation.py --only update, two alternations: 0.68 and
# 0.93 against 0.63 and 0.73 us).  Kept for the users' run time.  Measured again with the
# products only as forceinline (the steps' other helpers unchanged), cached kernels, two
# alternations of --runs 9: KF 0.38, 0.38 against 0.59, 0.60 us per update, EKF 0.43, 0.43
# against 0.62, 0.63, finite-difference EKF 0.92 against 1.10, the UKFs equal (0.90, 0.78);
# that graph's cold compile 50.8, 45.3 against 30.5, 30.5 s CPU.
_Ops = namedtuple("_Ops", "ax bu hx nnn nnt pht hpht ky kpt kkt kr ksk chol_m chol_n solve "
                          "points wmean_n wmean_m wcov_nn wcov_mm wcov_nm sizes")
GENERIC = _Ops(_mm, _mm, _mm, _mm, _mm, _mm, _mm, _mm, _mm, _mm, _mm, _mm, chol, chol,
               right_solve, _sigma_points, _weighted_mean, _weighted_mean, _weighted_cov,
               _weighted_cov, _weighted_cov, sizes=(-1, -1))
"""The operations with shapes read from their arguments; ``sizes`` ``(n, m)`` of a fixed set,
``-1`` where the step reads them from its layout at run time."""
_INLINE = {fn: njit_noalloc(inline="always")(fn.py_func)
           for fn in (_mm, chol, right_solve, _sigma_points, _weighted_mean, _weighted_cov)}


@lru_cache(maxsize=None)
def _fixed_mm(r: int, k: int, q: int, bt: bool, acc: bool, sym: bool) -> Callable:
    """:func:`_mm` for ``c[r x q] (+)= a[r x k] b`` with the shape and flags fixed."""
    body = _INLINE[_mm]

    @njit_noalloc(inline="always")                # into the step: a dozen calls per step
    def mm(a, ao, b, bo, c, co, r_, k_, q_, bt_, acc_, sym_):
        body(a, ao, b, bo, c, co, r, k, q, bt, acc, sym)
    return frozen(mm)[0]


@lru_cache(maxsize=None)
def _fixed_chol(n: int) -> Callable:
    """:func:`chol` of an ``n x n`` matrix."""
    body = _INLINE[chol]

    @njit_noalloc
    def factor(a, ao, scale, c, co, n_):
        body(a, ao, scale, c, co, n)
    return frozen(factor)[0]


@lru_cache(maxsize=None)
def _fixed_solve(m: int, rows: int) -> Callable:
    """:func:`right_solve` of a ``rows x m`` matrix."""
    body = _INLINE[right_solve]

    @njit_noalloc
    def solve(lf, lo, m_, k, ko, rows_):
        body(lf, lo, m, k, ko, rows)
    return frozen(solve)[0]


@lru_cache(maxsize=None)
def _fixed_points(n: int, ns: int, simplex: bool) -> Callable:
    """:func:`_sigma_points` of ``ns`` points of ``n`` states."""
    body = _INLINE[_sigma_points]

    @njit_noalloc
    def points(d, p, xo, lo, so, n_, ns_, simplex_, pchi):
        body(d, p, xo, lo, so, n, ns, simplex, pchi)
    return frozen(points)[0]


@lru_cache(maxsize=None)
def _fixed_wmean(dim: int, ns: int) -> Callable:
    """:func:`_weighted_mean` of ``ns`` points of ``dim`` values."""
    body = _INLINE[_weighted_mean]

    @njit_noalloc
    def wmean(d, so, dim_, ns_, p, pw, mo):
        body(d, so, dim, ns, p, pw, mo)
    return frozen(wmean)[0]


@lru_cache(maxsize=None)
def _fixed_wcov(na: int, nb: int, ns: int, sym: bool) -> Callable:
    """:func:`_weighted_cov` of ``ns`` points, ``na x nb``."""
    body = _INLINE[_weighted_cov]

    @njit_noalloc
    def wcov(d, ao, am, na_, bo, bm, nb_, ns_, p, pw, co, noise, sym_):
        body(d, ao, am, na, bo, bm, nb, ns, p, pw, co, noise, sym)
    return frozen(wcov)[0]


@lru_cache(maxsize=None)
def fixed_ops(n: int, m: int, l: int, ns: int, simplex: bool) -> _Ops:
    """The operations of a filter with ``n`` states, ``m`` measurements, ``l`` inputs and
    ``ns`` sigma points (0: none), shapes fixed (each compiled on first use only)."""
    mm, no, yes = _fixed_mm, False, True
    return _Ops(ax=mm(n, n, 1, no, no, no), bu=mm(n, l, 1, no, yes, no),
                hx=mm(m, n, 1, no, no, no), nnn=mm(n, n, n, no, no, no),
                nnt=mm(n, n, n, yes, no, yes), pht=mm(n, n, m, yes, no, no),
                hpht=mm(m, n, m, no, no, yes), ky=mm(n, m, 1, no, no, no),
                kpt=mm(n, m, n, yes, yes, no), kkt=mm(n, m, n, yes, yes, yes),
                kr=mm(n, m, m, no, no, no), ksk=mm(n, m, n, yes, no, yes),
                chol_m=_fixed_chol(m), chol_n=_fixed_chol(n), solve=_fixed_solve(m, n),
                points=_fixed_points(n, ns, simplex), wmean_n=_fixed_wmean(n, ns),
                wmean_m=_fixed_wmean(m, ns), wcov_nn=_fixed_wcov(n, n, ns, yes),
                wcov_mm=_fixed_wcov(m, m, ns, yes), wcov_nm=_fixed_wcov(n, m, ns, no),
                sizes=(n, m))


# ------------------------------------------------------------------ parameter checks
def _check_sizes(block: Block, names: dict[str, tuple[int, str]]) -> None:
    """Raise ParamError if a matrix parameter has the wrong number of elements."""
    for name, (size, shape) in names.items():
        value = block.values[name]
        if value is None:
            raise ParamError(name, f"parameter {name!r} ({shape}) is required for "
                                   f"{type(block).__name__} with these settings")
        if len(value) != size:
            raise ParamError(name, f"parameter {name!r} must be a flat row-major list of "
                                   f"{shape} = {size} numbers (states n={block.states}, "
                                   f"measurements m={block.measurements}, "
                                   f"controls l={block.controls}), got {len(value)}")


def _check_cov(block: Block, name: str, k: int, definite: bool) -> None:
    """Raise ParamError unless ``name`` (k x k) is symmetric and PSD (PD if ``definite``)."""
    mat = np.asarray(block.values[name], dtype=np.float64).reshape(k, k)
    scale = max(1.0, float(np.max(np.abs(mat))))
    if not np.allclose(mat, mat.T, rtol=0.0, atol=1e-12 * scale):
        raise ParamError(name, f"parameter {name!r} must be a symmetric matrix, got {mat.tolist()}")
    low = float(np.min(np.linalg.eigvalsh(mat)))
    if definite and low <= 0.0:
        raise ParamError(name, f"parameter {name!r} must be positive definite "
                               f"(smallest eigenvalue {low:g})")
    if not definite and low < -1e-12 * scale:
        raise ParamError(name, f"parameter {name!r} must be positive semi-definite "
                               f"(smallest eigenvalue {low:g})")


_MAT = dict(kind="floats", default=None)
COMMON = {
    "states": Structural(2, kind="int", check=at_least(1), doc="number of states n"),
    "measurements": Structural(1, kind="int", check=at_least(1), doc="number of measurements m"),
    "controls": Structural(0, kind="int", check=at_least(0),
                           doc="size l of the control input u (0: no u port)"),
    "A": Live(doc="state transition x[k+1] = A x[k] + B u[k], n x n row-major", **_MAT),
    "B": Live(doc="control matrix, n x l row-major (needed when controls > 0)", **_MAT),
    "H": Live(doc="measurement matrix z = H x, m x n row-major", **_MAT),
    "Q": Live(doc="process noise covariance, n x n row-major (units of x squared)", **_MAT),
    "R": Live(doc="measurement noise covariance, m x m row-major (units of z squared)", **_MAT),
    "x0": Live(doc="initial state estimate, n values (default zeros)", **_MAT),
    "P0": Live(doc="initial covariance, n x n row-major (default identity)", **_MAT),
}


class _Estimator:
    """Shared configuration of the filters (a mixin: not itself a block type)."""

    linear_model = True
    control_matrix = True

    def _matrix_sizes(self) -> dict[str, tuple[int, str]]:
        n, m, l = self.states, self.measurements, self.controls
        sizes = {"Q": (n * n, "n x n"), "R": (m * m, "m x m")}
        if self.linear_model:
            sizes["A"] = (n * n, "n x n")
            sizes["H"] = (m * n, "m x n")
        if l > 0 and self.control_matrix:
            sizes["B"] = (n * l, "n x l")
        for name, size in (("x0", (n, "n")), ("P0", (n * n, "n x n"))):
            if self.values[name] is not None:
                sizes[name] = size
        return sizes

    def check_matrices(self) -> None:
        """Check every matrix parameter's size, symmetry and definiteness.

        Raises
        ------
        ParamError
            Naming the offending parameter.
        """
        _check_sizes(self, self._matrix_sizes())
        _check_cov(self, "Q", self.states, False)
        _check_cov(self, "R", self.measurements, True)
        if self.values["P0"] is not None:
            _check_cov(self, "P0", self.states, False)

    def _ports(self) -> None:
        n, m, l = self.states, self.measurements, self.controls
        self.inputs = {"z": In(m, doc="measurement")}
        if l > 0:
            self.inputs["u"] = In(l, doc="control input")
        self.outputs = {"x_hat": Out(n, doc="posterior state estimate x[k|k]"),
                        "P_diag": Out(n, doc="diagonal of the posterior covariance P[k|k]"),
                        "innovation": Out(m, unit="=z", doc="z[k] - H x[k|k-1]")}

    def matrix(self, name: str) -> np.ndarray:
        """Matrix (or vector) parameter ``name`` flat, as the kernels read it: its value, else
        zeros (``P0``: the identity; ``H`` of a nonlinear model: the selection of its first
        ``m`` states, the measurement of a model without ``h``)."""
        n, m, l = self.states, self.measurements, self.controls
        if name == "H" and not self.linear_model:
            return np.eye(m, n).ravel()
        value = self.values[name]
        if value is not None:
            return np.asarray(value, dtype=np.float64)
        size = {"A": n * n, "B": n * l, "H": m * n, "Q": n * n, "R": m * m, "x0": n}
        return np.eye(n).ravel() if name == "P0" else np.zeros(size[name])

    def sigma_count(self) -> int:
        """Number of sigma points (0: no sigma points)."""
        return 0

    def layout(self) -> "Layout":
        """This filter's :class:`Layout`: its sizes and flags and where its values lie in
        ``p`` (by name, from the packing); all of it follows from structural parameters."""
        at = self.packed_offsets()
        return Layout(n=self.states, m=self.measurements, l=self.controls,
                      bu=int(self.control_matrix),
                      numjac=int(self.values.get("jacobian") == "numeric"),
                      ns=self.sigma_count(), simplex=int(self.values.get("sigma") == "simplex"),
                      **{name: getattr(at, name, -1) for name in PACKED})

    def validate(self, changed: str | None) -> None:
        """The matrices' sizes, symmetry and definiteness (:meth:`check_matrices`)."""
        self.check_matrices()


Layout = namedtuple("Layout", "n m l bu numjac ns simplex dt lamn wm wc chi A B H Q R x0 P0 coeffs")
Layout.__doc__ = """What a filter step reads besides its arrays: sizes ``n, m, l``, flags (``B u``
term, numeric Jacobians, simplex set), the number of sigma points ``ns``, then the offset in
``p`` of each packed value (-1: the filter has none): sample time, ``n + lambda``, the
sigma-point weights ``Wm``, ``Wc`` and unit simplex ``chi``, the model matrices and the
model coefficients.  The steps are compiled with it as a constant."""
PACKED = Layout._fields[7:]
"""The fields of :class:`Layout` that are offsets of packed values (by the same names)."""


@typeof_impl.register(Layout)
def _typeof_layout(layout: Layout, context) -> types.Type:
    """A layout compiled in as a constant is typed by its values (``Literal[int]`` fields).

    Numba types a plain tuple constant that way but a named tuple by its field types
    only, so the steps and every helper they pass a size or offset to would be compiled
    for run-time values: constant trip counts and offsets are what make the steps fast
    (the UKF steps ran 32-44 % slower typed ``Layout(int64 x 20)``).  Passed as an
    argument, a layout is typed as numba types any named tuple."""
    if context.purpose == Purpose.constant:
        return types.NamedTuple([types.literal(v) for v in layout], Layout)
    return typeof_impl.dispatch(tuple)(layout, context)


MATRICES = {name: Derived(lambda b, name=name: b.matrix(name), size=size, doc=doc)
            for name, size, doc in (
                ("A", lambda b: b.states ** 2, "state transition, flat"),
                ("B", lambda b: b.states * b.controls, "control matrix, flat"),
                ("H", lambda b: b.measurements * b.states, "measurement matrix, flat"),
                ("Q", lambda b: b.states ** 2, "process noise covariance, flat"),
                ("R", lambda b: b.measurements ** 2, "measurement noise covariance, flat"),
                ("x0", lambda b: b.states, "initial state estimate"),
                ("P0", lambda b: b.states ** 2, "initial covariance, flat"))}
"""The model matrices as the kernels read them (:meth:`_Estimator.matrix`)."""


# ------------------------------------------------------------------ linear Kalman filter
@njit_noalloc(inline="always")
def commit_posterior(d, p, n):
    """Copy the posterior work entries (after x, P) into the state."""
    for i in range(n + n * n):
        d[i] = d[n + n * n + i]


@njit_noalloc
def init_from(d, p, x0, p0, n):
    """``x = x0``, ``P = P0`` from ``p[x0:]`` and ``p[p0:]``."""
    for i in range(n):
        d[i] = p[x0 + i]
    for i in range(n * n):
        d[n + i] = p[p0 + i]


@lru_cache(maxsize=None)
def _specialised(core: Callable, layout: "Layout", post: tuple[int, int, int],
                 mo: int) -> dict[str, Callable]:
    """The ``output``, ``update`` and ``init`` kernels of one filter structure.

    ``core(d, p, z, u, layout)`` is a filter step of :func:`filter_steps`
    built over operations with fixed shapes (:func:`fixed_ops`); ``layout``
    (:class:`Layout`: sizes, flags and parameter offsets) is frozen into the compiled
    step as constants.  ``post = (xn, pn, y)`` are the offsets of the posterior estimate,
    covariance and innovation in ``d``; ``mo`` that of the mode pair (-1:
    none).  Memoised, so a process compiles each structure once; everything
    here follows from structural parameters, which the kernel cache key
    includes.
    """
    XN, PN, Y = post
    N, M, NP = layout.n, layout.m, layout.n + 1
    # the bodies below are pasted into the generated kernel (hapflow.inline), so they
    # call the step directly and write the ports in loops: no further compiled functions

    @njit_noalloc
    def output(t, x, d, m, p, z, x_hat, P_diag, innovation):
        core(d, p, z, z, layout)
        for i in range(N):
            x_hat[i] = d[XN + i]
            P_diag[i] = d[PN + i * NP]
        for i in range(M):
            innovation[i] = d[Y + i]

    @njit_noalloc
    def output_u(t, x, d, m, p, z, u, x_hat, P_diag, innovation):
        core(d, p, z, u, layout)
        for i in range(N):
            x_hat[i] = d[XN + i]
            P_diag[i] = d[PN + i * NP]
        for i in range(M):
            innovation[i] = d[Y + i]

    controlled = layout.l > 0
    return {"output": output_u if controlled else output,
            "update": _committer(N, mo, controlled), "init": _initialiser(N, layout.x0, layout.P0)}


@lru_cache(maxsize=None)
def _committer(N: int, MO: int, controlled: bool) -> Callable:
    """The ``update`` kernel: commit the posterior (``N`` states) and the mode at ``MO``.

    Shared by every filter of those sizes whatever its model, Jacobians or parameter
    offsets.  The tick pastes it (:mod:`hapflow.inline`); where it is called instead
    (``Simulation(inline=False)``), one compile serves them all."""

    @njit_noalloc
    def update(t, x, d, m, p, z):
        commit_posterior(d, p, N)
        if MO >= 0:
            d[MO] = d[MO + 1]

    @njit_noalloc
    def update_u(t, x, d, m, p, z, u):
        commit_posterior(d, p, N)
        if MO >= 0:
            d[MO] = d[MO + 1]
    return update_u if controlled else update


@lru_cache(maxsize=None)
def _initialiser(N: int, X0: int, P0: int) -> Callable:
    """The ``init`` kernel: ``x = x0``, ``P = P0`` (``N`` states, offsets ``X0``, ``P0`` in
    ``p``).

    ``init_all`` pastes it (:mod:`hapflow.inline`: a call of :func:`init_from` with the
    sizes as constants, one compile for every filter); where it is called instead
    (``Simulation(inline=False)``) it is shared by the filters of those sizes and
    offsets, as :func:`_committer` is."""

    @njit_noalloc
    def init(x, d, m, p):
        init_from(d, p, X0, P0, N)
    return init


class KalmanFilter(_Estimator, Block):
    """Linear discrete Kalman filter (predict, then update with Joseph-form covariance).

    Model, with ``w ~ N(0, Q)`` and ``v ~ N(0, R)``::

        x[k] = A x[k-1] + B u[k] + w        z[k] = H x[k] + v

    At each sample hit ``k``, from the posterior ``(x, P)`` of sample ``k-1``
    (``(x0, P0)`` before the first)::

        xp = A x + B u[k]              Pp = A P A' + Q
        y  = z[k] - H xp               S  = H Pp H' + R
        K  = Pp H' S^-1                (S^-1 by its Cholesky factor)
        x  = xp + K y                  P  = (I - K H) Pp (I - K H)' + K R K'

    which is ``filterpy.kalman.KalmanFilter``'s ``predict(u)`` then
    ``update(z)``.  The Joseph form keeps ``P`` symmetric and positive
    semi-definite under rounding.  ``u`` is the control applied over the
    interval ending at sample ``k``.  Matrices are flat row-major lists; the
    units of ``Q`` and ``R`` are those of ``x`` and ``z`` squared.  A held
    block with direct feedthrough from ``z`` and ``u``.

    Ports
    -----
    z          : in, (m,), any unit        measurement
    u          : in, (l,), any unit        control input (only when ``controls`` > 0)
    x_hat      : out, (n,), any unit       posterior estimate x[k|k]
    P_diag     : out, (n,), any unit       diagonal of P[k|k] (variances, units of x squared)
    innovation : out, (m,), unit of z      z[k] - H x[k|k-1]
    """

    params = dict(COMMON)
    derived = MATRICES

    def configure(self) -> None:
        self.check_matrices()
        n, m = self.states, self.measurements
        self.dstate = _ekf_offsets.py_func(n, m)[12] + n * n
        self._ports()

    def kernels(self) -> dict[str, Callable]:
        n, m, l = self.states, self.measurements, self.controls
        off = _ekf_offsets.py_func(n, m)
        core = filter_steps(fixed_ops(n, m, l, 0, False)).kf
        return _specialised(core, self.layout(), (off[2], off[3], off[6]), -1)


# ------------------------------------------------------------------ nonlinear filters
FD_STEP = 6e-6
"""Relative step of the central finite differences (about the cube root of eps)."""


# ------------------------------------------------------------------ extended Kalman filter
@njit_noalloc(inline="always")
def _ekf_offsets(n, m):
    """Offsets of the state and work matrices in ``d`` (the linear KF uses the first 13)."""
    X, P = 0, n
    XN = P + n * n
    PN = XN + n
    XP = PN + n * n
    PP = XP + n
    Y = PP + n * n
    S = Y + m
    LS = S + m * m
    PHT = LS + m * m
    K = PHT + n * m
    NK = K + n * m
    T = NK + n * max(n, m)
    FJ = T + n * n
    HJ = FJ + n * n
    WA = HJ + m * n
    WB = WA + n
    MO = WB + n
    return X, P, XN, PN, XP, PP, Y, S, LS, PHT, K, NK, T, FJ, HJ, WA, WB, MO


# ------------------------------------------------------------------ unscented Kalman filter
@njit_noalloc(inline="always")
def _ukf_offsets(n, m, ns):
    X, P = 0, n
    XN = P + n * n
    PN = XN + n
    SIG = PN + n * n
    SF = SIG + ns * n
    SH = SF + ns * n
    LC = SH + ns * m
    XP = LC + n * n
    PP = XP + n
    ZP = PP + n * n
    S = ZP + m
    LS = S + m * m
    PXZ = LS + m * m
    K = PXZ + n * m
    Y = K + n * m
    T = Y + m
    MO = T + n * m
    return X, P, XN, PN, SIG, SF, SH, LC, XP, PP, ZP, S, LS, PXZ, K, Y, T, MO


@lru_cache(maxsize=None)
def _joseph_correction(op_pht: Callable, op_hpht: Callable, op_chol_m: Callable,
                       op_solve: Callable, op_ky: Callable, op_kpt: Callable,
                       op_kkt: Callable, op_kr: Callable, n_fixed: int,
                       m_fixed: int) -> Callable:
    """The Joseph-form Kalman correction over these operations, a function of its own module.

    Keyed by the operations and their sizes (``n_fixed``, ``m_fixed``; -1: read from the
    arguments), not by the filter's layout: every filter of one shape, whatever its model,
    shares one compiled correction.  Inside each filter's steps it was compiled once per
    layout type (parameter offsets and flags included), 26 times for the 8 shapes of the
    test suite's filters.  Fixed sizes stay constants of the compiled code (the loops'
    trip counts), as they were when they came from the layout.
    """

    @njit_noalloc
    def joseph(d, hm, ho, p, pr, n_, m_, XP, PP, Y, S, LS, PHT, K, NK, T, XN, PN):
        """Kalman correction of the prior ``(d[XP], d[PP])`` by the innovation ``d[Y]``.

        ``H = hm[ho:]`` (m x n), ``R = p[pr:]``::

            S = H Pp H' + R,  K = Pp H' S^-1 (Cholesky),  x = xp + K y,
            P = (I - K H) Pp (I - K H)' + K R K'       (Joseph form)

        into ``d[XN]``, ``d[PN]``; ``S``, ``LS``, ``PHT``, ``K``, ``NK`` (``-K``), ``T`` are
        work areas of ``d``.  The Joseph product is formed as ``T = Pp - K (Pp H')'``,
        ``P = T - (T H') K' + (K R) K'`` (lower triangle, mirrored): the same products
        with the identity distributed, about half the multiplications of forming
        ``I - K H``.
        """
        n = n_ if n_fixed < 0 else n_fixed
        m = m_ if m_fixed < 0 else m_fixed
        op_pht(d, PP, hm, ho, d, PHT, n, n, m, True, False, False)
        op_hpht(hm, ho, d, PHT, d, S, m, n, m, False, False, True)
        for i in range(m * m):
            d[S + i] += p[pr + i]
        op_chol_m(d, S, 1.0, d, LS, m)
        for i in range(n * m):
            d[K + i] = d[PHT + i]
        op_solve(d, LS, m, d, K, n)
        op_ky(d, K, d, Y, d, XN, n, m, 1, False, False, False)
        for i in range(n):
            d[XN + i] += d[XP + i]
        # T = (I - K H) Pp = Pp - K (Pp H')';  P = T (I - K H)' = T - (T H') K'
        for i in range(n * m):
            d[NK + i] = -d[K + i]
        for i in range(n * n):
            d[T + i] = d[PP + i]
        op_kpt(d, NK, d, PHT, d, T, n, m, n, True, True, False)
        op_pht(d, T, hm, ho, d, PHT, n, n, m, True, False, False)
        for i in range(n * n):
            d[PN + i] = d[T + i]
        op_kkt(d, PHT, d, NK, d, PN, n, m, n, True, True, True)
        # + K R K'
        op_kr(d, K, p, pr, d, PHT, n, m, m, False, False, False)
        op_kkt(d, PHT, d, K, d, PN, n, m, n, True, True, True)
    return frozen(joseph)[0]


@lru_cache(maxsize=None)
def _unscented_correction(op_chol_m: Callable, op_solve: Callable, op_ky: Callable,
                          op_kr: Callable, op_ksk: Callable, n_fixed: int,
                          m_fixed: int) -> Callable:
    """The UKF's correction over these operations, a function of its own module (shared by
    every UKF of one shape, as :func:`_joseph_correction`)."""

    @njit_noalloc
    def unscented(d, z, n_, m_, XP, PP, ZP, S, LS, PXZ, K, Y, T, XN, PN):
        """``K = Pxz S^-1`` (Cholesky), ``x = xp + K (z - zp)``, ``P = Pp - K S K'``, from
        the prior ``d[XP]``, ``d[PP]``, the predicted measurement ``d[ZP]``, its covariance
        ``d[S]`` and the cross covariance ``d[PXZ]``, into ``d[XN]``, ``d[PN]``."""
        n = n_ if n_fixed < 0 else n_fixed
        m = m_ if m_fixed < 0 else m_fixed
        op_chol_m(d, S, 1.0, d, LS, m)
        for i in range(n * m):
            d[K + i] = d[PXZ + i]
        op_solve(d, LS, m, d, K, n)
        for i in range(m):
            d[Y + i] = z[i] - d[ZP + i]
        # x = xp + K y,  P = Pp - K S K'
        op_ky(d, K, d, Y, d, XN, n, m, 1, False, False, False)
        for i in range(n):
            d[XN + i] += d[XP + i]
        op_kr(d, K, d, S, d, T, n, m, m, False, False, False)
        op_ksk(d, T, d, K, d, PN, n, m, n, True, False, True)
        for i in range(n * n):
            d[PN + i] = d[PP + i] - d[PN + i]
    return frozen(unscented)[0]


_Steps = namedtuple("_Steps", "kf ekf ukf")


@lru_cache(maxsize=None)
def filter_steps(ops: _Ops, model: str = "linear") -> _Steps:
    """The KF, EKF and UKF steps built over the operation set ``ops`` and the model ``model``.

    Each step is ``step(d, p, z, u, c)`` with ``c`` the filter's :class:`Layout`
    (:meth:`_Estimator.layout`) and returns the
    offsets of the posterior ``x``, ``P`` and the innovation in ``d``.  The
    operations and the model's functions (see
    :mod:`~hapflow.blocks.estimation_models`) are bound as closure
    variables, so numba calls them statically and compiles the model's
    functions inline (a tuple of functions passed as a value would be a run-time
    function pointer, which the kernel cache cannot store); which of them a
    model has is decided here, in Python.  Memoised: one set of steps per
    operation set and model, written as one generated module
    (:func:`hapflow.closures.frozen`), so numba's disk cache keeps them: a
    closure is compiled again in every process (every test worker, every
    child compiling units), a frozen step once per kernel cache.
    """
    (op_ax, op_bu, op_hx, op_nnn, op_nnt, op_pht, op_hpht, op_ky, op_kpt, op_kkt, op_kr, op_ksk,
     op_chol_m, op_chol_n, op_solve, op_points, op_wmean_n, op_wmean_m, op_wcov_nn, op_wcov_mm,
     op_wcov_nm, sizes) = ops
    _joseph = _joseph_correction(op_pht, op_hpht, op_chol_m, op_solve, op_ky, op_kpt, op_kkt,
                                 op_kr, *sizes)
    _unscented = _unscented_correction(op_chol_m, op_solve, op_ky, op_kr, op_ksk, *sizes)
    spec = MODELS[model]
    f, h, fjac, rule, prepare, noise = (spec.f, spec.h, spec.fjac, spec.mode, spec.prepare,
                                        spec.noise)
    linear, linear_h = f is None, h is None     # z = H x: H the block's or the first states

    @njit_noalloc
    def _kf_core(d, p, z, u, c):
        """One linear Kalman step (see :class:`KalmanFilter`) on layout ``c``.

        Returns the offsets of the posterior ``x``, ``P`` and the innovation in ``d``.
        """
        n, m, l, pa, pb, ph, pq, pr = c.n, c.m, c.l, c.A, c.B, c.H, c.Q, c.R
        X, P, XN, PN, XP, PP, Y, S, LS, PHT, K, NK, T = _ekf_offsets(n, m)[:13]
        # predict: xp = A x + B u, Pp = A P A' + Q
        op_ax(p, pa, d, X, d, XP, n, n, 1, False, False, False)
        if l > 0:
            op_bu(p, pb, u, 0, d, XP, n, l, 1, False, True, False)
        op_nnn(p, pa, d, P, d, T, n, n, n, False, False, False)
        op_nnt(d, T, p, pa, d, PP, n, n, n, True, False, True)
        for i in range(n * n):
            d[PP + i] += p[pq + i]
        # update: y = z - H xp, then the Joseph-form correction
        for i in range(m):
            s = 0.0
            for j in range(n):
                s += p[ph + i * n + j] * d[XP + j]
            d[Y + i] = z[i] - s
        _joseph(d, p, ph, p, pr, n, m, XP, PP, Y, S, LS, PHT, K, NK, T, XN, PN)
        return XN, PN, Y

    @njit_noalloc(inline="always")
    def _start(d, p, xo, mo, u, c):
        """Start of a nonlinear step: the switching mode of the step from the posterior mean
        ``d[xo:]`` (into ``d[mo + 1]``; returned) and the model's values prepared from ``u``
        (into ``d[mo + 2:]``)."""
        if rule is not None:
            d[mo + 1] = rule(d, xo, p, c.coeffs, int(d[mo]))
        if prepare is not None:
            prepare(p, c.coeffs, u, d, mo + 2)
        return int(d[mo + 1])

    @njit_noalloc
    def _fx(p, s, so, out, oo, u, mode, w, c):
        """Propagate the state ``s[so:so+n]`` over one sample into ``out[oo:]`` (layout ``c``;
        the model's prepared values at ``s[w:]``)."""
        n, l = c.n, c.l
        if linear:
            op_ax(p, c.A, s, so, out, oo, n, n, 1, False, False, False)
        else:
            f(s, so, out, oo, p, c.coeffs, u, p[c.dt], mode, w)
        if l > 0 and c.bu != 0:
            op_bu(p, c.B, u, 0, out, oo, n, l, 1, False, True, False)

    @njit_noalloc(inline="always")
    def _hx(p, s, so, out, oo, c):
        """Predicted measurement of the state ``s[so:so+n]`` into ``out[oo:oo+m]``."""
        if linear_h:
            op_hx(p, c.H, s, so, out, oo, c.m, c.n, 1, False, False, False)
        else:
            h(s, so, out, oo, p, c.coeffs)

    @njit_noalloc
    def _fd_columns(d, p, x, xo, jac, jo, wa, wb, u, mode, w, meas, c):
        """Central-difference Jacobian of ``f`` (``meas`` false: n x n) or ``h`` (m x n) at
        ``x[xo:]``.

        ``d[wa:]``, ``d[wb:]`` hold the two evaluations; ``x`` is perturbed in place and restored.
        """
        n, rows = c.n, c.m if meas else c.n
        for j in range(n):
            x0 = x[xo + j]
            step = FD_STEP * max(1.0, abs(x0))
            x[xo + j] = x0 + step
            if meas:
                _hx(p, x, xo, d, wa, c)
            else:
                _fx(p, x, xo, d, wa, u, mode, w, c)
            x[xo + j] = x0 - step
            if meas:
                _hx(p, x, xo, d, wb, c)
            else:
                _fx(p, x, xo, d, wb, u, mode, w, c)
            x[xo + j] = x0
            for i in range(rows):
                jac[jo + i * n + j] = (d[wa + i] - d[wb + i]) / (2.0 * step)

    @njit_noalloc
    def _ekf_core(d, p, z, u, c):
        """One EKF step on layout ``c`` (see :class:`Layout`)."""
        n, m = c.n, c.m
        X, P, XN, PN, XP, PP, Y, S, LS, PHT, K, NK, T, FJ, HJ, WA, WB, MO = _ekf_offsets(n, m)
        numeric = c.numjac != 0
        mode, W = _start(d, p, X, MO, u, c), MO + 2
        # predict: xp = f(x, u), F = df/dx at x, Pp = F P F' + Q
        _fx(p, d, X, d, XP, u, mode, W, c)
        if linear and not numeric:
            for i in range(n * n):
                d[FJ + i] = p[c.A + i]
        elif fjac is not None and not numeric:
            fjac(d, X, p, c.coeffs, u, p[c.dt], mode, d, FJ, W)
        else:
            _fd_columns(d, p, d, X, d, FJ, WA, WB, u, mode, W, False, c)
        op_nnn(d, FJ, d, P, d, T, n, n, n, False, False, False)
        op_nnt(d, T, d, FJ, d, PP, n, n, n, True, False, True)
        pq = c.Q
        for i in range(n * n):
            d[PP + i] += p[pq + i]
        if noise is not None:
            noise(d, W, p, c.coeffs, u, d, PP)
        # update: y = z - h(xp), H = dh/dx at xp, Joseph-form correction
        _hx(p, d, XP, d, WA, c)
        for i in range(m):
            d[Y + i] = z[i] - d[WA + i]
        if linear_h and not numeric:
            for i in range(m * n):
                d[HJ + i] = p[c.H + i]
        else:
            _fd_columns(d, p, d, XP, d, HJ, WA, WB, u, mode, W, True, c)
        _joseph(d, d, HJ, p, c.R, n, m, XP, PP, Y, S, LS, PHT, K, NK, T, XN, PN)
        return XN, PN, Y

    @njit_noalloc
    def _sigmas(d, p, xo, po, lo, so, c):
        """Sigma points of ``(x, P)`` as rows of ``d[so:]`` (:func:`_sigma_points`).

        Merwe's scaled symmetric set from ``L L' = (n + lambda) P``; Julier's
        spherical simplex ``x + L chi_i`` (``i = 0 .. n+1``) from ``L L' = P`` and
        the unit simplex ``chi`` computed at build time (:func:`simplex_points`).
        """
        n, simplex = c.n, c.simplex != 0
        op_chol_n(d, po, 1.0 if simplex else p[c.lamn], d, lo, n)
        op_points(d, p, xo, lo, so, n, c.ns, simplex, c.chi)

    @njit_noalloc
    def _ukf_core(d, p, z, u, c):
        """One UKF step on layout ``c`` (see :class:`Layout`)."""
        n, m, ns = c.n, c.m, c.ns
        pwm, pwc = c.wm, c.wc
        X, P, XN, PN, SIG, SF, SH, LC, XP, PP, ZP, S, LS, PXZ, K, Y, T, MO = _ukf_offsets(n, m, ns)
        mode, W = _start(d, p, X, MO, u, c), MO + 2
        # predict: propagate the sigma points of (x, P) and take their weighted moments
        _sigmas(d, p, X, P, LC, SIG, c)
        for i in range(ns):
            _fx(p, d, SIG + i * n, d, SF + i * n, u, mode, W, c)
        op_wmean_n(d, SF, n, ns, p, pwm, XP)
        op_wcov_nn(d, SF, XP, n, SF, XP, n, ns, p, pwc, PP, c.Q, True)
        if noise is not None:
            noise(d, W, p, c.coeffs, u, d, PP)
        if linear_h:
            # update with z = H x: the unscented transform of a linear map is exact (both
            # sigma sets reproduce the prior's mean and covariance), so in closed form
            # zp = H xp, Pxz = Pp H', S = H Pp H' + R
            op_hx(p, c.H, d, XP, d, ZP, m, n, 1, False, False, False)
            op_pht(d, PP, p, c.H, d, PXZ, n, n, m, True, False, False)
            op_hpht(p, c.H, d, PXZ, d, S, m, n, m, False, False, True)
            for i in range(m * m):
                d[S + i] += p[c.R + i]
        else:
            # update: fresh sigma points of the prior through the measurement
            _sigmas(d, p, XP, PP, LC, SIG, c)
            for i in range(ns):
                _hx(p, d, SIG + i * n, d, SH + i * m, c)
            op_wmean_m(d, SH, m, ns, p, pwm, ZP)
            op_wcov_mm(d, SH, ZP, m, SH, ZP, m, ns, p, pwc, S, c.R, True)
            op_wcov_nm(d, SIG, XP, n, SH, ZP, m, ns, p, pwc, PXZ, -1, False)
        _unscented(d, z, n, m, XP, PP, ZP, S, LS, PXZ, K, Y, T, XN, PN)
        return XN, PN, Y

    return _Steps(*frozen(_kf_core, _ekf_core, _ukf_core))


def filter_rows(block: Block, z: np.ndarray, u: np.ndarray | None = None) -> np.ndarray:
    """Posterior estimates of a filter block run offline on recorded rows, shape ``(len(z), n)``.

    Row ``k`` is what the block outputs at its ``k``-th sample hit when fed
    ``z[k]`` (and ``u[k]``), from its ``x0``, ``P0``: the same kernels as in a
    graph, called on the rows (a recording's observers, run after it).

    Parameters
    ----------
    block : KalmanFilter, ExtendedKalmanFilter or UnscentedKalmanFilter
        With its ``sample_time`` set.
    z : ndarray, shape (N, m)
        Measurements.
    u : ndarray, shape (N, l), optional
        Inputs (when the block has ``controls``).
    """
    kernels, p = block.kernels(), np.array(block.packed())
    x, d, m = (np.asarray(part).copy() for part in block.initial_state())
    kernels["init"](x, d, m, p)
    n, k = block.states, block.measurements
    x_hat, p_diag, innovation = np.zeros(n), np.zeros(n), np.zeros(k)
    ins = [np.ascontiguousarray(z, dtype=np.float64)]
    if block.controls:
        ins.append(np.ascontiguousarray(u, dtype=np.float64))
    out = np.empty((len(z), n))
    for i in range(len(z)):
        row = [a[i] for a in ins]
        kernels["output"](0.0, x, d, m, p, *row, x_hat, p_diag, innovation)
        kernels["update"](0.0, x, d, m, p, *row)
        out[i] = x_hat
    return out


def simplex_points(n: int, w0: float) -> tuple[np.ndarray, np.ndarray]:
    """Julier's spherical-simplex unit sigma points and their weights.

    ``W0 = w0``, ``W_i = (1 - w0) / (n + 1)`` for ``i = 1 .. n+1``; the
    columns ``chi_i`` of the ``n x (n+2)`` matrix are built coordinate by
    coordinate (seed 004 eq. 1.4, after Julier 2003)::

        j = 1:  chi_0 = 0, chi_1 = -1/sqrt(2 W1), chi_2 = 1/sqrt(2 W1)
        j > 1:  chi_0 -> [chi_0; 0], chi_i -> [chi_i; -1/sqrt(j (j+1) W1)] (i = 1..j),
                chi_{j+1} = [0; j/sqrt(j (j+1) W1)]

    so that ``sum W_i chi_i = 0`` and ``sum W_i chi_i chi_i' = I``: the points
    ``x + L chi_i`` (``L L' = P``) have mean ``x`` and covariance ``P``.

    Parameters
    ----------
    n : int
        State dimension (>= 1).
    w0 : float
        Weight of the central point, ``0 <= w0 < 1``.

    Returns
    -------
    chi : ndarray, shape (n, n + 2)
    weights : ndarray, shape (n + 2,)
    """
    w1 = (1.0 - w0) / (n + 1)
    chi = np.zeros((n, n + 2))
    chi[0, 1] = -1.0 / math.sqrt(2.0 * w1)
    chi[0, 2] = 1.0 / math.sqrt(2.0 * w1)
    for j in range(2, n + 1):
        scale = math.sqrt(j * (j + 1) * w1)
        chi[j - 1, 1:j + 1] = -1.0 / scale
        chi[j - 1, j + 1] = j / scale
    return chi, np.concatenate([[w0], np.full(n + 1, w1)])


def _weight_check(value: float) -> str | None:
    return None if 0.0 <= value < 1.0 else "must satisfy 0 <= w0 < 1"


NONLINEAR = dict(COMMON)
NONLINEAR.update({
    "states": Structural(None, kind="int", check=at_least(1),
                         doc="number of states n (default: fixed by the model)"),
    "measurements": Structural(None, kind="int", check=at_least(1),
                               doc="number of measurements m (default: fixed by the model)"),
    "controls": Structural(None, kind="int", check=at_least(0),
                           doc="size l of the input u (default: fixed by the model, else 0)"),
    "model": Structural("linear", kind="str", check=known_model,
                        doc="process/measurement model: a registered name (see "
                            "estimation_models.MODELS) or a model module's import path"),
    "coeffs": Live(None, kind="floats",
                   doc="model coefficients in the model's order (default: its defaults)"),
    "g": Live(9.81, unit="m/s^2", check=positive, doc="pendulum: gravity"),
    "L": Live(1.0, unit="m", check=positive, doc="pendulum: length"),
    "c": Live(0.0, unit="1/s", check=nonnegative, doc="pendulum: viscous damping rate"),
})


def _sample_time(block: Block) -> float:
    if block.sample_time is None:
        raise GraphError(f"{type(block).__name__}: the sample time is not known until the "
                         "block is added to a graph")
    return block.sample_time


class _Nonlinear(_Estimator):
    """Model selection, coefficients and parameter packing of the EKF and UKF (a mixin)."""

    derived = {"dt": Derived(_sample_time, unit="s", doc="sample time"), **MATRICES,
               "coeffs": Derived(lambda b: b.coefficients(),
                                 size=lambda b: b.coefficients().size,
                                 doc="the model's coefficients (pendulum: g, L, c)")}

    def _resolve_model(self) -> Model:
        spec = model_named(self.model)
        for name, fixed, default in (("states", spec.states, None),
                                     ("measurements", spec.measurements, None),
                                     ("controls", spec.controls, 0)):
            value = self.values[name]
            if fixed is not None and value is not None and value != fixed:
                raise ParamError(name, f"parameter {name!r} must be {fixed} for model "
                                       f"{self.model!r} ({spec.doc}), got {value}")
            if value is None:
                if fixed is None and default is None:
                    raise ParamError(name, f"parameter {name!r} is required for model "
                                           f"{self.model!r} ({spec.doc})")
                self.values[name] = fixed if fixed is not None else default
        self.linear_model = self.model == "linear"
        self.control_matrix = spec.control_matrix
        self.coefficients()
        return spec

    def coefficients(self) -> np.ndarray:
        """The model coefficients as packed (checked against the model's list)."""
        spec = MODELS[self.model]
        if self.model == "pendulum":
            return np.array([self.g, self.L, self.c])
        if self.values["coeffs"] is None:
            return np.array([v for _, _, v in spec.coeffs], dtype=np.float64)
        coeffs = np.asarray(self.values["coeffs"], dtype=np.float64)
        if coeffs.size != len(spec.coeffs):
            names = ", ".join(f"{n} ({u})" for n, u, _ in spec.coeffs) or "none"
            raise ParamError("coeffs", f"parameter 'coeffs' of model {self.model!r} takes "
                                       f"{len(spec.coeffs)} values [{names}], got {coeffs.size}")
        problem = spec.check(coeffs) if spec.check else None
        if problem:
            raise ParamError("coeffs", f"parameter 'coeffs' of model {self.model!r}: {problem}")
        return coeffs

    def validate(self, changed: str | None) -> None:
        """The matrices (:meth:`_Estimator.check_matrices`) and the model coefficients."""
        super().validate(changed)
        self.coefficients()

    def _kernels(self, kind: str, post: tuple[int, int, int], mo: int) -> dict[str, Callable]:
        """Kernels of the ``kind`` step (``ekf``, ``ukf``) specialised on this structure
        (see :func:`_specialised`)."""
        layout = self.layout()
        ops = fixed_ops(layout.n, layout.m, layout.l, layout.ns, bool(layout.simplex))
        return _specialised(getattr(filter_steps(ops, self.model), kind), layout, post, mo)

    def _sizes_for(self, extra: int) -> None:
        self.check_matrices()
        self.dstate = extra + 2 + PREPARED       # the mode pair, the model's prepared values
        self._ports()


class ExtendedKalmanFilter(_Nonlinear, Block):
    """Extended Kalman filter on a registered model (analytic or finite-difference Jacobians).

    Model ``x[k] = f(x[k-1], u[k]) + w``, ``z[k] = h(x[k]) + v`` with
    ``w ~ N(0, Q)``, ``v ~ N(0, R)``; ``f``, ``h`` from the model named by
    ``model`` (see :mod:`hapflow.blocks.estimation_models`; ``linear`` uses
    ``A``, ``B``, ``H``).  At each sample hit, from the posterior ``(x, P)``
    of the previous one::

        xp = f(x, u[k])          F = df/dx (x, u[k])     Pp = F P F' + Q
        y  = z[k] - h(xp)        H = dh/dx (xp)
        S  = H Pp H' + R         K = Pp H' S^-1
        x  = xp + K y            P = (I - K H) Pp (I - K H)' + K R K'  (Joseph form)

    ``F`` and ``H`` are the model's analytic Jacobians when it has them
    (``jacobian: auto``), else central finite differences with relative step
    :data:`FD_STEP` (``jacobian: numeric`` forces them).  This is
    ``filterpy.kalman.ExtendedKalmanFilter`` with ``predict_x`` replaced by
    ``f`` and ``F`` set to the Jacobian before ``predict``, then
    ``update(z, HJacobian, Hx)``.  Switching models choose their mode once per
    step from the posterior mean.  A held block with direct feedthrough.

    Ports
    -----
    z          : in, (m,), any unit        measurement
    u          : in, (l,), any unit        input (only when ``controls`` > 0)
    x_hat      : out, (n,), any unit       posterior estimate x[k|k]
    P_diag     : out, (n,), any unit       diagonal of P[k|k] (units of x squared)
    innovation : out, (m,), unit of z      z[k] - h(x[k|k-1])
    """

    params = dict(NONLINEAR)
    params["jacobian"] = Structural("auto", kind="str", check=one_of("auto", "numeric"),
                                    doc="auto: the model's analytic Jacobians if it has them; "
                                        "numeric: central finite differences")

    def configure(self) -> None:
        self._resolve_model()
        n, m = self.states, self.measurements
        self._sizes_for(_ekf_offsets.py_func(n, m)[-1])

    def kernels(self) -> dict[str, Callable]:
        off = _ekf_offsets.py_func(self.states, self.measurements)
        return self._kernels("ekf", (off[2], off[3], off[6]), off[-1])


class UnscentedKalmanFilter(_Nonlinear, Block):
    """Unscented Kalman filter: Merwe's scaled sigma points or Julier's spherical simplex.

    Model ``x[k] = f(x[k-1], u[k]) + w``, ``z[k] = h(x[k]) + v`` from the
    model named by ``model`` (see :mod:`hapflow.blocks.estimation_models`;
    ``linear`` uses ``A``, ``B``, ``H``; ``pendulum`` is
    ``theta' = omega``, ``omega' = -g/L sin(theta) - c omega`` by explicit
    Euler with state ``[theta (rad), omega (rad/s)]``, ``z = theta``).

    Sigma points (weights and constant matrices computed at build time):

    - ``sigma: merwe`` (2n+1 points): ``lambda = alpha^2 (n + kappa) - n``,
      ``L L' = (n + lambda) P``, ``chi = [x, x + L[:, k], x - L[:, k]]``,
      ``Wm0 = lambda / (n + lambda)``, ``Wc0 = Wm0 + 1 - alpha^2 + beta``,
      ``Wm_i = Wc_i = 1 / (2 (n + lambda))`` - filterpy's
      ``MerweScaledSigmaPoints``;
    - ``sigma: simplex`` (n+2 points, the SS-UKF of seed 004 section 1.2.2):
      ``x + L chi_i`` with ``L L' = P`` and Julier's spherical simplex
      ``chi`` of :func:`simplex_points`, weights ``W0 = w0`` and
      ``(1 - w0)/(n + 1)`` (mean and covariance alike).

    At each sample hit: propagate the sigma points of the last posterior
    through ``f``, ``xp, Pp`` their weighted mean and covariance plus ``Q``;
    draw new sigma points from ``(xp, Pp)``, pass them through ``h``,
    ``zp, S`` their mean and covariance plus ``R``, ``Pxz`` the cross
    covariance; ``K = Pxz S^-1``, ``x = xp + K (z - zp)``, ``P = Pp - K S K'``.
    This is ``filterpy.kalman.UnscentedKalmanFilter``'s ``predict()`` then
    ``update(z)``.  A model that measures ``z = H x`` (``linear`` and every
    model measuring its first states) gets the update in closed form,
    ``zp = H xp``, ``S = H Pp H' + R``, ``Pxz = Pp H'``: what the sigma points
    give for a linear map, exactly (both sets reproduce the prior's mean and
    covariance), without the second set.  A held block with direct
    feedthrough.

    Ports
    -----
    z          : in, (m,), any unit        measurement (rad for the pendulum)
    u          : in, (l,), any unit        input (only when ``controls`` > 0)
    x_hat      : out, (n,), any unit       posterior estimate x[k|k]
    P_diag     : out, (n,), any unit       diagonal of P[k|k] (variances, units of x squared)
    innovation : out, (m,), unit of z      z[k] - zp (predicted measurement mean)
    """

    params = dict(NONLINEAR)
    params.update({
        "sigma": Structural("merwe", kind="str", check=one_of("merwe", "simplex"),
                            doc="sigma-point set: merwe (2n+1 scaled symmetric) or simplex "
                                "(n+2 spherical simplex)"),
        "alpha": Live(1e-3, check=positive, doc="merwe: sigma-point spread"),
        "beta": Live(2.0, check=nonnegative,
                     doc="merwe: prior knowledge of the distribution (2: Gaussian)"),
        "kappa": Live(0.0, doc="merwe: secondary scaling (often 0 or 3 - n)"),
        "w0": Live(0.5, check=_weight_check, doc="simplex: weight of the central point"),
    })
    derived = {"dt": _Nonlinear.derived["dt"],
               "lamn": Derived(lambda b: b._weights()[0], doc="n + lambda (merwe; simplex: 0)"),
               "wm": Derived(lambda b: b._weights()[1], size=lambda b: b.sigma_count(),
                             doc="mean weights Wm"),
               "wc": Derived(lambda b: b._weights()[2], size=lambda b: b.sigma_count(),
                             doc="covariance weights Wc"),
               "chi": Derived(lambda b: b.unit_simplex(),
                              size=lambda b: b.states * b.sigma_count() * (b.sigma == "simplex"),
                              doc="simplex: the unit sigma points, flat"),
               **_Nonlinear.derived}

    def configure(self) -> None:
        self._resolve_model()
        self._weights()
        n, m = self.states, self.measurements
        self._sizes_for(_ukf_offsets.py_func(n, m, self.sigma_count())[-1])

    def sigma_count(self) -> int:
        """Number of sigma points: ``2 n + 1`` (merwe) or ``n + 2`` (simplex)."""
        return self.states + 2 if self.sigma == "simplex" else 2 * self.states + 1

    def _weights(self) -> tuple[float, np.ndarray, np.ndarray]:
        """``(n + lambda, Wm, Wc)`` (``n + lambda`` is 0 for the simplex set)."""
        n = self.states
        if self.sigma == "simplex":
            w = simplex_points(n, self.w0)[1]
            return 0.0, w, w.copy()
        lam = self.alpha ** 2 * (n + self.kappa) - n
        if not n + lam > 0.0:
            raise ParamError("kappa", f"alpha^2 (n + kappa) = {n + lam:g} must be > 0 "
                                      f"(alpha={self.alpha:g}, kappa={self.kappa:g}, n={n})")
        wm = np.full(2 * n + 1, 0.5 / (n + lam))
        wc = wm.copy()
        wm[0] = lam / (n + lam)
        wc[0] = lam / (n + lam) + (1.0 - self.alpha ** 2 + self.beta)
        return n + lam, wm, wc

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance weights ``(Wm, Wc)`` of the sigma points."""
        _, wm, wc = self._weights()
        return wm, wc

    def validate(self, changed: str | None) -> None:
        """As the EKF's, and ``alpha``, ``kappa`` must give ``n + lambda > 0``."""
        super().validate(changed)
        self._weights()

    def unit_simplex(self) -> np.ndarray:
        """Julier's unit simplex ``chi`` (n x (n+2), :func:`simplex_points`) flat; empty
        for the merwe set."""
        if self.sigma != "simplex":
            return np.zeros(0)
        return simplex_points(self.states, self.w0)[0].ravel()

    def kernels(self) -> dict[str, Callable]:
        off = _ukf_offsets.py_func(self.states, self.measurements, self.sigma_count())
        return self._kernels("ukf", (off[2], off[3], off[15]), off[-1])
