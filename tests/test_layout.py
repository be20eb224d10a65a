"""hapflow.layout: every value its own slice, named fields inside, one float buffer."""
import numpy as np

import hapflow as hf
from hapflow.layout import FLOAT_ARRAYS, allocate, build_layout, float_bases
from tests.helpers import mixed_graph


def _slots(layout):
    yield from layout.signals.values()
    for slots in layout.blocks.values():
        yield from slots.values()
    yield from layout.log.values()


def test_slots_of_one_array_are_disjoint_and_fill_it():
    layout = build_layout(mixed_graph().check())
    by_array = {}
    for slot in _slots(layout):
        by_array.setdefault(slot.array, []).append((slot.start, slot.stop))
    for array, spans in by_array.items():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), array
        assert sum(b - a for a, b in spans) == layout.sizes[array], array


def test_an_input_reads_its_drivers_slot():
    g = mixed_graph()
    layout = build_layout(g.check())
    for w in g.wires:
        assert layout.inputs[w.dst] is layout.signals[w.src]


def test_named_fields_address_the_values_the_block_packs():
    g = mixed_graph()
    sim = hf.Simulation(g, interpret=True)
    table = sim.program.layout.symbols()
    p = sim.arrays["p"]
    plant = g.nodes["plant"].block
    for name in ("mass", "damping", "stiffness"):
        slot = table[f"plant.p.{name}"]
        assert slot.size == 1 and p[slot.start] == getattr(plant, name)
    assert table["plant.p.stiffness"].unit == "N/m"
    assert table["plant.x.pos"].start == table["plant.x"].start


def test_float_arrays_are_views_of_one_buffer_in_order():
    layout = build_layout(mixed_graph().check())
    arrays = allocate(layout)
    bases = float_bases(layout)
    for name in FLOAT_ARRAYS:
        view = arrays[name]
        assert np.shares_memory(view, arrays["f"])
        view[...] = 7.0
        assert np.all(arrays["f"][bases[name]:bases[name] + view.size] == 7.0)
    assert bases["end"] == arrays["f"].size
