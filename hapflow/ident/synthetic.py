"""Synthetic identification data with known truth (tests, benchmarks, method comparisons).

A probe trajectory (constant-amplitude swept sine, seed 002) drives a known
:class:`~hapflow.blocks.impedance_model.ImpedanceModel`; the measured signals are made
like the rig's: a quantising encoder, an accelerometer with white noise and a
bias, a force sensor with white noise.  :func:`write_recording` stores them as
a hapflow HDF5 recording (signals ``enc.pos``, ``head.force``,
``head.accel``, ``dev.pos``, ``dev.vel``, ``dev.acc``) with the true model in
the ``impedance_truth`` attribute, which ``hapflow identify --plots`` overlays.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hapflow.blocks.impedance_model import ImpedanceModel, Knots


def swept_sine(duration: float, rate: float, amplitude: float = 0.025, f_start: float = 1.0,
               f_end: float = 4.0, offset: float = 0.0,
               ramp: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Constant-amplitude linear swept sine with analytic velocity and acceleration.

    ``x = offset + A r(t) sin(phi(t))``, ``phi = 2 pi (f0 t + (f1 - f0) t^2 / (2 T))``,
    with a smooth amplitude ramp ``r`` (raised cosine over ``ramp`` s) at the
    start so the motion starts at rest.

    Returns
    -------
    t, x, v, a : ndarray
        s, m, m/s, m/s^2.
    """
    n = int(round(duration * rate))
    t = np.arange(n) / rate
    T = duration
    k = (f_end - f_start) / T
    phi = 2 * np.pi * (f_start * t + 0.5 * k * t * t)
    w = 2 * np.pi * (f_start + k * t)
    dw = 2 * np.pi * k
    s, c = np.sin(phi), np.cos(phi)
    if ramp > 0:
        u = np.clip(t / ramp, 0.0, 1.0)
        r = 0.5 - 0.5 * np.cos(np.pi * u)
        dr = np.where(t < ramp, 0.5 * np.pi / ramp * np.sin(np.pi * u), 0.0)
        ddr = np.where(t < ramp, 0.5 * (np.pi / ramp) ** 2 * np.cos(np.pi * u), 0.0)
    else:
        r, dr, ddr = np.ones(n), np.zeros(n), np.zeros(n)
    x = offset + amplitude * r * s
    v = amplitude * (dr * s + r * w * c)
    a = amplitude * (ddr * s + 2 * dr * w * c + r * (dw * c - w * w * s))
    return t, x, v, a


def sine(duration: float, rate: float, amplitude: float = 0.025, frequency: float = 1.5,
         ramp: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A single-frequency sine (seed 000's experiment) with the same start ramp."""
    return swept_sine(duration, rate, amplitude, frequency, frequency, ramp=ramp)


def piecewise_model(edges=(-0.025, -0.015, -0.005, 0.005, 0.015, 0.025),
                    k=(6000.0, 3000.0, 1500.0, 3000.0, 6000.0),
                    mass=0.581, damping=11.5, friction=0.3, v_blend=1e-3) -> ImpedanceModel:
    """A hardening-spring-like truth with piecewise-constant parameters.

    The spring force is continuous (``F0`` per segment makes ``k x + F0``
    continuous at the edges, odd in x); each direction adds ``+-friction`` to
    ``F0``; the mass differs by +-5 % and the damping by +-10 % between
    alternate segments so a fit must find each segment's own values.
    """
    edges = np.asarray(edges, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    S = k.size
    # continuous spring force through 0 at the centre segment
    c = S // 2
    F0 = np.zeros(S)
    for j in range(c + 1, S):
        F0[j] = F0[j - 1] + (k[j - 1] - k[j]) * edges[j]
    for j in range(c - 1, -1, -1):
        F0[j] = F0[j + 1] + (k[j + 1] - k[j]) * edges[j + 1]
    alt = np.where(np.arange(S) % 2 == 0, 1.0, -1.0)
    m = mass * (1 + 0.05 * alt)
    b = damping * (1 - 0.10 * alt)
    dirs = {}
    for d in (1, -1):
        theta = np.column_stack([m, b, k, F0 + d * friction])
        dirs[d] = Knots.piecewise_constant(edges, theta)
    return ImpedanceModel(dirs[1], dirs[-1], v_blend, "truth",
                          settings={"edges": edges.tolist()})


def smooth_model(amplitude=0.025, mass=0.581, damping=11.5, friction=0.3,
                 spacing=5e-4, v_blend=1e-3) -> ImpedanceModel:
    """A truth whose stiffness varies smoothly: ``k(x) = 2000 + 4000 (x / A)^2`` N/m.

    Its spring force ``F_s = 2000 x + 4000 x^3 / (3 A^2)`` is written in the
    locally linear form ``k(x) x + F0(x)`` with ``F0 = F_s - k x``, on knots
    every ``spacing`` (fine, so the interpolation error is negligible).
    """
    x = np.arange(-1.2 * amplitude, 1.2 * amplitude + spacing / 2, spacing)
    k = 2000.0 + 4000.0 * (x / amplitude) ** 2
    Fs = 2000.0 * x + 4000.0 * x ** 3 / (3 * amplitude ** 2)
    F0 = Fs - k * x
    one = np.ones_like(x)
    dirs = {d: Knots(x, mass * one, damping * one, k, F0 + d * friction) for d in (1, -1)}
    return ImpedanceModel(dirs[1], dirs[-1], v_blend, "truth")


@dataclass
class Measurement:
    """Simulated rig signals with the truth they came from."""

    t: np.ndarray
    x: np.ndarray
    v: np.ndarray
    a: np.ndarray
    force_true: np.ndarray
    enc: np.ndarray
    accel: np.ndarray
    force: np.ndarray
    rate: float
    truth: ImpedanceModel


def measure(truth: ImpedanceModel, t: np.ndarray, x: np.ndarray, v: np.ndarray, a: np.ndarray,
            rate: float, encoder: float = 5e-6, accel_noise: float = 0.05,
            accel_bias: float = 0.02, force_noise: float = 0.02, seed: int = 0) -> Measurement:
    """Rig-like measurements of ``truth`` driven along (x, v, a).

    Parameters
    ----------
    encoder : float
        Encoder resolution, m (``floor(x / res) * res``; 0 for exact).
    accel_noise, accel_bias : float
        Accelerometer white noise RMS and bias, m/s^2.
    force_noise : float
        Force sensor white noise RMS, N.
    seed : int
        Seed of the noise.
    """
    rng = np.random.default_rng(seed)
    f_true = truth.predict(x, v, a)
    enc = np.floor(x / encoder) * encoder if encoder > 0 else x.copy()
    acc = a + accel_bias + accel_noise * rng.standard_normal(x.size)
    force = f_true + force_noise * rng.standard_normal(x.size)
    return Measurement(t, x, v, a, f_true, enc, acc, force, float(rate), truth)


def write_recording(path: str | Path, meas: Measurement, chunk: int = 65536,
                    graph_yaml: str | None = None) -> Path:
    """Store a measurement as a hapflow HDF5 recording (see the module docstring)."""
    from ..recorder import Recorder
    signals = {"enc.pos": ((1,), "f8", "m"), "head.force": ((1,), "f8", "N"),
               "head.accel": ((1,), "f8", "m/s^2"), "dev.pos": ((1,), "f8", "m"),
               "dev.vel": ((1,), "f8", "m/s"), "dev.acc": ((1,), "f8", "m/s^2")}
    attrs = {"name": "synthetic", "rate": meas.rate, "seed": 0,
             "duration": meas.t.size / meas.rate, "impedance_truth": meas.truth.to_yaml()}
    if graph_yaml:
        attrs["graph_yaml"] = graph_yaml
    rec = Recorder(path, signals, attrs)
    cols = {"enc.pos": meas.enc, "head.force": meas.force, "head.accel": meas.accel,
            "dev.pos": meas.x, "dev.vel": meas.v, "dev.acc": meas.a}
    for i in range(0, meas.t.size, chunk):
        sl = slice(i, min(i + chunk, meas.t.size))
        rec.append(meas.t[sl], {k: v[sl, None] for k, v in cols.items()})
    rec.close()
    return Path(path)


def recording(path: str | Path, truth: ImpedanceModel | None = None, duration: float = 20.0,
              rate: float = 4000.0, amplitude: float = 0.025, f_start: float = 1.0,
              f_end: float = 4.0, seed: int = 0, **noise: float) -> Measurement:
    """Swept-sine measurement of ``truth`` (default :func:`piecewise_model`) written to ``path``."""
    truth = piecewise_model() if truth is None else truth
    t, x, v, a = swept_sine(duration, rate, amplitude, f_start, f_end)
    meas = measure(truth, t, x, v, a, rate, seed=seed, **noise)
    write_recording(path, meas)
    return meas


def rms(e: np.ndarray) -> float:
    """Root mean square."""
    return math.sqrt(float(np.mean(np.square(e))))


HARDENING = {"m": 0.1, "b": 4.4, "k1": 0.1 * (2 * math.pi * 70.0) ** 2,
             "k3": 0.5 * 0.1 * (2 * math.pi * 70.0) ** 2 / 2e-3 ** 2}
"""The hardening oscillator of issue 14: ``m a + b v + k1 x + k3 x^3 = u`` (SI), resonance
~70 Hz (~78 Hz at the test's amplitude)."""


def _hardening_rk4(uh, h, m, b, k1, k3, x, v, a):
    """RK4 of the oscillator; ``uh`` is the force at half steps (``uh[2 i]`` at step i)."""
    X = 0.0
    V = 0.0
    acc = np.empty(4)
    dx = np.empty(4)
    for i in range(x.shape[0]):
        x[i] = X
        v[i] = V
        a[i] = (uh[2 * i] - b * V - k1 * X - k3 * X ** 3) / m
        if i == x.shape[0] - 1:
            break
        xs = X
        vs = V
        for s in range(4):
            if s > 0:
                c = 0.5 * h if s < 3 else h
                xs = X + c * dx[s - 1]
                vs = V + c * acc[s - 1]
            dx[s] = vs
            acc[s] = (uh[2 * i + (s + 1) // 2] - b * vs - k1 * xs - k3 * xs ** 3) / m
        X += h / 6 * (dx[0] + 2 * dx[1] + 2 * dx[2] + dx[3])
        V += h / 6 * (acc[0] + 2 * acc[1] + 2 * acc[2] + acc[3])


def hardening_oscillator(duration: float = 30.0, rate: float = 610.0, noise: float = 0.01,
                         force: float = 7.0, seed: int = 1) -> dict[str, np.ndarray]:
    """The oscillator :data:`HARDENING` driven by a multisine force (2-150 Hz, 0.5 Hz apart,
    random phases, ``force`` N RMS), sampled at ``rate``, with white position noise of
    ``noise`` times the position's RMS.

    The truth is integrated by RK4 at 16 steps per sample on the analytic force
    (independent of hapflow's simulation code).  Returns ``x, v, a`` (truth), ``u``
    (force) and ``xm`` (measured position), one value per sample.
    """
    from numba import njit
    rng = np.random.default_rng(seed)
    freqs = np.arange(2.0, 150.0, 0.5)
    phase = rng.uniform(0, 2 * np.pi, freqs.size)
    sub = 16
    n = int(duration * rate)
    th = np.arange(2 * n * sub + 1) / (2 * rate * sub)
    uh = np.zeros_like(th)
    for f, p in zip(freqs, phase):
        uh += np.cos(2 * np.pi * f * th + p)
    uh *= force / math.sqrt(freqs.size / 2)
    fine = [np.empty(n * sub) for _ in range(3)]
    njit(_hardening_rk4)(uh, 1.0 / (rate * sub), *HARDENING.values(), *fine)
    x, v, a = (s[::sub] for s in fine)
    xm = x + noise * x.std() * np.random.default_rng(seed + 1).standard_normal(n)
    return {"x": x, "v": v, "a": a, "u": uh[::2 * sub][:n], "xm": xm}
