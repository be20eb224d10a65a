"""Reading a child process's output in a test.

A child that fails early (an import error, a compile that ran out of time under load)
prints nothing on stdout: the test then failed on an empty line and showed nothing of
why.  :func:`expect_line` fails with the child's exit status and its stderr instead.
"""
from __future__ import annotations

import subprocess


def expect_line(proc: subprocess.Popen, prefix: str) -> str:
    """The child's next stdout line, which must start with ``prefix``; otherwise the child
    is stopped and the test fails with the line, its exit status and whatever it wrote."""
    line = proc.stdout.readline()
    if line.startswith(prefix):
        return line
    if proc.poll() is None:
        proc.kill()
    rest, err = proc.communicate(timeout=60)
    raise AssertionError(f"expected a line starting {prefix!r}, got {line!r}; the child "
                         f"({' '.join(map(str, proc.args))}) exited {proc.returncode}; "
                         f"the rest of its stdout: {rest!r}; its stderr:\n{err}")
