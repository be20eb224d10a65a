"""The ``sim`` DAQ backend: the simulated rig paced by the monotonic clock.

:class:`SimDaq` plays the card of :class:`~hapflow.hil.simrig.SimRig` in real
time.  :meth:`SimDaq.wait` sleeps until the next sample clock edge
(:class:`~hapflow.hil.clock.Pacer`: absolute-deadline sleep, then a ~30 us
spin), then runs the rig's edge (:meth:`SimRig.exchange`) with the outputs the
host wrote last.  If the host was a period or more late, the rig still runs
every edge it missed, holding the outputs (the plant does not wait for the
host), and ``wait`` reports the sample late.  Injected timing faults: a
``drop`` reports the sample late, a ``late`` holds the host for the given time
at that sample (a host stall).  Unpaced, the clock is virtual and a ``late``
fault holds nothing: the virtual clock passes over the edges the stall would
have missed (deterministic stalls, for tests).

Hardware watchdog: :meth:`SimDaq.arm_watchdog` arms the card's watchdog timer
(:class:`~hapflow.hil.cardwatchdog.WatchdogTimer`) with the channels' safe
outputs as expiration states; it counts on the sample clock, not in the
loop: every edge the card runs, the ones it runs on its own during a host
stall included, first checks it, so a host that does not pet it
(:meth:`SimDaq.pet`) within the timeout finds the enable lines off and the
analog outputs at their safe voltage from the edge at the expiry on, and its
writes ignored.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from hapflow.graph import Graph

from .backend import Backend, Channel, DaqError, WatchdogExpired, by_kind
from .cardwatchdog import WatchdogTimer
from .clock import Pacer, now_ns
from .products import PCIE_6351
from .simcounter import CounterSetup, Counters
from .simrig import BITS, Fault, SimRig


class SimDaq(Backend):
    """Simulated DAQ card in front of the graph's plant, paced by the monotonic clock.

    Parameters
    ----------
    graph : Graph
        The whole graph; its plant half is simulated.
    faults : sequence of Fault
        Faults to inject (see :class:`~hapflow.hil.simrig.Fault`).
    seed : int
        Seed of the card's noise.
    spin : float
        Seconds of clock polling before each edge.
    paced : bool
        False: do not wait for the clock; every ``wait`` is the next edge of a
        virtual clock (as fast as possible, deterministic: for checking the I/O
        path and comparing with ``--mode sim``).
    noise : float
        Analog-input noise of the card in V rms (see :class:`SimRig`).
    bits : int or None
        Converter resolution; None: ideal converters (see :class:`SimRig`).
    """

    def __init__(self, graph: Graph, faults: Sequence[Fault] = (), seed: int = 0,
                 spin: float = 30e-6, paced: bool = True, noise: float = 1e-4,
                 bits: int | None = BITS):
        self.graph = graph
        self.noise, self.bits = noise, bits
        self.paced = paced
        self.faults = list(faults)
        self.seed = seed
        self.spin = spin
        self.rig: SimRig | None = None
        self.pacer: Pacer | None = None
        self.edges = 0
        self._edge: int | None = None
        self._stall = 0                         # ns of injected stall, unpaced
        self.watchdog: WatchdogTimer | None = None
        self.t0 = 0

    def device(self, name: str) -> tuple[str, dict[str, list[str]]]:
        """The simulated card: a PCIe-6351 (:data:`~hapflow.hil.products.PCIE_6351`)."""
        return PCIE_6351.name, PCIE_6351.on(name)

    def self_test(self, name: str) -> bool:
        """The simulated card has nothing to fail: it passes."""
        return True

    def open(self, channels: Sequence[Channel], rate: float) -> None:
        """Build and compile the simulated rig for ``channels`` at ``rate`` Hz.

        Raises
        ------
        DaqError
            When an analog input's terminal configuration is one the simulated
            PCIe-6351 does not have (as NI-DAQmx refuses it at task creation).
        """
        for c in by_kind(channels, "ai"):
            problem = PCIE_6351.terminal_problem(c.physical.split("/", 1)[1], c.terminal)
            if problem:
                raise DaqError(problem, c.physical)
        self.rig = SimRig(self.graph, channels, rate, self.seed, self.faults, self.noise,
                          self.bits)
        self.pacer = Pacer(rate, self.spin)
        self._safe_ao = np.array([c.safe for c in by_kind(channels, "ao")])
        self._safe_do = np.array([bool(c.safe) for c in by_kind(channels, "do")], dtype=np.bool_)
        self._ao = self._safe_ao.copy()
        self._do = self._safe_do.copy()
        self._ai = np.zeros(len(by_kind(channels, "ai")))
        self._counts = np.zeros(len(by_kind(channels, "ci_encoder")), dtype=np.int64)
        self.counters = Counters([CounterSetup(4 // c.decoding, c.z_index, c.z_phase, c.filter,
                                               c.initial)
                                  for c in by_kind(channels, "ci_encoder")])
    def _rig(self) -> SimRig:
        if self.rig is None:
            raise DaqError("the simulated card is not open: call open() first")
        return self.rig

    def arm_watchdog(self, timeout: float) -> None:
        """Arm the card's watchdog timer: ``timeout`` s, expiration states = the safe outputs.

        It starts with the sample clock (:meth:`start`)."""
        self._rig()
        self.watchdog = WatchdogTimer(timeout)
        self.watchdog.ao_states = dict(enumerate(self._safe_ao.tolist()))
        self.watchdog.do_states = dict(enumerate(self._safe_do.tolist()))

    def start(self) -> None:
        """Start the sample clock one period from now, outputs in the safe state."""
        self._rig()
        self._ao[:] = self._safe_ao
        self._do[:] = self._safe_do
        self._stall = 0
        first = self.pacer.start() if self.paced else self.pacer.start(0)
        self.t0 = first                     # card time of the first edge, ns
        if self.watchdog is not None:
            self.watchdog.start(first)

    def wait(self) -> bool:
        """Sleep until the next edge, run the rig's edge(s); True if the sample is late."""
        rig = self._rig()
        period = self.pacer.period
        if self.paced:
            deadline, _, skipped = self.pacer.wait()
        else:                                   # a stall passes over edges of the virtual clock
            deadline, skipped = self.pacer.deadline, max(0, self._stall - period) // period
            self.pacer.deadline = deadline + (skipped + 1) * period
        self._edge = deadline + skipped * period
        late, dropped = 0.0, False
        for i in range(skipped + 1):            # timing faults of skipped edges count too
            if self.watchdog is not None:
                self.watchdog.poll(deadline + i * period, self._ao, self._do)
            rig.exchange(self._ao, self._do, self._ai, self._counts)
            self.counters.edge(self._counts, rig.edge_rate, rig.index_edges, rig.index_period)
            self.edges += 1
            edge_late, edge_dropped = rig.timing_fault(rig.tick - 1)
            late, dropped = max(late, edge_late), dropped or edge_dropped
        if late > 0.0 and self.paced:
            _hold(late)
        else:
            self._stall = int(round(late * 1e9))
        return skipped > 0 or dropped

    def edge_time(self) -> int | None:
        """Time (ns) of the edge whose samples :meth:`read` returns: monotonic, or on the
        virtual clock (from 0) when unpaced."""
        return self._edge

    def read(self, ai_volts: np.ndarray, counts: np.ndarray) -> None:
        """The samples of the latest edge; encoder counts as the counters report them
        (decoding, Z index, digital filter: :mod:`hapflow.hil.simcounter`)."""
        ai_volts[:] = self._ai
        counts[:] = self.counters.out

    def write(self, ao_volts: np.ndarray, do_states: np.ndarray) -> None:
        """Hold the outputs; they reach the plant at the next edge (ignored once the
        watchdog has expired)."""
        if self.watchdog is None or not self.watchdog.expired:
            self._ao[:] = ao_volts
            self._do[:] = do_states

    def pet(self) -> None:
        """Reset the watchdog timer, at the time of the latest edge (the virtual clock,
        unpaced) or now (paced); :class:`WatchdogExpired` if it has expired."""
        wd = self.watchdog
        if wd is None:
            return
        if wd.expired:
            raise WatchdogExpired(f"the card's watchdog timer expired at t = "
                                  f"{(wd.expired_at - self.t0) / 1e9:.4f} s, {wd.timeout:g} s after "
                                  "the last reset: outputs held in the safe state")
        wd.reset(now_ns() if self.paced else self._edge)

    def safe_state(self) -> None:
        """Every output at its safe value (they reach the plant at the next edge)."""
        self._ao[:] = self._safe_ao
        self._do[:] = self._safe_do

    def close(self) -> None:
        """Release the rig (and disarm the watchdog)."""
        self.rig = None
        self.watchdog = None


def _hold(seconds: float) -> None:
    """Keep the host busy for ``seconds`` (an injected stall)."""
    end = now_ns() + int(seconds * 1e9)
    time.sleep(max(0.0, seconds - 1e-4))
    while now_ns() < end:
        pass
