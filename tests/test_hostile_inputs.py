"""Hostile and careless inputs from issue 18: each is one clear error, never a traceback.

The graph corpus lives in ``tests/data/hostile/graphs``: the first line of each
file is ``# expect: LINE TEXT``, the line the error must name and a fragment
of its message.  Command-line options are listed here.
"""
from pathlib import Path

import numpy as np
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
def test_bad_graph_file_is_one_located_error(path, tmp_path, capsys):
    """``check`` (and ``hil check`` and a simulation ``run`` for a bad ``hardware:`` section,
    which a simulation does not use) reject the file at load."""
    line, text = expectation(path)
    run = ["run", "--out", str(tmp_path / "r.h5"), "--no-progress"]
    commands = ([["check"], ["hil", "check"], run] if path.stem.startswith("hardware_")
                else [["check"]])
    for command in commands:
        assert main([*command, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"hapflow: error: {path}:{line}: ") and text in err, err
        assert "Traceback" not in err
    assert not (tmp_path / "r.h5").exists()


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
    (["run", "DEMO", "--out", "/proc/x.h5"], "error: cannot write the recording /proc/x.h5: "),
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


LONG = "x" * 300                                   # over the file system's 255 bytes a name


@pytest.mark.parametrize("argv", [
    ["identify", "LONG.h5"], ["identify", "LONG.csv"], ["verify", "LONG.yaml", "--against", "RUN"],
    ["verify", "MODEL", "--against", "LONG.h5"], ["run", "DEMO", "--out", "TMP/LONG.h5"],
    ["run", "DEMO", "--out", "TMP/LONG/r.h5"], ["run", "DEMO", "--plot", "TMP/LONG.png"],
    ["check", "DEMO", "--draw", "TMP/LONG.png"], ["report", "LONG.h5"], ["check", "LONG.yaml"],
], ids=lambda a: " ".join(a).replace(LONG, "LONG"))
def test_a_file_name_too_long_is_one_error_naming_it(argv, tmp_path, capsys):
    """Found by the fuzz suite at 100x CI's budget: a 300-character name raised OSError
    (ENAMETOOLONG) out of Path.exists/is_file in identify, verify, run and check."""
    from hapflow.ident import synthetic as syn
    model = syn.piecewise_model().save(tmp_path / "model.yaml")
    names = {"DEMO": str(DEMO), "MODEL": str(model), "RUN": str(tmp_path / "run.h5")}
    argv = [names.get(a, a).replace("TMP", str(tmp_path)).replace("LONG", LONG) for a in argv]
    assert main(argv + (["--duration", "0.01", "--no-progress"] if argv[0] == "run" else [])) == 2
    err = capsys.readouterr().err
    assert err.startswith("hapflow: error: ") and err.count("\n") == 1, err
    assert LONG in err and "Traceback" not in err
    assert not list(tmp_path.glob("*.h5"))


def test_a_study_whose_graph_name_is_too_long_is_one_located_error(tmp_path, capsys):
    study = tmp_path / "s.yaml"
    study.write_text(f"name: s\ngraph: {LONG}.yaml\nduration: 1\nparameters:\n  a.b: [1]\n"
                     "metrics:\n  m: {rms: a.y}\n")
    assert main(["study", str(study), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hapflow: error: {study}:2: ") and "File name too long" in err, err


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


def test_report_of_a_loop_slower_than_one_hertz(tmp_path, capsys):
    """A 2 s period (a byte of period_ns changed, found by the fuzz suite) divided by zero
    binning the overruns per second; each tick is its own bin."""
    import h5py
    path = timing_file(tmp_path / "slow.h5", overrun=np.arange(100) % 7 == 0)
    with h5py.File(path, "r+") as f:
        f.attrs["period_ns"] = 2_000_000_000
        f["hil/wake"][...] = np.arange(100) * 2_000_000_000
    assert main(["report", str(path)]) == 0
    assert "overruns per second: 1 0 0 0 0 0 0 1" in capsys.readouterr().out
