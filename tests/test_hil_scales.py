"""Custom polynomial and table scales on analog inputs (hapflow.hil.scales).

The card's channel stays in volts; the loop scales after the read, so a recording holds
the raw volts (/hil/card/ai_volts) and the scaled port value, which must be the scale of
those volts exactly (checked against numpy's polyval and interp).  The simulated card
inverts the scale, so the scaled reading follows the plant's force as a linear one does.
"""
from pathlib import Path

import h5py
import numpy as np
import pytest

import hapflow as hf
from hapflow.errors import GraphError
from hapflow.hil.bindings import bind
from hapflow.hil.grpc_sim import serve_card, sim_card
from hapflow.hil.nidaq import NidaqBackend
from hapflow.hil.runner import HilRunner
from hapflow.hil.safety import Policy
from hapflow.hil.simdaq import SimDaq
from hapflow.yamlio import loads

BED = Path(__file__).resolve().parents[1] / "graphs" / "hil_testbed.yaml"
LINEAR = "force: {channel: Dev1/ai0, newtons_per_volt: 10.0}"
POLY = [0.3, 9.0, 0.2]                               # N = 0.3 + 9 V + 0.2 V^2
TABLE = {"volts": [-10.0, -2.0, 0.0, 3.0, 10.0], "values": [-95.0, -21.0, 0.5, 31.0, 102.0]}


def bed(force: str):
    text = BED.read_text()
    assert LINEAR in text
    return loads(text.replace(LINEAR, force), str(BED))


def run(g, daq, tmp_path, name):
    if daq == "sim":
        result = HilRunner(g, SimDaq(g, paced=False)).run(0.5, out=tmp_path / name)
    else:
        server, port = serve_card(sim_card(g, bind(g).channels, seed=g.seed, paced=False))
        try:
            relaxed = Policy(max_overruns=2**62, max_lateness=1e9)
            result = HilRunner(g, NidaqBackend(f"localhost:{port}"), relaxed).run(
                0.5, out=tmp_path / name)
        finally:
            server.stop(None)
    assert result.event is None, result.event
    with h5py.File(result.path) as f:
        volts = f["hil/card/ai_volts"][:, 0]
    return hf.recorder.load(result.path), volts


@pytest.mark.parametrize("daq", ["sim", "nidaqmx"])
@pytest.mark.parametrize("key, spec, scale", [
    ("polynomial", POLY, lambda v: np.polynomial.polynomial.polyval(v, POLY)),
    ("table", TABLE, lambda v: np.interp(v, TABLE["volts"], TABLE["values"])),
])
def test_custom_scale_records_raw_volts_and_their_scaled_value(tmp_path, daq, key, spec, scale):
    linear, linear_volts = run(bed(LINEAR), daq, tmp_path, "linear.h5")
    text = f"force: {{channel: Dev1/ai0, {key}: {spec}}}".replace("'", "")
    custom, volts = run(bed(text), daq, tmp_path, "custom.h5")
    force = custom["head.force"][:, 0]
    np.testing.assert_allclose(force, scale(volts), rtol=1e-12, atol=1e-12)
    # the sensor the simulated card models reads the same force: the scaled value follows
    # the linear run's within the 16-bit converter's step (0.3 mV, at most 15 N/V here)
    # and the noise (0.1 mV rms), while the volts differ by the calibration
    assert np.ptp(linear["head.force"]) > 5.0
    np.testing.assert_allclose(force, linear["head.force"][:, 0], atol=0.02)
    assert np.max(np.abs(volts - linear_volts)) > 0.01
    assert f"head.force: ai Dev1/ai0 {key}" in custom.attrs["channels"]


def test_tare_after_a_polynomial_scale_reads_zero_at_rest(tmp_path):
    text = BED.read_text().replace(LINEAR, f"force: {{channel: Dev1/ai0, polynomial: {POLY}, "
                                           "tare: 0.05}")
    text = text.replace("cutoff: 200}", "cutoff: 200, force_offset: 0.8}")
    g = loads(text, str(BED))
    result = HilRunner(g, SimDaq(g, paced=False)).run(0.05, out=tmp_path / "run.h5")
    log = hf.recorder.load(result.path).attrs["arm_log"]
    mean = float(log.split("mean ")[1].split(" V")[0])
    offset = float(log.split("offset ")[1].split(" N")[0])
    before = np.polynomial.polynomial.polyval(mean, POLY)
    assert before == pytest.approx(0.8, abs=2e-3)       # the sensor's 0.8 N at rest
    assert offset == pytest.approx(-before, abs=1e-5)   # which then reads 0


@pytest.mark.parametrize("binding, message", [
    ("{channel: Dev1/ai0, polynomial: [0, 1, 0.1]}",
     "polynomial [0, 1, 0.1] is not strictly monotonic over the range [-10, 10] V (it turns "
     "near -5 V)"),
    ("{channel: Dev1/ai0, polynomial: [0, 1, 0.1], range: [-4, 10]}", None),
    ("{channel: Dev1/ai0, polynomial: [2.0]}", "polynomial needs 2 to 8 coefficients"),
    ("{channel: Dev1/ai0, polynomial: [0, nan]}", "polynomial must be a list of finite numbers"),
    ("{channel: Dev1/ai0, table: {volts: [-5, 5], values: [0, 1]}}",
     "table volts [-5 .. 5] must span the channel's range [-10, 10] V"),
    ("{channel: Dev1/ai0, table: {volts: [-10, 1, 1, 10], values: [0, 1, 2, 3]}}",
     "table volts must increase strictly"),
    ("{channel: Dev1/ai0, table: {volts: [-10, 0, 10], values: [0, 1, 0]}}",
     "table of 3 points is not strictly monotonic"),
    ("{channel: Dev1/ai0, table: {volts: [-10, 10]}}", "table must be {volts: [v0, v1, ...], "
                                                       "values: [y0, y1, ...]}"),
    ("{channel: Dev1/ai0, polynomial: [0, 10], newtons_per_volt: 10}",
     "polynomial is the whole scale (its constant term is the offset); remove newtons_per_volt"),
    ("{channel: Dev1/ai0, polynomial: [0, 10], offset: 1}", "remove offset"),
])
def test_custom_scales_checked_at_load_with_file_line_and_what_is_valid(binding, message):
    g = bed(f"force: {binding}")
    if message is None:                             # monotonic over the narrower range
        assert bind(g).channels[0].custom.kind == "polynomial"
        return
    with pytest.raises(GraphError) as e:
        bind(g)
    text = str(e.value)
    assert message in text and text.startswith(f"{BED}:") and "head.force" in text, text


MOTOR = "channel: Dev1/ao0, newtons_per_volt: 4.0,"
MOTOR_TABLE = {"volts": [-10.0, 0.0, 10.0], "values": [-44.0, 0.0, 36.0]}
MOTOR_POLY = [0.0, 4.0, 0.02]


@pytest.mark.parametrize("key, spec, scale, exact", [
    ("table", MOTOR_TABLE, lambda v: np.interp(v, MOTOR_TABLE["volts"], MOTOR_TABLE["values"]),
     1e-9),
    ("polynomial", MOTOR_POLY, lambda v: np.polynomial.polynomial.polyval(v, MOTOR_POLY), 1e-5),
])
def test_custom_scale_on_an_output_writes_the_volts_that_give_the_command(tmp_path, key, spec,
                                                                          scale, exact):
    """The amplifier gives 4.4 N/V pushing and 3.6 N/V pulling (a table), or 4 N/V plus
    0.02 N/V^2: the loop writes the volts at which the scale reads the command (the
    table's inverse exactly; the polynomial's through its tabulated inverse), and the
    simulated amplifier turns them back into the force, so the rig tracks as the linear
    4 N/V one does."""
    linear, _ = run(bed(LINEAR), "sim", tmp_path, "linear.h5")
    text = BED.read_text().replace(MOTOR, f"channel: Dev1/ao0, {key}: {spec},".replace("'", ""))
    result = HilRunner(g := loads(text, str(BED)), SimDaq(g, paced=False)).run(
        0.5, out=tmp_path / "custom.h5")
    assert result.event is None, result.event
    with h5py.File(result.path) as f:
        volts = f["hil/card/ao_volts"][:, 0]
    rec = hf.recorder.load(result.path)
    command = rec["motor.force_cmd"][:, 0]                      # the recorded command
    assert np.ptp(command) > 2.0
    np.testing.assert_allclose(scale(volts), command, atol=exact)
    assert np.max(np.abs(volts - command / 4.0)) > 0.01        # not the linear volts
    np.testing.assert_allclose(rec["enc.pos"][:, 0], linear["enc.pos"][:, 0], atol=2e-5)


def test_custom_scales_refused_on_encoders():
    text = BED.read_text().replace("meters_per_count: 5.0e-6",
                                   "table: {volts: [-10, 10], values: [-1, 1]}")
    with pytest.raises(GraphError, match="table scales apply to analog channels"):
        bind(loads(text, str(BED)))
