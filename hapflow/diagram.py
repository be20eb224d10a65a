"""The block diagram of a checked graph, laid out by Graphviz's ``dot``.

Each block is a box with its name, type, rate and kind of state, its inputs
on the left and its outputs on the right, every port with its unit; wires
run from port to port, left to right along the signal flow.  Blocks are
filled by rate (the legend names each fill).  The wires of a feedback loop
are red; the one leaving an output that depends on state only (a unit delay,
an integrator, a filter's state: where the loop is not algebraic) is dashed
and runs back against the flow, so a reader sees which state closes each loop.
"""
from __future__ import annotations

from html import escape
from pathlib import Path

import graphviz
import networkx as nx

from .errors import HapflowError
from .graph import Checked
from .schedule import Schedule

RATE_FILLS = ("#dbe9f6", "#fde4c8", "#d7efd2", "#ebdff3", "#f8d6d6", "#f3efc4", "#d5efef")
"""Fill of the blocks of the fastest rate, the next slower one, and so on (then again)."""
LOOP = "#c0392b"
"""Colour of the wires of a feedback loop."""
FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg", ".jpg": "jpg", ".jpeg": "jpg"}
"""Output formats ``dot`` writes, by file suffix."""


def diagram(checked: Checked, schedule: Schedule) -> graphviz.Digraph:
    """The block diagram of ``checked`` as a Graphviz graph (see the module docstring)."""
    graph = checked.graph
    rates = {name: graph.rate / node.divider for name, node in graph.nodes.items()}
    fills = {rate: RATE_FILLS[k % len(RATE_FILLS)]
             for k, rate in enumerate(sorted(set(rates.values()), reverse=True))}
    loops = _loop_wires(checked)
    dot = graphviz.Digraph(graph.name, graph_attr=dict(
        rankdir="LR", splines="spline", nodesep="0.35", ranksep="0.7", fontname="Helvetica",
        labelloc="b", label=_legend(graph.name, graph.rate, fills, bool(loops))),
        node_attr=dict(shape="plain", fontname="Helvetica", fontsize="10"),
        edge_attr=dict(arrowsize="0.7", color="#404040"))
    for name in graph.nodes:
        dot.node(name, _box(checked, name, rates[name], fills[rates[name]],
                            _tags(schedule, name)))
    for w in graph.wires:
        src, dst = graph.nodes[w.src[0]].block, graph.nodes[w.dst[0]].block
        tail = f"{w.src[0]}:o{list(src.outputs).index(w.src[1])}:e"
        head = f"{w.dst[0]}:i{list(dst.inputs).index(w.dst[1])}:w"
        if w not in loops:
            dot.edge(tail, head)
        elif src.outputs[w.src[1]].depends != "state":
            dot.edge(tail, head, color=LOOP, penwidth="1.4")
        else:     # where the loop closes: laid out backwards, so the rest flows left to right
            dot.edge(head, tail, dir="back", color=LOOP, penwidth="1.4", style="dashed")
    return dot


def draw(checked: Checked, schedule: Schedule, path: str | Path) -> None:
    """Write the block diagram of ``checked`` to ``path`` (PNG, PDF, SVG or JPEG by suffix).

    Raises
    ------
    HapflowError
        When the suffix is not one of those, Graphviz's ``dot`` is not installed,
        or the file cannot be written.
    """
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise HapflowError(f"{path}: a diagram is saved as {', '.join(FORMATS)}; "
                           "end the name with one")
    try:
        image = diagram(checked, schedule).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise HapflowError("drawing a diagram needs Graphviz's 'dot' program: install the "
                           "'graphviz' system package (apt-get install graphviz)") from None
    except graphviz.CalledProcessError as exc:
        raise HapflowError(f"Graphviz could not lay out {checked.graph.name!r}: "
                           f"{exc.stderr.decode(errors='replace').strip()}") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(image)
    except OSError as exc:
        raise HapflowError(f"cannot write the diagram to {path}: {exc.strerror or exc}") from None


def _box(checked: Checked, name: str, rate: float, fill: str, tags: list[str]) -> str:
    """HTML label of one block: name, type and rate above, inputs left, outputs right."""
    block = checked.graph.nodes[name].block
    inputs = [_cell(f"i{k}", "LEFT", port, _input_unit(checked, name, port))
              for k, port in enumerate(block.inputs)]
    outputs = [_cell(f"o{k}", "RIGHT", port, checked.units[(name, port)])
               for k, port in enumerate(block.outputs)]
    blank = '<TD BORDER="0"></TD>'
    rows = [f"<TR>{inputs[k] if k < len(inputs) else blank}"
            f"{outputs[k] if k < len(outputs) else blank}</TR>"
            for k in range(max(len(inputs), len(outputs)))]
    head = (f'<TR><TD COLSPAN="2"><B>{escape(name)}</B><BR/>{escape(type(block).__name__)}'
            f'<BR/><FONT POINT-SIZE="8">{"; ".join([f"{rate:g} Hz", *tags])}</FONT></TD></TR>')
    return (f'<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" '
            f'BGCOLOR="{fill}">{head}{"".join(rows)}</TABLE>>')


def _cell(port_id: str, align: str, port: str, unit: str | None) -> str:
    """A port's cell: its name and unit (``[-]`` dimensionless, none for any unit)."""
    shown = "" if unit is None or unit.startswith("=") else f" [{escape(unit) or '-'}]"
    return f'<TD PORT="{port_id}" ALIGN="{align}">{escape(port)}{shown}</TD>'


def _input_unit(checked: Checked, name: str, port: str) -> str | None:
    """The unit an input carries: its declared one, else its driver's."""
    declared = checked.graph.nodes[name].block.inputs[port].unit
    if declared is not None and not declared.startswith("="):
        return declared
    wire = checked.drivers.get((name, port))
    return checked.units[wire.src] if wire is not None else declared


def _tags(schedule: Schedule, name: str) -> list[str]:
    """What kind of state ``name`` keeps, as the ``check`` listing calls it."""
    tags = []
    if name in schedule.continuous:
        tags.append("continuous state")
    if name in schedule.updates:
        tags.append("discrete state")
    if name in schedule.hybrid:
        tags.append("events")
    return tags


def _loop_wires(checked: Checked) -> set:
    """Wires on a feedback loop: the block they feed reaches back to the block feeding them."""
    blocks = nx.DiGraph()
    blocks.add_edges_from((w.src[0], w.dst[0]) for w in checked.graph.wires)
    component = {member: k for k, members in enumerate(nx.strongly_connected_components(blocks))
                 for member in members}
    return {w for w in checked.graph.wires if component[w.src[0]] == component[w.dst[0]]}


def _legend(name: str, base: float, fills: dict[float, str], loops: bool) -> str:
    """The graph's label: its name and base rate, the fill of each rate, and what red and
    dashed wires mean when there are any."""
    swatches = "".join(f'<TD BGCOLOR="{fill}" BORDER="1">{rate:g} Hz</TD>'
                       for rate, fill in fills.items())
    key = (f'<TD><FONT COLOR="{LOOP}">red: feedback loop; dashed: taken from state '
           f'(where the loop closes)</FONT></TD>' if loops else "")
    return (f'<<TABLE BORDER="0" CELLSPACING="4"><TR><TD><B>{escape(name)}</B> '
            f'(base rate {base:g} Hz)</TD>{swatches}{key}</TR></TABLE>>')
