"""Errors a user can act on: each names where the problem is and what is valid."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Where:
    """A place in a graph file: file path and 1-based line (either may be unknown)."""

    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        if self.file and self.line:
            return f"{self.file}:{self.line}"
        if self.file:
            return str(self.file)
        if self.line:
            return f"line {self.line}"
        return ""


class HapflowError(Exception):
    """Base class of every error hapflow raises on purpose (printed without traceback)."""


class GraphError(HapflowError):
    """A graph that cannot be built: bad block, parameter, port, wire or rate.

    Parameters
    ----------
    message : str
        What is wrong and what would be valid.
    where : Where, optional
        File and line the problem comes from.
    block, port : str, optional
        Names of the block and port concerned.
    key : str, optional
        The graph-file key concerned (top-level settings).
    """

    def __init__(self, message: str, where: Where | None = None,
                 block: str | None = None, port: str | None = None, key: str | None = None):
        self.message = message
        self.key = key
        self.where = where or Where()
        self.block = block
        self.port = port
        super().__init__(str(self))

    def __str__(self) -> str:
        prefix = str(self.where)
        return f"{prefix}: {self.message}" if prefix else self.message


class SimulationError(HapflowError):
    """A run that failed after it started (non-finite state, I/O failure)."""


def suggest(word: str, choices: Iterable[str]) -> str:
    """End of a sentence naming ``word``: ``"; did you mean 'x'?"`` for a close choice, else ``"."``.

    A choice that starts with ``word`` (or the reverse) counts as close, so
    abbreviations such as ``pos`` for ``position`` are suggested too.
    """
    choices = list(choices)
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close:
        close = [c for c in choices if c.startswith(word) or word.startswith(c)][:1]
    return f"; did you mean {close[0]!r}?" if close else "."


def valid_list(choices: Iterable[str]) -> str:
    """Comma-separated list of valid names for error messages."""
    names = sorted(choices)
    return ", ".join(names) if names else "(none)"
