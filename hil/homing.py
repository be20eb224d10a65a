"""Tare and homing: the arm steps that measure and move, on the started card before tick 0.

An encoder counts from 0 where the carriage sits when the card starts, which
is wherever it was left.  Stroke limits in the ``hardware:`` section only mean
something once that count is tied to the mechanics: **homing** drives the
carriage at a low command towards an end stop.  Homed to the stop (``home:
{command: motor, drive: -2, at: -0.02}``), it drives until the encoder stands
still and makes that count read the stop's position.  Homed to the index
(``z_index: 0.0`` and ``home: {command: motor, drive: -2, to: index}``), the
reference is the first Z index pulse the encoder gives while the carriage moves
towards the stop: the counter's Z reset (NI-DAQmx ``zidx_enable``, ``zidx_val``,
``zidx_phase``) makes the index read ``z_index`` in hardware, at the Z edge
itself, whatever the loop's latency; homing then puts the outputs in their safe
state and waits until the carriage, coasting (counted), stands still.  Reaching the stop (standing still)
before any index pulse fails: the index is behind the carriage, so drive the
other way, or check the Z wiring and ``z_phase``.

How the first pulse is seen: NI-DAQmx has no "index seen" flag, so the
counter starts at :data:`SEEK_START` (``initial_pos``/``initial_angle`` in
ticks), far from the count the index resets it to; the first read after the
reset is near ``z_index``'s count, :data:`SEEK_START` away from every count
before it.  The Z reset stays on for the run: each pass over a linear
encoder's one index resets it to the same count (an angular encoder's index,
once per revolution, resets its angle each turn).  The index's accuracy is the
encoder's: one count, at the phase ``z_phase`` selects.  A force sensor's reading drifts with temperature
and mounting; **tare** averages it with the amplifiers disabled and makes that
reading 0 (``tare: 0.1``, seconds to average).

Both run edge by edge on the card's sample clock after
:meth:`~hapflow.hil.backend.Backend.start` (:class:`ArmEdges`: wait, read,
write, pet the hardware watchdog), tare first (outputs safe), then each home
(its command's block enabled, every other output safe).  Each returns what the
runner then uses: the offsets of the tared analog inputs and of the homed
encoders, in the port's unit, and a line for the arm log.  A failure (no stop
within the timeout or the travel, a velocity limit, a non-finite or saturated
reading) raises :class:`ArmFailed`, a signal or the e-stop :class:`ArmStopped`; the
runner then puts the outputs in their safe state and ends the run with a safety
event before tick 0 (kind ``arm``, or the signal's name, so Ctrl-C exits 130 as it
does during the run).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from hapflow.errors import HapflowError

from .backend import Backend, Channel

STILL_COUNTS = 2
"""A carriage whose count stays within this many counts of where it stopped stands still."""
SEEK_START = 2 ** 30
"""The count an encoder homed to its index starts at: an X Series counter has 32 bits, and a
Z index count within :data:`SEEK_RANGE` of 0 is then unmistakable after the reset."""
SEEK_RANGE = 2 ** 29
"""The largest |count| the index of an encoder homed to it may read."""
TARGETS = ("stop", "index")
"""What homing finds: the end stop (still), or the first Z index pulse on the way to it."""


@dataclass(frozen=True)
class Home:
    """How one encoder finds its home (the ``home:`` key of its binding).

    Attributes
    ----------
    port : str
        The encoder's ``block.port``.
    command : str
        The analog output's ``block.port`` driven while homing.
    drive : float
        The command held while homing, in the command's unit; its sign sets the
        direction (towards the stop).
    at : float
        The position of the stop, in the encoder port's unit: the count where
        the carriage stands still reads this.
    settle : float
        Seconds the count must stay within :data:`STILL_COUNTS` to be at the stop.
    timeout : float
        Seconds to reach the stop.
    travel : float
        The most the carriage may move while homing, in the encoder port's unit.
    to : {'stop', 'index'}
        The reference: the stop (``at``), or the first Z index pulse (which reads the
        encoder's ``z_index``; ``at`` is unused).
    """

    port: str
    command: str
    drive: float
    at: float
    settle: float
    timeout: float
    travel: float
    to: str = "stop"


def plan(h: Home) -> str:
    """What homing ``h`` will do, in one phrase (the arm log, ``hapflow hil check``)."""
    if h.to == "index":
        return (f"{h.command} at {h.drive:g} until the first index pulse, which reads z_index "
                f"(a stop first, still for {h.settle:g} s, fails; at most {h.timeout:g} s, "
                f"{h.travel:g} of travel)")
    return (f"{h.command} at {h.drive:g} until still for {h.settle:g} s (at most "
            f"{h.timeout:g} s, {h.travel:g} of travel); that position reads {h.at:g}")


class ArmFailed(HapflowError):
    """Tare or homing could not be done; the outputs are to go to the safe state."""


class ArmStopped(ArmFailed):
    """A signal or the e-stop came during tare or homing (``what``: the step, after
    ``edges`` sample clock edges of the arm steps)."""

    def __init__(self, what: str, edges: int):
        super().__init__(f"{what} stopped by a signal or the e-stop")
        self.what, self.edges = what, edges


class ArmEdges:
    """Edge-by-edge card I/O for the arm steps: wait, read, write, pet the watchdog.

    Parameters
    ----------
    backend : Backend
        The started card.
    n_ai, n_ci : int
        Analog inputs and encoders (the read arrays).
    safe_ao, safe_do : ndarray
        The outputs' safe values (written while nothing is driven).
    pet_every : int
        Edges between watchdog resets.
    stop : ndarray
        ``stop[0]`` nonzero (a signal or the e-stop) aborts the step.
    """

    def __init__(self, backend: Backend, n_ai: int, n_ci: int, safe_ao: np.ndarray,
                 safe_do: np.ndarray, pet_every: int, stop: np.ndarray):
        self.backend = backend
        self.ai = np.zeros(n_ai)
        self.counts = np.zeros(n_ci, dtype=np.int64)
        self.safe_ao, self.safe_do = safe_ao, safe_do
        self.ao, self.do = safe_ao.copy(), safe_do.copy()
        self.pet_every = max(1, pet_every)
        self.stop = stop
        self.edges = 0

    def step(self, what: str) -> None:
        """One sample clock edge: wait, read, write the outputs, pet every ``pet_every``."""
        be = self.backend
        be.wait()
        be.read(self.ai, self.counts)
        be.write(self.ao, self.do)
        if self.edges % self.pet_every == 0:
            be.pet()
        self.edges += 1
        if self.stop[0]:
            raise ArmStopped(what, self.edges)

    def safe(self) -> None:
        """Outputs back to their safe values, written at once."""
        self.ao[:] = self.safe_ao
        self.do[:] = self.safe_do
        self.backend.write(self.ao, self.do)


def tare(edges: ArmEdges, ai: Sequence[Channel], seconds: dict[str, float],
         rate: float) -> tuple[dict[str, float], list[str]]:
    """Average the tared analog inputs with every output safe.

    Returns
    -------
    offsets : dict
        ``block.port`` -> offset in its unit that makes the average read 0.
    log : list of str
        One line per tared input.
    """
    index = {c.port: k for k, c in enumerate(ai)}
    samples = {port: max(1, math.ceil(s * rate)) for port, s in seconds.items()}
    sums = dict.fromkeys(seconds, 0.0)
    for n in range(max(samples.values(), default=0)):
        edges.step("tare")
        for port, total in samples.items():
            if n < total:
                c, v = ai[index[port]], edges.ai[index[port]]
                if not math.isfinite(v) or not c.low < v < c.high:
                    raise ArmFailed(f"tare of {port} ({c.physical}): it read {v:g} V, "
                                    f"{'not a number' if not math.isfinite(v) else 'the end of its range'}"
                                    f" [{c.low:g}, {c.high:g}] V")
                sums[port] += v
    offsets, log = {}, []
    for port, total in samples.items():
        c = ai[index[port]]
        volts = sums[port] / total
        offsets[port] = -c.scaled(volts)
        log.append(f"tare {port} ({c.physical}): {total} samples with the outputs safe, mean "
                   f"{volts:.6g} V = {c.offset + c.scaled(volts):.6g} {c.unit} before; offset "
                   f"{offsets[port]:.6g} {c.unit} (reads 0 there)")
    return offsets, log


def home(edges: ArmEdges, h: Home, ci: Sequence[Channel], ao: Sequence[Channel],
         do: Sequence[Channel], rate: float, velocity_limit: float | None) -> tuple[float, str]:
    """Drive ``h.command`` at ``h.drive`` until the encoder stands still (``to: stop``: zero
    it there) or gives its first index pulse (``to: index``).

    Returns
    -------
    offset : float
        The encoder's offset in its unit (the position at count 0): for the stop, the one
        that makes it read ``h.at``; for the index, the binding's (the Z reset made the
        index read ``z_index``).
    log : str
        The arm log line.

    Raises
    ------
    ArmFailed
        No stop within ``h.timeout`` or ``h.travel``, faster than ``velocity_limit``, or
        (``to: index``) the stop reached before an index pulse.
    """
    k = next(i for i, c in enumerate(ci) if c.port == h.port)
    enc = ci[k]
    j = next(i for i, c in enumerate(ao) if c.port == h.command)
    cmd = ao[j]
    block = cmd.port.split(".")[0]
    edges.ao[j] = min(max(cmd.volts(h.drive), cmd.low), cmd.high)
    for i, line in enumerate(do):
        if line.port.split(".")[0] == block:
            edges.do[i] = line.active
    settle = max(1, math.ceil(h.settle * rate))
    start = ref = prev = None
    still = 0
    index = None                # (edge, count before) of the index pulse, once seen
    what = f"homing {h.port}"
    driving = f"driving {h.command} at {h.drive:g} {cmd.unit}"
    for n in range(math.ceil(h.timeout * rate)):
        edges.step(what)
        count = int(edges.counts[k])
        if start is None:
            start = ref = prev = count
        if h.to == "index" and index is None and abs(count - SEEK_START) > SEEK_RANGE:
            edges.safe()        # the reference is set: stop driving, wait until it is still
            index, ref, prev, still = (n, prev), count, count, 0
            continue
        if index is None:
            _check_motion(what, driving, h, enc, count, start, prev, rate, velocity_limit)
        prev = count
        if abs(count - ref) > STILL_COUNTS:
            ref, still = count, 0
        else:
            still += 1
        if still < settle:
            continue
        edges.safe()
        if index is not None:
            z = enc.offset + enc.scale * enc.z_index
            return enc.offset, (f"home {h.port} ({enc.physical}): first index pulse {driving} "
                                f"after {(index[0] + 1) / rate:.3g} s and "
                                f"{(index[1] - start) * enc.scale:+.6g} {enc.unit} from the arm "
                                f"position; the Z reset made it read {z:g} {enc.unit} (count "
                                f"{enc.z_index}); outputs safe, still at count {count} = "
                                f"{enc.offset + enc.scale * count:.6g} {enc.unit}")
        if h.to == "index":
            raise ArmFailed(f"{what}: reached a stop {driving} ({(count - start) * enc.scale:+.4g} "
                            f"{enc.unit} from the arm position) without an index pulse: the "
                            f"index is behind the carriage (drive the other way) or Z is not "
                            f"seen (its wiring, z_phase {enc.z_phase})")
        offset = h.at - enc.scale * count
        return offset, (f"home {h.port} ({enc.physical}): {h.command} at {h.drive:g} "
                        f"{cmd.unit} for {(n + 1) / rate:.3g} s, still at count {count} "
                        f"({(count - start) * enc.scale:+.6g} {enc.unit} from the arm "
                        f"position) = {h.at:g} {enc.unit}")
    raise ArmFailed(f"{what}: no {'index pulse nor ' if h.to == 'index' else ''}stop within "
                    f"{h.timeout:g} s {driving} (moved {abs(prev - start) * abs(enc.scale):.4g} "
                    f"{enc.unit}); raise the drive or the timeout")


def _check_motion(what: str, driving: str, h: Home, enc: Channel, count: int, start: int,
                  prev: int, rate: float, velocity_limit: float | None) -> None:
    """Travel and velocity limits while driven."""
    moved = abs(count - start) * abs(enc.scale)
    if moved > h.travel:
        raise ArmFailed(f"{what}: moved {moved:.4g} {enc.unit} {driving} without reaching "
                        f"a stop (travel {h.travel:g} {enc.unit})")
    speed = abs(count - prev) * abs(enc.scale) * rate
    if velocity_limit is not None and speed > velocity_limit:
        raise ArmFailed(f"{what}: {h.port} moved at {speed:.4g} {enc.unit}/s, more than "
                        f"its velocity limit {velocity_limit:g} {enc.unit}/s")
