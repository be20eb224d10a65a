"""Write a block of your own: a cubic (Duffing) spring, then use it in a graph.

Run: ``python examples/custom_block.py``
"""
import numpy as np
from numba import njit

import hapflow as hf
from hapflow.blocks import MassSpringDamper, Step, Sum


class CubicSpring(hf.Block):
    """Hardening spring force ``F = -k1 x - k3 x^3``.

    Ports
    -----
    pos   : in, (1,), m    deflection
    force : out, (1,), N   spring force on the mass
    """

    inputs = {"pos": hf.In(1, unit="m", doc="deflection")}
    outputs = {"force": hf.Out(1, unit="N", doc="spring force")}
    params = {"k1": hf.Live(100.0, unit="N/m", check=hf.nonnegative, doc="linear rate"),
              "k3": hf.Live(1e6, unit="N/m^3", check=hf.nonnegative, doc="cubic rate")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, pos, force):
        force[0] = -p[0] * pos[0] - p[1] * pos[0] ** 3


def main() -> None:
    g = hf.Graph(name="duffing-step", rate=2000, duration=2)
    g.add("push", Step(time=0.1, final=5.0, unit="N"))
    g.add("spring", CubicSpring())
    g.add("total", Sum(signs="++"))
    g.add("mass", MassSpringDamper(mass=0.2, damping=4.0))
    g.wire("push.y -> total.u1")
    g.wire("spring.force -> total.u2")
    g.wire("total.y -> mass.force")
    g.wire("mass.pos -> spring.pos")
    g.record("mass.pos")
    r = hf.Simulation(g).run()
    final = r["mass.pos"][-1, 0]
    # static equilibrium of k1 x + k3 x^3 = 5 N
    roots = np.roots([1e6, 0.0, 100.0, -5.0])
    exact = roots[np.isreal(roots)].real[0]
    print(r.summary())
    print(f"final deflection {final * 1e3:.3f} mm, static equilibrium {exact * 1e3:.3f} mm")


if __name__ == "__main__":
    main()
