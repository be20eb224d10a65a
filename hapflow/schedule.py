"""Execution order at port granularity, and which outputs the solver re-evaluates.

Outputs of a block are grouped by what they depend on; a group's output
kernel call is placed where its first output falls in a deterministic
topological sort of the port graph.  A block whose groups end up apart is
called once per group: each call computes all its outputs, and the later call
overwrites the feedthrough outputs with values computed from fresh inputs.
Groups whose outputs nobody reads, records or binds to hardware are not
called at all.

A block is **held** when it has a discrete ``update`` and no continuous
state, or runs slower than the base rate: its outputs change only at its
sample hits and hold (zero-order hold) in between, also during solver
stages.  The **chain** is the list of non-held output calls that feed,
through non-held blocks, any input of a block with continuous state or
events; it is re-evaluated at every solver stage and event-location trial.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable, Iterator

from .graph import Checked, Port, PortGraph, feedthrough


@dataclass(frozen=True)
class Call:
    """One call of a block's output kernel, covering a group of outputs."""

    block: str
    outputs: tuple[str, ...]
    deps: tuple[str, ...]


@dataclass
class Schedule:
    """Everything the code generator needs about order and rates."""

    calls: list[Call]
    chain: list[Call]
    held: set[str]
    updates: list[str]
    continuous: list[str]
    hybrid: list[str]


def is_held(checked: Checked, name: str) -> bool:
    """True if block ``name`` changes its outputs only at its own sample hits."""
    node = checked.graph.nodes[name]
    kernels = node.block.kernels()
    return node.divider > 1 or ("update" in kernels and node.block.cstate == 0)


def topological_order(ports: PortGraph, key: Callable[[Port], tuple]) -> Iterator[Port]:
    """Every port after the ports that drive it; of the ports ready, the smallest ``key`` first.

    networkx's ``lexicographical_topological_sort`` (Kahn's algorithm over a heap),
    written here for a port graph that is a plain mapping (see :mod:`hapflow.graph`);
    ``key`` must tell every two ports apart.
    """
    waiting = dict.fromkeys(ports, 0)              # drivers not placed yet
    for driven in ports.values():
        for port in driven:
            waiting[port] += 1
    ready = [(key(port), port) for port, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    while ready:
        _, port = heapq.heappop(ready)
        yield port
        for other in ports[port]:
            waiting[other] -= 1
            if waiting[other] == 0:
                heapq.heappush(ready, (key(other), other))


def build_schedule(checked: Checked) -> Schedule:
    """Order the output calls and find the solver chain.

    Parameters
    ----------
    checked : Checked
        A graph that passed :meth:`Graph.check`.
    """
    graph = checked.graph
    names = list(graph.nodes)
    rank = {name: k for k, name in enumerate(names)}

    def key(node: tuple[str, str, str]) -> tuple:
        block = graph.nodes[node[0]].block
        ports = list(block.inputs if node[1] == "in" else block.outputs)
        return (rank[node[0]], node[1] == "out", ports.index(node[2]))

    groups: dict[tuple[str, str], Call] = {}
    for name in names:
        block = graph.nodes[name].block
        by_deps: dict[tuple[str, ...], list[str]] = {}
        for port in block.outputs:
            by_deps.setdefault(feedthrough(block, port), []).append(port)
        for deps, outs in by_deps.items():
            call = Call(name, tuple(outs), deps)
            for port in outs:
                groups[(name, port)] = call

    calls: list[Call] = []
    placed: set[Call] = set()
    for node in topological_order(checked.ports, key):
        if node[1] == "out":
            call = groups[(node[0], node[2])]
            if call not in placed:
                placed.add(call)
                calls.append(call)

    calls = _merge(_used(calls, checked), checked)
    groups = {(c.block, port): c for c in calls for port in c.outputs}
    held = {n for n in names if is_held(checked, n)}
    continuous = [n for n in names if graph.nodes[n].block.cstate]
    hybrid = [n for n in names if graph.nodes[n].block.nguards]
    updates = [n for n in names if "update" in graph.nodes[n].block.kernels()]
    chain = _chain(checked, calls, groups, held, set(continuous) | set(hybrid))
    return Schedule(calls, chain, held, updates, continuous, hybrid)


def _used(calls: list[Call], checked: Checked) -> list[Call]:
    """Drop calls none of whose outputs is wired, recorded or bound to hardware.

    Blocks with an ``update`` keep their calls: their output kernel may leave
    work values in ``d`` for the update of the same sample.
    """
    graph = checked.graph
    used = {w.src for w in graph.wires} | set(graph.recorded)
    used |= {(b, port) for b in graph.hardware if b in graph.nodes
             for port in graph.nodes[b].block.outputs}
    return [c for c in calls if any((c.block, port) in used for port in c.outputs)
            or "update" in graph.nodes[c.block].block.kernels()]


def _merge(calls: list[Call], checked: Checked) -> list[Call]:
    """Drop a call when a later call of the same block comes before any reader of its outputs."""
    readers = {}
    for w in checked.graph.wires:
        readers.setdefault(w.src[0], set()).add(w.dst[0])
    following: dict[int, int] = {}          # index of a call -> of the block's next call
    last: dict[str, int] = {}
    for k in range(len(calls) - 1, -1, -1):
        if calls[k].block in last:
            following[k] = last[calls[k].block]
        last[calls[k].block] = k
    kept = []
    for k, call in enumerate(calls):
        nxt = following.get(k)
        if nxt is not None and not any(c.block in readers.get(call.block, ())
                                       for c in calls[k + 1:nxt]):
            merged = calls[nxt]
            calls[nxt] = Call(call.block, call.outputs + merged.outputs,
                              tuple(dict.fromkeys(call.deps + merged.deps)))
            continue
        kept.append(call)
    return kept


def _chain(checked: Checked, calls: list[Call], groups: dict[tuple[str, str], Call],
           held: set[str], targets: set[str]) -> list[Call]:
    graph = checked.graph
    needed: set[Call] = set()
    stack = [(name, port) for name in targets for port in graph.nodes[name].block.inputs]
    while stack:
        wire = checked.drivers.get(stack.pop())
        if wire is None:                    # an optional input left unwired reads zeros
            continue
        src = wire.src
        if src[0] in held:
            continue
        call = groups[src]
        if call not in needed:
            needed.add(call)
            stack.extend((call.block, dep) for dep in call.deps)
    return [c for c in calls if c in needed]
