"""The HIL command line: ``run --mode hil``, ``hil check`` and ``report``.

::

    hapflow run GRAPH --mode hil [--daq sim|nidaqmx] [--grpc HOST:PORT] [--fifo PRIO]
                [--cpu N] [--mlock] [--max-overruns N] [--max-lateness S] [--hw-watchdog S]
                [--unpaced] [--live] [--dashboard [PORT]]
                [--limit PORT=L|LO,HI ...] [--velocity-limit PORT=V ...] [--ramp PORT=S ...]
                [--fault KIND@TICK[xTICKS][:CHANNEL][=VALUE] ...]
    hapflow hil check GRAPH [--daq sim|nidaqmx] [--grpc HOST:PORT] [--limit ...] [--ramp ...]
    hapflow hil arm GRAPH [--daq sim|nidaqmx] [--grpc HOST:PORT] [--limit ...] [--ramp ...]
    hapflow hil serve GRAPH [--port N] [--free-running] [--fault SPEC ...]
    hapflow report RUN.h5 [--plot timing.png]

``run --mode hil`` exits 0 when the run completes, 1 after a safety stop
(limits, watchdog, non-finite value, DAQ error), 130 after Ctrl-C and 143
after SIGTERM, each with a one-line explanation; the recording holds every
tick up to the stop.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hapflow.argtypes import image_file, integer, number, recording
from hapflow.graph import MAX_SEED
from hapflow.errors import HapflowError

from .backend import Backend


def add_run_options(run: argparse.ArgumentParser) -> None:
    """The ``--mode hil`` options of ``hapflow run``."""
    g = run.add_argument_group("real time (--mode hil)")
    g.add_argument("--mode", choices=("sim", "hil"), default="sim",
                   help="sim: as fast as possible [default]; hil: against a DAQ card, in real time "
                        "(or on --unpaced's virtual clock)")
    g.add_argument("--daq", choices=("sim", "nidaqmx"), default=None,
                   help="with --mode hil: the simulated rig [default] or NI-DAQmx")
    g.add_argument("--grpc", metavar="HOST:PORT",
                   help="with --daq nidaqmx: a remote NI-DAQmx gRPC server")
    g.add_argument("--fifo", type=integer(1, 99), metavar="PRIO",
                   help="SCHED_FIFO priority (1-99) for the loop, when permitted")
    g.add_argument("--cpu", type=integer(0, (os.cpu_count() or 1) - 1), metavar="N",
                   help="pin the loop to CPU N")
    g.add_argument("--mlock", action="store_true", help="lock the process memory (mlockall)")
    g.add_argument("--max-overruns", type=integer(1, 1_000_000), default=None, metavar="N",
                   help="watchdog: consecutive overruns that trip it [5 ms worth of ticks, "
                        "at least 5]")
    g.add_argument("--max-lateness", type=number(0, 10, "s"), default=None, metavar="S",
                   help="watchdog: a single lateness that trips it [0.02 s]")
    g.add_argument("--hw-watchdog", type=number(0.001, 34, "s"), default=None, metavar="S",
                   help="timeout of the card's hardware watchdog: the outputs go to their safe "
                        "state when the loop has not petted it for S (killed, stopped, hung) "
                        "[5 x the lateness bound: 0.1 s]")
    g.add_argument("--unpaced", action="store_true",
                   help="with --daq sim: not in real time: the simulated card's sample clock "
                        "is virtual and the loop runs as fast as it can (deterministic, no edge "
                        "missed: to compare results with --mode sim)")
    g.add_argument("--live", action="store_true",
                   help="change live parameters while it runs: read BLOCK.PARAM=VALUE lines "
                        "from stdin (e.g. 'pid.kp=4000'); each is validated by its block, "
                        "applied at the next tick, recorded under /hil/live, and answered "
                        "with its tick or why it was rejected")
    g.add_argument("--dashboard", type=integer(1, 65535), nargs="?", const=5006, default=None,
                   metavar="PORT", help="serve a live dashboard on http://localhost:PORT/ "
                   "[5006]: signal traces, timing, overruns, safety state, live parameter "
                   "sliders, e-stop (a Bokeh server in its own process)")
    safety_options(g)
    g.add_argument("--fault", action="append", default=[], metavar="SPEC",
                   help="with --daq sim: inject a fault, KIND@TICK[xTICKS][:CHANNEL][=VALUE]; "
                        "kinds drop, late, stuck, saturate, glitch, nan, error (repeatable)")


def safety_options(parser) -> None:
    """``--limit``, ``--velocity-limit`` and ``--ramp``: the bindings' safety keys set from
    the command line (``run --mode hil``, ``hil check``, ``hil arm``)."""
    where = ("PORT is a bound BLOCK (short form, or one bound port) or BLOCK.PORT; replaces "
             "the graph file's value and is recorded with the graph (repeatable)")
    parser.add_argument("--limit", action="append", default=[], metavar="PORT=L|LO,HI",
                        help="safety limit in the port's unit: L for [-L, L], or LO,HI, "
                             f"e.g. motor=10 or enc=-0.02,0.03; {where}")
    parser.add_argument("--velocity-limit", action="append", default=[], metavar="PORT=V",
                        help=f"velocity limit of a measured position, its unit per s; {where}")
    parser.add_argument("--ramp", action="append", default=[], metavar="PORT=S",
                        help="time (s) to ramp a command to zero after a limit trip (0: cut "
                             f"at once); {where}")


def apply_safety_options(args: argparse.Namespace, graph) -> None:
    """Write ``--limit``/``--velocity-limit``/``--ramp`` into ``graph.hardware``.

    Raises
    ------
    HapflowError
        If an option is not ``PORT=NUMBER[,NUMBER]`` or names no bound port.
    """
    from .bindings import SAFETY_KEYS, override
    for key in SAFETY_KEYS:
        option = "--" + key.replace("_", "-")
        for text in getattr(args, key):
            ref, sep, value = text.partition("=")
            try:
                numbers = [float(v) for v in value.strip().strip("[]").split(",")] if sep else []
            except ValueError:
                numbers = []
            if not ref.strip() or not numbers:
                raise HapflowError(f"{option} {text!r}: write PORT=NUMBER"
                                   + (" or PORT=LO,HI" if key == "limit" else "")
                                   + ", e.g. motor=10")
            override(graph, ref.strip(), key, numbers[0] if len(numbers) == 1 else numbers)


def _backend(args: argparse.Namespace, graph) -> Backend:
    from .simrig import Fault
    daq = args.daq or "sim"
    faults = [Fault.parse(text) for text in args.fault]
    if daq == "sim":
        if args.grpc:
            raise HapflowError("--grpc applies to --daq nidaqmx (the simulated rig runs in "
                               "this process)")
        from .simdaq import SimDaq
        return SimDaq(graph, faults, seed=graph.seed, paced=not args.unpaced)
    if args.unpaced:
        raise HapflowError("--unpaced applies to --daq sim only (the pace of --daq nidaqmx is "
                           "the card's sample clock; 'hapflow hil serve --free-running' "
                           "makes the simulated gRPC server free-run)")
    if faults:
        raise HapflowError("--fault applies to --daq sim only (to inject faults through "
                           "NI-DAQmx, run the simulated gRPC server with faults)")
    return nidaq_backend(args.grpc)


def nidaq_backend(grpc: str | None) -> Backend:
    """The NI-DAQmx backend (imported only when asked for).

    Raises
    ------
    HapflowError
        If the backend or the ``nidaqmx`` package cannot be imported.
    """
    try:
        from .nidaq import NidaqBackend
    except ImportError as exc:
        raise HapflowError(f"the NI-DAQmx backend is not available ({exc}); install the "
                           "'nidaqmx' package, or use --daq sim") from None
    return NidaqBackend(grpc=grpc)


def run_hil(args: argparse.Namespace, graph, out: Path) -> int:
    """``hapflow run --mode hil``: run, print the summary, return the exit status."""
    from .runner import HilRunner, RealTime
    from .safety import Policy
    apply_safety_options(args, graph)
    policy = Policy(**{k: v for k, v in (("max_overruns", args.max_overruns),
                                          ("max_lateness", args.max_lateness),
                                          ("hardware_watchdog", args.hw_watchdog))
                       if v is not None})
    runner = HilRunner(graph, _backend(args, graph), policy,
                       RealTime(args.fifo, args.cpu, args.mlock), chunk=args.chunk)
    backend = type(runner.backend).__name__

    def started(rt: str) -> None:
        clock = ("real time: " if runner.backend.paced else
                 "unpaced (a virtual sample clock, as fast as the loop runs): ")
        print(f"{clock}{graph.name} at {graph.rate:g} Hz on {backend} ({rt}); Ctrl-C stops "
              "safely", flush=True)
        if args.live:
            from .live import serve_stream
            print("live parameters: type BLOCK.PARAM=VALUE and Enter, e.g. "
                  + next(iter(runner.live.live_parameters()), "pid.kp") + "=...", flush=True)
            serve_stream(runner.live, sys.stdin, sys.stdout)
        if args.dashboard:
            print(f"dashboard: http://localhost:{args.dashboard}/", flush=True)
    watch = None
    if args.dashboard:
        from .dashboard import start
        watch = start(runner.live, args.dashboard)
    result = runner.run(args.duration, out=out, on_start=started, watch=watch)
    print(result.summary())
    if runner.backend.watchdog_note:
        print(f"hardware watchdog: {runner.backend.watchdog_note}")
    if result.dropped:
        print("not recorded in HIL mode (plant signals a real rig cannot measure): "
              + ", ".join(result.dropped))
    if result.event is not None:
        print(f"hapflow: {result.event.line()}; the recording up to there is in {out}",
              file=sys.stderr)
        return result.event.exit_code
    return 0


def cmd_hil_check(args: argparse.Namespace) -> int:
    """``hapflow hil check``: validate the bindings and the split; list devices."""
    from hapflow.yamlio import load
    from .bindings import bind
    from .split import controller_graph, plant_blocks, plant_graph
    graph = load(args.graph)
    apply_safety_options(args, graph)
    b = bind(graph)
    controller = controller_graph(graph, b.channels)
    controller.graph.check()
    plant_graph(graph, b.channels).graph.check()
    plant = plant_blocks(graph, b.channels)
    print(f"{args.graph}: bindings OK — {len(b.channels)} channels at {graph.rate:g} Hz")
    print(f"plant (real in HIL, simulated by the sim rig): {', '.join(plant)}")
    print("controller (real-time kernel): "
          + ", ".join(n for n in graph.nodes if n not in plant))
    print(f"\n  {'port':22s} {'kind':11s} {'channel':18s} {'scale':>12s}  {'SI range':24s} limit")
    for c in b.channels:
        if c.kind in ("ai", "ao"):
            lo, hi = sorted((c.offset + c.scaled(c.low), c.offset + c.scaled(c.high)))
            span = f"[{lo:g}, {hi:g}] {c.unit}"
            scale = c.custom.kind if c.custom else f"{c.scale:g} {c.unit}/V"
            if c.terminal != "DEFAULT":
                span += f" {c.terminal}"
        elif c.kind == "ci_encoder":
            span = f"X{c.decoding}" + (f", {c.pulses_per_rev} pulses/rev" if c.pulses_per_rev
                                       else "")
            scale = f"{c.scale:g} {c.unit}/count"
        else:
            span, scale = "amplifier enable", ""
        limit = b.limits.get(c.port)
        extra = f"[{limit[0]:g}, {limit[1]:g}]" if limit else ""
        if c.port in b.velocity_limits:
            extra += f" |v| <= {b.velocity_limits[c.port]:g} {c.unit}/s"
        if c.port in b.ramps:
            extra += f" ramp {b.ramps[c.port]:g} s" if b.ramps[c.port] else " cut at once"
        print(f"  {c.port:22s} {c.kind:11s} {c.physical:18s} {scale:>12s}  {span:24s} {extra}")
    print("\n  arm steps and counter settings:")
    for c in b.channels:
        for line in channel_settings(c, b):
            print(f"  {c.port:22s} {line}")
    if controller.dropped:
        print("\nnot recorded in HIL mode: " + ", ".join(controller.dropped))
    wanted = sorted({c.device for c in b.channels})
    daq = args.daq or "sim"
    if daq == "sim":
        devices = wanted
        print(f"\ndevices (simulated rig): {', '.join(devices)}")
    else:
        try:
            from .nidaq import list_devices
        except ImportError as exc:
            raise HapflowError(f"the NI-DAQmx backend is not available ({exc}); install the "
                               "'nidaqmx' package, or use --daq sim") from None
        devices = list_devices(args.grpc)
        print("\ndevices (NI-DAQmx" + (f" at {args.grpc}" if args.grpc else "") + "): "
              + (", ".join(devices) or "(none)"))
    missing = [d for d in wanted if d not in devices]
    if missing:
        raise HapflowError(f"device(s) {', '.join(missing)} named in the bindings are not "
                           f"present; available: {', '.join(devices) or '(none)'}")
    return 0


def channel_settings(c, b) -> list[str]:
    """What ``hil check`` says of channel ``c`` besides its scale and limits: homing or the
    free count, Z index, digital filter (encoders); tare (analog inputs); the safe level
    (enable lines) and the safe output (analog outputs)."""
    from .homing import plan
    from .simcounter import filter_rate
    lines = []
    if c.kind == "ci_encoder":
        h = b.homes.get(c.port)
        lines.append(f"home: {plan(h)} ({h.to})" if h else
                     "no home: counts from 0 where the carriage sits when the card starts")
        if c.z_index is not None:
            lines.append(f"Z index: resets to {c.offset + c.scale * c.z_index:g} {c.unit} "
                         f"(count {c.z_index}) at {c.z_phase}")
        if c.filter:
            edges = filter_rate(c.filter)
            lines.append(f"digital filter: {c.filter * 1e6:g} us on A, B"
                         + (", Z" if c.z_index is not None else "")
                         + f" (passes {edges:.3g} edges/s = "
                         f"{edges * c.decoding / 4 * abs(c.scale):.3g} {c.unit}/s)")
    elif c.kind == "ai":
        if c.custom is not None:
            lines.append(f"custom scale: {c.custom.describe()} from volts to {c.unit}, after "
                         "the read (raw volts recorded)")
        if c.port in b.tares:
            lines.append(f"tare: averaged over {b.tares[c.port]:g} s at arm with the outputs "
                         f"safe; that reads 0 {c.unit} (replaces offset {c.offset:g})")
    elif c.kind == "ao":
        lines.append(f"safe: {c.safe:g} V (stop, watchdog expiry)")
    elif c.kind == "do":
        on, off = ("high", "low") if c.active else ("low", "high")
        lines.append(f"enable active {on}: {on} while running, {off} when safe "
                     "(stop, watchdog expiry)")
    return lines


def cmd_hil_arm(args: argparse.Namespace) -> int:
    """``hapflow hil arm``: the arm sequence (:mod:`hapflow.hil.arm`) without running."""
    from hapflow.yamlio import load
    from .arm import arm
    from .bindings import bind
    graph = load(args.graph)
    apply_safety_options(args, graph)
    backend = _backend(args, graph)
    try:
        for line in arm(backend, bind(graph)):
            print(line)
    finally:
        backend.close()
    print(f"armed: {args.graph} can run on this card (outputs untouched; 'hapflow run "
          f"{args.graph} --mode hil' arms it again, then enables and runs)")
    return 0


def cmd_hil_serve(args: argparse.Namespace) -> int:
    """``hapflow hil serve``: the simulated NI-DAQmx gRPC device server (``grpc_sim``)."""
    import gc
    from .grpc_sim import run_server
    run_server(args.graph, port=args.port, host=args.host, seed=args.seed,
               free_running=args.free_running, faults=args.fault)
    # Stopped (Ctrl-C, SIGTERM): what is left is the exit, whose final collections walked
    # every object of the compiled rig (2.3-3.7 s measured); nothing needs finalising
    # (no file is open), so the heap is left to the OS
    gc.freeze()
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``hapflow report``: print the timing report, optionally plot it with the signals."""
    from .report import load_timing, plot, text
    timing = load_timing(args.run)
    print(text(timing))
    if args.plot:
        from hapflow.recorder import load
        print(f"\nplot -> {plot(timing, args.plot, load(args.run))}")
    return 0


def _card_arguments(parser: argparse.ArgumentParser, daq_help: str) -> None:
    """The graph and the card to check it against (``hil check``, ``hil arm``)."""
    parser.add_argument("graph", help="YAML graph file")
    parser.add_argument("--daq", choices=("sim", "nidaqmx"), default="sim", help=daq_help)
    parser.add_argument("--grpc", metavar="HOST:PORT", help="NI-DAQmx gRPC server")
    safety_options(parser)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``hil`` (``hil check``, ``hil serve``) and ``report`` subcommands, the
    ``--mode hil`` options of ``run``, and the check of a graph's ``hardware:`` section to
    ``run`` and ``check`` (the ``hapflow.commands`` entry point)."""
    from .bindings import bind
    from .report import trip_marks
    add_run_options(sub.choices["run"])  # --mode hil, --daq, --grpc ...
    sub.choices["run"].set_defaults(run_hil=run_hil, bind_hardware=bind, plot_marks=trip_marks)
    sub.choices["check"].set_defaults(bind_hardware=bind)
    hil = sub.add_parser("hil", help="hardware-in-the-loop tools (hil check, hil serve)")
    hsub = hil.add_subparsers(dest="hil_command", required=True)
    check = hsub.add_parser("check", help="validate the hardware bindings; list DAQ devices",
                            description="Validate the graph's hardware: section (channels, "
                                        "ranges, scaling, units), show how the graph splits "
                                        "into controller and plant, and list the devices.")
    _card_arguments(check, "which devices to list [sim]")
    check.set_defaults(func=cmd_hil_check)
    armp = hsub.add_parser("arm", help="check the card against the graph and self-test it",
                           description="The arm sequence of a real-time run, without running: "
                                       "each device's product type, every bound channel and "
                                       "line among its physical channels, self-test.")
    _card_arguments(armp, "the simulated card [default] or NI-DAQmx")
    armp.set_defaults(func=cmd_hil_arm, fault=[], unpaced=False)
    serve = hsub.add_parser("serve", help="serve a graph's simulated rig as an NI-DAQmx gRPC "
                                          "device server",
                            description="Expose the graph's plant behind the simulated card "
                                        "through the NI-DAQmx gRPC service, so that "
                                        "'run --mode hil --daq nidaqmx --grpc HOST:PORT' (or "
                                        "any nidaqmx client) drives it.")
    serve.add_argument("graph", help="YAML graph file with a hardware: section")
    serve.add_argument("--port", type=integer(0, 65535), default=31763, help="TCP port (0: any free) [31763]")
    serve.add_argument("--host", default="localhost", help="interface [localhost]")
    serve.add_argument("--seed", type=integer(0, MAX_SEED), help="card noise seed [the graph's]")
    serve.add_argument("--free-running", action="store_true",
                       help="one sample per wait instead of real-time pacing")
    serve.add_argument("--fault", action="append", default=[], metavar="SPEC",
                       help="inject a fault, KIND@TICK[xTICKS][:CHANNEL][=VALUE] (repeatable)")
    serve.set_defaults(func=cmd_hil_serve)
    rep = sub.add_parser("report", help="timing report of a real-time run",
                         description="Period error, lateness and compute-time percentiles "
                                     "(p50, p99, p99.9, max), lateness histogram, overruns over "
                                     "time and safety events of a 'run --mode hil' recording.")
    rep.add_argument("run", type=recording, help="HDF5 recording of 'hapflow run --mode hil'")
    rep.add_argument("--plot", type=image_file, metavar="FILE.png", help="also plot the report")
    rep.set_defaults(func=cmd_report)
