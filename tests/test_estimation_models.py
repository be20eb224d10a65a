"""Estimation models (blocks/estimation_models.py): a model of one's own, registered by its
module's import path, runs in the library's filters exactly as a built-in model."""
import numpy as np
import pytest

import hapflow as hf
from hapflow.block import ParamError
from hapflow.blocks.estimation import ExtendedKalmanFilter, UnscentedKalmanFilter
from hapflow.blocks.estimation_models import MODELS, model_named, register
from tests.helpers import table

USER = "tests.user_estimation_model"
PEND = dict(g=9.81, L=0.5, c=0.4)
NOISE = dict(Q=[1e-6, 0.0, 0.0, 1e-4], R=[4e-4], x0=[0.5, 0.0], P0=[0.1, 0.0, 0.0, 0.5])


def test_a_model_module_named_in_a_graph_runs_as_the_built_in_model():
    # the module holds the library pendulum's f; both EKFs difference f and h
    rng = np.random.default_rng(3)
    t = np.arange(200) * 0.01
    z = 0.8 * np.cos(4.4 * t) * np.exp(-0.2 * t) + rng.normal(0.0, 0.02, t.size)
    g = hf.Graph(name="user_model", rate=100.0, duration=2.0)
    g.add("z", table(z[:, None]))
    coeffs = [PEND["g"], PEND["L"], PEND["c"]]
    for name, block in (
            ("ekf", ExtendedKalmanFilter(model="pendulum", jacobian="numeric", **PEND, **NOISE)),
            ("ekf_user", ExtendedKalmanFilter(model=USER, jacobian="numeric", coeffs=coeffs,
                                               **NOISE)),
            ("ukf", UnscentedKalmanFilter(model="pendulum", sigma="simplex", **PEND, **NOISE)),
            ("ukf_user", UnscentedKalmanFilter(model=USER, sigma="simplex", coeffs=coeffs,
                                               **NOISE))):
        g.add(name, block)
        g.wire(f"z.y -> {name}.z")
        g.record(f"{name}.x_hat")
    run = hf.Simulation(g, interpret=True).run()
    for kind in ("ekf", "ukf"):
        assert np.array_equal(run[f"{kind}_user.x_hat"], run[f"{kind}.x_hat"]), kind
        assert np.ptp(run[f"{kind}.x_hat"][:, 0]) > 1.0           # it tracked the swing
    assert MODELS[USER].doc.startswith("Damped pendulum") and MODELS[USER].states == 2


def test_a_model_of_ones_own_is_checked_like_a_built_in_one():
    with pytest.raises(ParamError, match="L must be > 0 m"):
        UnscentedKalmanFilter(model=USER, coeffs=[9.81, -1.0, 0.0], **NOISE)
    with pytest.raises(ParamError, match="takes 3 values"):
        UnscentedKalmanFilter(model=USER, coeffs=[9.81], **NOISE)
    with pytest.raises(ParamError, match="no estimation model: it defines no f"):
        UnscentedKalmanFilter(model="tests.helpers", **NOISE)
    with pytest.raises(ParamError, match="must be one of 'linear', 'pendulum'"):
        UnscentedKalmanFilter(model="pendulim", **NOISE)


def test_register_keeps_one_model_per_name():
    module = model_named(USER)
    assert register(USER, MODELS[USER]) is MODELS[USER] and module is MODELS[USER]
    with pytest.raises(ValueError, match="registered already"):
        register("pendulum", MODELS[USER])
