"""Errors of the identification pipeline (printed by the CLI without a traceback)."""
from __future__ import annotations

from ..errors import HapflowError


class IdentError(HapflowError):
    """Identification cannot proceed: bad data, settings or model file."""


class SignalError(IdentError):
    """A signal the pipeline needs is not in the recording or file."""


class ModelFileError(IdentError):
    """A model file that cannot be read, or that is not a hapflow impedance model."""
