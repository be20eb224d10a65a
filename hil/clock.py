"""Pacing by the monotonic clock: absolute-deadline sleep, then a short spin.

:class:`Pacer` waits for deadlines on a fixed grid ``t0 + k * period``: it
sleeps with ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`` until ``spin``
before the deadline, then polls the clock until the deadline.  It never
spins a whole period (under SCHED_FIFO that would trigger the kernel's RT
throttling, which stops the process ~50 ms every second).  A deadline that
has already passed by a whole period or more is **skipped**, not caught up:
the next deadline is the next grid point after the wake-up, and the number
of skipped grid points is reported.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import time

CLOCK_MONOTONIC = 1
TIMER_ABSTIME = 1
_NS = 1_000_000_000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_nanosleep = _libc.clock_nanosleep
_nanosleep.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Timespec), ctypes.c_void_p]
_nanosleep.restype = ctypes.c_int

now_ns = time.monotonic_ns
"""The clock every deadline refers to (CLOCK_MONOTONIC, ns)."""


class Pacer:
    """Wake up at ``t0 + k * period`` (see the module docstring).

    Parameters
    ----------
    rate : float
        Ticks per second (Hz).
    spin : float
        Seconds spent polling the clock before each deadline (default 30 us).
    """

    def __init__(self, rate: float, spin: float = 30e-6):
        self.period = int(round(_NS / rate))
        self.spin = int(round(spin * _NS))
        self.deadline = 0
        self._ts = _Timespec()
        self._ref = ctypes.byref(self._ts)

    def start(self, t0: int | None = None) -> int:
        """Set the first deadline (default: one period from now); return it in ns."""
        self.deadline = (now_ns() if t0 is None else t0) + (self.period if t0 is None else 0)
        return self.deadline

    def sleep_until(self, t: int) -> None:
        """Sleep until monotonic time ``t`` (ns) with an absolute-time ``clock_nanosleep``."""
        self._ts.tv_sec, self._ts.tv_nsec = divmod(t, _NS)
        _nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, self._ref, None)   # EINTR: woken early

    def wait(self) -> tuple[int, int, int]:
        """Wait for the current deadline.

        Returns
        -------
        deadline, wake : int
            The deadline waited for and the wake-up time (monotonic ns).
        skipped : int
            Grid points passed over because the wake-up came a period or more late.
        """
        d = self.deadline
        if now_ns() < d - self.spin:
            self.sleep_until(d - self.spin)
        wake = now_ns()
        while wake < d:
            wake = now_ns()
        skipped = (wake - d) // self.period
        self.deadline = d + (skipped + 1) * self.period
        return d, wake, skipped
