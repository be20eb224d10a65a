"""Real-time timing of the HIL runner against the simulated rig, and a bare paced loop.

For each rate (1 kHz: graphs/hil_testbed.yaml; 4 kHz: graphs/colton2005_sweep.yaml)
and each scheduling setup (normal scheduling with 1 ns timer slack; SCHED_FIFO 80,
pinned to one CPU, mlockall), it runs, in the same process one after the other:

- **bare**: the reference paced loop that does nothing else -- an absolute-time
  ``clock_nanosleep`` to 30 us before each deadline, then a spin to it
  (:class:`hapflow.hil.clock.Pacer`);
- **hapflow**: ``HilRunner`` with the ``sim`` backend (the simulated rig is
  stepped inside ``wait``, as a card's driver call would be), no recording file,
  software watchdog off (so a stall is measured, not stopped), hardware watchdog
  armed (34 s: the pet check runs every tick); the ticks it ran are then
  replayed through the default watchdog policy (:class:`hapflow.hil.safety.Watchdog`,
  restarted after each trip) to count the **trips** it would have made, by kind
  (``late``: one lateness over the bound; ``run``: consecutive overruns).

and prints p50/p99/p99.9/max of the absolute period error (time between
successive wake-ups minus the period), the overruns (ticks that missed a
sample clock edge; for the bare loop, periods over 1.5x), periods over 1.5x,
and the CPU use (process CPU time / wall time, % of one CPU).  Each cell is
the median over ``--repeat`` runs.  Settings that are not permitted are
reported.  The machine load (1-minute load average) is printed before and
after: on a shared host the tails are set by other processes.

    python bench/hil_timing.py                 # 60 s per run (8 runs: ~8 min)
    python bench/hil_timing.py --seconds 5     # quick
"""
from __future__ import annotations

import argparse
import gc
import os
import time
from pathlib import Path

import numpy as np

from hapflow.hil import realtime
from hapflow.hil.clock import Pacer
from hapflow.hil.runner import HilRunner, RealTime
from hapflow.hil.safety import Policy, Watchdog
from hapflow.hil.simdaq import SimDaq
from hapflow.yamlio import load

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = {1000: ROOT / "graphs" / "hil_testbed.yaml", 4000: ROOT / "graphs" / "colton2005_sweep.yaml"}
SETUPS = {"normal": RealTime(), "fifo+pin+mlock": RealTime(fifo=80, cpu=1, lock=True)}
NO_WATCHDOG = Policy(max_overruns=10 ** 9, max_lateness=30.0, hardware_watchdog=34.0)
"""Software watchdog off (a stall is measured, not stopped); the card's hardware watchdog
armed at its longest timeout, so the loop's pet check runs every tick as in a real run."""


def bare(rate: float, seconds: float, rt: RealTime) -> tuple[dict, str]:
    """The bare paced loop; returns its row and the settings summary."""
    pacer = Pacer(rate)
    n = int(seconds * rate)
    wake = np.zeros(n, dtype=np.int64)
    settings = realtime.apply(rt.fifo, rt.cpu, rt.lock)
    gc.disable()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        pacer.start()
        for k in range(n):
            wake[k] = pacer.wait()[1]
    finally:
        wall = time.perf_counter() - wall0
        cpu = 100 * (time.process_time() - cpu0) / wall
        gc.enable()
        settings.restore()
    period = np.diff(wake) - pacer.period
    return row(period, int((period > pacer.period // 2).sum()), cpu, pacer.period), settings.summary()


def hapflow(rate: float, seconds: float, rt: RealTime) -> tuple[dict, str]:
    """The runner on the graph of ``rate``; returns its row and the settings summary."""
    g = load(GRAPHS[rate])
    result = HilRunner(g, SimDaq(g, seed=1), NO_WATCHDOG, rt).run(seconds)
    t = result.timing
    period_ns = int(round(1e9 / rate))
    own = ~t["missed"]                                          # the loop's own ticks
    period = np.diff(t["wake"][own]) - period_ns
    out = row(period, result.overruns, result.cpu_percent, period_ns)
    out["late trips"], out["run trips"] = trips(t["lateness"][own], t["overrun"][own], period_ns)
    return out, result.settings


def trips(lateness: np.ndarray, overrun: np.ndarray, period_ns: int) -> tuple[int, int]:
    """Trips of the default watchdog over these ticks (restarted after each): (lateness
    over the bound, consecutive overruns)."""
    late = run = 0
    dog = Watchdog(Policy(), period_ns)
    for ns, over in zip(lateness.tolist(), overrun.tolist()):
        why = dog.tick(ns, over)
        if why:
            late, run = late + ("late" in why), run + ("late" not in why)
            dog = Watchdog(Policy(), period_ns)
    return late, run


def row(period_error: np.ndarray, overruns: int, cpu: float, period_ns: int) -> dict:
    e = np.abs(period_error) / 1e3
    return {"p50": np.percentile(e, 50), "p99": np.percentile(e, 99),
            "p99.9": np.percentile(e, 99.9), "max": e.max(), "overruns": overruns,
            ">1.5x": int((period_error > period_ns // 2).sum()), "cpu": cpu}


def median(rows: list[dict]) -> dict:
    return {k: float(np.median([r[k] for r in rows])) for k in rows[0]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="seconds per run [60]")
    p.add_argument("--repeat", type=int, default=1, help="runs per cell; the median is shown [1]")
    p.add_argument("--rates", default="1000,4000", help="comma-separated rates [1000,4000]")
    args = p.parse_args()
    os.environ.setdefault("HAPFLOW_CACHE_DIR", "/tmp/hfcache")
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.seconds:g} s per run, median of {args.repeat}")
    for rate in (int(r) for r in args.rates.split(",")):
        hapflow(rate, 0.2, RealTime())                 # compile / load the kernels first
    header = (f"{'rate':>6s} {'setup':16s} {'loop':8s} {'p50':>8s} {'p99':>8s} {'p99.9':>8s} "
              f"{'max':>9s} {'overruns':>9s} {'>1.5x':>6s} {'CPU %':>6s} {'trips':>11s}")
    print("\n|period error| in us\n" + header + "\n" + "-" * len(header))
    notes = set()
    for rate in (int(r) for r in args.rates.split(",")):
        for name, rt in SETUPS.items():
            cells = {"bare": [], "hapflow": []}
            for _ in range(args.repeat):
                for loop, fn in (("bare", bare), ("hapflow", hapflow)):
                    r, settings = fn(rate, args.seconds, rt)
                    cells[loop].append(r)
                    notes.add(f"{name}: {settings}")
            for loop, rows in cells.items():
                m = median(rows)
                print(f"{rate:6d} {name:16s} {loop:8s} {m['p50']:8.1f} {m['p99']:8.1f} "
                      f"{m['p99.9']:8.1f} {m['max']:9.1f} {m['overruns']:9.0f} {m['>1.5x']:6.0f} "
                      f"{m['cpu']:6.0f}" + (f" {m['late trips']:4.0f} late, {m['run trips']:.0f} run"
                                             if "late trips" in m else ""))
            ratio = median(cells["hapflow"])["p99.9"] / max(median(cells["bare"])["p99.9"], 1e-9)
            print(f"{'':6s} {'':16s} hapflow p99.9 / bare p99.9 = {ratio:.2f}")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    for note in sorted(notes):
        print(note)


if __name__ == "__main__":
    main()
