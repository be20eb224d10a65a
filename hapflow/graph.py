"""Graphs of blocks and wires, and the checks that run before compiling.

The graph is checked at **port** granularity: wire edges run output -> input,
feedthrough edges input -> output inside a block.  A cycle of such edges is
an algebraic loop and is rejected with every hop listed; there is no
iterative loop solver.

The port graph is a plain mapping from each port to the ports it drives
(:data:`PortGraph`), and the loop check is the standard library's
``graphlib``, not a networkx ``DiGraph`` as DESIGN.md has it: importing
networkx (it imports all its algorithms) was about a third of
``import hapflow`` (190-290 ms of 600-830 ms in ``python -X importtime``,
five runs; 410-510 ms without it), paid by every process that builds a
simulation (``hapflow`` commands, study workers, the warm start of a cached
kernel: the rig's, alternating runs, median 2.04 -> 1.74 s on a loaded
machine) for a cycle check and a topological sort
(:func:`hapflow.schedule.topological_order`, the same order as networkx's).
Both are also faster: check and schedule of ``bench/families.py``'s distinct
N = 1000 graph 45-50 -> 32 ms and 69-75 -> 45-51 ms.  networkx stays where
whole-graph algorithms are the point (the diagram's feedback clusters, the
HIL plant split), imported there.
"""
from __future__ import annotations

import copy
import graphlib
import math
import re
from dataclasses import dataclass, field
from typing import Any

from . import registry
from .block import Block, Origin
from .errors import GraphError, Where, suggest, valid_list
from .units import UnitError, dimension

NAME = re.compile(r"[a-z_][a-z0-9_]*")
"""A block name (matched whole with ``fullmatch``: ``$`` would let a trailing newline in)."""
MAX_RATE = 1e6
"""Highest base rate in Hz (a DAQ loop runs at tens of kHz, audio at 192 kHz at most)."""
MAX_DURATION = 1e7
"""Longest simulated duration in s (116 days; at MAX_RATE that is 1e13 ticks, exact in float64)."""
MAX_EVENTS = 1000
"""Most events a tick may handle (the work of one tick must stay bounded)."""
MAX_SEED = 2**63 - 1
"""Largest seed (stored as a 64-bit integer in recordings and study tables)."""
SOLVERS = ("rk4", "euler")
EVENT_MODES = ("locate", "tick")

Port = tuple[str, str, str]
"""A node of the port graph: (block, ``"in"`` or ``"out"``, port name)."""
PortGraph = dict[Port, list[Port]]
"""Each port mapped to the ports it drives, ports in declaration order (blocks in graph
order, a block's inputs before its outputs)."""


@dataclass
class Node:
    """A block in a graph with its rate divider and where it was declared."""

    name: str
    block: Block
    divider: int = 1
    offset: int = 0
    rate: float | None = None
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class Wire:
    """A connection from an output port to an input port."""

    src: tuple[str, str]
    dst: tuple[str, str]
    where: Where = field(default_factory=Where)

    def __str__(self) -> str:
        return f"{self.src[0]}.{self.src[1]} -> {self.dst[0]}.{self.dst[1]}"


class Graph:
    """A block diagram: named blocks, wires between their ports, recorded signals.

    Parameters
    ----------
    name : str
        Graph name (used in recordings).
    rate : float
        Base rate in Hz; one tick lasts ``1/rate`` s.
    duration : float
        Default simulated duration in s.
    seed : int
        Seed of every random source in the graph.
    solver : {'rk4', 'euler'}
        Fixed-step solver for all continuous states ('euler' = semi-implicit).
    events : {'locate', 'tick'}
        'locate' finds guard crossings inside a tick; 'tick' applies resets at
        the end of the tick in which a guard changed sign (for comparison).
    max_events : int
        Events allowed per tick; more are counted as overflow.
    where : Where, optional
        The graph file, for error messages.
    """

    def __init__(self, name: str = "graph", rate: float = 1000.0, duration: float = 1.0,
                 seed: int = 0, solver: str = "rk4", events: str = "locate",
                 max_events: int = 8, where: Where | None = None):
        self.where = where or Where()
        self.name = self._text("name", name)
        self.nodes: dict[str, Node] = {}
        self.rate = rate
        self.duration = self._positive("duration", duration, "s", MAX_DURATION)
        self.seed = self._integer("seed", seed, 0, MAX_SEED)
        self.solver = self._choice("solver", solver, SOLVERS)
        self.events = self._choice("events", events, EVENT_MODES)
        self.max_events = self._integer("max_events", max_events, 1, MAX_EVENTS)
        self.wires: list[Wire] = []
        self.recorded: list[tuple[str, str]] = []
        self.hardware: dict[str, Any] = {}

    @property
    def rate(self) -> float:
        """Base rate in Hz; setting it re-derives every block's divider and sample time."""
        return self._rate

    @rate.setter
    def rate(self, value: float) -> None:
        old = getattr(self, "_rate", None)
        self._rate = self._positive("rate", value, "Hz", MAX_RATE)
        try:
            self._retime()
        except GraphError:
            self._rate = old
            self._retime()
            raise

    def _retime(self) -> None:
        """Dividers and sample times of every block from the base rate (blocks keep their rates)."""
        for node in self.nodes.values():
            divider = self._divider(node.name, node.rate, node.where)
            if node.offset >= divider:
                raise GraphError(f"block {node.name!r}: tick offset {node.offset} needs a rate "
                                 f"divider above it, and {self._rate:g} Hz gives {divider}",
                                 node.where, block=node.name, key="offset")
            node.divider = divider
            node.block.sample_time = divider / self._rate

    def _positive(self, key: str, value: Any, unit: str, limit: float) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0 < value <= limit:
            raise GraphError(f"graph {key!r} must be a finite number > 0 in {unit}, at most "
                             f"{limit:g} {unit}, got {value!r}", self.where, key=key)
        return float(value)

    def _integer(self, key: str, value: Any, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise GraphError(f"graph {key!r} must be an integer from {low} to {high}, "
                             f"got {value!r}", self.where, key=key)
        return value

    def _text(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or not value or not value.isprintable() or len(value) > 200:
            raise GraphError(f"graph {key!r} must be one line of printable text (1 to 200 "
                             f"characters), got {value!r}", self.where, key=key)
        return value

    def _choice(self, key: str, value: Any, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise GraphError(f"graph {key!r} must be one of {', '.join(choices)}, got {value!r}"
                             f"{suggest(str(value), choices)}", self.where, key=key)
        return value

    # ------------------------------------------------------------------ building
    def add(self, name: str, block: Block, rate: float | None = None, offset: int = 0,
            where: Where | None = None) -> Block:
        """Add ``block`` under ``name``.

        Parameters
        ----------
        name : str
            snake_case block name, unique in the graph.
        block : Block
            The block instance.
        rate : float, optional
            Block rate in Hz; must divide the base rate (default: base rate).
        offset : int
            Tick offset of the block's samples, ``0 <= offset < rate divider``.
        where : Where, optional
            Source location for error messages.

        Returns
        -------
        Block
            ``block``, for chaining.
        """
        where = where or self.where
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise GraphError(f"block name {name!r} is not valid: use snake_case "
                             "(lower-case letters, digits and _; not starting with a digit)",
                             where, block=name)
        if name in self.nodes:
            first = self.nodes[name].where
            raise GraphError(f"duplicate block name {name!r} (first declared at {first})",
                             where, block=name)
        if not isinstance(block, Block):
            raise GraphError(f"block {name!r} is not a Block instance: {block!r}", where, block=name)
        problem = block.signature_problem()
        if problem:
            raise GraphError(f"block {name!r}: {problem}", where, block=name)
        for port, spec in [*block.inputs.items(), *block.outputs.items()]:
            try:                   # a port nothing is wired to is otherwise never parsed
                if spec.unit and not spec.unit.startswith("="):
                    dimension(spec.unit)
            except UnitError as exc:
                raise GraphError(f"port {name}.{port}: {exc}", where, block=name,
                                 port=port, key="unit") from None
        for param, spec in block.params.items():
            try:
                dimension(spec.unit)
            except UnitError as exc:
                raise GraphError(f"block {name!r} ({type(block).__name__}) declares parameter "
                                 f"{param!r} in an invalid unit: {exc}", where, block=name) from None
        divider = self._divider(name, rate, where)
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < divider:
            raise GraphError(f"block {name!r}: tick offset must be an integer tick count in "
                             f"[0, {divider - 1}], got {offset!r}", where, block=name, key="offset")
        if divider > 1 and (block.cstate or block.nguards):
            raise GraphError(f"block {name!r} ({type(block).__name__}) has continuous state or "
                             "events, so it must run at the base rate; remove its 'rate'",
                             where, block=name, key="rate")
        if block.origin.name is None:
            block.origin = Origin(name, where, block.origin.param_where)
        block.sample_time = divider / self.rate
        self.nodes[name] = Node(name, block, divider, offset, rate, where)
        return block

    def set(self, key: str, value: Any) -> None:
        """Change parameter ``"block.param"`` before the graph is compiled.

        A live parameter is set on the block; a structural one rebuilds the
        block with the new value (its ports may change; wires are checked
        when the graph is).

        Raises
        ------
        GraphError
            If the block or parameter is unknown or the value is invalid.
        """
        name, _, param = key.partition(".")
        node = self.nodes.get(name)
        if node is None or not param:
            raise GraphError(f"cannot set {key!r}: write block.param with a block of the graph"
                             f"{suggest(name, self.nodes)} Blocks: {valid_list(self.nodes)}",
                             block=name)
        block = node.block
        if param in block.params and not block.params[param].live:
            origin = block.origin       # the new value does not come from the graph file
            node.block = type(block).built(
                Origin(origin.name, origin.where,
                       {k: w for k, w in origin.param_where.items() if k != param}),
                **{**block.values, param: value})
            node.block.sample_time = block.sample_time
        else:
            block.set(param, value)

    def _divider(self, name: str, rate: Any, where: Where) -> int:
        if rate is None:
            return 1
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) \
                or not math.isfinite(rate) or rate <= 0:
            raise GraphError(f"block {name!r}: rate must be a number > 0 in Hz, got {rate!r}",
                             where, block=name, key="rate")
        ratio = self.rate / rate
        divider = round(ratio)
        if divider < 1 or abs(ratio - divider) > 1e-9 * ratio:
            valid = [v for v in (self.rate / k for k in range(1, 1001))
                     if float(f"{v:g}") == v][:10]
            raise GraphError(f"block {name!r}: rate {rate:g} Hz is not an integer divisor of the "
                             f"base rate {self.rate:g} Hz; valid rates include "
                             + ", ".join(f"{v:g}" for v in valid), where, block=name, key="rate")
        return divider

    def port(self, ref: str, direction: str, where: Where | None = None,
             recording: bool = False) -> tuple[str, str]:
        """Resolve ``"block.port"`` to (block, port), checking both exist.

        Parameters
        ----------
        ref : str
            Port reference.
        direction : {'in', 'out'}
            Which side the port must be on.
        recording : bool
            The reference is a recorded signal (changes the hint for inputs).
        """
        where = where or self.where
        parts = ref.strip().split(".") if isinstance(ref, str) else []
        if len(parts) != 2 or not all(parts):
            raise GraphError(f"malformed port reference {ref!r}: write block.port, "
                             "e.g. 'pid.force_cmd'", where)
        block, port = parts
        if block not in self.nodes:
            raise GraphError(f"unknown block {block!r} in {ref!r}{suggest(block, self.nodes)} "
                             f"Blocks: {valid_list(self.nodes)}", where, block=block)
        b = self.nodes[block].block
        ports = b.outputs if direction == "out" else b.inputs
        if port not in ports:
            other = b.inputs if direction == "out" else b.outputs
            side = "output" if direction == "out" else "input"
            where_else = ("record the output that drives it instead." if recording
                          else "on the other side of the wire.")
            hint = (f"; {port!r} is an {'input' if direction == 'out' else 'output'}, "
                    f"{where_else}") if port in other else suggest(port, ports)
            raise GraphError(f"block {block!r} ({type(b).__name__}) has no {side} port "
                             f"{port!r}{hint} Valid {side}s: {valid_list(ports)}",
                             where, block=block, port=port)
        return block, port

    def wire(self, src: str, dst: str | None = None, where: Where | None = None) -> Wire:
        """Connect an output to an input: ``wire("a.y", "b.u")`` or ``wire("a.y -> b.u")``."""
        where = where or self.where
        if dst is None:
            if not isinstance(src, str) or src.count("->") != 1:
                raise GraphError(f"malformed wire {src!r}: write 'block.output -> block.input'",
                                 where)
            src, dst = (s.strip() for s in src.split("->"))
        w = Wire(self.port(src, "out", where), self.port(dst, "in", where), where)
        self.wires.append(w)
        return w

    def record(self, *signals: str, where: Where | None = None) -> None:
        """Record output signals (``"block.port"``) at every tick."""
        for ref in signals:
            key = self.port(ref, "out", where, recording=True)
            if key not in self.recorded:
                self.recorded.append(key)

    def reduced(self, signals: list[str]) -> "Graph":
        """A copy that computes only ``signals`` (``"block.port"``) and records only them.

        It keeps the blocks the signals' blocks read through wires, again and
        again, and every block that acts without wires: one with guards (event
        location cuts the tick of the whole graph) or with a Python side
        (:meth:`Block.has_drain`).  A kept block computes the very same values
        as in the whole graph: its values follow from its parameters, its
        random streams (seeded by its own name), its inputs (kept), the tick
        and the fixed-step solver, which steps each state with its own
        derivatives.  The blocks are shared with this graph (a
        :class:`~hapflow.simulation.Simulation` copies them).

        Raises
        ------
        GraphError
            For a signal that is not a ``block.port`` output of this graph.
        """
        wanted = [self.port(ref, "out", recording=True) for ref in signals]
        keep = {block for block, _ in wanted}
        keep.update(name for name, node in self.nodes.items()
                    if node.block.nguards or node.block.has_drain())
        sources: dict[str, set[str]] = {name: set() for name in self.nodes}
        for w in self.wires:
            sources[w.dst[0]].add(w.src[0])
        todo = list(keep)
        while todo:
            for source in sources[todo.pop()] - keep:
                keep.add(source)
                todo.append(source)
        out = copy.copy(self)
        out.nodes = {name: node for name, node in self.nodes.items() if name in keep}
        out.wires = [w for w in self.wires if w.dst[0] in keep]
        out.recorded = list(dict.fromkeys(wanted))
        out.hardware = {name: spec for name, spec in self.hardware.items() if name in keep}
        return out

    # ------------------------------------------------------------------ checks
    def check(self) -> "Checked":
        """Run every whole-graph check.

        Returns
        -------
        Checked
            Drivers of every input and the port graph, ready for scheduling.

        Raises
        ------
        GraphError
            On the first problem found.
        """
        if not self.nodes:
            raise GraphError("the graph is empty: add at least one block under 'blocks:'",
                             self.where)
        drivers = self._drivers()
        units = self._check_wires(drivers)
        ports = self._port_graph()
        self._check_loops(ports)
        self._check_designs()
        for name in self.hardware:
            if name not in self.nodes:
                raise GraphError(f"hardware binding names unknown block {name!r}"
                                 f"{suggest(name, self.nodes)}", self.where, block=name)
        return Checked(self, drivers, ports, units)

    def _check_designs(self) -> None:
        """Rules that need the block's rate (cut-offs below Nyquist ...), located at the block.

        ``pack`` designs each block at its sample time (designs are cached, so
        the compiler's own call costs nothing more).
        """
        for node in self.nodes.values():
            node.block.packed()

    def _drivers(self) -> dict[tuple[str, str], Wire]:
        drivers: dict[tuple[str, str], Wire] = {}
        for w in self.wires:
            if w.dst in drivers:
                first = drivers[w.dst]
                raise GraphError(f"input {w.dst[0]}.{w.dst[1]} has two drivers: '{first}' "
                                 f"(at {first.where}) and '{w}'; an input takes exactly one wire "
                                 "(use a Sum block to add signals)",
                                 w.where, block=w.dst[0], port=w.dst[1])
            drivers[w.dst] = w
        for name, node in self.nodes.items():
            for port, spec in node.block.inputs.items():
                if (name, port) not in drivers and not spec.optional:
                    raise GraphError(f"input {name}.{port} ({spec.describe()}) has no driver: "
                                     f"wire an output to it, e.g. '- source.y -> {name}.{port}'",
                                     node.where, block=name, port=port)
        return drivers

    def _check_wires(self, drivers: dict[tuple[str, str], Wire]) -> dict[tuple[str, str], str | None]:
        units = self._resolve_units(drivers)
        for w in self.wires:
            out = self.nodes[w.src[0]].block.outputs[w.src[1]]
            inp = self.nodes[w.dst[0]].block.inputs[w.dst[1]]
            if out.shape != inp.shape or out.dtype != inp.dtype:
                raise GraphError(f"wire '{w}': {w.src[0]}.{w.src[1]} is {out.shape} {out.dtype} but "
                                 f"{w.dst[0]}.{w.dst[1]} takes {inp.shape} {inp.dtype}",
                                 w.where, block=w.dst[0], port=w.dst[1])
            src_unit = units[w.src]
            expected, why = inp.unit, ""
            if expected is not None and expected.startswith("="):
                ref = expected[1:]
                expected = units[drivers[(w.dst[0], ref)].src]
                why = f" (the unit of {w.dst[0]}.{ref})"
            if src_unit is None or expected is None:
                continue
            if dimension(src_unit) != dimension(expected):
                raise GraphError(f"unit mismatch on wire '{w}': {w.src[0]}.{w.src[1]} is in "
                                 f"{src_unit!r} but {w.dst[0]}.{w.dst[1]} expects "
                                 f"{expected!r}{why}", w.where, block=w.dst[0], port=w.dst[1])
        return units

    def _resolve_units(self, drivers: dict[tuple[str, str], Wire]) -> dict[tuple[str, str], str | None]:
        """Unit of every output, following ``"=input"`` references through wires."""
        units: dict[tuple[str, str], str | None] = {}
        pending = []
        for name, node in self.nodes.items():
            for port, spec in node.block.outputs.items():
                if spec.unit is not None and spec.unit.startswith("="):
                    pending.append((name, port, spec.unit[1:]))
                    units[(name, port)] = None
                else:
                    self._parse_unit(spec.unit, name, port)
                    units[(name, port)] = spec.unit
            for port, spec in node.block.inputs.items():
                if spec.unit is not None and not spec.unit.startswith("="):
                    self._parse_unit(spec.unit, name, port)
        refs = {(name, port): ref for name, port, ref in pending}
        done: set[tuple[str, str]] = set()
        for key in refs:                 # follow each chain of references once
            path: list[tuple[str, str]] = []
            unit = None
            while key in refs and key not in done and key not in path:
                path.append(key)
                inp = self.nodes[key[0]].block.inputs[refs[key]]
                if inp.unit is not None and not inp.unit.startswith("="):
                    unit, key = inp.unit, None
                    break
                key = drivers[(key[0], refs[key])].src
            if key is not None and (key in done or key not in refs):
                unit = units[key]
            for step in path:            # a cycle of references stays without a unit
                units[step] = unit
                done.add(step)
        return units

    def _parse_unit(self, unit: str | None, block: str, port: str) -> None:
        if unit is None:
            return
        try:
            dimension(unit)
        except UnitError as exc:
            raise GraphError(f"port {block}.{port}: {exc}", self.nodes[block].where,
                             block=block, port=port) from None

    def _port_graph(self) -> PortGraph:
        driven: PortGraph = {}
        for name, node in self.nodes.items():
            for port in node.block.inputs:
                driven[(name, "in", port)] = []
            for port in node.block.outputs:
                driven[(name, "out", port)] = []
                for dep in feedthrough(node.block, port):
                    driven[(name, "in", dep)].append((name, "out", port))
        for w in self.wires:
            driven[(w.src[0], "out", w.src[1])].append((w.dst[0], "in", w.dst[1]))
        return driven

    def _check_loops(self, ports: PortGraph) -> None:
        drivers: dict[Port, list[Port]] = {port: [] for port in ports}
        for port, driven in ports.items():
            for other in driven:
                drivers[other].append(port)
        try:
            graphlib.TopologicalSorter(drivers).prepare()
            return
        except graphlib.CycleError as exc:
            nodes = exc.args[1][:-1]      # each port drives the next; the first is repeated last
        first = min(range(len(nodes)),
                    key=lambda k: (nodes[k][1] != "out", list(self.nodes).index(nodes[k][0]),
                                   nodes[k][2]))
        nodes = nodes[first:] + nodes[:first]
        wires = {(w.src, w.dst): w for w in self.wires}
        hops = []
        for k, a in enumerate(nodes):
            b = nodes[(k + 1) % len(nodes)]
            if a[1] == "out":
                line = wires[((a[0], a[2]), (b[0], b[2]))].where.line
                hop = f"is wired to {b[0]}.{b[2]}" + (f" (line {line})" if line else "")
            else:
                hop = f"feeds through to {b[0]}.{b[2]}"
            hops.append(f"  {a[0]}.{a[2]} {hop}" if k == 0 else f"  which {hop}")
        blocks = list(dict.fromkeys(n[0] for n in nodes))
        where = wires[((nodes[0][0], nodes[0][2]), (nodes[1][0], nodes[1][2]))].where
        raise GraphError("algebraic loop through direct-feedthrough ports of "
                         + ", ".join(blocks) + ":\n" + ",\n".join(hops) + ".\n"
                         "Break it with a unit delay (a UnitDelay block) on one of these wires, "
                         "or use a block whose output depends on state only.",
                         where, block=nodes[0][0], port=nodes[0][2])


def feedthrough(block: Block, output: str) -> tuple[str, ...]:
    """Inputs that ``output`` of ``block`` depends on within the same tick."""
    spec = block.outputs[output]
    if spec.depends == "state":
        return ()
    if spec.depends is None:
        return tuple(block.inputs)
    unknown = [d for d in spec.depends if d not in block.inputs]
    if unknown:
        raise GraphError(f"{type(block).__name__}.{output} declares depends={spec.depends} but "
                         f"has no input {unknown[0]!r}")
    return spec.depends


@dataclass
class Checked:
    """A graph that passed every check, with its drivers and port graph.

    ``drivers`` maps every wired input to its wire; an optional input left
    unwired has none (the layout gives it a slot of zeros).
    """

    graph: Graph
    drivers: dict[tuple[str, str], Wire]
    ports: PortGraph
    units: dict[tuple[str, str], str | None]


def construct(type_name: str, cls: type[Block] | None, values: dict[str, Any], block: str,
              where: Where, param_where: dict[str, Where] | None = None) -> Block:
    """Build a block from its type name and parameter values, with located errors (an
    unknown type names the known ones: read from every installed distribution's entry
    points, so only then)."""
    if cls is None:
        known = registry.names()
        raise GraphError(f"unknown block type {type_name!r} for block {block!r}"
                         f"{suggest(type_name, known)} Known types: {valid_list(known)}",
                         where, block=block)
    return cls.built(Origin(block, where, dict(param_where or {})), **values)
