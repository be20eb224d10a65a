"""A study's output folder: the append log that makes studies resumable, and the results table.

::

    DIR/study.yaml        copy of the study file
    DIR/runs.jsonl        ended runs (ok, failed, or died with their worker), appended as
                          runs end: one JSON object per run, or one line of columns for a
                          batch (Store.append)
    DIR/results.parquet   one row per run of the design (written at the end, and on interrupt)

Every run has a key: a hash of the study's fingerprint (graph text,
duration, metrics) and the run's parameters and seed.  A run whose key is in
the log as ok or failed is finished and is not run again (``retry_failed``
re-runs failed ones; a run that died with its Dask worker always runs again), so
an interrupted study resumes where it stopped, and a changed study redoes only
the runs whose results could change.  A line cut short by a kill is ignored (a
batch's line holds all its runs: they run again).
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOG = "runs.jsonl"
TABLE = "results.parquet"
COLUMNS = "columns"
"""Key of a log line that holds several runs' records as columns (:meth:`Store.append`)."""
NESTED = ("metrics", "params")
"""Record fields that are mappings (columns of their own in a line of columns)."""


@dataclass(frozen=True)
class RunSpec:
    """One run of a design: index, parameters (seed included when varied), seed, key."""

    index: int
    params: dict[str, Any]
    seed: int
    key: str


def run_key(fingerprint: str, params: dict[str, Any], seed: int) -> str:
    """Key of a run: hash of the study fingerprint, its parameters and seed."""
    return hashlib.sha256(key_text(fingerprint, params, seed).encode()).hexdigest()[:20]


def key_text(fingerprint: str, params: dict[str, Any], seed: int) -> str:
    """``json.dumps([fingerprint, sorted(params.items()), seed], default=repr)``, the text a
    run's key hashes; written out directly (1.8 us against 2.6 us) when every string is plain
    and every number a finite ``float`` or an ``int``, the types JSON writes with their
    ``repr``."""
    items = sorted(params.items())
    parts = []
    for name, value in items:
        kind = type(value)
        if not (kind is int or (kind is float and math.isfinite(value))) \
                or not _PLAIN.fullmatch(name):
            return _KEY_TEXT.encode([fingerprint, items, seed])
        parts.append(f'["{name}", {kind.__repr__(value)}]')
    if type(seed) is not int or not _PLAIN.fullmatch(fingerprint):
        return _KEY_TEXT.encode([fingerprint, items, seed])
    return f'["{fingerprint}", [{", ".join(parts)}], {seed!r}]'


class Store:
    """The output folder of a study (see the module docstring).

    Parameters
    ----------
    out : path
        Folder (created).
    study_text : str
        The study file's text, copied to ``study.yaml``.
    """

    def __init__(self, out: str | Path, study_text: str):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "study.yaml").write_text(study_text)
        self.log_path = self.out / LOG
        self.table_path = self.out / TABLE

    def finished(self, retry_failed: bool = False) -> dict[str, dict[str, Any]]:
        """Records of finished runs by key (the last line of a key wins)."""
        done: dict[str, dict[str, Any]] = {}
        if not self.log_path.exists():
            return done
        with self.log_path.open() as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue                     # a line cut short by a kill
                if isinstance(entry, dict) and isinstance(entry.get(COLUMNS), dict):
                    records = _rows(entry[COLUMNS])
                else:
                    records = [entry]
                for record in records:
                    if isinstance(record, dict) and "key" in record:
                        done[record["key"]] = record
        # a run lost with its worker is not finished: a plain rerun tries it again
        keep = ("ok",) if retry_failed else ("ok", "failed")
        done = {k: r for k, r in done.items() if r.get("status") in keep}
        return done

    def append(self, records: list[dict[str, Any]]) -> None:
        """Add finished runs to the log in one write (flushed; a line cut short by a kill
        is skipped when the log is read).

        Runs whose records have the same fields, metrics and parameters (a batch
        of successful runs) share one line of columns ``{"columns": {field:
        [values], "metrics": {name: [values]}, "params": {name: [values]}}}``;
        JSON encodes that in about half the time of one object per run.
        """
        columns = _columns(records)
        if columns is not None:
            text = _LINE.encode({COLUMNS: columns}) + "\n"
        else:
            text = "".join(_LINE.encode(record) + "\n" for record in records)
        with self.log_path.open("a") as fh:
            fh.write(text)
            fh.flush()

    def table(self, runs: list[RunSpec], records: dict[str, dict[str, Any]]) -> Any:
        """The results as a pandas DataFrame: one row per run, in run order.

        Columns: ``run``, ``status`` ('ok', 'failed', 'died' or 'pending'), ``error``,
        ``seed``, the parameters, the metric columns, ``sim_wall_s``,
        ``path``, ``ticks``, ``key``.
        """
        import pandas as pd
        recs = [records.get(spec.key) or {} for spec in runs]
        columns: dict[str, list[Any]] = {
            "run": [spec.index for spec in runs],
            "status": [rec.get("status", "pending") for rec in recs],
            "error": [rec.get("error") for rec in recs],
            "seed": [spec.seed for spec in runs]}
        params = list(dict.fromkeys(k for spec in runs for k in spec.params if k != "seed"))
        for key in params:
            columns[key] = [spec.params.get(key) for spec in runs]
        metrics = list(dict.fromkeys(k for rec in recs for k in rec.get("metrics", {})))
        for key in metrics:
            if key not in columns:
                columns[key] = [rec.get("metrics", {}).get(key, math.nan) for rec in recs]
        columns.update(sim_wall_s=[rec.get("sim_wall", math.nan) for rec in recs],
                       path=[rec.get("path") for rec in recs],
                       ticks=[rec.get("ticks", 0) for rec in recs],
                       key=[spec.key for spec in runs])
        return pd.DataFrame(columns)

    def write_table(self, frame: Any) -> Path:
        """Write ``frame`` to ``results.parquet`` (atomically)."""
        tmp = self.table_path.with_suffix(".tmp")
        frame.to_parquet(tmp, engine="pyarrow", index=False)
        tmp.replace(self.table_path)
        return self.table_path


def _columns(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``records`` as columns, when there are several with the same fields (and the same
    names in their mappings ``metrics`` and ``params``); else None."""
    if len(records) < 2:
        return None
    first = records[0]
    names = list(first)
    nested = {k: list(first[k]) for k in NESTED if isinstance(first.get(k), dict)}
    for record in records:
        if list(record) != names or any(not isinstance(record[k], dict) or list(record[k]) != keys
                                        for k, keys in nested.items()):
            return None
    return {k: {n: [r[k][n] for r in records] for n in nested[k]} if k in nested
            else [r[k] for r in records] for k in names}


def _rows(columns: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of a line of columns (:func:`_columns`)."""
    nested = {k for k in NESTED if isinstance(columns.get(k), dict)}
    flat = [k for k in columns if k not in nested]
    count = len(columns[flat[0]]) if flat else 0
    return [{k: {n: v[j] for n, v in columns[k].items()} if k in nested else columns[k][j]
             for k in columns} for j in range(count)]


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return repr(value)


_PLAIN = re.compile(r"[\w.\-]*", re.ASCII)
"""Strings JSON writes as they are (between quotes)."""
_KEY_TEXT = json.JSONEncoder(default=repr)
"""``json.dumps(..., default=repr)``, one encoder for every key."""
_LINE = json.JSONEncoder(default=_json_default)
"""``json.dumps(..., default=_json_default)``, one encoder for every log line."""
