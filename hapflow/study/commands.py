"""The ``hapflow study`` subcommand.

::

    hapflow study STUDY.yaml [--workers N] [--scheduler ADDRESS] [--out DIR]
                  [--allow MODULE ...] [--retry-failed] [--no-plots] [--no-progress]

Runs every run of the study file's design (see :mod:`hapflow.study.spec`)
on a Dask ``LocalCluster`` of N worker processes (default: one per core if
the runs outlast the cluster's start-up, else in this process on one thread
per core; ``--workers 0``: in this process one job after another, batches on
numba's threads) or on the
cluster whose scheduler is at ADDRESS, resuming the runs already finished in
DIR (default ``out/<study file stem>``).  Writes ``DIR/results.parquet``,
``DIR/runs.jsonl``, ``DIR/plots/`` and ``DIR/summary.png``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_study(args: argparse.Namespace) -> int:
    """Run ``hapflow study``."""
    from .runner import run_study
    from .spec import load_study
    study = load_study(args.study, tuple(args.allow))
    out = args.out or str(Path("out") / Path(args.study).stem)
    result = run_study(study, out, workers=args.workers, scheduler=args.scheduler,
                       progress=args.progress, retry_failed=args.retry_failed,
                       plots=args.plots)
    print(result.summary())
    if result.failed and result.failed == len(result.table):
        print(f"hapflow: error: every run of the study failed (the errors are in "
              f"{result.out})", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``study`` subcommand to the ``hapflow`` parser."""
    s = sub.add_parser("study", help="parameter sweep / Monte Carlo study on Dask",
                       description="Run a study file: vary parameters of a base graph (grid, "
                                   "random or Latin hypercube), compute metrics per run, write "
                                   "a Parquet table (failures included), plots and a summary. "
                                   "An interrupted study resumes where it stopped.")
    s.add_argument("study", metavar="STUDY.yaml", help="study file")
    s.add_argument("--workers", type=int, metavar="N",
                   help="Dask LocalCluster worker processes [one per core if the runs outlast "
                        "its start-up, else a thread per core in this process]; 0: this "
                        "process, one job after another")
    s.add_argument("--scheduler", metavar="ADDRESS",
                   help="use the running Dask cluster at this address (tcp://host:8786)")
    s.add_argument("--out", metavar="DIR", help="output folder [out/<study file name>]")
    s.add_argument("--allow", action="append", default=[], metavar="MODULE",
                   help="allow user metric functions from this module (repeatable)")
    s.add_argument("--retry-failed", action="store_true", help="run failed runs again")
    s.add_argument("--no-plots", dest="plots", action="store_false", help="skip the plots")
    s.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                   help="no progress bar")
    s.set_defaults(func=cmd_study)
