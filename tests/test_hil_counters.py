"""Encoder counters on the simulated cards: Z index reset and digital filter, as NI-DAQmx
documents them (add_ci_lin_encoder_chan's zidx_enable/zidx_val/zidx_phase; the A/B input
digital filter's minimum pulse width; NI-DAQmx Help, "Digital Filtering Considerations for
X Series": fixed widths 90 ns, 5.12 us, 2.56 ms and one custom width per device).

The test bed's 0.5 kg carriage on its 200 N/m spring is switched on 6 mm off centre and let
go with the amplifier off: it rings through the centre (3.2 Hz, up to 0.12 m/s = 24,000
quadrature edges/s of the 5 um encoder).  The simulated encoder's index mark is at the
centre, gated to A high, B high.
"""
from pathlib import Path

import numpy as np
import pytest

from hapflow.errors import GraphError
from hapflow.hil.arm import arm
from hapflow.hil.bindings import bind
from hapflow.hil.grpc_sim import serve_card, sim_card
from hapflow.hil.nidaq import NidaqBackend
from hapflow.hil.simcounter import CounterSetup, Counters
from hapflow.hil.simdaq import SimDaq
from hapflow.yamlio import loads

ROOT = Path(__file__).resolve().parents[1]
TESTBED = ROOT / "graphs" / "hil_testbed.yaml"
ENC = "enc:   {channel: Dev1/ctr0, meters_per_count: 5.0e-6, limit: 0.03, velocity_limit: 0.5"
RES, POWER_ON = 5e-6, 0.006


def bed(encoder_keys="", velocity_limit="0.5"):
    text = TESTBED.read_text().replace(
        "load:  {type: MassSpringDamper, mass: 0.5, damping: 5.0, stiffness: 200.0}",
        "load:  {type: MassSpringDamper, mass: 0.5, damping: 5.0, stiffness: 200.0, x0: 0.006}")
    text = text.replace(ENC, ENC.replace("velocity_limit: 0.5", f"velocity_limit: {velocity_limit}")
                        + encoder_keys)
    return loads(text, str(TESTBED))


def ring(backend, rig, graph, n=400):
    """Run ``n`` edges with the amplifier off; (counts read, the true counts of the plant)."""
    chs = bind(graph).channels
    backend.open(chs, graph.rate)
    backend.start()
    ai, counts = np.zeros(1), np.zeros(1, dtype=np.int64)
    read, true = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    try:
        for k in range(n):
            backend.wait()
            backend.read(ai, counts)
            read[k] = counts[0]
            true[k] = round(rig().signal("enc.pos") / RES)
            backend.write(np.zeros(1), np.zeros(1, dtype=bool))
    finally:
        backend.close()
    return read, true


@pytest.fixture(params=["sim", "nidaqmx"])
def card(request):
    """(backend, rig getter) for a graph on either simulated card (free-running)."""
    servers = []

    def make(g):
        if request.param == "sim":
            be = SimDaq(g, paced=False)
            return be, lambda: be.rig
        sim = sim_card(g, bind(g).channels, seed=g.seed, paced=False)
        server, port = serve_card(sim)
        servers.append(server)
        return NidaqBackend(f"localhost:{port}"), lambda: sim._rig

    yield make
    for s in servers:
        s.stop(None)


def test_without_z_index_the_count_is_relative_to_power_on(card):
    g = bed()
    read, true = ring(*card(g), g)
    assert (true < 0).any()                                   # it rang through the centre
    np.testing.assert_array_equal(read, true - round(POWER_ON / RES))


def test_z_index_resets_the_count_where_the_carriage_passes_the_index(card):
    g = bed(", z_index: 0.0")
    read, true = ring(*card(g), g)
    crossed = int(np.argmax(true <= 0))          # first edge at or past the index (centre)
    assert crossed > 0
    # before it: counted from the power-on position; from it on: absolute
    np.testing.assert_array_equal(read[:crossed], true[:crossed] - round(POWER_ON / RES))
    np.testing.assert_array_equal(read[crossed:], true[crossed:])


def test_z_index_value_and_phase(card):
    g = bed(", z_index: 0.001")                  # the index reads +1 mm
    read, true = ring(*card(g), g)
    crossed = int(np.argmax(true <= 0))
    np.testing.assert_array_equal(read[crossed:], true[crossed:] + 200)
    g = bed(", z_index: 0.0, z_phase: ALOW_BLOW")    # Z is never high with A and B low
    read, true = ring(*card(g), g)
    np.testing.assert_array_equal(read, true - round(POWER_ON / RES))


def test_a_filter_too_long_for_the_speed_loses_counts(card):
    # 2.56 ms passes at most 781 edges/s (3.9 mm/s); the ringing carriage moves at up to
    # 24,000 edges/s, so the count stays behind; 5.12 us (390,625 edges/s) loses none
    g = bed(", filter: 2.56e-3", velocity_limit="0.003")
    read, true = ring(*card(g), g)
    lost = np.abs(read - (true - round(POWER_ON / RES)))
    assert lost.max() > 1000, lost.max()                     # > 5 mm of the 6 mm swing lost
    g = bed(", filter: 5.12e-6")
    read, true = ring(*card(g), g)
    np.testing.assert_array_equal(read, true - round(POWER_ON / RES))


def test_counter_model_against_hand_counts():
    # X2, Z reset to 10 counts at the index at edge 8, period 0; filter passing 1000 edges/s
    c = Counters([CounterSetup(2, 10, "AHIGH_BHIGH", 2e-3)])
    idx, per = np.array([8]), np.array([0])
    seen = []
    for edges, rate in [(0, 0), (3, 300), (6, 300), (20, 14000), (9, 300), (8, 100), (5, 300)]:
        c.edge(np.array([edges]), np.array([float(rate)]), idx, per)
        seen.append(int(c.out[0]))
    # 0; +3 -> 1 (floor 3/2); +3 -> 3; to 20 at 14,000 edges/s: blocked, but the carriage
    # passed the index at 8, so the count is reset to 10 (20 edges) and the 12 edges past it
    # are lost; back to 9 at 300/s: -11 -> 9 edges -> 4; on the index at 8: 20 -> 10;
    # -3 -> 17 -> 8
    assert seen == [0, 1, 3, 10, 4, 10, 8]


@pytest.mark.parametrize("keys, message", [
    (", filter: 2.56e-3", "filter 0.00256 s passes at most 781.2 quadrature edges/s = 0.003906 "
                          "m/s (an A pulse lasts two edges), less than the velocity limit 0.5 "
                          "m/s: counts would be lost before it trips; shorten the filter below "
                          "2e-05 s"),
    (", z_phase: AHIGH_BLOW", "z_phase must be one of AHIGH_BHIGH, AHIGH_BLOW, ALOW_BHIGH, "
                              "ALOW_BLOW (the A/B state of the Z reset), with z_index set"),
    (", z_index: 0, z_phase: BHIGH", "z_phase must be one of"),
    (", filter: 0", "filter is the digital filter's minimum pulse width in s, in (0, 1]"),
])
def test_counter_keys_refused_with_file_line_and_what_is_valid(keys, message):
    with pytest.raises(GraphError) as e:
        bind(bed(keys))
    assert str(e.value).startswith(f"{TESTBED}:33: hardware enc.pos: ") and message in str(e.value)


def test_filter_on_an_analog_input_is_refused():
    text = TESTBED.read_text().replace("newtons_per_volt: 10.0}", "newtons_per_volt: 10.0, "
                                                                 "filter: 1e-6}")
    with pytest.raises(GraphError, match="filter applies to encoder channels"):
        bind(loads(text, str(TESTBED)))


def test_arm_allows_one_custom_filter_width_per_device():
    text = TESTBED.read_text().replace(ENC, ENC + ", filter: 1.0e-6").replace(
        "  enc:   {type: Encoder, resolution: 5.0e-6}",
        "  enc:   {type: Encoder, resolution: 5.0e-6}\n  enc2:  {type: Encoder, resolution: 5.0e-6}"
    ).replace("  - load.pos -> enc.true_pos", "  - load.pos -> enc.true_pos\n"
              "  - load.pos -> enc2.true_pos")
    two = text + "  enc2: {channel: Dev1/ctr1, meters_per_count: 5.0e-6, filter: 2.0e-6}\n"
    g = loads(two, str(TESTBED))
    with pytest.raises(GraphError) as e:
        arm(SimDaq(g, paced=False), bind(g))
    assert str(e.value) == (f"{TESTBED}:38: hardware enc2.pos: filter 2e-06 s: the PCIe-6351 has "
                            "one custom digital filter width per device and enc.pos uses 1e-06 s; "
                            "use the same, or a fixed width (0.09 us, 5.12 us, 2560 us)")
    fixed = loads(two.replace("filter: 2.0e-6", "filter: 5.12e-6"), str(TESTBED))
    assert arm(SimDaq(fixed, paced=False), bind(fixed))
