"""hapflow.schedule: output calls in dependency order, unused calls dropped, calls of one
block merged, the solver chain, held blocks."""
import sys
from pathlib import Path

import networkx as nx
import numpy as np

import hapflow as hf
from hapflow.schedule import build_schedule, topological_order
from tests.helpers import mixed_graph

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import families  # noqa: E402


def _order_respects_feedthrough(checked, calls):
    """Every call comes after the calls computing the inputs its outputs feed through from."""
    at = {(c.block, port): k for k, c in enumerate(calls) for port in c.outputs}
    for k, call in enumerate(calls):
        for dep in call.deps:
            src = checked.drivers[(call.block, dep)].src
            if src in at:
                assert at[src] < k, f"{call} reads {src} computed later"


def test_calls_follow_feedthrough_in_a_random_three_rate_graph_with_feedback():
    checked = families.distinct(100, seed=3).check()
    calls = build_schedule(checked).calls
    _order_respects_feedthrough(checked, calls)
    assert len(calls) >= 50


def test_a_state_output_breaks_the_loop_and_comes_before_its_input_driver():
    checked = mixed_graph().check()
    calls = build_schedule(checked).calls
    _order_respects_feedthrough(checked, calls)
    blocks = [c.block for c in calls]
    # plant.pos (state only) -> fb -> err -> plant.force -> plant.acc: two calls of plant
    assert blocks.index("plant") < blocks.index("fb") < blocks.index("err")
    assert blocks.count("plant") == 2
    late = [c for c in calls if c.block == "plant"][1]
    assert "acc" in late.outputs and late.deps == ("force",)


def test_calls_nobody_reads_are_dropped_and_a_calls_pair_merges_when_nothing_reads_between():
    g = hf.Graph(rate=1000)
    g.add("src", hf.blocks.Sine(amplitude=1.0, frequency=2.0, unit="N"))
    g.add("plant", hf.blocks.MassSpringDamper(mass=1.0, damping=1.0, stiffness=10.0))
    g.add("unused", hf.blocks.Gain(gain=2.0, unit="N"))
    g.wire("src.y -> plant.force")
    g.wire("src.y -> unused.u")
    g.record("plant.pos", "plant.acc")
    checked = g.check()
    calls = build_schedule(checked).calls
    assert [c.block for c in calls] == ["src", "plant"]          # no 'unused', one plant call
    assert set(calls[1].outputs) >= {"pos", "acc"}
    g.record("unused.y")
    assert "unused" in [c.block for c in build_schedule(g.check()).calls]


def test_held_blocks_and_the_solver_chain():
    checked = mixed_graph().check()
    schedule = build_schedule(checked)
    assert {"fb", "lp", "delay"} <= schedule.held        # 250 Hz, and a state update
    assert "plant" in schedule.continuous and "area" in schedule.continuous
    # between solver stages only the calls the continuous blocks' inputs need are recomputed
    # (drive -> err -> plant.force; sat -> area.u), not the held blocks (their outputs
    # change at their sample hits only) nor what no continuous block reads
    assert {c.block for c in schedule.chain} == {"drive", "err", "sat"}


def test_port_order_is_networkxs_lexicographical_topological_sort():
    """The schedule's topological order of the port graph is the one networkx gives."""
    rng = np.random.default_rng(7)
    for trial in range(40):
        n = int(rng.integers(2, 60))
        ports = [(f"b{k // 3}", "in" if k % 3 else "out", f"p{k % 3}") for k in range(n)]
        edges = {(ports[a], ports[b]) for a, b in rng.integers(0, n, size=(2 * n, 2)) if a < b}
        driven = {port: [b for a, b in sorted(edges) if a == port] for port in ports}
        weight = {port: float(w) for port, w in zip(ports, rng.permutation(n))}
        key = weight.__getitem__
        reference = nx.DiGraph()
        reference.add_nodes_from(ports)
        reference.add_edges_from(edges)
        assert (list(topological_order(driven, key))
                == list(nx.lexicographical_topological_sort(reference, key=key))), trial
