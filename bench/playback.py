"""Playback: a 1e6-sample file played at 1 kHz, per interpolation mode.

Prints one table: wall time (median of RUNS runs) of 1000 s of simulated time at 1 kHz, the
real-time factor (goal >= 1000x), and the ratio to two references measured in the same
run: a graph whose source is a constant (the engine's floor for one source and a
record), and the test helpers' table source holding the same samples in the parameter
array (one row per tick, so its layout and kernel change with the length).  The last
columns time building a Simulation for a second file of another length: Playback reuses
the compiled kernel, the parameter table compiles again.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hapflow as hf  # noqa: E402
from hapflow.blocks import Constant, Playback  # noqa: E402
from tests.helpers import table  # noqa: E402

RATE, N, RUNS = 1000.0, 1_000_000, 3


def graph(source) -> hf.Graph:
    g = hf.Graph(name="bench-playback", rate=RATE, duration=N / RATE)
    g.add("src", source)
    g.record("src.y")
    return g


def timed(make) -> tuple[float, float]:
    """(seconds to build the Simulation, median seconds to run N ticks)."""
    t0 = time.perf_counter()
    sim = hf.Simulation(graph(make()), chunk=100.0)
    build = time.perf_counter() - t0
    walls = []
    for _ in range(RUNS):
        sim.reset()
        t0 = time.perf_counter()
        sim.run(N / RATE)
        walls.append(time.perf_counter() - t0)
    return build, statistics.median(walls)


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    rng = np.random.default_rng(0)
    np.save(folder / "a.npy", rng.standard_normal(N))
    np.save(folder / "b.npy", rng.standard_normal(N - 12345))
    _, floor = timed(lambda: Constant(value=(1.0,)))
    rows = []
    for mode in ("zoh", "linear", "sinc"):
        timed(lambda: Playback(file=str(folder / "a.npy"), sample_rate=RATE, interpolation=mode))
        _, wall = timed(lambda: Playback(file=str(folder / "a.npy"), sample_rate=RATE,
                                         interpolation=mode))
        again, _ = timed(lambda: Playback(file=str(folder / "b.npy"), sample_rate=RATE,
                                          interpolation=mode))
        rows.append((f"Playback {mode}", wall, again))
    values = np.load(folder / "a.npy")[:, None]
    _, wall = timed(lambda: table(values))
    again, _ = timed(lambda: table(np.load(folder / "b.npy")[:, None]))
    rows.append(("parameter table", wall, again))
    print(f"{N} samples played at {RATE:g} Hz ({N / RATE:g} s simulated), median of {RUNS} runs")
    print(f"{'source':18s} {'wall [s]':>9s} {'x real time':>12s} {'/ constant':>11s} "
          f"{'new length: build [s]':>22s}")
    print(f"{'constant':18s} {floor:9.3f} {N / RATE / floor:12.0f} {1.0:11.2f} {'':>22s}")
    for name, wall, again in rows:
        print(f"{name:18s} {wall:9.3f} {N / RATE / wall:12.0f} {wall / floor:11.2f} "
              f"{again:22.2f}")


if __name__ == "__main__":
    main()
