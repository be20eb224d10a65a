"""Graph checks: every bad graph is rejected with an error a user can act on.

Each test loads a small bad graph from ``tests/data/bad/`` and asserts that
the :class:`hapflow.GraphError` names the file and the exact line
(``str(err)`` starts with ``"<path>:<line>: "``), the offending block, port or
key, and what would be valid (closest-name suggestion, list of choices).
Checks that need the whole graph run at build time (:meth:`Graph.check`,
:class:`Simulation`); the rest run while the file is loaded.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import hapflow
from hapflow import GraphError, registry
from hapflow.blocks.arithmetic import Gain
from hapflow.blocks.mechanical import MassSpringDamper

BAD = Path(__file__).parent / "data" / "bad"

# "... 'x' Valid inputs: ..." reads as one run-on phrase: a list of valid names
# must follow a sentence end (". Valid ...") or a suggestion ("? Valid ...").
RUN_ON = re.compile(r"[\w'\"] (Valid|Known types|Blocks:)")


def bad(name: str) -> Path:
    """Path of the bad graph file ``tests/data/bad/<name>.yaml``."""
    path = BAD / f"{name}.yaml"
    assert path.is_file(), path
    return path


def line_of(path: Path, needle: str) -> int:
    """1-based number of the only line of ``path`` that contains ``needle``."""
    hits = [k + 1 for k, line in enumerate(path.read_text().splitlines()) if needle in line]
    assert len(hits) == 1, f"{needle!r} is on lines {hits} of {path}, expected exactly one"
    return hits[0]


def assert_located(err: GraphError, path: Path, line: int) -> str:
    """Check file:line prefix, the structured location and readability; return the message."""
    msg = str(err)
    assert msg.startswith(f"{path}:{line}: "), f"expected prefix '{path}:{line}: ' in:\n{msg}"
    assert err.where.file == str(path)
    assert err.where.line == line
    assert not RUN_ON.search(msg), f"run-on sentence before a list of valid names:\n{msg}"
    return msg


def load_error(name: str) -> tuple[Path, GraphError]:
    """The error raised while loading ``name`` (these checks belong to the loader)."""
    path = bad(name)
    with pytest.raises(GraphError) as info:
        hapflow.load(path)
    return path, info.value


def build_error(name: str) -> tuple[Path, GraphError]:
    """The error raised by loading and checking ``name``; compiling must raise it too."""
    path = bad(name)
    try:
        graph = hapflow.load(path)
    except GraphError as exc:  # a check may move to the loader; it must still be located
        return path, exc
    with pytest.raises(GraphError) as info:
        graph.check()
    with pytest.raises(GraphError) as again:
        hapflow.Simulation(hapflow.load(path))
    assert str(again.value) == str(info.value)
    return path, info.value


def valid(names) -> str:
    return ", ".join(sorted(names))


# ---------------------------------------------------------------- blocks and parameters
def test_unknown_block_type_suggests_closest_and_lists_types():
    path, err = load_error("unknown_type")
    msg = assert_located(err, path, line_of(path, "type: Gian"))
    assert "unknown block type 'Gian'" in msg
    assert "block 'gain'" in msg
    assert "did you mean 'Gain'?" in msg
    assert "Known types: " + valid(registry.names()) in msg
    assert err.block == "gain"


def test_unknown_parameter_suggests_closest_and_lists_parameters():
    path, err = load_error("unknown_param")
    msg = assert_located(err, path, line_of(path, "stifness:"))
    assert "block 'plant' (MassSpringDamper)" in msg
    assert "unknown parameter 'stifness'" in msg
    assert "did you mean 'stiffness'?" in msg
    assert "Valid parameters of MassSpringDamper: " + valid(MassSpringDamper.params) in msg
    assert err.block == "plant"


def test_unknown_block_setting_suggests_rate():
    """'rte' is a typo of the block setting 'rate', not of a parameter of Gain."""
    path, err = load_error("unknown_block_key")
    msg = assert_located(err, path, line_of(path, "rte:"))
    assert "'rte'" in msg
    assert "block 'ctrl'" in msg
    assert "did you mean 'rate'?" in msg
    for name in ("type", "rate", "tick_offset", *Gain.params):
        assert name in msg.split("'rte'", 1)[1], f"{name!r} not listed as valid in:\n{msg}"


def test_missing_required_parameter():
    path, err = load_error("missing_param")
    msg = assert_located(err, path, line_of(path, "type: TransferFunction"))
    assert "block 'filter' (TransferFunction)" in msg
    assert "missing required parameter 'num'" in msg
    assert "numerator coefficients" in msg
    assert err.block == "filter"


def test_parameter_of_wrong_type():
    path, err = load_error("bad_value_type")
    msg = assert_located(err, path, line_of(path, "mass: heavy"))
    assert "block 'plant' (MassSpringDamper)" in msg
    assert "parameter 'mass' [kg] must be a number" in msg
    assert "'heavy'" in msg
    assert err.block == "plant"


def test_parameter_out_of_range():
    path, err = load_error("bad_value_range")
    msg = assert_located(err, path, line_of(path, "mass: -0.5"))
    assert "block 'plant' (MassSpringDamper)" in msg
    assert "parameter 'mass' [kg] must be > 0" in msg
    assert "-0.5" in msg


@pytest.mark.parametrize("name, needle, param, shown", [
    ("bad_value_inf", "stiffness: .inf", "'stiffness' [N/m]", "inf"),
    ("bad_value_nan", "gain: .nan", "'gain'", "nan"),
])
def test_parameter_not_finite(name, needle, param, shown):
    path, err = load_error(name)
    msg = assert_located(err, path, line_of(path, needle))
    assert f"parameter {param} must be a finite number" in msg
    assert f"(got {shown})" in msg


def test_scientific_notation_is_a_number_not_a_string():
    """PyYAML's YAML 1.1 resolver reads 1e4 and 1.0e3 as strings; the number check
    must not reject what every scientist writes."""
    graph = hapflow.loads("rate: 1e3\nblocks:\n"
                          "  plant: {type: MassSpringDamper, stiffness: 1e4, damping: 2.5e-1}\n",
                          "sci.yaml")
    assert graph.rate == 1000.0
    assert graph.nodes["plant"].block.stiffness == 1e4
    assert graph.nodes["plant"].block.damping == 0.25


def test_unknown_unit_string():
    path, err = build_error("unknown_unit")
    msg = assert_located(err, path, line_of(path, "unit: meterz"))
    assert "src.y" in msg
    assert "unknown unit 'meterz'" in msg
    assert "m, kg, s" in msg  # the valid symbols


# ---------------------------------------------------------------- ports and wires
def test_unknown_port_suggests_closest():
    path, err = load_error("unknown_port")
    msg = assert_located(err, path, line_of(path, "plant.forse"))
    assert "block 'plant' (MassSpringDamper) has no input port 'forse'" in msg
    assert "did you mean 'force'?" in msg
    assert "Valid inputs: force" in msg
    assert (err.block, err.port) == ("plant", "forse")


def test_port_on_the_wrong_side_of_a_wire():
    path, err = load_error("port_wrong_side")
    msg = assert_located(err, path, line_of(path, "ctrl.y -> plant.pos"))
    assert "has no input port 'pos'" in msg
    assert "'pos' is an output" in msg
    assert "Valid inputs: force" in msg
    assert (err.block, err.port) == ("plant", "pos")


def test_shape_mismatch():
    path, err = build_error("shape_mismatch")
    msg = assert_located(err, path, line_of(path, "gain.y -> plant.force"))
    assert "'gain.y -> plant.force'" in msg
    assert "gain.y is (2,)" in msg
    assert "plant.force takes (1,)" in msg
    assert (err.block, err.port) == ("plant", "force")


def test_dtype_mismatch():
    path, err = build_error("dtype_mismatch")
    msg = assert_located(err, path, line_of(path, "ball.bounces -> gain.u"))
    assert "ball.bounces is (1,) i8" in msg
    assert "gain.u takes (1,) f8" in msg
    assert (err.block, err.port) == ("gain", "u")


def test_unit_mismatch_names_both_ends():
    path, err = build_error("unit_mismatch")
    msg = assert_located(err, path, line_of(path, "src.y -> plant.force"))
    assert "unit mismatch" in msg
    assert "src.y is in 'm'" in msg
    assert "plant.force expects 'N'" in msg
    assert (err.block, err.port) == ("plant", "force")


def test_input_without_driver():
    path, err = build_error("no_driver")
    msg = assert_located(err, path, line_of(path, "plant: {type: MassSpringDamper"))
    assert "input plant.force" in msg
    assert "has no driver" in msg
    assert "-> plant.force" in msg  # shows the wire to write
    assert (err.block, err.port) == ("plant", "force")


def test_input_with_two_drivers_names_both_wires():
    path, err = build_error("two_drivers")
    first = line_of(path, "push.y -> plant.force")
    msg = assert_located(err, path, line_of(path, "pull.y -> plant.force"))
    assert "input plant.force has two drivers" in msg
    assert "'push.y -> plant.force'" in msg
    assert "'pull.y -> plant.force'" in msg
    assert re.search(rf"(line |\.yaml:){first}\b", msg), msg  # where the first wire is
    assert "Sum" in msg
    assert (err.block, err.port) == ("plant", "force")


@pytest.mark.parametrize("name, wire, shown", [
    ("malformed_wire_arrow", "src.y to gain.u", "'src.y to gain.u'"),
    ("malformed_wire_ports", "src->gain", "'src'"),
])
def test_malformed_wire(name, wire, shown):
    path, err = load_error(name)
    msg = assert_located(err, path, line_of(path, wire))
    assert msg.startswith(f"{path}:{line_of(path, wire)}: malformed ")
    assert shown in msg
    assert "block." in msg  # shows the form to write


def test_recorded_signal_that_does_not_exist():
    path, err = load_error("unknown_record")
    msg = assert_located(err, path, line_of(path, "plant.position"))
    assert "block 'plant' (MassSpringDamper) has no output port 'position'" in msg
    assert "Valid outputs: " + valid(MassSpringDamper.outputs) in msg
    assert (err.block, err.port) == ("plant", "position")


# ---------------------------------------------------------------- block rate and offset
def test_rate_not_an_integer_divisor_lists_valid_rates():
    path, err = load_error("bad_rate")
    msg = assert_located(err, path, line_of(path, "rate: 300"))
    assert "block 'ctrl'" in msg
    assert "300 Hz is not an integer divisor of the base rate 1000 Hz" in msg
    assert re.search(r"valid rates include 1000, 500, .*250, 200, .*125", msg), msg


def test_suggested_rates_are_accepted_as_written():
    """Every rate the message offers must be accepted when typed as shown."""
    _, err = load_error("bad_rate")
    offered = re.search(r"valid rates include ([0-9., ]+)", str(err)).group(1)
    rates = [r for r in offered.rstrip(". ").split(", ")]
    assert len(rates) >= 4
    for text in rates:
        graph = hapflow.Graph(rate=1000.0)
        graph.add("g", Gain(), rate=float(text))  # raises if 'text' Hz is not valid


def test_continuous_block_cannot_run_slower():
    path, err = load_error("continuous_rate")
    msg = assert_located(err, path, line_of(path, "rate: 500"))
    assert "block 'plant' (MassSpringDamper)" in msg
    assert "must run at the base rate" in msg
    assert "remove its 'rate'" in msg


def test_block_offset_out_of_range():
    path, err = load_error("bad_offset")
    msg = assert_located(err, path, line_of(path, "tick_offset: 2"))
    assert "block 'ctrl'" in msg
    assert "tick offset must be an integer tick count in [0, 1], got 2" in msg


# ---------------------------------------------------------------- graph file
def test_duplicate_block_name_names_first_line():
    path, err = load_error("duplicate_block")
    msg = assert_located(err, path, line_of(path, "src:  {type: Step}"))
    assert "duplicate" in msg
    assert "'src'" in msg
    assert f"line {line_of(path, 'src:  {type: Sine')}" in msg


def test_yaml_syntax_error_tab():
    path, err = load_error("yaml_tab")
    msg = assert_located(err, path, line_of(path, "\tsrc:"))
    assert "YAML syntax error" in msg
    assert "'\\t'" in msg


def test_yaml_syntax_error_names_where_the_unclosed_mapping_starts():
    """The parser notices the missing '}' on the next line; the message must also
    point at the line with the '{' that is not closed (PyYAML's context_mark)."""
    path, err = load_error("yaml_unclosed")
    opened = line_of(path, "src:  {type: Sine")
    msg = assert_located(err, path, opened + 1)
    assert "YAML syntax error: expected ',' or '}'" in msg
    assert f"line {opened}" in msg


def test_empty_file():
    path, err = load_error("empty")
    msg = assert_located(err, path, 1)
    assert "empty" in msg
    assert "'rate'" in msg and "'blocks'" in msg


def test_graph_without_blocks():
    path, err = build_error("empty_blocks")
    msg = assert_located(err, path, line_of(path, "blocks: {}"))
    assert "empty" in msg
    assert "blocks:" in msg


def test_nonfinite_graph_setting():
    path, err = load_error("nonfinite_rate")
    msg = assert_located(err, path, line_of(path, "rate: .nan"))
    assert "graph 'rate' must be a finite number > 0 in Hz" in msg
    assert "nan" in msg


def test_unknown_top_level_key_suggests_closest():
    path, err = load_error("unknown_top_key")
    msg = assert_located(err, path, line_of(path, "wire:"))
    assert "unknown top-level key 'wire'" in msg
    assert "did you mean 'wires'?" in msg
    assert "Valid keys: name, rate, duration, seed, solver" in msg


def test_bad_solver_name():
    path, err = load_error("bad_solver")
    msg = assert_located(err, path, line_of(path, "solver: rk45"))
    assert "'rk45'" in msg
    assert "rk4, euler" in msg
    assert "did you mean 'rk4'?" in msg


def test_hardware_binding_names_unknown_block():
    path, err = load_error("unknown_hardware")
    msg = assert_located(err, path, line_of(path, "motr:"))
    assert "hardware binding names unknown block 'motr'" in msg
    assert "did you mean 'motor'?" in msg
    assert "motor, src" in msg
    assert err.block == "motr"


# ---------------------------------------------------------------- algebraic loops
def test_algebraic_loop_message_snapshot():
    path, err = build_error("algebraic_loop")
    assert str(err) == (
        f"{path}:11: algebraic loop through direct-feedthrough ports of sum, plant, gain:\n"
        "  sum.y is wired to plant.force (line 11),\n"
        "  which feeds through to plant.acc,\n"
        "  which is wired to gain.u (line 12),\n"
        "  which feeds through to gain.y,\n"
        "  which is wired to sum.u2 (line 13),\n"
        "  which feeds through to sum.y.\n"
        "Break it with a unit delay (a UnitDelay block) on one of these wires, "
        "or use a block whose output depends on state only.")
    # the wire lines quoted in the snapshot are those of the file
    assert line_of(path, "sum.y -> plant.force") == 11
    assert line_of(path, "plant.acc -> gain.u") == 12
    assert line_of(path, "gain.y -> sum.u2") == 13
    assert (err.block, err.port) == ("sum", "y")


def test_algebraic_loop_broken_by_unit_delay_runs():
    graph = hapflow.load(bad("algebraic_loop_broken"))
    graph.check()
    result = hapflow.Simulation(graph).run(0.2, progress=False)
    n = int(round(0.2 * graph.rate))
    gain_y, delay_y = result["gain.y"][:, 0], result["delay.y"][:, 0]
    assert gain_y.shape == delay_y.shape == (n,)
    assert delay_y[0] == 0.0                       # the delay's initial output
    np.testing.assert_array_equal(delay_y[1:], gain_y[:-1])  # one tick late
    pos = result["plant.pos"][:, 0]
    assert np.all(np.isfinite(pos))
    assert np.max(np.abs(pos)) > 1e-5              # the plant moved


def test_recording_an_input_points_to_its_driver():
    g = hapflow.Graph()
    g.add("m", hapflow.blocks.MassSpringDamper())
    with pytest.raises(GraphError, match="'force' is an input, record the output that drives it"):
        g.record("m.force")
