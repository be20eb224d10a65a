"""Identified impedance models: render one as an impedance (PiecewiseImpedance) or an
admittance (Admittance), identify one online (EWLS).

Both blocks use the very kernels of the offline pipeline
(:mod:`hapflow.ident`): ``PiecewiseImpedance`` evaluates a model with
:func:`hapflow.ident.model.impedance_force`, ``EWLS`` updates with
:func:`hapflow.ident.ewls.ewls_step`, so a simulated render or an online
estimate equals the offline result.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from numba import njit

from hapflow.block import Block, ParamError
from hapflow.names import offsets
from hapflow.ident import ewls as _ewls
from hapflow.ident import model as _model
from hapflow.ident import simulate as _simulate
from hapflow.ident.ewls import ewls_parameter, ewls_step
from hapflow.ident.model import impedance_force
from hapflow.ident.simulate import admittance_accel
from hapflow.params import Live, Structural, nonnegative, one_of, positive
from hapflow.ports import In, Out

from .mechanical import MassSpringDamper


def _kernel_sources() -> str:
    """Hash of the modules whose kernels these blocks call (part of the cache key)."""
    h = hashlib.sha256()
    for mod in (_ewls, _model, _simulate):
        h.update(Path(mod.__file__).read_bytes())
    return h.hexdigest()[:16]


_KERNEL_HASH = _kernel_sources()

_ARRAY = dict(kind="floats")


class PiecewiseImpedance(Block):
    """Render an identified impedance model: force from position, velocity and acceleration.

    Evaluates the model of :mod:`hapflow.ident.model` (the file written by
    ``hapflow identify``), per direction ``d``::

        F_d = m_d(x) acc + b_d(x) vel + k_d(x) pos + F0_d(x)
        force = w F_+ + (1 - w) F_-,   w = 0.5 (1 + tanh(vel / v_blend))

    with the parameters linear between knots (a repeated knot is a jump) and
    constant beyond the end knots.  Give either ``model`` (path of a model
    YAML file, read when the block is built) or the arrays: knots ``x`` and
    ``k``, ``f0`` (and optionally ``m``, ``b``; default 0) for both
    directions, with ``x_neg`` ... ``f0_neg`` to give the negative direction
    its own.  The output feeds through from all inputs; it uses the same
    ``@njit`` kernel as the offline model, so it equals
    ``ImpedanceModel.predict`` bit for bit.

    Ports
    -----
    pos   : in, (1,), m         position
    vel   : in, (1,), m/s       velocity
    acc   : in, (1,), m/s^2     acceleration
    force : out, (1,), N        model force (pushing back against +x when positive)
    """

    inputs = {"pos": In(1, unit="m", doc="position"),
              "vel": In(1, unit="m/s", doc="velocity"),
              "acc": In(1, unit="m/s^2", doc="acceleration")}
    outputs = {"force": Out(1, unit="N", doc="model force")}
    params = {
        "model": Structural(None, kind="file",
                           doc="model YAML file (from 'hapflow identify'); in a graph "
                               "file, relative to the graph file"),
        "x": Structural(None, unit="m", doc="knot positions (instead of a model file)", **_ARRAY),
        "m": Structural(None, unit="kg", doc="mass at the knots (default 0)", **_ARRAY),
        "b": Structural(None, unit="N s/m", doc="damping at the knots (default 0)", **_ARRAY),
        "k": Structural(None, unit="N/m", doc="stiffness at the knots", **_ARRAY),
        "f0": Structural(None, unit="N", doc="force offset at the knots", **_ARRAY),
        "x_neg": Structural(None, unit="m", doc="negative direction knots (default: x)", **_ARRAY),
        "m_neg": Structural(None, unit="kg", doc="negative direction mass", **_ARRAY),
        "b_neg": Structural(None, unit="N s/m", doc="negative direction damping", **_ARRAY),
        "k_neg": Structural(None, unit="N/m", doc="negative direction stiffness", **_ARRAY),
        "f0_neg": Structural(None, unit="N", doc="negative direction offset", **_ARRAY),
        "v_blend": Live(None, unit="m/s", check=nonnegative,
                        doc="direction blend velocity (default: the model's)"),
    }

    def configure(self) -> None:
        v = self.values
        arrays = [n for n in ("x", "m", "b", "k", "f0", "x_neg", "m_neg", "b_neg", "k_neg", "f0_neg")
                  if v[n] is not None]
        if v["model"] is not None:
            if arrays:
                raise ParamError(arrays[0], f"give either 'model' or the arrays, not both "
                                            f"(got model and {', '.join(arrays)})")
            try:
                self.impedance_model = _model.ImpedanceModel.load(v["model"])
            except _model.ModelFileError as exc:
                raise ParamError("model", f"parameter 'model': {exc}") from None
            return
        if v["x"] is None:
            raise ParamError("x", "give 'model' (a model YAML file from 'hapflow identify') or "
                                  "the knot arrays 'x', 'k' and 'f0' (and optionally 'm', 'b')")
        knots = {}
        for suffix in ("", "_neg"):
            xs = v["x" + suffix] if v["x" + suffix] is not None else v["x"]
            vals = {}
            for name, key in (("m", "m"), ("b", "b"), ("k", "k"), ("F0", "f0")):
                arr = v[key + suffix] if v[key + suffix] is not None else v[key]
                if arr is None and name in ("k", "F0"):
                    raise ParamError(key, f"parameter {key!r} is required with 'x' (one value "
                                          "per knot)")
                arr = np.zeros(len(xs)) if arr is None else np.asarray(arr)
                if len(arr) != len(xs):
                    raise ParamError(key + suffix, f"parameter {key + suffix!r} has {len(arr)} "
                                                   f"values for {len(xs)} knots")
                vals[name] = arr
            try:
                knots[suffix] = _model.Knots(np.asarray(xs), **vals)
            except _model.ModelFileError as exc:
                raise ParamError("x" + suffix, f"knots: {exc}") from None
        self.impedance_model = _model.ImpedanceModel(knots[""], knots["_neg"])

    def pack(self) -> np.ndarray:
        return self.impedance_model.table(self.values["v_blend"])

    def structural_key(self) -> tuple:
        return (*super().structural_key(), _KERNEL_HASH)

    @staticmethod
    @njit
    def output(t, x, d, m, p, pos, vel, acc, force):
        force[0] = impedance_force(p, pos[0], vel[0], acc[0])


class Admittance(PiecewiseImpedance):
    """Render an identified impedance model as an admittance: motion from force.

    Integrates the model of :class:`PiecewiseImpedance` (same parameters:
    ``model`` or the knot arrays) driven by a force, with the engine's solver::

        m(x) acc = force - [b(x) vel + k(x) pos + F0(x)]   (direction-blended)

    The acceleration comes from the model's own kernel evaluated at ``acc`` 0
    and 1 (:func:`hapflow.ident.simulate.admittance_accel`), so impedance and
    admittance renderings cannot disagree.  A model whose mass is not
    positive at some knot is rejected with the position range named.

    The ports are those of :class:`MassSpringDamper`, as for any force-driven mass.

    Ports
    -----
    force : in, (1,), N         force on the device, pushing toward +x
    pos   : out, (1,), m        device position (state only)
    vel   : out, (1,), m/s      device velocity (state only)
    acc   : out, (1,), m/s^2    model acceleration (feeds through from force)
    """

    inputs, outputs = MassSpringDamper.inputs, MassSpringDamper.outputs
    cstate = ("pos", "vel")
    position_states = (0,)
    params = {**PiecewiseImpedance.params,
              "x0": Structural(0.0, unit="m", doc="initial position"),
              "v0": Structural(0.0, unit="m/s", doc="initial velocity")}

    def configure(self) -> None:
        from hapflow.ident import IdentError
        from hapflow.ident.simulate import check_mass
        super().configure()
        try:
            check_mass(self.impedance_model)
        except IdentError as exc:
            raise ParamError("model" if self.values["model"] else "m", str(exc)) from None

    def initial_state(self):
        """Position ``x0`` and velocity ``v0`` (state names in that order); no other state."""
        return np.array([self.x0, self.v0]), np.zeros(0), np.zeros(0, dtype=np.int64)

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force, dx):
        dx[ADM_X.pos] = x[ADM_X.vel]
        dx[ADM_X.vel] = admittance_accel(p, x[ADM_X.pos], x[ADM_X.vel], force[0])

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, pos, vel, acc):
        pos[0] = x[ADM_X.pos]
        vel[0] = x[ADM_X.vel]
        acc[0] = admittance_accel(p, pos[0], vel[0], force[0])


ADM_X = Admittance.X


_INPUT_OF = {"a": ("acc", "m/s^2", "acceleration (regressor of the mass)"),
             "v": ("vel", "m/s", "velocity (regressor of the damping)"),
             "x": ("pos", "m", "position (regressor of the stiffness)")}
_OUTPUT_OF = {"a": ("mass", "kg", "mass estimate m"),
              "v": ("damping", "N s/m", "damping estimate b"),
              "x": ("stiffness", "N/m", "stiffness estimate k"),
              "1": ("offset", "N", "force offset estimate F0")}
_DIRECTIONS = {"both": 0.0, "positive": 1.0, "negative": -1.0}
EWLS_P = offsets("EWLS_P", [("forgetting", 1), ("p0", 1), ("deadband", 1), ("direction", 1),
                            ("regressors", 1), ("inputs", 1), ("vel_input", 1), ("source", None)])
"""The EWLS block's packed parameters, by name: the number of regressors and of inputs, the
input index of ``vel`` (-1: none), then from ``source`` per regressor its input index (-1:
the constant) and after those the regressor scales."""


def _regressors(text: str) -> str | None:
    items = text.replace(",", "").replace(" ", "")
    if not items or any(c not in "avx1" for c in items) or len(set(items)) != len(items):
        return "must be a non-empty subset of 'avx1' (e.g. 'avx1' or 'x1')"
    return None


class EWLS(Block):
    """Online exponentially weighted least squares: impedance parameters from streaming data.

    Each sample hit feeds one sample to the EWLS update of Colton &
    Hollerbach 2005 (see :mod:`hapflow.ident.ewls`; it is the same ``@njit``
    function the offline pipeline uses, so the estimates are identical)::

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
        self.dstate = _ewls.state_size(n) + 1

    def validate(self, changed: str | None) -> None:
        """``scales``, when given, holds one positive value per regressor."""
        scales, regs = self.values["scales"], self.regs
        if scales is not None:
            if len(scales) != len(regs):
                raise ParamError("scales", f"parameter 'scales' needs {len(regs)} values (one "
                                           f"per regressor {', '.join(regs)}), got {len(scales)}")
            if any(s <= 0 for s in scales):
                raise ParamError("scales", "parameter 'scales' must be > 0")

    def pack(self) -> np.ndarray:
        """The parameters laid out as :data:`EWLS_P` names them."""
        n = len(self.regs)
        names = list(self.inputs)
        p = np.empty(EWLS_P.source + 2 * n)
        p[EWLS_P.forgetting], p[EWLS_P.p0], p[EWLS_P.deadband] = (self.forgetting, self.p0,
                                                                  self.deadband)
        p[EWLS_P.direction] = _DIRECTIONS[self.values["direction"]]
        p[EWLS_P.regressors], p[EWLS_P.inputs] = n, len(names)
        p[EWLS_P.vel_input] = names.index("vel") if "vel" in names else -1
        p[EWLS_P.source:EWLS_P.source + n] = [names.index(_INPUT_OF[r][0]) if r != "1" else -1
                                              for r in self.regs]
        p[EWLS_P.source + n:] = self.values["scales"] or (1.0,) * n
        return p

    def initial_state(self):
        x, d, m = super().initial_state()
        n = len(self.regs)
        d[:_ewls.state_size(n)] = _ewls.initial_state(n, self.p0)
        return x, d, m

    def structural_key(self) -> tuple:
        return (*super().structural_key(), _KERNEL_HASH)

    @staticmethod
    @njit
    def output(t, x, d, m, p, *ports):
        n = int(p[EWLS_P.regressors])
        nin = int(p[EWLS_P.inputs])
        sc0 = EWLS_P.source + n
        for j in range(n):
            ports[nin + j][0] = ewls_parameter(d, j, p, sc0)
        ports[nin + n][0] = d[n * n + 3 * n]

    @staticmethod
    @njit
    def update(t, x, d, m, p, *inputs):
        n = int(p[EWLS_P.regressors])
        nin = int(p[EWLS_P.inputs])
        direction = p[EWLS_P.direction]
        if direction != 0.0:
            v = inputs[int(p[EWLS_P.vel_input])][0]
            if direction * v <= p[EWLS_P.deadband]:
                return
        iphi = n + n * n
        for j in range(n):
            k = int(p[EWLS_P.source + j])
            d[iphi + j] = inputs[k][0] if k >= 0 else 1.0
        d[n * n + 3 * n] = ewls_step(d, n, inputs[nin - 1][0], p[EWLS_P.forgetting],
                                     p[EWLS_P.p0], p, EWLS_P.source + n)
