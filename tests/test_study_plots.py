"""Study plots read back from their figures: units on every axis, log-sampled parameters on
log axes, whole runs on the histograms' count axes (issue 18 polish)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hapflow.study.plots import plot_study
from hapflow.study.spec import loads

ROOT = Path(__file__).resolve().parents[1]
STUDY = f"""
name: plot-units
graph: {ROOT / "graphs" / "demo_oscillator.yaml"}
duration: 0.1
design: random
samples: 9
parameters:
  plant.stiffness: {{low: 100, high: 10000, scale: log}}
metrics:
  pos_rms: {{rms: plant.pos}}
  located: {{events: located}}
"""


def test_axes_carry_units_log_scales_and_whole_run_counts(tmp_path, figures):
    study = loads(STUDY, str(tmp_path / "study.yaml"))
    rng = np.random.default_rng(3)
    stiffness = np.exp(rng.uniform(np.log(100), np.log(10000), 9))
    table = pd.DataFrame({"run": np.arange(9), "status": ["ok"] * 9,
                          "plant.stiffness": stiffness,
                          "pos_rms": 0.01 / np.sqrt(stiffness), "located": np.zeros(9)})
    files = plot_study(study, table, tmp_path)
    assert files["pos_rms"].is_file() and files["summary"].is_file()
    metric = figures[0]                           # pos_rms against the parameter
    ax = metric.axes[0]
    assert ax.get_xlabel() == "plant.stiffness [N/m]" and ax.get_xscale() == "log"
    assert ax.get_ylabel() == "pos_rms [m]"
    summary = figures[-1]
    hists = [a for a in summary.axes if a.get_ylabel() == "runs"]
    assert {a.get_xlabel() for a in hists} == {"pos_rms [m]", "located [-]"}
    for a in hists:
        ticks = [t for t in a.get_yticks() if a.get_ylim()[0] <= t <= a.get_ylim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
