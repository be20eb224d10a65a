"""hapflow.kmath: fdlibm's accuracy, the same bits compiled, in SIMD lanes and in Python."""
import math
import re

import numba
import numpy as np
import pytest

from hapflow import kmath

NAMES = ("exp", "expm1", "log", "sin", "cos", "tanh")
FUNCTIONS = tuple(getattr(kmath, name) for name in NAMES)
LONG = np.finfo(np.longdouble).nmant >= 63
"""Long double carries at least 11 bits more than double: a reference for ulp errors."""


@numba.njit(error_model="numpy")
def _over(a, which):
    """Function ``which`` of NAMES over ``a``: a loop over a run-time length, as lanes run."""
    out = np.empty_like(a)
    for i in range(a.size):
        x = a[i]
        if which == 0:
            out[i] = kmath.exp(x)
        elif which == 1:
            out[i] = kmath.expm1(x)
        elif which == 2:
            out[i] = kmath.log(x)
        elif which == 3:
            out[i] = kmath.sin(x)
        elif which == 4:
            out[i] = kmath.cos(x)
        else:
            out[i] = kmath.tanh(x)
    return out


@numba.njit(error_model="numpy")
def _lanes(a, out):
    """Every function over ``a`` in one branch-free loop body (what the compiler vectorises)."""
    for i in range(a.size):
        x = a[i]
        out[i] = (kmath.sin(x) + kmath.cos(x) + kmath.tanh(x) + kmath.exp(x) + kmath.expm1(x)
                  + kmath.log(abs(x)))


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    return getattr(np, name)(x.astype(np.longdouble))


def _ulps(value: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """``|value - exact|`` in units of the last place of ``exact`` rounded to double."""
    spacing = np.spacing(np.abs(exact.astype(np.float64)))
    return np.asarray(np.abs(value.astype(np.longdouble) - exact) / spacing, dtype=float)


def _samples(name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(sum(map(ord, name)))
    if name == "log":
        return [np.exp(rng.uniform(-745.0, 709.0, 40000)), rng.uniform(0.5, 2.0, 40000),
                rng.uniform(0.999, 1.001, 20000), rng.uniform(1e-320, 1e-308, 20000)]
    spans = {"exp": (745.0, 709.7), "expm1": (40.0, 709.0), "tanh": (25.0, 25.0),
             "sin": (kmath.REDUCTION_LIMIT, kmath.REDUCTION_LIMIT),
             "cos": (kmath.REDUCTION_LIMIT, kmath.REDUCTION_LIMIT)}
    lo, hi = spans[name]
    return [rng.uniform(-lo, hi, 40000), rng.uniform(-1.0, 1.0, 40000),
            rng.uniform(-10.0, 10.0, 40000), rng.uniform(-1e-6, 1e-6, 20000)]


@pytest.mark.skipif(not LONG, reason="long double is no wider than double here")
@pytest.mark.parametrize("name", NAMES)
def test_errors_stay_within_fdlibms_bounds(name):
    """Below one ulp (fdlibm's bound; tanh below two, as glibc's), compiled."""
    bound = 2.0 if name == "tanh" else 1.0
    for x in _samples(name):
        worst = _ulps(_over(x, NAMES.index(name)), _reference(name, x)).max()
        assert worst < bound, (name, x.min(), x.max(), worst)


@pytest.mark.skipif(not LONG, reason="long double is no wider than double here")
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_large_arguments_lose_no_more_than_the_spacing_of_doubles_there(name):
    """Beyond fdlibm's medium reduction the error grows as |x| 2^-53: below the
    distance from x to the next double."""
    rng = np.random.default_rng(5)
    for top in (1e7, 1e9, 1e12, 1e15):
        x = rng.uniform(top / 2, top, 20000)
        error = np.abs(_over(x, NAMES.index(name)) - _reference(name, x)).astype(float)
        assert (error <= np.abs(x) * 2.0 ** -53).all(), (top, (error / np.abs(x)).max())


SPECIAL = {
    "exp": [(0.0, 1.0), (-0.0, 1.0), (math.inf, math.inf), (-math.inf, 0.0), (1000.0, math.inf),
            (-1000.0, 0.0), (kmath.EXP_OVERFLOW, math.exp(kmath.EXP_OVERFLOW)),
            (-745.0, math.exp(-745.0))],
    "expm1": [(0.0, 0.0), (-0.0, -0.0), (math.inf, math.inf), (-math.inf, -1.0), (-50.0, -1.0),
              (1000.0, math.inf), (1e-300, 1e-300), (5e-324, 5e-324)],
    "log": [(1.0, 0.0), (0.0, -math.inf), (-0.0, -math.inf), (-1.0, math.nan),
            (math.inf, math.inf), (-math.inf, math.nan), (5e-324, math.log(5e-324))],
    "sin": [(0.0, 0.0), (-0.0, -0.0), (math.inf, math.nan), (-math.inf, math.nan),
            (2.0 ** 51, math.nan), (5e-324, 5e-324)],
    "cos": [(0.0, 1.0), (-0.0, 1.0), (math.inf, math.nan), (2.0 ** 51, math.nan),
            (math.pi, -1.0)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (math.inf, 1.0), (-math.inf, -1.0), (30.0, 1.0),
             (-30.0, -1.0), (1e-300, 1e-300)],
}


@pytest.mark.parametrize("name", NAMES)
def test_special_arguments_give_fdlibms_results_compiled_and_in_python(name):
    f = getattr(kmath, name)
    x = np.array([arg for arg, _ in SPECIAL[name]] + [math.nan])
    want = np.array([value for _, value in SPECIAL[name]] + [math.nan])
    compiled = _over(x, NAMES.index(name))
    python = np.array([f.py_func(float(v)) for v in x])
    for got in (compiled, python):
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got[want == 0.0]), np.signbit(want[want == 0.0]))


@pytest.mark.parametrize("name", NAMES)
def test_python_gives_the_compiled_bits(name):
    """The interpreted reference of a kernel calls these from Python: the same bits."""
    f = getattr(kmath, name)
    x = np.concatenate([s[:500] for s in _samples(name)])
    compiled = _over(x, NAMES.index(name))
    python = np.array([f.py_func(float(v)) for v in x])
    assert np.array_equal(compiled.view(np.int64), python.view(np.int64))


def test_a_loop_over_lanes_runs_in_simd_registers_with_the_scalar_bits():
    """The loop calling every function compiles to vector code (no call into the C
    library stops it) and each lane has the bits of a scalar call."""
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-30.0, 30.0, 997), [0.0, -0.0, math.inf, math.nan, 1e-310]])
    out = np.empty_like(x)
    _lanes(x, out)
    llvm = _lanes.inspect_llvm(_lanes.signatures[0])
    assert re.search(r"<\d+ x double>", llvm), "the loop over lanes was not vectorised"
    library = re.findall(r"call [^@]*@((?:llvm\.)?(?:sin|cos|tanh|exp|expm1|log)\b[\w.]*)", llvm)
    assert not library, f"calls into the C library (one lane at a time): {library}"
    scalar = np.array([kmath.sin.py_func(v) + kmath.cos.py_func(v) + kmath.tanh.py_func(v)
                       + kmath.exp.py_func(v) + kmath.expm1.py_func(v)
                       + kmath.log.py_func(abs(v)) for v in x.tolist()])
    nan = np.isnan(scalar)                   # a NaN's sign is no value: the compiler may
    assert np.array_equal(np.isnan(out), nan)  # swap the operands of a sum of NaNs
    assert np.array_equal(out[~nan].view(np.int64), scalar[~nan].view(np.int64))


def test_bits_round_trip():
    for x in (0.0, -0.0, 1.0, -2.5, 5e-324, math.inf, 1.7976931348623157e308):
        assert kmath.float_bits(x) == np.float64(x).view(np.int64)
        assert kmath.bits_float(kmath.float_bits(x)) == x
