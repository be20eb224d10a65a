"""FlexibleLink block (blocks/flexible.py): its compiled kernels against the numpy model of
hapflow.flex.state_space, and the block running in a graph."""
import numpy as np
import pytest
import scipy.linalg

import hapflow
from hapflow.blocks.flexible import (D_SIZE, PA, PAC, PB, FlexibleLink, FlexibleLinkFull,
                                     envelope_solve, flex_gauges, flex_rate, full_gauges, full_rate,
                                     packed_model)
from hapflow.blocks.sources import Sine
from hapflow.flex.erls_reduction import reduce_erls
from hapflow.flex.manipulator import MASTERS, Q_STAR, gauge_rows, manipulator
from hapflow.flex.state_space import expand

TORQUES = [(1.4, 8.0), (7.0, 10.0), (0.1, 11.0)]       # eq. 6.7: amplitude N m, frequency Hz


@pytest.fixture(scope="module")
def reference():
    mech = manipulator(alpha=1.0, beta=2e-6)             # the block's default damping
    red = reduce_erls(mech, MASTERS, Q_STAR, list(range(3, 9)), 4)
    return expand(mech, [0, 2, 12], gauge_rows, red)


def test_blocks_pack_alpha_beta_and_the_model_where_the_kernels_read_them():
    for cls in (FlexibleLink, FlexibleLinkFull):
        assert (cls.P.alpha, cls.P.beta, cls.P.model) == (PA, PB, PAC)
        np.testing.assert_array_equal(cls(alpha=0.5, beta=3e-6).pack(), packed_model(0.5, 3e-6))


def test_kernels_equal_the_numpy_model(reference):
    p = FlexibleLink().pack()
    rng = np.random.default_rng(2)
    w = np.concatenate([Q_STAR + rng.uniform(-0.3, 0.3, 3), 1e-3 * rng.standard_normal(10),
                        rng.standard_normal(3), 1e-2 * rng.standard_normal(10)])
    torque = np.array([1.0, -3.0, 0.2])
    d, dx, gamma = np.zeros(D_SIZE), np.zeros(26), np.zeros(3)
    flex_rate(p, w, torque, d, dx)
    expected = reference.rate(w, torque)
    assert dx == pytest.approx(expected, abs=1e-10 * np.abs(expected).max())
    flex_gauges(p, w, d, gamma)
    assert gamma == pytest.approx(reference.gauges(w), rel=1e-10)


def test_block_in_a_graph_follows_the_model_under_the_thesis_torques(reference):
    # 50 ms at 10 kHz (the thesis's 0.1 ms RK4 step); the reference holds each step's torque
    # where the engine's RK4 samples the sine sources at the stage times: equal within 1 %
    g = hapflow.Graph(name="flexible_link_test", rate=10000.0, duration=0.05)
    for k, (amp, freq) in enumerate(TORQUES, start=1):
        g.add(f"torque{k}", Sine(amplitude=amp, frequency=freq, unit="N*m"))
    g.add("arm", FlexibleLink())
    for k in range(1, 4):
        g.wire(f"torque{k}.y -> arm.t{k}")
    g.record("arm.q", "arm.gamma", "arm.elastic")
    run = hapflow.Simulation(g).run(progress=False)
    dt = 1e-4
    t = (np.arange(len(run.time) - 1) + 0.5) * dt
    torques = np.stack([a * np.sin(2 * np.pi * f * t) for a, f in TORQUES], axis=1)
    w = reference.simulate(np.concatenate([Q_STAR, np.zeros(23)]), torques, dt)
    q, elastic = run["arm.q"], run["arm.elastic"]
    moved = np.ptp(w[:, :3], axis=0)
    assert moved.max() > 1e-3
    assert np.abs(q - w[:len(q), :3]).max(axis=0) == pytest.approx(0, abs=0.01 * moved.max())
    assert np.abs(elastic - w[:len(q), 3:9]).max() < 0.02 * np.ptp(w[:, 3:9])
    assert np.ptp(run["arm.gamma"]) > 0


def test_envelope_cholesky_solves_like_scipy():
    # the Guyan solve skips the zeros left of each row's first nonzero (they stay zero in the
    # factor) and the columns before `first`: a random SPD matrix with such an envelope
    rng = np.random.default_rng(5)
    n, ncols, first = 12, 5, 2
    L = np.zeros((n, n))
    for i in range(n):
        start = rng.integers(0, i + 1)
        L[i, start:i] = rng.standard_normal(i - start)
        L[i, i] = 1.0 + rng.uniform()
    A, B = L @ L.T, rng.standard_normal((n, ncols))
    d = np.concatenate([A.ravel(), np.zeros(n), B.ravel()])
    envelope_solve(d, 0, n, n * n, n * n + n, ncols, first)
    X = d[n * n + n:].reshape(n, ncols)
    assert X[:, first:] == pytest.approx(scipy.linalg.solve(A, B[:, first:], assume_a="pos"),
                                         rel=1e-10, abs=1e-10)
    assert np.array_equal(X[:, :first], B[:, :first])


def test_full_model_kernels_equal_the_numpy_full_model():
    # FlexibleLinkFull (chapter 6's truth): all 30 dofs, no reduction
    full = expand(manipulator(alpha=1.0, beta=2e-6), [0, 2, 12], gauge_rows)
    p = FlexibleLinkFull().pack()
    rng = np.random.default_rng(4)
    w = np.concatenate([Q_STAR + rng.uniform(-0.3, 0.3, 3), 1e-4 * rng.standard_normal(27),
                        rng.standard_normal(3), 1e-2 * rng.standard_normal(27)])
    torque = np.array([1.0, -3.0, 0.2])
    d, dx, gamma = np.zeros(D_SIZE), np.zeros(60), np.zeros(3)
    full_rate(p, w, torque, d, dx)
    expected = full.rate(w, torque)
    assert dx == pytest.approx(expected, abs=1e-10 * np.abs(expected).max())
    full_gauges(p, w, d, gamma)
    assert gamma == pytest.approx(full.gauges(w), rel=1e-10)
