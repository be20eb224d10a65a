"""hapflow.kmath against the C library: accuracy, latency and throughput, one table.

For each function and argument range: the largest error in units of the last
place (ulp) against a long-double reference, for ``kmath`` and for numpy's
(the C library's) function on the same arguments; then nanoseconds per call
compiled by numba, in a dependent chain (each argument from the last result:
the latency a solver stage waits for) and over an array (the loop runs in
SIMD registers for ``kmath``; for the C library numba calls the scalar
function once per element).  Median of ``--repeats`` timings.

Usage: ``python bench/kmath.py [--repeats 5]``.  Exits 0 whatever the figures.
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import numba
import numpy as np

from hapflow import kmath

RANGES = {"exp": [(-745.0, 709.7), (-1.0, 1.0)], "expm1": [(-40.0, 709.0), (-0.7, 0.7)],
          "log": [(0.5, 2.0), (1e-300, 1e300)], "sin": [(-10.0, 10.0), (-1.6e6, 1.6e6)],
          "cos": [(-10.0, 10.0), (-1.6e6, 1.6e6)], "tanh": [(-3.0, 3.0), (-25.0, 25.0)]}
CHAIN_START = {"exp": 0.3, "expm1": 0.3, "log": 1.3, "sin": 0.7, "cos": 0.7, "tanh": 0.3}


def _arguments(name: str, lo: float, hi: float, n: int, rng: np.random.Generator) -> np.ndarray:
    if name == "log" and hi / lo > 1e3:                         # every binade alike
        return np.exp(rng.uniform(math.log(lo), math.log(hi), n))
    return rng.uniform(lo, hi, n)


def _worst_ulps(values: np.ndarray, exact: np.ndarray) -> float:
    spacing = np.spacing(np.abs(exact.astype(np.float64)))
    return float(np.max(np.abs(values.astype(np.longdouble) - exact) / spacing))


def _kernels(f):
    @numba.njit(error_model="numpy")
    def chain(x0, n):
        x, total = x0, 0.0
        for i in range(n):
            y = f(x)
            total += y
            x = x0 + 1e-9 * y + 1e-7 * i
        return total

    @numba.njit(error_model="numpy")
    def over(a, out):
        for i in range(a.size):
            out[i] = f(a[i])
    return chain, over


def _median_ns(call, count: int, repeats: int) -> float:
    call()
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        walls.append(time.perf_counter() - start)
    return statistics.median(walls) / count * 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    print(f"{'function':8s} {'range':>22s} {'kmath ulp':>10s} {'libm ulp':>9s} "
          f"{'chain ns (kmath/libm)':>22s} {'array ns (kmath/libm)':>22s}")
    for name, ranges in RANGES.items():
        kernels = [_kernels(getattr(kmath, name)), _kernels(getattr(math, name))]
        a = _arguments(name, *ranges[0], 10**6, rng)
        out = np.empty_like(a)
        chain = [_median_ns(lambda: c(CHAIN_START[name], 10**6), 10**6, args.repeats)
                 for c, _ in kernels]
        array = [_median_ns(lambda: o(a, out), a.size, args.repeats) for _, o in kernels]
        for k, (lo, hi) in enumerate(ranges):
            x = _arguments(name, lo, hi, 200_000, rng)
            exact = getattr(np, name)(x.astype(np.longdouble))
            ours = np.empty_like(x)
            kernels[0][1](x, ours)
            times = (f"{chain[0]:9.1f} / {chain[1]:5.1f}", f"{array[0]:9.2f} / {array[1]:5.2f}") \
                if k == 0 else ("", "")
            print(f"{name:8s} {f'[{lo:g}, {hi:g}]':>22s} {_worst_ulps(ours, exact):10.3f} "
                  f"{_worst_ulps(getattr(np, name)(x), exact):9.3f} {times[0]:>22s} "
                  f"{times[1]:>22s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
