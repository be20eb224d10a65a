"""Identification of position- and direction-dependent impedance models ("haptic camera").

Pipeline (one concept per module):

- :mod:`~hapflow.ident.prep` — velocity/acceleration estimates (zero-phase
  Butterworth differentiation, accelerometer integration, complementary
  fusion), direction labels with a dead band, grouping and sorting by
  position, recording and CSV loaders;
- :mod:`~hapflow.ident.segmented` — segmented least squares (seed 000) with
  standard errors and condition numbers, and automatic BIC segmentation;
- :mod:`~hapflow.ident.ewls` — exponentially weighted RLS over sorted data
  (seed 002); its ``@njit`` update is shared with the online ``EWLS`` block;
- :mod:`~hapflow.blocks.impedance_model` — the model file and the ``@njit`` evaluation
  kernel shared with the ``PiecewiseImpedance`` block;
- :mod:`~hapflow.ident.poly` — one global polynomial model (``k1 x + k3 x^3``);
- :mod:`~hapflow.ident.pipeline` — one call from prepared data to a model;
- :mod:`~hapflow.ident.select` — piecewise against polynomial models by BIC;
- :mod:`~hapflow.ident.simulate` — free run of a model driven by force (admittance);
- :mod:`~hapflow.ident.verify` — replay a recording through a model (NRMSE);
- :mod:`~hapflow.ident.truth` — the true impedance of a simulated device;
- :mod:`~hapflow.ident.report` — tables and plots;
- :mod:`~hapflow.ident.synthetic` — data with known truth;
- :mod:`~hapflow.ident.commands` — ``hapflow identify`` and ``hapflow verify``.
"""
from .errors import IdentError, ModelFileError, SignalError  # noqa: F401
from .pipeline import identify  # noqa: F401
from hapflow.blocks.impedance_model import ImpedanceModel, Knots, impedance_force  # noqa: F401
from .prep import Motion, from_arrays, from_recording, group, load_csv, load_motion  # noqa: F401
from .verify import Verification, verify  # noqa: F401

__all__ = ["IdentError", "ImpedanceModel", "Knots", "ModelFileError", "Motion", "SignalError",
           "Verification", "from_arrays", "from_recording", "group", "identify",
           "impedance_force", "load_csv", "load_motion", "verify"]
