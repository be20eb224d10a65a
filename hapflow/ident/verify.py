"""Verify a model against a recording: replay the measured motion, compare forces.

The recording is prepared exactly as the identification data was (signal
names and estimator settings are read from the model file), the model
predicts the force at every sample (dead band included: the model's velocity
blend handles reversals), and the result is

- **NRMSE** = RMS(F_measured - F_model) / (max F_measured - min F_measured), in %;
- the **worst position range**: the data are binned by position in bins
  ``[j w, (j + 1) w)`` of width ``w`` (5 mm by default; for a stroke shorter
  than 20 mm the largest 1-2-5 step not above a quarter of it, so there are
  at least four bins) and the bin with the largest RMS error is reported,
  with its RMS error and sample count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .errors import IdentError
from .prep import VELOCITY_METHODS


@dataclass
class Verification:
    """Force prediction error of a model on one data set.

    Attributes
    ----------
    nrmse_percent : float
        RMS error / measured force range, %.
    rms_error, force_range : float
        N.
    n : int
        Samples compared.
    bin_width : float
        Position bin width, m.
    bins : list of (lo, hi, rms, count)
        Every non-empty position bin (m, m, N, samples).
    worst : tuple
        The bin with the largest RMS error.
    """

    nrmse_percent: float
    rms_error: float
    force_range: float
    n: int
    bin_width: float
    bins: list[tuple[float, float, float, int]] = field(default_factory=list)

    @property
    def worst(self) -> tuple[float, float, float, int]:
        return max(self.bins, key=lambda b: b[2])

    def summary(self) -> str:
        """Two lines: NRMSE and the worst position range."""
        lo, hi, rms, count = self.worst
        return (f"force NRMSE {self.nrmse_percent:.3f} % (RMS error {self.rms_error:.4g} N over "
                f"a force range of {self.force_range:.4g} N, {self.n} samples)\n"
                f"worst position range: {lo * 1e3:.4g} .. {hi * 1e3:.4g} mm, RMS error "
                f"{rms:.4g} N ({count} samples; {self.bin_width * 1e3:.3g} mm bins)")


def _nice(width: float) -> float:
    """The largest 1, 2 or 5 times a power of ten not above ``width``."""
    exp = math.floor(math.log10(width))
    for m in (5.0, 2.0, 1.0):
        if m * 10.0 ** exp <= width * (1 + 1e-12):
            return m * 10.0 ** exp
    return 10.0 ** exp


def compare(measured: np.ndarray, predicted: np.ndarray, x: np.ndarray,
            bin_width: float | None = None) -> Verification:
    """NRMSE and per-position-bin RMS error of ``predicted`` against ``measured``.

    Parameters
    ----------
    measured, predicted : ndarray
        Forces, N.
    x : ndarray
        Positions, m.
    bin_width : float, optional
        Position bin width, m (default 5 mm; see the module docstring).
    """
    measured = np.asarray(measured, dtype=np.float64)
    err = np.asarray(predicted, dtype=np.float64) - measured
    if measured.size == 0:
        raise IdentError("no samples to compare")
    rng = float(np.max(measured) - np.min(measured))
    rms = math.sqrt(float(np.mean(err * err)))
    lo, hi = float(np.min(x)), float(np.max(x))
    if bin_width is None:
        bin_width = 5e-3
        if hi > lo and (hi - lo) / 4.0 < bin_width:
            bin_width = _nice((hi - lo) / 4.0)
    if not bin_width > 0:
        raise IdentError(f"bin width must be > 0 m, got {bin_width!r}")
    k = np.floor(np.asarray(x, dtype=np.float64) / bin_width).astype(np.int64)
    k0 = int(k.min())
    k -= k0
    nb = int(k.max()) + 1
    counts = np.bincount(k, minlength=nb)
    sums = np.bincount(k, weights=err * err, minlength=nb)
    bins = [((k0 + j) * bin_width, (k0 + j + 1) * bin_width, math.sqrt(sums[j] / counts[j]),
             int(counts[j])) for j in range(nb) if counts[j] > 0]
    nrmse = 100.0 * rms / rng if rng > 0 else (0.0 if rms == 0 else math.inf)
    return Verification(nrmse, rms, rng, int(measured.size), float(bin_width), bins)


@dataclass
class FreeRun:
    """Free-run simulation of a model from the measured force (admittance).

    Attributes
    ----------
    time, measured, simulated : ndarray
        s, m, m over the compared (valid) samples.
    rms_error : float
        RMS(simulated - measured position), m.
    rms_motion : float
        RMS of the measured position about its mean, m (the scale of the error).
    unit : tuple of (str, float)
        The data's position unit and metres per that unit (mm for SI data).
    """

    time: np.ndarray
    measured: np.ndarray
    simulated: np.ndarray
    rms_error: float
    rms_motion: float
    unit: tuple[str, float] = ("mm", 1e-3)

    def summary(self) -> str:
        """One line: free-run RMS position error in the data's units and relative to the motion."""
        name, per = self.unit
        return (f"free run from the measured force: RMS position error "
                f"{self.rms_error / per:.4g} {name} ({100 * self.rms_error / self.rms_motion:.3g} "
                f"% of the motion's RMS {self.rms_motion / per:.4g} {name}, {self.time.size} "
                "samples)")


def data_unit(motion: Any) -> tuple[str, float]:
    """The unit a CSV file gave the position in and metres per that unit: ``mm``, ``um``,
    ``V`` for a sensor in volts (``V*0.001 m/V``); ``mm`` for SI data."""
    from .prep import unit_factor
    spec = ((motion.source or {}).get("units") or {}).get("position")
    if not spec or spec == "m":
        return "mm", 1e-3
    volts = any(term.strip() == "V" for term in spec.split("*"))
    return ("V" if volts else spec), unit_factor("position", spec)


def free_run(model: Any, motion: Any) -> FreeRun:
    """Simulate ``model`` driven by the measured force over the motion's valid samples.

    The run starts at the first valid sample from its position and velocity
    estimate (:mod:`hapflow.ident.simulate`), then sees only the force.

    Raises
    ------
    IdentError
        For quasi-static data (no time base) or a model whose mass is not positive.
    """
    from .simulate import simulate
    if motion.quasi_static:
        raise IdentError("quasi-static data (no time column) cannot be simulated: there is no "
                         "time base to integrate over")
    ok = np.flatnonzero(motion.valid)
    sl = slice(int(ok[0]), int(ok[-1]) + 1)
    x, _ = simulate(model, motion.force[sl], motion.rate, motion.x[sl][0], motion.vel[sl][0])
    measured = motion.x[sl]
    err = x - measured
    t = motion.time[sl] if motion.time is not None else np.arange(x.size) / motion.rate
    return FreeRun(t, measured, x, math.sqrt(float(np.mean(err * err))),
                   float(np.std(measured)), data_unit(motion))


def predict_motion(model: Any, motion: Any) -> np.ndarray:
    """Model force at every sample of ``motion`` (direction labels for quasi-static data)."""
    if motion.quasi_static:
        return model.predict(motion.x, None, None, direction=motion.direction)
    return model.predict(motion.x, motion.vel, motion.acc)


def fit_quality(model: Any, motion: Any) -> dict[str, Any]:
    """NRMSE and RMS error of the model on ``motion`` (every sample, dead band included)."""
    ok = motion.valid
    v = compare(motion.force[ok], predict_motion(model, motion)[ok], motion.x[ok])
    return {"nrmse_percent": v.nrmse_percent, "rms_error": v.rms_error,
            "force_range": v.force_range, "samples": v.n}


_ABSENT = object()


def _name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _number(low: float, low_open: bool = True) -> Callable[[Any], bool]:
    return lambda v: (isinstance(v, (int, float)) and not isinstance(v, bool)
                      and math.isfinite(v) and (v > low if low_open else v >= low))


def _names(value: Any) -> bool:
    return isinstance(value, dict) and all(_name(k) and _name(v) for k, v in value.items())


REPLAYED = {("settings", "prep", "velocity"): (lambda v: v in VELOCITY_METHODS,
                                               f"one of {', '.join(VELOCITY_METHODS)}"),
            ("settings", "prep", "order"): (lambda v: isinstance(v, int) and 1 <= v <= 8
                                            and not isinstance(v, bool), "an integer 1..8"),
            ("settings", "prep", "cutoff"): (_number(0.0), "a frequency > 0 Hz"),
            ("settings", "prep", "crossover"): (_number(0.0), "a frequency > 0 Hz"),
            ("settings", "prep", "highpass"): (_number(0.0), "a frequency > 0 Hz"),
            ("settings", "prep", "deadband"): (_number(0.0, False), "a speed >= 0 m/s"),
            ("settings", "prep", "trim"): (_number(0.0, False), "a time >= 0 s"),
            ("source", "signals", "pos"): (_name, "a signal name"),
            ("source", "signals", "force"): (_name, "a signal name"),
            ("source", "signals", "acc"): (lambda v: v is None or _name(v),
                                           "a signal name or null (no accelerometer)"),
            ("source", "units"): (_names, "a mapping of quantity: unit"),
            ("source", "columns"): (_names, "a mapping of quantity: column name"),
            ("source", "rate"): (_number(0.0), "a sample rate > 0 Hz")}
"""The entries of a model file that ``verify`` replays to prepare the data as the
model's data was prepared (:func:`prep_settings`), with what each must be; absent or
``null`` leaves the default (``acc: null``: the model's data had no accelerometer)."""


def prep_settings(model: Any) -> dict[str, Any]:
    """Signal names and estimator settings the model was identified with (for replay).

    Raises
    ------
    ModelFileError
        Naming the model file's line of a replayed entry that is not what it must be
        (:data:`REPLAYED`).
    """
    from .errors import ModelFileError
    sections = {"settings": model.settings or {}, "source": model.source or {}}
    out: dict[str, Any] = {}
    for keys, (valid, what) in REPLAYED.items():
        value = sections[keys[0]]
        for key in keys[1:]:
            value = value.get(key, _ABSENT) if isinstance(value, dict) else _ABSENT
        if value is _ABSENT or (value is None and keys[-1] != "acc"):
            continue                            # absent: the default
        if not valid(value):
            raise ModelFileError(f"{model.at(*keys)}: {'.'.join(keys)} must be {what}, got "
                                 f"{value!r}")
        out[keys[-1]] = value
    return out


def verify(model: Any, data: Any, bin_width: float | None = None,
           **overrides: Any) -> Verification:
    """Replay the motion of ``data`` through ``model`` and compare the forces.

    Parameters
    ----------
    model : ImpedanceModel or path
        The model (or its YAML file).
    data : Motion, Recording or path
        A prepared :class:`~hapflow.ident.prep.Motion`, or a recording/CSV
        file prepared with the model's stored settings.
    bin_width : float, optional
        Position bin width, m.
    **overrides
        Preparation settings that replace the stored ones (``pos``, ``force``,
        ``acc``, ``velocity``, ``order``, ``cutoff``, ...).

    Returns
    -------
    Verification
    """
    from hapflow.blocks.impedance_model import ImpedanceModel
    from .prep import Motion, from_recording, load_motion
    if isinstance(model, (str, Path)):
        model = ImpedanceModel.load(model)
    if not isinstance(data, Motion):
        kw = prep_settings(model)
        kw.update({k: v for k, v in overrides.items() if v is not None})
        if isinstance(data, (str, Path)):
            is_csv = Path(data).suffix.lower() == ".csv"
            if is_csv:
                for key in ("pos", "force", "acc"):
                    kw.pop(key, None)
            else:
                kw.pop("units", None)
                kw.pop("columns", None)
            data = load_motion(data, **kw)
        else:
            kw.pop("units", None)
            kw.pop("columns", None)
            data = from_recording(data, **kw)
    ok = data.valid
    return compare(data.force[ok], predict_motion(model, data)[ok], data.x[ok], bin_width)
