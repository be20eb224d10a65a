"""State estimation: linear and unscented Kalman filters (held blocks).

Both filters run predict-then-update once per sample hit, on flat row-major
matrices kept in the parameter vector ``p`` (model and noise matrices,
initial state) and in the discrete state ``d`` (estimate, covariance and the
work matrices of one step, so the kernels never allocate).  ``output``
computes the whole step from the state left by the previous sample and the
current measurement (direct feedthrough: the estimate at sample ``k`` already
includes ``z[k]``), writes the posterior into work entries of ``d``, and
``update`` copies it into the state.  Sizes are structural; the matrices are
live (same sizes only) and checked at build time and whenever they are set.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from hapflow.block import Block, ParamError
from hapflow.errors import GraphError
from hapflow.params import Live, Structural, at_least, nonnegative, one_of, positive
from hapflow.ports import In, Out

MODELS = ("linear", "pendulum")


# ------------------------------------------------------------------ matrix helpers
@njit
def _mm(a, ao, b, bo, c, co, r, k, q, bt, acc):
    """``c[r x q] (+)= a[r x k] @ b[k x q]`` (``b`` stored as ``q x k`` and transposed if ``bt``).

    Every matrix is flat row-major at an offset (``ao``, ``bo``, ``co``) of
    its array; the result is added to ``c`` when ``acc`` is true.
    """
    for i in range(r):
        for j in range(q):
            s = 0.0
            for t in range(k):
                bv = b[bo + j * k + t] if bt else b[bo + t * q + j]
                s += a[ao + i * k + t] * bv
            if acc:
                c[co + i * q + j] += s
            else:
                c[co + i * q + j] = s


@njit
def _chol(a, ao, scale, c, co, n):
    """Lower Cholesky factor of ``scale * a[n x n]`` into ``c`` (upper part zeroed).

    A pivot that is not positive (the matrix is not positive definite) gives
    NaN, which then propagates to the estimate instead of raising.
    """
    for i in range(n * n):
        c[co + i] = 0.0
    for j in range(n):
        s = scale * a[ao + j * n + j]
        for k in range(j):
            s -= c[co + j * n + k] * c[co + j * n + k]
        ljj = math.sqrt(s) if s > 0.0 else math.nan
        c[co + j * n + j] = ljj
        for i in range(j + 1, n):
            s = scale * a[ao + i * n + j]
            for k in range(j):
                s -= c[co + i * n + k] * c[co + j * n + k]
            c[co + i * n + j] = s / ljj


@njit
def _right_solve(lf, lo, m, k, ko, rows):
    """``k[rows x m] <- k S^-1`` in place, ``S = L L'`` given its Cholesky factor ``L`` at ``lf[lo]``.

    Row by row (``S`` is symmetric): solve ``L w = k_i``, then ``L' v = w``.
    """
    for i in range(rows):
        r = ko + i * m
        for j in range(m):
            s = k[r + j]
            for t in range(j):
                s -= lf[lo + j * m + t] * k[r + t]
            k[r + j] = s / lf[lo + j * m + j]
        for j in range(m - 1, -1, -1):
            s = k[r + j]
            for t in range(j + 1, m):
                s -= lf[lo + t * m + j] * k[r + t]
            k[r + j] = s / lf[lo + j * m + j]


# ------------------------------------------------------------------ parameter checks
def _check_sizes(block: Block, names: dict[str, tuple[int, str]]) -> None:
    """Raise ParamError if a matrix parameter has the wrong number of elements."""
    for name, (size, shape) in names.items():
        value = block.values[name]
        if value is None:
            raise ParamError(name, f"parameter {name!r} ({shape}) is required for "
                                   f"{type(block).__name__} with these settings")
        if len(value) != size:
            raise ParamError(name, f"parameter {name!r} must be a flat row-major list of "
                                   f"{shape} = {size} numbers (states n={block.states}, "
                                   f"measurements m={block.measurements}, "
                                   f"controls l={block.controls}), got {len(value)}")


def _check_cov(block: Block, name: str, k: int, definite: bool) -> None:
    """Raise ParamError unless ``name`` (k x k) is symmetric and PSD (PD if ``definite``)."""
    mat = np.asarray(block.values[name], dtype=np.float64).reshape(k, k)
    scale = max(1.0, float(np.max(np.abs(mat))))
    if not np.allclose(mat, mat.T, rtol=0.0, atol=1e-12 * scale):
        raise ParamError(name, f"parameter {name!r} must be a symmetric matrix, got {mat.tolist()}")
    low = float(np.min(np.linalg.eigvalsh(mat)))
    if definite and low <= 0.0:
        raise ParamError(name, f"parameter {name!r} must be positive definite "
                               f"(smallest eigenvalue {low:g})")
    if not definite and low < -1e-12 * scale:
        raise ParamError(name, f"parameter {name!r} must be positive semi-definite "
                               f"(smallest eigenvalue {low:g})")


_MAT = dict(kind="floats", default=None)
COMMON = {
    "states": Structural(2, kind="int", check=at_least(1), doc="number of states n"),
    "measurements": Structural(1, kind="int", check=at_least(1), doc="number of measurements m"),
    "controls": Structural(0, kind="int", check=at_least(0),
                           doc="size l of the control input u (0: no u port)"),
    "A": Live(doc="state transition x[k+1] = A x[k] + B u[k], n x n row-major", **_MAT),
    "B": Live(doc="control matrix, n x l row-major (needed when controls > 0)", **_MAT),
    "H": Live(doc="measurement matrix z = H x, m x n row-major", **_MAT),
    "Q": Live(doc="process noise covariance, n x n row-major (units of x squared)", **_MAT),
    "R": Live(doc="measurement noise covariance, m x m row-major (units of z squared)", **_MAT),
    "x0": Live(doc="initial state estimate, n values (default zeros)", **_MAT),
    "P0": Live(doc="initial covariance, n x n row-major (default identity)", **_MAT),
}


class _Estimator:
    """Shared configuration of the filters (a mixin: not itself a block type)."""

    linear_model = True

    def _matrix_sizes(self) -> dict[str, tuple[int, str]]:
        n, m, l = self.states, self.measurements, self.controls
        sizes = {"Q": (n * n, "n x n"), "R": (m * m, "m x m")}
        if self.linear_model:
            sizes["A"] = (n * n, "n x n")
            sizes["H"] = (m * n, "m x n")
        if l > 0:
            sizes["B"] = (n * l, "n x l")
        for name, size in (("x0", (n, "n")), ("P0", (n * n, "n x n"))):
            if self.values[name] is not None:
                sizes[name] = size
        return sizes

    def check_matrices(self) -> None:
        """Check every matrix parameter's size, symmetry and definiteness.

        Raises
        ------
        ParamError
            Naming the offending parameter.
        """
        _check_sizes(self, self._matrix_sizes())
        _check_cov(self, "Q", self.states, False)
        _check_cov(self, "R", self.measurements, True)
        if self.values["P0"] is not None:
            _check_cov(self, "P0", self.states, False)

    def _ports(self) -> None:
        n, m, l = self.states, self.measurements, self.controls
        self.inputs = {"z": In(m, doc="measurement")}
        if l > 0:
            self.inputs["u"] = In(l, doc="control input")
        self.outputs = {"x_hat": Out(n, doc="posterior state estimate x[k|k]"),
                        "P_diag": Out(n, doc="diagonal of the posterior covariance P[k|k]"),
                        "innovation": Out(m, unit="=z", doc="z[k] - H x[k|k-1]")}

    def _flat(self, name: str, size: int, default: np.ndarray | None = None) -> np.ndarray:
        value = self.values[name]
        if value is None:
            return np.zeros(size) if default is None else default.ravel()
        return np.asarray(value, dtype=np.float64)

    def _model_vector(self) -> np.ndarray:
        """``[A, B, H, Q, R, x0, P0]`` flat (zeros for an unused A, B, H)."""
        n, m, l = self.states, self.measurements, self.controls
        return np.concatenate([self._flat("A", n * n), self._flat("B", n * l),
                               self._flat("H", m * n), self._flat("Q", n * n),
                               self._flat("R", m * m), self._flat("x0", n),
                               self._flat("P0", n * n, np.eye(n))])

    def kernels(self):
        if self.controls > 0:
            cls = type(self)
            return {"output": cls._output_u, "update": cls._update_u, "init": cls.init}
        return Block.kernels(self)


# ------------------------------------------------------------------ linear Kalman filter
@njit
def _kf_step(d, p, z, u):
    n, m, l = int(p[0]), int(p[1]), int(p[2])
    pa = 3
    pb = pa + n * n
    ph = pb + n * l
    pq = ph + m * n
    pr = pq + n * n
    X, P = 0, n
    XN = P + n * n
    PN = XN + n
    XP = PN + n * n
    PP = XP + n
    Y = PP + n * n
    S = Y + m
    LS = S + m * m
    PHT = LS + m * m
    K = PHT + n * m
    IKH = K + n * m
    T = IKH + n * n
    # predict: xp = A x + B u, Pp = A P A' + Q
    _mm(p, pa, d, X, d, XP, n, n, 1, False, False)
    if l > 0:
        _mm(p, pb, u, 0, d, XP, n, l, 1, False, True)
    _mm(p, pa, d, P, d, T, n, n, n, False, False)
    _mm(d, T, p, pa, d, PP, n, n, n, True, False)
    for i in range(n * n):
        d[PP + i] += p[pq + i]
    # update: y = z - H xp, S = H Pp H' + R, K = Pp H' S^-1
    for i in range(m):
        s = 0.0
        for j in range(n):
            s += p[ph + i * n + j] * d[XP + j]
        d[Y + i] = z[i] - s
    _mm(d, PP, p, ph, d, PHT, n, n, m, True, False)
    _mm(p, ph, d, PHT, d, S, m, n, m, False, False)
    for i in range(m * m):
        d[S + i] += p[pr + i]
    _chol(d, S, 1.0, d, LS, m)
    for i in range(n * m):
        d[K + i] = d[PHT + i]
    _right_solve(d, LS, m, d, K, n)
    # x = xp + K y;  Joseph form  P = (I - K H) Pp (I - K H)' + K R K'
    _mm(d, K, d, Y, d, XN, n, m, 1, False, False)
    for i in range(n):
        d[XN + i] += d[XP + i]
    _mm(d, K, p, ph, d, IKH, n, m, n, False, False)
    for i in range(n):
        for j in range(n):
            d[IKH + i * n + j] = (1.0 if i == j else 0.0) - d[IKH + i * n + j]
    _mm(d, IKH, d, PP, d, T, n, n, n, False, False)
    _mm(d, T, d, IKH, d, PN, n, n, n, True, False)
    _mm(d, K, p, pr, d, PHT, n, m, m, False, False)
    _mm(d, PHT, d, K, d, PN, n, m, n, True, True)
    return XN, PN, Y


@njit
def _commit(d, p, n):
    """Copy the posterior work entries (after x, P) into the state."""
    for i in range(n + n * n):
        d[i] = d[n + n * n + i]


@njit
def _write(d, n, m, xn, pn, y, x_hat, P_diag, innovation):
    for i in range(n):
        x_hat[i] = d[xn + i]
        P_diag[i] = d[pn + i * n + i]
    for i in range(m):
        innovation[i] = d[y + i]


@njit
def _init_from(d, p, p0, n):
    """``x = x0``, ``P = P0`` from ``p[p0:]``."""
    for i in range(n + n * n):
        d[i] = p[p0 + i]


class KalmanFilter(_Estimator, Block):
    """Linear discrete Kalman filter (predict, then update with Joseph-form covariance).

    Model, with ``w ~ N(0, Q)`` and ``v ~ N(0, R)``::

        x[k] = A x[k-1] + B u[k] + w        z[k] = H x[k] + v

    At each sample hit ``k``, from the posterior ``(x, P)`` of sample ``k-1``
    (``(x0, P0)`` before the first)::

        xp = A x + B u[k]              Pp = A P A' + Q
        y  = z[k] - H xp               S  = H Pp H' + R
        K  = Pp H' S^-1                (S^-1 by its Cholesky factor)
        x  = xp + K y                  P  = (I - K H) Pp (I - K H)' + K R K'

    which is ``filterpy.kalman.KalmanFilter``'s ``predict(u)`` then
    ``update(z)``.  The Joseph form keeps ``P`` symmetric and positive
    semi-definite under rounding.  ``u`` is the control applied over the
    interval ending at sample ``k``.  Matrices are flat row-major lists; the
    units of ``Q`` and ``R`` are those of ``x`` and ``z`` squared.  A held
    block with direct feedthrough from ``z`` and ``u``.

    Ports
    -----
    z          : in, (m,), any unit        measurement
    u          : in, (l,), any unit        control input (only when ``controls`` > 0)
    x_hat      : out, (n,), any unit       posterior estimate x[k|k]
    P_diag     : out, (n,), any unit       diagonal of P[k|k] (variances, units of x squared)
    innovation : out, (m,), unit of z      z[k] - H x[k|k-1]
    """

    params = dict(COMMON)

    def configure(self) -> None:
        self.check_matrices()
        n, m = self.states, self.measurements
        self.dstate = 2 * (n + n * n) + n + n * n + m + 2 * m * m + 2 * n * m + 2 * n * n
        self._ports()

    def pack(self) -> np.ndarray:
        self.check_matrices()
        head = np.array([self.states, self.measurements, self.controls], dtype=np.float64)
        return np.concatenate([head, self._model_vector()])

    @staticmethod
    @njit
    def init(x, d, m, p):
        n, nm, nl = int(p[0]), int(p[1]), int(p[2])
        _init_from(d, p, 3 + 2 * n * n + n * nl + nm * n + nm * nm, n)

    @staticmethod
    @njit
    def output(t, x, d, m, p, z, x_hat, P_diag, innovation):
        xn, pn, y = _kf_step(d, p, z, z)
        _write(d, x_hat.size, z.size, xn, pn, y, x_hat, P_diag, innovation)

    @staticmethod
    @njit
    def update(t, x, d, m, p, z):
        _commit(d, p, int(p[0]))

    @staticmethod
    @njit
    def _output_u(t, x, d, m, p, z, u, x_hat, P_diag, innovation):
        xn, pn, y = _kf_step(d, p, z, u)
        _write(d, x_hat.size, z.size, xn, pn, y, x_hat, P_diag, innovation)

    @staticmethod
    @njit
    def _update_u(t, x, d, m, p, z, u):
        _commit(d, p, int(p[0]))


# ------------------------------------------------------------------ unscented Kalman filter
# header of the UKF parameter vector
_N, _M, _L, _MODEL, _DT, _G, _LEN, _C, _LAMN = range(9)
_HEAD = 9


@njit
def _fx(model, s, so, out, oo, p, pa, pb, n, l, u):
    """Propagate the state ``s[so:so+n]`` over one sample into ``out[oo:]``."""
    if model == 1:                      # pendulum, explicit Euler
        th = s[so]
        om = s[so + 1]
        out[oo] = th + p[_DT] * om
        out[oo + 1] = om + p[_DT] * (-p[_G] / p[_LEN] * math.sin(th) - p[_C] * om)
    else:
        _mm(p, pa, s, so, out, oo, n, n, 1, False, False)
    if l > 0:
        _mm(p, pb, u, 0, out, oo, n, l, 1, False, True)


@njit
def _hx(model, s, so, out, oo, p, ph, n, m):
    """Measurement of the state ``s[so:so+n]`` into ``out[oo:oo+m]``."""
    if model == 1:
        out[oo] = s[so]
    else:
        _mm(p, ph, s, so, out, oo, m, n, 1, False, False)


@njit
def _sigmas(d, xo, po, lo, so, n, lamn):
    """Scaled symmetric sigma points of ``(x, P)`` (rows of ``d[so:]``), Merwe's order:
    ``x``, then ``x + col_k(L)``, then ``x - col_k(L)``, ``L L' = (n + lambda) P``."""
    _chol(d, po, lamn, d, lo, n)
    for j in range(n):
        d[so + j] = d[xo + j]
    for k in range(n):
        for j in range(n):
            c = d[lo + j * n + k]
            d[so + (1 + k) * n + j] = d[xo + j] + c
            d[so + (1 + n + k) * n + j] = d[xo + j] - c


@njit
def _weighted_mean(d, so, dim, ns, p, pw, mo):
    """``d[mo:mo+dim]`` = sum_i W_i chi_i over the ``ns`` points of ``dim`` at ``d[so:]``."""
    for j in range(dim):
        s = 0.0
        for i in range(ns):
            s += p[pw + i] * d[so + i * dim + j]
        d[mo + j] = s


@njit
def _weighted_cov(d, ao, am, na, bo, bm, nb, ns, p, pw, co, noise):
    """``d[co:]`` = sum_i W_i (a_i - a_mean)(b_i - b_mean)' (na x nb), plus the matrix
    ``p[noise:]`` when ``noise >= 0`` (Q or R)."""
    for a in range(na):
        for b in range(nb):
            s = 0.0
            for i in range(ns):
                s += p[pw + i] * (d[ao + i * na + a] - d[am + a]) * (d[bo + i * nb + b] - d[bm + b])
            d[co + a * nb + b] = s + p[noise + a * nb + b] if noise >= 0 else s


@njit
def _ukf_step(d, p, z, u):
    n, m, l = int(p[_N]), int(p[_M]), int(p[_L])
    model = int(p[_MODEL])
    ns = 2 * n + 1
    pwm = _HEAD
    pwc = pwm + ns
    pa = pwc + ns
    pb = pa + n * n
    ph = pb + n * l
    pq = ph + m * n
    pr = pq + n * n
    X, P = 0, n
    XN = P + n * n
    PN = XN + n
    SIG = PN + n * n
    SF = SIG + ns * n
    SH = SF + ns * n
    LC = SH + ns * m
    XP = LC + n * n
    PP = XP + n
    ZP = PP + n * n
    S = ZP + m
    LS = S + m * m
    PXZ = LS + m * m
    K = PXZ + n * m
    Y = K + n * m
    T = Y + m
    # predict: propagate the sigma points of (x, P) and take their weighted moments
    _sigmas(d, X, P, LC, SIG, n, p[_LAMN])
    for i in range(ns):
        _fx(model, d, SIG + i * n, d, SF + i * n, p, pa, pb, n, l, u)
    _weighted_mean(d, SF, n, ns, p, pwm, XP)
    _weighted_cov(d, SF, XP, n, SF, XP, n, ns, p, pwc, PP, pq)
    # update: fresh sigma points of the prior through the measurement
    _sigmas(d, XP, PP, LC, SIG, n, p[_LAMN])
    for i in range(ns):
        _hx(model, d, SIG + i * n, d, SH + i * m, p, ph, n, m)
    _weighted_mean(d, SH, m, ns, p, pwm, ZP)
    _weighted_cov(d, SH, ZP, m, SH, ZP, m, ns, p, pwc, S, pr)
    _weighted_cov(d, SIG, XP, n, SH, ZP, m, ns, p, pwc, PXZ, -1)
    _chol(d, S, 1.0, d, LS, m)
    for i in range(n * m):
        d[K + i] = d[PXZ + i]
    _right_solve(d, LS, m, d, K, n)
    for i in range(m):
        d[Y + i] = z[i] - d[ZP + i]
    # x = xp + K y,  P = Pp - K S K'
    _mm(d, K, d, Y, d, XN, n, m, 1, False, False)
    for i in range(n):
        d[XN + i] += d[XP + i]
    _mm(d, K, d, S, d, T, n, m, m, False, False)
    _mm(d, T, d, K, d, PN, n, m, n, True, False)
    for i in range(n * n):
        d[PN + i] = d[PP + i] - d[PN + i]
    return XN, PN, Y


class UnscentedKalmanFilter(_Estimator, Block):
    """Unscented Kalman filter with scaled symmetric sigma points (Merwe).

    Models (``w ~ N(0, Q)``, ``v ~ N(0, R)``, ``Ts`` the block's sample time)::

        linear:    x[k] = A x[k-1] + B u[k] + w,           z = H x + v
        pendulum:  theta[k] = theta + Ts omega
                   omega[k] = omega + Ts (-g/L sin(theta) - c omega)   (+ B u[k])
                   z = theta + v                          (n = 2, m = 1)

    the pendulum being ``theta' = omega``, ``omega' = -g/L sin(theta) - c omega``
    discretised by explicit Euler; its state is ``[theta (rad), omega (rad/s)]``.

    Sigma points: ``lambda = alpha^2 (n + kappa) - n``, ``L L' = (n + lambda) P``
    (Cholesky, lower), ``chi = [x, x + L[:, k], x - L[:, k]]``, weights
    ``Wm0 = lambda / (n + lambda)``, ``Wc0 = Wm0 + 1 - alpha^2 + beta``,
    ``Wm_i = Wc_i = 1 / (2 (n + lambda))`` (computed at build time).  At each
    sample hit: propagate the sigma points of the last posterior through the
    model, ``xp, Pp`` their weighted mean and covariance plus ``Q``; draw new
    sigma points from ``(xp, Pp)``, pass them through the measurement, ``zp, S``
    their mean and covariance plus ``R``, ``Pxz`` the cross covariance;
    ``K = Pxz S^-1``, ``x = xp + K (z - zp)``, ``P = Pp - K S K'``.  This is
    ``filterpy.kalman.UnscentedKalmanFilter`` with ``MerweScaledSigmaPoints``,
    ``predict()`` then ``update(z)``.  A held block with direct feedthrough.

    Ports
    -----
    z          : in, (m,), any unit        measurement (rad for the pendulum)
    u          : in, (l,), any unit        control input (only when ``controls`` > 0)
    x_hat      : out, (n,), any unit       posterior estimate x[k|k]
    P_diag     : out, (n,), any unit       diagonal of P[k|k] (variances, units of x squared)
    innovation : out, (m,), unit of z      z[k] - zp (predicted measurement mean)
    """

    params = dict(COMMON)
    params.update({
        "model": Structural("linear", kind="str", check=one_of(*MODELS),
                            doc="process/measurement model: linear (A, B, H) or pendulum"),
        "alpha": Live(1e-3, check=positive, doc="sigma-point spread"),
        "beta": Live(2.0, check=nonnegative, doc="prior knowledge of the distribution (2: Gaussian)"),
        "kappa": Live(0.0, doc="secondary scaling (often 0 or 3 - n)"),
        "g": Live(9.81, unit="m/s^2", check=positive, doc="pendulum: gravity"),
        "L": Live(1.0, unit="m", check=positive, doc="pendulum: length"),
        "c": Live(0.0, unit="1/s", check=nonnegative, doc="pendulum: viscous damping rate"),
    })

    def configure(self) -> None:
        self.linear_model = self.model == "linear"
        if self.model == "pendulum":
            for name, want in (("states", 2), ("measurements", 1)):
                if self.values[name] != want:
                    raise ParamError(name, f"parameter {name!r} must be {want} for model "
                                           f"'pendulum' (state [theta, omega], measurement "
                                           f"theta), got {self.values[name]}")
        self.check_matrices()
        self._weights()
        n, m = self.states, self.measurements
        ns = 2 * n + 1
        self.dstate = (2 * (n + n * n) + 2 * ns * n + ns * m + n * n + n + n * n + m
                       + 2 * m * m + 2 * n * m + m + n * m)
        self._ports()

    def _weights(self) -> tuple[float, np.ndarray, np.ndarray]:
        """``(n + lambda, Wm, Wc)`` of the scaled sigma points."""
        n = self.states
        lam = self.alpha ** 2 * (n + self.kappa) - n
        if not n + lam > 0.0:
            raise ParamError("kappa", f"alpha^2 (n + kappa) = {n + lam:g} must be > 0 "
                                      f"(alpha={self.alpha:g}, kappa={self.kappa:g}, n={n})")
        wm = np.full(2 * n + 1, 0.5 / (n + lam))
        wc = wm.copy()
        wm[0] = lam / (n + lam)
        wc[0] = lam / (n + lam) + (1.0 - self.alpha ** 2 + self.beta)
        return n + lam, wm, wc

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance weights ``(Wm, Wc)`` of the ``2 n + 1`` sigma points."""
        _, wm, wc = self._weights()
        return wm, wc

    def pack(self) -> np.ndarray:
        if self.sample_time is None:
            raise GraphError("UnscentedKalmanFilter: the sample time is not known until the "
                             "block is added to a graph")
        self.check_matrices()
        lamn, wm, wc = self._weights()
        head = np.array([self.states, self.measurements, self.controls,
                         MODELS.index(self.model), self.sample_time, self.g, self.L, self.c,
                         lamn], dtype=np.float64)
        return np.concatenate([head, wm, wc, self._model_vector()])

    @staticmethod
    @njit
    def init(x, d, m, p):
        n, nm, nl = int(p[_N]), int(p[_M]), int(p[_L])
        _init_from(d, p, _HEAD + 2 * (2 * n + 1) + 2 * n * n + n * nl + nm * n + nm * nm, n)

    @staticmethod
    @njit
    def output(t, x, d, m, p, z, x_hat, P_diag, innovation):
        xn, pn, y = _ukf_step(d, p, z, z)
        _write(d, x_hat.size, z.size, xn, pn, y, x_hat, P_diag, innovation)

    @staticmethod
    @njit
    def update(t, x, d, m, p, z):
        _commit(d, p, int(p[_N]))

    @staticmethod
    @njit
    def _output_u(t, x, d, m, p, z, u, x_hat, P_diag, innovation):
        xn, pn, y = _ukf_step(d, p, z, u)
        _write(d, x_hat.size, z.size, xn, pn, y, x_hat, P_diag, innovation)

    @staticmethod
    @njit
    def _update_u(t, x, d, m, p, z, u):
        _commit(d, p, int(p[_N]))
