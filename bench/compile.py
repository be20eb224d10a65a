"""Compile-cost benchmark: how build and run cost grow with the graph.

Two graph families of ``bench/families.py`` at N = 10, 30, 100, 300, 1000
blocks: ``replicated`` (N/10 chained copies of one 10-block, three-rate loop)
and ``distinct`` (a seeded random mix of every library block type without a
Python side, feedback through delays, three rates).  For each N, in fresh
processes:

* ``check``: ``Graph.check`` wall time (median of 3, in the compile child);
* ``cold``: CPU time of ``Simulation(graph)`` with empty ``HAPFLOW_CACHE_DIR``
  and ``NUMBA_CACHE_DIR`` (code generation and every numba compilation, in
  the process and in the children that compile units), its wall time, and
  the peak RSS of the process or of any child;
* ``warm``: wall time from starting a fresh process (interpreter start
  included) to the end of its first tick: it imports hapflow, builds the
  graph, loads the kernel from the cache and runs one tick (the process's
  exit, 0.15-0.2 s of teardown after a 1000-block graph, is not counted);
  ``numba s`` is the part of it numba spends setting itself up on its first
  compile or cache load (its registries, and scipy.linalg imported for its
  BLAS check), the same for every graph; ``build s`` building the graph in
  Python (the blocks, their wires and their kernels, frozen Kalman steps
  loaded); ``sim s`` ``Simulation(graph)``: checking, scheduling and laying
  out the graph, reading its generated source, defining its modules and
  loading the machine code of ``init_all`` and ``run`` (their first calls);
  the rest is the interpreter's start, ``import hapflow`` and the tick;
  ``file s`` (not part of ``warm s``) reading the same graph from its YAML
  file (:func:`hapflow.load`), as ``hapflow run`` does in place of ``build s``;
  median of 3 after one unmeasured start, with Python's bytecode cache on
  (``PYTHONDONTWRITEBYTECODE`` removed: compiling hapflow's 60 modules
  from source on every start adds 0.1-0.2 s that an installed package
  does not pay);
* ``us/tick`` and ``ns/block-tick``: ``Simulation.advance`` over 4000 ticks,
  median of 5 after a warm-up;
* the same cold and speed figures for the fused kernel (one straight-line
  ``run``) where N <= ``--fused-max`` (it compiles in time growing as
  N^1.4-1.8: the 300-block replicated graph took minutes and gigabytes).

``exp`` is the local exponent of cold CPU time between consecutive N
(1.0 = linear).  Absolute times drift with the load of this shared machine.

Usage: ``python bench/compile.py [--sizes 10,30,100] [--families replicated,distinct]
[--fused-max 100]``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TICKS = 4000


def _graph(family: str, n: int):
    sys.path.insert(0, HERE)
    import families
    return families.replicated(n) if family == "replicated" else families.distinct(n, seed=0)


def child_cold(family: str, n: int, mode: str) -> dict:
    """Build, check, compile; time the kernel (runs in a fresh process)."""
    import numpy as np

    import hapflow as hf
    graph = _graph(family, n)
    checks = []
    for _ in range(3):
        start = time.perf_counter()
        graph.check()
        checks.append(time.perf_counter() - start)
    cpu = time.process_time()
    wall = time.perf_counter()
    sim = hf.Simulation(graph, mode=mode, chunk=TICKS / graph.rate)
    wall = time.perf_counter() - wall
    children = resource.getrusage(resource.RUSAGE_CHILDREN)   # units compiled in children
    cpu = time.process_time() - cpu + children.ru_utime + children.ru_stime
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, children.ru_maxrss) * 1024
    try:
        sim.advance(TICKS)
        runs = []
        for _ in range(5):
            sim.reset()
            start = time.perf_counter()
            sim.advance(TICKS)
            runs.append(time.perf_counter() - start)
        tick = statistics.median(runs) / TICKS
    except hf.SimulationError as exc:     # a random graph that diverges: no tick time, but
        print(exc, file=sys.stderr)       # its compile figures stand
        tick = float("nan")
    # states, work entries and signals; not parameters, which may be inf by design
    # (HardeningSpringDevice's stiffening knee x_h = inf: off)
    assert not math.isfinite(tick) or all(np.isfinite(sim.arrays[a]).all() for a in ("x", "d", "sf"))
    return dict(check=statistics.median(checks), cold=cpu, cold_wall=wall, rss=rss, tick=tick,
                blocks=len(graph.nodes), mode=sim.program.mode, units=len(sim.program.units))


def child_warm(family: str, n: int, mode: str) -> dict:
    """Build the graph, load its kernel from the cache, run one tick; time numba's setup;
    then time reading the graph from its file."""
    import hapflow as hf
    from numba.core.registry import cpu_target
    start = time.perf_counter()
    # what numba does on its first compile or cache load, whatever the graph: it loads its
    # typing and lowering registries (importing scipy.linalg to check for a BLAS); here
    # it is done first, to be timed apart
    cpu_target.target_context.refresh()
    setup = time.perf_counter() - start
    start = time.perf_counter()
    graph = _graph(family, n)
    built = time.perf_counter()
    sim = hf.Simulation(graph, mode=mode)
    loaded = time.perf_counter()
    sim.advance(1)
    first_tick = time.time()
    with tempfile.TemporaryDirectory() as folder:      # the same graph from its file, after
        path = os.path.join(folder, "graph.yaml")
        hf.save(graph, path)
        opened = time.perf_counter()
        hf.load(path)
        from_file = time.perf_counter() - opened
    return {"first_tick": first_tick, "numba_setup": setup, "build": built - start,
            "simulation": loaded - built, "file": from_file}


def _spawn(kind: str, family: str, n: int, mode: str, cache: str, timeout: float) -> dict | None:
    env = dict(os.environ, HAPFLOW_CACHE_DIR=cache, NUMBA_CACHE_DIR=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)     # an installed package runs from bytecode
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, family, str(n), mode]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode:
        sys.stderr.write(out.stderr[-3000:])
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(family: str, n: int, mode: str, timeout: float, warm: bool) -> dict | None:
    """Cold compile and speed in one fresh process, then warm starts (median of 3)."""
    with tempfile.TemporaryDirectory(prefix="hapflow-bench-compile-") as cache:
        row = _spawn("cold", family, n, mode, cache, timeout)
        if row is None or not warm:
            return row
        _spawn("warm", family, n, mode, cache, timeout)    # writes any missing bytecode
        parts = {"warm": [], "numba_setup": [], "build": [], "simulation": [], "file": []}
        for _ in range(3):
            start = time.time()
            warm = _spawn("warm", family, n, mode, cache, timeout) or {}
            parts["warm"].append(warm["first_tick"] - start if warm else float("nan"))
            for key in ("numba_setup", "build", "simulation", "file"):
                parts[key].append(warm.get(key, float("nan")))
        row.update({key: statistics.median(values) for key, values in parts.items()})
        return row


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,30,100,300,1000")
    parser.add_argument("--families", default="replicated,distinct")
    parser.add_argument("--fused-max", type=int, default=100,
                        help="largest N to compile fused as well (default 100)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one cold compile may take (default 600)")
    parser.add_argument("--mode", default="auto", choices=("auto", "units", "fused"),
                        help="kernel mode of the main columns (default: the automatic choice)")
    parser.add_argument("--child", nargs=4, metavar=("KIND", "FAMILY", "N", "MODE"))
    args = parser.parse_args()
    if args.child:
        kind, family, n, mode = args.child
        fn = child_cold if kind == "cold" else child_warm
        print(json.dumps(fn(family, int(n), mode)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    head = (f"{'family':<11}{'N':>5}{'mode':>7}{'units':>6}{'check ms':>9}{'cold s':>8}{'exp':>6}"
            f"{'wall s':>7}"
            f"{'RSS MiB':>8}{'warm s':>7}{'numba s':>8}{'build s':>8}{'sim s':>6}{'file s':>7}"
            f"{'us/tick':>9}{'ns/blk-tick':>12}"
            f"{'fused cold s':>13}{'fused RSS':>10}{'fused ns':>9}")
    print(head)
    print("-" * len(head))
    for family in args.families.split(","):
        previous = None
        for n in sizes:
            row = measure(family, n, args.mode, args.timeout, warm=True)
            fused = measure(family, n, "fused", args.timeout, warm=False) \
                if n <= args.fused_max and (row is None or row["mode"] != "fused") else None
            if row is None:
                print(f"{family:<11}{n:>5}  failed or over {args.timeout:g} s")
                continue
            exp = math.log(row["cold"] / previous[1]) / math.log(n / previous[0]) \
                if previous else None
            previous = (n, row["cold"])
            ns = row["tick"] / row["blocks"] * 1e9
            print(f"{family:<11}{n:>5}{row['mode']:>7}{row['units']:>6}"
                  f"{row['check'] * 1e3:>9.1f}{row['cold']:>8.1f}{_fmt(exp, '.2f'):>6}"
                  f"{row['cold_wall']:>7.1f}"
                  f"{row['rss'] / 2**20:>8.0f}{row['warm']:>7.2f}{row['numba_setup']:>8.2f}"
                  f"{row['build']:>8.2f}{row['simulation']:>6.2f}{row['file']:>7.2f}"
                  f"{row['tick'] * 1e6:>9.2f}"
                  f"{ns:>12.2f}"
                  f"{_fmt(fused and fused['cold'], '.1f'):>13}"
                  f"{_fmt(fused and fused['rss'] / 2**20, '.0f'):>10}"
                  f"{_fmt(fused and fused['tick'] / fused['blocks'] * 1e9, '.2f'):>9}",
                  flush=True)


if __name__ == "__main__":
    main()
