"""A study on Dask workers that are missing or die (hapflow/study/runner.py).

Each test starts its own small LocalCluster: the workers are killed on purpose.
"""
import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cloudpickle
import dask
import pandas as pd
import pytest
from distributed import LocalCluster, WorkerPlugin

from hapflow.errors import HapflowError
from hapflow.study import load_study, run_study

GRAPH = """\
name: stand
rate: 1000
duration: 0.2
blocks:
  drive: {type: Sine, amplitude: 2.0, frequency: 3.0, unit: N}
  msd:   {type: MassSpringDamper, mass: 0.5, damping: 3.0, stiffness: 400.0}
wires:
  - drive.y -> msd.force
record: [msd.pos]
"""
STUDY = """\
name: stand-study
graph: stand.yaml
batch: off
parameters:
  msd.stiffness: {values}
metrics:
  pos_rms: {rms: msd.pos}
"""

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the plugin runs in the workers


class Killer(WorkerPlugin):
    """Kills its worker process when a task starts, ``deaths`` times in all (counted in a file,
    since the process that counts dies)."""

    def __init__(self, counter: str, deaths: int):
        self.counter, self.deaths = counter, deaths

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing":
            return
        path = Path(self.counter)
        died = len(path.read_text()) if path.exists() else 0
        if died < self.deaths:
            path.write_text("x" * (died + 1))
            os._exit(1)


def make_study(folder: Path, values: str = "[200.0, 400.0, 800.0]"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stand.yaml").write_text(GRAPH)
    (folder / "study.yaml").write_text(STUDY.replace("{values}", values))
    return load_study(folder / "study.yaml")


def cluster(workers: int) -> LocalCluster:
    # one death is a lost task at once (Dask's own retries off): the runner's bound is tested
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                            dashboard_address=":0", silence_logs=logging.CRITICAL)


def test_a_scheduler_without_workers_is_an_error_not_a_wait(tmp_path):
    with cluster(0) as empty:
        with pytest.raises(HapflowError, match="has no workers.*within 1 s.*dask worker"):
            run_study(make_study(tmp_path), tmp_path / "out", scheduler=empty.scheduler_address,
                      progress=False, plots=False, worker_timeout=1.0)


def test_no_scheduler_at_the_address_is_an_error(tmp_path):
    with pytest.raises(HapflowError, match="no Dask scheduler answered at tcp://127.0.0.1:9"):
        run_study(make_study(tmp_path), tmp_path / "out", scheduler="tcp://127.0.0.1:9",
                  progress=False, plots=False, worker_timeout=1.0)


@pytest.fixture(scope="module")
def one_worker():
    with cluster(1) as c, c.get_client() as client:
        yield c.scheduler_address, client


def test_a_dead_worker_is_retried_and_its_runs_end_ok(tmp_path, one_worker):
    address, client = one_worker
    counter = tmp_path / "deaths"
    client.register_plugin(Killer(str(counter), 2), name="killer")
    try:
        result = run_study(make_study(tmp_path), tmp_path / "out", scheduler=address,
                           progress=False, plots=False)
    finally:
        client.unregister_worker_plugin("killer")
    assert counter.read_text() == "xx"                     # two deaths, then the job ran
    assert list(result.table["status"]) == ["ok"] * 3


def test_a_job_that_keeps_killing_its_worker_is_recorded_as_died_and_rerun(tmp_path, one_worker):
    address, client = one_worker
    counter = tmp_path / "deaths"
    client.register_plugin(Killer(str(counter), 100), name="killer")
    study = make_study(tmp_path, "[400.0]")            # one job: its attempts are the deaths
    try:
        result = run_study(study, tmp_path / "out", scheduler=address, progress=False,
                           plots=False)
    finally:
        client.unregister_worker_plugin("killer")
    assert len(counter.read_text()) == 3                    # the first try and two retries
    assert list(result.table["status"]) == ["died"] and result.failed == 1
    assert "worker running this job died; 3 attempts" in result.table["error"][0]
    assert "1 lost with their worker" in result.summary()
    # the nanny restarts the killed worker, which imports hapflow again: under load 12 that
    # took longer than the default 30 s wait for a worker (the test failed there)
    again = run_study(study, tmp_path / "out", scheduler=address, progress=False, plots=False,
                      worker_timeout=300.0)
    assert again.skipped == 0 and list(again.table["status"]) == ["ok"]


def test_a_small_study_runs_in_this_process_on_a_thread_per_core_by_default(tmp_path,
                                                                            monkeypatch):
    """Nine 0.2 s runs take milliseconds: a cluster's start-up would cost seconds.  The runs
    after the first go to two threads here and give the metrics of one run after another."""
    import hapflow.study.runner as runner
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    study = make_study(tmp_path, str([100.0 * k for k in range(1, 10)]))
    result = run_study(study, tmp_path / "out", progress=False, plots=False)
    assert (result.workers, result.threads, result.executed) == (0, 2, 9)
    assert "9 run now in this process on 2 threads" in result.summary()
    one = run_study(study, tmp_path / "one", workers=0, progress=False, plots=False)
    assert one.threads == 1 and list(one.table["status"]) == ["ok"] * 9
    assert list(result.table["pos_rms"]) == list(one.table["pos_rms"])


def test_jobs_running_at_once_never_share_a_simulation(tmp_path, monkeypatch):
    """Two jobs of one structure on two threads: each borrows its own simulation (one left
    idle by an earlier job, one built), or their runs would overwrite each other's state."""
    import hapflow.study.execute as execute
    from hapflow.study.runner import expand, jobs
    study = make_study(tmp_path)
    first, *two = jobs(study, expand(study), workers=2, parallel=False)
    assert [len(job.runs) for job in two] == [1, 1]
    assert execute.execute(first)[0]["status"] == "ok"          # leaves its simulation idle
    seen, meeting, single = [], threading.Barrier(2, timeout=60), execute._single

    def together(entry, *args):
        seen.append(entry.sim)
        meeting.wait()                                        # both jobs are running now
        return single(entry, *args)
    monkeypatch.setattr(execute, "_single", together)
    with ThreadPoolExecutor(2) as pool:
        records = [r for f in [pool.submit(execute.execute, job) for job in two]
                   for r in f.result()]
    assert [r["status"] for r in records] == ["ok", "ok"]
    assert seen[0] is not seen[1]


def test_a_study_whose_runs_outlast_the_start_up_goes_to_a_cluster(tmp_path, monkeypatch):
    import hapflow.study.runner as runner
    monkeypatch.setattr(runner, "CLUSTER_STARTUP", 0.0)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    result = run_study(make_study(tmp_path), tmp_path / "out", progress=False, plots=False)
    assert result.workers == 2 and result.executed == 3 and result.skipped == 0
    assert list(result.table["status"]) == ["ok"] * 3


class Quitter(WorkerPlugin):
    """Kills its worker when a task starts (noting it in a file): the nanny, told to close
    gracefully, does not start another."""

    def __init__(self, note: str):
        self.note = note

    def transition(self, key, start, finish, **kwargs):
        if finish == "executing":
            Path(self.note).write_text(key)
            os._exit(1)


def test_a_cluster_that_lost_every_worker_is_an_error_naming_the_runs_not_a_wait(tmp_path):
    """Run 0 is recorded in this process; runs 1 and 2 go to a cluster whose one worker dies
    and is not restarted: their jobs wait for a worker that never comes.  Before the runner
    bounded this wait, run_study never returned."""
    first = run_study(make_study(tmp_path, "[200.0]"), tmp_path / "out", workers=0,
                      progress=False, plots=False)
    assert list(first.table["status"]) == ["ok"]
    study = make_study(tmp_path)                    # 200, 400, 800: run 0 is in the log
    with cluster(1) as c, c.get_client() as client:
        for nanny in c.workers.values():
            nanny.close_gracefully()
        client.register_plugin(Quitter(str(tmp_path / "killed")), name="quitter")
        with pytest.raises(HapflowError, match=r"no workers for 2 s.*runs 1, 2 have not "
                                               r"run.*resumes"):
            run_study(study, tmp_path / "out", scheduler=c.scheduler_address, progress=False,
                      plots=False, lost_timeout=2.0)
    assert (tmp_path / "killed").exists()
    table = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert list(table["status"]) == ["ok", "pending", "pending"]   # the recorded run is kept
    again = run_study(study, tmp_path / "out", workers=0, progress=False, plots=False)
    assert again.skipped == 1 and list(again.table["status"]) == ["ok"] * 3
