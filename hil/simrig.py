"""The simulated rig: the plant half of a graph behind a simulated DAQ card.

:class:`SimRig` compiles the plant (the hardware blocks' simulated twins and
the devices behind them, see :mod:`hapflow.hil.split`) with hapflow and puts
a card in front of it that behaves like a 16-bit multifunction DAQ card in
hardware-timed single-point mode (the resolution and the input noise are
settings, so that their effects can be told apart from the delay's):

- **analog outputs**: the volts written are clipped to the channel's range
  and quantised to ``bits`` (16) bits (``q = (high - low) / 2^bits``), then scaled to SI
  (``offset + scale * volts``) and applied to the bound plant input; with an
  amplifier-enable line bound on a block and not at its active level (high, or
  low for an active-low enable input), that block's commands are 0;
- **analog inputs**: the bound plant output in SI is converted to volts
  (``(value - offset) / scale``), white Gaussian noise of ``noise`` V rms
  added, clipped to the range and quantised likewise (round to nearest,
  codes ``-2^(bits-1) .. 2^(bits-1) - 1`` around the range centre);
- **encoder counters**: the quadrature edges (X4 counts) of the encoder,
  ``round((value - offset) / (scale * decoding / 4))``: an encoder bound with
  X1 or X2 decoding has ``decoding / 4`` as many cycles per unit, and the
  card (:class:`~hapflow.hil.simdaq.SimDaq`, the gRPC device server) divides
  the edge count down to the decoded count (``floor(edges * decoding / 4)``),
  as a counter decoding X1 or X2 does.  A counter counts from 0 at the card's
  first edge, wherever the plant then sits (a plant starting at ``x0 != 0``
  is a carriage left off its home at power-on; homing, :mod:`hapflow.hil.homing`,
  ties the count to the mechanics).  The counter itself (decoding, Z index,
  digital filter) is :mod:`hapflow.hil.simcounter`'s: the rig gives it the
  edges, their rate (:attr:`SimRig.edge_rate`) and where the encoder's index
  marks are (:attr:`SimRig.index_edges`, :attr:`SimRig.index_period`: the
  plant's position 0, or every revolution of an angular encoder);
- **one sample of transport delay**: :meth:`SimRig.exchange` is one sample
  clock edge.  The values passed are the host's latest write; they are
  latched at this edge, the inputs are sampled at this edge, and the plant
  then runs one tick holding them.  The host reads those samples in its next
  tick and its write reaches the plant at the edge after: a command computed
  from the samples of edge k acts from edge k + 1 on, one sample later than
  in ``--mode sim``, as on the real card.

Fault injection (:class:`Fault`) covers the card and the sensors: a stuck or
saturated channel, an encoder glitch, a corrupted (non-finite) reading, a DAQ
error at a chosen sample, and the timing faults the pacing backends apply
(dropped and late samples, :meth:`SimRig.timing_fault`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numba import njit

from hapflow.errors import HapflowError
from hapflow.graph import Graph

from .backend import Channel, DaqError, by_kind
from .cardports import value_index
from .scales import ScaleArrays, scaled, volts_of
from .split import plant_graph

FAULT_KINDS = ("drop", "late", "stuck", "saturate", "glitch", "nan", "error")
"""Fault kinds: dropped samples, a late sample (host stall), a stuck or saturated
channel, an encoder glitch, a non-finite reading, a DAQ error."""

NEEDS_VALUE = {"late": "the stall in s, e.g. late@10=0.005 (a value > 0)",
               "glitch": "the jump in counts, e.g. glitch@200:enc.pos=400 (a whole number, not 0)",
               "saturate": "the end of the range, e.g. saturate@500:head.force=1 (> 0: the high "
                           "end, < 0: the low end)"}
"""Fault kinds whose value matters, and what it is (a missing value would be a silent no-op)."""
NEEDS_CHANNEL = ("stuck", "saturate", "glitch", "nan")
COUNTER_RAILS = (np.iinfo(np.int32).min, np.iinfo(np.int32).max)
"""What a saturated 32-bit counter reads: its low and high end."""

BITS = 16
"""Resolution of the simulated card's converters."""


@dataclass(frozen=True)
class Fault:
    """One injected fault.

    Parameters
    ----------
    kind : str
        One of :data:`FAULT_KINDS`:

        - ``drop``: ``ticks`` consecutive sample clocks reported missed;
        - ``late``: the host is held ``value`` s at each of ``ticks`` ticks;
        - ``stuck``: channel ``channel`` keeps its last reading;
        - ``saturate``: channel ``channel`` reads its range limit (``value`` > 0:
          high, < 0: low; a counter its 32-bit end);
        - ``glitch``: ``value`` counts added to encoder ``channel`` (a one-off
          jump of the count, which stays);
        - ``nan``: analog input ``channel`` reads NaN (a corrupted driver reading);
        - ``error``: the card raises :class:`DaqError` at sample ``tick``, naming
          ``channel`` if given, else the devices.
    tick : int
        Sample index (0 = the first sample clock) at which it starts.
    ticks : int
        How many samples it lasts (stuck, saturate, nan, drop, late).
    channel : str, optional
        Port (``"enc.pos"``) or physical channel (``"Dev1/ctr0"``).
    value : float
        Kind-specific value (see ``kind``).
    """

    kind: str
    tick: int
    ticks: int = 1
    channel: str | None = None
    value: float = 0.0

    def __post_init__(self):
        if self.kind not in FAULT_KINDS:
            raise HapflowError(f"unknown fault kind {self.kind!r}; valid: {', '.join(FAULT_KINDS)}")
        if self.tick < 0 or self.ticks < 1:
            raise HapflowError(f"fault {self.kind}: tick must be >= 0 and ticks >= 1")
        name = f"fault {self.kind}@{self.tick}"
        value = self.value
        if self.kind in NEEDS_VALUE and not (math.isfinite(value) and value != 0.0
                                             and (self.kind != "late" or value > 0.0)
                                             and (self.kind != "glitch" or value == int(value))):
            raise HapflowError(f"{name}: give {NEEDS_VALUE[self.kind]}; got "
                               f"{value:g}" + (" (no value)" if value == 0.0 else ""))
        if self.kind in NEEDS_CHANNEL and not self.channel:
            raise HapflowError(f"{name}: name the input channel, e.g. {self.kind}@{self.tick}:"
                               f"enc.pos (a port or a physical channel such as Dev1/ctr0)")

    def active(self, tick: int) -> bool:
        """True while the fault lasts at sample ``tick``."""
        return self.tick <= tick < self.tick + self.ticks

    @classmethod
    def parse(cls, text: str) -> "Fault":
        """Read ``KIND@TICK[xTICKS][:CHANNEL][=VALUE]``, e.g. ``glitch@200:enc.pos=400``.

        Raises
        ------
        HapflowError
            For a malformed text, naming what is valid.
        """
        rest, _, value = text.partition("=")
        rest, _, channel = rest.partition(":")
        kind, _, when = rest.partition("@")
        tick, _, ticks = when.partition("x")
        try:
            return cls(kind.strip(), int(tick), int(ticks) if ticks else 1, channel or None,
                       float(value) if value else 0.0)
        except ValueError:
            raise HapflowError(f"fault {text!r}: write KIND@TICK[xTICKS][:CHANNEL][=VALUE], e.g. "
                               f"'glitch@200:enc.pos=400'; kinds: {', '.join(FAULT_KINDS)}") from None


@njit(cache=True)
def _dac(volts, low, high, levels):
    """Conversion of ``volts`` clipped to [low, high] (V) with ``levels`` codes (0: ideal)."""
    if levels == 0.0:
        return min(max(volts, low), high)
    q = (high - low) / levels
    mid = 0.5 * (low + high)
    code = math.floor((volts - mid) / q + 0.5)
    code = min(max(code, -0.5 * levels), 0.5 * levels - 1.0)
    return mid + code * q


@njit(cache=True)
def _apply_outputs(f, index, ao, scale, offset, low, high, levels, enabled, kind, coeffs,
                   ncoeffs, tvolts, tvalues, npoints):
    """The actuators' commands from the card's volts (a custom scale where ``kind``)."""
    for k in range(index.size):
        v = _dac(ao[k], low[k], high[k], levels)
        y = scaled(k, v, kind, coeffs, ncoeffs, tvolts, tvalues, npoints) if kind[k] else \
            scale[k] * v
        f[index[k]] = (offset[k] + y) if enabled[k] else 0.0


@njit(cache=True)
def _sample_inputs(f, index, scale, offset, low, high, levels, noise, out, kind, volts, values,
                   npoints):
    """The sensors' volts (a custom scale's inverse where ``kind[k]``), noise, the converter."""
    for k in range(index.size):
        x = f[index[k]] - offset[k]
        v = volts_of(x, k, kind, volts, values, npoints) if kind[k] else x / scale[k]
        out[k] = _dac(v + noise[k], low[k], high[k], levels)


@njit(cache=True)
def _count(f, index, scale, offset, out):
    for k in range(index.size):
        out[k] = np.int64(math.floor((f[index[k]] - offset[k]) / scale[k] + 0.5))


@njit(cache=True)
def _edge_rate(f, index, scale, offset, rate, prev, out):
    """|edges per second| over the last sample of each encoder (its position in edges, not
    rounded, kept in ``prev``)."""
    for k in range(index.size):
        e = (f[index[k]] - offset[k]) / scale[k]
        out[k] = abs(e - prev[k]) * rate
        prev[k] = e


def _arrays(chs: list[Channel]) -> tuple[np.ndarray, ...]:
    return tuple(np.array([getattr(c, a) for c in chs], dtype=np.float64)
                 for a in ("scale", "offset", "low", "high"))


class SimRig:
    """The plant of ``graph`` behind a simulated 16-bit DAQ card (see the module docstring).

    Parameters
    ----------
    graph : Graph
        The whole graph (with its ``hardware:`` blocks).
    channels : sequence of Channel
        The bound channels (:func:`hapflow.hil.bindings.bind`).
    rate : float
        Sample rate in Hz; must be the graph's rate.
    seed : int
        Seed of the card's noise (the plant's own noise follows the graph seed,
        as in ``--mode sim``).
    faults : sequence of Fault
        Faults to inject.
    noise : float
        Analog-input noise in V rms (default 1e-4 V, about a third of an LSB
        of a +-10 V range).
    bits : int or None
        Converter resolution (default :data:`BITS`); None makes the converters
        ideal (clipping only), to separate the effect of quantisation from
        that of the transport delay (``bench/hil_ident.py``).
    """

    def __init__(self, graph: Graph, channels: Sequence[Channel], rate: float, seed: int = 0,
                 faults: Sequence[Fault] = (), noise: float = 1e-4, bits: int | None = BITS):
        from hapflow.simulation import Simulation
        if abs(rate - graph.rate) > 1e-9 * graph.rate:
            raise DaqError(f"the simulated rig runs at the graph's rate {graph.rate:g} Hz, "
                           f"not {rate:g} Hz")
        self.channels = list(channels)
        self.ai, self.ao = by_kind(self.channels, "ai"), by_kind(self.channels, "ao")
        self.ci, self.do = by_kind(self.channels, "ci_encoder"), by_kind(self.channels, "do")
        self.half = plant_graph(graph, self.channels)
        self.sim = Simulation(self.half.graph, chunk=1.0 / rate)
        self.faults = list(faults)
        self._check_faults()
        if bits is not None and not (isinstance(bits, int) and 2 <= bits <= 32):
            raise HapflowError(f"simulated card resolution bits={bits!r}: give an integer "
                               "2..32, or None for ideal converters")
        if not (noise >= 0.0 and math.isfinite(noise)):
            raise HapflowError(f"simulated card input noise {noise!r} V rms: give a finite "
                               "value >= 0")
        self._levels = 0.0 if bits is None else float(2 ** bits)
        self.arrays = self.sim.arrays
        self._ao_index = np.array([value_index(self.sim.layout, self.half.values[c.port])
                                   for c in self.ao], dtype=np.int64)
        self._ai_index = self._log_index(self.ai)
        self._ci_index = self._log_index(self.ci)
        self._ao_par, self._ai_par, self._ci_par = _arrays(self.ao), _arrays(self.ai), _arrays(self.ci)
        self._ai_inverse = ScaleArrays([c.custom for c in self.ai], [c.low for c in self.ai],
                                       [c.high for c in self.ai]).inverse()
        self._ao_forward = ScaleArrays([c.custom for c in self.ao], [c.low for c in self.ao],
                                       [c.high for c in self.ao]).forward()[1:]
        self._ci_par[0][:] *= [c.decoding / 4 for c in self.ci]     # metres (rad) per X4 edge
        self._enable_of = [self._enable_line(c) for c in self.ao]
        self._enabled = np.ones(len(self.ao), dtype=np.bool_)
        self._active = [c.active for c in self.do]
        self._noise_std = float(noise)
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self._noise = np.zeros((4096, max(1, len(self.ai))))
        self._noise_row = self._noise.shape[0]
        self._held_ai = np.zeros(len(self.ai))
        self._held_counts = np.zeros(len(self.ci), dtype=np.int64)
        self._count0 = np.zeros(len(self.ci), dtype=np.int64)   # X4 count at the first edge
        self._rate = float(rate)
        self._edge_pos = np.zeros(len(self.ci))
        self.edge_rate = np.zeros(len(self.ci))
        """Quadrature edges per second each encoder moved over the last edge (for a filter)."""
        self.index_edges = np.zeros(len(self.ci), dtype=np.int64)
        """An index mark of each encoder, in edges from the card's first edge (its plant
        position 0)."""
        self.index_period = np.array([4 * c.pulses_per_rev for c in self.ci], dtype=np.int64)
        """Edges between index marks: one revolution (angular), 0: one mark (linear)."""
        self._glitch = np.zeros(len(self.ci), dtype=np.int64)
        self.tick = 0
        self.log = self.sim.log[:1]
        self._warm()

    def _warm(self) -> None:
        """Compile (or load) the card helpers now, not at the first sample clock edge."""
        scratch = np.zeros(self.arrays["f"].size)
        _apply_outputs(scratch, self._ao_index, np.zeros(len(self.ao)), *self._ao_par,
                       self._levels, self._enabled,
                       *self._ao_forward)
        row = np.zeros(self.log.shape[1])
        _sample_inputs(row, self._ai_index, *self._ai_par, self._levels, self._noise_now(),
                       np.zeros(len(self.ai)), *self._ai_inverse)
        _count(row, self._ci_index, *self._ci_par[:2], np.zeros(len(self.ci), dtype=np.int64))
        _edge_rate(row, self._ci_index, *self._ci_par[:2], 1.0, np.zeros(len(self.ci)),
                   np.zeros(len(self.ci)))
        self._noise_row = self._noise.shape[0]        # the run starts from a fresh noise block
        self._rng = np.random.default_rng(self._seed)

    # ------------------------------------------------------------------ set-up
    def _log_index(self, chs: list[Channel]) -> np.ndarray:
        return np.array([self.sim.layout.log[tuple(c.port.split("."))].start for c in chs],
                        dtype=np.int64)

    def _enable_line(self, ao: Channel) -> int | None:
        block = ao.port.split(".")[0]
        return next((k for k, d in enumerate(self.do) if d.port.split(".")[0] == block), None)

    def _channel_index(self, fault: Fault) -> tuple[str, int]:
        for kind, chs in (("ai", self.ai), ("ci_encoder", self.ci)):
            for k, c in enumerate(chs):
                if fault.channel in (c.port, c.physical):
                    return kind, k
        names = [c.port for c in self.ai + self.ci]
        raise HapflowError(f"fault {fault.kind}@{fault.tick}: unknown input channel "
                           f"{fault.channel!r}; valid: {', '.join(names) or '(none)'}")

    def _bound(self, fault: Fault) -> Channel:
        """The bound channel (any kind) an ``error`` fault names."""
        for c in self.channels:
            if fault.channel in (c.port, c.physical):
                return c
        raise HapflowError(f"fault {fault.kind}@{fault.tick}: unknown channel {fault.channel!r}; "
                           f"valid: {', '.join(c.port for c in self.channels)}")

    def _check_faults(self) -> None:
        for fault in self.faults:
            if fault.kind in NEEDS_CHANNEL:
                kind, _ = self._channel_index(fault)
                if fault.kind == "glitch" and kind != "ci_encoder":
                    raise HapflowError(f"fault glitch@{fault.tick}: {fault.channel} is not an "
                                       "encoder channel")
                if fault.kind == "nan" and kind == "ci_encoder":
                    raise HapflowError(f"fault nan@{fault.tick}: {fault.channel} is an encoder "
                                       "counter, which reads whole counts, never NaN; a "
                                       "corrupted count is a glitch (glitch@TICK:CHANNEL=COUNTS) "
                                       "or a saturated counter (saturate@TICK:CHANNEL=1)")
            elif fault.kind == "error" and fault.channel:
                self._bound(fault)

    # ------------------------------------------------------------------ run
    def timing_fault(self, tick: int) -> tuple[float, bool]:
        """(seconds the host is held, whether the sample is dropped) at sample ``tick``."""
        late, dropped = 0.0, False
        for fault in self.faults:
            if fault.active(tick):
                if fault.kind == "late":
                    late += fault.value
                elif fault.kind == "drop":
                    dropped = True
        return late, dropped

    def _noise_now(self) -> np.ndarray:
        if self._noise_row == self._noise.shape[0]:
            self._rng.standard_normal(out=self._noise)
            self._noise *= self._noise_std
            self._noise_row = 0
        row = self._noise[self._noise_row]
        self._noise_row += 1
        return row

    def exchange(self, ao_volts: np.ndarray, do_states: np.ndarray, ai_volts_out: np.ndarray,
                 counts_out: np.ndarray) -> None:
        """One sample clock edge: latch the outputs, sample the inputs, advance the plant one tick.

        Parameters
        ----------
        ao_volts : ndarray
            Analog outputs in V, in channel order (the host's latest write).
        do_states : ndarray of bool
            Digital lines in channel order; an amplifier-enable line not at its
            active level zeroes the commands of its block.
        ai_volts_out : ndarray
            Filled with the analog inputs in V sampled at this edge.
        counts_out : ndarray of int64
            Filled with the encoder's quadrature edge counts (X4) at this edge.

        Raises
        ------
        DaqError
            When an ``error`` fault is due at this sample.
        """
        for k, line in enumerate(self._enable_of):
            self._enabled[k] = True if line is None else bool(do_states[line]) == self._active[line]
        f = self.arrays["f"]
        _apply_outputs(f, self._ao_index, ao_volts, *self._ao_par, self._levels, self._enabled,
                       *self._ao_forward)
        a = self.arrays
        self.sim.program.run(1, self.tick, f, a["m"], a["si"], a["sb"], self.log, a["stats"])
        row = self.log[0]          # the bound outputs at this edge (before the solver step)
        _sample_inputs(row, self._ai_index, *self._ai_par, self._levels, self._noise_now(),
                       ai_volts_out, *self._ai_inverse)
        _count(row, self._ci_index, *self._ci_par[:2], counts_out)
        if self.tick == 0:
            self._count0[:] = counts_out
            _count(np.zeros(row.size), self._ci_index, *self._ci_par[:2], self.index_edges)
            self.index_edges -= self._count0
            _edge_rate(row, self._ci_index, *self._ci_par[:2], self._rate, self._edge_pos,
                       self.edge_rate)
        _edge_rate(row, self._ci_index, *self._ci_par[:2], self._rate, self._edge_pos,
                   self.edge_rate)
        counts_out -= self._count0
        if self.faults:
            self._inject(ai_volts_out, counts_out)
        self._held_ai[:] = ai_volts_out
        self._held_counts[:] = counts_out
        self.tick += 1

    def _inject(self, ai: np.ndarray, counts: np.ndarray) -> None:
        for fault in self.faults:
            if fault.kind == "error" and fault.tick == self.tick:
                where = (self._bound(fault).physical if fault.channel else
                         ", ".join(dict.fromkeys(c.device for c in self.channels)) or None)
                raise DaqError(f"simulated DAQ error at sample {self.tick} (injected fault)",
                               where)
            if fault.kind == "glitch" and fault.tick == self.tick:
                self._glitch[self._channel_index(fault)[1]] += int(fault.value)
        counts += self._glitch
        for fault in self.faults:
            if fault.kind not in ("stuck", "saturate", "nan") or not fault.active(self.tick):
                continue
            kind, k = self._channel_index(fault)
            target = ai if kind == "ai" else counts
            if fault.kind == "stuck":
                target[k] = self._held_ai[k] if kind == "ai" else self._held_counts[k]
            elif fault.kind == "saturate" and kind == "ai":
                target[k] = self.ai[k].high if fault.value > 0 else self.ai[k].low
            elif fault.kind == "saturate":
                target[k] = COUNTER_RAILS[fault.value > 0]
            else:
                target[k] = np.nan

    def signal(self, port: str) -> float:
        """Current value (SI) of a plant output ``"block.port"`` (for tests and reports)."""
        block, name = port.split(".")
        slot = self.sim.layout.signals[(block, name)]
        return float(self.arrays[slot.array][slot.start])
