"""hapflow.yamlio: graphs round-trip through YAML; libyaml reads them as PyYAML would."""
from pathlib import Path

import numpy as np
import pytest
import yaml

import hapflow as hf
from hapflow import registry, yamlio
from hapflow.errors import GraphError
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


ROOT = Path(__file__).resolve().parents[1]
TRICKY = """
base: &b {rate: 1.0e3, gain: 2.5e-1, n: 0x10, flag: yes, none: ~, s: '1e4'}
derived:
  copy: *b
  text: |
    two
    lines
  folded: >-
    one
    line
list: [1, -2.5, .5, 1e4, 1_000, !!str 12, "q\\tz"]
"""


def _tree(node):
    """A composed node as plain data: kind, tag, value, line and column of each node (and a
    scalar's quoting: libyaml gives a plain scalar's style as '', PyYAML as None)."""
    mark = (node.start_mark.line, node.start_mark.column)
    if isinstance(node, yaml.ScalarNode):
        return ("scalar", node.tag, node.value, node.style or None, mark)
    if isinstance(node, yaml.SequenceNode):
        return ("sequence", node.tag, mark, [_tree(n) for n in node.value])
    return ("mapping", node.tag, mark, [(_tree(k), _tree(v)) for k, v in node.value])


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")
def test_libyaml_composes_every_graph_file_as_the_python_loader_does():
    texts = [p.read_text() for p in sorted((ROOT / "graphs").glob("*.yaml"))]
    assert len(texts) > 10
    for text in [*texts, TRICKY]:
        fast = yaml.compose(text, Loader=yamlio._Fast)
        assert _tree(fast) == _tree(yaml.compose(text, Loader=yamlio._Loader))
    values = yamlio.Reader(TRICKY, None).plain()
    assert values["base"]["rate"] == 1000.0 and values["list"][3] == 1e4
    assert values["derived"]["copy"]["gain"] == 0.25 and values["base"]["s"] == "1e4"


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")
def test_a_graph_file_is_composed_by_libyaml(monkeypatch):
    """The pure-Python composer is not asked for a good file (it is 3x slower)."""
    def refuse(*args):
        raise AssertionError("the pure-Python composer was asked")
    monkeypatch.setattr(yamlio._Loader, "compose_node", refuse)
    assert "dev" in hf.load(ROOT / "graphs" / "colton2005_sweep.yaml").nodes


def test_nesting_past_the_limit_is_refused_before_it_is_composed(tmp_path):
    """libyaml's composer recurses in C: the depth is checked on its events first (without
    the check, 40 levels composed and the file was read)."""
    path = tmp_path / "deep.yaml"
    path.write_text("rate: 100\nblocks: {}\nextra: " + "[" * 40 + "]" * 40 + "\n")
    with pytest.raises(GraphError, match="nested deeper than 32") as err:
        hf.load(path)
    assert err.value.where.line == 3


def test_loading_a_graph_asks_for_the_known_block_types_only_to_name_an_unknown_one(
        monkeypatch):
    """The known types come from every installed distribution's entry points (about 1.5 ms
    a call): asked once per block, they took 1.5 s of loading a 1000-block file."""
    calls = []
    names = registry.names
    monkeypatch.setattr(registry, "names", lambda: calls.append(1) or names())
    text = "rate: 100\nblocks:\n" + "".join(f"  g{k}: {{type: Gain, gain: 1.0}}\n"
                                             for k in range(20))
    assert len(hf.loads(text).nodes) == 20 and not calls
    with pytest.raises(GraphError, match="unknown block type 'Gian'.*'Gain'"):
        hf.loads("rate: 100\nblocks:\n  g: {type: Gian}\n")
    assert calls
