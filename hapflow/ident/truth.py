"""The true impedance behind a simulated recording, when there is one.

A recording made by ``hapflow run`` stores its graph (attribute
``graph_yaml``, and the text of the graph file in ``graph_source``, tried
when the first does not load).  :func:`find_truth` rebuilds the graph with
:func:`hapflow.loads` and looks for a block with a method
``impedance(x, direction)`` returning the true ``m, b, k, F0`` at positions
``x`` for ``direction`` +1 or -1 (a dict with those keys or a 4-tuple in
that order); a device model such as ``HardeningSpringDevice`` provides it.
Recordings written by :mod:`hapflow.ident.synthetic` carry the true model
file in the attribute ``impedance_truth`` instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hapflow.blocks.impedance_model import PARAMS


@dataclass
class Truth:
    """True parameters as a function of position and direction."""

    name: str
    function: Callable[[np.ndarray, int], Any]

    def at(self, x: np.ndarray, direction: int) -> dict[str, np.ndarray]:
        """``{'m', 'b', 'k', 'F0'}`` arrays at positions ``x`` (m) for direction +1/-1."""
        x = np.asarray(x, dtype=np.float64)
        out = self.function(x, direction)
        if isinstance(out, dict):
            lower = {str(k).lower(): v for k, v in out.items()}
            vals = [lower[p.lower()] for p in PARAMS]
        else:
            vals = list(out)
        return {p: np.broadcast_to(np.asarray(v, dtype=np.float64), x.shape).copy()
                for p, v in zip(PARAMS, vals)}


def find_truth(recording: Any) -> Truth | None:
    """The truth of a recording (a :class:`~hapflow.recorder.Recording`), or None.

    Never raises: a graph that cannot be rebuilt (a block type not installed)
    simply has no truth.
    """
    attrs = getattr(recording, "attrs", {}) or {}

    def text_of(key: str) -> str | None:       # a damaged file may hold anything there
        value = attrs.get(key)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        return value if isinstance(value, str) and value else None

    for key in ("graph_yaml", "graph_source"):     # the saved graph, else the file it came from
        text = text_of(key)
        if text is None:
            continue
        try:
            from .. import loads
            graph = loads(str(text))
        except Exception:  # noqa: BLE001 - any failure means "no truth available"
            graph = None
        if graph is not None:
            for name, node in graph.nodes.items():
                fn = getattr(type(node.block), "impedance", None)
                if callable(fn):
                    return Truth(f"{name}.impedance ({type(node.block).__name__})",
                                 getattr(node.block, "impedance"))
    model_text = text_of("impedance_truth")
    if model_text is not None:
        from hapflow.blocks.impedance_model import ImpedanceModel
        try:
            model = ImpedanceModel.from_yaml(str(model_text), "impedance_truth")
        except Exception:  # noqa: BLE001
            return None
        return Truth("recording attribute impedance_truth",
                     lambda x, d: model.direction(d).at(x))
    return None
