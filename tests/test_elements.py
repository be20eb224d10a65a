"""Run arrays indexed through a pointer (hapflow.elements) and where generated code does it."""
import numba
import numpy as np
import pytest

from hapflow.codegen import element_prologue
from hapflow.elements import elements


@numba.njit
def _through_pointer(f, m):
    f = elements(f)
    m = elements(m)
    view = f[3:7]
    f[1] = f[0] + m[2]
    view[0] = 10.0                     # f[3]
    m[0] = m[1] * 2
    return view.size, view[1]


def test_pointer_elements_and_views_read_and_write_the_arrays_themselves():
    f = np.arange(10.0)
    m = np.array([0, 21, 5], dtype=np.int64)
    size, second = _through_pointer(f, m)
    assert (size, second) == (4, 4.0)
    assert f.tolist() == [0.0, 5.0, 2.0, 10.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert m.tolist() == [42, 21, 5]


@numba.njit
def _strided(f, lane, width):
    f = elements(f)
    view = f[2 * width + lane:5 * width + lane:width]
    view[1] = -1.0                     # element 3 of the lane
    return view.size, view[0], view[2]


@pytest.mark.parametrize("lane", [0, 1, 3])
def test_strided_pointer_views_are_the_numpy_views(lane):
    """A lane's view of interleaved arrays (element i of lane r at i * width + r)."""
    f = np.arange(40.0)
    want = f.copy()
    view = want[2 * 4 + lane:5 * 4 + lane:4]
    view[1] = -1.0
    assert _strided(f, lane, 4) == (view.size, view[0], view[2])
    assert np.array_equal(f, want)


@pytest.mark.parametrize("array", [np.zeros(3, dtype=np.bool_), np.zeros((2, 2))])
def test_elements_refuses_arrays_a_pointer_would_misread(array):
    @numba.njit
    def pointed(a):
        return elements(a)[0]
    with pytest.raises(numba.core.errors.TypingError, match="1-D C-contiguous float or integer"):
        pointed(array)


def test_only_arrays_used_by_index_alone_get_a_pointer():
    body = ["v = f[2:5]", "f[0] = m[1] + g_helper(v, si[0])", "ph_updates(f, m, si, sb, i, t)"]
    assert element_prologue(body[:2]) == ["f = elements(f)", "m = elements(m)",
                                          "si = elements(si)"]
    # passed whole to a compiled callee: it stays the array the callee was compiled for
    assert element_prologue(body) == []
    assert element_prologue(["x = sb[0]", "log[k, 0] = f[1]"]) == ["f = elements(f)"]
