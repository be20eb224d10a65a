"""The simulated rig: 16-bit conversion, clipping, transport delay, enable line, faults."""
import math

import numpy as np
import pytest

from hapflow.errors import HapflowError
from hapflow.hil.backend import DaqError
from hapflow.hil.bindings import bind
from hapflow.hil.simrig import Fault, SimRig
from hapflow.yamlio import loads

RATE = 1000.0
BANDWIDTH = 20.0
Q = 20.0 / 2 ** 16            # LSB of a +-10 V 16-bit channel

GRAPH = f"""
name: rig
rate: {RATE}
blocks:
  cmd:   {{type: Constant, value: 0.0, unit: N}}
  motor: {{type: LinearMotor, bandwidth: {BANDWIDTH}, peak_force: 40}}
  load:  {{type: MassSpringDamper, mass: 1.0, damping: 0.0, stiffness: 0.0}}
  enc:   {{type: Encoder, resolution: 1.0e-6}}
  user:  {{type: Gain, gain: 1.0}}
wires:
  - cmd.y -> motor.force_cmd
  - motor.force -> load.force
  - load.pos -> enc.true_pos
  - enc.pos -> user.u
hardware:
  motor:
    force_cmd: {{channel: Dev1/ao0, scale: 4.0}}
    force: {{channel: Dev1/ai0, scale: 4.0}}
    enable: Dev1/port0/line0
  enc: {{channel: Dev1/ctr0, meters_per_count: 1.0e-6}}
"""


def rig(faults=(), **card):
    g = loads(GRAPH, "rig.yaml")
    return SimRig(g, bind(g).channels, RATE, seed=0, faults=faults, **{"noise": 0.0, **card})


def dac(volts):
    """Round to the nearest 16-bit code over +-10 V (codes -32768..32767)."""
    return np.clip(np.round(volts / Q), -32768, 32767) * Q


def drive(r, volts, n, enable=True):
    ai, counts = np.zeros(1), np.zeros(1, dtype=np.int64)
    ao, do = np.array([volts]), np.array([enable])
    out = []
    for _ in range(n):
        r.exchange(ao, do, ai, counts)
        out.append((ai[0], counts[0]))
    return np.array(out)


def test_step_response_quantised_and_one_sample_late():
    """The sample at edge k is the plant at t_k: the command latched at edge 1 shows from edge 2."""
    r = rig()
    drive(r, 0.0, 1)                                      # edge 0: outputs at 0 V
    samples = drive(r, 0.5, 60)[:, 0]                     # edges 1..60: 0.5 V = 2 N
    u = 4.0 * dac(0.5)                                    # the DAC's code, not 2 N exactly
    assert u != 2.0 and abs(u - 2.0) < 4 * Q
    k = np.arange(1, 61)
    force = u * (1.0 - np.exp(-2 * math.pi * BANDWIDTH * (k - 1) / RATE))
    assert samples[0] == 0.0                              # edge 1 samples before the new command acts
    np.testing.assert_allclose(samples, dac(force / 4.0), atol=1e-12)


def test_ideal_converters_pass_values_unquantised_but_clipped():
    """bits=None (used to separate quantisation from delay): the first-order lag to the
    solver's accuracy (RK4, 1e-5 N), far below a 16-bit step (4 Q = 1.2 mN), off its grid."""
    r = rig(bits=None)
    drive(r, 0.0, 1)
    samples = drive(r, 0.5, 60)[:, 0]
    k = np.arange(1, 61)
    force = 2.0 * (1.0 - np.exp(-2 * math.pi * BANDWIDTH * (k - 1) / RATE))
    np.testing.assert_allclose(samples * 4.0, force, rtol=0, atol=1e-5)
    assert np.abs(samples / Q - np.round(samples / Q)).max() > 0.1
    assert drive(rig(bits=None), 12.0, 400)[-1, 0] * 4.0 == pytest.approx(
        40.0 * (1 - math.exp(-2 * math.pi * BANDWIDTH * 0.398)), rel=1e-9)   # clipped at 10 V


def test_a_coarser_card_quantises_to_its_own_step():
    q12 = 20.0 / 2 ** 12
    r = rig(bits=12)
    drive(r, 0.0, 1)
    samples = drive(r, 0.5, 60)[:, 0]
    np.testing.assert_allclose(samples / q12, np.round(samples / q12), atol=1e-9)
    assert len(np.unique(samples)) > 10


@pytest.mark.parametrize("card, message", [({"bits": 1}, "bits=1: give an integer 2..32"),
                                           ({"noise": -1.0}, "input noise -1.0 V rms")])
def test_bad_card_settings_are_refused(card, message):
    with pytest.raises(HapflowError, match=message):
        rig(**card)


def test_output_clipped_to_the_range_and_enable_line():
    r = rig()
    f = drive(r, 12.0, 400)[-1, 0] * 4.0                  # 12 V is clipped to the top code
    assert f == pytest.approx(4.0 * (10.0 - Q) * (1 - math.exp(-2 * math.pi * BANDWIDTH * 0.398)),
                              abs=4 * Q)
    r = rig()
    assert not drive(r, 5.0, 100, enable=False)[:, 0].any()   # amplifier disabled: no force


def test_encoder_counts_follow_the_load():
    r = rig()
    data = drive(r, 0.25, 200)                            # 1 N on 1 kg
    assert data[-1, 1] == pytest.approx(r.signal("enc.counts"), abs=1)   # one edge behind at most
    assert data[-1, 1] > 0 and data[:, 1].dtype == np.float64


@pytest.mark.parametrize("fault, check", [
    (Fault("stuck", 50, 30, "motor.force"), lambda d, c: (d[50:80, 0] == c[49, 0]).all()),
    (Fault("saturate", 50, 5, "Dev1/ai0", value=1.0), lambda d, c: (d[50:55, 0] == 10.0).all()),
    (Fault("saturate", 50, 5, "Dev1/ai0", value=-1.0), lambda d, c: (d[50:55, 0] == -10.0).all()),
    (Fault("glitch", 50, channel="enc.pos", value=400), lambda d, c: True),
    (Fault("nan", 50, 5, "motor.force"), lambda d, c: np.isnan(d[50:55, 0]).all()),
])
def test_channel_faults(fault, check):
    """Each fault changes only its channel, only while it lasts (a glitch's jump stays)."""
    clean, data = drive(rig(), 1.0, 150), drive(rig([fault]), 1.0, 150)
    assert check(data, clean)
    other = 0 if fault.kind == "glitch" else 1
    np.testing.assert_array_equal(data[:, other], clean[:, other])
    np.testing.assert_array_equal(data[:50], clean[:50])
    if fault.kind == "glitch":
        np.testing.assert_array_equal(data[50:, 1] - clean[50:, 1], 400)
    else:
        np.testing.assert_array_equal(data[55 if fault.kind != "stuck" else 80:],
                                      clean[55 if fault.kind != "stuck" else 80:])


def test_daq_error_at_the_chosen_sample_names_the_channel():
    r = rig([Fault("error", 7)])
    drive(r, 0.0, 7)
    with pytest.raises(DaqError, match="^Dev1: simulated DAQ error at sample 7"):
        drive(r, 0.0, 1)


def test_timing_faults_and_parse():
    r = rig([Fault.parse("late@10x2=0.004"), Fault.parse("drop@20")])
    assert r.timing_fault(10) == (0.004, False) and r.timing_fault(11) == (0.004, False)
    assert r.timing_fault(12) == (0.0, False) and r.timing_fault(20) == (0.0, True)
    assert Fault.parse("glitch@200:enc.pos=400") == Fault("glitch", 200, 1, "enc.pos", 400.0)
    with pytest.raises(HapflowError, match="KIND@TICK"):
        Fault.parse("glitch@soon")
    with pytest.raises(HapflowError, match="unknown fault kind 'wobble'"):
        Fault.parse("wobble@3")
    with pytest.raises(HapflowError, match="unknown input channel 'enc.vel'; valid: motor.force, enc.pos"):
        rig([Fault("stuck", 1, channel="enc.vel")])
    with pytest.raises(HapflowError, match="not an encoder channel"):
        rig([Fault("glitch", 1, channel="motor.force", value=5)])


@pytest.mark.parametrize("text, message", [
    ("late@10", "late@10: give the stall in s"),
    ("late@10=-0.004", "late@10: give the stall in s"),
    ("glitch@200:enc.pos", "glitch@200: give the jump in counts"),
    ("glitch@200:enc.pos=0.5", "a whole number, not 0"),
    ("saturate@500:enc.pos", "saturate@500: give the end of the range"),
    ("stuck@5", "stuck@5: name the input channel"),
])
def test_a_fault_without_the_value_or_channel_it_needs_is_refused(text, message):
    """Before: accepted, and did nothing (late, glitch) or picked the low end (saturate)."""
    with pytest.raises(HapflowError, match=message):
        Fault.parse(text)


NO_AI = GRAPH.replace("    force: {channel: Dev1/ai0, scale: 4.0}\n", "")


@pytest.mark.parametrize("sign, rail", [(1, 2**31 - 1), (-1, -2**31)])
def test_a_saturated_encoder_reads_the_counter_end_of_its_sign_without_analog_inputs(sign, rail):
    """Before: IndexError on a graph without analog inputs, and the high end for either sign."""
    g = loads(NO_AI, "rig.yaml")
    r = SimRig(g, bind(g).channels, RATE, faults=[Fault.parse(f"saturate@5x3:enc.pos={sign}")])
    ai, counts = np.zeros(0), np.zeros(1, dtype=np.int64)
    seen = []
    for _ in range(10):
        r.exchange(np.array([1.0]), np.array([True]), ai, counts)
        seen.append(counts[0])
    assert seen[5:8] == [rail] * 3 and abs(seen[8]) < 1000


def test_nan_on_an_encoder_is_refused_and_a_daq_error_names_its_channel():
    with pytest.raises(HapflowError, match="enc.pos is an encoder counter, which reads whole "
                                           "counts, never NaN"):
        rig([Fault("nan", 1, channel="enc.pos")])
    r = rig([Fault("error", 3, channel="enc.pos")])
    drive(r, 0.0, 3)
    with pytest.raises(DaqError, match="^Dev1/ctr0: simulated DAQ error at sample 3"):
        drive(r, 0.0, 1)
    with pytest.raises(HapflowError, match="unknown channel 'Dev1/ai7'"):
        rig([Fault("error", 3, channel="Dev1/ai7")])
