"""The thesis's 3-dof manipulator: model size, master-dof placement, frequencies vs table 5.5."""
import numpy as np
import pytest

from hapflow.flex.manipulator import MASTERS, Q_STAR, TABLE_4_8, TABLE_5_5, manipulator
from hapflow.flex.modal import modes


@pytest.fixture(scope="module")
def mech():
    return manipulator()


def test_model_has_27_elastic_and_3_erls_coordinates(mech):
    assert (mech.nq, len(mech.inner), mech.n) == (3, 27, 30)
    assert len(mech.elements) == 9 and len(mech.nodes) == 14


def test_chapter_6_master_dofs_are_translation_pairs_of_b_bc_middle_and_e(mech):
    # x = (q, u_in): x4 y5, x14 y15, x25 x26 (1-based) land on (X, Y) of nodes 2, 7, 12
    u_index = mech.inner[MASTERS[3:] - 3]
    expected = np.concatenate([mech.dofs[n, :2] for n in (1, 6, 11)])
    assert list(u_index) == list(expected)


def test_parallelogram_closes_at_the_reference_configuration(mech):
    pos = mech.positions(Q_STAR)
    assert pos[4] == pytest.approx(pos[9])           # D on AD and on CE
    assert pos[1] == pytest.approx(pos[5])           # B
    lengths = [np.hypot(*(pos[e.j] - pos[e.i])) for e in mech.elements]
    assert sum(lengths) == pytest.approx(0.5 + 0.85 + 0.85 + 1.2 + 0.282)


def test_frequencies_against_table_5_5(mech):
    """Horizontal plane at q*: three mechanism modes, six elastic modes under 180 Hz.

    Tolerance 10 %: the geometry is reconstructed (manipulator module notes) and
    nothing is tuned.  Measured: -9.2, +4.1, -7.8, -1.8, +5.3, +2.5, -2.8 %.  Modes 1
    and 3 (bending of CE under the motor at E, bending of AD) depend on where the
    unpublished interior nodes 4 and 11 sit and on the lumped masses there.
    """
    Mf, Kf, _ = mech.matrices(Q_STAR)
    f, _ = modes(Mf, Kf, 12)
    assert np.all(f[:3] < 1e-3)
    assert np.count_nonzero(f[3:] < 180.0) == 6
    assert f[3:10] == pytest.approx(TABLE_5_5, rel=0.10)
    assert f[3:10] == pytest.approx(TABLE_4_8, rel=0.10)
