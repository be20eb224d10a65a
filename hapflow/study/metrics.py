"""Metrics computed from every run of a study; each gives one or more result columns.

Built-in (``name: {kind: argument, ...}`` in the study file's ``metrics:``):

``{rms|peak|final|mean|min|max: block.port, after: S}``
    statistic of a recorded signal (``block.port[j]`` picks component ``j``
    of a vector signal) over the samples at ``t >= after`` (s, default 0);
    ``peak`` is the largest absolute value.  Sums (``rms``, ``mean``) add the
    samples in time order, so a run gives the same bits alone or in a batch
    (:func:`compute_batch`).  Column: ``name``.
``{events: located|overflow}``
    event count of the run (:class:`hapflow.simulation.RunResult`).
``{identify: {method, segments, forgetting, grid, pos, force, acc, velocity, cutoff, ...}}``
    identify the impedance model from the run's recording
    (:func:`hapflow.ident.pipeline.identify`, data prepared by
    :func:`hapflow.ident.prep.from_recording`) and compare it with the
    device's truth (the block with an ``impedance`` method, at this run's
    parameters; :func:`hapflow.ident.report.truth_errors`).  Columns:
    ``name.fit_nrmse`` (force NRMSE of the fit, %) and, per identified
    parameter p in m, b, k, F0, ``name.p_error``: RMS error over the
    identified position range / RMS of the truth, %, the worse direction
    (NaN where the truth is zero, e.g. no dashpot), and ``name.p_rms``: that
    RMS error in the parameter's unit (kg, N s/m, N/m, N).
``{force_nrmse: {model: FILE, pos, force, acc, ...}}``
    force NRMSE (%) of a model file (relative to the study file; its text
    travels with the jobs, so remote workers need no copy) replayed on the
    run's recorded motion (:func:`hapflow.ident.verify.verify`).
``{function: package.module.function, args: {...}}``
    a user metric ``function(run, **args)`` returning a number or a dict of
    numbers (columns ``name.key``); ``run`` is a :class:`RunData`.

User functions come only from allowed modules: the top-level package of the
dotted path must be ``hapflow``, a module registered by an installed
plug-in under the entry-point group ``hapflow.metrics``, a name in the
environment variable ``HAPFLOW_METRIC_MODULES`` (comma-separated) or one
given with ``hapflow study --allow MODULE``.  Nothing is imported before
that check.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from numba import njit

from ..errors import HapflowError, suggest, valid_list
from ..graph import Graph

STATS = ("rms", "peak", "final", "mean", "min", "max")
EVENT_KINDS = ("located", "overflow")
KINDS = (*STATS, "events", "identify", "force_nrmse", "function")
IDENT_KEYS = ("method", "segments", "forgetting", "grid", "regressors")
PREP_KEYS = ("pos", "force", "acc", "velocity", "order", "cutoff", "crossover", "highpass",
             "deadband", "trim")
ENTRY_POINT_GROUP = "hapflow.metrics"
ENV_ALLOW = "HAPFLOW_METRIC_MODULES"


class MetricError(HapflowError):
    """A metric that cannot be computed or is badly specified."""


@dataclass
class RunData:
    """One finished run, as metric functions see it.

    Attributes
    ----------
    index : int
        Run number in the study.
    params : dict
        The varied parameters of this run (``block.param`` or ``seed``).
    seed : int
        Graph seed of the run.
    time : ndarray
        Sample times, s.
    signals : dict of ndarray
        Recorded signals ``block.port`` (first axis time).
    rate : float
        Base rate, Hz.
    events, event_overflows : int
        Located events and dropped events (:class:`~hapflow.simulation.RunResult`).
    graph : Graph
        The graph with this run's parameter values (for a device's truth);
        set up on first access.
    """

    index: int
    params: dict[str, Any]
    seed: int
    time: np.ndarray
    signals: dict[str, np.ndarray]
    rate: float
    events: int = 0
    event_overflows: int = 0
    graph_at: Callable[[], Graph | None] | None = field(default=None, repr=False)

    @property
    def graph(self) -> Graph | None:
        """The graph at this run's parameter values (None if unknown)."""
        return self.graph_at() if self.graph_at is not None else None


# ----------------------------------------------------------------- allow-list
def allowed_modules(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Modules user metrics may come from (see the module docstring)."""
    from importlib.metadata import entry_points
    names = {"hapflow", *extra}
    names.update(n.strip() for n in os.environ.get(ENV_ALLOW, "").split(",") if n.strip())
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        names.add(ep.value.split(":")[0].strip())
    return tuple(sorted(names))


def resolve(path: str, allow: tuple[str, ...] = ()) -> Callable:
    """The function named by dotted ``path``, if its module is on the allow-list.

    Raises
    ------
    MetricError
        If the path is malformed, its module not allowed or not installed,
        or it names no callable.
    """
    if not isinstance(path, str) or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", path):
        raise MetricError(f"function must be a dotted path package.module.function, got {path!r}")
    module_name, _, attr = path.rpartition(".")
    allowed = allowed_modules(allow)
    if not any(module_name == a or module_name.startswith(a + ".") for a in allowed):
        raise MetricError(f"module {module_name!r} is not on the allow-list of metric modules "
                          f"({', '.join(allowed)}); allow it with hapflow study --allow "
                          f"{module_name.split('.')[0]}, the environment variable {ENV_ALLOW}, "
                          f"or an entry point in the group {ENTRY_POINT_GROUP!r}")
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise MetricError(f"module {module_name!r} is not installed")
    fn = getattr(importlib.import_module(module_name), attr, None)
    if not callable(fn):
        raise MetricError(f"{module_name!r} has no function {attr!r}")
    return fn


@functools.lru_cache(maxsize=64)
def _resolved(path: str, allow: tuple[str, ...], env: str) -> Callable:
    """:func:`resolve`, once per path, allow-list and environment (``env`` keys the cache)."""
    return resolve(path, allow)


# ----------------------------------------------------------------- checking
def _signal(ref: Any, graph: Graph) -> tuple[str, int | None]:
    if not isinstance(ref, str):
        raise MetricError(f"name a recorded signal as block.port, got {ref!r}")
    m = re.fullmatch(r"\s*([\w]+\.[\w]+)\s*(?:\[(\d+)\])?\s*", ref)
    recorded = [f"{b}.{p}" for b, p in graph.recorded]
    if not m or m.group(1) not in recorded:
        name = m.group(1) if m else ref
        raise MetricError(f"signal {name!r} is not recorded by the graph{suggest(name, recorded)} "
                          f"Recorded: {valid_list(recorded)}")
    return m.group(1), (int(m.group(2)) if m.group(2) is not None else None)


def _prep(spec: dict[str, Any], graph: Graph, keys: tuple[str, ...]) -> dict[str, Any]:
    for key in spec:
        if key not in keys:
            raise MetricError(f"unknown setting {key!r}{suggest(key, keys)} Valid: "
                              f"{', '.join(keys)}")
    for key in ("pos", "force", "acc"):
        if spec.get(key) is not None:
            _signal(spec[key], graph)
    return dict(spec)


def check_metric(name: str, spec: Any, graph: Graph, base_dir: Path,
                 allow: tuple[str, ...] = ()) -> dict[str, Any]:
    """Validate one ``metrics:`` entry and return it normalised (plain data, picklable).

    Raises
    ------
    MetricError
        Saying what is wrong and what is valid.
    """
    if not isinstance(spec, dict) or not spec:
        raise MetricError(f"write a mapping such as {{rms: block.port}}; kinds: {', '.join(KINDS)}")
    kinds = [k for k in spec if k in KINDS]
    if len(kinds) != 1:
        extra = [k for k in spec if k not in KINDS]
        hint = suggest(str(extra[0]), KINDS) if extra else "."
        raise MetricError(f"needs exactly one kind out of {', '.join(KINDS)}, got "
                          f"{', '.join(map(str, spec)) or 'none'}{hint}")
    kind = kinds[0]
    rest = {k: v for k, v in spec.items() if k != kind}
    arg = spec[kind]
    if kind in STATS:
        if set(rest) - {"after"}:
            raise MetricError(f"unknown key(s) {sorted(set(rest) - {'after'})}; a {kind} metric "
                              "takes the signal and optionally 'after' (s)")
        after = rest.get("after", 0.0)
        if isinstance(after, bool) or not isinstance(after, (int, float)) or after < 0:
            raise MetricError(f"'after' must be a time >= 0 s, got {after!r}")
        signal, index = _signal(arg, graph)
        return {"kind": "stat", "stat": kind, "signal": signal, "index": index,
                "after": float(after)}
    if kind == "function" and set(rest) == {"args"}:    # the README's {function: F, args: A}
        arg, rest = {"path": arg, "args": rest["args"]}, {}
    if rest:
        raise MetricError(f"unknown key(s) {sorted(rest)} beside {kind!r}"
                          + ("; user arguments go under 'args'" if kind != "function" else ""))
    if kind == "events":
        if arg not in EVENT_KINDS:
            raise MetricError(f"events must be one of {', '.join(EVENT_KINDS)}, got {arg!r}")
        return {"kind": "events", "which": arg}
    if kind == "identify":
        arg = {} if arg is None else arg
        if not isinstance(arg, dict):
            raise MetricError(f"identify takes a mapping of settings, got {arg!r}")
        settings = _prep(arg, graph, IDENT_KEYS + PREP_KEYS)
        from ..ident.pipeline import METHODS
        if settings.get("method", "segmented") not in METHODS:
            raise MetricError(f"method must be one of {', '.join(METHODS)}, got "
                              f"{settings['method']!r}")
        return {"kind": "identify", "settings": settings}
    if kind == "force_nrmse":
        if not isinstance(arg, dict) or "model" not in arg:
            raise MetricError("force_nrmse needs {model: FILE} (a model from hapflow identify)")
        settings = _prep({k: v for k, v in arg.items() if k != "model"}, graph, PREP_KEYS)
        path = Path(str(arg["model"]))
        path = path if path.is_absolute() else base_dir / path
        try:
            found = path.is_file()
        except OSError as exc:                 # a name too long for the file system
            raise MetricError(f"model file {str(arg['model'])!r}: {exc.strerror}") from None
        if not found:
            raise MetricError(f"model file {str(arg['model'])!r} not found (looked for {path})")
        from ..blocks.impedance_model import ImpedanceModel
        from ..yamlio import read_text
        text = read_text(path, "model file")
        ImpedanceModel.from_yaml(text, str(path))         # a model file, or a clear error now
        return {"kind": "force_nrmse", "model": str(path), "model_text": text,
                "settings": settings}
    args = {}
    if isinstance(arg, dict):
        arg = dict(arg)
        args = arg.pop("args", {}) or {}
        path = arg.pop("path", None)
        if arg or not isinstance(args, dict):
            raise MetricError("function takes a dotted path, or {path: ..., args: {...}}")
    else:
        path = arg
    resolve(path, allow)
    return {"kind": "function", "function": path, "args": args, "allow": list(allow)}


def signals_read(metrics: dict[str, dict[str, Any]]) -> list[str] | None:
    """The recorded signals that normalised ``metrics`` read, in first-use order; None when
    one may read any signal or the graph (identify, force_nrmse, a user function).

    A study simulates just what they read (:meth:`hapflow.graph.Graph.reduced`);
    ``events`` reads no signal (every block with guards stays)."""
    out: list[str] = []
    for spec in metrics.values():
        if spec["kind"] == "stat":
            out.append(spec["signal"])
        elif spec["kind"] != "events":
            return None
    return list(dict.fromkeys(out))


# ----------------------------------------------------------------- computing
@njit(cache=True)
def _sums(values: np.ndarray, column: int, first: int, squares: bool) -> np.ndarray:
    """Sums over time (axis 1, from index ``first``) of column ``column`` of ``values``
    ``(a, n, columns, b)`` (of the squares if ``squares``), each added in time order:
    the same bits for a run alone or among many."""
    out = np.zeros((values.shape[0], values.shape[3]))
    for i in range(values.shape[0]):
        for k in range(first, values.shape[1]):
            for j in range(values.shape[3]):
                v = values[i, k, column, j]
                out[i, j] += v * v if squares else v
    return out


def _reduce(stat: str, values: np.ndarray, column: int = 0, first: int = 0) -> np.ndarray:
    """Statistic ``stat`` over time of column ``column`` of ``values`` ``(a, n, columns,
    b)`` from time index ``first`` on, float64, one per ``(a, b)``: one definition for a
    single run (``(1, n, 1, 1)``) and for many runs at once."""
    if stat in ("rms", "mean"):
        mean = _sums(values, column, first, stat == "rms") / (values.shape[1] - first)
        return np.sqrt(mean) if stat == "rms" else mean
    series = values[:, first:, column, :]
    if stat == "peak":
        return np.maximum(np.max(series, axis=1), -np.min(series, axis=1))
    if stat == "final":
        return series[:, -1, :]
    return {"min": np.min, "max": np.max}[stat](series, axis=1)


def _first_sample(spec: dict[str, Any], time: np.ndarray, rate: float) -> int:
    """Index of the first sample at ``t >= after`` (half a tick of tolerance)."""
    first = int(np.searchsorted(time, spec["after"] - 0.5 / rate, side="left"))
    if first >= time.size:
        raise MetricError(f"no samples of {spec['signal']} at t >= {spec['after']:g} s")
    return first


def _stat(spec: dict[str, Any], run: RunData) -> float:
    values = np.asarray(run.signals[spec["signal"]], dtype=np.float64)
    values = values.reshape(values.shape[0], -1)
    column = np.ascontiguousarray(values[_first_sample(spec, run.time, run.rate):,
                                         spec["index"] or 0])
    return float(_reduce(spec["stat"], column.reshape(1, -1, 1, 1))[0, 0])


def _recording(run: RunData) -> Any:
    from ..recorder import Recording
    return Recording(run.time, run.signals, {}, {"rate": run.rate})


def _motion(run: RunData, settings: dict[str, Any]) -> Any:
    from ..ident.prep import from_recording
    kw = {k: v for k, v in settings.items() if k in PREP_KEYS}
    return from_recording(_recording(run), **kw)


def _truth(graph: Graph | None) -> Any:
    from ..ident.truth import Truth
    for name, node in (graph.nodes.items() if graph is not None else ()):
        if callable(getattr(type(node.block), "impedance", None)):
            return Truth(name, node.block.impedance)
    return None


def _identify(spec: dict[str, Any], run: RunData) -> dict[str, float]:
    from ..ident.pipeline import identify
    from ..ident.report import identified, truth_errors
    settings = spec["settings"]
    model = identify(_motion(run, settings), settings.get("method", "segmented"),
                     **{k: settings[k] for k in ("segments", "forgetting", "grid", "regressors")
                        if k in settings})
    out = {"fit_nrmse": float(model.fit["nrmse_percent"])}
    truth = _truth(run.graph)
    if truth is None:
        return out
    errs = truth_errors(model, truth)
    for p in identified(model):
        rel = [100.0 * errs[d][p]["rms"] / errs[d][p]["scale"] for d in (1, -1)
               if errs[d][p]["scale"] > 0]
        out[f"{p}_error"] = max(rel) if rel else math.nan
        out[f"{p}_rms"] = max(errs[d][p]["rms"] for d in (1, -1))
    return out


def _force_nrmse(spec: dict[str, Any], run: RunData) -> float:
    from ..blocks.impedance_model import ImpedanceModel
    from ..ident.verify import verify
    model = ImpedanceModel.from_yaml(spec["model_text"], spec["model"])   # shipped with the job
    return float(verify(model, _recording(run), **spec["settings"]).nrmse_percent)


def compute(name: str, spec: dict[str, Any], run: RunData) -> dict[str, float]:
    """Columns of metric ``name`` (normalised ``spec``) for ``run``."""
    kind = spec["kind"]
    if kind == "stat":
        value: Any = _stat(spec, run)
    elif kind == "events":
        value = run.events if spec["which"] == "located" else run.event_overflows
    elif kind == "identify":
        value = _identify(spec, run)
    elif kind == "force_nrmse":
        value = _force_nrmse(spec, run)
    else:
        value = _resolved(spec["function"], tuple(spec.get("allow", ())),
                          os.environ.get(ENV_ALLOW, ""))(run, **spec["args"])
    if isinstance(value, dict):
        return {f"{name}.{k}": _number(name, v) for k, v in value.items()}
    return {name: _number(name, value)}


def column_units(metrics: dict[str, dict[str, Any]], graph: Graph) -> dict[str, str]:
    """The unit of every result column whose unit is known (``"%"`` for percentages, ``""``
    for counts); a user function's columns have none.

    ``graph`` must pass its checks (a study's graph does): a statistic takes the unit of its
    signal, an identified parameter's RMS error that of the parameter.
    """
    from ..blocks.impedance_model import UNITS
    signals = graph.check().units
    units: dict[str, str] = {}
    for name, spec in metrics.items():
        kind = spec["kind"]
        if kind == "stat":
            unit = signals[tuple(spec["signal"].split("."))]
            if unit is not None and not unit.startswith("="):
                units[name] = unit
        elif kind == "events":
            units[name] = ""
        elif kind == "force_nrmse":
            units[name] = "%"
        elif kind == "identify":
            units[f"{name}.fit_nrmse"] = "%"
            for p in ("m", "b", "k", "F0"):
                units[f"{name}.{p}_error"] = "%"
                units[f"{name}.{p}_rms"] = UNITS[p]
    return units


def _number(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise MetricError(f"metric {name!r} returned {value!r}, not a number") from None


def compute_all(metrics: dict[str, dict[str, Any]], run: RunData) -> dict[str, float]:
    """Every metric's columns for ``run`` (a failing metric fails the run)."""
    out: dict[str, float] = {}
    for name, spec in metrics.items():
        out.update(compute(name, spec, run))
    return out


def _columnar(spec: dict[str, Any], records: Any) -> np.ndarray:
    """A ``stat`` or ``events`` metric of every run of ``records`` (float64, one per run)."""
    if spec["kind"] == "events":
        counts = records.events if spec["which"] == "located" else records.event_overflows
        return np.asarray(counts, dtype=np.float64)
    first = _first_sample(spec, records.time, records.sim.graph.rate)
    values, column = records.component(spec["signal"], spec["index"])
    with np.errstate(over="ignore", invalid="ignore"):      # runs that blew up fail anyway
        reduced = _reduce(spec["stat"], values, column, first)
    return np.asarray(records.per_run(reduced), dtype=np.float64)


def compute_batch(metrics: dict[str, dict[str, Any]], records: Any,
                  run: Callable[[int], RunData], failed: list[BaseException | None]
                  ) -> list[dict[str, float] | BaseException]:
    """Every metric's columns for every run of a batch (:class:`hapflow.batch.Records`).

    Statistics of recorded signals and event counts are computed for all
    runs at once from the columnar recordings (the same definitions and
    bits as :func:`compute`: sums add the samples in time order);
    other metrics run per run on ``run(j)``.  As in :func:`compute_all`, a
    run's first failing metric (in the order of ``metrics``) fails it and
    its later metrics are not computed.

    Parameters
    ----------
    metrics : dict
        Normalised metric specs.
    records : Records
        The batch's recordings (``runs``, ``time``, ``events``,
        ``event_overflows``, ``component``: an array ``(a, ticks, columns,
        b)`` and a column, ``per_run``: ``(a, b)`` values to one per run).
    run : callable
        ``run(j)``: run ``j`` as :class:`RunData`.
    failed : list
        Per run, an error that already failed it (its metrics are skipped), or None.

    Returns
    -------
    list
        Per run, its metric columns, or the exception that failed it.
    """
    failed = list(failed)
    out: list[dict[str, float]] = [{} for _ in failed]
    data: dict[int, RunData] = {}
    for name, spec in metrics.items():
        if spec["kind"] in ("stat", "events"):
            try:
                column = _columnar(spec, records).tolist()
            except Exception as exc:  # noqa: BLE001 - fails every run still going
                failed = [f if f is not None else exc for f in failed]
                continue
            for j, value in enumerate(column):
                if failed[j] is None:
                    out[j][name] = value
            continue
        for j in range(len(failed)):
            if failed[j] is not None:
                continue
            try:
                if j not in data:
                    data[j] = run(j)
                out[j].update(compute(name, spec, data[j]))
            except Exception as exc:  # noqa: BLE001 - a failed metric fails this run only
                failed[j] = exc
    return [f if f is not None else o for o, f in zip(out, failed)]
