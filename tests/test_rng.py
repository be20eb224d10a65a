"""hapflow.rng: the kernels' normal numbers are standard normal (against scipy), in the tails
too, reproducible, and the same bits compiled and interpreted."""
import statistics

import numpy as np
import pytest
from numba import njit
from scipy import special, stats

from hapflow.rng import normal, normal_quantile, stream_seeds, uniform

N = 1_000_000


@njit          # not cached: numba's cache would keep a stale normal() after an edit
def _normals(m, n):
    out = np.empty(n)
    for i in range(n):
        out[i] = normal(m, 0)
    return out


@pytest.fixture(scope="module")
def sample():
    return _normals(stream_seeds(7, "noise", 1), N)


def test_normal_numbers_pass_kolmogorov_smirnov_against_scipy(sample):
    assert stats.kstest(sample, "norm").pvalue > 1e-3
    assert abs(sample.mean()) < 5 / np.sqrt(N) and abs(sample.std() - 1.0) < 5 / np.sqrt(2 * N)


@pytest.mark.parametrize("z", [1.0, 1.44, 2.0, 3.0, 4.0])
def test_tail_probabilities_match_the_normal_law(sample, z):
    # AS241 changes its formula at |z| = 1.44 (|p - 1/2| = 0.425): check both sides
    p = 2 * stats.norm.sf(z)
    count = np.count_nonzero(np.abs(sample) > z)
    assert abs(count - N * p) < 5 * np.sqrt(N * p), (count, N * p)


def test_same_bits_compiled_and_interpreted_and_streams_advance_alike():
    seeds = stream_seeds(3, "head", 2)
    a, b = seeds.copy(), seeds.copy()
    compiled = [normal(a, 1) for _ in range(5000)]
    interpreted = [normal.py_func(b, 1) for _ in range(5000)]
    assert compiled == interpreted and np.array_equal(a, b)
    assert a[0] == seeds[0]                     # another stream of the block is untouched


def test_streams_of_a_block_are_uncorrelated_and_reproducible():
    m = stream_seeds(1, "x", 2)
    x = _normals(m[:1].copy(), 100_000)
    y = _normals(m[1:].copy(), 100_000)
    assert abs(np.corrcoef(x, y)[0, 1]) < 5 / np.sqrt(100_000)
    assert np.array_equal(x, _normals(stream_seeds(1, "x", 2)[:1].copy(), 100_000))


def test_uniform_numbers_lie_inside_the_open_unit_interval():
    m = stream_seeds(5, "u", 1)
    u = np.array([uniform(m, 0) for _ in range(10000)])
    assert u.min() > 0.0 and u.max() < 1.0 and stats.kstest(u, "uniform").pvalue > 1e-3


def test_the_quantile_agrees_with_scipy_and_cpython_in_every_range():
    """Each of AS241's three ranges (the far tail, ``p`` below about 1e-11, no sample
    reaches) against scipy's ndtri (Cephes, another algorithm) and CPython's
    ``NormalDist.inv_cdf`` (AS241 too, with libm's ``log``)."""
    p = np.concatenate([np.linspace(0.01, 0.99, 997), np.geomspace(1e-300, 0.07, 500),
                        1.0 - np.geomspace(2 ** -53, 0.07, 200), [2 ** -54, 0.075, 0.925]])
    z = np.array([normal_quantile(v) for v in p])
    assert np.allclose(z, special.ndtri(p), rtol=2e-15, atol=0.0)
    cpython = np.array([statistics.NormalDist().inv_cdf(v) for v in p])
    assert np.max(np.abs(z - cpython) / np.spacing(np.abs(cpython))) <= 4.0
    assert np.array_equal(z, [normal_quantile.py_func(v) for v in p.tolist()])
