"""Impedance models rendered as an impedance (motion in, force out) or an admittance
(force in, motion out).

``PiecewiseImpedance`` and ``Admittance`` render a model on knots,
``PolynomialImpedance`` and ``PolynomialAdmittance`` a global polynomial model from its
coefficients.  They evaluate the kernels of :mod:`hapflow.blocks.impedance_model`,
which the offline pipeline (:mod:`hapflow.ident`) uses too, so a simulated render
equals the offline result.

An impedance block declares its mass by ``nonpositive_mass()`` (why it cannot be
driven by force, or None) and ``MASS`` (the parameter that sets it); its admittance
is ``class XAdmittance(RendersAdmittance, XImpedance)`` with the two kernels that
integrate ``acc = (force - F(pos, vel, 0)) / m`` with the engine's solver.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, nonnegative
from hapflow.ports import In, Out

from . import impedance_model as _model
from .impedance_model import (admittance_accel, impedance_force, nonpositive_mass,
                              polynomial_accel, polynomial_force, polynomial_table)
from .mechanical import MassSpringDamper


def _kernel_sources(*modules) -> str:
    """Hash of the modules whose kernels a block calls (part of its cache key)."""
    h = hashlib.sha256()
    for mod in modules:
        h.update(Path(mod.__file__).read_bytes())
    return h.hexdigest()[:16]


_KERNEL_HASH = _kernel_sources(_model)

_ARRAY = dict(kind="floats")
_MODEL_DOC = "model YAML file (from 'hapflow identify'); in a graph file, relative to the graph file"


class PiecewiseImpedance(Block):
    """Render an identified impedance model: force from position, velocity and acceleration.

    Evaluates the model of :mod:`hapflow.blocks.impedance_model` (the file written by
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
        "model": Structural(None, kind="file", doc=_MODEL_DOC),
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

    derived = {"model_table": Derived(lambda b: b.impedance_model.table(b.v_blend), size=None,
                                      doc="the model's knots and values, as impedance_force "
                                          "reads them")}

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

    MASS = "m"
    """The parameter that sets the mass (blamed when a model file does not)."""

    def nonpositive_mass(self) -> str | None:
        """Where the mass is not positive (direction and position range), or None."""
        return nonpositive_mass(self.impedance_model)

    def structural_key(self) -> tuple:
        return (*super().structural_key(), _KERNEL_HASH)

    @staticmethod
    @njit
    def output(t, x, d, m, p, pos, vel, acc, force):
        force[0] = impedance_force(p[PIECEWISE.model_table:], pos[0], vel[0], acc[0])


START = {"x0": Structural(0.0, unit="m", doc="initial position"),
         "v0": Structural(0.0, unit="m/s", doc="initial velocity")}
"""The start of an admittance rendering's motion."""


class RendersAdmittance:
    """An impedance block that declares its mass, rendered force-in, motion-out (a mixin).

    ``class XAdmittance(RendersAdmittance, XImpedance)`` declares ``cstate = ("pos",
    "vel")``, ``params = {**XImpedance.params, **START}`` and the ``deriv`` and ``output``
    kernels; this gives it the ports of :class:`MassSpringDamper` (as for any force-driven
    mass), the start ``x0``, ``v0``, and rejects at build time a model whose mass is not
    positive somewhere, naming the position range and the parameter (``MASS``, or
    ``model``).
    """

    inputs, outputs = MassSpringDamper.inputs, MassSpringDamper.outputs
    position_states = (0,)

    def configure(self) -> None:
        super().configure()
        reason = self.nonpositive_mass()
        if reason is not None:
            raise ParamError("model" if self.values["model"] else self.MASS, reason)

    initial_from = {"pos": "x0", "vel": "v0"}


class Admittance(RendersAdmittance, PiecewiseImpedance):
    """Render an identified impedance model as an admittance: motion from force.

    Integrates the model of :class:`PiecewiseImpedance` (same parameters:
    ``model`` or the knot arrays) driven by a force, with the engine's solver::

        m(x) acc = force - [b(x) vel + k(x) pos + F0(x)]   (direction-blended)

    The acceleration comes from the model's own kernel evaluated at ``acc`` 0
    and 1 (:func:`~hapflow.blocks.impedance_model.admittance_accel`), so impedance and
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

    cstate = ("pos", "vel")
    params = {**PiecewiseImpedance.params, **START}

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force, dx):
        dx[ADM_X.pos] = x[ADM_X.vel]
        dx[ADM_X.vel] = admittance_accel(p[PIECEWISE.model_table:], x[ADM_X.pos], x[ADM_X.vel],
                                         force[0])

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, pos, vel, acc):
        pos[0] = x[ADM_X.pos]
        vel[0] = x[ADM_X.vel]
        acc[0] = admittance_accel(p[PIECEWISE.model_table:], pos[0], vel[0], force[0])


ADM_X = Admittance.X
PIECEWISE = PiecewiseImpedance.P


class PolynomialImpedance(Block):
    """Render a global polynomial impedance model: force from position, velocity and acceleration.

    ::

        force = m acc + (sum_j b_j pos^j) vel + sum_i k_i pos^i + F0 + Fc (2 w - 1),
        w = 0.5 (1 + tanh(vel / v_blend))

    the model of ``hapflow identify --method poly``, evaluated from its coefficients
    (exact at any position; :class:`PiecewiseImpedance` renders the same file from its
    knots, with the end values held beyond them).  Give either ``model`` (a model file
    with a ``polynomial`` section) or the coefficients: ``stiffness`` and ``damping``
    list them by power of x from 0 (``stiffness: [0, 1000, 0, 1e9]`` is
    ``1000 x + 1e9 x^3``, ``k_i`` in N/m^i, ``b_j`` in N s/m^(j+1)), with ``mass``,
    ``f0`` and ``fc`` (default 0).  The output feeds through from all inputs.

    Ports
    -----
    pos   : in, (1,), m         position
    vel   : in, (1,), m/s       velocity
    acc   : in, (1,), m/s^2     acceleration
    force : out, (1,), N        model force (pushing back against +x when positive)
    """

    inputs, outputs = PiecewiseImpedance.inputs, PiecewiseImpedance.outputs
    params = {
        "model": Structural(None, kind="file", doc=_MODEL_DOC + " with polynomial coefficients"),
        "stiffness": Structural(None, doc="k_i by power i of x from 0 (N/m^i)", **_ARRAY),
        "damping": Structural(None, doc="b_j by power j of x from 0 (N s/m^(j+1))", **_ARRAY),
        "mass": Structural(None, unit="kg", doc="mass m (default 0)"),
        "f0": Structural(None, unit="N", doc="force offset F0 (default 0)"),
        "fc": Structural(None, unit="N", doc="offset by direction: +fc moving to +x, -fc "
                                             "moving to -x (default 0)"),
        "v_blend": Live(None, unit="m/s", check=nonnegative,
                        doc="direction blend velocity (default: the model's, else 1e-3)"),
    }
    derived = {"model_table": Derived(lambda b: polynomial_table(
        b.coefficients, b.blend if b.v_blend is None else b.v_blend), size=None,
        doc="the model's coefficients, as polynomial_force reads them")}
    MASS = "mass"
    """The parameter that sets the mass (blamed when a model file does not)."""

    def configure(self) -> None:
        v = self.values
        given = [n for n in ("stiffness", "damping", "mass", "f0", "fc") if v[n] is not None]
        if v["model"] is not None:
            if given:
                raise ParamError(given[0], "give either 'model' or the coefficients, not both "
                                           f"(got model and {', '.join(given)})")
            self.coefficients, self.blend = self._load(v["model"])
            return
        if not given:
            raise ParamError("stiffness", "give 'model' (a model YAML file from 'hapflow "
                                          "identify --method poly') or the coefficients "
                                          "'stiffness' (by power of x from 0) and optionally "
                                          "'damping', 'mass', 'f0', 'fc'")
        coefficients = {}
        for kind, name in (("k", "stiffness"), ("b", "damping")):
            values = v[name] if v[name] is not None else ()
            if len(values) > 10:
                raise ParamError(name, f"parameter {name!r} has {len(values)} coefficients; "
                                       "powers 0..9 are supported")
            coefficients.update({f"{kind}{i}": float(c) for i, c in enumerate(values) if c})
        coefficients.update({key: float(v[name]) for key, name in
                             (("m", "mass"), ("F0", "f0"), ("Fc", "fc")) if v[name] is not None})
        self.coefficients, self.blend = coefficients, 1e-3

    @staticmethod
    def _load(path: str) -> tuple[dict[str, float], float]:
        try:
            model = _model.ImpedanceModel.load(path)
        except _model.ModelFileError as exc:
            raise ParamError("model", f"parameter 'model': {exc}") from None
        if model.polynomial is None:
            raise ParamError("model", f"parameter 'model': {path!r} holds no polynomial "
                                      f"coefficients (a {model.method!r} model): identify with "
                                      "--method poly, or render it with PiecewiseImpedance")
        return model.polynomial, model.v_blend

    def nonpositive_mass(self) -> str | None:
        """Why the model cannot be driven by force (its one mass is not positive), or None."""
        mass = self.coefficients.get("m", 0.0)
        if mass > 0:
            return None
        return (f"the polynomial model's mass m = {mass:.4g} kg is not positive, at every "
                "position (it does not depend on x): it cannot be driven by force "
                "(admittance); give a positive mass")

    def structural_key(self) -> tuple:
        return (*super().structural_key(), _KERNEL_HASH)

    @staticmethod
    @njit
    def output(t, x, d, m, p, pos, vel, acc, force):
        force[0] = polynomial_force(p[POLYNOMIAL.model_table:], pos[0], vel[0], acc[0])


class PolynomialAdmittance(RendersAdmittance, PolynomialImpedance):
    """Render a global polynomial impedance model as an admittance: motion from force.

    Integrates the model of :class:`PolynomialImpedance` (same parameters: ``model``
    or the coefficients) driven by a force, with the engine's solver::

        m acc = force - [(sum_j b_j pos^j) vel + sum_i k_i pos^i + F0 + Fc (2 w - 1)]

    (:func:`~hapflow.blocks.impedance_model.polynomial_accel`, the impedance's own
    kernel at ``acc`` 0).  A mass that is not positive is rejected.

    Ports
    -----
    force : in, (1,), N         force on the device, pushing toward +x
    pos   : out, (1,), m        device position (state only)
    vel   : out, (1,), m/s      device velocity (state only)
    acc   : out, (1,), m/s^2    model acceleration (feeds through from force)
    """

    cstate = ("pos", "vel")
    params = {**PolynomialImpedance.params, **START}

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force, dx):
        dx[POLY_X.pos] = x[POLY_X.vel]
        dx[POLY_X.vel] = polynomial_accel(p[POLYNOMIAL.model_table:], x[POLY_X.pos],
                                          x[POLY_X.vel], force[0])

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, pos, vel, acc):
        pos[0] = x[POLY_X.pos]
        vel[0] = x[POLY_X.vel]
        acc[0] = polynomial_accel(p[POLYNOMIAL.model_table:], pos[0], vel[0], force[0])


POLY_X = PolynomialAdmittance.X
POLYNOMIAL = PolynomialImpedance.P
