"""Engine benchmark: the rig model run by hapflow's generated kernel vs a hand-written loop.

The model (4 kHz base rate, 10 s simulated): a linear Chirp reference
(20 mm, 1 -> 4 Hz over 10 s) drives a PIDFeedforward controller (filtered
derivative on the measurement, inertia feed-forward 0.581 kg) that reads the
Encoder-quantised (5 um) device position and commands a LinearMotor (29 Hz
force lag, 60 N) pushing a HardeningSpringDevice (0.581 kg, 11.5 N s/m,
1500/6000 N/m at +-10 mm, 0.3 N tanh friction).

What is measured:

* hapflow: ``Simulation.advance`` over the whole run in one chunk (only the
  device position is recorded), median of several runs after a warm-up run,
  each run on a fresh ``Simulation`` (state from tick 0; the compiled kernel
  is reused).
* end to end: ``Simulation.run`` of the same 10 s in 1 s chunks, recorded in
  memory and to an HDF5 file, over the hand-written loop's time (per-run costs
  included: the file's creation and closing, the result's arrays).
* per-chunk overhead: what ``Simulation.run`` costs per 1 s chunk beyond the
  kernel (record splitting, progress, the hand-off to the HDF5 writer thread),
  as a share of the kernel's time per chunk, free of the per-run costs: the
  slope between a 60 s and a 10 s run, ``(t_run(60 s) - t_run(10 s)) / 50``,
  minus the kernel's time per chunk (``advance`` over 60 s in one call, / 60),
  over the latter.  Each run's figure comes from measurements taken next to
  each other; the table shows the median.  Also the 60 s run to a file over
  the kernel alone (per-run costs spread over 60 chunks).
* hand-written: one ``@njit`` loop over scalar locals with the same model and
  the same tick semantics as hapflow's generated code (outputs at ``(t, x)``,
  record, PID update, then one RK4 step over all continuous states
  re-evaluating only the motor force at each stage, the PID command held over
  the step); its runs are interleaved with hapflow's so both see the same
  machine load.  Both position trajectories must agree within 1e-6 m,
  otherwise the script exits with status 1.
* cold compile: ``Simulation(graph)`` construction in a fresh process with
  empty ``HAPFLOW_CACHE_DIR`` and ``NUMBA_CACHE_DIR`` (code generation and
  numba compilation of the generated kernel and every block kernel).
* warm start: wall time from starting a fresh process (``--child warm``) to
  the end of its first tick, as ``bench/compile.py`` measures it: the process
  imports hapflow, builds the graph, constructs the Simulation (kernels from
  the populated cache) and runs one tick; median of five after one unmeasured
  start, with Python's bytecode cache on (an installed package runs from
  bytecode).  The interpreter's teardown after that tick (numba's and LLVM's
  modules) is printed beside it: a user waits for it at the end of a
  command, not before the simulation starts.

The table prints each figure next to a goal with PASS/MISS; the script exits
0 whatever the figures (it is a benchmark, not a test).

Usage: ``python bench/engine.py [--runs N]``.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

from coldcache import empty_caches

RATE = 4000.0
DURATION = 10.0
LONG = 60.0               # s, the long run of the per-chunk overhead (1 s chunks)
CHIRP = dict(amplitude=0.020, f_start=1.0, f_end=4.0, sweep_time=10.0)
RESOLUTION = 5e-6
PID = dict(kp=32000.0, ki=200000.0, kd=240.0, deriv_cutoff=300.0,
           mass_ff=0.581, friction_ff=0.0, friction_smooth_vel=1e-3, limit=60.0)
MOTOR = dict(bandwidth=29.0, peak_force=60.0)
DEVICE = dict(mass=0.581, damping=11.5, k_inner=1500.0, k_outer=6000.0, x_transition=0.010,
              friction=0.3, friction_vel=1e-3, x0=0.0, v0=0.0)
AGREEMENT = 1e-6          # m
GOALS = {"ratio": 1.3, "e2e": 1.35, "chunk": 0.05, "rtf": 2000.0, "warm": 1.0, "cold": 15.0}


def build_graph():
    """The rig graph through the Python API (records the device position only)."""
    import hapflow as hf
    from hapflow.blocks import Chirp, Encoder, HardeningSpringDevice, LinearMotor, PIDFeedforward

    g = hf.Graph(name="bench_rig", rate=RATE, duration=DURATION)
    g.add("ref", Chirp(unit="m", **CHIRP))
    g.add("enc", Encoder(resolution=RESOLUTION))
    g.add("pid", PIDFeedforward(**PID))
    g.add("motor", LinearMotor(**MOTOR))
    g.add("dev", HardeningSpringDevice(**DEVICE))
    for w in ("ref.y -> pid.ref_pos", "ref.dy -> pid.ref_vel", "ref.ddy -> pid.ref_acc",
              "enc.pos -> pid.meas_pos", "pid.force_cmd -> motor.force_cmd",
              "motor.force -> dev.force", "dev.pos -> enc.true_pos"):
        g.wire(w)
    g.record("dev.pos")
    return g


def make_handwritten():
    """The same model as one @njit loop over scalar locals; returns (fn, params)."""
    import numpy as np
    from numba import njit

    @njit(inline="always")
    def device_force(x, v, b, kin, kout, xt, fc, fv):
        ax = abs(x)
        if ax <= xt:
            spring = kin * x
        else:
            spring = math.copysign(kin * xt + kout * (ax - xt), x)
        return spring + b * v + fc * math.tanh(v / fv)

    @njit
    def run(n, rate, th, q, log):
        a, f0, f1, tsw, res = q[0], q[1], q[2], q[3], q[4]
        kp, ki, kd, ts, fa, fg, mff, fff, vs, lim = q[5:15]
        wm, pk = q[15], q[16]
        mass, b, kin, kout, xt, fc, fv = q[17:24]
        xm, xp, xv = 0.0, q[24], q[25]            # motor force, device position, velocity
        integ, mprev, vfp = 0.0, 0.0, 0.0         # PID discrete state
        primed = False
        for i in range(n):
            t = i / rate
            # outputs at (t, x): chirp, encoder, PID (from its state), motor, device
            tau = min(t, tsw)
            k = (f1 - f0) / tsw
            phase = 2.0 * math.pi * (f0 * tau + 0.5 * k * tau * tau)
            f = f0 + k * tau
            df = k
            if t > tsw:
                phase += 2.0 * math.pi * f1 * (t - tsw)
                df = 0.0
            w = 2.0 * math.pi * f
            s = math.sin(phase)
            c = math.cos(phase)
            r = a * s
            rv = a * w * c
            ra = -a * w * w * s + a * 2.0 * math.pi * df * c
            meas = math.floor(xp / res) * res
            e = r - meas
            vf = fa * vfp + fg * (meas - mprev) if primed else 0.0
            uu = kp * e + ki * integ + kd * (rv - vf) + mff * ra + fff * math.tanh(rv / vs)
            u = min(max(uu, -lim), lim)
            log[i] = xp
            # PID update
            if not ((uu > lim and e > 0.0) or (uu < -lim and e < 0.0)):
                integ += ts * e
            mprev = meas
            vfp = vf
            primed = True
            # RK4 over [xm, xp, xv]; the command u is held, the motor force is the chain
            us = min(max(u, -pk), pk)
            k1m = wm * (us - xm)
            k1p = xv
            k1v = (xm - device_force(xp, xv, b, kin, kout, xt, fc, fv)) / mass
            m2, p2, v2 = xm + (0.5 * th) * k1m, xp + (0.5 * th) * k1p, xv + (0.5 * th) * k1v
            k2m = wm * (us - m2)
            k2p = v2
            k2v = (m2 - device_force(p2, v2, b, kin, kout, xt, fc, fv)) / mass
            m3, p3, v3 = xm + (0.5 * th) * k2m, xp + (0.5 * th) * k2p, xv + (0.5 * th) * k2v
            k3m = wm * (us - m3)
            k3p = v3
            k3v = (m3 - device_force(p3, v3, b, kin, kout, xt, fc, fv)) / mass
            m4, p4, v4 = xm + (1.0 * th) * k3m, xp + (1.0 * th) * k3p, xv + (1.0 * th) * k3v
            k4m = wm * (us - m4)
            k4p = v4
            k4v = (m4 - device_force(p4, v4, b, kin, kout, xt, fc, fv)) / mass
            xm = xm + (th / 6.0) * (k1m + 2.0 * k2m + 2.0 * k3m + k4m)
            xp = xp + (th / 6.0) * (k1p + 2.0 * k2p + 2.0 * k3p + k4p)
            xv = xv + (th / 6.0) * (k1v + 2.0 * k2v + 2.0 * k3v + k4v)
        return 0

    ts = 1.0 / RATE
    fa = math.exp(-2.0 * math.pi * PID["deriv_cutoff"] * ts)
    q = np.array([CHIRP["amplitude"], CHIRP["f_start"], CHIRP["f_end"], CHIRP["sweep_time"],
                  RESOLUTION,
                  PID["kp"], PID["ki"], PID["kd"], ts, fa, (1.0 - fa) / ts, PID["mass_ff"],
                  PID["friction_ff"], PID["friction_smooth_vel"], PID["limit"],
                  2.0 * math.pi * MOTOR["bandwidth"], MOTOR["peak_force"],
                  DEVICE["mass"], DEVICE["damping"], DEVICE["k_inner"], DEVICE["k_outer"],
                  DEVICE["x_transition"], DEVICE["friction"], DEVICE["friction_vel"],
                  DEVICE["x0"], DEVICE["v0"]])
    return run, q


def time_both(graph, n_ticks, runs):
    """Wall times (s) per run of hapflow and the hand-written loop, runs interleaved.

    hapflow: ``advance(n_ticks)`` on a fresh Simulation each run (state from
    tick 0, compiled kernel reused).  Interleaving exposes both to the same
    machine load.  The first run of each is a warm-up and is not counted.
    Returns the lists of times by name, and both trajectories.
    """
    import hapflow as hf
    import numpy as np
    fn, q = make_handwritten()
    times = {name: [] for name in ("hf", "hw", "mem", "h5", "kernel_long", "mem_long", "h5_long")}
    chunked = hf.Simulation(graph, chunk=1.0)
    with tempfile.TemporaryDirectory(prefix="hapflow_e2e_") as tmp:
        out = os.path.join(tmp, "run.h5")
        for k in range(runs + 1):
            sim = hf.Simulation(graph, chunk=DURATION)
            start = time.perf_counter()
            rows = sim.advance(n_ticks)
            elapsed = {"hf": time.perf_counter() - start}
            pos_hf = rows[:, 0].copy()
            log = np.zeros(n_ticks)
            start = time.perf_counter()
            fn(n_ticks, RATE, 1.0 / RATE, q, log)
            elapsed["hw"] = time.perf_counter() - start
            long = hf.Simulation(graph, chunk=LONG)
            start = time.perf_counter()
            long.advance(int(round(LONG * RATE)))
            elapsed["kernel_long"] = time.perf_counter() - start
            for name, duration, path in (("mem", DURATION, None), ("h5", DURATION, out),
                                         ("mem_long", LONG, None), ("h5_long", LONG, out)):
                chunked.reset()
                start = time.perf_counter()
                chunked.run(duration, out=path, progress=False)
                elapsed[name] = time.perf_counter() - start
            if k:
                for name, value in elapsed.items():
                    times[name].append(value)
    return times, pos_hf, log


def chunk_overhead(times, short, long):
    """Median over runs of the per-chunk cost beyond the kernel, as a share of the kernel's
    time per chunk: the slope between the ``long`` and ``short`` runs (1 s chunks) against
    ``kernel_long`` / LONG."""
    shares = []
    for t_short, t_long, t_kernel in zip(times[short], times[long], times["kernel_long"]):
        per_chunk = (t_long - t_short) / (LONG - DURATION)
        kernel = t_kernel / LONG
        shares.append((per_chunk - kernel) / kernel)
    return statistics.median(shares)


def child(mode):
    """Subprocess modes: 'cold' prints the Simulation construction time; 'warm' runs one tick."""
    g = build_graph()
    import hapflow as hf
    start = time.perf_counter()
    sim = hf.Simulation(g)
    built = time.perf_counter() - start
    if mode == "warm":
        sim.advance(1)
    print(f"{built:.6f} {time.time():.6f}")      # the first tick's end, on the parent's clock


def run_child(mode, env):
    """Run ``--child mode``: its start and end (wall clock), construction time, and the
    wall-clock time at which its first tick ended (warm mode)."""
    start = time.time()
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode], env=env,
                         capture_output=True, text=True)
    end = time.time()
    if out.returncode != 0:
        raise RuntimeError(f"child {mode} failed:\n{out.stderr}")
    built, first_tick = map(float, out.stdout.strip().splitlines()[-1].split())
    return start, end, built, first_tick


def warm_start(runs: int = 5) -> tuple[float, float]:
    """Median seconds from a fresh process's start to the end of its first tick, and from
    there to the process's exit (cache populated)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    run_child("warm", env)                      # writes any missing bytecode
    starts = [run_child("warm", env) for _ in range(runs)]
    return (statistics.median(first - start for start, _, _, first in starts),
            statistics.median(end - first for _, end, _, first in starts))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # the per-chunk shares are differences of two runs' times: a median of 7 still moved
    # by several times the 5 % goal from one invocation to the next
    parser.add_argument("--runs", type=int, default=25, help="timed runs (median), >= 5")
    parser.add_argument("--child", choices=("cold", "warm"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    runs = max(5, args.runs)

    # (c) cold compile first, in a process with empty caches
    with empty_caches() as env:
        cold = run_child("cold", env)[2]

    import numpy as np
    graph = build_graph()
    n_ticks = int(round(DURATION * RATE))
    times, pos_hf, pos_hw = time_both(graph, n_ticks, runs)
    times_hf, times_hw = times["hf"], times["hw"]
    t_hf, t_hw = statistics.median(times_hf), statistics.median(times_hw)
    e2e_mem = statistics.median(times["mem"]) / t_hw
    e2e_h5 = statistics.median(times["h5"]) / t_hw
    long_h5 = statistics.median(h5 / k for h5, k in zip(times["h5_long"], times["kernel_long"]))
    chunk_mem = chunk_overhead(times, "mem", "mem_long")
    chunk_h5 = chunk_overhead(times, "h5", "h5_long")

    # (d) warm start with the cache populated by this process
    warm, teardown = warm_start()

    diff = float(np.max(np.abs(pos_hf - pos_hw)))
    t = np.arange(n_ticks) / RATE
    k = (CHIRP["f_end"] - CHIRP["f_start"]) / CHIRP["sweep_time"]
    ref = CHIRP["amplitude"] * np.sin(2 * np.pi * (CHIRP["f_start"] * t + 0.5 * k * t * t))
    err = pos_hf - ref
    sat_reach = DEVICE["x_transition"] + (MOTOR["peak_force"] - DEVICE["k_inner"]
                                          * DEVICE["x_transition"]) / DEVICE["k_outer"]

    us_hf, us_hw = t_hf / n_ticks * 1e6, t_hw / n_ticks * 1e6
    rtf = DURATION / t_hf
    ratio = t_hf / t_hw
    rows = [
        ("hapflow kernel", f"{us_hf:.3f} us/tick", "", ""),
        ("hand-written @njit loop", f"{us_hw:.3f} us/tick", "", ""),
        ("ratio hapflow / hand-written", f"{ratio:.2f}", f"<= {GOALS['ratio']}",
         ratio <= GOALS["ratio"]),
        ("end to end: run(), memory", f"{e2e_mem:.2f}", f"<= {GOALS['e2e']}",
         e2e_mem <= GOALS["e2e"]),
        ("end to end: run(), HDF5 file", f"{e2e_h5:.2f}", f"<= {GOALS['e2e']}",
         e2e_h5 <= GOALS["e2e"]),
        ("per-chunk overhead, memory", f"{chunk_mem:.1%}", f"<= {GOALS['chunk']:.0%}",
         chunk_mem <= GOALS["chunk"]),
        ("per-chunk overhead, HDF5 file", f"{chunk_h5:.1%}", f"<= {GOALS['chunk']:.0%}",
         chunk_h5 <= GOALS["chunk"]),
        (f"{LONG:g} s to HDF5 / kernel", f"{long_h5:.2f}", "", ""),
        ("real-time factor (hapflow)", f"{rtf:,.0f}x", f">= {GOALS['rtf']:,.0f}x",
         rtf >= GOALS["rtf"]),
        ("cold compile (Simulation())", f"{cold:.2f} s", f"<= {GOALS['cold']} s",
         cold <= GOALS["cold"]),
        ("warm start (process, 1 tick)", f"{warm:.2f} s", f"<= {GOALS['warm']} s",
         warm <= GOALS["warm"]),
        ("  then process exit", f"{teardown:.2f} s", "", ""),
    ]
    print(f"hapflow engine benchmark: {graph.name}, {RATE:g} Hz, {DURATION:g} s simulated "
          f"({n_ticks} ticks), median of {runs} runs")
    print(f"{'measure':<30} {'value':>16} {'goal':>12} {'':>5}")
    print("-" * 66)
    for name, value, goal, ok in rows:
        mark = "" if ok == "" else ("PASS" if ok else "MISS")
        print(f"{name:<30} {value:>16} {goal:>12} {mark:>5}")
    print("-" * 66)
    print(f"fastest run: hapflow {min(times_hf) / n_ticks * 1e6:.3f} us/tick, hand-written "
          f"{min(times_hw) / n_ticks * 1e6:.3f} us/tick (ratio {min(times_hf) / min(times_hw):.2f})")
    print(f"trajectory agreement (max |x_hapflow - x_hand|): {diff:.3g} m "
          f"(must be <= {AGREEMENT:g} m)")
    print(f"tracking error: RMS {np.sqrt(np.mean(err ** 2)) * 1e3:.3f} mm, max "
          f"{np.max(np.abs(err)) * 1e3:.3f} mm of {CHIRP['amplitude'] * 1e3:g} mm "
          f"(gains kp={PID['kp']:g} ki={PID['ki']:g} kd={PID['kd']:g}, "
          f"derivative cut-off {PID['deriv_cutoff']:g} Hz; at {MOTOR['peak_force']:g} N the "
          f"device holds at most {sat_reach * 1e3:.1f} mm statically)")
    if not diff <= AGREEMENT:
        print("ERROR: hapflow and the hand-written loop disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
