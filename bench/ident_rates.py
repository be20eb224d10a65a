"""Identification at 9 samples per resonance period (issue 14's hardening oscillator).

``m a + b v + k1 x + k3 x^3 = u``, ~70 Hz resonance, 610 Hz sampling, multisine force,
1 % position noise (:func:`hapflow.ident.synthetic.hardening_oscillator`); 20 s to fit,
10 s held out.  Prints one table: per derivative estimate, the polynomial model's
parameter errors, the one-step force NRMSE on the fit data, and the free-run RMS position
error on the held-out data (the model simulated from the measured force), also as a ratio
to the same fit with exact derivatives (issue 14's goal: <= 1.5).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hapflow.ident import from_arrays, identify  # noqa: E402
from hapflow.ident import synthetic as syn  # noqa: E402
from hapflow.ident.simulate import simulate  # noqa: E402

RATE, TRAIN = 610.0, 20.0


def main() -> None:
    d = syn.hardening_oscillator(30.0, RATE)
    k = int(TRAIN * RATE)
    truth = syn.HARDENING

    def free_run(model) -> float:
        x, _ = simulate(model, d["u"][k:], RATE, d["xm"][k], d["v"][k])
        return math.sqrt(float(np.mean((x - d["xm"][k:]) ** 2)))

    rows = []
    for name, kw in (("default", {}), ("Savitzky-Golay (by name)", {"velocity": "savgol"}),
                     ("RTS smoother (by name)", {"velocity": "rts"}),
                     ("encoder 40 Hz (old default)", {"velocity": "encoder"}),
                     ("encoder 244 Hz", {"velocity": "encoder", "cutoff": 0.4 * RATE}),
                     ("exact derivatives", None)):
        motion = from_arrays(d["xm"][:k], d["u"][:k], RATE, **(kw or {}))
        if kw is None:
            motion.vel, motion.acc = d["v"][:k], d["a"][:k]
        model = identify(motion, "poly")
        c = model.polynomial
        errors = [100 * (c[p] / truth[t] - 1) for p, t in (("m", "m"), ("b0", "b"), ("k1", "k1"),
                                                          ("k3", "k3"))]
        method = "truth" if kw is None else motion.settings["velocity"]
        cutoff = math.nan if kw is None else motion.settings["cutoff"]
        rows.append((name, method, cutoff, errors,
                     model.fit["nrmse_percent"], free_run(model)))
    exact = rows[-1][-1]
    print(f"hardening oscillator, {RATE:g} Hz sampling, 1 % noise; position RMS "
          f"{d['xm'].std() * 1e3:.3f} mm")
    print(f"{'estimate':28s} {'method':>9s} {'cutoff':>7s} {'m %':>7s} {'b %':>7s} {'k1 %':>7s} "
          f"{'k3 %':>7s} {'NRMSE %':>8s} {'free run [mm]':>14s} {'/ exact':>8s}")
    for name, method, cutoff, errors, nrmse, rms in rows:
        print(f"{name:28s} {method:>9s} {cutoff:7.1f} "
              + " ".join(f"{e:7.2f}" for e in errors)
              + f" {nrmse:8.3f} {rms * 1e3:14.5f} {rms / exact:8.2f}")


if __name__ == "__main__":
    main()
