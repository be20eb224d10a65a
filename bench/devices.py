"""Device benchmark: real-time factor of the changing-contact devices.

For the piano action (model A and B, seed 003's 3 s scenario with its
release, catch and strike events located in-step) and the ball on a driven
paddle (seed 001, 5 s, ~65 impacts), at 1 kHz and 10 kHz ticks:

* hapflow: a fresh ``Simulation.run`` of the whole scenario in memory after
  a warm-up run (the compiled kernel is reused), median of several runs;
  real-time factor = simulated s / wall s;
* reference: the same graph run once by :mod:`hapflow.ivp` (scipy
  ``solve_ivp``, DOP853, rtol 1e-12, event location by root finding), timed
  in the same process, as the speed-up's baseline.

Usage: ``python bench/devices.py [--runs N]``.  Exits 0 whatever the figures.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import yaml

import hapflow as hf
from hapflow.ivp import reference

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = ("piano_action_a", "piano_action_b", "bouncing_ball")
RATES = (1000, 10000)


def load(name: str, rate: float) -> hf.Graph:
    """The graph file at another tick rate, without its sinks (the device alone is timed)."""
    data = yaml.safe_load((ROOT / "graphs" / f"{name}.yaml").read_text())
    data["rate"] = rate
    sinks = {b for b, spec in data["blocks"].items() if spec["type"] in ("MidiSink", "SoundSink")}
    for b in sinks:
        del data["blocks"][b]
    data["wires"] = [w for w in data["wires"] if w.split("->")[1].split(".")[0].strip() not in sinks]
    return hf.loads(yaml.safe_dump(data))


def time_engine(graph: hf.Graph, runs: int) -> tuple[float, int]:
    hf.Simulation(graph).run(progress=False)                   # compile / load, warm up
    walls, events = [], 0
    for _ in range(runs):
        sim = hf.Simulation(graph)
        start = time.perf_counter()
        result = sim.run(progress=False)
        walls.append(time.perf_counter() - start)
        events = result.events
    return statistics.median(walls), events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs (median)")
    args = parser.parse_args()
    print(f"{'graph':16s} {'rate':>7s} {'sim s':>6s} {'events':>6s} {'hapflow wall':>13s} "
          f"{'us/tick':>8s} {'RT factor':>10s} {'solve_ivp wall':>15s} {'speed-up':>9s}")
    for name in GRAPHS:
        for rate in RATES:
            graph = load(name, rate)
            wall, events = time_engine(graph, args.runs)
            start = time.perf_counter()
            reference(load(name, rate))
            ref_wall = time.perf_counter() - start
            rt = graph.duration / wall
            ticks = graph.duration * rate
            print(f"{name:16s} {rate:7.0f} {graph.duration:6g} {events:6d} {wall * 1e3:10.2f} ms "
                  f"{wall / ticks * 1e6:8.3f} {rt:9,.0f}x {ref_wall:13.2f} s {ref_wall / wall:8,.0f}x")
    print(f"median of {args.runs} runs; RT factor = simulated s / wall s (1 = just real time)")


if __name__ == "__main__":
    main()
