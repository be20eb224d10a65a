"""hapflow.yamlio: graphs round-trip through YAML."""
import numpy as np

import hapflow as hf
from tests.helpers import mixed_graph


def test_python_graph_round_trips_through_yaml(tmp_path):
    g = mixed_graph()
    path = tmp_path / "mixed.yaml"
    hf.save(g, path)
    loaded = hf.load(path)
    a = hf.Simulation(g).run(1.0)
    b = hf.Simulation(loaded).run(1.0)
    for name in a.signals:
        assert np.array_equal(a[name], b[name]), name
    assert hf.to_yaml(loaded) == hf.to_yaml(g)


def test_blocks_without_unit_round_trip_through_yaml():
    g = hf.Graph(rate=100)
    g.add("c", hf.blocks.Constant(value=[1.0, 2.0]))
    g.add("s", hf.blocks.Step(time=0.05))
    g.record("c.y", "s.y")
    loaded = hf.loads(hf.to_yaml(g))
    assert loaded.nodes["c"].block.unit is None and loaded.nodes["c"].block.value == (1.0, 2.0)
    assert hf.to_yaml(loaded) == hf.to_yaml(g)
