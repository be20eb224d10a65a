"""Blocks used only by tests."""
import math
from pathlib import Path

import numpy as np
from numba import njit

from hapflow.block import Block
from hapflow.params import Live, Structural
from hapflow.ports import Out


class _Table(Block):
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
