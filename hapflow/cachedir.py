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


def write_whole(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so that another
    process reading the shared cache sees the old file or the whole new one, never a part."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)
