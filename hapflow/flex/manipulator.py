"""The planar 3-dof flexible-link manipulator with hybrid topology of seed 004 (section 4.2).

Data from the thesis: five aluminium rods (E = 69 GPa, table 4.1 lengths,
diameters and masses), nine two-node beam elements, 27 elastic + 3 ERLS
coordinates, the lumped masses and inertias of table 4.5 on nodes 1-14,
the ERLS defined by zeroing the rotations of the actuated links.

Reconstructed geometry (figures 4.2, 4.4, 5.10 and 6.1 are lost) -- every
assumption, and why:

1. **Parallelogram.**  Links 1-4 form the closed chain and links 1 (AB) and
   2 (AD) are cranks driven at the same ground joint A (table 4.5 puts the
   two motor inertias on nodes 1 and 3, "at joints A").  With AB = 0.5 m and
   AD = BC = 0.85 m, the loop A-B-C-D closes as a parallelogram with
   CD = AB = 0.5 m on link 4 (CE, 1.2 m), so D lies 0.5 m from C and the arm
   reaches on to E (DE = 0.7 m); link 5 (EF, 0.282 m) is driven at E by the
   third motor.  ERLS angles, absolute from the X axis:
   ``phi1 = q1, phi2 = phi3 = q2, phi4 = q1 + pi, phi5 = q3``.
2. **Nodes and elements.**  9 elements and 14 nodes means one node chain per
   link (9 + 5 = 14): AB 1 element (nodes 1-2), AD 2 (3-4-5), BC 2 (6-7-8),
   CE 3 (9 at C, 10 at D, 11, 12 at E), EF 1 (13-14).  Table 4.5 agrees: the
   joint nodes B (2, 6), C (8, 9), D (5, 10), E (12, 13) carry the joint
   masses, the link interiors 7 and 11 none, node 13 the third rotor's
   inertia, node 4 0.4 kg -- the two 0.2 kg springs (table 4.4), so node 4 is
   where they attach on the MKD090's crank.  Where the interior nodes sit
   along their links is not given: 4, 7 and 11 are taken at the middle of
   AD, BC and DE.
3. **Dof numbering.**  Node by node: a pinned node (1, 3 at A) has only its
   rotation; a joint node after the first shares the first's translations;
   the three zeroed rotations (nodes 1, 3, 13) leave the vector and
   ``q1..q3`` lead it.  This puts the thesis's master dofs ``x4 y5`` on
   node 2 (B), ``x14 y15`` on node 7 (the middle of BC) and ``x25 x26``
   on node 12 (E, "the tip" of link 4) -- each an (X, Y) pair, which is
   what the chapter-6 names say -- and counts to exactly 30.
4. **Sections.**  Bending and axial stiffness from the rod diameters
   (solid circular sections); mass per length from table 4.1's masses
   (they differ from 2700 kg/m^3 times the solid volume by -21 to +10 %;
   the table is the measured inertial data).  Euler-Bernoulli: no rotary
   inertia of the sections, no shear.
5. **Plane.**  Horizontal (chapter 5 onward): no gravity, no contrast
   springs.  The vertical-plane model of table 4.8 also needs the spring
   anchor point and the equilibrium configuration, neither of which the
   text gives, so it is not built; table 4.8 and table 5.5 differ by at
   most 3.5 % (mode 1), which bounds what that omission changes.
6. **What the remaining gap depends on** (modes 1 and 3: 12.95 and 61.8 Hz
   against table 5.5's 14.2 and 67.0; re-read against the text and tables,
   no stated datum closes it).  Mode 1 is the bending of link CE carrying
   node 12's 1.537 kg at E: removing that mass gives 21.1 Hz, doubling CE's
   modulus 18.3 Hz, and nothing else moves it by more than 1 Hz -- not the
   configuration (12.8-13.4 Hz over the workspace), not table 4.1's masses
   against 2700 kg/m^3 solid rods (12.89 Hz), not the interior nodes: what
   sets it (CE's section, E's mass) is stated.  Mode 3 is AD bending
   with the springs' 0.4 kg at node 4: its position along AD (not given)
   moves it -- 65.1 / 61.8 / 67.1 Hz at 1/4, 1/2, 3/4 of AD (mode 6:
   199.0 / 174.2 / 167.9 Hz, table 170.0) -- and so does the springs' mass
   (without it 70.4 Hz; a spring anchored at one end moves with a third of
   its mass, the text lumps all of it).  Choosing 3/4 would match table 5.5
   but is a fit of a free parameter to the target, which the reconstruction
   does not do: node 4 stays at the middle, where the thesis puts link 2's
   strain gauge (section 4.2: "at half their length").
"""
from __future__ import annotations

import math

import numpy as np

from .beam import Section
from .erls import Element, Mechanism, Node

E_ALUMINIUM = 69e9
#: table 4.1: link -> (length m, diameter m, mass kg)
LINKS = {"AB": (0.5, 0.030, 1.052), "AD": (0.85, 0.030, 1.596), "BC": (0.85, 0.016, 0.444),
         "CE": (1.2, 0.024, 1.343), "EF": (0.282, 0.020, 0.190)}
#: table 4.5: node -> (lumped mass kg, inertia kg m^2), nodes numbered from 1
LUMPED = {1: (7.644, 0.013), 2: (0.392, 0.0), 3: (9.517, 0.0229), 4: (0.4, 0.0),
          5: (0.648, 0.0), 6: (0.671, 0.0), 7: (0.0, 0.0), 8: (0.383, 0.0),
          9: (0.658, 0.0), 10: (0.308, 0.0), 11: (0.0, 0.0), 12: (1.537, 0.0),
          13: (0.095, 0.0015), 14: (0.046, 0.0)}
#: reference configuration of section 5.4, rad
Q_STAR = np.array([1.0821, 2.6354, 4.7123])
#: table 5.5 (horizontal plane): the first seven elastic frequencies, Hz
TABLE_5_5 = np.array([14.2, 43.5, 67.0, 129.1, 147.3, 170.0, 205.0])
#: table 4.8 (vertical plane, nominal model): the first seven elastic frequencies, Hz
TABLE_4_8 = np.array([13.72, 43.88, 66.96, 127.25, 147.23, 171.95, 204.93])
#: chapter 6 master dofs, 0-based indices of x = (q, u_in): q1 q2 q3 x4 y5 x14 y15 x25 x26
MASTERS = np.array([0, 1, 2, 3, 4, 13, 14, 24, 25])


def gauge_rows(mech: Mechanism, q: np.ndarray) -> np.ndarray:
    """Curvatures ``gamma1, gamma2, gamma4`` at the middle of links 1, 2 and 4 (chapter 6), (3, nu').

    Link 1 is one element (middle at xi = 0.5); the middle of link 2 is node 4,
    between two elements, where the cubic elements' curvatures differ: their
    mean; the middle of link 4 (0.6 m from C) lies 0.1 m into the element D-11.
    """
    dn = 0.5 * (LINKS["CE"][0] - LINKS["AB"][0])          # length of element D-11
    return np.array([mech.curvature(q, 0, 0.5),
                     0.5 * (mech.curvature(q, 1, 1.0) + mech.curvature(q, 2, 0.0)),
                     mech.curvature(q, 6, (0.5 * LINKS["CE"][0] - LINKS["AB"][0]) / dn)])


def sections(E: float | dict[str, float] = E_ALUMINIUM,
             mass_scale: float = 1.0) -> dict[str, Section]:
    """Rod sections of the five links (assumption 4); ``E`` for all or per link name."""
    moduli = E if isinstance(E, dict) else dict.fromkeys(LINKS, E)
    return {k: Section.rod(moduli[k], d, mass_scale * m / length)
            for k, (length, d, m) in LINKS.items()}


def manipulator(E: float | dict[str, float] = E_ALUMINIUM, alpha: float = 0.0, beta: float = 0.0,
                lumped: dict[int, tuple[float, float]] | None = None,
                mass_scale: float = 1.0) -> Mechanism:
    """The ERLS model of the thesis's manipulator (30 dofs).

    Parameters
    ----------
    E : float or dict
        Young's modulus of every link, or per link name ("AB", ... "EF"), Pa.
    alpha, beta : float
        Rayleigh damping coefficients (1/s, s).
    lumped : dict, optional
        Node (1-based) -> (mass kg, inertia kg m^2); table 4.5 by default.
    mass_scale : float
        Factor on every link's mass per length (a mass-density correction, section 4.4).

    Returns
    -------
    Mechanism
        Links 0-4 are AB, AD, BC, CE, EF; nodes 0-13 are the thesis's 1-14.
    """
    sec = sections(E, mass_scale)
    lumped = LUMPED if lumped is None else lumped
    AB, AD, BC, CE, EF = (LINKS[k][0] for k in ("AB", "AD", "BC", "CE", "EF"))
    a = np.array([[1, 0, 0], [0, 1, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1]], dtype=float)
    b = np.array([0.0, 0.0, 0.0, math.pi, 0.0])
    B = ((0, AB),)
    C = B + ((2, BC),)
    E_ = C + ((3, CE),)
    # (link, path, grounded, joined_to (1-based), zeroed)
    layout = [
        (0, (), True, None, True),                  # 1  A on AB (motor 1)
        (0, B, False, None, False),                 # 2  B on AB
        (1, (), True, None, True),                  # 3  A on AD (motor 2)
        (1, ((1, AD / 2),), False, None, False),    # 4  springs' attachment, middle of AD
        (1, ((1, AD),), False, None, False),        # 5  D on AD
        (2, B, False, 2, False),                    # 6  B on BC
        (2, B + ((2, BC / 2),), False, None, False),  # 7  middle of BC
        (2, C, False, None, False),                 # 8  C on BC
        (3, C, False, 8, False),                    # 9  C on CE
        (3, C + ((3, AB),), False, 5, False),       # 10 D on CE
        (3, C + ((3, (AB + CE) / 2),), False, None, False),  # 11 middle of DE
        (3, E_, False, None, False),                # 12 E on CE
        (4, E_, False, 12, True),                   # 13 E on EF (motor 3)
        (4, E_ + ((4, EF),), False, None, False),   # 14 F
    ]
    nodes = [Node(link, path, mass=lumped[k + 1][0], inertia=lumped[k + 1][1], grounded=g,
                  joined_to=None if j is None else j - 1, zeroed=z)
             for k, (link, path, g, j, z) in enumerate(layout)]
    pairs = [(1, 2, "AB"), (3, 4, "AD"), (4, 5, "AD"), (6, 7, "BC"), (7, 8, "BC"),
             (9, 10, "CE"), (10, 11, "CE"), (11, 12, "CE"), (13, 14, "EF")]
    elements = [Element(i - 1, j - 1, sec[k]) for i, j, k in pairs]
    return Mechanism(a, b, nodes, elements, alpha=alpha, beta=beta)
