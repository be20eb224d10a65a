"""Lumped mechanical devices with continuous state (SI units)."""
from __future__ import annotations

from hapflow.block import Block
from hapflow.jit import njit
from hapflow.params import Live, between, nonnegative, positive
from hapflow.ports import In, Out


class MassSpringDamper(Block):
    """Linear mass-spring-damper driven by a force: ``m a = F - b v - k x``.

    Ports
    -----
    force : in, (1,), N        applied force
    pos   : out, (1,), m       position (state only)
    vel   : out, (1,), m/s     velocity (state only)
    acc   : out, (1,), m/s^2   acceleration (feeds through from force)
    """

    inputs = {"force": In(1, unit="N", doc="applied force")}
    outputs = {"pos": Out(1, unit="m", depends="state", doc="position"),
               "vel": Out(1, unit="m/s", depends="state", doc="velocity"),
               "acc": Out(1, unit="m/s^2", doc="acceleration")}
    params = {"mass": Live(1.0, unit="kg", check=positive, doc="moving mass"),
              "damping": Live(0.0, unit="N s/m", check=nonnegative, doc="viscous damping"),
              "stiffness": Live(0.0, unit="N/m", check=nonnegative, doc="spring rate"),
              "x0": Live(0.0, unit="m", doc="initial position"),
              "v0": Live(0.0, unit="m/s", doc="initial velocity")}
    cstate = ("pos", "vel")
    initial_from = {"pos": "x0", "vel": "v0"}
    position_states = (0,)

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force, dx):
        pos, vel = x[MSD_X.pos], x[MSD_X.vel]
        dx[MSD_X.pos] = vel
        dx[MSD_X.vel] = (force[0] - p[MSD.damping] * vel - p[MSD.stiffness] * pos) / p[MSD.mass]

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, pos, vel, acc):
        pos[0] = x[MSD_X.pos]
        vel[0] = x[MSD_X.vel]
        acc[0] = (force[0] - p[MSD.damping] * vel[0] - p[MSD.stiffness] * pos[0]) / p[MSD.mass]


class BouncingBall(Block):
    """Ball falling onto a fixed floor at height 0 with a coefficient of restitution.

    Flight: ``h'' = -g``.  Impact (guard ``h`` crossing zero downwards):
    ``v+ = -e v-``.  Event location in the solver puts each impact at its
    exact time within the tick.

    Ports
    -----
    height  : out, (1,), m       height above the floor (state only)
    vel     : out, (1,), m/s     vertical velocity, up positive (state only)
    bounces : out, (1,), i8, count   number of impacts so far (state only)
    impact_time : out, (1,), s   time of the latest impact, located inside its tick
    """

    outputs = {"height": Out(1, unit="m", depends="state", doc="height above the floor"),
               "vel": Out(1, unit="m/s", depends="state", doc="vertical velocity"),
               "bounces": Out(1, dtype="i8", unit="count", depends="state", doc="impacts so far"),
               "impact_time": Out(1, unit="s", depends="state", doc="time of the latest impact")}
    params = {"restitution": Live(0.8, check=between(0.0, 1.0), doc="coefficient of restitution"),
              "gravity": Live(9.81, unit="m/s^2", check=positive, doc="gravitational acceleration"),
              "h0": Live(1.0, unit="m", check=nonnegative, doc="initial height"),
              "v0": Live(0.0, unit="m/s", doc="initial velocity")}
    cstate = ("height", "vel")
    dstate = ("impact_time",)
    istate = ("bounces",)
    nguards = 1
    initial_from = {"height": "h0", "vel": "v0"}
    position_states = (0,)

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, dx):
        dx[BALL_X.height] = x[BALL_X.vel]
        dx[BALL_X.vel] = -p[BALL.gravity]

    @staticmethod
    @njit
    def output(t, x, d, m, p, height, vel, bounces, impact_time):
        height[0] = x[BALL_X.height]
        vel[0] = x[BALL_X.vel]
        bounces[0] = m[BALL_M.bounces]
        impact_time[0] = d[BALL_D.impact_time]

    @staticmethod
    @njit
    def guard(t, x, d, m, p, g):
        g[0] = x[BALL_X.height]

    @staticmethod
    @njit
    def reset(t, x, d, m, p, k):
        x[BALL_X.height] = 0.0
        x[BALL_X.vel] = -p[BALL.restitution] * x[BALL_X.vel]
        m[BALL_M.bounces] += 1
        d[BALL_D.impact_time] = t


# the offsets their kernels name
MSD, MSD_X = MassSpringDamper.P, MassSpringDamper.X
BALL, BALL_X, BALL_D, BALL_M = BouncingBall.P, BouncingBall.X, BouncingBall.D, BouncingBall.M
