"""The DAQ backend contract: channels in raw card units, one hardware-timed sample per tick.

A backend is one DAQ card sampled at ``rate`` Hz in hardware-timed single
point mode.  It deals only in raw card values (volts, counts, line states);
scaling to SI units is the binding layer's job (:mod:`hapflow.hil.bindings`).
Arrays passed to :meth:`Backend.read` and :meth:`Backend.write` are
preallocated by the runner and filled in channel order: analog inputs, then
encoder counters (read); analog outputs, then digital lines (write).

Implementations: :class:`hapflow.hil.simdaq.SimDaq` (the simulated rig paced
by a monotonic clock) and ``hapflow.hil.nidaq.NidaqBackend`` (NI-DAQmx).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from hapflow.errors import HapflowError

if TYPE_CHECKING:
    from .scales import Scale

KINDS = ("ai", "ao", "ci_encoder", "do")
"""Channel kinds: analog input, analog output, quadrature encoder counter, digital output."""


@dataclass(frozen=True)
class Channel:
    """One bound DAQ channel.

    Attributes
    ----------
    port : str
        ``"block.port"`` in the graph, e.g. ``"head.force"`` (``"motor.enable"``
        for an amplifier-enable line).
    kind : {'ai', 'ao', 'ci_encoder', 'do'}
        Channel kind.
    physical : str
        Physical channel, e.g. ``"Dev1/ai0"``, ``"Dev1/ao0"``, ``"Dev1/ctr0"``,
        ``"Dev1/port0/line0"``.
    scale : float
        Port units per volt (ai/ao) or per count as the card reports it
        (ci_encoder, after ``decoding``); 1 for do.
    offset : float
        SI value at 0 V / 0 counts.
    low, high : float
        Card range in volts (ai/ao); ignored for ci/do.
    unit : str
        SI unit of the bound port.
    safe : float
        Output in the safe state, which is also the hardware watchdog's
        expiration state: volts (ao), or the line level 0/1 (do: the level
        that disables the amplifier, 1 for an active-low enable input).
    decoding : {1, 2, 4}
        Encoder: quadrature decoding X1, X2 or X4 (counts per encoder cycle).
    pulses_per_rev : int
        Angular encoder: pulses (cycles) per revolution; 0 for a linear encoder.
    terminal : str
        Analog input terminal configuration, nidaqmx's ``TerminalConfiguration``
        name: ``DEFAULT``, ``RSE``, ``NRSE``, ``DIFF`` or ``PSEUDO_DIFF``.
    z_index : int or None
        Encoder: the count (as reported, after decoding) the Z index resets it to;
        None: Z indexing off.
    z_phase : str
        Encoder: the A/B state of the Z reset, nidaqmx's ``EncoderZIndexPhase`` name.
    filter : float
        Encoder: digital filter minimum pulse width in s on the A, B (and Z) inputs;
        0: off.
    initial : int
        Encoder: the count (as reported) when the card starts (NI-DAQmx ``initial_pos``
        in ticks): 0, or :data:`~hapflow.hil.homing.SEEK_START` when homed to its index.
    custom : Scale or None
        Analog input: a custom scale (:mod:`hapflow.hil.scales`) from volts to the unit,
        applied after the read; ``scale`` is then 0 and ``offset`` a tare's.
    """

    port: str
    kind: str
    physical: str
    scale: float
    offset: float
    low: float
    high: float
    unit: str
    safe: float = 0.0
    decoding: int = 4
    pulses_per_rev: int = 0
    terminal: str = "DEFAULT"
    z_index: int | None = None
    z_phase: str = "AHIGH_BHIGH"
    filter: float = 0.0
    initial: int = 0
    custom: Scale | None = None

    def scaled(self, volts: float) -> float:
        """The port's value at ``volts`` without the offset (the custom or linear scale)."""
        return float(self.custom(volts)) if self.custom is not None else self.scale * volts

    def volts(self, value: float) -> float:
        """The volts at which the port reads ``value`` (the scale's inverse)."""
        if self.custom is not None:
            return self.custom.inverse(value - self.offset, self.low, self.high)
        return (value - self.offset) / self.scale

    @property
    def active(self) -> bool:
        """Level of a digital line while running (the opposite of its safe level)."""
        return not self.safe

    @property
    def device(self) -> str:
        """The device part of the physical channel (``"Dev1"``)."""
        return self.physical.split("/", 1)[0]


class DaqError(HapflowError):
    """A DAQ failure (missing device or driver, bad channel, I/O error).

    Parameters
    ----------
    message : str
        What went wrong and what to do.
    channel : str, optional
        The physical channel or port concerned; prefixed to the message.
    """

    def __init__(self, message: str, channel: str | None = None):
        self.channel = channel
        super().__init__(f"{channel}: {message}" if channel else message)


class WatchdogExpired(DaqError):
    """The card's hardware watchdog expired: its outputs are held in the safe state."""


def by_kind(channels: Sequence[Channel], kind: str) -> list[Channel]:
    """The channels of one kind, in the given order (the order of the runtime arrays)."""
    if kind not in KINDS:
        raise ValueError(f"channel kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return [c for c in channels if c.kind == kind]


class Backend(abc.ABC):
    """One DAQ card, hardware-timed single point at ``rate`` Hz.

    The runner calls ``device`` and ``self_test`` (the arm sequence,
    :mod:`hapflow.hil.arm`), ``open``, ``arm_watchdog``, ``start``, then per tick
    ``wait``, ``read``, ``write`` and, often enough, ``pet``; ``safe_state``
    whenever it stops (also on errors), then ``close``.  Every method may
    raise :class:`DaqError`.

    Safe state: every output at its channel's ``safe`` value (0 V, enable
    lines at the level that disables the amplifier).  The card's hardware
    watchdog puts the outputs there on its own when the loop stops petting it
    (killed, stopped, hung), so the safe state holds without the process.
    """

    watchdog_note: str = ""
    """After :meth:`arm_watchdog`: the outputs the hardware watchdog cannot put in their
    safe state on this card ('' when it covers every one)."""

    paced: bool = True
    """False for a backend that runs as fast as possible on a virtual clock
    (the runner then measures no lateness; only samples the card reports late
    count as overruns)."""

    @abc.abstractmethod
    def device(self, name: str) -> tuple[str, dict[str, list[str]]]:
        """The product type of device ``name`` and its physical channels by kind
        (``{"ai": ["Dev1/ai0", ...], "do": ["Dev1/port0/line0", ...], ...}``).

        Raises
        ------
        DaqError
            When the device does not exist (listing those that do).
        """

    @abc.abstractmethod
    def self_test(self, name: str) -> bool:
        """Self-test device ``name``: True when it passed, False when the device has no
        self-test; :class:`DaqError` when it failed."""

    @abc.abstractmethod
    def open(self, channels: Sequence[Channel], rate: float) -> None:
        """Create the tasks and channels and configure the timing.

        Raises
        ------
        DaqError
            Naming the channel, when a device, channel or the driver is missing.
        """

    @abc.abstractmethod
    def arm_watchdog(self, timeout: float) -> None:
        """Configure the card's hardware watchdog: it expires ``timeout`` s after the last
        :meth:`pet` and then drives every output to its safe value and ignores writes.
        Called after :meth:`open`; the timer runs from :meth:`start`."""

    @abc.abstractmethod
    def pet(self) -> None:
        """Reset the hardware watchdog timer.

        Raises
        ------
        WatchdogExpired
            When it had already expired: the card holds the outputs safe and
            ignores writes.
        """

    @abc.abstractmethod
    def start(self) -> None:
        """Start the sample clock (outputs at their safe values)."""

    @abc.abstractmethod
    def wait(self) -> bool:
        """Block until the next sample clock; return True if this sample was late."""

    @abc.abstractmethod
    def read(self, ai_volts: np.ndarray, counts: np.ndarray) -> None:
        """Fill ``ai_volts`` (V) and ``counts`` (int64) with this sample, in channel order."""

    @abc.abstractmethod
    def write(self, ao_volts: np.ndarray, do_states: np.ndarray) -> None:
        """Write the analog outputs (V) and digital lines (bool), in channel order."""

    @abc.abstractmethod
    def safe_state(self) -> None:
        """Drive every output to its channel's safe value, immediately."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop and release the tasks (safe to call twice)."""

    def edge_time(self) -> int | None:
        """Monotonic time (ns) of the sample clock edge whose samples :meth:`read` returns.

        Optional: a backend that knows it (the simulated card) returns it, so the
        runner measures lateness and skipped edges against the edges; the
        default ``None`` makes the runner use its wake-up times.
        """
        return None
