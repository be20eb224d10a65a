"""Graph: changing the base rate after blocks are added re-derives their timing; reduced copies."""
import numpy as np
import pytest

import hapflow as hf


def build(rate, diff_rate=250.0):
    g = hf.Graph(name="rate", rate=rate, duration=0.5)
    g.add("src", hf.blocks.Sine(amplitude=1.0, frequency=3.0, unit="m"))
    g.add("diff", hf.blocks.Differentiator(unit="m/s"), rate=diff_rate)
    g.wire("src.y -> diff.u")
    g.record("diff.y")
    return g


def test_setting_the_rate_gives_the_graph_built_at_that_rate():
    changed = build(1000.0)
    changed.rate = 4000.0                          # the 250 Hz block keeps its rate
    assert changed.nodes["diff"].divider == 16
    assert changed.nodes["diff"].block.sample_time == pytest.approx(4e-3)
    a = hf.Simulation(changed).run(progress=False)["diff.y"]
    b = hf.Simulation(build(4000.0)).run(progress=False)["diff.y"]
    assert a.shape == (2000, 1) and np.array_equal(a, b)


def test_a_rate_that_a_block_rate_does_not_divide_is_refused_and_nothing_changes():
    g = build(1000.0)
    with pytest.raises(hf.GraphError, match="rate"):
        g.rate = 1100.0
    assert g.rate == 1000.0 and g.nodes["diff"].divider == 4
    assert g.nodes["diff"].block.sample_time == pytest.approx(4e-3)


def test_sum_inputs_must_share_a_unit():
    g = hf.Graph(rate=100)
    g.add("f", hf.blocks.Constant(value=1.0, unit="N"))
    g.add("x", hf.blocks.Constant(value=1.0, unit="m"))
    g.add("s", hf.blocks.Sum(signs="+-"))
    g.wire("f.y -> s.u1")
    g.wire("x.y -> s.u2")
    try:
        g.check()
    except hf.GraphError as err:
        assert "'m'" in str(err) and "expects 'N' (the unit of s.u1)" in str(err)
    else:
        raise AssertionError("a sum of N and m was accepted")


def test_reduced_keeps_what_the_signals_read_and_what_acts_without_wires():
    g = hf.loads("""\
name: reduce
rate: 1000
blocks:
  drive: {type: Sine, amplitude: 2.0, frequency: 3.0, unit: N}
  gain:  {type: Gain, gain: 2.0}
  msd:   {type: MassSpringDamper, mass: 0.5, damping: 3.0, stiffness: 400.0}
  enc:   {type: Encoder, resolution: 1.0e-5}
  other: {type: Sine, amplitude: 1.0, frequency: 1.0, unit: N}
  ball:  {type: BouncingBall}
wires: [drive.y -> gain.u, gain.y -> msd.force, msd.pos -> enc.true_pos]
record: [msd.pos, enc.pos, other.y]
""")
    r = g.reduced(["msd.vel", "msd.pos"])
    assert list(r.nodes) == ["drive", "gain", "msd", "ball"]          # the file's order
    assert [str(w) for w in r.wires] == ["drive.y -> gain.u", "gain.y -> msd.force"]
    assert r.recorded == [("msd", "vel"), ("msd", "pos")]
    assert r.nodes["msd"].block is g.nodes["msd"].block
    assert len(g.nodes) == 6 and len(g.recorded) == 3                 # the graph is left whole
    with pytest.raises(hf.GraphError, match="has no output port 'force'"):
        g.reduced(["msd.force"])
