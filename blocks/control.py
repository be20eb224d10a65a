"""Discrete controllers (held blocks: outputs change only at their sample hits)."""
from __future__ import annotations

import math

from hapflow import kmath
from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, nonnegative, one_of, positive
from hapflow.ports import In, Out


@njit
def _unsaturated(p, e, integral, vel_error, ref_acc, friction, acc_error):
    """The command before saturation (N), its terms summed in one fixed order."""
    return (p[PID.kp] * e + p[PID.ki] * integral + p[PID.kd] * vel_error
            + p[PID.mass_ff] * ref_acc + friction + p[PID.ka_used] * acc_error)


# inlined (LLVM): with kmath's code inside, past LLVM's own size limit for inlining
@njit(forceinline=True)
def _pid_law(d, m, p, ref_pos, ref_vel, ref_acc, meas_pos, meas_acc):
    """Control law from the current inputs and the discrete state: the saturated force (N).

    Also writes the work entries that ``update`` reads: the integral of this
    sample, the integrator input and the filtered measured velocity.
    """
    e = ref_pos - meas_pos
    if m[PID_M.seen] != 0:
        vf = p[PID.vel_pole] * d[PID_D.vel] + p[PID.vel_gain] * (meas_pos - d[PID_D.last_pos])
    else:
        vf = 0.0
    friction = p[PID.friction_ff] * kmath.tanh(ref_vel / p[PID.friction_smooth_vel])
    vel_error, acc_error = ref_vel - vf, ref_acc - meas_acc
    w = e                                      # the integrator input
    integral = d[PID_D.integral] + p[PID.int_now] * w
    u_unsat = _unsaturated(p, e, integral, vel_error, ref_acc, friction, acc_error)
    limit, windup = p[PID.limit], p[PID.windup]
    if windup == CLAMPING:
        if (u_unsat > limit and e > 0.0) or (u_unsat < -limit and e < 0.0):
            w = 0.0
            integral = d[PID_D.integral]
            u_unsat = _unsaturated(p, e, integral, vel_error, ref_acc, friction, acc_error)
    elif windup == BACK_CALCULATION and abs(u_unsat) > limit:
        bound = math.copysign(limit, u_unsat)
        # w depends on u_unsat, which depends on w through the current-sample weight:
        # u = B + h (bound - u) with B the value above, solved for u
        h = p[PID.ki] * p[PID.int_now] * p[PID.back_gain]
        u_unsat = (u_unsat + h * bound) / (1.0 + h)
        w = e + p[PID.back_gain] * (bound - u_unsat)
        integral = d[PID_D.integral] + p[PID.int_now] * w
    d[PID_D.work_integral] = integral   # work entries for update (the engine calls output first)
    d[PID_D.work_input] = w
    d[PID_D.work_vel] = vf
    return min(max(u_unsat, -limit), limit)


@njit
def _pid_update(d, m, p, meas_pos):
    """Advance the PID state from the work entries of this sample's output."""
    d[PID_D.integral] = d[PID_D.work_integral] + p[PID.int_next] * d[PID_D.work_input]
    d[PID_D.last_pos] = meas_pos
    d[PID_D.vel] = d[PID_D.work_vel]
    m[PID_M.seen] = 1


METHODS = ("forward_euler", "backward_euler", "trapezoidal")
"""Discretisations of the integrator and of the derivative filter."""
NONE, CLAMPING, BACK_CALCULATION = 0.0, 1.0, 2.0
WINDUP = {"none": NONE, "clamping": CLAMPING, "back_calculation": BACK_CALCULATION}
"""Anti-windup modes and the codes the kernel reads."""


class PIDFeedforward(Block):
    """Discrete PID position controller with inertia and friction feed-forward.

    A held block: it has an ``update`` kernel and no continuous state, so its
    output is computed at its sample hits and held (zero-order hold) in
    between and during solver stages.  At sample ``k`` (``Ts`` the sample
    time, ``N = 2 pi deriv_cutoff``)::

        e[k]    = ref_pos[k] - meas_pos[k]
        vf[k]   = a vf[k-1] + (1 - a) (meas_pos[k] - meas_pos[k-1]) / Ts
        u[k]    = kp e[k] + ki I[k] + kd (ref_vel[k] - vf[k])
                  + mass_ff ref_acc[k] + friction_ff tanh(ref_vel[k] / friction_smooth_vel)
                  + ka (ref_acc[k] - meas_acc[k])      (with accel_feedback)
        force_cmd[k] = clip(u[k], -limit, limit)

    The integral ``I`` of the integrator input ``w`` (``w = e`` unless
    anti-windup acts) by the method ``integrator`` (Simulink's names: its
    discrete ``Ts/(z-1)``, ``Ts z/(z-1)``, ``Ts/2 (z+1)/(z-1)``)::

        forward_euler   I[k] = I[k-1] + Ts w[k-1]                  (default)
        backward_euler  I[k] = I[k-1] + Ts w[k]                    (the current error counts)
        trapezoidal     I[k] = I[k-1] + Ts/2 (w[k] + w[k-1]),  w[-1] = 0

    Anti-windup ``anti_windup`` (``u_s = clip(u)``)::

        none              w[k] = e[k]
        clamping          w[k] = 0 while u[k] is saturated and e[k] has the sign of the
                          saturation, else e[k]   (conditional integration; default)
        back_calculation  w[k] = e[k] + kb / ki (u_s[k] - u[k])

    ``u[k]`` depends on ``w[k]`` when the method counts the current sample:
    clamping then decides on ``u[k]`` computed with ``w[k] = e[k]``, and
    back-calculation solves the linear equation for ``u[k]`` exactly.  With
    ``ki = 0`` back-calculation integrates ``e``.

    The derivative term differentiates the *measurement* only: ``vf`` is
    ``N s / (s + N)`` applied to ``meas_pos``, discretised by ``deriv_filter``,
    each a pole ``a`` with unity gain at DC::

        matched         a = exp(-N Ts)      (default; pole matched, zero at z = 1)
        forward_euler   a = 1 - N Ts        (s -> (z - 1) / Ts; needs N Ts < 2)
        backward_euler  a = 1 / (1 + N Ts)  (s -> (z - 1) / (Ts z))
        trapezoidal     a = (2 - N Ts) / (2 + N Ts)   (s -> 2/Ts (z - 1)/(z + 1))

    The reference is never differentiated numerically, so a step in
    ``ref_pos`` gives no derivative kick; its derivative enters through the
    analytic ``ref_vel`` input.  ``ref_vel`` and ``ref_acc`` are optional:
    left unwired they read 0 (a pure position loop with derivative on the
    measurement).  The output is realisable within one tick: it uses the
    current inputs and the state left by the previous update; ``update`` then
    advances the state.  At the first sample the measured velocity is taken
    as 0 (no kick from the initial position).

    ``Ts`` is the block's sample time (graph rate and the block's ``rate``),
    set when the block is added to a graph.

    Ports
    -----
    ref_pos   : in, (1,), m        reference position
    ref_vel   : in, (1,), m/s      reference velocity (derivative and friction feed-forward; optional, 0)
    ref_acc   : in, (1,), m/s^2    reference acceleration (inertia feed-forward; optional, 0)
    meas_pos  : in, (1,), m        measured position
    meas_acc  : in, (1,), m/s^2    measured acceleration (only with accel_feedback)
    force_cmd : out, (1,), N       force command, saturated to +-limit (held)

    State, by name: ``integral`` the integrator state (m s: ``I[k]`` plus
    what the method adds of ``w[k]`` before the next sample), ``last_pos``
    the previous meas_pos (m), ``vel`` vf (m/s); ``seen`` = 1 once the block
    has seen a measurement.
    """

    inputs = {"ref_pos": In(1, unit="m", doc="reference position"),
              "ref_vel": In(1, unit="m/s", optional=True, doc="reference velocity"),
              "ref_acc": In(1, unit="m/s^2", optional=True, doc="reference acceleration"),
              "meas_pos": In(1, unit="m", doc="measured position")}
    outputs = {"force_cmd": Out(1, unit="N", doc="saturated force command")}
    params = {"kp": Live(0.0, unit="N/m", check=nonnegative, doc="proportional gain"),
              "ki": Live(0.0, unit="N/m/s", check=nonnegative, doc="integral gain"),
              "kd": Live(0.0, unit="N s/m", check=nonnegative, doc="derivative gain"),
              "deriv_cutoff": Live(200.0, unit="Hz", check=positive,
                                   doc="cut-off N / (2 pi) of the low-pass on the measured velocity"),
              "mass_ff": Live(0.0, unit="kg", check=nonnegative,
                              doc="inertia feed-forward: mass_ff * ref_acc"),
              "friction_ff": Live(0.0, unit="N", check=nonnegative,
                                  doc="Coulomb friction feed-forward amplitude"),
              "friction_smooth_vel": Live(1e-3, unit="m/s", check=positive,
                                          doc="velocity scale of tanh in the friction feed-forward"),
              "limit": Live(60.0, unit="N", check=positive, doc="output saturation"),
              "kb": Live(1.0, unit="1/s", check=nonnegative,
                         doc="back-calculation gain (anti_windup: back_calculation)"),
              "integrator": Structural("forward_euler", kind="str", check=one_of(*METHODS),
                                       doc="integrator discretisation"),
              "deriv_filter": Structural("matched", kind="str",
                                         check=one_of("matched", *METHODS),
                                         doc="derivative filter discretisation"),
              "anti_windup": Structural("clamping", kind="str", check=one_of(*WINDUP),
                                        doc="anti-windup: none, clamping or back_calculation"),
              "accel_feedback": Structural(False, kind="bool",
                                           doc="add the input meas_acc and the term "
                                               "ka (ref_acc - meas_acc) (seed 000)"),
              "ka": Live(0.0, unit="kg", check=nonnegative, doc="acceleration-feedback gain")}
    derived = {"int_now": Derived(lambda b: INTEGRATOR[b.integrator][0] * b.sample_time,
                                  unit="s", doc="weight of w[k] in I[k]"),
               "int_next": Derived(lambda b: INTEGRATOR[b.integrator][1] * b.sample_time,
                                   unit="s", doc="weight of w[k] in I[k+1]"),
               "windup": Derived(lambda b: WINDUP[b.anti_windup], doc="anti-windup mode code"),
               "back_gain": Derived(lambda b: b.kb / b.ki if b.ki > 0.0 else 0.0, unit="m/N",
                                    doc="kb / ki (0 when ki = 0)"),
               "vel_pole": Derived(lambda b: _pole(b), doc="pole a of the velocity filter"),
               "vel_gain": Derived(lambda b: (1.0 - _pole(b)) / b.sample_time, unit="1/s",
                                   doc="(1 - a) / Ts"),
               "ka_used": Derived(lambda b: b.ka if b.accel_feedback else 0.0, unit="kg",
                                  doc="ka with accel_feedback, else 0")}
    # integrator state, last measurement, vf; then I[k], w[k], vf of this sample (work entries)
    dstate = ("integral", "last_pos", "vel", "work_integral", "work_input", "work_vel")
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
        force_cmd[0] = _pid_law(d, m, p, ref_pos[0], ref_vel[0], ref_acc[0], meas_pos[0], ref_acc[0])

    @staticmethod
    @njit
    def update(t, x, d, m, p, ref_pos, ref_vel, ref_acc, meas_pos):
        _pid_update(d, m, p, meas_pos[0])

    @staticmethod
    @njit
    def _output_acc(t, x, d, m, p, ref_pos, ref_vel, ref_acc, meas_pos, meas_acc, force_cmd):
        force_cmd[0] = _pid_law(d, m, p, ref_pos[0], ref_vel[0], ref_acc[0], meas_pos[0],
                                meas_acc[0])

    @staticmethod
    @njit
    def _update_acc(t, x, d, m, p, ref_pos, ref_vel, ref_acc, meas_pos, meas_acc):
        _pid_update(d, m, p, meas_pos[0])


INTEGRATOR = {"forward_euler": (0.0, 1.0), "backward_euler": (1.0, 0.0),
              "trapezoidal": (0.5, 0.5)}
"""Weights, in sample times, of the integrator input w[k] in I[k] and in I[k+1]."""


def _pole(block: PIDFeedforward) -> float:
    """The pole of the measured-velocity low-pass for the block's ``deriv_filter``."""
    nts = 2.0 * math.pi * block.deriv_cutoff * block.sample_time
    if block.deriv_filter == "forward_euler" and nts >= 2.0:
        raise ParamError("deriv_cutoff", f"parameter 'deriv_cutoff' ({block.deriv_cutoff:g} Hz) "
                         "makes the forward-Euler derivative filter unstable at this rate: it "
                         f"must be below 1 / (pi Ts) = {1.0 / (math.pi * block.sample_time):g} "
                         "Hz, or choose deriv_filter backward_euler, trapezoidal or matched")
    return {"matched": math.exp(-nts), "forward_euler": 1.0 - nts,
            "backward_euler": 1.0 / (1.0 + nts),
            "trapezoidal": (2.0 - nts) / (2.0 + nts)}[block.deriv_filter]


PID, PID_D, PID_M = PIDFeedforward.P, PIDFeedforward.D, PIDFeedforward.M   # offsets by name
