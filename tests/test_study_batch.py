"""The batched path's vectorised pieces (hapflow/batch.py, hapflow/study/metrics.py).

- :class:`hapflow.batch.Filler` builds every run's arrays at once; they must equal,
  bit for bit, what ``Simulation.set`` + ``Simulation.reset(seed)`` give run by run
  (default and overridden ``pack``, an ``initial_state`` that reads a parameter,
  random streams, ``init`` kernels, errors with the same text).
- Statistics over the columnar recordings of many runs equal numpy's definitions
  (to rounding) and the single-run path's (exactly), on both layouts, with the runs
  split over threads.
"""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hapflow as hf
from hapflow import registry
from hapflow.batch import ARRAYS, WIDTH, Batch, Filler
from hapflow.block import Block
from hapflow.params import Live
from hapflow.ports import Out
from hapflow.study import load_study, run_study
from hapflow.study.metrics import RunData, compute_all, compute_batch

ROOT = Path(__file__).resolve().parents[1]

# Overridden pack (ImpedanceHead, Differentiator, LeadLag), an initial_state that
# reads msd.x0, random streams and an init kernel (ImpedanceHead's noise).
FILL_GRAPH = """\
name: fill
rate: 4000
duration: 1
seed: 3
blocks:
  drive: {type: Sine, amplitude: 2.0, frequency: 3.0, unit: N}
  msd:   {type: MassSpringDamper, mass: 0.5, damping: 3.0, stiffness: 400.0}
  acc:   {type: Constant, value: 0.0, unit: m/s^2}
  head:  {type: ImpedanceHead, force_noise: 0.05, accel_noise: 0.01}
  diff:  {type: Differentiator, cutoff: 50.0}
  ll:    {type: LeadLag, f_zero: 20.0, f_pole: 200.0}
wires:
  - drive.y -> msd.force
  - drive.y -> head.force
  - acc.y -> head.accel
  - msd.pos -> diff.u
  - msd.pos -> ll.u
record: [msd.pos, head.force, diff.y, ll.y]
"""

SETTINGS = [
    {"msd.stiffness": 100.0, "msd.x0": 0.01, "head.force_noise": 0.1, "diff.cutoff": 20.0},
    {"msd.stiffness": 200, "msd.x0": 0.0, "head.force_noise": 0.0, "ll.f_zero": 5.0},
    {"msd.stiffness": -1.0},                                  # check: must be >= 0
    {"msd.stiffness": 300.0, "diff.cutoff": 2500.0},          # pack: above Nyquist (2 kHz)
    {"msd.stiffness": 400.0, "msd.x0": 0.02, "ll.f_zero": 5.0},
    {"msd.stiffness": 100.0, "msd.x0": 0.01, "head.force_noise": 0.1, "diff.cutoff": 20.0},
    {"msd.stifness": 1.0},                                    # unknown parameter
    {"head.order": 3},                                        # structural
    {"msd.stiffness": True},                                  # not a number
]
SEEDS = [1, 2, 3, 4, 1, 1, 3, 4, 5]


def _reference(sim, settings, seeds):
    """Per run: the arrays of Simulation.set + reset(seed), or the GraphError of set."""
    keys = {k for values in settings for k in values}
    base = {}
    for key in keys:
        block, _, param = key.partition(".")
        node = sim.graph.nodes[block].block
        if param in node.params and node.params[param].live:
            base[key] = node.values[param]
    out = []
    for values, seed in zip(settings, seeds):
        try:
            for key in base:
                sim.set(key, values.get(key, base[key]))
            for key in set(values) - set(base):
                sim.set(key, values[key])
        except hf.GraphError as exc:
            out.append(exc)
            continue
        sim.reset(seed)
        out.append({k: sim.arrays[k].copy() for k in ARRAYS})
    for key, value in base.items():
        sim.set(key, value)
    return out


def test_fill_equals_set_and_reset_run_by_run():
    sim = hf.Simulation(hf.loads(FILL_GRAPH))
    before = {k: v.copy() for k, v in sim.arrays.items()}
    rows, errors = Filler(sim).fill(SETTINGS, SEEDS)
    for k, v in sim.arrays.items():                       # the simulation is left as it was
        np.testing.assert_array_equal(v, before[k])
    want = _reference(sim, SETTINGS, SEEDS)
    for r, expected in enumerate(want):
        if isinstance(expected, Exception):
            assert isinstance(errors[r], hf.GraphError) and str(errors[r]) == str(expected), r
            continue
        assert errors[r] is None, (r, errors[r])
        for k in ARRAYS:
            np.testing.assert_array_equal(rows[k][r], expected[k], err_msg=f"run {r}, {k}")
    assert [e is not None for e in errors] == [False, False, True, True, False, False, True,
                                               True, True]
    assert "must be >= 0" in str(errors[2]) and "Nyquist" in str(errors[3])
    # the seed and the noise level reach the random streams and the init kernel
    assert not np.array_equal(rows["m"][0], rows["m"][1])
    np.testing.assert_array_equal(rows["m"][0], rows["m"][5])


NOTHING_TO_INIT = """\
name: nothing_to_init
rate: 1000
blocks:
  push: {type: Constant, value: 1.5, unit: N}
  gain: {type: Gain, gain: 2.0}
  msd: {type: MassSpringDamper, mass: 0.5, damping: 3.0, stiffness: 400.0}
wires: [push.y -> gain.u, gain.y -> msd.force]
record: [msd.pos]
"""


def test_fill_of_a_compiled_graph_with_nothing_to_initialise():
    """No init kernel and no held output: init_all is a plain function, never compiled,
    and the filler loops over it in Python."""
    from numba.core.dispatcher import Dispatcher
    sim = hf.Simulation(hf.loads(NOTHING_TO_INIT))
    assert not sim.program.interpreted and isinstance(sim.program.run, Dispatcher)
    assert not isinstance(sim.program.init_all, Dispatcher)
    settings = [{"msd.stiffness": 100.0, "msd.x0": 0.01}, {"gain.gain": 3.0}]
    rows, errors = Filler(sim).fill(settings, [1, 2])
    for r, expected in enumerate(_reference(sim, settings, [1, 2])):
        assert errors[r] is None
        for k in ARRAYS:
            np.testing.assert_array_equal(rows[k][r], expected[k], err_msg=f"run {r}, {k}")


def test_fill_of_a_block_whose_state_reads_a_varied_value():
    sim = hf.Simulation(hf.loads(FILL_GRAPH))
    rows, errors = Filler(sim).fill([{"msd.x0": x} for x in (0.0, 0.01, 0.03)], [1, 1, 1])
    x = sim.layout.blocks["msd"]["x"].start
    assert errors == [None] * 3
    np.testing.assert_array_equal(rows["f"][:, x], [0.0, 0.01, 0.03])


LANES_GRAPH = """\
name: lanes
rate: 2000
duration: 1
blocks:
  drive: {type: Sine, amplitude: 2.0, frequency: 3.0, unit: N}
  msd:   {type: MassSpringDamper, mass: 0.5, damping: 3.0, stiffness: 400.0}
  enc:   {type: Encoder, resolution: 1.0e-5}
wires:
  - drive.y -> msd.force
  - msd.pos -> enc.true_pos
record: [msd.pos, msd.vel, enc.pos, enc.counts]
"""
STATS = {"rms": lambda x: np.sqrt(np.mean(x * x)), "mean": np.mean,
         "peak": lambda x: np.max(np.abs(x)),
         "final": lambda x: x[-1], "min": np.min, "max": np.max}


def _metrics():
    out = {}
    for stat in STATS:
        for signal in ("msd.pos", "msd.vel", "enc.pos", "enc.counts"):     # counts: i8
            out[f"{stat}_{signal}"] = {"kind": "stat", "stat": stat, "signal": signal,
                                       "index": None, "after": 0.25}
    return out


@pytest.mark.parametrize("layout", ["lanes", "rows"])
def test_batch_statistics_equal_numpy_and_the_single_path(layout):
    sim = hf.Simulation(hf.loads(LANES_GRAPH))
    runs = 2 * WIDTH + 5                    # three lane groups, cut over two threads
    settings = [{"msd.stiffness": 100.0 + 20.0 * j, "drive.frequency": 1.0 + 0.1 * j}
                for j in range(runs)]
    batch = Batch(sim, parallel=True, layout=layout)
    batch.threads = 2
    records, good, errors = batch.simulate(settings, [0] * runs, 0.5)
    assert errors == [None] * runs and good == list(range(runs))
    assert records.lanes == (layout == "lanes")
    metrics = _metrics()
    got = compute_batch(metrics, records, lambda j: None, [None] * runs)
    first = 500                              # t >= 0.25 s at 2 kHz
    for j, values in enumerate(got):
        result = batch.result(records, j)
        single = compute_all(metrics, RunData(j, settings[j], 0, result.time, result.signals,
                                              2000.0))
        assert values == single              # the same sums, in the same order
        g = hf.loads(LANES_GRAPH)            # a fresh simulation of this run
        for key, value in settings[j].items():
            block, _, param = key.partition(".")
            g.nodes[block].block.set(param, value)
        want = hf.Simulation(g).run(0.5, progress=False)
        for name, spec in metrics.items():
            series = want[spec["signal"]][first:, 0].astype(float)
            assert values[name] == pytest.approx(STATS[spec["stat"]](series), rel=1e-12,
                                                 abs=1e-300), (j, name)


def test_a_statistic_after_the_end_fails_every_run():
    sim = hf.Simulation(hf.loads(LANES_GRAPH))
    records, _, _ = Batch(sim, False, "lanes").simulate([{}, {}], [0, 0], 0.1)
    spec = {"late": {"kind": "stat", "stat": "rms", "signal": "msd.pos", "index": None,
                     "after": 5.0}}
    got = compute_batch(spec, records, lambda j: None, [None, None])
    assert all("no samples of msd.pos at t >= 5 s" in str(e) for e in got)


STUDY = """\
name: lanes-study
graph: lanes.yaml
duration: 0.25
batch: {batch}
parameters:
  msd.stiffness: {{low: 100.0, high: 2000.0, num: 40}}
  msd.x0: [0.0, 0.001]
metrics:
  pos_rms: {{rms: msd.pos, after: 0.05}}
  vel_peak: {{peak: msd.vel}}
  enc_final: {{final: enc.pos}}
  enc_mean: {{mean: enc.pos}}
"""


def test_batched_lanes_study_equals_single_runs_exactly(tmp_path):
    tables = {}
    for batch in ("off", "on"):
        folder = tmp_path / batch
        folder.mkdir()
        (folder / "lanes.yaml").write_text(LANES_GRAPH)
        (folder / "study.yaml").write_text(STUDY.format(batch=batch))
        result = run_study(load_study(folder / "study.yaml"), folder / "out", workers=0,
                           progress=False, plots=False)
        tables[batch] = result.table
    on, off = tables["on"], tables["off"]
    assert len(on) == 80 and (on["status"] == "ok").all() and set(on["path"]) == {"batch"}
    assert set(off["path"]) == {"single"}
    cols = ["run", "status", "msd.stiffness", "msd.x0", "pos_rms", "vel_peak", "enc_final",
            "enc_mean"]
    pd.testing.assert_frame_equal(on[cols], off[cols], check_exact=True)
    # x0 reaches the initial state: the two halves differ at the same stiffness
    assert (on["pos_rms"][:40].to_numpy() != on["pos_rms"][40:].to_numpy()).any()


# EWLS overrides set() (scales must match the regressors) and pack(); its
# forgetting factor has a check of its own (not one of hapflow.params').
EWLS_GRAPH = """\
name: ewls
rate: 1000
duration: 1
blocks:
  drive: {type: Sine, amplitude: 2.0, frequency: 3.0, unit: N}
  msd:   {type: MassSpringDamper, mass: 0.5, damping: 3.0, stiffness: 400.0}
  ewls:  {type: EWLS, regressors: x1}
wires:
  - drive.y -> msd.force
  - msd.pos -> ewls.pos
  - drive.y -> ewls.force
record: [ewls.stiffness]
"""


def test_fill_of_a_block_with_its_own_set_and_checks():
    sim = hf.Simulation(hf.loads(EWLS_GRAPH))
    settings = [{"ewls.scales": [0.01, 1.0], "ewls.forgetting": 0.99},
                {"ewls.scales": [1.0]},                  # needs one scale per regressor
                {"ewls.forgetting": 1.5},                # its own check: in (0, 1]
                {"ewls.scales": [0.02, 2.0], "msd.stiffness": 250}]
    rows, errors = Filler(sim).fill(settings, [0] * 4)
    want = _reference(sim, settings, [0] * 4)
    assert [e is None for e in errors] == [True, False, False, True]
    for r, expected in enumerate(want):
        if isinstance(expected, Exception):
            assert str(errors[r]) == str(expected) and "scales" in str(errors[1])
            continue
        for k in ARRAYS:
            np.testing.assert_array_equal(rows[k][r], expected[k], err_msg=f"run {r}, {k}")
    assert sim.graph.nodes["ewls"].block.values["scales"] is None     # left as it was


# A held source at a quarter of the base rate: its output is written only at its
# sample hits, so it carries over between ticks.
HELD_GRAPH = """\
name: held
rate: 4000
duration: 1
blocks:
  drive:  {type: Sine, amplitude: 2.0, frequency: 3.0, unit: N, rate: 1000}
  msd:    {type: MassSpringDamper, mass: 0.5, damping: 3.0, stiffness: 400.0}
wires:
  - drive.y -> msd.force
record: [msd.pos, drive.y]
"""


def test_lanes_with_a_held_block_are_bit_identical_to_fresh_simulations():
    sim = hf.Simulation(hf.loads(HELD_GRAPH))
    settings = [{"msd.stiffness": 100.0 + 50.0 * j} for j in range(WIDTH + 3)]
    batch = Batch(sim, parallel=True, layout="lanes")
    batch.threads = 2
    results = batch.run(settings, [0] * len(settings), 0.3)
    for j in (0, WIDTH - 1, WIDTH + 2):
        g = hf.loads(HELD_GRAPH)
        g.nodes["msd"].block.set("stiffness", settings[j]["msd.stiffness"])
        want = hf.Simulation(g).run(0.3, progress=False)
        for name in want.signals:
            np.testing.assert_array_equal(results[j].signals[name], want.signals[name])
    held = results[0].signals["drive.y"][:, 0]
    assert np.all(held[1:4] == held[0]) and held[4] != held[0]      # zero-order hold


def test_batch_of_an_interpreted_graph_equals_the_compiled_one():
    settings = [{"msd.stiffness": 150.0, "msd.x0": 0.01}, {"msd.stiffness": 900.0}]
    compiled = Batch(hf.Simulation(hf.loads(FILL_GRAPH)), False).run(settings, [1, 2], 0.01)
    interpreted = Batch(hf.Simulation(hf.loads(FILL_GRAPH), interpret=True), False)
    assert interpreted.layout == "rows"
    for got, want in zip(interpreted.run(settings, [1, 2], 0.01), compiled):
        assert got.ticks == want.ticks == 40
        for name in want.signals:
            np.testing.assert_array_equal(got.signals[name], want.signals[name])


def test_log_lines_of_columns_read_back_as_the_records_written(tmp_path):
    import json
    from hapflow.study.store import Store
    store = Store(tmp_path / "out", "name: x\n")

    def record(j, status="ok", metrics=None):
        return {"run": j, "status": status, "error": None if status == "ok" else "boom",
                "metrics": {"a": 0.1 * j, "b": float("nan")} if metrics is None else metrics,
                "sim_wall": 1e-5, "path": "batch", "ticks": 40, "key": f"k{j}",
                "params": {"msd.stiffness": 100.0 + j}, "seed": j}
    batch = [record(j) for j in range(5)]                  # same fields: one line of columns
    mixed = [record(5), record(6, "failed", {})]           # failed: no metrics -> one line each
    store.append(batch)
    store.append(mixed)
    store.append([record(7)])
    with store.log_path.open("a") as fh:
        fh.write('{"columns": {"run": [8, 9], "key": ["k8"')  # cut short by a kill
    lines = store.log_path.read_text().splitlines()
    assert len(lines) == 5 and "columns" in json.loads(lines[0])
    done = store.finished()
    assert sorted(done) == [f"k{j}" for j in range(8)]
    for want in [*batch, *mixed, record(7)]:
        got = done[want["key"]]
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert sorted(store.finished(retry_failed=True)) == [f"k{j}" for j in range(8) if j != 6]


@pytest.mark.parametrize("params, seed", [
    ({"msd.stiffness": 123.456789, "dev.k_outer": 3000}, 7),
    ({"a.b": 1e-300, "c.d": -0.0, "e.f": 5e22, "g.h": 0.1 + 0.2}, 0),
    ({"a.b": float("nan")}, 1), ({"a.b": float("inf")}, 1), ({"a.b": True}, 1),
    ({"a.b": None}, 1), ({"a.b": "lowpass"}, 1), ({"a.b": [1.0, 2.0]}, 1),
    ({"a.b": np.float64(0.5)}, 1), ({"a.b": np.int64(3)}, np.int64(2)),
    ({"bloc\u00e9.x": 1.0}, 1), ({'a"b.c': 1.0}, 1), ({}, -5)])
def test_key_text_is_the_json_text(params, seed):
    import json
    from hapflow.study.store import key_text
    want = json.dumps(["0123456789abcdef0123", sorted(params.items()), seed], default=repr)
    assert key_text("0123456789abcdef0123", params, seed) == want


class _Scaled(Block, register=False):
    """Starts at ``x0 gain``: an initial_state override that declares nothing (so a batch
    recomputes it for any varied parameter).

    Ports
    -----
    y : out, (1,), m     the state (state only)
    """

    outputs = {"y": Out(1, unit="m", depends="state", doc="state")}
    params = {"x0": Live(0.1, unit="m", doc="start before scaling"),
              "gain": Live(1.0, doc="scale of the start"), "decay": Live(1.0, unit="1/s")}
    cstate = ("x",)

    def initial_state(self):
        x, d, m = super().initial_state()
        x[0] = self.x0 * self.gain
        return x, d, m

    @staticmethod
    def deriv(t, x, d, m, p, dx):
        dx[0] = -p[SCALED.decay] * x[0]

    @staticmethod
    def output(t, x, d, m, p, y):
        y[0] = x[0]


SCALED = _Scaled.P


def test_fill_starts_every_run_from_the_parameters_its_blocks_declare():
    """The filler recomputes a block's initial state for the parameters it declares
    (:meth:`Block.initial_parameters`): ``initial_from`` (BouncingBall's h0), ``initial_depends``
    (SwitchingFirstOrder's mode from x0 and s1) and, for an override that declares
    nothing, every parameter; each run's arrays equal set + reset."""
    g = hf.Graph(name="starts", rate=1000.0, duration=0.01)
    g.add("sw", registry.lookup("SwitchingFirstOrder")())
    g.add("ball", registry.lookup("BouncingBall")())
    g.add("sc", _Scaled())
    g.record("sw.mode", "ball.height", "sc.y")
    sim = hf.Simulation(g, interpret=True)
    settings = [{"sw.x0": 1.6}, {"sw.s1": 1.2, "sw.x0": 1.3}, {"sw.s1": 1.2}, {"ball.h0": 0.02},
                {"sc.gain": 3.0}, {"sc.x0": 0.5, "sc.gain": 2.0}, {}]
    rows, errors = Filler(sim).fill(settings, [1] * len(settings))
    assert errors == [None] * len(settings)
    for r, expected in enumerate(_reference(sim, settings, [1] * len(settings))):
        for k in ARRAYS:
            np.testing.assert_array_equal(rows[k][r], expected[k], err_msg=f"run {r}, {k}")
    mode = sim.layout.blocks["sw"]["m"].start
    assert rows["m"][:, mode].tolist() == [2, 2, 1, 1, 1, 1, 1]


def test_fill_packs_derived_values_once_unless_a_varied_parameter_reaches_them(monkeypatch):
    """PIDFeedforward's derived values read ki, kb and deriv_cutoff but not kp: runs that
    vary kp alone get the default packing with kp written in place (no pack per run),
    runs that vary the others get their own derived values; both equal set + reset."""
    import hapflow.batch as batch_module
    sim = hf.Simulation(hf.load(ROOT / "graphs" / "colton2005_sweep.yaml"), interpret=True)
    reads = sim.graph.nodes["pid"].block.derived_reads()
    assert {"ki", "kb", "deriv_cutoff"} <= reads and "kp" not in reads
    packs = []
    monkeypatch.setattr(batch_module, "checked_pack",
                        lambda block, *a: packs.append(block) or block.packed())
    gains = [{"pid.kp": 30000.0 + 500.0 * j} for j in range(4)]
    mixed = [*gains[:2], {"pid.kb": 30.0}, {"pid.deriv_cutoff": 120.0, "pid.kp": 1.0e4},
             {"pid.ki": 2.0e6, "pid.kb": 10.0}]
    for settings, per_run in ((gains, False), (mixed, True)):
        packs.clear()
        rows, errors = Filler(sim).fill(settings, [1] * len(settings))
        assert errors == [None] * len(settings) and bool(packs) == per_run
        for r, expected in enumerate(_reference(sim, settings, [1] * len(settings))):
            for k in ARRAYS:
                np.testing.assert_array_equal(rows[k][r], expected[k], err_msg=f"run {r}, {k}")


# The metrics read msd.pos (and events): the study drops the noisy head and the
# filters, keeps the ball (it has guards) and the drive msd reads.
REDUCE_GRAPH = FILL_GRAPH.replace("wires:", "  ball:  {type: BouncingBall}\nwires:")
REDUCE_STUDY = """\
name: reduce-study
graph: reduce.yaml
duration: 0.5
batch: on
parameters:
  msd.stiffness: {low: 100.0, high: 2000.0, num: 6}
  seed: [1, 2]
metrics:
  pos_rms: {rms: msd.pos, after: 0.05}
  pos_final: {final: msd.pos}
  bounces: {events: located}
"""


def test_a_study_simulates_only_what_its_metrics_read(tmp_path):
    """The job's graph keeps msd.pos's blocks and the ball; its metrics equal, bit for bit,
    those of the whole graph run by run."""
    from hapflow.study.execute import Job
    (tmp_path / "reduce.yaml").write_text(REDUCE_GRAPH)
    (tmp_path / "study.yaml").write_text(REDUCE_STUDY)
    study = load_study(tmp_path / "study.yaml")
    job = Job(study.graph_text, str(study.graph_path), {}, [], 0.5, study.metrics)
    reduced = job.graph()
    assert list(reduced.nodes) == ["drive", "msd", "ball"]
    assert reduced.recorded == [("msd", "pos")] and len(reduced.wires) == 1
    table = run_study(study, tmp_path / "out", workers=0, progress=False, plots=False).table
    assert (table["status"] == "ok").all() and set(table["path"]) == {"batch"}
    whole = hf.Simulation(hf.loads(REDUCE_GRAPH))
    for row in table.itertuples():
        whole.set("msd.stiffness", row[table.columns.get_loc("msd.stiffness") + 1])
        whole.reset(int(row.seed))
        result = whole.run(0.5, progress=False)
        run = RunData(row.run, {}, int(row.seed), result.time, result.signals, result.rate,
                      result.events, result.event_overflows, lambda: whole.graph)
        want = compute_all(study.metrics, run)
        assert want["bounces"] > 0
        assert (row.pos_rms, row.pos_final, row.bounces) == (want["pos_rms"], want["pos_final"],
                                                             want["bounces"])
