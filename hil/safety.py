"""The safety layer of the real-time loop: limits, watchdog, and the safety event.

Every tick, :func:`check` (compiled, allocation-free) looks at the card's
inputs in SI units and the controller's commands, in this order:

1. a non-finite input (a corrupted reading);
2. an analog input at its range limit (a saturated sensor or amplifier);
3. a measurement outside its ``limit`` (stroke limit);
4. an encoder velocity (difference of successive positions) over its
   ``velocity_limit``;
5. a non-finite command;
6. a command outside its ``limit`` (force limit), after clipping to what the
   card can put out: a limit at or beyond the card's range never trips, and
   a command the card clips anyway is not a fault.

:class:`Watchdog` counts overruns: ticks whose write landed after the next
sample clock edge, that missed edges, or whose sample the card reported
late.  (A loop that needs 1.5 periods per tick misses every other edge but
overruns every tick, so it trips too.)
The default policy trips on a single lateness over ``max_lateness = 20 ms``
or on consecutive overruns lasting :data:`OVERRUN_SPAN` (5 ms: 5 ticks at
1 kHz, 20 at 4 kHz; at least 5).  An isolated host stall is one or two
overruns and does not trip it; neither does a short slow spell of the host
(measured on this 2-core VM at 4 kHz: 5 to 12 consecutive overruns, each
tick taking 100-130 us instead of 10-20, a few times a minute; with a fixed
count of 5 those tripped the 60 s runs of ``bench/hil_timing.py`` 4-13
times); a sustained overrun trips it within 5 ms at any rate.

On a trip the runner drives the outputs to the safe state (0 V, amplifier
enable False) in the same tick -- after a limit trip (3, 4, 6) it first ramps
the commands from their value clamped to the limits (at the trip tick) to
zero over the channel's ``ramp`` time, with the controller cut off -- records the
:class:`SafetyEvent`, flushes the recording and exits non-zero.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from hapflow.errors import HapflowError

OK, NONFINITE_INPUT, SATURATED, INPUT_LIMIT, VELOCITY, NONFINITE_COMMAND, COMMAND_LIMIT = range(7)
REASONS = {NONFINITE_INPUT: "non-finite input", SATURATED: "saturated input",
           INPUT_LIMIT: "stroke limit", VELOCITY: "velocity limit",
           NONFINITE_COMMAND: "non-finite command", COMMAND_LIMIT: "force limit"}
"""Reason codes of :func:`check` and their names."""
RAMPED = (INPUT_LIMIT, VELOCITY, COMMAND_LIMIT)
"""Trips after which the commands ramp to zero (the others cut them at once)."""

HARDWARE_WATCHDOG_LATENESS = 5
"""Default hardware watchdog timeout in lateness bounds (0.1 s; see :class:`Policy`)."""
MAX_HARDWARE_WATCHDOG = 34.0
"""Longest hardware watchdog timeout, s: X Series count (2^32 - 1) x 8 ns (34.4 s)."""
OVERRUN_SPAN = 0.005
"""Default watchdog span of consecutive overruns, s (see :meth:`Policy.overruns_at`)."""
MIN_OVERRUNS = 5
DEFAULT_MAX_LATENESS = 0.020


@dataclass(frozen=True)
class Policy:
    """Watchdog and saturation policy.

    Parameters
    ----------
    max_overruns : int, optional
        Consecutive overruns that trip the watchdog (default: as many ticks as
        :data:`OVERRUN_SPAN`, at least :data:`MIN_OVERRUNS`; see :meth:`overruns_at`).
    max_lateness : float
        A single lateness (s) that trips it.
    saturation : bool
        Trip on an analog input at its range limit.
    hardware_watchdog : float, optional
        Timeout of the card's hardware watchdog, s: when the loop has not
        petted it for that long (killed, stopped, hung) the card itself puts
        the outputs in the safe state.  It must exceed ``max_lateness``, so
        that a loop still alive trips its own watchdog first.  Default
        (see :meth:`watchdog_timeout`): 5 ``max_lateness`` (0.1 s).
    """

    max_overruns: int | None = None
    max_lateness: float = DEFAULT_MAX_LATENESS
    saturation: bool = True
    hardware_watchdog: float | None = None

    def __post_init__(self):
        hw = self.hardware_watchdog
        if hw is not None and not (MAX_HARDWARE_WATCHDOG >= hw > self.max_lateness):
            raise HapflowError(f"the hardware watchdog timeout ({hw:g} s) must exceed the "
                               f"lateness bound ({self.max_lateness:g} s), so that a loop that "
                               "is alive trips its own watchdog first and stops safely, and be "
                               f"at most {MAX_HARDWARE_WATCHDOG:g} s (the X Series timer); "
                               "change --hw-watchdog or --max-lateness")

    def watchdog_timeout(self) -> float:
        """The hardware watchdog's timeout in s; -1 (never expires) when the default,
        5 ``max_lateness``, is beyond what a card can time (a relaxed policy for runs
        that are not in real time)."""
        if self.hardware_watchdog is not None:
            return float(self.hardware_watchdog)
        timeout = HARDWARE_WATCHDOG_LATENESS * self.max_lateness
        return timeout if timeout <= MAX_HARDWARE_WATCHDOG else -1.0

    def pet_interval(self) -> float:
        """Seconds of card time between two pets of the hardware watchdog: a quarter of
        its timeout (inf when it never expires)."""
        timeout = self.watchdog_timeout()
        return timeout / 4 if timeout > 0 else math.inf

    def overruns_at(self, rate: float) -> int:
        """Consecutive overruns that trip the watchdog at ``rate`` Hz."""
        if self.max_overruns is not None:
            return int(self.max_overruns)
        return max(MIN_OVERRUNS, math.ceil(OVERRUN_SPAN * rate - 1e-9))


@dataclass(frozen=True)
class SafetyEvent:
    """Why and when the loop went to the safe state.

    Attributes
    ----------
    tick : int
        Tick at which it was detected.
    time : float
        Controller time of that tick in s.
    kind : str
        ``force limit``, ``stroke limit``, ``velocity limit``, ``saturated input``,
        ``non-finite input``, ``non-finite command``, ``watchdog``, ``hardware
        watchdog`` (the card's timer expired), ``DAQ error``,
        ``SIGINT`` or ``SIGTERM``.
    message : str
        One line naming the port or channel and the values.
    """

    tick: int
    time: float
    kind: str
    message: str

    @property
    def exit_code(self) -> int:
        """Process exit status: 130 for SIGINT, 143 for SIGTERM, else 1."""
        return {"SIGINT": 130, "SIGTERM": 143}.get(self.kind, 1)

    def line(self) -> str:
        """The one-line explanation printed on exit."""
        return (f"safety stop at t = {self.time:.4f} s (tick {self.tick}): {self.kind}: "
                f"{self.message}; outputs at 0 V, amplifier disabled")


@njit(cache=True)
def check(values, in_lo, in_hi, volts, v_lo, v_hi, saturation, pos_index, prev_pos, vel_limit,
          rate, first, commands, out_lo, out_hi, where):
    """Return a reason code (0 = fine) and put the offending index in ``where[0]``.

    ``values`` are the inputs in SI (analog inputs first, then encoders),
    ``volts`` the analog inputs in V with their ranges, ``pos_index`` the
    inputs with a velocity limit, ``prev_pos`` their previous values
    (updated; on a velocity trip the tripping one keeps its previous value),
    ``commands`` the commands in SI.
    """
    for k in range(values.size):
        if not np.isfinite(values[k]):
            where[0] = k
            return NONFINITE_INPUT
    if saturation:
        for k in range(volts.size):
            if volts[k] >= v_hi[k] or volts[k] <= v_lo[k]:
                where[0] = k
                return SATURATED
    for k in range(values.size):
        if values[k] < in_lo[k] or values[k] > in_hi[k]:
            where[0] = k
            return INPUT_LIMIT
    for j in range(pos_index.size):
        x = values[pos_index[j]]
        v = (x - prev_pos[j]) * rate
        if not first and abs(v) > vel_limit[j]:
            where[0] = j            # prev_pos[j] kept: the trip message reports v
            return VELOCITY
        prev_pos[j] = x
    for k in range(commands.size):
        if not np.isfinite(commands[k]):
            where[0] = k
            return NONFINITE_COMMAND
    for k in range(commands.size):
        if commands[k] < out_lo[k] or commands[k] > out_hi[k]:
            where[0] = k
            return COMMAND_LIMIT
    return OK


class Watchdog:
    """Trips on ``max_overruns`` consecutive overruns or one lateness over ``max_lateness``.

    Parameters
    ----------
    policy : Policy
        The thresholds.
    period_ns : int
        Tick period in ns.
    """

    def __init__(self, policy: Policy, period_ns: int):
        self.max_overruns = policy.overruns_at(1e9 / period_ns)
        self.max_lateness_ns = int(policy.max_lateness * 1e9)
        self.period_ns = period_ns
        self.run = 0

    def tick(self, lateness_ns: int, overrun: bool) -> str | None:
        """Account one tick; return the trip message or None."""
        if lateness_ns > self.max_lateness_ns:
            return (f"tick {lateness_ns / 1e6:.2f} ms late, over the bound of "
                    f"{self.max_lateness_ns / 1e6:g} ms")
        self.run = self.run + 1 if overrun else 0
        if self.run >= self.max_overruns:
            return (f"{self.run} consecutive overruns (missed sample clock edges; the policy "
                    f"allows {self.max_overruns - 1}); the loop cannot keep "
                    f"{1e9 / self.period_ns:g} Hz")
        return None


def ramp_steps(seconds: float, rate: float) -> int:
    """Ticks of a ramp to zero lasting ``seconds`` (0: none, the command is cut at once)."""
    return max(0, int(round(seconds * rate)))


@njit(cache=True)
def ramp(start, step, steps, out):
    """Commands at ramp ``step`` of ``steps``: ``start (1 - step/steps)`` (0 at the end)."""
    frac = 0.0 if step >= steps else 1.0 - step / steps
    for k in range(out.size):
        out[k] = start[k] * frac
