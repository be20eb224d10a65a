"""Reconstruct a perturbed trajectory of a hybrid system from its sensitivities (seed 001).

With the trajectory sensitivities ``lambda(t) = dx/dalpha`` and the
switching-time sensitivities ``t_alpha`` recorded alongside a nominal run
(e.g. by :class:`~hapflow.blocks.SwitchingFirstOrder`), the trajectory for
parameters ``alpha + da`` is to first order ``x + lambda da`` — but only
while nominal and perturbed systems are in the same mode.  Around a switch
at ``t_s`` the perturbed system switches at ``t_s + t_alpha da``; in
between, the first-order formula mixes the two modes and its error is of
the order of the jump in ``x'`` times the shift.  Hiskens & Pai's
refinement (seed 001, figure 3) continues the mode the perturbed system is
still (or already) in across that interval::

    shift > 0 (switches later):   x~(t) = x_s + lambda-(t_s) da + f- (t - t_s)
    shift < 0 (switches earlier): x~(t) = x_s + lambda+(t_s) da + f+ (t - t_s)

with ``x_s`` the state at the switch and ``f-``, ``f+`` the flows either
side of it (read off the record by one-sided differences; the sensitivity
jump is ``lambda+ - lambda- = -(f+ - f-) t_alpha``).
"""
from __future__ import annotations

import numpy as np


def reconstruct(time: np.ndarray, x: np.ndarray, sens: np.ndarray, switch_time: np.ndarray,
                switch_sens: np.ndarray, delta: np.ndarray, refine: bool = True) -> np.ndarray:
    """First-order perturbed trajectory, refined around switches.

    Parameters
    ----------
    time : ndarray, shape (n,)
        Sample times of the nominal run, s.
    x : ndarray, shape (n,)
        Nominal state.
    sens : ndarray, shape (n, p)
        Trajectory sensitivities ``dx/dalpha`` at the samples.
    switch_time : ndarray, shape (n,)
        Recorded time of the latest switch (changes at each switch).
    switch_sens : ndarray, shape (n, p)
        Recorded ``d(switch time)/dalpha`` of the latest switch.
    delta : ndarray, shape (p,)
        Parameter perturbation ``da``.
    refine : bool
        Apply the switching-time refinement (False: plain ``x + lambda da``).

    Returns
    -------
    ndarray, shape (n,)
        The reconstructed perturbed trajectory.
    """
    delta = np.asarray(delta, dtype=float)
    out = x + sens @ delta
    if not refine:
        return out
    for k in np.flatnonzero(np.diff(switch_time)) + 1:     # first sample after each switch
        if k < 2 or k + 1 >= len(time):
            continue
        t_s = switch_time[k]
        f_before = (x[k - 1] - x[k - 2]) / (time[k - 1] - time[k - 2])
        f_after = (x[k + 1] - x[k]) / (time[k + 1] - time[k])
        x_s = x[k] - f_after * (time[k] - t_s)
        t_alpha = switch_sens[k]
        lam_after = sens[k] - (time[k] - t_s) * (sens[k + 1] - sens[k]) / (time[k + 1] - time[k])
        lam_before = lam_after + (f_after - f_before) * t_alpha
        shift = float(t_alpha @ delta)
        lo, hi = sorted((t_s, t_s + shift))
        inside = (time >= lo) & (time < hi)
        flow, lam = (f_before, lam_before) if shift > 0 else (f_after, lam_after)
        out[inside] = x_s + lam @ delta + flow * (time[inside] - t_s)
    return out
