"""Registry of block types by name: built-ins, user subclasses and plug-ins.

Every concrete :class:`~hapflow.block.Block` subclass registers itself under
its class name when it is defined (names starting with ``_`` are skipped).
Plug-in packages add types through the ``hapflow.blocks`` entry-point group
(``MyBlock = "mypkg.blocks:MyBlock"``).  YAML files name types only; nothing
is imported from a path written in a graph file.
"""
from __future__ import annotations

from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import Iterator

from .errors import HapflowError

_TYPES: dict[str, type] = {}
_LOADED = False


def register(cls: type) -> type:
    """Register a block class under its class name (called by ``Block.__init_subclass__``)."""
    if not cls.__name__.startswith("_"):
        _TYPES[cls.__name__] = cls
    return cls


@contextmanager
def registered(*classes: type) -> Iterator[None]:
    """Register ``classes`` (declared with ``register=False``) for the ``with`` body only,
    so a graph file can name them; what their names meant before comes back after."""
    saved = {c.__name__: _TYPES.get(c.__name__) for c in classes}
    for cls in classes:
        register(cls)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                _TYPES.pop(name, None)
            else:
                _TYPES[name] = old


def _load() -> None:
    """Import the block libraries (``hapflow.libraries`` entry points: the built-in
    ``hapflow.blocks`` is one), once."""
    global _LOADED
    if not _LOADED:
        for library in installed("hapflow.libraries"):
            library.load()
        _LOADED = True


def installed(group: str) -> list:
    """The entry points of one of hapflow's own groups (``hapflow.libraries``,
    ``hapflow.commands``), which hapflow's own package always fills.

    Raises
    ------
    HapflowError
        When there are none: hapflow was installed before the group existed, and
        every block type would be unknown (reinstall).
    """
    found = list(entry_points(group=group))
    if not found:
        raise HapflowError(f"no {group!r} entry points are installed: this install of hapflow "
                           "predates them; reinstall it ('make install' or 'pip install -e .')")
    return found


def lookup(name: str) -> type | None:
    """Return the block class named ``name``, or None if there is none.

    Built-ins are imported on first use; an entry point of the same name is
    loaded only if no registered class has it.
    """
    _load()
    if name not in _TYPES:
        for ep in entry_points(group="hapflow.blocks"):
            if ep.name == name:
                register(ep.load())
    return _TYPES.get(name)


def types() -> dict[str, type]:
    """Every registered block class by name (a copy; plug-ins not yet loaded are left out)."""
    _load()
    return dict(_TYPES)


def names() -> list[str]:
    """Names of every registered block type (plug-ins included), sorted."""
    _load()
    plugins = {ep.name for ep in entry_points(group="hapflow.blocks")}
    return sorted(set(_TYPES) | plugins)
