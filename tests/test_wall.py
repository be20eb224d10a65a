"""VirtualWall: the spring-damper law, one-sided contact, and passivity over 100 taps."""
from pathlib import Path

import numpy as np
import pytest

import hapflow as hf
from tests.helpers import table

ROOT = Path(__file__).resolve().parents[1]


def probe(positions, **wall):
    """Feed the wall a sequence of measured positions (one per tick); return its forces."""
    g = hf.Graph(name="wall", rate=1000, duration=len(positions) / 1000)
    g.add("x", table(np.asarray(positions, dtype=float)[:, None]))
    g.add("wall", hf.blocks.VirtualWall(**wall))
    g.wire("x.y -> wall.pos")
    g.record("wall.force", "wall.energy")
    r = hf.Simulation(g).run(progress=False)
    return r["wall.force"][:, 0], r["wall.energy"][:, 0]


def test_spring_damper_law_and_one_sided_contact():
    x = np.array([-1e-3, 0.0, 1e-3, 2e-3, 2e-3, 1e-3, -1e-3])
    f, _ = probe(x, stiffness=2e4, damping=5.0, wall=0.0, passivity="off")
    v = np.diff(x, prepend=x[0]) / 1e-3
    expected = np.where(x > 0, -(2e4 * x + 5.0 * v), 0.0)
    expected = np.minimum(expected, 0.0)                 # never pulls into the wall
    assert np.allclose(f, expected, rtol=0, atol=1e-12)
    # mirrored wall: fills x < wall
    f, _ = probe(-x, stiffness=2e4, wall=0.0, direction=-1.0, passivity="off")
    assert np.allclose(f, np.where(-x < 0, 2e4 * x, 0.0), atol=1e-12)


def test_observer_accounts_the_held_force_exactly():
    rng = np.random.default_rng(1)
    x = np.cumsum(rng.normal(0, 2e-4, 50)) + 1e-3
    f, energy = probe(x, stiffness=2e4, resolution=0.0, passivity="off")
    # E_n = -sum_{k<n} F_k (x_{k+1} - x_k): the work the held force did on the finger
    expected = np.concatenate([[0.0, 0.0], -np.cumsum(f[:-1] * np.diff(x))[:-1]])
    assert np.allclose(energy, expected, rtol=1e-12, atol=1e-15)


def tap_run(passivity):
    g = hf.yamlio.load(ROOT / "graphs" / "virtual_wall.yaml")
    g.nodes["wall"].block.values["passivity"] = passivity
    r = hf.Simulation(g).run(progress=False)
    x, f = r["finger.pos"][:, 0], r["wall.force"][:, 0]
    taps = np.nonzero(np.diff((f != 0).astype(int)) == 1)[0]
    work = np.cumsum(f[:-1] * np.diff(x))        # exact work of the held force on the finger
    return work, taps


@pytest.mark.parametrize("passivity", ["tdpa", "off"])
def test_stiff_wall_at_1khz_over_100_taps(passivity):
    work, taps = tap_run(passivity)
    assert len(taps) >= 100
    returned = work[-1]
    print(f"passivity {passivity}: net energy returned to the finger over {len(taps)} taps "
          f"= {returned * 1e3:+.2f} mJ")
    if passivity == "tdpa":
        assert returned <= 0.0                                     # passive overall ...
        assert np.all(work[taps[1:] - 1] <= 1e-6)                  # ... and after every tap
    else:
        assert returned > 0.1                                      # the plain sampled wall is active
