"""A study's output folder: the append log that makes studies resumable, and the results table.

::

    DIR/study.yaml        copy of the study file
    DIR/runs.jsonl        one JSON line per finished run (ok or failed), appended as runs end
    DIR/results.parquet   one row per run of the design (written at the end, and on interrupt)

Every run has a key: a hash of the study's fingerprint (graph text,
duration, metrics) and the run's parameters and seed.  A run whose key is in
the log is finished and is not run again (``retry_failed`` re-runs failed
ones), so an interrupted study resumes where it stopped, and a changed study
redoes only the runs whose results could change.  A line cut short by a kill
is ignored.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

LOG = "runs.jsonl"
TABLE = "results.parquet"


@dataclass(frozen=True)
class RunSpec:
    """One run of a design: index, parameters (seed included when varied), seed, key."""

    index: int
    params: dict[str, Any]
    seed: int
    key: str


def run_key(fingerprint: str, params: dict[str, Any], seed: int) -> str:
    """Key of a run: hash of the study fingerprint, its parameters and seed."""
    text = json.dumps([fingerprint, sorted(params.items()), seed], default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


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
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue                     # a line cut short by a kill
                if isinstance(record, dict) and "key" in record:
                    done[record["key"]] = record
        if retry_failed:
            done = {k: r for k, r in done.items() if r.get("status") == "ok"}
        return done

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Add finished runs to the log (flushed line by line)."""
        with self.log_path.open("a") as fh:
            for record in records:
                fh.write(json.dumps(record, default=_json_default) + "\n")
            fh.flush()

    def table(self, runs: list[RunSpec], records: dict[str, dict[str, Any]]) -> Any:
        """The results as a pandas DataFrame: one row per run, in run order.

        Columns: ``run``, ``status`` ('ok', 'failed' or 'pending'), ``error``,
        ``seed``, the parameters, the metric columns, ``sim_wall_s``,
        ``path``, ``ticks``, ``key``.
        """
        import pandas as pd
        rows = []
        for spec in runs:
            rec = records.get(spec.key)
            row: dict[str, Any] = {"run": spec.index,
                                   "status": rec["status"] if rec else "pending",
                                   "error": rec.get("error") if rec else None, "seed": spec.seed}
            row.update({k: v for k, v in spec.params.items() if k != "seed"})
            row.update((rec or {}).get("metrics", {}))
            row.update(sim_wall_s=(rec or {}).get("sim_wall", math.nan),
                       path=(rec or {}).get("path"), ticks=(rec or {}).get("ticks", 0),
                       key=spec.key)
            rows.append(row)
        frame = pd.DataFrame(rows)
        return frame

    def write_table(self, frame: Any) -> Path:
        """Write ``frame`` to ``results.parquet`` (atomically)."""
        tmp = self.table_path.with_suffix(".tmp")
        frame.to_parquet(tmp, engine="pyarrow", index=False)
        tmp.replace(self.table_path)
        return self.table_path


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return repr(value)
