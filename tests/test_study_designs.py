"""Parameter designs (hapflow/study/designs.py): grid, seeded random, Latin hypercube."""
import math

import numpy as np
import pytest
from scipy.stats import qmc

from hapflow.study.designs import design, grid, grid_values, lhs, random
from hapflow.study.spec import Parameter


def par(key, spec):
    return Parameter(key, spec, True)


def test_grid_values_ranges():
    assert grid_values([3, 1, 2]) == [3, 1, 2]
    np.testing.assert_array_equal(grid_values({"low": 0.5, "high": 2.5, "num": 5}),
                                  np.linspace(0.5, 2.5, 5))
    np.testing.assert_allclose(grid_values({"low": 1.0, "high": 1000.0, "num": 4, "scale": "log"}),
                               [1.0, 10.0, 100.0, 1000.0], rtol=1e-12)
    ints = grid_values({"low": 1, "high": 200, "step": 1})
    assert ints == list(range(1, 201)) and all(type(v) is int for v in ints)
    # a float step that lands on high up to rounding keeps high
    np.testing.assert_allclose(grid_values({"low": 0.0, "high": 0.3, "step": 0.1}),
                               [0.0, 0.1, 0.2, 0.3], atol=1e-15)


def test_grid_is_the_cartesian_product_first_parameter_slowest():
    runs = grid([par("a.x", [1, 2]), par("b.y", [10, 20, 30])])
    assert runs == [{"a.x": a, "b.y": b} for a in (1, 2) for b in (10, 20, 30)]
    assert design("grid", [par("a.x", [1, 2])]) == [{"a.x": 1}, {"a.x": 2}]


def test_random_matches_numpy_generator_and_bounds():
    params = [par("a.x", {"low": 2.0, "high": 5.0}),
              par("b.y", {"low": 1e-3, "high": 1e1, "scale": "log"}),
              par("c.z", {"low": 1, "high": 6, "integer": True}),
              par("d.w", ["p", "q", "r"])]
    runs = random(params, 2000, seed=7)
    u = np.random.default_rng(7).random((2000, 4))
    xs = np.array([r["a.x"] for r in runs])
    np.testing.assert_allclose(xs, 2.0 + 3.0 * u[:, 0], rtol=1e-15)
    ys = np.array([r["b.y"] for r in runs])
    np.testing.assert_allclose(np.log10(ys), -3.0 + 4.0 * u[:, 1], rtol=0, atol=1e-12)
    zs = np.array([r["c.z"] for r in runs])
    assert set(zs) == {1, 2, 3, 4, 5, 6}                       # inclusive integer range
    assert abs(np.mean(zs) - 3.5) < 0.15                       # uniform: mean 3.5, sd 1.7/sqrt(2000)
    assert {r["d.w"] for r in runs} == {"p", "q", "r"}
    assert runs == random(params, 2000, seed=7)               # same seed, same runs
    assert runs != random(params, 2000, seed=8)


@pytest.mark.parametrize("n", [7, 50])
def test_lhs_samples_every_stratum_once(n):
    params = [par("a.x", {"low": -1.0, "high": 1.0}), par("b.y", {"low": 10.0, "high": 30.0}),
              par("c.z", {"low": 1e-2, "high": 1.0, "scale": "log"})]
    runs = lhs(params, n, seed=3)
    for key, to_unit in (("a.x", lambda v: (v + 1.0) / 2.0), ("b.y", lambda v: (v - 10.0) / 20.0),
                         ("c.z", lambda v: (math.log10(v) + 2.0) / 2.0)):
        strata = sorted(int(to_unit(r[key]) * n * (1 - 1e-12)) for r in runs)
        assert strata == list(range(n)), key
    # the same points as scipy's LatinHypercube with the same generator
    unit = qmc.LatinHypercube(d=3, rng=np.random.default_rng(3)).random(n)
    np.testing.assert_allclose([r["b.y"] for r in runs], 10.0 + 20.0 * unit[:, 1], rtol=1e-14)
    assert runs == design("lhs", params, n, 3)
