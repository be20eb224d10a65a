"""The reduced-model EKF of seed 004 chapter 6 (blocks/flexible_ekf.py): its linearisation
against the model, its torque meters, and graphs/flexible_link_ekf.yaml over the thesis's 3 s."""
import importlib
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg
from scipy.signal import find_peaks

import hapflow
from hapflow import registry
from hapflow.blocks.flexible import D_SIZE, R, flex_rate, packed_model
from hapflow.blocks.flexible_ekf import (NC, W, FlexibleLinkEKF, TorqueMeter, ekf_step,
                                         state_matrix)
from hapflow.blocks.sources import Constant
from hapflow.flex import expansion
from hapflow.flex.erls_reduction import reduce_erls
from hapflow.flex.manipulator import MASTERS, Q_STAR, TABLE_5_5, gauge_rows, manipulator
from hapflow.flex.state_space import expand

GRAPH = Path(__file__).resolve().parents[1] / "graphs" / "flexible_link_ekf.yaml"
DRIVE_HZ = (8.0, 10.0, 11.0)                            # eq. 6.7


@pytest.fixture(scope="module")
def run():
    """The graph for the thesis's 3 s: arm, torque meters, observer (one compile)."""
    return hapflow.Simulation(hapflow.load(GRAPH)).run(progress=False)


def _linearised(seed, q_rate_std):
    """A random state near q*, torques, the model's rate there and M~^-1 [-K~ -C~ L~]."""
    block = FlexibleLinkEKF()
    model = packed_model(block.alpha, block.beta)
    rng = np.random.default_rng(seed)
    w = np.concatenate([Q_STAR + rng.uniform(-0.3, 0.3, 3), 1e-4 * rng.standard_normal(R - 3),
                        q_rate_std * rng.standard_normal(3), 1e-2 * rng.standard_normal(R - 3)])
    torque = np.array([1.0, -3.0, 0.2])
    d, rate = np.zeros(block.dstate), np.zeros(W)
    flex_rate(model, w, torque, d, rate)
    D = block.D
    state_matrix(model, d)
    return model, w, torque, rate, d[D.ab:D.ab + R * NC].reshape(R, NC)


def test_state_matrix_is_the_models_jacobian_where_eq_6_3_is_exact():
    # at q' = 0 the rate is linear in the elastic coordinates, in z' and in the torques (the
    # matrices depend on q only, the velocity-squared term has zero slope): A and B of eq. 6.3
    # must equal central differences of flex_rate there
    model, w, torque, _, got = _linearised(3, 0.0)
    scratch, out = np.zeros(D_SIZE), np.zeros(W)
    for j in range(3, NC):                               # all but the q columns
        step = 1e-6 if j < W else 1e-3
        col = np.zeros(R)
        for sign in (1.0, -1.0):
            ws, ts = w.copy(), torque.copy()
            if j < W:
                ws[j] += sign * step
            else:
                ts[j - W] += sign * step
            flex_rate(model, ws, ts, scratch, out)
            col += sign * out[R:] / (2 * step)
        assert got[:, j] == pytest.approx(col, abs=1e-4 * np.abs(col).max()), j


def test_state_and_input_matrices_give_the_models_rate():
    # eq. 6.3 is the rate at any state, q' included: A w + B u = flex_rate(w, u)
    _, w, torque, rate, ab = _linearised(4, 1.0)
    assert ab[:, :W] @ w + ab[:, W:] @ torque == pytest.approx(rate[R:], rel=1e-9,
                                                               abs=1e-9 * np.abs(rate).max())


@pytest.fixture(scope="module")
def numpy_model():
    """The block's reduced model as hapflow.flex.state_space builds it (numpy, no kernels)."""
    mech = manipulator(alpha=1.0, beta=2e-6)             # the EKF's default damping
    return expand(mech, [0, 2, 12], gauge_rows, reduce_erls(mech, MASTERS, Q_STAR,
                                                             list(range(3, 9)), 4))


def _eq_6_3(model, w):
    """Eq. 6.3's ``A`` (W x W) and ``B`` (W x 3) at ``w``, from the numpy model's matrices:
    ``M~ = H' Mf H``, ``K~ = H' Kf H``, ``C~ = H' Cv H``, ``L~ = H' T' F`` over ``(q, u_in)``
    with ``u = S q + E u_in = T (q, u_in)`` (as ``FlexModel.rate`` forms the forces)."""
    q, qd = w[:3], w[R:R + 3]
    angles = model.A @ q + model.b
    M, K, S = (np.tensordot(expansion.features(angles), c, 1)
               for c in (model.Mc, model.Kc, model.Sc))
    Sd = np.tensordot(expansion.feature_rates(angles, model.A @ qd), model.Sc, 1)
    E = np.zeros((len(M), len(model.inner)))
    E[model.inner, np.arange(len(model.inner))] = 1.0
    T = np.hstack([S, E])
    Kf = np.zeros((T.shape[1], T.shape[1]))
    Kf[3:, 3:] = E.T @ K @ E
    Cv = T.T @ np.hstack([M @ Sd, model.alpha * M @ E + model.beta * K @ E])
    F = np.zeros((len(M), 3))
    F[model.torque_dofs, np.arange(3)] = 1.0
    H = model.basis(q)
    Mr = H.T @ T.T @ M @ T @ H
    lower = np.linalg.solve(Mr, np.hstack([-H.T @ Kf @ H, -H.T @ Cv @ H, H.T @ T.T @ F]))
    A = np.vstack([np.hstack([np.zeros((R, R)), np.eye(R)]), lower[:, :W]])
    return A, np.vstack([np.zeros((R, 3)), lower[:, W:]])


def _numpy_ekf_step(model, block, w, P, y, torque):
    """The EKF of the module notes in numpy: correct with ``y``, predict by RK4's transition."""
    q = w[:3]
    G = np.tensordot(expansion.features(model.A @ q + model.b), model.Gc, 1)
    Hm = np.zeros((6, W))
    Hm[:3, :3] = np.eye(3)
    Hm[3:, :R] = G[:, model.inner] @ model.basis(q)[3:]
    noise = np.array([block.q12_std, block.q12_std, block.q3_std, *[block.gamma_std] * 3])
    gain = np.linalg.solve(Hm @ P @ Hm.T + np.diag(noise ** 2), Hm @ P).T
    w = w + gain @ (y - np.concatenate([q, model.gauges(w)]))
    P = P - gain @ Hm @ P
    P = 0.5 * (P + P.T)
    A, B = _eq_6_3(model, w)
    dt, Adt = block.sample_time, A * block.sample_time
    powers = [np.linalg.matrix_power(Adt, k) for k in range(5)]
    phi = sum(Ak / math.factorial(k) for k, Ak in enumerate(powers))
    gamma = dt * sum(Ak / math.factorial(k + 1) for k, Ak in enumerate(powers[:4])) @ B
    g = np.vstack([dt * dt / 2 * B[R:], dt * B[R:]])
    var = np.array([block.t1_std, block.t2_std, block.t3_std]) ** 2
    return phi @ w + gamma @ torque, phi @ P @ phi.T + g @ np.diag(var) @ g.T


def test_ekf_step_equals_the_ekf_on_the_numpy_model(numpy_model):
    # one correction and one prediction of the compiled kernels against numpy's dense algebra
    # on the numpy model's matrices, at a moving state with a correlated covariance: every
    # shortcut of the kernels (sparsity, the 16-column solve of the state matrix, the Horner
    # steps, the measurement rows' structure) must give the dense result to round-off
    block = FlexibleLinkEKF()
    block.sample_time = 1e-4
    p, d = block.pack(), block.initial_state()[1]
    D = block.D
    rng = np.random.default_rng(7)
    scale = np.concatenate([np.full(3, 1e-3), np.full(R - 3, 1e-5), np.full(3, 0.3),
                            np.full(R - 3, 1e-2)])
    w = np.concatenate([Q_STAR + rng.uniform(-0.3, 0.3, 3), np.zeros(W - 3)])
    w[3:] += scale[3:] * rng.standard_normal(W - 3)
    mix = np.eye(W) + 0.3 * rng.standard_normal((W, W)) / np.sqrt(W)
    P = (scale[:, None] * mix) @ (scale[:, None] * mix).T
    y = np.concatenate([w[:3] + 1e-4 * rng.standard_normal(3), 1e-4 * rng.standard_normal(3)])
    torque = np.array([1.0, -3.0, 0.2])
    d[D.w:D.w + W], d[D.P:D.P + W * W] = w, P.ravel()
    d[D.y:D.y + 6], d[D.torque:D.torque + 3] = y, torque
    ekf_step(p, d)
    w_ref, P_ref = _numpy_ekf_step(numpy_model, block, w, P, y, torque)
    sd = np.sqrt(np.diag(P_ref))
    # relative to each entry's scale: the state's own size or its uncertainty, whichever is
    # larger (an elastic coordinate's value can be near zero), and sd_i sd_j for P
    assert np.abs(d[D.w:D.w + W] - w_ref).max() > 0.0                   # really computed
    np.testing.assert_array_less(np.abs(d[D.w:D.w + W] - w_ref),
                                 1e-10 * np.maximum(np.abs(w_ref), sd))
    np.testing.assert_array_less(np.abs(d[D.P:D.P + W * W].reshape(W, W) - P_ref),
                                 1e-10 * np.outer(sd, sd))


def test_torque_meter_noise_and_converter():
    # 0.2 % of full scale, 24 bits across the meter's range; a coarse 4-bit meter shows the
    # rounding and the clipping at -FS and FS - step
    g = hapflow.Graph(name="torque_meter_test", rate=1000.0, duration=2.0, seed=3)
    g.add("torque", Constant(value=[0.9], unit="N*m"))
    g.add("meter", TorqueMeter(full_scale=60.0))
    g.add("coarse", TorqueMeter(full_scale=2.0, noise=0.0, adc_bits=4))
    g.add("over", Constant(value=[5.0], unit="N*m"))
    g.add("clipped", TorqueMeter(full_scale=2.0, noise=0.0, adc_bits=4))
    g.wire("torque.y -> meter.u")
    g.wire("torque.y -> coarse.u")
    g.wire("over.y -> clipped.u")
    g.record("meter.y", "coarse.y", "clipped.y")
    out = hapflow.Simulation(g).run(progress=False)
    noise = out["meter.y"][:, 0] - 0.9
    assert np.std(noise) == pytest.approx(0.002 * 60.0, rel=0.05)
    assert abs(np.mean(noise)) < 4 * 0.12 / np.sqrt(len(noise))
    step24 = 2 * 60.0 / 2 ** 24
    assert np.abs(out["meter.y"] / step24 - np.round(out["meter.y"] / step24)).max() < 1e-6
    assert out["coarse.y"] == pytest.approx(1.0)        # 0.9 to the nearest 0.25
    assert out["clipped.y"] == pytest.approx(2.0 - 0.25)


def _thirds_rms(error):
    n = len(error) // 3
    return [np.sqrt(np.mean(error[k * n:(k + 1) * n] ** 2, axis=0)) for k in range(3)]


def test_estimates_do_not_drift_over_3_s(run):
    # section 6.2: "no drift affects the estimates". Error of every estimated angle and elastic
    # master below 2 % of its range in each second, and not growing from the first second on
    q, q_hat = run["arm.q"], run["observer.q_hat"]
    e, e_hat = run["arm.elastic"], run["observer.elastic"]
    assert np.ptp(q, axis=0).min() > 0.03                # the arm moves: 2-25 deg
    for truth, estimate in ((q, q_hat), (e, e_hat)):
        first, _, last = _thirds_rms(estimate - truth)
        assert np.all(np.abs(estimate - truth).max(axis=0) < 0.02 * np.ptp(truth, axis=0))
        assert np.all(last <= 1.5 * first)
        assert np.all(np.abs((estimate - truth)[-len(q) // 3:].mean(axis=0))
                      < 0.002 * np.ptp(truth, axis=0))


def _spectra(signal, dt):
    x = (signal - signal.mean(axis=0)) * np.hanning(len(signal))[:, None]
    return np.fft.rfftfreq(len(signal), dt), np.abs(np.fft.rfft(x, axis=0))


def test_estimated_displacement_spectra_peak_at_the_drive_and_the_modes(run):
    # fig. 6.13: peaks at the drive frequencies and at the first and third elastic modes
    # (thesis 14.2 and 67.0 Hz; this reconstruction's modes at q* are computed here and stand
    # 9 and 8 % below: hapflow/flex/manipulator.py), the estimate's amplitudes on the truth's
    mech = manipulator()
    Mr, Kr, _, _ = reduce_erls(mech, MASTERS, Q_STAR, list(range(3, 9)), 4).matrices(Q_STAR)
    modes = np.sqrt(np.abs(scipy.linalg.eigh(Kr, Mr, eigvals_only=True)[3:6])) / (2 * np.pi)
    assert modes[[0, 2]] == pytest.approx(TABLE_5_5[[0, 2]], rel=0.1)
    dt = run.time[1] - run.time[0]
    f, est = _spectra(run["observer.elastic"], dt)
    _, true = _spectra(run["arm.elastic"], dt)
    band = f < 100
    resolution = 1.0 / (run.time[-1] - run.time[0])
    found = set()
    for k in range(6):
        s = est[band, k]
        peaks, _ = find_peaks(s, prominence=0.01 * s.max())
        found.update(np.round(f[band][peaks], 1))
        # the thesis's claim: the estimate's harmonics at the drive and at the 14.2 and 67.0 Hz
        # modes on the truth's (the second mode, which the three gauges see least, is not claimed)
        claimed = [i for i in peaks
                   if min(abs(f[i] - x) for x in (*DRIVE_HZ, modes[0], modes[2])) <= resolution]
        assert s[claimed] == pytest.approx(true[band, k][claimed], rel=0.02)
    for target in (*DRIVE_HZ, modes[0], modes[2]):
        assert min(abs(target - x) for x in found) <= resolution, target


def test_helpers_run_an_edited_dependency_not_a_stale_compile(tmp_path, monkeypatch):
    # the EKF's helpers compile flexible.py's layout into their code: after an edit of
    # flexible.py alone, a fresh import must run the new layout.  Compiled helpers that numba
    # cached on disk (keyed by their own file only) were loaded stale after such an edit
    # and read the old offsets: here a shift of the scratch layout by one place
    from hapflow.blocks import flexible, flexible_ekf
    package = tmp_path / "edited_blocks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module in (flexible, flexible_ekf):
        shutil.copy(module.__file__, package)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    rng = np.random.default_rng(5)

    def measurement_rows_agree() -> bool:
        for name in ("edited_blocks.flexible_ekf", "edited_blocks.flexible", "edited_blocks"):
            sys.modules.pop(name, None)
        importlib.invalidate_caches()
        with registry.registered(flexible.FlexibleLink, flexible.FlexibleLinkFull,
                                 FlexibleLinkEKF, TorqueMeter):
            ekf = importlib.import_module("edited_blocks.flexible_ekf")
        flex = sys.modules["edited_blocks.flexible"]      # the layout the copy was built with
        p = np.zeros(flex.P_SIZE)
        inner = rng.permutation(30)[:27]
        p[flex.PIN:flex.PIN + 27] = inner
        d = rng.standard_normal(ekf.FlexibleLinkEKF().dstate)
        hm = ekf.FlexibleLinkEKF.D.hm
        ekf.measurement_rows(p, d, hm)
        got = d[hm:hm + 6 * W].reshape(6, W)
        H = d[flex.DH:flex.DH + 30 * R].reshape(30, R)
        gauges = d[flex.DGM:flex.DGM + 3 * 30].reshape(3, 30)
        return bool(np.allclose(got[3:, :R], gauges[:, inner] @ H[3:], rtol=1e-12, atol=0.0)
                    and np.array_equal(got[:3, :3], np.eye(3)))

    assert measurement_rows_agree()
    source = package / "flexible.py"
    text = source.read_text()
    edited = text.replace('_DL, D_SIZE = _layout([("f", NF)',
                          '_DL, D_SIZE = _layout([("pad", 1), ("f", NF)')
    assert edited != text
    source.write_text(edited)
    assert measurement_rows_agree()
