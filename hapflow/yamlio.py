"""YAML graph files: load with line numbers for every error, save back.

Loaded with PyYAML's safe loader only (``yaml.compose`` + ``SafeConstructor``,
libyaml's where PyYAML has it);
block types come from :mod:`hapflow.registry`, never from import paths.

::

    name: demo
    rate: 1000          # Hz
    duration: 5         # s
    seed: 1
    solver: rk4         # or euler (semi-implicit)
    blocks:
      src:   {type: Sine, amplitude: 1.0, frequency: 2.0}
      plant: {type: MassSpringDamper, mass: 1.0, damping: 2.0, stiffness: 400.0}
      ctrl:  {type: Gain, gain: 0.5, rate: 250}     # rate: block rate in Hz (tick_offset: ticks)
    wires:
      - src.y -> plant.force
    record: [plant.pos]
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Iterator

import yaml

from . import registry
from .errors import GraphError, Where, suggest, valid_list
from .graph import Graph, construct

MAX_DEPTH = 32
"""Deepest nesting of lists and mappings a file may use (a graph needs 4)."""
MAX_NODES = 100_000
"""Most values a file may hold once its aliases are expanded (an alias bomb has billions)."""
MAX_NUMBER = 40
"""Longest number literal, in characters (a float64 needs 24)."""

_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


class _Loader(yaml.SafeLoader):
    """Safe loader that also reads YAML 1.2 floats such as ``1e4`` and ``2.5e-1`` as numbers.

    It stops at :data:`MAX_DEPTH` levels of nesting, before the recursive
    composer (and later the constructor) run out of Python stack.  Pure
    Python: it says what is wrong with a file, and reads it where PyYAML has
    no libyaml (:class:`_Fast` reads every other file).
    """

    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"lists and mappings nested deeper than {MAX_DEPTH} levels",
                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _Fast(getattr(yaml, "CSafeLoader", _Loader)):     # type: ignore[misc]
    """libyaml's parser and composer (when PyYAML has them) with :class:`_Loader`'s
    resolvers: a 1000-block graph file composes about 3x faster.  Its composer recurses
    in C, so a file is composed by it only once its events show no nesting past
    :data:`MAX_DEPTH` (:func:`_within_depth`)."""


for _loader in (_Loader, _Fast):
    _loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
        list("-+0123456789."))

_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _within_depth(text: str) -> bool:
    """Whether no list or mapping of ``text`` is nested deeper than :data:`MAX_DEPTH`
    (libyaml's parser keeps its nesting on the heap, not the stack)."""
    depth = 0
    for event in yaml.parse(text, Loader=_Fast):
        if isinstance(event, _OPEN):
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif isinstance(event, _CLOSE):
            depth -= 1
    return True


def _compose(text: str) -> yaml.Node | None:
    """The document of ``text`` composed, with line numbers.  A file libyaml cannot
    read, or nested too deep, is read again by the pure-Python loader, whose errors
    say what is wrong in the words hapflow has always used."""
    try:
        if _within_depth(text):
            return yaml.compose(text, Loader=_Fast)
    except yaml.YAMLError:
        pass
    return yaml.compose(text, Loader=_Loader)


def read_text(path: str | Path, what: str = "graph file") -> str:
    """The text of a UTF-8 file, or an error naming the line of the first byte that is not.

    Raises
    ------
    GraphError
        If the file cannot be read or is not UTF-8.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GraphError(f"cannot read {what}: {exc.strerror}", Where(str(path))) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise GraphError(f"the {what} is not UTF-8 text: byte 0x{data[exc.start]:02x} at column "
                         f"{column}; save it as UTF-8", Where(str(path), line)) from None


def _expanded(node: yaml.Node, sizes: dict[int, float]) -> float:
    """Number of values under ``node`` with every alias expanded (memoised in ``sizes``);
    infinite for a value that contains itself (``&a [*a]``)."""
    if id(node) not in sizes:
        sizes[id(node)] = math.inf                # until its children are counted
        sizes[id(node)] = 1 + sum(_expanded(child, sizes) for child in _children(node))
    return sizes[id(node)]


TOP_KEYS = ("name", "rate", "duration", "seed", "solver", "events", "max_events",
            "blocks", "wires", "record", "hardware")
BLOCK_KEYS = ("type", "rate", "tick_offset")


class Reader:
    """A YAML document composed with line numbers, checked against the size limits.

    Parameters
    ----------
    text : str
        The YAML document.
    file : str, optional
        File name used in error messages.

    Raises
    ------
    GraphError
        On a syntax error, or nesting, alias expansion or a number beyond
        :data:`MAX_DEPTH`, :data:`MAX_NODES`, :data:`MAX_NUMBER`.
    """

    def __init__(self, text: str, file: str | None, max_nodes: int = MAX_NODES):
        self.file = file
        self.max_nodes = max_nodes
        self.constructor = yaml.constructor.SafeConstructor()
        try:
            self.root = _compose(text)
        except yaml.reader.ReaderError as exc:         # a NUL or other control character
            code = exc.character if isinstance(exc.character, int) else ord(exc.character)
            raise GraphError(f"the control character U+{code:04X} is not allowed in a YAML "
                             "file; remove it",
                             Where(file, text.count("\n", 0, exc.position) + 1)) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark else None
            problem = getattr(exc, "problem", None) or str(exc)
            context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
            if context and start:
                problem += f" ({context} that starts at line {start.line + 1})"
            raise GraphError(f"YAML syntax error: {problem}", Where(file, line)) from None
        if self.root is not None:
            self._check_size(self.root)

    def _check_size(self, root: yaml.Node) -> None:
        sizes: dict[int, float] = {}
        node, seen = root, {id(root)}
        if _expanded(root, sizes) > self.max_nodes:
            # the innermost value that is too big on its own names the line to fix
            while big := [c for c in _children(node) if sizes[id(c)] > self.max_nodes]:
                if id(big[0]) in seen:
                    raise GraphError("this value contains itself through an alias",
                                     self.at(big[0]))
                node = big[0]
                seen.add(id(node))
            raise GraphError(f"this value expands (through its aliases) to more than "
                             f"{self.max_nodes:,} values", self.at(node))
        for node in _scalars(root):
            if node.tag in _NUMBER_TAGS and len(node.value) > MAX_NUMBER:
                raise GraphError(f"a number of {len(node.value)} characters: numbers are "
                                 f"limited to {MAX_NUMBER}", self.at(node))

    def at(self, node: yaml.Node) -> Where:
        return Where(self.file, node.start_mark.line + 1)

    def value(self, node: yaml.Node) -> Any:
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise GraphError(f"bad YAML value: {exc}", self.at(node)) from None

    def mapping(self, node: yaml.Node, what: str) -> list[tuple[str, yaml.Node, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            raise GraphError(f"{what} must be a mapping of key: value", self.at(node))
        seen: dict[str, yaml.Node] = {}
        items = []
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if not isinstance(key, str):
                raise GraphError(f"{what}: key {key!r} must be a string", self.at(key_node))
            if key in seen:
                raise GraphError(f"{what}: duplicate key {key!r} (first at line "
                                 f"{seen[key].start_mark.line + 1})", self.at(key_node))
            seen[key] = key_node
            items.append((key, key_node, value_node))
        return items

    def plain(self, node: yaml.Node | None = None) -> Any:
        """``node`` (default: the whole document) as plain Python, every mapping checked
        for keys that are not strings or come twice."""
        node = self.root if node is None else node
        if isinstance(node, yaml.MappingNode):
            return {key: self.plain(value) for key, _, value in self.mapping(node, "mapping")}
        if isinstance(node, yaml.SequenceNode):
            return [self.plain(item) for item in node.value]
        return None if node is None else self.value(node)

    def line(self, *keys: str | int) -> int | None:
        """The line of the entry at ``keys`` (mapping keys, list indices) from the root: of its
        key in a mapping; of the deepest entry that exists if it does not."""
        node, line = self.root, None
        for key in keys:
            if isinstance(node, yaml.MappingNode):
                pair = next(((k, v) for k, v in node.value if k.value == key), None)
                at, node = pair if pair else (None, None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int):
                at = node = node.value[key] if 0 <= key < len(node.value) else None
            else:
                at = node = None
            if node is None:
                break
            line = at.start_mark.line + 1
        return line

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise GraphError(f"{what} must be a list", self.at(node))
        return node.value


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _scalars(root: yaml.Node) -> Iterator[yaml.ScalarNode]:
    """Each distinct scalar node under ``root`` once (aliases are not walked again)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            yield node
        stack.extend(_children(node))


def loads(text: str, file: str | None = None) -> Graph:
    """Build a graph from YAML text.

    Parameters
    ----------
    text : str
        The YAML document.
    file : str, optional
        File name used in error messages.

    Raises
    ------
    GraphError
        With file, line, block and port of the first problem.
    """
    r = Reader(text, file)
    if r.root is None:
        raise GraphError("the graph file is empty: it needs at least 'rate' and 'blocks'",
                         Where(file, 1))
    top = {}
    for key, key_node, value_node in r.mapping(r.root, "graph file"):
        if key not in TOP_KEYS:
            raise GraphError(f"unknown top-level key {key!r}{suggest(key, TOP_KEYS)} "
                             f"Valid keys: {', '.join(TOP_KEYS)}", r.at(key_node))
        top[key] = (key_node, value_node)
    settings = {k: r.value(top[k][1]) for k in ("name", "rate", "duration", "seed", "solver",
                                                 "events", "max_events") if k in top}
    if "rate" not in top:        # no silent default: every tick's length depends on it
        raise GraphError("the graph file has no 'rate' (the base rate in Hz, e.g. 'rate: 1000')",
                         Where(file, 1), key="rate")
    try:
        graph = Graph(where=Where(file, 1), **settings)
    except GraphError as exc:
        raise GraphError(exc.message, r.at(top[exc.key][0]) if exc.key else exc.where) from None
    graph.source_text = text
    if "blocks" in top:
        _blocks(r, graph, top["blocks"][1])
    if not graph.nodes:
        at = r.at(top["blocks"][0]) if "blocks" in top else Where(file, 1)
        raise GraphError("the graph is empty: add at least one block under 'blocks:'", at)
    for item in r.sequence(top["wires"][1], "wires") if "wires" in top else []:
        wire = r.value(item)
        if not isinstance(wire, str):
            raise GraphError(f"malformed wire {wire!r}: write 'block.output -> block.input'",
                             r.at(item))
        graph.wire(wire, where=r.at(item))
    if "record" in top:
        for item in r.sequence(top["record"][1], "record"):
            ref = r.value(item)
            if not isinstance(ref, str):
                raise GraphError(f"record entry {ref!r} must be 'block.port'", r.at(item))
            graph.record(ref, where=r.at(item))
    if "hardware" in top:
        for name, key_node, value_node in r.mapping(top["hardware"][1], "hardware"):
            if name not in graph.nodes:
                raise GraphError(f"hardware binding names unknown block {name!r}"
                                 f"{suggest(name, graph.nodes)} Blocks: {valid_list(graph.nodes)}",
                                 r.at(key_node), block=name)
            graph.hardware[name] = r.value(value_node)
    return graph


def _blocks(r: Reader, graph: Graph, node: yaml.Node) -> None:
    for name, key_node, spec_node in r.mapping(node, "blocks"):
        where = r.at(key_node)
        entries = r.mapping(spec_node, f"block {name!r}")
        fields = {k: r.value(v) for k, _, v in entries}
        param_where = {k: r.at(kn) for k, kn, _ in entries}
        if "type" not in fields:
            raise GraphError(f"block {name!r} has no 'type' (one of: {valid_list(registry.names())})",
                             where, block=name)
        type_name = str(fields["type"])
        cls = registry.lookup(type_name)
        values = {k: v for k, v in fields.items() if k not in BLOCK_KEYS}
        for key in values:
            if cls is not None and key not in cls.params:
                valid = (*BLOCK_KEYS, *cls.params)
                raise GraphError(f"block {name!r} ({type_name}): unknown parameter {key!r}"
                                 f"{suggest(key, valid)} Valid parameters of {type_name}: "
                                 f"{valid_list(cls.params)} (and the block keys "
                                 f"{', '.join(BLOCK_KEYS)})", param_where[key], block=name)
        if cls is not None:
            values = graph_relative(values, cls, r.file)
        block = construct(type_name, cls, values, name, param_where.get("type", where),
                          param_where)
        try:
            graph.add(name, block, rate=fields.get("rate"), offset=fields.get("tick_offset", 0),
                      where=where)
        except GraphError as exc:
            key = {"offset": "tick_offset"}.get(exc.key, exc.key)
            raise GraphError(exc.message, param_where.get(key, where), block=name) from None


def graph_relative(values: dict[str, Any], cls: type, file: str | None) -> dict[str, Any]:
    """``values`` with each relative path of a ``file`` parameter made absolute from the
    folder of the graph file ``file`` (unchanged without a file: then they stay relative to
    the working directory).  Absolute, so a graph saved again (:func:`to_yaml`) and loaded
    elsewhere names the same files."""
    if file is None:
        return values
    folder = Path(file).parent
    return {k: os.path.abspath(folder / v)
            if cls.params[k].kind == "file" and isinstance(v, str) and not Path(v).is_absolute()
            else v for k, v in values.items()}


def load(path: str | Path) -> Graph:
    """Load a graph file (see :func:`loads`)."""
    return loads(read_text(path), str(path))


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def to_dict(graph: Graph) -> dict[str, Any]:
    """The graph as plain data in the YAML file schema."""
    blocks = {}
    for name, node in graph.nodes.items():
        entry: dict[str, Any] = {"type": type(node.block).__name__}
        if node.divider > 1:
            entry["rate"] = graph.rate / node.divider
        if node.offset:
            entry["tick_offset"] = node.offset
        entry.update({k: _plain(v) for k, v in node.block.values.items()})
        blocks[name] = entry
    data: dict[str, Any] = {"name": graph.name, "rate": graph.rate, "duration": graph.duration,
                            "seed": graph.seed, "solver": graph.solver, "events": graph.events,
                            "max_events": graph.max_events, "blocks": blocks,
                            "wires": [str(w) for w in graph.wires],
                            "record": [f"{b}.{p}" for b, p in graph.recorded]}
    if graph.hardware:
        data["hardware"] = graph.hardware
    return data


def to_yaml(graph: Graph) -> str:
    """The graph as YAML text that :func:`loads` reads back to the same graph."""
    # libyaml's emitter when PyYAML has it: the same text for every graph in graphs/, in a
    # quarter of the time (every recording stores its graph, so this is paid per run)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(to_dict(graph), Dumper=dumper, sort_keys=False, default_flow_style=None,
                     width=100)


def save(graph: Graph, path: str | Path) -> None:
    """Write the graph to a YAML file."""
    Path(path).write_text(to_yaml(graph))
