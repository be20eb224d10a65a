"""Playback of recorded data (blocks/playback.py, hapflow/datafile.py read_signal).

Every interpolation mode against its closed form, across many window refills; a new file of
another length reuses the compiled kernel; every file format; YAML; errors.  One small
graph per mode is compiled once (module fixtures share the kernels through the disk cache).
"""
import math
import os

import h5py
import numpy as np
import pytest

import hapflow as hf
from hapflow.block import ParamError
from hapflow.blocks import Playback
from hapflow.datafile import DataFileError, read_signal
from hapflow.errors import HapflowError

FILE_RATE = 100.0
GRAPH_RATE = 1000.0
HALF = 8


def _signal(n, f=3.0):
    t = np.arange(n) / FILE_RATE
    return t, np.sin(2 * np.pi * f * t) + 0.3 * np.cos(2 * np.pi * 7.0 * t)


def _play(path, mode, duration, window=64, **kw):
    g = hf.Graph(name="playback", rate=GRAPH_RATE, duration=duration)
    g.add("pb", Playback(file=str(path), interpolation=mode, window=window, **kw))
    g.record("pb.y")
    sim = hf.Simulation(g)
    run = sim.run(duration)
    return sim, run.time, run.signals["pb.y"].reshape(-1)


def _closed_form(mode, x, u):
    """Value at position u (in samples) of samples x, ends held."""
    n = x.size
    at = lambda k: x[np.clip(k, 0, n - 1)]                         # noqa: E731
    k = np.floor(u + (1e-9 if mode == "zoh" else 0.0)).astype(int)
    if mode == "zoh":
        return at(k)
    f = u - k
    if mode == "linear":
        return (1 - f) * at(k) + f * at(k + 1)
    out = np.where((u <= 0) | (u >= n - 1), at(np.floor(u + 0.5).astype(int)), 0.0)
    inside = (u > 0) & (u < n - 1)
    for j in range(-HALF, HALF + 2):                  # every sample within HALF of u
        z = f - j
        use = inside & (np.abs(z) < HALF)
        out += np.where(use, at(k + j) * np.sinc(z) * np.sinc(z / HALF), 0.0)
    return out


@pytest.fixture(scope="module")
def npy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pb")
    t, x = _signal(700)
    np.save(folder / "a.npy", x)
    return folder, x


@pytest.mark.parametrize("mode", ["zoh", "linear", "sinc"])
def test_modes_match_their_closed_form_across_window_refills(npy, mode):
    folder, x = npy
    # 64-sample window: 700 samples need ~20 refills, each at a chunk boundary
    sim, t, y = _play(folder / "a.npy", mode, 7.5, sample_rate=FILE_RATE)
    assert sim.chunk_ticks < 500
    np.testing.assert_allclose(y, _closed_form(mode, x, t * FILE_RATE), rtol=0, atol=1e-12)
    assert y[-1] == pytest.approx(x[-1], abs=1e-12)                # the last value holds
    if mode == "sinc":                                             # band-limited: the signal itself
        inner = (t > 0.2) & (t < 6.8)
        truth = np.sin(2 * np.pi * 3.0 * t) + 0.3 * np.cos(2 * np.pi * 7.0 * t)
        linear = _closed_form("linear", x, t * FILE_RATE)
        assert np.max(np.abs(y - truth)[inner]) < 0.2 * np.max(np.abs(linear - truth)[inner])


def test_a_new_file_of_another_length_reuses_the_kernel(npy, tmp_path):
    folder, _ = npy
    first, _, _ = _play(folder / "a.npy", "linear", 0.5, sample_rate=FILE_RATE, unit="N")
    path = tmp_path / "b.csv"
    t, x = _signal(1234, f=5.0)
    np.savetxt(path, np.column_stack([t, x]), delimiter=",", header="time [s],force [N]",
               comments="")
    second, tt, y = _play(path, "linear", 0.5, column="force", unit="N")
    assert second.program.run is first.program.run               # a cache hit: the same kernel
    assert len(first.program.run.overloads) == 1                 # compiled once, for one signature
    assert second.program.source == first.program.source
    assert second.program.path == first.program.path            # the same cached kernel file
    np.testing.assert_allclose(y, np.interp(tt, t, x), atol=1e-12)


def test_every_format_reads_the_same_signal(tmp_path):
    from nptdms import ChannelObject, TdmsWriter
    t, x = _signal(300)
    np.savetxt(tmp_path / "s.csv", np.column_stack([t * 1e3, x]), delimiter=",",
               header="time [ms],pos [m]", comments="")
    with h5py.File(tmp_path / "s.h5", "w") as f:
        f.create_dataset("daq/pos", data=x).attrs["rate"] = FILE_RATE
    with TdmsWriter(tmp_path / "s.tdms") as w:
        w.write_segment([ChannelObject("daq", "pos", x,
                                       properties={"wf_increment": 1.0 / FILE_RATE})])
    for name, column in (("s.csv", "pos"), ("s.h5", "daq/pos"), ("s.tdms", "daq/pos")):
        sig = read_signal(tmp_path / name, column)
        np.testing.assert_allclose(sig.values, x, rtol=1e-12, err_msg=name)
        assert sig.rate == pytest.approx(FILE_RATE), name


def test_recording_signal_and_errors(tmp_path):
    g = hf.Graph(name="rec", rate=200.0, duration=1.0)
    g.add("s", hf.blocks.Sine(amplitude=1.0, frequency=2.0))
    g.record("s.y")
    hf.Simulation(g).run(1.0, out=str(tmp_path / "r.h5"))
    sig = read_signal(tmp_path / "r.h5", "s.y")
    assert sig.rate == pytest.approx(200.0) and sig.values.size == 200
    with pytest.raises(DataFileError, match=r"r.h5: recording has no signal 's.z'; it has s.y"):
        read_signal(tmp_path / "r.h5", "s.z")
    path = tmp_path / "j.csv"
    path.write_text("time,y\n0,1\n0.01,2\n0.02,3\n0.5,4\n")
    with pytest.raises(DataFileError, match=r"j.csv:5: time steps from 0.02 to 0.5 s"):
        read_signal(path, "y")
    with pytest.raises(DataFileError, match=r"no column 'z'"):
        read_signal(path, "z")


def test_yaml_graph_names_its_file_relative_to_itself_and_errors_name_the_line(
        npy, tmp_path, monkeypatch):
    folder, x = npy
    (tmp_path / "graphs" / "data").mkdir(parents=True)
    (tmp_path / "graphs" / "data" / "a.npy").write_bytes((folder / "a.npy").read_bytes())
    text = """
name: play
rate: 1000
duration: 0.5
blocks:
  pb: {type: Playback, file: data/a.npy, sample_rate: 100, interpolation: zoh, window: 64,
       scale: 2.0}
record: [pb.y]
"""
    graph_file = tmp_path / "graphs" / "play.yaml"
    graph_file.write_text(text)
    monkeypatch.chdir(folder)                         # not the graph's folder
    graph = hf.load(os.path.relpath(graph_file))
    run = hf.Simulation(graph).run(0.5)
    np.testing.assert_array_equal(run.signals["pb.y"].reshape(-1)[::10], 2.0 * x[:50])
    again = hf.loads(hf.to_yaml(graph), str(tmp_path / "elsewhere.yaml"))   # saved paths hold
    assert again.nodes["pb"].block.file == str(graph_file.parent / "data" / "a.npy")
    fast = text.replace("rate: 1000", "rate: 50")
    with pytest.raises(HapflowError, match=r"play.yaml:6: .*sampled at 100 Hz, faster than the "
                                           r"block's 50 Hz"):
        hf.loads(fast, str(graph_file))
    missing = text.replace("a.npy", "none.npy")
    with pytest.raises(HapflowError, match=r"play.yaml:6: block 'pb' \(Playback\): .*"
                                           r"graphs/data/none.npy' does not exist"):
        hf.loads(missing, str(graph_file))


def test_the_files_unit_is_converted_and_a_wrong_quantity_is_an_error(tmp_path):
    t, x = _signal(50)
    path = tmp_path / "mm.csv"
    np.savetxt(path, np.column_stack([t, x]), delimiter=",", header="time [s],pos [mm]",
               comments="")
    default = Playback(file=str(path), column="pos")
    assert default.outputs["y"].unit == "m"
    np.testing.assert_allclose(default._samples, 1e-3 * x, rtol=1e-15)
    assert Playback(file=str(path), column="pos", unit="m").outputs["y"].unit == "m"
    with pytest.raises(ParamError, match=r"mm.csv column .pos. is in mm, not a quantity of "
                                           r"unit 'N'; give unit: m"):
        Playback(file=str(path), column="pos", unit="N")
    with pytest.raises(ParamError, match=r"parameter .unit.: unit .mm. is 0.001 m"):
        Playback(file=str(path), column="pos", unit="mm")
    with h5py.File(tmp_path / "s.h5", "w") as f:
        f.create_dataset("daq/force", data=x).attrs["unit"] = "mN"
    played = Playback(file=str(tmp_path / "s.h5"), column="daq/force", sample_rate=FILE_RATE)
    assert played.outputs["y"].unit == "N"
    np.testing.assert_allclose(played._samples, 1e-3 * x, rtol=1e-15)
