"""Study files (hapflow/study/spec.py) and metrics (hapflow/study/metrics.py)."""
import math
import sys
import textwrap

import numpy as np
import pytest

from hapflow.study import StudyError, expand, load_study
from hapflow.study.execute import Job, execute
from hapflow.study.metrics import resolve

GRAPH = """\
name: msd
rate: 4000
duration: 1
seed: 3
blocks:
  drive: {type: Step, time: 0.0, initial: 0.0, final: 2.0, unit: N}
  msd: {type: MassSpringDamper, mass: 1.0, damping: 4.0, stiffness: 400.0}
wires:
  - drive.y -> msd.force
record: [msd.pos, msd.vel]
"""

STUDY = """\
name: s
graph: msd.yaml
duration: 0.5
parameters:
  msd.stiffness: [100, 400]
metrics:
  final_pos: {final: msd.pos}
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "msd.yaml").write_text(GRAPH)
    return tmp_path


def study_text(folder, text):
    path = folder / "study.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def error_of(folder, text, allow=()):
    path = study_text(folder, text)
    with pytest.raises(StudyError) as info:
        load_study(path, allow)
    return str(info.value)


def test_valid_study_parses(folder):
    s = load_study(study_text(folder, STUDY))
    assert s.name == "s" and s.duration == 0.5 and s.design == "grid"
    assert [p.key for p in s.parameters] == ["msd.stiffness"] and s.parameters[0].live
    assert s.metrics["final_pos"] == {"kind": "stat", "stat": "final", "signal": "msd.pos",
                                      "index": None, "after": 0.0}
    assert [r.seed for r in expand(s)] == [3, 3]            # the graph's seed by default


@pytest.mark.parametrize("text, line, words", [
    (STUDY + "desing: grid\n", 8, ["unknown top-level key 'desing'", "did you mean 'design'"]),
    (STUDY.replace("msd.yaml", "nope.yaml"), 2, ["graph file 'nope.yaml' not found"]),
    (STUDY.replace("msd.stiffness", "msdd.stiffness"), 5, ["'msdd.stiffness'", "did you mean 'msd'",
                                                           "Blocks: drive, msd"]),
    (STUDY.replace("msd.stiffness", "msd.stifness"), 5, ["no parameter 'stifness'",
                                                         "did you mean 'stiffness'"]),
    (STUDY.replace("[100, 400]", "{low: 1, high: 2, num: 3, step: 1}"), 5, ["exactly one of 'num'"]),
    (STUDY.replace("[100, 400]", "{low: 5, high: 2, num: 3}"), 5, ["high (2) is below low (5)"]),
    (STUDY.replace("[100, 400]", "{low: 1, hgh: 2, num: 3}"), 5, ["unknown key 'hgh'",
                                                                  "did you mean 'high'"]),
    (STUDY + "design: lhs\n", 8, ["needs 'samples'"]),
    (STUDY + "design: latin\n", 8, ["design must be one of grid, random, lhs"]),
    (STUDY + "samples: 4\n", 8, ["'samples' applies to random and lhs"]),
    (STUDY.replace("duration: 0.5", "duration: -1"), 3, ["duration must be a number > 0"]),
    (STUDY.replace("final: msd.pos", "final: msd.acc"), 7, ["metric 'final_pos'",
                                                            "'msd.acc' is not recorded",
                                                            "Recorded: msd.pos, msd.vel"]),
    (STUDY.replace("final: msd.pos", "fnal: msd.pos"), 7, ["needs exactly one kind",
                                                           "did you mean 'final'"]),
    (STUDY.replace("final: msd.pos", "events: all"), 7, ["events must be one of located, overflow"]),
    (STUDY + "set: {msd.stiffness: 3}\n", 5, ["both varied and fixed"]),
    (STUDY.replace("[100, 400]", "[100, 400]\n  msd.stiffness: [1]"), 6, ["duplicate key"]),
    ("graph: msd.yaml\nparameters: {}\nmetrics: {f: {final: msd.pos}}\n", 2, ["'parameters' is empty"]),
    (STUDY.replace("msd.stiffness: [100, 400]", "seed: [1, 2.5]"), 5, ["seeds must be integers"]),
    (STUDY.replace("msd.stiffness: [100, 400]", "seed: {low: 1, high: 9, num: 3}"), 5,
     ["seeds must be integers: write {low: 1, high: 200, step: 1}"]),
], ids=["top-key", "graph-file", "block", "param", "num-step", "high-low", "range-key", "samples",
        "design", "grid-samples", "duration", "signal", "metric-kind", "events", "set-clash",
        "duplicate", "no-params", "seed-list", "seed-range"])
def test_errors_name_file_line_key_and_what_is_valid(folder, text, line, words):
    message = error_of(folder, text)
    assert message.startswith(f"{folder / 'study.yaml'}:{line}: "), message
    for word in words:
        assert word in message, message


def test_user_metric_outside_the_allow_list_is_not_imported(folder, monkeypatch):
    monkeypatch.delenv("HAPFLOW_METRIC_MODULES", raising=False)
    text = STUDY.replace("final: msd.pos", "function: tests.test_study_spec.settle_time")
    sys.modules.pop("json.tool", None)
    message = error_of(folder, text)
    assert "module 'tests.test_study_spec' is not on the allow-list" in message
    assert "--allow tests" in message
    # nothing named in the file is imported before the check
    with pytest.raises(Exception, match="not on the allow-list"):
        resolve("json.tool.main")
    assert "json.tool" not in sys.modules
    # allowed: by argument, or by the environment variable
    assert load_study(study_text(folder, text), allow=("tests",)).metrics["final_pos"]["kind"] == "function"
    monkeypatch.setenv("HAPFLOW_METRIC_MODULES", "tests.test_study_spec")
    assert load_study(study_text(folder, text)).metrics["final_pos"]["function"].endswith("settle_time")
    assert "has no function 'nothing'" in error_of(folder, text.replace("settle_time", "nothing"))
    assert "dotted path" in error_of(folder, text.replace("tests.test_study_spec.settle_time", "x"))


def test_user_metric_in_the_readme_syntax_loads(folder):
    """README: ``{function: pkg.mod.f, args: {...}}``, args beside function (it was rejected:
    only ``{function: {path: ..., args: ...}}`` loaded)."""
    text = STUDY.replace("final: msd.pos", "function: tests.test_study_spec.settle_time, "
                                           "args: {band: 0.05}")
    metric = load_study(study_text(folder, text), allow=("tests",)).metrics["final_pos"]
    assert metric["kind"] == "function" and metric["args"] == {"band": 0.05}


def settle_time(run, band=0.02):
    """User metric for the tests: last time |pos - final| exceeds ``band`` of the final value."""
    pos = run.signals["msd.pos"][:, 0]
    outside = np.nonzero(np.abs(pos - pos[-1]) > band * abs(pos[-1]))[0]
    return {"settle": float(run.time[outside[-1]]) if outside.size else 0.0, "seed": run.seed}


def test_metrics_against_the_closed_form_step_response(folder):
    """Step of 2 N into m = 1 kg, c = 4 N s/m, k = 400 N/m: x = F/k (1 - e^(-zw t)(cos + ...))."""
    text = """\
    graph: msd.yaml
    duration: 3.0
    parameters:
      msd.stiffness: [400]
    metrics:
      final_pos: {final: msd.pos}
      peak_pos: {peak: msd.pos}
      mean_late: {mean: msd.pos, after: 2.0}
      rms_vel: {rms: msd.vel}
      max_vel: {max: msd.vel}
      events: {events: located}
      user: {function: {path: tests.test_study_spec.settle_time, args: {band: 0.02}}}
    """
    s = load_study(study_text(folder, text), allow=("tests",))
    rec = execute(Job(s.graph_text, str(s.graph_path), {}, [(0, {"msd.stiffness": 400}, 3)],
                      s.duration, s.metrics, "off"))[0]
    assert rec["status"] == "ok", rec["error"]
    m = rec["metrics"]
    wn, zeta, xs = 20.0, 4.0 / (2 * 20.0), 2.0 / 400.0
    wd = wn * math.sqrt(1 - zeta ** 2)
    t = np.arange(12000) / 4000.0
    x = xs * (1 - np.exp(-zeta * wn * t) * (np.cos(wd * t) + zeta * wn / wd * np.sin(wd * t)))
    v = xs * np.exp(-zeta * wn * t) * (wn ** 2 / wd) * np.sin(wd * t)
    assert m["final_pos"] == pytest.approx(x[-1], rel=1e-7)
    assert m["peak_pos"] == pytest.approx(xs * (1 + math.exp(-zeta * math.pi / math.sqrt(1 - zeta ** 2))),
                                          rel=1e-5)                         # overshoot at t = pi/wd
    assert m["mean_late"] == pytest.approx(np.mean(x[t >= 2.0]), rel=1e-7)
    assert m["rms_vel"] == pytest.approx(math.sqrt(np.mean(v * v)), rel=1e-6)
    assert m["max_vel"] == pytest.approx(np.max(v), rel=1e-5)
    assert m["events"] == 0
    # 2 % settling of a second-order system: about 4 / (zeta wn) = 2 s
    assert m["user.settle"] == pytest.approx(4.0 / (zeta * wn), rel=0.1)
    assert m["user.seed"] == 3
