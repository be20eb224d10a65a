"""Hostile and careless inputs from issue 18: each is one clear error, never a traceback.

The graph corpus lives in ``tests/data/hostile/graphs``: the first line of each
file is ``# expect: LINE TEXT``, the line the error must name and a fragment
of its message.  Command-line options are listed here.
"""
from pathlib import Path

import pytest

from hapflow.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "graphs" / "demo_oscillator.yaml"
HOSTILE = Path(__file__).parent / "data" / "hostile"
CORPUS = sorted((HOSTILE / "graphs").glob("*.yaml"))
STUDIES = sorted((HOSTILE / "studies").glob("*.yaml"))


def expectation(path: Path) -> tuple[int, str]:
    head = path.read_bytes().split(b"\n", 1)[0].decode()
    line, text = head.removeprefix("# expect: ").split(" ", 1)
    return int(line), text


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_bad_graph_file_is_one_located_error(path, capsys):
    """``check`` (and ``hil check`` for a bad ``hardware:`` section) reject the file at load."""
    line, text = expectation(path)
    commands = [["check"], ["hil", "check"]] if path.stem.startswith("hardware_") else [["check"]]
    for command in commands:
        assert main([*command, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"hapflow: error: {path}:{line}: ") and text in err, err
        assert "Traceback" not in err


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_bad_study_file_is_one_located_error_before_any_run(path, tmp_path, capsys):
    line, text = expectation(path)
    assert main(["study", str(path), "--out", str(tmp_path / "study"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hapflow: error: {path}:{line}: ") and text in err, err
    assert "Traceback" not in err and not (tmp_path / "study").exists()


BAD_OPTIONS = [
    (["run", "DEMO", "--duration", "nan"], "argument --duration: 'nan' is not a number in (0, 1e+07] s"),
    (["run", "DEMO", "--duration", "inf"], "argument --duration: 'inf'"),
    (["run", "DEMO", "--duration", "-1"], "argument --duration: '-1'"),
    (["run", "DEMO", "--chunk", "nan"], "argument --chunk: 'nan' is not a number in (0, 60] s"),
    (["run", "DEMO", "--chunk", "0"], "argument --chunk: '0'"),
    (["run", "DEMO", "--out", "TMP"], "is a folder; give a file name in it"),
    (["run", "DEMO", "--out", "TMP/file/x.h5"], "to be a folder, and it is a file"),
    (["run", "DEMO", "--plot", "TMP/file/x.png"], "to be a folder, and it is a file"),
    (["check", "DEMO", "--draw", "TMP/folder.png"], "is a folder"),
    (["check", "DEMO", "--draw", "TMP/d.h5"], "a figure is saved as .png, .pdf, .svg"),
    (["run", "DEMO", "--set", "drive.amplitude=!!python/name:os.system"],
     "the value is not a plain YAML number, list or string"),
    (["run", "DEMO", "--mode", "hil", "--max-lateness", "nan"], "argument --max-lateness: 'nan'"),
    (["run", "DEMO", "--mode", "hil", "--max-overruns", "-1"],
     "argument --max-overruns: '-1' is not an integer from 1"),
    (["run", "DEMO", "--mode", "hil", "--fifo", "500"], "argument --fifo: '500' is not an integer from 1 to 99"),
    (["hil", "serve", "DEMO", "--port", "99999"], "argument --port: '99999' is not an integer from 0 to 65535"),
]


@pytest.mark.parametrize("argv,text", BAD_OPTIONS, ids=lambda a: " ".join(a[2:]) if isinstance(a, list) else "")
def test_bad_option_is_one_error_before_anything_runs(argv, text, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    (tmp_path / "folder.png").mkdir()
    argv = [str(DEMO) if a == "DEMO" else a.replace("TMP", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as stop:      # argparse's usage error, or main's own
        raise SystemExit(main(argv))
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err, err
    assert not list(tmp_path.glob("*.h5"))


def timing_file(path: Path, **columns) -> Path:
    """A /hil timing group as a real-time run writes it (100 ticks at 1 kHz), with
    ``columns`` replaced (``None`` drops one)."""
    import h5py
    import numpy as np
    n = 100
    data = {"wake": np.arange(n) * 1_000_000, "lateness": np.zeros(n, np.int64),
            "compute": np.full(n, 20_000), "skipped": np.zeros(n, np.int64),
            "overrun": np.zeros(n, bool), **columns}
    with h5py.File(path, "w") as f:
        f.attrs["period_ns"] = 1_000_000
        for name, values in data.items():
            if values is not None:
                f[f"hil/{name}"] = values
    return path


@pytest.mark.parametrize("columns,text", [
    ({"compute": None}, "the real-time timing is incomplete (no compute)"),
    ({"skipped": [0] * 99 + [72056494543011937]}, "more edges skipped than the run's wake-up"),
    ({"lateness": [0] * 7}, "its columns have different lengths"),
], ids=["no-compute", "skipped-corrupt", "short-column"])
def test_report_rejects_damaged_timing(columns, text, tmp_path, capsys):
    import numpy as np
    columns = {k: None if v is None else np.asarray(v, np.int64) for k, v in columns.items()}
    path = timing_file(tmp_path / "run.h5", **columns)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hapflow: error: {path}: ") and text in err and "Traceback" not in err, err
    assert main(["report", str(timing_file(tmp_path / "ok.h5"))]) == 0
    assert "edges skipped: 0" in capsys.readouterr().out
