"""Real measurements at 9 samples per resonance period: the Silverbox benchmark.

An electronic Duffing oscillator (a mass-spring-damper with a hardening spring, Wigren &
Schoukens 2013) sampled at 610.35 Hz, the situation issue 14 describes: a lab's DAQ at a
few hundred Hz, a resonance at tens of Hz.  The CSV files are the benchmark's own layout
(``"V1","V2",``: no time column, volts, a delimiter ending every line).  A model is
identified from 8192 training samples (tests/data/silverbox) with default derivatives and
``--method bic``, and simulated from the measured input over a held-out excerpt of the
benchmark's test multisine (graphs/data/silverbox).  Measured: 0.90 mV RMS free-run error
for the chosen polynomial, 6.9 mV for a linear one (the benchmark's linear ARX(4,4)
reference: 9.0 mV on the whole test multisine).
"""
from pathlib import Path

import pytest

from hapflow.cli import main
from hapflow.ident import IdentError, ImpedanceModel, load_motion
from hapflow.ident.verify import free_run, prep_settings

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "tests" / "data" / "silverbox" / "snls80mv_train8k.csv"
HELD_OUT = ROOT / "graphs" / "data" / "silverbox" / "snls80mv_excerpt.csv"
FS = 1e7 / 2 ** 14
CSV = ["--columns", "position=V2,force=V1", "--units", "position=V*1 m/V,force=V*1 N/V",
       "--rate", repr(FS)]


def _identify(tmp_path, name, *method):
    out = tmp_path / f"{name}.yaml"
    assert main(["identify", str(TRAIN), *method, *CSV, "--out", str(out)]) == 0
    return ImpedanceModel.load(out)


def _held_out_error(model):
    motion = load_motion(HELD_OUT, **prep_settings(model))    # rate, columns, units repeated
    return free_run(model, motion).rms_error


def test_bic_model_simulates_held_out_measurements_far_better_than_a_linear_one(tmp_path,
                                                                                capsys):
    model = _identify(tmp_path, "bic", "--method", "bic")
    text = capsys.readouterr().out
    assert "by bic: poly" in text and "no accelerometer" in text
    assert 3 in model.settings["stiffness"] and model.source["rate"] == pytest.approx(FS)
    linear = _identify(tmp_path, "linear", "--method", "poly", "--stiffness", "1")
    chosen, straight = _held_out_error(model), _held_out_error(linear)
    assert chosen < 1.5e-3                                      # volts: 1.5 mV
    assert straight > 5 * chosen


def test_rate_applies_only_to_a_file_without_time(tmp_path):
    path = tmp_path / "timed.csv"
    path.write_text("time [s],position [m],force [N]\n0,0,0\n0.001,0,0\n0.002,0,0\n")
    with pytest.raises(IdentError, match=r"has a time column \('time'\).*leave out --rate 500"):
        load_motion(path, rate=500.0)
    with pytest.raises(IdentError, match=r"--rate must be a sample rate > 0 Hz"):
        load_motion(TRAIN, rate=-1.0, columns={"position": "V2", "force": "V1"})


def test_verify_simulate_reports_the_error_in_the_datas_volts(tmp_path, capsys):
    model = tmp_path / "bic.yaml"
    assert main(["identify", str(TRAIN), "--method", "bic", *CSV, "--out", str(model)]) == 0
    capsys.readouterr()
    assert main(["verify", str(model), "--against", str(HELD_OUT), "--simulate",
                 "--plots", str(tmp_path)]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("free run"))
    assert line.startswith("free run from the measured force: RMS position error 0.000")
    assert " V (" in line and (tmp_path / "verify_simulate.png").is_file()
