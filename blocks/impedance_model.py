"""The impedance model: file format, the one evaluation kernel and its admittance form.

Below the identification layer (:mod:`hapflow.ident` writes these files, the
``PiecewiseImpedance`` and ``Admittance`` blocks read them): the model is plain
knot arrays and a flat table, evaluated by ``@njit`` kernels that the blocks and
the offline pipeline share, so a simulated render equals the offline result.

Model (Colton & Hollerbach 2005, eq. 8), per direction ``d`` in {+, -}::

    F_d(x, v, a) = m_d(x) a + b_d(x) v + k_d(x) x + F0_d(x)
    F = w F_+ + (1 - w) F_-,   w = 0.5 (1 + tanh(v / v_blend))

so the force blends smoothly between the two directions within a few
``v_blend`` of zero velocity.

Parameter representation (the same for every method): per direction a list
of **knots** ``x`` (non-decreasing, m) and the values of ``m, b, k, F0`` at
the knots.  Between knots a parameter is linearly interpolated; a knot
written twice is a jump (the right value applies from that position on);
beyond the first and last knot the end values hold.  EWLS produces distinct
knots on its grid; segmented least squares produces each segment
``[e_j, e_j+1)`` as the two knots ``(e_j, theta_j), (e_j+1, theta_j)``, so
its piecewise-constant parameters are reproduced exactly.

File (YAML, SI units)::

    format: hapflow-impedance-model
    version: 1
    equation: ...                      # the model above, as text
    units: {x: m, m: kg, b: N s/m, k: N/m, F0: N, v_blend: m/s}
    method: segmented | auto | ewls
    settings: {...}                    # method settings and data preparation
    source: {path: run.h5, sha256: ..., kind: hdf5, signals: {...}}
    v_blend: 0.001
    directions:
      positive: {x: [...], m: [...], b: [...], k: [...], F0: [...]}   # v > 0
      negative: {x: [...], m: [...], b: [...], k: [...], F0: [...]}   # v < 0
    polynomial: {m: ..., b0: ..., k1: ..., k3: ..., F0: ..., Fc: ...}
                                       # method poly: the global model's coefficients (SI;
                                       # see POLYNOMIAL); the knots above sample it
    diagnostics: {...}                 # optional: segments, standard errors, condition numbers
    fit: {nrmse_percent: ..., ...}     # optional: fit quality on the identification data

Flat table for the kernels (:meth:`ImpedanceModel.table`)::

    [v_blend, n_pos, n_neg,
     x_pos(n_pos), m_pos, b_pos, k_pos, F0_pos,
     x_neg(n_neg), m_neg, b_neg, k_neg, F0_neg]

A global polynomial model (``polynomial`` in the file, :data:`POLYNOMIAL`) is
also evaluated from its coefficients, exactly and at any position
(:func:`polynomial_force`, table :func:`polynomial_table`)::

    [v_blend, m, F0, Fc, nk, nb, k_0 .. k_(nk-1), b_0 .. b_(nb-1)]   (dense in the powers)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from hapflow.errors import HapflowError, suggest
from hapflow.jit import njit

FORMAT = "hapflow-impedance-model"
VERSION = 1
PARAMS = ("m", "b", "k", "F0")
UNITS = {"x": "m", "m": "kg", "b": "N s/m", "k": "N/m", "F0": "N", "v_blend": "m/s"}
EQUATION = ("F_d = m_d(x) a + b_d(x) v + k_d(x) x + F0_d(x) for d in (positive: v > 0, "
            "negative: v < 0); F = w F_positive + (1 - w) F_negative, "
            "w = 0.5 (1 + tanh(v / v_blend)); parameters linear between knots, a repeated "
            "knot is a jump (right-continuous), constant beyond the end knots")
DIRECTION_NAMES = {1: "positive", -1: "negative"}
LIMITS = {"x": 100.0, "m": 1e12, "b": 1e12, "k": 1e12, "F0": 1e12}
"""Largest magnitude of knot positions and parameters (SI): beyond any device; larger values
are a damaged file, and their products with the motion overflow."""
MAX_VALUES = 10_000_000
"""Most values a model file may hold with its aliases expanded (a fine EWLS grid holds
thousands; an alias bomb billions)."""
POLYNOMIAL = ("F = m a + (sum_j b_j x^j) v + sum_i k_i x^i + F0 + Fc (2 w - 1), "
              "w = 0.5 (1 + tanh(v / v_blend))")
"""The global polynomial model; its coefficients are named ``m``, ``b<j>``, ``k<i>`` (power
``j``, ``i`` of x: 0..9), ``F0`` and ``Fc``, in N, m and s; absent ones are 0."""
_COEFFICIENT = re.compile(r"m|F0|Fc|[bk][0-9]")
KEYS = ("format", "version", "equation", "units", "method", "settings", "source", "v_blend",
        "directions", "polynomial", "diagnostics", "fit")
"""The top-level keys of a model file (see the module docstring); any other is an error."""
SECTIONS = ("settings", "source", "diagnostics", "fit")
"""Free-form top-level sections: mappings of anything."""
NESTED = (("settings", "prep"), ("source", "signals"), ("source", "units"), ("source", "columns"))
"""Sections inside them that ``hapflow verify`` reads back as mappings (how the data was
prepared, which signals and columns in which units)."""




class ModelFileError(HapflowError):
    """A model file that cannot be read, or that is not a hapflow impedance model."""


def _key_lines(data: dict, line: Callable[..., int | None], keys: tuple = (),
               depth: int = 3) -> dict[tuple, int]:
    """The line of each entry of ``data`` up to ``depth`` keys deep, by its keys."""
    out = {}
    for key, value in data.items():
        path = (*keys, key)
        n = line(*path)
        if n:
            out[path] = n
        if isinstance(value, dict) and depth > 1:
            out.update(_key_lines(value, line, path, depth - 1))
    return out


# ------------------------------------------------------------------ kernels

@njit(cache=True)
def _direction_force(table, off, n, x, v, a):
    """F = m a + b v + k x + F0 of one direction block of the table at position x."""
    if n == 1 or x <= table[off]:
        j = 0
        f = 0.0
    elif x >= table[off + n - 1]:
        j = n - 2
        f = 1.0
    else:
        lo = 0
        hi = n - 1
        # largest lo with knot[lo] <= x (knot[hi] > x)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if table[off + mid] <= x:
                lo = mid
            else:
                hi = mid
        j = lo
        span = table[off + j + 1] - table[off + j]
        f = (x - table[off + j]) / span if span > 0.0 else 0.0
    if n == 1:
        m = table[off + n]
        b = table[off + 2 * n]
        k = table[off + 3 * n]
        f0 = table[off + 4 * n]
    else:
        g = 1.0 - f
        m = g * table[off + n + j] + f * table[off + n + j + 1]
        b = g * table[off + 2 * n + j] + f * table[off + 2 * n + j + 1]
        k = g * table[off + 3 * n + j] + f * table[off + 3 * n + j + 1]
        f0 = g * table[off + 4 * n + j] + f * table[off + 4 * n + j + 1]
    return m * a + b * v + k * x + f0


@njit(cache=True)
def impedance_force_w(table, x, v, a, w):
    """Model force (N) with a given weight ``w`` of the positive direction (0..1)."""
    n_pos = int(table[1])
    n_neg = int(table[2])
    fp = 0.0
    fn = 0.0
    if w > 0.0:
        fp = _direction_force(table, 3, n_pos, x, v, a)
    if w < 1.0:
        fn = _direction_force(table, 3 + 5 * n_pos, n_neg, x, v, a)
    return w * fp + (1.0 - w) * fn


@njit(cache=True)
def blend_weight(table, v):
    """Weight of the positive direction, ``0.5 (1 + tanh(v / v_blend))`` (a step if v_blend = 0)."""
    vb = table[0]
    if vb > 0.0:
        return 0.5 * (1.0 + math.tanh(v / vb))
    if v > 0.0:
        return 1.0
    if v < 0.0:
        return 0.0
    return 0.5


@njit(cache=True)
def impedance_force(table, x, v, a):
    """Model force (N) at position x (m), velocity v (m/s), acceleration a (m/s^2).

    ``table`` is the flat model table (see the module docstring).  Pure,
    allocation-free: used by :meth:`ImpedanceModel.predict` and by the
    ``PiecewiseImpedance`` block.
    """
    return impedance_force_w(table, x, v, a, blend_weight(table, v))


@njit(cache=True)
def admittance_accel(table, x, v, force):
    """Acceleration (m/s^2) of the model at ``(x, v)`` under ``force`` (N).

    The blended force is affine in the acceleration, so
    ``a = (F - F(x, v, 0)) / (F(x, v, 1) - F(x, v, 0))``: the model's own kernel gives
    the mass (the denominator), and impedance and admittance cannot disagree.
    """
    w = blend_weight(table, v)
    f0 = impedance_force_w(table, x, v, 0.0, w)
    mass = impedance_force_w(table, x, v, 1.0, w) - f0
    return (force - f0) / mass


@njit(cache=True)
def polynomial_force(table, x, v, a):
    """Force (N) of the polynomial model in ``table`` (:func:`polynomial_table`)."""
    nk = int(table[4])
    nb = int(table[5])
    spring = 0.0
    for i in range(nk - 1, -1, -1):            # Horner
        spring = spring * x + table[6 + i]
    damping = 0.0
    for j in range(nb - 1, -1, -1):
        damping = damping * x + table[6 + nk + j]
    w = blend_weight(table, v)
    return table[1] * a + damping * v + spring + table[2] + table[3] * (2.0 * w - 1.0)


@njit(cache=True)
def polynomial_accel(table, x, v, force):
    """Acceleration (m/s^2) of the polynomial model at ``(x, v)`` under ``force`` (N)."""
    return (force - polynomial_force(table, x, v, 0.0)) / table[1]


@njit(cache=True)
def _predict(table, x, v, a, w, out):
    for i in range(x.shape[0]):
        if w[i] < 0.0:
            out[i] = impedance_force(table, x[i], v[i], a[i])
        else:
            out[i] = impedance_force_w(table, x[i], v[i], a[i], w[i])


# ------------------------------------------------------------------ model

@dataclass
class Knots:
    """Parameters of one direction at knots (see the module docstring)."""

    x: np.ndarray
    m: np.ndarray
    b: np.ndarray
    k: np.ndarray
    F0: np.ndarray

    def __post_init__(self):
        for name in ("x", *PARAMS):
            setattr(self, name, np.ascontiguousarray(np.asarray(getattr(self, name),
                                                                dtype=np.float64).reshape(-1)))
        n = self.x.size
        if n < 1:
            raise ModelFileError("a direction needs at least one knot")
        for name in PARAMS:
            if getattr(self, name).size != n:
                raise ModelFileError(f"parameter {name!r} has {getattr(self, name).size} values "
                                     f"for {n} knots")
        if np.any(np.diff(self.x) < 0):
            raise ModelFileError("knot positions must be non-decreasing")
        for name in ("x", *PARAMS):
            values = getattr(self, name)
            if not np.all(np.isfinite(values)):
                raise ModelFileError(f"{name!r} has non-finite values")
            if np.any(np.abs(values) > LIMITS[name]):
                raise ModelFileError(f"{name!r} has {np.max(np.abs(values)):.4g} {UNITS[name]}: "
                                     f"the values must be at most {LIMITS[name]:g} in magnitude")

    @classmethod
    def piecewise_constant(cls, edges: np.ndarray, theta: np.ndarray) -> "Knots":
        """Knots of piecewise-constant segments: ``edges`` (S+1,), ``theta`` (S, 4)."""
        edges = np.asarray(edges, dtype=np.float64)
        theta = np.asarray(theta, dtype=np.float64)
        x = np.repeat(edges, 2)[1:-1]
        vals = np.repeat(theta, 2, axis=0)
        return cls(x, *vals.T)

    def at(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Parameters at positions ``x`` (the kernel's interpolation rule)."""
        x = np.atleast_1d(np.asarray(x, dtype=np.float64))
        n = self.x.size
        out = {}
        if n == 1:
            return {p: np.full(x.shape, getattr(self, p)[0]) for p in PARAMS}
        j = np.clip(np.searchsorted(self.x, x, side="right") - 1, 0, n - 2)
        span = self.x[j + 1] - self.x[j]
        with np.errstate(invalid="ignore", divide="ignore"):
            f = np.where(span > 0, (x - self.x[j]) / np.where(span > 0, span, 1.0), 0.0)
        f = np.where(x <= self.x[0], 0.0, np.where(x >= self.x[-1], 1.0, f))
        for p in PARAMS:
            vals = getattr(self, p)
            out[p] = (1.0 - f) * vals[j] + f * vals[j + 1]
        return out

    def to_dict(self) -> dict[str, list[float]]:
        return {"x": self.x.tolist(), **{p: getattr(self, p).tolist() for p in PARAMS}}


@dataclass
class ImpedanceModel:
    """A position- and direction-dependent impedance model.

    Attributes
    ----------
    positive, negative : Knots
        Parameters for v > 0 and v < 0.
    v_blend : float
        Velocity scale of the direction blend, m/s.
    method : str
        How it was identified (``segmented``, ``auto``, ``ewls``, or ``manual``).
    settings, source, diagnostics, fit : dict
        Provenance and quality (free-form, YAML-serialisable).
    polynomial : dict, optional
        Coefficients of a global polynomial model by name (:data:`POLYNOMIAL`); the knots
        then sample it.
    where : str
        The file the model was read from (``"model"`` if none), for messages.
    lines : dict
        The line in that file of each entry up to three keys deep, by its keys (see
        :meth:`at`).
    """

    positive: Knots
    negative: Knots
    v_blend: float = 1e-3
    method: str = "manual"
    settings: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    fit: dict[str, Any] = field(default_factory=dict)
    polynomial: dict[str, float] | None = None
    where: str = field(default="model", repr=False, compare=False)
    lines: dict[tuple, int] = field(default_factory=dict, repr=False, compare=False)

    def at(self, *keys: str) -> str:
        """``file:line`` of the entry at ``keys`` (``"settings", "prep", "cutoff"``) in the
        file the model was read from, for messages; the file alone where no line is known."""
        n = self.lines.get(keys)
        return f"{self.where}:{n}" if n else self.where

    def __post_init__(self):
        if self.polynomial is not None:
            self.polynomial = check_coefficients(self.polynomial)

    def direction(self, d: int) -> Knots:
        """Knots of direction +1 or -1."""
        return self.positive if d > 0 else self.negative

    def table(self, v_blend: float | None = None) -> np.ndarray:
        """The flat table the kernels read (see the module docstring)."""
        vb = self.v_blend if v_blend is None else v_blend
        parts = [np.array([vb, self.positive.x.size, self.negative.x.size], dtype=np.float64)]
        for kn in (self.positive, self.negative):
            parts += [kn.x, kn.m, kn.b, kn.k, kn.F0]
        return np.concatenate(parts)

    def predict(self, x: np.ndarray, v: np.ndarray | None = None, a: np.ndarray | None = None,
                direction: np.ndarray | None = None) -> np.ndarray:
        """Model force (N) at samples of position, velocity and acceleration.

        ``v`` or ``a`` of ``None`` count as zero.  ``direction`` (+1/-1/0 per
        sample), when given, replaces the velocity blend (+1 -> positive,
        -1 -> negative, 0 -> blend by ``v``): for quasi-static data, whose
        direction is known but whose velocity is not.
        """
        x = np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(-1))
        v = np.zeros_like(x) if v is None else np.ascontiguousarray(v, dtype=np.float64).reshape(-1)
        a = np.zeros_like(x) if a is None else np.ascontiguousarray(a, dtype=np.float64).reshape(-1)
        w = np.full(x.shape, -1.0)
        if direction is not None:
            d = np.asarray(direction).reshape(-1)
            w[d > 0] = 1.0
            w[d < 0] = 0.0
        out = np.empty_like(x)
        _predict(self.table(), x, v, a, w, out)
        return out

    # -------------------------------------------------------------- file I/O

    def to_dict(self) -> dict[str, Any]:
        """Plain data for YAML (see the module docstring for the layout)."""
        return {"format": FORMAT, "version": VERSION, "equation": EQUATION, "units": dict(UNITS),
                "method": self.method, "settings": _plain(self.settings),
                "source": _plain(self.source), "v_blend": float(self.v_blend),
                "directions": {"positive": self.positive.to_dict(),
                               "negative": self.negative.to_dict()},
                **({"polynomial": {"equation": POLYNOMIAL, **self.polynomial}}
                   if self.polynomial is not None else {}),
                "diagnostics": _plain(self.diagnostics), "fit": _plain(self.fit)}

    def to_yaml(self) -> str:
        """YAML text (floats written with full precision: the round trip is exact)."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=100)

    def save(self, path: str | Path) -> Path:
        """Write the model file (folders created as needed)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_yaml())
        return path

    @classmethod
    def from_dict(cls, data: Any, where: str = "model",
                  line: Callable[..., int | None] | None = None) -> "ImpedanceModel":
        """Build from plain data, checking the layout.

        ``line(*keys)``, when given, is the line of the value at ``keys`` in the file
        ``where`` (errors name it).

        Raises
        ------
        ModelFileError
            Naming what is missing or malformed.
        """
        def at(*keys: str) -> str:
            n = line(*keys) if line is not None else None
            return f"{where}:{n}" if n else where

        def known_keys(mapping: dict, valid: tuple[str, ...], what: str, *keys: str) -> None:
            for key in mapping:
                if key not in valid:
                    raise ModelFileError(
                        f"{at(*keys, key)}: unknown key {key!r} in {what}"
                        f"{suggest(str(key), valid)} Valid keys: {', '.join(valid)}")

        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ModelFileError(f"{where} is not a hapflow impedance model (expected "
                                 f"'format: {FORMAT}'); write one with 'hapflow identify'")
        known_keys(data, KEYS, "a model file")
        if data.get("version") != VERSION:
            raise ModelFileError(f"{at('version')}: unsupported model version {data.get('version')!r} "
                                 f"(this hapflow reads version {VERSION})")
        units = data.get("units", UNITS)
        if units != UNITS:
            raise ModelFileError(f"{at('units')}: a model file's values are in SI, 'units: "
                                 f"{{{', '.join(f'{k}: {v}' for k, v in UNITS.items())}}}' (or "
                                 f"leave 'units' out); convert the values instead, got {units!r}")
        for keys in (*((k,) for k in SECTIONS), *NESTED):
            entry = data
            for key in keys:
                entry = entry.get(key) if isinstance(entry, dict) else None
            if entry is not None and not isinstance(entry, dict):
                raise ModelFileError(f"{at(*keys)}: {'.'.join(keys)!r} must be a mapping (key: "
                                     f"value lines), got {entry!r}")
        method = data.get("method", "manual")
        if not isinstance(method, str):
            raise ModelFileError(f"{at('method')}: 'method' must be a name such as segmented, "
                                 f"ewls, poly or manual, got {method!r}")
        dirs = data.get("directions")
        if isinstance(dirs, dict):
            known_keys(dirs, ("positive", "negative"), "'directions'", "directions")
        if not isinstance(dirs, dict) or not {"positive", "negative"} <= set(dirs):
            raise ModelFileError(f"{at('directions')}: 'directions' must have 'positive' and "
                                 "'negative'")
        knots = {}
        for name in ("positive", "negative"):
            d = dirs[name]
            if isinstance(d, dict):
                known_keys(d, ("x", *PARAMS), f"direction {name!r}", "directions", name)
            missing = [k for k in ("x", *PARAMS) if not isinstance(d, dict) or k not in d]
            if missing:
                raise ModelFileError(f"{at('directions', name)}: direction {name!r} lacks "
                                     f"{', '.join(missing)}")
            try:
                knots[name] = Knots(*(np.asarray(d[k], dtype=np.float64) for k in ("x", *PARAMS)))
            except (TypeError, ValueError, ModelFileError) as exc:
                raise ModelFileError(f"{at('directions', name)}: direction {name!r}: {exc}"
                                     ) from None
        vb = data.get("v_blend", 1e-3)
        if isinstance(vb, bool) or not isinstance(vb, (int, float)) or not 0 <= vb <= 10:
            raise ModelFileError(f"{at('v_blend')}: v_blend must be a number from 0 to 10 (m/s), "
                                 f"got {vb!r}")
        poly = data.get("polynomial")
        if poly is not None:
            if not isinstance(poly, dict):
                raise ModelFileError(f"{at('polynomial')}: 'polynomial' must map coefficient "
                                     f"names to numbers, got {poly!r}")
            poly = {k: v for k, v in poly.items() if k != "equation"}
            try:
                poly = check_coefficients(poly)
            except ModelFileError as exc:
                raise ModelFileError(f"{at('polynomial')}: {exc}") from None
        return cls(knots["positive"], knots["negative"], float(vb), method,
                   *(dict(data.get(section) or {}) for section in SECTIONS), poly, where,
                   _key_lines(data, line) if line is not None else {})

    @classmethod
    def from_yaml(cls, text: str, where: str = "model") -> "ImpedanceModel":
        """Parse YAML text (safe loader, with the graph files' limits on nesting, aliases and
        number length, and no key twice); errors name ``where`` and the line."""
        from hapflow.errors import GraphError
        from hapflow.yamlio import Reader
        try:
            reader = Reader(text, where, max_nodes=MAX_VALUES)
            data = reader.plain()
        except GraphError as exc:
            raise ModelFileError(f"{exc.where}: not a valid model file: {exc.message}") from None
        return cls.from_dict(data, where, reader.line)

    @classmethod
    def load(cls, path: str | Path) -> "ImpedanceModel":
        """Read a model file.

        Raises
        ------
        ModelFileError
            If it cannot be read or is not a model file.
        """
        from hapflow.errors import GraphError
        from hapflow.yamlio import read_text
        path = Path(path)
        if not path.is_file():
            raise ModelFileError(f"cannot read model file {str(path)!r}: "
                                 f"{'it is a folder' if path.is_dir() else 'no such file'}")
        try:
            text = read_text(path, "model file")
        except GraphError as exc:
            raise ModelFileError(str(exc)) from None
        return cls.from_yaml(text, str(path))


def check_coefficients(coefficients: dict[str, Any]) -> dict[str, float]:
    """Polynomial coefficients as plain floats, their names checked (:data:`POLYNOMIAL`).

    Raises
    ------
    ModelFileError
        Naming a coefficient that is unknown or not a finite number.
    """
    out = {}
    for name, value in coefficients.items():
        if not (isinstance(name, str) and _COEFFICIENT.fullmatch(name)):
            raise ModelFileError(f"polynomial coefficient {name!r} is not one of m, b0..b9, "
                                 "k0..k9, F0, Fc")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) \
                or not math.isfinite(value):
            raise ModelFileError(f"polynomial coefficient {name!r} must be a finite number, "
                                 f"got {value!r}")
        out[name] = float(value)
    return out


def polynomial_table(coefficients: dict[str, float], v_blend: float) -> np.ndarray:
    """The flat table of :func:`polynomial_force` (see the module docstring)."""
    c = coefficients
    powers = {kind: [int(n[1:]) for n in c if n[0] == kind and n not in ("F0", "Fc")]
              for kind in "kb"}
    size = {kind: max(p, default=-1) + 1 for kind, p in powers.items()}
    table = np.zeros(6 + size["k"] + size["b"])
    table[:6] = v_blend, c.get("m", 0.0), c.get("F0", 0.0), c.get("Fc", 0.0), size["k"], size["b"]
    for kind, start in (("k", 6), ("b", 6 + size["k"])):
        for p in powers[kind]:
            table[start + p] = c[f"{kind}{p}"]
    return table


def nonpositive_mass(model: ImpedanceModel) -> str | None:
    """Why ``model`` cannot be driven by force, or ``None`` if its mass is positive at every
    knot of both directions: the direction and the position range (mm) where ``m <= 0``."""
    for name in ("positive", "negative"):
        kn = getattr(model, name)
        bad = np.flatnonzero(~(kn.m > 0))
        if bad.size:
            lo, hi = kn.x[bad.min()], kn.x[bad.max()]
            return (f"the model's {name}-direction mass is not positive between {lo * 1e3:.4g} "
                    f"and {hi * 1e3:.4g} mm (smallest {kn.m[bad].min():.4g} kg): it cannot be "
                    "driven by force (admittance); identify with better acceleration estimates "
                    "or more excitation, or fix the mass")
    return None


def _plain(value: Any) -> Any:
    """numpy scalars/arrays and tuples -> plain Python for safe_dump."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, Path):
        return str(value)
    return value


load = ImpedanceModel.load
