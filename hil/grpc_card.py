"""The simulated NI-DAQmx card behind the gRPC device server: devices, tasks, one sample clock.

:class:`SimCard` is what :mod:`hapflow.hil.grpc_sim` exposes through the
NiDAQmx gRPC service.  It knows nothing of gRPC: it keeps DAQmx tasks and
channels, checks them the way the NI-DAQmx driver does (raising
:class:`DaqmxStatus` with the driver's error code and message), and moves the
simulated rig (:class:`hapflow.hil.simrig.SimRig`, or any object with its
``exchange`` method) one sample per sample clock edge.

Devices
    Every device named in the bound channels exists and looks like a 16-bit
    X-series card (product type :data:`PRODUCT`, as NI specifies the
    PCIe-6351): ``ai0..ai15`` (+-10 V), ``ao0..ao1`` (+-10 V), ``ctr0..ctr3``,
    ``port0/line0..7`` (hardware-timed DIO), ``port1/line0..7`` and
    ``port2/line0..7`` (PFI 0-15 as static DIO).  Creating a channel on another
    device gives DAQmx error -200220, on a channel that the device does not
    have -200170, as on the real driver.  Channels that exist but are not
    bound read 0 V / 0 counts and outputs to them go nowhere.

Timing
    Only hardware-timed single point is simulated.  A task timed by the
    onboard clock (source ``""`` or ``"OnboardClock"``, normally the analog
    input task) is the **master**: starting it creates a fresh rig at its
    rate and starts the sample clock.  Tasks clocked from
    ``/DevN/ai/SampleClock`` follow the master's clock.  Tasks without timing
    are on demand (reads return the latest sample, writes act at the next
    edge).  All devices share one clock.

Sample clock, paced and free-running
    *Paced* (default): edge ``n`` happens at ``t0 + n / rate`` on the
    monotonic clock, ``t0`` being the master's start.  ``WaitForNextSampleClock``
    returns at the next edge; when one or more edges passed since the last
    sample it returns at once with ``is_late`` True, and the rig advances one
    tick per missed edge (holding the outputs: the plant does not wait for
    a late host).  *Free-running* (``paced=False``, for tests and for
    checking results through the gRPC path faster than real time): every
    wait is exactly one edge, never late, with no sleeping.

    A read of a timed input task returns the sample of the current edge; a
    second read of the same task without a wait in between waits for the
    next edge first (a hardware-timed single-point read returns each sample
    once).  So ``wait, read ai, read ctr, write ao, write do`` is one tick.

Transport delay
    At each edge the rig gets the outputs as last written; the rig itself
    latches them and holds them for one sample (see
    :mod:`hapflow.hil.simrig`), so this server adds no delay of its own and
    the loop sees the same delay as with the ``sim`` backend.

Watchdog timer
    ``CreateWatchdogTimerTaskEx`` makes a watchdog task on a device, with
    expiration states for its digital lines (``CfgWatchdogDOExpirStates``:
    high, low or no change).  As on X Series devices, whose watchdog "can be
    set for all DIO and PFI lines" (X Series User Manual), analog outputs
    cannot be given an expiration state (DAQmx error -200452): an amplifier's
    enable line is what the watchdog turns off.  The timer starts with the
    task (``StartTask``, or ``TaskControl`` start) and is reset by
    ``ControlWatchdogTask`` (reset timer).  It runs in a thread of the server,
    on the monotonic clock, whatever the client does; when it expires the
    lines go to their expiration states and writes to them are ignored until
    the expiration is cleared (``ControlWatchdogTask`` clear expiration) or
    the task is cleared.  ``GetWatchdogAttributeBool`` answers ``expired``,
    ``GetWatchdogAttributeDouble`` the timeout
    (:mod:`hapflow.hil.cardwatchdog` has the semantics).

Idle output
    ``SetChanAttributeInt32`` sets an analog output's idle output behaviour
    (zero volts, or maintain existing value; the X Series has no high
    impedance): when its task stops or is cleared the output goes to 0 V or
    holds.

Faults
    The rig's timing faults apply at the wait: a ``late`` fault stalls the
    wait for its value in seconds (paced mode; the next wait is then late),
    a ``drop`` fault reports the sample late.  A rig error (an injected DAQ
    error) becomes DAQmx error -201003 (device cannot be accessed).
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import numpy as np

from .backend import Channel, DaqError, by_kind
from .cardwatchdog import WatchdogTimer
from .products import PCIE_6351
from .simcounter import Z_PHASES, CounterSetup, Counters

PRODUCT = PCIE_6351.name
"""Product type the simulated devices report."""
PHYSICAL = PCIE_6351.channels
"""Physical channels of each kind on a simulated device (without the device prefix)."""
RANGE_V = 10.0
"""Largest analog range of the simulated device, +-V (inputs and outputs)."""

# DAQmx constants (nidaqmx.constants values, as sent raw over gRPC)
HW_TIMED_SINGLE_POINT = 12522
LEVEL = {10192: True, 10214: False, 10160: None}
"""Watchdog digital expiration states: high, low, no change (tristate is not simulated)."""
WDT_RESET_TIMER, WDT_CLEAR_EXPIRATION = 0, 1
TASK_START, TASK_STOP, TASK_COMMIT, TASK_ABORT = 0, 1, 3, 6
IDLE_ZERO_VOLTS, IDLE_MAINTAIN = 12526, 12528
AO_IDLE_OUTPUT_BEHAVIOR = 0x2240
FILTER_ATTRIBUTES = {0x21FB: ("a", "enable"), 0x21FC: ("a", "width"),
                     0x2200: ("b", "enable"), 0x2201: ("b", "width"),
                     0x2205: ("z", "enable"), 0x2206: ("z", "width")}
"""Encoder input digital filter channel attributes (nidaqmx ``CIChannel.ci_encoder_a_input_dig_fltr_enable``,
``..._min_pulse_width``, the same for B and Z) -> (input, setting)."""
WATCHDOG_MAX_S = (2 ** 32 - 1) * 8e-9
"""Longest X Series watchdog timeout: a 32-bit count of 8 ns (34.4 s)."""
DECODING = {10090: 4, 10091: 2, 10092: 1}
"""Encoder decoding (X1, X2, X4) -> divisor of the X4 count."""
TICKS = 10304
"""Units of a counter channel read in ticks (LengthUnits.TICKS = AngleUnits.TICKS)."""
ANGLE_PER_REV = {10146: 360.0, 10273: 2.0 * math.pi}
"""AngleUnits DEGREES, RADIANS -> the angle of one revolution."""
TERMINALS = {-1: "DEFAULT", 10083: "RSE", 10078: "NRSE", 10106: "DIFF", 12529: "PSEUDO_DIFF"}
"""TerminalConfiguration values -> names."""

# DAQmx status codes and the first line of the driver's message for each
INVALID_DEVICE_ID = -200220
PHYSICAL_CHAN_DOES_NOT_EXIST = -200170
INVALID_TASK = -200088
DUPLICATE_TASK = -200089
INVALID_ATTRIBUTE_VALUE = -200077
INVALID_ROUTING_SOURCE = -89120
SAMPLES_NOT_YET_AVAILABLE = -200284
OPERATION_TIMED_OUT = -200474
NO_CHANS_IN_TASK = -200478
MULTI_CHAN_TYPES_IN_TASK = -200559
INVALID_AO_DATA_WRITE = -200561
READ_CHAN_TYPE_MISMATCH = -200525
WRITE_CHAN_TYPE_MISMATCH = -200526
WRITE_NUM_CHANS_MISMATCH = -200524
READ_BUFFER_TOO_SMALL = -200229
DEV_CANNOT_BE_ACCESSED = -201003
RESOURCE_RESERVED = -50103
ATTRIBUTE_NOT_SUPPORTED = -200452
WAIT_MISSED_SAMP_CLK = -209802

MESSAGES = {
    INVALID_DEVICE_ID: "Device identifier is invalid.",
    PHYSICAL_CHAN_DOES_NOT_EXIST: "Physical channel specified does not exist on this device.\n"
                                  "Refer to the documentation for channels available on this "
                                  "device.",
    INVALID_TASK: "Task specified is invalid or does not exist.",
    DUPLICATE_TASK: "Task name specified conflicts with an existing task name.",
    INVALID_ATTRIBUTE_VALUE: "Requested value is not a supported value for this property. The "
                             "property value may be monitored/queried but not set.",
    INVALID_ROUTING_SOURCE: "Source terminal to be routed could not be found on the device.\n"
                            "Make sure the terminal name is valid for the specified device.",
    SAMPLES_NOT_YET_AVAILABLE: "Some or all of the samples requested have not yet been acquired.\n"
                               "To wait for the samples to become available use a longer read "
                               "timeout or read later in your program.",
    OPERATION_TIMED_OUT: "The operation timed out.",
    NO_CHANS_IN_TASK: "Specified operation cannot be performed when there are no channels in "
                      "the task.",
    MULTI_CHAN_TYPES_IN_TASK: "Task cannot contain multiple channel types.",
    INVALID_AO_DATA_WRITE: "Attempted writing analog data that is too large or too small.",
    READ_CHAN_TYPE_MISMATCH: "Read cannot be performed because this version of DAQmx Read does "
                             "not match the type of channels in the task.",
    WRITE_CHAN_TYPE_MISMATCH: "Write cannot be performed because this version of DAQmx Write "
                              "does not match the type of channels in the task.",
    WRITE_NUM_CHANS_MISMATCH: "Write cannot be performed, because the number of channels in the "
                              "data does not match the number of channels in the task.",
    READ_BUFFER_TOO_SMALL: "Buffer is too small to fit read data.",
    DEV_CANNOT_BE_ACCESSED: "Device cannot be accessed.\nPossible causes: Device is no longer "
                            "present in the system. Device is not powered.",
    RESOURCE_RESERVED: "The specified resource is reserved. The operation could not be completed "
                       "as specified.",
    ATTRIBUTE_NOT_SUPPORTED: "Specified property is not supported by the device or is not "
                             "applicable to the task.",
    WAIT_MISSED_SAMP_CLK: "DAQmx Wait for Next Sample Clock detected one or more missed sample "
                          "clocks since the last call to Wait for Next Sample Clock which "
                          "indicates that your program is not keeping up with the sample clock.",
}
"""Descriptions returned by ``GetErrorString`` (the NI-DAQmx driver's wording)."""


class DaqmxStatus(Exception):
    """A DAQmx error status: ``code`` < 0 and the driver's extended error message.

    Parameters
    ----------
    code : int
        DAQmx status code (see :data:`MESSAGES`).
    task : str
        Task name for the message ('' when not in a task).
    **details : str
        Extra ``Name: value`` lines, as the driver's extended error info has.
    """

    def __init__(self, code: int, task: str = "", **details: object):
        self.code = code
        lines = [MESSAGES[code]]
        lines += [f"{k.replace('_', ' ')}: {v}" for k, v in details.items()]
        if task:
            lines.append(f"Task Name: {task}")
        self.message = "\n".join(lines) + f"\n\nStatus Code: {code}"
        super().__init__(self.message)


class Rig(Protocol):
    """What the card needs of the simulated rig (:class:`hapflow.hil.simrig.SimRig`)."""

    def exchange(self, ao_volts: np.ndarray, do_states: np.ndarray, ai_volts_out: np.ndarray,
                 counts_out: np.ndarray) -> None: ...


@dataclass
class SimChan:
    """One virtual channel of a task."""

    name: str
    physical: str
    index: int          # position in the rig's arrays of its kind, -1 when not bound
    low: float = -RANGE_V
    high: float = RANGE_V
    divisor: int = 1    # encoder: X4 counts per reported count
    per_count: float = 1.0  # encoder: units per reported count (1 for ticks)
    initial: float = 0.0
    idle: int = IDLE_MAINTAIN   # analog output: idle output behaviour
    z_reset: int | None = None  # encoder: reported count the Z index resets to
    z_phase: str = "AHIGH_BHIGH"
    filters: dict = field(default_factory=dict)   # encoder: input 'a'/'b'/'z' -> [on, width]

    def setup(self) -> CounterSetup:
        """The counter's configuration (the filter on A and B: the longer one that is on)."""
        widths = [w for i, (on, w) in self.filters.items() if on and i in "ab"]
        return CounterSetup(self.divisor, self.z_reset, self.z_phase, max(widths, default=0.0),
                            round(self.initial / self.per_count))


@dataclass
class SimTask:
    """One DAQmx task."""

    name: str
    kind: str | None = None
    chans: list[SimChan] = field(default_factory=list)
    rate: float | None = None
    master: bool = False
    started: bool = False
    last_read: int = 0
    watchdog: WatchdogTimer | None = None


class SimCard:
    """Simulated NI-DAQmx devices in front of a simulated rig (see the module docstring).

    Parameters
    ----------
    channels : sequence of Channel
        The bound channels; their devices are the devices of the card.
    make_rig : callable
        ``make_rig(rate)`` -> a fresh rig sampled at ``rate`` Hz, called when
        the master task starts.
    paced : bool
        Pace the sample clock by the monotonic clock (True) or free-run.
    spare_rate : float, optional
        Build one rig at this rate now, so that the first start does not wait
        for the plant to compile.

    Raises
    ------
    DaqError
        When a bound channel does not exist on the simulated device.
    """

    def __init__(self, channels: Sequence[Channel], make_rig: Callable[[float], Rig], *,
                 paced: bool = True, spare_rate: float | None = None):
        self.channels = list(channels)
        for c in self.channels:
            if c.physical.partition("/")[2] not in PHYSICAL[c.kind]:
                raise DaqError(f"the simulated {PRODUCT} has no {c.kind} channel "
                               f"{c.physical.partition('/')[2]!r} (bound to {c.port}); "
                               f"valid: {_ranges(c.kind)}", c.physical)
        self.devices = sorted({c.device for c in self.channels})
        self._index = {kind: {c.physical: i for i, c in enumerate(by_kind(self.channels, kind))}
                       for kind in PHYSICAL}
        n = {kind: len(v) for kind, v in self._index.items()}
        self.ao = np.zeros(n["ao"])
        self.do = np.zeros(n["do"], dtype=np.bool_)
        self.ai = np.zeros(n["ai"])
        self.counts = np.zeros(n["ci_encoder"], dtype=np.int64)
        self.paced = paced
        self._make_rig = make_rig
        self._spare = (spare_rate, make_rig(spare_rate)) if spare_rate else None
        self._rig: Rig | None = None
        self._counters = Counters([CounterSetup()] * n["ci_encoder"])
        self._tasks: dict[str, SimTask] = {}
        self._unnamed = 0
        self._lock = threading.RLock()
        self.rate = 0.0
        self.edge = 0          # sample clock edges consumed (the current sample)
        self._t0 = 0.0
        self._master: str | None = None
        self._timer_thread: threading.Thread | None = None
        self._timer_wake = threading.Condition(self._lock)

    # ------------------------------------------------------------------ tasks
    def create_task(self, name: str) -> str:
        """Create a task; an empty name gets ``_unnamedTask<N>`` as in DAQmx."""
        with self._lock:
            if not name:
                name = f"_unnamedTask<{self._unnamed}>"
                self._unnamed += 1
            if name in self._tasks:
                raise DaqmxStatus(DUPLICATE_TASK, name)
            self._tasks[name] = SimTask(name)
            return name

    def task(self, name: str) -> SimTask:
        """The task called ``name`` (DAQmx error -200088 when it does not exist)."""
        try:
            return self._tasks[name]
        except KeyError:
            raise DaqmxStatus(INVALID_TASK, name) from None

    def tasks(self) -> list[SimTask]:
        """The tasks that exist, in creation order."""
        with self._lock:
            return list(self._tasks.values())

    def clear_task(self, name: str) -> None:
        """Stop and forget a task."""
        with self._lock:
            self.stop(name)
            del self._tasks[name]

    def add_channels(self, name: str, kind: str, physical: str, assign: str, **config) -> None:
        """Add virtual channels of ``kind`` for a DAQmx physical channel list (``Dev1/ai0:2``).

        ``config`` holds ``low``/``high`` (V) and for an analog input ``terminal``
        (TerminalConfiguration value), or the encoder fields ``decoding``,
        ``units``, ``initial`` and ``per_pulse`` (linear) or ``pulses_per_rev``
        (angular).
        """
        from nidaqmx.utils import unflatten_channel_string
        with self._lock:
            task = self.task(name)
            if task.kind not in (None, kind):
                raise DaqmxStatus(MULTI_CHAN_TYPES_IN_TASK, name,
                                  Channel_Types=f"{task.kind}, {kind}")
            names = unflatten_channel_string(physical)
            made = [self._chan(task, kind, p, _assigned(assign, i, len(names)), config)
                    for i, p in enumerate(names)]
            task.kind = kind
            task.chans += made

    def _chan(self, task: SimTask, kind: str, physical: str, assign: str, config: dict) -> SimChan:
        device, _, local = physical.strip().lstrip("/").partition("/")
        if device not in self.devices:
            raise DaqmxStatus(INVALID_DEVICE_ID, task.name, Device_Specified=device)
        if local not in PHYSICAL[kind]:
            raise DaqmxStatus(PHYSICAL_CHAN_DOES_NOT_EXIST, task.name, Device=device,
                              Physical_Channel_Name=local)
        full = f"{device}/{local}"
        chan = SimChan(assign or full, full, self._index[kind].get(full, -1))
        if kind in ("ai", "ao"):
            low, high = config["low"], config["high"]
            if not (-RANGE_V <= low < high <= RANGE_V):
                raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, task.name,
                                  Property="Minimum/Maximum Value",
                                  Requested_Value=f"{low:g} to {high:g} V",
                                  Possible_Values=f"within -{RANGE_V:g} to {RANGE_V:g} V",
                                  Channel_Name=chan.name)
            chan.low, chan.high = float(low), float(high)
            terminal = TERMINALS.get(config.get("terminal", -1), str(config.get("terminal")))
            problem = PCIE_6351.terminal_problem(local, terminal)
            if problem:
                raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, task.name,
                                  Property="Input Terminal Configuration",
                                  Requested_Value=terminal, Reason=problem,
                                  Channel_Name=chan.name)
        elif kind == "ci_encoder":
            if config["decoding"] not in DECODING:
                raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, task.name, Property="Decoding Type",
                                  Requested_Value=config["decoding"], Possible_Values="X1, X2, X4",
                                  Channel_Name=chan.name)
            chan.divisor = DECODING[config["decoding"]]
            chan.per_count = _per_count(config, 4 // chan.divisor)
            chan.initial = float(config["initial"])
            if config.get("zidx_enable"):
                phase = {v: k for k, v in Z_PHASES.items()}.get(config["zidx_phase"])
                if phase is None:
                    raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, task.name,
                                      Property="Z Index Phase", Requested_Value=config["zidx_phase"],
                                      Possible_Values=", ".join(f"{k} ({v})"
                                                                for k, v in Z_PHASES.items()),
                                      Channel_Name=chan.name)
                chan.z_reset = round(config["zidx_val"] / chan.per_count)
                chan.z_phase = phase
        return chan

    def configure_timing(self, name: str, rate: float, source: str, mode: int) -> None:
        """Sample-clock timing: hardware-timed single point at ``rate`` Hz from ``source``."""
        with self._lock:
            task = self.task(name)
            if mode != HW_TIMED_SINGLE_POINT:
                raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, name, Property="Sample Mode",
                                  Requested_Value=mode,
                                  Possible_Values="Hardware Timed Single Point (12522) on the "
                                                  "simulated rig")
            if not (rate > 0 and math.isfinite(rate)):
                raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, name, Property="Sample Clock Rate",
                                  Requested_Value=rate)
            task.master = self._is_master_source(name, source)
            task.rate = float(rate)

    def _is_master_source(self, name: str, source: str) -> bool:
        if source in ("", "OnboardClock"):
            return True
        parts = source.strip("/").split("/")
        if len(parts) == 3 and parts[0] in self.devices and parts[1:] == ["ai", "SampleClock"]:
            return False
        raise DaqmxStatus(INVALID_ROUTING_SOURCE, name, Source_Terminal=source,
                          Valid_Sources=", ".join(["OnboardClock"]
                                                  + [f"/{d}/ai/SampleClock" for d in self.devices]))

    def start(self, name: str) -> None:
        """Start a task; starting the master starts the sample clock with a fresh rig,
        starting a watchdog task its timer."""
        with self._lock:
            task = self.task(name)
            if task.watchdog is not None:
                self._start_timer(task.watchdog)
                task.started = True
                return
            if not task.chans:
                raise DaqmxStatus(NO_CHANS_IN_TASK, name)
            if task.started:
                return
            if task.master and task.rate is not None:
                if self._master is not None:
                    raise DaqmxStatus(RESOURCE_RESERVED, name, Resource="ai/SampleClock",
                                      Reserved_By=self._master)
                self._start_clock(task)
            task.started = True

    def _start_clock(self, task: SimTask) -> None:
        rate = task.rate
        if self._spare is not None and self._spare[0] == rate:
            self._rig, self._spare = self._spare[1], None
        else:
            try:
                self._rig = self._make_rig(rate)
            except DaqError as e:
                raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, task.name, Property="Sample Clock Rate",
                                  Requested_Value=f"{rate:g} Hz", Reason=str(e)) from None
        self.rate, self.edge, self._master = rate, 0, task.name
        setups = {c.index: c.setup() for t in self._tasks.values() if t.kind == "ci_encoder"
                  for c in t.chans if c.index >= 0}
        self._counters = Counters([setups.get(i, CounterSetup()) for i in range(len(self.counts))])
        n = len(self.counts)
        self._edge_info = tuple(getattr(self._rig, name, np.zeros(n, dtype=dtype)) for name, dtype
                                in (("edge_rate", float), ("index_edges", np.int64),
                                    ("index_period", np.int64)))
        for t in self._tasks.values():
            t.last_read = 0     # edge 0 is the start: a read waits for the first sample
        self._t0 = time.monotonic()

    def stop(self, name: str) -> None:
        """Stop a task; stopping the master stops the sample clock, stopping a watchdog
        task its timer, stopping an analog output task applies its idle output behaviour."""
        with self._lock:
            task = self.task(name)
            task.started = False
            if self._master == name:
                self._master = None
            if task.watchdog is not None:
                task.watchdog.stop()
            if task.kind == "ao":
                for c in task.chans:
                    if c.index >= 0 and c.idle == IDLE_ZERO_VOLTS:
                        self.ao[c.index] = 0.0

    def control(self, name: str, action: int) -> None:
        """DAQmxTaskControl: start, stop or abort; commit, verify, reserve, unreserve
        change nothing the simulation models."""
        with self._lock:
            self.task(name)
            if action == TASK_START:
                self.start(name)
            elif action in (TASK_STOP, TASK_ABORT):
                self.stop(name)

    # ------------------------------------------------------------------ watchdog
    def create_watchdog(self, device: str, name: str, timeout: float) -> str:
        """A watchdog timer task on ``device`` expiring ``timeout`` s after its last reset."""
        with self._lock:
            if device not in self.devices:
                raise DaqmxStatus(INVALID_DEVICE_ID, name, Device_Specified=device)
            if not (timeout == -1 or 0 < timeout <= WATCHDOG_MAX_S):
                raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, name, Property="Watchdog Timeout",
                                  Requested_Value=f"{timeout:g} s",
                                  Possible_Values=f"-1 (never), or more than 0 up to "
                                                  f"{WATCHDOG_MAX_S:g} s")
            name = self.create_task(name)
            self._tasks[name].kind = "watchdog"
            self._tasks[name].watchdog = WatchdogTimer(timeout)
            return name

    def timer(self, name: str) -> WatchdogTimer:
        """The timer of watchdog task ``name``."""
        with self._lock:
            return self._watchdog(name)

    def _watchdog(self, name: str) -> WatchdogTimer:
        task = self.task(name)
        if task.watchdog is None:
            raise DaqmxStatus(ATTRIBUTE_NOT_SUPPORTED, name, Reason="not a watchdog timer task")
        return task.watchdog

    def watchdog_lines(self, name: str, lines: str, states: Sequence[int]) -> None:
        """Expiration states of digital lines (``Dev1/port0/line0:1``): high, low or no change."""
        from nidaqmx.utils import unflatten_channel_string
        with self._lock:
            timer = self._watchdog(name)
            names = unflatten_channel_string(lines)
            if len(names) != len(states):
                raise DaqmxStatus(WRITE_NUM_CHANS_MISMATCH, name, Channels_in_Data=len(states),
                                  Channels_in_Task=len(names))
            for physical, state in zip(names, states):
                device, _, local = physical.strip().lstrip("/").partition("/")
                if device not in self.devices or local not in PHYSICAL["do"]:
                    raise DaqmxStatus(PHYSICAL_CHAN_DOES_NOT_EXIST, name, Device=device,
                                      Physical_Channel_Name=local)
                if state not in LEVEL:
                    raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, name,
                                      Property="Digital Expiration State", Requested_Value=state,
                                      Possible_Values="High (10192), Low (10214), No Change "
                                                      "(10160) on the simulated card")
                index = self._index["do"].get(f"{device}/{local}", -1)
                if index >= 0 and LEVEL[state] is not None:
                    timer.do_states[index] = LEVEL[state]
                elif index >= 0:
                    timer.do_states.pop(index, None)

    def watchdog_analog(self, name: str) -> None:
        """Analog output expiration states: an X Series watchdog covers digital lines only."""
        with self._lock:
            self._watchdog(name)
            raise DaqmxStatus(ATTRIBUTE_NOT_SUPPORTED, name, Property="Watchdog Analog Output "
                              "Expiration State", Device_Type=PRODUCT,
                              Reason="the X Series watchdog timer covers the DIO and PFI lines")

    def watchdog_action(self, name: str, action: int) -> None:
        """DAQmxControlWatchdogTask: reset the timer, or clear an expiration."""
        with self._lock:
            timer = self._watchdog(name)
            if action == WDT_RESET_TIMER:
                timer.reset(time.monotonic_ns())
            elif action == WDT_CLEAR_EXPIRATION:
                timer.clear(time.monotonic_ns())
            else:
                raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, name, Property="Watchdog Action",
                                  Requested_Value=action,
                                  Possible_Values="Reset Timer (0), Clear Expiration (1)")

    def _start_timer(self, timer: WatchdogTimer) -> None:
        timer.start(time.monotonic_ns())
        if self._timer_thread is None or not self._timer_thread.is_alive():
            self._timer_thread = threading.Thread(target=self._run_timers, daemon=True,
                                                  name="simulated card watchdog")
            self._timer_thread.start()
        self._timer_wake.notify_all()

    def _timers(self) -> list[WatchdogTimer]:
        return [t.watchdog for t in self._tasks.values() if t.watchdog is not None]

    def _run_timers(self) -> None:
        """The card's timer: expire every watchdog whose deadline passes, whatever the
        client does; ends when no timer runs."""
        with self._timer_wake:
            while any(t.running for t in self._timers()):
                now = time.monotonic_ns()
                for timer in self._timers():
                    timer.poll(now, self.ao, self.do)
                deadline = min((t.deadline for t in self._timers()), default=math.inf)
                self._timer_wake.wait(min((deadline - now) / 1e9, 0.5) if deadline > now else 0)

    def _guarded(self, kind: str, index: int) -> bool:
        """True when an expired watchdog holds output ``index`` of ``kind``."""
        return any(t.guards(kind, index) for t in self._timers())

    def set_filter(self, name: str, channel: str, attribute: int, value: float | bool) -> None:
        """An encoder input's digital filter: enable (bool) or minimum pulse width (s).  As on
        X Series, a width other than 90 ns, 5.12 us or 2.56 ms is the device's one custom
        width (NI-DAQmx Help, "Digital Filtering Considerations for X Series")."""
        line, what = FILTER_ATTRIBUTES[attribute]
        with self._lock:
            task = self.task(name)
            _check_kind(task, "ci_encoder", ATTRIBUTE_NOT_SUPPORTED)
            for c in task.chans:
                if channel and c.name != channel:
                    continue
                state = c.filters.setdefault(line, [False, 0.0])
                if what == "enable":
                    state[0] = bool(value)
                    continue
                if not (0 < value <= 1) or (PCIE_6351.custom_filter(value) and any(
                        PCIE_6351.custom_filter(w) and abs(w - value) > 1e-12
                        for other in self._encoder_chans(c.physical.split("/")[0])
                        for _, w in other.filters.values() if w)):
                    raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, name,
                                      Property="Digital Filter Minimum Pulse Width",
                                      Requested_Value=f"{value:g} s",
                                      Possible_Values="90e-9, 5.12e-6, 2.56e-3 s or the "
                                                      "device's one custom width",
                                      Channel_Name=c.name)
                state[1] = float(value)

    def _encoder_chans(self, device: str) -> list[SimChan]:
        return [c for t in self._tasks.values() if t.kind == "ci_encoder" for c in t.chans
                if c.physical.split("/")[0] == device]

    def set_idle(self, name: str, channel: str, value: int) -> None:
        """An analog output's idle output behaviour (zero volts or maintain existing value)."""
        with self._lock:
            task = self.task(name)
            _check_kind(task, "ao", ATTRIBUTE_NOT_SUPPORTED)
            if value not in (IDLE_ZERO_VOLTS, IDLE_MAINTAIN):
                raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, name, Property="Idle Output Behavior",
                                  Requested_Value=value, Possible_Values="Zero Volts (12526), "
                                  "Maintain Existing Value (12528)")
            for c in task.chans:
                if not channel or c.name == channel:
                    c.idle = value

    # ------------------------------------------------------------------ sample clock
    def _timed(self, task: SimTask) -> bool:
        """True for a started task on the running sample clock (implicitly starting it)."""
        if task.rate is None:
            return False
        if not task.started:
            self.start(task.name)
        if self._master is None:
            raise DaqmxStatus(SAMPLES_NOT_YET_AVAILABLE, task.name, Reason="no sample clock: the "
                              "master task (ai/SampleClock) is not running")
        return True

    def wait(self, name: str, timeout: float) -> bool:
        """Wait for the next sample clock edge of ``name``'s clock; True when it was late.

        ``timeout`` in s (-1: forever); DAQmx error -200474 when the next edge
        is further away.
        """
        with self._lock:
            task = self.task(name)
            if not self._timed(task):
                raise DaqmxStatus(INVALID_ATTRIBUTE_VALUE, name, Property="Sample Timing Type",
                                  Requested_Value="On Demand",
                                  Possible_Values="Sample Clock, Hardware Timed Single Point")
            late = self._next_edge(name, timeout)
            stall, dropped = self._timing_fault()
            late = late or dropped
            if stall > 0 and self.paced:
                time.sleep(stall)
            return late

    def _timing_fault(self) -> tuple[float, bool]:
        """(stall in s, dropped) injected at the sample just taken (the rig's faults)."""
        fault = getattr(self._rig, "timing_fault", None)
        return fault(self.edge - 1) if fault is not None else (0.0, False)

    def _next_edge(self, name: str, timeout: float) -> bool:
        """Advance to the next edge (or to the latest when late); True when late."""
        if not self.paced:
            self._advance(1)
            return False
        now = time.monotonic()
        latest = math.floor((now - self._t0) * self.rate)
        if latest > self.edge:
            self._advance(latest - self.edge)
            return True
        deadline = self._t0 + (self.edge + 1) / self.rate
        if 0 <= timeout < deadline - now:
            time.sleep(timeout)
            raise DaqmxStatus(OPERATION_TIMED_OUT, name, Timeout=f"{timeout:g} s")
        _sleep_until(deadline)
        self._advance(1)
        return False

    def _advance(self, edges: int) -> None:
        try:
            for _ in range(edges):
                self._rig.exchange(self.ao, self.do, self.ai, self.counts)
                self._counters.edge(self.counts, *self._edge_info)
                self.edge += 1
        except DaqError as e:
            raise DaqmxStatus(DEV_CANNOT_BE_ACCESSED, self._master or "",
                              Device=", ".join(self.devices), Reason=str(e)) from None

    def _sample(self, task: SimTask, kind: str, timeout: float) -> None:
        """Make the current edge the sample a read of ``task`` returns."""
        _check_kind(task, kind, READ_CHAN_TYPE_MISMATCH)
        if self._timed(task):
            if task.last_read == self.edge:
                self._next_edge(task.name, timeout)
            task.last_read = self.edge

    # ------------------------------------------------------------------ I/O
    def read_ai(self, name: str, timeout: float, size: int) -> list[float]:
        """One sample of every analog input channel of ``name`` (V, clipped to its range).

        ``size`` is the client's array size (DAQmx error -200229 when too small).
        """
        with self._lock:
            task = self.task(name)
            if size < len(task.chans):
                raise DaqmxStatus(READ_BUFFER_TOO_SMALL, name, Array_Size=size,
                                  Required=len(task.chans))
            self._sample(task, "ai", timeout)
            return [min(max(self.ai[c.index], c.low), c.high) if c.index >= 0 else 0.0
                    for c in task.chans]

    def read_counter(self, name: str, timeout: float) -> float:
        """One sample of the encoder channel of ``name`` (ticks, or units when scaled)."""
        with self._lock:
            task = self.task(name)
            self._sample(task, "ci_encoder", timeout)
            c = task.chans[0]
            count = int(self._counters.out[c.index]) if c.index >= 0 else 0
            return count * c.per_count          # the initial count is the counter's

    def write_ao(self, name: str, volts: Sequence[float]) -> None:
        """Set the analog outputs of ``name`` (V); they act from the next edge."""
        with self._lock:
            task = self.task(name)
            _check_kind(task, "ao", WRITE_CHAN_TYPE_MISMATCH)
            _check_count(task, len(volts))
            for c, v in zip(task.chans, volts):
                if not (c.low <= v <= c.high):
                    raise DaqmxStatus(INVALID_AO_DATA_WRITE, name, Value_Written=f"{v:g}",
                                      Range=f"{c.low:g} to {c.high:g} V", Channel_Name=c.name)
            for c, v in zip(task.chans, volts):
                if c.index >= 0 and not self._guarded("ao", c.index):
                    self.ao[c.index] = v

    def write_do(self, name: str, states: Sequence[bool]) -> None:
        """Set the digital lines of ``name``."""
        with self._lock:
            task = self.task(name)
            _check_kind(task, "do", WRITE_CHAN_TYPE_MISMATCH)
            _check_count(task, len(states))
            for c, s in zip(task.chans, states):
                if c.index >= 0 and not self._guarded("do", c.index):
                    self.do[c.index] = bool(s)

    # ------------------------------------------------------------------ queries
    def physical_channels(self, device: str, kind: str) -> list[str]:
        """Physical channels of ``kind`` on ``device`` (DAQmx error -200220 for another device)."""
        if device not in self.devices:
            raise DaqmxStatus(INVALID_DEVICE_ID, Device_Specified=device)
        return [f"{device}/{p}" for p in PHYSICAL[kind]]


def _per_count(config: dict, counts_per_cycle: int) -> float:
    """Units per reported count of an encoder channel: 1 in ticks; the distance per
    pulse (linear) or the angle per count (angular: a revolution over pulses x decoding)."""
    if config["units"] == TICKS:
        return 1.0
    if "pulses_per_rev" in config:
        return ANGLE_PER_REV[config["units"]] / (config["pulses_per_rev"] * counts_per_cycle)
    return float(config["per_pulse"])


def _check_kind(task: SimTask, kind: str, mismatch: int) -> None:
    """DAQmx error ``mismatch`` when ``task`` holds channels of another kind (-200478: none)."""
    if task.kind != kind:
        raise DaqmxStatus(mismatch if task.chans else NO_CHANS_IN_TASK, task.name)


def _check_count(task: SimTask, n: int) -> None:
    """DAQmx error -200524 when a write holds ``n`` values for a different number of channels."""
    if n != len(task.chans):
        raise DaqmxStatus(WRITE_NUM_CHANS_MISMATCH, task.name, Channels_in_Data=n,
                          Channels_in_Task=len(task.chans))


def _assigned(assign: str, i: int, n: int) -> str:
    """Name of the i-th of n channels created with name ``assign`` (DAQmx appends the index)."""
    if not assign or n == 1:
        return assign
    return f"{assign}{i}"


def _ranges(kind: str) -> str:
    names = PHYSICAL[kind]
    if kind == "do":
        return "port0/line0..7, port1/line0..7, port2/line0..7"
    return f"{names[0]} .. {names[-1]}"


def _sleep_until(deadline: float, spin: float = 1e-4) -> None:
    """Sleep until ``spin`` s before ``deadline`` (monotonic s), then spin to it."""
    rest = deadline - time.monotonic() - spin
    if rest > 0:
        time.sleep(rest)
    while time.monotonic() < deadline:
        pass
