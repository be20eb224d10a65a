"""Elementary functions for kernels: the same bits in one run, in SIMD lanes and in Python.

``from hapflow import kmath`` in a block module, ``kmath.sin(x)`` in a kernel:
functions a kernel calls like ``math``'s.  They exist for the batched (lanes)
kernel: numba lowers ``math.sin`` and its kin to calls into the C library, and
a loop over lanes that calls a function is not vectorised.  These call
nothing and are inlined by LLVM (``forceinline``); over lanes the compiler
turns their branches into selects, in one run they stay branches.  So the
loop over a group of runs runs in SIMD registers, and each lane computes
exactly the bits a single run computes: neither the compiler (no fast-math,
no contraction into fused multiply-adds) nor the width changes one rounding.
Called from Python (an interpreted reference) they run the same arithmetic in
Python floats, with the same result.

The algorithms are fdlibm's (Sun Microsystems, 1993; the versions of
FreeBSD's ``msun``): ``exp`` (e_exp.c), ``expm1`` (s_expm1.c), ``log``
(e_log.c) and the kernels of ``sin`` and ``cos`` (k_sin.c, k_cos.c), with the
same coefficients; ``tanh`` is Go's ``math.Tanh`` (Cephes' rational and
``exp``).  Their errors are below one unit in the last place (ulp), ``tanh``'s
below two; ``tests/test_kmath.py`` checks them against long-double references
and ``bench/kmath.py`` prints them beside the C library's.  Where this differs
from fdlibm:

* argument reduction of ``sin`` and ``cos``: the Cody-Waite rounds of
  fdlibm's ``__ieee754_rem_pio2``, always the second (fdlibm stops after the
  first when the result allows) and the third where fdlibm takes it.  Below
  ``REDUCTION_LIMIT`` (2^20 pi/2, about 1.6e6 rad) the reduction is fdlibm's.
  Beyond it fdlibm switches to the Payne-Hanek reduction (a table of 2/pi,
  loops); here the same rounds go on, whose error grows as ``|x| 2^-53``, the
  spacing of doubles near ``x`` itself (the test checks that bound).  From
  ``TRIG_LIMIT`` (2^51, where doubles are 0.5 apart and ``x 2/pi`` no longer
  rounds to an integer) they return NaN.
* ``exp`` rounds ``x / ln 2`` to the nearest integer by adding and taking away
  1.5 2^52 (fdlibm truncates ``x / ln 2 +- 1/2``); either keeps the reduced
  argument within ``ln(2) / 2``.
* non-finite arguments and overflow take fdlibm's results (``sin(inf)`` is
  NaN, ``exp(1000)`` is inf, ``log(-1)`` NaN, ``log(0)`` -inf), where
  Python's ``math`` would raise.

Bit patterns go through :func:`float_bits` and :func:`bits_float` (a
reinterpretation in compiled code, ``struct`` in Python).
"""
from __future__ import annotations

import struct

from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from .jit import njit


def float_bits(x: float) -> int:
    """The IEEE 754 bits of the double ``x`` as a signed 64-bit integer."""
    return struct.unpack("<q", struct.pack("<d", x))[0]


def bits_float(i: int) -> float:
    """The double whose IEEE 754 bits are the signed 64-bit integer ``i``."""
    return struct.unpack("<d", struct.pack("<q", i))[0]


def _bitcast(name: str, accepts: type, via: types.Type, result: types.Type, target: ir.Type):
    """An intrinsic that gives the bits of its argument (a number of the kind ``accepts``,
    cast to ``via``) as a ``result``."""
    def typer(typingctx, value):
        if not isinstance(value, accepts):
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(context.cast(builder, args[0], value, via), target)
        return result(value), codegen
    typer.__name__ = name
    return intrinsic(typer)


_float_bits = _bitcast("_float_bits", types.Float, types.float64, types.int64, ir.IntType(64))
_bits_float = _bitcast("_bits_float", types.Integer, types.int64, types.float64, ir.DoubleType())


@overload(float_bits, inline="always")
def _float_bits_compiled(x):
    return lambda x: _float_bits(x)


@overload(bits_float, inline="always")
def _bits_float_compiled(i):
    return lambda i: _bits_float(i)


INLINE = {"forceinline": True, "error_model": "numpy"}
"""Options of every function here: inlined by LLVM; a division by zero gives inf or NaN."""

LN2_HI = 6.93147180369123816490e-01       # 0x3fe62e42 fee00000: k * LN2_HI is exact
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e+00
EXP_OVERFLOW = 7.09782712893383973096e+02
EXP_UNDERFLOW = -7.45133219101941108420e+02
P1, P2, P3 = 1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05
P4, P5 = -1.65339022054652515390e-06, 4.13813679705723846039e-08
Q1, Q2, Q3 = -3.33333333333331316428e-02, 1.58730158725481460165e-03, -7.93650757867487942473e-05
Q4, Q5 = 4.00821782732936239552e-06, -2.01099218183624371326e-07
LG1, LG2, LG3 = 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01
LG4, LG5, LG6 = 2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01
LG7 = 1.479819860511658591e-01
S1, S2, S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
S4, S5, S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
C1, C2, C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
C4, C5, C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11
INV_PIO2 = 6.36619772367581382433e-01
PIO2_1, PIO2_1T = 1.57079632673412561417e+00, 6.07710050650619224932e-11
PIO2_2, PIO2_2T = 6.07710050630396597660e-11, 2.02226624879595063154e-21
PIO2_3, PIO2_3T = 2.02226624871116645580e-21, 8.47842766036889956997e-32
ROUNDER = 6755399441055744.0               # 1.5 * 2^52: (v + ROUNDER) - ROUNDER rounds v
REDUCTION_LIMIT = 1647099.3291652855       # 2^20 pi / 2: fdlibm's medium reduction below
TRIG_LIMIT = 2.0 ** 51                     # from here on the rounding of x 2/pi fails
TINY = 2.0 ** -54
TANH_P0, TANH_P1 = -9.64399179425052238628e-1, -9.92877231001918586564e1
TANH_P2 = -1.61468768441708447952e3
TANH_Q0, TANH_Q1 = 1.12811678491632931402e2, 2.23548839060100448583e3
TANH_Q2 = 4.84406305325125486048e3
INF = float("inf")
NAN = float("nan")


@njit(**INLINE)
def _two_to(k):
    """2.0 ** k for an integer ``-1022 <= k <= 1023``."""
    return bits_float((k + 1023) << 52)


@njit(**INLINE)
def exp(x):
    """e ** x (fdlibm's ``__ieee754_exp``)."""
    inside = x >= EXP_UNDERFLOW and x <= EXP_OVERFLOW
    xc = x if inside else 0.0
    kf = (xc * INV_LN2 + ROUNDER) - ROUNDER
    hi = xc - kf * LN2_HI
    lo = kf * LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    k = int(kf)
    half = k >> 1                  # two steps keep each factor normal (and round once)
    y = (y * _two_to(half)) * _two_to(k - half)
    if x != x:
        return x + x
    if x > EXP_OVERFLOW:
        return INF
    if x < EXP_UNDERFLOW:
        return 0.0
    return y


@njit(**INLINE)
def expm1(x):
    """e ** x - 1, accurate also for small ``|x|`` (fdlibm's ``expm1``)."""
    a = abs(x)
    xc = x if a < EXP_OVERFLOW else 0.0
    negative = xc < 0.0
    k = 0
    c = 0.0
    if a > 0.5 * LN2_HI:
        if a < 1.0397207708399179:        # 1.5 ln 2
            k = -1 if negative else 1
            hi = xc + LN2_HI if negative else xc - LN2_HI
            lo = -LN2_LO if negative else LN2_LO
        else:
            k = int(INV_LN2 * xc + (-0.5 if negative else 0.5))
            t = float(k)
            hi = xc - t * LN2_HI
            lo = t * LN2_LO
        xr = hi - lo
        c = (hi - xr) - lo
    else:
        xr = xc
    hfx = 0.5 * xr
    hxs = xr * hfx
    r1 = 1.0 + hxs * (Q1 + hxs * (Q2 + hxs * (Q3 + hxs * (Q4 + hxs * Q5))))
    t = 3.0 - r1 * hfx
    e = hxs * ((r1 - t) / (6.0 - xr * t))
    kc = min(max(k, -60), 1024)
    scale = _two_to(kc - 1)                      # 2^k / 2: finite for k = 1024 too
    if k == 0:
        y = xr - (xr * e - hxs)
    else:
        e = (xr * (e - c) - c) - hxs
        if k == -1:
            y = 0.5 * (xr - e) - 0.5
        elif k == 1:
            y = -2.0 * (e - (xr + 0.5)) if xr < -0.25 else 1.0 + 2.0 * (xr - e)
        elif k <= -2 or k > 56:
            y = (((1.0 - (e - xr)) * scale) * 2.0) - 1.0
        elif k < 20:
            y = (((1.0 - _two_to(-kc)) - (e - xr)) * scale) * 2.0
        else:
            y = (((xr - (e + _two_to(-kc))) + 1.0) * scale) * 2.0
    if x != x:
        return x + x
    if a >= 38.816242111356935:                   # 56 ln 2: exp(x) alone, or -1
        if x < 0.0:
            return -1.0
        if x > EXP_OVERFLOW:
            return INF
    if a < TINY:
        return x
    return y


@njit(**INLINE)
def log(x):
    """Natural logarithm (fdlibm's ``__ieee754_log``)."""
    normal = x >= 2.2250738585072014e-308
    xs = x if normal else x * 18014398509481984.0          # subnormal: times 2^54
    bits = float_bits(xs if xs > 0.0 and xs < INF else 1.0)
    hx = bits >> 32
    k = (hx >> 20) - 1023 - (0 if normal else 54)
    hx &= 0x000fffff
    i = (hx + 0x95f64) & 0x100000                # mantissa in [sqrt(2)/2, sqrt(2))
    m = bits_float(((hx | (i ^ 0x3ff00000)) << 32) | (bits & 0xffffffff))
    k += i >> 20
    f = m - 1.0
    dk = float(k)
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (LG2 + w * (LG4 + w * LG6))
    t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)))
    r = t2 + t1
    if ((hx - 0x6147a) | (0x6b851 - hx)) > 0:
        hfsq = 0.5 * f * f
        y = dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f)
    else:
        y = dk * LN2_HI - ((s * (f - r) - dk * LN2_LO) - f)
    if not x >= 0.0:
        return x + x if x != x else NAN
    if x == 0.0:
        return -INF
    if x == INF:
        return x
    return y


@njit(**INLINE)
def _reduce(x):
    """``n`` and ``y0 + y1 = x - n pi/2`` (``|y0| <= pi/4`` about): fdlibm's medium
    reduction, its second round always, its third where fdlibm takes it (a
    cancellation of more than 49 bits, where the second round's difference was exact)."""
    fn = (x * INV_PIO2 + ROUNDER) - ROUNDER
    t = x - fn * PIO2_1
    w = fn * PIO2_2
    r = t - w
    w = fn * PIO2_2T - ((t - r) - w)
    y0 = r - w
    if ((float_bits(x) >> 52) & 0x7ff) - ((float_bits(y0) >> 52) & 0x7ff) > 49:
        t = r
        w = fn * PIO2_3
        r = t - w
        w = fn * PIO2_3T - ((t - r) - w)
        y0 = r - w
    return int(fn), y0, (r - y0) - w


@njit(**INLINE)
def _sin_kernel(x, y):
    """sin(x + y) for ``|x| <= pi/4``, ``y`` the tail of ``x`` (fdlibm's ``__kernel_sin``)."""
    z = x * x
    w = z * z
    r = S2 + z * (S3 + z * S4) + z * w * (S5 + z * S6)
    v = z * x
    return x - ((z * (0.5 * y - v * r) - y) - v * S1)


@njit(**INLINE)
def _cos_kernel(x, y):
    """cos(x + y) for ``|x| <= pi/4`` (fdlibm's ``__kernel_cos``)."""
    z = x * x
    w = z * z
    r = z * (C1 + z * (C2 + z * C3)) + w * w * (C4 + z * (C5 + z * C6))
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + (z * r - x * y))


@njit(**INLINE)
def _sine(x, quarter):
    """``sin(x + quarter pi/2)`` for ``quarter`` 0 (sine) or 1 (cosine): the quadrant of
    the reduced argument, shifted, picks the kernel and the sign."""
    finite = abs(x) < TRIG_LIMIT
    n, y0, y1 = _reduce(x if finite else 0.0)
    q = n + quarter
    v = _cos_kernel(y0, y1) if q & 1 else _sin_kernel(y0, y1)
    if not finite:
        return x + x if x != x else NAN
    return -v if q & 2 else v


@njit(**INLINE)
def sin(x):
    """Sine of ``x`` (radians)."""
    return _sine(x, 0)


@njit(**INLINE)
def cos(x):
    """Cosine of ``x`` (radians)."""
    return _sine(x, 1)


@njit(**INLINE)
def tanh(x):
    """Hyperbolic tangent: Cephes' rational below 0.625, else ``1 - 2 / (exp(2|x|) + 1)``
    (the algorithm and coefficients of Go's ``math.Tanh``): one ``exp``, no ``expm1``,
    whose six ways to finish would all run in each lane.

    Branches, not selects: one run takes only its own (from 22 on, ``+-1`` at once, as
    a friction law far from zero velocity asks every tick); lanes take all of them."""
    z = abs(x)
    if z >= 22.0:                            # 1 - 2 / (e^44 + 1) rounds to 1
        return 1.0 if x > 0.0 else -1.0
    if z < 0.625:
        if x == 0.0:
            return x
        s = x * x
        return x + x * s * ((TANH_P0 * s + TANH_P1) * s + TANH_P2) / (((s + TANH_Q0) * s
                                                                       + TANH_Q1) * s + TANH_Q2)
    r = 1.0 - 2.0 / (exp(2.0 * z) + 1.0)      # NaN stays NaN here
    return r if x > 0.0 else -r
