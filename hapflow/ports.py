"""Port declarations: static shape, dtype and SI unit of a block's inputs and outputs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

DTYPES = {"f8": "float64", "i8": "int64", "b1": "bool"}


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if not dims or any(s < 1 for s in dims):
        raise ValueError(f"port shape must be positive integers, got {shape!r}")
    return dims


@dataclass(frozen=True)
class Port:
    """Common part of input and output ports.

    Parameters
    ----------
    shape : int or tuple of int
        Static shape; ``1`` for a scalar signal.
    dtype : {'f8', 'i8', 'b1'}
        Element type.
    unit : str or None
        SI unit string (see :mod:`hapflow.units`); ``None`` accepts any unit.
        ``"=name"`` means "the unit of input ``name``" (for generic blocks).
    doc : str
        One line for the block reference.
    """

    shape: tuple[int, ...] = (1,)
    dtype: str = "f8"
    unit: str | None = None
    doc: str = ""

    def __post_init__(self):
        object.__setattr__(self, "shape", _shape(self.shape))
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    def describe(self) -> str:
        """Shape, dtype and unit as one short string."""
        unit = self.unit if self.unit is not None else "any unit"
        return f"{self.shape}, {self.dtype}, {unit or '1'}"


@dataclass(frozen=True)
class In(Port):
    """An input port.

    Parameters
    ----------
    optional : bool
        The input may be left unwired: it then reads zeros (a signal slot
        nothing writes), like an unconnected port of a Simulink block set to 0.
    """

    optional: bool = False

    def describe(self) -> str:
        return super().describe() + (", optional (0 when unwired)" if self.optional else "")


@dataclass(frozen=True)
class Out(Port):
    """An output port.

    Parameters
    ----------
    depends : 'state', sequence of str, or None
        What the output depends on at the same tick: ``"state"`` (no direct
        feedthrough; breaks algebraic loops), a list of input names, or
        ``None`` for all inputs (the safe default).
    """

    depends: str | tuple[str, ...] | None = None

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.depends, (list, tuple)):
            object.__setattr__(self, "depends", tuple(self.depends))
        elif self.depends not in (None, "state"):
            raise ValueError("depends must be 'state', a list of input names, or None")
