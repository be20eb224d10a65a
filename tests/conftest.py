"""Shared test setup: a per-session numba/hapflow cache folder."""
import os
import tempfile

os.environ.setdefault("HAPFLOW_CACHE_DIR", os.path.join(tempfile.gettempdir(), "hapflow-test-cache"))
