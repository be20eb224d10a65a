"""Running studies (hapflow/study/runner.py, execute.py) and the batched path (hapflow/batch.py).

One Dask LocalCluster (2 worker processes) is shared by the module.
"""
import argparse
import os

import numpy as np
import pandas as pd
import pytest

import hapflow as hf
from hapflow.batch import Batch
from hapflow.errors import SimulationError
from hapflow.study import load_study, run_study
from hapflow.study.commands import register
from hapflow.study.execute import build_graph

# A spring-mass test stand with a noisy impedance head (random streams: the seed
# matters) and a bouncing ball beside it (events); head.order is structural.
GRAPH = """\
name: stand
rate: 4000
duration: 1
seed: 5
blocks:
  drive: {type: Sine, amplitude: 2.0, frequency: 3.0, unit: N}
  msd:   {type: MassSpringDamper, mass: 0.5, damping: 3.0, stiffness: 400.0}
  acc:   {type: Constant, value: 0.0, unit: m/s^2}
  head:  {type: ImpedanceHead, force_noise: 0.05, accel_noise: 0.01}
  ball:  {type: BouncingBall, restitution: 0.7, h0: 0.2}
wires:
  - drive.y -> msd.force
  - msd.force_in -> head.force
  - acc.y -> head.accel
record: [msd.pos, head.force, ball.height]
"""

STUDY = """\
name: stand-study
graph: stand.yaml
duration: 0.5
batch: {batch}
parameters:
  msd.stiffness: [200.0, 800.0, 1.0e9]    # 1e9: RK4 unstable at 4 kHz
  seed: [1, 2, 3]
metrics:
  pos_rms: {{rms: msd.pos}}
  force_rms: {{rms: head.force}}
  bounces: {{events: located}}
  user: {{function: tests.test_study_run.spy}}
"""

METRICS = ["pos_rms", "force_rms", "bounces", "user.final_height"]
EXECUTED: list[int] = []


def spy(run):
    """User metric: counts the runs it sees; interrupts at run HF_STUDY_TEST_INTERRUPT."""
    if os.environ.get("HF_STUDY_TEST_INTERRUPT") == str(run.index):
        raise KeyboardInterrupt
    EXECUTED.append(run.index)
    return {"final_height": float(run.signals["ball.height"][-1, 0])}


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster
    import logging
    c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                     silence_logs=logging.ERROR)
    yield c.scheduler_address
    c.close()


def make_study(folder, batch="auto", text=STUDY):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stand.yaml").write_text(GRAPH.replace("msd.force_in", "drive.y"))
    (folder / "study.yaml").write_text(text.format(batch=batch))
    return load_study(folder / "study.yaml", allow=("tests",))


def test_failed_runs_are_recorded_and_the_study_completes(tmp_path):
    study = make_study(tmp_path / "s")
    result = run_study(study, tmp_path / "out", workers=0, progress=False)
    t = result.table
    assert len(t) == 9 and result.executed == 9 and result.failed == 3
    unstable = t[t["msd.stiffness"] == 1.0e9]
    assert (unstable["status"] == "failed").all()
    assert unstable["error"].str.contains("SimulationError: block 'msd': state became non-finite").all()
    ok = t[t["msd.stiffness"].isin([200.0, 800.0])]
    assert (ok["status"] == "ok").all() and ok[METRICS].notna().all().all()
    # the noise follows the seed: different seeds, different force RMS
    assert ok.groupby("msd.stiffness")["force_rms"].nunique().eq(3).all()
    on_disk = pd.read_parquet(result.files["table"])
    pd.testing.assert_frame_equal(on_disk, t)
    assert result.files["summary"].exists() and result.files["pos_rms"].exists()
    assert "pos_rms_heatmap" not in result.files            # one parameter besides the seed


def test_invalid_value_is_rejected_at_load_not_in_every_run(tmp_path):
    """A value the parameter's own check rejects (stiffness -1) used to load and fail each of
    its runs; the study file is rejected at its line instead."""
    text = STUDY.replace("[200.0, 800.0, 1.0e9]", "[200.0, -1.0]")
    with pytest.raises(hf.GraphError, match=r"study.yaml:6: parameter 'msd.stiffness': value "
                                            r"-1.0: must be >= 0"):
        make_study(tmp_path / "s", text=text)


def test_study_where_every_run_fails_exits_non_zero(tmp_path, capsys):
    from hapflow.cli import main
    text = STUDY.replace("[200.0, 800.0, 1.0e9]", "[1.0e9]").replace("[1, 2, 3]", "[1]")
    study = make_study(tmp_path / "s", text=text)
    assert main(["study", str(study.file), "--workers", "0", "--out", str(tmp_path / "out"),
                 "--allow", "tests", "--no-progress", "--no-plots"]) == 1
    assert "every run of the study failed" in capsys.readouterr().err


def test_resumed_study_skips_finished_runs(tmp_path, monkeypatch):
    study = make_study(tmp_path / "s", batch="off")
    out = tmp_path / "out"
    EXECUTED.clear()
    monkeypatch.setenv("HF_STUDY_TEST_INTERRUPT", "4")   # runs: stiffness slowest, then seed
    with pytest.raises(KeyboardInterrupt):
        run_study(study, out, workers=0, progress=False, plots=False)
    partial = pd.read_parquet(out / "results.parquet")
    assert (partial["status"][:4] == "ok").all() and (partial["status"][4:] == "pending").all()
    assert EXECUTED == [0, 1, 2, 3]
    monkeypatch.delenv("HF_STUDY_TEST_INTERRUPT")
    EXECUTED.clear()
    resumed = run_study(study, out, workers=0, progress=False, plots=False)
    assert resumed.executed == 5 and resumed.skipped == 4
    assert EXECUTED == [4, 5]                     # runs 6-8 fail before any metric
    again = run_study(study, out, workers=0, progress=False, plots=False)
    assert again.executed == 0 and again.skipped == 9
    fresh = run_study(study, tmp_path / "fresh", workers=0, progress=False, plots=False)
    pd.testing.assert_frame_equal(again.table.drop(columns=["sim_wall_s"]),
                                  fresh.table.drop(columns=["sim_wall_s"]))


def test_same_results_on_one_and_two_workers(tmp_path, cluster):
    study = make_study(tmp_path / "s")
    one = run_study(study, tmp_path / "one", workers=0, progress=False, plots=False)
    two = run_study(study, tmp_path / "two", scheduler=cluster, progress=False, plots=False)
    assert two.workers == 2 and two.executed == 9
    cols = ["run", "status", "error", "seed", "msd.stiffness", *METRICS]
    pd.testing.assert_frame_equal(one.table[cols], two.table[cols])
    resumed = run_study(study, tmp_path / "two", scheduler=cluster, progress=False, plots=False)
    assert resumed.executed == 0 and resumed.skipped == 9


def test_same_results_on_threads_of_this_process(tmp_path, monkeypatch):
    """The default for a small study: a thread per core here.  Two structures (head.order)
    and an unstable variant run on two threads give the table of one run after another."""
    import hapflow.study.runner as runner
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    study = make_study(tmp_path / "s", batch="off", text=STUDY.replace(
        "  seed: [1, 2, 3]\n", "  seed: [1, 2]\n  head.order: [1, 3]\n"))
    one = run_study(study, tmp_path / "one", workers=0, progress=False, plots=False)
    threads = run_study(study, tmp_path / "threads", progress=False, plots=False)
    assert (threads.workers, threads.threads, threads.executed) == (0, 2, 12)
    assert list(one.table["status"]) == ["ok"] * 8 + ["failed"] * 4
    cols = ["run", "status", "error", "seed", "msd.stiffness", "head.order", *METRICS]
    pd.testing.assert_frame_equal(one.table[cols], threads.table[cols], check_exact=True)


def test_ctrl_c_on_threads_keeps_the_runs_that_ended_and_drops_the_others(tmp_path,
                                                                           monkeypatch):
    """Ctrl-C in one thread's run (the spy raises KeyboardInterrupt in run 4) reaches the
    caller; the runs that ended are recorded (the other thread's may end too), run 4 is not,
    and a rerun completes the study with the table of one run after another."""
    import hapflow.study.runner as runner
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    study = make_study(tmp_path / "s", batch="off")
    out = tmp_path / "out"
    monkeypatch.setenv("HF_STUDY_TEST_INTERRUPT", "4")
    with pytest.raises(KeyboardInterrupt):
        run_study(study, out, progress=False, plots=False)
    status = list(pd.read_parquet(out / "results.parquet")["status"])
    assert status[:5] == ["ok"] * 4 + ["pending"]
    monkeypatch.delenv("HF_STUDY_TEST_INTERRUPT")
    resumed = run_study(study, out, progress=False, plots=False)
    assert resumed.executed == status.count("pending") and resumed.skipped == 9 - resumed.executed
    fresh = run_study(study, tmp_path / "fresh", workers=0, progress=False, plots=False)
    cols = ["run", "status", "error", "seed", "msd.stiffness", *METRICS]
    pd.testing.assert_frame_equal(resumed.table[cols], fresh.table[cols], check_exact=True)


def test_batched_study_equals_single_runs(tmp_path, cluster):
    cols = ["run", "status", "error", *METRICS]
    single = run_study(make_study(tmp_path / "a", "off"), tmp_path / "a/out", workers=0,
                       progress=False, plots=False).table
    batched = run_study(make_study(tmp_path / "b", "on"), tmp_path / "b/out", workers=0,
                        progress=False, plots=False).table
    assert set(batched.loc[batched["msd.stiffness"] == 200.0, "path"]) == {"batch"}
    pd.testing.assert_frame_equal(single[cols], batched[cols], check_exact=True)
    remote = run_study(make_study(tmp_path / "c", "on"), tmp_path / "c/out", scheduler=cluster,
                       progress=False, plots=False).table
    pd.testing.assert_frame_equal(single[cols], remote[cols], check_exact=True)


@pytest.mark.parametrize("layout", ["lanes", "rows"])
@pytest.mark.parametrize("parallel", [False, True])
def test_batch_is_bit_identical_to_fresh_simulations(tmp_path, parallel, layout):
    graph_text = GRAPH.replace("msd.force_in", "drive.y")
    sim = hf.Simulation(hf.loads(graph_text))
    settings = [{"msd.stiffness": k, "ball.restitution": e, "head.force_noise": s}
                for k, e, s in [(100.0, 0.5, 0.0), (400.0, 0.7, 0.05), (900.0, 0.9, 0.2),
                                (-5.0, 0.5, 0.1), (250.0, 0.6, 0.01)]]
    seeds = [1, 2, 3, 4, 5]
    results = Batch(sim, parallel, layout).run(settings, seeds, duration=0.75)
    assert isinstance(results[3], hf.GraphError) and "stiffness" in str(results[3])
    for values, seed, got in zip(settings, seeds, results):
        if values["msd.stiffness"] < 0:
            continue
        g = hf.loads(graph_text)                  # a fresh graph with this run's values
        g.seed = seed
        for key, value in values.items():
            block, _, param = key.partition(".")
            g.nodes[block].block.set(param, value)
        want = hf.Simulation(g).run(0.75, progress=False)
        assert got.ticks == want.ticks == 3000
        np.testing.assert_array_equal(got.time, want.time)
        for name in want.signals:
            np.testing.assert_array_equal(got.signals[name], want.signals[name])
        assert got.events == want.events > 0 and got.event_overflows == want.event_overflows


# Every kernel inlined, no events, constant indices: the lanes kernel keeps f in locals;
# the unit delay brings discrete state, the encoder an integer signal (si).
LANES_GRAPH = """\
name: lanes
rate: 4000
duration: 1
blocks:
  drive: {type: Sine, amplitude: 2.0, frequency: 3.0, unit: N}
  step:  {type: Step, time: 0.1, initial: 0.0, final: 1.0, unit: N}
  msd:   {type: MassSpringDamper, mass: 0.5, damping: 3.0, stiffness: 400.0}
  enc:   {type: Encoder, resolution: 1.0e-5}
  delay: {type: UnitDelay}
wires:
  - drive.y -> msd.force
  - msd.pos -> enc.true_pos
  - enc.pos -> delay.u
record: [msd.pos, enc.pos, delay.y, step.y]
"""


@pytest.mark.parametrize("layout", ["lanes", "rows"])
@pytest.mark.parametrize("parallel", [False, True])
def test_lanes_and_rows_layouts_are_bit_identical_to_fresh_simulations(layout, parallel):
    sim = hf.Simulation(hf.loads(LANES_GRAPH))
    settings = [{"msd.stiffness": k, "drive.frequency": w, "enc.resolution": q}
                for k, w, q in [(100.0, 1.0, 1e-5), (400.0, 3.0, 1e-6), (-1.0, 2.0, 1e-5),
                                (900.0, 7.0, 5e-6), (250.0, 5.0, 2e-5)]]
    batch = Batch(sim, parallel, layout)
    assert batch.layout == layout
    results = batch.run(settings, [0] * 5, duration=0.5)
    assert isinstance(results[2], hf.GraphError)
    for values, got in zip(settings, results):
        if values["msd.stiffness"] < 0:
            continue
        g = hf.loads(LANES_GRAPH)
        for key, value in values.items():
            block, _, param = key.partition(".")
            g.nodes[block].block.set(param, value)
        want = hf.Simulation(g).run(0.5, progress=False)
        for name in want.signals:
            np.testing.assert_array_equal(got.signals[name], want.signals[name])


def test_auto_layout_is_timed_between_lanes_and_rows(monkeypatch):
    sim = hf.Simulation(hf.loads(LANES_GRAPH))
    timed = []
    trial = Batch._trial
    monkeypatch.setattr(Batch, "_trial", lambda self, item: timed.append(item[0]) or
                        trial(self, item))
    assert Batch(sim, False).layout in ("lanes", "rows") and sorted(timed) == ["lanes", "rows"]
    timed.clear()
    assert Batch(sim, False, "lanes").layout == "lanes" and timed == []   # nothing to choose


def test_batch_reports_a_non_finite_run_and_keeps_the_others():
    sim = hf.Simulation(hf.loads(GRAPH.replace("msd.force_in", "drive.y")))
    out = Batch(sim, parallel=False).run([{"msd.stiffness": 1e9}, {"msd.stiffness": 400.0}],
                                         [1, 1], duration=0.1)
    assert isinstance(out[0], SimulationError) and "non-finite" in str(out[0])
    assert np.all(np.isfinite(out[1].signals["msd.pos"]))


def test_structural_parameters_compile_one_kernel_per_structure(tmp_path):
    text = STUDY.replace("  msd.stiffness: [200.0, 800.0, 1.0e9]    # 1e9: RK4 unstable at "
                         "4 kHz\n", "  head.order: [1, 3]\n"
                         "  msd.stiffness: [200.0, 800.0]\n").replace("seed: [1, 2, 3]",
                                                                       "seed: [4]")
    study = make_study(tmp_path / "s", batch="off", text=text)
    assert [p.live for p in study.parameters] == [False, True, True]
    t = run_study(study, tmp_path / "out", workers=0, progress=False, plots=False).table
    assert (t["status"] == "ok").all() and len(t) == 4
    for _, row in t.iterrows():
        g = build_graph(study.graph_text, str(study.graph_path), {"head.order": int(row["head.order"])})
        assert g.nodes["head"].block.order == row["head.order"]
        g.seed = 4
        sim = hf.Simulation(g)
        sim.set("msd.stiffness", row["msd.stiffness"])
        r = sim.run(0.5, progress=False)
        assert row["force_rms"] == pytest.approx(np.sqrt(np.mean(r["head.force"][:, 0] ** 2)),
                                                 rel=1e-12)
    # a first-order and a third-order charge amplifier filter the noise differently
    assert t.groupby("msd.stiffness")["force_rms"].nunique().eq(2).all()


def test_command_line(tmp_path, capsys):
    study = make_study(tmp_path / "s")
    parser = argparse.ArgumentParser(prog="hapflow")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["study", str(study.file), "--workers", "0", "--out",
                              str(tmp_path / "out"), "--allow", "tests", "--no-progress"])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "9 runs: 6 ok, 3 failed; 9 run now in this process" in text
    assert (tmp_path / "out" / "results.parquet").exists()
    from hapflow import cli
    if "study" in cli.parser()._subparsers._group_actions[0].choices:
        assert cli.main(["study", str(study.file), "--workers", "0", "--out",
                         str(tmp_path / "out"), "--allow", "tests", "--no-progress"]) == 0
        assert "0 run now" in capsys.readouterr().out
        (tmp_path / "bad.yaml").write_text("graph: nowhere.yaml\nparameters: {}\nmetrics: {}\n")
        assert cli.main(["study", str(tmp_path / "bad.yaml"), "--workers", "0"]) == 2
        assert "bad.yaml:1: graph file 'nowhere.yaml' not found" in capsys.readouterr().err


def test_a_cached_kernel_forgets_the_live_values_of_earlier_jobs():
    from hapflow.study.execute import Job, execute
    text = GRAPH.replace("msd.force_in", "drive.y")
    metrics = {"pos": {"kind": "stat", "stat": "rms", "signal": "msd.pos", "index": None,
                       "after": 0.0}}
    other = execute(Job(text, "stand.yaml", {}, [(0, {"msd.damping": 50.0}, 1)], 0.3, metrics))
    mine = execute(Job(text, "stand.yaml", {}, [(0, {"msd.stiffness": 300.0}, 1)], 0.3, metrics))
    g = hf.loads(text)
    g.nodes["msd"].block.set("stiffness", 300.0)          # damping stays the file's 3.0
    g.seed = 1
    want = hf.Simulation(g).run(0.3, progress=False)["msd.pos"][:, 0]
    assert mine[0]["metrics"]["pos"] == pytest.approx(np.sqrt(np.mean(want ** 2)), rel=1e-12)
    assert other[0]["metrics"]["pos"] != mine[0]["metrics"]["pos"]
