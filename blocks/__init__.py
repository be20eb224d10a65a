"""The hapflow block library (installed as ``hapflow.blocks``).

One module per block family; importing this package registers every block
type by its class name.  ``hapflow blocks`` prints the reference.
"""
from . import arithmetic, continuous, discrete, mechanical, sources  # noqa: F401
