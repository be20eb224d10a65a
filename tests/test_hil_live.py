"""Live parameters during a paced HIL run: applied at a tick, recorded, validated by the block."""
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import hapflow as hf
from hapflow.errors import GraphError, HapflowError
from hapflow.hil import safety
from hapflow.hil.live import parse
from hapflow.hil.runner import HilRunner
from hapflow.hil.simdaq import SimDaq
from hapflow.yamlio import loads

from .children import expect_line

ROOT = Path(__file__).resolve().parents[1]
TESTBED = ROOT / "graphs" / "hil_testbed.yaml"
COUNT = 5e-6            # the encoder's resolution (m)


def bed(edit=lambda text: text):
    return loads(edit(TESTBED.read_text()), str(TESTBED))


def delayed_bed():
    """--mode sim's equivalent of the HIL path: one sample of transport delay to the motor
    (see tests/test_hil_runner.py)."""
    return bed(lambda t: t.replace("blocks:\n", "blocks:\n  dly: {type: UnitDelay}\n")
               .replace("pid.force_cmd -> motor.force_cmd",
                        "pid.force_cmd -> dly.u\n  - dly.y -> motor.force_cmd"))


def offline(ticks: int, change_at: int | None, kp: float) -> dict:
    """The delayed bed simulated for ``ticks``, ``pid.kp`` set to ``kp`` at ``change_at``."""
    sim = hf.Simulation(delayed_bed())
    if change_at is None:
        return sim.run(ticks / 1000.0)
    first = sim.run(change_at / 1000.0)
    sim.set("pid.kp", kp)
    rest = sim.run((ticks - change_at) / 1000.0)
    return {k: np.concatenate([first[k], rest[k]]) for k in ("enc.pos", "pid.force_cmd")}


def live_run(tmp_path, requests, duration, after, paced):
    """A run of the bed with ``requests`` ((key, value), ...) made from another thread
    ``after`` s into it; returns the result and the answers (changes or errors)."""
    runner = HilRunner(bed(), SimDaq(bed(), seed=1, paced=paced),
                       safety.Policy(max_lateness=1.0, max_overruns=100000))
    answers = []

    def ask():
        time.sleep(after)
        for key, value in requests:
            try:
                answers.append(runner.live.request(key, value))
            except HapflowError as exc:
                answers.append(exc)
    started = lambda rt: threading.Thread(target=ask, daemon=True).start()
    return runner.run(duration, out=tmp_path / "run.h5", on_start=started), answers


class HeldDaq(SimDaq):
    """The unpaced card, holding its sample clock at edge ``hold`` until ``live`` has a
    change staged: a request made once the loop is there lands at that tick, whatever the
    load on the machine (the virtual clock loses no edge while it waits)."""

    def __init__(self, graph, hold: int, **kwargs):
        super().__init__(graph, seed=1, paced=False, **kwargs)
        self.hold, self.waits, self.live = hold, 0, None
        self.there = threading.Event()

    def wait(self) -> bool:
        if self.waits == self.hold:
            self.there.set()
            end = time.monotonic() + 60
            while not self.live.ready[0] and time.monotonic() < end:
                time.sleep(0.0005)
        self.waits += 1
        return super().wait()


def test_live_gain_change_lands_at_its_tick_and_changes_the_trajectory_from_there(tmp_path):
    """On the unpaced card (a virtual sample clock: no edge missed, so --mode sim reproduces
    it; paced, this VM's stalls run edges on interpolated inputs), a change asked for from
    another thread while the loop waits for the edge of tick ``hold``.  Doubling kp moves
    the command at once by 2000 N/m times the tracking error, which crosses zero twice a
    period: ``hold`` is where that error is largest, so the tick the loop records is told
    apart from its neighbours (over 0.5 N)."""
    total = 6000
    plain = offline(total, None, 0.0)
    error = np.abs(plain["traj.y"] - plain["enc.pos"])[:, 0]
    hold = 1000 + int(np.argmax(error[1000:4000])) + 1    # a tick early: largest error
    card = HeldDaq(bed(), hold)
    runner = HilRunner(bed(), card, safety.Policy(max_lateness=1.0, max_overruns=100000))
    card.live = runner.live
    answers = []

    def ask():
        card.there.wait(60)
        answers.append(runner.live.request("pid.kp", 4000.0))
    asking = lambda settings: threading.Thread(target=ask, daemon=True).start()
    result = runner.run(total / 1000, out=tmp_path / "run.h5", on_start=asking)
    assert result.event is None and result.ticks == total
    (change,) = answers
    tick = change.tick
    assert tick == hold, change         # the loop applies it at the first tick it starts
    here = offline(total, tick, 4000.0)
    early = offline(total, tick - 1, 4000.0)
    assert 0 < tick < total - 300, change
    assert (change.block, change.parameter, change.old, change.new) == ("pid", "kp", 2000.0, 4000.0)
    with hf.recorder.h5py.File(result.path) as f:
        live = f["hil/live"]
        assert live["tick"][:].tolist() == [tick]
        assert [live[k].asstr()[0] for k in ("block", "parameter", "old", "new")] == \
            ["pid", "kp", "2000.0", "4000.0"]
    rec = hf.recorder.load(result.path)
    # bounds as in test_hil_path_equals_sim_with_one_sample_of_transport_delay: the card's
    # 16-bit DAC now and then moves the encoder by a count (over these 6 s, two at times),
    # and a count moves the command by (kp + kd (1 - a) / Ts) 5 um = 0.02 + 0.093 N at kp 4000
    counts = np.abs(rec["enc.pos"] - here["enc.pos"]) / COUNT
    assert counts.max() <= 2.0 + 1e-9 and counts.mean() < 0.3
    assert np.abs(rec["pid.force_cmd"] - here["pid.force_cmd"]).max() < 0.16
    # a tick off is told apart: at the tick in between, the two differ by over 0.5 N
    for other in (tick - 1, tick + 1):
        there = early if other < tick else offline(total, other, 4000.0)
        step = np.abs(there["pid.force_cmd"] - here["pid.force_cmd"])[min(tick, other), 0]
        assert np.abs(rec["pid.force_cmd"] - there["pid.force_cmd"]).max() > step - 0.16 > 0.3
    # and the trajectory is the unchanged one before the tick, another one after it
    gap = np.abs(rec["enc.pos"] - plain["enc.pos"]) / COUNT
    assert gap[:tick].max() <= 2.0 + 1e-9 and gap[tick:].max() > 20


def test_invalid_and_unknown_values_are_rejected_and_not_applied_in_a_paced_run(tmp_path):
    result, answers = live_run(tmp_path, [("pid.kp", -5.0), ("pid.nope", 1.0),
                                          ("pid.kp", "fast"), ("pid.kp", 2500.0)], 0.6, 0.2,
                               True)
    assert result.event is None
    bad, unknown, text, good = answers
    assert isinstance(bad, GraphError) and "block 'pid'" in str(bad) and "kp" in str(bad)
    assert isinstance(unknown, GraphError) and "unknown parameter 'nope'" in str(unknown)
    assert isinstance(text, GraphError)
    assert good.old == 2000.0 and good.new == 2500.0      # the rejected ones left kp alone
    with hf.recorder.h5py.File(result.path) as f:
        assert f["hil/live/tick"][:].tolist() == [good.tick]


def test_request_outside_a_run_is_refused():
    runner = HilRunner(bed(), SimDaq(bed(), seed=1, paced=False))
    with pytest.raises(HapflowError, match="not running"):
        runner.live.request("pid.kp", 3000.0)


def test_parse_lines():
    assert parse(" pid.kp = 4000\n") == ("pid.kp", 4000)
    assert parse("traj.amplitude=[1, 2]") == ("traj.amplitude", [1, 2])
    with pytest.raises(GraphError, match="block.param=value"):
        parse("kp 4000")


def test_cli_live_reads_changes_from_stdin(tmp_path, spawn):
    out = tmp_path / "run.h5"
    proc = spawn([sys.executable, "-m", "hapflow.cli", "run", str(TESTBED), "--mode", "hil",
                  "--duration", "2", "--out", str(out), "--live", "--max-lateness", "1",
                  "--max-overruns", "100000"],
                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"), cwd=ROOT)
    expect_line(proc, "real time: hil-testbed")
    expect_line(proc, "live parameters: type BLOCK.PARAM=VALUE")
    proc.stdin.write("pid.kp=-1\npid.kd = 45\n")
    proc.stdin.flush()
    rejected, applied = proc.stdout.readline(), proc.stdout.readline()
    assert rejected.startswith("live: rejected: block 'pid'"), rejected
    assert applied.startswith("live: tick ") and "pid.kd 40.0 -> 45.0" in applied, applied
    tick = int(applied.split()[2].rstrip(":"))
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    with hf.recorder.h5py.File(out) as f:
        assert f["hil/live/tick"][:].tolist() == [tick]
        assert f["hil/live/new"].asstr()[0] == "45.0"
