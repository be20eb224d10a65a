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
