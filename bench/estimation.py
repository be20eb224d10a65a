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
* the slider-crank two-stage observer of seed 004 section 3.2.1 (KKF and
  force observer, both SS-UKF) over 5 s of data at 1 kHz, against its
  table 3.5 CPU time (0.4985 s, Matlab on a Core i7-2700K): the graph
  graphs/slider_crank_two_stage.yaml without the benchmark observer, minus
  the plant-only baseline; the benchmark observer (table 3.5: 0.7667 s)
  likewise.  For reference, a last row runs the same two observers with
  the ``linear`` model of the same sizes (identity ``A``, zero ``B``, ``H``
  picking the first state) in place of the slider-crank models, minus the
  same baseline: the filter machinery alone, without the model functions'
  trigonometry.

The table prints each figure next to its goal with PASS/MISS; the script
exits 0 whatever the figures (a benchmark, not a test).

Usage: ``python bench/estimation.py [--runs N]``.
"""
from __future__ import annotations

import argparse
import statistics
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
from tests.helpers import table  # noqa: E402

TICKS = 20000
RATE = 1000.0
ARM = [0.3, 0.2, 0.15]
GOALS_US = {"SS-UKF": 2.0, "EKF (analytic)": 1.0}
THESIS_TWO_STAGE = 0.4985          # s, seed 004 table 3.5 (two-stage SS-UKF)
THESIS_BENCHMARK = 0.7667          # s, seed 004 table 3.5 (benchmark SS-UKF)
SPEEDUP_GOAL = 100.0
GRAPH = ROOT / "graphs" / "slider_crank_two_stage.yaml"


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
                 A=np.eye(n).ravel().tolist(), B=[0.0] * (n * l),
                 H=np.eye(m, n).ravel().tolist())


def slider_crank(runs: int) -> dict[str, float]:
    """Median seconds of the 5 s slider-crank runs: plant only, two-stage, benchmark, and the
    two-stage observers on linear models of the same sizes."""
    specs = {label: _without(GRAPH, {"kkf", "fobs", "bench"} - set(keep))
             for label, keep in (("plant only", ()), ("two-stage", ("kkf", "fobs")),
                                 ("benchmark", ("bench",)), ("linear twin", ("kkf", "fobs")))}
    for name in ("kkf", "fobs"):
        _linear_twin(specs["linear twin"], name)
    sims = {label: hapflow.Simulation(hapflow.loads(yaml.safe_dump(spec)))
            for label, spec in specs.items()}
    return _time_runs(sims, 5.0, runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per figure (median)")
    args = parser.parse_args(argv)

    times = per_update(args.runs)
    base = times.pop("baseline (sources only)")
    print(f"Per-update cost, two-link arm KKF (6 states, 2 inputs, 2 outputs), "
          f"{TICKS} updates, median of {args.runs} runs")
    print(f"{'filter':<34}{'us/update':>10}{'goal':>8}  verdict")
    for name, seconds in times.items():
        us = (seconds - base) / TICKS * 1e6
        goal = GOALS_US.get(name)
        verdict = ("PASS" if us <= goal else "MISS") if goal else ""
        print(f"{name:<34}{us:>10.3f}{goal if goal else '':>8}  {verdict}")
    print(f"{'(baseline graph, per tick)':<34}{base / TICKS * 1e6:>10.3f}")

    sc = slider_crank(args.runs)
    print()
    print(f"Slider-crank, 5 s of data at 1 kHz (seed 004 table 3.5), median of {args.runs} runs")
    print(f"{'observer':<14}{'run (s)':>10}{'net (s)':>10}{'thesis (s)':>12}{'speed-up':>10}"
          f"{'goal':>7}  verdict")
    for label, thesis in (("two-stage", THESIS_TWO_STAGE), ("benchmark", THESIS_BENCHMARK)):
        net = sc[label] - sc["plant only"]
        speedup = thesis / net
        verdict = "PASS" if speedup >= SPEEDUP_GOAL else "MISS"
        print(f"{label:<14}{sc[label]:>10.5f}{net:>10.5f}{thesis:>12.4f}{speedup:>10.0f}"
              f"{SPEEDUP_GOAL:>7.0f}  {verdict}")
    print(f"{'plant only':<14}{sc['plant only']:>10.5f}")
    net = sc["linear twin"] - sc["plant only"]
    print(f"{'two-stage, linear models of the same sizes (filters alone)':<60}{net:>10.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
