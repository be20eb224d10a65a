"""hapflow identify / verify end to end (hapflow/ident/commands.py)."""
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import hapflow as hf
from hapflow.cli import main
from hapflow.ident import ImpedanceModel
from hapflow.ident import synthetic as syn

ROOT = Path(__file__).resolve().parents[1]
from tests.helpers import KEYSWITCH as KEYS


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("ident") / "run.h5"
    syn.recording(path, duration=12.0, rate=2000.0)
    return path


def test_identify_writes_model_and_plots_then_verify(run, tmp_path, capsys):
    model_path = tmp_path / "model.yaml"
    assert main(["identify", str(run), "--segments", "5", "--out", str(model_path),
                 "--plots", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    assert "acceleration: fusion: an accelerometer is present" in out
    assert "positive (v > 0)" in out and "cond" in out
    assert "fit: force NRMSE" in out
    assert "against the truth (recording attribute impedance_truth)" in out
    for name in ("parameters.png", "force.png"):
        assert (tmp_path / "plots" / name).stat().st_size > 10_000
    model = ImpedanceModel.load(model_path)
    assert model.method == "segmented" and model.source["sha256"]
    assert model.settings["prep"]["velocity"] == "fusion"
    truth = syn.piecewise_model()
    xs = np.array([-0.02, -0.01, 0.0, 0.01, 0.02])
    np.testing.assert_allclose(model.positive.at(xs)["k"], truth.positive.at(xs)["k"], rtol=0.01)

    assert main(["verify", str(model_path), "--against", str(run)]) == 0
    out = capsys.readouterr().out
    nrmse = float(out.split("force NRMSE ")[1].split(" %")[0])
    assert nrmse == pytest.approx(model.fit["nrmse_percent"], abs=1e-3) and nrmse < 0.1
    assert "worst position range" in out
    assert main(["verify", str(model_path), "--against", str(run), "--max-nrmse", "1e-6"]) == 1
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize("method", ["auto", "ewls"])
def test_other_methods(run, tmp_path, capsys, method):
    out_path = tmp_path / f"{method}.yaml"
    assert main(["identify", str(run), "--method", method, "--out", str(out_path)]) == 0
    model = ImpedanceModel.load(out_path)
    assert model.method == method and model.fit["nrmse_percent"] < 2.0
    if method == "ewls":
        assert np.allclose(np.diff(model.positive.x), 1e-3)


def test_keyswitch_csv(tmp_path, capsys):
    out_path = tmp_path / "red.yaml"
    csv = KEYS + "cherry_mx_red.csv"
    assert main(["identify", csv, "--method", "auto", "--out", str(out_path)]) == 0
    out = capsys.readouterr().out
    assert "quasi-static" in out and "k [N/m]" in out and "m [kg]" not in out
    assert main(["verify", str(out_path), "--against", csv, "--max-nrmse", "1.0"]) == 0
    assert "1 mm bins" in capsys.readouterr().out


def test_truth_of_a_simulated_device(tmp_path, capsys):
    """A short run of the seed-002 graph: the truth comes from HardeningSpringDevice.impedance."""
    rec = tmp_path / "sweep.h5"
    assert main(["run", str(ROOT / "graphs" / "colton2005_sweep.yaml"), "--duration", "12",
                 "--out", str(rec), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["identify", str(rec), "--method", "segmented", "--segments", "6",
                 "--out", str(tmp_path / "m.yaml"), "--plots", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "against the truth (dev.impedance (HardeningSpringDevice))" in out
    model = ImpedanceModel.load(tmp_path / "m.yaml")
    dev = hf.load(ROOT / "graphs" / "colton2005_sweep.yaml").nodes["dev"].block
    x = np.array([-0.003, 0.003])                      # inside the soft centre segment(s)
    for d in (1, -1):
        np.testing.assert_allclose(model.direction(d).at(x)["k"], dev.impedance(x, d)["k"],
                                   rtol=0.1)


def test_a_sweep_too_short_for_its_segments_is_warned_and_strict_fails(tmp_path, capsys):
    """Issue 18: 2 s of the seed-002 sweep (its 90 s cut to a ramp through the range once)
    gave m = -9618 +- 7100 kg with no word.  The estimates the data cannot support are named
    and ``--strict`` exits 1."""
    rec = tmp_path / "short.h5"
    assert main(["run", str(ROOT / "graphs" / "colton2005_sweep.yaml"), "--duration", "2",
                 "--out", str(rec), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["identify", str(rec), "--out", str(tmp_path / "m.yaml")]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines()
                if line.startswith("warning: ")]
    assert warnings and all("segment" in w for w in warnings), warnings
    assert main(["identify", str(rec), "--strict", "--out", str(tmp_path / "m.yaml")]) == 1


@pytest.mark.parametrize("command", ["identify", "verify"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0 and "--pos" in capsys.readouterr().out


def test_errors_are_one_line_with_what_to_do(run, tmp_path, capsys):
    assert main(["identify", str(run), "--pos", "enc.position"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "did you mean 'enc.pos'?" in err and "It has: dev.acc" in err
    assert main(["identify", str(tmp_path / "none.h5")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "none.yaml"), "--against", str(run)]) == 2
    assert "cannot read model file" in capsys.readouterr().err
    assert main(["identify", KEYS + "cherry_mx_red.csv", "--units", "force"]) == 2
    assert "quantity=unit" in capsys.readouterr().err
    assert main(["identify", KEYS + "cherry_mx_red.csv", "--regressors", "avx1"]) == 2
    assert "quasi-static" in capsys.readouterr().err


@pytest.mark.parametrize("argv, text", [
    (["identify", "CSV", "--acc", "nosuch"], "--acc nosuch: --pos, --force and --acc name "
                                             "signals of a recording; DATA is a CSV file"),
    (["identify", "CSV", "--pos", "y"], "--pos y: --pos, --force and --acc name signals"),
    (["verify", "MODEL", "--against", "CSV", "--force", "u"], "--force u: --pos, --force"),
    (["verify", "MODEL", "--against", "RUN", "--units", "force=gf"],
     "--units, --columns and --rate apply to CSV files"),
], ids=["identify-acc", "identify-pos", "verify-force", "verify-units"])
def test_options_for_the_other_kind_of_data_are_errors(argv, text, run, model_file, capsys):
    """Issue 18: ``identify DATA.csv --acc nosuch`` was accepted (the option ignored), and
    so were verify's --units with a recording."""
    csv = KEYS + "cherry_mx_red.csv"
    names = {"CSV": csv, "MODEL": str(model_file), "RUN": str(run)}
    assert main([names.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hapflow: error: ") and text.replace("DATA", csv) in err, err
    assert main(["identify", csv, "--acc", "none", "--method", "auto",
                 "--out", str(model_file.parent / "k.yaml")]) == 0


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """The true model of the synthetic recording, as a model file."""
    return syn.piecewise_model().save(tmp_path_factory.mktemp("model") / "model.yaml")


BOMB = "".join(f"{a}: &{a} [{', '.join([f'*{b}'] * 9)}]\n"
               for b, a in zip("abcdefghi", "bcdefghij"))


@pytest.mark.parametrize("edit,line,text", [
    (lambda t: b"# caf\xe9\n" + t, 1, "is not UTF-8 text: byte 0xe9"),
    (lambda t: t + b"extra: " + b"[" * 5000 + b"]" * 5000 + b"\n", -1, "nested deeper than 32"),
    (lambda t: b"a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + BOMB.encode() + t, 8,
     "expands (through its aliases) to more than 10,000,000 values"),
    (lambda t: t.replace(b"v_blend: 0.001", b"v_blend: " + b"9" * 5000), -1,
     "a number of 5000 characters"),
    (lambda t: t.replace(b"v_blend: 0.001\n", b"v_blend: 0.001\nv_blend: 0.002\n"), -1,
     "duplicate key 'v_blend'"),
], ids=["latin1", "deep", "alias-bomb", "long-number", "duplicate-key"])
def test_a_damaged_model_file_is_one_located_error(edit, line, text, model_file, run, tmp_path,
                                                   capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(edit(model_file.read_bytes()))
    if line < 0:                                   # the line the edit wrote
        line = next(i for i, row in enumerate(bad.read_text().splitlines(), 1)
                    if row.startswith(("extra", "v_blend: 9")) or row == "v_blend: 0.002")
    assert main(["verify", str(bad), "--against", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hapflow: error: {bad}:{line}: ") and text in err, err
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.fixture(scope="module")
def identified(run, tmp_path_factory):
    """A model file written by identify (with the preparation settings verify replays)."""
    path = tmp_path_factory.mktemp("identified") / "model.yaml"
    assert main(["identify", str(run), "--segments", "5", "--out", str(path)]) == 0
    return path


@pytest.mark.parametrize("key, value, text", [
    ("cutoff", "abc", "settings.prep.cutoff must be a frequency > 0 Hz, got 'abc'"),
    ("trim", "abc", "settings.prep.trim must be a time >= 0 s, got 'abc'"),
    ("order", "2.5", "settings.prep.order must be an integer 1..8, got 2.5"),
    ("deadband", ".nan", "settings.prep.deadband must be a speed >= 0 m/s, got nan"),
    ("velocity", "bogus", "settings.prep.velocity must be one of fusion, spectral"),
    ("acc", "[1]", "source.signals.acc must be a signal name or null (no accelerometer), "
                   "got [1]"),
])
def test_settings_verify_replays_are_checked_naming_the_model_file_line(
        key, value, text, identified, run, tmp_path, capsys):
    """Issue 18 (mutation of model files): cutoff: abc, trim: abc were tracebacks in verify,
    and a bad estimator name was blamed on the data file."""
    bad = tmp_path / "bad.yaml"
    edited, count = re.subn(rf"([{{ ]{key}: )[^,}}\n]+", rf"\g<1>{value}",
                            identified.read_text(), count=1)
    assert count == 1
    bad.write_text(edited)
    line = next(i for i, row in enumerate(edited.splitlines(), 1) if f"{key}: {value}" in row)
    assert main(["verify", str(bad), "--against", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hapflow: error: {bad}:{line}: ") and text in err, err


def test_model_values_beyond_their_limits_are_rejected_and_a_negative_mass_warned(
        model_file, run, tmp_path, capsys):
    model = ImpedanceModel.load(model_file)
    text = model_file.read_text()
    bad = tmp_path / "absurd.yaml"
    bad.write_text(re.sub(r"(\n    m: \[)[^,]+", r"\g<1>1.0e+300", text, count=1))
    line = bad.read_text().splitlines().index("  positive:") + 1
    assert main(["verify", str(bad), "--against", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hapflow: error: {bad}:{line}: direction 'positive': 'm' has "
                          "1e+300 kg: the values must be at most 1e+12 in magnitude"), err
    negative = ImpedanceModel(model.positive, dataclasses.replace(
        model.negative, m=-model.negative.m), model.v_blend)
    path = negative.save(tmp_path / "negative.yaml")
    assert main(["verify", str(path), "--against", str(run)]) == 0
    assert "warning: the model's negative-direction mass is not positive" in capsys.readouterr().out


def test_data_beyond_physical_limits_is_rejected_at_load_with_its_line(run, tmp_path, capsys):
    import h5py
    with h5py.File(run) as f:
        t, x, force = (f[k][:4000].reshape(-1) for k in ("time", "signals/enc.pos",
                                                        "signals/head.force"))
    force[100] *= 1e300
    csv = tmp_path / "absurd.csv"
    csv.write_text("time [s],position [m],force [N]\n"
                   + "".join(f"{a!r},{b!r},{c!r}\n" for a, b, c in zip(t.tolist(), x.tolist(),
                                                                      force.tolist())))
    assert main(["identify", str(csv), "--out", str(tmp_path / "m.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hapflow: error: {csv}:102: column 'force' read in N: force ")
    assert "beyond the 1e+06 N hapflow reads" in err and "--units force=UNIT" in err
    rec = tmp_path / "absurd.h5"
    rec.write_bytes(run.read_bytes())
    with h5py.File(rec, "r+") as f:
        f["signals/head.force"][7, 0] = 1e300
    assert main(["identify", str(rec), "--out", str(tmp_path / "m.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hapflow: error: recording '{rec}': signal 'head.force', sample 7: "
                          "force 1e+300 N is beyond"), err
    assert not (tmp_path / "m.yaml").exists()


@pytest.mark.parametrize("argv,text", [
    (["verify", "MODEL", "--against", "RUN", "--max-nrmse", "nan"],
     "argument --max-nrmse: 'nan' is not a number in (0, 1e+06] %"),
    (["identify", "RUN", "--segments", "100000"],
     "argument --segments: '100000' is not an integer from 1 to 1000"),
    (["identify", "RUN", "--forgetting", "1.5"], "argument --forgetting: '1.5' is not a number"),
    (["identify", "RUN", "--cutoff", "inf"], "argument --cutoff: 'inf' is not a number"),
    (["camera", "PROBE", "--validate", "PROBE", "--duration", "-1"],
     "argument --duration: '-1' is not a number"),
], ids=["max-nrmse-nan", "segments-huge", "forgetting", "cutoff-inf", "camera-duration"])
def test_bad_option_values_are_usage_errors(argv, text, run, model_file, capsys):
    names = {"RUN": str(run), "MODEL": str(model_file),
             "PROBE": str(ROOT / "graphs" / "colton2005_sweep.yaml")}
    with pytest.raises(SystemExit) as stop:
        main([names.get(a, a) for a in argv])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err, err


def test_more_segments_than_the_data_fills_is_an_error_not_a_hang(run, tmp_path, capsys):
    """--segments 1000 on 12 s: every segment would need 20 samples, a direction has ~11,000."""
    assert main(["identify", str(run), "--segments", "1000", "--out",
                 str(tmp_path / "m.yaml")]) == 2
    err = capsys.readouterr().err
    assert "1000 segments need at least 20 samples each" in err and "ask for at most" in err


def test_fit_and_verify_force_plots_say_which_they_are(run, model_file, tmp_path, capsys):
    """Read back from the PNG files' Title (fit_force.png and verify_force.png had one title)."""
    from PIL import Image
    assert main(["identify", str(run), "--segments", "5", "--out", str(tmp_path / "m.yaml"),
                 "--plots", str(tmp_path / "fit")]) == 0
    assert main(["verify", str(model_file), "--against", str(run), "--plots",
                 str(tmp_path / "verify")]) == 0
    capsys.readouterr()
    fit = Image.open(tmp_path / "fit" / "force.png").text["Title"]
    verify = Image.open(tmp_path / "verify" / "verify_force.png").text["Title"]
    assert fit.startswith("fit: run.h5: measured vs predicted force (NRMSE "), fit
    assert verify.startswith("verify model.yaml against run.h5: measured vs predicted force"), verify


@pytest.mark.parametrize("value", [np.zeros(0), 0.0, b"\xff", "", "[unclosed"])
def test_a_damaged_truth_attribute_is_no_truth(value):
    """Found by the fuzz suite: an empty array as impedance_truth raised ValueError (the
    truth value of an empty array) out of identify."""
    from hapflow.ident.truth import find_truth
    from hapflow.recorder import Recording
    for key in ("impedance_truth", "graph_yaml"):
        assert find_truth(Recording(np.zeros(3), attrs={key: value})) is None
