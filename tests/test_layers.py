"""Layers point down: the engine core imports nothing from the layers built on it."""
import subprocess
import sys

ABOVE = ("hil", "hapflow.hil", "hapflow.ident", "hapflow.study", "hapflow.blocks", "blocks",
         "hapflow.cli")


def test_importing_the_engine_imports_no_layer_above_it():
    code = ("import sys, hapflow\n"
            f"above = [m for m in sys.modules if m.split('.')[0] == 'hil' or m.startswith({ABOVE!r})]\n"
            "print(above)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_importing_the_block_library_stays_light():
    """Design-time maths (scipy.signal) is imported when a block is built, not with the library."""
    code = "import sys, hapflow.blocks; print(sorted(m for m in ('scipy.signal', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
