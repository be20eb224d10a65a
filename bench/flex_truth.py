"""Chapter 6 as the thesis runs it: the EKF on the 13-dof reduced model judged against the
30-dof ERLS manipulator, with the chapter's figures redrawn into ``out/flex_ekf/``.

The truth is the full model (27 elastic + 3 ERLS coordinates, alpha = 1/s,
beta = 2e-6 s as everywhere in hapflow's chapter 6: the thesis gives no
damping) of :mod:`hapflow.flex.manipulator`, integrated in numpy
(:class:`hapflow.flex.state_space.FlexModel`, classical RK4 at 0.05 ms: its
highest modes need half the EKF's step) from rest at ``q*`` under eq. 6.7's
torques (T1 = 1.4 sin 2 pi 8 t, T2 = 7 sin 2 pi 10 t, T3 = 0.1 sin 2 pi 11 t
N m).  The measurements, every 0.1 ms: the torques through section 6.2's
meters (0.2 % of 15, 60 and 2 N m full scale, Gaussian, then a 24-bit
converter: :class:`~hapflow.blocks.flexible_ekf.TorqueMeter`'s arithmetic),
``q1-q3`` and the full model's curvatures ``gamma1, gamma2, gamma4`` without
noise.  The observer is :class:`~hapflow.blocks.flexible_ekf.FlexibleLinkEKF`
with its defaults, its compiled step called sample by sample; its output at
a sample is the prior estimate, as in the graph.

Printed: the angle errors, each elastic master's largest error over its
range, and the spectral peaks under 100 Hz of estimate and truth (thesis
fig. 6.13: 8, 10, 11 Hz and the 14.2 and 67.0 Hz modes; this geometry
reconstruction's modes are 13.0 and 62.0 Hz, see hapflow/flex/manipulator.py).
Drawn (``--plots``, default on): ``estimates.png`` (estimated and true
elastic masters, thesis figs. 6.7-6.12's counterparts), ``spectra.png`` (their
amplitude spectra, fig. 6.13's), ``angles.png`` (q errors).  The truth run
is kept in ``out/flex_ekf/truth.npz`` and reused when its settings match.

Usage: ``python bench/flex_truth.py [--duration 3] [--no-plots]``.  A benchmark: exits 0.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from hapflow.flex.manipulator import Q_STAR, gauge_rows, manipulator
from hapflow.flex.state_space import expand

OUT = Path(__file__).resolve().parents[1] / "out" / "flex_ekf"
NAMES = ("x4", "y5", "x14", "y15", "x25", "x26")
ELASTIC = np.array([3, 4, 13, 14, 24, 25])      # the masters in x = (q, u_in)
SAMPLE = 1e-4                                    # s, the EKF's (and the meters') rate
SUBSTEPS = 2                                     # RK4 steps of the truth per sample
FULL_SCALE = np.array([15.0, 60.0, 2.0])         # N m, section 6.2's meters
THESIS_PEAKS = "8, 10, 11, 14.2, 67.0"


def torques(t: np.ndarray) -> np.ndarray:
    """Eq. 6.7's motor torques, N m, (len(t), 3)."""
    return np.stack([1.4 * np.sin(2 * np.pi * 8 * t), 7.0 * np.sin(2 * np.pi * 10 * t),
                     0.1 * np.sin(2 * np.pi * 11 * t)], axis=1)


def truth(duration: float) -> dict[str, np.ndarray]:
    """The 30-dof model's states and curvatures at the samples (cached in OUT)."""
    cache = OUT / "truth.npz"
    if cache.exists():
        data = dict(np.load(cache))
        if float(data["duration"]) == duration:
            return data
    model = expand(manipulator(alpha=1.0, beta=2e-6), [0, 2, 12], gauge_rows)
    dt = SAMPLE / SUBSTEPS
    samples = int(round(duration / SAMPLE))
    t = np.arange(samples * SUBSTEPS) * dt
    w0 = np.concatenate([Q_STAR, np.zeros(2 * model.size - 3)])
    start = time.process_time()
    w = model.simulate(w0, torques(t), dt)[::SUBSTEPS][:samples]
    cpu = time.process_time() - start
    gamma = np.array([model.gauges(s) for s in w])
    data = {"t": t[::SUBSTEPS][:samples], "w": w, "gamma": gamma, "cpu": np.float64(cpu),
            "duration": np.float64(duration)}
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez(cache, **data)
    return data


def meters(tq: np.ndarray, seed: int = 1) -> np.ndarray:
    """Torques as the meters read them: noise 0.2 % of full scale, then a 24-bit converter."""
    rng = np.random.default_rng(seed)
    step = 2.0 * FULL_SCALE / 2.0 ** 24
    noisy = tq + 0.002 * FULL_SCALE * rng.standard_normal(tq.shape)
    code = np.clip(np.floor(noisy / step + 0.5), -FULL_SCALE / step, FULL_SCALE / step - 1)
    return code * step


def observe(data: dict[str, np.ndarray]) -> np.ndarray:
    """The EKF's prior estimates (26 states) at the samples."""
    from hapflow.blocks.flexible_ekf import O_TORQUE, O_W, O_Y, FlexibleLinkEKF, ekf_step
    block = FlexibleLinkEKF()
    block.sample_time = SAMPLE
    p, d = block.pack(), block.initial_state()[1]
    measured = meters(torques(data["t"]))
    y = np.concatenate([data["w"][:, :3], data["gamma"]], axis=1)
    est = np.empty((len(y), 26))
    for k in range(len(y)):
        est[k] = d[O_W:O_W + 26]
        d[O_TORQUE:O_TORQUE + 3] = measured[k]
        d[O_Y:O_Y + 6] = y[k]
        ekf_step(p, d)
    return est


def spectrum(x: np.ndarray) -> np.ndarray:
    return np.abs(np.fft.rfft((x - x.mean()) * np.hanning(len(x)))) * 2 / len(x)


def peaks(spec: np.ndarray, freqs: np.ndarray) -> list[int]:
    """Local maxima under 100 Hz above 1 % of the largest there."""
    low = freqs < 100
    top = spec[low].max()
    return [i for i in range(1, len(spec) - 1) if freqs[i] < 100 and spec[i] > spec[i - 1]
            and spec[i] >= spec[i + 1] and spec[i] > 0.01 * top]


def table(data: dict[str, np.ndarray], est: np.ndarray) -> None:
    w = data["w"]
    q_err = np.abs(w[:, :3] - est[:, :3]).max(axis=0)
    print(f"## EKF (13-dof model) against the 30-dof truth, {data['duration']:g} s "
          f"(truth: numpy RK4 at {SAMPLE / SUBSTEPS * 1e3:g} ms, {float(data['cpu']):.0f} s CPU)")
    print(f"max |q error| {np.array2string(q_err, precision=2)} rad; "
          f"q drift at the end {np.array2string(w[-1, :3] - est[-1, :3], precision=2)} rad")
    freqs = np.fft.rfftfreq(len(w), SAMPLE)
    print(f"{'dof':>4} | {'max err/range %':>15} | {'rms err/rms %':>13} | peaks < 100 Hz, "
          f"estimate [truth] (thesis fig. 6.13: {THESIS_PEAKS})")
    for k, name in enumerate(NAMES):
        true, guess = w[:, ELASTIC[k]], est[:, 3 + k]
        err = guess - true
        se, st = spectrum(guess), spectrum(true)
        print(f"{name:>4} | {100 * np.abs(err).max() / np.ptp(true):15.2f} | "
              f"{100 * np.sqrt(np.mean(err ** 2) / np.mean((true - true.mean()) ** 2)):13.2f} | "
              f"{' '.join(f'{freqs[i]:.1f}' for i in peaks(se, freqs))} "
              f"[{' '.join(f'{freqs[i]:.1f}' for i in peaks(st, freqs))}]")


def plots(data: dict[str, np.ndarray], est: np.ndarray) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t, w = data["t"], data["w"]
    freqs = np.fft.rfftfreq(len(w), SAMPLE)
    files = []
    fig, axes = plt.subplots(3, 2, figsize=(11, 8), sharex=True)
    for k, ax in enumerate(axes.ravel()):
        ax.plot(t, 1e6 * w[:, ELASTIC[k]], lw=1.0, label="30-dof truth")
        ax.plot(t, 1e6 * est[:, 3 + k], lw=0.8, ls="--", label="EKF (13-dof model)")
        ax.set_ylabel(f"{NAMES[k]}, um")
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("time, s")
    axes[0, 0].legend(loc="upper right", fontsize=8)
    fig.suptitle("Elastic master displacements: EKF estimate vs full-model truth "
                 "(seed 004 figs. 6.7-6.12)")
    fig.tight_layout()
    files.append(OUT / "estimates.png")
    fig.savefig(files[-1], dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(3, 2, figsize=(11, 8), sharex=True)
    band = freqs < 100
    for k, ax in enumerate(axes.ravel()):
        ax.semilogy(freqs[band], 1e6 * spectrum(w[:, ELASTIC[k]])[band], lw=1.0,
                    label="30-dof truth")
        ax.semilogy(freqs[band], 1e6 * spectrum(est[:, 3 + k])[band], lw=0.8, ls="--",
                    label="EKF estimate")
        for f in (8, 10, 11, 14.2, 67.0):
            ax.axvline(f, color="grey", lw=0.5, ls=":")
        ax.set_ylabel(f"|{NAMES[k]}|, um")
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("frequency, Hz (dotted: thesis fig. 6.13's peaks)")
    axes[0, 0].legend(loc="upper right", fontsize=8)
    fig.suptitle("Amplitude spectra of the elastic masters (seed 004 fig. 6.13)")
    fig.tight_layout()
    files.append(OUT / "spectra.png")
    fig.savefig(files[-1], dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(9, 4))
    for a in range(3):
        ax.plot(t, w[:, a] - est[:, a], lw=0.8, label=f"q{a + 1}")
    ax.set_xlabel("time, s")
    ax.set_ylabel("q - q_hat, rad")
    ax.legend()
    ax.grid(alpha=0.3)
    ax.set_title("ERLS coordinates: truth minus EKF estimate")
    fig.tight_layout()
    files.append(OUT / "angles.png")
    fig.savefig(files[-1], dpi=120)
    plt.close(fig)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3.0, help="simulated s [3]")
    parser.add_argument("--no-plots", dest="plots", action="store_false")
    args = parser.parse_args()
    data = truth(args.duration)
    est = observe(data)
    table(data, est)
    if args.plots:
        for path in plots(data, est):
            print(f"plot -> {path}")


if __name__ == "__main__":
    main()
