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
from numba import njit

from hapflow.block import Block
from hapflow.jit import njit_noalloc
from hapflow.params import Live, nonnegative
from hapflow.ports import In, Out

# sizes of the thesis's reduction (checked against the model when packing)
NQ, NU, NL, NM, NS, NT, NG, NTQ = 3, 30, 5, 9, 21, 4, 3, 3
NF = 1 + 4 * NL
NIN = NU - NQ
N = NQ + NIN
R = NM + NT


def _layout(sizes):
    out, at = {}, 0
    for name, size in sizes:
        out[name] = at
        at += size
    return out, at


_PL, P_SIZE = _layout([("alpha", 1), ("beta", 1), ("A", NL * NQ), ("b", NL), ("Mc", NF * NU * NU),
                       ("Kc", NF * NU * NU), ("Sc", NF * NU * NQ), ("Gc", NF * NG * NU),
                       ("Pc", NF * NS * NT), ("inner", NIN), ("masters", NM), ("slaves", NS),
                       ("tdofs", NTQ)])
_DL, D_SIZE = _layout([("f", NF), ("fr", NF), ("M", NU * NU), ("K", NU * NU), ("S", NU * NQ),
                       ("Sd", NU * NQ), ("Kss", NS * NS), ("G", NS * NM), ("H", N * R),
                       ("x", N), ("xd", N), ("u", NU), ("ud", NU), ("t1", NU), ("t2", NU),
                       ("g", N), ("Mf", N * N), ("MH", N * R), ("Mr", R * R), ("rhs", R),
                       ("torque", NTQ)])
PA, PB, PAC, PBC = _PL["alpha"], _PL["beta"], _PL["A"], _PL["b"]
PM, PK, PS, PG, PP = _PL["Mc"], _PL["Kc"], _PL["Sc"], _PL["Gc"], _PL["Pc"]
PIN, PMA, PSL, PTQ = _PL["inner"], _PL["masters"], _PL["slaves"], _PL["tdofs"]
DF, DFR, DM, DK, DS, DSD = _DL["f"], _DL["fr"], _DL["M"], _DL["K"], _DL["S"], _DL["Sd"]
DKSS, DG, DH, DX, DXD = _DL["Kss"], _DL["G"], _DL["H"], _DL["x"], _DL["xd"]
DU, DUD, DT1, DT2, DGV, DMF, DMH, DMR, DRHS = (_DL["u"], _DL["ud"], _DL["t1"], _DL["t2"], _DL["g"],
                                               _DL["Mf"], _DL["MH"], _DL["Mr"], _DL["rhs"])


@njit_noalloc(cache=True)
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


@njit_noalloc(cache=True)
def _combine(p, so, size, d, fo, do):
    """``d[do:do+size] = sum_k d[fo+k] p[so + k size : ...]``."""
    for i in range(size):
        d[do + i] = 0.0
    for k in range(NF):
        fk = d[fo + k]
        if fk != 0.0:
            base = so + k * size
            for i in range(size):
                d[do + i] += fk * p[base + i]


@njit_noalloc(cache=True)
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


@njit_noalloc(cache=True)
def cholesky_substitute(d, ao, n, bo, ncols):
    """Solve ``L L' X = B`` in place with the factor ``L`` at ``ao``; ``B`` (n x ncols at ``bo``,
    row-major in ``d``) is overwritten by ``X``."""
    for c in range(ncols):
        for i in range(n):
            v = d[bo + i * ncols + c]
            for k in range(i):
                v -= d[ao + i * n + k] * d[bo + k * ncols + c]
            d[bo + i * ncols + c] = v / d[ao + i * n + i]
        for i in range(n - 1, -1, -1):
            v = d[bo + i * ncols + c]
            for k in range(i + 1, n):
                v -= d[ao + k * n + i] * d[bo + k * ncols + c]
            d[bo + i * ncols + c] = v / d[ao + i * n + i]


@njit_noalloc(cache=True)
def cholesky_solve(d, ao, n, bo, ncols):
    """Solve ``A X = B`` in place (``A`` SPD n x n at ``ao``, overwritten by its factor; ``B``
    n x ncols at ``bo``, overwritten by ``X``), both row-major in ``d``."""
    cholesky_factor(d, ao, n)
    cholesky_substitute(d, ao, n, bo, ncols)


@njit_noalloc(cache=True)
def _basis(p, d):
    """M, K, S at the features in ``d`` and ``H(q)`` (eq. 5.49) into ``d``."""
    _combine(p, PM, NU * NU, d, DF, DM)
    _combine(p, PK, NU * NU, d, DF, DK)
    _combine(p, PS, NU * NQ, d, DF, DS)
    for i in range(N * R):
        d[DH + i] = 0.0
    for j in range(NM):
        d[DH + int(p[PMA + j]) * R + j] = 1.0
    for i in range(NS):
        ui = int(p[PIN + int(p[PSL + i]) - NQ])
        for j in range(NS):
            d[DKSS + i * NS + j] = d[DK + ui * NU + int(p[PIN + int(p[PSL + j]) - NQ])]
        for j in range(NM):
            mj = int(p[PMA + j])
            d[DG + i * NM + j] = -d[DK + ui * NU + int(p[PIN + mj - NQ])] if mj >= NQ else 0.0
    cholesky_solve(d, DKSS, NS, DG, NM)
    for i in range(NS):
        row = DH + int(p[PSL + i]) * R
        for j in range(NM):
            d[row + j] = d[DG + i * NM + j]
        for j in range(NT):
            v = 0.0
            for k in range(NF):
                v += d[DF + k] * p[PP + k * NS * NT + i * NT + j]
            d[row + NM + j] = v


@njit_noalloc(cache=True)
def flex_rate(p, x, torque, d, dx):
    """``dx = (z', z'')`` of eq. 6.3 for the state ``x = (z, z')`` (26 values)."""
    _features(p, x, R, d)
    _basis(p, d)
    _combine(p, PS, NU * NQ, d, DFR, DSD)
    for i in range(N):
        a = 0.0
        b = 0.0
        for j in range(R):
            h = d[DH + i * R + j]
            a += h * x[j]
            b += h * x[R + j]
        d[DX + i], d[DXD + i] = a, b
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
        for k in range(NU):
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
        for k in range(NU):
            v -= d[DK + ii * NU + k] * d[DU + k]
        d[DGV + NQ + i] = v
    _full_mass(p, d)
    _reduce_and_solve(p, x, d, dx)


@njit_noalloc(cache=True)
def _full_mass(p, d):
    """``Mf`` of eq. 4.23 over ``(q, u_in)`` into ``d``."""
    for a in range(NQ):
        for b in range(NQ):
            v = 0.0
            for i in range(NU):
                si = d[DS + i * NQ + a]
                if si != 0.0:
                    for k in range(NU):
                        v += si * d[DM + i * NU + k] * d[DS + k * NQ + b]
            d[DMF + a * N + b] = v
    for i in range(NIN):
        ii = int(p[PIN + i])
        for b in range(NQ):
            v = 0.0
            for k in range(NU):
                v += d[DM + ii * NU + k] * d[DS + k * NQ + b]
            d[DMF + (NQ + i) * N + b] = v
            d[DMF + b * N + NQ + i] = v
        for j in range(NIN):
            d[DMF + (NQ + i) * N + NQ + j] = d[DM + ii * NU + int(p[PIN + j])]


@njit_noalloc(cache=True)
def product(d, ao, at, bo, co, rows, inner, cols):
    """``C = op(A) B`` in ``d``, row-major: ``A`` is rows x inner (inner x rows if ``at``:
    transposed), ``B`` inner x cols, ``C`` rows x cols."""
    for i in range(rows):
        for j in range(cols):
            v = 0.0
            for k in range(inner):
                a = d[ao + k * rows + i] if at else d[ao + i * inner + k]
                v += a * d[bo + k * cols + j]
            d[co + i * cols + j] = v


@njit_noalloc(cache=True)
def _reduce_and_solve(p, x, d, dx):
    """``H' Mf H z'' = H' g`` into ``dx`` (with ``z'`` first)."""
    product(d, DMF, False, DH, DMH, N, N, R)
    product(d, DH, True, DMH, DMR, R, N, R)
    product(d, DH, True, DGV, DRHS, R, N, 1)
    cholesky_solve(d, DMR, R, DRHS, 1)
    for i in range(R):
        dx[i] = x[R + i]
        dx[R + i] = d[DRHS + i]


@njit_noalloc(cache=True)
def flex_gauges(p, x, d, gamma):
    """Curvatures ``gamma1, gamma2, gamma4`` (1/m) at the state ``x``."""
    _features(p, x, -1, d)
    _basis(p, d)
    for i in range(N):
        v = 0.0
        for j in range(R):
            v += d[DH + i * R + j] * x[j]
        d[DX + i] = v
    for g in range(NG):
        v = 0.0
        for i in range(NIN):
            v += gauge_weight(p, d, g, i) * d[DX + NQ + i]
        gamma[g] = v


@njit_noalloc(cache=True)
def gauge_weight(p, d, g, i):
    """Curvature ``g`` per unit of the elastic dof ``u_in[i]`` at the features in ``d``."""
    ii = int(p[PIN + i])
    c = 0.0
    for k in range(NF):
        c += d[DF + k] * p[PG + k * NG * NU + g * NU + ii]
    return c


@lru_cache(maxsize=None)
def _model_arrays() -> np.ndarray:
    """Everything of ``p`` after ``alpha, beta``: the expanded reduced manipulator (built once)."""
    from hapflow.flex.erls_reduction import reduce_erls
    from hapflow.flex.manipulator import MASTERS, Q_STAR, gauge_rows, manipulator
    from hapflow.flex.state_space import expand
    mech = manipulator()
    red = reduce_erls(mech, MASTERS, Q_STAR, list(range(3, 9)), NT)
    model = expand(mech, [0, 2, 12], gauge_rows, red)
    parts = [model.A, model.b, model.Mc, model.Kc, model.Sc, model.Gc, model.Pc, model.inner,
             model.masters, model.slaves, model.torque_dofs]
    flat = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in parts])
    if flat.size + 2 != P_SIZE:
        raise RuntimeError(f"FlexibleLink: the model packs {flat.size + 2} values, the kernels "
                           f"expect {P_SIZE}")
    return flat


def packed_model(alpha: float, beta: float) -> np.ndarray:
    """The ``p`` of the kernels here: Rayleigh ``alpha`` (1/s), ``beta`` (s), then the model."""
    return np.concatenate([[alpha, beta], _model_arrays()])


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
    cstate = 2 * R
    dstate = D_SIZE

    def pack(self) -> np.ndarray:
        return packed_model(self.alpha, self.beta)

    def initial_state(self):
        from hapflow.flex.manipulator import Q_STAR
        x, d, m = super().initial_state()
        x[:NQ] = Q_STAR
        return x, d, m

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, t1, t2, t3, dx):
        d[D_SIZE - 3] = t1[0]
        d[D_SIZE - 2] = t2[0]
        d[D_SIZE - 1] = t3[0]
        flex_rate(p, x, d[D_SIZE - 3:], d, dx)

    @staticmethod
    @njit
    def output(t, x, d, m, p, t1, t2, t3, q, gamma, elastic):
        for i in range(NQ):
            q[i] = x[i]
        for i in range(6):
            elastic[i] = x[NQ + i]
        flex_gauges(p, x, d, gamma)
