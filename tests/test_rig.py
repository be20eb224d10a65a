"""LinearMotor and Encoder (blocks/rig.py) against closed forms."""
import math

import numpy as np
import pytest

import hapflow as hf
from hapflow.block import ParamError
from hapflow.blocks import Constant, Encoder, LinearMotor, Sine, Step, Sum
from tests.helpers import table

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


# ---------------------------------------------------------------- motor end stops
from hapflow.blocks import ImpedanceHead, MassSpringDamper  # noqa: E402
from hapflow.blocks.filters import butter_sos  # noqa: E402
from hapflow.blocks.rig import _end_stop  # noqa: E402

STOP_K, STOP_C, CARRIAGE = 2e5, 200.0, 0.581


def stop_graph(command, duration=1.0, pos_max=0.01, v0=0.0, pos_min=None):
    g = hf.Graph(name="motor_stops", rate=RATE, duration=duration)
    g.add("cmd", Constant(value=command, unit="N"))
    g.add("motor", LinearMotor(end_stops=True, pos_min=-pos_max if pos_min is None else pos_min,
                               pos_max=pos_max))
    g.add("load", MassSpringDamper(mass=CARRIAGE, damping=0.0, stiffness=0.0, v0=v0))
    g.wire("cmd.y -> motor.force_cmd")
    g.wire("motor.force -> load.force")
    g.wire("load.pos -> motor.pos")
    g.wire("load.vel -> motor.vel")
    g.record("motor.force", "motor.at_limit", "load.pos", "load.vel")
    return g


@pytest.fixture(scope="module")
def stop_sim():
    return hf.Simulation(stop_graph(20.0))


@pytest.mark.parametrize("command", [20.0, -35.0])
def test_end_stop_holds_the_carriage_at_the_stroke_end(command):
    """A constant push ends at rest pos_max + F / k_stop (static balance of the stop spring)."""
    sim = hf.Simulation(stop_graph(command, duration=1.5))
    r = sim.run()
    pos = r["load.pos"][:, 0]
    expected = math.copysign(0.01 + abs(command) / STOP_K, command)
    assert pos[-1] == pytest.approx(expected, abs=1e-8)
    assert abs(r["load.vel"][-1, 0]) < 1e-6
    assert abs(r["motor.force"][-1, 0]) < 1e-4                   # lag force and stop cancel
    at = r["motor.at_limit"][:, 0]
    assert at.dtype == np.bool_ and not at[0] and at[-1]
    np.testing.assert_array_equal(at, np.abs(pos) > 0.01)
    # the stop is stiff: the largest penetration is at most that of an undamped
    # spring hit at the impact speed, v / sqrt(k / m), plus the static deflection
    v_impact = np.max(np.abs(r["load.vel"][:, 0]))
    bound = v_impact / math.sqrt(STOP_K / CARRIAGE) + abs(command) / STOP_K
    assert np.max(np.abs(pos)) - 0.01 <= bound


def test_end_stop_force_is_the_documented_unilateral_spring_damper():
    lo, hi = -0.1, 0.1
    assert _end_stop(0.05, 3.0, lo, hi, 2e5, 200.0) == 0.0                   # inside the stroke
    assert _end_stop(0.101, 0.2, lo, hi, 2e5, 200.0) == pytest.approx(-(2e5 * 0.001 + 200 * 0.2))
    assert _end_stop(-0.102, 0.0, lo, hi, 2e5, 200.0) == pytest.approx(2e5 * 0.002)
    # leaving the stop fast: the damper would pull, a stop only pushes
    assert _end_stop(0.1001, -1.0, lo, hi, 2e5, 200.0) == 0.0
    assert _end_stop(-0.1001, 1.0, lo, hi, 2e5, 200.0) == 0.0


def test_carriage_bounces_off_the_stop_and_loses_energy():
    """Coasting into the stop at 0.5 m/s with no command: it comes back slower."""
    r = hf.Simulation(stop_graph(0.0, duration=0.2, pos_max=0.01, v0=0.5, pos_min=-0.2)).run()
    v = r["load.vel"][:, 0]
    assert v[0] == 0.5 and v[-1] < 0.0
    assert 0.2 < -v[-1] < 0.5                     # damping ratio ~0.3: restitution ~0.4
    assert np.max(r["load.pos"][:, 0]) - 0.01 < 0.5 / math.sqrt(STOP_K / CARRIAGE)


def test_motor_without_end_stops_keeps_its_ports():
    m = LinearMotor()
    assert list(m.inputs) == ["force_cmd"] and list(m.outputs) == ["force"]
    m = LinearMotor(end_stops=True)
    assert list(m.inputs) == ["force_cmd", "pos", "vel"]
    assert list(m.outputs) == ["force", "at_limit"]
    assert m.outputs["at_limit"].dtype == "b1"


def test_motor_stroke_must_not_be_empty():
    with pytest.raises(ParamError, match="pos_min"):
        LinearMotor(pos_min=0.1, pos_max=0.05)
    m = LinearMotor()
    with pytest.raises(ParamError):
        m.set("pos_max", -0.2)
    assert m.pos_max == 0.105


# ---------------------------------------------------------------- impedance head
HEAD_FS = 4000.0
F_DENSITY, A_DENSITY = 2e-3, 5e-3


def head_graph(seed=1, duration=50.0, force_amp=0.0, accel_amp=0.0, force_freq=1.0,
               accel_freq=1.0, **params):
    """Sine force and acceleration into an ImpedanceHead (one structure per filter order)."""
    g = hf.Graph(name="head", rate=HEAD_FS, duration=duration, seed=seed)
    g.add("f", Sine(amplitude=force_amp, frequency=force_freq, phase=0.3, unit="N"))
    g.add("a", Sine(amplitude=accel_amp, frequency=accel_freq, unit="m/s^2"))
    g.add("head", ImpedanceHead(**params))
    g.wire("f.y -> head.force")
    g.wire("a.y -> head.accel")
    g.record("f.y", "a.y", "head.force", "head.accel")
    return g


@pytest.fixture(scope="module")
def noise_run():
    g = head_graph(force_noise=F_DENSITY, accel_noise=A_DENSITY, adc_bits=0)
    return hf.Simulation(g).run()


def test_head_noise_std_is_density_times_sqrt_half_rate(noise_run):
    n = noise_run["head.force"][:, 0]
    a = noise_run["head.accel"][:, 0]
    assert n.size == 200000
    assert np.std(n) == pytest.approx(F_DENSITY * math.sqrt(HEAD_FS / 2), rel=0.01)
    assert np.std(a) == pytest.approx(A_DENSITY * math.sqrt(HEAD_FS / 2), rel=0.01)
    assert abs(np.mean(n)) < 4 * F_DENSITY * math.sqrt(HEAD_FS / 2) / math.sqrt(n.size)
    assert abs(np.corrcoef(n, a)[0, 1]) < 0.01                  # independent streams


def test_head_noise_is_white_with_the_set_density(noise_run):
    for key, density in (("head.force", F_DENSITY), ("head.accel", A_DENSITY)):
        f, psd = scipy_welch(noise_run[key][:, 0])
        band = (f > 5.0) & (f < 1950.0)
        assert np.mean(psd[band]) == pytest.approx(density ** 2, rel=0.03)
        # flat: the lower and upper halves of the band agree
        lo, hi = psd[band][: band.sum() // 2], psd[band][band.sum() // 2:]
        assert np.mean(lo) == pytest.approx(np.mean(hi), rel=0.05)


def scipy_welch(x):
    import scipy.signal
    return scipy.signal.welch(x, fs=HEAD_FS, nperseg=4096)


def test_head_noise_is_deterministic_per_seed():
    short = dict(force_noise=F_DENSITY, accel_noise=A_DENSITY, adc_bits=0, duration=0.05)
    a = hf.Simulation(head_graph(seed=1, **short)).run()
    b = hf.Simulation(head_graph(seed=1, **short)).run()
    c = hf.Simulation(head_graph(seed=2, **short)).run()
    np.testing.assert_array_equal(a["head.force"], b["head.force"])
    np.testing.assert_array_equal(a["head.accel"], b["head.accel"])
    assert not np.any(a["head.force"] == c["head.force"])


def test_head_drift_is_a_random_walk_of_the_set_intensity():
    drift = 0.05                                   # N/sqrt(s)
    r = hf.Simulation(head_graph(force_noise=0.0, accel_noise=0.0, adc_bits=0,
                                 force_drift=drift, force_offset=0.7, duration=20.0)).run()
    y = r["head.force"][:, 0]
    assert y[0] == 0.7                                            # drift starts at 0
    steps = np.diff(y)
    assert np.std(steps) == pytest.approx(drift * math.sqrt(1 / HEAD_FS), rel=0.02)
    assert np.all(r["head.accel"][:, 0] == 0.0)                  # accel drift is off


@pytest.mark.parametrize("order", [1, 2])
def test_head_low_pass_is_minus_3_db_at_the_cutoff(order):
    r = hf.Simulation(head_graph(force_amp=10.0, force_freq=1000.0, force_noise=0.0,
                                 accel_noise=0.0, adc_bits=0, order=order, duration=0.2)).run()
    t = r.time
    sel = t > 0.05
    w = 2 * math.pi * 1000.0
    basis = np.column_stack([np.sin(w * t[sel]), np.cos(w * t[sel])])
    coef, *_ = np.linalg.lstsq(basis, r["head.force"][sel, 0], rcond=None)
    assert math.hypot(*coef) == pytest.approx(10.0 / math.sqrt(2.0), rel=1e-6)


def test_head_adc_quantises_to_16_bits_and_clips():
    r = hf.Simulation(head_graph(force_amp=140.0, accel_amp=10.0,   # beyond the 100 N range
                                 force_noise=0.0, accel_noise=0.0, duration=1.0)).run()
    q = 200.0 / 2 ** 16
    y = r["head.force"][:, 0]
    codes = y / q
    np.testing.assert_array_equal(codes, np.round(codes))
    assert np.min(codes) == -32768 and np.max(codes) == 32767
    assert np.max(y) == pytest.approx(100.0 - q) and np.min(y) == -100.0
    # inside the range the reading is within half a step of the low-passed input
    import scipy.signal
    lpf = scipy.signal.sosfilt(butter_sos(2, 1000.0, "lowpass", HEAD_FS), r["f.y"][:, 0])
    inside = np.abs(lpf) < 99.0
    assert np.max(np.abs(y - lpf)[inside]) <= q / 2 * (1 + 1e-9)
    qa = 600.0 / 2 ** 16
    assert len(np.unique(r["head.accel"][:, 0])) > 1000
    np.testing.assert_allclose(r["head.accel"][:, 0] / qa, np.round(r["head.accel"][:, 0] / qa),
                               atol=1e-9)


def test_head_compiled_equals_interpreted():
    g = head_graph(force_amp=30.0, force_freq=7.0, accel_amp=5.0, accel_freq=3.0,
                   force_drift=0.1, accel_drift=0.2, duration=0.05)
    a = hf.Simulation(g).run()
    b = hf.Simulation(g, interpret=True).run()
    for key in a.signals:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_motor_with_stops_compiled_equals_interpreted():
    g = stop_graph(30.0, duration=0.08, v0=0.3)
    a = hf.Simulation(g).run()
    b = hf.Simulation(g, interpret=True).run()
    for key in a.signals:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert a["motor.at_limit"][:, 0].any()


# ---------------------------------------------------------------- the probe-rig graphs
from pathlib import Path  # noqa: E402

from hapflow.yamlio import loads, to_yaml  # noqa: E402

RIG_GRAPHS = ["colton2004_sine", "colton2004_sine_validation", "colton2005_sweep",
              "colton2005_validation", "turn_signal", "turn_signal_validation"]
RIG_RECORDS = {"enc.pos", "head.force", "head.accel", "dev.pos", "dev.vel", "dev.acc", "traj.pos"}


@pytest.mark.parametrize("name", RIG_GRAPHS)
def test_rig_graph_has_the_names_the_identification_reads(name):
    path = Path(__file__).resolve().parents[1] / "graphs" / f"{name}.yaml"
    g = hf.load(path)
    g.check()
    types = {n: type(node.block).__name__ for n, node in g.nodes.items()}
    assert types["traj"] in ("SweptSine", "Multisine")
    assert types["pid"] == "PIDFeedforward" and types["motor"] == "LinearMotor"
    assert types["enc"] == "Encoder" and types["head"] == "ImpedanceHead"
    assert callable(getattr(g.nodes["dev"].block, "impedance", None))
    assert g.nodes["motor"].block.end_stops
    assert RIG_RECORDS <= {f"{b}.{p}" for b, p in g.recorded}
    wires = {str(w) for w in g.wires}
    assert {"motor.force -> head.force", "dev.acc -> head.accel", "motor.force -> dev.force",
            "dev.pos -> enc.true_pos", "enc.pos -> pid.meas_pos"} <= wires
    assert g.rate == 4000.0
    # the recording stores the graph as YAML; it must load back to the same blocks
    again = loads(to_yaml(g))
    for n, node in g.nodes.items():
        assert again.nodes[n].block.values == node.block.values, n


def test_encoder_nearest_rounding_is_floor_of_quotient_plus_half():
    """rounding: nearest reads the nearest count, halves up (Simulink's 'Nearest'); with the
    0.5 dropped from ROUNDING the exact halves and the quotient check fail."""
    res = 0.25                                   # binary: the halves below are exact
    values = np.array([0.0, 0.124, 0.125, 0.126, 0.374, 0.375, -0.124, -0.125, -0.126,
                       -0.375, 1.0, -1.0, 0.3, -0.3, 12.3456, -12.3456])
    g = hf.Graph(name="encoder_nearest", rate=RATE, duration=values.size / RATE)
    g.add("src", table(values[:, None]))
    g.add("enc", Encoder(resolution=res, rounding="nearest"))
    g.wire("src.y -> enc.true_pos")
    g.record("enc.pos", "enc.counts")
    r = hf.Simulation(g, interpret=True).run()
    counts = r["enc.counts"][:, 0]
    np.testing.assert_array_equal(counts, [0, 0, 1, 1, 1, 2, 0, 0, -1, -1, 4, -4, 1, -1, 49, -49])
    np.testing.assert_array_equal(counts, np.floor(values / res + 0.5).astype(np.int64))
    np.testing.assert_array_equal(r["enc.pos"][:, 0], counts * res)
    assert np.all(np.abs(values - r["enc.pos"][:, 0]) <= res / 2)


def test_encoder_rejects_an_unknown_rounding():
    with pytest.raises(ParamError, match="rounding.*'floor', 'nearest'"):
        Encoder(rounding="round")
