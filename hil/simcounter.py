"""The simulated cards' encoder counters: decoding, Z index reset and digital filter.

The simulated rig (:class:`~hapflow.hil.simrig.SimRig`) gives, per encoder and
sample clock edge, the quadrature edges (X4 counts) the plant moved since the
card's first edge and their rate.  :class:`Counters` turns them into what an
NI counter reports, as NI-DAQmx documents it:

- **decoding** X1, X2, X4: 1, 2 or 4 counts per encoder cycle (the edges
  divided down, rounding towards -inf);
- **initial count** (``initial_pos``/``initial_angle`` in ticks): the count at
  the card's first edge (a Z reset replaces it);
- **Z index** (``zidx_enable``, ``zidx_val``, ``zidx_phase`` of
  ``add_ci_lin_encoder_chan``/``add_ci_ang_encoder_chan``): "the value to
  which to reset the measurement when signal Z is high and signal A and
  signal B are at the states you specify".  The simulated encoders' Z pulse is
  gated to A high, B high (:data:`INDEX_PHASE`): it is at the plant's position
  0 (linear), or at every whole revolution of the plant's angle (angular, one
  index per revolution); each time the plant passes it, the count is reset to
  the Z index value.  A channel set to another phase never sees Z with A and B
  in that state, so it is never reset (NI: "if signal Z is never high while
  signal A and signal B are high, you must choose a phase other than A High
  B High");
- **digital filter** (``ci_encoder_a/b/z_input_dig_fltr_enable`` and
  ``..._min_pulse_width``): pulses shorter than the minimum pulse width do not
  pass.  An A or B pulse lasts two quadrature edges, so while the plant moves
  faster than ``2 / width`` edges per second the counter counts nothing (the
  counts are lost, as on a card whose filter is set too long for the speed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numba import njit

Z_PHASES = {"AHIGH_BHIGH": 10040, "AHIGH_BLOW": 10041, "ALOW_BHIGH": 10042, "ALOW_BLOW": 10043}
"""nidaqmx ``EncoderZIndexPhase`` names and values."""
INDEX_PHASE = "AHIGH_BHIGH"
"""The A/B state the simulated encoders' Z pulse is gated to."""


@dataclass(frozen=True)
class CounterSetup:
    """One counter channel's configuration.

    Attributes
    ----------
    divisor : int
        Quadrature edges per reported count (4 // decoding).
    z_reset : int or None
        Reported count the Z index resets to; None: Z indexing off.
    z_phase : str
        A :data:`Z_PHASES` name.
    filter : float
        Digital filter minimum pulse width in s; 0: off.
    initial : int
        Reported count at the card's first edge.
    """

    divisor: int = 1
    z_reset: int | None = None
    z_phase: str = INDEX_PHASE
    filter: float = 0.0
    initial: int = 0


@njit(cache=True)
def _last_mark(prev, now, index, period):
    """The index mark (edges) passed last moving from ``prev`` to ``now`` (both included);
    ``index`` is one mark, ``period`` the edges between marks (0: one mark only).  Returns
    (found, mark)."""
    lo, hi = min(prev, now), max(prev, now)
    if period == 0:
        return lo <= index <= hi, index
    if now >= prev:
        m = index + ((now - index) // period) * period
    else:
        m = index - ((index - now) // period) * period
    return lo <= m <= hi, m


@njit(cache=True)
def _count(edges, rate, index, period, prev, counted, z_on, z_reset, max_rate, divisor, out):
    """Advance every counter by one edge of the rig; the reported counts into ``out``."""
    for k in range(edges.size):
        e = edges[k]
        step = e - prev[k]
        if max_rate[k] > 0.0 and rate[k] > max_rate[k]:
            step = 0                            # the filter blocks pulses this short
        c = counted[k] + step
        if z_on[k]:
            found, m = _last_mark(prev[k], e, index[k], period[k])
            if found:
                c = z_reset[k] + (e - m if step != 0 else 0)
        counted[k] = c
        prev[k] = e
        out[k] = c // divisor[k]


class Counters:
    """The encoder counters of a simulated card (see the module docstring).

    Parameters
    ----------
    setups : sequence of CounterSetup
        One per encoder, in the rig's order.
    """

    def __init__(self, setups: Sequence[CounterSetup]):
        n = len(setups)
        self.divisor = np.array([s.divisor for s in setups], dtype=np.int64)
        self.z_on = np.array([s.z_reset is not None and s.z_phase == INDEX_PHASE
                              for s in setups], dtype=np.bool_)
        self.z_reset = np.array([(s.z_reset or 0) * s.divisor for s in setups], dtype=np.int64)
        self.max_rate = np.array([2.0 / s.filter if s.filter > 0 else 0.0 for s in setups])
        self.prev = np.zeros(n, dtype=np.int64)
        self.initial = np.array([s.initial * s.divisor for s in setups], dtype=np.int64)
        self.counted = self.initial.copy()
        self.out = np.zeros(n, dtype=np.int64)
        self.plain = not self.z_on.any() and not self.max_rate.any()
        scratch = np.zeros(n, dtype=np.int64)
        _count(scratch, np.zeros(n), scratch, scratch, scratch.copy(), scratch.copy(),
               self.z_on, self.z_reset, self.max_rate, np.maximum(self.divisor, 1), scratch.copy())

    def edge(self, edges: np.ndarray, rate: np.ndarray, index: np.ndarray,
             period: np.ndarray) -> None:
        """One sample clock edge: the rig's ``edges`` since its first edge and their ``rate``
        (edges/s), its index marks (``index`` one mark, ``period`` edges between marks)."""
        if self.plain:
            np.add(edges, self.initial, out=self.out)
            np.floor_divide(self.out, self.divisor, out=self.out)
            return
        _count(edges, rate, index, period, self.prev, self.counted, self.z_on, self.z_reset,
               self.max_rate, self.divisor, self.out)


def filter_rate(width: float) -> float:
    """Quadrature edges per second a digital filter of minimum pulse width ``width`` s passes
    (an A or B pulse lasts two edges); inf when off."""
    return 2.0 / width if width > 0 else math.inf
