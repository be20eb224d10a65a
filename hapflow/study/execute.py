"""Running a job of study runs in one process (a Dask worker, or the study's own process).

A :class:`Job` is plain data (picklable): the base graph's text, the
structural parameter values shared by its runs, and the runs' live
parameters and seeds.  Every process keeps the compiled
:class:`~hapflow.simulation.Simulation` of each structure it has met
(:data:`_CACHE`, least recently used first out), so a structure is compiled
once per worker - afterwards only the parameter array and the initial state
change (:meth:`Simulation.set`, :meth:`Simulation.reset`).  A job borrows a
simulation for its runs and gives it back: jobs running at once on threads of
one process (a study's threads, a Dask worker with several threads) each get
their own, built from the same compiled kernels.  Live parameters
an earlier job (another study on the same cluster) changed and this job
does not set go back to the graph file's values first.

Runs go either one by one through :meth:`Simulation.run` or together through
:class:`hapflow.batch.Batch`; both give bit-identical recordings.  A batch's
recordings stay columnar and its statistics metrics are computed for all
its runs at once (:func:`hapflow.study.metrics.compute_batch`, the same
sums in the same order as for a single run, so the metrics are identical
too); other metrics see one :class:`RunData` per run.  Graphs
with Python-side sinks (sound, MIDI) always run one by one, so the sinks
are drained.  With
``batch: auto`` the first job of a structure times one single run against a
small batch (simulation only, metrics excluded) and the faster path is kept
for that structure in this process.

A job simulates only what its metrics read: when they name their signals
(statistics, events), its graph is reduced to the blocks those signals come
from (:meth:`hapflow.graph.Graph.reduced`; blocks with guards or a Python side
stay), recording only them.  The metrics are the same bits as with the whole
graph, for less work: the rig sweep of ``bench/study.py`` drops the
impedance head (its two noise draws, four filter sections, two ADCs), the
velocity estimate and 12 of its 13 recorded signals.  Metrics that may read
anything (identify, force_nrmse, a user function) get the whole graph.

Every run is wrapped: an exception becomes a ``failed`` record carrying its
type and message, and the job goes on.
"""
from __future__ import annotations

import hashlib
import threading
import time as _time
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import yaml

from ..batch import KEEP_LOG_BYTES, WIDTH, Batch
from ..errors import HapflowError, SimulationError
from ..graph import Graph
from ..simulation import RunResult, Simulation
from .metrics import RunData, compute_all, compute_batch, signals_read

CACHE_SIZE = 8
"""Compiled structures kept per process."""
BATCH_BYTES = KEEP_LOG_BYTES
"""Recorded samples a batch may hold in memory, bytes: what a :class:`Batch` keeps between
calls, so that every batch of a job writes into memory already mapped (a larger log is
fresh memory each time: its first touch, page by page, took as long again as the rig
graph's kernel; ``bench/study.py``)."""
BATCH_RUNS = 256
"""Most runs in one batch."""
CALIBRATION_RUNS = WIDTH
"""Runs in the timing batch of ``batch: auto``: one full group of lanes (a smaller batch
pays for the lanes it leaves empty)."""


@dataclass
class Job:
    """Runs sharing one structure, with everything a worker needs (plain data).

    Attributes
    ----------
    graph_text, graph_file : str
        The base graph file's text and path (for error messages).
    structural : dict
        Structural ``block.param`` values of these runs.
    runs : list of (int, dict, int)
        Run index, live parameters (``block.param``; the seed is separate), seed.
    duration : float
        Simulated seconds per run.
    metrics : dict
        Normalised metric specs (:func:`hapflow.study.metrics.check_metric`).
    batch : {'auto', 'on', 'off'}
        Batched path selection.
    parallel : bool
        Let a batch use numba's threads (False in Dask workers: the processes
        are the parallelism).
    """

    graph_text: str
    graph_file: str
    structural: dict[str, Any]
    runs: list[tuple[int, dict[str, Any], int]]
    duration: float
    metrics: dict[str, dict[str, Any]]
    batch: str = "auto"
    parallel: bool = True

    @property
    def structure(self) -> str:
        """Key of the compiled structure."""
        h = hashlib.sha256(self.graph_text.encode())
        h.update(repr(sorted(self.structural.items())).encode())
        h.update(repr(signals_read(self.metrics)).encode())
        return h.hexdigest()[:16]

    @property
    def live_keys(self) -> frozenset[str]:
        """The live parameters its runs set."""
        return frozenset(key for _, live, _ in self.runs for key in live)

    def graph(self) -> Graph:
        """The graph its runs simulate: the base graph with the structural values, reduced to
        the signals the metrics read when they name them (see the module docstring)."""
        graph = build_graph(self.graph_text, self.graph_file, self.structural)
        signals = signals_read(self.metrics)
        return graph.reduced(signals) if signals else graph


@dataclass
class _Entry:
    sim: Simulation
    batches: dict[tuple[bool, frozenset[str]], Batch] = field(default_factory=dict)
    path: str | None = None           # 'single' or 'batch' once chosen (batch: auto)
    base: dict[str, Any] = field(default_factory=dict)    # live values as built
    changed: set[str] = field(default_factory=set)        # live keys set by earlier jobs

    def __post_init__(self) -> None:
        for name, node in self.sim.graph.nodes.items():
            for param, spec in node.block.params.items():
                if spec.live:
                    self.base[f"{name}.{param}"] = node.block.values[param]

    def prepare(self, keys: frozenset[str]) -> None:
        """Restore the live parameters earlier jobs changed and this job does not set."""
        for key in sorted(self.changed - keys):
            self.sim.set(key, self.base[key])
        self.changed = set(keys)

    def batch(self, parallel: bool, varied: frozenset[str]) -> Batch:
        """The batch for runs that set ``varied`` (every other value is a literal of its
        lanes kernel: :class:`Batch`)."""
        if (parallel, varied) not in self.batches:
            self.batches[(parallel, varied)] = Batch(self.sim, parallel, varied=varied)
        return self.batches[(parallel, varied)]


_CACHE: "OrderedDict[str, list[_Entry]]" = OrderedDict()
"""Idle simulations by structure key (those lent to running jobs are not in it)."""
_CACHE_LOCK = threading.Lock()


def build_graph(graph_text: str, graph_file: str, structural: dict[str, Any]):
    """The base graph with structural parameters replaced (rebuilt from its YAML)."""
    from ..yamlio import loads, to_dict
    graph = loads(graph_text, graph_file)
    if not structural:
        return graph
    data = to_dict(graph)
    for key, value in structural.items():
        block, _, param = key.partition(".")
        data["blocks"][block][param] = value
    return loads(yaml.safe_dump(data, sort_keys=False), graph_file)


def _lend(job: Job) -> _Entry:
    """An idle simulation of the job's structure, or a new one (the caller gives it back)."""
    with _CACHE_LOCK:
        idle = _CACHE.get(job.structure)
        if idle:
            return idle.pop()
    return _Entry(Simulation(job.graph()))


def _give_back(job: Job, entry: _Entry) -> None:
    with _CACHE_LOCK:
        _CACHE.setdefault(job.structure, []).append(entry)
        _CACHE.move_to_end(job.structure)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, HapflowError):
        return f"{type(exc).__name__}: {exc}"
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    at = f" (at {last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(exc).__name__}: {exc}{at}"


def _record(index: int, status: str, wall: float, path: str, metrics: dict | None = None,
            error: str | None = None, ticks: int = 0) -> dict[str, Any]:
    return {"run": index, "status": status, "error": error, "metrics": metrics or {},
            "sim_wall": wall, "path": path, "ticks": ticks}


def _graph_at(entry: _Entry, live: dict[str, Any]) -> Any:
    """The graph at a run's live values (for a metric that asks for it)."""
    for key, value in live.items():
        entry.sim.set(key, value)
    return entry.sim.graph


def _finish(entry: _Entry, job: Job, index: int, params: dict, seed: int,
            result: RunResult | BaseException, path: str, sim_params: dict) -> dict[str, Any]:
    """Metrics of one simulated run (or its failure record)."""
    if isinstance(result, BaseException):
        return _record(index, "failed", 0.0, path, error=_error_text(result))
    try:
        run = RunData(index, params, seed, result.time, result.signals, result.rate,
                      result.events, result.event_overflows, lambda: _graph_at(entry, sim_params))
        metrics = compute_all(job.metrics, run)
    except Exception as exc:  # noqa: BLE001 - a failed metric fails this run only
        return _record(index, "failed", result.wall, path, error=_error_text(exc),
                       ticks=result.ticks)
    return _record(index, "ok", result.wall, path, metrics, ticks=result.ticks)


def _single(entry: _Entry, live: dict[str, Any], seed: int, duration: float) -> RunResult:
    sim = entry.sim
    start = _time.perf_counter()
    for key, value in live.items():
        sim.set(key, value)
    sim.reset(seed)
    result = sim.run(duration, progress=False)
    result.wall = _time.perf_counter() - start
    return result


class _Out:
    """Records of a job, handed to ``emit`` as they are made (for the resume log)."""

    def __init__(self, emit: Callable[[list[dict[str, Any]]], None] | None):
        self.records: list[dict[str, Any]] = []
        self.emit = emit

    def add(self, records: list[dict[str, Any]]) -> None:
        self.records += records
        if self.emit is not None and records:
            self.emit(records)


def _run_single(entry: _Entry, job: Job, runs: list, out: _Out) -> None:
    for index, live, seed in runs:
        try:
            result: RunResult | BaseException = _single(entry, live, seed, job.duration)
        except Exception as exc:  # noqa: BLE001 - recorded, the study goes on
            result = exc
        out.add([_finish(entry, job, index, {**job.structural, **live}, seed, result,
                         "single", live)])


def _run_batched(entry: _Entry, job: Job, runs: list, out: _Out) -> None:
    batch = entry.batch(job.parallel, job.live_keys)
    size = batch_size(batch, job.duration)
    for k in range(0, len(runs), size):
        out.add(_batch_records(entry, job, batch, runs[k:k + size]))


def batch_size(batch: Batch, duration: float | None) -> int:
    """Runs per batch: as many as :data:`BATCH_BYTES` and :data:`BATCH_RUNS` allow, cut down
    to whole groups of lanes for each thread when that leaves at least one per thread (a
    part-filled group computes its empty lanes all the same; threads with unequal shares
    wait for the last)."""
    fit = max(1, min(BATCH_RUNS, BATCH_BYTES // max(1, batch.log_bytes(duration))))
    step = WIDTH * batch.threads
    return fit // step * step if fit >= step else fit


def _batch_records(entry: _Entry, job: Job, batch: Batch, part: list) -> list[dict[str, Any]]:
    """Records of one batch of runs: simulated together, metrics computed over all of them."""
    start = _time.perf_counter()
    try:
        records, good, errors = batch.simulate([live for _, live, _ in part],
                                               [s for _, _, s in part], job.duration)
    except Exception as exc:  # noqa: BLE001
        records, good, errors = None, [], [exc] * len(part)
    wall = (_time.perf_counter() - start) / len(part)
    results: list[Any] = list(errors)
    if records is not None:
        def run_data(j: int) -> RunData:
            index, live, seed = part[good[j]]
            return RunData(index, {**job.structural, **live}, seed, records.time,
                           records.signals(j), records.sim.graph.rate,
                           int(records.events[j]), int(records.event_overflows[j]),
                           lambda: _graph_at(entry, live))
        unstable = {good[j] for j, ok in enumerate(records.finite) if not ok}
        skip = [SimulationError("non-finite") if not ok else None for ok in records.finite]
        for j, value in enumerate(compute_batch(job.metrics, records, run_data, skip)):
            results[good[j]] = value
    ticks = batch.ticks(job.duration)
    done = []
    for position, (run, result, error) in enumerate(zip(part, results, errors)):
        if records is not None and position in unstable:
            # the single path says when the state went non-finite: same text either way
            single = _Out(None)
            _run_single(entry, job, [run], single)
            done += single.records
        elif error is not None:                       # not simulated
            done.append(_record(run[0], "failed", 0.0, "batch", error=_error_text(error)))
        elif isinstance(result, BaseException):       # a metric failed
            done.append(_record(run[0], "failed", wall, "batch", error=_error_text(result),
                                ticks=ticks))
        else:
            done.append(_record(run[0], "ok", wall, "batch", result, ticks=ticks))
    return done


def _calibrate(entry: _Entry, job: Job, runs: list, out: _Out) -> list:
    """Time one single run against a small batch and keep the faster path; returns the rest."""
    first, trial, rest = runs[:1], runs[1:1 + CALIBRATION_RUNS], runs[1 + CALIBRATION_RUNS:]
    mark = len(out.records)
    _run_single(entry, job, first, out)
    _run_batched(entry, job, trial, out)
    done = out.records[mark:]
    t_batch = [r["sim_wall"] for r in done[1:] if r["status"] == "ok" and r["path"] == "batch"]
    if done[0]["status"] == "ok" and t_batch:
        entry.path = "batch" if min(t_batch) < done[0]["sim_wall"] else "single"
    return rest


def execute(job: Job, emit: Callable[[list[dict[str, Any]]], None] | None = None
            ) -> list[dict[str, Any]]:
    """Run every run of ``job``; one record per run, failures included.

    Each record: ``run`` (index), ``status`` ('ok' or 'failed'), ``error``
    (text or None), ``metrics`` (column -> value), ``sim_wall`` (s of
    simulation and its set-up, metrics excluded), ``path`` ('single' or
    'batch'), ``ticks``.  ``emit``, if given, receives the records as they
    are made (run by run, or batch by batch).  Only ``KeyboardInterrupt``
    and the like escape; every ``Exception`` becomes a failed record.
    """
    out = _Out(emit)
    try:
        entry = _lend(job)
    except Exception as exc:  # noqa: BLE001 - e.g. an invalid structural value
        text = _error_text(exc)
        out.add([_record(i, "failed", 0.0, "single", error=text) for i, _, _ in job.runs])
        return out.records
    try:
        _run(entry, job, out)
    finally:
        _give_back(job, entry)
    return out.records


def _run(entry: _Entry, job: Job, out: _Out) -> None:
    """Every run of ``job`` on ``entry``'s simulation, single or batched."""
    runs = list(job.runs)
    entry.prepare(job.live_keys)
    sinks = getattr(entry.sim, "sinks", None)       # Python-side sinks drain between chunks
    if job.batch == "auto" and entry.path is None and len(runs) > CALIBRATION_RUNS and not sinks:
        runs = _calibrate(entry, job, runs, out)
    use_batch = job.batch == "on" or (job.batch == "auto" and entry.path == "batch")
    if use_batch and len(runs) > 1 and not sinks:
        _run_batched(entry, job, runs, out)
    else:
        _run_single(entry, job, runs, out)
