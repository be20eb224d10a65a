"""The ``hapflow`` command line: run, check, blocks, identify, verify, hil, report, study.

Errors print one message without a traceback and exit non-zero (2 for a bad
graph or argument, 1 for a failed run or a safety stop, 130 for Ctrl-C, 143
for SIGTERM); a run that stops early keeps every chunk already
recorded.  ``run --mode hil`` runs the graph in real time against a DAQ card
(see :mod:`hapflow.hil.commands`).
"""
from __future__ import annotations

import argparse
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import yaml

from . import registry
from .argtypes import image_file, new_file, number
from .errors import GraphError, HapflowError
from .graph import MAX_DURATION, Graph

MAX_CHUNK = 60.0
"""Longest chunk in simulated s (its log buffer is allocated at once)."""


def _settings(pairs: Sequence[str]) -> dict[str, object]:
    out = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or "." not in key:
            raise GraphError(f"--set {pair!r}: write block.param=value, e.g. --set pid.kp=2000")
        try:
            out[key.strip()] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise GraphError(f"--set {pair!r}: the value is not a plain YAML number, list or "
                             f"string ({getattr(exc, 'problem', None) or exc})") from None
    return out


def _load(args: argparse.Namespace) -> Graph:
    """The graph file, its ``hardware:`` section checked too (by the HIL package, which
    registers ``bind_hardware``): a simulation does not use it, but a bad binding should not
    wait for the day the rig is connected."""
    from .yamlio import load
    graph = load(args.graph)
    if graph.hardware and getattr(args, "bind_hardware", None):
        args.bind_hardware(graph)
    return graph


def cmd_run(args: argparse.Namespace) -> int:
    from .simulation import Simulation
    graph = _load(args)
    for key, value in _settings(args.set).items():    # live or structural: nothing is compiled yet
        graph.set(key, value)
    out = Path(args.out) if args.out else Path("out") / f"{Path(args.graph).stem}.h5"
    if args.mode == "hil":
        status = args.run_hil(args, graph, out)
        if args.plot and out.exists():         # after a safety stop too, the stop marked
            _plot(out, args.plot, args.plot_marks)
        return status
    for option in ("daq", "grpc", "fifo", "cpu", "max_overruns", "max_lateness",
                   "hw_watchdog", "dashboard"):
        if getattr(args, option) is not None:
            raise GraphError(f"--{option.replace('_', '-')} applies to --mode hil")
    for option in ("fault", "mlock", "live", "unpaced", "limit", "velocity_limit", "ramp"):
        if getattr(args, option):
            raise GraphError(f"--{option.replace('_', '-')} applies to --mode hil")
    sim = Simulation(graph, interpret=args.interpret, chunk=args.chunk)
    try:
        with _sigterm_as_sigint() as terminated:
            result = sim.run(args.duration, out=out, progress=None if args.progress else False)
    except KeyboardInterrupt:
        print(f"hapflow: {'terminated' if terminated else 'interrupted'} at t = "
              f"{sim.tick / graph.rate:g} s; the recording up to there is in {out}",
              file=sys.stderr)
        return 143 if terminated else 130
    except HapflowError as exc:
        if not out.exists():                   # the recording could not be created
            raise
        print(f"hapflow: error: {exc}\nthe recording up to there is in {out}", file=sys.stderr)
        return 1
    print(result.summary())
    if args.plot:
        _plot(out, args.plot)
    return 0


@contextmanager
def _sigterm_as_sigint() -> Iterator[list[int]]:
    """Stop on SIGTERM as on Ctrl-C (at the end of the chunk, the recording closed); the
    yielded list is non-empty once SIGTERM came (the default action killed the process
    mid-chunk and left the status 'running')."""
    terminated: list[int] = []

    def handler(number: int, frame: object) -> None:
        terminated.append(number)
        signal.raise_signal(signal.SIGINT)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield terminated
    finally:
        signal.signal(signal.SIGTERM, previous)


def _plot(recording: Path, png: str, marks=lambda attrs: []) -> None:
    """Plot ``recording`` to ``png``, with ``marks(attrs)`` (time, label) drawn."""
    from .plotting import plot_recording
    from .recorder import load as load_recording
    rec = load_recording(recording)
    plot_recording(rec, png, marks=marks(rec.attrs))
    print(f"plot -> {png}")


def cmd_check(args: argparse.Namespace) -> int:
    from .compiler import compile_graph
    graph = _load(args)
    program = compile_graph(graph, interpret=True)
    sched, layout = program.schedule, program.layout
    print(f"{args.graph}: OK — {len(graph.nodes)} blocks, {len(graph.wires)} wires, "
          f"rate {graph.rate:g} Hz, solver {graph.solver}")
    print("\nexecution order (outputs):")
    for k, call in enumerate(sched.calls):
        node = graph.nodes[call.block]
        tags = []
        if call.block in sched.held:
            tags.append(f"held, every {node.divider} tick(s)" + (f" +{node.offset}" if node.offset else ""))
        if call in sched.chain:
            tags.append("re-evaluated at solver stages")
        print(f"  {k + 1:2d}. {call.block}.{{{', '.join(call.outputs)}}}"
              + (f"  [{'; '.join(tags)}]" if tags else ""))
    if sched.updates:
        print("discrete updates: " + ", ".join(sched.updates))
    if sched.continuous:
        print("continuous states: " + ", ".join(sched.continuous))
    if sched.hybrid:
        print("event guards: " + ", ".join(sched.hybrid))
    print("\nlayout:")
    for name, slot in layout.symbols().items():
        unit = f"  [{slot.unit}]" if slot.unit else ""
        print(f"  {name:28s} {slot.array}[{slot.start}:{slot.stop}]{unit}")
    if args.source:
        print(f"\ngenerated source ({program.mode}):\n")
        print(program.source)
        for unit in program.units.values():
            print(f"# ---- compile unit {unit.name} (first used by {', '.join(unit.blocks)})")
            print(unit.source)
    if args.draw:
        from .diagram import draw
        draw(program.checked, sched, args.draw)
        print(f"\ndiagram -> {args.draw}")
    return 0


def cmd_blocks(args: argparse.Namespace) -> int:
    from .reference import reference
    names = registry.names()
    if args.name:                  # a type name in any case, or a part of names ('pid')
        exact = [n for n in names if n.lower() == args.name.lower()]
        names = exact or [n for n in names if args.name.lower() in n.lower()]
        if not names:
            from .errors import suggest
            raise GraphError(f"unknown block type {args.name!r}{suggest(args.name, registry.names())} "
                             "Run 'hapflow blocks' for the list.")
        if len(names) == 1:
            print(reference(registry.lookup(names[0])))
            return 0
    for name in names:
        print(f"{name:24s} {registry.lookup(name).summary()}")
    return 0


def parser() -> argparse.ArgumentParser:
    """The argument parser of the ``hapflow`` command."""
    p = argparse.ArgumentParser(prog="hapflow", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate a graph file and record its signals to HDF5")
    run.add_argument("graph", help="YAML graph file")
    run.add_argument("--duration", type=number(0, MAX_DURATION, "s"),
                     help="simulated seconds (default: the graph's)")
    run.add_argument("--set", action="append", default=[], metavar="BLOCK.PARAM=VALUE",
                     help="change a live parameter before running (repeatable)")
    run.add_argument("--out", type=new_file, help="HDF5 recording (default: out/<graph>.h5)")
    run.add_argument("--plot", type=image_file, help="also plot the recorded signals to this PNG")
    run.add_argument("--chunk", type=number(0, MAX_CHUNK, "s"), default=1.0, metavar="S",
                     help="simulated seconds per chunk (recorded and flushed at once; default 1)")
    run.add_argument("--interpret", action="store_true",
                     help="run the generated code as plain Python (slow reference)")
    run.add_argument("--no-progress", dest="progress", action="store_false",
                     help="no progress bar")
    run.set_defaults(func=cmd_run)
    check = sub.add_parser("check", help="validate a graph; print execution order and layout")
    check.add_argument("graph", help="YAML graph file")
    check.add_argument("--draw", type=image_file, metavar="FILE.png",
                       help="draw the block diagram (Graphviz; PNG, PDF, SVG or JPEG)")
    check.add_argument("--source", action="store_true",
                       help="print the generated kernel source (and its compile units)")
    check.set_defaults(func=cmd_check)
    blocks = sub.add_parser("blocks", help="block reference")
    blocks.add_argument("name", nargs="?", help="a block type for its full reference")
    blocks.set_defaults(func=cmd_blocks)
    entries = sorted(registry.installed("hapflow.commands"),
                     key=lambda e: (COMMAND_ORDER.index(e.name) if e.name in COMMAND_ORDER
                                    else len(COMMAND_ORDER), e.name))
    for entry in entries:
        entry.load()(sub)    # identify, verify, camera; hil, report and --mode hil; study
    return p


COMMAND_ORDER = ("ident", "hil", "study")
"""Where the ``hapflow.commands`` entry points of hapflow's own packages list their
subcommands in ``hapflow --help`` (a plug-in's come after, by name)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    try:
        args = parser().parse_args(argv)
        return args.func(args)
    except HapflowError as exc:
        print(f"hapflow: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hapflow: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:                      # output piped into head, less ...
        sys.stderr.close()
        return 0
    except OSError as exc:
        if exc.filename is None or exc.strerror is None:
            raise
        # a path the system refuses where the command meets it (a name too long for the
        # file system, a folder without permission): the system's word for it, no traceback
        print(f"hapflow: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
