"""Discrete-time blocks: unit delay and discrete transfer function (held outputs)."""
from __future__ import annotations

import numpy as np

from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, at_least
from hapflow.ports import In, Out


class UnitDelay(Block):
    """Delay a signal by one sample of the block's rate: ``y[k] = u[k-1]``.

    Its output depends on state only, so it breaks algebraic loops.

    Ports
    -----
    u : in, (n,), any unit
    y : out, (n,), unit of u (state only)
    """

    params = {"initial": Live(0.0, doc="output before the first update"),
              "size": Structural(1, kind="int", check=at_least(1), doc="number of elements")}

    def configure(self) -> None:
        self.dstate = self.size
        self.inputs = {"u": In(self.size, doc="input")}
        self.outputs = {"y": Out(self.size, unit="=u", depends="state", doc="input one sample ago")}

    initial_depends = ("initial",)

    def initial_state(self):
        x, d, m = super().initial_state()
        d[:] = self.values["initial"]
        return x, d, m

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        for j in range(y.size):
            y[j] = d[j]

    @staticmethod
    @njit
    def update(t, x, d, m, p, u):
        for j in range(u.size):
            d[j] = u[j]


class TransferFunction(Block):
    """Discrete transfer function ``Y(z)/U(z) = num(z)/den(z)`` at the block's rate.

    Coefficients are in descending powers of z (as ``scipy.signal.dlti``);
    realised in direct form II transposed.  The output feeds through from u
    only when the transfer function is biproper (``len(num) == len(den)``).

    Ports
    -----
    u : in, (1,), any unit
    y : out, (1,), ``unit`` (default: unit of u)
    """

    params = {"num": Structural(kind="floats", doc="numerator coefficients"),
              "den": Structural(kind="floats", doc="denominator coefficients"),
              "unit": Structural("=u", kind="str", doc="unit of y (default: that of u)")}

    def configure(self) -> None:
        num, den = self.num, self.den
        if den[0] == 0.0:
            raise ParamError("den", "parameter 'den' must have a non-zero leading coefficient")
        if len(num) > len(den):
            raise ParamError("num", f"parameter 'num' has degree {len(num) - 1} > degree "
                                    f"{len(den) - 1} of 'den': the system would be non-causal")
        self.dstate = len(den) - 1
        biproper = len(num) == len(den) and num[0] != 0.0
        self.inputs = {"u": In(1, doc="input")}
        self.outputs = {"y": Out(1, unit=self.unit, depends=None if biproper else "state",
                                 doc="filtered input")}

    derived = {"coefficients": Derived(lambda b: b.normalised(), size=None,
                                       doc="b0 .. bn, then a0 = 1, a1 .. an")}

    def normalised(self) -> np.ndarray:
        """``[b0 .. bn, a0 .. an]``: numerator padded to the denominator's length, both
        divided by ``den[0]``."""
        den = np.asarray(self.den) / self.den[0]
        num = np.zeros(len(den))
        num[len(den) - len(self.num):] = np.asarray(self.num) / self.den[0]
        return np.concatenate([num, den])

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        y[0] = p[TF.coefficients] * u[0] + (d[0] if d.size else 0.0)

    @staticmethod
    @njit
    def update(t, x, d, m, p, u):
        n = d.size
        b, a = TF.coefficients, TF.coefficients + n + 1    # where b0 and a0 are
        yk = p[b] * u[0] + (d[0] if n else 0.0)
        for j in range(n - 1):
            d[j] = d[j + 1] + p[b + j + 1] * u[0] - p[a + j + 1] * yk
        if n:
            d[n - 1] = p[b + n] * u[0] - p[a + n] * yk


TF = TransferFunction.P     # offsets by name
