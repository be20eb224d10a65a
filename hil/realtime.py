"""Real-time settings of the running process, each applied when permitted and reported when not.

- ``SCHED_FIFO`` priority (``os.sched_setscheduler``);
- CPU pinning (``os.sched_setaffinity``);
- ``mlockall(MCL_CURRENT | MCL_FUTURE)`` (no page faults in the loop);
- timer slack 1 ns (``prctl(PR_SET_TIMERSLACK)``), so absolute-time sleeps
  wake on time with normal scheduling too.

:func:`apply` returns a :class:`Settings` record with what was applied and
why anything was not; :meth:`Settings.restore` undoes it.

:func:`background` is the other side: a process beside the loop (the dashboard's
server, a browser showing it) made to yield to it: ``SCHED_IDLE``, and kept off the
CPU the loop is pinned to.  It stays in the loop's session, so in its autogroup:
there the kernel preempts an idle-class task at once when the loop wakes on its CPU,
where a task of another group (or a nice 19 one) may finish its slice first; and a
group of its own at nice 19 starves on a busy host (seen: Chromium did not start
under load 7).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass, field

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
PR_SET_TIMERSLACK, PR_GET_TIMERSLACK = 29, 30
MCL_CURRENT, MCL_FUTURE = 1, 2


@dataclass
class Settings:
    """What :func:`apply` did.

    Attributes
    ----------
    applied : list of str
        Settings in force, e.g. ``"SCHED_FIFO 80"``, ``"pinned to CPU 1"``.
    refused : list of str
        Requested settings that were not permitted, with the reason.
    """

    applied: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    _policy: tuple[int, int] | None = None
    _affinity: set[int] | None = None
    _locked: bool = False
    _slack: int | None = None

    def summary(self) -> str:
        """One line: applied settings, then refused ones."""
        text = ", ".join(self.applied) or "normal scheduling"
        return text + (f" (not permitted: {'; '.join(self.refused)})" if self.refused else "")

    def restore(self) -> None:
        """Undo every applied setting."""
        if self._policy is not None:
            try:
                os.sched_setscheduler(0, self._policy[0], os.sched_param(self._policy[1]))
            except OSError:
                pass
        if self._affinity is not None:
            os.sched_setaffinity(0, self._affinity)
        if self._locked:
            _libc.munlockall()
        if self._slack is not None:
            _libc.prctl(PR_SET_TIMERSLACK, self._slack, 0, 0, 0)
        self._policy = self._affinity = self._slack = None
        self._locked = False


def _errno_text() -> str:
    err = ctypes.get_errno()
    return os.strerror(err) if err else "refused"


def apply(fifo: int | None = None, cpu: int | None = None, lock: bool = False,
          slack_ns: int | None = 1) -> Settings:
    """Apply the requested real-time settings; never raises for a refused one.

    Parameters
    ----------
    fifo : int, optional
        SCHED_FIFO priority (1-99); None keeps the normal scheduler.
    cpu : int, optional
        CPU to pin the process to.
    lock : bool
        Lock all current and future memory (``mlockall``).
    slack_ns : int, optional
        Timer slack in ns (default 1; None leaves it).
    """
    s = Settings()
    if slack_ns is not None:
        old = _libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)
        if _libc.prctl(PR_SET_TIMERSLACK, int(slack_ns), 0, 0, 0) == 0:
            s._slack = old
            s.applied.append(f"timer slack {slack_ns} ns")
        else:
            s.refused.append(f"timer slack: {_errno_text()}")
    if fifo is not None:
        policy = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(fifo)))
            s._policy = policy
            s.applied.append(f"SCHED_FIFO {fifo}")
        except OSError as exc:
            s.refused.append(f"SCHED_FIFO {fifo}: {exc.strerror} (needs CAP_SYS_NICE or an "
                             "rtprio limit, e.g. in /etc/security/limits.conf)")
    if cpu is not None:
        old = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, {int(cpu)})
            s._affinity = old
            s.applied.append(f"pinned to CPU {cpu}")
        except OSError as exc:
            s.refused.append(f"CPU {cpu}: {exc.strerror} (allowed CPUs: {sorted(old)})")
    if lock:
        if _libc.mlockall(MCL_CURRENT | MCL_FUTURE) == 0:
            s._locked = True
            s.applied.append("mlockall")
        else:
            s.refused.append(f"mlockall: {_errno_text()} (raise the memlock limit, ulimit -l)")
    return s


def background(loop_cpu: int | None = None) -> Settings:
    """Make the calling process yield to a real-time loop beside it (see the module
    docstring): ``SCHED_IDLE``, and pinned to the allowed CPUs other than ``loop_cpu``
    (when there are any).  Threads and processes it starts afterwards inherit both; meant
    for a process that has none yet (the scheduling policy and affinity are the calling
    thread's).  Never raises for a refused setting; nothing is restored (the process ends
    first).

    Parameters
    ----------
    loop_cpu : int, optional
        The CPU the loop is pinned to; None when it is not pinned.
    """
    s = Settings()
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        s.applied.append("SCHED_IDLE")
    except OSError as exc:
        s.refused.append(f"SCHED_IDLE: {exc.strerror}")
    others = os.sched_getaffinity(0) - {loop_cpu}
    if loop_cpu is not None and others:
        try:
            os.sched_setaffinity(0, others)
            s.applied.append(f"CPUs {sorted(others)}")
        except OSError as exc:
            s.refused.append(f"CPUs {sorted(others)}: {exc.strerror}")
    return s
