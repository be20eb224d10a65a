"""The hardware watchdog timer of a simulated DAQ card, with NI-DAQmx's documented semantics.

NI-DAQmx ("Watchdog Timers" in the NI-DAQmx Help; "Watchdog Timer" in the X
Series User Manual) documents the timer this module reproduces:

- a watchdog timer task is created on one device with a timeout in s (-1:
  the timer never expires on its own) and expiration states for output
  physical channels: digital lines high, low or no change, and, on devices
  whose watchdog covers analog outputs, a voltage;
- the timer runs from the start of the task; the application must reset it
  (``reset_timer``) before the timeout elapses;
- when it expires, the channels go to their expiration states and stay there:
  the device ignores writes to them until the application clears the
  expiration (``clear_expiration``), stops the task or resets the device;
- the ``expired`` attribute says whether it has expired.

The timer counts on the card, not in the host program: :class:`WatchdogTimer`
is driven by whoever plays the card (the gRPC server's thread, or the
simulated card's sample clock edges) and never by the control loop, so a
killed or stopped loop still lets it expire.
"""
from __future__ import annotations

import math

import numpy as np


class WatchdogTimer:
    """One device's watchdog timer and the expiration states of its outputs.

    Parameters
    ----------
    timeout : float
        Seconds without a reset after which it expires; -1 (or any negative
        value): never on its own.

    Attributes
    ----------
    ao_states : dict
        Analog output index (in the card's output array) -> volts on expiry.
    do_states : dict
        Digital line index -> level (bool) on expiry.
    expired_at : int or None
        Card time (ns) at which it expired: the last reset plus the timeout.
    held_at : int or None
        Card time (ns) at which the outputs were put in their expiration states
        (``expired_at`` plus the latency of whoever polls the timer).
    """

    def __init__(self, timeout: float):
        self.timeout = float(timeout)
        self.timeout_ns = round(self.timeout * 1e9)
        self.ao_states: dict[int, float] = {}
        self.do_states: dict[int, bool] = {}
        self.running = False
        self.last_reset = 0
        self.expired_at: int | None = None
        self.held_at: int | None = None

    @property
    def expired(self) -> bool:
        """True from the expiry until the expiration is cleared."""
        return self.expired_at is not None

    @property
    def deadline(self) -> float:
        """Card time (ns) at which it expires without a reset (inf: never)."""
        if not self.running or self.expired or self.timeout < 0:
            return math.inf
        return self.last_reset + self.timeout_ns

    def start(self, now: int) -> None:
        """Start the timer at card time ``now`` (ns; integers, so that the expiry edge of a
        clock on a grid is exact)."""
        self.running, self.last_reset = True, now

    def stop(self) -> None:
        """Stop the timer (the outputs keep whatever state they have)."""
        self.running = False

    def reset(self, now: int) -> None:
        """Reset the timer (pet it) at ``now``; no effect once expired."""
        if not self.expired:
            self.last_reset = now

    def clear(self, now: int) -> None:
        """Clear an expiration: writes act again and the timer restarts from ``now``."""
        self.expired_at = self.held_at = None
        self.last_reset = now

    def poll(self, now: int, ao: np.ndarray, do: np.ndarray) -> bool:
        """Expire if the deadline is past at ``now``: put the expiration states into the
        output registers ``ao`` (V) and ``do`` (levels).  Returns True while expired."""
        if not self.expired and now >= self.deadline:
            self.expired_at, self.held_at = self.deadline, now
            self.hold(ao, do)
        return self.expired

    def hold(self, ao: np.ndarray, do: np.ndarray) -> None:
        """Put the expiration states into the output registers."""
        for k, volts in self.ao_states.items():
            ao[k] = volts
        for k, level in self.do_states.items():
            do[k] = level

    def guards(self, kind: str, index: int) -> bool:
        """True when a write to output ``index`` of ``kind`` ('ao'/'do') is ignored (expired)."""
        states = self.ao_states if kind == "ao" else self.do_states
        return self.expired and index in states
