"""The README as a new user reads it: the prerequisites a fresh machine needs, a layout that
matches the tree (issue 18 polish)."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    """The text under ``## title`` up to the next heading of that level."""
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_prerequisites_name_the_python_and_every_system_package_ci_installs():
    """The README had no prerequisites: Python >= 3.11, jackd2 and libportaudio2 were only
    in .ci/run."""
    text = section("Quick start").split("```", 1)[0]
    assert text.lstrip().startswith("Prerequisites:")
    python = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert f"Python {python.removeprefix('>=')}+" in text, python
    ci = (ROOT / ".ci" / "run").read_text().replace("\\\n", " ")
    packages = re.search(r"apt-get install -y -q ([^\n]+)", ci).group(1).split()
    assert packages and [p for p in packages if f"`{p}`" not in text] == []


def test_layout_names_only_files_and_folders_that_are_there():
    """The layout listed ident/, study/ and batch.py under blocks/."""
    block = section("Layout").split("```")[1]
    missing = []
    folder = ROOT
    lines = block.strip("\n").splitlines()
    for k, line in enumerate(lines):
        tokens = [t.rstrip(".:;,") for t in re.findall(r"[\w./-]+", line)]
        if line and not line[0].isspace():
            folder = ROOT / tokens[0] if tokens[0].endswith("/") else ROOT
        # the first line lists top-level files; elsewhere a folder ends in / and a module
        # in .py ("segmented/auto" is prose)
        named = tokens if k == 0 else [t for t in tokens if t.endswith(("/", ".py"))]
        missing += [f"{t} (in {folder.relative_to(ROOT)}/)" for t in named
                    if not ((ROOT / t).exists() or (folder / t).exists())]
    assert missing == []
