"""The hapflow block library (installed as ``hapflow.blocks``).

One module per block family; importing this package imports every module in
it (names not starting with ``_``), which registers each block type by its
class name.  ``hapflow blocks`` prints the reference.
"""
from importlib import import_module
from pkgutil import iter_modules

for _module in iter_modules(__path__):
    if not _module.name.startswith("_"):
        import_module(f"{__name__}.{_module.name}")


def __getattr__(name: str) -> type:
    """Every registered block type as an attribute: ``hapflow.blocks.Sine``."""
    from hapflow.registry import lookup
    cls = lookup(name) if not name.startswith("_") else None
    if cls is None:
        raise AttributeError(f"module 'hapflow.blocks' has no block type {name!r}")
    return cls
