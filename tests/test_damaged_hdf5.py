"""A recording whose reading crashes libhdf5 is one message naming the file (issue 18).

One changed byte (849, in the datatype of the ``name`` attribute) of a
synthetic recording made h5py 3.16 / HDF5 2.0 die by SIGSEGV reading the
attributes, and ``hapflow identify bad.h5`` with it (exit 139, no message).
The commands run here as child processes, so the crash it was shows as an
exit status instead of taking pytest down.
"""
import subprocess
import sys
from pathlib import Path

import pytest

from hapflow.h5check import DamagedFileError, check_readable


def damaged_recording(folder: Path) -> Path:
    """The issue's reproduction: byte 849 of a 4 s, 1 kHz synthetic recording set to 255 (and
    the true model's file beside it, for ``verify``)."""
    from hapflow.ident import synthetic
    synthetic.recording(folder / "r.h5", duration=4.0, rate=1000.0)
    raw = bytearray((folder / "r.h5").read_bytes())
    raw[849] = 255
    (folder / "bad.h5").write_bytes(raw)
    synthetic.piecewise_model().save(folder / "model.yaml")
    return folder / "bad.h5"


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> Path:
    return damaged_recording(tmp_path_factory.mktemp("damaged"))


def test_the_damaged_byte_still_crashes_a_plain_h5py_read(bad):
    """The case is real: reading the attributes with h5py alone ends by a signal (if a later
    h5py/HDF5 reads it without crashing, the other tests here check nothing; pick a new byte)."""
    read = "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); [f.attrs[k] for k in f.attrs]"
    child = subprocess.run([sys.executable, "-c", read, str(bad)], capture_output=True)
    assert child.returncode < 0, (child.returncode, child.stderr)


@pytest.mark.parametrize("command", ["identify", "verify", "report"])
def test_a_file_that_crashes_libhdf5_is_one_error_naming_it(command, bad, tmp_path):
    argv = {"identify": ["identify", str(bad), "--out", str(tmp_path / "m.yaml")],
            "verify": ["verify", str(bad.with_name("model.yaml")), "--against", str(bad)],
            "report": ["report", str(bad)]}[command]
    child = subprocess.run([sys.executable, "-m", "hapflow.cli", *argv], capture_output=True,
                           text=True, cwd=tmp_path)
    assert child.returncode == 2, (child.returncode, child.stderr)
    assert child.stderr == (f"hapflow: error: {bad}: the HDF5 library crashed (SIGSEGV) reading "
                            "this file: the file is damaged; record it again or use an intact "
                            "copy\n")


def test_intact_and_foreign_files_pass_the_check(bad, tmp_path):
    """Only a crash is the check's answer: an intact recording, a CSV file, a missing file and
    an HDF5 file cut short (h5py's own error, reported by the command) all pass."""
    check_readable(bad.with_name("r.h5"))
    (tmp_path / "data.csv").write_text("t,x\n0,1\n")
    check_readable(tmp_path / "data.csv")
    check_readable(tmp_path / "nosuch.h5")
    (tmp_path / "cut.h5").write_bytes(bad.with_name("r.h5").read_bytes()[:2000])
    check_readable(tmp_path / "cut.h5")
    with pytest.raises(DamagedFileError, match="crashed"):
        check_readable(bad)
