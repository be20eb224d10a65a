"""Virtual devices rendered or probed by the rig (nonlinear lumped models, SI units)."""
from __future__ import annotations

import math

import numpy as np

from hapflow import kmath
from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, nonnegative, positive
from hapflow.ports import In, Out

def _direction(direction: int) -> int:
    if direction not in (1, -1):
        raise ValueError("direction must be +1 or -1 (the sign of the velocity), "
                         f"got {direction!r}")
    return int(direction)


def _corner_slope(z: np.ndarray, edges: list[tuple[float, float, float]]) -> np.ndarray:
    """Piecewise-constant slope of ``z`` with the mean of both sides at each corner.

    ``edges`` lists ``(corner, slope_below, slope_above)`` in increasing order.
    """
    out = np.full(z.shape, edges[0][1], dtype=np.float64)
    for corner, below, above in edges:
        out = np.where(z > corner, above, out)
        out = np.where(z == corner, 0.5 * (below + above), out)
    return out


# ============================================================== hardening spring device
@njit
def _assembly_force(delta, kser, ks, xt, xh, kh):
    """Force (N) of one compression-only assembly (ks in series with kc) compressed by delta (m);
    kc bottoms out at xt, and beyond xh the rate is kh instead of ks."""
    if delta <= 0.0:
        return 0.0
    if delta <= xt:
        return kser * delta
    force = kser * xt + ks * (delta - xt)
    if delta > xh:
        force += (kh - ks) * (delta - xh)
    return force


@njit
def _spring_force(x, p):
    """Net spring force (N) of the two opposed assemblies at position x (m), towards -x."""
    d0, kser, ks, xt = p[SPRING.preload], p[SPRING.k_ser], p[SPRING.k_s], p[SPRING.x_transition]
    xh, kh = p[SPRING.x_h], p[SPRING.k_h]
    return (_assembly_force(d0 + x, kser, ks, xt, xh, kh)
            - _assembly_force(d0 - x, kser, ks, xt, xh, kh))


# inlined (LLVM): with kmath's code inside, past LLVM's own size limit for inlining
@njit(forceinline=True)
def _device_force(x, v, p):
    """Spring + damper + smoothed Coulomb friction (N) at position x (m), velocity v (m/s)."""
    friction = p[SPRING.friction] * kmath.tanh(v / p[SPRING.friction_vel])
    return _spring_force(x, p) + p[SPRING.damping] * v + friction


class HardeningSpringDevice(Block):
    """Mass, dashpot and hardening springs: the test device of seed 000 section 4.

    Seed 000 builds a hardening spring from a relatively stiff spring ``ks``
    in series with a relatively compliant one ``kc``: below the transition
    deflection ``xT`` the pair has the series rate ``ks kc / (ks + kc)``; at
    ``xT`` the compliant spring is fully compressed (coil-bound) and only
    ``ks`` acts (its eq. 9).  "Two of these spring systems were connected in
    parallel" - read here as one assembly on each side of the mass, both
    acting on it (mechanically in parallel: same displacement, forces add),
    so the device hardens in both directions.  Each assembly only pushes and
    is compressed by ``preload`` at ``x = 0``; with the default ``preload = 0``
    (assemblies just touching) one assembly acts on each side and the net
    spring force is the odd, continuous, piecewise-linear law of eq. 9::

        f(d)   = 0                                for d <= 0   (one assembly, compression d)
               = k_ser d                          for 0 < d <= xT,   k_ser = ks kc / (ks + kc)
               = k_ser xT + ks (d - xT)           for d > xT
        F_s(x) = f(preload + x) - f(preload - x)
        m a    = force - F_s(x) - b v - F_c tanh(v / v_f)

    With a preload both assemblies act near the centre (rate ``2 k_ser``).  A
    negative ``preload`` is a clearance (no spring force for
    ``|x| < -preload``).  The further hardening that seed 000 sees beyond
    20 mm ("partial compression of the stiff spring", its figure 9) is an
    option: with ``x_stiffen`` and ``k_stiffened`` given, an assembly
    compressed beyond ``x_stiffen`` has the rate ``k_stiffened`` instead of
    ``ks`` (a third linear piece, continuous in force)::

        f(d)   = k_ser xT + ks (x_stiffen - xT) + k_stiffened (d - x_stiffen)   for d > x_stiffen

    Off by default (the figure's rates are lost, and every graph written
    before the option keeps its device); ``x_stiffen: 0.020`` with a
    ``k_stiffened`` above ``ks`` gives the seed's shape.

    Defaults: mass 0.581 kg and dashpot 11.5 N s/m (seed 000 sections 4.3, 5);
    ``ks = 2400 N/m``, ``kc = 800 N/m`` (``k_ser = 600 N/m``, 4x hardening),
    ``xT = 12 mm`` (seed 002 fig. 3: stiffness about constant over
    0-12 mm).  The seed's spring rates are only in its figures, so these are
    chosen so that the 50 mm (+-25 mm) swept sine of seed 002 needs
    ``F_s(25 mm) = 38.4 N`` (7.2 N at the transition) and fits the 60 N motor
    with margin for inertia and control; the earlier 1500/6000 N/m at 10 mm
    would need 105 N there.  Coulomb friction 0.3 N, smoothed by ``tanh``
    over ``v_f = 1 mm/s`` (plausible for the guides; not in the seed).
    ``k_inner``/``k_outer`` may be given instead of ``k_stiff``/``k_compliant``
    as the effective rates below/above the transition (``k_ser`` and
    ``ks``).  Under a constant force ``F`` with ``|F| > k_ser xT`` (no
    preload) the device rests at ``x = sign(F) (xT + (|F| - k_ser xT) / ks)``.

    :meth:`impedance` returns the true locally linear model of seed 002
    (``F = m a + b v + k(x) x + F0(x)``) for comparison with identification.

    Ports
    -----
    force        : in, (1,), N        force applied by the motor, +x positive
    pos          : out, (1,), m       position (state only)
    vel          : out, (1,), m/s     velocity (state only)
    acc          : out, (1,), m/s^2   acceleration (feeds through from force)
    device_force : out, (1,), N       force the device pushes back with,
                                      spring + damper + friction, positive
                                      when it pushes towards -x (state only)
    """

    inputs = {"force": In(1, unit="N", doc="force applied by the motor")}
    outputs = {"pos": Out(1, unit="m", depends="state", doc="position"),
               "vel": Out(1, unit="m/s", depends="state", doc="velocity"),
               "acc": Out(1, unit="m/s^2", doc="acceleration"),
               "device_force": Out(1, unit="N", depends="state",
                                   doc="reaction force: spring + damper + friction")}
    params = {"mass": Live(0.581, unit="kg", check=positive, doc="moving mass (seed 000: 581 g)"),
              "damping": Live(11.5, unit="N s/m", check=nonnegative,
                              doc="dashpot (seed 000: 11.5 kg/s)"),
              "k_stiff": Live(2400.0, unit="N/m", check=nonnegative,
                              doc="stiff spring ks of each assembly"),
              "k_compliant": Live(800.0, unit="N/m", check=nonnegative,
                                  doc="compliant spring kc of each assembly (in series with ks)"),
              "x_transition": Live(0.012, unit="m", check=positive,
                                   doc="assembly deflection xT at which kc bottoms out"),
              "preload": Live(0.0, unit="m",
                              doc="compression of each assembly at x = 0 (negative: clearance)"),
              "k_inner": Live(None, unit="N/m", check=nonnegative,
                              doc="alternative: effective rate below xT (with k_outer)"),
              "k_outer": Live(None, unit="N/m", check=nonnegative,
                              doc="alternative: effective rate above xT (with k_inner)"),
              "x_stiffen": Live(None, unit="m", check=positive,
                                doc="optional: assembly deflection beyond which the stiff spring "
                                    "partly closes (seed 000: 20 mm); with k_stiffened"),
              "k_stiffened": Live(None, unit="N/m", check=nonnegative,
                                  doc="optional: rate of one assembly beyond x_stiffen"),
              "friction": Live(0.3, unit="N", check=nonnegative, doc="Coulomb friction force"),
              "friction_vel": Live(1e-3, unit="m/s", check=positive,
                                   doc="velocity scale of the tanh friction smoothing"),
              "x0": Live(0.0, unit="m", doc="initial position"),
              "v0": Live(0.0, unit="m/s", doc="initial velocity")}
    derived = {"k_ser": Derived(lambda b: b.rates()[0], unit="N/m",
                                doc="rate of one assembly below the transition"),
               "k_s": Derived(lambda b: b.rates()[1], unit="N/m",
                              doc="rate of one assembly above the transition"),
               "x_h": Derived(lambda b: b.stiffening()[0], unit="m",
                              doc="deflection where the third rate starts (inf: none)"),
               "k_h": Derived(lambda b: b.stiffening()[1], unit="N/m",
                              doc="rate of one assembly beyond x_h")}
    cstate = ("pos", "vel")
    initial_from = {"pos": "x0", "vel": "v0"}
    position_states = (0,)

    def validate(self, changed: str | None) -> None:
        if (self.k_inner is None) != (self.k_outer is None):
            raise ParamError(changed or "k_inner", "give both 'k_inner' and 'k_outer' "
                             "(effective rates below and above x_transition), or neither "
                             "(then k_stiff and k_compliant set them)")
        if (self.x_stiffen is None) != (self.k_stiffened is None):
            raise ParamError(changed or "x_stiffen", "give both 'x_stiffen' and 'k_stiffened' "
                             "(the deflection beyond which an assembly stiffens further and its "
                             "rate there), or neither (no third rate)")
        if self.x_stiffen is not None and not self.x_stiffen > self.x_transition:
            raise ParamError(changed or "x_stiffen", f"x_stiffen ({self.x_stiffen:g} m) must "
                             f"exceed x_transition ({self.x_transition:g} m): the stiff spring "
                             "closes after the compliant one has bottomed out")

    def stiffening(self) -> tuple[float, float]:
        """``(x_stiffen, k_stiffened)`` in m and N/m; ``(inf, ks)`` without the option."""
        if self.x_stiffen is None:
            return math.inf, self.rates()[1]
        return float(self.x_stiffen), float(self.k_stiffened)

    def rates(self) -> tuple[float, float]:
        """``(k_ser, ks)``: one assembly's rate below and above the transition (N/m)."""
        if self.k_inner is not None:
            return float(self.k_inner), float(self.k_outer)
        ks, kc = self.k_stiff, self.k_compliant
        return (ks * kc / (ks + kc) if ks + kc > 0.0 else 0.0), ks

    # ------------------------------------------------------------ closed forms (Python)
    def spring_force(self, x) -> np.ndarray:
        """Static spring force ``F_s(x)`` (N, towards -x) at positions ``x`` (m), vectorised."""
        kser, ks = self.rates()
        xh, kh = self.stiffening()
        xt, d0 = self.x_transition, self.preload
        x = np.asarray(x, dtype=np.float64)

        def f(dd):
            outer = kser * xt + ks * (dd - xt)
            if math.isfinite(xh):
                outer = outer + (kh - ks) * np.maximum(dd - xh, 0.0)
            return np.where(dd <= 0.0, 0.0, np.where(dd <= xt, kser * dd, outer))
        return f(d0 + x) - f(d0 - x)

    def stiffness(self, x) -> np.ndarray:
        """``dF_s/dx`` (N/m) at ``x`` (m); at a corner, the mean of both one-sided slopes."""
        kser, ks = self.rates()
        xh, kh = self.stiffening()
        xt, d0 = self.x_transition, self.preload
        x = np.asarray(x, dtype=np.float64)
        edges = [(0.0, 0.0, kser), (xt, kser, ks)] + ([(xh, ks, kh)] if math.isfinite(xh) else [])
        return _corner_slope(d0 + x, edges) + _corner_slope(d0 - x, edges)

    def impedance(self, x, direction: int) -> dict[str, np.ndarray]:
        """True locally linear model ``F = m a + b v + k x + F0`` along ``x`` for one direction.

        For motion with velocity sign ``direction`` (+1 or -1) and speeds well
        above ``friction_vel`` (where ``tanh(v / v_f) = +-1``), the force the
        probe applies is exactly ``m a + b v + F_s(x) + direction F_c``;
        linearised about each ``x`` (seed 002 eq. 7-8) that is

            m(x) = mass,  b(x) = damping,  k(x) = dF_s/dx (x),
            F0(x) = F_s(x) - k(x) x + direction F_c

        (``F0`` lumps the spring offset of the piecewise-linear spring and the
        Coulomb friction, as in seed 002 eq. 6).

        Parameters
        ----------
        x : array_like
            Positions (m).
        direction : {+1, -1}
            Sign of the velocity.

        Returns
        -------
        dict
            ``m`` (kg), ``b`` (N s/m), ``k`` (N/m), ``F0`` (N): arrays of ``x``'s shape.
        """
        s = _direction(direction)
        x = np.asarray(x, dtype=np.float64)
        k = self.stiffness(x)
        return {"m": np.full(x.shape, float(self.mass)), "b": np.full(x.shape, float(self.damping)),
                "k": k, "F0": self.spring_force(x) - k * x + s * self.friction}

    # ------------------------------------------------------------ kernels
    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force, dx):
        dx[SPRING_X.pos] = x[SPRING_X.vel]
        fd = _device_force(x[SPRING_X.pos], x[SPRING_X.vel], p)
        dx[SPRING_X.vel] = (force[0] - fd) / p[SPRING.mass]

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, pos, vel, acc, device_force):
        fd = _device_force(x[SPRING_X.pos], x[SPRING_X.vel], p)
        pos[0] = x[SPRING_X.pos]
        vel[0] = x[SPRING_X.vel]
        acc[0] = (force[0] - fd) / p[SPRING.mass]
        device_force[0] = fd


SPRING, SPRING_X = HardeningSpringDevice.P, HardeningSpringDevice.X   # offsets by name


# ============================================================== detent (turn-signal) switch


@njit
def _switch_static(x2, p):
    """Position-dependent force (N, towards -x) on the mechanism: spring + detent + stop spring."""
    f = p[SWITCH.spring] * x2 + p[SWITCH.detent_force] * kmath.sin(p[SWITCH.detent_w] * x2)
    if x2 > p[SWITCH.stop_pos]:
        f += p[SWITCH.stop_stiffness] * (x2 - p[SWITCH.stop_pos])
    elif x2 < -p[SWITCH.stop_pos]:
        f += p[SWITCH.stop_stiffness] * (x2 + p[SWITCH.stop_pos])
    return f


@njit
def _switch_mech(x2, v2, p):
    """Total reaction (N, towards -x) of the mechanism at x2 (m), v2 (m/s)."""
    detent = p[SWITCH.detent_force] * kmath.sin(p[SWITCH.detent_w] * x2)
    f = p[SWITCH.spring] * x2 + detent + p[SWITCH.damping] * v2
    th = kmath.tanh(v2 / p[SWITCH.friction_vel])
    f += p[SWITCH.friction_pos] * th if v2 > 0.0 else p[SWITCH.friction_neg] * th
    xs, ks, cs = p[SWITCH.stop_pos], p[SWITCH.stop_stiffness], p[SWITCH.stop_damping]
    if x2 > xs:
        f += max(0.0, ks * (x2 - xs) + cs * v2)
    elif x2 < -xs:
        f += min(0.0, ks * (x2 + xs) + cs * v2)
    return f


@njit
def _switch_contact(dx, dv, p):
    """Force (N) the handle exerts on the mechanism through the backlash (+x positive)."""
    g, k, c = p[SWITCH.half_play], p[SWITCH.contact_stiffness], p[SWITCH.contact_damping]
    if dx > g:
        return max(0.0, k * (dx - g) + c * dv)
    if dx < -g:
        return min(0.0, k * (dx + g) + c * dv)
    return 0.0


class DetentSwitch(Block):
    """Turn-signal-like detent switch in translation: detents, friction, backlash, end stops.

    The nonlinear passive device that seeds 000 and 002 set out to model
    next ("an automotive turn signal switch": detents, friction, backlash).
    Two bodies: the **handle** (mass ``handle_mass``, where the probe is
    attached; ``pos``/``vel``/``acc`` are its motion) and the **mechanism**
    (lever, detent cam and return spring reflected to the probe point,
    mass ``mass``, position ``lever_pos``).  They are coupled through a
    backlash of total free play ``backlash`` (``g = backlash / 2`` each way)
    closed by a stiff, damped, unilateral contact::

        handle:     m1 a1 = force - F_k
        mechanism:  m2 a2 = F_k - F_m
        F_k = max(0, k_k (x1 - x2 - g) + c_k (v1 - v2))   for x1 - x2 >  g
            = min(0, k_k (x1 - x2 + g) + c_k (v1 - v2))   for x1 - x2 < -g,   else 0
        F_m = k0 x2 + A sin(2 pi x2 / pitch) + b v2 + F_f(v2) + F_stop(x2, v2)
        F_f = F+ tanh(v2 / v_f) for v2 > 0,  F- tanh(v2 / v_f) for v2 < 0

    - detent: a centring spring ``k0`` plus a periodic detent of amplitude
      ``A`` and pitch ``p``; stable positions are the zeros of
      ``k0 x + A sin(2 pi x / p)`` with positive slope.  Defaults (``k0 =
      100 N/m``, ``A = 3 N``, ``p = 10 mm``) give three: 0 and +-9.46 mm
      (off, left, right), separated by unstable points at +-5.27 mm;
    - direction-dependent Coulomb friction ``F+ = 0.4 N``, ``F- = 0.25 N``
      and viscous damping ``b = 1 N s/m`` on the mechanism;
    - backlash 0.5 mm total, contact ``k_k = 5e4 N/m``, ``c_k = 20 N s/m``;
      pushing past a detent crest the mechanism snaps ahead through the
      play (the "click");
    - unilateral end stops on the mechanism at ``+-stop_pos`` (13 mm),
      ``2e4 N/m``, ``20 N s/m`` (they only push);
    - masses: mechanism 0.05 kg, handle 0.1 kg.

    All values are plausible for a small automotive switch probed at its
    tip, not measured (the seeds give none).  The contact and stop rates
    keep ``omega h < 0.35`` at 4 kHz.  ``device_force`` is the contact force
    ``F_k``, i.e. what the mechanism pushes back on the handle with.
    :meth:`impedance` gives the true quasi-static locally linear model.

    Ports
    -----
    force        : in, (1,), N        force applied to the handle by the probe, +x positive
    pos          : out, (1,), m       handle position (state only)
    vel          : out, (1,), m/s     handle velocity (state only)
    acc          : out, (1,), m/s^2   handle acceleration (feeds through from force)
    device_force : out, (1,), N       contact force F_k on the handle, towards -x (state only)
    lever_pos    : out, (1,), m       mechanism position x2 (state only)
    """

    inputs = {"force": In(1, unit="N", doc="force applied to the handle")}
    outputs = {"pos": Out(1, unit="m", depends="state", doc="handle position"),
               "vel": Out(1, unit="m/s", depends="state", doc="handle velocity"),
               "acc": Out(1, unit="m/s^2", doc="handle acceleration"),
               "device_force": Out(1, unit="N", depends="state",
                                   doc="contact force on the handle, towards -x"),
               "lever_pos": Out(1, unit="m", depends="state", doc="mechanism position")}
    params = {"mass": Live(0.05, unit="kg", check=positive,
                           doc="mechanism mass reflected to the probe point"),
              "handle_mass": Live(0.1, unit="kg", check=positive, doc="handle (probe side) mass"),
              "spring": Live(100.0, unit="N/m", check=nonnegative, doc="centring spring k0"),
              "detent_force": Live(3.0, unit="N", check=nonnegative, doc="detent amplitude A"),
              "detent_pitch": Live(0.010, unit="m", check=positive,
                                   doc="detent period p (stable positions ~ p apart)"),
              "damping": Live(1.0, unit="N s/m", check=nonnegative, doc="viscous damping b"),
              "friction_pos": Live(0.4, unit="N", check=nonnegative,
                                   doc="Coulomb friction moving towards +x"),
              "friction_neg": Live(0.25, unit="N", check=nonnegative,
                                   doc="Coulomb friction moving towards -x"),
              "friction_vel": Live(1e-3, unit="m/s", check=positive,
                                   doc="velocity scale of the tanh friction smoothing"),
              "backlash": Live(5e-4, unit="m", check=nonnegative,
                               doc="total free play between handle and mechanism"),
              "contact_stiffness": Live(5e4, unit="N/m", check=positive,
                                        doc="stiffness of the handle-mechanism contact"),
              "contact_damping": Live(20.0, unit="N s/m", check=nonnegative,
                                      doc="damping of the handle-mechanism contact"),
              "stop_pos": Live(0.013, unit="m", check=positive,
                               doc="|x2| at which the end stops engage"),
              "stop_stiffness": Live(2e4, unit="N/m", check=nonnegative,
                                     doc="end-stop spring rate"),
              "stop_damping": Live(20.0, unit="N s/m", check=nonnegative,
                                   doc="end-stop damping"),
              "x0": Live(0.0, unit="m", doc="initial position of handle and mechanism"),
              "v0": Live(0.0, unit="m/s", doc="initial velocity of handle and mechanism")}
    derived = {"detent_w": Derived(lambda b: 2.0 * math.pi / b.detent_pitch, unit="rad/m",
                                   doc="detent wavenumber 2 pi / pitch"),
               "half_play": Derived(lambda b: 0.5 * b.backlash, unit="m",
                                    doc="free play each way, g = backlash / 2")}
    cstate = ("handle_pos", "handle_vel", "lever_pos", "lever_vel")
    initial_from = {"handle_pos": "x0", "handle_vel": "v0", "lever_pos": "x0", "lever_vel": "v0"}
    position_states = (0, 2)

    def validate(self, changed: str | None) -> None:
        softest = self.spring - 2.0 * math.pi * self.detent_force / self.detent_pitch
        if self.contact_stiffness + softest <= 0.0:
            raise ParamError(changed or "contact_stiffness",
                             f"parameter 'contact_stiffness' ({self.contact_stiffness:g} N/m) "
                             f"must exceed the steepest negative detent slope ({-softest:g} "
                             "N/m), or the handle cannot hold the mechanism on a detent flank")

    # ------------------------------------------------------------ closed forms (Python)
    def static_force(self, x2) -> np.ndarray:
        """Position-dependent mechanism force (N): spring + detent + end-stop spring."""
        x2 = np.asarray(x2, dtype=np.float64)
        w = 2.0 * math.pi / self.detent_pitch
        xs, ks = self.stop_pos, self.stop_stiffness
        f = self.spring * x2 + self.detent_force * np.sin(w * x2)
        return f + ks * (np.maximum(x2 - xs, 0.0) + np.minimum(x2 + xs, 0.0))

    def static_stiffness(self, x2) -> np.ndarray:
        """``d static_force / d x2`` (N/m); at a stop corner the mean of both sides."""
        x2 = np.asarray(x2, dtype=np.float64)
        w = 2.0 * math.pi / self.detent_pitch
        xs, ks = self.stop_pos, self.stop_stiffness
        stop = _corner_slope(x2, [(-xs, ks, 0.0), (xs, 0.0, ks)])
        return self.spring + self.detent_force * w * np.cos(w * x2) + stop

    def equilibria(self) -> tuple[np.ndarray, np.ndarray]:
        """Stable and unstable rest positions (m) of the mechanism without friction.

        Zeros of :meth:`static_force` inside the stops, found by bracketing
        on a fine grid and refining with ``scipy.optimize.brentq``.
        """
        from scipy.optimize import brentq
        lim = self.stop_pos
        grid = np.linspace(-lim, lim, 20001)
        f = self.static_force(grid)
        roots = []
        for k in np.nonzero(np.sign(f[:-1]) * np.sign(f[1:]) <= 0)[0]:
            if f[k] == 0.0:
                roots.append(grid[k])
            elif f[k + 1] != 0.0:
                roots.append(brentq(lambda z: float(self.static_force(z)), grid[k], grid[k + 1],
                                    xtol=1e-15))
        roots = np.unique(np.round(np.array(roots), 15))
        slope = self.static_stiffness(roots)
        return roots[slope > 0], roots[slope < 0]

    def quasi_static(self, x, direction: int) -> dict[str, np.ndarray]:
        """Quasi-static contact state for a handle moving slowly through ``x``.

        For steady motion with velocity sign ``direction`` and negligible
        acceleration, a mechanism in contact moves with the handle; the
        contact force equals the mechanism's quasi-static force
        ``G(x2) = static_force(x2) + direction F_dir`` and compresses the
        contact by ``G / k_k``.  With the contact on side ``s`` of the play
        (``s = direction``: the handle pushes the mechanism; ``s =
        -direction``: the handle holds back a mechanism that runs ahead)::

            x = x2 + s g + G(x2) / k_k,     consistent if s G(x2) > 0

        The pushing branch is used where consistent, else the holding branch;
        where neither is, the mechanism rests inside the play (it snapped
        there and the detent cannot drive it against friction to either
        wall) and the handle moves freely: no contact force.

        Returns
        -------
        dict
            ``x2`` (m, NaN where free: the rest point depends on history),
            ``force`` (N, contact force on the handle, towards -x; 0 where
            free), ``side`` (+1 or -1: the wall in contact, as the sign of
            ``x - x2``; 0 where free).
        """
        s = _direction(direction)
        x = np.asarray(x, dtype=np.float64)
        g, kk = 0.5 * self.backlash, self.contact_stiffness
        fric = s * (self.friction_pos if s > 0 else self.friction_neg)
        x2 = np.full(x.shape, np.nan)
        force = np.zeros(x.shape)
        side = np.zeros(x.shape, dtype=np.int64)
        for branch in (s, -s):
            target = x - branch * g
            lo, hi = target - 1.0, target + 1.0
            for _ in range(100):                      # h(z) = z + G(z)/k_k - target is increasing
                mid = 0.5 * (lo + hi)
                up = mid + (self.static_force(mid) + fric) / kk - target > 0.0
                hi = np.where(up, mid, hi)
                lo = np.where(up, lo, mid)
            z = 0.5 * (lo + hi)
            gz = self.static_force(z) + fric
            ok = (side == 0) & (branch * gz > 0.0)
            x2 = np.where(ok, z, x2)
            force = np.where(ok, gz, force)
            side = np.where(ok, branch, side)
        return {"x2": x2, "force": force, "side": side}

    def impedance(self, x, direction: int) -> dict[str, np.ndarray]:
        """True quasi-static locally linear model ``F = m a + b v + k x + F0`` at handle positions.

        Along the contact branches of :meth:`quasi_static` (handle and
        mechanism moving together, contact on one wall of the play)::

            m = mass + handle_mass          (rigid-contact limit)
            b = damping (+ stop_damping beyond a stop)
            k = G'(x2) k_k / (k_k + G'(x2))  (mechanism rate in series with the contact)
            F0 = G(x2) - k x               (spring, detent and stop offset plus direction F_dir)

        and where the mechanism rests inside the play, ``m = handle_mass``,
        ``b = k = F0 = 0``.  ``F0`` lumps the spring offset and the
        direction-dependent Coulomb friction.  Hysteresis shows as the
        difference between the directions: the play shifts the profile by
        ``+-g`` and the friction adds ``F+`` or ``-F-``.  Exact for slow
        motion away from the snaps, which are instantaneous in this limit
        (a real probe sees the mechanism ring after each).

        Parameters
        ----------
        x : array_like
            Handle positions (m).
        direction : {+1, -1}
            Sign of the velocity.

        Returns
        -------
        dict
            ``m`` (kg), ``b`` (N s/m), ``k`` (N/m), ``F0`` (N): arrays of ``x``'s shape.
        """
        x = np.asarray(x, dtype=np.float64)
        q = self.quasi_static(x, direction)
        contact = q["side"] != 0
        x2 = np.where(contact, q["x2"], 0.0)
        gp = self.static_stiffness(x2)
        kk = self.contact_stiffness
        k = np.where(contact, gp * kk / (kk + gp), 0.0)
        beyond = np.abs(x2) > self.stop_pos
        b = np.where(contact, self.damping + np.where(beyond, self.stop_damping, 0.0), 0.0)
        m = np.where(contact, self.mass + self.handle_mass, self.handle_mass)
        return {"m": m, "b": b, "k": k, "F0": np.where(contact, q["force"] - k * x, 0.0)}

    # ------------------------------------------------------------ kernels
    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force, dx):
        x1, v1, x2, v2 = (x[SWITCH_X.handle_pos], x[SWITCH_X.handle_vel],
                          x[SWITCH_X.lever_pos], x[SWITCH_X.lever_vel])
        fk = _switch_contact(x1 - x2, v1 - v2, p)
        dx[SWITCH_X.handle_pos] = v1
        dx[SWITCH_X.handle_vel] = (force[0] - fk) / p[SWITCH.handle_mass]
        dx[SWITCH_X.lever_pos] = v2
        dx[SWITCH_X.lever_vel] = (fk - _switch_mech(x2, v2, p)) / p[SWITCH.mass]

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, pos, vel, acc, device_force, lever_pos):
        x1, v1, x2, v2 = (x[SWITCH_X.handle_pos], x[SWITCH_X.handle_vel],
                          x[SWITCH_X.lever_pos], x[SWITCH_X.lever_vel])
        fk = _switch_contact(x1 - x2, v1 - v2, p)
        pos[0] = x1
        vel[0] = v1
        acc[0] = (force[0] - fk) / p[SWITCH.handle_mass]
        device_force[0] = fk
        lever_pos[0] = x2


SWITCH, SWITCH_X = DetentSwitch.P, DetentSwitch.X       # offsets by name
