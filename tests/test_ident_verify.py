"""verify (hapflow/ident/verify.py): replaying recorded motion through a model."""
import numpy as np
import pytest

from hapflow.ident import ImpedanceModel, Knots, identify, load_motion, verify
from hapflow.ident import synthetic as syn
from hapflow.ident.prep import Motion, direction_labels
from hapflow.ident.verify import compare


def scaled(model, k_factor=1.0, segment=None):
    out = {}
    for d in (1, -1):
        kn = model.direction(d)
        k = kn.k.copy()
        if segment is None:
            k *= k_factor
        else:
            k[2 * segment:2 * segment + 2] *= k_factor
        out[d] = Knots(kn.x, kn.m, kn.b, k, kn.F0)
    return ImpedanceModel(out[1], out[-1], model.v_blend)


@pytest.fixture(scope="module")
def exact():
    truth = syn.piecewise_model()
    t, x, v, a = syn.swept_sine(20.0, 1000.0, 0.025, 1.0, 4.0)
    return truth, Motion(x, truth.predict(x, v, a), v, a, direction_labels(v, 5e-3), time=t,
                         rate=1000.0)


def test_nrmse_is_zero_for_the_model_s_own_data_and_grows_with_model_error(exact):
    truth, motion = exact
    assert verify(truth, motion).nrmse_percent < 1e-12
    errors = [verify(scaled(truth, f), motion).nrmse_percent for f in (1.01, 1.05, 1.2)]
    assert 0 < errors[0] < errors[1] < errors[2]
    assert errors[2] == pytest.approx(4 * errors[1], rel=1e-9)   # error (f - 1) k x: linear in f


def test_worst_range_is_where_the_model_is_wrong(exact):
    truth, motion = exact
    wrong = scaled(truth, 1.3, segment=3)                      # 5 .. 15 mm
    result = verify(wrong, motion)
    lo, hi, rms, count = result.worst
    assert 0.005 - result.bin_width <= lo and hi <= 0.015 + result.bin_width
    assert result.bin_width == 0.005 and rms > 0 and count > 0
    assert "worst position range" in result.summary()


def test_bin_width_shrinks_for_short_strokes():
    x = np.linspace(0, 4e-3, 100)
    r = compare(np.sin(x), np.sin(x) + 1e-3 * (x > 3e-3), x)
    assert r.bin_width == pytest.approx(1e-3)
    assert r.worst[0] == pytest.approx(3e-3) and len(r.bins) == 5    # [0,1) .. [3,4) mm, {4} mm


def test_verify_files_repeats_the_identification_preparation(tmp_path):
    meas = syn.recording(tmp_path / "run.h5", duration=12.0, rate=2000.0)
    motion = load_motion(tmp_path / "run.h5", velocity="encoder", cutoff=30.0, deadband=0.01)
    model = identify(motion, "segmented", segments=5)
    path = model.save(tmp_path / "model.yaml")
    result = verify(path, tmp_path / "run.h5")
    assert result.nrmse_percent == pytest.approx(model.fit["nrmse_percent"], rel=1e-12)
    assert result.nrmse_percent < 0.1
    # with another estimator the replay differs (the settings really are reused)
    other = verify(path, tmp_path / "run.h5", velocity="difference")
    assert other.nrmse_percent > 2 * result.nrmse_percent
    assert meas.rate == 2000.0
