"""hapflow.closures: factory-made kernels compiled once per cache, named by what they run."""
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from hapflow import closures
from hapflow.closures import frozen
from tests.helpers import edit

FACTORY = textwrap.dedent("""
    from numba import njit
    from hf_frozen_leaf import leaf

    SHIFT = 1.0

    def make(scale):
        @njit(inline="always")
        def scaled(x):
            return scale * leaf(x)

        @njit
        def kernel(x):
            return scaled(x) + SHIFT
        return kernel
""")
LEAF = "from numba import njit\n@njit\ndef leaf(x):\n    return {} * x\n"
CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import hf_frozen_factory
    from hapflow.closures import frozen
    (kernel,) = frozen(hf_frozen_factory.make(3.0))
    value = kernel(2.0)
    stats = kernel.stats
    print(kernel.__module__, value, sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
""")


def _child(folder, cache, script=CHILD):
    env = {**os.environ, "HAPFLOW_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", script, str(folder)], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return out[0], float(out[1]), int(out[2]), int(out[3])


def test_a_frozen_closure_is_loaded_from_disk_by_the_next_process(tmp_path):
    (tmp_path / "hf_frozen_factory.py").write_text(FACTORY)
    (tmp_path / "hf_frozen_leaf.py").write_text(LEAF.format(2.0))
    first = _child(tmp_path, tmp_path / "cache")
    second = _child(tmp_path, tmp_path / "cache")
    assert first[1:] == (13.0, 0, 1)          # 3 * (2 * 2) + 1, compiled and stored
    assert second == (first[0], 13.0, 1, 0)   # the same module, machine code from disk


NESTED = textwrap.dedent("""
    from numba import njit

    def make_inner(scale):
        @njit
        def inner(x):
            return scale * x
        return inner

    def make_outer(inner):
        @njit
        def outer(x):
            return inner(x) + 1.0
        return outer
""")
NESTED_CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import hf_frozen_nested as f
    from hapflow.closures import frozen
    (inner,) = frozen(f.make_inner(3.0))
    (kernel,) = frozen(f.make_outer(inner))
    value = kernel(2.0)
    stats = kernel.stats
    print(kernel.__module__, value, sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
""")


def test_a_closure_over_a_frozen_kernel_keeps_its_name_in_the_next_process(tmp_path):
    """The callee's module is written by the first process: its text must name the caller
    the same way there as in every later process, or each process compiles it again."""
    (tmp_path / "hf_frozen_nested.py").write_text(NESTED)
    first = _child(tmp_path, tmp_path / "cache", NESTED_CHILD)
    second = _child(tmp_path, tmp_path / "cache", NESTED_CHILD)
    assert first[1:] == (7.0, 0, 1)           # 3 * 2 + 1, compiled and stored
    assert second == (first[0], 7.0, 1, 0)    # the same module, from disk


def test_an_edit_of_a_function_the_closure_calls_renames_the_module(tmp_path):
    (tmp_path / "hf_frozen_factory.py").write_text(FACTORY)
    (tmp_path / "hf_frozen_leaf.py").write_text(LEAF.format(2.0))
    before = _child(tmp_path, tmp_path / "cache")
    edit(tmp_path / "hf_frozen_leaf.py", LEAF.format(5.0))
    after = _child(tmp_path, tmp_path / "cache")
    assert after[0] != before[0]
    assert after[1:] == (31.0, 0, 1)          # the new leaf, compiled: never the stale code


def test_frozen_kernels_compute_what_the_closures_compute():
    def make(n, flag):
        @njit
        def total(a):
            s = 0.0
            for i in range(n):
                s += a[i]
            return -s if flag else s
        return total

    closures = make(3, True), make(2, False)
    a = np.array([1.0, 2.0, 4.0])
    kernels = frozen(*closures)
    assert [k(a) for k in kernels] == [c(a) for c in closures] == [-7.0, 3.0]
    assert all(k.py_func.__closure__ is None for k in kernels)
    assert frozen(*closures) == kernels                    # one module per set, memoised



INLINING_FACTORY = textwrap.dedent("""
    from numba import njit

    @njit(inline="always")
    def bump(a, x):
        a[0] += 1.0              # before x is read: x must keep the value it had at the call
        if x > 0.0:
            a[1] = x + x
        else:
            a[1] = -x

    def make(k):
        @njit
        def kernel(a):
            bump(a, a[0] * k)
            return a[1]
        return kernel
""")


def test_a_call_of_an_inline_always_function_is_written_into_the_text_as_its_body(
        tmp_path, monkeypatch):
    (tmp_path / "hf_inlining_factory.py").write_text(INLINING_FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hf_inlining_factory", raising=False)
    closure = importlib.import_module("hf_inlining_factory").make(3.0)
    (kernel,) = frozen(closure)
    text = Path(kernel.py_func.__code__.co_filename).read_text()
    assert "bump(" not in text and "a[0] += 1.0" in text
    want, got = np.array([1.0, 0.0]), np.array([1.0, 0.0])
    assert closure(want) == kernel(got) == 6.0          # numba's inlining, and the text's
    assert np.array_equal(want, got)
    monkeypatch.delitem(sys.modules, "hf_inlining_factory")


INLINING_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import hf_inlining_factory
    from hapflow import closures
    if sys.argv[2] == "again":
        closures._Bodies = None                 # inlining now would fail
    (kernel,) = closures.frozen(hf_inlining_factory.make(3.0))
    text = open(kernel.py_func.__code__.co_filename).read()
    print(kernel.__module__, kernel(np.array([1.0, 0.0])), "bump(" not in text)
""")


def test_the_next_process_reads_the_inlined_text_instead_of_inlining_again(tmp_path):
    (tmp_path / "hf_inlining_factory.py").write_text(INLINING_FACTORY)
    env = {**os.environ, "HAPFLOW_CACHE_DIR": str(tmp_path / "cache")}

    def child(kind):
        return subprocess.run([sys.executable, "-c", INLINING_CHILD, str(tmp_path), kind],
                              env=env, check=True, capture_output=True, text=True).stdout.split()
    first = child("first")
    assert first[1:] == ["6.0", "True"]
    assert child("again") == first

@njit
def _double(x):
    return 2.0 * x


@njit
def _triple(x):
    return 3.0 * x


def _applying(fn):
    @njit
    def apply(x):
        return fn(x)
    return apply


def test_closures_over_different_functions_are_different_modules():
    """Two models' steps differ only in the function they capture: same text otherwise."""
    double, = frozen(_applying(_double))
    triple, = frozen(_applying(_triple))
    assert double.__module__ != triple.__module__
    assert (double(1.0), triple(1.0)) == (2.0, 3.0)


def test_a_capture_without_exact_text_is_refused():
    table = np.ones(3)

    @njit
    def reads(i):
        return table[i]

    with pytest.raises(TypeError, match="captures table, a ndarray"):
        frozen(reads)


def test_a_closure_without_source_is_refused_before_it_is_named(monkeypatch):
    """A closure defined by text without a file has nothing to name its module by (and no
    text to write): refused before a module name is made, so it can never load a module
    that another such closure's name led to."""
    def no_module(name):
        raise AssertionError(f"named {name} without a source")
    monkeypatch.setattr(closures, "module_path", no_module)
    namespace = {"njit": njit}
    exec("def make(k):\n    @njit\n    def scaled(x):\n        return k * x\n"
         "    return scaled\n", namespace)
    with pytest.raises(TypeError, match="scaled has no source"):
        frozen(namespace["make"](2.0))


def _summing(scale):
    @njit
    def total(a, start, negate, layout):
        s = 0.0
        for i in range(layout.n):                    # the layout's size: a constant
            s += a[start + i]
        return -scale * s if negate else scale * s
    return total


def test_a_frozen_function_is_compiled_once_whoever_calls_it():
    """A constant offset or flag at one call site and a computed one at another, and a Python
    call (an interpreted kernel) with the layout compiled code has as a constant, share one
    compiled version; a call with another layout runs that layout's version."""
    from hapflow.blocks.estimation import Layout
    (total,) = frozen(_summing(2.0))
    three = Layout(3, *range(19))
    two = Layout(2, *range(19))

    @njit
    def kernel(a, start):
        return total(a, 0, True, three) + total(a, start, False, three)

    a = np.array([1.0, 2.0, 4.0, 8.0])
    assert kernel(a, 1) == -2.0 * 7.0 + 2.0 * 14.0
    assert total(a, 1, False, three) == 28.0           # from Python: the kernel's version
    assert len(total.signatures) == 1, total.signatures
    assert total(a, 1, False, two) == 12.0             # not the version for three
    assert len(total.signatures) == 2
