"""Kernel caches for a benchmark's cold-compile child: empty, and gone afterwards."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def empty_caches() -> Iterator[dict[str, str]]:
    """The environment of a child process whose hapflow and numba kernel caches start empty
    (two folders of a temporary directory, removed on exit)."""
    with tempfile.TemporaryDirectory(prefix="hapflow_cold_") as tmp:
        yield dict(os.environ, HAPFLOW_CACHE_DIR=os.path.join(tmp, "hapflow"),
                   NUMBA_CACHE_DIR=os.path.join(tmp, "numba"))
