"""Online exponentially weighted least squares (EWLS) of impedance parameters.

The recursive update of Colton & Hollerbach 2005 (see :mod:`hapflow.ident.ewls`
for the method and the offline fit over position-sorted data) is **one**
``@njit`` function, :func:`ewls_step`, acting in place on a flat state vector;
the ``EWLS`` block and the offline pipeline both call it, so an online
estimate equals the offline one bit for bit.  State layout for ``n``
regressors (size ``n^2 + 3 n``)::

    s[0 : n]                  theta (scaled)
    s[n : n + n^2]            P, row-major
    s[n + n^2 : 2n + n^2]     phi (raw regressor values, written by the caller)
    s[2n + n^2 : 3n + n^2]    work (g = P phi, scaled)
"""
from __future__ import annotations

import numpy as np

from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, nonnegative, one_of, positive
from hapflow.ports import In, Out

_ARRAY = dict(kind="floats")


def state_size(n: int) -> int:
    """Length of the EWLS state vector for ``n`` regressors."""
    return n * n + 3 * n


def initial_state(n: int, p0: float) -> np.ndarray:
    """State with ``theta = 0`` and ``P = p0 I``."""
    s = np.zeros(state_size(n))
    for i in range(n):
        s[n + i * n + i] = p0
    return s


@njit(cache=True)
def ewls_step(s, n, y, lam, p0, sc, sc0):
    """One EWLS update in place; returns the a-priori prediction error (N).

    Parameters
    ----------
    s : float64[n^2 + 3n]
        State (layout in the module docstring); ``s[n+n^2 : 2n+n^2]`` must hold
        the raw regressor values of this sample.
    n : int
        Number of regressors.
    y : float
        Measured force, N.
    lam : float
        Forgetting factor, 0 < lam <= 1.
    p0 : float
        Initial covariance (for the wind-up guard: trace(P) <= n p0).
    sc : float64 array
        Holds the regressor scales at ``sc[sc0 : sc0 + n]``.
    sc0 : int
        Offset of the scales in ``sc``.
    """
    ip = n
    iphi = n + n * n
    ig = iphi + n
    # scaled regressors in place of the raw values; g = P phi; prediction
    for j in range(n):
        s[iphi + j] = s[iphi + j] / sc[sc0 + j]
    denom = lam
    pred = 0.0
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += s[ip + i * n + j] * s[iphi + j]
        s[ig + i] = acc
        denom += s[iphi + i] * acc
        pred += s[iphi + i] * s[i]
    e = y - pred
    for i in range(n):
        s[i] += s[ig + i] / denom * e
    trace = 0.0
    for i in range(n):
        for j in range(n):
            s[ip + i * n + j] -= s[ig + i] * s[ig + j] / denom
        trace += s[ip + i * n + i]
    if trace * (1.0 / lam) <= n * p0:
        inv = 1.0 / lam
        for k in range(n * n):
            s[ip + k] *= inv
    return e


@njit(cache=True)
def ewls_parameter(s, j, sc, sc0):
    """Parameter ``j`` in SI units: ``theta_j / scale_j``."""
    return s[j] / sc[sc0 + j]


_INPUT_OF = {"a": ("acc", "m/s^2", "acceleration (regressor of the mass)"),
             "v": ("vel", "m/s", "velocity (regressor of the damping)"),
             "x": ("pos", "m", "position (regressor of the stiffness)")}
_OUTPUT_OF = {"a": ("mass", "kg", "mass estimate m"),
              "v": ("damping", "N s/m", "damping estimate b"),
              "x": ("stiffness", "N/m", "stiffness estimate k"),
              "1": ("offset", "N", "force offset estimate F0")}
_DIRECTIONS = {"both": 0.0, "positive": 1.0, "negative": -1.0}
def _regressors(text: str) -> str | None:
    items = text.replace(",", "").replace(" ", "")
    if not items or any(c not in "avx1" for c in items) or len(set(items)) != len(items):
        return "must be a non-empty subset of 'avx1' (e.g. 'avx1' or 'x1')"
    return None


class EWLS(Block):
    """Online exponentially weighted least squares: impedance parameters from streaming data.

    Each sample hit feeds one sample to the EWLS update of Colton &
    Hollerbach 2005 (:func:`ewls_step`; the same ``@njit`` function the
    offline pipeline :mod:`hapflow.ident.ewls` uses, so the estimates are identical)::

        phi = [acc vel pos 1] / scales   (the chosen ``regressors``)
        e = force - phi . theta;  g = P phi;  theta += g e / (lambda + phi . g)
        P = (P - g g^T / (lambda + phi . g)) / lambda

    starting from ``theta = 0``, ``P = p0 I``.  With ``direction`` positive
    (negative) only samples with ``vel > deadband`` (``vel < -deadband``) are
    used, so two blocks can estimate the two directions of the locally linear
    model; the ``vel`` input is then present even when velocity is not a
    regressor.  A held block: the estimates change at its sample hits and
    depend on state only (the output at a tick shows the estimate after the
    previous samples).

    Ports
    -----
    acc       : in, (1,), m/s^2     acceleration (when 'a' is a regressor)
    vel       : in, (1,), m/s       velocity (when 'v' is a regressor or direction gating is on)
    pos       : in, (1,), m         position (when 'x' is a regressor)
    force     : in, (1,), N         measured force
    mass      : out, (1,), kg       m estimate (when 'a' is a regressor; state only)
    damping   : out, (1,), N s/m    b estimate (when 'v'; state only)
    stiffness : out, (1,), N/m      k estimate (when 'x'; state only)
    offset    : out, (1,), N        F0 estimate (when '1'; state only)
    error     : out, (1,), N        a-priori prediction error of the last update (state only)
    """

    params = {
        "regressors": Structural("avx1", kind="str", check=_regressors,
                                 doc="regressors: a subset of 'avx1' (acc, vel, pos, constant)"),
        "direction": Structural("both", kind="str", check=one_of(*_DIRECTIONS),
                                doc="use samples of one direction only: both, positive, negative"),
        "forgetting": Live(0.999, check=lambda v: None if 0.0 < v <= 1.0 else "must be in (0, 1]",
                           doc="forgetting factor lambda (window ~ 1 / (1 - lambda) samples)"),
        "p0": Live(1e6, unit="N^2", check=positive,
                   doc="initial covariance P(0) = p0 I, in scaled units (also the wind-up bound)"),
        "deadband": Live(5e-3, unit="m/s", check=nonnegative,
                         doc="velocity dead band of the direction gate"),
        "scales": Live(None, **_ARRAY,
                       doc="regressor scales, one per regressor in 'avx1' order (default 1)"),
    }

    derived = {
        "gate": Derived(lambda b: _DIRECTIONS[b.direction],
                        doc="direction gate: 0 both, +1 positive, -1 negative"),
        "count": Derived(lambda b: len(b.regs), doc="number of regressors n"),
        "input_count": Derived(lambda b: len(b.inputs), doc="number of inputs"),
        "vel_input": Derived(lambda b: b.input_index("vel"), doc="input index of vel (-1: none)"),
        "source": Derived(lambda b: [b.input_index(_INPUT_OF[r][0]) if r != "1" else -1
                                     for r in b.regs], size=None,
                          doc="per regressor, its input index (-1: the constant)"),
        "scales": Derived(lambda b: b.values["scales"] or (1.0,) * len(b.regs), size=None,
                          doc="regressor scales (after the n sources)"),
    }

    def configure(self) -> None:
        regs = tuple(r for r in "avx1" if r in self.values["regressors"])
        self.regs = regs
        n = len(regs)
        gate = self.values["direction"] != "both"
        inputs = {}
        for r in "avx":
            if r in regs or (r == "v" and gate):
                name, unit, doc = _INPUT_OF[r]
                inputs[name] = In(1, unit=unit, doc=doc)
        inputs["force"] = In(1, unit="N", doc="measured force")
        self.inputs = inputs
        self.outputs = {}
        for r in regs:
            name, unit, doc = _OUTPUT_OF[r]
            self.outputs[name] = Out(1, unit=unit, depends="state", doc=doc)
        self.outputs["error"] = Out(1, unit="N", depends="state",
                                    doc="a-priori prediction error of the last update")
        self.dstate = state_size(n) + 1

    def validate(self, changed: str | None) -> None:
        """``scales``, when given, holds one positive value per regressor."""
        scales, regs = self.values["scales"], self.regs
        if scales is not None:
            if len(scales) != len(regs):
                raise ParamError("scales", f"parameter 'scales' needs {len(regs)} values (one "
                                           f"per regressor {', '.join(regs)}), got {len(scales)}")
            if any(s <= 0 for s in scales):
                raise ParamError("scales", "parameter 'scales' must be > 0")

    def input_index(self, name: str) -> int:
        """Position of input ``name`` among the inputs (-1: not an input)."""
        names = list(self.inputs)
        return names.index(name) if name in names else -1

    initial_depends = ("p0",)

    def initial_state(self):
        x, d, m = super().initial_state()
        n = len(self.regs)
        d[:state_size(n)] = initial_state(n, self.p0)
        return x, d, m

    @staticmethod
    @njit
    def output(t, x, d, m, p, *ports):
        n = int(p[EW.count])
        nin = int(p[EW.input_count])
        sc0 = EW.source + n
        for j in range(n):
            ports[nin + j][0] = ewls_parameter(d, j, p, sc0)
        ports[nin + n][0] = d[n * n + 3 * n]

    @staticmethod
    @njit
    def update(t, x, d, m, p, *inputs):
        n = int(p[EW.count])
        nin = int(p[EW.input_count])
        direction = p[EW.gate]
        if direction != 0.0:
            v = inputs[int(p[EW.vel_input])][0]
            if direction * v <= p[EW.deadband]:
                return
        iphi = n + n * n
        for j in range(n):
            k = int(p[EW.source + j])
            d[iphi + j] = inputs[k][0] if k >= 0 else 1.0
        d[n * n + 3 * n] = ewls_step(d, n, inputs[nin - 1][0], p[EW.forgetting],
                                     p[EW.p0], p, EW.source + n)


EW = EWLS.P
"""The EWLS block's packed parameters by name (the scales start at ``source + n``)."""
