"""Time plots read back from their figures: every axis labelled with its signals' one unit."""
import numpy as np
import pytest

from hapflow.plotting import plot_modes
from hapflow.recorder import Recording


def contact_recording() -> Recording:
    """A contact device's signals as ``examples/contact_devices.py`` plots them: force [N] and
    its dimensionless indicator function, two angles, the integer mode."""
    t = np.arange(1000) / 1000.0
    mode = (t > 0.4).astype(np.int64) + (t > 0.7)
    signals = {"piano.force": 2.0 * np.sin(6 * t), "piano.indicator": 0.01 - 0.02 * t,
               "user.y": 0.05 * t, "piano.hammer": 0.1 * np.sin(3 * t), "piano.mode": mode}
    units = {"piano.force": "N", "piano.indicator": "", "user.y": "rad", "piano.hammer": "rad",
             "piano.mode": ""}
    return Recording(t, {k: v[:, None] for k, v in signals.items()}, units,
                     {"name": "piano-action"})


def test_mode_plot_puts_each_unit_on_its_own_labelled_axis(tmp_path, figures):
    """The contact_devices figures drew the force in N and the indicator in [-] on one
    unlabelled axis (issue 18): each unit now has its own axis, its label naming it."""
    rec = contact_recording()
    plot_modes(rec, [["piano.force", "piano.indicator"], ["user.y", "piano.hammer"]],
               "piano.mode", tmp_path / "modes.png")
    assert (tmp_path / "modes.png").read_bytes().startswith(b"\x89PNG")
    (fig,) = figures
    unit_of = {name: rec.units[name] or "-" for name in rec.units}
    plotted = set()
    for ax in fig.axes:
        names = [line.get_label().split(" [")[0] for line in ax.get_lines()
                 if line.get_label().split(" [")[0] in unit_of]
        if not names:
            continue
        units = {unit_of[n] for n in names}
        assert len(units) == 1, (names, units)
        assert ax.get_ylabel() == f"{', '.join(names)} [{units.pop()}]"
        plotted.update(names)
    assert plotted == {"piano.force", "piano.indicator", "user.y", "piano.hammer"}
    assert any(a.get_xlabel() == "time [s]" for a in fig.axes)
    assert fig._suptitle.get_text() == "piano-action"


def test_a_panel_of_three_units_is_refused(tmp_path):
    rec = contact_recording()
    with pytest.raises(ValueError, match="at most two units"):
        plot_modes(rec, [["piano.force", "piano.indicator", "user.y"]], "piano.mode",
                   tmp_path / "modes.png")
