"""The study files in graphs/studies/ load, expand and run (first runs only)."""
import math
from pathlib import Path

import pytest

from hapflow.study import expand, load_study
from hapflow.study.execute import execute
from hapflow.study.runner import jobs

STUDIES = Path(__file__).resolve().parents[1] / "graphs" / "studies"


def first_runs(study, n):
    records = [r for job in jobs(study, expand(study)[:n], workers=1, parallel=False)
               for r in execute(job)]
    assert all(r["status"] == "ok" for r in records), [r["error"] for r in records]
    return [r["metrics"] for r in records]


def test_spring_sweep_identifies_each_variant_against_its_truth():
    study = load_study(STUDIES / "spring_sweep.yaml")
    runs = expand(study)
    assert len(runs) == 9 and {r.seed for r in runs} == {1}
    assert runs[0].params == {"dev.k_stiff": 1600, "dev.x_transition": 0.010}
    aligned, inside = first_runs(study, 2)
    # 8 equal segments over +-20 mm put edges at +-10 mm: with the spring transition
    # there, every segment is linear and k(x) is found within 5 % (seed 000: 5 %)
    assert aligned["ident.k_error"] < 5.0 and aligned["ident.fit_nrmse"] < 1.0
    # a transition at 12 mm falls inside a segment, which averages two rates
    assert inside["ident.k_error"] > 3 * aligned["ident.k_error"]
    assert 10.0 < aligned["force_rms"] < aligned["force_peak"] < 60.0


def test_noise_monte_carlo_varies_only_the_seed():
    study = load_study(STUDIES / "noise_monte_carlo.yaml")
    runs = expand(study)
    assert len(runs) == 200 and [r.seed for r in runs] == list(range(1, 201))
    assert study.fixed["head.force_noise"] == pytest.approx(2e-3)
    a, b = first_runs(study, 2)
    assert a["ident.m_error"] != b["ident.m_error"]              # another noise realisation
    assert a["ident.k_error"] == pytest.approx(b["ident.k_error"], rel=0.05)
    # the device has no dashpot (seed 002): no relative damping error, an absolute one
    assert math.isnan(a["ident.b_error"]) and 0.0 < a["ident.b_rms"] < 2.0


def test_force_nrmse_of_a_rendered_model(tmp_path):
    """The device's own true model predicts its force; a stiffer variant's force it does not."""
    import numpy as np

    from hapflow.blocks import HardeningSpringDevice
    from hapflow.blocks.impedance_model import ImpedanceModel, Knots
    device = HardeningSpringDevice(k_stiff=1600.0, x_transition=0.010, damping=11.5)
    x = np.linspace(-0.03, 0.03, 241)
    knots = {d: Knots(x, **device.impedance(x, d)) for d in (1, -1)}
    ImpedanceModel(knots[1], knots[-1]).save(tmp_path / "truth.yaml")
    (tmp_path / "study.yaml").write_text(f"""\
graph: {STUDIES.parent / 'colton2005_sweep.yaml'}
duration: 6
set: {{traj.amplitude: 0.020, traj.sweep_time: 6, dev.damping: 11.5, dev.x_transition: 0.010}}
parameters:
  dev.k_stiff: [1600, 3200]
metrics:
  render: {{force_nrmse: {{model: truth.yaml}}}}
""")
    same, stiffer = (m["render"] for m in first_runs(load_study(tmp_path / "study.yaml"), 2))
    assert same < 1.0 and stiffer > 5 * same
