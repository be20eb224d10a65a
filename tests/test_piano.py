"""The virtual piano action (seed 003): kinematics, statics, strikes, noise robustness."""
from pathlib import Path

import numpy as np
import pytest

import hapflow as hf
from hapflow.blocks import piano

ROOT = Path(__file__).resolve().parents[1]


def params(block):
    return block.pack()


def test_slider_constraint_and_its_derivatives():
    p = params(hf.blocks.PianoActionA())
    phi, dphi, ddphi, dist = piano.slider(0.0, p)
    assert phi == 0.0 and dist == pytest.approx(0.04)
    assert dphi == pytest.approx(0.12 / 0.04)               # lever ratio key_back / (key_back - pivot_x)
    for s in (-0.05, 0.02, 0.08):
        h = 1e-5
        f = [piano.slider(s + k * h, p)[0] for k in (-1, 0, 1)]
        assert piano.slider(s, p)[1] == pytest.approx((f[2] - f[0]) / (2 * h), rel=1e-8)
        assert piano.slider(s, p)[2] == pytest.approx((f[2] - 2 * f[1] + f[0]) / h ** 2, rel=1e-4)
        # the slider point lies on the shank line at the constraint angle
        assert abs(piano.shank_offset(s, piano.slider(s, p)[0], p)) < 1e-15


def key_graph(model, times, points, rate=1000, noise=0.0, **kw):
    g = hf.Graph(name=f"piano-{model}", rate=rate, duration=times[-1] + 0.5, seed=3)
    g.add("user", hf.blocks.Waypoints(times=times, points=points, unit="rad"))
    key = "user.y"
    if noise:
        g.add("noise", hf.blocks.WhiteNoise(std=noise, unit="rad"))
        g.add("sensed", hf.blocks.Sum(signs="++"))
        g.wire("user.y -> sensed.u1")
        g.wire("noise.y -> sensed.u2")
        key = "sensed.y"
    if model == "A":
        g.add("piano", hf.blocks.PianoActionA(**kw))
        g.wire(f"{key} -> piano.key")
        if noise:      # as on seed 003's rig: first and second backward differences
            g.add("vel", hf.blocks.Differentiator(unit="rad/s"))
            g.add("acc", hf.blocks.Differentiator(unit="rad/s^2"))
            g.wire(f"{key} -> vel.u")
            g.wire("vel.y -> acc.u")
            g.wire("vel.y -> piano.key_vel")
            g.wire("acc.y -> piano.key_acc")
        else:
            g.wire("user.dy -> piano.key_vel")
            g.wire("user.ddy -> piano.key_acc")
    else:
        g.add("piano", hf.blocks.PianoActionB(**kw))
        g.wire(f"{key} -> piano.key")
    g.record("piano.force", "piano.hammer", "piano.hammer_vel", "piano.mode", "piano.strike",
             "piano.strike_time", "piano.strikes", "piano.contact_force")
    return g


def test_static_key_carries_the_hammer_weight_through_the_lever():
    block = hf.blocks.PianoActionA()
    r = hf.Simulation(key_graph("A", [0.0, 0.1], [0.0, 0.0])).run(progress=False)
    weight = block.hammer_moment * block.gravity / 0.04            # F_KH = M_h g / L
    assert r["piano.contact_force"][-1, 0] == pytest.approx(weight, rel=1e-12)
    assert r["piano.force"][-1, 0] == pytest.approx(weight * block.key_back / block.key_front,
                                                    rel=1e-12)


def test_three_throws_of_increasing_strength_give_three_louder_midi_notes(tmp_path):
    import mido
    # three key strokes of growing amplitude, each from rest and back
    times, points = [], []
    for k, amp in enumerate((0.06, 0.07, 0.08)):
        t0 = 0.2 + 3.0 * k
        times += [t0, t0 + 0.15, t0 + 2.0, t0 + 2.5]
        points += [0.0, amp, amp, 0.0]
    g = key_graph("A", times, points)
    g.add("midi", hf.blocks.MidiSink(timed=True, full_speed=5.0, file=str(tmp_path / "notes.mid")))
    g.wire("piano.strike -> midi.strike")
    g.wire("piano.strike_time -> midi.time")
    r = hf.Simulation(g).run(progress=False)
    speeds = r["piano.strike"][r["piano.strike"][:, 0] > 0, 0]
    assert len(speeds) == 3 and np.all(np.diff(speeds) > 0)
    clock, notes = 0.0, []
    for msg in mido.MidiFile(tmp_path / "notes.mid"):
        clock += msg.time
        if msg.type == "note_on" and msg.velocity > 0:
            notes.append((clock, msg.velocity))
    strikes = np.unique(r["piano.strike_time"][:, 0])[1:]
    assert len(notes) == 3
    assert [v for _, v in notes] == sorted({v for _, v in notes})          # strictly increasing
    assert np.max(np.abs(np.array([t for t, _ in notes]) - strikes)) < 2e-5


def test_elastic_strike_conserves_hammer_energy():
    block = hf.blocks.PianoActionA()
    r = hf.Simulation(key_graph("A", [0.2, 0.35, 1.5], [0.0, 0.07, 0.07])).run(progress=False)
    q, w, mode = r["piano.hammer"][:, 0], r["piano.hammer_vel"][:, 0], r["piano.mode"][:, 0]
    energy = 0.5 * block.hammer_inertia * w ** 2 + block.hammer_moment * block.gravity * np.sin(q)
    hit = np.nonzero(r["piano.strike"][:, 0])[0][0]
    before, after = hit - 1, hit                       # ticks either side of the strike, in flight
    assert mode[before] == mode[after] == 2 and w[before] > 0 > w[after]
    flight = np.nonzero(mode == 2)[0]
    span = energy[flight[(flight > hit - 60) & (flight < hit + 60)]]
    rel = np.ptp(span) / abs(energy[after])
    print(f"hammer energy across the strike: relative spread {rel:.1e}")
    assert rel < 1e-9


def force_roughness(force):
    """RMS of the second difference of the finger force (N): the smoothness figure."""
    return float(np.sqrt(np.mean(np.diff(force, 2) ** 2)))


def test_model_b_is_stable_and_smoother_than_model_a_under_key_noise():
    stroke = ([0.3, 0.45, 1.0, 1.12, 2.2, 2.6], [0.0, 0.022, 0.022, 0.06, 0.06, 0.0])
    a = hf.Simulation(key_graph("A", *stroke, noise=1e-4)).run(progress=False)
    b = hf.Simulation(key_graph("B", *stroke, noise=1e-4)).run(progress=False)
    b_clean = hf.Simulation(key_graph("B", *stroke)).run(progress=False)
    rough_a, rough_b = force_roughness(a["piano.force"][:, 0]), force_roughness(b["piano.force"][:, 0])
    print(f"finger force roughness (RMS 2nd difference) with 1e-4 rad noise: "
          f"model A {rough_a:.3g} N, model B {rough_b:.3g} N")
    assert np.all(np.isfinite(b["piano.force"])) and b.event_overflows == 0
    assert rough_b < rough_a / 100
    # model B follows its noise-free run: same strike, hammer within 5 mrad
    assert b["piano.strikes"][-1, 0] == b_clean["piano.strikes"][-1, 0] == 1
    assert np.max(np.abs(b["piano.hammer"] - b_clean["piano.hammer"])) < 5e-3


@pytest.mark.parametrize("model", ["a", "b"])
def test_scenario_graphs_reproduce_seed_003_timeline(model, tmp_path, monkeypatch):
    """Thrown and caught near 0.9 s, thrown harder, strikes, lands near 1.5 s."""
    monkeypatch.chdir(tmp_path)         # the graph's sinks write out/piano_action_*.mid|wav
    g = hf.yamlio.load(ROOT / "graphs" / f"piano_action_{model}.yaml")
    r = hf.Simulation(g).run(progress=False)
    mode, t = r["piano.mode"][:, 0], r.time
    assert np.all(mode[t < 0.3] == 1)                           # key held still: hammer rides
    catches = r["piano.catch_time"][:, 0]
    first_catch = np.unique(catches[catches > 0])[0]
    assert abs(first_catch - 0.9) < 0.05
    strike = r["piano.strike_time"][-1, 0]
    assert 1.0 < strike < 1.5 and r["piano.strikes"][-1, 0] == 1
    landing = np.unique(catches[catches > strike])[0]
    assert abs(landing - 1.5) < 0.05


def test_both_models_pack_the_shared_geometry_where_its_helpers_read_it():
    from hapflow.blocks.piano import GEOMETRY, PianoActionA, PianoActionB
    for model in (PianoActionA, PianoActionB):
        assert model.P[:len(GEOMETRY)] == tuple(GEOMETRY)
        assert model.P._fields[:len(GEOMETRY)] == GEOMETRY._fields
