"""What the package needs at run time against what only its tests need (``pyproject.toml``)."""
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_ONLY = ("filterpy",)
"""Reference libraries the tests compare against; the package itself never imports them."""

IMPORT_EVERYTHING = """
import importlib, pkgutil, sys
import hapflow, hapflow.blocks, hapflow.hil
for package in (hapflow, hapflow.blocks, hapflow.hil):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)
print(len(sys.modules), sorted(m for m in sys.modules if m.split(".")[0] in {test_only!r}))
"""


def test_importing_every_module_of_the_package_imports_no_test_only_library():
    code = IMPORT_EVERYTHING.format(test_only=set(TEST_ONLY))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT / "tests")
    count, imported = out.stdout.strip().split(" ", 1)
    assert int(count) > 300                   # the walk imported the packages
    assert imported == "[]", out.stdout


def test_test_only_libraries_are_a_test_extra_not_a_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {d.split(">")[0].split("=")[0].split("[")[0].strip().lower()
             for d in project["dependencies"]}
    test = {d.split(">")[0].split("=")[0].split("[")[0].strip().lower()
            for d in project["optional-dependencies"]["test"]}
    assert [n for n in TEST_ONLY if n in names] == []
    assert [n for n in TEST_ONLY if n not in test] == []
