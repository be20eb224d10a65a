"""The hardware watchdog: NI-DAQmx's documented timer semantics, the simulated cards that
implement them, and a loop that is killed or stopped leaving the outputs in the safe state.

NI-DAQmx Help, "Watchdog Timers": the application must reset the timer before its
timeout; when it expires the channels go to their expiration states and the device
ignores writes to them until the expiration is cleared.  X Series User Manual: the
watchdog "can be set for all DIO and PFI lines".
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from hapflow.errors import GraphError, HapflowError
from hapflow.hil import safety
from hapflow.hil.bindings import bind
from hapflow.hil.cardwatchdog import WatchdogTimer
from hapflow.hil.grpc_card import SimCard
from hapflow.hil.grpc_sim import serve_card, sim_card
from hapflow.hil.runner import HilRunner
from hapflow.hil.simdaq import SimDaq
from hapflow.hil.simrig import Fault, SimRig
from hapflow.yamlio import loads

from .children import expect_line

ROOT = Path(__file__).resolve().parents[1]
TESTBED = ROOT / "graphs" / "hil_testbed.yaml"
ACTIVE_LOW = "enable: {line: Dev1/port0/line0, active: low}"


def bed(active_low=False):
    text = TESTBED.read_text()
    if active_low:
        text = text.replace("enable: Dev1/port0/line0", ACTIVE_LOW)
    return loads(text, str(TESTBED))


# ---------------------------------------------------------------- the timer's semantics
def test_the_timer_expires_a_timeout_after_the_last_reset_and_holds_the_outputs():
    ms = 1_000_000                                   # card time in ns
    t = WatchdogTimer(0.05)
    t.ao_states, t.do_states = {1: -0.5}, {0: True}
    ao, do = np.array([3.0, 4.0]), np.array([False, False])
    t.start(10_000 * ms)
    assert not t.poll(10_049 * ms, ao, do)
    t.reset(10_040 * ms)                             # petted: the deadline moves
    assert not t.poll(10_089 * ms, ao, do) and t.deadline == 10_090 * ms
    assert t.poll(10_095 * ms, ao, do)
    assert t.expired_at == 10_090 * ms and t.held_at == 10_095 * ms
    np.testing.assert_array_equal(ao, [3.0, -0.5])   # only the channels it covers
    np.testing.assert_array_equal(do, [True, False])
    assert t.guards("ao", 1) and t.guards("do", 0) and not t.guards("ao", 0)
    t.reset(10_200 * ms)                             # a reset does not undo an expiry
    assert t.expired and t.poll(10_200 * ms, ao, do)
    t.clear(10_300 * ms)                             # clearing the expiration does
    assert not t.expired and not t.guards("do", 0) and t.deadline == 10_350 * ms


def test_a_negative_timeout_never_expires():
    t = WatchdogTimer(-1)
    t.start(0.0)
    assert not t.poll(10 ** 18, np.zeros(0), np.zeros(0, bool)) and t.deadline == np.inf


# ---------------------------------------------------------------- the gRPC card, driven by nidaqmx
class LineRig:
    """A rig that only latches the outputs (the card's registers are what is checked)."""

    def __init__(self, rate):
        pass

    def exchange(self, ao, do, ai, counts):
        pass


def test_the_grpc_card_implements_the_watchdog_task_as_nidaqmx_drives_it():
    import nidaqmx
    from nidaqmx.constants import Level, TaskMode, WatchdogAOExpirState
    from nidaqmx.errors import DaqError
    from nidaqmx.stream_writers import DigitalMultiChannelWriter
    from nidaqmx.system.watchdog import WatchdogTask
    from nidaqmx.types import AOExpirationState, DOExpirationState

    from hapflow.hil.backend import Channel
    chans = [Channel("m.force_cmd", "ao", "Dev1/ao0", 1.0, 0.0, -10, 10, "V"),
             Channel("m.enable", "do", "Dev1/port0/line3", 1.0, 0.0, 0, 1, "")]
    card = SimCard(chans, LineRig, paced=False)
    server, port = serve_card(card)
    try:
        with grpc.insecure_channel(f"localhost:{port}") as channel:
            opts = nidaqmx.GrpcSessionOptions(channel, "")
            with nidaqmx.Task(grpc_options=opts) as task:
                task.do_channels.add_do_chan("Dev1/port0/line3")
                writer = DigitalMultiChannelWriter(task.out_stream, auto_start=False)
                writer.verify_array_shape = False
                line = lambda level: writer.write_one_sample_one_line(np.array([level]))
                with WatchdogTask("Dev1", timeout=0.5, grpc_options=opts) as wd:
                    wd.cfg_watchdog_do_expir_states([DOExpirationState("Dev1/port0/line3",
                                                                       Level.LOW)])
                    with pytest.raises(DaqError) as e:    # X Series: lines only
                        wd.cfg_watchdog_ao_expir_states([AOExpirationState(
                            "Dev1/ao0", 0.0, WatchdogAOExpirState.VOLTAGE)])
                    assert e.value.error_code == -200452
                    wd.control(TaskMode.TASK_COMMIT)
                    assert wd.timeout == 0.5
                    wd.start()
                    line(True)
                    for _ in range(50):                   # petted every 10 ms: it holds
                        time.sleep(0.01)
                        wd.reset_timer()
                    assert not wd.expired and card.do[0]
                    last = card.timer(wd.name).last_reset
                    for _ in range(500):
                        if wd.expired:
                            break
                        time.sleep(0.01)
                    timer = card.timer(wd.name)
                    assert wd.expired and timer.expired_at == last + 500_000_000
                    assert not card.do[0]                 # its expiration state
                    line(True)                        # ignored while expired
                    assert not card.do[0]
                    wd.clear_expiration()
                    line(True)
                    assert card.do[0]
    finally:
        server.stop(None)


# ---------------------------------------------------------------- a loop that dies or stops
def served(active_low):
    graph = bed(active_low)
    channels = bind(graph).channels
    card = sim_card(graph, channels, seed=graph.seed, paced=False)
    server, port = serve_card(card)
    return card, server, port, graph


TIMEOUT = 2.0           # the loop's lateness bound is 1 s: a loaded CI host stalls for 0.3 s


def loop_against(spawn, port, tmp_path, active_low):
    graph = TESTBED
    if active_low:
        graph = tmp_path / "bed.yaml"
        graph.write_text(TESTBED.read_text().replace("enable: Dev1/port0/line0", ACTIVE_LOW))
    return spawn([sys.executable, "-m", "hapflow.cli", "run", str(graph), "--mode", "hil",
                  "--daq", "nidaqmx", "--grpc", f"localhost:{port}", "--duration", "60",
                  "--out", str(tmp_path / "run.h5"), "--max-lateness", "1",
                  "--max-overruns", "1000000", "--hw-watchdog", str(TIMEOUT)],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                 env=dict(os.environ, PYTHONUNBUFFERED="1"), cwd=ROOT)


def wait_for(condition, seconds=60.0):
    end = time.monotonic() + seconds
    while not condition() and time.monotonic() < end:
        time.sleep(0.002)
    return condition()


@pytest.mark.parametrize("how, active_low", [("kill", False), ("stop", True)])
def test_a_killed_or_stopped_loop_leaves_the_card_in_the_safe_state_within_the_timeout(
        tmp_path, spawn, how, active_low):
    """The card's watchdog (a thread of the gRPC server, outside the loop process) drives
    the enable line to its safe level -- low, or high for an active-low input -- at most
    the timeout after the loop stopped petting it; writes stay ignored after SIGCONT."""
    card, server, port, _ = served(active_low)
    try:
        proc = loop_against(spawn, port, tmp_path, active_low)
        expect_line(proc, "real time: hil-testbed")
        running = not active_low                             # the enable line while running
        timers = lambda: [t.watchdog for t in card.tasks() if t.watchdog is not None]
        assert wait_for(lambda: timers() and timers()[0].running and card.edge > 200
                        and card.do[0] == running), proc.stderr.read()
        timer = timers()[0]
        assert timer.timeout == TIMEOUT and timer.do_states == {0: not running}
        sig = signal.SIGKILL if how == "kill" else signal.SIGSTOP
        stopped = time.monotonic_ns()
        os.kill(proc.pid, sig)
        assert wait_for(lambda: timer.expired, 30.0)
        assert timer.expired_at <= stopped + TIMEOUT * 1e9   # in card time: within the timeout
        assert card.do[0] == (not running)                   # the amplifier is disabled
        if how == "stop":
            os.kill(proc.pid, signal.SIGCONT)               # it wakes up to an expired card
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 1 and "watchdog" in err, err
            assert card.do[0] == (not running)
        else:
            proc.wait(timeout=30)
    finally:
        server.stop(None)


# ---------------------------------------------------------------- the in-process simulated card
def test_a_stall_longer_than_the_timeout_disables_the_amplifier_at_the_expiry_edge(monkeypatch):
    """Unpaced (a virtual clock): the last pet is at a known edge, the stall of 0.2 s lets
    the card run its edges alone, and from the edge at pet + 0.05 s it holds the enable
    line off.  The loop finds out at its next pet.  With a timer longer than the stall the
    card keeps the amplifier on through it, as a card without a watchdog does."""
    policy = safety.Policy(max_overruns=10 ** 6, hardware_watchdog=0.05)   # unpaced: no lateness
    assert policy.pet_interval() == pytest.approx(0.0125)    # pets at edges 0, 13, ..., 91
    stall = Fault("late", 100, value=0.2)
    backend = SimDaq(bed(), [stall], seed=1, paced=False)
    lines = []                                              # the enable line at every edge
    exchange = SimRig.exchange
    monkeypatch.setattr(SimRig, "exchange", lambda rig, ao, do, ai, counts: (
        lines.append(bool(do[0])), exchange(rig, ao, do, ai, counts)))
    result = HilRunner(bed(), backend, policy).run(0.5)
    assert not lines[0] and all(lines[1:141]) and not any(lines[141:])    # edge 0: safe state
    wd = backend.watchdog
    assert wd is None                                       # disarmed when the card closed
    ev = result.event
    assert ev is not None and ev.kind == "hardware watchdog", ev
    assert "expired at t = 0.1410 s" in ev.message         # last pet (edge 91) + 50 ms
    assert ev.tick == 300                                   # the first pet after the stall

    never = safety.Policy(max_overruns=10 ** 6, hardware_watchdog=34.0)
    lines.clear()
    held = HilRunner(bed(), SimDaq(bed(), [stall], seed=1, paced=False), never).run(0.5)
    assert all(lines[1:300])            # the card held the amplifier on through the stall
    assert held.event.kind == "force limit" and held.event.tick == 300   # found afterwards


def test_the_safe_state_and_the_watchdog_follow_the_enable_polarity(tmp_path):
    """Active-low enable: the line is low while running and high in the safe state, and the
    run is the active-high run (the amplifier sees the same enable)."""
    high = SimDaq(bed(), seed=1, paced=False)
    low = SimDaq(bed(True), seed=1, paced=False)
    a = HilRunner(bed(), high).run(0.3, out=tmp_path / "high.h5")
    b = HilRunner(bed(True), low).run(0.3, out=tmp_path / "low.h5")
    assert a.event is None and b.event is None
    import hapflow as hf
    ra, rb = hf.recorder.load(a.path), hf.recorder.load(b.path)
    np.testing.assert_array_equal(ra["enc.pos"], rb["enc.pos"])
    assert np.abs(ra["motor.force_cmd"]).max() > 0.1
    assert list(high._do) == [False] and list(low._do) == [True]     # left in the safe state


def test_enable_polarity_is_checked_at_load():
    with pytest.raises(GraphError, match="enable active must be 'high'.*got 'up'") as e:
        bind(loads(TESTBED.read_text().replace(
            "enable: Dev1/port0/line0", "enable: {line: Dev1/port0/line0, active: up}"),
            str(TESTBED)))
    assert e.value.where.line == 32                  # the motor binding
    c = next(c for c in bind(bed(True)).channels if c.kind == "do")
    assert (c.safe, c.active) == (1.0, False)


def test_the_hardware_timeout_must_exceed_the_lateness_bound():
    assert safety.Policy().watchdog_timeout() == pytest.approx(0.1)
    assert safety.Policy(max_lateness=1e9).watchdog_timeout() == -1     # not in real time
    with pytest.raises(HapflowError, match="must exceed the lateness bound"):
        safety.Policy(max_lateness=0.02, hardware_watchdog=0.02)


def test_the_nidaqmx_backend_arms_the_watchdog_and_names_what_it_cannot_cover():
    """One committed watchdog task on the device: the enable line's expiration state is its
    safe level; the X Series refuses an analog one, which the backend reports instead of
    failing; the analog output idles at 0 V; close clears the task and stops the timer."""
    from hapflow.hil.grpc_card import IDLE_ZERO_VOLTS
    from hapflow.hil.nidaq import NidaqBackend
    channels = bind(bed()).channels
    card = SimCard(channels, LineRig, paced=False)
    server, port = serve_card(card)
    backend = NidaqBackend(f"localhost:{port}")
    try:
        backend.open(channels, 1000.0)
        backend.arm_watchdog(0.5)
        backend.start()
        (timer,) = [t.watchdog for t in card.tasks() if t.watchdog is not None]
        assert (timer.timeout, timer.running, timer.do_states, timer.ao_states) == (
            0.5, True, {0: False}, {})
        assert backend.watchdog_note == ("Dev1/ao0 is not covered by the Dev1 watchdog "
                                         "(digital lines only)")
        (ao,) = [t for t in card.tasks() if t.kind == "ao"]
        assert ao.chans[0].idle == IDLE_ZERO_VOLTS
        before = timer.last_reset
        backend.pet()
        assert timer.last_reset > before and not timer.expired
    finally:
        backend.close()
        server.stop(None)
    assert card.tasks() == [] and not timer.running
