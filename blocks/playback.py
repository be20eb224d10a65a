"""Playback of recorded data into a graph."""
from __future__ import annotations

import math

import numpy as np

from hapflow.block import Block, ParamError
from hapflow.datafile import DataFileError, Signal, read_signal, si_unit
from hapflow.errors import GraphError
from hapflow.jit import njit
from hapflow.params import REQUIRED, Live, Structural, at_least, one_of, positive
from hapflow.ports import Out
from hapflow.units import UnitError, dimension

HALF = 8
"""Half width of the windowed-sinc kernel in samples (Lanczos window, 16 taps)."""


@njit(inline="always")
def _position(t, d):
    """Position of time ``t`` in the window, in samples (0 = the window's first sample)."""
    return t * d[D.rate] - d[D.first]


@njit(inline="always")
def _clamped(d, k):
    """Window sample ``k``; the Python side pads the window beyond the file with its end values."""
    w = d.shape[0] - D.samples
    return d[D.samples + min(max(k, 0), w - 1)]


@njit
def _zoh(t, x, d, m, p, y):
    # 1e-9 of a sample: a tick that lands on a sample time in exact arithmetic takes that sample
    y[0] = p[P.scale] * _clamped(d, int(math.floor(_position(t, d) + 1e-9)))


@njit
def _linear(t, x, d, m, p, y):
    u = _position(t, d)
    k = int(math.floor(u))
    f = u - k
    y[0] = p[P.scale] * ((1.0 - f) * _clamped(d, k) + f * _clamped(d, k + 1))


@njit
def _sinc(t, x, d, m, p, y):
    u = _position(t, d)
    k = int(math.floor(u + 0.5))
    f = u - k                                      # in [-0.5, 0.5): sin(pi f) keeps its precision
    at = u + d[D.first]                            # position in the file, in samples
    if f == 0.0 or at <= 0.0 or at >= d[D.count] - 1.0:   # on a sample, or an end value holding
        y[0] = p[P.scale] * _clamped(d, k)
        return
    s = math.sin(math.pi * f)
    acc = 0.0
    for j in range(-HALF, HALF + 1):
        z = f - j                                  # distance from sample k + j, in samples
        if abs(z) < HALF:
            # sinc(z) sinc(z / HALF), with sin(pi (f - j)) = (-1)^j sin(pi f)
            sz = s if j % 2 == 0 else -s
            acc += _clamped(d, k + j) * (sz / (math.pi * z)) * (
                math.sin(math.pi * z / HALF) / (math.pi * z / HALF))
    y[0] = p[P.scale] * acc


_KERNELS = {"zoh": _zoh, "linear": _linear, "sinc": _sinc}


class Playback(Block):
    """Recorded signal played into the graph at any rate, O(1) work per tick.

    Reads one column of a data file (:func:`hapflow.datafile.read_signal`:
    CSV, NumPy ``.npy``, a hapflow HDF5 recording or any HDF5 dataset, NI
    TDMS) and outputs ``scale`` times its value at each tick, interpolated
    between samples by ``interpolation``: ``zoh`` (the last sample at or
    before t), ``linear``, or ``sinc`` (band-limited: a Lanczos-windowed sinc
    over 16 samples, exact for content well below the file's Nyquist
    frequency).  Sample ``i`` of the file plays at graph time
    ``i / sample_rate``; before the first sample and after the last the
    end values hold.

    The samples do not live in the generated code or the parameter array: the
    kernel reads a window of ``window`` samples in the block's own discrete
    state, which the Python side refills between chunks (the scheduler runs
    chunks short enough).  A new file, column or length therefore reuses the
    compiled kernel.  The time base is the file's (a CSV ``time`` column, a
    recording's time, a TDMS waveform's increment) or ``sample_rate``; a file
    sampled faster than the block runs is rejected, since ticks would skip
    samples.

    Units: a value column whose file names its unit (CSV ``force [mN]``, an
    HDF5 ``unit`` attribute, a TDMS ``unit_string``) is converted to the SI
    ``unit`` (by default the SI unit of the file's: ``mm`` plays in ``m``); a
    unit of another quantity than ``unit`` is an error, so a file in
    millimetres is never played as metres.  ``scale`` multiplies on top.

    Ports
    -----
    y : out, (1,), unit     the recorded value (state only)
    """

    params = {
        "file": Structural(REQUIRED, kind="file",
                           doc="data file (.csv, .npy, .h5/.hdf5, .tdms); in a graph file, "
                               "relative to the graph file"),
        "column": Structural("", kind="str",
                             doc="CSV column, recording signal, HDF5 dataset, TDMS group/channel, "
                                 ".npy column number (empty: the only one)"),
        "sample_rate": Structural(None, unit="Hz", check=positive,
                                  doc="sample rate of a file without a time base (Hz)"),
        "interpolation": Structural("linear", kind="str", check=one_of("zoh", "linear", "sinc"),
                                    doc="zoh | linear | sinc (windowed sinc, band-limited)"),
        "scale": Live(1.0, doc="factor from the file's values to the output unit"),
        "window": Structural(4096, kind="int", check=at_least(64),
                             doc="samples held in the kernel's state at a time"),
        "unit": Structural(None, kind="str",
                           doc="SI unit of the output (default: the file's, in SI; none if the "
                               "file gives none); values in a unit the file names (mm, mN, "
                               "V...) are converted to it"),
    }
    dstate = {"first": 1, "rate": 1, "count": 1, "samples": 1}
    """Index of the window's first sample in the file, the file's sample rate (Hz), its
    number of samples, then the ``window`` samples held (from offset ``samples``)."""
    python_side = ("file", "column", "sample_rate")
    """Parameters read only by the Python side: they do not change the generated code."""

    def configure(self) -> None:
        try:
            signal = read_signal(self.file, self.column)
        except DataFileError as exc:
            raise ParamError("file", str(exc)) from None
        rate = signal.rate if signal.rate is not None else self.sample_rate
        if rate is None:
            raise ParamError("sample_rate", f"{signal.where} has no time base; give sample_rate "
                                            "(Hz)")
        if signal.rate is not None and self.sample_rate is not None and \
                abs(self.sample_rate / signal.rate - 1.0) > 1e-6:
            raise ParamError("sample_rate", f"sample_rate {self.sample_rate:g} Hz disagrees with "
                                            f"the {signal.rate:g} Hz time base of {signal.where}")
        factor, unit = self._conversion(signal)
        self._samples = signal.values * factor
        self._rate = float(rate)
        self._where = signal.where
        self.dstate = D.samples + self.window
        self.outputs = {"y": Out(1, unit=unit, depends="state", doc="recorded value")}

    def _conversion(self, signal: Signal) -> tuple[float, str | None]:
        """Factor from the file's values to the output's SI unit, and that unit."""
        given = self.unit
        if given is not None:
            try:
                dimension(given)
            except UnitError as exc:
                raise ParamError("unit", f"parameter 'unit': {exc} (outputs carry SI units; "
                                         "the file's values are converted to it)") from None
        known = si_unit(signal.unit) if signal.unit else None
        if known is None:           # no unit in the file, or one hapflow does not know: as given
            return 1.0, given
        if given is not None and dimension(given) != dimension(known[1]):
            raise ParamError("unit", f"{signal.where} is in {signal.unit}, not a quantity of "
                                     f"unit {given!r}; give unit: {known[1]} or leave it out")
        return known[0], given if given is not None else known[1]

    def kernels(self) -> dict:
        return {"output": _KERNELS[self.interpolation]}

    def structural_key(self) -> tuple:
        key = super().structural_key()
        kept = tuple((n, v) for n, v in key[2] if n not in self.python_side)
        return (*key[:2], kept, *key[3:])

    @property
    def sample_time(self) -> float | None:
        return self.__dict__.get("_sample_time")

    @sample_time.setter
    def sample_time(self, value: float | None) -> None:
        """Set by the graph when the block is added (or the graph's rate changes): the time
        base is checked here, so a graph file's error names the ``file:`` line."""
        if value is not None and self._rate * value > 1.0 + 1e-9:
            raise GraphError(f"{self._where} is sampled at {self._rate:g} Hz, faster than the "
                             f"block's {1.0 / value:g} Hz: ticks would skip samples; run the "
                             "block at least as fast as the file", key="file")
        self.__dict__["_sample_time"] = value

    # ------------------------------------------------------------ Python side
    def _fill(self, d: np.ndarray, t: float) -> None:
        """Load the window that starts a few samples before time ``t``."""
        first = int(math.floor(t * self._rate)) - HALF - 2
        w = d.size - D.samples
        idx = np.clip(np.arange(first, first + w), 0, self._samples.size - 1)
        d[D.samples:] = self._samples[idx]
        d[D.first], d[D.rate], d[D.count] = first, self._rate, self._samples.size

    initial_depends = ()                  # the file's first window (structural parameters)

    def initial_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        d = np.zeros(self.dstate)
        self._fill(d, 0.0)
        return np.zeros(0), d, np.zeros(0, dtype=np.int64)

    def drain_limit(self) -> int | None:
        # ticks may evaluate the output up to one tick ahead (solver stages): keep 2 HALF + 8 spare
        samples = self.window - 2 * HALF - 8
        ticks_per_sample = 1.0 / (self._rate * (self.sample_time or 1.0 / self._rate))
        return max(1, int(samples * ticks_per_sample) - 2)

    def drain(self, d: np.ndarray, m: np.ndarray, t0: float, t1: float) -> None:
        self._fill(d, t1)


P, D = Playback.P, Playback.D         # the offsets its kernels name
