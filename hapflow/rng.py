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
from numba import njit

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
def uniform(m, k):
    """Uniform number in (0, 1) from stream ``m[k]`` (advances it)."""
    s = np.uint64(m[k])
    s ^= s << np.uint64(13)
    s ^= s >> np.uint64(7)
    s ^= s << np.uint64(17)
    m[k] = np.int64(s)
    return (float(s >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def normal(m, k):
    """Standard normal number from stream ``m[k]`` (Box-Muller; advances it twice)."""
    u1 = uniform(m, k)
    u2 = uniform(m, k)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
