"""What the rig graph's batched kernels could reach if their math cost nothing.

Issue 12 asks >= 15 000 simulated s per wall s for a batched study of
``graphs/colton2005_sweep.yaml`` (1 s runs) while batched runs stay
bit-identical to single runs.  ``bench/study.py`` times the kernels as they
are; this script asks how fast the same kernels would run with their
elementary functions and their noise made (nearly) free.  Each variant runs
in a fresh process with an empty kernel cache:

* ``as built``: the graph's kernels as hapflow compiles them;
* ``free math``: :mod:`hapflow.kmath`'s ``tanh``, ``sin`` and ``cos``
  replaced by a few inlined multiplications and a division each;
* ``free math, free noise``: the same, and the impedance head's normal draws
  (:func:`hapflow.rng.normal`, the normal quantile of a uniform draw: a
  logarithm, a square root and a rational function) replaced by one uniform
  draw (:func:`hapflow.rng.uniform`), scaled.

The stand-ins compute wrong values on purpose (the blocks' designs are made
first, with the real functions); only the times mean something.  They are
compiled as kmath's functions are (inlined by LLVM, numpy's error model: a
division that may raise keeps the loop over the lanes scalar).  For each
variant: the single-run kernel per tick (``Simulation.advance``), and the
batched ``rows`` and ``lanes`` kernels alone on ``--runs`` prepared runs
over numba's threads, in simulated s per wall s; median of ``--repeats``.
The lanes kernel takes every branch of these functions in every lane (as
selects): the gap between ``as built`` and the free variants is what they
cost there.

Usage: ``python bench/sweep_bounds.py [--runs 512] [--repeats 3]``.  Exits 0
whatever the figures (a benchmark, not a test).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

VARIANTS = {"as built": (), "free math": ("math",), "free math, free noise": ("math", "normal")}
GOAL = 15000.0


def _stand_in_normal() -> None:
    """:func:`hapflow.rng.normal` replaced (before any block imports it)."""
    import numba

    import hapflow.rng
    from hapflow.rng import uniform

    @numba.njit(forceinline=True, error_model="numpy")
    def normal(m, k):
        return (uniform(m, k) - 0.5) * 3.4

    hapflow.rng.normal = normal


def _stand_in_math() -> None:
    """:mod:`hapflow.kmath`'s ``tanh``, ``sin`` and ``cos`` replaced for the kernels compiled
    from now on (the blocks name them through the module)."""
    import numba

    from hapflow import kmath

    @numba.njit(forceinline=True, error_model="numpy")
    def tanh(x):
        x2 = x * x
        return x * (27.0 + x2) / (27.0 + 9.0 * x2)

    @numba.njit(forceinline=True, error_model="numpy")
    def sin(x):
        return x - x * x * x / 6.0

    @numba.njit(forceinline=True, error_model="numpy")
    def cos(x):
        return 1.0 - 0.5 * x * x

    kmath.tanh, kmath.sin, kmath.cos = tanh, sin, cos


def child(which: tuple[str, ...], runs: int, repeats: int) -> dict[str, float]:
    """Medians of the kernels of one variant, in this process."""
    if "normal" in which:
        _stand_in_normal()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import study
    on = study.load(Path(tempfile.mkdtemp()), "sweep", "on", runs)
    for node in on.graph.nodes.values():       # designs made with the real functions
        node.block.packed()
    if "math" in which:
        _stand_in_math()
    timed = [study.kernel_only(on, runs) for _ in range(repeats)]
    tick = statistics.median(t["single kernel/tick"][0] for t in timed)
    out = {"single ns/tick": tick * 1e9, "single sim-s/s": 1.0 / (tick * 4000.0)}
    for layout in ("rows", "lanes"):
        out[f"{layout} sim-s/s"] = runs / statistics.median(t[f"{layout} kernel"][0]
                                                             for t in timed)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(tuple(filter(None, args.child.split(","))), args.runs,
                               args.repeats)))
        return 0
    import numba
    print(f"graphs/colton2005_sweep.yaml, {args.runs} runs x 1 s at 4 kHz, median of "
          f"{args.repeats}; numba threads {numba.config.NUMBA_NUM_THREADS}, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'variant':22s} {'single ns/tick':>15s} {'single sim s/s':>15s} "
          f"{'rows sim s/s':>13s} {'lanes sim s/s':>14s}  goal (lanes or rows)")
    for name, which in VARIANTS.items():
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, HAPFLOW_CACHE_DIR=cache, NUMBA_CACHE_DIR=cache)
            done = subprocess.run([sys.executable, __file__, "--child", ",".join(which),
                                   "--runs", str(args.runs), "--repeats", str(args.repeats)],
                                  env=env, capture_output=True, text=True)
        if done.returncode:
            print(f"{name:22s} failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        best = max(r["rows sim-s/s"], r["lanes sim-s/s"])
        print(f"{name:22s} {r['single ns/tick']:15.0f} {r['single sim-s/s']:15,.0f} "
              f"{r['rows sim-s/s']:13,.0f} {r['lanes sim-s/s']:14,.0f}  "
              f"{'PASS' if best >= GOAL else 'MISS'} (>= {GOAL:,.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
