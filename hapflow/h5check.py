"""Read a user's HDF5 file once in a child process first, so a crash of libhdf5 is a message.

A damaged HDF5 file can make libhdf5 crash (a segmentation fault inside h5py
while reading an attribute of a recording with one changed byte).  A crash in
C cannot be caught in the process it happens in, so :func:`check_readable`
reads the whole file (every attribute, every dataset's shape and values) in
a child Python process; if the child dies by a signal (or uses more CPU time
than reading the file can take: libhdf5 can also loop forever on a changed
byte) it raises :class:`DamagedFileError` naming the file.  Python errors in
the child (a foreign layout, a cut-off file) are not its business: the
reader in the calling process meets them too and reports them in its own
words.

Who calls it: the command line, for the recordings a user names
(:func:`hapflow.argtypes.recording`, which ``identify``, ``verify --against``
and ``report`` parse their argument with), once per command before anything
is read; and :func:`hapflow.datafile.read_signal`, whose HDF5 files are the
ones a graph names (a ``Playback`` block's ``file:``), written by whoever.
The recording readers (:func:`hapflow.recorder.load`,
:func:`hapflow.ident.prep.from_recording`) do not: most files they read
were written by hapflow moments before (a study reads back every run it
made, ``run --plot`` its own output), a library cannot tell those from a
user's file, and paying a process start per file there, from whatever
process, thread or worker pool the caller runs in, is the caller's choice
to make.  A program that reads files it did not write calls
:func:`check_readable` itself first.  A file that passed is not read again
while its size and modification time stay (:data:`PASSED`): a graph loaded
again, or once per run of a study, costs one child process, not one each.
"""
from __future__ import annotations

import math
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

CPU_SECONDS = 5.0
"""CPU time the child may use on any file (starting Python and importing h5py take ~0.3 s) ..."""
CPU_BYTES_PER_SECOND = 20e6
"""... plus one second per this many bytes of file (reading and inflating a compressed
recording runs at 100s of MB/s): past that the HDF5 library is in a loop (SIGXCPU)."""
WALL_PER_CPU = 20.0
"""Wall time the child may take per second of its CPU limit: a backstop for a read that
waits without computing (a stalled network file system), generous on a loaded machine."""


PASSED: set[tuple] = set()
"""Files whose check passed, by (path, device, inode, size, modification time in ns)."""


class DamagedFileError(HapflowError):
    """An HDF5 file whose reading crashes the HDF5 library."""


def is_hdf5(path: Path) -> bool:
    """Whether ``path`` holds an HDF5 signature where libhdf5 looks for one (a plain read)."""
    # by hand, not h5py.is_hdf5: that opens the file with libhdf5 here, the read that may crash
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
    try:
        stat = path.stat()
    except OSError:
        return
    key = (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key in PASSED:
        return
    cpu = math.ceil(CPU_SECONDS + stat.st_size / CPU_BYTES_PER_SECOND)
    try:
        child = subprocess.run([sys.executable, "-P", str(CHILD), str(path), str(cpu)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=WALL_PER_CPU * cpu)
    except subprocess.TimeoutExpired:
        raise DamagedFileError(f"{path}: reading this file did not end in "
                               f"{WALL_PER_CPU * cpu:g} s; is it on a file system that "
                               "stopped answering?") from None
    damaged = "the file is damaged; record it again or use an intact copy"
    if child.returncode == -signal.SIGXCPU:
        raise DamagedFileError(f"{path}: the HDF5 library did not finish reading this file in "
                               f"{cpu} s of CPU time (it loops): {damaged}")
    if child.returncode < 0 and -child.returncode in CRASHES:
        raise DamagedFileError(f"{path}: the HDF5 library crashed "
                               f"({signal.Signals(-child.returncode).name}) reading this file: "
                               f"{damaged}")
    if child.returncode == 0:
        PASSED.add(key)
