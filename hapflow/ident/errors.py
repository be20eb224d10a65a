"""Errors of the identification pipeline (printed by the CLI without a traceback)."""
from __future__ import annotations

from hapflow.blocks.impedance_model import ModelFileError  # noqa: F401  (raised by model files)

from ..errors import HapflowError


class IdentError(HapflowError):
    """Identification cannot proceed: bad data, settings or model file."""


class SignalError(IdentError):
    """A signal the pipeline needs is not in the recording or file."""
