"""A small study, two ways: the 42-run PID sweep in one process and on the default LocalCluster.

The study (issue 17's trial): ``graphs/colton2005_sweep.yaml`` over a 6 x 7
grid of ``pid.kp`` x ``pid.kd``, 20 s per run, ``batch: auto``, three
metrics.  Each path is a whole :func:`hapflow.study.run_study` call in a
fresh output folder: ``workers=0`` (one process, one run after another),
the default (``workers`` not given: the first run here, then a cluster if
it pays, else a thread per core in this process) and a
``LocalCluster`` of one worker per core, whose figure includes starting it
and its workers' kernel loading -- what a user waits for.  Median of ``--repeats`` calls
after a warm-up call of each path (which fills the kernel cache on disk).

Usage: ``python bench/study_auto.py [--repeats R]``.  A benchmark, not a test: exits 0.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

GRAPH = Path(__file__).resolve().parents[1] / "graphs" / "colton2005_sweep.yaml"
STUDY = f"""\
name: pid-sweep
graph: {GRAPH}
duration: 20
batch: auto
design: grid
parameters:
  pid.kp: {{low: 30000.0, high: 46000.0, num: 6}}
  pid.kd: {{low: 180.0, high: 280.0, num: 7}}
metrics:
  pos_rms: {{rms: dev.pos}}
  force_peak: {{peak: head.force}}
  final: {{final: dev.pos}}
"""


def timed(folder: Path, workers: int | None) -> tuple[float, dict[str, int], str]:
    from hapflow.study import load_study, run_study
    path = folder / "study.yaml"
    path.write_text(STUDY)
    study = load_study(path)
    start = time.perf_counter()
    result = run_study(study, folder / f"out{time.perf_counter_ns()}", workers=workers,
                       progress=False, plots=False)
    wall = time.perf_counter() - start
    assert result.failed == 0, result.summary()
    return wall, result.table["path"].value_counts().to_dict(), result.where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = []
        for name, workers in (("one process", 0), ("default", None),
                              (f"LocalCluster {cores}", cores)):
            timed(folder, workers)                       # warm-up: kernel cache on disk
            walls, paths, where = [], {}, ""
            for _ in range(args.repeats):
                wall, paths, where = timed(folder, workers)
                walls.append(wall)
            rows.append((name, statistics.median(walls), min(walls), where, paths))
    print("## 42-run PID sweep (colton2005_sweep.yaml, 20 s a run, batch: auto), wall s")
    print(f"{'path':>16} | {'median':>7} | {'best':>7} | {'ran':>28} | runs per path")
    for name, median, best, where, paths in rows:
        print(f"{name:>16} | {median:7.2f} | {best:7.2f} | {where:>28} | {paths}")
    print(f"default / one process: {rows[1][1] / rows[0][1]:.2f} (goal < 1), "
          f"LocalCluster / one process: {rows[2][1] / rows[0][1]:.2f}")


if __name__ == "__main__":
    main()
