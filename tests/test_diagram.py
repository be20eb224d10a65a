"""The block diagram (``hapflow check --draw``): laid out by Graphviz, read back from its layout."""
import json
from pathlib import Path

import numpy as np
import pytest

from hapflow import diagram, yamlio
from hapflow.cli import main
from hapflow.errors import HapflowError
from hapflow.schedule import build_schedule

GRAPHS = sorted((Path(__file__).resolve().parents[1] / "graphs").glob("*.yaml"))
DEMO = Path(__file__).resolve().parents[1] / "graphs" / "demo_oscillator.yaml"

ACCUMULATOR = """
name: accumulator
rate: 100
duration: 1
blocks:
  step:  {type: Step, time: 0.1, final: 1.0, unit: N}
  sum:   {type: Sum}
  delay: {type: UnitDelay}
  gain:  {type: Gain, gain: 0.5}
wires:
  - step.y -> sum.u1
  - delay.y -> sum.u2
  - sum.y -> delay.u
  - sum.y -> gain.u
"""
"""y[k] = u[k] + y[k-1]: a feedback loop through a unit delay, and a wire out of it."""


def layout(path_or_text) -> dict:
    """Graphviz's layout of a graph's diagram (dot's JSON output: points, y up)."""
    graph = (yamlio.load(path_or_text) if isinstance(path_or_text, Path)
             else yamlio.loads(path_or_text))
    checked = graph.check()
    return json.loads(diagram.diagram(checked, build_schedule(checked)).pipe(format="json"))


def spline(pos: str) -> np.ndarray:
    """Points along an edge's cubic Bezier pieces (``pos`` as dot writes it)."""
    pts = np.array([[float(v) for v in p.split(",")] for p in pos.split()
                    if not p.startswith(("e,", "s,"))])
    t = np.linspace(0.0, 1.0, 40)[:, None]
    pieces = [(1 - t) ** 3 * p[0] + 3 * (1 - t) ** 2 * t * p[1] + 3 * (1 - t) * t ** 2 * p[2]
              + t ** 3 * p[3] for p in (pts[k:k + 4] for k in range(0, len(pts) - 3, 3))]
    return np.concatenate(pieces)


def wires_through_blocks(lay: dict) -> list[tuple[str, str, str]]:
    """(tail, head, block) for every wire that runs through a block's box, other than where it
    leaves its own block or enters the one it feeds."""
    boxes = {}
    for o in lay["objects"]:
        x, y = (float(v) for v in o["pos"].split(","))
        half_w, half_h = 36 * float(o["width"]), 36 * float(o["height"])
        boxes[o["_gvid"]] = (o["name"], x - half_w + 2, x + half_w - 2, y - half_h + 2,
                             y + half_h - 2)
    found = []
    for e in lay.get("edges", []):
        pts = spline(e["pos"])
        for gvid, (name, x0, x1, y0, y1) in boxes.items():
            inside = ((pts[:, 0] > x0) & (pts[:, 0] < x1) & (pts[:, 1] > y0) & (pts[:, 1] < y1))
            for end, at in ((e["tail"], pts[0]), (e["head"], pts[-1])):
                if gvid == end:
                    inside &= np.hypot(*(pts - at).T) > 15
            if inside.any():
                found.append((boxes[e["tail"]][0], boxes[e["head"]][0], name))
    return found


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_no_wire_runs_through_a_block(path):
    """(The matplotlib drawing this replaces ran the rig's wires through unrelated blocks;
    dot's splines with ``splines=line`` cross blocks in 12 of these graphs.)"""
    assert wires_through_blocks(layout(path)) == []


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_blocks_do_not_overlap_and_every_wire_has_an_arrowhead(path):
    """The matplotlib drawing this replaces overlapped labels and drew wires without
    arrowheads on the 8-block rig (issue 18): no two block boxes (their labels inside)
    share a point, and each wire draws a filled arrowhead polygon at its head (at its tail
    for a wire laid out against the flow, dir=back)."""
    lay = layout(path)
    boxes = []
    for o in lay["objects"]:
        x, y = (float(v) for v in o["pos"].split(","))
        half_w, half_h = 36 * float(o["width"]), 36 * float(o["height"])
        boxes.append((o["name"], x - half_w, x + half_w, y - half_h, y + half_h))
    overlaps = [(a[0], b[0]) for k, a in enumerate(boxes) for b in boxes[k + 1:]
                if a[1] < b[2] and b[1] < a[2] and a[3] < b[4] and b[3] < a[4]]
    assert overlaps == []
    for e in lay.get("edges", []):
        ends = e.get("_tdraw_" if e.get("dir") == "back" else "_hdraw_", [])
        assert any(op["op"] == "P" for op in ends), (e["tail"], e["head"])


def test_blocks_show_name_type_rate_and_ports_with_units():
    lay = layout(DEMO)
    labels = {o["name"]: o["label"] for o in lay["objects"]}
    assert "<B>plant</B>" in labels["plant"] and "MassSpringDamper" in labels["plant"]
    assert "force [N]" in labels["plant"] and "pos [m]" in labels["plant"]
    assert "acc [m/s^2]" in labels["plant"]
    assert "250 Hz" in labels["filter"] and "1000 Hz" in labels["plant"]
    assert "u [m]" in labels["filter"]             # a generic input shows its driver's unit
    assert "continuous state" in labels["plant"] and "discrete state" in labels["filter"]


def test_each_rate_has_its_own_fill_named_in_the_legend():
    lay = layout(DEMO)
    fill = {o["name"]: o["label"].split('BGCOLOR="')[1][:7] for o in lay["objects"]}
    assert fill["filter"] != fill["plant"] == fill["drive"] == fill["delay"]
    legend = lay["label"]
    assert f'BGCOLOR="{fill["filter"]}"' in legend and "250 Hz" in legend


def test_feedback_is_red_and_dashed_where_it_closes_through_a_delay():
    lay = layout(ACCUMULATOR)
    names = {o["_gvid"]: o["name"] for o in lay["objects"]}
    style = {}
    for e in lay["edges"]:
        ends = (names[e["tail"]], names[e["head"]])
        if e.get("dir") == "back":              # laid out against the flow: drawn back
            ends = ends[::-1]
        style[ends] = (e.get("color", ""), e.get("style", ""))
    assert style[("delay", "sum")] == (diagram.LOOP, "dashed")
    assert style[("sum", "delay")] == (diagram.LOOP, "")
    assert style[("step", "sum")][0] != diagram.LOOP and style[("sum", "gain")][0] != diagram.LOOP
    assert "feedback" in lay["label"]


def test_check_draws_png_pdf_and_svg(tmp_path, capsys):
    for suffix, magic in ((".png", b"\x89PNG"), (".pdf", b"%PDF"), (".svg", b"<?xml")):
        out = tmp_path / "more" / f"d{suffix}"              # a missing folder is made
        assert main(["check", str(DEMO), "--draw", str(out)]) == 0
        assert out.read_bytes().startswith(magic)
        assert f"diagram -> {out}" in capsys.readouterr().out


def test_an_unwritable_diagram_path_is_one_clear_error(capsys):
    assert main(["check", str(DEMO), "--draw", "/proc/diagram.png"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hapflow: error: cannot write the diagram to /proc/diagram.png")
    assert "Traceback" not in err


def test_without_graphviz_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))               # no 'dot' on it
    checked = yamlio.load(DEMO).check()
    with pytest.raises(HapflowError, match="install the 'graphviz' system package"):
        diagram.draw(checked, build_schedule(checked), tmp_path / "d.png")
