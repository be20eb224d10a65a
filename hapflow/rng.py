"""Deterministic random numbers inside kernels, identical compiled and interpreted.

Each random stream is one int64 slot of a block's integer state ``m``,
advanced by xorshift64 (shifts and xors only, so plain numpy integers and
numba give the same bits without overflow arithmetic).  Streams are seeded at
build time from the graph's ``seed`` and the block's name, so the same graph
and seed give bit-identical runs, and renaming or adding another block does
not change a block's noise.

In a kernel::

    from hapflow.rng import normal
    w = normal(m, 0)        # standard normal from stream m[0]
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

from .jit import njit
from .kmath import INLINE, log

_MASK = (1 << 64) - 1


def stream_seeds(graph_seed: int, block: str, n: int) -> np.ndarray:
    """``n`` non-zero int64 stream states for ``block`` under ``graph_seed``."""
    digest = hashlib.sha256(f"{graph_seed}:{block}".encode()).digest()
    state = int.from_bytes(digest[:8], "little")
    out = np.zeros(n, dtype=np.int64)
    for k in range(n):
        state = (state + 0x9E3779B97F4A7C15) & _MASK          # splitmix64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        z ^= z >> 31
        out[k] = np.array(z or 1, dtype=np.uint64).view(np.int64)
    return out


@njit(cache=True)
def _advance(m, k):
    """Stream ``m[k]`` advanced one xorshift64 step; returns the new 64 bits."""
    s = np.uint64(m[k])
    s ^= s << np.uint64(13)
    s ^= s >> np.uint64(7)
    s ^= s << np.uint64(17)
    m[k] = np.int64(s)
    return s


@njit(cache=True)
def uniform(m, k):
    """Uniform number in (0, 1) from stream ``m[k]`` (advances it)."""
    return (float(_advance(m, k) >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@njit(**INLINE)
def _horner(r, a):
    """The polynomial with the coefficients ``a`` (highest power first) at ``r``."""
    value = a[0]
    for i in range(1, len(a)):
        value = value * r + a[i]
    return value


CENTRE = ((2.5090809287301226727e+3, 3.3430575583588128105e+4, 6.7265770927008700853e+4,
           4.5921953931549871457e+4, 1.3731693765509461125e+4, 1.9715909503065514427e+3,
           1.3314166789178437745e+2, 3.3871328727963666080e+0),
          (5.2264952788528545610e+3, 2.8729085735721942674e+4, 3.9307895800092710610e+4,
           2.1213794301586595867e+4, 5.3941960214247511077e+3, 6.8718700749205790830e+2,
           4.2313330701600911252e+1, 1.0))
NEAR_TAIL = ((7.74545014278341407640e-4, 2.27238449892691845833e-2, 2.41780725177450611770e-1,
              1.27045825245236838258e+0, 3.64784832476320460504e+0, 5.76949722146069140550e+0,
              4.63033784615654529590e+0, 1.42343711074968357734e+0),
             (1.05075007164441684324e-9, 5.47593808499534494600e-4, 1.51986665636164571966e-2,
              1.48103976427480074590e-1, 6.89767334985100004550e-1, 1.67638483018380384940e+0,
              2.05319162663775882187e+0, 1.0))
FAR_TAIL = ((2.01033439929228813265e-7, 2.71155556874348757815e-5, 1.24266094738807843860e-3,
             2.65321895265761230930e-2, 2.96560571828504891230e-1, 1.78482653991729133580e+0,
             5.46378491116411436990e+0, 6.65790464350110377720e+0),
            (2.04426310338993978564e-15, 1.42151175831644588870e-7, 1.84631831751005468180e-5,
             7.86869131145613259100e-4, 1.48753612908506148525e-2, 1.36929880922735805310e-1,
             5.99832206555887937690e-1, 1.0))
"""Coefficients of Wichura's AS241 (PPND16), as CPython's ``statistics.NormalDist.inv_cdf``
has them: ``|q| <= 0.425``, then ``r = sqrt(-log(min(p, 1 - p)))`` up to 5, and beyond."""


@njit(**INLINE)
def normal_quantile(p):
    """The standard normal number whose distribution function is ``p`` (``0 < p < 1``).

    Wichura's algorithm AS241 (Applied Statistics 37, 1988), relative error
    about 1e-16.  The three ranges share one evaluation of the rational
    function, on coefficients chosen by range: over lanes, one evaluation
    instead of three.  A tail's ``(num * +-1) / den`` is ``+-(num / den)``
    exactly.
    """
    q = p - 0.5
    if abs(q) <= 0.425:
        r, sign, (a, b) = 0.180625 - q * q, q, CENTRE
    else:
        r = math.sqrt(-log(p if q <= 0.0 else 1.0 - p))
        sign = -1.0 if q < 0.0 else 1.0
        r, (a, b) = (r - 1.6, NEAR_TAIL) if r <= 5.0 else (r - 5.0, FAR_TAIL)
    return (_horner(r, a) * sign) / _horner(r, b)


@njit(cache=True, forceinline=True)   # in the kernel: a call per draw cost more than the draw
def normal(m, k):
    """Standard normal number from stream ``m[k]`` (advances it once).

    :func:`normal_quantile` of one uniform draw: one draw per number, and no
    loop, so a batched kernel runs its lanes' draws side by side in SIMD
    registers, each lane with the bits of a single run (:mod:`hapflow.kmath`'s
    ``log``; ``sqrt`` is exact).  A rejection method (the ziggurat this
    replaces, 1.2 % of its draws retried) cannot: its retry loop keeps the
    whole tick of a batched kernel scalar.
    """
    return normal_quantile(uniform(m, k))
