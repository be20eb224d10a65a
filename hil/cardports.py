"""Stand-in blocks where a graph meets the DAQ card in HIL mode.

When a graph is split (:mod:`hapflow.hil.split`), every bound port of a
hardware block becomes one of these in the half that talks to the card:

- :class:`CardValue` puts a value from the card into the kernel: its output
  ``y`` is ``d[0]``, which the runner (or the simulated rig) writes into the
  flat state array between ticks.  Its output depends on the state only.
- :class:`CardSink` takes a value out of the kernel: its input ``u`` is read
  from the driver's signal slot after the tick.  It has no kernels.

Both are declared with ``register=False``, so they stay out of the block
registry: they exist only in generated graphs, never in graph files.
"""
from __future__ import annotations

from numba import njit

from hapflow.block import Block
from hapflow.layout import Layout, float_bases
from hapflow.params import Structural
from hapflow.ports import In, Out


class CardValue(Block, register=False):
    """A value from the DAQ card: ``y = d[0]``, written between ticks.

    Ports
    -----
    y : out, (1,), the bound port's unit    the latest card value in SI units
    """

    params = {"unit": Structural(None, kind="str", doc="SI unit of the bound port")}
    dstate = 1

    def configure(self) -> None:
        self.outputs = {"y": Out(1, unit=self.unit, depends="state", doc="card value")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, y):
        y[0] = d[0]


class CardSink(Block, register=False):
    """A value to the DAQ card: the runner reads input ``u`` after each tick.

    Ports
    -----
    u : in, (1,), the bound port's unit    the command in SI units
    """

    params = {"unit": Structural(None, kind="str", doc="SI unit of the bound port")}

    def configure(self) -> None:
        self.inputs = {"u": In(1, unit=self.unit, doc="command to the card")}


def value_index(layout: Layout, name: str) -> int:
    """Index in the flat float buffer ``f`` of ``CardValue`` block ``name``'s value (``d[0]``)."""
    return float_bases(layout)["d"] + layout.blocks[name]["d"].start


def sink_index(layout: Layout, name: str) -> int:
    """Index in ``f`` of the signal that drives ``CardSink`` block ``name``."""
    slot = layout.inputs[(name, "u")]
    return float_bases(layout)[slot.array] + slot.start
