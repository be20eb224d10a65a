"""Chapter 6 of seed 004: the EKF on the reduced flexible manipulator, and the torque meters
that feed it.

:class:`FlexibleLinkEKF` estimates the 26 states ``w = (z, z')`` of the
13-dof configuration-dependent model of :mod:`hapflow.blocks.flexible` from
the measured motor torques (inputs of the model), the joint angles
``q1 q2 q3`` and the curvatures ``gamma1 gamma2 gamma4`` (eq. 6.6).  It
uses the model's own kernels (:func:`~hapflow.blocks.flexible.flex_matrices`,
:func:`~hapflow.blocks.flexible.flex_gauges`), no second copy:

- prediction: classical RK4 of eq. 6.3 over one sample (the thesis: RK4 at
  0.1 ms) with its matrices ``A = [[0, I], [-M~^-1 K~, -M~^-1 C~]]`` and
  ``B = [0; M~^-1 L~]`` taken at the start of the step -- what table 6.1
  counts for one state prediction -- and the torques held:
  ``w <- Phi w + Gamma u``, ``Phi`` the RK4 polynomial of ``A dt``.  At the
  step's start ``A w + B u`` is the model's rate exactly (tested);
- covariance: ``P <- Phi P Phi' + G Sigma_T G'``, the same ``Phi`` as the
  Jacobian.  As in eq. 6.3, the derivatives of ``M~, K~, C~, L~`` with
  respect to ``q`` are not part of it, and ``C~`` keeps eq. 6.3's form (its
  velocity-squared part enters once, not twice);
- process noise: the torque-meter noise only, through
  ``G = [dt^2/2 M~^-1 L~; dt M~^-1 L~]`` -- no tuned model-error term;
- correction: the measurement Jacobian is exact in the elastic coordinates
  (curvatures are linear in them) and neglects the curvature rows' change
  with ``q`` (they multiply elastic displacements of micrometres).

Assumptions where the thesis gives no number (section 6.2 names only the
torque noise): the angle noise is the quantisation of the sensors of
section 4.2 (MKD drives 1.534e-3 deg, the Parker's 4096 ppr encoder:
``step / sqrt(12)``); the curvature noise defaults to 1e-4 1/m, 1.5 micro-
strain on the 30 mm rods (strain = curvature x radius).  Correction, then
prediction, at every sample: the outputs are the prior estimate for the
current sample, time-aligned with the plant's outputs.
"""
from __future__ import annotations

import math

import numpy as np

from hapflow.block import Block
from hapflow.jit import njit, njit_noalloc
from hapflow.names import Derived
from hapflow.params import Live, Structural, between, nonnegative, positive
from hapflow.ports import In, Out
from hapflow.rng import normal

from .flexible import (D_SIZE, DH, DK, DM, DMR, DS, DSD, DYU, N, NG, NIN, NQ, NTQ, NU,
                       P_SIZE, PA, PB, PMKC, PMKR, PTQ, R, basis_transpose_times,
                       cholesky_solve, cholesky_substitute, flex_gauges, flex_matrices,
                       gauge_weight, matrix_product, packed_model,
                       transpose_times_t)

W = 2 * R                  # states of the reduced model (26)
NY = NQ + NG               # measurements: q1 q2 q3, gamma1 gamma2 gamma4
NC = W + NTQ               # columns of M~^-1 [K~ C~ L~]
NX = R + NQ                # columns solved for them (see state_matrix)
ENCODER_MKD = math.radians(1.534e-3) / math.sqrt(12.0)    # rad, MKD041/MKD090 drives
ENCODER_PARKER = 2.0 * math.pi / 4096 / math.sqrt(12.0)    # rad, 4096 ppr encoder


@njit_noalloc
def state_matrix(p, d):
    """``M~^-1 [-K~, -C~, L~]`` (R x NC, row-major at ``d[ab]``): the lower rows of eq. 6.3's
    state and input matrices at the state ``flex_matrices`` was last called with (its matrices,
    ``M~`` and the Cholesky factor of ``M~`` are in ``d``).

    With ``T = [S E]`` (``u = S q + E u_in``) and ``Y = T H = [S 0] + Yu`` (``Yu = E H_u``,
    zero in the q columns: the Guyan part of q is zero), eq. 6.3's matrices are
    ``K~ = Yu' K Yu`` and ``C~ = H' Cv H = Y' t`` with ``t = M (Sd H_q + alpha Yu) + beta K Yu``:
    ``C~ = [Y' M Sd, alpha M~ + beta Y' K Yu]`` by columns (q, the rest), and ``K~`` is
    ``Y' K Yu`` without its q rows.  One product ``Y' [M Sd, K Yu]`` over the entries of M,
    K and H that can be nonzero gives both (``Yu`` as ``flex_matrices`` left it in ``d``);
    ``L~ e_k = (S' e_k, 0)``.

    Solved for 16 columns, not 29: ``X = M~^-1 [E_q, -K~_e, -Y' M Sd]`` (``E_q`` the q columns
    of I, ``_e`` the elastic and modal columns).  The rest follows from ``Z = M~^-1 E_q``:
    ``M~^-1 L~ = Z S_t'`` (``S_t`` the rows of S at the torque dofs), and since
    ``Y' K Yu = K~ + E_q Q`` (``Q`` its q rows), ``-M~^-1 C~_e = -alpha I_e + beta (X_K - Z Q)``;
    the zero q columns of ``K~`` need no solve.
    """
    alpha, beta = p[PA], p[PB]
    for i in range(NU):                          # V = [M Sd, K Yu] (NU x R)
        for c in range(R):
            d[O_T + i * R + c] = 0.0
        for e in range(int(p[PMKR + i]), int(p[PMKR + i + 1])):
            k = int(p[PMKC + e])
            m, kv = d[DM + i * NU + k], d[DK + i * NU + k]
            for c in range(NQ):
                d[O_T + i * R + c] += m * d[DSD + k * NQ + c]
            for c in range(NQ, R):
                d[O_T + i * R + c] += kv * d[DYU + k * R + c]
    transpose_times_t(p, d, O_T, O_FORCES)
    basis_transpose_times(p, d, O_FORCES, O_S1, R)      # Y' V = H' T' V (R x R)
    for r in range(R):                                  # [E_q, -K~_e, -Y' M Sd] at t (R x NX)
        row = O_T + r * NX
        for c in range(NQ):
            d[row + c] = 1.0 if r == c else 0.0
            d[row + R + c] = -d[O_S1 + r * R + c]
        for c in range(NQ, R):
            d[row + c] = -d[O_S1 + r * R + c] if r >= NQ else 0.0
    cholesky_substitute(d, DMR, R, O_T, NX)
    for r in range(R):
        row, x = O_AB + r * NC, O_T + r * NX
        for c in range(NQ):
            d[row + c] = 0.0                                  # -K~: zero q columns
            d[row + R + c] = d[x + R + c]                     # -M~^-1 C~, q columns
        for c in range(NQ, R):
            zq = 0.0
            for a in range(NQ):
                zq += d[x + a] * d[O_S1 + a * R + c]
            d[row + c] = d[x + c]
            d[row + R + c] = beta * (d[x + c] - zq) - (alpha if r == c else 0.0)
        for k in range(NTQ):                                  # M~^-1 L~ = Z S_t'
            t = int(p[PTQ + k])
            v = 0.0
            for a in range(NQ):
                v += d[x + a] * d[DS + t * NQ + a]
            d[row + W + k] = v


@njit_noalloc
def _horner_step(d, ab, xo, to, c):
    """``T = I + c A X`` with ``A = [[0, I], [A21, A22]]`` (W x W at ``xo``, ``to``)."""
    for i in range(R):
        for j in range(W):
            d[to + i * W + j] = c * d[xo + (R + i) * W + j]
    matrix_product(d, ab, NC, 1, xo, to + R * W, R, W, W)
    for i in range(R * W):
        d[to + R * W + i] *= c
    for i in range(W):
        d[to + i * W + i] += 1.0


@njit_noalloc
def transition(d, ab, phi, tmp, dt):
    """``Phi = I + A dt + (A dt)^2/2 + (A dt)^3/6 + (A dt)^4/24`` (RK4's transition) at ``phi``.

    Horner's rule, ``X <- I + c A X`` for ``c = dt/4, dt/3, dt/2, dt`` from ``X = I``, with
    ``A = [[0, I], [F, G]]``: the first step needs no product, and the second only ``G`` times
    the lower rows of ``X1 = [[I, c I], [c F, I + c G]]`` (``F [I, c I]`` is ``[F, c F]``).
    """
    c = dt / 4.0
    for i in range(W * W):
        d[phi + i] = 0.0
    for i in range(R):
        d[phi + i * W + R + i] = c
        for j in range(W):
            d[phi + (R + i) * W + j] = c * d[ab + i * NC + j]
    for i in range(W):
        d[phi + i * W + i] += 1.0
    c2 = dt / 3.0
    for i in range(R):
        for j in range(W):
            d[tmp + i * W + j] = c2 * d[phi + (R + i) * W + j]
    matrix_product(d, ab + R, NC, 1, phi + R * W, tmp + R * W, R, R, W)
    for i in range(R):
        row = tmp + (R + i) * W
        for j in range(R):
            f = d[ab + i * NC + j]
            d[row + j] = c2 * (d[row + j] + f)
            d[row + R + j] = c2 * (d[row + R + j] + c * f)
    for i in range(W):
        d[tmp + i * W + i] += 1.0
    for i in range(W * W):
        d[phi + i] = d[tmp + i]
    for c in (dt / 2.0, dt):
        _horner_step(d, ab, phi, tmp, c)
        for i in range(W * W):
            d[phi + i] = d[tmp + i]


@njit_noalloc
def propagate(d, ab, phi, po, tmp, dt, torque_var):
    """``P <- Phi P Phi' + Gamma diag(torque_var) Gamma'`` in place at ``po``."""
    matrix_product(d, phi, W, 1, po, tmp, W, W, W)
    for i in range(W):
        for j in range(i, W):
            s = 0.0
            for k in range(W):
                s += d[tmp + i * W + k] * d[phi + j * W + k]
            for k in range(NTQ):
                gi = d[ab + (i % R) * NC + W + k] * (dt * dt / 2.0 if i < R else dt)
                gj = d[ab + (j % R) * NC + W + k] * (dt * dt / 2.0 if j < R else dt)
                s += torque_var[k] * gi * gj
            d[po + i * W + j] = s
            d[po + j * W + i] = s


@njit_noalloc
def measurement_rows(p, d, hm):
    """``dy/dw`` (NY x W at ``hm``) at the features and basis ``flex_gauges`` left in ``d``."""
    for i in range(NY * W):
        d[hm + i] = 0.0
    for a in range(NQ):
        d[hm + a * W + a] = 1.0
    for g in range(NG):
        for i in range(NIN):
            c = gauge_weight(p, d, g, i)
            if c != 0.0:
                for j in range(R):
                    d[hm + (NQ + g) * W + j] += c * d[DH + (NQ + i) * R + j]


class FlexibleLinkEKF(Block):
    """Extended Kalman filter on the 13-dof reduced flexible manipulator (seed 004, chapter 6).

    Discrete, at its sample time (the graph's rate unless ``rate`` is given;
    the thesis: 10 kHz).  Starts at rest at ``q*`` like
    :class:`~hapflow.blocks.flexible.FlexibleLink`, with the initial standard deviations below.  See the module notes for the
    algorithm and its assumptions.

    Ports
    -----
    t1, t2, t3 : in, (1,), N*m    measured motor torques (links 1, 2, 5)
    q          : in, (3,), rad    measured joint angles q1 q2 q3
    gamma      : in, (3,), 1/m    measured curvatures gamma1 gamma2 gamma4
    q_hat      : out, (3,), rad   estimated ERLS coordinates
    elastic    : out, (6,), m     estimated elastic masters x4 y5 x14 y15 x25 x26
    w          : out, (26,)       estimated state (z, z') of the reduced model
    """

    inputs = {"t1": In(1, unit="N*m", doc="measured torque on link 1"),
              "t2": In(1, unit="N*m", doc="measured torque on link 2"),
              "t3": In(1, unit="N*m", doc="measured torque on link 5"),
              "q": In(3, unit="rad", doc="measured q1 q2 q3"),
              "gamma": In(3, unit="1/m", doc="measured curvatures gamma1 gamma2 gamma4")}
    outputs = {"q_hat": Out(3, unit="rad", depends="state", doc="estimated q1 q2 q3"),
               "elastic": Out(6, unit="m", depends="state",
                              doc="estimated x4 y5 x14 y15 x25 x26"),
               "w": Out(W, depends="state", doc="estimated state (z, z')")}
    params = {"t1_std": Live(0.03, unit="N*m", check=nonnegative,
                             doc="torque noise on t1 (0.2 % of the 15 N m meter)"),
              "t2_std": Live(0.12, unit="N*m", check=nonnegative,
                             doc="torque noise on t2 (0.2 % of the 60 N m meter)"),
              "t3_std": Live(0.004, unit="N*m", check=nonnegative,
                             doc="torque noise on t3 (0.2 % of the 2 N m meter)"),
              "q12_std": Live(ENCODER_MKD, unit="rad", check=positive,
                              doc="noise of q1, q2 (MKD drive resolution / sqrt 12)"),
              "q3_std": Live(ENCODER_PARKER, unit="rad", check=positive,
                             doc="noise of q3 (4096 ppr / sqrt 12)"),
              "gamma_std": Live(1e-4, unit="1/m", check=positive, doc="curvature noise"),
              "q0_std": Live(1e-3, unit="rad", check=positive, doc="initial std of q"),
              "u0_std": Live(1e-5, unit="m", check=positive,
                             doc="initial std of the elastic and modal coordinates"),
              "v0_std": Live(1e-3, check=positive, doc="initial std of the rates (unit/s)"),
              "alpha": Live(1.0, unit="1/s", check=nonnegative, doc="model's Rayleigh alpha"),
              "beta": Live(2e-6, unit="s", check=nonnegative, doc="model's Rayleigh beta")}
    derived = {"dt": Derived(lambda b: b.sample_time, unit="s", doc="sample time"),
               "model": Derived(lambda b: packed_model(b.alpha, b.beta), size=P_SIZE,
                                doc="the reduced model (blocks/flexible.py)")}
    dstate = {"flex": D_SIZE, "w": W, "P": W * W, "phi": W * W, "tmp": W * W, "ab": R * NC,
              "s1": R * R, "t": NU * R, "v": N, "forces": N * R, "hm": NY * W, "pht": W * NY, "S": NY * NY, "kt": NY * W,
              "y": NY, "var": NTQ, "k": W, "stage": 2 * W, "torque": NTQ}

    initial_depends = ("q0_std", "u0_std", "v0_std")

    def initial_state(self):
        from hapflow.flex.manipulator import Q_STAR
        x, d, m = super().initial_state()
        D = self.D
        d[D.w:D.w + NQ] = Q_STAR
        std = np.concatenate([np.full(NQ, self.q0_std), np.full(R - NQ, self.u0_std),
                              np.full(R, self.v0_std)])
        d[D.P:D.P + W * W] = np.diag(std ** 2).ravel()
        return x, d, m

    @staticmethod
    @njit
    def output(t, x, d, m, p, t1, t2, t3, q, gamma, q_hat, elastic, w):
        for i in range(NQ):
            q_hat[i] = d[EKF_D.w + i]
        for i in range(6):
            elastic[i] = d[EKF_D.w + NQ + i]
        for i in range(W):
            w[i] = d[EKF_D.w + i]

    @staticmethod
    @njit
    def update(t, x, d, m, p, t1, t2, t3, q, gamma):
        d[EKF_D.torque], d[EKF_D.torque + 1], d[EKF_D.torque + 2] = t1[0], t2[0], t3[0]
        for i in range(NQ):
            d[EKF_D.y + i] = q[i]
            d[EKF_D.y + NQ + i] = gamma[i]
        ekf_step(p, d)


@njit
def ekf_step(p, d):
    """One EKF sample: correct with the measurements at ``d[y]``, predict over ``dt`` with the
    torques at ``d[torque]`` (``p``, ``d`` laid out as :class:`FlexibleLinkEKF`'s)."""
    model = p[EKF.model:]
    correct(p, model, d)
    predict(p, model, d)


@njit_noalloc
def _measurement_times(d, bo, co, cols):
    """``C = Hm B`` (``B`` W x cols at ``bo``, ``C`` NY x cols at ``co``) over the entries of
    ``Hm`` that can be nonzero: the angle rows pick ``q``, the curvature rows depend on the
    elastic coordinates only (not on ``q`` or ``z'``).  The skipped products are zeros."""
    for a in range(NQ):
        for j in range(cols):
            d[co + a * cols + j] = d[bo + a * cols + j]
    matrix_product(d, O_HM + NQ * W + NQ, W, 1, bo + NQ * cols, co + NQ * cols, NG, R - NQ,
                   cols)


@njit_noalloc
def correct(p, model, d):
    """Kalman update of ``d[w]``, ``d[P]`` with the measurements ``d[y]``."""
    w = d[O_W:O_W + W]
    e = d[O_V:O_V + NY]                             # innovation (scratch in v)
    flex_gauges(model, w, d, e[NQ:])
    measurement_rows(model, d, O_HM)
    for a in range(NQ):
        e[a] = d[O_Y + a] - w[a]
    for g in range(NG):
        e[NQ + g] = d[O_Y + NQ + g] - e[NQ + g]
    _measurement_times(d, O_P, O_KT, W)             # Hm P (P symmetric: (P Hm')')
    for i in range(W):
        for a in range(NY):
            d[O_PHT + i * NY + a] = d[O_KT + a * W + i]
    _measurement_times(d, O_PHT, O_S, NY)
    d[O_S] += p[EKF.q12_std] ** 2
    d[O_S + NY + 1] += p[EKF.q12_std] ** 2
    d[O_S + 2 * NY + 2] += p[EKF.q3_std] ** 2
    for g in range(NG):
        d[O_S + (NQ + g) * (NY + 1)] += p[EKF.gamma_std] ** 2
    cholesky_solve(d, O_S, NY, O_KT, W)             # kt = S^-1 Hm P = K'
    for i in range(W):
        s = 0.0
        for a in range(NY):
            s += d[O_KT + a * W + i] * e[a]
        w[i] += s
    for i in range(W):
        for j in range(i, W):
            s = 0.0
            for a in range(NY):
                s += d[O_PHT + i * NY + a] * d[O_KT + a * W + j]
            v = 0.5 * (d[O_P + i * W + j] + d[O_P + j * W + i]) - s
            d[O_P + i * W + j] = v
            d[O_P + j * W + i] = v


@njit_noalloc
def _input_response(d, ab, b, v, dt):
    """``dt (I + A dt/2 + (A dt)^2/6 + (A dt)^3/24) b`` into ``d[v:]`` (RK4's input response);
    ``b`` is nonzero in its lower half only."""
    for i in range(W):
        d[v + i] = d[b + i]
    for c in (dt / 4.0, dt / 3.0, dt / 2.0):
        for i in range(R):                           # lower half first: it reads the old upper
            s = 0.0
            for k in range(W):
                s += d[ab + i * NC + k] * d[v + k]
            d[v + W + i] = d[b + R + i] + c * s      # scratch after v
        for i in range(R):
            d[v + i] = d[b + i] + c * d[v + R + i]
        for i in range(R):
            d[v + R + i] = d[v + W + i]
    for i in range(W):
        d[v + i] *= dt


@njit_noalloc
def predict(p, model, d):
    """State and covariance one sample ahead, torques ``d[torque]`` held: RK4 of eq. 6.3 with
    its matrices taken at the step's start (table 6.1's prediction), ``w <- Phi w + Gamma u``."""
    dt = p[EKF.dt]
    w, tq = d[O_W:O_W + W], d[O_TORQUE:O_TORQUE + NTQ]
    flex_matrices(model, w, d)
    state_matrix(model, d)
    transition(d, O_AB, O_PHI, O_TMP, dt)
    for i in range(W):                               # b = (0, M~^-1 L~ u)
        d[O_K + i] = 0.0
    for i in range(R):
        s = 0.0
        for k in range(NTQ):
            s += d[O_AB + i * NC + W + k] * tq[k]
        d[O_K + R + i] = s
    _input_response(d, O_AB, O_K, O_STAGE, dt)
    for i in range(W):
        s = d[O_STAGE + i]
        for k in range(W):
            s += d[O_PHI + i * W + k] * w[k]
        d[O_TMP + i] = s
    for i in range(W):
        w[i] = d[O_TMP + i]
    var = d[O_VAR:O_VAR + NTQ]
    var[0], var[1], var[2] = p[EKF.t1_std] ** 2, p[EKF.t2_std] ** 2, p[EKF.t3_std] ** 2
    propagate(d, O_AB, O_PHI, O_P, O_TMP, dt, var)


class TorqueMeter(Block):
    """A torque meter read through an ADC: Gaussian noise, then quantisation (section 6.2).

    ``y = step * round((u + n) / step)``, ``n`` of standard deviation
    ``noise * full_scale`` drawn once per sample from the block's stream,
    ``step = 2 full_scale / 2^adc_bits``: the meter's full scale spans the
    ADC's input range (the thesis: +-10 V), codes clip at ``-full_scale``
    and ``full_scale - step``.

    Ports
    -----
    u : in, (1,), N*m    true torque
    y : out, (1,), N*m   measured torque
    """

    inputs = {"u": In(1, unit="N*m", doc="true torque")}
    outputs = {"y": Out(1, unit="N*m", doc="measured torque")}
    params = {"full_scale": Live(15.0, unit="N*m", check=positive, doc="meter full scale"),
              "noise": Live(0.002, check=nonnegative, doc="noise std as a fraction of full scale"),
              "adc_bits": Structural(24, kind="int", check=between(1, 48), doc="ADC resolution")}
    derived = {"step": Derived(lambda b: 2.0 * b.full_scale / 2.0 ** b.adc_bits, unit="N*m",
                               doc="ADC step in torque")}
    dstate = ("sample",)
    random_streams = 1

    @staticmethod
    @njit
    def init(x, d, m, p):
        d[METER_D.sample] = p[METER.noise] * p[METER.full_scale] * normal(m, 0)

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        step = p[METER.step]
        half = p[METER.full_scale] / step
        code = min(max(math.floor((u[0] + d[METER_D.sample]) / step + 0.5), -half), half - 1.0)
        y[0] = code * step

    @staticmethod
    @njit
    def update(t, x, d, m, p, u):
        d[METER_D.sample] = p[METER.noise] * p[METER.full_scale] * normal(m, 0)


# the offsets their kernels name
EKF, EKF_D = FlexibleLinkEKF.P, FlexibleLinkEKF.D
METER, METER_D = TorqueMeter.P, TorqueMeter.D
# the EKF kernels' offsets in d as plain ints: numba folds an int global into the code
# (constant loop bounds and addresses, vectorised), not a namedtuple's attribute
(O_P, O_S, O_AB, O_FORCES, O_HM, O_K, O_KT, O_PHI, O_PHT, O_S1, O_STAGE, O_T, O_TMP,
 O_TORQUE, O_V, O_VAR, O_W, O_Y) = (EKF_D.P, EKF_D.S, EKF_D.ab, EKF_D.forces, EKF_D.hm,
                                    EKF_D.k, EKF_D.kt, EKF_D.phi, EKF_D.pht, EKF_D.s1,
                                    EKF_D.stage, EKF_D.t, EKF_D.tmp, EKF_D.torque, EKF_D.v,
                                    EKF_D.var, EKF_D.w, EKF_D.y)
