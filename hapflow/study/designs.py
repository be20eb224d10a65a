"""Parameter designs: full grid, seeded random sampling, Latin hypercube.

Each returns a list of runs, one ``{key: value}`` dict per run, in a fixed
order (the run index is the position in that list):

- ``grid``: every combination; the first parameter varies slowest
  (``itertools.product`` order).  A range ``{low, high, num}`` gives
  ``num`` evenly spaced values (``scale: log``: geometric), ``{low, high,
  step}`` gives ``low, low + step, ...`` up to ``high`` (integers when all
  three are integers).
- ``random``: ``samples`` independent draws, uniform on ``[low, high]``
  (``scale: log``: log-uniform; ``integer: true``: integers low..high
  inclusive) or uniform over a list of choices, from
  ``numpy.random.default_rng(seed)``.
- ``lhs``: a Latin hypercube of ``samples`` points
  (``scipy.stats.qmc.LatinHypercube(d, rng=numpy.random.default_rng(seed))``):
  each parameter's range is cut into ``samples`` equal strata and every
  stratum is sampled once.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

from .spec import Parameter, grid_size


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers (for YAML, JSON and Parquet)."""
    return value.item() if isinstance(value, np.generic) else value


def grid_values(spec: Any) -> list[Any]:
    """The values of one grid parameter (a list, or a ``low/high/num|step`` range)."""
    if isinstance(spec, list):
        return list(spec)
    low, high = spec["low"], spec["high"]
    if "num" in spec:
        if spec.get("scale") == "log":
            return [float(v) for v in np.geomspace(low, high, int(spec["num"]))]
        return [float(v) for v in np.linspace(low, high, int(spec["num"]))]
    step = spec["step"]
    n = int(grid_size(spec))
    if all(isinstance(v, int) for v in (low, high, step)):
        return [low + k * step for k in range(n)]
    return [float(low + k * step) for k in range(n)]


def grid(parameters: Sequence[Parameter]) -> list[dict[str, Any]]:
    """Every combination of the parameters' values (first parameter slowest)."""
    axes = [grid_values(p.spec) for p in parameters]
    keys = [p.key for p in parameters]
    return [dict(zip(keys, combo)) for combo in itertools.product(*axes)]


def _from_unit(spec: Any, u: np.ndarray) -> list[Any]:
    """Map points ``u`` in [0, 1) to a parameter's values (range or list of choices)."""
    if isinstance(spec, list):
        idx = np.minimum((u * len(spec)).astype(np.int64), len(spec) - 1)
        return [spec[int(i)] for i in idx]
    low, high = spec["low"], spec["high"]
    if spec.get("integer"):
        span = int(math.floor(high)) - int(math.ceil(low)) + 1
        return [int(math.ceil(low)) + int(min(k, span - 1)) for k in (u * span).astype(np.int64)]
    if spec.get("scale") == "log":
        return [float(v) for v in np.exp(np.log(low) + u * (np.log(high) - np.log(low)))]
    return [float(v) for v in low + u * (high - low)]


def _assemble(parameters: Sequence[Parameter], unit: np.ndarray) -> list[dict[str, Any]]:
    columns = [_from_unit(p.spec, unit[:, j]) for j, p in enumerate(parameters)]
    return [{p.key: _plain(columns[j][i]) for j, p in enumerate(parameters)}
            for i in range(unit.shape[0])]


def random(parameters: Sequence[Parameter], samples: int, seed: int | None) -> list[dict[str, Any]]:
    """``samples`` independent uniform draws (see the module docstring)."""
    rng = np.random.default_rng(seed)
    return _assemble(parameters, rng.random((samples, len(parameters))))


def lhs(parameters: Sequence[Parameter], samples: int, seed: int | None) -> list[dict[str, Any]]:
    """A Latin hypercube of ``samples`` points (see the module docstring)."""
    from scipy.stats import qmc
    unit = qmc.LatinHypercube(d=len(parameters), rng=np.random.default_rng(seed)).random(samples)
    return _assemble(parameters, unit)


def design(kind: str, parameters: Sequence[Parameter], samples: int | None = None,
           seed: int | None = None) -> list[dict[str, Any]]:
    """The runs of a design ``kind`` (``grid``, ``random`` or ``lhs``)."""
    if kind == "grid":
        return grid(parameters)
    if kind == "random":
        return random(parameters, int(samples), seed)
    if kind == "lhs":
        return lhs(parameters, int(samples), seed)
    raise ValueError(f"unknown design {kind!r}; valid: grid, random, lhs")
