"""The hapflow block library (installed as ``hapflow.blocks``).

One module per block family; importing this package registers every block
type by its class name.  ``hapflow blocks`` prints the reference.
"""
from . import arithmetic, continuous, control, devices, discrete, estimation, filters, impedance, mechanical, rig, sources  # noqa: F401,E501


def __getattr__(name: str) -> type:
    """Every registered block type as an attribute: ``hapflow.blocks.Sine``."""
    from hapflow.registry import lookup
    cls = lookup(name) if not name.startswith("_") else None
    if cls is None:
        raise AttributeError(f"module 'hapflow.blocks' has no block type {name!r}")
    return cls
