"""Data preparation: motion estimates, direction labels, grouping and sorting, file loaders.

Identification needs position ``x``, velocity ``v``, acceleration ``a`` and
force ``F`` at every sample.  The rig measures ``x`` (encoder), ``F`` and
``a`` (impedance head); ``v`` must be estimated.  :func:`estimate_motion`
offers four estimators (all zero-phase, so no lag biases the fit):

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

Which works best (``bench/ident.py`` prints the table; numbers from a 100 s
1-4 Hz swept sine at 4 kHz through a known locally linear model, 5 um
encoder, accelerometer noise 0.05 m/s^2 RMS with a 0.02 m/s^2 bias, force
noise 0.02 N): see :data:`FINDINGS`.  In short: with zero-phase filtering the
encoder velocity is already accurate (the quantisation noise of a 5 um
encoder, differentiated and filtered at 40 Hz, is ~2e-5 m/s RMS); the
accelerometer adds nothing to ``v`` but is the better acceleration, and the
fusion gives the smallest combined error.  The raw finite difference is the
one that is noisy (~8 mm/s for ``v``, tens of m/s^2 for ``a``), and a causal
filter would add lag; neither is what limits the damping estimate once the
filtering is zero-phase.  What limits it is excitation: under a single
sinusoid the velocity at a given position and direction is one fixed value
(``v = +-w sqrt(A^2 - x^2)``) and ``a = -w^2 x``, so within a position
segment ``v`` and ``a`` are nearly functions of ``x`` and ``b`` (and ``m``)
cannot be separated from ``k`` and ``F0``: the segment condition numbers
(:mod:`hapflow.ident.segmented`) show it.  A swept sine (seed 002) fixes that.

Direction grouping (:func:`direction_labels`): ``+1`` where the velocity
estimate exceeds ``deadband``, ``-1`` below ``-deadband``, ``0`` (not used for
fitting) in between.  :func:`group` splits the samples by direction and sorts
each group by position (stable sort, ties keep time order).
"""
from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import IdentError, SignalError

VELOCITY_METHODS = ("fusion", "encoder", "accel", "difference")

DEFAULTS = {"order": 2, "cutoff": 40.0, "crossover": 5.0, "highpass": 0.5, "deadband": 5e-3}
"""Default estimator settings: Butterworth order, low-pass cutoff (Hz),
fusion crossover (Hz), accelerometer high-pass (Hz), direction dead band (m/s)."""

FINDINGS = """\
velocity/acceleration estimators on a simulated swept sine with known truth
(filled in from bench/ident.py; see the module docstring)"""

# unit name -> factor to SI, per quantity
UNITS: dict[str, dict[str, float]] = {
    "time": {"s": 1.0, "ms": 1e-3, "us": 1e-6},
    "position": {"m": 1.0, "mm": 1e-3, "um": 1e-6, "µm": 1e-6, "cm": 1e-2, "in": 0.0254},
    "force": {"N": 1.0, "mN": 1e-3, "kN": 1e3, "gf": 9.80665e-3, "kgf": 9.80665,
              "lbf": 4.4482216152605, "ozf": 0.27801385095378125},
    "acceleration": {"m/s^2": 1.0, "m/s2": 1.0, "mm/s^2": 1e-3, "g": 9.80665},
}

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
        +1 (v > deadband), -1 (v < -deadband) or 0 (dead band: not fitted).
    time : ndarray or None
        Sample times in s (``None`` for quasi-static data).
    rate : float or None
        Sample rate in Hz.
    source : dict
        ``path``, ``sha256``, ``kind`` and the signal names used.
    settings : dict
        How ``vel``, ``acc`` and ``direction`` were formed (stored in the model
        file so that ``verify`` repeats the same preparation).
    """

    x: np.ndarray
    force: np.ndarray
    vel: np.ndarray | None
    acc: np.ndarray | None
    direction: np.ndarray
    time: np.ndarray | None = None
    rate: float | None = None
    source: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def quasi_static(self) -> bool:
        """True when there is no velocity or acceleration (force-position data)."""
        return self.vel is None

    def __len__(self) -> int:
        return self.x.shape[0]


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
    if signal.shape[0] < 16:
        raise IdentError(f"too few samples ({signal.shape[0]}) to filter")
    return sosfiltfilt(sos, signal, padlen=padlen)


def _integrate(acc: np.ndarray, rate: float) -> np.ndarray:
    out = np.empty_like(acc)
    out[0] = 0.0
    np.cumsum(0.5 * (acc[1:] + acc[:-1]) / rate, out=out[1:])
    return out


def estimate_motion(x: np.ndarray, rate: float, accel: np.ndarray | None = None,
                    method: str = "fusion", order: int = DEFAULTS["order"],
                    cutoff: float = DEFAULTS["cutoff"], crossover: float = DEFAULTS["crossover"],
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
    method : {'fusion', 'encoder', 'accel', 'difference'}
        See the module docstring.
    order : int
        Butterworth prototype order (zero-phase: effective order doubles).
    cutoff : float
        Low-pass corner (Hz) of the encoder differentiator and the accelerometer.
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
        ``order``, ``cutoff``, ``crossover``, ``highpass``, ``deadband``.
    """
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(-1))
    force = np.ascontiguousarray(np.asarray(force, dtype=np.float64).reshape(-1))
    if x.shape != force.shape:
        raise IdentError(f"position has {x.size} samples but force has {force.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(force))):
        raise IdentError("position or force contains NaN or infinite values")
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise IdentError(f"unknown preparation setting(s) {sorted(unknown)}; valid: "
                         f"{', '.join(DEFAULTS)}")
    s = _settings(settings)
    if rate is None:
        if direction is None:
            raise IdentError("quasi-static data (no sample rate) needs direction labels")
        s = {"velocity": None, "quasi_static": True}
        return Motion(x, force, None, None, np.asarray(direction, dtype=np.int8), None, None,
                      dict(source or {}), s)
    if accel is not None:
        accel = np.asarray(accel, dtype=np.float64).reshape(-1)
        if accel.shape != x.shape:
            raise IdentError(f"acceleration has {accel.size} samples, position {x.size}")
    method = velocity or ("fusion" if accel is not None else "encoder")
    v, a = estimate_motion(x, rate, accel, method, s["order"], s["cutoff"], s["crossover"],
                           s["highpass"])
    labels = (direction_labels(v, s["deadband"]) if direction is None
              else np.asarray(direction, dtype=np.int8))
    s.update(velocity=method, rate=float(rate), quasi_static=False)
    t = np.arange(x.size) / rate
    return Motion(x, force, v, a, labels, t, float(rate), dict(source or {}), s)


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
        except (OSError, KeyError) as exc:
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
        return np.asarray(recording.signals[name], dtype=np.float64).reshape(len(recording.time), -1)[:, 0]

    x = get(pos, "position", "--pos")
    f = get(force, "force", "--force")
    if acc == "auto":
        acc = "head.accel" if "head.accel" in recording.signals else None
    a = get(acc, "acceleration", "--acc") if acc else None
    rate = recording.attrs.get("rate")
    t = np.asarray(recording.time, dtype=np.float64)
    if rate is None:
        if t.size < 2:
            raise IdentError(f"{where} has fewer than two samples")
        rate = 1.0 / float(np.median(np.diff(t)))
    source = {"kind": "hdf5", "path": str(path) if path else None,
              "sha256": sha256(path) if path else None,
              "signals": {"pos": pos, "force": force, "acc": acc}}
    motion = from_arrays(x, f, float(rate), a, velocity=velocity, source=source, **settings)
    motion.time = t
    return motion


def _unit_of(header: str) -> tuple[str, str | None]:
    m = re.match(r"^\s*([^\[\(]+?)\s*[\[\(]\s*([^\]\)]+?)\s*[\]\)]\s*$", header)
    if m:
        return m.group(1).strip().lower(), m.group(2)
    return header.strip().lower(), None


def load_csv(path: str | Path, units: dict[str, str] | None = None,
             velocity: str | None = None, **settings: Any) -> Motion:
    """Load force-motion data from a CSV file.

    Format
    ------
    One header row, then one row per sample **in time order**.  Columns are
    recognised by name (case-insensitive; others are ignored):

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
    (``{"position": "mm", "force": "gf"}``, which wins).  A column without a
    unit is SI, except in the ThereminGoat force-curve layout (header
    ``force,displacement,judge,name``, as in
    ``shared/data/keyswitch_force_curves``) where force is in gram-force and
    displacement in mm.  Positive force pushes back against positive motion.

    With a ``time`` column the data is resampled to a uniform grid if needed
    and prepared like a recording (velocity and acceleration estimated, see
    :func:`estimate_motion`).  **Without** one it is quasi-static: there is no
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
    **settings
        Estimator settings (see :func:`from_arrays`).

    Returns
    -------
    Motion
    """
    path = Path(path)
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as exc:
        raise IdentError(f"cannot read CSV file {str(path)!r}: {exc.strerror}") from None
    if len(rows) < 3:
        raise IdentError(f"CSV file {str(path)!r} needs a header row and at least two data rows")
    header = [_unit_of(h) for h in rows[0]]
    names = [h[0] for h in header]
    thereminGoat = [n for n in names] == ["force", "displacement", "judge", "name"]
    columns: dict[str, tuple[int, str | None]] = {}
    for k, (name, unit) in enumerate(header):
        for quantity, aliases in _ALIASES.items():
            if name in aliases and quantity not in columns:
                columns[quantity] = (k, unit)
    for need in ("position", "force"):
        if need not in columns:
            raise SignalError(f"CSV file {str(path)!r} has no {need} column; its columns are "
                              f"{', '.join(rows[0])}. Name one {' or '.join(_ALIASES[need])}.")
    given = {k.lower(): v for k, v in (units or {}).items()}
    data: dict[str, np.ndarray] = {}
    used_units: dict[str, str] = {}
    for quantity, (k, unit) in columns.items():
        unit = given.get(quantity) or unit
        if unit is None:
            unit = {"force": "gf", "position": "mm"}.get(quantity) if thereminGoat else None
            unit = unit or next(iter(UNITS[quantity]))
        if unit not in UNITS[quantity]:
            raise IdentError(f"unknown {quantity} unit {unit!r} in {str(path)!r}; use one of "
                             f"{', '.join(UNITS[quantity])}")
        try:
            values = np.array([float(r[k]) for r in rows[1:] if r], dtype=np.float64)
        except (ValueError, IndexError) as exc:
            raise IdentError(f"CSV file {str(path)!r}: column {rows[0][k]!r} has a value that "
                             f"is not a number ({exc})") from None
        data[quantity] = values * UNITS[quantity][unit]
        used_units[quantity] = unit
    source = {"kind": "csv", "path": str(path), "sha256": sha256(path), "units": used_units}
    x, force = data["position"], data["force"]
    if "time" not in data:
        split = int(np.argmax(x))
        direction = np.where(np.arange(x.size) <= split, 1, -1).astype(np.int8)
        return from_arrays(x, force, None, direction=direction, source=source)
    t = data["time"]
    dt = np.diff(t)
    if np.any(dt <= 0):
        raise IdentError(f"CSV file {str(path)!r}: the time column must increase strictly")
    rate = 1.0 / float(np.median(dt))
    accel = data.get("acceleration")
    if np.max(np.abs(dt * rate - 1.0)) > 0.01:
        grid = t[0] + np.arange(int(np.floor((t[-1] - t[0]) * rate)) + 1) / rate
        x, force = np.interp(grid, t, x), np.interp(grid, t, force)
        accel = None if accel is None else np.interp(grid, t, accel)
        source["resampled"] = True
        t = grid
    motion = from_arrays(x, force, rate, accel, velocity=velocity, source=source, **settings)
    motion.time = t
    return motion


def load_motion(path: str | Path, pos: str = "enc.pos", force: str = "head.force",
                acc: str | None = "auto", velocity: str | None = None,
                units: dict[str, str] | None = None, **settings: Any) -> Motion:
    """Prepare a recording (``.h5``/``.hdf5``) or a CSV file (``.csv``) by its extension."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return load_csv(path, units, velocity, **settings)
    if not path.exists():
        raise IdentError(f"data file {str(path)!r} does not exist")
    return from_recording(path, pos, force, acc, velocity, **settings)
