"""Rotary HIL: an angular encoder (pulses per revolution, X1/X2/X4), a generic-unit analog
scale, AI terminal configuration, and angle stroke and rad/s velocity limits that trip.

graphs/hil_rotary.yaml: a PD angle loop on a geared DC motor, a 500-line encoder on the
output shaft (2000 counts/rev in X4), stroke +-1.5 rad, speed limit 10 rad/s.
"""
import math
from pathlib import Path

import numpy as np
import pytest

import hapflow as hf
from hapflow.errors import GraphError
from hapflow.hil import safety
from hapflow.hil.backend import DaqError
from hapflow.hil.bindings import bind
from hapflow.hil.grpc_sim import serve
from hapflow.hil.nidaq import NidaqBackend
from hapflow.hil.runner import HilRunner
from hapflow.hil.simdaq import SimDaq
from hapflow.yamlio import loads

ROOT = Path(__file__).resolve().parents[1]
ROTARY = ROOT / "graphs" / "hil_rotary.yaml"
RATE = 1000.0
SINE = "amplitude: 1.0, frequency: 0.5"


def rotary(*changes):
    text = ROTARY.read_text()
    for old, new in changes:
        assert old in text
        text = text.replace(old, new)
    return loads(text, str(ROTARY))


def hil(graph, tmp_path, duration=2.0, backend=None):
    backend = backend or SimDaq(graph, seed=1, paced=False)
    result = HilRunner(graph, backend, safety.Policy()).run(duration, out=tmp_path / "run.h5")
    return result, hf.recorder.load(result.path)


def test_angular_encoder_binding_maps_pulses_per_rev_and_decoding():
    chans = {c.port: c for c in bind(rotary()).channels}
    enc = chans["motor.angle"]
    assert (enc.kind, enc.decoding, enc.pulses_per_rev, enc.unit) == ("ci_encoder", 4, 500, "rad")
    assert enc.scale == pytest.approx(2 * math.pi / 2000, rel=1e-15)
    x1 = {c.port: c for c in bind(rotary(("decoding: X4", "decoding: X1"))).channels}
    assert x1["motor.angle"].scale == pytest.approx(2 * math.pi / 500, rel=1e-15)
    assert chans["motor.current"].terminal == "DIFF" and chans["motor.current"].unit == "A"
    inverse = bind(rotary(("scale: 2.4,", "volts_per_unit: 0.5,"))).channels
    assert next(c for c in inverse if c.port == "motor.voltage").scale == 2.0


def test_a_rotary_position_loop_runs_in_hil_on_encoder_counts(tmp_path):
    """No trip; the angle tracks the 1 rad sine within 0.1 rad; every recorded angle is
    a whole number of counts of 2 pi / 2000 rad."""
    result, rec = hil(rotary(), tmp_path)
    assert result.event is None
    angle = rec["motor.angle"][:, 0]
    counts = angle / (2 * math.pi / 2000)
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    assert np.abs(rec["traj.y"][:, 0] - angle).max() < 0.1 and np.abs(angle).max() > 0.9
    assert np.abs(rec["motor.voltage"][:, 0]).max() > 1.0      # volts, through the 2.4 V/V scale


@pytest.mark.parametrize("decoding, per_count", [("X1", 500), ("X2", 1000)])
def test_x1_and_x2_decoding_count_cycles_and_half_cycles(tmp_path, decoding, per_count):
    """X1/X2: the card divides the quadrature edges down (floor), the binding's scale is
    per decoded count, and the loop still follows the X4 run within one coarse count.
    (One X1 count a sample is 12.6 rad/s: the speed limit is raised to 30 rad/s.)"""
    fast = ("velocity_limit: 10.0", "velocity_limit: 30.0")
    _, x4 = hil(rotary(fast), tmp_path, duration=1.0)
    result, rec = hil(rotary(fast, ("decoding: X4", f"decoding: {decoding}")), tmp_path,
                      duration=1.0)
    assert result.event is None
    q = 2 * math.pi / per_count
    angle = rec["motor.angle"][:, 0]
    np.testing.assert_allclose(angle / q, np.round(angle / q), atol=1e-9)
    assert np.unique(np.round(angle / q)).size > 50            # it moved over many counts
    assert np.abs(angle - x4["motor.angle"][:, 0]).max() < 2.5 * q


def test_a_rotary_position_loop_with_angle_limits_trips_correctly(tmp_path):
    """The 2 rad sine crosses the 1.5 rad stroke (a stroke-limit trip at the first sample
    beyond it); a 2.5 Hz sine asks 15.7 rad/s (a velocity trip at the first sample whose
    count difference exceeds 10 rad/s, the message in rad and rad/s)."""
    result, rec = hil(rotary((SINE, "amplitude: 2.0, frequency: 0.25")), tmp_path)
    ev = result.event
    angle = rec["motor.angle"][:, 0]
    assert ev.kind == "stroke limit" and angle[-1] > 1.5 >= np.abs(angle[:-1]).max()
    assert ev.tick == angle.size - 1 and "rad outside [-1.5, 1.5] rad" in ev.message
    assert rec["motor.voltage"][-1, 0] == 0.0

    result, rec = hil(rotary((SINE, "amplitude: 1.0, frequency: 2.5")), tmp_path)
    ev = result.event
    speed = np.abs(np.diff(rec["motor.angle"][:, 0])) * RATE
    assert ev.kind == "velocity limit" and ev.tick == int(np.argmax(speed > 10.0)) + 1
    assert ev.tick == rec.time.size - 1 and "more than 10 rad/s" in ev.message
    assert f"moved at {speed[ev.tick - 1]:.4g} rad/s between two samples" in ev.message
    assert np.abs(rec["motor.angle"][:, 0]).max() < 1.5         # not the stroke


@pytest.mark.parametrize("changes, words", [
    ((("pulses_per_rev: 500", "pulses_per_rev: 2.5"),), ["pulses_per_rev must be a whole"]),
    ((("decoding: X4", "decoding: X3"),), ["decoding must be X1, X2 or X4"]),
    ((("terminal: DIFF", "terminal: SINGLE"),),
     ["terminal must be one of DEFAULT, RSE, NRSE, DIFF, PSEUDO_DIFF"]),
    ((("range: [-5, 5],", "range: [-5, 5], terminal: RSE,"),),
     ["motor.voltage: terminal applies to analog inputs"]),
    ((("pulses_per_rev: 500", "meters_per_count: 0.001"),),
     ["meters_per_count is for ports in m", "'rad'"]),
    ((("scale: 1.0, terminal", "pulses_per_rev: 100, terminal"),),
     ["pulses_per_rev does not apply to a ai channel"]),
    ((("velocity_limit: 10.0", "velocity_limit: -1"),), ["must be > 0 rad/s"]),
])
def test_rotary_binding_errors_name_the_line_and_what_is_valid(changes, words):
    with pytest.raises(GraphError) as e:
        bind(rotary(*changes))
    text = str(e.value)
    assert text.startswith(f"{ROTARY}:3") and "hardware motor." in text, text
    for word in words:
        assert word in text, text


@pytest.mark.parametrize("change, message", [
    (("channel: Dev1/ai0, scale: 1.0, terminal: DIFF", "channel: Dev1/ai9, scale: 1.0, "
      "terminal: DIFF"), "ai9 is the negative input of ai1's differential pair"),
    (("terminal: DIFF", "terminal: PSEUDO_DIFF"), "has no PSEUDO_DIFF analog inputs"),
])
def test_arm_refuses_a_terminal_configuration_the_card_lacks(change, message):
    graph = rotary(change)
    backend = SimDaq(graph, paced=False)
    with pytest.raises(GraphError) as e:
        HilRunner(graph, backend).run(0.01)
    line = ROTARY.read_text().splitlines().index("    current: {channel: Dev1/ai0, scale: 1.0, "
                                                 "terminal: DIFF}") + 1
    assert str(e.value).startswith(f"{ROTARY}:{line}: hardware motor.current: terminal ")
    assert message in str(e.value) and backend.rig is None


def test_the_grpc_card_decodes_angular_encoders_and_checks_terminals(tmp_path):
    """Through nidaqmx and the simulated device server (add_ci_ang_encoder_chan in ticks,
    X2): the same recording as the simulated card; a pseudodifferential input on the
    PCIe-6351 is the driver's error naming the channel."""
    graph = rotary(("decoding: X4", "decoding: X2"))
    server, port = serve(graph, bind(graph).channels, seed=1, paced=False)
    relaxed = safety.Policy(max_overruns=2**62, max_lateness=1e9)
    try:
        result = HilRunner(graph, NidaqBackend(f"localhost:{port}"), relaxed).run(
            0.5, out=tmp_path / "grpc.h5")
        import nidaqmx
        from nidaqmx.constants import TerminalConfiguration
        with nidaqmx.Task(grpc_options=NidaqBackend(f"localhost:{port}")._options()) as task:
            with pytest.raises(nidaqmx.errors.DaqError) as e:
                task.ai_channels.add_ai_voltage_chan(
                    "Dev1/ai0", terminal_config=TerminalConfiguration.PSEUDO_DIFF)
            assert "PSEUDO_DIFF" in str(e.value) and "Dev1/ai0" in str(e.value)
    finally:
        server.stop(None)
    assert result.event is None
    direct = HilRunner(graph, SimDaq(graph, seed=1, paced=False), relaxed).run(
        0.5, out=tmp_path / "sim.h5")
    a, b = hf.recorder.load(result.path), hf.recorder.load(direct.path)
    for name in ["motor.angle", "motor.current", "motor.voltage"]:
        np.testing.assert_array_equal(a[name], b[name], name)
    q = 2 * math.pi / 1000
    assert np.unique(np.round(a["motor.angle"][:, 0] / q)).size > 50
