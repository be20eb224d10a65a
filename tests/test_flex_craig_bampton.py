"""Craig-Bampton with IMR and EBR on the bar horn, against tables 5.1 and 5.2 of seed 004."""
import numpy as np
import pytest

from hapflow.flex import craig_bampton as cbm
from hapflow.flex.horn import horn
from hapflow.flex.modal import frequency_error, mac, modes, nco, pair_modes

TARGETS = [7, 13]          # modes 8 and 14 (1-based), weights 0.5 / 0.5


@pytest.fixture(scope="module")
def setup():
    h = horn()
    cb = cbm.craig_bampton(h.M, h.K, h.masters)
    return h, cb


def reduced_mode(h, H, full_shape):
    """Frequency and physical shape of the reduced model's mode closest (NCO) to ``full_shape``."""
    Mr, Kr = cbm.project(h.M, h.K, H)
    fr, Ur = modes(Mr, Kr)
    shapes = H @ Ur
    j = pair_modes(full_shape[:, None], shapes, h.M)[0]
    return fr[j], shapes[:, j]


def test_full_basis_is_exact(setup):
    # all interior modes kept: H is square and invertible, the spectrum is the full model's
    h, cb = setup
    f, _ = modes(h.M, h.K, 20)
    fr, _ = modes(*cbm.project(h.M, h.K, cb.basis()), 20)
    assert fr[3:] == pytest.approx(f[3:], rel=1e-8)
    assert cb.phi.T @ h.M[np.ix_(cb.slaves, cb.slaves)] @ cb.phi == pytest.approx(
        np.eye(len(cb.slaves)), abs=1e-9)


def test_participations_and_masters_add_up_to_the_modal_response(setup):
    # eq. 5.16: q_i = Gamma1_i x1 + sum_s Upsilon_{i,s}, exactly, for the full basis
    h, cb = setup
    ups, q, masters = cbm.participation(h.M, h.K, cb, TARGETS)
    assert masters + ups.sum(axis=1) == pytest.approx(q, rel=1e-7)


def test_energy_contributions_add_up_to_the_mean_energy(setup):
    # eqs. 5.30, 5.35-5.36: mean energy of x cos(wt) is x'(K + w^2 M)x / 4
    h, cb = setup
    force = np.zeros(h.M.shape[0])
    force[h.axial] = [1.0, 2.0, -0.5]
    w = 2 * np.pi * 20e3
    x = np.linalg.solve(h.K - w ** 2 * h.M, force)
    terms, masters = cbm.energy_contributions(h.M, h.K, cb, force, w)
    assert masters + terms.sum() / 2 == pytest.approx(x @ (h.K + w ** 2 * h.M) @ x / 4, rel=1e-7)


def test_imr_truncation_error_follows_table_5_1(setup):
    """Table 5.1: 70.9, 47.9, 35.4, 25.6, 17.1, 8.6, 3.4, 1.6, 0.77 % at 7..15 dofs.

    Measured on this reconstruction: 71.5, 50.8, 36.9, 26.7, 17.6, 8.9, 3.4, 1.7, 0.81 %.
    Tolerance: each within a quarter of the thesis's value (the mesh is not the thesis's),
    and the thesis's conclusion exactly: 9 interior modes are the fewest under 1 %.
    """
    h, cb = setup
    r = cbm.imr(h.M, h.K, cb, TARGETS)
    eps = cbm.truncation_error(h.M, h.K, cb, TARGETS, r) * 100
    table = [70.8666, 47.9001, 35.4221, 25.5901, 17.0620, 8.5531, 3.3567, 1.5902, 0.7700]
    assert eps[1:10] == pytest.approx(table, rel=0.25)
    assert np.all(np.diff(eps) <= 0)
    assert int(np.argmax(eps < 1.0)) == 9


def test_imr_15_dof_model_meets_table_5_2_for_mode_8(setup):
    """Table 5.2, 15 dofs: mode 8 NCO 0.9994, e_f 0.09 %; mode 14 NCO 0.9779, e_f 0.79 %."""
    h, cb = setup
    f, U = modes(h.M, h.K, 14)
    r = cbm.imr(h.M, h.K, cb, TARGETS)
    H = cb.basis(r.order[:9])
    f8, u8 = reduced_mode(h, H, U[:, 7])
    assert nco(U[:, 7], u8, h.M) >= 0.999
    assert frequency_error(f[7], f8) <= 0.1
    f14, u14 = reduced_mode(h, H, U[:, 13])
    assert nco(U[:, 13], u14, h.M) >= 0.97
    assert frequency_error(f[13], f14) <= 0.8


def test_imr_beats_sorting_by_eigenfrequency(setup):
    # the 9 lowest interior modes leave mode 8 far off; IMR's 9 do not (thesis fig. 5.3)
    h, cb = setup
    f, U = modes(h.M, h.K, 14)
    f8, u8 = reduced_mode(h, cb.basis(cbm.sbe(cb).order[:9]), U[:, 7])
    assert nco(U[:, 7], u8, h.M) < 0.99


def forced_metrics(h, cb, ranking, force, w, counts):
    """MAC and |eps_g| (eqs. 5.40-5.41, middle master) of reduced forced responses."""
    x = np.linalg.solve(h.K - w ** 2 * h.M, force)
    out = []
    for tau in counts:
        H = cb.basis(ranking.order[:tau])
        Mr, Kr = cbm.project(h.M, h.K, H)
        xr = H @ np.linalg.solve(Kr - w ** 2 * Mr, H.T @ force)
        i = h.axial[1]
        out.append((mac(x, xr), abs(x[i] - xr[i]) / abs(x[i]) * 100))
    return out


def first_accurate(metrics):
    ok = [k for k, (m, e) in enumerate(metrics) if m >= 0.999 and e <= 1.0]
    return ok[0] if ok else None


def test_ebr_needs_fewer_modes_than_sorting_by_eigenfrequency(setup):
    # uniform longitudinal force on the input face, 1 % above mode 8 (section 5.2.4.2's set-up
    # on this horn): MAC >= 0.999 and eps_g <= 1 % (table 5.3's thresholds)
    h, cb = setup
    f, _ = modes(h.M, h.K, 8)
    w = 2 * np.pi * f[7] * 1.01
    force = np.zeros(h.M.shape[0])
    force[h.axial] = 1.0
    counts = range(0, 41)
    n_ebr = first_accurate(forced_metrics(h, cb, cbm.ebr(h.M, h.K, cb, force[None], [w]),
                                          force, w, counts))
    n_sbe = first_accurate(forced_metrics(h, cb, cbm.sbe(cb), force, w, counts))
    assert n_ebr is not None and n_ebr <= 25
    assert n_sbe is None or n_sbe > n_ebr
