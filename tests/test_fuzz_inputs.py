"""Mutation fuzz of the inputs a user writes: graph files, study files, command-line options.

Every mutant is either accepted or rejected with one message that names the
file (``hapflow: error: FILE...``) and exit status 2: never a traceback, a
hang (each example has a 10 s deadline) or a memory blow-up (the process
grows by less than 1 GiB over the whole run).  The hand-written corpus of the
cases found so far is in ``tests/data/hostile`` (see ``test_hostile_inputs``).

CI runs a few examples per test; set ``HAPFLOW_FUZZ_EXAMPLES`` for a longer
search, e.g. ``HAPFLOW_FUZZ_EXAMPLES=2000 pytest tests/test_fuzz_inputs.py``.
"""
import contextlib
import io
import os
import resource
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hapflow.cli import main

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = sorted((ROOT / "graphs").glob("*.yaml"))
STUDIES = sorted((ROOT / "graphs" / "studies").glob("*.yaml"))
EXAMPLES = int(os.environ.get("HAPFLOW_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=10_000, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])

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


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``hapflow ARGV`` in this process: exit status and stderr (stdout is dropped)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as stop:                    # argparse's usage errors
            code = stop.code
    return code, err.getvalue()


def assert_clean(code: int, err: str, named: str) -> None:
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err, err
    if code == 2:
        assert err.startswith(f"hapflow: error: {named}"), err


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
            load_study(path)
        except HapflowError as exc:
            assert str(exc).startswith(str(path)), exc


OPTIONS = {"run": ["--duration", "--chunk", "--out", "--plot", "--set", "--mode", "--max-lateness",
                   "--max-overruns", "--fifo", "--cpu"],
           "check": ["--draw"]}
VALUES = ["nan", "inf", "-inf", "-1", "0", "1e300", "1e-300", "", "x", "/", "/nonexistent/x/y.h5",
          "drive.amplitude=!!python/name:os.system", "drive.amplitude=.nan", "drive.nosuch=1",
          "plant.mass=-1", "hil", "65536x", "2.5", "d.h5", "d.png"]


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
