"""hapflow.rng: the kernels' normal numbers are standard normal (against scipy), in the tails
too, reproducible, and the same bits compiled and interpreted."""
import numpy as np
import pytest
from numba import njit
from scipy import stats

from hapflow.rng import normal, stream_seeds, uniform

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


@pytest.mark.parametrize("z", [1.0, 2.0, 3.0, 3.44, 4.0])
def test_tail_probabilities_match_the_normal_law(sample, z):
    # the ziggurat's base strip hands |z| > 3.44 to a separate tail method: check both sides
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
