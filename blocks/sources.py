"""Signal sources: functions of time only (no inputs)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from hapflow.block import Block, ParamError
from hapflow.params import Live, Structural, nonnegative, one_of, positive
from hapflow.ports import Out

_UNIT = Structural(None, kind="str", doc="unit of the output (default: any)")


def _unit_outputs(block: Block, derivatives: bool) -> None:
    """Set the output unit(s) from the block's ``unit`` parameter."""
    unit = block.values["unit"]
    block.outputs = {"y": Out(1, unit=unit, depends="state", doc="value")}
    if derivatives:
        block.outputs["dy"] = Out(1, unit=None if unit is None else f"{unit}/s",
                                  depends="state", doc="first time derivative")
        block.outputs["ddy"] = Out(1, unit=None if unit is None else f"{unit}/s^2",
                                   depends="state", doc="second time derivative")


class Constant(Block):
    """Constant value.

    Ports
    -----
    y : out, (n,), unit    the value (n = number of values)
    """

    params = {"value": Live((0.0,), kind="floats", doc="value(s)"), "unit": _UNIT}

    def configure(self) -> None:
        self.outputs = {"y": Out(len(self.value), unit=self.unit, depends="state", doc="the value")}

    def set(self, name: str, value: object) -> None:
        """Change a live parameter; ``value`` must keep its number of elements.

        Raises
        ------
        ParamError
            As :meth:`Block.set`, or if the new ``value`` has another length
            (the output size is baked in; the old value is kept).
        """
        size = self.outputs["y"].size
        old = self.values.get(name)
        super().set(name, value)
        if name == "value" and len(self.value) != size:
            got = len(self.value)
            self.values[name] = old
            raise ParamError(name, f"parameter 'value' must keep its {size} element(s), got "
                                   f"{got}: the output size is fixed when the block is "
                                   "built, so rebuild the graph to change it")

    @staticmethod
    @njit
    def output(t, x, d, m, p, y):
        for j in range(y.size):
            y[j] = p[j]


class Step(Block):
    """Step from ``initial`` to ``final`` at ``time``.

    Ports
    -----
    y : out, (1,), unit    ``initial`` for t < time, ``final`` for t >= time
    """

    params = {"time": Live(0.0, unit="s", check=nonnegative, doc="step time"),
              "initial": Live(0.0, doc="value before the step"),
              "final": Live(1.0, doc="value from the step on"),
              "unit": _UNIT}

    def configure(self) -> None:
        _unit_outputs(self, derivatives=False)

    @staticmethod
    @njit
    def output(t, x, d, m, p, y):
        y[0] = p[2] if t >= p[0] else p[1]


class Sine(Block):
    """Sinusoid ``y = offset + amplitude sin(2 pi f t + phase)`` with analytic derivatives.

    Ports
    -----
    y   : out, (1,), unit        value
    dy  : out, (1,), unit/s      first derivative (for feed-forward)
    ddy : out, (1,), unit/s^2    second derivative
    """

    params = {"amplitude": Live(1.0, doc="amplitude, in the output unit"),
              "frequency": Live(1.0, unit="Hz", check=nonnegative, doc="frequency"),
              "phase": Live(0.0, unit="rad", doc="phase at t = 0"),
              "offset": Live(0.0, doc="constant added, in the output unit"),
              "unit": _UNIT}

    def configure(self) -> None:
        _unit_outputs(self, derivatives=True)

    def pack(self) -> np.ndarray:
        return np.array([self.amplitude, 2.0 * math.pi * self.frequency, self.phase, self.offset])

    @staticmethod
    @njit
    def output(t, x, d, m, p, y, dy, ddy):
        a, w = p[0], p[1]
        s = math.sin(w * t + p[2])
        c = math.cos(w * t + p[2])
        y[0] = p[3] + a * s
        dy[0] = a * w * c
        ddy[0] = -a * w * w * s


class Chirp(Block):
    """Swept sine of constant amplitude from ``f_start`` to ``f_end`` over ``sweep_time``.

    The instantaneous frequency rises linearly or logarithmically; after
    ``sweep_time`` the sine continues at ``f_end`` with continuous phase.
    Derivatives are analytic.

    Ports
    -----
    y   : out, (1,), unit        value
    dy  : out, (1,), unit/s      first derivative
    ddy : out, (1,), unit/s^2    second derivative
    """

    params = {"amplitude": Live(1.0, doc="amplitude, in the output unit"),
              "f_start": Live(1.0, unit="Hz", check=positive, doc="start frequency"),
              "f_end": Live(10.0, unit="Hz", check=positive, doc="end frequency"),
              "sweep_time": Live(10.0, unit="s", check=positive, doc="duration of the sweep"),
              "method": Structural("linear", kind="str", check=one_of("linear", "log"),
                                   doc="frequency law: linear or log"),
              "unit": _UNIT}

    def configure(self) -> None:
        _unit_outputs(self, derivatives=True)

    def pack(self) -> np.ndarray:
        log = 1.0 if self.method == "log" else 0.0
        return np.array([self.amplitude, self.f_start, self.f_end, self.sweep_time, log])

    @staticmethod
    @njit
    def output(t, x, d, m, p, y, dy, ddy):
        a, f0, f1, T = p[0], p[1], p[2], p[3]
        tau = min(t, T)
        if p[4] == 0.0:
            k = (f1 - f0) / T
            phase = 2.0 * math.pi * (f0 * tau + 0.5 * k * tau * tau)
            f = f0 + k * tau
            df = k
        else:
            r = math.log(f1 / f0) / T
            phase = 2.0 * math.pi * f0 * math.expm1(r * tau) / r if r != 0.0 else 2.0 * math.pi * f0 * tau
            f = f0 * math.exp(r * tau)
            df = f * r
        if t > T:
            phase += 2.0 * math.pi * f1 * (t - T)
            df = 0.0
        w = 2.0 * math.pi * f
        s = math.sin(phase)
        c = math.cos(phase)
        y[0] = a * s
        dy[0] = a * w * c
        ddy[0] = -a * w * w * s + a * 2.0 * math.pi * df * c
