"""Model file and evaluation kernel (blocks/impedance_model.py)."""
import math

import numpy as np
import pytest
import yaml

from hapflow.ident import ImpedanceModel, Knots, ModelFileError, impedance_force
from hapflow.ident import synthetic as syn
from hapflow.blocks.impedance_model import blend_weight, impedance_force_w


def small_model():
    pos = Knots([0.0, 0.01, 0.02], m=[0.5, 0.5, 0.6], b=[2.0, 3.0, 4.0], k=[100.0, 200.0, 400.0],
                F0=[0.1, 0.2, -0.3])
    neg = Knots.piecewise_constant([0.0, 0.01, 0.02], [[0.4, 1.0, 150.0, -0.1],
                                                       [0.45, 1.5, 300.0, -0.2]])
    return ImpedanceModel(pos, neg, v_blend=2e-3, method="manual", settings={"note": "test"},
                          source={"path": "x.h5", "sha256": "0" * 64})


def test_round_trip_is_exact(tmp_path):
    model = syn.piecewise_model()
    model.fit = {"nrmse_percent": 0.1234567890123}
    model.diagnostics = {"positive": {"condition": [1.5, np.inf]}}
    path = model.save(tmp_path / "sub" / "model.yaml")
    back = ImpedanceModel.load(path)
    np.testing.assert_array_equal(back.table(), model.table())
    assert back.fit == model.fit and back.method == model.method
    assert back.diagnostics["positive"]["condition"][1] == math.inf
    data = yaml.safe_load(path.read_text())
    assert data["format"] == "hapflow-impedance-model" and data["units"]["k"] == "N/m"
    assert set(data["directions"]) == {"positive", "negative"}


def test_piecewise_constant_knots_are_right_continuous_and_clamped():
    kn = Knots.piecewise_constant([0.0, 1.0, 2.0], [[1, 2, 3, 4], [5, 6, 7, 8]])
    assert kn.x.tolist() == [0.0, 1.0, 1.0, 2.0]
    at = kn.at(np.array([-1.0, 0.0, 0.5, 0.999, 1.0, 1.5, 2.0, 3.0]))
    assert at["k"].tolist() == [3, 3, 3, 3, 7, 7, 7, 7]


def test_kernel_interpolates_linearly_and_blends_directions():
    model = small_model()
    table = model.table()
    # positive only: halfway between knots 0 and 1
    x, v, a = 0.005, 0.05, 2.0
    m, b, k, f0 = 0.5, 2.5, 150.0, 0.15
    assert impedance_force_w(table, x, v, a, 1.0) == pytest.approx(m * a + b * v + k * x + f0, rel=1e-14)
    # negative only: a segment value
    x = 0.015
    assert impedance_force_w(table, x, -0.05, a, 0.0) == pytest.approx(
        0.45 * a + 1.5 * -0.05 + 300.0 * x - 0.2, rel=1e-14)
    # beyond the ends the end values hold
    assert impedance_force_w(table, 0.03, 0.0, 0.0, 1.0) == pytest.approx(400.0 * 0.03 - 0.3)
    # blend: w = 0.5 (1 + tanh(v / v_blend))
    for v in (-1e-2, -1e-3, 0.0, 5e-4, 1e-2):
        w = 0.5 * (1 + math.tanh(v / 2e-3))
        assert blend_weight(table, v) == pytest.approx(w, abs=1e-15)
        want = (w * impedance_force_w(table, 0.012, v, a, 1.0)
                + (1 - w) * impedance_force_w(table, 0.012, v, a, 0.0))
        assert impedance_force(table, 0.012, v, a) == pytest.approx(want, rel=1e-14)


def test_predict_matches_the_kernel_and_the_knot_rule():
    model = small_model()
    rng = np.random.default_rng(0)
    x, v, a = rng.uniform(-0.005, 0.025, 500), rng.normal(0, 0.01, 500), rng.normal(0, 5, 500)
    pred = model.predict(x, v, a)
    table = model.table()
    np.testing.assert_array_equal(pred, [impedance_force(table, *s) for s in zip(x, v, a)])
    # quasi-static direction labels override the blend
    d = np.where(np.arange(500) % 2 == 0, 1, -1)
    pq = model.predict(x, None, None, direction=d)
    for sign, kn in ((1, model.positive), (-1, model.negative)):
        sel = d == sign
        p = kn.at(x[sel])
        np.testing.assert_allclose(pq[sel], p["k"] * x[sel] + p["F0"], rtol=1e-12, atol=1e-15)


GOOD_DIRECTIONS = ("directions:\n"
                   "  positive: {x: [0, 1], m: [0, 0], b: [0, 0], k: [1, 1], F0: [0, 0]}\n"
                   "  negative: {x: [0, 1], m: [0, 0], b: [0, 0], k: [1, 1], F0: [0, 0]}\n")


@pytest.mark.parametrize("text, message", [
    ("v_blnd: 0.002\n", r"bad.yaml:3: unknown key 'v_blnd' in a model file; did you mean "
                        r"'v_blend'\? Valid keys: format, version, equation, units, method, "
                        r"settings, source, v_blend, directions, polynomial, diagnostics, fit"),
    ("comment: hand-tuned\n", r"bad.yaml:3: unknown key 'comment' in a model file\. Valid keys"),
    ("units: {x: mm, m: kg, b: N s/m, k: N/m, F0: N, v_blend: m/s}\n",
     r"bad.yaml:3: a model file's values are in SI, 'units: \{x: m, m: kg"),
    ("method: [a, b]\n", r"bad.yaml:3: 'method' must be a name"),
    ("settings: [a, b]\n", r"bad.yaml:3: 'settings' must be a mapping"),
    ("settings: {prep: [1, 2]}\n", r"bad.yaml:3: 'settings.prep' must be a mapping"),
    ("source:\n  signals: enc.pos\n", r"bad.yaml:4: 'source.signals' must be a mapping"),
    ("v_blend: true\n", r"bad.yaml:3: v_blend must be a number from 0 to 10"),
    ("directions_extra: 1\n", r"bad.yaml:3: unknown key 'directions_extra' in a model file; "
                              r"did you mean 'directions'\?"),
], ids=["typo", "unknown", "units", "method", "settings", "prep", "signals", "v_blend-bool",
        "near-miss"])
def test_unknown_or_malformed_top_level_entries_name_the_line(tmp_path, text, message):
    """Issue 18: unknown top-level keys were accepted silently, and a list where a mapping
    belongs was a TypeError traceback in verify."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: hapflow-impedance-model\nversion: 1\n" + text + GOOD_DIRECTIONS)
    with pytest.raises(ModelFileError, match=message):
        ImpedanceModel.load(bad)


@pytest.mark.parametrize("text, message", [
    ("  positiv: {}\n", r"bad.yaml:5: unknown key 'positiv' in 'directions'; did you mean "
                        r"'positive'\? Valid keys: positive, negative"),
    ("  negative: {x: [0], m: [0], b: [0], k: [1], F0: [0], F_0: [0]}\n",
     r"bad.yaml:5: unknown key 'F_0' in direction 'negative'; did you mean 'F0'\?"),
], ids=["direction", "parameter"])
def test_unknown_keys_in_directions_name_the_line(tmp_path, text, message):
    bad = tmp_path / "bad.yaml"
    good = GOOD_DIRECTIONS.split("\n")
    bad.write_text("format: hapflow-impedance-model\nversion: 1\n" + good[0] + "\n" + good[1]
                   + "\n" + text)
    with pytest.raises(ModelFileError, match=message):
        ImpedanceModel.load(bad)


def test_a_saved_model_names_only_known_keys(tmp_path):
    """Every key the writer puts in a file is one the reader accepts (the check above is
    no stricter than the format)."""
    model = small_model()
    model.polynomial = {"m": 0.5, "k1": 100.0}
    model.fit, model.diagnostics = {"nrmse_percent": 1.0}, {"note": 1}
    back = ImpedanceModel.load(model.save(tmp_path / "m.yaml"))
    np.testing.assert_array_equal(back.table(), model.table())


def test_malformed_files_say_what_is_wrong(tmp_path):
    bad = tmp_path / "bad.yaml"
    cases = [("just: text\n", "not a hapflow impedance model"),
             ("format: hapflow-impedance-model\nversion: 9\n", "unsupported model version"),
             ("format: hapflow-impedance-model\nversion: 1\ndirections: {positive: {x: [0]}}\n",
              "'positive' and 'negative'"),
             ("format: hapflow-impedance-model\nversion: 1\ndirections:\n"
              "  positive: {x: [0, 1], m: [0, 0], b: [0, 0], k: [1], F0: [0, 0]}\n"
              "  negative: {x: [0, 1], m: [0, 0], b: [0, 0], k: [1, 1], F0: [0, 0]}\n",
              "1 values for 2 knots"),
             ("format: hapflow-impedance-model\nversion: 1\ndirections:\n"
              "  positive: {x: [1, 0], m: [0, 0], b: [0, 0], k: [1, 1], F0: [0, 0]}\n"
              "  negative: {x: [0, 1], m: [0, 0], b: [0, 0], k: [1, 1], F0: [0, 0]}\n",
              "non-decreasing"),
             (": : :\n", "bad.yaml:1: not a valid model file: YAML syntax error")]
    for text, message in cases:
        bad.write_text(text)
        with pytest.raises(ModelFileError, match=message):
            ImpedanceModel.load(bad)
    with pytest.raises(ModelFileError, match="cannot read model file"):
        ImpedanceModel.load(tmp_path / "missing.yaml")
