"""Hybrid-system identification (seed 001): sensitivities, Newton observer, Hunt-Crossley fit.

Three figures, each estimate against its truth:

1. ``reconstruction.png`` — seed 001 figures 2-3: a perturbed trajectory of
   the switching first-order system reconstructed from the nominal one and
   its hybrid sensitivities, without and with the switching-time refinement;
2. ``restitution.png`` — ``graphs/ball_restitution_newton.yaml``: the Newton
   observer's coefficient of restitution after each impact (truth 0.8);
3. ``hunt_crossley.png`` — measured contact force against the force of the
   identified Hunt-Crossley model, with k and b against their truth.

Run: ``python examples/hybrid_identification.py [--out DIR]``
"""
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import hapflow as hf  # noqa: E402
from hapflow.ident.contact import fit_hunt_crossley  # noqa: E402
from hapflow.sensitivity import reconstruct  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def thermostat(**changes):
    params = {**dict(tau=0.7, u1=2.0, u2=-0.5, s1=2.0, s2=0.4), **changes}
    g = hf.Graph(name="thermostat", rate=1000, duration=6.0)
    g.add("sys", hf.blocks.SwitchingFirstOrder(**params))
    g.record("sys.x", "sys.sens", "sys.switch_time", "sys.switch_sens")
    return hf.Simulation(g).run(progress=False)


def reconstruction_figure(path: Path) -> None:
    nominal, perturbed = thermostat(), thermostat(tau=0.72, s1=1.97)
    delta = np.array([0.02, 0.0, 0.0, -0.03, 0.0, 0.0])
    args = (nominal.time, nominal["sys.x"][:, 0], nominal["sys.sens"],
            nominal["sys.switch_time"][:, 0], nominal["sys.switch_sens"], delta)
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.plot(nominal.time, nominal["sys.x"][:, 0], "--", label="nominal")
    ax.plot(perturbed.time, perturbed["sys.x"][:, 0], lw=2.5, alpha=0.5, label="perturbed (truth)")
    ax.plot(nominal.time, reconstruct(*args, refine=False), ":", label="x + lambda da")
    ax.plot(nominal.time, reconstruct(*args), label="with switching-time sensitivity")
    ax.set(xlabel="time [s]", ylabel="x", title="reconstruction from hybrid sensitivities")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def restitution_figure(path: Path) -> float:
    result = hf.Simulation(hf.load(ROOT / "graphs" / "ball_restitution_newton.yaml")).run(progress=False)
    n = result["observer.impacts"][:, 0]
    seen = np.nonzero(np.diff(n))[0] + 2
    seen = seen[seen < len(n)]
    estimate = result["observer.restitution"][seen, 0]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(n[seen], estimate, "o-", label="Newton observer")
    ax.axhline(0.8, color="k", lw=1, label="truth")
    ax.axhspan(0.792, 0.808, color="0.9", label="1 %")
    ax.set(xlabel="impacts", ylabel="coefficient of restitution", ylim=(0.4, 1.0))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return float(estimate[-1])


def hunt_crossley_figure(path: Path) -> tuple[float, float]:
    k, b, mass = 1e5, 3e4, 0.05
    g = hf.Graph(name="hc", rate=10000, duration=2.0)
    g.add("paddle", hf.blocks.Sine(amplitude=0.01, frequency=4.0, unit="m"))
    g.add("ball", hf.blocks.BallOnPaddle(contact="hunt_crossley", stiffness=k, damping=b,
                                         h0=0.08, mass=mass))
    for a, c in [("paddle.y", "ball.paddle_pos"), ("paddle.dy", "ball.paddle_vel"),
                 ("paddle.ddy", "ball.paddle_acc")]:
        g.wire(f"{a} -> {c}")
    g.record("paddle.y", "paddle.dy", "ball.force")
    r = hf.Simulation(g).run(progress=False)
    rng = np.random.default_rng(1)
    force = r["ball.force"][:, 0] + rng.normal(0, 0.1, len(r.time))
    pos = r["paddle.y"][:, 0] + rng.normal(0, 5e-6, len(r.time))
    fit = fit_hunt_crossley(r.time, pos, r["paddle.dy"][:, 0], force, mass)
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.plot(r.time, force, lw=0.6, label="measured force (0.1 N noise)")
    ax.plot(r.time, r["ball.force"][:, 0], lw=1.0, label="true force")
    ax.set(xlabel="time [s]", ylabel="force [N]",
           title=f"Hunt-Crossley fit: k {fit.k:.4g} (truth {k:g}), b {fit.b:.4g} (truth {b:g})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return fit.k / k - 1, fit.b / b - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/hybrid", help="output folder")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    reconstruction_figure(out / "reconstruction.png")
    e = restitution_figure(out / "restitution.png")
    dk, db = hunt_crossley_figure(out / "hunt_crossley.png")
    print(f"restitution: final estimate {e:.4f} (truth 0.8); Hunt-Crossley: k {dk:+.2%}, "
          f"b {db:+.2%}; figures in {out}")


if __name__ == "__main__":
    main()
