"""hapflow.reuse: a pure helper called again on unchanged arguments is not called again."""
import math

import numpy as np
from numba import njit

import hapflow as hf
from hapflow import kmath
from hapflow.reuse import is_pure, pure_names, reuse_calls


@njit
def force(x, v, p):
    return p[0] * x + p[1] * math.tanh(v) + _spring(x)


@njit
def _spring(x):
    return 2.0 * x if x > 0.0 else x


@njit
def draw(state):
    state[0] += 1.0
    return state[0]


@njit
def force_and_count(x, p):
    return force(x, 0.0, p) + draw(p)


@njit(forceinline=True)              # a decorator's own call is no call of the function
def inlined_force(x, v, p):
    return p[0] * x + kmath.tanh(v) + _spring(x)


NAMESPACE = {"g_force": force, "g_math": math, "g_draw": draw}
BODY = """\
v_p = f[57:69]
for k in range(10):
    c1 = g_force(f[1], f[2], v_p)
    f[102] = c1
    c2 = g_force(f[1], f[2], v_p)
    for j in range(3):
        f[110 + j] = f[j]
    c3 = g_force(f[1], f[2], v_p)
    for j in range(3):
        f[j] = f[110 + j] * 2.0
    c4 = g_force(f[1], f[2], v_p)
    c5 = g_force(f[1], f[2], v_p)
    f[60] = 1.0
    c6 = g_force(f[1], f[2], v_p)
    x = g_draw(v_s)
    c7 = g_force(f[1], f[2], v_p)
    y = g_draw(v_p)
    c8 = g_force(f[1], f[2], v_p)
    if k > 2:
        c9 = g_force(f[1], f[2], v_p)
        f[2] = 0.0
        c10 = g_force(f[1], f[2], v_p)
    c11 = g_force(f[1], f[2], v_p)
    c12 = g_force(f[1], f[b0 + 2], v_p)
    c13 = g_force(f[1], f[b0 + 2], v_p)
    f[b1] = 0.0
    c14 = g_force(f[1], f[b0 + 2], v_p)
""".splitlines()


def test_purity_follows_the_helpers_a_function_calls():
    assert is_pure(force) and is_pure(_spring) and is_pure(inlined_force)
    assert not is_pure(draw)                       # writes its argument
    assert not is_pure(force_and_count)            # calls an impure helper


def test_a_call_is_reused_until_what_it_reads_may_have_changed():
    out = reuse_calls(BODY, pure_names(NAMESPACE), {"f", "m"})
    results = dict(line.strip().split(" = ") for line in out
                   if line.strip().startswith("c") and " = " in line)
    assert {name: value for name, value in results.items() if not value.startswith("g_")} == {
        "c2": "c1",          # f[102] is not read by the call
        "c3": "c2",          # the loop writes f[110:113] only
        "c5": "c4",
        "c7": "c6",          # draw() writes only what it is passed (v_s, not a view of f)
        "c9": "c8",          # a branch starts from what holds before it
        "c13": "c12",
    }
    for recomputed in ("c4",      # the loop wrote f[0:3]
                       "c6",      # f[60] lies in the view f[57:69]
                       "c8",      # draw(v_p) may write the view
                       "c10",     # f[2] written in the branch
                       "c11",     # ... maybe
                       "c14"):    # f[b1] may be f[b0 + 2]
        assert results[recomputed].startswith("g_force("), recomputed
    assert len(out) == len(BODY)                   # every statement stays on its line


def _device_graph():
    g = hf.Graph("reuse_device", rate=4000.0, duration=0.5)
    g.add("src", hf.registry.lookup("Sine")(amplitude=5.0, frequency=7.0, unit="N"))
    g.add("dev", hf.registry.lookup("HardeningSpringDevice")(damping=0.0))
    g.wire("src.y", "dev.force")
    g.record("dev.pos")
    g.record("dev.acc")
    g.record("dev.device_force")
    return g


def test_rk4_evaluates_the_force_law_once_per_stage_with_the_same_bits():
    """The device's output and its first RK4 stage read the same state: one call."""
    reused = hf.Simulation(_device_graph(), mode="fused")        # the text of one kernel
    assert reused.program.source.count("g__device_force(") == 4
    calls = hf.Simulation(_device_graph(), inline=False, mode="fused")
    a, b = reused.run(0.5), calls.run(0.5)
    assert np.max(np.abs(a["dev.pos"])) > 1e-4
    for name in a.signals:
        assert np.array_equal(a[name], b[name]), name
