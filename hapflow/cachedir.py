"""The folder hapflow keeps files in between runs (generated kernels, designs, units)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Folder for generated sources, numba's cache files, designs and unit conversions:
    ``$HAPFLOW_CACHE_DIR``, else ``$XDG_CACHE_HOME/hapflow`` or ``~/.cache/hapflow``."""
    env = os.environ.get("HAPFLOW_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "hapflow"
