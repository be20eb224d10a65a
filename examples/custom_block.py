"""Write a block of your own: Dahl friction, a block with state and a parameter rule.

The Dahl model (Dahl 1968) gives friction a memory: the force ``F`` builds up
over a short pre-sliding displacement instead of jumping with the sign of the
velocity ``v``::

    dF/dt = sigma v (1 - F / Fc sgn(v))

``sigma`` is the rest stiffness (N/m) and ``Fc`` the Coulomb level (N).  The
state ``F`` never leaves ``[-Fc, Fc]`` if it starts there: that is the rule
between parameters (``initial_force`` against ``coulomb``).  At a constant
velocity ``v > 0`` from ``F0`` the force is
``Fc - (Fc - F0) exp(-sigma v t / Fc)``; the script checks the block against it.
See docs/writing-blocks.md for the walk through.

Run: ``python examples/custom_block.py``
"""
import numpy as np
from numba import njit

import hapflow as hf
from hapflow.blocks import Constant


class DahlFriction(hf.Block):
    """Dahl friction: force with pre-sliding memory, ``dF/dt = sigma v (1 - F/Fc sgn(v))``.

    Ports
    -----
    vel   : in, (1,), m/s    sliding velocity
    force : out, (1,), N     friction force opposing the motion (state only)
    """

    inputs = {"vel": hf.In(1, unit="m/s", doc="sliding velocity")}
    outputs = {"force": hf.Out(1, unit="N", depends="state", doc="friction force")}
    params = {"stiffness": hf.Live(2e4, unit="N/m", check=hf.positive,
                                   doc="rest stiffness sigma"),
              "coulomb": hf.Live(0.3, unit="N", check=hf.positive, doc="Coulomb level Fc"),
              "initial_force": hf.Live(0.0, unit="N", doc="force F at t = 0")}
    cstate = ("force",)                        # the state, by name: x[DAHL_X.force]
    initial_from = {"force": "initial_force"}  # it starts at a parameter's value

    def validate(self, changed):
        """The rule between parameters: the force starts within the Coulomb level."""
        if abs(self.initial_force) > self.coulomb:
            raise hf.ParamError(changed or "initial_force",
                                f"'initial_force' ({self.initial_force:g} N) must lie within "
                                f"+-coulomb ({self.coulomb:g} N)")

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, vel, dx):
        v, f = vel[0], x[DAHL_X.force]
        dx[DAHL_X.force] = p[DAHL.stiffness] * v * (1.0 - f / p[DAHL.coulomb] * np.sign(v))

    @staticmethod
    @njit
    def output(t, x, d, m, p, vel, force):
        force[0] = x[DAHL_X.force]


DAHL, DAHL_X = DahlFriction.P, DahlFriction.X     # offsets by name, for the kernels


def main() -> None:
    v, sigma, fc, f0 = 2e-3, 2e4, 0.3, -0.1
    g = hf.Graph(name="dahl", rate=10000, duration=0.05)
    g.add("slide", Constant(value=v, unit="m/s"))
    g.add("dahl", DahlFriction(stiffness=sigma, coulomb=fc, initial_force=f0))
    g.wire("slide.y -> dahl.vel")
    g.record("dahl.force")
    r = hf.Simulation(g).run()
    exact = fc - (fc - f0) * np.exp(-sigma * v * r.time / fc)
    error = np.max(np.abs(r["dahl.force"][:, 0] - exact))
    print(r.summary())
    print(f"force after {r.time[-1] * 1e3:.1f} ms: {r['dahl.force'][-1, 0]:.6f} N "
          f"(closed form {exact[-1]:.6f} N, largest difference {error:.1e} N)")
    if error > 1e-9:
        raise SystemExit("the block does not follow its closed form")
    try:
        DahlFriction(coulomb=0.3, initial_force=0.5)
    except hf.ParamError as exc:
        print(f"the rule at work: {exc}")
    else:
        raise SystemExit("the parameter rule did not fire")


if __name__ == "__main__":
    main()
