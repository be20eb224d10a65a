"""Layers point down: the engine core imports nothing from the layers built on it."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import networkx as nx

ABOVE = ("hil", "hapflow.hil", "hapflow.ident", "hapflow.study", "hapflow.blocks", "blocks",
         "hapflow.cli")


def test_importing_the_engine_imports_no_layer_above_it():
    code = ("import sys, hapflow\n"
            f"above = [m for m in sys.modules if m.split('.')[0] == 'hil' or m.startswith({ABOVE!r})]\n"
            "print(above)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_importing_the_block_library_stays_light(tmp_path):
    """Design-time maths (scipy.signal), plotting and HDF5 are imported when used, not with the
    library, and importing it writes no generated kernel module (a filter's Kalman step is
    built when a graph holds the filter).  Checking and scheduling a graph does without
    networkx (a third of ``import hapflow``'s time, see ``hapflow/graph.py``)."""
    graph = ROOT / "graphs" / "colton2005_sweep.yaml"
    code = ("import sys, hapflow.blocks\n"
            "print(sorted(m for m in ('scipy.signal', 'matplotlib', 'h5py') if m in sys.modules))\n"
            "from hapflow.schedule import build_schedule\n"
            f"build_schedule(hapflow.load({str(graph)!r}).check())\n"
            "print('networkx' in sys.modules)")
    cache = tmp_path / "cache"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "HAPFLOW_CACHE_DIR": str(cache)})
    assert out.stdout.split() == ["[]", "False"]
    assert sorted(path.name for path in cache.rglob("*.py")) == []


ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"hapflow": ROOT / "hapflow", "hapflow.blocks": ROOT / "blocks",
            "hapflow.hil": ROOT / "hil"}


def modules() -> dict[str, Path]:
    """Every module of the installed packages by its dotted name."""
    out = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            if package == "hapflow" and parts and parts[0] in ("blocks", "hil"):
                continue
            out[".".join([package, *parts])] = path
    return out


def import_graph() -> tuple[nx.DiGraph, set[tuple[str, str]]]:
    """Module -> module edges of every import (at the top or inside a function), and the
    ``(module, name)`` pairs of private names imported from another module."""
    mods = modules()
    graph, private = nx.DiGraph(), set()
    for name, path in mods.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        graph.add_node(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    if (full if full in mods else target) in mods:
                        graph.add_edge(name, full if full in mods else target)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private.add((name, alias.name))
            elif isinstance(node, ast.Import):
                graph.add_edges_from((name, a.name) for a in node.names if a.name in mods)
    return graph, private


def test_no_module_imports_another_in_a_cycle_or_its_private_names():
    graph, private = import_graph()
    assert len(graph) > 100                                   # the walk found the packages
    assert list(nx.simple_cycles(graph)) == []
    assert private == set()


LAYERS_ABOVE_CORE = ("hapflow.blocks", "hapflow.hil", "hapflow.ident", "hapflow.study")


def test_the_engine_core_imports_no_layer_above_it_even_inside_functions():
    """The core (every ``hapflow`` module but the CLI and the packages) imports nothing above
    it, not even lazily; the CLI gets its subcommands from entry points."""
    graph, _ = import_graph()
    core = [m for m in graph if m == "hapflow" or (m.count(".") == 1 and m != "hapflow.cli"
                                                   and not m.startswith(LAYERS_ABOVE_CORE))]
    up = [(m, t) for m in core for t in graph.successors(m) if t.startswith(LAYERS_ABOVE_CORE)]
    assert len(core) > 25 and up == []
    assert not [t for t in graph.successors("hapflow.cli") if t.startswith(LAYERS_ABOVE_CORE)]


def test_the_block_library_imports_no_identification_hil_or_study():
    graph, _ = import_graph()
    up = [(m, t) for m in graph if m.startswith("hapflow.blocks")
          for t in graph.successors(m) if t.startswith(LAYERS_ABOVE_CORE[1:])]
    assert up == []


def test_the_import_graph_check_finds_a_cycle_and_a_private_import(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("from .b import _hidden\n")
    (tmp_path / "b.py").write_text("def f():\n    from . import a\n")
    (tmp_path / "__init__.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", {"pkg": tmp_path})
    graph, private = import_graph()
    assert list(nx.simple_cycles(graph)) and private == {("pkg.a", "_hidden")}
