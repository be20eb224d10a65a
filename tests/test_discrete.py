"""Discrete-time blocks (blocks/discrete.py): UnitDelay and TransferFunction.

Random inputs are replayed tick by tick by a test-only source; expected
outputs are closed forms (shifts, sums) or ``scipy.signal.lfilter`` /
``scipy.signal.dlsim`` on the same numbers, also at block rate dividers.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.signal

import hapflow
from tests.helpers import table
from hapflow.block import ParamError
from hapflow.blocks.arithmetic import Sum
from hapflow.blocks.discrete import TransferFunction, UnitDelay
from hapflow.blocks.sources import Constant
from hapflow.graph import feedthrough
from hapflow.schedule import build_schedule

RATE = 1000.0
N = 240
rng = np.random.default_rng(7)
U1 = rng.standard_normal((N, 1))
U2 = rng.uniform(-3.0, 3.0, (N, 2))
C = 0.5

B2, A2 = scipy.signal.butter(2, 0.2)                      # biproper, 2nd order
NUM3, DEN3 = [0.5, -0.2], [1.0, -1.1, 0.5, -0.08]         # strictly proper, 3rd order
NUM3B, DEN3B = [2.0, 0.3, -0.1, 0.05], [2.0, -0.6, 0.2, 0.1]  # biproper, 3rd, den[0] != 1
NUM2S, DEN2S = [0.0, 0.3, 0.1], [1.0, -0.5, 0.06]         # leading zero: strictly proper
NUML, DENL = [0.2, 0.1], [1.0, -0.5, 0.3]                 # in a feedback loop


def lfilter_z(num, den, u):
    """``lfilter`` for coefficients in descending powers of z (pad num to len(den))."""
    b = np.concatenate([np.zeros(len(den) - len(num)), num])
    return scipy.signal.lfilter(b, den, u)


def held(values_at_hits, offset, divider, n, before=0.0):
    """Zero-order hold of one value per sample hit (hits at offset + k divider)."""
    out = np.full(n, before, dtype=float)
    for i in range(offset, n):
        out[i] = values_at_hits[(i - offset) // divider]
    return out


# ================================================================ UnitDelay
def _delay_graph() -> hapflow.Graph:
    g = hapflow.Graph(name="test_unit_delay", rate=RATE, duration=N / RATE)
    g.add("u2", table(U2))
    g.add("u1", table(U1))
    g.add("c", Constant(value=[C]))
    g.add("d1", UnitDelay(initial=0.75, size=2))
    g.add("d4", UnitDelay(initial=-1.0, size=2), rate=RATE / 4)
    g.add("d4o", UnitDelay(initial=2.0, size=2), rate=RATE / 4, offset=3)
    g.wire("u2.y -> d1.u")
    g.wire("u2.y -> d4.u")
    g.wire("u2.y -> d4o.u")
    # accumulators: y = u + z^-1 y, with the delay at the base rate and at rate / 4
    for acc, z, src, rate in (("acc", "z", "c", None), ("acc_r", "z_r", "u1", None),
                              ("acc4", "z4", "c", RATE / 4)):
        g.add(acc, Sum())
        g.add(z, UnitDelay(), rate=rate)
        g.wire(f"{src}.y -> {acc}.u1")
        g.wire(f"{z}.y -> {acc}.u2")
        g.wire(f"{acc}.y -> {z}.u")
        g.record(f"{acc}.y", f"{z}.y")
    g.record("d1.y", "d4.y", "d4o.y")
    return g


@pytest.fixture(scope="module")
def delay_graph():
    return _delay_graph()


@pytest.fixture(scope="module")
def delay_run(delay_graph):
    return hapflow.Simulation(delay_graph).run()


def test_unit_delay_compiled_and_interpreted_are_bit_identical(delay_graph, delay_run):
    short = hapflow.Simulation(delay_graph, interpret=True).run(0.04)
    n = short.time.size
    for key, values in short.signals.items():
        assert np.array_equal(values, delay_run.signals[key][:n]), key


def test_unit_delay_shifts_by_one_tick(delay_run):
    y = delay_run.signals["d1.y"]
    assert y.shape == (N, 2)
    assert np.array_equal(y[0], [0.75, 0.75])
    assert np.array_equal(y[1:], U2[:-1])


def test_unit_delay_at_rate_divider_holds_between_hits(delay_run):
    y = delay_run.signals["d4.y"]
    # hits at i = 0, 4, 8, ...: y at hit 4j is u at the previous hit 4(j-1)
    at_hits = np.vstack([[-1.0, -1.0], U2[0:N:4][:-1]])
    for e in range(2):
        assert np.array_equal(y[:, e], held(at_hits[:, e], 0, 4, N))


def test_unit_delay_at_rate_divider_with_offset(delay_run):
    y = delay_run.signals["d4o.y"]
    # hits at i = 3, 7, 11, ...
    at_hits = np.vstack([[2.0, 2.0], U2[3:N:4][:-1]])
    for e in range(2):
        assert np.array_equal(y[3:, e], held(at_hits[:, e], 3, 4, N)[3:])


def test_unit_delay_with_offset_outputs_initial_before_first_hit(delay_run):
    assert np.array_equal(delay_run.signals["d4o.y"][:3], np.full((3, 2), 2.0))


def test_unit_delay_breaks_algebraic_loop_accumulator(delay_run):
    k = np.arange(N)
    # y[k] = c + y[k-1], y[-1] = 0  =>  y[k] = c (k + 1); the delay holds c k
    np.testing.assert_allclose(delay_run.signals["acc.y"][:, 0], C * (k + 1), rtol=1e-15)
    np.testing.assert_allclose(delay_run.signals["z.y"][:, 0], C * k, rtol=1e-15)
    np.testing.assert_allclose(delay_run.signals["acc_r.y"][:, 0], np.cumsum(U1[:, 0]),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(delay_run.signals["z_r.y"][1:, 0], np.cumsum(U1[:-1, 0]),
                               rtol=0, atol=1e-12)


def test_unit_delay_at_rate_divider_in_accumulator(delay_run):
    # the delay samples acc every 4th tick and holds it: acc[i] = c (floor(i / 4) + 1)
    k = np.arange(N)
    np.testing.assert_allclose(delay_run.signals["acc4.y"][:, 0], C * (k // 4 + 1), rtol=1e-15)
    np.testing.assert_allclose(delay_run.signals["z4.y"][:, 0], C * (k // 4), rtol=1e-15)


def test_loop_without_delay_is_rejected():
    g = hapflow.Graph()
    g.add("c", Constant(value=[1.0]))
    g.add("acc", Sum())
    g.wire("c.y -> acc.u1")
    g.wire("acc.y -> acc.u2")
    with pytest.raises(hapflow.GraphError, match="algebraic loop.*acc") as info:
        g.check()
    assert "UnitDelay" in str(info.value)


def test_unit_delay_has_no_feedthrough():
    z = UnitDelay(size=3)
    assert feedthrough(z, "y") == ()
    assert z.dstate == 3 and z.inputs["u"].shape == (3,)


# ================================================================ TransferFunction
def _tf_graph() -> hapflow.Graph:
    g = hapflow.Graph(name="test_transfer_function", rate=RATE, duration=N / RATE)
    g.add("u", table(U1))
    g.add("tf2", TransferFunction(num=B2, den=A2))
    g.add("tf3", TransferFunction(num=NUM3, den=DEN3))
    g.add("tf3b", TransferFunction(num=NUM3B, den=DEN3B))
    g.add("tf2s", TransferFunction(num=NUM2S, den=DEN2S))
    g.add("tfk", TransferFunction(num=[3.0], den=[2.0]))
    g.add("tf4", TransferFunction(num=B2, den=A2), rate=RATE / 4)
    g.add("tf4o", TransferFunction(num=NUM3, den=DEN3), rate=RATE / 4, offset=1)
    g.add("fb", Sum())
    g.add("tfl", TransferFunction(num=NUML, den=DENL))
    for name in ("tf2", "tf3", "tf3b", "tf2s", "tfk", "tf4", "tf4o"):
        g.wire(f"u.y -> {name}.u")
        g.record(f"{name}.y")
    # feedback: fb = u + tfl(fb), legal because tfl is strictly proper
    g.wire("u.y -> fb.u1")
    g.wire("tfl.y -> fb.u2")
    g.wire("fb.y -> tfl.u")
    g.record("fb.y", "tfl.y")
    return g


@pytest.fixture(scope="module")
def tf_graph():
    return _tf_graph()


@pytest.fixture(scope="module")
def tf_run(tf_graph):
    return hapflow.Simulation(tf_graph).run()


def test_transfer_function_compiled_and_interpreted_are_bit_identical(tf_graph, tf_run):
    short = hapflow.Simulation(tf_graph, interpret=True).run(0.04)
    n = short.time.size
    for key, values in short.signals.items():
        assert np.array_equal(values, tf_run.signals[key][:n]), key


@pytest.mark.parametrize("name, num, den", [("tf2", B2, A2), ("tf3", NUM3, DEN3),
                                            ("tf3b", NUM3B, DEN3B), ("tf2s", NUM2S, DEN2S),
                                            ("tfk", [3.0], [2.0])])
def test_transfer_function_matches_lfilter(tf_run, name, num, den):
    y = tf_run.signals[f"{name}.y"][:, 0]
    ref = lfilter_z(num, den, U1[:, 0])
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("name, num, den", [("tf3", NUM3, DEN3), ("tf3b", NUM3B, DEN3B)])
def test_transfer_function_matches_dlsim(tf_run, name, num, den):
    _, ref = scipy.signal.dlsim((num, den, 1.0 / RATE), U1[:, 0])
    np.testing.assert_allclose(tf_run.signals[f"{name}.y"][:, 0], ref[:, 0], rtol=0,
                               atol=1e-10 * np.abs(ref).max())


def test_transfer_function_strictly_proper_has_a_delay(tf_run):
    # an impulse response starting with the relative degree: y[0] = 0 for tf3
    assert tf_run.signals["tf3.y"][0, 0] == 0.0
    assert tf_run.signals["tf2s.y"][0, 0] == 0.0
    assert tf_run.signals["tf2.y"][0, 0] == pytest.approx(B2[0] * U1[0, 0], rel=1e-15)


def test_transfer_function_at_rate_divider(tf_run):
    # biproper: hits at 0, 4, 8, ...; filters the input sampled at the hits, holds
    at_hits = lfilter_z(B2, A2, U1[0::4, 0])
    assert np.allclose(tf_run.signals["tf4.y"][:, 0], held(at_hits, 0, 4, N), rtol=0,
                       atol=1e-12)
    # strictly proper with offset 1: hits at 1, 5, 9, ...; zero before the first hit
    at_hits = lfilter_z(NUM3, DEN3, U1[1::4, 0])
    np.testing.assert_allclose(tf_run.signals["tf4o.y"][:, 0], held(at_hits, 1, 4, N),
                               rtol=0, atol=1e-12)


def test_transfer_function_in_feedback_loop(tf_run):
    # fb = u + H fb  =>  fb = den / (den - num) u,  tfl.y = num / (den - num) u
    num = np.concatenate([np.zeros(len(DENL) - len(NUML)), NUML])
    den = np.asarray(DENL) - num
    assert np.all(np.abs(np.roots(den)) < 1)
    u = U1[:, 0]
    np.testing.assert_allclose(tf_run.signals["tfl.y"][:, 0], scipy.signal.lfilter(num, den, u),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(tf_run.signals["fb.y"][:, 0], scipy.signal.lfilter(DENL, den, u),
                               rtol=0, atol=1e-12)


def test_transfer_function_feedthrough_only_when_biproper(tf_graph):
    blocks = {n: tf_graph.nodes[n].block for n in ("tf2", "tf3", "tf3b", "tf2s", "tfk")}
    assert feedthrough(blocks["tf2"], "y") == ("u",)
    assert feedthrough(blocks["tf3b"], "y") == ("u",)
    assert feedthrough(blocks["tfk"], "y") == ("u",)
    assert feedthrough(blocks["tf3"], "y") == ()
    assert feedthrough(blocks["tf2s"], "y") == ()
    calls = {c.block: c for c in build_schedule(tf_graph.check()).calls}
    assert calls["tf2"].deps == ("u",) and calls["tf3"].deps == ()
    # the strictly proper loop block is scheduled before the Sum that reads it
    order = [c.block for c in build_schedule(tf_graph.check()).calls]
    assert order.index("tfl") < order.index("fb")


def test_biproper_transfer_function_in_loop_is_algebraic():
    g = hapflow.Graph()
    g.add("c", Constant(value=[1.0]))
    g.add("fb", Sum())
    g.add("tf", TransferFunction(num=[0.5, 0.1], den=[1.0, -0.5]))
    g.wire("c.y -> fb.u1")
    g.wire("tf.y -> fb.u2")
    g.wire("fb.y -> tf.u")
    with pytest.raises(hapflow.GraphError, match="algebraic loop") as info:
        g.check()
    assert "tf.u,\n  which feeds through to tf.y" in str(info.value)


@pytest.mark.parametrize("values, param", [(dict(num=[1.0], den=[0.0, 1.0]), "den"),
                                           (dict(num=[1.0, 2.0, 3.0], den=[1.0, 0.5]), "num"),
                                           (dict(den=[1.0, 0.5]), "num"),
                                           (dict(num=[1.0]), "den")])
def test_transfer_function_rejects_bad_coefficients(values, param):
    with pytest.raises(ParamError, match=param):
        TransferFunction(**values)
