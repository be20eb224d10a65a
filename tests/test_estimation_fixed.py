"""Size-specialised filter kernels (blocks/estimation.py): fixed-shape operations and steps.

The filter steps run on operations whose shapes are compile-time constants
(``fixed_ops``); the same steps over the generic operations (``GENERIC``,
shapes read at run time) are what ``ProbeKKF`` uses.  Checked here: each
fixed operation against numpy's closed forms (including the symmetric
variants that compute one triangle), fixed and generic steps against each
other (same operation order: identical bits), the Joseph update with more
measurements than states against filterpy, one compilation per structure,
that the generated kernel can still be cached on disk, and that the steps
are compiled without numba's reference counting.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

filterpy_kalman = pytest.importorskip("filterpy.kalman")

import hapflow  # noqa: E402
import hapflow.blocks  # noqa: E402,F401
from hapflow.blocks import estimation as est  # noqa: E402
from tests.helpers import table  # noqa: E402

RNG = np.random.default_rng(5)


def _spd(n: int) -> np.ndarray:
    a = RNG.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


@pytest.mark.parametrize("r, k, q, bt, acc, sym", [
    (3, 4, 2, False, False, False), (3, 4, 2, True, True, False),
    (4, 4, 4, True, False, True), (4, 2, 4, True, True, True),
])
def test_fixed_matrix_product_matches_numpy(r, k, q, bt, acc, sym):
    a = RNG.normal(size=(r, k))
    if sym:                                    # a b symmetric: b = M a', M symmetric
        b_mat = _spd(k) @ a.T
    else:
        b_mat = RNG.normal(size=(k, q))
    b = b_mat.T.copy() if bt else b_mat.copy()
    c0 = _spd(r) if (acc and sym) else RNG.normal(size=(r, q))
    expect = a @ b_mat + (c0 if acc else 0.0)
    for fn in (est._mm, est._fixed_mm(r, k, q, bt, acc, sym)):
        c = np.concatenate([[7.0], c0.ravel()])
        fn(a.ravel(), 0, np.concatenate([[0.0, 0.0], b.ravel()]), 2, c, 1, r, k, q, bt, acc, sym)
        np.testing.assert_allclose(c[1:].reshape(r, q), expect, rtol=1e-13, atol=1e-13)
        assert c[0] == 7.0                     # nothing written before the offset
        if sym:
            assert np.array_equal(c[1:].reshape(r, q), c[1:].reshape(r, q).T)


@pytest.mark.parametrize("n", [1, 3, 6])
def test_fixed_cholesky_and_solve_match_numpy(n):
    s = _spd(n)
    lower = np.linalg.cholesky(2.0 * s)
    k0 = RNG.normal(size=(4, n))
    for chol, solve in ((est.chol, est.right_solve),
                        (est._fixed_chol(n), est._fixed_solve(n, 4))):
        out = np.zeros(1 + n * n)
        chol(s.ravel(), 0, 2.0, out, 1, n)
        np.testing.assert_allclose(out[1:].reshape(n, n), lower, rtol=1e-13, atol=1e-14)
        k = k0.ravel().copy()
        solve(out, 1, n, k, 0, 4)
        np.testing.assert_allclose(k.reshape(4, n), k0 @ np.linalg.inv(2.0 * s), rtol=1e-12)


@pytest.mark.parametrize("sym", [False, True])
def test_fixed_weighted_covariance_matches_numpy(sym):
    na, ns = 3, 5
    nb = na if sym else 2
    pts_a = RNG.normal(size=(ns, na))
    pts_b = pts_a if sym else RNG.normal(size=(ns, nb))
    w = RNG.uniform(0.1, 1.0, ns)
    ma, mb = w @ pts_a, w @ pts_b
    noise = RNG.normal(size=(na, nb))
    expect = ((pts_a - ma).T * w) @ (pts_b - mb) + noise
    d = np.concatenate([pts_a.ravel(), ma, pts_b.ravel(), mb, np.zeros(na * nb)])
    p = np.concatenate([w, noise.ravel()])
    ob = ns * na + na
    oc = ob + ns * nb + nb
    for fn in (est._weighted_cov, est._fixed_wcov(na, nb, ns, sym)):
        fn(d, 0, ns * na, na, ob, ob + ns * nb, nb, ns, p, 0, oc, ns, sym)
        np.testing.assert_allclose(d[oc:].reshape(na, nb), expect, rtol=1e-13, atol=1e-14)


def _arm_ekf(**extra) -> est.ExtendedKalmanFilter:
    q = np.diag([1e-8, 1e-8, 1e-5, 1e-5, 1.0, 1.0]).ravel().tolist()
    block = est.ExtendedKalmanFilter(model="two_link_kkf", Q=q, R=[1e-5, 0.0, 0.0, 1e-5],
                                     x0=[0.0, 0.5, 0.0, 0.0, 0.0, 0.0], **extra)
    block.sample_time = 1e-3
    return block


def _steps(block, z, u):
    """Posterior estimates of ``block`` run by its own kernels, one sample per row."""
    k = block.kernels()
    p = block.pack()
    d = np.zeros(block.dstate)
    k["init"](d, d, d, p)
    n, m = block.states, block.measurements
    x, pd, inn, out = np.zeros(n), np.zeros(n), np.zeros(m), []
    ins = (lambda zk, uk: (zk, uk)) if block.controls else (lambda zk, uk: (zk,))
    for zk, uk in zip(z, u):
        k["output"](0.0, d, d, d, p, *ins(zk, uk), x, pd, inn)
        k["update"](0.0, d, d, d, p, *ins(zk, uk))
        out.append(np.concatenate([x, pd, inn]))
    return np.array(out)


def test_fixed_and_generic_steps_give_identical_bits():
    block = _arm_ekf()
    t = np.arange(60) * 1e-3
    z = np.column_stack([0.3 * np.sin(8 * t), 0.5 + 0.2 * t]) + RNG.normal(0, 3e-3, (60, 2))
    u = np.column_stack([np.cos(5 * t), np.sin(3 * t)])
    fixed = _steps(block, z, u)
    layout = block.layout()
    off = est._ekf_offsets.py_func(6, 2)
    generic = est.filter_steps(est.GENERIC, "two_link_kkf").ekf
    p = block.pack()
    d = np.zeros(block.dstate)
    block.kernels()["init"](d, d, d, p)
    rows = []
    for zk, uk in zip(z, u):
        xn, pn, y = generic(d, p, zk, uk, layout)
        rows.append(np.concatenate([d[xn:xn + 6], np.diag(d[pn:pn + 36].reshape(6, 6)),
                                    d[y:y + 2]]))
        d[:42] = d[42:84]
        d[off[-1]] = d[off[-1] + 1]
    assert np.array_equal(fixed, np.array(rows))
    assert np.all(np.isfinite(fixed)) and np.ptp(fixed[:, 0]) > 0.1


def test_joseph_update_with_more_measurements_than_states_matches_filterpy():
    # m = 3 > n = 2: the -K work area holds n x m numbers
    a = np.array([[1.0, 0.01], [0.0, 1.0]])
    h = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    q, r = np.diag([1e-5, 1e-3]), np.diag([0.01, 0.02, 0.05])
    kf = est.KalmanFilter(states=2, measurements=3, A=a.ravel().tolist(), H=h.ravel().tolist(),
                          Q=q.ravel().tolist(), R=r.ravel().tolist(), x0=[0.1, 0.0],
                          P0=[1.0, 0.0, 0.0, 1.0])
    zs = np.column_stack([np.linspace(0, 1, 80)] * 3) + RNG.normal(0, 0.1, (80, 3))
    ours = _steps(kf, zs, zs)
    ref = filterpy_kalman.KalmanFilter(dim_x=2, dim_z=3)
    ref.F, ref.H, ref.Q, ref.R = a, h, q, r
    ref.x, ref.P = np.array([[0.1], [0.0]]), np.eye(2)
    for k, zk in enumerate(zs):
        ref.predict()
        ref.update(zk.reshape(3, 1))
        np.testing.assert_allclose(ours[k, :2], ref.x.ravel(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(ours[k, 2:4], np.diag(ref.P), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(ours[k, 4:], ref.y.ravel(), rtol=0, atol=1e-12)


def test_kernels_are_made_once_per_structure():
    a, b = _arm_ekf(), _arm_ekf(coeffs=[0.25, 0.2, 0.1])   # live values differ only
    assert a.kernels()["output"] is b.kernels()["output"]
    c = _arm_ekf(jacobian="numeric")
    assert c.kernels()["output"] is not a.kernels()["output"]
    assert est.fixed_ops(6, 2, 2, 0, False).nnn is est.fixed_ops(6, 2, 0, 0, False).nnn


def test_filters_of_one_size_share_their_init_and_update_kernels():
    # a fused init_all calls the init kernels: one compile for the filters of one size and
    # parameter offsets, whatever their Jacobians (not one per layout)
    analytic, numeric = _arm_ekf(), _arm_ekf(jacobian="numeric")
    assert analytic.layout() != numeric.layout()
    kernels = [f.kernels() for f in (analytic, numeric)]
    assert kernels[0]["output"] is not kernels[1]["output"]
    for name in ("init", "update"):
        assert kernels[0][name] is kernels[1][name], name


def test_filters_of_one_shape_share_one_compiled_correction():
    # the Joseph correction depends on n and m only: two EKFs whose layouts differ (analytic
    # and numeric Jacobians) run one compiled version of it, not one per layout
    ops = est.fixed_ops(6, 2, 2, 0, False)
    joseph = est._joseph_correction(ops.pht, ops.hpht, ops.chol_m, ops.solve, ops.ky, ops.kpt,
                                    ops.kkt, ops.kr, *ops.sizes)
    t = np.arange(5) * 1e-3
    z, u = np.column_stack([np.sin(t), t]), np.column_stack([t, t])
    analytic, numeric = _arm_ekf(), _arm_ekf(jacobian="numeric")
    assert analytic.layout() != numeric.layout()
    first, second = _steps(analytic, z, u), _steps(numeric, z, u)
    np.testing.assert_allclose(first, second, rtol=1e-6, atol=1e-9)
    # what every process compiled into the kernel cache (this one may only have loaded it)
    assert len(joseph._cache._cache_file._load_index()) == 1


def test_generated_kernel_is_cached_on_disk(tmp_path, monkeypatch):
    # a constant tuple of functions passed as a value becomes a run-time pointer,
    # which numba refuses to cache ("dynamic globals"): the steps must not do that
    monkeypatch.setenv("HAPFLOW_CACHE_DIR", str(tmp_path))
    g = hapflow.Graph(name="fixed_cache", rate=100.0, duration=0.05)
    g.add("z", table(np.linspace(0.0, 1.0, 5)[:, None]))
    g.add("kf", est.KalmanFilter(states=2, measurements=1, A=[1.0, 0.01, 0.0, 1.0],
                                 H=[1.0, 0.0], Q=[1e-4, 0.0, 0.0, 1e-3], R=[0.01]))
    g.wire("z.y -> kf.z")
    g.record("kf.x_hat")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*[Cc]annot cache.*")
        run = hapflow.Simulation(g).run(0.05)
    assert run.signals["kf.x_hat"].shape == (5, 2)
    assert list(tmp_path.glob("**/*.nbi")), "no numba cache index written"


def test_filter_steps_do_no_reference_counting():
    # compiled with hapflow.jit.njit_noalloc: no atomic NRT increments on the dozens of calls
    # of a step (they had cost as much as the arithmetic); a plain @njit step would have them
    ekf = _arm_ekf()
    ukf = est.UnscentedKalmanFilter(sigma="simplex", model="slider_crank_kkf",
                                    Q=np.eye(3).ravel().tolist(), R=[1e-4])
    ukf.sample_time = 1e-3
    kf = est.KalmanFilter(states=2, measurements=1, A=[1.0, 0.01, 0.0, 1.0], H=[1.0, 0.0],
                          Q=[1e-4, 0.0, 0.0, 1e-3], R=[0.01])
    kf.sample_time = 1e-3
    ns = ukf.sigma_count()
    steps = [(est.filter_steps(est.fixed_ops(6, 2, 2, 0, False), "two_link_kkf").ekf,
              ekf, ekf.layout(), 2, 2),
             (est.filter_steps(est.fixed_ops(3, 1, 1, ns, True), "slider_crank_kkf").ukf,
              ukf, ukf.layout(), 1, 1),
             (est.filter_steps(est.fixed_ops(2, 1, 0, 0, False)).kf, kf, kf.layout(), 1, 1)]
    for step, block, layout, m, l in steps:
        d = np.zeros(block.dstate)
        step(d, block.pack(), np.zeros(m), np.zeros(l), layout)
        if sum(step.stats.cache_hits.values()):
            # loaded from the disk cache, numba has no code to show ("Inspection disabled for
            # cached code", an empty result): the check passed vacuously there
            step.recompile()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            asm = "".join(step.inspect_asm().values())
        assert "ret" in asm, "no machine code to inspect"
        assert "NRT_incref" not in asm and "NRT_decref" not in asm, type(block).__name__


def test_a_kernel_compiles_its_filters_layout_in_as_literal_values():
    # the sizes and offsets of a filter reach its step, and every helper the step passes
    # them to, as compile-time constants (trip counts, indices): typed by field types only
    # (Layout(int64 x 20)), the UKF steps ran 32-44 % slower
    from numba import types
    kf = est.KalmanFilter(states=2, measurements=1, A=[1.0, 0.01, 0.0, 1.0], H=[1.0, 0.0],
                          Q=[1e-4, 0.0, 0.0, 1e-3], R=[0.01])
    kf.sample_time = 1e-3
    est.filter_rows(kf, np.zeros((3, 1)))
    step = est.filter_steps(est.fixed_ops(2, 1, 0, 0, False)).kf
    layouts = [signature[-1] for signature in step.signatures]
    assert any(isinstance(t, types.NamedTuple) and t.instance_class is est.Layout
               and all(isinstance(f, types.IntegerLiteral) for f in t.types)
               for t in layouts), layouts
