"""The flexible-link manipulator of seed 004 as a block: its 13-dof configuration-dependent model.

:class:`FlexibleLink` integrates eq. 6.3 for the thesis's manipulator reduced
by :func:`hapflow.flex.erls_reduction.reduce_erls` (masters ``q1 q2 q3 x4 y5
x14 y15 x25 x26``, four IMR-ranked interior modes at ``q*``), with the
matrices of :class:`hapflow.flex.state_space.FlexModel`: every
configuration-dependent matrix is a sum of constant arrays weighted by
trigonometric features of the link angles, packed into ``p`` at build time.
Each derivative evaluates them, solves the Guyan part (21 x 21 Cholesky),
projects on ``H(q)`` and solves the 13 x 13 reduced mass matrix -- in
compiled helpers that use the discrete state as scratch (no allocation).
The geometry, lumped masses and damping assumptions are those of
:mod:`hapflow.flex.manipulator`; Rayleigh damping is not in the thesis.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from hapflow.block import Block
from hapflow.jit import njit, njit_noalloc
from hapflow.names import Derived
from hapflow.params import Live, nonnegative
from hapflow.ports import In, Out

# sizes of the thesis's reduction (checked against the model when packing)
NQ, NU, NL, NM, NS, NT, NG, NTQ = 3, 30, 5, 9, 21, 4, 3, 3
NF = 1 + 4 * NL
NIN = NU - NQ
N = NQ + NIN
R = NM + NT
# room for the nonzero expansion terms of M and K (452 each), S (68), the gauge rows (22) and
# the rotated interior modes (124), and of K's slave-slave (245) and slave-master (56) blocks: the
# exact expansion is sparse (hapflow.flex.expansion)
TM, TS, TG, TP, TKS, TKG = 480, 80, 32, 140, 260, 64
TMK = 240            # room for the entries of M and K that are nonzero at some configuration (220)


def _layout(sizes):
    out, at = {}, 0
    for name, size in sizes:
        out[name] = at
        at += size
    return out, at


_PL, P_SIZE = _layout([("alpha", 1), ("beta", 1), ("A", NL * NQ), ("b", NL), ("Mc", 1 + 3 * TM),
                       ("Kc", 1 + 3 * TM), ("Sc", 1 + 3 * TS), ("Gc", 1 + 3 * TG),
                       ("Pc", 1 + 3 * TP), ("Kssc", 1 + 3 * TKS),
                       ("Kgc", 1 + 3 * TKG), ("inner", NIN), ("masters", NM), ("slaves", NS),
                       ("tdofs", NTQ), ("mk_rows", NU + 1), ("mk_cols", TMK),
                       ("h_master", N)])
_DL, D_SIZE = _layout([("f", NF), ("fr", NF), ("M", NU * NU), ("K", NU * NU), ("S", NU * NQ),
                       ("Sd", NU * NQ), ("Kss", NS * NS), ("G", NS * NM), ("H", N * R),
                       ("x", N), ("xd", N), ("u", NU), ("ud", NU), ("t1", NU), ("t2", NU),
                       ("g", N), ("Mf", N * N), ("MH", N * R), ("Mr", R * R), ("Yu", NU * R),
                       ("MY", NU * R), ("rhs", R),
                       ("Gm", NG * NU), ("Pm", NS * NT), ("Kst", NS), ("torque", NTQ)])
PA, PB, PAC, PBC = _PL["alpha"], _PL["beta"], _PL["A"], _PL["b"]
PM, PK, PS, PG, PP = _PL["Mc"], _PL["Kc"], _PL["Sc"], _PL["Gc"], _PL["Pc"]
PKSS, PKG = _PL["Kssc"], _PL["Kgc"]
PIN, PMA, PSL, PTQ = _PL["inner"], _PL["masters"], _PL["slaves"], _PL["tdofs"]
PMKR, PMKC, PHM = _PL["mk_rows"], _PL["mk_cols"], _PL["h_master"]
DF, DFR, DM, DK, DS, DSD = _DL["f"], _DL["fr"], _DL["M"], _DL["K"], _DL["S"], _DL["Sd"]
DKSS, DG, DH, DX, DXD = _DL["Kss"], _DL["G"], _DL["H"], _DL["x"], _DL["xd"]
DU, DUD, DT1, DT2, DGV, DMF, DMH, DMR, DRHS = (_DL["u"], _DL["ud"], _DL["t1"], _DL["t2"],
                                               _DL["g"], _DL["Mf"], _DL["MH"], _DL["Mr"],
                                               _DL["rhs"])
DYU, DMY = _DL["Yu"], _DL["MY"]
DGM, DPM, DKST, DTQ = _DL["Gm"], _DL["Pm"], _DL["Kst"], _DL["torque"]


@njit_noalloc
def _features(p, x, xd_from, d):
    """Link-angle features and (if ``xd_from >= 0``) their rates into ``d``."""
    d[DF] = 1.0
    d[DFR] = 0.0
    for j in range(NL):
        a = p[PBC + j]
        w = 0.0
        for k in range(NQ):
            a += p[PAC + j * NQ + k] * x[k]
            if xd_from >= 0:
                w += p[PAC + j * NQ + k] * x[xd_from + k]
        c, s, c2, s2 = math.cos(a), math.sin(a), math.cos(2 * a), math.sin(2 * a)
        d[DF + 1 + 4 * j], d[DF + 2 + 4 * j] = c, s
        d[DF + 3 + 4 * j], d[DF + 4 + 4 * j] = c2, s2
        d[DFR + 1 + 4 * j], d[DFR + 2 + 4 * j] = -s * w, c * w
        d[DFR + 3 + 4 * j], d[DFR + 4 + 4 * j] = -2 * s2 * w, 2 * c2 * w


@njit_noalloc
def _combine(p, so, cap, size, d, fo, do):
    """``d[do:do+size] = sum_k d[fo+k] X_k`` from the nonzero terms of the ``X_k`` at ``p[so:]``:
    their count, then ``cap`` entries, features and coefficients (see :func:`expansion_terms`)."""
    for i in range(size):
        d[do + i] = 0.0
    entry, v = -1, 0.0                  # terms come entry by entry: sum each in a register
    for t in range(int(p[so])):
        e = int(p[so + 1 + t])
        if e != entry:
            if entry >= 0:
                d[do + entry] = v
            entry, v = e, 0.0
        v += d[fo + int(p[so + 1 + cap + t])] * p[so + 1 + 2 * cap + t]
    if entry >= 0:
        d[do + entry] = v


@njit_noalloc
def cholesky_factor(d, ao, n):
    """Overwrite the SPD n x n matrix at ``ao`` (row-major in ``d``) by its lower Cholesky factor."""
    for j in range(n):
        s = d[ao + j * n + j]
        for k in range(j):
            s -= d[ao + j * n + k] ** 2
        s = math.sqrt(s)
        d[ao + j * n + j] = s
        for i in range(j + 1, n):
            v = d[ao + i * n + j]
            for k in range(j):
                v -= d[ao + i * n + k] * d[ao + j * n + k]
            d[ao + i * n + j] = v / s


@njit_noalloc
def cholesky_substitute(d, ao, n, bo, ncols):
    """Solve ``L L' X = B`` in place with the factor ``L`` at ``ao``; ``B`` (n x ncols at ``bo``,
    row-major in ``d``) is overwritten by ``X``."""
    for i in range(n):                  # row by row, all columns at once (independent sums)
        for k in range(i):
            lik = d[ao + i * n + k]
            for c in range(ncols):
                d[bo + i * ncols + c] -= lik * d[bo + k * ncols + c]
        lii = d[ao + i * n + i]
        for c in range(ncols):
            d[bo + i * ncols + c] /= lii
    for i in range(n - 1, -1, -1):
        for k in range(i + 1, n):
            lki = d[ao + k * n + i]
            for c in range(ncols):
                d[bo + i * ncols + c] -= lki * d[bo + k * ncols + c]
        lii = d[ao + i * n + i]
        for c in range(ncols):
            d[bo + i * ncols + c] /= lii


@njit_noalloc
def envelope_solve(d, ao, n, st, bo, ncols, first):
    """``cholesky_solve`` for a sparse ``A`` (the Guyan ``Kss``), columns ``first..ncols-1`` of
    ``B`` only: the factor is zero left of each row's first nonzero (``d[st:st+n]`` receives
    those columns), so the products skipped here are products with zeros."""
    for i in range(n):
        j = 0
        while j < i and d[ao + i * n + j] == 0.0:
            j += 1
        d[st + i] = j
    for j in range(n):
        sj = int(d[st + j])
        s = d[ao + j * n + j]
        for k in range(sj, j):
            s -= d[ao + j * n + k] ** 2
        s = math.sqrt(s)
        d[ao + j * n + j] = s
        for i in range(j + 1, n):
            si = int(d[st + i])
            if si <= j:
                v = d[ao + i * n + j]
                for k in range(max(si, sj), j):
                    v -= d[ao + i * n + k] * d[ao + j * n + k]
                d[ao + i * n + j] = v / s
    for i in range(n):                  # row by row, all columns at once: independent sums
        for c in range(first, ncols):
            v = d[bo + i * ncols + c]
            for k in range(int(d[st + i]), i):
                v -= d[ao + i * n + k] * d[bo + k * ncols + c]
            d[bo + i * ncols + c] = v / d[ao + i * n + i]
    for i in range(n - 1, -1, -1):      # L' x = y by the rows of L: x_i, then its share
        lii = d[ao + i * n + i]         # of the rows above, over row i's envelope only
        for c in range(first, ncols):
            d[bo + i * ncols + c] /= lii
        for k in range(int(d[st + i]), i):
            lik = d[ao + i * n + k]
            for c in range(first, ncols):
                d[bo + k * ncols + c] -= lik * d[bo + i * ncols + c]


@njit_noalloc
def cholesky_solve(d, ao, n, bo, ncols):
    """Solve ``A X = B`` in place (``A`` SPD n x n at ``ao``, overwritten by its factor; ``B``
    n x ncols at ``bo``, overwritten by ``X``), both row-major in ``d``."""
    cholesky_factor(d, ao, n)
    cholesky_substitute(d, ao, n, bo, ncols)


@njit_noalloc
def _basis(p, d):
    """``H(q)`` (eq. 5.49) at the features in ``d`` into ``d``: the Guyan part from the slave
    rows of K, combined from their own expansions (``Kss`` and ``G = -K_sm``, zero in the q
    masters' columns), not gathered from the whole K."""
    _combine(p, PKSS, TKS, NS * NS, d, DF, DKSS)
    _combine(p, PKG, TKG, NS * NM, d, DF, DG)
    _combine(p, PP, TP, NS * NT, d, DF, DPM)
    for i in range(N * R):
        d[DH + i] = 0.0
    for j in range(NM):
        d[DH + int(p[PMA + j]) * R + j] = 1.0
    envelope_solve(d, DKSS, NS, DKST, DG, NM, NQ)      # the q masters' columns are zero
    for i in range(NS):
        row = DH + int(p[PSL + i]) * R
        for j in range(NQ, NM):
            d[row + j] = d[DG + i * NM + j]
        for j in range(NT):
            d[row + NM + j] = d[DPM + i * NT + j]


@njit_noalloc
def flex_matrices(p, x, d):
    """Eq. 6.3's matrices at the state ``x = (z, z')`` into ``d``: M, K, S, its rate Sd,
    ``H(q)``, ``M~ = H' Mf H`` and its Cholesky factor."""
    _features(p, x, R, d)
    _combine(p, PK, TM, NU * NU, d, DF, DK)
    _basis(p, d)
    _combine(p, PM, TM, NU * NU, d, DF, DM)
    _combine(p, PS, TS, NU * NQ, d, DF, DS)
    _combine(p, PS, TS, NU * NQ, d, DFR, DSD)
    _reduced_mass(p, d)


@njit_noalloc
def flex_rate(p, x, torque, d, dx):
    """``dx = (z', z'')`` of eq. 6.3 for the state ``x = (z, z')`` (26 values)."""
    flex_matrices(p, x, d)
    for i in range(N):
        a = 0.0
        b = 0.0
        for j in range(R):
            h = d[DH + i * R + j]
            a += h * x[j]
            b += h * x[R + j]
        d[DX + i], d[DXD + i] = a, b
    _generalised_force(p, d, torque)
    basis_transpose_times(p, d, DGV, DRHS, 1)
    cholesky_substitute(d, DMR, R, DRHS, 1)
    for i in range(R):
        dx[i] = x[R + i]
        dx[R + i] = d[DRHS + i]


@njit_noalloc
def full_rate(p, x, torque, d, dx):
    """``dx = (x', x'')`` of the full model (eq. 4.23, all 30 dofs) for ``x = (q, u_in)`` and
    its rate (60 values): the matrices of ``flex_matrices`` without the reduction."""
    _features(p, x, N, d)
    _combine(p, PM, TM, NU * NU, d, DF, DM)
    _combine(p, PK, TM, NU * NU, d, DF, DK)
    _combine(p, PS, TS, NU * NQ, d, DF, DS)
    _combine(p, PS, TS, NU * NQ, d, DFR, DSD)
    for i in range(N):
        d[DX + i], d[DXD + i] = x[i], x[N + i]
    _generalised_force(p, d, torque)
    _full_mass(p, d)
    cholesky_solve(d, DMF, N, DGV, 1)
    for i in range(N):
        dx[i] = x[N + i]
        dx[N + i] = d[DGV + i]


@njit_noalloc
def _generalised_force(p, d, torque):
    """``g`` of eq. 6.3's right-hand side over ``(q, u_in)`` at ``x``, ``x'`` in ``d``:
    ``L f - Kf x - Cv x'`` with the matrices in ``d``."""
    for i in range(NU):
        d[DU + i] = 0.0
        d[DUD + i] = 0.0
    for i in range(NIN):
        ii = int(p[PIN + i])
        d[DU + ii] = d[DX + NQ + i]
        d[DUD + ii] = d[DXD + NQ + i]
    for i in range(NU):                       # t1 = Sd q'   (then M t1 below)
        v = 0.0
        for k in range(NQ):
            v += d[DSD + i * NQ + k] * d[DXD + k]
        d[DT1 + i] = v
    alpha, beta = p[PA], p[PB]
    for i in range(NU):                       # t2 = M (Sd q') + alpha M u' + beta K u' - f
        v = 0.0
        for e in range(int(p[PMKR + i]), int(p[PMKR + i + 1])):
            k = int(p[PMKC + e])
            v += d[DM + i * NU + k] * (d[DT1 + k] + alpha * d[DUD + k]) \
                + beta * d[DK + i * NU + k] * d[DUD + k]
        d[DT2 + i] = v
    for k in range(NTQ):
        d[DT2 + int(p[PTQ + k])] -= torque[k]
    for j in range(NQ):
        v = 0.0
        for i in range(NU):
            v -= d[DS + i * NQ + j] * d[DT2 + i]
        d[DGV + j] = v
    for i in range(NIN):
        ii = int(p[PIN + i])
        v = -d[DT2 + ii]
        for e in range(int(p[PMKR + ii]), int(p[PMKR + ii + 1])):
            k = int(p[PMKC + e])
            v -= d[DK + ii * NU + k] * d[DU + k]
        d[DGV + NQ + i] = v


@njit_noalloc
def _full_mass(p, d):
    """``Mf`` of eq. 4.23 over ``(q, u_in)`` into ``d``.

    ``S' M S`` and ``M S`` over the entries of M that can be nonzero, all products of an
    entry at once (independent sums: the loops are not bound by the latency of one sum);
    each entry of ``Mf`` adds its products in the order of one sum at a time.
    """
    for a in range(NQ):
        for b in range(NQ):
            d[DMF + a * N + b] = 0.0
    for i in range(NU):
        for e in range(int(p[PMKR + i]), int(p[PMKR + i + 1])):
            k = int(p[PMKC + e])
            m = d[DM + i * NU + k]
            for a in range(NQ):
                si = d[DS + i * NQ + a]
                if si != 0.0:
                    t = si * m
                    for b in range(NQ):
                        d[DMF + a * N + b] += t * d[DS + k * NQ + b]
    for i in range(NIN):
        ii = int(p[PIN + i])
        row = DMF + (NQ + i) * N
        for b in range(NQ):
            d[row + b] = 0.0
        for e in range(int(p[PMKR + ii]), int(p[PMKR + ii + 1])):
            k = int(p[PMKC + e])
            m = d[DM + ii * NU + k]
            for b in range(NQ):
                d[row + b] += m * d[DS + k * NQ + b]
        for b in range(NQ):
            d[DMF + b * N + NQ + i] = d[row + b]
        for j in range(NIN):
            d[row + NQ + j] = d[DM + ii * NU + int(p[PIN + j])]


@njit_noalloc(inline="always")
def basis_transpose_times(p, d, bo, co, cols, lower=False):
    """``C = H' B`` in ``d`` (``B`` N x cols, ``C`` R x cols, row-major).

    Row by row of ``H`` over its entries that can be nonzero (a master row has its one, a slave
    row the columns after ``q``): every entry of ``C`` adds the products of a dense product,
    in its order, without the products with zeros, and the inner loop runs along rows.
    ``lower``: only ``C``'s lower triangle (``cols == R``, a symmetric ``C``).
    """
    for i in range(R * cols):
        d[co + i] = 0.0
    for k in range(N):
        jm = int(p[PHM + k])
        first, last = (jm, jm + 1) if jm >= 0 else (NQ, R)
        for r in range(first, last):
            h = d[DH + k * R + r]
            for c in range(r + 1 if lower else cols):
                d[co + r * cols + c] += h * d[bo + k * cols + c]


@njit_noalloc
def _reduced_mass(p, d):
    """The Cholesky factor of ``M~ = H' Mf H`` into ``d`` at ``Mr``.

    ``Mf = T' M T`` with ``T = [S E]`` (``u = S q + E u_in``), so ``M~ = Y' M Y`` with
    ``Y = T H = [S 0] + Yu``: ``Yu = E H_u`` (``d[Yu]``, NU x R) is zero in the q columns
    (the Guyan part of q is zero), and H's q rows are ``[I 0]``.  ``M Y`` runs over the
    entries of M that can be nonzero, ``Y'`` as ``H' T'``.
    """
    for i in range(NU * R):
        d[DYU + i] = 0.0
    for i in range(NIN):
        ii = int(p[PIN + i])
        for c in range(NQ, R):
            d[DYU + ii * R + c] = d[DH + (NQ + i) * R + c]
    for i in range(NU):
        for c in range(R):
            d[DMY + i * R + c] = 0.0
        for e in range(int(p[PMKR + i]), int(p[PMKR + i + 1])):
            k = int(p[PMKC + e])
            m = d[DM + i * NU + k]
            for c in range(NQ):
                d[DMY + i * R + c] += m * d[DS + k * NQ + c]
            for c in range(NQ, R):
                d[DMY + i * R + c] += m * d[DYU + k * R + c]
    transpose_times_t(p, d, DMY, DMH)
    basis_transpose_times(p, d, DMH, DMR, R, True)     # the factor reads the lower triangle
    cholesky_factor(d, DMR, R)


@njit_noalloc(inline="always")
def matrix_product(d, ao, row_step, col_step, bo, co, rows, inner, cols):
    """``C = A B`` in ``d``: ``A`` (rows x inner) read at ``ao + i row_step + k col_step`` (a
    transposed ``A`` by its strides), ``B`` (inner x cols) and ``C`` (rows x cols) row-major at
    ``bo`` and ``co``.

    One sum per entry, in ``k`` order.  Inlined, so that the callers' sizes and offsets are
    compile-time constants: LLVM then unrolls the ``k`` loop and vectorises across ``j`` (four
    entries' sums side by side); an axpy form (``C[i, :] += A[i, k] B[k, :]``) measured 1.28x
    slower, its ``C`` row reloaded at every ``k`` since ``A``, ``B``, ``C`` share ``d``.
    """
    for i in range(rows):
        for j in range(cols):
            s = 0.0
            for k in range(inner):
                s += d[ao + i * row_step + k * col_step] * d[bo + k * cols + j]
            d[co + i * cols + j] = s


@njit_noalloc
def transpose_times_t(p, d, vo, bo):
    """``B = T' V`` (``V`` NU x R at ``vo``, ``B`` N x R at ``bo``): ``S' V`` over ``q``, the
    rows of the inner dofs over ``u_in``."""
    matrix_product(d, DS, 1, NQ, vo, bo, NQ, NU, R)
    for i in range(NIN):
        ii = int(p[PIN + i])
        for c in range(R):
            d[bo + (NQ + i) * R + c] = d[vo + ii * R + c]


@njit_noalloc
def flex_gauges(p, x, d, gamma):
    """Curvatures ``gamma1, gamma2, gamma4`` (1/m) at the state ``x``."""
    _features(p, x, -1, d)
    _basis(p, d)
    _combine(p, PG, TG, NG * NU, d, DF, DGM)
    for i in range(N):
        v = 0.0
        for j in range(R):
            v += d[DH + i * R + j] * x[j]
        d[DX + i] = v
    _curvatures(p, d, gamma)


@njit_noalloc
def full_gauges(p, x, d, gamma):
    """Curvatures ``gamma1, gamma2, gamma4`` (1/m) of the full model at ``x = (q, u_in, ...)``."""
    _features(p, x, -1, d)
    _combine(p, PG, TG, NG * NU, d, DF, DGM)
    for i in range(N):
        d[DX + i] = x[i]
    _curvatures(p, d, gamma)


@njit_noalloc
def _curvatures(p, d, gamma):
    """``gamma`` from the elastic coordinates ``x[NQ:]`` in ``d`` and the gauge rows there."""
    for g in range(NG):
        v = 0.0
        for i in range(NIN):
            v += gauge_weight(p, d, g, i) * d[DX + NQ + i]
        gamma[g] = v


@njit_noalloc
def gauge_weight(p, d, g, i):
    """Curvature ``g`` per unit of the elastic dof ``u_in[i]`` as ``flex_gauges`` last left it."""
    return d[DGM + g * NU + int(p[PIN + i])]


def expansion_terms(coeffs: np.ndarray, cap: int) -> np.ndarray:
    """The nonzero terms of an expansion ``(NF, ...)`` as :func:`_combine` reads them: their
    count, then ``cap`` flat entry indices, ``cap`` features and ``cap`` coefficients, ordered
    by entry, then feature (the order a dense sum over the features adds them in)."""
    flat = np.asarray(coeffs, dtype=np.float64).reshape(len(coeffs), -1)
    entry, feature = np.nonzero(flat.T)
    if len(entry) > cap:
        raise RuntimeError(f"FlexibleLink: an expansion has {len(entry)} nonzero terms, the "
                           f"kernels have room for {cap}")
    out = np.zeros(1 + 3 * cap)
    out[0] = len(entry)
    out[1:1 + len(entry)] = entry
    out[1 + cap:1 + cap + len(entry)] = feature
    out[1 + 2 * cap:1 + 2 * cap + len(entry)] = flat[feature, entry]
    return out


def _mass_stiffness_pattern(Mc: np.ndarray, Kc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row starts and columns (padded to ``TMK``) of the entries of M or K nonzero at some
    configuration: the products with M and K run over these."""
    nonzero = (Mc != 0).any(axis=0) | (Kc != 0).any(axis=0)
    rows, cols = np.nonzero(nonzero)
    if len(cols) > TMK:
        raise RuntimeError(f"FlexibleLink: M and K have {len(cols)} entries, the kernels have "
                           f"room for {TMK}")
    return (np.concatenate([[0], np.cumsum(nonzero.sum(axis=1))]),
            np.concatenate([cols, np.zeros(TMK - len(cols))]))


def _guyan_blocks(model) -> tuple[np.ndarray, np.ndarray]:
    """The expansions of ``K``'s slave-slave block and of ``G = -K_sm`` (slave rows, master
    columns, zero for q1..q3) as :func:`_basis` combines them: the terms of each entry are
    ``K``'s, in its order (``-K``: the sums are ``K``'s negated, exactly)."""
    ks = model.inner[model.slaves - NQ]
    Kss = model.Kc[:, ks][:, :, ks]
    G = np.zeros((len(model.Kc), NS, NM))
    G[:, :, NQ:] = -model.Kc[:, ks][:, :, model.inner[model.masters[NQ:] - NQ]]
    return expansion_terms(Kss, TKS), expansion_terms(G, TKG)


def _basis_pattern(masters: np.ndarray, slaves: np.ndarray) -> np.ndarray:
    """For each row of H(q), the column of its master's one, or -1 for a slave row (nonzero
    after the q columns only: the Guyan part of q1..q3 is zero)."""
    if list(masters[:NQ]) != list(range(NQ)):
        raise RuntimeError("FlexibleLink: the kernels expect q1..q3 as the first masters")
    out = -np.ones(N)
    out[np.asarray(masters, dtype=int)] = np.arange(NM)
    return out


@lru_cache(maxsize=None)
def _model_arrays() -> np.ndarray:
    """Everything of ``p`` after ``alpha, beta``: the expanded reduced manipulator (built once)."""
    from hapflow.flex.erls_reduction import reduce_erls
    from hapflow.flex.manipulator import MASTERS, Q_STAR, gauge_rows, manipulator
    from hapflow.flex.state_space import expand
    mech = manipulator()
    red = reduce_erls(mech, MASTERS, Q_STAR, list(range(3, 9)), NT)
    model = expand(mech, [0, 2, 12], gauge_rows, red)
    parts = [model.A, model.b, expansion_terms(model.Mc, TM), expansion_terms(model.Kc, TM),
             expansion_terms(model.Sc, TS), expansion_terms(model.Gc, TG),
             expansion_terms(model.Pc, TP), *_guyan_blocks(model), model.inner, model.masters,
             model.slaves, model.torque_dofs, *_mass_stiffness_pattern(model.Mc, model.Kc),
             _basis_pattern(model.masters, model.slaves)]
    flat = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in parts])
    if flat.size + 2 != P_SIZE:
        raise RuntimeError(f"FlexibleLink: the model packs {flat.size + 2} values, the kernels "
                           f"expect {P_SIZE}")
    return flat


def packed_model(alpha: float, beta: float) -> np.ndarray:
    """The ``p`` of the kernels here: Rayleigh ``alpha`` (1/s), ``beta`` (s), then the model
    (what :class:`FlexibleLink` packs)."""
    return np.concatenate([[alpha, beta], _model_arrays()])


@njit_noalloc
def hold_torques(d, t1, t2, t3):
    """The torque inputs into ``d[DTQ:]``, where the rate functions read them."""
    d[DTQ] = t1[0]
    d[DTQ + 1] = t2[0]
    d[DTQ + 2] = t3[0]


@njit_noalloc
def arm_outputs(x, elastic_dofs, q, elastic):
    """``q`` and the elastic master displacements (at ``elastic_dofs`` in ``x``)."""
    for i in range(NQ):
        q[i] = x[i]
    for i in range(6):
        elastic[i] = x[elastic_dofs[i]]


REDUCED_ELASTIC = (3, 4, 5, 6, 7, 8)     # x4 y5 x14 y15 x25 x26 in z: masters after q
ELASTIC = (3, 4, 13, 14, 24, 25)         # the same in x = (q, u_in): chapter 6's masters


class FlexibleLink(Block):
    """Seed 004's flexible 3-dof manipulator, reduced to 13 dofs (eq. 6.3; chapters 4-6).

    Horizontal plane, starting at rest at ``q* = (1.0821, 2.6354, 4.7123)`` rad.
    State: ``z = (q1 q2 q3, x4 y5 x14 y15 x25 x26, eta1..eta4)`` and ``z'``
    (26 values).  Torques act on the actuated links (MKD041 on link 1 at A,
    MKD090 on link 2 at A, the Parker motor on link 5 at E).  Building the
    block expands the model once per process (a few seconds).

    Ports
    -----
    t1, t2, t3 : in, (1,), N*m          motor torques on links 1, 2 and 5
    q          : out, (3,), rad         ERLS coordinates (link angles from the X axis; state only)
    gamma      : out, (3,), 1/m         curvatures at the middle of links 1, 2 and 4 (state only)
    elastic    : out, (6,), m           elastic master displacements x4 y5 x14 y15 x25 x26
                                        (nodes B, middle of BC, E; state only)
    """

    inputs = {"t1": In(1, unit="N*m", doc="torque on link 1 (AB)"),
              "t2": In(1, unit="N*m", doc="torque on link 2 (AD)"),
              "t3": In(1, unit="N*m", doc="torque on link 5 (EF)")}
    outputs = {"q": Out(3, unit="rad", depends="state", doc="ERLS coordinates"),
               "gamma": Out(3, unit="1/m", depends="state", doc="curvatures of links 1, 2, 4"),
               "elastic": Out(6, unit="m", depends="state", doc="elastic master displacements")}
    params = {"alpha": Live(1.0, unit="1/s", check=nonnegative, doc="Rayleigh mass coefficient"),
              "beta": Live(2e-6, unit="s", check=nonnegative,
                           doc="Rayleigh stiffness coefficient (RK4 at 0.1 ms needs "
                               "beta (2 pi 1.3 kHz)^2 dt < 2.8)")}
    derived = {"model": Derived(lambda b: _model_arrays(), size=P_SIZE - 2,
                                doc="the expanded manipulator: expansion terms, patterns, dofs")}
    cstate = 2 * R
    dstate = D_SIZE
    initial_depends = ()                  # the thesis's q*, whatever the parameters

    def initial_state(self):
        from hapflow.flex.manipulator import Q_STAR
        x, d, m = super().initial_state()
        x[:NQ] = Q_STAR
        return x, d, m

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, t1, t2, t3, dx):
        hold_torques(d, t1, t2, t3)
        flex_rate(p, x, d[DTQ:], d, dx)

    @staticmethod
    @njit
    def output(t, x, d, m, p, t1, t2, t3, q, gamma, elastic):
        arm_outputs(x, REDUCED_ELASTIC, q, elastic)
        flex_gauges(p, x, d, gamma)


class FlexibleLinkFull(FlexibleLink):
    """Seed 004's flexible 3-dof manipulator with all 30 dofs (eq. 4.23): chapter 6's truth.

    The ERLS model of :mod:`hapflow.flex.manipulator` without the reduction -- the
    plant the thesis judges its reduced-model EKF
    (:class:`~hapflow.blocks.flexible_ekf.FlexibleLinkEKF`) against.  Same ports,
    damping and starting state (at rest at ``q*``) as :class:`FlexibleLink`, so
    a graph swaps one for the other.  State: ``x = (q1 q2 q3, u_in)`` (27 elastic
    coordinates) and ``x'``, 60 values.  Its stiffest modes need RK4 steps of
    0.05 ms (graph rate 20 kHz) where the reduced model's 1.3 kHz mode allows 0.1 ms.

    Ports
    -----
    t1, t2, t3 : in, (1,), N*m          motor torques on links 1, 2 and 5
    q          : out, (3,), rad         ERLS coordinates (state only)
    gamma      : out, (3,), 1/m         curvatures at the middle of links 1, 2 and 4 (state only)
    elastic    : out, (6,), m           elastic displacements x4 y5 x14 y15 x25 x26 (state only)
    """

    cstate = 2 * N

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, t1, t2, t3, dx):
        hold_torques(d, t1, t2, t3)
        full_rate(p, x, d[DTQ:], d, dx)

    @staticmethod
    @njit
    def output(t, x, d, m, p, t1, t2, t3, q, gamma, elastic):
        arm_outputs(x, ELASTIC, q, elastic)
        full_gauges(p, x, d, gamma)
