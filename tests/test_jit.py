"""hapflow.jit.njit: one compiled version of a helper per argument types, whoever calls it."""
import numba
import numpy as np

from hapflow.jit import njit, njit_noalloc


@njit
def _pick(a, k, flag):
    return a[k] if flag else -a[k]


@njit_noalloc(forceinline=True)
def _scaled(a, k, gain):
    return gain * a[k]


@numba.njit
def _caller(a, k):
    # constants at two call sites, a run-time value at a third
    return _pick(a, 3, True) + _pick(a, 1, False) + _pick(a, k, True) + _scaled(a, 2, 4)


def test_constant_arguments_do_not_compile_a_helper_again():
    a = np.arange(5.0)
    assert _caller(a, 4) == 3.0 - 1.0 + 4.0 + 8.0
    plain = (numba.types.float64[::1], numba.types.int64, numba.types.boolean)
    assert _pick.signatures == [plain]
    assert _scaled.signatures == [(numba.types.float64[::1], numba.types.int64,
                                   numba.types.int64)]
    assert _pick(a, 3, True) == 3.0              # a call from Python: the same version
    assert _pick.signatures == [plain]


def test_a_helper_keeps_numbas_options():
    assert _scaled.targetoptions["forceinline"] and not _scaled.targetoptions["_nrt"]
    assert _pick.targetoptions["nopython"]
