"""Design-time results cached on disk: same numbers, computed once per set of arguments."""
import numpy as np
import pytest

from hapflow import designs


def test_a_design_runs_once_per_arguments_and_is_read_back_exactly(tmp_path, monkeypatch):
    monkeypatch.setenv("HAPFLOW_CACHE_DIR", str(tmp_path))
    calls = []

    def design():
        calls.append(1)
        return np.array([1.0 / 3.0, np.pi, -0.0])

    first = designs.cached("test_design", (2, [10.0], "lowpass"), design)
    again = designs.cached("test_design", (2, [10.0], "lowpass"), design)
    assert len(calls) == 1
    assert first.tobytes() == again.tobytes()           # bit for bit, signed zero included
    designs.cached("test_design", (2, [11.0], "lowpass"), design)
    assert len(calls) == 2


def test_butterworth_design_from_the_cache_equals_scipy(tmp_path, monkeypatch):
    scipy_signal = pytest.importorskip("scipy.signal")
    from hapflow.blocks.filters import butter_sos
    monkeypatch.setenv("HAPFLOW_CACHE_DIR", str(tmp_path))
    for _ in range(2):                                   # designed, then read back
        sos = butter_sos(4, [30.0, 80.0], "bandpass", 1000.0)
        assert np.array_equal(sos, scipy_signal.butter(4, [30.0, 80.0], btype="bandpass",
                                                       output="sos", fs=1000.0))
