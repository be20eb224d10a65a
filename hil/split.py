"""Split a graph for HIL into the controller (real-time kernel) and the plant (the rig).

The graph's ``hardware:`` blocks are the ones that become real.  Remove them
and look at the connected components (over wires, either direction) of the
blocks that are left:

- a component wired to an **unbound** hardware port is a device behind the
  hardware (the probed device, its load): it joins the **plant**, with the
  hardware blocks (it may also take a bound measurement, e.g. the motor force
  that both acts on the load and is measured);
- every other component is **controller**: it runs in the real-time kernel,
  drives the bound card outputs and reads the bound card inputs.

A component that drives a bound card output and is wired to an unbound
hardware port is an error (a block cannot sit on both sides of the card).

The controller graph keeps the controller blocks (fresh copies) and replaces
each bound port by a stand-in (:mod:`hapflow.hil.cardports`): a card input
(analog input, encoder) becomes a ``CardValue`` source, an analog output a
``CardSink``.  It records the original graph's recorded controller signals
plus every card input under its hardware name (``head.force``).  Recorded
plant signals (``dev.pos``) cannot be measured on a real rig and are dropped.

The plant graph keeps the plant blocks (fresh copies); every analog output
becomes a ``CardValue`` source driving the hardware input it is bound to.
The simulated rig (:mod:`hapflow.hil.simrig`) runs it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import networkx as nx

from hapflow.block import Block
from hapflow.errors import GraphError
from hapflow.graph import Graph, Node

from .backend import Channel
from .cardports import CardSink, CardValue


@dataclass
class Half:
    """One side of the split graph.

    Attributes
    ----------
    graph : Graph
        The generated graph (not yet compiled).
    values : dict
        ``"block.port"`` of the original graph -> name of the ``CardValue``
        stand-in that carries it into this half.
    sinks : dict
        ``"block.port"`` -> name of the ``CardSink`` whose input is the command.
    names : dict
        ``"block.port"`` in this graph -> name to record it under.
    dropped : list of str
        Recorded signals of the original graph that this half cannot provide.
    """

    graph: Graph
    values: dict[str, str] = field(default_factory=dict)
    sinks: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)


def clone(block: Block) -> Block:
    """A fresh block of the same type with the same parameter values."""
    return type(block)(**dict(block.values))


def _unit(graph: Graph, port: str, side: str) -> str | None:
    name, p = port.split(".")
    block = graph.nodes[name].block
    spec = (block.outputs if side == "out" else block.inputs)[p]
    return spec.unit


def plant_blocks(graph: Graph, channels: Iterable[Channel]) -> list[str]:
    """Names of the plant blocks: the hardware blocks and the devices behind them.

    Raises
    ------
    GraphError
        If a block is wired to both a bound and an unbound hardware port.
    """
    hardware = set(graph.hardware)
    channels = list(channels)
    bound_out = {c.port for c in channels if c.kind in ("ai", "ci_encoder")}
    bound_in = {c.port for c in channels if c.kind == "ao"}
    others = nx.Graph()
    others.add_nodes_from(n for n in graph.nodes if n not in hardware)
    for w in graph.wires:
        if w.src[0] not in hardware and w.dst[0] not in hardware:
            others.add_edge(w.src[0], w.dst[0])
    plant = [n for n in graph.nodes if n in hardware]
    for component in nx.connected_components(others):
        drives_card, touches_plant = [], []
        for w in graph.wires:
            if w.src[0] in component and w.dst[0] in hardware:
                port = f"{w.dst[0]}.{w.dst[1]}"
                (drives_card if port in bound_in else touches_plant).append((w, port))
            if w.dst[0] in component and w.src[0] in hardware:
                port = f"{w.src[0]}.{w.src[1]}"
                if port not in bound_out:         # a measured output may feed either side
                    touches_plant.append((w, port))
        if drives_card and touches_plant:
            (w1, p1), (w2, p2) = drives_card[0], touches_plant[0]
            raise GraphError(
                f"in HIL mode a block is either in the controller or in the plant, but the "
                f"blocks {sorted(component)} drive the card output {p1} ('{w1}') and are wired "
                f"to the unbound hardware port {p2} ('{w2}'); bind {p2} to a channel under "
                f"'hardware:', or rewire", w2.where, block=p2.split(".")[0], port=p2.split(".")[1])
        if touches_plant:
            plant += [n for n in graph.nodes if n in component]
    order = list(graph.nodes)
    return sorted(set(plant), key=order.index)


def _fresh(graph: Graph, base: str) -> str:
    name, k = base, 1
    while name in graph.nodes:
        k += 1
        name = f"{base}_{k}"
    return name


def _copy_blocks(src: Graph, dst: Graph, names: Iterable[str]) -> None:
    for name in names:
        node: Node = src.nodes[name]
        dst.add(name, clone(node.block), rate=node.rate, offset=node.offset, where=node.where)


def controller_graph(graph: Graph, channels: list[Channel]) -> Half:
    """The controller half: what runs in the real-time kernel (see the module docstring).

    Raises
    ------
    GraphError
        As :func:`plant_blocks`.
    """
    plant = set(plant_blocks(graph, channels))
    hardware = set(graph.hardware)
    inputs = {c.port: c for c in channels if c.kind in ("ai", "ci_encoder")}
    outputs = {c.port: c for c in channels if c.kind == "ao"}
    g = Graph(name=graph.name, rate=graph.rate, duration=graph.duration, seed=graph.seed,
              solver=graph.solver, events=graph.events, max_events=graph.max_events,
              where=graph.where)
    half = Half(g)
    _copy_blocks(graph, g, [n for n in graph.nodes if n not in plant])
    for port in inputs:
        name = half.values[port] = _fresh(g, f"card_{port.replace('.', '_')}")
        g.add(name, CardValue(unit=_unit(graph, port, "out")))
        half.names[f"{name}.y"] = port
    for port in outputs:
        name = half.sinks[port] = _fresh(g, f"card_{port.replace('.', '_')}")
        g.add(name, CardSink(unit=_unit(graph, port, "in")))
    for w in graph.wires:                 # plant_blocks() left only bound ports between halves
        src, dst = f"{w.src[0]}.{w.src[1]}", f"{w.dst[0]}.{w.dst[1]}"
        if w.src[0] in plant and w.dst[0] in plant:
            continue
        if w.src[0] in hardware:
            src = f"{half.values[src]}.y"
        if w.dst[0] in hardware:
            dst = f"{half.sinks[dst]}.u"
        g.wire(src, dst, where=w.where)
    for block, port in graph.recorded:
        ref = f"{block}.{port}"
        if block not in plant:
            g.record(ref)
        elif ref not in inputs:
            half.dropped.append(ref)
    for port in inputs:
        g.record(f"{half.values[port]}.y")
    return half


def plant_graph(graph: Graph, channels: list[Channel]) -> Half:
    """The plant half: the hardware blocks' twins and the devices behind them.

    Raises
    ------
    GraphError
        If a bound analog output is driven by another plant block.
    """
    plant = plant_blocks(graph, channels)
    members = set(plant)
    outputs = {c.port: c for c in channels if c.kind == "ao"}
    g = Graph(name=f"{graph.name}-plant", rate=graph.rate, duration=graph.duration,
              seed=graph.seed, solver=graph.solver, events=graph.events,
              max_events=graph.max_events, where=graph.where)
    half = Half(g)
    _copy_blocks(graph, g, plant)
    for port in outputs:
        name = half.values[port] = _fresh(g, f"card_{port.replace('.', '_')}")
        g.add(name, CardValue(unit=_unit(graph, port, "in")))
        g.wire(f"{name}.y", port)
    for w in graph.wires:
        dst = f"{w.dst[0]}.{w.dst[1]}"
        if w.src[0] in members and w.dst[0] in members:
            if dst in outputs:
                raise GraphError(f"{dst} is bound to the analog output "
                                 f"{outputs[dst].physical} but driven by the plant ('{w}'); "
                                 "bind an input the controller drives", w.where,
                                 block=w.dst[0], port=w.dst[1])
            g.wire(f"{w.src[0]}.{w.src[1]}", dst, where=w.where)
    for c in channels:
        if c.kind in ("ai", "ci_encoder"):
            g.record(c.port)        # sampled from the log row: values at the tick, not a solver stage
    half.dropped = [f"{b}.{p}" for b, p in graph.recorded]
    return half
