"""The hardware: section: parsing, validation errors, and the controller/plant split."""
from pathlib import Path

import pytest

from hapflow.errors import GraphError
from hapflow.hil.backend import Channel
from hapflow.hil.bindings import bind
from hapflow.hil.split import controller_graph, plant_blocks, plant_graph
from hapflow.yamlio import loads

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "graphs" / "colton2005_sweep.yaml"
TESTBED = ROOT / "graphs" / "hil_testbed.yaml"


def bed_text(hardware: str) -> str:
    """The test-bed graph text with its hardware: section replaced."""
    text = TESTBED.read_text()
    return text[:text.index("hardware:")] + "hardware:\n" + hardware


def error(hardware: str) -> GraphError:
    with pytest.raises(GraphError) as info:
        bind(loads(bed_text(hardware), "bed.yaml"))
    return info.value


def test_colton_bindings_channels_scales_and_limits():
    from hapflow.yamlio import load
    b = bind(load(SWEEP))
    by_port = {c.port: c for c in b.channels}
    assert [c.kind for c in b.channels] == ["ai", "ai", "ci_encoder", "ao", "do"]
    assert by_port["motor.force_cmd"] == Channel("motor.force_cmd", "ao", "Dev1/ao0", 6.0, 0.0,
                                                 -10.0, 10.0, "N")
    assert by_port["head.force"].kind == "ai" and by_port["head.force"].scale == 10.0
    assert by_port["head.accel"].unit == "m/s^2" and by_port["head.accel"].scale == 30.0
    assert by_port["enc.pos"].scale == 5e-6 and by_port["enc.pos"].unit == "m"
    assert by_port["motor.enable"].physical == "Dev1/port0/line0"
    assert b.limits == {"enc.pos": (-0.05, 0.05)}
    assert b.velocity_limits == {"enc.pos": 1.0}
    assert b.where["head.accel"].line == SWEEP.read_text().splitlines().index(
        "    accel: {channel: Dev1/ai1, meters_per_second2_per_volt: 30.0}") + 1


def test_split_of_the_identification_graph():
    from hapflow.yamlio import load
    g = load(SWEEP)
    chs = bind(g).channels
    assert plant_blocks(g, chs) == ["motor", "dev", "enc", "head"]
    ctrl = controller_graph(g, chs)
    assert set(ctrl.graph.nodes) == {"traj", "pid", "comp", "vel_est", "card_head_force",
                                     "card_head_accel", "card_enc_pos", "card_motor_force_cmd"}
    assert ctrl.names["card_enc_pos.y"] == "enc.pos"
    assert "dev.pos" in ctrl.dropped and "enc.pos" not in ctrl.dropped
    wires = {str(w) for w in ctrl.graph.wires}
    assert "card_enc_pos.y -> pid.meas_pos" in wires and "comp.y -> card_motor_force_cmd.u" in wires
    ctrl.graph.check()
    plant = plant_graph(g, chs)
    assert "card_motor_force_cmd.y -> motor.force_cmd" in {str(w) for w in plant.graph.wires}
    plant.graph.check()


@pytest.mark.parametrize("hardware, words", [
    ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0}\n"
     "  enc: {channel: Dev1/ctr0, meters_per_count: 5.0e-6}\n"
     "  head: {forse: {channel: Dev1/ai0, scale: 10.0}}\n",
     ["bed.yaml:34", "'forse'", "did you mean 'force'?", "Ports: accel, force;"]),
    ("  motor: {port: force_cmd, channel: Dev1/ai0, newtons_per_volt: 4.0}\n",
     ["motor.force_cmd", "Dev1/ai0 is a ai channel", "analog output such as Dev1/ao0"]),
    ("  motor: {channel: ao0, newtons_per_volt: 4.0}\n",
     ["'ao0' is not a physical channel", "DEVICE/aoN"]),
    ("  motor: {channel: Dev1/ao0}\n", ["give exactly one scale", "newtons_per_volt"]),
    ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0, scale: 4.0}\n",
     ["exactly one scale", "got scale, newtons_per_volt"]),
    ("  motor: {channel: Dev1/ao0, meters_per_volt: 4.0}\n",
     ["meters_per_volt is for ports in m", "'N'"]),
    ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0, range: [-12, 12]}\n",
     ["exceeds the card's +-10 V"]),
    ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0, range: [5, -5]}\n",
     ["low < high"]),
    ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0, gain: 2}\n",
     ["unknown key 'gain'", "Valid keys"]),
    ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0, enable: Dev1/ao1}\n",
     ["enable must be a digital output line", "Dev1/port0/line0"]),
    ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0, velocity_limit: 1}\n",
     ["velocity_limit applies to a measured position"]),
    ("  enc: {channel: Dev1/ctr0, meters_per_count: 1.0e-6}\n",
     ["meters_per_count 1e-06 m differs from the resolution 5e-06 m", "'enc' (Encoder)"]),
    ("  enc: {channel: Dev1/ctr0, meters_per_count: 5.0e-6, decoding: X3}\n",
     ["decoding must be X1, X2 or X4"]),
    ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0, decoding: X2}\n",
     ["decoding applies to encoder channels"]),
    ("  enc: {channel: Dev1/ctr0, newtons_per_volt: 5.0e-6}\n",
     ["newtons_per_volt does not apply to a ci_encoder channel"]),
    ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0}\n"
     "  head: {force: {channel: Dev1/ao0, scale: 10.0}}\n",
     ["channel Dev1/ao0 is bound twice", "motor.force_cmd", "head.force"]),
])
def test_binding_errors_name_file_line_block_port_and_what_is_valid(hardware, words):
    text = str(error(hardware))
    for word in words:
        assert word in text, text


@pytest.mark.parametrize("spec, port, what", [
    ("  head: {force: {channel: Dev1/ai0, newtons_per_volt: 10.0, velocity_limit: 1}}\n",
     "head.force", "a measurement in N"),
    ("  head: {accel: {channel: Dev1/ai1, scale: 30.0, velocity_limit: 1}}\n",
     "head.accel", "a measurement in m/s^2"),
    ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0, velocity_limit: 1}\n",
     "motor.force_cmd", "a command in N")])
def test_velocity_limit_only_on_a_position(spec, port, what):
    # a force's velocity limit would trip on N/s, a unit nobody meant (it was accepted)
    err = error(spec)
    assert str(err) == (f"bed.yaml:32: hardware {port}: velocity_limit applies to a measured "
                        f"position (a port in m, rad, count: the limit is in that unit per s), "
                        f"not to {port} ({what})")
    assert (err.block, err.port) == tuple(port.split("."))


def test_short_form_needs_one_matching_port():
    # LinearMotor with end stops has three scalar float inputs; the N alias picks force_cmd
    g = loads(bed_text("  motor: {channel: Dev1/ao0, scale: 4.0}\n").replace(
        "type: LinearMotor, bandwidth: 25", "type: LinearMotor, end_stops: true, bandwidth: 25")
        .replace("  - motor.force -> load.force", "  - motor.force -> load.force\n"
                 "  - load.pos -> motor.pos\n  - load.vel -> motor.vel"), "bed.yaml")
    with pytest.raises(GraphError, match=r"has 3 such inputs \(commands\) \(force_cmd, pos, vel\); add 'port: NAME'"):
        bind(g)


def test_no_hardware_section_is_an_error():
    text = TESTBED.read_text()
    g = loads(text[:text.index("hardware:")], "bed.yaml")
    with pytest.raises(GraphError, match="no 'hardware:' section"):
        bind(g)


def test_block_on_both_sides_of_the_card_is_an_error():
    hardware = ("  motor: {channel: Dev1/ao0, newtons_per_volt: 4.0}\n"
                "  enc: {channel: Dev1/ctr0, meters_per_count: 5.0e-6}\n")
    # the PID reads the load's true position (not through the card) and drives the card
    g = loads(bed_text(hardware).replace("  - enc.pos -> pid.meas_pos", "  - load.pos -> pid.meas_pos"),
              "bed.yaml")
    with pytest.raises(GraphError, match=r"either in the controller or in the plant.*"
                                         r"\['head', 'load', 'pid', 'traj'\] drive the card output "
                                         r"motor.force_cmd .* unbound hardware port motor.force"):
        plant_blocks(g, bind(g).channels)
