"""Estimates against truth: the probe KKF on the rig and the slider-crank two-stage observer.

Runs ``graphs/kkf_probe.yaml`` and ``graphs/slider_crank_two_stage.yaml`` and
writes two figures (PNG) to the current folder (or ``--out``):

* ``kkf_probe.png``: true device velocity, the probe KKF's estimate and a
  backward difference of the encoder, and the two velocity errors;
* ``slider_crank_two_stage.png``: crank speed, crank acceleration and
  slider force - truth, two-stage (KKF + force observer) and the
  single-stage benchmark observer - with their RMS errors in the legends.

With ``--seeds N`` it also prints the slider-crank RMS errors of both
observers for noise seeds 1..N beside the seed's table 3.4.

Usage: ``python examples/estimation_plots.py [--out DIR] [--probe-seconds S] [--seeds N]``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import hapflow  # noqa: E402
import hapflow.blocks  # noqa: E402,F401

GRAPHS = Path(__file__).resolve().parents[1] / "graphs"


def _rms(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(e ** 2)))


def plot_probe(seconds: float, out: Path) -> Path:
    """Velocity of the rig: truth, KKF, backward difference (last 0.5 s and errors)."""
    run = hapflow.Simulation(hapflow.load(GRAPHS / "kkf_probe.yaml")).run(seconds)
    t = run.time
    truth, kkf, diff = (run.signals[k][:, 0] for k in ("dev.vel", "kkf.vel_hat", "vel_diff.y"))
    view = t >= t[-1] - 0.5
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    top.plot(t[view], diff[view], lw=0.5, color="0.7", label="backward difference")
    top.plot(t[view], truth[view], lw=1.5, color="k", label="true velocity")
    top.plot(t[view], kkf[view], lw=1.0, ls="--", color="C1", label="probe KKF")
    top.set_ylabel("velocity (m/s)")
    top.legend(loc="upper right")
    bottom.plot(t[view], (diff - truth)[view] * 1e3, lw=0.5, color="0.7",
                label=f"backward difference, rms {_rms(diff - truth) * 1e3:.2f} mm/s")
    bottom.plot(t[view], (kkf - truth)[view] * 1e3, lw=1.0, color="C1",
                label=f"probe KKF, rms {_rms(kkf - truth) * 1e3:.3f} mm/s")
    bottom.set_ylabel("error (mm/s)")
    bottom.set_xlabel("time (s)")
    bottom.legend(loc="upper right")
    fig.suptitle("Probe kinematic Kalman filter on the identification rig")
    path = out / "kkf_probe.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_slider_crank(out: Path) -> Path:
    """Crank speed, acceleration and slider force: truth, two-stage and benchmark."""
    run = hapflow.Simulation(hapflow.load(GRAPHS / "slider_crank_two_stage.yaml")).run()
    t = run.time
    kkf, fobs, bench = (run.signals[f"{b}.x_hat"] for b in ("kkf", "fobs", "bench"))
    rows = [("crank speed (rad/s)", run.signals["plant.omega"][:, 0], kkf[:, 1], bench[:, 1]),
            ("crank acceleration (rad/s^2)", run.signals["plant.alpha"][:, 0], kkf[:, 2],
             bench[:, 2]),
            ("slider force (N)", run.signals["force.y"][:, 0], fobs[:, 1], bench[:, 3])]
    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(8, 8))
    for ax, (label, truth, two, one) in zip(axes, rows):
        ax.plot(t, one, lw=0.6, color="0.6", label=f"benchmark, rms {_rms(one - truth):.3g}")
        ax.plot(t, two, lw=0.8, color="C0", label=f"two-stage, rms {_rms(two - truth):.3g}")
        ax.plot(t, truth, lw=1.2, color="k", ls="--", label="truth")
        ax.set_ylabel(label)
        ax.legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel("time (s)")
    fig.suptitle("Slider-crank (seed 004 section 3.2.1): two-stage vs benchmark SS-UKF")
    path = out / "slider_crank_two_stage.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


TABLE_3_4 = {"two-stage": (0.0846, 1.8112, 4.2988), "benchmark": (0.6558, 7.0533, 10.8249)}


def slider_crank_table(seeds: int) -> str:
    """RMS errors (crank speed, acceleration, slider force) per noise seed, and table 3.4."""
    sim = hapflow.Simulation(hapflow.load(GRAPHS / "slider_crank_two_stage.yaml"))
    lines = [f"{'seed':>10}  {'two-stage: rad/s, rad/s^2, N':>30}  {'benchmark':>24}"]
    for seed in range(1, seeds + 1):
        sim.reset(seed=seed)
        run = sim.run()
        truth = [run.signals[k][:, 0] for k in ("plant.omega", "plant.alpha", "force.y")]
        kkf, fobs, bench = (run.signals[f"{b}.x_hat"] for b in ("kkf", "fobs", "bench"))
        two = [_rms(e - t) for e, t in zip((kkf[:, 1], kkf[:, 2], fobs[:, 1]), truth)]
        one = [_rms(e - t) for e, t in zip((bench[:, 1], bench[:, 2], bench[:, 3]), truth)]
        lines.append(f"{seed:>10}  {two[0]:>10.4f}{two[1]:>10.3f}{two[2]:>10.2f}  "
                     f"{one[0]:>8.4f}{one[1]:>8.3f}{one[2]:>8.2f}")
    two, one = TABLE_3_4["two-stage"], TABLE_3_4["benchmark"]
    lines.append(f"{'table 3.4':>10}  {two[0]:>10.4f}{two[1]:>10.3f}{two[2]:>10.2f}  "
                 f"{one[0]:>8.4f}{one[1]:>8.3f}{one[2]:>8.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="folder for the PNG files")
    parser.add_argument("--probe-seconds", type=float, default=3.0,
                        help="simulated seconds of the rig run")
    parser.add_argument("--seeds", type=int, default=0,
                        help="print the slider-crank RMS errors for noise seeds 1..N")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in (plot_probe(args.probe_seconds, args.out), plot_slider_crank(args.out)):
        print(f"wrote {path}")
    if args.seeds > 0:
        print(slider_crank_table(args.seeds))


if __name__ == "__main__":
    main()
