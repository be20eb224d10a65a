"""Plots of a real-time run: ``run --mode hil --plot`` after a safety stop, and ``report
--plot`` with the signal traces, the stop marked on each."""
from pathlib import Path

import matplotlib.figure
import numpy as np
import pytest

import hapflow as hf
from hapflow.cli import main

ROOT = Path(__file__).resolve().parents[1]
BED = str(ROOT / "graphs" / "hil_testbed.yaml")
TRIP = ["--fault", "saturate@150x20:head.force=1", "--max-lateness", "1",
        "--max-overruns", "1000", "--hw-watchdog", "5"]   # a stop by the fault, not the load


@pytest.fixture
def figures(monkeypatch):
    """Every figure saved while the test runs (to look at what was drawn)."""
    saved = []
    original = matplotlib.figure.Figure.savefig

    def savefig(self, *args, **kwargs):
        saved.append(self)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    return saved


@pytest.fixture(scope="module")
def tripped(tmp_path_factory):
    """A run stopped by a saturated force input, and its recording."""
    out = tmp_path_factory.mktemp("trip") / "run.h5"
    assert main(["run", BED, "--mode", "hil", "--duration", "0.4", "--out", str(out),
                 *TRIP]) == 1
    return out


def traces(fig) -> dict[str, np.ndarray]:
    """label -> y data of every labelled line of ``fig`` that is not a vertical mark."""
    return {line.get_label(): np.asarray(line.get_ydata()) for ax in fig.axes
            for line in ax.get_lines() if np.ndim(line.get_xdata()) and
            np.size(line.get_xdata()) > 2}


def marks(ax) -> list[float]:
    """x of the vertical red lines of ``ax``."""
    return [float(np.asarray(line.get_xdata())[0]) for line in ax.get_lines()
            if line.get_color() == "r" and np.ptp(np.asarray(line.get_xdata(), float)) == 0]


def assert_signals_with_the_trip(fig, rec, signal_axes):
    t_trip = float(rec.attrs["safety_time"])
    drawn = traces(fig)
    for name in ("enc.pos", "head.force", "pid.force_cmd", "motor.force_cmd"):
        np.testing.assert_array_equal(drawn[name], rec[name][:, 0])
    for ax in signal_axes:
        assert marks(ax) == [t_trip]
    assert rec.attrs["safety_kind"] in " ".join(t.get_text() for t in fig.texts + [a.title for a in fig.axes])


def test_run_plot_after_a_safety_stop_draws_the_signals_and_marks_the_stop(tmp_path, capsys,
                                                                           figures):
    out, png = tmp_path / "run.h5", tmp_path / "run.png"
    assert main(["run", BED, "--mode", "hil", "--duration", "0.4", "--out", str(out),
                 "--plot", str(png), *TRIP]) == 1
    assert f"plot -> {png}" in capsys.readouterr().out and png.stat().st_size > 10_000
    (fig,) = figures
    rec = hf.recorder.load(out)
    assert rec.attrs["safety_kind"] == "saturated input"
    assert_signals_with_the_trip(fig, rec, fig.axes)


def test_report_plot_has_the_signal_traces_and_the_stop(tripped, tmp_path, capsys, figures):
    png = tmp_path / "report.png"
    assert main(["report", str(tripped), "--plot", str(png)]) == 0
    assert png.stat().st_size > 10_000
    (fig,) = figures
    rec = hf.recorder.load(tripped)
    units = {rec.units[name] for name in rec.signals}
    signal_axes = [ax for ax in fig.axes if ax.get_ylabel() in units]
    assert len(signal_axes) == len(units) == 2             # m and N
    assert_signals_with_the_trip(fig, rec, signal_axes)
