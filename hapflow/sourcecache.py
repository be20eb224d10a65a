"""Generated source kept on disk by graph structure, so a warm start skips code generation.

Inlining every kernel of a 1000-block graph takes 0.5-1.7 s, more than a
warm start may take in all.  The generated modules depend only on the
graph's structure (blocks, their structural parameters and kernels' source,
wires, rates, recorded signals, parameter-slot sizes) and on the engine's
code generator, so :func:`key` hashes those and :func:`store` writes the
result as JSON under ``<cache>/src_<key>.json``.  The namespaces the sources
need (kernels and their globals) are not stored but looked up again from
each name's origin (:attr:`hapflow.codegen.UnitSource.origins`).
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from . import codegen, inline, layout, partition, reuse, schedule, simplify
from .cachedir import write_whole
from .codegen import Generated, UnitSource, base_namespace
from .graph import Checked
from .inline import global_of
from .layout import Layout

ENGINE = (codegen, inline, partition, schedule, layout, simplify, reuse)
"""Modules whose code shapes the generated source."""


def key(checked: Checked, lay: Layout, inline_kernels: bool, mode: str,
        module_text) -> str:
    """Hash of everything the generated source depends on.

    ``module_text(fn)`` gives the text of the module defining kernel ``fn``.
    """
    graph = checked.graph
    h = hashlib.sha256()
    parts = [sys.version, mode, repr(inline_kernels), repr(graph.rate), graph.solver,
             graph.events, repr(graph.max_events), repr(graph.recorded),
             repr(sorted(graph.hardware)), repr([(str(w.src), str(w.dst)) for w in graph.wires])]
    parts += [module_text(m) for m in ENGINE]
    texts = set()
    for name, node in graph.nodes.items():
        parts.append(repr((name, node.divider, node.offset, node.block.structural_key(),
                           lay.blocks[name]["p"].size)))
        texts.update(module_text(fn) for fn in node.block.kernels().values())
    parts += sorted(texts)
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _path(folder: Path, digest: str) -> Path:
    return folder / f"src_{digest}.json"


def store(folder: Path, digest: str, generated: Generated) -> None:
    """Write ``generated`` (sources, unit records, origins) under ``digest``."""
    record = {"source": generated.source, "mode": generated.mode,
              "origins": generated.origins,
              "units": [{"name": u.name, "source": u.source, "blocks": u.blocks,
                         "lines": u.lines, "bases": u.bases, "params": list(u.params),
                         "origins": u.origins} for u in generated.units.values()]}
    path = _path(folder, digest)
    write_whole(path, json.dumps(record))


def load(folder: Path, digest: str, checked: Checked) -> Generated | None:
    """The generated code stored under ``digest``, its namespaces looked up again, or None."""
    path = _path(folder, digest)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        units = {u["name"]: UnitSource(u["name"], u["source"], _namespace(checked, u["origins"]),
                                       u["blocks"], u["lines"], u["bases"], tuple(u["params"]),
                                       u["origins"])
                 for u in record["units"]}
        namespace = {**base_namespace(checked), **_namespace(checked, record["origins"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None                  # unreadable or from another layout: generate again
    return Generated(record["source"], namespace, units, record["mode"], record["origins"])


def _namespace(checked: Checked, origins: dict[str, list]) -> dict[str, object]:
    nodes = checked.graph.nodes
    out = {}
    for name, origin in origins.items():
        fn = nodes[origin[1]].block.kernels()[origin[2]]
        out[name] = fn if origin[0] == "kernel" else global_of(fn, origin[3])
    return out
