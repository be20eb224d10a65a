"""The HIL command line: run --mode hil, hil check, report; exit codes and signals."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import hapflow as hf
from hapflow.cli import main

from .children import expect_line

ROOT = Path(__file__).resolve().parents[1]
SWEEP = str(ROOT / "graphs" / "colton2005_sweep.yaml")


@pytest.fixture
def bed():
    return str(ROOT / "graphs" / "hil_testbed.yaml")


def test_run_hil_with_a_fault_exits_1_with_one_line(bed, tmp_path, capsys):
    out = tmp_path / "run.h5"
    code = main(["run", bed, "--mode", "hil", "--daq", "sim", "--duration", "0.4",
                 "--out", str(out), "--max-lateness", "1", "--max-overruns", "1000",
                 "--fault", "saturate@150x20:head.force=1"])   # longer than a host stall:
    # edges skipped in a stall are run by the card but never read by the loop
    assert code == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("real time: hil-testbed at 1000 Hz on SimDaq")
    assert "not recorded in HIL mode (plant signals a real rig cannot measure): load.pos" in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hapflow: safety stop at t = ")
    assert "saturated input: head.force (Dev1/ai0) at 10 V" in err[0] and str(out) in err[0]
    rec = hf.recorder.load(out)
    assert rec.attrs["status"] == "safety" and rec.attrs["safety_kind"] == "saturated input"
    assert rec.time.size == rec.attrs["safety_tick"] + 1


def test_report_prints_percentiles_histogram_and_plots(bed, tmp_path, capsys):
    out = tmp_path / "run.h5"
    assert main(["run", bed, "--mode", "hil", "--duration", "0.3", "--out", str(out),
                 "--set", "motor.bandwidth=30", "--max-lateness", "1",
                 "--max-overruns", "1000"]) == 0
    capsys.readouterr()
    png = tmp_path / "timing.png"
    assert main(["report", str(out), "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("300 ticks at 1000 Hz (0.3 s), status complete")
    for word in ("|period error|", "lateness", "compute", "p99.9", "overruns (missed edges",
                 "lateness histogram:", "safety events: none"):
        assert word in text
    assert png.stat().st_size > 10_000
    with h5py.File(out) as f:
        assert "motor.bandwidth: 30.0" in f.attrs["graph_yaml"] or "bandwidth: 30" in f.attrs["graph_yaml"]
        assert f.attrs["duration"] == 0.3           # --duration's, not the file's 2 s


def test_report_of_a_simulation_recording_is_a_clear_error(bed, tmp_path, capsys):
    out = tmp_path / "sim.h5"
    assert main(["run", bed, "--duration", "0.1", "--out", str(out), "--no-progress"]) == 0
    assert main(["report", str(out)]) == 2
    assert "has no real-time timing (/hil)" in capsys.readouterr().err


def test_hil_check_lists_channels_split_and_devices(capsys):
    assert main(["hil", "check", SWEEP]) == 0
    text = capsys.readouterr().out
    assert "bindings OK — 5 channels at 4000 Hz" in text
    assert "plant (real in HIL, simulated by the sim rig): motor, dev, enc, head" in text
    assert "controller (real-time kernel): traj, pid, comp, vel_est" in text
    assert "[-60, 60] N" in text and "5e-06 m/count" in text and "|v| <= 1 m/s" in text
    assert "devices (simulated rig): Dev1" in text


def test_hil_options_need_hil_mode(bed, capsys):
    assert main(["run", bed, "--fault", "drop@3", "--no-progress"]) == 2
    assert "--fault applies to --mode hil" in capsys.readouterr().err
    assert main(["run", bed, "--mode", "hil", "--grpc", "localhost:1"]) == 2
    assert "--grpc applies to --daq nidaqmx" in capsys.readouterr().err
    assert main(["run", bed, "--mode", "hil", "--fault", "glitch@soon"]) == 2
    assert "KIND@TICK" in capsys.readouterr().err


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_stops_safely_and_keeps_the_recording(bed, tmp_path, sig, code, spawn):
    out = tmp_path / "run.h5"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = spawn([sys.executable, "-m", "hapflow.cli", "run", bed, "--mode", "hil",
                  "--duration", "30", "--out", str(out), "--chunk", "0.1",
                  "--max-lateness", "1", "--max-overruns", "100000"],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                 cwd=ROOT)
    expect_line(proc, "real time: hil-testbed")
    import time
    time.sleep(0.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    name = signal.Signals(sig).name
    assert err.strip().startswith("hapflow: safety stop at t = ") and f"{name}: received {name}" in err
    rec = hf.recorder.load(out)
    assert rec.attrs["safety_kind"] == name and not rec.attrs["complete"]
    assert rec.time.size == rec.attrs["safety_tick"] + 1 >= 100
    assert rec["motor.force_cmd"][-1, 0] == 0.0


def test_kill_9_leaves_a_readable_recording(bed, tmp_path, spawn):
    """The writer process closes the file with every chunk it got when the loop dies."""
    import time
    out = tmp_path / "run.h5"
    proc = spawn([sys.executable, "-m", "hapflow.cli", "run", bed, "--mode", "hil",
                  "--duration", "30", "--out", str(out), "--chunk", "0.1",
                  "--max-lateness", "1", "--max-overruns", "100000"],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                 env=dict(os.environ, PYTHONUNBUFFERED="1"), cwd=ROOT)
    expect_line(proc, "real time: hil-testbed")
    time.sleep(0.6)
    proc.kill()
    proc.wait(timeout=30)
    for _ in range(100):                                   # the writer closes it shortly
        try:
            rec = hf.recorder.load(out)
            break
        except OSError:
            time.sleep(0.1)
    assert rec.attrs["status"] == "killed" and not rec.attrs["complete"]
    n = rec.time.size
    assert n >= 200 and n % 100 == 0 and rec.attrs["ticks"] == n
    np.testing.assert_array_equal(rec.time, np.arange(n) / 1000.0)
    with h5py.File(out) as f:
        assert f["hil/wake"].shape == (n,)


def test_writer_keeps_the_chunk_it_was_appending_when_the_loop_died(tmp_path):
    """The loop's process dies after handing over a chunk, before the writer says it is
    done: the reply fails (broken pipe) and the file is closed as 'killed' with the chunk,
    not as 'error' (seen once in CI with kill -9)."""
    import multiprocessing as mp

    from hapflow.hil.recording import Buffer, _writer
    ctx = mp.get_context("fork")                # as HilRecorder starts it
    loop, writer = ctx.Pipe()
    buffers = [Buffer(5, 1, 1), Buffer(5, 1, 1)]
    buffers[0].log[:, 0] = np.arange(5.0)
    path = tmp_path / "run.h5"
    proc = ctx.Process(target=_writer, args=(writer, loop, str(path),
                                             {"x.y": ("m", ("log", 0))}, 1000.0, {}, buffers))
    proc.start()
    writer.close()
    assert loop.recv() == ("ready", None)
    loop.send(("chunk", 0, 0, 5))
    loop.close()                               # gone before the writer's reply
    proc.join(timeout=30)
    assert proc.exitcode == 0
    rec = hf.recorder.load(path)
    assert rec.attrs["status"] == "killed" and not rec.attrs["complete"]
    np.testing.assert_array_equal(rec["x.y"][:, 0], np.arange(5.0))
    for b in buffers:                          # the writer unlinked them: nobody else can
        assert not Path("/dev/shm", b.shm.name).exists()
        b.release(unlink=False)


def test_unpaced_sim_card_from_the_command_line_is_the_agreement_legs_recording(tmp_path, capsys):
    """``--unpaced`` (bench/hil_ident.py's command-line sequence) records what the unpaced
    ``hil`` leg of the identification comparison records, bit for bit."""
    from hapflow.hil.agreement import record
    out = tmp_path / "cli.h5"
    assert main(["run", SWEEP, "--mode", "hil", "--daq", "sim", "--unpaced", "--duration", "0.25",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("unpaced (a virtual sample clock, as fast as the loop runs): "
                              "colton2005-sweep at 4000 Hz on SimDaq"), printed
    assert "1000 ticks (0.25 s) unpaced, on the virtual sample clock at 4000 Hz" in printed
    assert "0 overruns" in printed and "real time" not in printed
    leg = record(SWEEP, "hil", 0.25, tmp_path / "leg.h5")
    with h5py.File(out) as a, h5py.File(leg) as b:
        assert a["time"].shape == (1000,)
        for name in ("enc.pos", "head.force", "head.accel", "pid.force_cmd", "motor.force_cmd"):
            np.testing.assert_array_equal(a["signals"][name][:], b["signals"][name][:], name)


def test_unpaced_applies_to_the_simulated_card_only(capsys):
    code = main(["run", SWEEP, "--mode", "hil", "--daq", "nidaqmx", "--unpaced",
                 "--duration", "0.1"])
    assert code != 0
    assert "--unpaced applies to --daq sim only" in capsys.readouterr().err


def test_limits_and_ramp_set_on_the_command_line_are_checked_shown_run_and_recorded(
        bed, tmp_path, capsys):
    """The bed's file says: force limit 15 N, cut at once (ramp 0); stroke 30 mm."""
    assert main(["hil", "check", bed, "--limit", "motor=2", "--ramp", "motor.force_cmd=0.02",
                 "--limit", "enc=-0.005,0.02", "--velocity-limit", "enc.pos=0.3"]) == 0
    rows = {}                   # a port's table row (its settings lines follow the table)
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("  "):
            rows.setdefault(line.split()[0], line)
    assert "[-2, 2] ramp 0.02 s" in rows["motor.force_cmd"]
    assert "[-0.005, 0.02] |v| <= 0.3 m/s" in rows["enc.pos"]
    assert main(["hil", "check", bed]) == 0
    assert "[-15, 15] cut at once" in capsys.readouterr().out
    # the PID's first command is 5 N (kd times the sine's speed): a 2 N limit trips at once
    out = tmp_path / "run.h5"
    assert main(["run", bed, "--mode", "hil", "--daq", "sim", "--unpaced", "--duration", "1",
                 "--out", str(out), "--limit", "motor=2"]) == 1
    err = capsys.readouterr().err
    assert "force limit: motor.force_cmd (Dev1/ao0)" in err and "outside [-2, 2] N" in err, err
    # the 10 mm sine passes -5 mm after 0.29 s: a stroke limit there, and the command ramps
    # to zero over 20 ticks (the file cuts it at once)
    assert main(["run", bed, "--mode", "hil", "--daq", "sim", "--unpaced", "--duration", "1",
                 "--out", str(out), "--limit", "enc=-0.005,0.02", "--ramp", "motor=0.02"]) == 1
    err = capsys.readouterr().err
    assert "stroke limit: enc.pos (Dev1/ctr0)" in err and "outside [-0.005, 0.02] m" in err, err
    rec = hf.recorder.load(out)
    trip = rec.attrs["safety_tick"]
    ramp = rec["motor.force_cmd"][trip:, 0]
    assert 280 < trip < 300 and abs(ramp[0]) > 0.5 and ramp.size == 22
    np.testing.assert_allclose(ramp, ramp[0] * (1 - np.arange(ramp.size) / 20).clip(0),
                               atol=1e-12)
    assert "limit: [-0.005, 0.02]" in rec.attrs["graph_yaml"], rec.attrs["graph_yaml"]
    assert "ramp: 0.02" in rec.attrs["graph_yaml"] and rec.attrs["duration"] == 1.0


@pytest.mark.parametrize("option, message", [
    (["--limit", "motor"], "--limit 'motor': write PORT=NUMBER or PORT=LO,HI, e.g. motor=10"),
    (["--ramp", "motor=soon"], "--ramp 'motor=soon': write PORT=NUMBER, e.g. motor=10"),
    (["--limit", "motr=10"], "'motr' is not bound to the card; did you mean 'motor'?"),
    (["--limit", "motor.force=10"], "'motor' binds port 'force_cmd' only; write motor or "
                                    "motor.force_cmd"),
    (["--limit", "head.accel=10"], "name one bound port of 'head': head.force"),
    (["--ramp", "enc=0.1"], "hardware enc.pos: ramp applies to analog outputs (commands)"),
    (["--ramp", "motor=-1"], "hardware motor.force_cmd: ramp must be >= 0 s"),
    (["--velocity-limit", "motor=1"], "velocity_limit applies to a measured position"),
])
def test_safety_options_refused_with_what_is_valid(bed, option, message, capsys):
    assert main(["hil", "check", bed, *option]) == 2
    assert message in capsys.readouterr().err


def test_hil_options_in_sim_mode_are_refused(bed, capsys):
    for option in (["--limit", "motor=2"], ["--ramp", "motor=0.1"], ["--unpaced"]):
        assert main(["run", bed, *option, "--no-progress"]) == 2
        assert f"{option[0]} applies to --mode hil" in capsys.readouterr().err


def test_the_card_inputs_outputs_and_enable_line_are_recorded(bed, tmp_path):
    """/hil/card: the volts and counts read, the volts and enable level put out, up to and
    including the trip that puts the card in its safe state (0 V, enable low)."""
    out = tmp_path / "run.h5"
    assert main(["run", bed, "--mode", "hil", "--daq", "sim", "--unpaced", "--duration", "1",
                 "--out", str(out), "--limit", "enc=-0.005,0.02"]) == 1
    rec = hf.recorder.load(out)
    trip = rec.attrs["safety_tick"]
    with h5py.File(out) as f:
        card = {k: f["hil/card"][k][:] for k in ("ai_volts", "counts", "ao_volts", "enable")}
        assert [f["hil/card"][k].attrs["channels"].tolist() for k in card] == [
            ["Dev1/ai0 (head.force)"], ["Dev1/ctr0 (enc.pos)"], ["Dev1/ao0 (motor.force_cmd)"],
            ["Dev1/port0/line0 (motor.enable)"]]
    assert all(v.shape == (trip + 1, 1) for v in card.values())
    # the signals are the card's numbers scaled: 10 N/V, 5 um/count, 4 N/V (a 16-bit DAC)
    np.testing.assert_array_equal(rec["head.force"], 10.0 * card["ai_volts"])
    np.testing.assert_array_equal(rec["enc.pos"], 5e-6 * card["counts"])
    np.testing.assert_allclose(4.0 * card["ao_volts"][:trip], rec["motor.force_cmd"][:trip],
                               atol=1e-12)
    assert np.ptp(card["counts"]) > 1000 and np.ptp(card["ai_volts"]) > 0.1
    assert card["enable"][:trip].all() and not card["enable"][trip:].any()
    assert card["ao_volts"][trip, 0] == 0.0 and np.abs(card["ao_volts"][trip - 1, 0]) > 0.1


def test_a_run_kept_in_memory_drains_its_sinks_every_chunk(bed, tmp_path):
    """A sink buffers one chunk (here 500 ticks): a run with no file drains it as often as
    a recorded run does, so nothing is dropped and both write the same sound."""
    from scipy.io import wavfile
    import warnings
    from hapflow.blocks.sinks import SinkWarning
    from hapflow.hil.runner import HilRunner
    from hapflow.hil.safety import Policy
    from hapflow.hil.simdaq import SimDaq
    from hapflow.yamlio import loads

    def run(name, out):
        wav = tmp_path / name
        text = (Path(bed).read_text()
                .replace("blocks:\n", "blocks:\n  snd: {type: SoundSink, mode: signal, live: "
                                      f"false, gain: 0.01, capacity: 500, file: '{wav}'}}\n")
                .replace("wires:\n", "wires:\n  - pid.force_cmd -> snd.u\n"))
        graph = loads(text, bed)
        runner = HilRunner(graph, SimDaq(graph, seed=1, paced=False), Policy(max_lateness=1.0))
        assert runner.sim.chunk_ticks == 500
        with warnings.catch_warnings():
            warnings.simplefilter("error", SinkWarning)
            assert runner.run(2.0, out=out).ticks == 2000
        return wavfile.read(wav)
    fs, kept = run("kept.wav", None)
    _, recorded = run("recorded.wav", tmp_path / "run.h5")
    assert kept.size > 1.99 * fs and np.ptp(kept) > 100        # (less the resampler's delay)
    np.testing.assert_array_equal(kept, recorded)


def test_sinks_are_drained_by_another_process_not_the_loop(bed, tmp_path, monkeypatch):
    """The MIDI/sound sinks' Python side (synthesis, resampling, files) runs in a helper
    process, not in the real-time loop: every drain of a run happens in another process, and
    its WAV is the one a plain simulation of the same signal writes."""
    import os
    from scipy.io import wavfile
    from hapflow.blocks.sinks import SoundSink
    from hapflow.hil.runner import HilRunner
    from hapflow.hil.simdaq import SimDaq
    from hapflow.yamlio import loads

    pids = tmp_path / "pids"
    drain = SoundSink.drain

    def noted(self, d, m, t0, t1):
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\n")
        return drain(self, d, m, t0, t1)

    monkeypatch.setattr(SoundSink, "drain", noted)
    wav = tmp_path / "snd.wav"
    text = (Path(bed).read_text()
            .replace("blocks:\n", "blocks:\n  snd: {type: SoundSink, mode: signal, live: false, "
                                  f"gain: 0.01, capacity: 500, file: '{wav}'}}\n")
            .replace("wires:\n", "wires:\n  - pid.force_cmd -> snd.u\n"))
    graph = loads(text, bed)
    result = HilRunner(graph, SimDaq(graph, seed=1, paced=False)).run(1.0,
                                                                      out=tmp_path / "r.h5")
    assert result.ticks == 1000
    seen = pids.read_text().split()
    assert len(seen) >= 2 and str(os.getpid()) not in seen, seen     # 2 chunks of 500 ticks
    fs, audio = wavfile.read(wav)
    assert audio.size > 0.99 * fs and np.ptp(audio) > 100
