"""Seed 004 section 2.3.1: the slider-crank kinematic observer, SS-UKF against EKF, over 30 s.

graphs/slider_crank_kinematic.yaml: chapter 2's 12.56 rad/s + 2 Hz ripple,
encoder 0.003 rad, accelerometer 0.03 m/s^2, the switching kinematic model
(slider_crank_kkf) as an SS-UKF and as an EKF with the same tuning.  What the
section reports, and what is asserted here (worst of noise seeds 1-4):

- both observers estimate speed and acceleration well away from the dead
  centres;
- where the dead centres are crossed the estimates are less accurate "but
  still acceptable" (the acceleration: the accelerometer says nothing about
  it there);
- no drift over the 30 s run (the 5 s windows after the first within 1.5x of each other; the
  same observer loosely tied to its encoder wanders, so the check can fail);
- the SS-UKF is "marginally affected by singularity, especially in the
  estimation of speed", better than the EKF.  Not reproduced: here the two
  agree to within 1 % near the dead centres (asserted: the SS-UKF is no
  worse).  The section traces its SS-UKF's advantage to the EKF's Jacobian
  "at the model switch, since in such instants the model is not ensured to be
  derivable"; in hapflow the switching rule is evaluated once per sample on
  the posterior mean and every sigma point, like the EKF's finite
  differences, sees the mode of that sample, so neither filter ever
  differentiates across the switch.

Measured (seeds 1-4): speed 0.0090-0.0096 rad/s RMS away from the dead
centres (> 0.1 rad), 0.0093-0.0107 within 0.1 rad; acceleration 0.62-0.66
and 1.88-2.05 rad/s^2; SS-UKF and EKF within 0.2 % of each other.  CPU time
of the 30 s run: bench/estimation.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hapflow
import hapflow.blocks  # noqa: F401
from hapflow.blocks.multibody import crank_singularity

ROOT = Path(__file__).resolve().parents[2]
GRAPH = ROOT / "graphs" / "slider_crank_kinematic.yaml"
SEEDS = (1, 2, 3, 4)
FILTERS = {"SS-UKF": "kkf", "EKF": "kkf_ekf"}
NEAR = 0.1           # rad from a dead centre: the switching band and a little beyond
WINDOW = 5000        # samples: 5 s
RIPPLE_ACC = 1.256 * 4 * np.pi     # amplitude of the crank acceleration (rad/s^2)


def _rms(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(e ** 2)))


def _errors(signals: dict[str, np.ndarray], block: str) -> tuple[np.ndarray, np.ndarray]:
    x = signals[f"{block}.x_hat"]
    return x[:, 1] - signals["plant.omega"][:, 0], x[:, 2] - signals["plant.alpha"][:, 0]


@pytest.fixture(scope="module")
def sim() -> hapflow.Simulation:
    return hapflow.Simulation(hapflow.load(GRAPH))


@pytest.fixture(scope="module")
def runs(sim) -> list[dict[str, np.ndarray]]:
    out = []
    for seed in SEEDS:
        sim.reset(seed=seed)
        signals = dict(sim.run().signals)
        assert signals["plant.theta"].shape[0] == 30000
        signals["near"] = np.array([crank_singularity(th, 0.3, 0.6, 0.05)
                                    for th in signals["plant.theta"][:, 0]]) < NEAR
        out.append(signals)
    return out


def _worst(runs, block: str, which: int, near: bool) -> float:
    """Worst RMS over the seeds of the speed (``which`` 0) or acceleration (1) error, near
    the dead centres or away from them, after the first second (the initial transient)."""
    worst = 0.0
    for s in runs:
        error = _errors(s, block)[which][1000:]
        mask = s["near"][1000:] if near else ~s["near"][1000:]
        worst = max(worst, _rms(error[mask]))
    return worst


def test_the_run_crosses_the_dead_centres_many_times(runs):
    near = runs[0]["near"]
    crossings = np.count_nonzero(np.diff(near.astype(int)) == 1)
    assert crossings > 100           # 12.56 rad/s for 30 s: 60 turns, two dead centres each
    assert 0.03 < near.mean() < 0.1


@pytest.mark.parametrize("name", FILTERS)
def test_good_estimates_away_from_the_dead_centres(runs, name):
    # the encoder alone differentiated gives 0.003 sqrt(2) / 1 ms = 4.2 rad/s of speed noise
    assert _worst(runs, FILTERS[name], 0, near=False) < 0.02
    assert _worst(runs, FILTERS[name], 1, near=False) < 0.1 * RIPPLE_ACC


@pytest.mark.parametrize("name", FILTERS)
def test_dead_centres_degrade_the_acceleration_but_it_stays_acceptable(runs, name):
    block = FILTERS[name]
    far, near = _worst(runs, block, 1, near=False), _worst(runs, block, 1, near=True)
    assert 2.0 * far < near < 0.25 * RIPPLE_ACC
    # the speed, constrained by the accelerometer through xs'' there, barely suffers
    assert _worst(runs, block, 0, near=True) < 1.5 * _worst(runs, block, 0, near=False)


def test_ss_ukf_no_worse_than_ekf_near_the_dead_centres(runs):
    for which in (0, 1):
        ukf, ekf = (_worst(runs, FILTERS[n], which, near=True) for n in ("SS-UKF", "EKF"))
        assert ukf <= 1.01 * ekf


def _windows(error: np.ndarray) -> np.ndarray:
    """RMS of each 5 s window but the first (the initial transient)."""
    return np.array([_rms(w) for w in error.reshape(-1, WINDOW)[1:]])


@pytest.mark.parametrize("name", FILTERS)
def test_no_drift_over_30_s(runs, name):
    for s in runs:
        speed, accel = _errors(s, FILTERS[name])
        for error in (speed, accel):
            windows = _windows(error)
            assert windows.max() < 1.5 * windows.min(), windows
        angle = s[f"{FILTERS[name]}.x_hat"][:, 0] - s["plant.theta"][:, 0]
        assert abs(np.mean(angle[-WINDOW:])) < 3e-4          # a tenth of the encoder noise


def test_loosely_tied_to_its_encoder_the_observer_wanders(sim):
    # the drift check above can fail: the same observer told its encoder is 300 mrad
    # noisy (R = 0.1 rad^2 instead of 9e-6) follows mostly the accelerometer, and its speed
    # error wanders from one window to the next (measured 0.27-4.0 rad/s RMS); told to
    # ignore the encoder altogether (R = 1) it diverges within a second
    sim.reset(seed=1)
    sim.set("kkf.R", [0.1])
    try:
        signals = sim.run().signals
    finally:
        sim.set("kkf.R", [9.0e-6])
    speed, _ = _errors(signals, "kkf")
    windows = _windows(speed)
    assert windows.max() > 1.5 * windows.min(), windows
