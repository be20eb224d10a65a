"""PiecewiseImpedance, Admittance and EWLS blocks (blocks/impedance.py, blocks/ewls.py)
against the offline kernels."""
import numpy as np
import pytest

import hapflow as hf
from hapflow.block import ParamError
from hapflow.blocks import EWLS, Chirp, PiecewiseImpedance
from hapflow.ident import ewls
from hapflow.ident import synthetic as syn

RATE = 1000.0


def render_graph(imp, duration=2.0):
    g = hf.Graph(name="render", rate=RATE, duration=duration)
    g.add("traj", Chirp(amplitude=0.024, f_start=1.0, f_end=6.0, sweep_time=duration, unit="m"))
    g.add("imp", imp)
    g.wire("traj.y -> imp.pos")
    g.wire("traj.dy -> imp.vel")
    g.wire("traj.ddy -> imp.acc")
    g.record("traj.y", "traj.dy", "traj.ddy", "imp.force")
    return g


@pytest.mark.parametrize("interpret", [False, True], ids=["compiled", "interpreted"])
def test_render_equals_the_evaluation_kernel(tmp_path, interpret):
    model = syn.piecewise_model()
    path = model.save(tmp_path / "model.yaml")
    r = hf.Simulation(render_graph(PiecewiseImpedance(model=str(path))), interpret=interpret).run()
    x, v, a = (r[s][:, 0] for s in ("traj.y", "traj.dy", "traj.ddy"))
    np.testing.assert_array_equal(r["imp.force"][:, 0], model.predict(x, v, a))


def test_explicit_arrays_and_live_blend():
    imp = PiecewiseImpedance(x=[-0.01, 0.01], k=[1000.0, 3000.0], f0=[0.5, 0.5],
                             f0_neg=[-0.5, -0.5], m=[0.2, 0.2])
    sim = hf.Simulation(render_graph(imp, duration=1.0))
    r = sim.run()
    x, v, a = (r[s][:, 0] for s in ("traj.y", "traj.dy", "traj.ddy"))
    model = imp.impedance_model
    assert model.negative.F0.tolist() == [-0.5, -0.5] and model.negative.k.tolist() == [1000.0, 3000.0]
    np.testing.assert_array_equal(r["imp.force"][:, 0], model.predict(x, v, a))
    sim.set("imp.v_blend", 0.0)                     # a hard switch from the next chunk
    r2 = sim.run(0.5)
    x, v = r2["traj.y"][:, 0], r2["traj.dy"][:, 0]
    k = np.interp(x, [-0.01, 0.01], [1000.0, 3000.0])
    expected = 0.2 * r2["traj.ddy"][:, 0] + k * x + np.where(v > 0, 0.5, -0.5)
    np.testing.assert_allclose(r2["imp.force"][:, 0], expected, rtol=1e-12, atol=1e-12)


def test_parameter_errors_are_actionable(tmp_path):
    with pytest.raises(ParamError, match="give 'model'"):
        PiecewiseImpedance()
    with pytest.raises(ParamError, match="not both"):
        PiecewiseImpedance(model="m.yaml", x=[0.0])
    with pytest.raises(ParamError, match="'k' has 1 values for 2 knots"):
        PiecewiseImpedance(x=[0.0, 1.0], k=[1.0], f0=[0.0, 0.0])
    with pytest.raises(ParamError, match="'f0' is required"):
        PiecewiseImpedance(x=[0.0, 1.0], k=[1.0, 2.0])
    with pytest.raises(ParamError, match="cannot read model file"):
        PiecewiseImpedance(model=str(tmp_path / "nope.yaml"))


def test_graph_with_a_model_round_trips_through_yaml(tmp_path):
    path = syn.piecewise_model().save(tmp_path / "model.yaml")
    g = render_graph(PiecewiseImpedance(model=str(path)))
    g2 = hf.loads(hf.to_yaml(g))
    a = hf.Simulation(g).run(0.3)["imp.force"]
    b = hf.Simulation(g2).run(0.3)["imp.force"]
    np.testing.assert_array_equal(a, b)


def ewls_graph(est, duration=3.0):
    """A chirp through a known locally linear device, fed to an EWLS block."""
    g = hf.Graph(name="ewls", rate=RATE, duration=duration)
    g.add("traj", Chirp(amplitude=0.02, f_start=1.0, f_end=5.0, sweep_time=duration, unit="m"))
    g.add("dev", PiecewiseImpedance(x=[-0.02, 0.02], k=[2000.0, 2000.0], f0=[0.4, 0.4],
                                    f0_neg=[-0.4, -0.4], m=[0.5, 0.5], b=[3.0, 3.0]))
    g.add("est", est)
    for src, dst in (("y", "pos"), ("dy", "vel"), ("ddy", "acc")):
        g.wire(f"traj.{src} -> dev.{dst}")
        if dst in est.inputs:
            g.wire(f"traj.{src} -> est.{dst}")
    g.wire("dev.force -> est.force")
    g.record("traj.y", "traj.dy", "traj.ddy", "dev.force", *(f"est.{p}" for p in est.outputs))
    return g


@pytest.mark.parametrize("direction, interpret", [("both", False), ("positive", False),
                                                  ("negative", False), ("positive", True)])
def test_online_estimates_equal_the_offline_path_bit_for_bit(direction, interpret):
    scales = (20.0, 0.5, 0.02, 1.0)
    est = EWLS(direction=direction, forgetting=0.995, p0=1e4, scales=scales)
    r = hf.Simulation(ewls_graph(est), interpret=interpret).run()
    phi = np.column_stack([r["traj.ddy"][:, 0], r["traj.dy"][:, 0], r["traj.y"][:, 0],
                           np.ones(r.time.size)])
    force = r["dev.force"][:, 0]
    v = phi[:, 1]
    used = {"both": np.ones(v.size, bool), "positive": v > 5e-3, "negative": v < -5e-3}[direction]
    rows = np.flatnonzero(used[:-1])                       # the last tick's update is not recorded
    theta, _, _ = ewls.run(phi[rows], force[rows], 0.995, 1e4, np.array(scales),
                           marks=np.arange(rows.size))
    online = np.column_stack([r[f"est.{p}"][:, 0] for p in ("mass", "damping", "stiffness", "offset")])
    # the output depends on state only: at tick i+1 it shows the update made at tick i
    np.testing.assert_array_equal(online[rows + 1], theta)
    if direction != "both":                    # one direction of a linear device: exact
        sign = 1.0 if direction == "positive" else -1.0
        np.testing.assert_allclose(theta[-1], [0.5, 3.0, 2000.0, 0.4 * sign], rtol=1e-3)


def test_regressor_subset_configures_the_ports():
    est = EWLS(regressors="x1", direction="positive")
    assert list(est.inputs) == ["vel", "pos", "force"]           # vel for the direction gate
    assert list(est.outputs) == ["stiffness", "offset", "error"]
    assert est.outputs["stiffness"].unit == "N/m" and est.outputs["error"].depends == "state"
    assert list(EWLS(regressors="1x").inputs) == ["pos", "force"]
    with pytest.raises(ParamError, match="subset of 'avx1'"):
        EWLS(regressors="xq")
    with pytest.raises(ParamError, match="needs 2 values"):
        EWLS(regressors="x1", scales=[1.0])
    r = hf.Simulation(ewls_graph(EWLS(regressors="avx1"), duration=1.0)).run()
    assert np.all(np.isfinite(r["est.error"]))


def test_blocks_reference_lists_both():
    from hapflow.cli import main
    import io
    import contextlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["blocks", "EWLS"]) == 0
        assert main(["blocks", "PiecewiseImpedance"]) == 0
    text = out.getvalue()
    assert "Ports" in text and "stiffness" in text and "[N s/m]" in text


def _hardening_knots(xs):
    """Knots of m a + b v + k1 x + k3 x^3 (the oscillator of issue 14), both directions."""
    m, b, k1, k3 = 0.1, 4.4, 19344.0, 2.4e9
    one = np.ones_like(xs)
    return dict(x=xs.tolist(), m=(m * one).tolist(), b=(b * one).tolist(),
                k=(k1 + 3 * k3 * xs ** 2).tolist(), f0=(-2 * k3 * xs ** 3).tolist())


def test_admittance_in_a_graph_agrees_with_solve_ivp():
    """Issue 14: the model rendered force-in motion-out by the engine's RK4 vs scipy."""
    from scipy.integrate import solve_ivp
    from hapflow.blocks import Admittance, Sine
    from hapflow.blocks.impedance_model import ImpedanceModel, Knots
    from hapflow.blocks.impedance_model import admittance_accel
    knots = _hardening_knots(np.linspace(-0.01, 0.01, 401))
    g = hf.Graph(name="admittance", rate=50000.0, duration=0.2)
    g.add("drive", Sine(amplitude=6.0, frequency=55.0, unit="N"))
    g.add("dev", Admittance(**knots, x0=1e-3))
    g.wire("drive.y -> dev.force")
    g.record("dev.pos")
    run = hf.Simulation(g).run(0.2)
    model = ImpedanceModel(*(Knots(np.array(knots["x"]), knots["m"], knots["b"], knots["k"],
                                   knots["f0"]) for _ in range(2)))
    table = model.table()
    sol = solve_ivp(lambda t, y: [y[1], admittance_accel(table, y[0], y[1],
                                                         6.0 * np.sin(2 * np.pi * 55.0 * t))],
                    (0.0, run.time[-1]), [1e-3, 0.0], t_eval=run.time, method="DOP853",
                    rtol=1e-12, atol=1e-15)
    pos = run.signals["dev.pos"].reshape(-1)
    assert np.max(np.abs(pos - sol.y[0])) < 1e-6 * np.max(np.abs(sol.y[0]))


def test_admittance_rejects_a_mass_that_is_not_positive():
    from hapflow.blocks import Admittance
    knots = _hardening_knots(np.linspace(-0.01, 0.01, 5))
    knots["m"] = [0.1, 0.1, 0.0, -0.1, 0.1]
    with pytest.raises(ParamError, match=r"mass is not positive between 0 and 5 mm"):
        Admittance(**knots)


def test_a_graph_file_names_its_model_relative_to_itself(tmp_path, monkeypatch):
    syn.piecewise_model().save(tmp_path / "model.yaml")
    (tmp_path / "render.yaml").write_text(
        "rate: 1000\nblocks:\n  imp: {type: PiecewiseImpedance, model: model.yaml}\n"
        "  c: {type: Constant, value: [0.01], unit: m}\n"
        "wires: [c.y -> imp.pos]\n")
    monkeypatch.chdir(tmp_path.parent)
    graph = hf.load(f"{tmp_path.name}/render.yaml")
    assert graph.nodes["imp"].block.model == str(tmp_path / "model.yaml")


HARD = dict(m=0.1, b=4.4, k1=19344.0, k3=2.4e9)         # the hardening oscillator of issue 14


def test_polynomial_impedance_is_its_closed_form():
    from hapflow.blocks import PolynomialImpedance
    imp = PolynomialImpedance(stiffness=[0.3, 19344.0, -5e4, 2.4e9], damping=[4.4, 200.0],
                              mass=0.1, f0=0.5, fc=0.2, v_blend=0.01)
    r = hf.Simulation(render_graph(imp, duration=1.0)).run()
    x, v, a = (r[s][:, 0] for s in ("traj.y", "traj.dy", "traj.ddy"))
    expected = (0.1 * a + (4.4 + 200.0 * x) * v + 0.3 + 19344.0 * x - 5e4 * x ** 2
                + 2.4e9 * x ** 3 + 0.5 + 0.2 * np.tanh(v / 0.01))
    np.testing.assert_allclose(r["imp.force"][:, 0], expected, rtol=1e-12, atol=1e-9)


def test_polynomial_admittance_in_a_graph_agrees_with_solve_ivp():
    """Issue 14: the polynomial model force-in, motion-out by the engine's RK4 vs scipy on the
    closed-form equation of motion (not the block's kernel)."""
    from scipy.integrate import solve_ivp
    from hapflow.blocks import PolynomialAdmittance, Sine
    m, b, k1, k3 = HARD.values()
    g = hf.Graph(name="poly_admittance", rate=50000.0, duration=0.2)
    g.add("drive", Sine(amplitude=6.0, frequency=55.0, unit="N"))
    g.add("dev", PolynomialAdmittance(mass=m, damping=[b], stiffness=[0.0, k1, 0.0, k3],
                                      x0=1e-3))
    g.wire("drive.y -> dev.force")
    g.record("dev.pos", "dev.acc")
    run = hf.Simulation(g).run(0.2)
    sol = solve_ivp(lambda t, y: [y[1], (6.0 * np.sin(2 * np.pi * 55.0 * t) - b * y[1]
                                         - k1 * y[0] - k3 * y[0] ** 3) / m],
                    (0.0, run.time[-1]), [1e-3, 0.0], t_eval=run.time, method="DOP853",
                    rtol=1e-12, atol=1e-15)
    pos = run.signals["dev.pos"].reshape(-1)
    assert np.max(np.abs(pos - sol.y[0])) < 1e-6 * np.max(np.abs(sol.y[0]))
    assert np.max(np.abs(sol.y[0])) > 1e-3            # it moved (k3 x^3 matters at this size)


def test_admittance_renderings_reject_a_mass_that_is_not_positive(tmp_path):
    from hapflow.blocks import PolynomialAdmittance, PolynomialImpedance
    with pytest.raises(ParamError, match=r"mass m = 0 kg is not positive, at every "
                                         r"position") as err:
        PolynomialAdmittance(stiffness=[0.0, 100.0])
    assert err.value.param == "mass"
    with pytest.raises(ParamError, match=r"mass m = -0.1 kg"):
        PolynomialAdmittance(mass=-0.1, stiffness=[0.0, 100.0])
    PolynomialImpedance(stiffness=[0.0, 100.0])        # an impedance needs no mass
    with pytest.raises(ParamError, match="give 'model'"):
        PolynomialImpedance()
    with pytest.raises(ParamError, match="not both"):
        PolynomialImpedance(model="m.yaml", mass=1.0)
    with pytest.raises(ParamError, match="11 coefficients; powers 0..9"):
        PolynomialImpedance(stiffness=[1.0] * 11)
    path = syn.piecewise_model().save(tmp_path / "piecewise.yaml")
    with pytest.raises(ParamError, match="holds no polynomial coefficients"):
        PolynomialImpedance(model=str(path))
