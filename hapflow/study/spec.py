"""The study file: a base graph, the parameters to vary, the design, the metrics.

Parsed with the same safe, line-located reader as graph files
(:mod:`hapflow.yamlio`), so every error names the file, the line, the key
and what would be valid::

    name: spring-sweep
    graph: ../colton2005_sweep.yaml   # base graph, relative to this file
    duration: 12                      # s per run (default: the graph's)
    seed: 1                           # graph seed of every run; also seeds random/lhs designs
    set: {traj.sweep_time: 20}        # fixed block.param values for every run
    design: grid                      # grid | random | lhs
    samples: 50                       # random / lhs: number of runs
    parameters:                       # block.param (live or structural) or seed
      dev.k_outer: [1600, 2400, 3200]               # grid: values
      dev.x_transition: {low: 0.008, high: 0.016, num: 3}   # grid: evenly spaced (scale: log)
      seed: {low: 1, high: 200, step: 1}                    # grid: integers low..high
      # random / lhs: {low: L, high: H, scale: linear|log, integer: false} or a list of choices
    metrics:
      force_rms: {rms: head.force, after: 1.0}      # rms | peak | final | mean | min | max
      ident: {identify: {method: segmented, segments: 8}}
      render: {force_nrmse: {model: model.yaml}}
      events: {events: located}                     # located | overflow
      energy: {function: mypkg.metrics.energy, args: {gain: 2}}
    batch: auto                       # auto | on | off (see hapflow.batch)

User metric functions are resolved against an allow-list (see
:mod:`hapflow.study.metrics`), never imported from whatever the file names.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from ..errors import GraphError, HapflowError, Where, suggest, valid_list
from ..graph import MAX_DURATION, MAX_SEED, Graph
from ..yamlio import Reader, load, read_text

TOP_KEYS = ("name", "graph", "duration", "seed", "set", "design", "samples", "parameters",
            "metrics", "batch")
DESIGNS = ("grid", "random", "lhs")
BATCH_MODES = ("auto", "on", "off")
MAX_RUNS = 100_000
"""Most runs a study may have (its table and design are allocated at the start)."""
SEED = "seed"
"""Parameter key that varies the graph seed (the random streams) instead of a block parameter."""


class StudyError(GraphError):
    """A study file that cannot be used: names the file, line and key, and what is valid."""


@dataclass
class Parameter:
    """One varied parameter.

    Attributes
    ----------
    key : str
        ``block.param`` or ``seed``.
    spec : object
        A list of values, or a mapping with ``low``, ``high`` and ``num`` /
        ``step`` (grid) or ``scale`` / ``integer`` (random, lhs).
    live : bool
        True if it changes without recompiling (live parameters and the seed).
    where : Where
        Its place in the study file.
    """

    key: str
    spec: Any
    live: bool
    where: Where = field(default_factory=Where)


@dataclass
class Study:
    """A parsed study file (see the module docstring)."""

    name: str
    file: str | None
    graph_path: Path
    graph_text: str
    duration: float
    seed: int | None
    design: str
    samples: int | None
    parameters: list[Parameter]
    metrics: dict[str, dict[str, Any]]
    batch: str
    fixed: dict[str, Any]
    text: str
    base_dir: Path
    graph: Graph
    allow: tuple[str, ...] = ()

    def is_live(self, key: str) -> bool:
        """True if ``key`` (``block.param`` or ``seed``) changes without recompiling."""
        if key == SEED:
            return True
        block, _, param = key.partition(".")
        return self.graph.nodes[block].block.params[param].live

    @cached_property
    def fingerprint(self) -> str:
        """Hash of what decides the runs' results: graph text, duration, metrics."""
        h = hashlib.sha256()
        for part in (self.graph_text, repr(self.duration), repr(sorted(self.metrics.items())),
                     repr(sorted(self.fixed.items()))):
            h.update(part.encode())
        return h.hexdigest()[:16]


def _number(r: Reader, node: yaml.Node, what: str, integer: bool = False,
            positive: bool = False, high: float = math.inf) -> float | int:
    value = r.value(node)
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    low = 0 if positive else -math.inf
    if isinstance(value, bool) or not ok or not math.isfinite(value) \
            or not (low < value <= high):
        kind = "an integer" if integer else "a number"
        shown = f"{high:g}" if isinstance(high, float) else str(high)   # an int seed in full
        bounds = (" > 0" if positive else "") + (f" and at most {shown}" if high < math.inf else "")
        raise StudyError(f"{what} must be {kind}{bounds}, got {value!r}", r.at(node), key=what)
    return value


def grid_size(spec: Any) -> float:
    """Number of values of one grid parameter (a float: a range may ask for 1e12)."""
    if isinstance(spec, list):
        return len(spec)
    if "num" in spec:
        return spec["num"]
    return math.floor((spec["high"] - spec["low"]) / spec["step"] * (1 + 1e-12)) + 1


def _check_values(key: str, values: list[Any], where: Where, graph: Graph) -> None:
    """Each value (or range end) as the parameter accepts it: a number, in its range."""
    if key == SEED:
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int)
               or not 0 <= v <= MAX_SEED]
        if bad:
            raise StudyError(f"seeds must be integers from 0 to {MAX_SEED}, got {bad[0]!r}",
                             where, key=key)
        return
    block, _, param = key.partition(".")
    for value in values:
        try:
            graph.nodes[block].block.params[param].coerce(value)
        except ValueError as exc:
            raise StudyError(f"parameter {key!r}: value {value!r}: {exc}", where,
                             key=key) from None


def _choice(r: Reader, node: yaml.Node, what: str, valid: tuple[str, ...]) -> str:
    value = r.value(node)
    if value not in valid:
        raise StudyError(f"{what} must be one of {', '.join(valid)}, got {value!r}"
                         f"{suggest(str(value), valid)}", r.at(node), key=what)
    return value


def _graph(r: Reader, node: yaml.Node, base_dir: Path) -> tuple[Path, str, Graph]:
    name = r.value(node)
    if not isinstance(name, str) or not name:
        raise StudyError(f"'graph' must be the path of a graph file, got {name!r}", r.at(node),
                         key="graph")
    path = Path(name) if Path(name).is_absolute() else base_dir / name
    try:
        found = path.is_file()
    except OSError as exc:                     # a name too long for the file system
        raise StudyError(f"graph file {name!r}: {exc.strerror}", r.at(node),
                         key="graph") from None
    if not found:
        raise StudyError(f"graph file {name!r} not found (looked for {path}; a relative path is "
                         "relative to the study file)", r.at(node), key="graph")
    return path, read_text(path), load(path)


def _live(key: str, where: Where, graph: Graph) -> bool:
    """True if ``key`` (``block.param`` or ``seed``) is live; errors for unknown names."""
    if key == SEED:
        return True
    block, _, param = key.partition(".")
    if block not in graph.nodes or not param:
        raise StudyError(f"parameter {key!r}: write block.param with a block of the graph"
                         f"{suggest(block, graph.nodes)} Blocks: {valid_list(graph.nodes)} "
                         f"(or '{SEED}' for the random seed)", where, key=key)
    params = graph.nodes[block].block.params
    if param not in params:
        kind = type(graph.nodes[block].block).__name__
        raise StudyError(f"parameter {key!r}: {kind} has no parameter {param!r}"
                         f"{suggest(param, params)} Valid: {valid_list(params)}", where,
                         key=key)
    return params[param].live


def _fixed(r: Reader, node: yaml.Node, graph: Graph) -> dict[str, Any]:
    out = {}
    for key, key_node, value_node in r.mapping(node, "set"):
        if key == SEED:
            raise StudyError("'set' takes block.param keys; the seed of every run is the "
                             "top-level 'seed'", r.at(key_node), key=key)
        _live(key, r.at(key_node), graph)
        out[key] = r.value(value_node)
    return out


def _parameter(r: Reader, key: str, key_node: yaml.Node, value_node: yaml.Node,
               graph: Graph, design: str) -> Parameter:
    where = r.at(key_node)
    live = _live(key, where, graph)
    if isinstance(value_node, yaml.SequenceNode):
        values = r.value(value_node)
        if not values:
            raise StudyError(f"parameter {key!r}: the list of values is empty", where, key=key)
        _check_values(key, values, where, graph)
        return Parameter(key, list(values), live, where)
    fields = {k: (kn, vn) for k, kn, vn in r.mapping(value_node, f"parameter {key!r}")}
    allowed = ("low", "high", "num", "step", "scale") if design == "grid" else \
              ("low", "high", "scale", "integer")
    for k, (kn, _) in fields.items():
        if k not in allowed:
            raise StudyError(f"parameter {key!r}: unknown key {k!r}{suggest(k, allowed)} Valid "
                             f"keys for a {design} design: {', '.join(allowed)} (or a list of "
                             "values)", r.at(kn), key=key)
    for k in ("low", "high"):
        if k not in fields:
            raise StudyError(f"parameter {key!r} needs '{k}' (and 'high'/'low'), or a list of "
                             "values", where, key=key)
    spec = {k: r.value(vn) for k, (_, vn) in fields.items()}
    for k in ("low", "high", "num", "step"):
        if k in spec:
            _number(r, fields[k][1], f"{key}.{k}", integer=(k == "num"),
                    positive=k in ("num", "step"))
    if spec["high"] < spec["low"]:
        raise StudyError(f"parameter {key!r}: high ({spec['high']!r}) is below low "
                         f"({spec['low']!r})", where, key=key)
    if key == SEED and not (all(isinstance(spec.get(k, 1), int) for k in ("low", "high", "step"))
                            and (spec.get("integer") or "step" in spec)):
        raise StudyError("seeds must be integers: write {low: 1, high: 200, step: 1} (grid) or "
                         "{low: 1, high: 10000, integer: true} (random, lhs)", where, key=key)
    if design == "grid" and ("num" in spec) == ("step" in spec):
        raise StudyError(f"parameter {key!r}: a grid range needs exactly one of 'num' (evenly "
                         "spaced values) or 'step'", where, key=key)
    if spec.get("scale", "linear") not in ("linear", "log"):
        raise StudyError(f"parameter {key!r}: scale must be linear or log, got "
                         f"{spec['scale']!r}", r.at(fields["scale"][0]), key=key)
    if spec.get("scale") == "log" and not spec["low"] > 0:
        raise StudyError(f"parameter {key!r}: a log scale needs low > 0", where, key=key)
    if key != SEED:
        _check_values(key, [spec["low"], spec["high"]], where, graph)
    if design == "grid" and grid_size(spec) > MAX_RUNS:
        raise StudyError(f"parameter {key!r}: the range has {grid_size(spec):.3g} values; a "
                         f"study runs at most {MAX_RUNS:,}", where, key=key)
    return Parameter(key, spec, live, where)


def _metrics(r: Reader, node: yaml.Node, base_dir: Path, graph: Graph,
             allow: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    from .metrics import check_metric
    out = {}
    for name, key_node, value_node in r.mapping(node, "metrics"):
        spec = r.value(value_node)
        try:
            out[name] = check_metric(name, spec, graph, base_dir, allow)
        except HapflowError as exc:
            raise StudyError(f"metric {name!r}: {getattr(exc, 'message', exc)}", r.at(key_node),
                             key=name) from None
    if not out:
        raise StudyError("'metrics' is empty: name at least one metric", r.at(node), key="metrics")
    return out


def loads(text: str, file: str | None = None, allow: tuple[str, ...] = ()) -> Study:
    """Parse a study from YAML text.

    Parameters
    ----------
    text : str
        The study file's text.
    file : str, optional
        Its path: names it in errors; relative graph and model paths start from its folder.
    allow : tuple of str
        Extra modules user metrics may come from (see :mod:`hapflow.study.metrics`).

    Raises
    ------
    StudyError
        With file, line and key of the first problem and what would be valid
        (a problem in the base graph names the graph file and line).
    """
    try:
        return _parse(text, file, allow)
    except StudyError:
        raise
    except GraphError as exc:                  # YAML syntax, duplicate keys, the base graph
        raise StudyError(exc.message, exc.where, exc.block, exc.port, exc.key) from None


def _parse(text: str, file: str | None, allow: tuple[str, ...]) -> Study:
    r = Reader(text, file)
    if r.root is None:
        raise StudyError("the study file is empty: it needs 'graph', 'parameters' and 'metrics'",
                         Where(file, 1))
    top: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for key, key_node, value_node in r.mapping(r.root, "study file"):
        if key not in TOP_KEYS:
            raise StudyError(f"unknown top-level key {key!r}{suggest(key, TOP_KEYS)} Valid keys: "
                             f"{', '.join(TOP_KEYS)}", r.at(key_node), key=key)
        top[key] = (key_node, value_node)
    for key in ("graph", "parameters", "metrics"):
        if key not in top:
            raise StudyError(f"the study file has no '{key}' (it needs graph, parameters and "
                             "metrics)", Where(file, 1), key=key)
    base_dir = Path(file).resolve().parent if file else Path.cwd()
    graph_path, graph_text, graph = _graph(r, top["graph"][1], base_dir)
    design = _choice(r, top["design"][1], "design", DESIGNS) if "design" in top else "grid"
    samples = None
    if design != "grid":
        if "samples" not in top:
            raise StudyError(f"a {design} design needs 'samples' (the number of runs)",
                             r.at(top["design"][0]), key="samples")
        samples = int(_number(r, top["samples"][1], "samples", integer=True, positive=True,
                              high=MAX_RUNS))
    elif "samples" in top:
        raise StudyError("'samples' applies to random and lhs designs; a grid runs every "
                         "combination", r.at(top["samples"][0]), key="samples")
    duration = (float(_number(r, top["duration"][1], "duration", positive=True,
                              high=MAX_DURATION))
                if "duration" in top else float(graph.duration))
    seed = (int(_number(r, top["seed"][1], "seed", integer=True, high=MAX_SEED))
            if "seed" in top else None)
    if seed is not None and seed < 0:
        raise StudyError(f"seed must be an integer from 0 to {MAX_SEED}, got {seed}",
                         r.at(top["seed"][1]), key="seed")
    params = [_parameter(r, k, kn, vn, graph, design)
              for k, kn, vn in r.mapping(top["parameters"][1], "parameters")]
    if not params:
        raise StudyError("'parameters' is empty: vary at least one block.param or seed",
                         r.at(top["parameters"][0]), key="parameters")
    runs = math.prod(grid_size(p.spec) for p in params) if design == "grid" else samples
    if runs > MAX_RUNS:
        raise StudyError(f"the grid has {runs:.3g} runs (the product of the parameters' value "
                         f"counts); a study runs at most {MAX_RUNS:,}",
                         r.at(top["parameters"][0]), key="parameters")
    metrics = _metrics(r, top["metrics"][1], base_dir, graph, allow)
    batch = "auto"
    if "batch" in top:             # YAML 1.1 reads a bare on/off as a boolean
        flag = r.value(top["batch"][1])
        batch = ({True: "on", False: "off"}[flag] if isinstance(flag, bool)
                 else _choice(r, top["batch"][1], "batch", BATCH_MODES))
    fixed = _fixed(r, top["set"][1], graph) if "set" in top else {}
    clash = [p for p in params if p.key in fixed]
    if clash:
        raise StudyError(f"parameter {clash[0].key!r} is both varied and fixed in 'set'",
                         clash[0].where, key=clash[0].key)
    name = str(r.value(top["name"][1])) if "name" in top else Path(file or "study").stem
    return Study(name, file, graph_path, graph_text, duration, seed, design, samples, params,
                 metrics, batch, fixed, text, base_dir, graph, tuple(allow))


def load_study(path: str | Path, allow: tuple[str, ...] = ()) -> Study:
    """Load a study file (see :func:`loads`)."""
    try:
        text = read_text(path, "study file")
    except GraphError as exc:
        raise StudyError(exc.message, exc.where) from None
    return loads(text, str(path), allow)
