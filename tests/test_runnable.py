"""Every graph in graphs/ and every script in examples/ runs (briefly) without error."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hapflow as hf
from hapflow.cli import main

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = sorted(p for p in ROOT.glob("graphs/**/*.yaml")
                if "studies" not in p.relative_to(ROOT / "graphs").parts)  # studies: test_study_files.py
EXAMPLES = sorted(ROOT.glob("examples/*.py"))


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.name)
def test_graph_runs_briefly(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)         # files a graph names relative to the working folder (out/)
    out = tmp_path / "run.h5"
    assert main(["run", str(path), "--duration", "0.2", "--out", str(out), "--no-progress"]) == 0
    rec = hf.recorder.load(out)
    assert rec.attrs["complete"] and len(rec.time) > 0


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path, tmp_path):
    done = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
