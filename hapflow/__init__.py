"""hapflow: block-diagram simulation and hardware-in-the-loop for haptics research.

Build a :class:`Graph` of typed blocks in Python or load one from YAML
(:func:`load`), then run it with :class:`Simulation`.
"""
from .version import __version__  # noqa: E402,F401

from .block import Block, ParamError  # noqa: E402
from .errors import GraphError, HapflowError, SimulationError  # noqa: E402
from .graph import Graph  # noqa: E402
from .names import Derived  # noqa: E402
from .params import Live, Structural, at_least, between, nonnegative, one_of, positive  # noqa: E402
from .ports import In, Out  # noqa: E402
from .simulation import RunResult, Simulation, simulate  # noqa: E402
from .yamlio import load, loads, save, to_yaml  # noqa: E402

__all__ = ["Block", "Derived", "Graph", "GraphError", "HapflowError", "In", "Live", "Out",
           "ParamError", "RunResult", "Simulation", "SimulationError", "Structural", "at_least",
           "between", "load", "loads", "nonnegative", "one_of", "positive", "save", "simulate",
           "to_yaml"]


def __getattr__(name: str):
    """``hapflow.blocks`` (the block library), ``hapflow.ident`` and ``hapflow.recorder``
    (h5py), imported on first use."""
    if name in ("blocks", "ident", "recorder"):
        import importlib
        return importlib.import_module(f"hapflow.{name}")
    raise AttributeError(f"module 'hapflow' has no attribute {name!r}")
