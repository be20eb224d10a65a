"""Hybrid trajectory sensitivities (Hiskens & Pai) of SwitchingFirstOrder, and reconstruction."""
import math

import numpy as np
import pytest

import hapflow as hf
from hapflow.sensitivity import reconstruct

NOMINAL = dict(tau=0.7, u1=2.0, u2=-0.5, s1=2.0, s2=0.4, x0=0.0)
NAMES = hf.blocks.SwitchingFirstOrder.PARAMETERS


def run(rate=1000, **changes):
    g = hf.Graph(name="thermostat", rate=rate, duration=8.0)
    g.add("sys", hf.blocks.SwitchingFirstOrder(**{**NOMINAL, **changes}))
    g.record("sys.x", "sys.sens", "sys.switch_time", "sys.switch_sens", "sys.switches")
    return hf.Simulation(g).run(progress=False)


def first_switch_time(tau, u1, u2, s1, s2, x0):
    return math.log((x0 - u1 / tau) / (s1 - u1 / tau)) / tau


@pytest.fixture(scope="module")
def nominal():
    return run()


def test_switching_time_sensitivity_matches_the_closed_form_derivative(nominal):
    k = np.argmax(nominal["sys.switches"][:, 0] >= 1)
    t_alpha = nominal["sys.switch_sens"][k]
    h = 1e-6
    for j, name in enumerate(NAMES):
        up = first_switch_time(**{**NOMINAL, name: NOMINAL[name] + h})
        down = first_switch_time(**{**NOMINAL, name: NOMINAL[name] - h})
        assert t_alpha[j] == pytest.approx((up - down) / (2 * h), rel=1e-6, abs=1e-9), name


def test_trajectory_sensitivities_match_finite_differences_across_switches(nominal):
    h = 1e-5
    t = nominal.time
    switches = np.unique(nominal["sys.switch_time"][:, 0])[1:]
    away = np.all(np.abs(t[:, None] - switches[None, :]) > 0.01, axis=1)
    assert len(switches) >= 4
    for j, name in enumerate(NAMES):
        fd = (run(**{name: NOMINAL[name] + h})["sys.x"][:, 0]
              - run(**{name: NOMINAL[name] - h})["sys.x"][:, 0]) / (2 * h)
        err = np.max(np.abs(fd[away] - nominal["sys.sens"][away, j]))
        assert err < 1e-5 * max(1.0, np.max(np.abs(fd[away]))), (name, err)


def reconstruction_errors(nominal, delta, horizon=4.0):
    perturbed = run(**{n: NOMINAL[n] + d for n, d in zip(NAMES, delta)})["sys.x"][:, 0]
    args = (nominal.time, nominal["sys.x"][:, 0], nominal["sys.sens"],
            nominal["sys.switch_time"][:, 0], nominal["sys.switch_sens"], delta)
    near = nominal.time < horizon              # before the systems drift a full cycle apart
    return (np.max(np.abs(reconstruct(*args, refine=False) - perturbed)[near]),
            np.max(np.abs(reconstruct(*args) - perturbed)[near]))


def test_reconstruction_of_a_perturbed_trajectory(nominal):
    delta = np.array([0.02, 0.05, 0.0, -0.03, 0.0, 0.0])        # tau, u1, s1 perturbed
    plain, refined = reconstruction_errors(nominal, delta)
    _, refined_half = reconstruction_errors(nominal, delta / 2)
    print(f"reconstruction max error: x + lambda da {plain:.2e}, refined {refined:.2e}, "
          f"refined with da/2 {refined_half:.2e}")
    assert refined < plain / 10                   # the mode mismatch near switches is removed
    assert 3.0 < refined / refined_half < 5.0     # what is left is second order in da
