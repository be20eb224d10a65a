"""The NI-DAQmx backend: a real card through ``nidaqmx``, local or behind an NI gRPC device server.

Tasks (hardware-timed single point, see DESIGN "Scheduling")
    - **analog input**: every ``ai`` channel in one task, each with its
      terminal configuration (``TerminalConfiguration``); its onboard sample
      clock at ``rate`` Hz is the master clock (``/DevN/ai/SampleClock``, N
      the device of the first analog input, which therefore must exist);
    - **encoders**: one counter task per ``ci_encoder`` channel (an angular
      encoder, ``add_ci_ang_encoder_chan`` with its ``pulses_per_rev``, or a
      linear one, ``add_ci_lin_encoder_chan``; ``EncoderType.X_1/X_2/X_4``
      decoding; Z index reset with ``zidx_enable``/``zidx_val`` (in ticks)/
      ``zidx_phase``; ``initial_pos``/``initial_angle`` (in ticks) the count at
      start, :data:`~hapflow.hil.homing.SEEK_START` for an encoder homed to its
      index; the A, B (and Z) inputs' digital filter
      ``ci_encoder_a_input_dig_fltr_enable``/``..._min_pulse_width``; read in
      ticks, scaled by the bindings), clocked by the master's sample clock;
    - **analog output**: every ``ao`` channel in one task, clocked by the
      master's sample clock: a value written in tick k is generated at edge
      k + 1;
    - **digital output**: the amplifier-enable lines in one on-demand task
      (software timed, written at once): they are not sample-critical, and
      the digital ports of many cards cannot be hardware timed.

    The clocked tasks start before the master, so they see its first edge.

Hardware watchdog
    :meth:`NidaqBackend.arm_watchdog` makes one DAQmx watchdog timer task per
    device with bound outputs (``nidaqmx.system.WatchdogTask``): each
    digital line's expiration state is its safe level (the amplifier-enable
    line off, whatever its polarity), each analog output's its safe voltage
    where the device's watchdog covers analog outputs; an X Series watchdog
    covers only the DIO and PFI lines (DAQmx error -200452 for an analog
    one), so there the enable line is what a dead loop turns off, and
    :attr:`NidaqBackend.watchdog_note` says so.  The task is committed at
    arm time and started with the tasks; the loop resets it (``reset_timer``)
    every quarter of its timeout and reads ``expired`` after each reset.
    Analog outputs idle at 0 V (``ao_idle_output_behavior`` zero volts)
    where the device supports it: a stopped or cleared task leaves 0 V.

Per tick
    ``wait`` (the next sample clock), ``read`` (one ``ReadAnalogF64`` for the
    analog inputs, one counter read per encoder), ``write`` (one
    ``WriteAnalogF64``; one ``WriteDigitalLines`` when a line changes): the ``nidaqmx`` stream
    readers and writers on preallocated arrays with ``verify_array_shape``
    off, so every read or write is one driver call.

Late samples
    The ``nidaqmx`` 1.7 Python API does not wrap DAQmxWaitForNextSampleClock.
    :meth:`NidaqBackend.wait` calls it directly: on a gRPC session through the
    NiDAQmx service's ``WaitForNextSampleClock`` call (the package's stubs, on
    the same gRPC channel), on a local driver through ``ctypes`` on the
    NI-DAQmx library that ``nidaqmx`` loads.  Its ``isLate`` output says
    whether the sample was late; the missed-sample-clock errors -209802 and
    -201027 (raised instead when the task's RealTime.ReportMissedSamp is on)
    count as late too, not as failures: the safety watchdog decides.

Errors
    Every driver error becomes :class:`hapflow.hil.backend.DaqError`, one line
    naming the port and physical channel, the driver's message and its DAQmx
    status code (an unknown device also lists the devices present).  Without
    the NI-DAQmx driver and without ``grpc``, the message says so and what to
    do (install the driver, pass ``--grpc HOST:PORT``, or use ``--daq sim``).
"""
from __future__ import annotations

import ctypes
from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np

from .backend import Backend, Channel, DaqError, WatchdogExpired, by_kind

LATE_CODES = frozenset({-209802, -201027, 209802, 201027})
"""DAQmx statuses that report missed sample clocks (errors and their warning forms)."""
INVALID_DEVICE_ID = -200220
NOT_SUPPORTED = -200452

NO_DRIVER = ("the NI-DAQmx driver is not installed on this machine, so the nidaqmx backend "
             "cannot reach a card: install NI-DAQmx (ni.com/downloads), or pass --grpc HOST:PORT "
             "of an NI gRPC device server (the simulated one: 'hapflow hil serve GRAPH --port N'), "
             "or run with --daq sim")
"""The one message given when neither a local driver nor a gRPC server is available."""


def _address(grpc: str) -> str:
    """Check a ``HOST:PORT`` string."""
    host, _, port = grpc.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DaqError(f"--grpc must be HOST:PORT of an NI gRPC device server (e.g. "
                       f"localhost:31763), got {grpc!r}")
    return grpc


@contextmanager
def _driver_errors(where: str | None = None, address: str | None = None) -> Iterator[None]:
    """Turn the ``nidaqmx`` package's errors into one-line :class:`DaqError`s naming ``where``."""
    from nidaqmx import errors
    try:
        yield
    except (errors.DaqNotFoundError, errors.DaqNotSupportedError):
        raise DaqError(NO_DRIVER) from None
    except errors.RpcError as e:
        raise DaqError(f"NI gRPC device server at {address}: {e.description} ({e.rpc_code.name}); "
                       f"check that it runs and --grpc names it", where) from None
    except errors.DaqError as e:
        raise DaqError(_one_line(str(e), e.error_code), where) from None


def _names(channels: Sequence[Channel]) -> str:
    """``port (physical), ...`` for error messages."""
    return ", ".join(f"{c.port} ({c.physical})" for c in channels)


def _one_line(message: str, code: int) -> str:
    """The driver's multi-line message as one line ending with its status code."""
    lines = [ln.strip() for ln in message.splitlines()
             if ln.strip() and not ln.strip().startswith("Status Code")]
    return f"{' '.join(lines)} (DAQmx error {code})"


class NidaqBackend(Backend):
    """NI-DAQmx card in hardware-timed single point (see the module docstring).

    Parameters
    ----------
    grpc : str, optional
        ``HOST:PORT`` of an NI gRPC device server; None uses the local driver.
    timeout : float
        Timeout of each wait, read and write in s.
    """

    def __init__(self, grpc: str | None = None, timeout: float = 1.0):
        self.address = _address(grpc) if grpc else None
        self.timeout = float(timeout)
        self._grpc_channel = None
        self._tasks: list = []
        self._watchdogs: list = []
        self._opened = False
        self.watchdog_note = ""

    # ------------------------------------------------------------------ set-up
    def _options(self):
        """gRPC session options (None for the local driver)."""
        if self.address is None:
            return None
        import grpc
        import nidaqmx
        if self._grpc_channel is None:
            self._grpc_channel = grpc.insecure_channel(self.address)
        return nidaqmx.GrpcSessionOptions(self._grpc_channel, "")

    def _task(self):
        import nidaqmx
        with _driver_errors(None, self.address):
            task = nidaqmx.Task(grpc_options=self._options())
        self._tasks.append(task)
        return task

    @contextmanager
    def _on(self, channel: Channel) -> Iterator[None]:
        """Driver errors while configuring ``channel`` name it (and the devices present)."""
        from nidaqmx import errors
        where = _names([channel])
        with _driver_errors(where, self.address):
            try:
                yield
            except errors.DaqError as e:
                if e.error_code == INVALID_DEVICE_ID:
                    raise DaqError(f"{_one_line(str(e), e.error_code)}; devices present: "
                                   f"{', '.join(self.devices()) or '(none)'}", where) from None
                raise

    def device(self, name: str) -> tuple[str, dict[str, list[str]]]:
        """Product type and physical channels of device ``name``, as NI-DAQmx reports them."""
        import nidaqmx.system
        from nidaqmx import errors
        with _driver_errors(name, self.address):
            dev = nidaqmx.system.Device(name, grpc_options=self._options())
            try:
                product = dev.product_type
            except errors.DaqError as e:
                if e.error_code == INVALID_DEVICE_ID:
                    raise DaqError(f"no such device; devices present: "
                                   f"{', '.join(self.devices()) or '(none)'}", name) from None
                raise
            return product, {"ai": dev.ai_physical_chans.channel_names,
                             "ao": dev.ao_physical_chans.channel_names,
                             "ci_encoder": dev.ci_physical_chans.channel_names,
                             "do": dev.do_lines.channel_names}

    def self_test(self, name: str) -> bool:
        """DAQmxSelfTestDevice; False when the device has none."""
        import nidaqmx.system
        with _driver_errors(name, self.address):
            dev = nidaqmx.system.Device(name, grpc_options=self._options())
            return self._supported(dev.self_test_device)

    def devices(self) -> list[str]:
        """Names of the devices the driver (or the gRPC server) knows."""
        import nidaqmx.system
        with _driver_errors(None, self.address):
            options = self._options()
            system = (nidaqmx.system.System.remote(options) if options
                      else nidaqmx.system.System.local())
            return list(system.devices.device_names)

    def open(self, channels: Sequence[Channel], rate: float) -> None:
        """Create the tasks and channels and configure hardware-timed single point at ``rate`` Hz.

        Raises
        ------
        DaqError
            Naming the channel when its device or channel is missing, or when
            the driver is missing (one message, see :data:`NO_DRIVER`).  The
            tasks made so far are cleared.
        """
        ai, ci = by_kind(channels, "ai"), by_kind(channels, "ci_encoder")
        ao, do = by_kind(channels, "ao"), by_kind(channels, "do")
        if not ai:
            raise DaqError("the nidaqmx backend needs at least one analog input: its sample "
                           "clock paces the loop; bind one in the 'hardware:' section")
        self.close()
        try:
            self._input_tasks(ai, ci, rate)
            self._output_tasks(ao, do, rate, f"/{ai[0].device}/ai/SampleClock")
        except DaqError:
            self.close()
            raise
        self._streams(len(ai), len(ci), len(ao), len(do))
        self._ao_safe = np.array([c.safe for c in ao])
        self._do_safe = np.array([bool(c.safe) for c in do], dtype=bool)
        self._inputs, self._outputs = _names(ai + ci), _names(ao + do)
        self._channels = list(channels)
        self._opened = True

    def _input_tasks(self, ai: list[Channel], ci: list[Channel], rate: float) -> None:
        """The analog-input task (master clock) and one counter task per encoder."""
        from nidaqmx.constants import (AcquisitionType, AngleUnits, EncoderType,
                                       EncoderZIndexPhase, LengthUnits, TerminalConfiguration)
        hwtsp = AcquisitionType.HW_TIMED_SINGLE_POINT
        self._ai = self._task()
        for c in ai:
            with self._on(c):
                self._ai.ai_channels.add_ai_voltage_chan(
                    c.physical, terminal_config=TerminalConfiguration[c.terminal],
                    min_val=c.low, max_val=c.high)
        with self._on(ai[0]):
            self._ai.timing.cfg_samp_clk_timing(rate, sample_mode=hwtsp)
        clock = f"/{ai[0].device}/ai/SampleClock"
        self._ci = []
        for c in ci:
            self._ci.append(task := self._task())
            z = dict(decoding_type=EncoderType[f"X_{c.decoding}"],
                     zidx_enable=c.z_index is not None, zidx_val=float(c.z_index or 0),
                     zidx_phase=EncoderZIndexPhase[c.z_phase])
            with self._on(c):
                if c.pulses_per_rev:
                    chan = task.ci_channels.add_ci_ang_encoder_chan(
                        c.physical, units=AngleUnits.TICKS, pulses_per_rev=c.pulses_per_rev,
                        initial_angle=float(c.initial), **z)
                else:
                    chan = task.ci_channels.add_ci_lin_encoder_chan(
                        c.physical, units=LengthUnits.TICKS, dist_per_pulse=1.0,
                        initial_pos=float(c.initial), **z)
                if c.filter:
                    _encoder_filter(chan, c.filter, c.z_index is not None)
                task.timing.cfg_samp_clk_timing(rate, source=clock, sample_mode=hwtsp)

    def _output_tasks(self, ao: list[Channel], do: list[Channel], rate: float, clock: str) -> None:
        """The analog-output task on the master's sample clock and the on-demand line task."""
        from nidaqmx.constants import AcquisitionType, AOIdleOutputBehavior, LineGrouping
        self._ao = self._task() if ao else None
        self._unguarded: list[str] = []
        for c in ao:
            with self._on(c):
                chan = self._ao.ao_channels.add_ao_voltage_chan(c.physical, min_val=c.low,
                                                                max_val=c.high)
                if not self._supported(lambda: setattr(chan, "ao_idle_output_behavior",
                                                       AOIdleOutputBehavior.ZERO_VOLTS)):
                    self._unguarded.append(f"{c.physical} keeps its voltage when idle")
        if ao:
            with self._on(ao[0]):
                self._ao.timing.cfg_samp_clk_timing(
                    rate, source=clock, sample_mode=AcquisitionType.HW_TIMED_SINGLE_POINT)
        self._do = self._task() if do else None
        for c in do:
            with self._on(c):
                self._do.do_channels.add_do_chan(c.physical,
                                                 line_grouping=LineGrouping.CHAN_PER_LINE)

    @staticmethod
    def _supported(configure) -> bool:
        """Run ``configure``; False when the device does not support it (DAQmx -200452)."""
        from nidaqmx import errors
        try:
            configure()
        except errors.DaqError as e:
            if e.error_code != NOT_SUPPORTED:
                raise
            return False
        return True

    def arm_watchdog(self, timeout: float) -> None:
        """One committed watchdog timer task per device with outputs: expiration states =
        the channels' safe values (see the module docstring); started by :meth:`start`."""
        from nidaqmx.constants import Level, TaskMode, WatchdogAOExpirState
        from nidaqmx.system.watchdog import WatchdogTask
        from nidaqmx.types import AOExpirationState, DOExpirationState
        self._check_open()
        outputs = [c for c in self._channels if c.kind in ("ao", "do")]
        unguarded = list(self._unguarded)
        for device in dict.fromkeys(c.device for c in outputs):
            ao = [c for c in outputs if c.device == device and c.kind == "ao"]
            do = [c for c in outputs if c.device == device and c.kind == "do"]
            with self._on((do or ao)[0]):
                wd = WatchdogTask(device, timeout=timeout, grpc_options=self._options())
                self._watchdogs.append(wd)
                if do:
                    wd.cfg_watchdog_do_expir_states(
                        [DOExpirationState(c.physical, Level.HIGH if c.safe else Level.LOW)
                         for c in do])
                states = [AOExpirationState(c.physical, c.safe, WatchdogAOExpirState.VOLTAGE)
                          for c in ao]
                if ao and not self._supported(lambda: wd.cfg_watchdog_ao_expir_states(states)):
                    unguarded += [f"{c.physical} is not covered by the {device} watchdog "
                                  "(digital lines only)" for c in ao]
                wd.control(TaskMode.TASK_COMMIT)
        self.watchdog_note = "; ".join(unguarded)

    def _streams(self, n_ai: int, n_ci: int, n_ao: int, n_do: int) -> None:
        """Stream readers/writers and the preallocated buffers they fill."""
        from nidaqmx.stream_readers import AnalogMultiChannelReader, CounterReader
        from nidaqmx.stream_writers import AnalogMultiChannelWriter, DigitalMultiChannelWriter
        self._ai_reader = AnalogMultiChannelReader(self._ai.in_stream)
        self._ci_readers = [CounterReader(t.in_stream) for t in self._ci]
        self._ao_writer = (AnalogMultiChannelWriter(self._ao.out_stream, auto_start=False)
                           if n_ao else None)
        self._do_writer = (DigitalMultiChannelWriter(self._do.out_stream, auto_start=False)
                           if n_do else None)
        for s in [self._ai_reader, *self._ci_readers, self._ao_writer, self._do_writer]:
            if s is not None:
                s.verify_array_shape = False
        self._ai_buf = np.zeros(n_ai)
        self._ci_buf = np.zeros(n_ci)
        self._ci_views = [self._ci_buf[k:k + 1] for k in range(n_ci)]
        self._ao_buf = np.zeros(n_ao)
        self._do_buf = np.zeros(n_do, dtype=bool)     # the lines as last written
        self._waiter = (_GrpcWaiter(self._grpc_channel, self._ai._handle, self.timeout)
                        if self.address else _LibWaiter(self._ai, self.timeout))

    # ------------------------------------------------------------------ run
    def start(self) -> None:
        """Start the clocked tasks, write 0 V / False, then start the master (analog input)."""
        self._check_open()
        with _driver_errors(self._outputs, self.address):
            for task in [*self._ci, self._ao, self._do]:
                if task is not None:
                    task.start()
        self.safe_state()
        with _driver_errors(self._outputs, self.address):
            for wd in self._watchdogs:
                wd.start()
        with _driver_errors(self._inputs, self.address):
            self._ai.start()

    def wait(self) -> bool:
        """Block until the next sample clock; True if it had already passed (late)."""
        with _driver_errors(self._inputs, self.address):
            return self._waiter.wait()

    def read(self, ai_volts: np.ndarray, counts: np.ndarray) -> None:
        """Read this sample: analog inputs (V) into ``ai_volts``, encoder counts into ``counts``."""
        with _driver_errors(self._inputs, self.address):
            self._ai_reader.read_one_sample(self._ai_buf, self.timeout)
            for reader, view in zip(self._ci_readers, self._ci_views):
                reader.read_many_sample_double(view, 1, self.timeout)
        ai_volts[:] = self._ai_buf
        np.copyto(counts, self._ci_buf, casting="unsafe")

    def write(self, ao_volts: np.ndarray, do_states: np.ndarray) -> None:
        """Write the analog outputs (V, generated at the next edge) and the digital lines.

        The digital lines (on demand, they hold their state) are written only
        when they change.
        """
        self._ao_buf[:] = ao_volts
        lines = not np.array_equal(self._do_buf, do_states)
        if lines:
            self._do_buf[:] = do_states
        self._put(self._ao_buf, self._do_buf if lines else None)

    def _put(self, ao: np.ndarray, do: np.ndarray | None) -> None:
        with _driver_errors(self._outputs, self.address):
            if self._ao_writer is not None:
                self._ao_writer.write_one_sample(ao, self.timeout)
            if self._do_writer is not None and do is not None:
                self._do_writer.write_one_sample_one_line(do, self.timeout)

    def pet(self) -> None:
        """Reset every watchdog timer; :class:`WatchdogExpired` if one has expired."""
        with _driver_errors(self._outputs, self.address):
            for wd in self._watchdogs:
                wd.reset_timer()
                if wd.expired:
                    raise WatchdogExpired("the card's watchdog timer expired: the outputs it "
                                          "covers are held in their safe state", wd.name)

    def safe_state(self) -> None:
        """Every output at its channel's safe value, now."""
        if self._opened:
            self._do_buf[:] = self._do_safe
            self._put(self._ao_safe, self._do_buf)

    def close(self) -> None:
        """Stop and clear every task and close the gRPC channel (safe to call twice)."""
        for task in [*self._tasks, *self._watchdogs]:
            try:
                task.close()
            except Exception:  # closing after a failure: the first error is the one reported
                pass
        self._tasks, self._watchdogs = [], []
        self._opened = False
        if self._grpc_channel is not None:
            self._grpc_channel.close()
            self._grpc_channel = None

    def _check_open(self) -> None:
        if not self._opened:
            raise DaqError("the nidaqmx backend is not open: call open(channels, rate) first")


def _encoder_filter(chan, width: float, z: bool) -> None:
    """Digital filter of minimum pulse width ``width`` s on the A and B inputs (and Z)."""
    for line in ("a", "b", "z") if z else ("a", "b"):
        setattr(chan, f"ci_encoder_{line}_input_dig_fltr_enable", True)
        setattr(chan, f"ci_encoder_{line}_input_dig_fltr_min_pulse_width", width)


class _GrpcWaiter:
    """DAQmxWaitForNextSampleClock through the NiDAQmx gRPC service."""

    def __init__(self, channel, task_handle, timeout: float):
        from nidaqmx._stubs import nidaqmx_pb2, nidaqmx_pb2_grpc
        self._call = nidaqmx_pb2_grpc.NiDAQmxStub(channel).WaitForNextSampleClock
        self._request = nidaqmx_pb2.WaitForNextSampleClockRequest(task=task_handle, timeout=timeout)

    def wait(self) -> bool:
        """True when the sample clock edge had passed before the call."""
        import grpc
        from nidaqmx import errors
        try:
            reply = self._call(self._request)
        except grpc.RpcError as e:
            code = dict(e.trailing_metadata() or ()).get("ni-error")
            if code is None:
                raise errors.RpcError(e.code(), e.details()) from None
            if int(code) in LATE_CODES:
                return True
            raise errors.DaqError(e.details(), int(code)) from None
        if reply.status in LATE_CODES:
            return True
        if reply.status < 0:
            raise errors.DaqError("", reply.status)
        return reply.is_late


class _LibWaiter:
    """DAQmxWaitForNextSampleClock through ctypes on the local NI-DAQmx library."""

    def __init__(self, task, timeout: float):
        from nidaqmx._lib import c_bool32, lib_importer
        func = lib_importer.windll.DAQmxWaitForNextSampleClock
        with func.arg_lock:
            func.argtypes = [lib_importer.task_handle, ctypes.c_double, ctypes.POINTER(c_bool32)]
        self._func, self._task, self._timeout = func, task, ctypes.c_double(timeout)
        self._late = c_bool32()
        self._late_ref = ctypes.byref(self._late)

    def wait(self) -> bool:
        """True when the sample clock edge had passed before the call."""
        code = self._func(self._task._handle, self._timeout, self._late_ref)
        if code in LATE_CODES:
            return True
        if code < 0:
            self._task._interpreter.check_for_error(code)
        return bool(self._late.value)


def list_devices(grpc: str | None = None) -> list[str]:
    """Names of the NI-DAQmx devices present, locally or behind the gRPC server ``grpc``.

    Parameters
    ----------
    grpc : str, optional
        ``HOST:PORT`` of an NI gRPC device server.

    Raises
    ------
    DaqError
        When the driver is missing (and no ``grpc``) or the server cannot be reached.
    """
    backend = NidaqBackend(grpc)
    try:
        return backend.devices()
    finally:
        backend.close()
