"""The child process of :mod:`hapflow.h5check`: read every attribute and dataset of one HDF5 file.

Run as ``python -P h5child.py FILE CPU_SECONDS``; it imports nothing of
hapflow.  Python errors are passed over (the caller's own reader reports
them): only a crash of the HDF5 library, which ends this process by a
signal, is its answer, and so is a loop in it (one changed byte of a
recording made libhdf5 spin forever reading a dataset): past
``CPU_SECONDS`` of CPU time the kernel ends this process by SIGXCPU.
"""
from __future__ import annotations

import resource
import sys
from pathlib import Path

BLOCK_BYTES = 16 * 2**20
"""Most bytes of one dataset held at a time (a large one is read in blocks of rows)."""


def read_everything(path: Path) -> None:
    """Open ``path`` with h5py and read every attribute and dataset, going on past errors."""
    import h5py
    import numpy as np

    def attributes(obj) -> None:
        try:
            names = list(obj.attrs)
        except Exception:
            return
        for name in names:
            try:
                obj.attrs[name]
            except Exception:
                pass

    def values(ds) -> None:
        if ds.shape is None or ds.size == 0:
            return
        if ds.ndim == 0:
            ds[()]
            return
        row = max(1, ds.dtype.itemsize * int(np.prod(ds.shape[1:])))
        step = max(1, BLOCK_BYTES // row)
        for start in range(0, ds.shape[0], step):
            ds[start:start + step]

    def visit(_name: str, obj) -> None:
        attributes(obj)
        if isinstance(obj, h5py.Dataset):
            try:
                values(obj)
            except Exception:
                pass

    with h5py.File(path, "r") as f:
        attributes(f)
        try:
            f.visititems(visit)
        except Exception:
            pass


if __name__ == "__main__":
    cpu = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    try:
        read_everything(Path(sys.argv[1]))
    except Exception:   # not a file h5py opens, ...: the caller's reader says so
        pass
