"""Issue 18's last cases: a damaged HDF5 file (or bad CSV file) played by a graph, an HDF5
file libhdf5 loops on, and the estimates of a sweep too short for its model.

The commands that meet a damaged file run as child processes, so a crash shows as an exit
status instead of taking pytest down.
"""
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hapflow.cli import main
from hapflow.h5check import DamagedFileError, check_readable
from hapflow.ident import synthetic
from hapflow.ident.checks import ADVICE, unsupported

CRASH = 7577
"""Offset of the byte that, set to 255, makes reading ``signals/head.force``'s ``unit``
attribute crash libhdf5 (SIGSEGV, h5py 3.16 / HDF5 2.0): the second byte of that attribute's
datatype, in the 4 s, 1 kHz synthetic recording."""
LOOP = 2056
"""Offset of the byte that, set to 255, makes libhdf5 loop forever reading the same file's
datasets (found by changing each byte in turn and reading ``head.force`` in a child)."""


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("issue18") / "r.h5"
    synthetic.recording(path, duration=4.0, rate=1000.0)
    return path


def damaged(recording: Path, offset: int, folder: Path) -> Path:
    raw = bytearray(recording.read_bytes())
    raw[offset] = 255
    path = folder / f"byte{offset}.h5"
    path.write_bytes(raw)
    return path


def graph_playing(data: Path, column: str = "head.force") -> Path:
    """A graph beside ``data`` whose Playback block (line 5) plays its ``column``."""
    graph = data.with_name("play.yaml")
    graph.write_text(f"name: play\nrate: 1000\nduration: 1\nblocks:\n"
                     f"  pb: {{type: Playback, file: {data.name}, column: {column}}}\n"
                     "record: [pb.y]\n")
    return graph


def test_the_damaged_byte_crashes_what_playback_reads(recording, tmp_path):
    """The case is real: what the Playback block reads of a recording (the signal's values and
    its unit attribute) ends by a signal in h5py alone.  If a later h5py/HDF5 reads it without
    crashing, the next test checks nothing: find a new byte."""
    bad = damaged(recording, CRASH, tmp_path)
    read = ("import h5py, sys; f = h5py.File(sys.argv[1], 'r'); ds = f['signals/head.force']; "
            "ds[()]; ds.attrs.get('unit')")
    child = subprocess.run([sys.executable, "-c", read, str(bad)], capture_output=True)
    assert child.returncode < 0, (child.returncode, child.stderr)


def test_a_graph_playing_a_file_that_crashes_libhdf5_is_one_located_error(recording, tmp_path):
    """``hapflow check`` of a graph whose Playback block names the damaged recording: the
    file was read in this process (exit -11, no word) before Playback's reading went through
    the HDF5 check; now one error names the graph's line, the block and the data file."""
    bad = damaged(recording, CRASH, tmp_path)
    graph = graph_playing(bad)
    child = subprocess.run([sys.executable, "-m", "hapflow.cli", "check", str(graph)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert child.returncode == 2, (child.returncode, child.stderr)
    assert child.stderr.startswith(f"hapflow: error: {graph}:5: "), child.stderr
    assert (f"{bad}: the HDF5 library crashed (SIGSEGV) reading this file: the file is "
            "damaged" in child.stderr), child.stderr
    assert child.stderr.count("\n") == 1 and "Traceback" not in child.stderr
    graph_playing(recording)                                   # the intact file plays
    assert main(["check", str(graph_playing(recording))]) == 0


def test_a_file_libhdf5_loops_on_is_one_error_after_a_bounded_cpu_time(recording, tmp_path,
                                                                      monkeypatch):
    """Byte 2056 made the check's child (and any reader) spin forever; the child now has a CPU
    time limit (a second here, to keep the test short) and its SIGXCPU is the message."""
    import hapflow.h5check as h5check
    monkeypatch.setattr(h5check, "CPU_SECONDS", 1.0)
    bad = damaged(recording, LOOP, tmp_path)
    with pytest.raises(DamagedFileError, match=r"did not finish reading this file in 2 s of CPU "
                                               r"time \(it loops\): the file is damaged"):
        check_readable(bad)
    check_readable(recording)                                  # the intact file passes


def test_a_file_that_passed_is_not_read_again_until_it_changes(recording, tmp_path, monkeypatch):
    """A graph loaded again (or a study's runs) costs one child process per file, not one
    per load; a changed file is read again."""
    import hapflow.h5check as h5check
    copy = tmp_path / "copy.h5"
    copy.write_bytes(recording.read_bytes())
    runs = []
    real = subprocess.run
    monkeypatch.setattr(h5check.subprocess, "run", lambda *a, **k: runs.append(a) or real(*a, **k))
    check_readable(copy)
    check_readable(copy)
    assert len(runs) == 1
    copy.write_bytes(damaged(recording, CRASH, tmp_path).read_bytes())
    with pytest.raises(DamagedFileError):
        check_readable(copy)
    assert len(runs) == 2


@pytest.mark.parametrize("value,se,text", [
    (-9618.0, 7100.0, "mass m = -9618 +- 7.1e+03 kg is negative beyond its standard error"),
    (-0.3, 0.93, "mass m = -0.3 +- 0.93 kg: the standard error exceeds the value, so the data "
                 "cannot tell it from zero (and a negative one is not physical)"),
    (0.5, 0.9, "mass m = 0.5 +- 0.9 kg: the standard error exceeds the value, so the data "
               "cannot tell it from zero"),
    (0.5, 0.4, None), (0.0, 0.0, None), (-1.0, math.inf, None)])
def test_an_estimate_is_unsupported_when_negative_or_within_its_error_of_zero(value, se, text):
    assert unsupported("mass", "m", value, se, "kg") == text


WARNING = re.compile(r"warning: (positive|negative) segment (\S+) \.\. (\S+) mm: "
                     r"(mass|damping|stiffness) (m|b|k) = (\S+) \+- (\S+) (kg|N s/m|N/m)")


def identify(path: Path, tmp_path: Path, capsys, *options: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["identify", str(path), "--out", str(tmp_path / "m.yaml"), *options])
    return code, capsys.readouterr().out


def test_a_sweep_too_short_names_each_unsupported_estimate_and_what_to_do(tmp_path, capsys):
    """2 s of the synthetic sweep (the issue: "m = -9618 +- 7100 kg for a 2 s sweep with no
    warning"; a negative damping was not warned at all): every mass, damping or stiffness
    of a segment that is negative or within its standard error of zero is one warning with its
    value and error as in the model file, then the advice; ``--strict`` exits 1."""
    from hapflow.blocks.impedance_model import ImpedanceModel
    short = tmp_path / "short.h5"
    synthetic.recording(short, duration=2.0, rate=1000.0)
    code, out = identify(short, tmp_path, capsys)
    assert code == 0
    found = [WARNING.match(line) for line in out.splitlines() if line.startswith("warning: ")]
    assert found and all(found), out
    model = ImpedanceModel.load(tmp_path / "m.yaml")
    for m in found:
        side, lo, _, _, p, value, se, _ = m.groups()
        knots = model.direction(1 if side == "positive" else -1)
        j = int(np.argmin(np.abs(knots.x[::2] * 1e3 - float(lo))))
        assert float(value) == pytest.approx(getattr(knots, p)[::2][j], rel=1e-3), m.group(0)
        assert float(value) < 0 or float(se) > abs(float(value)), m.group(0)
    assert {m.group(4) for m in found} >= {"mass", "damping"}, out
    assert out.splitlines()[-1] == f"hint: {ADVICE}"
    assert identify(short, tmp_path, capsys, "--strict")[0] == 1


@pytest.fixture(scope="module")
def long_sweep(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("long-sweep") / "long.h5"
    synthetic.recording(path, duration=20.0, rate=1000.0)
    return path


@pytest.mark.parametrize("method", ["segmented", "auto", "poly"])
def test_a_sweep_long_enough_gives_no_warning(method, long_sweep, tmp_path, capsys):
    """20 s of the same sweep: every estimate is positive and well outside its error of zero."""
    code, out = identify(long_sweep, tmp_path, capsys, "--method", method, "--strict")
    assert code == 0 and "warning" not in out and "hint" not in out, out


SINE = Path(__file__).parent / "data" / "playback" / "sine.csv"


@pytest.mark.parametrize("edit,line,text", [
    (lambda rows: rows[:6] + [b"nan,nan"] + rows[7:], 7, "column 'y' is nan; every value must "
                                                         "be a finite number"),
    (lambda rows: rows[:2], 2, "the data end after 1 row(s); at least 2 are needed"),
    (lambda rows: rows[:-2] + [b"1e9,0"] + rows[-1:], 101, "time steps from 0.98 to 1e+09 s"),
    (lambda rows: rows[:3] + [b"1," + b"9" * 140_000] + rows[4:], 4, "at most 131072 characters"),
    (lambda rows: rows[:4] + [rows[4] + b"\xe9"] + rows[5:], 5, "byte 0xe9 is not UTF-8 text"),
], ids=["nan-row", "too-few-rows", "last-time-1e9", "huge-field", "latin1"])
def test_a_bad_csv_played_by_a_graph_names_the_graph_line_and_the_data_line(edit, line, text,
                                                                             tmp_path, capsys):
    """Issue 18's CSV cases as the Playback block reads them: one error naming the graph's
    line and block, then the data file's line (no allocation for a time stamp of 1e9 s)."""
    data = tmp_path / "data.csv"
    data.write_bytes(b"\n".join(edit(SINE.read_bytes().split(b"\n"))))
    graph = graph_playing(data, "y")
    assert main(["check", str(graph)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hapflow: error: {graph}:5: block 'pb' (Playback): {data}:{line}: "), err
    assert text in err and err.count("\n") == 1, err
