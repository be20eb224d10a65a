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

- **dashboard**: the same run with the live dashboard (:mod:`hapflow.hil.dashboard`)
  served beside it and its page open in headless Chromium (through selenium; the
  page is loaded and its document connected before the first tick, so it streams
  for the whole run; once started, the browser runs at SCHED_IDLE off the pinned
  setup's CPU, as on a HIL host, and shows a blank page while the other loops run); without
  chromium and chromedriver the column is skipped.

and prints p50/p99/p99.9/max of the absolute period error (time between
successive wake-ups minus the period), p99.9 of the lateness (wake-up minus the
deadline or sample clock edge waited for), the overruns (ticks that missed a
sample clock edge; for the bare loop, periods over 1.5x), periods over 1.5x,
and the CPU use (process CPU time / wall time, % of one CPU).  Each cell is
the median over ``--repeat`` runs, the loops interleaved.  The bare loop is the
reference for the ratios because it is measured in the same process, between
the others, under the same load.  Settings that are not permitted are
reported.  The machine load (1-minute load average) is printed before and
after each cell: on a shared host the tails are set by other processes.

    python bench/hil_timing.py                 # 60 s per run (36 runs: ~37 min)
    python bench/hil_timing.py --seconds 5 --repeat 1     # quick

Under each cell: the period error's p99.9 of the runner, and of the runner with the
dashboard, over the bare loop's, and the lateness p99.9 with the dashboard over without.
"""
from __future__ import annotations

import argparse
import gc
import os
import shutil
import socket
import time
from pathlib import Path

import numpy as np

from hapflow.hil import dashboard, realtime
from hapflow.hil.clock import Pacer
from hapflow.hil.runner import HilRunner, RealTime
from hapflow.hil.safety import Policy, Watchdog
from hapflow.hil.simdaq import SimDaq
from hapflow.yamlio import load

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = {1000: ROOT / "graphs" / "hil_testbed.yaml", 4000: ROOT / "graphs" / "colton2005_sweep.yaml"}
LOOP_CPU = 1
"""The CPU the pinned setup runs the loop on; the browser is kept off it."""
SETUPS = {"normal": RealTime(), "fifo+pin+mlock": RealTime(fifo=80, cpu=LOOP_CPU, lock=True)}
NO_WATCHDOG = Policy(max_overruns=10 ** 9, max_lateness=30.0, hardware_watchdog=34.0)
"""Software watchdog off (a stall is measured, not stopped); the card's hardware watchdog
armed at its longest timeout, so the loop's pet check runs every tick as in a real run."""


def bare(rate: float, seconds: float, rt: RealTime) -> tuple[dict, str]:
    """The bare paced loop; returns its row and the settings summary."""
    pacer = Pacer(rate)
    n = int(seconds * rate)
    wake = np.zeros(n, dtype=np.int64)
    deadline = np.zeros(n, dtype=np.int64)
    settings = realtime.apply(rt.fifo, rt.cpu, rt.lock)
    gc.disable()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        pacer.start()
        for k in range(n):
            deadline[k], wake[k], _ = pacer.wait()
    finally:
        wall = time.perf_counter() - wall0
        cpu = 100 * (time.process_time() - cpu0) / wall
        gc.enable()
        settings.restore()
    period = np.diff(wake) - pacer.period
    return (row(period, wake - deadline, int((period > pacer.period // 2).sum()), cpu,
                pacer.period), settings.summary())


def hapflow(rate: float, seconds: float, rt: RealTime, browser=None) -> tuple[dict, str]:
    """The runner on the graph of ``rate`` (with the dashboard open in ``browser`` if one
    is given); returns its row and the settings summary."""
    g = load(GRAPHS[rate])
    runner = HilRunner(g, SimDaq(g, seed=1), NO_WATCHDOG, rt)
    watch = None if browser is None else open_dashboard(runner, browser)
    result = runner.run(seconds, watch=watch)
    t = result.timing
    period_ns = int(round(1e9 / rate))
    own = ~t["missed"]                                          # the loop's own ticks
    period = np.diff(t["wake"][own]) - period_ns
    out = row(period, t["lateness"][own], result.overruns, result.cpu_percent, period_ns)
    out["late trips"], out["run trips"] = trips(t["lateness"][own], t["overrun"][own], period_ns)
    return out, result.settings


def open_dashboard(runner: HilRunner, browser):
    """A ``watch`` that serves the run's dashboard and opens it in ``browser`` before the
    first tick (its document connected to the server)."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]

    def watch(view):
        stop = dashboard.start(runner.live, port)(view)
        browser.get(f"http://localhost:{port}/")
        end = time.monotonic() + 60
        while not browser.execute_script("return window.Bokeh !== undefined && "
                                         "Bokeh.documents.length > 0"):
            if time.monotonic() > end:
                raise RuntimeError("the dashboard's page did not connect in 60 s")
            time.sleep(0.05)

        def unwatch():
            stop()
            browser.get("about:blank")      # idle while the other loops are measured
        return unwatch
    return watch


def headless_chromium():
    """Debian's chromium through selenium, or None (with the reason printed); once
    started it runs as a browser on a HIL host should, at SCHED_IDLE and off the pinned
    loop's CPU (:func:`yield_to_the_loop`)."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    try:
        from selenium import webdriver
    except ImportError:
        webdriver = None
    if chromium is None or driver is None or webdriver is None:
        print("dashboard column skipped: needs chromium, chromium-driver and selenium")
        return None
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,1400",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    service = webdriver.ChromeService(executable_path=driver)
    browser = webdriver.Chrome(options=options, service=service)
    yield_to_the_loop(service.process.pid)
    return browser


def yield_to_the_loop(pid: int) -> None:
    """Every thread of ``pid`` and of its descendants to SCHED_IDLE, off :data:`LOOP_CPU`
    (the processes and threads they start later inherit it).  Done once the browser has
    started: started at SCHED_IDLE, Chromium starved under load (chromedriver: "chrome
    not reachable", "DevToolsActivePort file doesn't exist")."""
    parents = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    cpus = os.sched_getaffinity(0) - {LOOP_CPU} or os.sched_getaffinity(0)
    todo = [pid]
    while todo:
        proc = todo.pop()
        todo += parents.get(proc, [])
        try:
            threads = [int(t) for t in os.listdir(f"/proc/{proc}/task")]
        except OSError:
            continue
        for tid in threads:
            try:
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
                os.sched_setaffinity(tid, cpus)
            except OSError:
                pass                    # ended meanwhile


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


def row(period_error: np.ndarray, lateness: np.ndarray, overruns: int, cpu: float,
        period_ns: int) -> dict:
    e = np.abs(period_error) / 1e3
    return {"p50": np.percentile(e, 50), "p99": np.percentile(e, 99),
            "p99.9": np.percentile(e, 99.9), "max": e.max(),
            "late p99.9": np.percentile(lateness, 99.9) / 1e3, "overruns": overruns,
            ">1.5x": int((period_error > period_ns // 2).sum()), "cpu": cpu}


def median(rows: list[dict]) -> dict:
    return {k: float(np.median([r[k] for r in rows])) for k in rows[0]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="seconds per run [60]")
    p.add_argument("--repeat", type=int, default=3, help="runs per cell; the median is shown [3]")
    p.add_argument("--rates", default="1000,4000", help="comma-separated rates [1000,4000]")
    args = p.parse_args()
    os.environ.setdefault("HAPFLOW_CACHE_DIR", "/tmp/hfcache")
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.seconds:g} s per run, median of {args.repeat}")
    for rate in (int(r) for r in args.rates.split(",")):
        hapflow(rate, 0.2, RealTime())                 # compile / load the kernels first
    header = (f"{'rate':>6s} {'setup':16s} {'loop':9s} {'p50':>8s} {'p99':>8s} {'p99.9':>8s} "
              f"{'max':>9s} {'late p99.9':>10s} {'overruns':>9s} {'>1.5x':>6s} {'CPU %':>6s} "
              f"{'trips':>11s}")
    print("\n|period error| in us\n" + header + "\n" + "-" * len(header))
    notes = set()
    browser = headless_chromium()
    loops = {"bare": bare, "hapflow": hapflow}
    if browser is not None:
        loops["dashboard"] = lambda rate, seconds, rt: hapflow(rate, seconds, rt, browser)
    try:
        for rate in (int(r) for r in args.rates.split(",")):
            for name, rt in SETUPS.items():
                cell(rate, name, rt, loops, args, notes)
    finally:
        if browser is not None:
            browser.quit()
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    for note in sorted(notes):
        print(note)


def cell(rate: int, name: str, rt: RealTime, loops: dict, args, notes: set) -> None:
    """Run and print one rate x setup cell, every loop ``--repeat`` times, interleaved (the
    order rotated each time, so that no loop always follows the same one)."""
    cells = {loop: [] for loop in loops}
    order, load = list(loops), [os.getloadavg()[0]]
    for k in range(args.repeat):
        for loop in order[k % len(order):] + order[:k % len(order)]:
            r, settings = loops[loop](rate, args.seconds, rt)
            cells[loop].append(r)
            notes.add(f"{name}: {settings}")
    load.append(os.getloadavg()[0])
    m = {loop: median(rows) for loop, rows in cells.items()}
    for loop, c in m.items():
        print(f"{rate:6d} {name:16s} {loop:9s} {c['p50']:8.1f} {c['p99']:8.1f} "
              f"{c['p99.9']:8.1f} {c['max']:9.1f} {c['late p99.9']:10.1f} {c['overruns']:9.0f} "
              f"{c['>1.5x']:6.0f} {c['cpu']:6.0f}"
              + (f" {c['late trips']:4.0f} late, {c['run trips']:.0f} run" if "late trips" in c
                 else ""))
    for loop in [loop for loop in cells if loop != "bare"]:
        print(f"{'':6s} {'':16s} {loop}: p99.9 / bare p99.9 = "
              f"{m[loop]['p99.9'] / max(m['bare']['p99.9'], 1e-9):.2f}")
    if "dashboard" in m:
        print(f"{'':6s} {'':16s} late p99.9 with / without the dashboard = "
              f"{m['dashboard']['late p99.9'] / max(m['hapflow']['late p99.9'], 1e-9):.2f}")
    print(f"{'':6s} {'':16s} load average {load[0]:.2f} -> {load[1]:.2f}")


if __name__ == "__main__":
    main()
