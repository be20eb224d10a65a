"""Flat-array layout: where every signal, state, parameter and guard lives.

At run time the whole graph is a handful of flat arrays: signals by dtype
(``sf`` float64, ``si`` int64, ``sb`` bool), continuous state ``x``, discrete
state ``d``, integer state ``m``, packed live parameters ``p``, guard values,
and the recorder's log columns.  The symbol table maps names to slices.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import names
from .graph import Checked

SIGNAL_ARRAYS = {"f8": "sf", "i8": "si", "b1": "sb"}


@dataclass(frozen=True)
class Slot:
    """A named region of one flat array.

    Attributes
    ----------
    array : str
        Array name ('sf', 'si', 'sb', 'x', 'd', 'm', 'p', 'g', 'log').
    start, stop : int
        Slice bounds.
    shape : tuple of int
        Shape of the value (for signals).
    unit : str or None
        SI unit (signals).
    """

    array: str
    start: int
    stop: int
    shape: tuple[int, ...] = ()
    unit: str | None = None

    @property
    def size(self) -> int:
        """Number of elements."""
        return self.stop - self.start

    def code(self) -> str:
        """Python source for the view of this slot."""
        view = f"{self.array}[{self.start}:{self.stop}]"
        if len(self.shape) > 1:
            view += f".reshape({self.shape})"
        return view


@dataclass
class Layout:
    """Symbol table of a compiled graph.

    ``signals`` maps ``(block, port)`` of outputs to slots; inputs read their
    driver's slot (``inputs``), an optional input left unwired a slot of its own
    that nothing writes, so it stays zero.  ``blocks`` maps block name to its state and
    parameter slots under keys 'x', 'd', 'm', 'p', 'g'; ``fields`` the named
    values inside them (:func:`hapflow.names.fields`) by ``(block, key)``.
    """

    signals: dict[tuple[str, str], Slot] = field(default_factory=dict)
    inputs: dict[tuple[str, str], Slot] = field(default_factory=dict)
    blocks: dict[str, dict[str, Slot]] = field(default_factory=dict)
    log: dict[tuple[str, str], Slot] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    position_states: tuple[int, ...] = ()
    fields: dict[tuple[str, str], list[tuple[str, int, int, str]]] = field(default_factory=dict)

    def symbols(self) -> dict[str, Slot]:
        """Every slot by dotted name: ``blk.port``, ``blk.x``, ``blk.p`` ..., and each named
        parameter or state in them: ``blk.p.mass``, ``blk.x.pos``."""
        table = {f"{b}.{p}": s for (b, p), s in self.signals.items()}
        for name, slots in self.blocks.items():
            for key, slot in slots.items():
                if slot.size:
                    table[f"{name}.{key}"] = slot
                for field_name, at, size, unit in self.fields.get((name, key), ()):
                    table[f"{name}.{key}.{field_name}"] = Slot(
                        slot.array, slot.start + at, slot.start + at + size, (), unit or None)
        return table


def build_layout(checked: Checked) -> Layout:
    """Assign every signal, state, parameter, guard and log column a slice."""
    graph = checked.graph
    layout = Layout()
    counts = dict.fromkeys(("sf", "si", "sb", "x", "d", "m", "p", "g", "log"), 0)

    def take(array: str, size: int, shape: tuple[int, ...] = (), unit: str | None = None) -> Slot:
        slot = Slot(array, counts[array], counts[array] + size, shape, unit)
        counts[array] += size
        return slot

    positions: list[int] = []
    for name, node in graph.nodes.items():
        block = node.block
        for port, spec in block.outputs.items():
            layout.signals[(name, port)] = take(SIGNAL_ARRAYS[spec.dtype], spec.size, spec.shape,
                                                checked.units[(name, port)])
        x = take("x", block.cstate)
        positions += [x.start + k for k in block.position_states]
        layout.blocks[name] = {"x": x, "d": take("d", block.dstate), "m": take("m", block.istate + block.random_streams),
                               "p": take("p", block.packed().size), "g": take("g", block.nguards)}
        for key in "xdmp":
            named = names.fields(block, key)
            if named:
                layout.fields[(name, key)] = named
    for name, node in graph.nodes.items():
        for port, spec in node.block.inputs.items():
            wire = checked.drivers.get((name, port))
            layout.inputs[(name, port)] = (layout.signals[wire.src] if wire else  # unwired:
                                           take(SIGNAL_ARRAYS[spec.dtype], spec.size,  # zeros
                                                spec.shape, spec.unit))
    for key in graph.recorded:
        sig = layout.signals[key]
        layout.log[key] = take("log", sig.size, sig.shape, sig.unit)
    layout.sizes = counts
    layout.position_states = tuple(positions)
    return layout


STATS_SIZE = 4
"""Run statistics (event counts, see :mod:`hapflow.events`) per run."""
FLOAT_ARRAYS = ("x", "d", "p", "sf", "work")
"""Float arrays that live in one buffer ``f``, in this order.  The generated
kernel indexes ``f`` at constant offsets, so the compiler can tell any two
accesses apart and keep values in registers (separate arrays may alias)."""


def work_size(layout: Layout) -> int:
    """Solver work space: x0 and four stage derivatives, two guard vectors, event record."""
    return 5 * layout.sizes["x"] + 2 * layout.sizes["g"] + 16


def float_bases(layout: Layout) -> dict[str, int]:
    """Offset of each float array in the buffer ``f``."""
    sizes = {**layout.sizes, "work": work_size(layout)}
    bases, at = {}, 0
    for name in FLOAT_ARRAYS:
        bases[name] = at
        at += sizes[name]
    bases["end"] = at
    return bases


def allocate(layout: Layout) -> dict[str, np.ndarray]:
    """Zeroed run-time arrays for ``layout`` (log excluded: the scheduler sizes it).

    ``f`` is the float buffer; ``x``, ``d``, ``p``, ``sf`` and ``work`` are views of it.
    """
    n = layout.sizes
    bases = float_bases(layout)
    f = np.zeros(bases["end"])
    arrays = {name: f[bases[name]:bases[next_name]]
              for name, next_name in zip(FLOAT_ARRAYS, (*FLOAT_ARRAYS[1:], "end"))}
    arrays.update(f=f, m=np.zeros(n["m"], dtype=np.int64), si=np.zeros(n["si"], dtype=np.int64),
                  sb=np.zeros(n["sb"], dtype=np.bool_),
                  stats=np.zeros(STATS_SIZE, dtype=np.int64))
    return arrays
