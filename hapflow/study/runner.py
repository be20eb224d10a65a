"""Run a study: expand the design, skip finished runs, spread jobs over Dask, collect results.

``workers=0`` runs every job in this process, one after another (a batch
spreads its runs over ``numba.get_num_threads()`` threads); otherwise the
jobs go to Dask distributed: a ``LocalCluster`` of ``workers``
single-threaded processes, or an existing cluster when ``scheduler`` gives
its address (``tcp://host:8786``).  By default the first run is timed here:
a ``LocalCluster`` of one worker per core takes the others only when they
would outlast its start-up (:data:`CLUSTER_STARTUP`) by what it saves; else
they run here on one thread per core.  The kernels release the GIL and each
thread's job borrows its own simulation (:mod:`hapflow.study.execute`), so
the threads use every core without a worker's start-up (``bench/study_auto.py``
times the three ways on a small sweep).  Runs
are grouped by their structural parameters, then cut into jobs of at most
:data:`MAX_JOB` runs (about four jobs per worker or thread;
:data:`LOCAL_JOB` in this process), so each worker compiles a structure once
and the progress bar and the resume log advance job by job (in this process,
batch by batch).  After Ctrl-C the threads finish the jobs they run (a small
study's: that is when threads are chosen) and record them; the others are
dropped.
Results are appended to the log as jobs end; the table is written at the
end and on Ctrl-C.

A scheduler that has no worker within ``worker_timeout`` seconds, or a cluster
that has had none for ``lost_timeout`` seconds while jobs wait, is an error
(a :class:`~hapflow.errors.HapflowError` saying so), not a silent wait.  A job
whose worker died (Dask's ``KilledWorker``, or any loss of the task: the
job itself never raises) is submitted again, up to :data:`WORKER_RETRIES`
times; its runs are then recorded with status ``died``, which the resume log
does not count as finished, so a plain rerun tries them again.
"""
from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time as _time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import HapflowError
from .designs import design
from .execute import Job, execute
from .spec import SEED, Study
from .store import RunSpec, Store, run_key

MAX_JOB = 64
"""Most runs per job on Dask workers."""
WORKER_RETRIES = 2
"""Times a job whose worker died is submitted again before its runs are recorded as ``died``
(beneath this, Dask's own ``distributed.scheduler.allowed-failures`` applies)."""
WORKER_TIMEOUT = 30.0
"""Seconds to wait for a scheduler to answer and for its first worker."""
LOST_TIMEOUT = 300.0
"""Seconds a cluster that has lost all of its workers has for one to join (a restarting worker
imports hapflow and loads kernels: tens of seconds on a loaded machine) before the runs left
are reported as not run."""
WORKER_POLL = 1.0
"""Seconds between checks that a cluster running jobs still has a worker."""
CLUSTER_STARTUP = 5.0
"""Seconds a default LocalCluster costs before it saves any (start, workers importing hapflow
and loading the kernels): measured by ``bench/study_auto.py`` on a 2-core machine."""
LOCAL_JOB = 1024
"""Most runs per job in this process (``workers=0``): no workers to spread jobs over, and
a job hands its records to the log as its runs (or batches of runs) end."""


@dataclass
class StudyResult:
    """What :func:`run_study` produced.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per run (see :meth:`hapflow.study.store.Store.table`).
    out : Path
        Output folder.
    executed, skipped, failed : int
        Runs run now, runs found finished in the log, failed runs in the table (worker
        deaths included).
    wall : float
        Wall time of this call, s (cluster start-up included).
    workers : int
        Dask workers the runs went to (0: this process).
    files : dict of str -> Path
        ``table``, ``log`` and the plots.
    threads : int
        Threads of this process the runs went to (with ``workers`` 0).
    """

    table: Any
    out: Path
    executed: int
    skipped: int
    failed: int
    wall: float
    workers: int
    files: dict[str, Path] = field(default_factory=dict)
    threads: int = 1

    @property
    def where(self) -> str:
        """Where the runs ran: 'on 2 Dask workers', 'in this process (on 2 threads)'."""
        if self.workers:
            return f"on {self.workers} Dask workers"
        return "in this process" + (f" on {self.threads} threads" if self.threads > 1 else "")

    def summary(self) -> str:
        """A few lines for the terminal."""
        n = len(self.table)
        ok = int((self.table["status"] == "ok").sum()) if n else 0
        died = int((self.table["status"] == "died").sum()) if n else 0
        rate = self.executed / self.wall if self.wall > 0 else math.inf
        where = self.where
        dead = f" ({died} lost with their worker: a rerun retries them)" if died else ""
        lines = [f"{n} runs: {ok} ok, {self.failed} failed{dead}; {self.executed} run now {where} "
                 f"({rate:.1f} runs/s, {self.wall:.1f} s wall), {self.skipped} already finished",
                 f"results -> {self.files['table']}"]
        if self.failed:
            first = self.table[self.table["status"].isin(("failed", "died"))].iloc[0]
            lines.insert(1, f"first failure: run {first['run']}: {first['error']}")
        lines += [f"plot -> {p}" for k, p in self.files.items() if k not in ("table", "log")]
        return "\n".join(lines)


def expand(study: Study) -> list[RunSpec]:
    """The runs of the study's design, with seeds and keys."""
    rows = design(study.design, study.parameters, study.samples, study.seed)
    base_seed = study.seed if study.seed is not None else study.graph.seed
    out = []
    for i, params in enumerate(rows):
        seed = int(params[SEED]) if SEED in params else int(base_seed)
        out.append(RunSpec(i, params, seed, run_key(study.fingerprint, params, seed)))
    return out


def jobs(study: Study, runs: list[RunSpec], workers: int, parallel: bool) -> list[Job]:
    """Group runs by structure and cut the groups into jobs for ``workers`` Dask workers or
    threads (0: this process, one job after another)."""
    structural = {p.key for p in study.parameters if not p.live}
    structural.update(k for k in study.fixed if not study.is_live(k))
    groups: dict[tuple, list[RunSpec]] = {(): runs} if runs and not structural else {}
    for spec in runs if structural else ():
        params = {**study.fixed, **spec.params}
        key = tuple(sorted((k, repr(v)) for k, v in params.items() if k in structural))
        groups.setdefault(key, []).append(spec)
    most = MAX_JOB if workers > 0 else LOCAL_JOB
    size = max(1, min(most, math.ceil(len(runs) / (4 * max(1, workers)))))
    drop = structural | {SEED}
    out = []
    for specs in groups.values():
        fixed = {k: v for k, v in {**study.fixed, **specs[0].params}.items() if k in structural}
        for k in range(0, len(specs), size):
            part = [(s.index, {key: v for key, v in {**study.fixed, **s.params}.items()
                               if key not in drop}, s.seed)
                    for s in specs[k:k + size]]
            out.append(Job(study.graph_text, str(study.graph_path), fixed, part, study.duration,
                           study.metrics, study.batch, parallel))
    return out


def _progress(total: int, show: bool | None) -> Any:
    if show is None:
        show = sys.stderr.isatty()
    from tqdm import tqdm
    return tqdm(total=total, unit=" runs", file=sys.stderr, disable=not show, desc="study")


def _died_job(job: Job, exc: BaseException, attempts: int) -> list[dict[str, Any]]:
    text = (f"{type(exc).__name__}: {exc} (the worker running this job died; "
            f"{attempts} attempts)")
    return [{"run": i, "status": "died", "error": text, "metrics": {}, "sim_wall": 0.0,
             "path": None, "ticks": 0} for i, _, _ in job.runs]


def _probe(study: Study, pending: list[RunSpec], emit: Callable[[list[dict[str, Any]]], None]
           ) -> tuple[list[RunSpec], bool]:
    """Run the first pending run in this process; the others, and whether they would outlast
    the start-up of a local cluster (:data:`CLUSTER_STARTUP`) by what its workers save."""
    done = execute(jobs(study, pending[:1], 0, parallel=True)[0], emit)
    rest, cores = pending[1:], os.cpu_count() or 1
    alone = sum(r["sim_wall"] for r in done) * len(rest)
    return rest, alone * (1.0 - 1.0 / cores) > CLUSTER_STARTUP


def _local(todo: list[Job], emit: Callable[[list[dict[str, Any]]], None], threads: int) -> None:
    """Run ``todo`` in this process: one job after another, or on ``threads`` threads."""
    if threads <= 1:
        for job in todo:
            execute(job, emit)
        return
    lock = threading.Lock()

    def emit_one_at_a_time(records: list[dict[str, Any]]) -> None:
        with lock:
            emit(records)

    pool = ThreadPoolExecutor(threads, thread_name_prefix="hapflow-study")
    try:
        for future in as_completed([pool.submit(execute, job, emit_one_at_a_time)
                                    for job in todo]):
            future.result()
    finally:                 # Ctrl-C: the running jobs end (and are recorded), no others start
        pool.shutdown(cancel_futures=True)


def _dask(todo: list[Job], client: Any, emit: Callable[[list[dict[str, Any]]], None],
          timeout: float) -> None:
    """Run ``todo`` on the cluster of ``client``, handing each job's records to ``emit``;
    a HapflowError naming the runs left when the cluster has had no worker for ``timeout`` s."""
    from distributed import wait
    futures = {client.submit(execute, job, pure=False): (job, 1) for job in todo}
    alone_since: float | None = None
    try:
        while futures:
            try:
                done, _ = wait(list(futures), timeout=WORKER_POLL, return_when="FIRST_COMPLETED")
            except TimeoutError:
                alone_since = _no_workers_since(client, alone_since, futures, timeout)
                continue
            alone_since = None
            for future in done:
                job, attempt = futures.pop(future)
                try:
                    records = future.result()
                except Exception as exc:  # noqa: BLE001 - execute never raises: the worker died
                    if attempt <= WORKER_RETRIES:
                        futures[client.submit(execute, job, pure=False)] = (job, attempt + 1)
                        continue
                    records = _died_job(job, exc, attempt)
                emit(records)
    finally:
        for future in futures:
            future.cancel()


def _no_workers_since(client: Any, since: float | None, futures: dict[Any, tuple[Job, int]],
                      timeout: float) -> float | None:
    """When the cluster was first seen without workers (``None``: it has some); a HapflowError
    once that is ``timeout`` s ago (the jobs in ``futures`` would wait for ever)."""
    if client.nthreads():
        return None
    now = _time.monotonic()
    if since is None:
        return now
    if now - since < timeout:
        return since
    runs = sorted(i for job, _ in futures.values() for i, _, _ in job.runs)
    shown = ", ".join(map(str, runs[:10]))
    if len(runs) > 10:
        shown += f", ... ({len(runs)} in all)"
    raise HapflowError(f"the Dask cluster has had no workers for {timeout:g} s (they died or "
                       f"left, and none joined): run{'s' if len(runs) > 1 else ''} {shown} "
                       f"{'have' if len(runs) > 1 else 'has'} not run; the runs that ended are "
                       "recorded, and running the study again resumes with the others")


def _remote(scheduler: str, timeout: float) -> tuple[Any, int]:
    """A client of the scheduler at ``scheduler`` once it has a worker (else HapflowError)."""
    from distributed import Client
    try:
        client = Client(scheduler, timeout=timeout)
    except OSError as exc:
        raise HapflowError(f"no Dask scheduler answered at {scheduler} within {timeout:g} s "
                           f"({exc}); start one with `dask scheduler`, or leave out "
                           f"--scheduler to run on a local cluster") from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        client.close()
        raise HapflowError(f"the Dask scheduler at {scheduler} has no workers (none joined "
                           f"within {timeout:g} s); start some with `dask worker "
                           f"{scheduler}`, or leave out --scheduler to run on a local "
                           f"cluster") from None
    return client, len(client.scheduler_info().get("workers", {})) or 1


def _client(workers: int, scheduler: str | None, timeout: float) -> tuple[Any, Any, int]:
    from distributed import Client, LocalCluster
    if scheduler:
        client, count = _remote(scheduler, timeout)
        return client, None, count
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR)
    return Client(cluster), cluster, workers


def run_study(study: Study, out: str | Path, workers: int | None = None,
              scheduler: str | None = None, progress: bool | None = None,
              retry_failed: bool = False, plots: bool = True,
              worker_timeout: float = WORKER_TIMEOUT,
              lost_timeout: float = LOST_TIMEOUT) -> StudyResult:
    """Run every unfinished run of ``study``; write the log, the table and the plots.

    Parameters
    ----------
    study : Study
        The parsed study file.
    out : path
        Output folder (an existing one is resumed).
    workers : int, optional
        Dask worker processes of a LocalCluster; 0 runs in this process, one
        job after another.  By default: the first run goes in this process,
        and a LocalCluster of one worker per core runs the others only if they
        would take longer in this process than the cluster's start-up saves
        (else they run here, on one thread per core).
    scheduler : str, optional
        Address of a running Dask scheduler (then ``workers`` is ignored).
    progress : bool, optional
        Progress bar over runs (default: when stderr is a terminal).
    retry_failed : bool
        Run again the runs that failed before.
    plots : bool
        Write the plots (see :mod:`hapflow.study.plots`).
    worker_timeout : float
        Seconds to wait for ``scheduler`` to answer and to have a worker.
    lost_timeout : float
        Seconds to wait for a worker to join a cluster that has lost all of its workers
        (then a HapflowError names the runs that have not run; those that ended are
        recorded).

    Returns
    -------
    StudyResult
    """
    start = _time.perf_counter()
    store = Store(out, study.text)
    runs = expand(study)
    records = store.finished(retry_failed)
    pending = [s for s in runs if s.key not in records]
    by_index = {s.index: s for s in pending}
    bar = _progress(len(pending), progress)

    def emit(done: list[dict[str, Any]]) -> None:
        for record in done:
            spec = by_index[record["run"]]
            record.update(key=spec.key, params=spec.params, seed=spec.seed)
            records[spec.key] = record
        store.append(done)
        bar.update(len(done))

    client = cluster = None
    n_workers = 0
    threads = 1
    executed = len(pending)
    try:
        if workers is None:
            workers = os.cpu_count() or 1
            if not scheduler and len(pending) > 1:
                pending, pays = _probe(study, pending, emit)
                workers, threads = (workers, 1) if pays else (0, workers)
        if pending and (scheduler or workers > 0):
            client, cluster, n_workers = _client(workers, scheduler, worker_timeout)
        spread = n_workers or (threads if threads > 1 else 0)
        # a batch on numba's threads only where nothing else runs beside it
        todo = jobs(study, pending, spread, parallel=client is None and threads == 1)
        if client is not None:
            _dask(todo, client, emit, lost_timeout)
        else:
            _local(todo, emit, threads)
    finally:
        bar.close()
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        table = store.table(runs, records)
        store.write_table(table)
    files = {"table": store.table_path, "log": store.log_path}
    if plots:
        from .plots import plot_study
        files.update(plot_study(study, table, store.out))
    failed = int(table["status"].isin(("failed", "died")).sum())
    return StudyResult(table, store.out, executed, len(runs) - executed, failed,
                       _time.perf_counter() - start, n_workers, files, threads)
