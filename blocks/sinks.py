"""Python-side sinks: MIDI notes and sound from strikes or signals.

The kernels only append records ``(t, value)`` to a buffer in the block's
own state (``m[0]`` records in ``d``, ``m[1]`` records dropped); Python
empties it between chunks (:meth:`hapflow.block.Block.drain`; a real-time
loop hands a copy to another process instead, :func:`hand_over`) into a
Standard MIDI File, a live MIDI port, a WAV file or a live audio stream,
and finishes the files when the run ends (:meth:`hapflow.block.Block.close`,
also after an error or Ctrl-C).  The scheduler ends every chunk before a
buffer can fill: each sample hit appends at most one record, so a chunk
holds at most ``capacity`` sample hits.
"""
from __future__ import annotations

import math
import queue
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .audio import AudioStream, Resampler, Tone, Voices, WavWriter, note_frequency
from hapflow.block import Block, ParamError
from hapflow.errors import SimulationError
from hapflow.jit import njit
from hapflow.params import Live, Structural, at_least, between, nonnegative, one_of, positive
from hapflow.ports import In

TEMPO = 500_000
"""MIDI file tempo in us per beat (120 beats per minute, the MIDI default)."""
TICKS_PER_BEAT = 25_000
"""MIDI file resolution: 500 ms / 25 000 = 20 us per MIDI tick (times rounded to +-10 us)."""


class SinkWarning(UserWarning):
    """A sink cannot reach its live device and falls back to its file (said once per block)."""


@njit
def _push(d, m, t, v):
    """Append record (t, v) to the buffer in ``d``, counted in ``m[0]`` (dropped: ``m[1]``)."""
    n = m[0]
    if 2 * n + 2 <= d.size:
        d[2 * n] = t
        d[2 * n + 1] = v
        m[0] = n + 1
    else:
        m[1] += 1


@njit
def _record_strikes(t, x, d, m, p, strike):
    if strike[0] > 0.0:
        _push(d, m, t, strike[0])


@njit
def _record_timed_strikes(t, x, d, m, p, strike, time):
    if strike[0] > 0.0:
        _push(d, m, time[0], strike[0])


@njit
def _record_signal(t, x, d, m, p, u):
    _push(d, m, t, u[0])


def velocity(speed: Any, full_speed: float, gamma: float) -> np.ndarray:
    """MIDI velocity of strike speeds: ``clip(round(127 (speed / full_speed)^gamma), 1, 127)``.

    Parameters
    ----------
    speed : array_like
        Strike speeds (> 0), in the unit of ``full_speed``.
    full_speed : float
        Speed that gives velocity 127.
    gamma : float
        Curve exponent (1: linear; < 1 louder soft notes; > 1 softer).

    Returns
    -------
    ndarray of int
    """
    ratio = np.asarray(speed, dtype=np.float64) / full_speed
    return np.clip(np.round(127.0 * ratio ** gamma), 1, 127).astype(int)


def hand_over(d: np.ndarray, m: np.ndarray, d_out: np.ndarray, m_out: np.ndarray) -> None:
    """Copy a sink's buffered records and counts into ``d_out``, ``m_out`` and empty its
    buffer, so that another process can drain the copy (a real-time loop hands its sinks'
    records to one: :mod:`hapflow.hil.sinkdrain`)."""
    n = 2 * int(m[0])
    d_out[:n] = d[:n]
    m_out[:] = m
    m[0] = 0
    m[1] = 0


class _Sink(Block):
    """Common part of the sinks: the record buffer, its drain, Python-side parameters.

    Its :meth:`drain` reads only the records the kernel appended (``m[0]``
    records ``(t, value)`` in ``d``, ``m[1]`` dropped), so a copy taken by
    :meth:`hand_over` can be drained elsewhere.
    """

    hand_over = staticmethod(hand_over)

    python_side: tuple[str, ...] = ()
    """Parameters used only by the Python side (they do not change the kernel)."""

    def configure(self) -> None:
        self.dstate = 2 * self.capacity
        self.istate = 2
        self._warned = False

    def structural_key(self) -> tuple:
        key = super().structural_key()
        kept = tuple((n, v) for n, v in key[2] if n not in self.python_side)
        return (*key[:2], kept, *key[3:])

    def drain_limit(self) -> int | None:
        return self.capacity

    def _take(self, d: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The buffered records (times in s, values) and an empty buffer."""
        n = int(m[0])
        rec = d[:2 * n].reshape(n, 2).copy()
        if m[1]:
            warnings.warn(f"{type(self).__name__}: {int(m[1])} record(s) dropped: the buffer "
                          f"holds {self.capacity}; drain it at least every {self.capacity} "
                          "sample hits (or raise 'capacity')", SinkWarning, stacklevel=3)
        m[0] = 0
        m[1] = 0
        return rec[:, 0], rec[:, 1]

    def _say_once(self, text: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(text, SinkWarning, stacklevel=3)

    def _strike_ports(self) -> None:
        """Inputs ``strike`` (and ``time`` when ``timed``) and the kernel recording them."""
        self.inputs = {"strike": _STRIKE}
        if self.timed:
            self.inputs["time"] = In(1, unit="s", doc="time of the strike (s), within the tick")
        self._update = _record_timed_strikes if self.timed else _record_strikes

    @property
    def lag(self) -> float:
        """How far back (s) a strike seen in a tick may lie: one sample time when ``timed``."""
        return (self.sample_time or 0.0) if self.timed else 0.0


_STRIKE = In(1, unit=None, doc="strike speed (> 0 in the tick a note starts, else 0), any unit")
_TIMED = Structural(False, kind="bool",
                    doc="strike times from input time (s), e.g. located events, not the tick")
_CAPACITY = Structural(4096, kind="int", check=at_least(1),
                       doc="records buffered between two drains (limits the chunk length)")


class MidiSink(_Sink):
    """MIDI notes from strikes: a Standard MIDI File and, if available, a live MIDI port.

    A tick with ``strike > 0`` starts note ``note`` on ``channel`` at that
    tick's time ``t`` (with ``timed: true``: at the time given by input
    ``time``, e.g. a device's event time located inside the tick, which may
    lie up to one tick before ``t``) with velocity::

        v = clip(round(127 (strike / full_speed)^gamma), 1, 127)

    (``full_speed`` in the unit of ``strike``, e.g. a hammer's angular speed
    in rad/s).  The note ends ``hold`` s later; a new strike of a sounding
    note sends its note-off first.  When the run ends (also on an error or
    Ctrl-C) the events go to ``file``, a type-0 Standard MIDI File at tempo
    500 000 us per beat and 25 000 ticks per beat: event times are rounded to
    20 us (error <= 10 us).  Note-offs still pending then are written at their
    times.  A run starting again from t = 0 starts a new file.

    With ``port`` set, the events are also sent live, in real time from the
    first drain, to the first MIDI output port whose name contains ``port``
    (``"*"``: the first port), looked up through mido's rtmidi backend with
    the JACK API (when a JACK server runs), then the system default API.  If
    there is no such port it says so once (a :class:`SinkWarning`) and only
    writes the file.  At the end of a completed run it waits until the last
    event has been sent, then sends the pending note-offs.

    Run the sink at the base rate (a one-tick strike between two sample hits
    of a slower sink is not seen).

    Ports
    -----
    strike : in, (1,), any unit   strike speed, > 0 in the tick a note starts, 0 otherwise
    time   : in, (1,), s          (timed only) time of the strike
    """

    inputs = {"strike": _STRIKE}
    params = {"timed": _TIMED,
              "note": Live(60, kind="int", check=between(0, 127), doc="MIDI note number"),
              "channel": Live(0, kind="int", check=between(0, 15), doc="MIDI channel (0-15)"),
              "full_speed": Live(10.0, check=positive,
                                 doc="strike speed giving velocity 127 (unit of strike)"),
              "gamma": Live(1.0, check=positive, doc="velocity curve exponent"),
              "hold": Live(0.5, unit="s", check=positive, doc="note length (note-off after it)"),
              "file": Structural("", kind="str",
                                 doc="Standard MIDI File to write ('' for none)"),
              "port": Structural("", kind="str",
                                 doc="live MIDI output port name (substring; '*' any; '' none)"),
              "capacity": _CAPACITY}
    python_side = ("file", "port")

    def configure(self) -> None:
        super().configure()
        self._messages: list[tuple[float, Any]] = []
        self._off: dict[tuple[int, int], float] = {}
        self._live: _LiveMidi | None = None
        self._strike_ports()

    def kernels(self) -> dict:
        return {"update": self._update}

    def drain(self, d: np.ndarray, m: np.ndarray, t0: float, t1: float) -> None:
        if t0 == 0.0:
            self._messages, self._off = [], {}
        if self.port and self._live is None and not self._warned:
            self._live = self._open_live(t0)
        times, speeds = self._take(d, m)
        vel = velocity(speeds, self.full_speed, self.gamma)
        key = (int(self.channel), int(self.note))
        for t, v in zip(times, vel):
            self._release(t, inclusive=True)
            if key in self._off:
                del self._off[key]
                self._emit(t, "note_off", key, 0)
            self._emit(t, "note_on", key, int(v))
            self._off[key] = t + self.hold
        self._release(t1 - self.lag, inclusive=False)   # a timed strike may still come before t1

    def _emit(self, t: float, kind: str, key: tuple[int, int], vel: int) -> None:
        import mido
        msg = mido.Message(kind, channel=key[0], note=key[1], velocity=vel)
        self._messages.append((float(t), msg))
        if self._live is not None:
            self._live.send(float(t), msg)

    def _release(self, until: float, inclusive: bool) -> None:
        """Note-offs due before ``until`` (or at it), in time order."""
        for key, t_off in sorted(self._off.items(), key=lambda kv: kv[1]):
            if t_off < until or (inclusive and t_off == until):
                del self._off[key]
                self._emit(t_off, "note_off", key, 0)

    def _open_live(self, t0: float) -> _LiveMidi | None:
        try:
            return _LiveMidi(self.port, t0)
        except LookupError as exc:
            self._say_once(f"MidiSink: {exc}; writing only the MIDI file "
                           f"{self.file or '(none set)'}")
            return None

    def close(self, status: str = "complete") -> None:
        import mido
        pending = [(t, mido.Message("note_off", channel=c, note=n, velocity=0))
                   for (c, n), t in sorted(self._off.items(), key=lambda kv: kv[1])]
        try:
            if self._live is not None:
                self._live.close([msg for _, msg in pending], wait=status == "complete")
        finally:
            self._live = None
            if self.file:
                write_midi(self.file, self._messages + pending)

    def events(self) -> list[tuple[float, Any]]:
        """Every (time in s, ``mido.Message``) emitted since the run started at t = 0."""
        return list(self._messages)


def write_midi(path: str | Path, events: list[tuple[float, Any]]) -> None:
    """Write ``(time in s, mido.Message)`` events, in time order, as a type-0 Standard MIDI File.

    Times are rounded to the file's 20 us tick (see :data:`TICKS_PER_BEAT`).

    Raises
    ------
    SimulationError
        If the file cannot be written.
    """
    import mido
    track = mido.MidiTrack([mido.MetaMessage("set_tempo", tempo=TEMPO, time=0)])
    last = 0
    for t, msg in sorted(events, key=lambda e: e[0]):
        tick = int(round(mido.second2tick(t, TICKS_PER_BEAT, TEMPO)))
        track.append(msg.copy(time=tick - last))
        last = tick
    track.append(mido.MetaMessage("end_of_track", time=0))
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mido.MidiFile(type=0, ticks_per_beat=TICKS_PER_BEAT, tracks=[track]).save(path)
    except OSError as exc:
        raise SimulationError(f"MidiSink: cannot write the MIDI file {path}: {exc}") from None


class _LiveMidi:
    """A live MIDI output port and a thread sending each message at its time.

    Message time ``t`` (s of simulated time) is sent at wall time
    ``anchor + t``, the anchor set so the first drained chunk starts now.
    """

    APIS = ("mido.backends.rtmidi/UNIX_JACK", "mido.backends.rtmidi")
    LINGER = 0.25   # s the port stays open after the last send: the backend
    #                 delivers asynchronously (JACK: in its next process cycle,
    #                 later under a host stall) and closing the port drops what
    #                 it has not delivered yet

    def __init__(self, name: str, t0: float):
        self.port = self._open(name)
        self.anchor = time.monotonic() - t0
        self.queue: queue.Queue = queue.Queue()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="MidiSink", daemon=True)
        self.thread.start()

    @classmethod
    def _open(cls, name: str) -> Any:
        import mido
        seen: list[str] = []
        for api in cls.APIS:
            try:
                backend = mido.Backend(api)
                names = backend.get_output_names()
                match = [n for n in names if name == "*" or name in n]
                if match:
                    return backend.open_output(match[0])
                seen += names
            except Exception:                   # no JACK server, no ALSA sequencer, no rtmidi
                continue
        available = ", ".join(repr(n) for n in seen) or "none"
        raise LookupError(f"no live MIDI output port matching {name!r} (available: {available})")

    def send(self, t: float, msg: Any) -> None:
        self.queue.put((self.anchor + t, msg))

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            due, msg = item
            while not self.stop.is_set() and time.monotonic() < due:
                self.stop.wait(min(0.05, max(0.0, due - time.monotonic())))
            if not self.stop.is_set():
                self.port.send(msg)

    def close(self, pending: list[Any], wait: bool) -> None:
        """Send queued messages (``wait``) or drop them, then ``pending`` now; close the port."""
        if not wait:
            self.stop.set()
        self.queue.put(None)
        self.thread.join()
        for msg in pending:
            self.port.send(msg)
        time.sleep(self.LINGER)
        self.port.close()


class SoundSink(_Sink):
    """Sound from strikes (a decaying multi-partial tone per note) or from a signal.

    **mode notes** (input ``strike``): a tick with ``strike > 0`` starts, at
    that tick's time exactly (``timed: true``: at input ``time``, see
    :class:`MidiSink`), the tone of MIDI note ``note``
    (``f0 = 440 * 2^((note - 69)/12)`` Hz) with peak amplitude
    ``gain * min(strike / full_speed, 1)`` (full scale 1).  The tone has
    ``partials`` partials: partial k at ``k f0 sqrt(1 + B k^2)`` Hz
    (``B`` = ``inharmonicity``), amplitude proportional to ``1/k``, decay
    time constant ``decay / k`` s (see :class:`hapflow.blocks.audio.Tone`).
    Notes overlap; each is dropped once 80 dB down.

    **mode signal** (input ``u``): the audio is ``gain * u``, linearly
    interpolated from the block's sample times onto the audio grid.

    The audio (``audio_rate`` Hz, mono, clipped to +-1) streams live through
    ``sounddevice`` (PortAudio) to ``device`` (default: the default output)
    when ``live`` is true: a ring buffer of ``buffer`` s filled between
    chunks feeds the stream's callback, and the simulation waits while the
    ring is full, so it runs in real time (chunks are then at most
    ``buffer / 2`` long).  Underruns (the ring ran dry: the simulation was
    late) are counted in :attr:`underruns`, output underflows the device
    flags (e.g. JACK server xruns) in :attr:`xruns`; both are reported on
    stderr when the run ends if not zero.  With no audio device it says so
    once (a :class:`SinkWarning`) and writes ``file``, or ``sound.wav`` if
    none is set.  ``file`` (mono 16-bit PCM WAV, readable after every chunk)
    is written whenever it is set.  A run starting again from t = 0 starts a
    new file.

    Ports
    -----
    strike : in, (1,), any unit   (mode notes) strike speed, > 0 in the tick a note starts
    time   : in, (1,), s          (mode notes, timed) time of the strike
    u      : in, (1,), any unit   (mode signal) signal to hear, scaled by gain
    """

    params = {"mode": Structural("notes", kind="str", check=one_of("notes", "signal"),
                                 doc="'notes': a tone per strike; 'signal': hear input u"),
              "timed": _TIMED,
              "note": Live(60, kind="int", check=between(0, 127),
                           doc="MIDI note number of the tone (notes)"),
              "partials": Live(6, kind="int", check=between(1, 64),
                               doc="partials of the tone (notes)"),
              "decay": Live(0.8, unit="s", check=positive,
                            doc="decay time constant of the fundamental; partial k: decay/k"),
              "inharmonicity": Live(0.0, check=nonnegative,
                                    doc="string inharmonicity B: partial k at k f0 sqrt(1+B k^2)"),
              "full_speed": Live(10.0, check=positive,
                                 doc="strike speed giving amplitude gain (unit of strike)"),
              "gain": Live(0.5, check=nonnegative,
                           doc="peak amplitude at full speed (notes); audio per unit of u"),
              "audio_rate": Structural(48000, kind="int", check=between(8000, 384000),
                                       doc="audio sample rate, Hz"),
              "file": Structural("", kind="str", doc="WAV file to write ('' for none)"),
              "live": Structural(True, kind="bool",
                                 doc="stream to the audio device (paces the run to real time)"),
              "device": Structural("", kind="str",
                                   doc="sounddevice output device (name substring; '' default)"),
              "buffer": Structural(0.2, unit="s", check=between(0.01, 10.0),
                                   doc="live ring buffer length"),
              "capacity": _CAPACITY}
    python_side = ("audio_rate", "file", "live", "device", "buffer")
    underruns: int = 0
    """Underruns of the live stream (ring empty), summed over the runs since t = 0."""
    xruns: int = 0
    """Output underflows flagged by the audio device, summed over the runs since t = 0."""

    def configure(self) -> None:
        super().configure()
        self._strike_ports()
        if self.mode == "signal":
            if self.timed:
                raise ParamError("timed", "parameter 'timed' applies to mode 'notes' only")
            self.inputs = {"u": In(1, unit=None, doc="signal to hear, scaled by gain")}
            self._update = _record_signal
        self._wav: WavWriter | None = None
        self._stream: AudioStream | None = None
        self._voices = Voices(self.audio_rate)
        self._resampler = Resampler(self.audio_rate)
        self._next = 0
        self._end = 0.0
        self.underruns = self.xruns = 0
        self.path: Path | None = Path(self.file) if self.file else None     # the WAV written

    def kernels(self) -> dict:
        return {"update": self._update}

    def drain_limit(self) -> int | None:
        if self.live and self.sample_time:
            return min(self.capacity, max(1, int(0.5 * self.buffer / self.sample_time)))
        return self.capacity

    def drain(self, d: np.ndarray, m: np.ndarray, t0: float, t1: float) -> None:
        if t0 == 0.0:
            self._restart()
        times, values = self._take(d, m)
        self._end = t1
        audio = self._render(times, values, t1 - self.lag)   # a timed strike may lie before t1
        self._outputs(t0 == 0.0)
        self._play(audio)

    def _play(self, audio: np.ndarray) -> None:
        if self._wav is not None:
            self._wav.write(audio)
        if self._stream is not None:
            self._stream.write(audio)

    def _restart(self) -> None:
        self._close_outputs(wait=False)
        self._voices = Voices(self.audio_rate)
        self._resampler = Resampler(self.audio_rate)
        self._next = 0
        self.underruns = self.xruns = 0

    def _render(self, times: np.ndarray, values: np.ndarray, until: float) -> np.ndarray:
        if self.mode == "signal":
            return self.gain * self._resampler.feed(times, values)
        tone = Tone(note_frequency(self.note), self.partials, self.decay, self.inharmonicity)
        for t, speed in zip(times, values):
            self._voices.strike(t, self.gain * min(speed / self.full_speed, 1.0), tone)
        stop = max(self._next, math.ceil(until * self.audio_rate - 1e-6))
        audio = self._voices.render(self._next, stop)
        self._next = stop
        return audio

    def _outputs(self, new: bool) -> None:
        """Open the stream and the WAV file if they are not open (after a close, continue)."""
        if self.live and self._stream is None and not self._warned:
            try:
                self._stream = AudioStream(self.audio_rate, self.buffer, self.device or None)
            except Exception as exc:            # PortAudioError, no device, bad rate
                self.path = self.path or Path("sound.wav")
                self._say_once(f"SoundSink: no audio output device ({exc}); writing "
                               f"{self.path} instead")
        if self.path is not None and self._wav is None:
            self._wav = WavWriter(self.path, self.audio_rate, append=not new)

    def _close_outputs(self, wait: bool) -> None:
        try:
            if self._stream is not None:
                self._stream.close(wait)
                self.underruns += self._stream.underruns
                self.xruns += self._stream.xruns
        finally:
            self._stream = None
            if self._wav is not None:
                self._wav.close()
            self._wav = None

    def close(self, status: str = "complete") -> None:
        had_stream = self._stream is not None
        try:
            if self.mode == "notes" and self.lag:      # the audio held back for timed strikes
                self._play(self._render(np.zeros(0), np.zeros(0), self._end))
        finally:
            self._close_outputs(wait=status == "complete")
        if had_stream and (self.underruns or self.xruns):
            print(f"SoundSink: {self.underruns} audio underrun(s), {self.xruns} device "
                  "underflow(s) so far", file=sys.stderr)
