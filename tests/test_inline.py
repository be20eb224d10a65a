"""Kernel inlining: rewriting rules, fallbacks, and equality with view calls."""
import importlib.util
import inspect
import math
import sys
import textwrap
import types

import numpy as np
from numba import njit

import hapflow as hf
from hapflow.inline import ArrayArg, ExprArg, inline, source

from tests.helpers import edit

SCALE = 3.0


@njit
def _helper(v, k):
    return v[k] * 2.0


def _kernel(t, x, u, y):
    n = len(u)
    for j in range(y.size):
        y[j] = u[j] * SCALE + t + _helper(x, 0) + math.sin(x[-1]) + n
    return


def _negative(t, u, y):
    k = 1
    k = k - 2
    y[0] = u[k] + u[-1]


def _early_return(t, u, y):
    if u[0] > 0:
        return
    y[0] = 1.0


def _star(t, p, *ports):
    ports[int(p[0])][0] = ports[0][0]          # a run-time index into the star tuple


def _signed_sum(t, p, *ports):
    y = ports[-1]
    for j in range(y.size):
        acc = 0.0
        for k in range(len(ports) - 1):
            if p[k] > 0.0:
                acc += ports[k][j]
            else:
                acc -= ports[k][j]
        y[j] = acc


def _inline(fn, args):
    registered = {}

    def resolve(name, value):
        registered[f"g_{name}"] = value
        return f"g_{name}"

    def view(arg):
        return f"v_{arg.array}_{arg.start}"

    return inline(fn, args, "c1_", resolve, view), registered


def test_rewrites_indices_sizes_locals_constants_and_globals():
    lines, registered = _inline(_kernel, [ExprArg("ts"), ArrayArg("x", 2, 3), ArrayArg("sf", 5, 2),
                                          ArrayArg("sf", 9, 2)])
    text = "\n".join(lines)
    assert "c1_n" not in text and " + 2" in text                # len(u) -> constant, propagated
    assert "for c1_j in range(2):" in text                      # y.size -> constant
    assert "sf[c1_j + 9] = sf[c1_j + 5] * 3.0 + ts" in text     # offsets, closure constant, t
    assert "g__helper(v_x_2, 0)" in text                        # whole port -> hoisted view
    assert "g_math.sin(x[4])" in text                           # negative index folded
    assert "return" not in text
    assert registered == {"g__helper": _helper, "g_math": math}


def test_run_time_index_wraps_like_a_view():
    lines, _ = _inline(_negative, [ExprArg("t"), ArrayArg("sf", 4, 3), ArrayArg("sf", 9, 1)])
    text = "\n".join(lines)
    assert "sf[9] = sf[c1_k + 4 + (3 if c1_k < 0 else 0)] + sf[6]" in text
    sf = np.arange(12.0)
    scope = {"sf": sf, "t": 0.0}
    exec(text, scope)
    assert sf[9] == sf[6] + sf[6]          # u[-1] read through the wrap, twice


def _sized(t, u, y):
    n = len(u)
    for j in range(y.size):
        y[j] = u[j + n - 1] if n > 0 else 0.0


def test_constant_sizes_leave_no_one_trip_loops_or_dead_branches():
    lines, _ = _inline(_sized, [ExprArg("t"), ArrayArg("sf", 4, 1), ArrayArg("sf", 9, 1)])
    assert lines == ["sf[9] = sf[4]"]
    lines, _ = _inline(_sized, [ExprArg("t"), ArrayArg("sf", 4, 3), ArrayArg("sf", 9, 2)])
    assert lines == ["for c1_j in range(2):", "    sf[c1_j + 9] = sf[c1_j + 6]"]
    sf = np.arange(12.0)
    exec("\n".join(lines), {"sf": sf})
    assert list(sf[9:11]) == [6.0, 7.0]


def test_falls_back_when_it_cannot_inline_faithfully():
    assert _inline(_early_return, [ExprArg("t"), ArrayArg("sf", 0, 1), ArrayArg("sf", 1, 1)])[0] is None
    assert _inline(_star, [ExprArg("t"), ArrayArg("sf", 0, 1), ArrayArg("sf", 1, 1),
                           ArrayArg("sf", 2, 1)])[0] is None
    assert _inline(_kernel, [ExprArg("t")])[0] is None          # wrong arity


def test_star_arguments_are_bound_and_their_loops_unrolled():
    args = [ExprArg("t"), ArrayArg("sf", 0, 3), ArrayArg("sf", 3, 2), ArrayArg("sf", 5, 2),
            ArrayArg("sf", 7, 2), ArrayArg("sf", 9, 2)]
    lines, _ = _inline(_signed_sum, args)
    text = "\n".join(lines)
    assert "ports" not in text and "c1_k" not in text and "c1_y" not in text
    assert text.count("c1_acc +=") == 3 and text.count("c1_acc -=") == 3   # one per input
    sf = np.array([1.0, -1.0, 1.0, 0.5, 0.25, 2.0, 4.0, 8.0, 16.0, 0.0, 0.0])
    expected = sf.copy()
    _signed_sum(0.0, expected[0:3], expected[3:5], expected[5:7], expected[7:9], expected[9:11])
    exec(text, {"sf": sf, "t": 0.0})
    assert np.array_equal(sf, expected) and list(sf[9:11]) == [6.5, 12.25]


def _mixed():
    from tests.helpers import mixed_graph
    return mixed_graph()


def test_inlined_and_view_call_kernels_are_bit_identical():
    # the fused kernel's text (HAPFLOW_KERNEL=units does not apply to an explicit mode)
    inlined = hf.Simulation(_mixed(), mode="fused")
    calls = hf.Simulation(_mixed(), inline=False, mode="fused")
    assert "# plant.deriv" in inlined.program.source
    assert "b2_deriv(" not in inlined.program.source and "b2_deriv(" in calls.program.source
    a, b = inlined.run(1.0), calls.run(1.0)
    for name in a.signals:
        assert np.array_equal(a[name], b[name]), name


def test_kernel_signature_mismatch_is_reported_at_add():
    class Lag(hf.Block, register=False):
        """Lag whose output kernel forgets its input.

        Ports
        -----
        u : in, (1,)
        y : out, (1,)
        """

        inputs = {"u": hf.In(1)}
        outputs = {"y": hf.Out(1, depends="state")}
        cstate = 1

        @staticmethod
        @njit
        def output(t, x, d, m, p, y):
            y[0] = x[0]

    g = hf.Graph()
    try:
        g.add("lag", Lag())
    except hf.GraphError as err:
        assert "kernel output('t', 'x', 'd', 'm', 'p', 'y') of Lag must take (t, x, d, m, p, u, y)" in str(err)
    else:
        raise AssertionError("bad kernel signature accepted")


EDGE_CASES = '''\
import numba


@numba.njit(
    cache=False)
def decorated(x):
    return (x +
            1.0)


def ends_in_pass(x):
    if x:
        x = 1
    else:
        pass
        # a comment of the body


def nested_last(x):
    def inner(y):
        return y * 2
    return inner


def docstring_only():
    """Nothing but a docstring,
    on two lines."""


@numba.njit
def decorated_docstring_only(
    x,
):
    """Nothing but a docstring."""


def two_lines():
    return 1


@staticmethod
@staticmethod
def decorated_twice(x):
    return x


class Holder:
    @staticmethod
    def method(x):
        s = """
a string with lines at column 0
"""
        return s
'''


def _functions(module):
    """Every Python function a module defines, its classes' methods included."""
    found = []
    for value in vars(module).values():
        members = vars(value).values() if isinstance(value, type) else [value]
        for member in members:
            fn = getattr(getattr(member, "__func__", member), "py_func",
                         getattr(member, "__func__", member))
            if isinstance(fn, types.FunctionType) and fn.__module__ == module.__name__:
                found.append(fn)
    return found


def _inspected(fn):
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except OSError:                                      # defined by text without a file
        return None


def test_source_cuts_what_inspect_reads_from_every_engine_and_block_module(tmp_path):
    """``source`` reads a function's lines by its code's line table instead of tokenising
    its file: the text must be ``inspect.getsource``'s, for every function of hapflow and
    its blocks, and for definitions whose last lines compile to no instruction."""
    path = tmp_path / "edge_cases.py"
    path.write_text(EDGE_CASES)
    spec = importlib.util.spec_from_file_location("edge_cases", path)
    edge = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(edge)
    hf.registry.names()                                  # imports every block module
    modules = [m for name, m in sorted(sys.modules.items())
               if name.startswith("hapflow.") and getattr(m, "__file__", None)]
    functions = [f for m in [edge, *modules] for f in _functions(m)]
    assert len(functions) > 500
    differ = [f.__qualname__ for f in functions if source(f) != _inspected(f)]
    assert differ == []
    assert source(edge.ends_in_pass).endswith("        pass\n        # a comment of the body\n")
    assert source(edge.docstring_only).endswith('on two lines."""\n')
    assert source(edge.decorated_docstring_only.py_func).endswith('a docstring."""\n')
    # a line table moved onto another function's decorators (Hypothesis moves its wrapper
    # of a test onto the test's lines so): cut there, it ends before the ``def``
    line = EDGE_CASES.splitlines().index("@staticmethod") + 1
    moved = types.FunctionType(edge.two_lines.__code__.replace(
        co_firstlineno=line, co_name="decorated_twice"), {})
    assert source(moved) == _inspected(moved) == "@staticmethod\n@staticmethod\n" \
        "def decorated_twice(x):\n    return x\n"


def test_source_reads_a_file_edited_after_its_first_read(tmp_path):
    path = tmp_path / "edited_kernel.py"
    for k, body in enumerate(("return 1.0", "return 2.0 + 0.0")):
        edit(path, f"def kernel(x):\n    {body}\n")
        spec = importlib.util.spec_from_file_location(f"edited_kernel_{k}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert source(module.kernel) == f"def kernel(x):\n    {body}\n"
