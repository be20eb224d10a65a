"""Memoryless arithmetic: gain, sum, product, saturation (direct feedthrough)."""
from __future__ import annotations

from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, at_least
from hapflow.ports import In, Out

_SIZE = Structural(1, kind="int", check=at_least(1), doc="number of elements of each signal")


def _signs(text: str, allowed: str) -> str | None:
    if len(text) < 1 or any(c not in allowed for c in text):
        return f"must be a string of {' and '.join(repr(c) for c in allowed)}, one per input"
    return None


class Gain(Block):
    """Scale a signal: ``y = gain * u``.

    Ports
    -----
    u : in, (n,), any unit
    y : out, (n,), ``unit`` (default: the unit of u)
    """

    params = {"gain": Live(1.0, doc="gain"),
              "size": _SIZE,
              "unit": Structural("=u", kind="str", doc="unit of y (default: that of u)")}

    def configure(self) -> None:
        self.inputs = {"u": In(self.size, doc="input")}
        self.outputs = {"y": Out(self.size, unit=self.unit, doc="gain * u")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        for j in range(y.size):
            y[j] = p[GAIN.gain] * u[j]


class Sum(Block):
    """Add and subtract signals: ``y = s1 u1 + s2 u2 + ...`` with signs from ``signs``.

    Ports
    -----
    u1, u2, ... : in, (n,), any unit; u2, ... must have the unit of u1 (one input per sign)
    y           : out, (n,), unit of u1
    """

    params = {"signs": Structural("++", kind="str", check=lambda s: _signs(s, "+-"),
                                  doc="one '+' or '-' per input, e.g. '+-'"),
              "size": _SIZE}

    def configure(self) -> None:
        self.inputs = {f"u{k + 1}": In(self.size, unit=None if k == 0 else "=u1",
                                       doc=f"input {k + 1} ({s}), in the unit of u1")
                       for k, s in enumerate(self.signs)}
        self.outputs = {"y": Out(self.size, unit="=u1", doc="signed sum")}

    derived = {"weights": Derived(lambda b: [1.0 if s == "+" else -1.0 for s in b.signs],
                                  size=None, doc="+1 or -1 per input")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, *ports):
        y = ports[-1]
        for j in range(y.size):
            acc = 0.0
            for k in range(len(ports) - 1):
                acc += p[SUM.weights + k] * ports[k][j]
            y[j] = acc


class Product(Block):
    """Multiply and divide signals element-wise: ``ops='**/'`` gives ``u1 * u2 / u3``.

    Ports
    -----
    u1, u2, ... : in, (n,), any unit (one input per operator)
    y           : out, (n,), ``unit``
    """

    params = {"ops": Structural("**", kind="str", check=lambda s: _signs(s, "*/"),
                                doc="one '*' or '/' per input"),
              "size": _SIZE,
              "unit": Structural(None, kind="str", doc="unit of y (default: any)")}

    def configure(self) -> None:
        self.inputs = {f"u{k + 1}": In(self.size, doc=f"input {k + 1} ({s})")
                       for k, s in enumerate(self.ops)}
        self.outputs = {"y": Out(self.size, unit=self.unit, doc="product")}

    derived = {"powers": Derived(lambda b: [1.0 if s == "*" else -1.0 for s in b.ops],
                                 size=None, doc="+1 (multiply) or -1 (divide) per input")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, *ports):
        y = ports[-1]
        for j in range(y.size):
            acc = 1.0
            for k in range(len(ports) - 1):
                if p[PRODUCT.powers + k] > 0.0:
                    acc *= ports[k][j]
                else:
                    acc /= ports[k][j]
            y[j] = acc


class Saturation(Block):
    """Clip a signal to ``[lower, upper]``.

    Ports
    -----
    u : in, (n,), any unit
    y : out, (n,), unit of u
    """

    params = {"lower": Live(-1.0, doc="lower limit, in the unit of u"),
              "upper": Live(1.0, doc="upper limit, in the unit of u"),
              "size": _SIZE}

    def configure(self) -> None:
        self.inputs = {"u": In(self.size, doc="input")}
        self.outputs = {"y": Out(self.size, unit="=u", doc="clipped input")}

    def validate(self, changed: str | None) -> None:
        if self.lower > self.upper:       # set() moves one limit at a time: move them in order
            raise ParamError(changed or "lower", f"parameter 'lower' ({self.lower}) must be "
                                                 f"<= 'upper' ({self.upper})")

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        for j in range(y.size):
            y[j] = min(max(u[j], p[SATURATION.lower]), p[SATURATION.upper])


GAIN, SATURATION = Gain.P, Saturation.P       # the offsets their kernels name
SUM, PRODUCT = Sum.P, Product.P
