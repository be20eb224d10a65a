"""Flexible-link models of seed 004, chapters 4-6.

One concept per module:

- :mod:`~hapflow.flex.beam`: the two-node planar Euler-Bernoulli frame element;
- :mod:`~hapflow.flex.erls`: planar flexible-link mechanisms on an equivalent
  rigid-link system (ERLS), their matrices and linearised modal analysis;
- :mod:`~hapflow.flex.manipulator`: the thesis's 3-dof hybrid-topology manipulator;
- :mod:`~hapflow.flex.modal`: eigen-solutions and the comparison metrics
  (relative frequency error, NCO, MAC);
- :mod:`~hapflow.flex.craig_bampton`: Craig-Bampton bases and the interior-mode
  rankings IMR and EBR;
- :mod:`~hapflow.flex.horn`: the Al7075 slotted bar horn as a scikit-fem plane model;
- :mod:`~hapflow.flex.updating`: bounded, regularised model updating.

Nothing here touches the simulation engine: these are design-time numerics
(numpy, scipy, scikit-fem) that blocks and studies build on.
"""
