"""A simulated NI gRPC device server: the NiDAQmx gRPC service in front of the simulated rig.

The ``nidaqmx`` package talks to a remote NI-DAQmx through the NI gRPC Device
Server (``nidaqmx.GrpcSessionOptions``); the service definition and its
Python stubs ship inside the package (``nidaqmx._stubs.nidaqmx_pb2_grpc``).
:class:`SimDaqmxServicer` implements the subset of that service hapflow's
:class:`hapflow.hil.nidaq.NidaqBackend` uses, on a :class:`~hapflow.hil.grpc_card.SimCard`,
so the real ``nidaqmx`` client code drives the simulated rig end to end:

- tasks: ``CreateTask``, ``ClearTask``, ``StartTask``, ``StopTask``,
  ``GetTaskAttributeString`` (name, channel names), ``GetTaskAttributeUInt32``
  (number of channels);
- channels: ``CreateAIVoltageChan``, ``CreateAOVoltageChan``,
  ``CreateCILinEncoderChan``, ``CreateCIAngEncoderChan`` (ticks, degrees,
  radians), ``CreateDOChan``;
- timing: ``CfgSampClkTiming`` (hardware-timed single point only),
  ``WaitForNextSampleClock``;
- I/O: ``ReadAnalogF64``, ``ReadCounterF64``/``F64Ex``/``ScalarF64``,
  ``WriteAnalogF64``, ``WriteAnalogScalarF64``, ``WriteDigitalLines``;
- watchdog: ``CreateWatchdogTimerTaskEx``, ``CfgWatchdogDOExpirStates``,
  ``CfgWatchdogAOExpirStates`` (refused, as on X Series), ``TaskControl``,
  ``ControlWatchdogTask``, ``GetWatchdogAttributeBool`` (expired),
  ``GetWatchdogAttributeDouble`` (timeout);
- channels: ``CreateCILinEncoderChan``/``CreateCIAngEncoderChan`` with Z indexing
  (``zidx_enable``, ``zidx_val``, ``zidx_phase``);
- channel attributes: ``SetChanAttributeInt32`` (analog output idle output behaviour),
  ``SetChanAttributeBool``/``SetChanAttributeDouble`` (encoder input digital filters:
  enable and minimum pulse width of A, B and Z);
- system: ``GetSystemInfoAttributeString`` (device names),
  ``GetSystemInfoAttributeUInt32`` (driver version), ``GetDeviceAttributeString``
  (product type, physical channels), ``GetDeviceAttributeBool`` (is simulated),
  ``SelfTestDevice`` (passes),
  ``GetErrorString``.

Every other call answers ``UNIMPLEMENTED``, which the client reports as "not
supported by the NI gRPC Device Server being used".  DAQmx errors travel as
the device server sends them: gRPC status ``UNKNOWN`` with the extended error
message as details and the status code in the ``ni-error`` trailing metadata,
so the client raises ``nidaqmx.errors.DaqError`` with the driver's code.

Start one with :func:`serve` (a graph and its bound channels) or
:func:`serve_card` (any card, e.g. with a test rig); from the command line
``hapflow hil serve GRAPH --port N`` calls :func:`run_server`.
"""
from __future__ import annotations

import functools
import signal
from concurrent import futures
from typing import Callable, Sequence

import grpc
from nidaqmx._stubs import nidaqmx_pb2 as pb
from nidaqmx._stubs import nidaqmx_pb2_grpc as pb_grpc
from session_pb2 import Session

from hapflow.errors import HapflowError
from hapflow.graph import Graph

from .backend import Channel
from .grpc_card import (ANGLE_PER_REV, AO_IDLE_OUTPUT_BEHAVIOR, FILTER_ATTRIBUTES,
                        INVALID_ATTRIBUTE_VALUE, MESSAGES, PRODUCT, TICKS, DaqmxStatus, SimCard)

DRIVER_VERSION = {0x1272: 23, 0x1923: 8, 0x2F22: 0}
"""NI-DAQmx version reported (major, minor, update attribute ids)."""
_SYS_DEVICE_NAMES = 0x193B
_TASK_NAME, _TASK_CHANNELS, _TASK_NUM_CHANS = 0x1276, 0x1273, 0x2181
_DEV_PRODUCT_TYPE, _DEV_IS_SIMULATED = 0x0631, 0x22CA
_WDT_EXPIRED, _WDT_TIMEOUT = 0x21A8, 0x21A9
_DEV_CHANNELS = {0x231E: "ai", 0x231F: "ao", 0x2324: "ci_encoder", 0x2322: "do"}


def _daqmx(method: Callable) -> Callable:
    """Turn a :class:`DaqmxStatus` into the device server's error reply."""
    @functools.wraps(method)
    def call(self, request, context):
        try:
            return method(self, request, context)
        except DaqmxStatus as e:
            context.set_trailing_metadata((("ni-error", str(e.code)),))
            context.abort(grpc.StatusCode.UNKNOWN, e.message)
    return call


class SimDaqmxServicer(pb_grpc.NiDAQmxServicer):
    """The NiDAQmx gRPC service subset (see the module docstring) on a simulated card."""

    def __init__(self, card: SimCard):
        self.card = card

    # ------------------------------------------------------------------ tasks
    @_daqmx
    def CreateTask(self, request, context):
        name = self.card.create_task(request.session_name)
        return pb.CreateTaskResponse(task=Session(name=name), new_session_initialized=True)

    @_daqmx
    def ClearTask(self, request, context):
        self.card.clear_task(request.task.name)
        return pb.ClearTaskResponse()

    @_daqmx
    def StartTask(self, request, context):
        self.card.start(request.task.name)
        return pb.StartTaskResponse()

    @_daqmx
    def StopTask(self, request, context):
        self.card.stop(request.task.name)
        return pb.StopTaskResponse()

    @_daqmx
    def GetTaskAttributeString(self, request, context):
        task = self.card.task(request.task.name)
        if request.attribute_raw == _TASK_NAME:
            return pb.GetTaskAttributeStringResponse(value=task.name)
        if request.attribute_raw == _TASK_CHANNELS:
            return pb.GetTaskAttributeStringResponse(value=", ".join(c.name for c in task.chans))
        return _unsupported(context, "task attribute", request.attribute_raw)

    @_daqmx
    def GetTaskAttributeUInt32(self, request, context):
        task = self.card.task(request.task.name)
        if request.attribute_raw == _TASK_NUM_CHANS:
            return pb.GetTaskAttributeUInt32Response(value=len(task.chans))
        return _unsupported(context, "task attribute", request.attribute_raw)

    @_daqmx
    def TaskControl(self, request, context):
        self.card.control(request.task.name, request.action_raw)
        return pb.TaskControlResponse()

    # ------------------------------------------------------------------ watchdog
    @_daqmx
    def CreateWatchdogTimerTaskEx(self, request, context):
        name = self.card.create_watchdog(request.device_name, request.session_name,
                                         request.timeout)
        return pb.CreateWatchdogTimerTaskExResponse(task=Session(name=name),
                                                    new_session_initialized=True)

    @_daqmx
    def CfgWatchdogDOExpirStates(self, request, context):
        self.card.watchdog_lines(request.task.name, request.channel_names,
                                 list(request.expir_state_array))
        return pb.CfgWatchdogDOExpirStatesResponse()

    @_daqmx
    def CfgWatchdogAOExpirStates(self, request, context):
        self.card.watchdog_analog(request.task.name)

    @_daqmx
    def ControlWatchdogTask(self, request, context):
        self.card.watchdog_action(request.task.name, request.action_raw)
        return pb.ControlWatchdogTaskResponse()

    @_daqmx
    def GetWatchdogAttributeBool(self, request, context):
        if request.attribute_raw == _WDT_EXPIRED:
            timer = self.card.timer(request.task.name)
            return pb.GetWatchdogAttributeBoolResponse(value=timer.expired)
        return _unsupported(context, "watchdog attribute", request.attribute_raw)

    @_daqmx
    def GetWatchdogAttributeDouble(self, request, context):
        if request.attribute_raw == _WDT_TIMEOUT:
            timer = self.card.timer(request.task.name)
            return pb.GetWatchdogAttributeDoubleResponse(value=timer.timeout)
        return _unsupported(context, "watchdog attribute", request.attribute_raw)

    # ------------------------------------------------------------------ channels
    @_daqmx
    def SetChanAttributeInt32(self, request, context):
        if request.attribute_raw == AO_IDLE_OUTPUT_BEHAVIOR:
            self.card.set_idle(request.task.name, request.channel, request.value_raw)
            return pb.SetChanAttributeInt32Response()
        return _unsupported(context, "channel attribute", request.attribute_raw)

    @_daqmx
    def SetChanAttributeBool(self, request, context):
        return self._set_filter(request, context, pb.SetChanAttributeBoolResponse)

    @_daqmx
    def SetChanAttributeDouble(self, request, context):
        return self._set_filter(request, context, pb.SetChanAttributeDoubleResponse)

    def _set_filter(self, request, context, response: type):
        """A digital filter attribute (enable: bool, minimum pulse width: double)."""
        if request.attribute_raw in FILTER_ATTRIBUTES:
            self.card.set_filter(request.task.name, request.channel, request.attribute_raw,
                                 request.value)
            return response()
        return _unsupported(context, "channel attribute", request.attribute_raw)

    @_daqmx
    def CreateAIVoltageChan(self, request, context):
        self.card.add_channels(request.task.name, "ai", request.physical_channel,
                               request.name_to_assign_to_channel,
                               low=request.min_val, high=request.max_val,
                               terminal=request.terminal_config_raw)
        return pb.CreateAIVoltageChanResponse()

    @_daqmx
    def CreateAOVoltageChan(self, request, context):
        self.card.add_channels(request.task.name, "ao", request.physical_channel,
                               request.name_to_assign_to_channel,
                               low=request.min_val, high=request.max_val)
        return pb.CreateAOVoltageChanResponse()

    @_daqmx
    def CreateCILinEncoderChan(self, request, context):
        self.card.add_channels(request.task.name, "ci_encoder", request.counter,
                               request.name_to_assign_to_channel,
                               decoding=request.decoding_type_raw, units=request.units_raw,
                               per_pulse=request.dist_per_pulse, initial=request.initial_pos,
                               **_z_index(request))
        return pb.CreateCILinEncoderChanResponse()

    @_daqmx
    def CreateCIAngEncoderChan(self, request, context):
        units = request.units_raw
        if units != TICKS and units not in ANGLE_PER_REV:
            return _unsupported(context, "angle unit", units)
        self.card.add_channels(request.task.name, "ci_encoder", request.counter,
                               request.name_to_assign_to_channel,
                               decoding=request.decoding_type_raw, units=units,
                               pulses_per_rev=request.pulses_per_rev,
                               initial=request.initial_angle, **_z_index(request))
        return pb.CreateCIAngEncoderChanResponse()

    @_daqmx
    def CreateDOChan(self, request, context):
        self.card.add_channels(request.task.name, "do", request.lines,
                               request.name_to_assign_to_lines)
        return pb.CreateDOChanResponse()

    # ------------------------------------------------------------------ timing
    @_daqmx
    def CfgSampClkTiming(self, request, context):
        self.card.configure_timing(request.task.name, request.rate, request.source,
                                   request.sample_mode_raw)
        return pb.CfgSampClkTimingResponse()

    @_daqmx
    def WaitForNextSampleClock(self, request, context):
        late = self.card.wait(request.task.name, request.timeout)
        return pb.WaitForNextSampleClockResponse(is_late=late)

    # ------------------------------------------------------------------ I/O
    @_daqmx
    def ReadAnalogF64(self, request, context):
        _check_one_sample(request)
        values = self.card.read_ai(request.task.name, request.timeout, request.array_size_in_samps)
        return pb.ReadAnalogF64Response(read_array=values, samps_per_chan_read=1)

    @_daqmx
    def ReadCounterF64(self, request, context):
        _check_one_sample(request)
        value = self.card.read_counter(request.task.name, request.timeout)
        return pb.ReadCounterF64Response(read_array=[value], samps_per_chan_read=1)

    @_daqmx
    def ReadCounterF64Ex(self, request, context):
        _check_one_sample(request)
        value = self.card.read_counter(request.task.name, request.timeout)
        return pb.ReadCounterF64ExResponse(read_array=[value], samps_per_chan_read=1)

    @_daqmx
    def ReadCounterScalarF64(self, request, context):
        return pb.ReadCounterScalarF64Response(
            value=self.card.read_counter(request.task.name, request.timeout))

    @_daqmx
    def WriteAnalogF64(self, request, context):
        _check_one_sample(request)
        self.card.write_ao(request.task.name, request.write_array)
        return pb.WriteAnalogF64Response(samps_per_chan_written=1)

    @_daqmx
    def WriteAnalogScalarF64(self, request, context):
        self.card.write_ao(request.task.name, [request.value])
        return pb.WriteAnalogScalarF64Response()

    @_daqmx
    def WriteDigitalLines(self, request, context):
        _check_one_sample(request)
        self.card.write_do(request.task.name, list(request.write_array))
        return pb.WriteDigitalLinesResponse(samps_per_chan_written=1)

    # ------------------------------------------------------------------ system
    def GetSystemInfoAttributeString(self, request, context):
        if request.attribute_raw == _SYS_DEVICE_NAMES:
            return pb.GetSystemInfoAttributeStringResponse(value=", ".join(self.card.devices))
        return _unsupported(context, "system attribute", request.attribute_raw)

    def GetSystemInfoAttributeUInt32(self, request, context):
        if request.attribute_raw in DRIVER_VERSION:
            value = DRIVER_VERSION[request.attribute_raw]
            return pb.GetSystemInfoAttributeUInt32Response(value=value)
        return _unsupported(context, "system attribute", request.attribute_raw)

    @_daqmx
    def GetDeviceAttributeString(self, request, context):
        device, attr = request.device_name, request.attribute_raw
        if attr == _DEV_PRODUCT_TYPE:
            self.card.physical_channels(device, "ai")  # checks the device
            return pb.GetDeviceAttributeStringResponse(value=PRODUCT)
        if attr in _DEV_CHANNELS:
            names = self.card.physical_channels(device, _DEV_CHANNELS[attr])
            return pb.GetDeviceAttributeStringResponse(value=", ".join(names))
        return _unsupported(context, "device attribute", attr)

    @_daqmx
    def GetDeviceAttributeBool(self, request, context):
        if request.attribute_raw == _DEV_IS_SIMULATED:
            self.card.physical_channels(request.device_name, "ai")
            return pb.GetDeviceAttributeBoolResponse(value=True)
        return _unsupported(context, "device attribute", request.attribute_raw)

    @_daqmx
    def SelfTestDevice(self, request, context):
        self.card.physical_channels(request.device_name, "ai")  # checks the device
        return pb.SelfTestDeviceResponse()

    def GetErrorString(self, request, context):
        return pb.GetErrorStringResponse(error_string=MESSAGES.get(request.error_code, ""))


def _z_index(request) -> dict:
    """The Z index fields of an encoder channel request."""
    return dict(zidx_enable=request.zidx_enable, zidx_val=request.zidx_val,
                zidx_phase=request.zidx_phase_raw)


def _check_one_sample(request) -> None:
    """Only single-point transfers are simulated: one sample per channel."""
    if request.num_samps_per_chan not in (1, -1):
        raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, request.task.name,
                          Property="Number of Samples per Channel",
                          Requested_Value=request.num_samps_per_chan,
                          Possible_Values="1 (hardware-timed single point)")


def _unsupported(context, what: str, attribute: int):
    context.abort(grpc.StatusCode.UNIMPLEMENTED,
                  f"the simulated device server does not implement {what} 0x{attribute:X}")


def serve_card(card: SimCard, address: str = "localhost:0", workers: int = 4,
               interceptors: Sequence[grpc.ServerInterceptor] = ()) -> tuple[grpc.Server, int]:
    """Start a gRPC server exposing ``card`` through the NiDAQmx service.

    Parameters
    ----------
    card : SimCard
        The simulated card.
    address : str
        ``HOST:PORT`` to listen on; port 0 picks a free port.
    workers : int
        Server threads.
    interceptors : sequence of grpc.ServerInterceptor
        Passed to the server (e.g. to count calls).

    Returns
    -------
    server : grpc.Server
        The running server (``server.stop(None)`` ends it).
    port : int
        The port it listens on.

    Raises
    ------
    HapflowError
        When the address cannot be bound.
    """
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                         interceptors=list(interceptors))
    pb_grpc.add_NiDAQmxServicer_to_server(SimDaqmxServicer(card), server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as e:
        raise HapflowError(f"cannot listen on {address}: {e}") from None
    if port == 0:
        raise HapflowError(f"cannot listen on {address}: address in use or invalid")
    server.start()
    return server, port


def sim_card(graph: Graph, channels: Sequence[Channel], *, seed: int = 0,
             faults: Sequence = (), paced: bool = True) -> SimCard:
    """The simulated card of ``graph``'s rig, as :func:`serve` exposes it.

    Parameters
    ----------
    graph : Graph
        The whole graph, with its ``hardware:`` section.
    channels : sequence of Channel
        Its bound channels (:func:`hapflow.hil.bindings.bind`).
    seed : int
        Seed of the card noise (:class:`hapflow.hil.simrig.SimRig`).
    faults : sequence of Fault
        Faults to inject into the rig.
    paced : bool
        Pace the sample clock in real time (True) or free-run, one sample per
        wait (see :mod:`hapflow.hil.grpc_card`).

    Returns
    -------
    SimCard
        Its ``edge`` counts the sample clock edges the rig has run.
    """
    from .simrig import SimRig

    def make_rig(rate: float) -> SimRig:
        return SimRig(graph, channels, rate, seed, faults=faults)

    return SimCard(channels, make_rig, paced=paced, spare_rate=graph.rate)


def serve(graph: Graph, channels: Sequence[Channel], *, seed: int = 0, faults: Sequence = (),
          address: str = "localhost:0", paced: bool = True) -> tuple[grpc.Server, int]:
    """Serve the simulated rig of ``graph`` through the NiDAQmx gRPC service.

    Parameters
    ----------
    graph, channels, seed, faults, paced
        As :func:`sim_card`.
    address : str
        ``HOST:PORT``; port 0 picks a free port.

    Returns
    -------
    server : grpc.Server
    port : int
    """
    return serve_card(sim_card(graph, channels, seed=seed, faults=faults, paced=paced), address)


def run_server(path: str, port: int = 31763, host: str = "localhost", seed: int | None = None,
               free_running: bool = False, faults: Sequence[str] = ()) -> None:
    """``hapflow hil serve GRAPH --port N``: serve a graph file's rig until Ctrl-C or SIGTERM.

    Parameters
    ----------
    path : str
        Graph file with a ``hardware:`` section.
    port : int
        TCP port (0 picks a free one); 31763 is the NI gRPC Device Server's default.
    host : str
        Interface to listen on.
    seed : int, optional
        Card noise seed (default: the graph's seed, as ``--daq sim``).
    free_running : bool
        One sample per wait instead of real-time pacing.
    faults : sequence of str
        Faults in :meth:`hapflow.hil.simrig.Fault.parse` form.
    """
    from hapflow.yamlio import load

    from .bindings import bind
    from .simrig import Fault

    graph = load(path)
    channels = bind(graph).channels
    seed = graph.seed if seed is None else seed
    server, bound = serve(graph, channels, seed=seed, faults=[Fault.parse(f) for f in faults],
                          address=f"{host}:{port}", paced=not free_running)
    devices = sorted({c.device for c in channels})
    # the handler before the line that says it serves: a SIGTERM right after it stops it too
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: server.stop(None))
    print(f"simulated NI-DAQmx device server for {path} on {host}:{bound} "
          f"(devices {', '.join(devices)}; {'free-running' if free_running else 'paced'}); "
          f"Ctrl-C stops it", flush=True)
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        server.stop(None)
    finally:
        signal.signal(signal.SIGTERM, previous)
