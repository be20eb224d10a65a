"""Discrete controllers (held blocks: outputs change only at their sample hits)."""
from __future__ import annotations

import math

from numba import njit

from hapflow.block import Block
from hapflow.names import Derived
from hapflow.params import Live, Structural, nonnegative, positive
from hapflow.ports import In, Out


@njit
def _pid_law(d, m, p, ref_pos, ref_vel, ref_acc, meas_pos, meas_acc):
    """Control law from the current inputs and the discrete state.

    Returns ``(u, u_unsat, e, vf)``: saturated and unsaturated force (N),
    position error (m), filtered measured velocity (m/s) of this sample.
    Also writes the work entries that ``update`` reads.
    """
    e = ref_pos - meas_pos
    if m[PID_M.seen] != 0:
        vf = p[PID.vel_pole] * d[PID_D.vel] + p[PID.vel_gain] * (meas_pos - d[PID_D.last_pos])
    else:
        vf = 0.0
    friction = p[PID.friction_ff] * math.tanh(ref_vel / p[PID.friction_smooth_vel])
    u_unsat = (p[PID.kp] * e + p[PID.ki] * d[PID_D.integral] + p[PID.kd] * (ref_vel - vf)
               + p[PID.mass_ff] * ref_acc + friction
               + p[PID.ka_used] * (ref_acc - meas_acc))
    u = min(max(u_unsat, -p[PID.limit]), p[PID.limit])
    d[PID_D.work_u] = u_unsat       # work entries for update (the engine calls output first)
    d[PID_D.work_e] = e
    d[PID_D.work_vel] = vf
    return u, u_unsat, e, vf


@njit
def _pid_update(d, m, p, meas_pos):
    """Advance the PID state from the work entries of this sample's output."""
    u_unsat, e, limit = d[PID_D.work_u], d[PID_D.work_e], p[PID.limit]
    windup = (u_unsat > limit and e > 0.0) or (u_unsat < -limit and e < 0.0)
    if not windup:
        d[PID_D.integral] += p[PID.period] * e
    d[PID_D.last_pos] = meas_pos
    d[PID_D.vel] = d[PID_D.work_vel]
    m[PID_M.seen] = 1


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

    State, by name: ``integral`` I (m s), ``last_pos`` the previous meas_pos
    (m), ``vel`` vf (m/s); ``seen`` = 1 once the block has seen a measurement.
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
    derived = {"period": Derived(lambda b: b.sample_time, unit="s", doc="sample time Ts"),
               "vel_pole": Derived(lambda b: _pole(b), doc="a = exp(-2 pi deriv_cutoff Ts)"),
               "vel_gain": Derived(lambda b: (1.0 - _pole(b)) / b.sample_time, unit="1/s",
                                   doc="(1 - a) / Ts"),
               "ka_used": Derived(lambda b: b.ka if b.accel_feedback else 0.0, unit="kg",
                                  doc="ka with accel_feedback, else 0")}
    # I, last measurement, vf; then u_unsat, e, vf of this sample (work entries)
    dstate = ("integral", "last_pos", "vel", "work_u", "work_e", "work_vel")
    istate = ("seen",)

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


def _pole(block: PIDFeedforward) -> float:
    """The matched pole of the measured-velocity low-pass."""
    return math.exp(-2.0 * math.pi * block.deriv_cutoff * block.sample_time)


PID, PID_D, PID_M = PIDFeedforward.P, PIDFeedforward.D, PIDFeedforward.M   # offsets by name
