"""Read a user's HDF5 file once in a child process first, so a crash of libhdf5 is a message.

A damaged HDF5 file can make libhdf5 crash (a segmentation fault inside
h5py while reading an attribute of a recording with one changed byte).  A
crash in C cannot be caught in the process it happens in, so
:func:`check_readable` reads the whole file (every attribute, every
dataset's shape and values) in a child Python process; if the child dies by
a signal it raises :class:`DamagedFileError` naming the file.  Python errors
in the child (a foreign layout, a cut-off file) are not its business: the
reader in the calling process meets them too and reports them in its own
words.

Who calls it: the command line, for the recordings a user names
(:func:`hapflow.argtypes.recording`, which ``identify``, ``verify --against``
and ``report`` parse their argument with), once per command before anything
is read.  The library readers (:func:`hapflow.recorder.load`,
:func:`hapflow.datafile.read_signal`, :func:`hapflow.ident.prep.from_recording`)
do not: most files they read were written by hapflow moments before (a
study reads back every run it made, ``run --plot`` its own output), a
library cannot tell those from a user's file, and paying a process start
per file there, from whatever process, thread or worker pool the caller
runs in, is the caller's choice to make.  A program that reads files it did
not write calls :func:`check_readable` itself first.
"""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from .errors import HapflowError

SIGNATURE = b"\x89HDF\r\n\x1a\n"
"""First bytes of an HDF5 superblock, found at offset 0, 512, 1024, 2048, ..."""

CHILD = Path(__file__).with_name("h5child.py")
"""The child's script: run by its path (``-P``: its folder is not put on the import path),
so the child imports h5py and numpy but not hapflow, whose import would be most of its cost."""


CRASHES = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE, signal.SIGILL})
"""Signals a process dies by when its own code fails; any other (Ctrl-C's SIGINT, which
reaches the child too, a SIGKILL) stopped it from outside and says nothing about the file."""


class DamagedFileError(HapflowError):
    """An HDF5 file whose reading crashes the HDF5 library."""


def is_hdf5(path: Path) -> bool:
    """Whether ``path`` holds an HDF5 signature where libhdf5 looks for one (a plain read)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            offset = 0
            while offset + len(SIGNATURE) <= size:
                f.seek(offset)
                if f.read(len(SIGNATURE)) == SIGNATURE:
                    return True
                offset = 512 if offset == 0 else 2 * offset
    except OSError:
        return False
    return False


def check_readable(path: str | Path) -> None:
    """Read the HDF5 file ``path`` in a child process; nothing happens unless that crashes.

    Files that are not HDF5 (no signature) and files that cannot be opened
    are left to the reader, which names the problem.

    Raises
    ------
    DamagedFileError
        When the child reading the file dies by a signal.
    """
    path = Path(path)
    if not is_hdf5(path):
        return
    child = subprocess.run([sys.executable, "-P", str(CHILD), str(path)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    if child.returncode < 0 and -child.returncode in CRASHES:
        raise DamagedFileError(f"{path}: the HDF5 library crashed "
                               f"({signal.Signals(-child.returncode).name}) reading this file: "
                               "the file is damaged; record it again or use an intact copy")
