"""Data preparation: motion estimates, direction labels, grouping and sorting, file loaders.

Identification needs position ``x``, velocity ``v``, acceleration ``a`` and
force ``F`` at every sample.  The rig measures ``x`` (encoder), ``F`` and
``a`` (impedance head); ``v`` must be estimated.  :func:`estimate_motion`
offers six estimators (none lags, so no delay biases the fit):

``spectral``
    band-limited FFT differentiation of the position (:func:`spectral`):
    exact in its pass band at any ratio of content to sample rate (central
    differences applied twice lose 15 % of the acceleration at a ninth of the
    sample rate).  The default without an accelerometer, its corner set from
    the position's own band (:func:`choose_estimator`, which also says why).

``savgol``
    Savitzky-Golay differentiation (:func:`savgol`): a quartic fitted by least
    squares to a sliding window of the position, its window set from
    ``cutoff`` (the data's band, as for ``spectral``).  Local, so a record's
    ends need no extension; exact for polynomials up to the fourth degree,
    but at 9 samples per resonance period (a 7-sample window) its derivatives
    and its smoothing differ enough in gain that m, b, k1 come out 9-16 %
    off where ``spectral`` is within 0.3 % (``bench/ident_rates.py``).
``rts``
    Rauch-Tung-Striebel smoother of a kinematic model (:func:`rts`): position,
    velocity and acceleration as states driven by white jerk, the position
    measured; the Kalman filter forward and the RTS pass backward give the
    least-squares trajectory, zero phase.  The ratio of jerk to measurement
    noise sets the smoother's corner, taken from ``cutoff`` as for
    ``spectral``.  Needs no extension at the record's ends (the end samples
    are only noisier), and is exact for a noise-free quadratic.  Not the
    default: its 6th-order roll-off passes more noise above the corner than
    the spectral taper (on the 4 kHz rig at the same corner, 16x the velocity
    and 6x the acceleration error), and at 9 samples per period its derivative
    states differ from ``(i w)^r`` times its position filter by 1-7 % at
    140-210 Hz, which biases m and k1 by ~5 % (``bench/ident_rates.py``).
``difference``
    central differences of the raw encoder (baseline only; not recommended).
``encoder``
    zero-phase Butterworth low-pass of the encoder position (``order``,
    ``cutoff``; ``scipy.signal.butter`` + ``sosfiltfilt``, so the effective
    order is doubled and the phase is zero), then central differences for
    ``v`` and again for ``a``.
``accel``
    the accelerometer, low-passed at ``cutoff`` and high-passed at
    ``highpass`` (it has no DC response), integrated (trapezoid) for ``v``,
    whose drift is removed by the same zero-phase high-pass.
``fusion``
    complementary filter: below ``crossover`` from the encoder estimate,
    above it from the accelerometer (low-passed at ``cutoff``) and its
    integral: ``v = v_acc + LP_c(v_enc - v_acc)``, ``a = a_acc + LP_c(a_enc - a_acc)``
    with ``LP_c`` a zero-phase Butterworth low-pass at ``crossover``.  The two
    paths sum to one at every frequency, so nothing is lost or counted twice;
    accelerometer bias and integration drift are low-frequency and are
    replaced by the encoder.

Which works best (``bench/ident.py`` prints these tables).  (1) A 100 s,
1-4 Hz, 25 mm swept sine at 4 kHz through a known piecewise model (5 um
encoder; accelerometer noise 0.05 m/s^2 RMS plus a 0.02 m/s^2 bias; force
noise 0.02 N); RMS errors of the estimates and parameter errors of a
segmented fit on the true segment edges, % of the true values' RMS::

    estimator      v RMS [m/s]  a RMS [m/s^2]   m %     b %     k %     F0 %
    difference     4.1e-03      1.4e+01        98.5   133.2   12.5     34.3
    causal 50 Hz   2.6e-02      5.6e-01         7.6    15.0    0.39     1.4  (real-time filter)
    encoder  40 Hz 3.3e-05      7.0e-03         0.052   0.035  0.0039   0.035
    accel   200 Hz 2.4e-03      1.9e-02         0.97    2.1    0.11     0.45
    fusion  200 Hz 7.1e-05      1.4e-02         0.042   0.029  0.0025   0.033

(2) The simulated rig of ``graphs/colton2005_sweep.yaml`` (PID-driven motor,
5 um encoder, impedance head; truth from the device), median |error| of 8
segments over +-22 mm::

    estimator      v RMS [m/s]  a RMS [m/s^2]  m [kg]  b [N s/m]  k [N/m]  F0 [N]  NRMSE %
    difference     4.1e-03      1.4e+01        0.58    9.7        206      2.96    1.43
    encoder  40 Hz 1.2e-03      5.2e-01        0.020   0.64        38      0.46    0.34
    encoder 100 Hz 2.5e-04      3.2e-01        0.013   0.36         4.1    0.077   0.22
    fusion  200 Hz 2.6e-04      2.9e-01        0.025   0.37         5.1    0.092   0.19

``fusion`` (the default when there is an accelerometer) gives the best or
near-best parameters and the lowest NRMSE in both: its acceleration is the
accelerometer's (no double differentiation, so a wide band costs little
noise) and its velocity is the encoder's below the 5 Hz crossover.  The
zero-phase ``encoder`` differentiator is as good when its band is wide
enough for the data (40 Hz suits the noise-limited synthetic data; the rig's
servo chatter puts real acceleration - and ``m a`` in the force - above
40 Hz, which a narrow filter removes from ``a`` but not from ``F``).
``accel`` loses the low frequencies of ``v`` to its high-pass.  What spoils
the damping (seed 000's complaint) is a raw difference (noise: m and b off
by ~100 %) or a causal filter (lag: b off by 15 %); zero-phase estimators
remove both.  The other limit is excitation: under a single sinusoid
``a = -w^2 x`` and, per direction, ``v`` is a function of ``x``, so within a
segment ``m`` cannot be told from ``k`` (median condition number 47 vs 4.7
for the sweep, m off by ~100 %): the swept sine of seed 002 fixes that.

The first and last ``trim`` seconds (:func:`default_trim`) are marked
invalid (``Motion.valid``): the zero-phase filters' edge transients spoil
them, and they are neither fitted nor verified.

Direction grouping (:func:`direction_labels`): ``+1`` where the velocity
estimate exceeds ``deadband``, ``-1`` below ``-deadband``, ``0`` (not used for
fitting) in between.  :func:`group` splits the samples by direction and sorts
each group by position (stable sort, ties keep time order).
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from ..units import UnitError, scale, to_si
from .errors import IdentError, SignalError

VELOCITY_METHODS = ("fusion", "spectral", "savgol", "rts", "encoder", "accel", "difference")
BAND_METHODS = ("spectral", "savgol", "rts")
"""Estimators whose corner comes from the position's own band (:func:`band_cutoff`)."""
SAVGOL_ORDER = 4
"""Degree of the Savitzky-Golay polynomial: the acceleration is its second derivative, so
a quadratic would leave it a constant per window; a quartic keeps it flat to a higher
fraction of the window's band."""

MAX_RATE = 1e7
"""Highest sample rate (Hz) of identification data, as of ``--rate``."""
FEWEST_SAMPLES = 16
"""Shortest record the zero-phase filters, spectral derivatives and RTS smoother take."""

DEFAULTS = {"order": 2, "cutoff": None, "crossover": 5.0, "highpass": 0.5, "deadband": 5e-3,
            "trim": None}
"""Default estimator settings: Butterworth order, low-pass cutoff (Hz; ``None``:
:func:`default_cutoff`), fusion crossover (Hz), accelerometer high-pass (Hz),
direction dead band (m/s), and the time trimmed at each end (s; ``None``:
:func:`default_trim`)."""


def signal_band(x: np.ndarray, rate: float, snr: float = 30.0) -> float:
    """Highest frequency (Hz) at which the position's spectrum stands ``snr`` above its noise floor.

    Welch estimate of the power spectral density (Kaiser window); the floor is the median
    density over the top fifth of the band (0.4-0.5 times the sample rate),
    where a record sampled well above its content holds only noise (if the
    content reaches the Nyquist frequency the floor is overestimated and the
    band comes out low, which errs toward less noise).  A linear trend is
    removed first so a drift does not leak into every frequency.
    """
    from scipy.signal import welch
    x = np.asarray(x, dtype=np.float64)
    nperseg = int(min(x.size, max(256, 2 ** round(np.log2(max(rate, 1.0))))))
    # Kaiser beta 20: side lobes low enough that a clean line does not leak above the floor
    f, psd = welch(x, rate, window=("kaiser", 20.0), nperseg=nperseg, detrend="linear")
    floor = float(np.median(psd[f >= 0.4 * rate])) if np.any(f >= 0.4 * rate) else 0.0
    above = np.flatnonzero(psd[1:] > snr * floor) + 1
    return float(f[above[-1]]) if above.size else float(f[1])


def choose_estimator(x: np.ndarray, rate: float, accel: np.ndarray | None) -> tuple[str, float, str]:
    """Default estimator and cutoff for the data, and why (printed by ``hapflow identify``).

    With an accelerometer: ``fusion`` at :func:`default_cutoff` (its
    acceleration is measured, not differentiated).  Without one:
    ``spectral`` with its corner at 1.25 times the position's band
    (:func:`signal_band`), at least 10 Hz and at most 0.4 times the sample
    rate.  Spectral differentiation is exact in its pass band at any ratio of
    content to sample rate, where central differences applied twice lose 15 %
    of the acceleration at a ninth of the sample rate; and a fixed corner
    cannot suit both a 4 kHz rig driven at 4 Hz and a DAQ at 9 times a 70 Hz
    resonance.
    """
    if accel is not None:
        cutoff = default_cutoff("fusion", rate)
        return "fusion", cutoff, (f"fusion: an accelerometer is present (encoder below the "
                                  f"{DEFAULTS['crossover']:g} Hz crossover, accelerometer above, "
                                  f"low-pass {cutoff:g} Hz)")
    band = signal_band(x, rate)
    cutoff = band_cutoff(band, rate)
    return "spectral", cutoff, (f"spectral: no accelerometer; the position has content up to "
                                f"~{band:.4g} Hz above its noise floor at {rate:g} Hz sampling, "
                                f"so it is differentiated exactly up to {cutoff:.4g} Hz "
                                "(band-limited FFT)")


def band_cutoff(band: float, rate: float) -> float:
    """Spectral corner (Hz) for content up to ``band``: 1.25 band, within 10 Hz .. 0.4 rate."""
    return float(min(max(1.25 * band, 10.0), 0.4 * rate))


def default_cutoff(method: str, rate: float) -> float:
    """Low-pass cutoff (Hz) by estimator: 40 Hz for ``encoder``, 200 Hz with an accelerometer.

    A differentiated encoder gets noisier with bandwidth (twice differentiated
    for ``a``), so ``encoder`` keeps 40 Hz, ten times the sweep's top
    frequency.  The accelerometer needs no differentiation, and a rig's
    acceleration (and so ``m a`` in the force) has content well above 40 Hz
    - servo and quantisation chatter - that a narrow filter would take out
    of ``a`` but not of ``F``; ``fusion`` and ``accel`` keep 200 Hz.  Never
    above 0.4 times the sample rate.
    """
    return min(40.0 if method in ("encoder", "difference") else 200.0, 0.4 * rate)


def default_trim(method: str, cutoff: float, crossover: float, highpass: float) -> float:
    """Seconds at each end spoiled by the zero-phase filters' edge transients.

    ``3 / f`` for the lowest corner ``f`` the estimator uses (``cutoff`` for
    ``encoder``, ``crossover`` for ``fusion``, ``highpass`` for ``accel``; 0 for
    ``difference``).  A zero-phase filter pads the record by reflection, which
    keeps the value and slope continuous at the ends but not the curvature;
    the resulting error decays with the filter's impulse response.
    """
    if method == "spectral":
        # the reflected extension flips the curvature at each end: the jump in
        # acceleration rings with the taper's impulse response (~1 / (0.4 cutoff))
        return 10.0 / cutoff
    if method == "rts":
        # the smoother needs no extension; its end samples have seen data on one side only,
        # with a variance that settles over a few of its time constants (1 / (2 pi cutoff))
        return 2.5 / cutoff
    if method == "savgol":
        # the ends are fitted by the first and last window's polynomial, which is noisier:
        # leave out one window's worth (in samples of the band, ~2.5 / cutoff s)
        return 2.5 / cutoff
    corner = {"encoder": cutoff, "fusion": crossover, "accel": highpass}.get(method)
    return 0.0 if corner is None else 3.0 / corner

# the SI unit of each quantity, and the units the docstring of read_motion lists (pint reads
# any other of the same dimension too, see hapflow.units)
UNITS: dict[str, tuple[str, ...]] = {
    "time": ("s", "ms", "us"),
    "position": ("m", "mm", "um", "µm", "cm", "in"),
    "force": ("N", "mN", "kN", "gf", "kgf", "lbf", "ozf"),
    "acceleration": ("m/s^2", "m/s2", "mm/s^2", "g"),
}
LIMITS: dict[str, float] = {"position": 100.0, "force": 1e6, "acceleration": 1e6}
"""Largest magnitude (m, N, m/s^2) of a measured sample: far beyond any haptic or mechatronic
device, so a larger value is a wrong unit or a damaged file (at 1e300 the fit's squares
overflow to inf and the model file would hold inf and NaN)."""


def beyond_limit(quantity: str, values: np.ndarray) -> tuple[int, str] | None:
    """The first sample of ``values`` (SI) outside :data:`LIMITS` and a sentence on it, or
    ``None`` if all are inside."""
    bad = np.flatnonzero(~(np.abs(values) <= LIMITS[quantity]))
    if not bad.size:
        return None
    i = int(bad[0])
    unit = UNITS[quantity][0]
    return i, (f"{quantity} {values[i]:.4g} {unit} is beyond the {LIMITS[quantity]:g} {unit} "
               f"hapflow reads (in magnitude); is its unit right?")


_STANDARD_GRAVITY = re.compile(r"(?<![A-Za-z_])g(?![A-Za-z_0-9])")
"""``g`` in an acceleration unit: standard gravity (pint's ``g_0``), not the gram."""

_ALIASES = {"time": ("time", "t"),
            "position": ("position", "displacement", "pos", "x"),
            "force": ("force", "f"),
            "acceleration": ("acceleration", "accel", "acc", "a")}


@dataclass
class Motion:
    """Samples of one run, ready to fit: SI units, one row per sample.

    Attributes
    ----------
    x : ndarray
        Position, m.
    force : ndarray
        Force on the device, N.
    vel, acc : ndarray or None
        Velocity (m/s) and acceleration (m/s^2) estimates; ``None`` for
        quasi-static data (no time base).
    direction : ndarray of int8
        +1 (v > deadband), -1 (v < -deadband) or 0 (dead band or trimmed: not fitted).
    valid : ndarray of bool
        False for the samples at both ends whose estimates the zero-phase
        filters' edge transients spoil (``trim``); they are neither fitted
        nor verified.
    time : ndarray or None
        Sample times in s (``None`` for quasi-static data).
    rate : float or None
        Sample rate in Hz.
    source : dict
        ``path``, ``sha256``, ``kind`` and the signal names used.
    settings : dict
        How ``vel``, ``acc`` and ``direction`` were formed (stored in the model
        file so that ``verify`` repeats the same preparation).
    where : str
        The data for messages: ``file:first-last`` line of a CSV file's rows,
        ``recording 'file'`` (empty for arrays).
    """

    x: np.ndarray
    force: np.ndarray
    vel: np.ndarray | None
    acc: np.ndarray | None
    direction: np.ndarray
    valid: np.ndarray | None = None
    time: np.ndarray | None = None
    rate: float | None = None
    source: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    where: str = ""

    @property
    def quasi_static(self) -> bool:
        """True when there is no velocity or acceleration (force-position data)."""
        return self.vel is None

    def __len__(self) -> int:
        return self.x.shape[0]

    def __post_init__(self):
        if self.valid is None:
            self.valid = np.ones(self.x.shape[0], dtype=bool)


@dataclass
class Group:
    """The samples of one direction, sorted by position.

    Attributes
    ----------
    direction : int
        +1 or -1.
    x, force : ndarray
        Position (m) and force (N), ascending in ``x``.
    vel, acc : ndarray or None
        Velocity and acceleration in the same order.
    index : ndarray
        Index of each sample in the original (time-ordered) data.
    """

    direction: int
    x: np.ndarray
    force: np.ndarray
    vel: np.ndarray | None
    acc: np.ndarray | None
    index: np.ndarray

    def __len__(self) -> int:
        return self.x.shape[0]

    def column(self, name: str) -> np.ndarray:
        """Regressor column ``'a'``, ``'v'``, ``'x'`` or ``'1'``.

        Raises
        ------
        IdentError
            If the data has no velocity/acceleration (quasi-static data).
        """
        if name == "x":
            return self.x
        if name == "1":
            return np.ones_like(self.x)
        values = {"a": self.acc, "v": self.vel}[name]
        if values is None:
            raise IdentError(f"regressor {name!r} needs {'acceleration' if name == 'a' else 'velocity'}"
                             ", which quasi-static data (no time column) does not have; "
                             "fit with the regressors 'x1' (stiffness and offset only)")
        return values


# ---------------------------------------------------------------- estimators

def _sos(order: int, cutoff: float, rate: float, btype: str = "lowpass") -> np.ndarray:
    from scipy.signal import butter
    nyquist = 0.5 * rate
    if not 0.0 < cutoff < nyquist:
        raise IdentError(f"filter cutoff {cutoff:g} Hz must be between 0 and the Nyquist "
                         f"frequency {nyquist:g} Hz of the {rate:g} Hz data")
    if not (isinstance(order, (int, np.integer)) and 1 <= order <= 8):
        raise IdentError(f"filter order must be an integer 1..8, got {order!r}")
    return butter(int(order), cutoff, btype=btype, fs=rate, output="sos")


def zero_phase(signal: np.ndarray, rate: float, cutoff: float, order: int = 2,
               btype: str = "lowpass") -> np.ndarray:
    """Zero-phase Butterworth filter (``sosfiltfilt``): no lag, effective order ``2 order``.

    Parameters
    ----------
    signal : ndarray
        Samples at ``rate``.
    rate, cutoff : float
        Sample rate and -6 dB corner (Hz) of the forward-backward filter.
    order : int
        Order of the Butterworth prototype.
    btype : {'lowpass', 'highpass'}
    """
    from scipy.signal import sosfiltfilt
    signal = np.asarray(signal, dtype=np.float64)
    sos = _sos(order, cutoff, rate, btype)
    padlen = min(3 * (2 * sos.shape[0] + 1), signal.shape[0] - 1)
    if signal.shape[0] < FEWEST_SAMPLES:
        raise IdentError(f"too few samples ({signal.shape[0]}) to filter; at least "
                         f"{FEWEST_SAMPLES} are needed")
    return sosfiltfilt(sos, signal, padlen=padlen)


def spectral(x: np.ndarray, rate: float, cutoff: float,
             orders: tuple[int, ...] = (0, 1, 2)) -> list[np.ndarray]:
    """Band-limited spectral (FFT) derivatives of orders ``orders`` (0: the band-limited signal).

    ``D_r(f) = (i 2 pi f)^r H(f) X(f)`` with ``H`` flat (1) up to
    ``0.8 cutoff``, a raised-cosine taper to 0 at ``1.2 cutoff`` (0.5 at
    ``cutoff``) and 0 above: exact for content in the pass band whatever its
    ratio to the sample rate, no phase lag.  The record is extended at both
    ends by odd reflection (value and slope continuous) and a line through the
    extension's ends is removed (and added back), so the FFT's periodic
    wrap-around lies a record's length away from the data; the ends are
    trimmed (:func:`default_trim`).

    Parameters
    ----------
    x : ndarray
        Signal uniformly sampled at ``rate`` Hz.
    rate, cutoff : float
        Sample rate and the taper's -6 dB point (Hz, below the Nyquist frequency).
    orders : tuple of int
        Derivative orders wanted.
    """
    from scipy.fft import irfft, next_fast_len, rfft, rfftfreq
    x = np.asarray(x, dtype=np.float64)
    nyquist = 0.5 * rate
    if not 0.0 < cutoff < nyquist:
        raise IdentError(f"spectral cutoff {cutoff:g} Hz must be between 0 and the Nyquist "
                         f"frequency {nyquist:g} Hz of the {rate:g} Hz data")
    n = x.size
    if n < FEWEST_SAMPLES:
        raise IdentError(f"too few samples ({n}) to differentiate; at least {FEWEST_SAMPLES} "
                         "are needed")
    pad = n - 1
    y = np.concatenate([2.0 * x[0] - x[pad:0:-1], x, 2.0 * x[-1] - x[-2:-pad - 2:-1]])
    slope = (y[-1] - y[0]) / (y.size - 1)
    line = y[0] + slope * np.arange(pad, pad + n)
    y -= y[0] + slope * np.arange(y.size)
    size = next_fast_len(y.size, real=True)
    f = rfftfreq(size, 1.0 / rate)
    u = np.clip((f - 0.8 * cutoff) / (0.4 * cutoff), 0.0, 1.0)
    Y = rfft(y, size) * (0.5 + 0.5 * np.cos(np.pi * u))
    out = []
    for r in orders:
        d = irfft(Y * (2j * np.pi * f) ** r, size)[pad:pad + n]
        out.append(d + (line if r == 0 else slope * rate if r == 1 else 0.0))
    return out


def savgol_window(rate: float, cutoff: float) -> int:
    """Odd Savitzky-Golay window (samples) whose -3 dB corner is ``cutoff`` Hz at ``rate`` Hz.

    Schafer's fit for the smoothing filter of degree ``N`` and length ``M``:
    ``fc / rate ~ (N + 1) / (3.2 M - 4.6)`` (R. W. Schafer, "What is a
    Savitzky-Golay filter?", IEEE Signal Processing Magazine 28(4), 2011), at
    least ``N + 3`` samples.
    """
    m = ((SAVGOL_ORDER + 1) * rate / cutoff + 4.6) / 3.2
    m = max(int(math.ceil(m)), SAVGOL_ORDER + 3)
    return m if m % 2 else m + 1


def savgol(x: np.ndarray, rate: float, cutoff: float,
           orders: tuple[int, ...] = (0, 1, 2)) -> list[np.ndarray]:
    """Savitzky-Golay derivatives of orders ``orders`` (0: the smoothed signal).

    ``scipy.signal.savgol_filter`` with a quartic over :func:`savgol_window`
    samples; the first and last half window are the derivatives of the end
    windows' polynomials (``mode="interp"``).
    """
    from scipy.signal import savgol_filter
    x = np.asarray(x, dtype=np.float64)
    if not 0.0 < cutoff < 0.5 * rate:
        raise IdentError(f"Savitzky-Golay cutoff {cutoff:g} Hz must be between 0 and the "
                         f"Nyquist frequency {0.5 * rate:g} Hz of the {rate:g} Hz data")
    window = savgol_window(rate, cutoff)
    if x.size < window:
        raise IdentError(f"too few samples ({x.size}) for a {window}-sample Savitzky-Golay "
                         f"window; at least {window} are needed (or a higher cutoff)")
    return [savgol_filter(x, window, SAVGOL_ORDER, deriv=r, delta=1.0 / rate, mode="interp")
            for r in orders]


def rts(x: np.ndarray, rate: float, cutoff: float,
        orders: tuple[int, ...] = (0, 1, 2)) -> list[np.ndarray]:
    """Rauch-Tung-Striebel smoothed position and derivatives of orders ``orders`` (0, 1, 2).

    Kinematic model: state ``(x, v, a)``, ``a`` driven by white jerk of spectral
    density ``q``, position measured with noise variance ``R`` per sample.  The
    forward Kalman filter and the backward RTS pass give the least-squares
    trajectory of that model; far from the record's ends the smoother is the
    Wiener smoother ``H(f) = 1 / (1 + (f / f_c)^6)`` of the position, with
    ``q = R T (2 pi f_c)^6`` (``T`` the sample period), so ``cutoff`` is the
    -6 dB corner and only the ratio ``q / R`` matters.  The prior is diffuse
    (a noise-free quadratic comes out exact).  The states are kept in the time
    unit ``1 / (2 pi cutoff)``, where the covariances are of one order of
    magnitude whatever the ratio of cutoff to rate.

    Parameters
    ----------
    x : ndarray
        Position uniformly sampled at ``rate`` Hz.
    rate, cutoff : float
        Sample rate and corner (Hz, below the Nyquist frequency).
    orders : tuple of int
        Derivative orders wanted (0: the smoothed position).
    """
    x = np.asarray(x, dtype=np.float64)
    if not 0.0 < cutoff < 0.5 * rate:
        raise IdentError(f"RTS smoother corner {cutoff:g} Hz must be between 0 and the "
                         f"Nyquist frequency {0.5 * rate:g} Hz of the {rate:g} Hz data")
    if x.size < FEWEST_SAMPLES:
        raise IdentError(f"too few samples ({x.size}) to smooth; at least {FEWEST_SAMPLES} are "
                         "needed")
    if any(r not in (0, 1, 2) for r in orders):
        raise IdentError(f"the RTS smoother gives derivative orders 0, 1, 2, not {orders}")
    F, Q = kinematic_model(2.0 * math.pi * cutoff / rate)
    size = max(float(np.abs(x).max()), 1e-300)
    states = _rts(np.ascontiguousarray(x / size), F, Q, RTS_PRIOR)
    unit = 2.0 * math.pi * cutoff                      # 1 / (the time unit of the states)
    return [states[:, r] * (size * unit ** r) for r in orders]


RTS_PRIOR = 1e8
"""Initial state variance of the smoother, in units of the record's scale squared (diffuse:
the first samples, not the prior, set the start)."""


def kinematic_model(h: float) -> tuple[np.ndarray, np.ndarray]:
    """Transition ``F`` and process covariance ``Q`` of the white-jerk model over a step ``h``.

    Time in units of ``1 / (2 pi f_c)`` and a measurement variance of 1 per sample: the
    jerk density ``q = h`` (the measurement's density) puts the smoother's corner at
    ``f_c``.  ``Q = q int_0^h e^(A s) B B^T e^(A^T s) ds``, the exact discretisation of the
    triple integrator.
    """
    F = np.array([[1.0, h, 0.5 * h * h], [0.0, 1.0, h], [0.0, 0.0, 1.0]])
    Q = h * np.array([[h ** 5 / 20.0, h ** 4 / 8.0, h ** 3 / 6.0],
                      [h ** 4 / 8.0, h ** 3 / 3.0, h ** 2 / 2.0],
                      [h ** 3 / 6.0, h ** 2 / 2.0, h]])
    return F, Q


@njit(cache=True)
def _solve_spd3(a, b, out):
    """``out = a^-1 b`` for a symmetric positive definite 3 x 3 ``a`` (Cholesky)."""
    l00 = math.sqrt(a[0, 0])
    l10 = a[1, 0] / l00
    l20 = a[2, 0] / l00
    l11 = math.sqrt(a[1, 1] - l10 * l10)
    l21 = (a[2, 1] - l20 * l10) / l11
    l22 = math.sqrt(a[2, 2] - l20 * l20 - l21 * l21)
    for j in range(3):
        z0 = b[0, j] / l00
        z1 = (b[1, j] - l10 * z0) / l11
        z2 = (b[2, j] - l20 * z0 - l21 * z1) / l22
        out[2, j] = z2 / l22
        out[1, j] = (z1 - l21 * out[2, j]) / l11
        out[0, j] = (z0 - l10 * out[1, j] - l20 * out[2, j]) / l00


@njit(cache=True)
def _rts(y, F, Q, p0):
    """Kalman filter of ``y`` (measurement variance 1) and the RTS pass; states ``(n, 3)``.

    Written out in loops over the 3 states (no temporary arrays per sample)."""
    n = y.shape[0]
    xf = np.empty((n, 3))                  # filtered states
    xp = np.empty((n, 3))                  # predicted states
    gain = np.empty((n, 3, 3))             # smoother gains C_k = P_k F^T Pp_(k+1)^-1
    x = np.array([y[0], 0.0, 0.0])
    P = p0 * np.eye(3)
    FP = np.empty((3, 3))
    Pp = np.empty((3, 3))
    sol = np.empty((3, 3))
    K = np.empty(3)
    t3 = np.empty(3)
    for k in range(n):
        if k > 0:
            for i in range(3):
                t3[i] = F[i, 0] * x[0] + F[i, 1] * x[1] + F[i, 2] * x[2]
                for j in range(3):
                    FP[i, j] = F[i, 0] * P[0, j] + F[i, 1] * P[1, j] + F[i, 2] * P[2, j]
            x[:] = t3
            for i in range(3):
                for j in range(3):
                    Pp[i, j] = (FP[i, 0] * F[j, 0] + FP[i, 1] * F[j, 1] + FP[i, 2] * F[j, 2]
                                + Q[i, j])
            _solve_spd3(Pp, FP, sol)           # C = P F^T Pp^-1 = (Pp^-1 F P)^T
            gain[k - 1] = sol.T
            P[:, :] = Pp
        xp[k] = x
        s = P[0, 0] + 1.0
        for i in range(3):
            K[i] = P[i, 0] / s
        e = y[k] - x[0]
        for i in range(3):
            x[i] += K[i] * e
        # Joseph form (I - K H) P (I - K H)^T + K K^T: symmetric and positive by construction
        for i in range(3):
            for j in range(3):
                FP[i, j] = P[i, j] - K[i] * P[0, j]
        for i in range(3):
            for j in range(3):
                P[i, j] = FP[i, j] - FP[i, 0] * K[j] + K[i] * K[j]
        xf[k] = x
    out = np.empty((n, 3))
    out[n - 1] = xf[n - 1]
    for k in range(n - 2, -1, -1):
        for i in range(3):
            out[k, i] = xf[k, i] + (gain[k, i, 0] * (out[k + 1, 0] - xp[k + 1, 0])
                                    + gain[k, i, 1] * (out[k + 1, 1] - xp[k + 1, 1])
                                    + gain[k, i, 2] * (out[k + 1, 2] - xp[k + 1, 2]))
    return out


def _integrate(acc: np.ndarray, rate: float) -> np.ndarray:
    out = np.empty_like(acc)
    out[0] = 0.0
    np.cumsum(0.5 * (acc[1:] + acc[:-1]) / rate, out=out[1:])
    return out


def estimate_motion(x: np.ndarray, rate: float, accel: np.ndarray | None = None,
                    method: str = "fusion", order: int = DEFAULTS["order"],
                    cutoff: float | None = None, crossover: float = DEFAULTS["crossover"],
                    highpass: float = DEFAULTS["highpass"]) -> tuple[np.ndarray, np.ndarray]:
    """Velocity and acceleration from encoder position and (optionally) an accelerometer.

    Parameters
    ----------
    x : ndarray
        Encoder position, m, uniformly sampled at ``rate`` Hz.
    rate : float
        Sample rate, Hz.
    accel : ndarray, optional
        Accelerometer, m/s^2 (needed by ``accel`` and ``fusion``).
    method : {'fusion', 'spectral', 'savgol', 'rts', 'encoder', 'accel', 'difference'}
        See the module docstring.
    order : int
        Butterworth prototype order (zero-phase: effective order doubles).
    cutoff : float, optional
        Low-pass corner (Hz) of the encoder differentiator and the accelerometer
        (default :func:`default_cutoff`).
    crossover : float
        Fusion crossover (Hz): encoder below, accelerometer above.
    highpass : float
        High-pass corner (Hz) of the accelerometer-only method.

    Returns
    -------
    vel, acc : ndarray
        m/s and m/s^2.
    """
    x = np.asarray(x, dtype=np.float64)
    if method not in VELOCITY_METHODS:
        raise IdentError(f"unknown velocity method {method!r}; choose one of "
                         f"{', '.join(VELOCITY_METHODS)}")
    if method in ("accel", "fusion") and accel is None:
        raise IdentError(f"velocity method {method!r} needs an accelerometer signal; pass one "
                         "(--acc NAME) or use --velocity encoder")
    if method == "difference":
        v = np.gradient(x) * rate
        return v, np.gradient(v) * rate
    if method in BAND_METHODS:
        if cutoff is None:
            cutoff = band_cutoff(signal_band(x, rate), rate)
        v, a = BAND_ESTIMATORS[method](x, rate, cutoff, (1, 2))
        return v, a
    cutoff = default_cutoff(method, rate) if cutoff is None else cutoff
    v_enc = np.gradient(zero_phase(x, rate, cutoff, order)) * rate
    a_enc = np.gradient(v_enc) * rate
    if method == "encoder":
        return v_enc, a_enc
    a_acc = zero_phase(np.asarray(accel, dtype=np.float64), rate, cutoff, order)
    if method == "accel":
        a_acc = zero_phase(a_acc, rate, highpass, order, "highpass")
        v_acc = zero_phase(_integrate(a_acc, rate), rate, highpass, order, "highpass")
        return v_acc, a_acc
    v_acc = _integrate(a_acc, rate)
    v = v_acc + zero_phase(v_enc - v_acc, rate, crossover, order)
    a = a_acc + zero_phase(a_enc - a_acc, rate, crossover, order)
    return v, a


def band_limited(motion: Motion, signal: np.ndarray) -> np.ndarray:
    """``signal`` through the low-pass that shaped the motion's velocity and acceleration.

    A regression ``F = m a + b v + sum c_i x^i`` on estimates of ``v`` and
    ``a`` that are band-limited while ``F`` and ``x^i`` are not is biased by
    whatever lies above the band (at 9 samples per resonance period a cubic
    spring's harmonics do); filtering every column and the force by the same
    linear filter keeps the equation exact.  ``spectral``, ``savgol``, ``rts``
    (linear in the data: its gains do not depend on it) and ``encoder`` filter the position; the accelerometer methods measure ``a``, and
    ``difference`` does not filter: ``signal`` is returned unchanged.
    """
    s = motion.settings
    if s.get("velocity") in BAND_ESTIMATORS:
        return BAND_ESTIMATORS[s["velocity"]](signal, motion.rate, s["cutoff"], (0,))[0]
    if s.get("velocity") == "encoder":
        return zero_phase(signal, motion.rate, s["cutoff"], s["order"])
    return np.asarray(signal, dtype=np.float64)


BAND_ESTIMATORS = {"spectral": spectral, "savgol": savgol, "rts": rts}
"""The estimator function of each of :data:`BAND_METHODS`."""


def direction_labels(vel: np.ndarray, deadband: float = DEFAULTS["deadband"]) -> np.ndarray:
    """+1 / -1 / 0 by the sign of the velocity with a dead band (m/s)."""
    if deadband < 0:
        raise IdentError(f"dead band must be >= 0 m/s, got {deadband!r}")
    out = np.zeros(vel.shape[0], dtype=np.int8)
    out[vel > deadband] = 1
    out[vel < -deadband] = -1
    return out


def group(motion: Motion) -> dict[int, Group]:
    """Split by direction (+1, -1) and sort each group by position (stable).

    Directions with no samples are left out.
    """
    out = {}
    for d in (1, -1):
        idx = np.flatnonzero(motion.direction == d)
        if idx.size == 0:
            continue
        idx = idx[np.argsort(motion.x[idx], kind="stable")]
        out[d] = Group(d, motion.x[idx], motion.force[idx],
                       None if motion.vel is None else motion.vel[idx],
                       None if motion.acc is None else motion.acc[idx], idx)
    if not out:
        raise IdentError("no sample moves faster than the dead band: nothing to fit "
                         "(lower --deadband, or check the position signal)")
    return out


# ---------------------------------------------------------------- constructors

def sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _settings(kw: dict[str, Any]) -> dict[str, Any]:
    out = dict(DEFAULTS)
    out.update({k: v for k, v in kw.items() if v is not None})
    return out


def from_arrays(x: np.ndarray, force: np.ndarray, rate: float | None = None,
                accel: np.ndarray | None = None, direction: np.ndarray | None = None,
                velocity: str | None = None, source: dict | None = None,
                **settings: Any) -> Motion:
    """Prepare arrays: estimate v and a, label directions.

    Parameters
    ----------
    x, force : ndarray
        Position (m) and force (N), one value per sample.
    rate : float, optional
        Sample rate (Hz).  Without it the data is quasi-static: no v and a,
        and ``direction`` must be given.
    accel : ndarray, optional
        Accelerometer (m/s^2).
    direction : ndarray, optional
        +1/-1/0 labels (else from the velocity estimate and ``deadband``).
    velocity : str, optional
        Estimator (see :func:`estimate_motion`); default ``fusion`` with an
        accelerometer, else ``encoder``.
    source : dict, optional
        Provenance stored in the model file.
    **settings
        ``order``, ``cutoff``, ``crossover``, ``highpass``, ``deadband``, ``trim``.
    """
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(-1))
    force = np.ascontiguousarray(np.asarray(force, dtype=np.float64).reshape(-1))
    if x.shape != force.shape:
        raise IdentError(f"position has {x.size} samples but force has {force.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(force))):
        raise IdentError("position or force contains NaN or infinite values")
    for quantity, values in (("position", x), ("force", force), ("acceleration", accel)):
        beyond = None if values is None else beyond_limit(quantity, np.asarray(values))
        if beyond is not None:
            raise IdentError(f"sample {beyond[0]}: {beyond[1]}")
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise IdentError(f"unknown preparation setting(s) {sorted(unknown)}; valid: "
                         f"{', '.join(DEFAULTS)}")
    s = _settings(settings)
    if rate is not None and not (math.isfinite(rate) and 0 < rate <= MAX_RATE):
        raise IdentError(f"the sample rate must be a number in (0, {MAX_RATE:.0e}] Hz, "
                         f"got {rate!r}")
    if rate is None:
        if direction is None:
            raise IdentError("quasi-static data (no sample rate) needs direction labels")
        s = {"velocity": None, "quasi_static": True}
        return Motion(x, force, None, None, np.asarray(direction, dtype=np.int8), None, None,
                      None, dict(source or {}), s)
    if accel is not None:
        accel = np.asarray(accel, dtype=np.float64).reshape(-1)
        if accel.shape != x.shape:
            raise IdentError(f"acceleration has {accel.size} samples, position {x.size}")
    if velocity is None:
        method, cutoff, why = choose_estimator(x, rate, accel)
    else:
        method, cutoff, why = velocity, None, f"{velocity}: chosen by name"
    if s["cutoff"] is not None:
        why += f"; cutoff {s['cutoff']:g} Hz given"
    elif cutoff is not None:
        s["cutoff"] = cutoff
    elif method in BAND_METHODS:
        band = signal_band(x, rate)
        s["cutoff"] = band_cutoff(band, rate)
        why += (f"; its corner {s['cutoff']:.4g} Hz from the position's content up to "
                f"~{band:.4g} Hz")
    else:
        s["cutoff"] = default_cutoff(method, rate)
    v, a = estimate_motion(x, rate, accel, method, s["order"], s["cutoff"], s["crossover"],
                           s["highpass"])
    labels = (direction_labels(v, s["deadband"]) if direction is None
              else np.asarray(direction, dtype=np.int8).copy())
    trim = s["trim"]
    if trim is None:
        trim = default_trim(method, s["cutoff"], s["crossover"], s["highpass"])
    if trim < 0:
        raise IdentError(f"trim must be >= 0 s, got {trim!r}")
    cut = int(round(trim * rate))
    if 2 * cut >= x.size:
        raise IdentError(f"the record ({x.size / rate:g} s) is not longer than twice the "
                         f"{trim:g} s trimmed at each end for the filters' edge transients; "
                         "record longer, or lower the trim")
    valid = np.ones(x.size, dtype=bool)
    if cut:
        valid[:cut] = valid[-cut:] = False
        labels[~valid] = 0
    s.update(velocity=method, rate=float(rate), quasi_static=False, trim=float(trim), reason=why)
    t = np.arange(x.size) / rate
    return Motion(x, force, v, a, labels, valid, t, float(rate), dict(source or {}), s)


def from_recording(recording: Any, pos: str = "enc.pos", force: str = "head.force",
                   acc: str | None = "auto", velocity: str | None = None,
                   **settings: Any) -> Motion:
    """Prepare a hapflow recording (a path or a :class:`hapflow.recorder.Recording`).

    Parameters
    ----------
    recording : str, Path or Recording
        HDF5 file written by ``hapflow run`` (or the loaded recording).
    pos, force : str
        Names of the position (m) and force (N) signals.
    acc : str or None
        Accelerometer signal (m/s^2); ``"auto"`` uses ``head.accel`` when the
        recording has it; ``None`` uses none.
    velocity : str, optional
        Estimator (see :func:`estimate_motion`).
    **settings
        ``order``, ``cutoff``, ``crossover``, ``highpass``, ``deadband``.

    Raises
    ------
    SignalError
        If a named signal is missing (the message lists what the file has).
    """
    from ..recorder import load
    path = None
    if isinstance(recording, (str, Path)):
        path = Path(recording)
        if not path.exists():
            raise IdentError(f"recording {str(path)!r} does not exist")
        try:
            recording = load(path)
        except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
            # HDF5's own errors on a file damaged inside, h5py's on a foreign layout
            raise IdentError(f"cannot read recording {str(path)!r} as a hapflow HDF5 file: "
                             f"{exc}") from None
    where = f"recording {str(path)!r}" if path else "the recording"
    have = sorted(recording.signals)

    def get(name: str, what: str, flag: str) -> np.ndarray:
        if name not in recording.signals:
            from ..errors import suggest
            raise SignalError(f"{where} has no {what} signal {name!r}{suggest(name, have)} "
                              f"It has: {', '.join(have) or '(no signals)'}. "
                              f"Choose one with {flag} NAME.")
        values = np.asarray(recording.signals[name])
        if values.dtype.kind not in "biuf":
            raise SignalError(f"{where}: {what} signal {name!r} holds {values.dtype} values, "
                              "not numbers")
        values = values.astype(np.float64)
        if values.ndim > 2 or (values.ndim == 2 and values.shape[1] != 1):
            raise SignalError(f"{where}: {what} signal {name!r} has shape {values.shape[1:]} per "
                              "sample; a scalar signal is needed")
        values = values.reshape(-1)
        beyond = beyond_limit(what, values)
        if beyond is not None:
            raise IdentError(f"{where}: signal {name!r}, sample {beyond[0]}: {beyond[1]}")
        return values

    x = get(pos, "position", "--pos")
    f = get(force, "force", "--force")
    if acc == "auto":
        acc = "head.accel" if "head.accel" in recording.signals else None
    a = get(acc, "acceleration", "--acc") if acc else None
    rate = recording.attrs.get("rate")
    if rate is not None and (np.ndim(rate) != 0 or np.asarray(rate).dtype.kind not in "iuf"):
        raise IdentError(f"{where}: its rate attribute is {rate!r}, not a number of Hz")
    t = np.asarray(recording.time)
    if t.dtype.kind not in "iuf":
        raise IdentError(f"{where}: its time holds {t.dtype} values, not seconds")
    t = t.astype(np.float64)
    if rate is None:
        if t.size < 2:
            raise IdentError(f"{where} has fewer than two samples")
        rate = 1.0 / float(np.median(np.diff(t)))
    source = {"kind": "hdf5", "path": str(path) if path else None,
              "sha256": sha256(path) if path else None,
              "signals": {"pos": pos, "force": force, "acc": acc}}
    try:
        motion = from_arrays(x, f, float(rate), a, velocity=velocity, source=source, **settings)
    except IdentError as exc:
        raise IdentError(f"{where}: {exc}") from None
    motion.time = t
    motion.where = where
    return motion


def unit_factor(quantity: str, spec: str) -> float:
    """Factor from a column's unit to SI: a unit name, or a product with numbers and volts.

    ``mm`` -> 1e-3; ``V*0.001 m/V`` (a sensor giving 1 mm per volt) -> 1e-3;
    ``V*2.5 mm/V`` -> 2.5e-3; ``0.5*N`` -> 0.5; ``lbf`` -> 4.448.  pint reads
    it (:func:`hapflow.units.scale`); the result must be a ``quantity`` (the
    volts cancel).

    Raises
    ------
    IdentError
        Naming the valid units of the quantity and the accepted forms.
    """
    known = UNITS[quantity]
    example = known[1]

    def bad() -> IdentError:
        return IdentError(f"unknown {quantity} unit {spec!r}; use one of {', '.join(known)} (or "
                          f"another {quantity} unit pint knows), or a scaled one such as "
                          f"'{example}*0.5' or, for a signal in volts, 'V*0.001 {example}/V'")

    text = _STANDARD_GRAVITY.sub("g_0", spec) if quantity == "acceleration" else spec
    try:
        factor, dims = scale(text)
    except UnitError:
        raise bad() from None
    if dims != to_si(known[0])[1] or not math.isfinite(factor) or factor == 0.0:
        raise bad()
    return factor


def _find_columns(names: list[str], given: dict[str, str], where: str) -> dict[str, int]:
    """Column index of each quantity: named by ``given`` (``--columns``) or by :data:`_ALIASES`."""
    lower = [n.strip().lower() for n in names]
    out: dict[str, int] = {}
    for quantity, name in given.items():
        if quantity not in _ALIASES:
            raise IdentError(f"--columns: unknown quantity {quantity!r}; choose from "
                             f"{', '.join(_ALIASES)}")
        if name.strip().lower() not in lower:
            raise SignalError(f"{where}: no column {name!r} (for {quantity}); its columns are "
                              f"{', '.join(names)}")
        out[quantity] = lower.index(name.strip().lower())
    for quantity, aliases in _ALIASES.items():
        if quantity not in out:
            k = next((k for k, n in enumerate(lower) if n in aliases and k not in out.values()),
                     None)
            if k is not None:
                out[quantity] = k
    return out


def load_csv(path: str | Path, units: dict[str, str] | None = None,
             velocity: str | None = None, columns: dict[str, str] | None = None,
             rate: float | None = None, **settings: Any) -> Motion:
    """Load force-motion data from a CSV file.

    Format
    ------
    One header row, then one row per sample **in time order** (read by
    :func:`hapflow.datafile.read_csv`: a UTF-8 byte-order mark is accepted;
    bad bytes, fields, numbers or NaN name the line).  Columns are recognised
    by name (case-insensitive; others are ignored), or named by ``columns``
    (``{"time": "t", "position": "y", "force": "u"}``):

    ==============  ==========================================  ==============
    quantity        accepted names                              units
    ==============  ==========================================  ==============
    time            ``time``, ``t`` (optional)                  s, ms, us
    position        ``position``, ``displacement``, ``pos``,    m, mm, um, cm,
                    ``x``                                       in
    force           ``force``, ``f``                            N, mN, kN, gf,
                                                                kgf, lbf, ozf
    acceleration    ``acceleration``, ``accel``, ``acc``, ``a`` m/s^2, mm/s^2,
                    (optional)                                  g
    ==============  ==========================================  ==============

    A unit is written in the header in brackets or parentheses, e.g.
    ``time [s],position [mm],force [N]``, or passed as ``units``
    (``{"position": "mm", "force": "gf"}``, which wins; scaled units and
    volts as in :func:`unit_factor`).  A column without a unit is read as SI
    **with a warning** that names the assumed unit (``Motion.source["warnings"]``),
    except in the ThereminGoat force-curve layout (header
    ``force,displacement,judge,name``, as in ``tests/data/keyswitch_force_curves``)
    where force is in gram-force and displacement in mm.  Positive force pushes
    back against positive motion.

    With a ``time`` column the data is resampled to a uniform grid if needed
    (the time must increase; a step over 10 times the median is an error
    naming its line, since resampling across it would invent data) and
    prepared like a recording (velocity and acceleration estimated, see
    :func:`estimate_motion`), and so is a file without one whose sample
    ``rate`` is given (rows are samples at that rate, e.g. the Silverbox
    benchmark's ``"V1","V2",`` files).  **Without** either it is quasi-static: there is no
    velocity or acceleration (only stiffness ``k(x)`` and offset ``F0(x)``
    can be identified), and the direction is taken from the row order: the
    rows up to the first row of maximum position are the positive stroke
    (e.g. a key's downstroke), the rows after it the negative one.

    Parameters
    ----------
    path : str or Path
        The CSV file.
    units : dict, optional
        Units by quantity (``time``, ``position``, ``force``, ``acceleration``).
    velocity : str, optional
        Estimator when there is a time column.
    columns : dict, optional
        Column name by quantity, for headers hapflow does not recognise.
    rate : float, optional
        Sample rate (Hz) of a file without a time column.
    **settings
        Estimator settings (see :func:`from_arrays`).

    Returns
    -------
    Motion
    """
    from ..datafile import DataFileError, read_csv
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise IdentError(f"--rate must be a sample rate > 0 Hz, got {rate!r}")
    path = Path(path)
    try:
        table = read_csv(path)
    except DataFileError as exc:
        raise IdentError(str(exc)) from None
    where = table.header                # a column's name or unit: the header row's line
    names = [n.strip().lower() for n in table.names]
    theremin_goat = names == ["force", "displacement", "judge", "name"]
    found = _find_columns(table.names, {k.lower(): v for k, v in (columns or {}).items()}, where)
    for need in ("position", "force"):
        if need not in found:
            raise SignalError(f"{where}: no {need} column; its columns are "
                              f"{', '.join(table.names)}. Name one {' or '.join(_ALIASES[need])}, "
                              f"or say which with --columns {need}=NAME.")
    given = {k.lower(): v for k, v in (units or {}).items()}
    unknown = set(given) - set(UNITS)
    if unknown:
        raise IdentError(f"--units: unknown quantity {sorted(unknown)[0]!r}; choose from "
                         f"{', '.join(UNITS)}")
    data: dict[str, np.ndarray] = {}
    used_units: dict[str, str] = {}
    warnings: list[str] = []
    for quantity, k in found.items():
        unit = given.get(quantity) or table.units[k]
        if unit is None and theremin_goat:
            unit = {"force": "gf", "position": "mm"}.get(quantity)
        if unit is None:
            unit = next(iter(UNITS[quantity]))
            warnings.append(f"{where}: column {table.names[k]!r} names no unit; read as {unit} "
                            f"(write '{table.names[k]} [unit]' in the header or pass --units "
                            f"{quantity}=UNIT)")
        try:
            factor = unit_factor(quantity, unit)
            data[quantity] = table.column(k) * factor
        except IdentError as exc:
            raise IdentError(f"{where}: {exc}") from None
        except DataFileError as exc:
            raise IdentError(str(exc)) from None
        beyond = beyond_limit(quantity, data[quantity]) if quantity in LIMITS else None
        if beyond is not None:
            i, why = beyond
            raise IdentError(f"{path}:{table.lines[i]}: column {table.names[k]!r} read in "
                             f"{unit}: {why} (give the column's unit in the header, or "
                             f"with --units {quantity}=UNIT)")
        used_units[quantity] = unit
    source = {"kind": "csv", "path": str(path), "sha256": sha256(path), "units": used_units,
              "warnings": warnings}
    if columns:
        source["columns"] = dict(columns)
    x, force = data["position"], data["force"]
    if "time" in data and rate is not None:
        raise IdentError(f"{where}: the file has a time column "
                         f"({table.names[found['time']]!r}), which gives its sample rate; leave "
                         f"out --rate {rate:g}")
    resampled = False
    if "time" in data:
        t, rate, resampled = _uniform_time(data["time"], table.lines, str(path))
    elif rate is not None:
        t = np.arange(x.size) / rate
        source["rate"] = float(rate)
    try:
        if rate is None:
            split = int(np.argmax(x))
            direction = np.where(np.arange(x.size) <= split, 1, -1).astype(np.int8)
            motion = from_arrays(x, force, None, direction=direction, source=source)
        else:
            accel = data.get("acceleration")
            if resampled:
                x, force = np.interp(t, data["time"], x), np.interp(t, data["time"], force)
                accel = None if accel is None else np.interp(t, data["time"], accel)
                source["resampled"] = True
            motion = from_arrays(x, force, rate, accel, velocity=velocity, source=source,
                                 **settings)
            motion.time = t
    except IdentError as exc:           # about the whole record: name its rows
        raise IdentError(f"{table.span}: {exc}") from None
    motion.where = table.span
    return motion


def _uniform_time(t: np.ndarray, lines: list[int], where: str) -> tuple[np.ndarray, float, bool]:
    """A uniform time grid for the time column: (grid, rate, whether it differs from ``t``)."""
    dt = np.diff(t)
    bad = np.flatnonzero(dt <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        raise IdentError(f"{where}:{lines[i]}: time {t[i]:g} does not increase (previous "
                         f"{t[i - 1]:g}); the rows must be in time order")
    step = float(np.median(dt))
    jump = np.flatnonzero(dt > 10.0 * step)
    if jump.size:
        i = int(jump[0]) + 1
        raise IdentError(f"{where}:{lines[i]}: time jumps from {t[i - 1]:g} to {t[i]:g}, "
                         f"over 10 times the median step {step:g}; the record is not uniformly "
                         "sampled there (split it, or remove the row)")
    rate = 1.0 / step
    if np.max(np.abs(dt * rate - 1.0)) <= 0.01:
        return t, rate, False
    return t[0] + np.arange(int(np.floor((t[-1] - t[0]) * rate)) + 1) / rate, rate, True


def load_motion(path: str | Path, pos: str = "enc.pos", force: str = "head.force",
                acc: str | None = "auto", velocity: str | None = None,
                units: dict[str, str] | None = None, columns: dict[str, str] | None = None,
                rate: float | None = None, **settings: Any) -> Motion:
    """Prepare a recording (``.h5``/``.hdf5``) or a CSV file (``.csv``) by its extension."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return load_csv(path, units, velocity, columns, rate, **settings)
    if units or columns or rate is not None:
        raise IdentError(f"--units, --columns and --rate apply to CSV files; {str(path)!r} is a "
                         "recording, whose signals are named with --pos/--force/--acc and "
                         "stored in SI with their time")
    if not path.exists():
        raise IdentError(f"data file {str(path)!r} does not exist")
    return from_recording(path, pos, force, acc, velocity, **settings)
