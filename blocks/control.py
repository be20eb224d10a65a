"""Discrete controllers (held blocks: outputs change only at their sample hits)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from hapflow.block import Block
from hapflow.params import Live, Structural, nonnegative, positive
from hapflow.ports import In, Out

# indices into the packed parameter vector of PIDFeedforward
_KP, _KI, _KD, _TS, _A, _G, _MFF, _FFF, _VS, _LIM, _KA = range(11)


@njit
def _pid_law(d, m, p, ref_pos, ref_vel, ref_acc, meas_pos, meas_acc):
    """Control law from the current inputs and the discrete state.

    Returns ``(u, u_unsat, e, vf)``: saturated and unsaturated force (N),
    position error (m), filtered measured velocity (m/s) of this sample.
    Also writes the work entries ``d[3:6]`` that ``update`` reads.
    """
    e = ref_pos - meas_pos
    if m[0] != 0:
        vf = p[_A] * d[2] + p[_G] * (meas_pos - d[1])
    else:
        vf = 0.0
    u_unsat = (p[_KP] * e + p[_KI] * d[0] + p[_KD] * (ref_vel - vf)
               + p[_MFF] * ref_acc + p[_FFF] * math.tanh(ref_vel / p[_VS])
               + p[_KA] * (ref_acc - meas_acc))
    u = min(max(u_unsat, -p[_LIM]), p[_LIM])
    d[3] = u_unsat       # work entries for update (the engine calls output first)
    d[4] = e
    d[5] = vf
    return u, u_unsat, e, vf


@njit
def _pid_update(d, m, p, meas_pos):
    """Advance the PID state from the work entries of this sample's output."""
    u_unsat, e = d[3], d[4]
    windup = (u_unsat > p[_LIM] and e > 0.0) or (u_unsat < -p[_LIM] and e < 0.0)
    if not windup:
        d[0] += p[_TS] * e
    d[1] = meas_pos
    d[2] = d[5]
    m[0] = 1


class PIDFeedforward(Block):
    """Discrete PID position controller with inertia and friction feed-forward.

    A held block: it has an ``update`` kernel and no continuous state, so its
    output is computed at its sample hits and held (zero-order hold) in
    between and during solver stages.  At sample ``k`` (sample time
    ``Ts`` the sample time)::

        e[k]    = ref_pos[k] - meas_pos[k]
        vf[k]   = a vf[k-1] + (1 - a) (meas_pos[k] - meas_pos[k-1]) / Ts,
                  a = exp(-2 pi deriv_cutoff Ts)
        u[k]    = kp e[k] + ki I[k] + kd (ref_vel[k] - vf[k])
                  + mass_ff ref_acc[k] + friction_ff tanh(ref_vel[k] / friction_smooth_vel)
                  + ka (ref_acc[k] - meas_acc[k])      (with accel_feedback)
        force_cmd[k] = clip(u[k], -limit, limit)
        I[k+1]  = I[k] + Ts e[k]   unless the output is saturated and e[k] has
                                   the sign of the saturation (anti-windup by
                                   conditional integration)

    The derivative term differentiates the *measurement* only (backward
    difference, then a first-order low-pass whose pole is matched,
    ``z = exp(-2 pi deriv_cutoff Ts)``, unity gain at DC): the reference is
    never differentiated numerically, so a step in ``ref_pos`` gives no
    derivative kick; the reference's derivative enters through the analytic
    ``ref_vel`` input (wire a zero to it for pure derivative-on-measurement).
    The output is realisable within one tick: it uses the current inputs and
    the state left by the previous update; ``update`` then advances the
    state (``I``, the last measurement and ``vf``).  At the first sample the
    measured velocity is taken as 0 (no kick from the initial position).
    In z-transform terms ``vf = (1 - a)/Ts (1 - z^-1)/(1 - a z^-1) meas_pos``.

    ``Ts`` is the block's sample time (graph rate and the block's ``rate``),
    set when the block is added to a graph.

    Ports
    -----
    ref_pos   : in, (1,), m        reference position
    ref_vel   : in, (1,), m/s      reference velocity (derivative and friction feed-forward)
    ref_acc   : in, (1,), m/s^2    reference acceleration (inertia feed-forward)
    meas_pos  : in, (1,), m        measured position
    meas_acc  : in, (1,), m/s^2    measured acceleration (only with accel_feedback)
    force_cmd : out, (1,), N       force command, saturated to +-limit (held)

    State: ``d = [I (m s), previous meas_pos (m), vf (m/s)]``, ``m[0]`` = 1
    once the block has seen a measurement.
    """

    inputs = {"ref_pos": In(1, unit="m", doc="reference position"),
              "ref_vel": In(1, unit="m/s", doc="reference velocity"),
              "ref_acc": In(1, unit="m/s^2", doc="reference acceleration"),
              "meas_pos": In(1, unit="m", doc="measured position")}
    outputs = {"force_cmd": Out(1, unit="N", doc="saturated force command")}
    params = {"kp": Live(0.0, unit="N/m", check=nonnegative, doc="proportional gain"),
              "ki": Live(0.0, unit="N/m/s", check=nonnegative, doc="integral gain"),
              "kd": Live(0.0, unit="N s/m", check=nonnegative, doc="derivative gain"),
              "deriv_cutoff": Live(200.0, unit="Hz", check=positive,
                                   doc="cut-off of the low-pass on the measured velocity"),
              "mass_ff": Live(0.0, unit="kg", check=nonnegative,
                              doc="inertia feed-forward: mass_ff * ref_acc"),
              "friction_ff": Live(0.0, unit="N", check=nonnegative,
                                  doc="Coulomb friction feed-forward amplitude"),
              "friction_smooth_vel": Live(1e-3, unit="m/s", check=positive,
                                          doc="velocity scale of tanh in the friction feed-forward"),
              "limit": Live(60.0, unit="N", check=positive, doc="output saturation"),
              "accel_feedback": Structural(False, kind="bool",
                                           doc="add the input meas_acc and the term "
                                               "ka (ref_acc - meas_acc) (seed 000)"),
              "ka": Live(0.0, unit="kg", check=nonnegative, doc="acceleration-feedback gain")}
    dstate = 6      # I, last measurement, vf; then u_unsat, e, vf of this sample (work)
    istate = 1

    def pack(self) -> np.ndarray:
        ts = self.sample_time
        a = math.exp(-2.0 * math.pi * self.deriv_cutoff * ts)
        ka = self.ka if self.accel_feedback else 0.0
        return np.array([self.kp, self.ki, self.kd, ts, a, (1.0 - a) / ts, self.mass_ff,
                         self.friction_ff, self.friction_smooth_vel, self.limit, ka])

    def configure(self) -> None:
        if self.accel_feedback:
            self.inputs = {**type(self).inputs,
                           "meas_acc": In(1, unit="m/s^2", doc="measured acceleration")}

    def kernels(self) -> dict:
        if self.accel_feedback:
            return {"output": PIDFeedforward._output_acc, "update": PIDFeedforward._update_acc}
        return super().kernels()

    @staticmethod
    @njit
    def output(t, x, d, m, p, ref_pos, ref_vel, ref_acc, meas_pos, force_cmd):
        force_cmd[0] = _pid_law(d, m, p, ref_pos[0], ref_vel[0], ref_acc[0], meas_pos[0], ref_acc[0])[0]

    @staticmethod
    @njit
    def update(t, x, d, m, p, ref_pos, ref_vel, ref_acc, meas_pos):
        _pid_update(d, m, p, meas_pos[0])

    @staticmethod
    @njit
    def _output_acc(t, x, d, m, p, ref_pos, ref_vel, ref_acc, meas_pos, meas_acc, force_cmd):
        force_cmd[0] = _pid_law(d, m, p, ref_pos[0], ref_vel[0], ref_acc[0], meas_pos[0],
                                meas_acc[0])[0]

    @staticmethod
    @njit
    def _update_acc(t, x, d, m, p, ref_pos, ref_vel, ref_acc, meas_pos, meas_acc):
        _pid_update(d, m, p, meas_pos[0])
