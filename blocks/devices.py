"""Virtual devices rendered or probed by the rig (nonlinear lumped models, SI units)."""
from __future__ import annotations

import math

from numba import njit

from hapflow.block import Block
from hapflow.params import Live, nonnegative, positive
from hapflow.ports import In, Out

# indices into the parameter vector of HardeningSpringDevice
_M, _B, _KIN, _KOUT, _XT, _FC, _FV, _X0, _V0 = range(9)


@njit
def _device_force(x, v, p):
    """Spring + damper + smoothed Coulomb friction (N) at position x (m), velocity v (m/s)."""
    ax = abs(x)
    if ax <= p[_XT]:
        spring = p[_KIN] * x
    else:
        spring = math.copysign(p[_KIN] * p[_XT] + p[_KOUT] * (ax - p[_XT]), x)
    return spring + p[_B] * v + p[_FC] * math.tanh(v / p[_FV])


class HardeningSpringDevice(Block):
    """Mass on a hardening (two-rate) spring with a dashpot and smoothed Coulomb friction.

    A model of a spring-loaded device probed by the linear motor::

        m a = force - device_force
        device_force = F_s(x) + b v + F_c tanh(v / v_f)
        F_s(x) = k_inner x                                          for |x| <= x_t
               = sign(x) (k_inner x_t + k_outer (|x| - x_t))        for |x| >  x_t

    ``F_s`` is continuous and odd; its slope steps from ``k_inner`` to
    ``k_outer`` at ``|x| = x_t``.  Under a constant force ``F`` with
    ``|F| > k_inner x_t`` the device rests at
    ``x = sign(F) (x_t + (|F| - k_inner x_t) / k_outer)``.

    Ports
    -----
    force        : in, (1,), N        force applied by the motor, +x positive
    pos          : out, (1,), m       position (state only)
    vel          : out, (1,), m/s     velocity (state only)
    acc          : out, (1,), m/s^2   acceleration (feeds through from force)
    device_force : out, (1,), N       force the device pushes back with,
                                      spring + damper + friction, positive
                                      when it pushes towards -x (state only)
    """

    inputs = {"force": In(1, unit="N", doc="force applied by the motor")}
    outputs = {"pos": Out(1, unit="m", depends="state", doc="position"),
               "vel": Out(1, unit="m/s", depends="state", doc="velocity"),
               "acc": Out(1, unit="m/s^2", doc="acceleration"),
               "device_force": Out(1, unit="N", depends="state",
                                   doc="reaction force: spring + damper + friction")}
    params = {"mass": Live(0.581, unit="kg", check=positive, doc="moving mass"),
              "damping": Live(11.5, unit="N s/m", check=nonnegative, doc="viscous damping"),
              "k_inner": Live(1500.0, unit="N/m", check=nonnegative,
                              doc="spring rate for |x| <= x_transition"),
              "k_outer": Live(6000.0, unit="N/m", check=nonnegative,
                              doc="spring rate beyond x_transition"),
              "x_transition": Live(0.010, unit="m", check=positive,
                                   doc="|x| where the spring rate changes"),
              "friction": Live(0.3, unit="N", check=nonnegative, doc="Coulomb friction force"),
              "friction_vel": Live(1e-3, unit="m/s", check=positive,
                                   doc="velocity scale of the tanh friction smoothing"),
              "x0": Live(0.0, unit="m", doc="initial position"),
              "v0": Live(0.0, unit="m/s", doc="initial velocity")}
    cstate = 2
    position_states = (0,)

    def initial_state(self):
        x, d, m = super().initial_state()
        x[:] = self.x0, self.v0
        return x, d, m

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force, dx):
        dx[0] = x[1]
        dx[1] = (force[0] - _device_force(x[0], x[1], p)) / p[_M]

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, pos, vel, acc, device_force):
        fd = _device_force(x[0], x[1], p)
        pos[0] = x[0]
        vel[0] = x[1]
        acc[0] = (force[0] - fd) / p[_M]
        device_force[0] = fd
