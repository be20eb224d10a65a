"""Virtual-prototype studies: parameter sweeps and Monte Carlo runs of a graph, on Dask.

One concept per module:

- :mod:`~hapflow.study.spec` - the study file (base graph, varied
  parameters, design, metrics), parsed with located errors;
- :mod:`~hapflow.study.designs` - grid, seeded random, Latin hypercube;
- :mod:`~hapflow.study.metrics` - built-in metrics and allow-listed user metrics;
- :mod:`~hapflow.study.execute` - a job of runs in one process: one compiled
  kernel per structure, single or batched runs (:mod:`hapflow.batch`);
- :mod:`~hapflow.study.store` - the resumable run log and the Parquet table;
- :mod:`~hapflow.study.runner` - the design expanded into jobs on Dask;
- :mod:`~hapflow.study.plots` - metric vs parameter, heat maps, summary page;
- :mod:`~hapflow.study.commands` - ``hapflow study``.
"""
from .runner import StudyResult, expand, run_study  # noqa: F401
from .spec import Study, StudyError, load_study, loads  # noqa: F401

__all__ = ["Study", "StudyError", "StudyResult", "expand", "load_study", "loads", "run_study"]
