"""The version of hapflow (stored in recordings and model files)."""
__version__ = "0.1.0"
