"""Sinks: timing accuracy of MIDI/WAV files, and the paced 2 s audio stream through JACK.

Prints two tables.  The stream part needs ``jackd`` (Debian jackd2); it
starts a JACK server with the dummy driver (48 kHz, 256 frames) for itself.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import mido
import numpy as np
from scipy.io import wavfile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hapflow as hf  # noqa: E402
from hapflow.blocks import MidiSink, SoundSink  # noqa: E402
from tests.helpers import table  # noqa: E402
from tests.jack import jack_server  # noqa: E402

RATE, FS, RUNS = 1000.0, 48000, 5


def timed_graph(folder: Path, events: dict[float, float], live: bool) -> hf.Graph:
    n = int(RATE * 2)
    speed, when = np.zeros((n, 1)), np.zeros((n, 1))
    for t, s in events.items():
        k = int(np.ceil(t * RATE))
        speed[k, 0], when[k, 0] = s, t
    g = hf.Graph(name="bench-sinks", rate=RATE, duration=n / RATE)
    g.add("speed", table(speed))
    g.add("when", table(when))
    g.add("midi", MidiSink(timed=True, hold=0.05, file=str(folder / "b.mid")))
    g.add("snd", SoundSink(timed=True, decay=0.3, live=live, file=str(folder / "b.wav")))
    for sink in ("midi", "snd"):
        g.wire(f"speed.y -> {sink}.strike")
        g.wire(f"when.y -> {sink}.time")
    return g


def file_accuracy(folder: Path) -> tuple[float, float, float]:
    """Max MIDI time error, WAV onset error from a least-squares shift fit, max WAV error."""
    rng = np.random.default_rng(1)
    events = {float(t): 5.0 for t in np.sort(rng.uniform(0.01, 1.9, 20)).round(9)}
    hf.Simulation(timed_graph(folder, events, live=False)).run()
    t, ons = 0.0, []
    for msg in mido.MidiFile(folder / "b.mid"):
        t += msg.time
        if msg.type == "note_on":
            ons.append(t)
    midi_err = float(np.max(np.abs(np.array(ons) - list(events))))
    fs, x = wavfile.read(folder / "b.wav")
    tt = np.arange(x.size) / fs
    from hapflow.blocks.audio import Tone, note_frequency
    tone = Tone(note_frequency(60), 6, 0.3, 0.0)
    ref = sum(0.25 * tone.samples(tt - t0) for t0 in events)
    slope = np.gradient(ref, 1.0 / fs)
    err = x / 32767.0 - ref
    shift = float(np.dot(err, slope) / np.dot(slope, slope))       # err ~ -shift * ref'
    return midi_err, abs(shift), float(np.max(np.abs(err)))


def stream_runs(folder: Path) -> tuple[list[tuple[float, int, int, int]], int]:
    rows = []
    with jack_server(rate=FS, period=256) as server:
        x0 = server.xruns()
        time.sleep(2.0)
        idle = server.xruns() - x0
        for _ in range(RUNS):
            g = timed_graph(folder, {0.2: 4.0, 0.9: 8.0, 1.5: 10.0}, live=True)
            sim = hf.Simulation(g)
            x0 = server.xruns()
            result = sim.run()
            snd = g.nodes["snd"].block
            rows.append((result.wall, snd.underruns, snd.xruns, server.xruns() - x0))
    return rows, idle


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        midi_err, shift, wav_err = file_accuracy(folder)
        print("| file | timing error | note |")
        print("|---|---|---|")
        print(f"| MIDI (20 strikes, located times) | {midi_err * 1e6:.2f} us max | 20 us file ticks |")
        print(f"| WAV onset (least-squares shift) | {shift * 1e6:.3f} us | 48 kHz, 16 bit |")
        print(f"| WAV vs closed form | {wav_err:.2e} max abs | 16-bit step 3.1e-05 |")
        print()
        t0 = time.perf_counter()
        rows, idle = stream_runs(folder)
        print(f"2 s paced stream through JACK (dummy, 48 kHz, 256 frames), {RUNS} runs "
              f"({time.perf_counter() - t0:.0f} s):")
        print("| run | wall (s) | underruns (ring empty) | device underflow flags | server xruns |")
        print("|---|---|---|---|---|")
        for k, (wall, under, flags, xr) in enumerate(rows, 1):
            print(f"| {k} | {wall:.3f} | {under} | {flags} | {xr} |")
        print(f"| median | {statistics.median(r[0] for r in rows):.3f} | "
              f"{statistics.median(r[1] for r in rows):g} | "
              f"{statistics.median(r[2] for r in rows):g} | "
              f"{statistics.median(r[3] for r in rows):g} |")
        print(f"| no client, 2 s idle | - | - | - | {idle} |")


if __name__ == "__main__":
    main()
