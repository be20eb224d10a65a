"""Audio for the sound sink: struck-string tones, signal resampling, WAV files, live output.

Everything here runs in Python between chunks (or in the audio device's
callback thread), never inside the generated kernel.

- :class:`Tone` and :class:`Voices`: a decaying multi-partial tone per note,
  evaluated in closed form at any sample time, so a note starts exactly at
  its strike time (not rounded to an audio sample).
- :class:`Resampler`: a signal sampled at tick times, linearly interpolated
  onto the audio sample grid ``n / rate``.
- :class:`WavWriter`: a mono 16-bit PCM WAV written piece by piece whose
  header is valid after every write, so a run stopped by an error or a kill
  leaves a readable file.
- :class:`AudioStream`: a ``sounddevice.OutputStream`` whose callback reads
  a ring buffer; :meth:`AudioStream.write` blocks while the ring is full,
  which paces the producer (the simulation) to real time.
"""
from __future__ import annotations

import math
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hapflow.errors import SimulationError

SILENCE = 1e-4
"""Envelope level (-80 dB) below which a voice is dropped."""


def note_frequency(note: float) -> float:
    """Fundamental frequency in Hz of MIDI note ``note`` (equal temperament, A4 = 69 = 440 Hz)."""
    return 440.0 * 2.0 ** ((note - 69.0) / 12.0)


@dataclass(frozen=True)
class Tone:
    """A struck-string tone: ``partials`` decaying sines.

    Partial ``k = 1..K`` has frequency ``f_k = k f0 sqrt(1 + B k^2)`` Hz
    (``B`` = ``inharmonicity``, 0 for a harmonic tone, ~1e-4 for a piano's
    middle strings), relative amplitude ``1/k`` and decay time constant
    ``decay / k`` s (higher partials die out faster)::

        s(tau) = sum_k a_k exp(-tau k / decay) sin(2 pi f_k tau),   tau >= 0
        a_k = (1/k) / sum_j (1/j)

    so ``|s| <= 1`` and ``s(0) = 0`` (a note starts without a click).

    Parameters
    ----------
    frequency : float
        Fundamental ``f0`` in Hz.
    partials : int
        Number of partials ``K``.
    decay : float
        Decay time constant of the fundamental in s.
    inharmonicity : float
        String inharmonicity coefficient ``B`` (dimensionless).
    """

    frequency: float
    partials: int = 6
    decay: float = 0.8
    inharmonicity: float = 0.0
    freqs: np.ndarray = field(init=False, repr=False)
    amps: np.ndarray = field(init=False, repr=False)
    rates: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        k = np.arange(1, self.partials + 1, dtype=np.float64)
        object.__setattr__(self, "freqs",
                           k * self.frequency * np.sqrt(1.0 + self.inharmonicity * k * k))
        object.__setattr__(self, "amps", (1.0 / k) / np.sum(1.0 / k))
        object.__setattr__(self, "rates", k / self.decay)

    @property
    def length(self) -> float:
        """Time in s after which the envelope is below :data:`SILENCE`."""
        return self.decay * math.log(1.0 / SILENCE)

    def samples(self, tau: np.ndarray) -> np.ndarray:
        """The tone at times ``tau`` (s) after its onset; 0 before it."""
        tau = np.asarray(tau, dtype=np.float64)
        on = np.maximum(tau, 0.0)[:, None]
        parts = self.amps * np.exp(-on * self.rates) * np.sin(2.0 * np.pi * self.freqs * on)
        return np.where(tau >= 0.0, parts.sum(axis=1), 0.0)


class AudioGrid:
    """Audio computed on the sample grid ``t_n = n / rate``.

    Parameters
    ----------
    rate : float
        Audio sample rate in Hz.
    """

    def __init__(self, rate: float):
        self.rate = float(rate)

    def times(self, n0: int, n1: int) -> np.ndarray:
        """Times (s) of the audio samples ``n0 <= n < n1``."""
        return np.arange(n0, n1, dtype=np.float64) / self.rate


class Voices(AudioGrid):
    """Notes sounding at once on an :class:`AudioGrid`: each an onset time (s) and a peak
    amplitude of one :class:`Tone`."""

    def __init__(self, rate: float):
        super().__init__(rate)
        self.active: list[tuple[float, float, Tone]] = []

    def strike(self, t: float, amplitude: float, tone: Tone) -> None:
        """Start ``tone`` at time ``t`` (s) with peak amplitude ``amplitude`` (full scale 1)."""
        self.active.append((float(t), float(amplitude), tone))

    def render(self, n0: int, n1: int) -> np.ndarray:
        """Audio samples ``n0 <= n < n1`` (at times ``n / rate``) of every voice, summed."""
        times = self.times(n0, n1)
        out = np.zeros(times.size)
        for onset, amplitude, tone in self.active:
            if times.size and times[-1] >= onset:
                out += amplitude * tone.samples(times - onset)
        end = n1 / self.rate
        self.active = [v for v in self.active if end - v[0] < v[2].length]
        return out


class Resampler(AudioGrid):
    """Linear interpolation of a sampled signal onto an :class:`AudioGrid`.

    Feed the signal chunk by chunk with its sample times; each call returns
    the audio samples up to the last sample time given (the last input
    sample is kept to bridge chunks).  The error of a smooth signal is at
    most ``h^2 max|u''| / 8`` for input sample spacing ``h``.
    """

    def __init__(self, rate: float):
        super().__init__(rate)
        self.next = 0
        self.last: tuple[float, float] | None = None

    def feed(self, t: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Audio samples from the next one up to time ``t[-1]`` (s), from samples ``u`` at ``t``."""
        if t.size == 0:
            return np.zeros(0)
        if self.last is not None:
            t = np.concatenate([[self.last[0]], t])
            u = np.concatenate([[self.last[1]], u])
        self.last = (float(t[-1]), float(u[-1]))
        stop = math.floor(t[-1] * self.rate + 1e-9) + 1
        grid = self.times(self.next, stop)
        self.next = max(self.next, stop)
        return np.interp(grid, t, u)


_HEADER = struct.Struct("<4sI4s4sIHHIIHH4sI")


class WavWriter:
    """A mono 16-bit PCM WAV file written piece by piece, its header valid after every write.

    Parameters
    ----------
    path : str or Path
        File to write (parent folders are created).
    rate : int
        Sample rate in Hz.
    append : bool
        Continue an existing file written by this class at the same rate
        (otherwise, or if there is none, start a new one).

    Raises
    ------
    SimulationError
        If the file cannot be written, or ``append`` finds a different format.
    """

    def __init__(self, path: str | Path, rate: int, append: bool = False):
        self.path = Path(path)
        self.rate = int(rate)
        self.frames = 0
        self.clipped = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if append and self.path.exists():
                self._file = open(self.path, "r+b")
                self._resume()
            else:
                self._file = open(self.path, "w+b")
                self._header()
        except OSError as exc:
            raise SimulationError(f"cannot write the WAV file {self.path}: {exc}") from None

    def _resume(self) -> None:
        head = self._file.read(_HEADER.size)
        fields = _HEADER.unpack(head) if len(head) == _HEADER.size else None
        if fields is None or fields[0] != b"RIFF" or fields[5:8] != (1, 1, self.rate):
            self._file.close()
            raise SimulationError(f"cannot continue {self.path}: not a mono 16-bit "
                                  f"{self.rate} Hz WAV written by hapflow")
        self.frames = fields[12] // 2
        self._file.seek(_HEADER.size + 2 * self.frames)

    def _header(self) -> None:
        size = 2 * self.frames
        self._file.seek(0)
        self._file.write(_HEADER.pack(b"RIFF", 36 + size, b"WAVE", b"fmt ", 16, 1, 1, self.rate,
                                      2 * self.rate, 2, 16, b"data", size))

    def write(self, samples: np.ndarray) -> None:
        """Append samples (full scale +-1; values beyond are clipped and counted)."""
        x = np.asarray(samples, dtype=np.float64)
        self.clipped += int(np.count_nonzero(np.abs(x) > 1.0))
        pcm = np.round(np.clip(x, -1.0, 1.0) * 32767.0).astype("<i2")
        self._file.seek(_HEADER.size + 2 * self.frames)
        self._file.write(pcm.tobytes())
        self.frames += pcm.size
        self._header()
        self._file.flush()

    def close(self) -> None:
        """Close the file (it is already complete after every write)."""
        if not self._file.closed:
            self._file.close()


def _ring_write(ring: np.ndarray, pos: int, x: np.ndarray) -> None:
    """Copy ``x`` into ``ring`` from absolute position ``pos``, wrapping around."""
    start = pos % ring.size
    first = min(x.size, ring.size - start)
    ring[start:start + first] = x[:first]
    ring[:x.size - first] = x[first:]


def _ring_read(ring: np.ndarray, pos: int, out: np.ndarray) -> None:
    """Fill ``out`` from ``ring`` at absolute position ``pos``, wrapping around."""
    start = pos % ring.size
    first = min(out.size, ring.size - start)
    out[:first] = ring[start:start + first]
    out[first:] = ring[:out.size - first]


class AudioStream:
    """Live mono output through ``sounddevice``, fed from a ring buffer.

    The device's callback thread reads the ring; :meth:`write` copies
    samples in and blocks while the ring is full, so a producer faster than
    real time is held to real time.  The stream starts once the ring is half
    full (or at :meth:`close`).  An underrun (the callback finds too few
    samples before :meth:`close`: the producer was late) is counted in
    :attr:`underruns`; an output underflow that PortAudio flags (a
    device-side dropout such as a JACK server xrun, the ring not empty) in
    :attr:`xruns`.

    Parameters
    ----------
    rate : int
        Sample rate in Hz (must be one the device supports; JACK: the server's).
    buffer : float
        Ring capacity in s.
    device : str or int or None
        ``sounddevice`` output device (name substring or index); None: the default.

    Raises
    ------
    sounddevice.PortAudioError, ValueError
        If there is no such output device or it cannot be opened.
    """

    def __init__(self, rate: int, buffer: float, device: Any = None):
        import sounddevice as sd
        self.rate = int(rate)
        self._ring = np.zeros(max(64, int(round(buffer * rate))), dtype=np.float32)
        self._written = 0
        self._read = 0
        self._cond = threading.Condition()
        self._ending = False
        self.started = False
        self.underruns = 0
        self.xruns = 0
        self._stream = sd.OutputStream(samplerate=self.rate, channels=1, dtype="float32",
                                       device=device, callback=self._callback)
        self.device = sd.query_devices(self._stream.device)["name"]

    def _callback(self, outdata: np.ndarray, frames: int, time: Any, status: Any) -> None:
        if status.output_underflow:
            self.xruns += 1
        with self._cond:
            n = min(frames, self._written - self._read)
            _ring_read(self._ring, self._read, outdata[:n, 0])
            self._read += n
            ending = self._ending
            self._cond.notify_all()
        if n < frames:
            outdata[n:, 0] = 0.0
            if not ending:
                self.underruns += 1

    def write(self, samples: np.ndarray, timeout: float = 5.0) -> None:
        """Queue samples (full scale +-1) for playing; blocks while the ring is full.

        Raises
        ------
        SimulationError
            If the device consumes nothing for ``timeout`` s (it stopped).
        """
        x = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
        cap, at = self._ring.size, 0

        def free() -> int:
            return cap - (self._written - self._read)

        while at < x.size:       # not started: the ring is less than half full, so free() > 0
            with self._cond:
                if self.started and not self._cond.wait_for(lambda: free() > 0, timeout):
                    raise SimulationError(f"audio device {self.device!r} stopped taking "
                                          f"samples for {timeout:g} s")
                n = min(x.size - at, free())
                _ring_write(self._ring, self._written, x[at:at + n])
                self._written += n
                at += n
                half = free() <= cap - cap // 2
            if half and not self.started:
                self._start()

    def _start(self) -> None:
        self._stream.start()
        self.started = True

    def close(self, wait: bool = True) -> None:
        """Stop the stream; with ``wait`` first play out every queued sample."""
        with self._cond:
            self._ending = True
            pending = self._written - self._read
        if wait and pending and not self.started:
            self._start()
        if wait and self.started:
            with self._cond:
                self._cond.wait_for(lambda: self._read >= self._written,
                                    pending / self.rate + 2.0)
        if self.started and wait:
            self._stream.stop()
        elif self.started:
            self._stream.abort()
        self._stream.close()
