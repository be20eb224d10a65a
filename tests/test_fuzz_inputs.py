"""Mutation fuzz of the inputs a user writes: graph files, study files, command-line options.

Every mutant is either accepted or rejected with one message that names the
file (``hapflow: error: FILE...``) and exit status 2: never a traceback, a
hang (each example may use 10 s of CPU time, its own and its child
processes', and 120 s of wall time; see :func:`limits`) or a memory blow-up
(the process grows by less than 1 GiB over the whole run).  The hand-written corpus of the
cases found so far is in ``tests/data/hostile`` (see ``test_hostile_inputs``).

CI runs a few examples per test; set ``HAPFLOW_FUZZ_EXAMPLES`` for a longer
search, e.g. ``HAPFLOW_FUZZ_EXAMPLES=2000 pytest tests/test_fuzz_inputs.py``.
"""
import contextlib
import io
import os
import resource
import signal
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hapflow.cli import main

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = sorted((ROOT / "graphs").glob("*.yaml"))
STUDIES = sorted((ROOT / "graphs" / "studies").glob("*.yaml"))
EXAMPLES = int(os.environ.get("HAPFLOW_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])
CPU_SECONDS = 10.0
"""CPU time one example may use (this process's and its children's, user + system)."""
WALL_SECONDS = 120.0
"""Wall time one example may take: a backstop for a wait that uses no CPU (a loaded CI
machine stretched examples of 0.2 s to 26 s, so wall time is no measure of a hang)."""


class OverLimit(BaseException):
    """An example over its CPU or wall time (a BaseException: no ``except Exception`` of the
    code under test swallows it)."""


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def limits(cpu: float = CPU_SECONDS, wall: float = WALL_SECONDS):
    """Raise :class:`OverLimit` in the block once this process has used ``cpu`` s of CPU
    time in it (``ITIMER_PROF`` counts user and system time of all its threads) or ``wall``
    s have passed; on leaving, fail if its child processes (the HDF5 check's reader) used
    more than the CPU time left (they are waited for, so a hung one meets the wall limit)."""
    def stop(signum, frame):
        kind = "CPU" if signum == signal.SIGPROF else "wall"
        raise OverLimit(f"the example ran over its {kind} time limit "
                        f"({cpu if kind == 'CPU' else wall:g} s)")

    handlers = {s: signal.signal(s, stop) for s in (signal.SIGPROF, signal.SIGALRM)}
    own, children = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
    signal.setitimer(signal.ITIMER_PROF, cpu)
    signal.setitimer(signal.ITIMER_REAL, wall)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in handlers.items():
            signal.signal(s, handler)
    used = (cpu_seconds(resource.RUSAGE_SELF) - own
            + cpu_seconds(resource.RUSAGE_CHILDREN) - children)
    if used > cpu:
        raise OverLimit(f"the example used {used:.1f} s of CPU time with its child processes; "
                        f"the limit is {cpu:g} s")

HOSTILE = [".nan", ".inf", "-.inf", "-1", "0", "1.0e300", "1.0e-300", "9" * 60, "[a, b]", "{}",
           "''", "null", "true", '"\\ud800"', '"a\\n"', "!!python/name:os.system", "*nosuch",
           "&a [*a]", "[" * 40 + "]" * 40, "Dev1/ao99", "N/", "1000000", "-9223372036854775809",
           "x" * 300, "'\\x00'", "1e9", "0.0001"]


@st.composite
def mutant(draw, sources: list[Path]) -> tuple[Path, bytes]:
    """A source file with one to three edits: a value replaced by a hostile one, a line
    deleted or duplicated, a byte inserted, the text cut short."""
    source = draw(st.sampled_from(sources))
    lines = source.read_bytes().split(b"\n")
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.integers(0, len(lines) - 1))
        edit = draw(st.sampled_from(["value", "value", "value", "delete", "duplicate", "byte",
                                     "cut"]))
        line = lines[k]
        if edit == "value" and b":" in line:
            head = line[:line.rindex(b":") + 1] if not line.rstrip().endswith(b":") else line
            lines[k] = head + b" " + draw(st.sampled_from(HOSTILE)).encode()
        elif edit == "value":
            lines[k] = line + b", " + draw(st.sampled_from(HOSTILE)).encode()
        elif edit == "delete":
            del lines[k]
        elif edit == "duplicate":
            lines.insert(k, line)
        elif edit == "byte":
            at = draw(st.integers(0, len(line)))
            lines[k] = line[:at] + bytes([draw(st.integers(0, 255))]) + line[at:]
        else:
            lines[k] = line[:draw(st.integers(0, len(line)))]
            del lines[k + 1:]
        if not lines:
            lines = [b""]
    return source, b"\n".join(lines)


def run_cli(argv: list[str], limited: bool = True) -> tuple[int, str]:
    """``hapflow ARGV`` in this process: exit status and stderr (stdout is dropped); within
    :func:`limits` unless not ``limited`` (a fixture's first run, which compiles)."""
    err = io.StringIO()
    with (limits() if limited else contextlib.nullcontext()), contextlib.redirect_stderr(err), \
            contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as stop:                    # argparse's usage errors
            code = stop.code
    return code, err.getvalue()


def assert_clean(code: int, err: str, named: str, first: bool = True) -> None:
    """Exit 0, or 2 with one message naming ``named`` first (or anywhere in its first line
    when not ``first``: "recording 'RUN.h5' has no ...")."""
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err, err
    if code == 2 and first:
        assert err.startswith(f"hapflow: error: {named}"), err
    elif code == 2:
        assert err.startswith("hapflow: error: ") and named in err.splitlines()[0], err


@pytest.fixture(scope="module")
def memory():
    """Largest resident size of this process grows by less than 1 GiB over all examples."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 2**20, f"grew by {grown / 2**20:.2f} GiB"      # ru_maxrss is in KiB


@FUZZ
@given(case=mutant(GRAPHS))
def test_mutated_graph_file_is_accepted_or_one_located_error(case, memory):
    source, text = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / source.name
        path.write_bytes(text)
        assert_clean(*run_cli(["check", str(path)]), named=str(path))


@FUZZ
@given(case=mutant(STUDIES))
def test_mutated_study_file_is_accepted_or_one_located_error(case, memory):
    """Loading only (a study that loads is run by the study tests); graph paths made absolute."""
    from hapflow.study.spec import load_study
    from hapflow.errors import HapflowError
    source, text = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / source.name
        path.write_bytes(text.replace(b"graph: ../", b"graph: " + str(ROOT / "graphs").encode() + b"/"))
        try:
            with limits():
                load_study(path)
        except HapflowError as exc:
            assert str(exc).startswith(str(path)), exc


OPTIONS = {"run": ["--duration", "--chunk", "--out", "--plot", "--set", "--mode", "--max-lateness",
                   "--max-overruns", "--fifo", "--cpu"],
           "check": ["--draw"]}
VALUES = ["nan", "inf", "-inf", "-1", "0", "1e300", "1e-300", "", "x", "/", "missing/x/y.h5",
          "drive.amplitude=!!python/name:os.system", "drive.amplitude=.nan", "drive.nosuch=1",
          "plant.mass=-1", "hil", "65536x", "2.5", "d.h5", "d.png", "x" * 300 + ".h5",
          "x" * 300 + ".png", "/proc/x.h5"]


@FUZZ
@given(command=st.sampled_from(sorted(OPTIONS)), data=st.data())
def test_hostile_option_values_are_one_error_before_a_run(command, data, memory):
    """Options with values a careless user types; the run itself is cut to one tick."""
    option = data.draw(st.sampled_from(OPTIONS[command]))
    value = data.draw(st.sampled_from(VALUES))
    with tempfile.TemporaryDirectory() as tmp:
        argv = [command, str(ROOT / "graphs" / "demo_oscillator.yaml"), option, value]
        if command == "run":
            argv += ["--no-progress"] + ([] if option == "--duration" else ["--duration", "0.001"])
            argv += [] if option == "--out" else ["--out", str(Path(tmp) / "r.h5")]
        with contextlib.chdir(tmp):              # a relative --plot or --draw lands here
            code, err = run_cli(argv)
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err, err
    assert code == 0 or err.startswith(("hapflow: error:", "usage:")), err


CSV_VALUES = [b"nan", b"inf", b"-inf", b"1e300", b"-1e300", b"", b"x", b"1e9", b'"', b"9" * 400,
              b"\x00", b"1,2", b"-0", b"0x10", b"1_000", "\u00e9".encode(), b"  ", b"1e-300",
              b"caf\xe9", b"\xed\xa0\x80"]
KEYSWITCH = ROOT / "tests" / "data" / "keyswitch_force_curves" / "cherry_mx_red.csv"
SINE = ROOT / "tests" / "data" / "playback" / "sine.csv"


@st.composite
def csv_mutant(draw, source: bytes) -> bytes:
    """A CSV file with one to three edits: a field replaced by a hostile one (a NaN, a
    300-digit number, a lone quote, ...), a row deleted or duplicated, a byte inserted, a
    field over 131,072 characters, the last time stamp set to 1e9, the text cut short."""
    lines = source.split(b"\n")
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.integers(0, len(lines) - 1))
        edit = draw(st.sampled_from(["field", "field", "field", "delete", "duplicate", "byte",
                                     "huge", "last", "cut"]))
        fields = lines[k].split(b",")
        if edit == "field":
            fields[draw(st.integers(0, len(fields) - 1))] = draw(st.sampled_from(CSV_VALUES))
            lines[k] = b",".join(fields)
        elif edit == "delete":
            del lines[k]
        elif edit == "duplicate":
            lines.insert(k, lines[k])
        elif edit == "byte":
            at = draw(st.integers(0, len(lines[k])))
            lines[k] = lines[k][:at] + bytes([draw(st.integers(0, 255))]) + lines[k][at:]
        elif edit == "huge":
            fields[draw(st.integers(0, len(fields) - 1))] = b"1" * 131_073
            lines[k] = b",".join(fields)
        elif edit == "last":
            last = max(i for i, line in enumerate(lines) if line.strip() or i == 0)
            lines[last] = b",".join([b"1e9", *lines[last].split(b",")[1:]])
        else:
            lines[k] = lines[k][:draw(st.integers(0, len(lines[k])))]
            del lines[k + 1:]
        if not lines:
            lines = [b""]
    return b"\n".join(lines)


@FUZZ
@given(text=csv_mutant(KEYSWITCH.read_bytes()))
def test_mutated_csv_for_identify_is_accepted_or_one_located_error(text, ident_run, memory):
    """``hapflow identify DATA.csv`` on a force-displacement curve (the quasi-static fit)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "curve.csv"
        path.write_bytes(text)
        argv = ["identify", str(path), "--method", "poly", "--out", str(Path(tmp) / "m.yaml")]
        assert_clean(*run_cli(argv), named=str(path))


PLAYBACK_GRAPH = """name: play
rate: 1000
duration: 1
blocks:
  pb: {type: Playback, file: data.csv, column: y, interpolation: linear}
record: [pb.y]
"""


@FUZZ
@given(text=csv_mutant(SINE.read_bytes()))
def test_mutated_csv_played_by_a_graph_is_accepted_or_one_located_error(text, memory):
    """``hapflow check`` of a graph whose Playback block reads the CSV file: the error names
    the graph file (and line of the block), its message the data file."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data.csv").write_bytes(text)
        graph = Path(tmp) / "play.yaml"
        graph.write_text(PLAYBACK_GRAPH)
        code, err = run_cli(["check", str(graph)])
        assert_clean(code, err, named=str(graph))
        assert code == 0 or "data.csv" in err, err


@pytest.fixture(scope="module")
def ident_run(tmp_path_factory) -> Path:
    """A short swept-sine recording of the synthetic device and its true model's file."""
    from hapflow.ident import synthetic as syn
    folder = tmp_path_factory.mktemp("fuzz-ident")
    syn.recording(folder / "run.h5", duration=4.0, rate=1000.0)
    syn.piecewise_model().save(folder / "model.yaml")
    # once unchanged: the compilations of the first call are not any example's
    run, model = str(folder / "run.h5"), str(folder / "model.yaml")
    assert run_cli(["identify", run, "--method", "poly", "--out", str(folder / "m.yaml")],
                   limited=False)[0] == 0
    assert run_cli(["identify", str(KEYSWITCH), "--method", "poly",
                    "--out", str(folder / "k.yaml")], limited=False)[0] == 0
    assert run_cli(["verify", model, "--against", run], limited=False)[0] == 0
    return folder


@settings(FUZZ, max_examples=EXAMPLES)
@given(data=st.data())
def test_mutated_model_file_is_accepted_or_one_located_error(data, ident_run, memory):
    """``hapflow verify MODEL --against RUN`` with the model file edited."""
    source = ident_run / "model.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.yaml"
        path.write_bytes(data.draw(mutant([source]))[1])
        argv = ["verify", str(path), "--against", str(ident_run / "run.h5")]
        assert_clean(*run_cli(argv), named=str(path))


HDF5_VALUES = [np.nan, np.inf, -1.0, 0.0, 1e300, 1e-300, 2**62, "x", b"\xff", np.zeros(0),
               np.zeros((3, 3)), np.full(7, np.nan), np.arange(5, dtype=np.int8)]


def edit_hdf5(path: Path, draw) -> None:
    """One edit of the kind a damaged or foreign file has: a dataset deleted or replaced by a
    hostile value (NaN, empty, another shape or type), an attribute replaced, the file's
    bytes cut short or one byte changed."""
    import h5py
    edit = draw(st.sampled_from(["delete", "dataset", "attribute", "attribute", "cut", "byte"]))
    if edit in ("cut", "byte"):
        raw = bytearray(path.read_bytes())
        at = draw(st.integers(0, len(raw) - 1))
        path.write_bytes(raw[:at] if edit == "cut" else
                         raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1:])
        return
    with h5py.File(path, "r+") as f:
        names = []
        f.visit(names.append)
        datasets = sorted(n for n in names if isinstance(f[n], h5py.Dataset))
        if edit == "attribute":
            owner = f[draw(st.sampled_from(["/", *datasets]))]
            keys = sorted(owner.attrs) or ["unit"]
            owner.attrs[draw(st.sampled_from(keys))] = draw(st.sampled_from(HDF5_VALUES))
            return
        name = draw(st.sampled_from(datasets))
        del f[name]
        if edit == "dataset":
            f[name] = draw(st.sampled_from(HDF5_VALUES))


def hil_timing(path: Path) -> Path:
    """A /hil timing group as a real-time run writes it (200 ticks at 1 kHz)."""
    import h5py
    n = 200
    with h5py.File(path, "w") as f:
        f.attrs.update(period_ns=1_000_000, rate=1000.0, status="complete", ticks=n)
        f["time"] = np.arange(n) / 1000.0
        f["signals/plant.pos"] = np.zeros((n, 1))
        f["signals/plant.pos"].attrs["unit"] = "m"
        for name, values in {"wake": np.arange(n) * 1_000_000, "lateness": np.zeros(n, np.int64),
                             "compute": np.full(n, 20_000), "skipped": np.zeros(n, np.int64),
                             "overrun": np.zeros(n, bool)}.items():
            f[f"hil/{name}"] = values
    return path


@settings(FUZZ, max_examples=EXAMPLES)
@given(command=st.sampled_from(["identify", "verify", "report"]), data=st.data())
def test_mutated_recording_is_accepted_or_one_located_error(command, data, ident_run, memory):
    """``identify RUN``, ``verify MODEL --against RUN`` and ``report RUN`` on a damaged
    HDF5 recording."""
    import shutil
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.h5"
        if command == "report":
            hil_timing(path)
        else:
            shutil.copy(ident_run / "run.h5", path)
        edit_hdf5(path, data.draw)
        assert_clean(*run_cli(recording_argv(command, path, ident_run)), named=str(path),
                     first=command == "report")


def recording_argv(command: str, path: Path, ident_run: Path) -> list[str]:
    """``identify``, ``verify`` or ``report`` of the recording ``path``."""
    return {"identify": ["identify", str(path), "--method", "poly", "--out",
                         str(path.with_name("m.yaml"))],
            "verify": ["verify", str(ident_run / "model.yaml"), "--against", str(path)],
            "report": ["report", str(path)]}[command]


DAMAGED_BYTES = [(849, 255)]
"""(offset, value) byte edits of ``ident_run``'s recording found to crash libhdf5 (h5py
3.16, HDF5 2.0): 849 -> 255 is in the datatype of the ``name`` attribute (SIGSEGV)."""


@pytest.mark.parametrize("command", ["identify", "verify", "report"])
@pytest.mark.parametrize("offset,value", DAMAGED_BYTES)
def test_recording_that_crashed_libhdf5_is_one_error_naming_it(command, offset, value,
                                                               ident_run, tmp_path):
    raw = bytearray((ident_run / "run.h5").read_bytes())
    raw[offset] = value
    path = tmp_path / "run.h5"
    path.write_bytes(raw)
    code, err = run_cli(recording_argv(command, path, ident_run))
    assert code == 2 and err.startswith(f"hapflow: error: {path}: the HDF5 library crashed"), err


def test_the_limits_stop_a_busy_loop_a_wait_and_a_busy_child():
    """A hang of each kind is stopped: busy in this process (CPU), sleeping (wall), busy in a
    child process (its CPU time, counted when it ends)."""
    import subprocess
    import sys
    with pytest.raises(OverLimit, match="CPU time limit"), limits(cpu=0.2):
        while True:
            pass
    with pytest.raises(OverLimit, match="wall time limit"), limits(wall=0.2):
        time.sleep(5)
    busy = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"
    with pytest.raises(OverLimit, match="with its child processes"), limits(cpu=0.3):
        subprocess.run([sys.executable, "-c", busy], check=True)
