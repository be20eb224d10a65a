"""Estimation benchmark: microseconds per filter update, and the slider-crank two-stage run.

What is measured (compiled kernels, after a warm-up run; median of ``--runs``;
process CPU time, like the thesis's table 3.5, so that other load on a shared
machine does not count; the runs of the graphs compared with each other are
interleaved, so that a change of load during the benchmark hits the filter
graph and its baseline alike):

* per-update cost on the two-link planar arm KKF of seed 004 (6 states,
  2 accelerometer inputs, 2 encoder outputs): ``ExtendedKalmanFilter``
  (analytic Jacobians, and finite differences), ``UnscentedKalmanFilter``
  with Merwe's 13 points and with the 8-point spherical simplex (SS-UKF),
  and the linear ``KalmanFilter`` on a 6-state linear kinematic model of
  the same sizes.  Each filter runs alone in a graph fed by two table
  sources over ``TICKS`` samples; the same graph without the filter is run
  as the baseline and its time subtracted, so the figure is the filter's
  own predict + update (plus its output writes).
* seed 004 tables 3.4 and 3.5 from one graph, graphs/slider_crank_torque.yaml
  (the torque-driven slider-crank of section 3.2.1, each observer as an
  SS-UKF and as an EKF): the RMS errors of speed, acceleration and slider
  force, worst of seeds 1-4, beside table 3.4; and the CPU time of 5 s of
  data at 1 kHz for each of the four observers (the graph without the other
  observers, minus the plant-only baseline) beside table 3.5 (Matlab on a
  Core i7-2700K).  For reference, a last row runs the two-stage SS-UKF pair
  with the ``linear`` model of the same sizes (identity ``A``, zero ``B``,
  ``H`` picking the first states) in place of the slider-crank models: the
  filter machinery alone, without the model functions' trigonometry.
* seed 004 section 2.3.3: the CPU time of the 30 s slider-crank run of
  section 2.3.1 (graphs/slider_crank_kinematic.yaml: the switching
  kinematic observer as an SS-UKF and as an EKF, each alone, minus the
  plant-only graph) beside the thesis's 8.38 s (SS-UKF) and 25.15 s (EKF).
* seed 004 section 2.3.3 on the two-link arm: the CPU time of TEST 1 (10 s) and TEST 2 (9 s)
  of section 2.3.2 (tests/evals/test_two_link_arm.py's reconstruction: its sensors,
  tuning and the random-walk scheme ``two_link_kkf_walk`` the section used), the observer as
  an SS-UKF and as an EKF, each alone in a graph fed by two table sources, minus the
  sources-only graph, beside the thesis's 0.85 / 6.65 s (TEST 1) and 0.78 / 6.00 s (TEST 2).
* why the two-stage observer is built as it is (item 2 of issue 15): the
  force RMS of the two-stage SS-UKF beside the benchmark SS-UKF for a force
  stage without the lever weighting (``sa`` 0) and with the thesis's
  random-walk force (``F' = 0``), for exact models in every observer, for
  other frequencies of the unknown slider force, and for the previous
  kinematic stage (the acceleration a random walk, ``slider_crank_kkf_walk``)
  with table 3.1's errors and with exact models.
* cold compile: CPU time of a fresh process with empty kernel caches building
  graphs/slider_crank_torque.yaml (median of 3): the compile cost that the
  inlining choices of :mod:`hapflow.jit` trade against the per-update cost.

The table prints each figure next to its goal with PASS/MISS; the script
exits 0 whatever the figures (a benchmark, not a test).

Usage: ``python bench/estimation.py [--runs N] [--only update|tables|kinematic|arm|variants|compile]``.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import hapflow  # noqa: E402
import hapflow.blocks  # noqa: E402,F401
from hapflow.blocks.estimation import (ExtendedKalmanFilter, KalmanFilter,  # noqa: E402
                                       UnscentedKalmanFilter)
from hapflow.blocks.estimation_models import MODELS  # noqa: E402
from tests.evals.test_slider_crank import (FIGURES, OBSERVERS, TABLE_3_4,  # noqa: E402
                                           worst_errors)
from tests.helpers import table  # noqa: E402

from coldcache import empty_caches  # noqa: E402  (bench/, the script's folder)

TICKS = 20000
RATE = 1000.0
ARM = [0.3, 0.2, 0.15]
GOALS_US = {"SS-UKF": 2.0, "EKF (analytic)": 1.0}
THESIS_CPU = {"two-stage SS-UKF": 0.4985, "two-stage EKF": 1.6102,      # s, seed 004
              "benchmark SS-UKF": 0.7667, "benchmark EKF": 1.7814}     # table 3.5
SPEEDUP_GOAL = 100.0
GRAPH = ROOT / "graphs" / "slider_crank_torque.yaml"
KINEMATIC = ROOT / "graphs" / "slider_crank_kinematic.yaml"
THESIS_CH2_CPU = {"SS-UKF": 8.38, "EKF": 25.15}         # s per 30 s run, section 2.3.3
EXACT = [0.3, 0.6, 0.05, 1.872, 3.744, 1.2, 9.81]        # the plant's own model
THESIS_ARM_CPU = {"TEST 1": {"SS-UKF": 0.85, "EKF": 6.65},  # s, seed 004 section 2.3.3
                  "TEST 2": {"SS-UKF": 0.78, "EKF": 6.00}}


def _diag(*values: float) -> list[float]:
    return np.diag(values).ravel().tolist()


def _arm_data() -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(TICKS) / RATE
    rng = np.random.default_rng(3)
    z = np.column_stack([0.8 * np.sin(8.0 * t), 0.5 + 0.6 * np.sin(4.0 * t)])
    u = np.column_stack([-0.2 * 51.2 * np.sin(8.0 * t), np.cos(3.0 * t)])
    return z + rng.normal(0, 0.003, z.shape), u + rng.normal(0, 0.05, u.shape)


def _filters() -> dict[str, hapflow.Block | None]:
    arm = dict(model="two_link_kkf", coeffs=ARM, Q=_diag(1e-8, 1e-8, 1e-5, 1e-5, 1.0, 1.0),
               R=_diag(1e-5, 1e-5), x0=[0.0, 0.5, 0.0, 0.0, 0.0, 0.0],
               P0=_diag(1e-4, 1e-4, 1e-2, 1e-2, 10.0, 10.0))
    dt = 1.0 / RATE
    one = np.array([[1.0, dt, dt * dt / 3], [0.0, 1.0, dt / 2], [0.0, 0.0, 0.0]])
    a = np.kron(one, np.eye(2))              # two decoupled [q, q', q''] chains, 6 states
    b = np.kron(np.array([[dt * dt / 6], [dt / 2], [1.0]]), np.eye(2))
    h = np.kron(np.array([[1.0, 0.0, 0.0]]), np.eye(2))
    return {
        "baseline (sources only)": None,
        "KalmanFilter (linear, 6 states)": KalmanFilter(
            states=6, measurements=2, controls=2, A=a.ravel().tolist(), B=b.ravel().tolist(),
            H=h.ravel().tolist(), Q=(b @ b.T * 0.05 ** 2 + 1e-12 * np.eye(6)).ravel().tolist(),
            R=arm["R"], x0=[0.0] * 6, P0=arm["P0"]),
        "EKF (analytic)": ExtendedKalmanFilter(**arm),
        "EKF (finite differences)": ExtendedKalmanFilter(jacobian="numeric", **arm),
        "UKF (Merwe, 13 points)": UnscentedKalmanFilter(alpha=0.5, kappa=0.0, **arm),
        "SS-UKF": UnscentedKalmanFilter(sigma="simplex", w0=0.5, **arm),
    }


def _time_runs(sims: dict[str, hapflow.Simulation], duration: float,
               runs: int) -> dict[str, float]:
    """Median process CPU seconds of ``duration`` s of each simulation, runs interleaved."""
    for sim in sims.values():                  # warm-up (compiled when built)
        sim.reset()
        sim.run(duration)
    times: dict[str, list[float]] = {name: [] for name in sims}
    for _ in range(runs):
        for name, sim in sims.items():
            sim.reset()
            start = time.process_time()
            sim.run(duration)
            times[name].append(time.process_time() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def per_update(runs: int) -> dict[str, float]:
    """Median seconds per run of each filter graph (baseline included)."""
    z, u = _arm_data()
    sims = {}
    for name, block in _filters().items():
        g = hapflow.Graph(name=f"bench_estimation_{len(sims)}", rate=RATE, duration=TICKS / RATE)
        g.add("z", table(z))
        g.add("u", table(u))
        g.record("z.y")
        if block is not None:
            g.add("f", block)
            g.wire("z.y -> f.z")
            g.wire("u.y -> f.u")
        sims[name] = hapflow.Simulation(g)
    return _time_runs(sims, TICKS / RATE, runs)


def _without(path: Path, drop: set[str]) -> dict:
    """The graph file as a dict without the blocks ``drop`` and their wires and records."""
    spec = yaml.safe_load(path.read_text())
    for name in drop:
        del spec["blocks"][name]
    spec["wires"] = [w for w in spec["wires"]
                     if not {p.split(".")[0].strip() for p in w.split("->")} & drop]
    spec["record"] = [r for r in spec["record"] if r.split(".")[0] not in drop]
    return spec


def _linear_twin(spec: dict, name: str) -> None:
    """Replace block ``name``'s model in the graph dict by the linear model of its sizes."""
    block = spec["blocks"][name]
    model = MODELS[block.pop("model")]
    block.pop("coeffs", None)
    n, m, l = model.states, model.measurements, model.controls
    block.update(model="linear", states=n, measurements=m, controls=l,
                 A=np.eye(n).ravel().tolist(), H=np.eye(m, n).ravel().tolist())
    if l:
        block["B"] = [0.0] * (n * l)


def slider_crank_cpu(runs: int) -> dict[str, float]:
    """Median seconds of the 5 s slider-crank runs: plant only, each observer of
    :data:`OBSERVERS` alone, and the two-stage SS-UKF pair on linear models."""
    observers = {name: {kin, dyn} for name, (kin, dyn, _) in OBSERVERS.items()}
    every = set().union(*observers.values())
    specs = {"plant only": _without(GRAPH, every)}
    for name, keep in observers.items():
        specs[name] = _without(GRAPH, every - keep)
    specs["linear twin"] = _without(GRAPH, every - {"kkf", "fobs"})
    for name in ("kkf", "fobs"):
        _linear_twin(specs["linear twin"], name)
    sims = {label: hapflow.Simulation(hapflow.loads(yaml.safe_dump(spec)))
            for label, spec in specs.items()}
    return _time_runs(sims, 5.0, runs)


def kinematic_cpu(runs: int) -> dict[str, float]:
    """Median seconds of the 30 s run of graphs/slider_crank_kinematic.yaml: plant only, and
    the SS-UKF (``kkf``) and the EKF (``kkf_ekf``) each alone."""
    specs = {"plant only": _without(KINEMATIC, {"kkf", "kkf_ekf"}),
             "SS-UKF": _without(KINEMATIC, {"kkf_ekf"}), "EKF": _without(KINEMATIC, {"kkf"})}
    sims = {label: hapflow.Simulation(hapflow.loads(yaml.safe_dump(spec)))
            for label, spec in specs.items()}
    return _time_runs(sims, 30.0, runs)


def arm_cpu(runs: int) -> dict[str, dict[str, float]]:
    """``{test: {observer: median seconds}}`` of TEST 1 and TEST 2 of the two-link arm (each
    over its own duration): sources only, and the random-walk KKF as an EKF and an SS-UKF."""
    from tests.evals import test_two_link_arm as arm
    observers = {"sources only": None, "SS-UKF": arm.UnscentedKalmanFilter,
                 "EKF": arm.ExtendedKalmanFilter}
    out = {}
    for test, (torque, duration) in arm.TESTS.items():
        z, u = arm.sensors(arm.simulate(torque, duration), seed=3)
        sims = {}
        for label, cls in observers.items():
            g = hapflow.Graph(name=f"bench_arm_{len(out)}_{len(sims)}", rate=arm.RATE,
                              duration=duration)
            g.add("z", table(z))
            g.add("u", table(u))
            g.record("z.y")
            if cls is not None:
                extra = dict(sigma="simplex", w0=0.5) if cls is arm.UnscentedKalmanFilter else {}
                g.add("kkf", cls(Q=arm.Q, R=arm.R, P0=arm.P0, x0=[0.0, 0.3, 0.0, 0.0, 0.0, 0.0],
                                 **arm.SCHEMES["walk"], **extra))
                g.wire("z.y -> kkf.z")
                g.wire("u.y -> kkf.u")
                g.record("kkf.x_hat")
            sims[label] = hapflow.Simulation(g)
        out[test] = _time_runs(sims, duration, runs)
    return out


def _two_stage_force(sim: hapflow.Simulation) -> tuple[float, float]:
    """Worst force RMS of the two-stage and the benchmark SS-UKF over the seeds."""
    worst = worst_errors(sim, {"two-stage": ("kkf", "fobs", 1),
                               "benchmark": ("bench", "bench", 3)})
    return worst["two-stage"][2], worst["benchmark"][2]


#: the previous kinematic and force stages: the acceleration a random walk, the torque
#: weighted with sa = 3 m/s^2, the slope's random walk 1000 (N/s)^2 per step
ACCELERATION_WALK = {
    "kkf": dict(model="slider_crank_kkf_walk", Q=np.diag([1e-8, 1e-4, 0.1]).ravel().tolist(),
                x0=[0.0, 6.28, 0.0], P0=np.diag([1e-4, 1.0, 100.0]).ravel().tolist()),
    "fobs": dict(model="slider_crank_force_slope", Q=np.diag([0.1, 0.0, 1000.0]).ravel().tolist())}


def _exact(sim: hapflow.Simulation, fobs: list[float], exact: bool) -> None:
    """Set the plant's own parameters (``exact``) or the graph's in every observer."""
    sim.set("kkf.coeffs", EXACT[:3] if exact else fobs[:3])
    sim.set("fobs.coeffs", (EXACT if exact else fobs[:7]) + fobs[7:])
    sim.set("bench.coeffs", EXACT if exact else fobs[:7])


def force_stage_variants() -> list[tuple[str, float, float]]:
    """``(variant, two-stage force RMS, benchmark force RMS)`` (N, worst of the seeds) of the
    force-stage variants, the exact models, other slider-force frequencies and the previous
    stages (acceleration a random walk; the thesis's random-walk force)."""
    spec = _without(GRAPH, {"kkf_ekf", "fobs_ekf", "bench_ekf"})
    sim = hapflow.Simulation(hapflow.loads(yaml.safe_dump(spec)))
    rows = [("as in the graph", *_two_stage_force(sim))]
    coeffs = spec["blocks"]["fobs"]["coeffs"]
    sim.set("fobs.coeffs", coeffs[:7] + [0.0] + coeffs[8:])
    rows.append(("no lever weighting (sa 0)", *_two_stage_force(sim)))
    sim.set("fobs.coeffs", coeffs)
    for hz in (0.5, 1.0, 1.3):
        sim.set("force.frequency", hz)
        rows.append((f"slider force at {hz:g} Hz", *_two_stage_force(sim)))
    sim.set("force.frequency", spec["blocks"]["force"]["frequency"])
    _exact(sim, coeffs, True)
    rows.append(("exact models in every observer", *_two_stage_force(sim)))

    walk = yaml.safe_load(yaml.safe_dump(spec))
    for name, values in ACCELERATION_WALK.items():
        walk["blocks"][name].update(values)
    walk["blocks"]["fobs"]["coeffs"] = coeffs[:7] + [3.0] + coeffs[8:]
    previous = hapflow.Simulation(hapflow.loads(yaml.safe_dump(walk)))
    rows.append(("acceleration a random walk (kkf_walk)", *_two_stage_force(previous)))
    _exact(previous, walk["blocks"]["fobs"]["coeffs"], True)
    rows.append(("  the same, exact models", *_two_stage_force(previous)))

    thesis = dict(spec["blocks"]["fobs"], coeffs=coeffs[:7] + [0.0] + coeffs[8:],
                  Q=np.diag([10.0, 1.0, 0.0]).ravel().tolist(),
                  P0=np.diag([100.0, 1.0e4, 0.0]).ravel().tolist())
    spec["blocks"]["fobs"] = thesis
    sim = hapflow.Simulation(hapflow.loads(yaml.safe_dump(spec)))
    rows.append(("thesis's force stage (F a random walk)", *_two_stage_force(sim)))
    return rows


def _print_per_update(runs: int) -> None:
    times = per_update(runs)
    base = times.pop("baseline (sources only)")
    print(f"Per-update cost, two-link arm KKF (6 states, 2 inputs, 2 outputs), "
          f"{TICKS} updates, median of {runs} runs")
    print(f"{'filter':<34}{'us/update':>10}{'goal':>8}  verdict")
    for name, seconds in times.items():
        us = (seconds - base) / TICKS * 1e6
        goal = GOALS_US.get(name)
        verdict = ("PASS" if us <= goal else "MISS") if goal else ""
        print(f"{name:<34}{us:>10.3f}{goal if goal else '':>8}  {verdict}")
    print(f"{'(baseline graph, per tick)':<34}{base / TICKS * 1e6:>10.3f}")


def _print_tables(runs: int) -> None:
    sim = hapflow.Simulation(hapflow.load(GRAPH))
    errors = worst_errors(sim, OBSERVERS)
    print("Slider-crank, torque-driven (graphs/slider_crank_torque.yaml), RMS errors, worst of "
          "seeds 1-4: hapflow / seed 004 table 3.4")
    print(f"{'':<14}" + "".join(f"{name:>22}" for name in OBSERVERS))
    for i, figure in enumerate(FIGURES):
        cells = "".join(f"{errors[n][i]:>11.4f} /{TABLE_3_4[n][i]:>8.4f}  " for n in OBSERVERS)
        print(f"{figure:<14}{cells}")

    cpu = slider_crank_cpu(runs)
    print()
    print(f"CPU time of 5 s of data at 1 kHz (seed 004 table 3.5), median of {runs} runs")
    print(f"{'observer':<20}{'run (s)':>10}{'net (s)':>10}{'thesis (s)':>12}{'speed-up':>10}"
          f"{'goal':>7}  verdict")
    for name, thesis in THESIS_CPU.items():
        net = cpu[name] - cpu["plant only"]
        speedup = thesis / net
        verdict = "PASS" if speedup >= SPEEDUP_GOAL else "MISS"
        print(f"{name:<20}{cpu[name]:>10.5f}{net:>10.5f}{thesis:>12.4f}{speedup:>10.0f}"
              f"{SPEEDUP_GOAL:>7.0f}  {verdict}")
    print(f"{'plant only':<20}{cpu['plant only']:>10.5f}")
    net = cpu["linear twin"] - cpu["plant only"]
    print(f"{'two-stage SS-UKF, linear models of the same sizes (filters alone)':<66}{net:>10.5f}")


def _print_kinematic(runs: int) -> None:
    cpu = kinematic_cpu(runs)
    print(f"CPU time of the 30 s slider-crank run of seed 004 section 2.3.1 (section 2.3.3), "
          f"median of {runs} runs")
    print(f"{'observer':<10}{'run (s)':>10}{'net (s)':>10}{'thesis (s)':>12}{'speed-up':>10}")
    for name, thesis in THESIS_CH2_CPU.items():
        net = cpu[name] - cpu["plant only"]
        print(f"{name:<10}{cpu[name]:>10.5f}{net:>10.5f}{thesis:>12.2f}{thesis / net:>10.0f}")
    print(f"{'plant only':<10}{cpu['plant only']:>10.5f}")
    ratio = (cpu["EKF"] - cpu["plant only"]) / (cpu["SS-UKF"] - cpu["plant only"])
    print(f"EKF / SS-UKF: {ratio:.2f} (thesis "
          f"{THESIS_CH2_CPU['EKF'] / THESIS_CH2_CPU['SS-UKF']:.2f})")


def _print_arm(runs: int) -> None:
    cpu = arm_cpu(runs)
    print(f"CPU time of the two-link arm's TEST 1 and TEST 2 (seed 004 sections 2.3.2-2.3.3, "
          f"random-walk KKF), median of {runs} runs, net of the sources-only graph")
    print(f"{'test':<8}{'observer':<9}{'run (s)':>10}{'net (s)':>10}{'thesis (s)':>12}"
          f"{'speed-up':>10}")
    for test, thesis in THESIS_ARM_CPU.items():
        for name, seconds in thesis.items():
            net = cpu[test][name] - cpu[test]["sources only"]
            print(f"{test:<8}{name:<9}{cpu[test][name]:>10.5f}{net:>10.5f}{seconds:>12.2f}"
                  f"{seconds / net:>10.0f}")
        base = cpu[test]["sources only"]
        ratio = (cpu[test]["EKF"] - base) / (cpu[test]["SS-UKF"] - base)
        print(f"{test:<8}{'sources only':<19}{base:>10.5f}   EKF / SS-UKF: {ratio:.2f} (thesis "
              f"{thesis['EKF'] / thesis['SS-UKF']:.2f})")


def _print_variants(runs: int) -> None:
    print("Two-stage force stage: force RMS (N), worst of seeds 1-4, SS-UKF")
    print(f"{'variant':<42}{'two-stage':>10}{'benchmark':>11}")
    for label, two, bench in force_stage_variants():
        print(f"{label:<42}{two:>10.3f}{bench:>11.3f}")


COMPILE_RUNS = 3
"""Fresh processes per compile figure (a cold compile of the slider-crank graph takes most
of a minute)."""


def compile_cpu(path: Path) -> float:
    """CPU seconds a fresh process with empty kernel caches takes to build ``Simulation`` of
    the graph file ``path`` (code generation and every numba compile: fused graphs compile
    in the process itself)."""
    with empty_caches() as env:
        out = subprocess.run([sys.executable, __file__, "--compile-child", str(path)], env=env,
                             capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"compile child failed:\n{out.stderr}")
    return float(out.stdout.split()[-1])


def _compile_child(path: str) -> None:
    graph = hapflow.load(path)
    start = time.process_time()
    hapflow.Simulation(graph)
    print(f"{time.process_time() - start:.3f}")


def _print_compile(runs: int) -> None:
    runs = min(runs, COMPILE_RUNS)
    seconds = statistics.median(compile_cpu(GRAPH) for _ in range(runs))
    print(f"Cold compile of {GRAPH.relative_to(ROOT)} (six Kalman filters on three models), "
          f"CPU s of a fresh process with empty caches, median of {runs}")
    print(f"{'compile CPU (s)':<34}{seconds:>10.1f}")


SECTIONS = {"update": _print_per_update, "tables": _print_tables,
            "kinematic": _print_kinematic, "arm": _print_arm, "variants": _print_variants,
            "compile": _print_compile}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per figure (median)")
    parser.add_argument("--only", choices=list(SECTIONS), action="append",
                        help="run only this section (repeatable; default: all)")
    parser.add_argument("--compile-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compile_child:
        _compile_child(args.compile_child)
        return 0
    for i, name in enumerate(args.only or SECTIONS):
        if i:
            print()
        SECTIONS[name](args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
