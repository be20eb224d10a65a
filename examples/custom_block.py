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
              "k3": hf.Live(1e6, unit="N/m^3", check=hf.nonnegative, doc="cubic rate"),
              "max_force": hf.Live(50.0, unit="N", check=hf.positive,
                                   doc="force the spring is rated for")}

    def validate(self, changed):
        """A rule between parameters: the rated force is reached within 50 mm."""
        reach = self.k1 * 0.05 + self.k3 * 0.05 ** 3
        if reach < self.max_force:
            raise hf.ParamError(changed or "max_force",
                                f"'max_force' ({self.max_force} N) must be reached within "
                                f"50 mm (k1, k3 give {reach:g} N there)")

    @staticmethod
    @njit
    def output(t, x, d, m, p, pos, force):
        force[0] = -p[CUBIC.k1] * pos[0] - p[CUBIC.k3] * pos[0] ** 3


CUBIC = CubicSpring.P      # the parameters' offsets, by name, for the kernel


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
