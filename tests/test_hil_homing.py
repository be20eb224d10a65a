"""Tare and homing in the arm sequence: stroke limits relative to a defined home.

tests/data/hil_homing.yaml: the test bed with end stops at +-20 mm, switched on with the
carriage 6 mm off centre and a load cell reading 0.8 N at rest.  Its encoder counts from 0
where the carriage sits when the card starts (as a DAQmx counter with initial count 0
does), so without homing its +12 mm stroke limit would sit at +18 mm of the mechanics.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import hapflow as hf
from hapflow.cli import main
from hapflow.errors import GraphError
from hapflow.hil.bindings import bind
from hapflow.hil.grpc_sim import serve_card, sim_card
from hapflow.hil.nidaq import NidaqBackend
from hapflow.hil.runner import HilRunner
from hapflow.hil.safety import Policy
from hapflow.hil.simdaq import SimDaq
from hapflow.yamlio import loads

from .children import expect_line

HOMING = Path(__file__).parent / "data" / "hil_homing.yaml"
ROOT = Path(__file__).resolve().parents[1]
STOP, LIMIT, POWER_ON = -0.02, 0.012, 0.006


def graph(*changes):
    text = HOMING.read_text()
    for old, new in changes:
        assert old in text
        text = text.replace(old, new)
    return loads(text, str(HOMING))


class KeptSimDaq(SimDaq):
    """The simulated card, keeping its rig (the plant's true state) after the run."""

    def close(self):
        self.kept = self.rig
        self.outputs_at_close = (self._ao.copy(), self._do.copy())
        super().close()


@pytest.fixture(params=["sim", "nidaqmx"])
def card(request):
    """(runner for a graph, the rig behind it after the run) on either simulated card; the
    free-running gRPC card does not run in real time, so its loop's timing policy is off."""
    servers = []

    def make(g):
        if request.param == "sim":
            be = KeptSimDaq(g, paced=False)
            return HilRunner(g, be), lambda: be.kept
        sim = sim_card(g, bind(g).channels, seed=g.seed, paced=False)
        server, port = serve_card(sim)
        servers.append(server)
        relaxed = Policy(max_overruns=2**62, max_lateness=1e9)
        return HilRunner(g, NidaqBackend(f"localhost:{port}"), relaxed), lambda: sim._rig

    yield make
    for s in servers:
        s.stop(None)


def test_homed_stroke_limit_trips_where_the_mechanics_are(card, tmp_path):
    g = graph()
    runner, rig = card(g)
    result = runner.run(1.0, out=tmp_path / "run.h5")
    rec = hf.recorder.load(result.path)
    # tick 0 starts at the stop, which reads the stop's position (2 counts of still-window
    # and 5 um of stop compliance under the 1 N drive)
    assert abs(rec["enc.pos"][0] - STOP) < 2.5e-5
    # the trajectory (from -20 mm to +14 mm) crosses the +12 mm limit at 0.21 s; the trip
    # comes where the carriage truly is at +12 mm (one edge of 0.2 mm later at most);
    # counted from the power-on position it would be at +18 mm
    assert result.event.kind == "stroke limit", result.event
    assert 0.19 < result.event.time < 0.24
    assert abs(rig().signal("load.pos") - LIMIT) < 5e-4
    log = rec.attrs["arm_log"]
    assert "home enc.pos (Dev1/ctr0): motor.force_cmd at -1 N" in log
    moved = float(log.split("still at count ")[1].split("(")[1].split(" m from")[0])
    assert abs(moved - (STOP - POWER_ON)) < 2.5e-5           # it drove from +6 to -20 mm


def test_tare_zeroes_the_force_reading_at_rest(card, tmp_path):
    g = graph()
    runner, _ = card(g)
    result = runner.run(0.1, out=tmp_path / "run.h5")
    rec = hf.recorder.load(result.path)
    offset = float(rec.attrs["arm_log"].split("offset ")[1].split(" N")[0])
    assert abs(offset + 0.8) < 2e-3               # the sensor's 0.8 N at rest, noise 1 mN rms
    # at tick 0 the carriage rests on the stop (the motor's -1 N lag against the stop's
    # reaction): the load cell reads about 0, not the 0.8 N it read before the tare
    assert abs(rec["head.force"][0]) < 0.05, rec["head.force"][:3]


@pytest.mark.parametrize("change, words", [
    (("pos_min: -0.02", "pos_min: -0.2"),
     "homing enc.pos: moved 0.03305 m driving motor.force_cmd at -1 N without reaching a stop "
     "(travel 0.033 m)"),
    (("drive: -1.0", "drive: -10"), "more than its velocity limit 0.5 m/s"),
])
def test_homing_that_finds_no_stop_ends_safe_before_tick_0(change, words):
    g = graph(change)
    backend = KeptSimDaq(g, paced=False)
    result = HilRunner(g, backend).run(1.0)
    assert result.event.kind == "arm" and words in result.event.message, result.event
    assert result.ticks == 0
    ao, do = backend.outputs_at_close
    assert ao.tolist() == [0.0] and do.tolist() == [False]      # 0 V, amplifier disabled


@pytest.mark.parametrize("change, message", [
    (("home: {command: motor, drive: -1.0, at: -0.02}", "home: {command: mot, drive: -1.0}"),
     "home command 'mot' is not one bound analog output; bound: motor.force_cmd"),
    (("drive: -1.0", "drive: -20"), "home drive -20 N must be nonzero (its sign points to the "
                                    "stop) and within motor.force_cmd's limit [-15, 15] N"),
    (("at: -0.02", "at: -0.03"), "home at -0.03 m is outside the stroke limit [-0.021, 0.012] m"),
    (("at: -0.02}", "at: -0.02, speed: 1}"), "home: unknown key 'speed'"),
    (("at: -0.02}", "to: index}"), "home to: index needs the encoder's Z index reset: add "
                                   "z_index (the position the index reads, in m)"),
    (("home: {command: motor, drive: -1.0, at: -0.02}",
      "z_index: 0.001, home: {command: motor, drive: -1.0, at: -0.02, to: index}"),
     "home to: index takes the position from z_index (0.001 m); 'at' is the stop's position"),
    (("at: -0.02}", "to: switch}"), "home to must be 'stop' (the end stop, where it stands "
                                    "still, reads 'at') or 'index'"),
    (("limit: [-0.021, 0.012],", ""), "home needs 'travel'"),
    (("drive: -1.0, ", ""), "home: 'drive' is missing"),
    (("tare: 0.05", "tare: 0"), "tare is the time in s to average the input at arm time"),
    (("velocity_limit: 0.5,", "velocity_limit: 0.5, tare: 0.1,"),
     "hardware enc.pos: tare applies to analog inputs"),
    (("newtons_per_volt: 10.0, tare: 0.05", "newtons_per_volt: 10.0, home: {}"),
     "hardware head.force: home applies to encoders"),
])
def test_home_and_tare_bindings_refused_with_file_line_and_what_is_valid(change, message):
    with pytest.raises(GraphError) as e:
        bind(graph(change))
    assert message in str(e.value) and str(e.value).startswith(f"{HOMING}:"), str(e.value)


INDEX = (("at: -0.02}", "to: index}"), ("velocity_limit: 0.5,", "velocity_limit: 0.5, z_index: 0.0,"),
         ("drive: -1.0", "drive: -0.25"),
         ("amplitude: 0.017, offset: -0.003", "amplitude: 0.00965, offset: 0.00435"))
"""Homed to the encoder's index, at the plant's position 0, which reads 0, at -0.25 N (0.05
m/s: after the index the carriage coasts about 5.3 mm, where the trajectory starts)."""


def test_homed_to_the_index_the_stroke_limit_trips_where_the_mechanics_are(card, tmp_path):
    """Driven from +6 mm towards the -20 mm stop, the carriage meets the index at 0 after
    6 mm: homing stops driving there (it coasts to rest, counted) and the Z reset made the
    index read 0, so the +12 mm stroke limit trips where the carriage is at +12 mm.
    Without homing (the count from power-on) it would trip at +18 mm."""
    runner, rig = card(graph(*INDEX))
    result = runner.run(1.0, out=tmp_path / "run.h5")
    assert result.event.kind == "stroke limit", result.event
    assert abs(rig().signal("load.pos") - LIMIT) < 5e-4
    log = hf.recorder.load(result.path).attrs["arm_log"]
    assert "home enc.pos (Dev1/ctr0): first index pulse driving motor.force_cmd at -0.25 N" in log
    moved = float(log.split(" s and ")[1].split(" m from")[0])
    assert abs(moved - (0.0 - POWER_ON)) < 1e-4, log      # one edge at 0.05 m/s before it
    rest = float(log.split("still at count ")[1].split(" = ")[1].split(" m")[0])
    assert -0.007 < rest < -0.004, log                   # it coasted about 5.3 mm


ROTARY = ROOT / "graphs" / "hil_rotary.yaml"
Z_ANGLE, ANGLE_LIMIT, ANGLE_ON = 0.25, 1.5, 0.5


def test_rotary_encoder_homed_to_its_index_trips_the_angle_limit_where_the_shaft_is(card,
                                                                                    tmp_path):
    """graphs/hil_rotary.yaml switched on with the shaft at 0.5 rad and homed to the Z
    index of its 500-line encoder (X4: 2000 counts of 2 pi / 2000 rad a revolution; one
    index a revolution, at the shaft's 0), which reads z_index 0.25 rad (count 80): driven
    at -0.5 V the shaft meets the index after -0.5 rad; it then coasts to rest about 0
    (torsion spring), and the angle reads the shaft's plus 0.25 rad, so the 1.5 rad stroke
    limit trips with the shaft at 1.25 rad.  Counted from power-on it would trip at 2 rad;
    with the angle per count of X1 cycles (2 pi / 500) the index moved 2 rad."""
    text = ROTARY.read_text()
    for old, new in [
            ("inductance: 2.0e-3}", f"inductance: 2.0e-3, angle0: {ANGLE_ON}}}"),
            ("velocity_limit: 10.0}",
             f"velocity_limit: 10.0, z_index: {Z_ANGLE}, "
             "home: {command: motor, drive: -0.5, to: index}}"),
            ("amplitude: 1.0, frequency: 0.5", f"amplitude: 2.0, frequency: 0.25, offset: {Z_ANGLE}")]:
        assert old in text
        text = text.replace(old, new)
    runner, rig = card(loads(text, str(ROTARY)))
    result = runner.run(2.0, out=tmp_path / "run.h5")
    assert result.event.kind == "stroke limit", result.event
    rec = hf.recorder.load(result.path)
    log = rec.attrs["arm_log"]
    assert "home motor.angle (Dev1/ctr0): first index pulse driving motor.voltage at -0.5 V" in log
    moved = float(log.split(" s and ")[1].split(" rad from")[0])
    assert abs(moved - (0.0 - ANGLE_ON)) < 5e-3, log     # a count and an edge at ~1 rad/s
    assert "the Z reset made it read 0.251327 rad (count 80)" in log, log   # 80 * 2 pi / 2000
    assert abs(rec["motor.angle"][0, 0] - Z_ANGLE) < 0.02      # at rest near the index
    assert rec["motor.angle"][-1, 0] > ANGLE_LIMIT >= np.abs(rec["motor.angle"][:-1, 0]).max()
    # the shaft where the reading crossed 1.5 rad: within a count and an edge at ~2.5 rad/s
    assert abs(rig().signal("motor.angle") - (ANGLE_LIMIT - 0.251327)) < 8e-3


def test_homing_to_an_index_behind_the_carriage_fails_at_the_stop_safe_before_tick_0():
    """Switched on at -6 mm, driven towards -20 mm: the index at 0 is behind the carriage,
    which stands still at the stop without a Z pulse; the run ends before tick 0, safe."""
    g = graph(*INDEX, ("x0: 0.006", "x0: -0.006"))
    backend = KeptSimDaq(g, paced=False)
    result = HilRunner(g, backend).run(1.0)
    assert result.event.kind == "arm" and result.ticks == 0, result.event
    assert ("homing enc.pos: reached a stop driving motor.force_cmd at -0.25 N (-0.014" in
            result.event.message and "without an index pulse" in result.event.message)
    ao, do = backend.outputs_at_close
    assert ao.tolist() == [0.0] and do.tolist() == [False]


def test_hil_arm_names_the_home_and_tare_it_will_do(capsys):
    assert main(["hil", "arm", str(HOMING)]) == 0
    out = capsys.readouterr().out
    assert ("home enc.pos: at start, motor.force_cmd at -1 until still for 0.1 s (at most 10 s, "
            "0.033 of travel); that position reads -0.02") in out
    assert "tare head.force: at start, averaged over 0.05 s with the outputs safe" in out


def test_ctrl_c_while_homing_exits_130_safe_with_the_recording(tmp_path, spawn):
    """A real SIGINT to a ``hapflow run --mode hil`` child while it homes (a slow drive: the
    carriage needs about 2.6 s to the stop) against the paced simulated gRPC card served
    here: exit 130 as for a Ctrl-C during the run, the card's amplifier disabled and its
    output at 0 V, and the recording says why, with the tare done before it."""
    text = HOMING.read_text().replace("drive: -1.0", "drive: -0.05, timeout: 60")
    path = tmp_path / "slow_homing.yaml"
    path.write_text(text)
    g = loads(text, str(path))
    card = sim_card(g, bind(g).channels, seed=g.seed, paced=True)
    server, port = serve_card(card)
    out = tmp_path / "run.h5"
    try:
        proc = spawn([sys.executable, "-m", "hapflow.cli", "run", str(path), "--mode", "hil",
                      "--daq", "nidaqmx", "--grpc", f"localhost:{port}", "--out", str(out),
                      "--max-lateness", "1", "--max-overruns", "100000"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        expect_line(proc, "real time: hil-homing")
        end = time.monotonic() + 60
        while not card.do[0] and time.monotonic() < end:    # homing enables the amplifier
            time.sleep(0.002)
        assert card.do[0] and card.ao[0] != 0.0, proc.stderr.read()
        time.sleep(0.2)
        assert card.do[0], "homing ended before the signal"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "SIGINT: received SIGINT while homing enc.pos (arm edge" in err, err
        assert not card.do[0] and card.ao[0] == 0.0        # amplifier off, 0 V
    finally:
        server.stop(None)
    rec = hf.recorder.load(out)
    assert rec.attrs["safety_kind"] == "SIGINT" and rec.attrs["safety_tick"] == 0
    assert not rec.attrs["complete"] and rec.time.size == 0
    assert "tare head.force (Dev1/ai0): 50 samples" in rec.attrs["arm_log"]


def test_hil_check_shows_home_tare_z_index_filter_and_ramp(tmp_path, capsys):
    path = tmp_path / "bed.yaml"
    path.write_text(HOMING.read_text().replace(
        "velocity_limit: 0.5,", "velocity_limit: 0.5, z_index: 0.001, filter: 5.12e-6,").replace(
        "ramp: 0,", "ramp: 0.02,"))
    assert main(["hil", "check", str(path)]) == 0
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        port, _, rest = line.strip().partition(" ")
        rows.setdefault(port, []).append(rest.strip())
    assert rows["enc.pos"][1:] == [
        "home: motor.force_cmd at -1 until still for 0.1 s (at most 10 s, 0.033 of travel); "
        "that position reads -0.02 (stop)",
        "Z index: resets to 0.001 m (count 200) at AHIGH_BHIGH",
        "digital filter: 5.12 us on A, B, Z (passes 3.91e+05 edges/s = 1.95 m/s)"]
    assert rows["head.force"][1] == ("tare: averaged over 0.05 s at arm with the outputs safe; "
                                     "that reads 0 N (replaces offset 0)")
    assert rows["motor.force_cmd"][0].endswith("[-15, 15] ramp 0.02 s")
    assert rows["motor.force_cmd"][1] == "safe: 0 V (stop, watchdog expiry)"
    assert rows["motor.enable"][1] == ("enable active high: high while running, low when safe "
                                       "(stop, watchdog expiry)")
