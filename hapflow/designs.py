"""Design-time results kept on disk, so a warm start need not import ``scipy.signal``.

Importing ``scipy.signal`` takes about 1 s here (most of a warm start:
the 300-block random graph of ``bench/compile.py`` started in 2.2 s, 1.1 s of
it that import), and a filter block needs it only to design its
coefficients, which depend on a few numbers.  :func:`cached` stores a
design's result under the hash of its name, its arguments and the scipy
version, in ``<cache>/designs/``; the design runs again only for new
arguments.
"""
from __future__ import annotations

import hashlib
import io
from typing import Callable

import numpy as np

from .cachedir import cache_dir, write_whole


def cached(name: str, args: tuple, design: Callable[[], np.ndarray]) -> np.ndarray:
    """``design()`` (a float array), from the disk cache when ``name`` ran with ``args`` before.

    ``args`` must determine the result (with the scipy version, which is part of the key).
    """
    key = repr((name, args, _scipy_version())).encode()
    path = cache_dir() / "designs" / f"{hashlib.sha256(key).hexdigest()[:24]}.npy"
    try:
        return np.load(path)
    except (OSError, ValueError):
        pass
    result = np.asarray(design(), dtype=np.float64)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        kept = io.BytesIO()
        np.save(kept, result)
        write_whole(path, kept.getvalue())
    except OSError:                      # a read-only cache: design every time
        pass
    return result


def _scipy_version() -> str:
    """scipy's version (from the module numba has imported already: asking the installed
    distributions' metadata instead cost a warm start 10 ms)."""
    import scipy
    return scipy.__version__
