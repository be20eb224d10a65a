"""Study benchmark: a 1000-run sweep of a 1 s, 4 kHz testbed graph, three ways.

Graphs (all 4 kHz, 1 s per run, one live parameter swept over 1000 values):

* ``small``: a step force into a mass-spring-damper testbed (RK4), one
  recorded signal; metrics: final and RMS position.
* ``euler``: the same with the semi-implicit Euler solver (one derivative
  evaluation per tick instead of four).
* ``rig``: the probe testbed of ``bench/engine.py`` (Chirp reference,
  PIDFeedforward on a 5 um Encoder, LinearMotor, HardeningSpringDevice),
  device position recorded; the sweep varies the outer spring rate.
* ``sweep``: the rig graph file ``graphs/colton2005_sweep.yaml`` (swept-sine
  reference, PID + lead-lag, motor with end stops, hardening device with
  friction, encoder, noisy impedance head, 13 signals recorded); the sweep
  varies ``pid.kp``; its metrics read ``dev.pos``.  Its tick calls
  :mod:`hapflow.kmath` (``tanh`` of the device friction at every evaluation,
  the sweep's and the fade's sin and cos) and draws the head's noise by the
  normal quantile of one uniform draw (:func:`hapflow.rng.normal`): the lanes
  kernel runs its lanes in SIMD registers with every branch of those taken as
  selects in each lane.  ``bench/sweep_bounds.py`` times its kernels with both
  made free.
* ``sweep_head``, ``sweep_all``: the same with metrics that read
  ``head.force`` too (the noisy head stays in the study's graph), or each of
  the 13 recorded signals (the whole graph).

Paths, each a whole ``run_study`` call (design expansion, runs, metrics, the
resume log and the Parquet table; plots off) in a fresh output folder:

* ``one process``: ``workers=0, batch: off`` - one run after another through
  ``Simulation.run`` in this process;
* ``LocalCluster 2``: two single-threaded Dask worker processes
  (``batch: off``); the cluster is started once beforehand and its start-up
  is printed separately;
* ``batched``: ``workers=0, batch: on`` - :mod:`hapflow.batch` in this
  process, its runs spread over numba's thread count of Python threads;
* ``Cluster+batched``: the two workers, each batching its jobs' runs on one
  thread;
* ``Batch.run``: :class:`hapflow.batch.Batch` alone on the 1000 runs
  (filling the runs' arrays, the kernel, one ``RunResult`` per run with its
  signals copied out; no metrics, no log, no table), with the layout
  (``lanes`` or ``rows``) its timing trial picked;
* ``rows kernel``, ``lanes kernel``: the batched kernel of each layout
  alone on 1000 prepared runs: the ceiling of the batched path.

A study simulates only what its metrics read (both metrics here read one
signal; :meth:`hapflow.graph.Graph.reduced`): the ``sweep`` study drops the
impedance head and the velocity estimate, and records one signal of 13.  The
``Batch.run`` and kernel rows time that graph, as the batched study runs it
(its lanes kernel with every value the sweep does not vary as a literal:
``Batch(varied=...)``); ``lanes, whole graph`` times the lanes kernel of the
graph file as written, every block and all its recorded signals, and
``single kernel`` the single-run kernel of the graph file.

For the small graph the batched study is also timed stage by stage (the
table after the main one).  Each figure is the median of ``--repeats`` runs
after a warm-up (compilation excluded); ``best sim s/s`` is the fastest of
them.  ``sim s/CPU s`` divides by the CPU time of this process (all its
threads; not shown for the cluster paths, whose work is in the workers):
on a machine shared with other jobs
the wall-clock figures fall with the load, this one much less - times the
number of idle cores it estimates the throughput of an idle machine.  Also
printed: the single-run kernel alone (``Simulation.advance`` over the run)
per tick.  Goals: >= 20 000 simulated seconds per wall second for the
batched path on the small testbed graph (issue 7), >= 15 000 on the rig
graph file (issue 12).

Usage: ``python bench/study.py [--runs N] [--repeats R] [--graphs small,sweep,sweep_all]``.
Exits 0 whatever the figures (a benchmark, not a test).
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

GOAL = 20000.0   # simulated s per wall s, batched path
SMALL = """\
name: small-testbed
rate: 4000
duration: 1
blocks:
  drive: {type: Step, time: 0.0, initial: 0.0, final: 1.0, unit: N}
  msd:   {type: MassSpringDamper, mass: 0.5, damping: 2.0, stiffness: 400.0}
wires:
  - drive.y -> msd.force
record: [msd.pos]
"""
RIG = """\
name: rig-testbed
rate: 4000
duration: 1
blocks:
  ref:   {type: Chirp, amplitude: 0.020, f_start: 1.0, f_end: 4.0, sweep_time: 1.0, unit: m}
  enc:   {type: Encoder, resolution: 5.0e-6}
  pid:   {type: PIDFeedforward, kp: 32000.0, ki: 200000.0, kd: 240.0, deriv_cutoff: 300.0,
          mass_ff: 0.581, friction_ff: 0.0, limit: 60.0}
  motor: {type: LinearMotor, bandwidth: 29.0, peak_force: 60.0}
  dev:   {type: HardeningSpringDevice, mass: 0.581, damping: 11.5, k_inner: 1500.0,
          k_outer: 6000.0, x_transition: 0.010}
wires:
  - ref.y -> pid.ref_pos
  - ref.dy -> pid.ref_vel
  - ref.ddy -> pid.ref_acc
  - enc.pos -> pid.meas_pos
  - pid.force_cmd -> motor.force_cmd
  - motor.force -> dev.force
  - dev.pos -> enc.true_pos
record: [dev.pos]
"""
SWEEP = (Path(__file__).resolve().parents[1] / "graphs" / "colton2005_sweep.yaml").read_text()
SWEEP_SIGNALS = ("dev.pos", "traj.pos", "traj.vel", "traj.acc", "enc.pos", "vel_est.y",
                 "head.force", "head.accel", "dev.vel", "dev.acc", "dev.device_force",
                 "motor.force", "pid.force_cmd")
"""The signals the rig graph file records (``dev.pos`` first)."""
GRAPHS = {"small": (SMALL, "msd.stiffness", 100.0, 2000.0, ("msd.pos",)),
          "euler": (SMALL.replace("duration: 1\n", "duration: 1\nsolver: euler\n"),
                    "msd.stiffness", 100.0, 2000.0, ("msd.pos",)),
          "rig": (RIG, "dev.k_outer", 3000.0, 9000.0, ("dev.pos",)),
          "sweep": (SWEEP, "pid.kp", 30000.0, 46000.0, ("dev.pos",)),
          "sweep_head": (SWEEP, "pid.kp", 30000.0, 46000.0, ("dev.pos", "head.force")),
          "sweep_all": (SWEEP, "pid.kp", 30000.0, 46000.0, SWEEP_SIGNALS)}
GOALS = {"small": GOAL, "euler": GOAL, "sweep": 15000.0}
"""Batched-path goals in simulated s per wall s (``sweep``: issue 12, the rig graph file)."""


def study_text(batch: str, runs: int, key: str, low: float, high: float,
               signals: tuple[str, ...]) -> str:
    """The study file: the final value of the first signal and the RMS of each."""
    rms = "".join(f"  rms{j or ''}: {{rms: {s}}}\n" for j, s in enumerate(signals))
    return (f"name: bench\ngraph: graph.yaml\nduration: 1.0\nbatch: {batch}\n"
            f"parameters:\n  {key}: {{low: {low}, high: {high}, num: {runs}}}\n"
            f"metrics:\n  final: {{final: {signals[0]}}}\n{rms}")


def load(folder: Path, graph: str, batch: str, runs: int):
    from hapflow.study import load_study
    text, key, low, high, signals = GRAPHS[graph]
    (folder / "graph.yaml").write_text(text)
    path = folder / f"study_{batch}.yaml"
    path.write_text(study_text(batch, runs, key, low, high, signals))
    return load_study(path)


def clock() -> tuple[float, float]:
    """(wall s, CPU s of this process, every thread)."""
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    now = clock()
    return now[0] - start[0], now[1] - start[1]


def timed_study(study, folder: Path, tag: str, **kw) -> tuple[float, float]:
    from hapflow.study import run_study
    out = folder / f"out_{tag}_{time.perf_counter_ns()}"
    start = clock()
    result = run_study(study, out, progress=False, plots=False, **kw)
    wall = since(start)
    if result.failed or result.executed != len(result.table):
        sys.exit(f"{tag}: {result.failed} failed runs: {result.table['error'].dropna().iloc[0]}")
    return wall


def kernel_only(study, runs: int) -> dict[str, tuple[float, float] | str]:
    """Seconds for ``runs`` runs of ``Batch.run`` and of its kernel alone (each layout), and
    per tick of the single-run kernel; the layout ``Batch`` picked."""
    import numpy as np
    from hapflow import Simulation
    from hapflow.batch import ARRAYS, Batch
    from hapflow.study import expand
    from hapflow.study.runner import jobs
    specs = expand(study)
    sim = Simulation(jobs(study, specs[:1], 0, parallel=True)[0].graph())   # as the study runs
    key = study.parameters[0].key
    settings = [{key: s.params[key]} for s in specs]
    batch = Batch(sim, parallel=True, varied=[key])
    batch.run(settings[:8], [0] * 8, 1.0)
    start = clock()
    batch.run(settings, [0] * runs, 1.0)
    out: dict[str, tuple[float, float] | str] = {"Batch.run": since(start),
                                                 "layout": batch.layout}
    ticks = int(sim.graph.rate)
    whole = Simulation(study.graph)
    for label, graph, layout in (("rows kernel", sim, "rows"), ("lanes kernel", sim, "lanes"),
                                 ("lanes, whole graph", whole, "lanes")):
        kernel = Batch(graph, parallel=True, layout=layout, varied=[key])
        rows = {k: np.repeat(graph.arrays[k][None, :], runs, axis=0) for k in ARRAYS}
        start = clock()
        kernel._advance(rows, ticks)
        out[label] = since(start)
    sim = whole
    sim.chunk_ticks = ticks
    sim.log = np.zeros((ticks, sim.layout.sizes["log"]))
    sim.reset()
    start = clock()
    sim.advance(ticks)
    wall, cpu = since(start)
    out["single kernel/tick"] = (wall / ticks, cpu / ticks)
    return out


STAGES = (("expand the design", "hapflow.study.runner", None, "expand"),
          ("cut into jobs", "hapflow.study.runner", None, "jobs"),
          ("fill the runs' arrays", "hapflow.batch", "Filler", "fill"),
          ("kernel", "hapflow.batch", "Batch", "_advance"),
          ("metrics", "hapflow.study.execute", None, "compute_batch"),
          ("append the log", "hapflow.study.store", "Store", "append"),
          ("results table", "hapflow.study.store", "Store", "table"),
          ("write Parquet", "hapflow.study.store", "Store", "write_table"))
"""Stages of a batched study timed by :func:`stage_times` (label, module, class, function)."""


def stage_times(study, folder: Path, repeats: int) -> dict[str, float]:
    """Median wall seconds of each stage of a batched ``run_study`` (functions wrapped with
    a timer for these calls only), and of the whole call."""
    import importlib
    spent: dict[str, float] = {}
    saved = []

    def timer(label, fn):
        def timed(*args, **kw):
            start = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - start
        return timed

    for label, module, cls, name in STAGES:
        owner = importlib.import_module(module)
        owner = getattr(owner, cls) if cls else owner
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, timer(label, getattr(owner, name)))
    samples: dict[str, list[float]] = {}
    try:
        for _ in range(repeats):
            spent.clear()
            spent["whole study"] = timed_study(study, folder, "stages", workers=0)[0]
            for label, value in spent.items():
                samples.setdefault(label, []).append(value)
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    return {label: statistics.median(v) for label, v in samples.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--graphs", default="small,euler,rig,sweep")
    args = ap.parse_args()
    os.environ.setdefault("HAPFLOW_CACHE_DIR", os.path.join(tempfile.gettempdir(), "hapflow-bench"))
    from distributed import LocalCluster
    load0 = os.getloadavg()[0]
    start = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR)
    startup = time.perf_counter() - start
    import numba
    rows = []
    stages: dict[str, float] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for graph in args.graphs.split(","):
                folder = Path(tmp) / graph
                folder.mkdir()
                off = load(folder, graph, "off", args.runs)
                on = load(folder, graph, "on", args.runs)
                remote = dict(scheduler=cluster.scheduler_address)
                paths = {"one process": (off, dict(workers=0)),
                         "LocalCluster 2": (off, remote),
                         "batched": (on, dict(workers=0)),
                         "Cluster+batched": (on, remote)}
                for name, (study, kw) in paths.items():
                    timed_study(study, folder, "warm", **kw)            # compile, warm workers
                    walls = [timed_study(study, folder, name, **kw) for _ in range(args.repeats)]
                    cpu = None if "Cluster" in name else statistics.median(w[1] for w in walls)
                    rows.append((graph, name, [w[0] for w in walls], cpu))
                if graph == "small":
                    stages = stage_times(on, folder, args.repeats)
                kernels = [kernel_only(on, args.runs) for _ in range(args.repeats)]
                for name in kernels[0]:
                    if name != "layout":
                        label = f"Batch.run {kernels[0]['layout']}" if name == "Batch.run" else name
                        rows.append((graph, label, [k[name][0] for k in kernels],
                                     statistics.median(k[name][1] for k in kernels)))
    finally:
        cluster.close()
    print(f"{args.runs} runs x 1 s at 4 kHz; median of {args.repeats}; numba threads "
          f"{numba.config.NUMBA_NUM_THREADS}, {os.cpu_count()} cores, load average "
          f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; LocalCluster "
          f"start-up {startup:.1f} s (not included)")
    print(f"{'graph':6s} {'path':18s} {'wall [s]':>9s} {'runs/s':>9s} {'sim s/wall s':>13s} "
          f"{'per run [ms]':>13s} {'sim s/CPU s':>12s} {'best sim s/s':>13s}  goal")
    for graph, name, walls, cpu in rows:
        wall, best = statistics.median(walls), min(walls)
        if name == "single kernel/tick":
            print(f"{graph:6s} {'single kernel':18s} {'':>9s} {'':>9s} "
                  f"{1.0 / (wall * 4000.0):13,.0f} {wall * 4000.0 * 1e3:13.3f} "
                  f"{1.0 / (cpu * 4000.0):12,.0f} {1.0 / (best * 4000.0):13,.0f}  "
                  f"({wall * 1e9:.0f} ns/tick)")
            continue
        rate = args.runs / wall
        goal, target = "", GOALS.get(graph)
        if target and (name in ("batched", "lanes kernel") or name.startswith("Batch.run")):
            goal = f"{'PASS' if rate >= target else 'MISS'} (>= {target:,.0f} sim s/s)"
        per_cpu = f"{args.runs / cpu:12,.0f}" if cpu else f"{'-':>12s}"
        print(f"{graph:6s} {name:18s} {wall:9.2f} {rate:9.0f} {rate:13,.0f} "
              f"{1e3 / rate:13.3f} {per_cpu} {args.runs / best:13,.0f}  {goal}")
    if stages:
        whole = stages.pop("whole study")
        print(f"\nsmall, batched study by stage (median of {args.repeats} runs, wall ms; "
              "the rest: records, progress, folder set-up)")
        for label, _, _, _ in STAGES:
            print(f"  {label:22s} {1e3 * stages.get(label, 0.0):7.1f}")
        print(f"  {'rest':22s} {1e3 * (whole - sum(stages.values())):7.1f}")
        print(f"  {'whole study':22s} {1e3 * whole:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
