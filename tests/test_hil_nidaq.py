"""The nidaqmx backend, driven by the real ``nidaqmx`` package against the simulated gRPC server.

Most tests put a closed-form rig behind the server (:class:`EchoRig`), so
every value read can be predicted from the values written; one runs the
Colton graph's real :class:`SimRig` and checks that the gRPC path delivers
exactly what the rig gives when called directly.
"""
from __future__ import annotations

import ctypes.util
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from nidaqmx._stubs import nidaqmx_pb2, nidaqmx_pb2_grpc
from session_pb2 import Session

from hapflow.hil.backend import Backend, Channel, DaqError, by_kind
from hapflow.hil.grpc_card import SimCard
from hapflow.hil.grpc_sim import serve, serve_card
from hapflow.hil.nidaq import NO_DRIVER, NidaqBackend, list_devices

from .children import expect_line

RATE = 1000.0


def chan(port: str, kind: str, physical: str, low: float = -10.0, high: float = 10.0) -> Channel:
    return Channel(port, kind, physical, 1.0, 0.0, low, high, "V")


CHANNELS = [chan("head.force", "ai", "Dev1/ai0"), chan("head.accel", "ai", "Dev1/ai3", -5, 5),
            chan("enc.pos", "ci_encoder", "Dev1/ctr0"), chan("motor.force_cmd", "ao", "Dev1/ao0"),
            chan("motor.enable", "do", "Dev2/port0/line2")]


class EchoRig:
    """A rig in closed form: at edge n, ai0 = 0.5 ao0, ai1 = 0.01 n, counts -3 n (enabled) or 7.

    ``fail_at`` raises the rig's DaqError at that edge (an injected DAQ error);
    ``drop_at`` reports that sample dropped (an injected timing fault).
    """

    def __init__(self, rate: float, fail_at: int = -1, drop_at: int = -1):
        self.rate, self.n, self.fail_at, self.drop_at = rate, 0, fail_at, drop_at

    def timing_fault(self, tick: int) -> tuple[float, bool]:
        return 0.0, tick == self.drop_at

    def exchange(self, ao, do, ai, counts):
        if self.n == self.fail_at:
            raise DaqError(f"simulated DAQ error at sample {self.n} (injected fault)", "Dev1/ai0")
        ai[0] = 0.5 * ao[0]
        ai[1] = 0.01 * self.n
        counts[0] = -3 * self.n if do[0] else 7
        self.n += 1


class CallLog(grpc.ServerInterceptor):
    """Records the name of every gRPC call the server receives."""

    def __init__(self):
        self.calls: list[str] = []

    def intercept_service(self, continuation, details):
        self.calls.append(details.method.rsplit("/", 1)[1])
        return continuation(details)


def start_server(paced: bool, make_rig=EchoRig, channels=CHANNELS):
    log = CallLog()
    card = SimCard(channels, make_rig, paced=paced)
    server, port = serve_card(card, interceptors=[log])
    return card, server, f"localhost:{port}", log


@pytest.fixture(scope="module")
def free():
    """A free-running server: one sample per wait, no real-time pacing."""
    card, server, address, log = start_server(paced=False)
    yield card, address, log
    server.stop(None)


@pytest.fixture
def backend(free):
    b = NidaqBackend(free[1])
    yield b
    b.close()


def opened(b: NidaqBackend, channels=CHANNELS, rate=RATE) -> NidaqBackend:
    b.open(channels, rate)
    b.start()
    return b


def test_devices_are_listed_through_the_server(free):
    import nidaqmx.system

    assert list_devices(free[1]) == ["Dev1", "Dev2"]
    with grpc.insecure_channel(free[1]) as channel:
        dev = nidaqmx.system.System.remote(nidaqmx.GrpcSessionOptions(channel, "")).devices["Dev1"]
        assert (dev.product_type, dev.is_simulated) == ("PCIe-6351", True)
        assert dev.ai_physical_chans.channel_names[-1] == "Dev1/ai15"
        assert dev.do_lines.channel_names[0] == "Dev1/port0/line0"
        assert dev.ci_physical_chans.channel_names == [f"Dev1/ctr{i}" for i in range(4)]


def test_channels_and_timing_are_configured_as_hardware_timed_single_point(free, backend):
    card = free[0]
    before = len(card.tasks())
    opened(backend)
    tasks = card.tasks()[before:]
    assert [(t.kind, [c.physical for c in t.chans]) for t in tasks] == [
        ("ai", ["Dev1/ai0", "Dev1/ai3"]), ("ci_encoder", ["Dev1/ctr0"]), ("ao", ["Dev1/ao0"]),
        ("do", ["Dev2/port0/line2"])]
    ai, ci, ao, do = tasks
    assert (ai.rate, ai.master) == (RATE, True)           # master: onboard sample clock
    assert (ci.rate, ci.master, ao.rate, ao.master) == (RATE, False, RATE, False)  # ai/SampleClock
    assert do.rate is None                                 # on demand
    assert [(c.low, c.high) for c in ai.chans + ao.chans] == [(-10, 10), (-5, 5), (-10, 10)]
    assert ci.chans[0].divisor == 1 and ci.chans[0].per_count == 1.0   # X4, ticks
    assert all(t.started for t in tasks)
    backend.close()
    assert len(card.tasks()) == before                     # close clears every task


def test_reads_and_writes_follow_the_rig_one_driver_call_each(free, backend):
    card, _, log = free
    opened(backend)
    ai, counts = np.zeros(2), np.zeros(1, dtype=np.int64)
    first = card.edge
    log.calls.clear()
    for k in range(20):
        assert backend.wait() is False
        backend.read(ai, counts)
        n = card.edge - 1                                  # the rig's edge index of this sample
        assert n == first + k
        prev = 0.1 * (k - 1) if k else 0.0                 # written in the previous tick
        assert ai[0] == pytest.approx(0.5 * prev, abs=1e-15)
        assert ai[1] == pytest.approx(min(0.01 * n, 5.0))  # clipped to the channel's +-5 V
        assert counts[0] == (-3 * n if k and (k - 1) % 2 == 0 else 7)
        backend.write(np.array([0.1 * k]), np.array([k % 2 == 0]))
    assert log.calls == ["WaitForNextSampleClock", "ReadAnalogF64", "ReadCounterF64Ex",
                         "WriteAnalogF64", "WriteDigitalLines"] * 20


def test_the_enable_line_is_written_only_when_it_changes(free, backend):
    log = free[2]
    opened(backend)
    log.calls.clear()
    for enable in (True, True, True, False, False):
        backend.write(np.zeros(1), np.array([enable]))
    assert log.calls == ["WriteAnalogF64", "WriteDigitalLines", "WriteAnalogF64", "WriteAnalogF64",
                         "WriteAnalogF64", "WriteDigitalLines", "WriteAnalogF64"]
    assert free[0].do.tolist() == [False]


def test_safe_state_zeroes_the_outputs(free, backend):
    card = free[0]
    opened(backend)
    backend.write(np.array([3.0]), np.array([True]))
    assert card.ao.tolist() == [3.0] and card.do.tolist() == [True]
    backend.safe_state()
    assert card.ao.tolist() == [0.0] and card.do.tolist() == [False]


def test_a_write_outside_the_range_is_the_drivers_error_naming_the_channel(backend):
    opened(backend)
    with pytest.raises(DaqError, match=r"motor\.force_cmd \(Dev1/ao0\).*DAQmx error -200561"):
        backend.write(np.array([12.0]), np.array([True]))


def test_an_unknown_device_names_the_channel_and_lists_the_devices(backend):
    bad = [chan("head.force", "ai", "Dev9/ai0")] + CHANNELS[1:]
    with pytest.raises(DaqError) as err:
        backend.open(bad, RATE)
    msg = str(err.value)
    assert msg.startswith("head.force (Dev9/ai0): Device identifier is invalid.")
    assert "DAQmx error -200220" in msg and "devices present: Dev1, Dev2" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("kind,physical", [("ai", "Dev1/ai16"), ("ci_encoder", "Dev1/ctr7"),
                                           ("ao", "Dev1/ai1"), ("do", "Dev2/port3/line0")])
def test_an_unknown_channel_is_the_drivers_error_naming_it(free, backend, kind, physical):
    before = len(free[0].tasks())
    bad = CHANNELS + [chan("extra.port", kind, physical)]
    with pytest.raises(DaqError, match=rf"extra\.port \({physical}\): Physical channel specified "
                                       r"does not exist on this device.*DAQmx error -200170"):
        backend.open(bad, RATE)
    assert len(free[0].tasks()) == before                  # the failed open cleared its tasks


def test_an_injected_daq_error_reaches_the_client_as_a_driver_error():
    card, server, address, _ = start_server(False, lambda rate: EchoRig(rate, fail_at=3))
    b = NidaqBackend(address)
    try:
        opened(b, CHANNELS)
        for _ in range(3):
            b.wait()
        with pytest.raises(DaqError, match=r"head\.force \(Dev1/ai0\).*Device cannot be accessed"
                                           r".*injected fault.*DAQmx error -201003"):
            b.wait()
    finally:
        b.close()
        server.stop(None)


def test_a_dropped_sample_is_reported_late():
    card, server, address, _ = start_server(False, lambda rate: EchoRig(rate, drop_at=4))
    b = NidaqBackend(address)
    try:
        opened(b, CHANNELS)
        assert [b.wait() for _ in range(7)] == [False] * 4 + [True] + [False] * 2
    finally:
        b.close()
        server.stop(None)


def test_a_wait_longer_than_the_timeout_and_a_lost_server_are_clear_errors():
    card, server, address, _ = start_server(True)
    b = NidaqBackend(address, timeout=0.005)
    try:
        opened(b, CHANNELS, 20.0)                          # next edge 50 ms away
        with pytest.raises(DaqError, match=r"head\.force \(Dev1/ai0\).*operation timed out"
                                           r".*DAQmx error -200474"):
            b.wait()
        server.stop(None)
        with pytest.raises(DaqError, match=rf"NI gRPC device server at {address}: .*UNAVAILABLE"):
            b.wait()
    finally:
        b.close()
        server.stop(None)


def test_wait_for_next_sample_clock_detects_late_samples():
    rate = 50.0                                            # 20 ms: room for a loaded host
    card, server, address, _ = start_server(True)
    b = NidaqBackend(address)
    try:
        opened(b, CHANNELS, rate)
        on_time = [b.wait() for _ in range(10)]
        edge = card.edge
        late = []
        for _ in range(4):
            time.sleep(2.5 / rate)                         # the host stalls 2.5 periods
            late.append(b.wait())
        assert sum(on_time) <= 2                           # a loaded host may miss one or two
        assert late == [True] * 4
        assert card.edge - edge >= 4 * 2                   # the plant kept running meanwhile
    finally:
        b.close()
        server.stop(None)


def test_the_server_checks_array_sizes_as_the_driver_does(free):
    """With ``verify_array_shape`` off the driver itself rejects wrongly sized arrays."""
    import nidaqmx
    from nidaqmx.stream_readers import AnalogMultiChannelReader
    from nidaqmx.stream_writers import AnalogMultiChannelWriter

    with grpc.insecure_channel(free[1]) as channel:
        options = nidaqmx.GrpcSessionOptions(channel, "")
        with nidaqmx.Task(grpc_options=options) as ai, nidaqmx.Task(grpc_options=options) as ao:
            ai.ai_channels.add_ai_voltage_chan("Dev1/ai0:1")
            ao.ao_channels.add_ao_voltage_chan("Dev1/ao0")
            reader = AnalogMultiChannelReader(ai.in_stream)
            writer = AnalogMultiChannelWriter(ao.out_stream)
            reader.verify_array_shape = writer.verify_array_shape = False
            with pytest.raises(nidaqmx.DaqError) as err:
                reader.read_one_sample(np.zeros(1))
            assert err.value.error_code == -200229
            with pytest.raises(nidaqmx.DaqError) as err:
                writer.write_one_sample(np.zeros(2))
            assert err.value.error_code == -200524
            assert ai.channel_names == ["Dev1/ai0", "Dev1/ai1"]   # a channel range makes two


def test_the_grpc_wait_call_needs_a_timed_task(free):
    card = free[0]
    name = card.create_task("")
    card.add_channels(name, "ai", "Dev1/ai0", "", low=-1.0, high=1.0)
    with grpc.insecure_channel(free[1]) as channel:
        stub = nidaqmx_pb2_grpc.NiDAQmxStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.WaitForNextSampleClock(nidaqmx_pb2.WaitForNextSampleClockRequest(
                task=Session(name=name), timeout=1.0))
    assert dict(err.value.trailing_metadata())["ni-error"] == "-200077"
    card.clear_task(name)


def test_without_driver_or_server_the_user_gets_one_clear_message():
    if ctypes.util.find_library("nidaqmx"):
        pytest.skip("an NI-DAQmx driver is installed here")
    for attempt in (lambda: NidaqBackend().open(CHANNELS, RATE), lambda: list_devices()):
        with pytest.raises(DaqError) as err:
            attempt()
        assert str(err.value) == NO_DRIVER
        assert err.value.__cause__ is None and err.value.__suppress_context__
    assert "--grpc HOST:PORT" in NO_DRIVER and "--daq sim" in NO_DRIVER


def test_an_unreachable_server_and_a_bad_address_are_clear_errors():
    with pytest.raises(DaqError, match=r"NI gRPC device server at localhost:1: .*UNAVAILABLE"):
        list_devices("localhost:1")
    with pytest.raises(DaqError, match="--grpc must be HOST:PORT"):
        NidaqBackend("localhost")


def test_the_grpc_path_delivers_exactly_what_the_simulated_rig_gives():
    from hapflow.hil.bindings import bind
    from hapflow.hil.simrig import SimRig
    from hapflow.yamlio import load
    graph = load(Path(__file__).resolve().parents[1] / "graphs" / "colton2005_sweep.yaml")
    channels = bind(graph).channels
    server, port = serve(graph, channels, seed=3, paced=False)
    b = NidaqBackend(f"localhost:{port}")
    direct = SimRig(graph, channels, graph.rate, 3)
    n = 400
    ao = 2.0 * np.sin(np.arange(n) * 2 * np.pi * 5 / graph.rate)   # 12 N, 5 Hz on the motor
    got, want = np.zeros((n, 3)), np.zeros((n, 3))
    ai, counts = np.zeros(2), np.zeros(1, dtype=np.int64)
    do = np.ones(1, dtype=bool)
    try:
        opened(b, channels, graph.rate)
        for k in range(n):
            b.wait()
            b.read(ai, counts)
            got[k] = *ai, counts[0]
            b.write(ao[k:k + 1], do)
    finally:
        b.close()
        server.stop(None)
    for k in range(n):
        written = (ao[k - 1:k], do) if k else (np.zeros(1), np.zeros(1, bool))   # 0 V, False first
        direct.exchange(*written, ai, counts)
        want[k] = *ai, counts[0]
    assert np.abs(want[:, 2]).max() > 100                  # the motor moved the device
    np.testing.assert_array_equal(got, want)


def test_the_local_driver_wait_calls_daqmx_through_ctypes(monkeypatch):
    """No driver here: a C function with DAQmxWaitForNextSampleClock's signature stands in."""
    from nidaqmx import errors
    from nidaqmx._lib import c_bool32, lib_importer

    from hapflow.hil.nidaq import _LibWaiter

    seen, replies = [], iter([(0, 0), (0, 1), (-209802, 0), (-200088, 0)])

    @ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_double, ctypes.POINTER(c_bool32))
    def wait_for_next_sample_clock(handle, timeout, is_late):
        status, late = next(replies)
        seen.append((handle, timeout))
        is_late[0] = late
        return status

    class Library:
        DAQmxWaitForNextSampleClock = wait_for_next_sample_clock

    class Interpreter:
        def check_for_error(self, code):
            raise errors.DaqError("Task specified is invalid or does not exist.", code)

    class Task:
        _handle, _interpreter = ctypes.c_void_p(0x5EED), Interpreter()

    wait_for_next_sample_clock.arg_lock = threading.Lock()
    monkeypatch.setattr(lib_importer, "_windll", Library())
    waiter = _LibWaiter(Task(), 0.25)
    assert [waiter.wait(), waiter.wait(), waiter.wait()] == [False, True, True]
    with pytest.raises(errors.DaqError, match="-200088"):
        waiter.wait()
    assert seen == [(0x5EED, 0.25)] * 4


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_the_serve_command_serves_a_graph_file_until_stopped(stop):
    graph = Path(__file__).resolve().parents[1] / "graphs" / "colton2005_sweep.yaml"
    code = f"from hapflow.hil.grpc_sim import run_server; run_server({str(graph)!r}, port=0)"
    proc = subprocess.Popen([sys.executable, "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = expect_line(proc, "simulated NI-DAQmx device server")
        address = line.split(" on ", 1)[1].split(" ", 1)[0]
        assert list_devices(address) == ["Dev1"]
        proc.send_signal(stop)
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
    assert "paced" in line and "Ctrl-C stops it" in line


def test_the_serve_command_leaves_nothing_for_the_exit_to_collect(spawn):
    """SIGTERM ends ``hapflow hil serve`` at once: the exit's final garbage collections,
    which walked the compiled rig's objects for 2.3-3.7 s, find nothing (counted by the
    child right after the command returned)."""
    graph = Path(__file__).resolve().parents[1] / "graphs" / "colton2005_sweep.yaml"
    code = ("import gc, sys; from hapflow.cli import main; "
            f"code = main(['hil', 'serve', {str(graph)!r}, '--port', '0']); "
            "print(code, len(gc.get_objects()), flush=True)")
    proc = spawn([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    expect_line(proc, "simulated NI-DAQmx device server")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    code, left = map(int, out.split())
    assert code == 0 and left < 1000, left


class DirectRig(Backend):
    """The simulated rig called directly, one edge per wait, no pacing: the reference."""

    def __init__(self, graph, seed):
        self.graph, self.seed = graph, seed

    def open(self, channels, rate):
        from hapflow.hil.simrig import SimRig
        self.rig = SimRig(self.graph, channels, rate, self.seed)
        self.out = [np.zeros(len(by_kind(channels, "ao"))),
                    np.zeros(len(by_kind(channels, "do")), bool)]
        self.inp = [np.zeros(len(by_kind(channels, "ai"))),
                    np.zeros(len(by_kind(channels, "ci_encoder")), np.int64)]

    def device(self, name):
        from hapflow.hil.products import PCIE_6351
        return PCIE_6351.name, PCIE_6351.on(name)

    def self_test(self, name):
        return True

    def arm_watchdog(self, timeout):
        pass                        # no clock of its own: the reference has no watchdog

    def pet(self):
        pass

    def start(self):
        pass

    def wait(self):
        self.rig.exchange(*self.out, *self.inp)
        return False

    def read(self, ai_volts, counts):
        ai_volts[:], counts[:] = self.inp

    def write(self, ao_volts, do_states):
        self.out[0][:], self.out[1][:] = ao_volts, do_states

    def safe_state(self):
        self.write(0.0, False)

    def close(self):
        pass


def test_the_runner_through_grpc_records_what_the_rig_gives_directly(tmp_path):
    """The real-time runner on the same graph, through ``nidaqmx`` and the server or on the rig
    itself: the same recording (the gRPC server free-runs, so no edge is skipped)."""
    import h5py

    from hapflow.hil.bindings import bind
    from hapflow.hil.runner import HilRunner
    from hapflow.hil.safety import Policy
    from hapflow.yamlio import load

    graph = load(Path(__file__).resolve().parents[1] / "graphs" / "colton2005_sweep.yaml")
    channels = bind(graph).channels
    relaxed = Policy(max_overruns=2**62, max_lateness=1e9)   # neither runs in real time
    server, port = serve(graph, channels, seed=graph.seed, paced=False)
    try:
        runner = HilRunner(graph, NidaqBackend(f"localhost:{port}"), relaxed)
        runner.run(0.1, out=tmp_path / "grpc.h5")
    finally:
        server.stop(None)
    HilRunner(graph, DirectRig(graph, graph.seed), relaxed).run(0.1, out=tmp_path / "direct.h5")
    with h5py.File(tmp_path / "grpc.h5") as a, h5py.File(tmp_path / "direct.h5") as b:
        assert a["time"].shape == (400,)
        for name in ["enc.pos", "head.force", "head.accel", "pid.force_cmd", "motor.force_cmd"]:
            np.testing.assert_array_equal(a["signals"][name][:], b["signals"][name][:], name)
        assert np.abs(a["signals/motor.force_cmd"][:]).max() > 0.1   # the loop was driving
