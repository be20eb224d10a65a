"""Continuous-time linear blocks integrated by the global solver."""
from __future__ import annotations

from hapflow.block import Block
from hapflow.jit import njit
from hapflow.params import Live, Structural, at_least
from hapflow.ports import In, Out


class Integrator(Block):
    """Integrate a signal: ``dy/dt = u``, ``y(0) = initial``.

    Ports
    -----
    u : in, (n,), any unit
    y : out, (n,), ``unit`` (state only)
    """

    params = {"initial": Live(0.0, doc="initial value of y"),
              "size": Structural(1, kind="int", check=at_least(1), doc="number of elements"),
              "unit": Structural(None, kind="str", doc="unit of y (default: any)")}

    def configure(self) -> None:
        self.cstate = self.size
        self.inputs = {"u": In(self.size, doc="rate of change of y")}
        self.outputs = {"y": Out(self.size, unit=self.unit, depends="state", doc="integral")}

    initial_depends = ("initial",)

    def initial_state(self):
        x, d, m = super().initial_state()
        x[:] = self.values["initial"]
        return x, d, m

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, u, dx):
        for j in range(dx.size):
            dx[j] = u[j]

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        for j in range(y.size):
            y[j] = x[j]
