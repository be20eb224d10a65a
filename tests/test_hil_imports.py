"""The HIL package imports no private name (``_x``) from another module (the project's rule:
a name another module needs is public, with a docstring)."""
import ast
from pathlib import Path

HIL = Path(__file__).resolve().parents[1] / "hil"


def private_imports(path: Path) -> list[str]:
    """``module: name`` for every ``from M import _name`` in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            found += [f"{node.module or '.'}: {a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_private_name_is_imported_across_modules():
    found = {p.name: private_imports(p) for p in sorted(HIL.glob("*.py"))}
    assert {name: names for name, names in found.items() if names} == {}
