"""Python-side sinks drained in a helper process, off the real-time loop.

A graph's MIDI and sound sinks (:mod:`hapflow.blocks.sinks`) append records
to buffers in their own kernel state; their Python side (MIDI messages, tone
synthesis, resampling, WAV files, live ports) empties them between chunks.
In a simulation that happens between chunks of the kernel; in a real-time run
it would take milliseconds out of the loop once per chunk.  So the runner
hands the records to a process forked before the loop starts
(:class:`SinkDrainer`): once per chunk the loop copies each sink's records
into one of two slots of shared memory, empties the kernel's buffers and
sends the slot's number and time span down a pipe (microseconds); the
process runs the sinks' :meth:`~hapflow.block.Block.drain` hooks on the slot
and frees it, and at the end their :meth:`~hapflow.block.Block.close` hooks,
so their files are complete when the run returns.  If the process is still
busy with both slots, the loop leaves the records in the kernel's buffers for
the next chunk (a sink whose buffer then fills drops records and says so).
When the run's process dies the helper notices (its parent changes) and
closes the sinks as interrupted, so their files stay readable.

The sinks' Python objects live on in the process: the blocks in the run's
process are not drained (their files and ports are the helper's).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
from multiprocessing import shared_memory

import numpy as np

from hapflow.errors import SimulationError

CLOSE_TIMEOUT = 60.0
"""Seconds to wait for the helper to drain the last records and close the sinks."""


class SinkDrainer:
    """The helper process draining a simulation's sinks (see the module docstring).

    Parameters
    ----------
    sim : Simulation
        The compiled controller (its kernel arrays).
    names : list of str
        The sinks to drain: blocks with a ``hand_over(d, m, d_out, m_out)`` that copies
        and empties their buffers (:func:`hapflow.blocks.sinks.hand_over`).
    """

    def __init__(self, sim, names: list[str]):
        self.sim = sim
        self.rate = sim.graph.rate
        self.blocks = [sim.graph.nodes[n].block for n in names]
        layout = sim.layout.blocks
        self.d_slices = [layout[n]["d"] for n in names]
        self.m_slices = [layout[n]["m"] for n in names]
        d_size = sum(s.stop - s.start for s in self.d_slices)
        m_size = sum(s.stop - s.start for s in self.m_slices)
        m_type = sim.arrays["m"].dtype
        self.shm = shared_memory.SharedMemory(
            create=True, size=8 * 2 + 2 * (8 * d_size + m_type.itemsize * m_size))
        buf = self.shm.buf
        self.busy = np.ndarray(2, dtype=np.int64, buffer=buf)
        self.busy[:] = 0
        self.slots = []
        offset = 16
        for _ in range(2):
            d = np.ndarray(d_size, dtype=np.float64, buffer=buf, offset=offset)
            offset += 8 * d_size
            m = np.ndarray(m_size, dtype=m_type, buffer=buf, offset=offset)
            offset += m_type.itemsize * m_size
            self.slots.append((_split(d, self.d_slices), _split(m, self.m_slices)))
        self.last = 0
        self.behind = 0
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=self._serve, args=(child, self.conn), daemon=True,
                                name="hapflow-sinks")
        self.proc.start()
        child.close()

    # ------------------------------------------------------------------ the loop's side
    def hand_off(self, tick: int) -> None:
        """The records of the ticks since the last hand-off, to the helper (called by the
        loop once per chunk; copies and one pipe message, no waiting)."""
        free = 0 if not self.busy[0] else 1 if not self.busy[1] else -1
        if free < 0 or tick <= self.last:
            self.behind += free < 0
            return
        d_all, m_all = self.sim.arrays["d"], self.sim.arrays["m"]
        d_slot, m_slot = self.slots[free]
        for k, block in enumerate(self.blocks):
            ds, ms = self.d_slices[k], self.m_slices[k]
            block.hand_over(d_all[ds.start:ds.stop], m_all[ms.start:ms.stop], d_slot[k],
                            m_slot[k])
        self.busy[free] = 1
        self.conn.send((free, self.last / self.rate, tick / self.rate))
        self.last = tick

    def close(self, status: str, tick: int) -> None:
        """Hand off what is left, have the helper close every sink, wait for it.

        Raises
        ------
        SimulationError
            The first problem a sink had, only when ``status`` is 'complete'.
        """
        problem = ""
        try:
            if tick > self.last:
                self._wait_free()
                self.hand_off(tick)
            self.conn.send(("close", status))
            if self.conn.poll(CLOSE_TIMEOUT):
                problem = self.conn.recv()
            else:
                problem = f"the sinks' process did not finish within {CLOSE_TIMEOUT:g} s"
        except (OSError, EOFError) as exc:
            problem = f"the sinks' process ended early ({exc})"
        finally:
            self.proc.join(timeout=5.0)
            if self.proc.is_alive():
                self.proc.kill()
            self.conn.close()
            self.slots = []
            self.busy = None
            self.shm.close()
            self.shm.unlink()
        if problem and status == "complete":
            raise SimulationError(problem)

    def _wait_free(self) -> bool:
        """Wait (after the loop, not in it) until the helper frees a slot."""
        import time
        end = time.monotonic() + CLOSE_TIMEOUT
        while self.busy.all() and time.monotonic() < end and self.proc.is_alive():
            time.sleep(0.001)
        return not self.busy.all()

    # ------------------------------------------------------------------ the helper's side
    def _serve(self, conn, parent_end) -> None:
        """The helper process: drain each slot it is sent, close the sinks at the end (or
        when the run's process dies: the pipe closes), report the first problem."""
        parent_end.close()
        signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the run's to handle
        parent = os.getppid()
        blocks = self.blocks
        status, problem = "interrupted", ""
        while True:            # the run's process may die: other helpers hold its pipe end
            try:
                if not conn.poll(0.2):
                    if os.getppid() != parent:
                        break
                    continue
                msg = conn.recv()
            except (EOFError, OSError):
                break
            if msg[0] == "close":
                status = msg[1]
                break
            slot, t0, t1 = msg
            d_slot, m_slot = self.slots[slot]
            try:
                for block, d, m in zip(blocks, d_slot, m_slot):
                    block.drain(d, m, t0, t1)
            except Exception as exc:        # noqa: BLE001  (reported at the end)
                problem = problem or f"{type(exc).__name__}: {exc}"
            self.busy[slot] = 0
        for block in blocks:
            try:
                block.close(status)
            except Exception as exc:        # noqa: BLE001
                problem = problem or f"{type(exc).__name__}: {exc}"
        try:
            conn.send(problem)
        except (OSError, EOFError):
            pass
        os._exit(0)


def _split(flat: np.ndarray, slices) -> list[np.ndarray]:
    """Views of ``flat`` of the sizes of ``slices``, one after the other."""
    out, at = [], 0
    for s in slices:
        out.append(flat[at:at + s.stop - s.start])
        at += s.stop - s.start
    return out
