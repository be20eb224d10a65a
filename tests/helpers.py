"""Blocks and graphs used only by tests."""
import math
import os
from pathlib import Path

import numpy as np
from numba import njit

import hapflow as hf
from hapflow.block import Block
from hapflow.blocks import (Chirp, Gain, Integrator, MassSpringDamper, Saturation, Sum,
                            TransferFunction, UnitDelay)
from hapflow.params import Live, Structural
from hapflow.ports import In, Out


class _Table(Block, register=False):
    """Test source: replays ``table`` (rows of ``size`` values), one row per tick.

    Ports
    -----
    y : out, (size,), any unit    the row of the current tick
    """

    params = {"table": Live((0.0,), kind="floats", doc="rows, flattened"),
              "size": Structural(1, kind="int", doc="values per row")}

    def configure(self) -> None:
        self.outputs = {"y": Out(self.size, depends="state", doc="current row")}

    def pack(self) -> np.ndarray:
        return np.concatenate([[1.0 / self.sample_time], np.asarray(self.table)])

    @staticmethod
    @njit
    def output(t, x, d, m, p, y):
        n = y.size
        rows = (p.size - 1) // n
        k = min(int(math.floor(t * p[0] + 0.5)), rows - 1)
        for j in range(n):
            y[j] = p[1 + k * n + j]


def table(values: np.ndarray) -> _Table:
    """A source replaying the rows of ``values``, one per tick of the graph it is added to."""
    return _Table(table=values.ravel(), size=values.shape[1])


KEYSWITCH = f"{Path(__file__).resolve().parent}/data/keyswitch_force_curves/"
"""Cherry MX force curves measured by ThereminGoat (copied from shared/data with their
README, which credits the author and says where they came from)."""


def mixed_graph():
    """8 blocks, two rates (1 kHz and 250 Hz), continuous and discrete state, a feedback loop."""
    g = hf.Graph(name="mixed", rate=1000, duration=2.0, seed=3)
    g.add("drive", Chirp(amplitude=1.5, f_start=0.5, f_end=6.0, sweep_time=2.0, unit="N"))
    g.add("err", Sum(signs="+-"))
    g.add("plant", MassSpringDamper(mass=0.5, damping=0.8, stiffness=200.0))
    g.add("fb", Gain(gain=40.0, unit="N"), rate=250)
    g.add("lp", TransferFunction(num=[0.1, 0.1], den=[1.0, -0.8]), rate=250, offset=1)
    g.add("delay", UnitDelay())
    g.add("sat", Saturation(lower=-0.01, upper=0.01))
    g.add("area", Integrator(unit="m s"))
    g.wire("drive.y -> err.u1")
    g.wire("fb.y -> err.u2")
    g.wire("err.y -> plant.force")
    g.wire("plant.pos -> fb.u")
    g.wire("plant.pos -> lp.u")
    g.wire("lp.y -> delay.u")
    g.wire("delay.y -> sat.u")
    g.wire("sat.y -> area.u")
    g.record("plant.pos", "plant.acc", "lp.y", "delay.y", "sat.y", "area.y", "err.y")
    return g


class Allocating(Block, register=False):
    """Test block whose output kernel allocates a temporary array every call (negative control).

    Ports
    -----
    u : in, (1,), any unit
    y : out, (1,), any unit
    """

    inputs = {"u": In(1)}
    outputs = {"y": Out(1)}

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        tmp = np.ones(3)
        y[0] = u[0] * tmp.sum()


def edit(path: Path, text: str) -> None:
    """Write ``text`` over the module ``path``, stamped 10 s later than the clock says: an
    edit that keeps the size, made in the second the old text was imported in (and its
    ``.pyc`` written), would otherwise pass for the old text and run its old code."""
    path.write_text(text)
    stamp = path.stat().st_mtime + 10.0
    os.utime(path, (stamp, stamp))
