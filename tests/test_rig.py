"""LinearMotor and Encoder (blocks/rig.py) against closed forms."""
import math

import numpy as np
import pytest

import hapflow as hf
from hapflow.block import ParamError
from hapflow.blocks import Constant, Encoder, LinearMotor, Sine, Step, Sum

RATE = 4000.0


def motor_graph(command, bandwidth=29.0, peak=60.0, duration=0.5):
    g = hf.Graph(name="motor_step", rate=RATE, duration=duration)
    g.add("cmd", Step(time=0.0, initial=0.0, final=command, unit="N"))
    g.add("motor", LinearMotor(bandwidth=bandwidth, peak_force=peak))
    g.wire("cmd.y -> motor.force_cmd")
    g.record("motor.force")
    return g


@pytest.mark.parametrize("command, bandwidth, peak, expected_final", [
    (10.0, 29.0, 60.0, 10.0),        # inside the limit
    (-25.0, 29.0, 60.0, -25.0),
    (10.0, 60.0, 60.0, 10.0),        # another bandwidth
    (100.0, 29.0, 60.0, 60.0),       # saturated command: lag towards the limit
    (-100.0, 29.0, 60.0, -60.0),
], ids=["10N", "-25N", "60Hz", "sat+", "sat-"])
def test_motor_step_response_is_first_order(command, bandwidth, peak, expected_final):
    r = hf.Simulation(motor_graph(command, bandwidth, peak)).run()
    exact = expected_final * (1.0 - np.exp(-2.0 * math.pi * bandwidth * r.time))
    force = r["motor.force"][:, 0]
    assert force[0] == 0.0                       # state only: no jump at the step
    rel = np.max(np.abs(force - exact)) / abs(expected_final)
    assert rel <= 1e-6, rel


def test_motor_force_depends_on_state_only_so_it_closes_a_loop():
    """u = 10 - F wired without delay: dF/dt = w (10 - 2F), F = 5 (1 - exp(-2 w t))."""
    g = hf.Graph(name="motor_loop", rate=RATE, duration=0.3)
    g.add("ref", Constant(value=10.0, unit="N"))
    g.add("err", Sum(signs="+-"))
    g.add("motor", LinearMotor(bandwidth=29.0))
    g.wire("ref.y -> err.u1")
    g.wire("motor.force -> err.u2")
    g.wire("err.y -> motor.force_cmd")
    g.record("motor.force")
    r = hf.Simulation(g).run()
    exact = 5.0 * (1.0 - np.exp(-2.0 * 2.0 * math.pi * 29.0 * r.time))
    assert np.max(np.abs(r["motor.force"][:, 0] - exact)) <= 1e-6 * 5.0


def test_motor_live_parameters_change_without_rebuild():
    sim = hf.Simulation(motor_graph(10.0))
    sim.set("motor.peak_force", 4.0)
    sim.set("motor.bandwidth", 50.0)
    r = sim.run(0.2)
    exact = 4.0 * (1.0 - np.exp(-2.0 * math.pi * 50.0 * r.time))
    assert np.max(np.abs(r["motor.force"][:, 0] - exact)) <= 1e-6 * 4.0


@pytest.mark.parametrize("name, value", [("bandwidth", 0.0), ("peak_force", -1.0)])
def test_motor_rejects_nonpositive_parameters(name, value):
    with pytest.raises(ParamError, match=name):
        LinearMotor(**{name: value})


def encoder_graph(source, resolution=5e-6, duration=1.0):
    g = hf.Graph(name="encoder", rate=RATE, duration=duration)
    g.add("src", source)
    g.add("enc", Encoder(resolution=resolution))
    g.wire("src.y -> enc.true_pos")
    g.record("src.y", "enc.pos", "enc.counts")
    return g


@pytest.mark.parametrize("resolution", [5e-6, 1e-6, 2.5e-4])
def test_encoder_quantisation_is_floor_of_quotient(resolution):
    src = Sine(amplitude=1.3e-3, frequency=3.0, phase=0.2, offset=-1e-4, unit="m")
    r = hf.Simulation(encoder_graph(src, resolution)).run()
    x = r["src.y"][:, 0]
    counts = r["enc.counts"][:, 0]
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, np.floor(x / resolution).astype(np.int64))
    np.testing.assert_array_equal(r["enc.pos"][:, 0], counts * resolution)
    # the reading never exceeds the true position and is less than one count below it
    err = x - r["enc.pos"][:, 0]
    assert np.all(err >= -1e-15 * resolution) and np.all(err < resolution * (1 + 1e-12))
    assert len(np.unique(counts)) >= 10         # the sine sweeps many counts


@pytest.mark.parametrize("value, expected", [
    (0.0, 0), (4.9e-6, 0), (5e-6, 1), (1.5e-5, 3), (0.0125, 2500),
    (-1e-12, -1), (-5e-6, -1), (-5.1e-6, -2), (-0.0125, -2500),
])
def test_encoder_count_edges_round_towards_minus_infinity(value, expected):
    r = hf.Simulation(encoder_graph(Constant(value=value, unit="m"), duration=0.001)).run()
    assert r["enc.counts"][0, 0] == expected
    assert r["enc.pos"][0, 0] == expected * 5e-6


def test_encoder_resolution_is_live():
    sim = hf.Simulation(encoder_graph(Constant(value=0.0123, unit="m"), duration=0.001))
    sim.set("enc.resolution", 1e-3)
    r = sim.run()
    assert r["enc.counts"][0, 0] == 12
    assert r["enc.pos"][0, 0] == 12 * 1e-3


def test_encoder_rejects_wrong_unit():
    g = hf.Graph(rate=RATE)
    g.add("src", Constant(value=1.0, unit="N"))
    g.add("enc", Encoder())
    g.wire("src.y -> enc.true_pos")
    with pytest.raises(hf.GraphError, match="unit mismatch"):
        g.check()


def test_rig_blocks_compiled_equals_interpreted():
    g = hf.Graph(name="rig_ref", rate=RATE, duration=0.1)
    g.add("cmd", Sine(amplitude=80.0, frequency=20.0, unit="N"))
    g.add("motor", LinearMotor())
    g.add("src", Sine(amplitude=1e-3, frequency=7.0, unit="m"))
    g.add("enc", Encoder())
    g.wire("cmd.y -> motor.force_cmd")
    g.wire("src.y -> enc.true_pos")
    g.record("motor.force", "enc.pos", "enc.counts")
    a = hf.Simulation(g).run()
    b = hf.Simulation(g, interpret=True).run()
    for key in a.signals:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
