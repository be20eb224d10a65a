"""The test suite's own output: ``make test`` (``pytest -q``) prints dots and failures only.

A test that shows a table of figures prints it captured (seen with ``-s`` or ``-rP``, and
on failure); issue 18 found ``test_ident_keyswitch`` writing its table into the ``-q``
output through ``capsys.disabled()``.
"""
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PAST_CAPTURE = ("capsys.disabled(", "capfd.disabled(", "sys.__stdout__", "sys.__stderr__")


def test_no_test_writes_past_pytests_capture():
    found = [f"{path.relative_to(TESTS)}:{number}: {line.strip()}"
             for path in sorted(TESTS.rglob("*.py")) if path.name != Path(__file__).name
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if any(way in line for way in PAST_CAPTURE)]
    assert not found, "\n".join(found)
