"""The graph file's ``hardware:`` section: bind block ports to DAQ channels.

Each key of ``hardware:`` names a block that is real in HIL mode (its
simulated twin runs in ``--mode sim`` and in the simulated rig).  Its value
binds the block's ports to channels, with scaling, card range and optional
safety limits::

    hardware:
      motor: {channel: Dev1/ao0, newtons_per_volt: 6.0, limit: 50,    # short form:
              enable: Dev1/port0/line0}                                # the one port that
      enc:   {channel: Dev1/ctr0, meters_per_count: 5.0e-6,            # faces the controller
              limit: [-0.03, 0.03], velocity_limit: 0.5}
      head:                                                            # per-port form
        force: {channel: Dev1/ai0, newtons_per_volt: 10.0}
        accel: {channel: Dev1/ai1, scale: 30.0, range: [-10, 10]}

Channel keys:

``channel``
    Physical channel; the kind follows from it and from the port's direction:
    an **input** of the block (a command the controller drives) binds to an
    analog output ``DevN/aoK``; an **output** (a measurement) to an analog
    input ``DevN/aiK`` or a quadrature encoder counter ``DevN/ctrK``.
``scale`` or a unit-named alias
    Port units per volt for an analog channel (``scale`` in any declared unit,
    ``volts_per_unit`` its inverse, or ``newtons_per_volt`` for N,
    ``meters_per_volt`` for m, ``meters_per_second_per_volt``,
    ``meters_per_second2_per_volt``); for an encoder, port units per count as
    the card reports it after ``decoding`` (``scale``, ``counts_per_unit`` its
    inverse, ``meters_per_count``, ``radians_per_count``), or ``pulses_per_rev``
    for an angular encoder on a port in rad (NI-DAQmx's ``add_ci_ang_encoder_chan``:
    ``2 pi / (pulses_per_rev * counts per cycle)`` rad per count).  A unit-named
    alias must match the port's unit.
``polynomial`` or ``table`` (analog channels)
    A custom scale instead of the linear one (and ``offset``):
    ``polynomial: [c0, c1, c2]`` (value = c0 + c1 V + c2 V^2 ..., NI-DAQmx's
    forward coefficients) or ``table: {volts: [...], values: [...]}`` (linear
    between points; the volts span ``range``), from volts to the port's unit.
    Applied after the read (an output: its inverse before the write), so the
    recording keeps the raw volts and the scaled value; strictly monotonic over
    ``range``, checked at load.  See :mod:`hapflow.hil.scales`.
``offset``
    Port value at 0 V / 0 counts (default 0).
``range``
    Card range ``[low, high]`` in V (default ``[-10, 10]``, within +-10 V).
    Analog outputs are clipped to it.
``decoding``
    Encoder quadrature decoding ``X1``, ``X2`` or ``X4`` (default; 1, 2 or 4
    counts per encoder cycle, nidaqmx ``EncoderType``).
``z_index``
    Encoder: reset the count on the Z index pulse, so that the index position
    reads this value (port unit; NI-DAQmx ``zidx_enable``/``zidx_val``).
``z_phase``
    Encoder: the A/B state at which Z resets it, ``AHIGH_BHIGH`` (default),
    ``AHIGH_BLOW``, ``ALOW_BHIGH`` or ``ALOW_BLOW`` (nidaqmx ``EncoderZIndexPhase``).
``filter``
    Encoder: digital filter minimum pulse width in s on its A, B (and Z) inputs
    (nidaqmx ``ci_encoder_a_input_dig_fltr_min_pulse_width`` ...): pulses
    shorter do not pass.  It must pass the edges at the ``velocity_limit``
    (an A pulse lasts two quadrature edges); the arm sequence checks it against
    the card (an X Series card has 90 ns, 5.12 us, 2.56 ms and one custom width).
``terminal``
    Analog input terminal configuration (nidaqmx ``TerminalConfiguration``):
    ``DEFAULT``, ``RSE``, ``NRSE``, ``DIFF`` or ``PSEUDO_DIFF``; checked
    against the card's product at arm time (a PCIe-6351 has no
    pseudodifferential inputs, and ``DIFF`` pairs aiN with aiN+8).
``port``
    Short form only: which port, when more than one faces the controller.
``limit``
    Safety limit in the port's unit: ``L`` (= ``[-L, L]``) or ``[lo, hi]``.
    On a command (force limit) or a measurement (stroke limit).
``velocity_limit``
    On a measured position (a port in m, rad or count): limit of its velocity
    in that unit per second (m/s, rad/s); refused on any other port.
``ramp``
    On a command: time in s to ramp it to zero after a limit trip (default
    0.01 s; 0 = at once).
``tare``
    On an analog input (a force sensor): seconds to average it at arm time,
    with every output safe; that average then reads 0 (it replaces ``offset``).
``home``
    On an encoder: ``{command: motor, drive: -2.0, at: -0.02}`` drives the
    bound analog output ``command`` (a block or ``block.port``) at ``drive``
    (in its unit, within its ``limit``; the sign points to the stop) until the
    count stands still for ``settle`` s (default 0.1), and makes that count read
    ``at`` (the stop's position, inside the stroke ``limit``; default 0).  It
    fails after ``timeout`` s (default 10) or ``travel`` (default: the stroke
    limit's span).  ``to: index`` (the encoder needs ``z_index``; no ``at``)
    makes the reference the first Z index pulse met on the way to the stop,
    which then reads ``z_index``; reaching the stop first fails.  Without
    ``home`` an encoder reads ``offset`` where the carriage sits when the card
    starts.  See :mod:`hapflow.hil.homing`.

Block key ``enable``: a digital output line (``DevN/portP/lineL``) that enables
the block's amplifier: high while running, low in the safe state; or
``{line: DevN/portP/lineL, active: low}`` for an active-low enable input (low
while running, high in the safe state).  The card's hardware watchdog puts the
line in its safe state when the loop stops petting it.

Errors name the file and line, the block and port, and what is valid.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from hapflow.errors import GraphError, Where, suggest, valid_list
from hapflow.graph import Graph
from hapflow.units import UnitError, dimension

from .backend import Channel
from . import scales
from .homing import SEEK_RANGE, SEEK_START, TARGETS, Home
from .simcounter import Z_PHASES, filter_rate

PHYSICAL = {"ai": re.compile(r"^[A-Za-z][\w-]*/ai\d+$"),
            "ao": re.compile(r"^[A-Za-z][\w-]*/ao\d+$"),
            "ci_encoder": re.compile(r"^[A-Za-z][\w-]*/ctr\d+$"),
            "do": re.compile(r"^[A-Za-z][\w-]*/port\d+/line\d+$")}
HIGHEST = {"ai": (255,), "ao": (31,), "ci_encoder": (7,), "do": (11, 31)}
"""Highest channel numbers an NI card has (ai, ao, ctr; port and line): a larger one is a typo."""
EXAMPLE = {"ai": "Dev1/ai0", "ao": "Dev1/ao0", "ci_encoder": "Dev1/ctr0", "do": "Dev1/port0/line0"}
SCALE_KEYS = {"scale": None, "newtons_per_volt": "N", "meters_per_volt": "m",
              "meters_per_second_per_volt": "m/s", "meters_per_second2_per_volt": "m/s^2",
              "volts_per_unit": None, "meters_per_count": "m", "radians_per_count": "rad",
              "pulses_per_rev": "rad", "counts_per_unit": None}
"""Scale keys -> the port unit they are for (None: any unit)."""
ANALOG_SCALES = ("scale", "newtons_per_volt", "meters_per_volt", "meters_per_second_per_volt",
                 "meters_per_second2_per_volt", "volts_per_unit")
ENCODER_SCALES = ("scale", "meters_per_count", "radians_per_count", "pulses_per_rev",
                  "counts_per_unit")
INVERSE_SCALES = ("volts_per_unit", "counts_per_unit")
DECODINGS = {"X1": 1, "X2": 2, "X4": 4}
"""Quadrature decoding (nidaqmx ``EncoderType.X_1`` ...) -> counts per encoder cycle."""
TERMINALS = ("DEFAULT", "RSE", "NRSE", "DIFF", "PSEUDO_DIFF")
"""Analog input terminal configurations (nidaqmx ``TerminalConfiguration`` names)."""
ENCODER_KEYS = ("decoding", "z_index", "z_phase", "filter")
CUSTOM_SCALES = scales.KINDS
CHANNEL_KEYS = ("channel", *SCALE_KEYS, *CUSTOM_SCALES, "offset", "range", *ENCODER_KEYS, "terminal", "port",
                "limit", "velocity_limit", "ramp", "tare", "home")
HOME_KEYS = ("command", "drive", "at", "settle", "timeout", "travel", "to")
HOME_DEFAULTS = {"at": 0.0, "settle": 0.1, "timeout": 10.0}
BLOCK_KEYS = ("enable",)
ENABLE_KEYS = ("line", "active")
POSITION_UNITS = ("m", "rad", "count")
"""Units of a position, the only ports a ``velocity_limit`` applies to."""
POSITION_DIMS = tuple(dimension(u) for u in POSITION_UNITS)
CARD_VOLTS = 10.0
DEFAULT_RAMP = 0.01


@dataclass
class Bindings:
    """The parsed ``hardware:`` section.

    Attributes
    ----------
    channels : list of Channel
        Bound channels: analog inputs, encoders, analog outputs, digital lines.
    limits : dict
        ``"block.port"`` -> (lo, hi) safety limit in SI units.
    velocity_limits : dict
        ``"block.port"`` (a position) -> velocity limit in its unit per second.
    ramps : dict
        ``"block.port"`` (a command) -> ramp-to-zero time in s after a limit trip.
    tares : dict
        ``"block.port"`` (an analog input) -> seconds to average at arm time.
    homes : dict
        ``"block.port"`` (an encoder) -> its :class:`~hapflow.hil.homing.Home`.
    where : dict
        ``"block.port"`` -> file and line of its binding.
    """

    channels: list[Channel] = field(default_factory=list)
    limits: dict[str, tuple[float, float]] = field(default_factory=dict)
    velocity_limits: dict[str, float] = field(default_factory=dict)
    ramps: dict[str, float] = field(default_factory=dict)
    tares: dict[str, float] = field(default_factory=dict)
    homes: dict[str, Home] = field(default_factory=dict)
    where: dict[str, Where] = field(default_factory=dict)

    def of_kind(self, kind: str) -> list[Channel]:
        """Channels of one kind, in order."""
        return [c for c in self.channels if c.kind == kind]


class _Lines:
    """Line numbers of the ``hardware:`` section, re-read from the graph's source text."""

    def __init__(self, graph: Graph):
        self.file = graph.where.file
        self.root: dict[str, Any] = {}
        text = getattr(graph, "source_text", None)
        if text:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
            hw = self._child(node, "hardware")
            self.hardware = hw
        else:
            self.hardware = None

    @staticmethod
    def _child(node: Any, key: str) -> Any:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if getattr(k, "value", None) == key:
                    return k, v
        return None

    def at(self, *path: str) -> Where:
        """Where ``hardware.<path...>`` is written (the file alone if unknown)."""
        node = self.hardware
        line = node[0].start_mark.line + 1 if node else None
        for key in path:
            if node is None:
                break
            node = self._child(node[1], key)
            if node is not None:
                line = node[0].start_mark.line + 1
        return Where(self.file, line)


def bind(graph: Graph) -> Bindings:
    """Parse and validate ``graph.hardware``.

    Raises
    ------
    GraphError
        Naming the file and line, the block and port, and what is valid.
    """
    lines = _Lines(graph)
    out = Bindings()
    if not graph.hardware:
        raise GraphError("the graph has no 'hardware:' section, so nothing can run on a DAQ "
                         "card; bind the hardware blocks' ports, e.g. 'hardware: motor: "
                         "{channel: Dev1/ao0, newtons_per_volt: 6.0}'", graph.where)
    for block, entry in graph.hardware.items():
        _block(graph, block, entry, lines, out)
    seen: dict[str, str] = {}
    for c in out.channels:
        if c.physical in seen:
            raise GraphError(f"channel {c.physical} is bound twice: to {seen[c.physical]} and to "
                             f"{c.port}", out.where[c.port], block=c.port.split(".")[0],
                             port=c.port.split(".")[1])
        seen[c.physical] = c.port
    order = {"ai": 0, "ci_encoder": 1, "ao": 2, "do": 3}
    out.channels.sort(key=lambda c: order[c.kind])
    check_consistency(graph, out)
    for ref, spec in list(out.homes.items()):
        out.homes[ref] = _home(ref, spec, out)
        if out.homes[ref].to == "index":        # counts from far off until Z resets it
            out.channels = [replace(c, initial=SEEK_START) if c.port == ref else c
                            for c in out.channels]
    return out


SAFETY_KEYS = ("limit", "velocity_limit", "ramp")
"""Binding keys the command line can set (``--limit``, ``--velocity-limit``, ``--ramp``)."""


def override(graph: Graph, ref: str, key: str, value: Any) -> None:
    """Set safety key ``key`` of the binding of ``ref`` in ``graph.hardware``, as if the
    file said so: :func:`bind` then checks it as it checks the file, and the graph a
    recording stores says which limit was in force.

    Parameters
    ----------
    graph : Graph
        The loaded graph (its ``hardware`` entry of the block is replaced, not edited).
    ref : str
        ``block`` (a short-form binding, or a block with one bound port) or ``block.port``.
    key : {'limit', 'velocity_limit', 'ramp'}
    value : float or list of float

    Raises
    ------
    GraphError
        If ``ref`` names no bound port.
    """
    block, _, port = ref.partition(".")
    bound = _bound_ports(graph)
    if block not in graph.hardware:
        raise GraphError(f"{key.replace('_', '-')} of {ref!r}: {block!r} is not bound to the "
                         f"card{suggest(block, list(graph.hardware))} Bound ports: "
                         f"{valid_list(bound)}")
    entry = graph.hardware[block]
    entry = {"channel": entry} if isinstance(entry, str) else dict(entry)
    if "channel" in entry:                      # the short form: one port
        facing = entry.get("port") or _facing_port(graph, block, entry, Where(graph.where.file))
        if port not in ("", facing):
            raise GraphError(f"{key.replace('_', '-')} of {ref!r}: {block!r} binds port "
                             f"{facing!r} only; write {block} or {block}.{facing}", block=block)
        entry[key] = value
    else:
        ports = [k for k in entry if k not in BLOCK_KEYS]
        if not port and len(ports) == 1:
            port = ports[0]
        if port not in ports:
            raise GraphError(f"{key.replace('_', '-')} of {ref!r}: name one bound port of "
                             f"{block!r}: {valid_list(f'{block}.{p}' for p in ports)}",
                             block=block)
        spec = entry[port]
        entry[port] = dict({"channel": spec} if isinstance(spec, str) else spec, **{key: value})
    graph.hardware[block] = entry


def _bound_ports(graph: Graph) -> list[str]:
    """``block`` or ``block.port`` of every binding of the ``hardware:`` section."""
    out = []
    for block, entry in graph.hardware.items():
        if isinstance(entry, dict) and "channel" not in entry:
            out += [f"{block}.{p}" for p in entry if p not in BLOCK_KEYS]
        else:
            out.append(block)
    return out


def _block(graph: Graph, block: str, entry: Any, lines: _Lines, out: Bindings) -> None:
    where = lines.at(block)
    b = graph.nodes[block].block
    if isinstance(entry, str):
        entry = {"channel": entry}
    if not isinstance(entry, dict):
        raise GraphError(f"hardware binding of {block!r} must be a mapping, e.g. "
                         f"{{channel: Dev1/ao0, newtons_per_volt: 6.0}} or per port "
                         f"{{port: {{channel: ...}}}}; got {entry!r}", where, block=block)
    entry = dict(entry)
    enable = entry.pop("enable", None)
    if "channel" in entry:
        port = entry.pop("port", None) or _facing_port(graph, block, entry, where)
        if port not in b.inputs and port not in b.outputs:
            raise GraphError(f"hardware {block!r}: block {block!r} ({type(b).__name__}) has no "
                             f"port {port!r}{suggest(port, [*b.inputs, *b.outputs])} Ports: "
                             f"{valid_list([*b.inputs, *b.outputs])}", lines.at(block, "port"),
                             block=block, port=port)
        _channel(graph, block, port, entry, lines.at(block), out)
    else:
        ports = list(dict.fromkeys([*b.inputs, *b.outputs]))
        for port, spec in entry.items():
            if port not in ports:
                raise GraphError(f"hardware {block!r}: {port!r} is neither a port of {block!r} "
                                 f"({type(b).__name__}) nor a binding key"
                                 f"{suggest(port, [*ports, *CHANNEL_KEYS, *BLOCK_KEYS])} Ports: "
                                 f"{valid_list(ports)}; short-form keys: "
                                 f"{', '.join(CHANNEL_KEYS)}; block keys: enable",
                                 lines.at(block, port), block=block, port=port)
            if isinstance(spec, str):
                spec = {"channel": spec}
            if not isinstance(spec, dict):
                raise GraphError(f"hardware {block}.{port} must be a mapping such as "
                                 f"{{channel: Dev1/ai0, scale: 10.0}}, got {spec!r}",
                                 lines.at(block, port), block=block, port=port)
            _channel(graph, block, port, dict(spec), lines.at(block, port), out)
    if enable is not None:
        _enable(block, enable, lines.at(block, "enable"), out)


def _facing_port(graph: Graph, block: str, spec: dict, where: Where) -> str:
    """The port the short form binds: by the channel's direction, then the scale's unit."""
    b = graph.nodes[block].block
    physical = spec.get("channel")
    is_output = isinstance(physical, str) and bool(PHYSICAL["ao"].match(physical))
    ports = b.inputs if is_output else b.outputs
    found = [p for p, s in ports.items() if s.shape == (1,) and s.dtype == "f8"]
    alias = next((SCALE_KEYS[k] for k in SCALE_KEYS if k in spec and SCALE_KEYS[k]), None)
    if len(found) > 1 and alias:
        found = [p for p in found if ports[p].unit and _dim(ports[p].unit) == _dim(alias)]
    if len(found) != 1:
        side = "inputs (commands)" if is_output else "outputs (measurements)"
        raise GraphError(f"hardware {block!r}: the short form binds the one scalar float port "
                         f"that matches the channel, but {block!r} ({type(b).__name__}) has "
                         f"{len(found) or 'no'} such {side}"
                         + (f" ({', '.join(found)})" if found else "")
                         + f"; add 'port: NAME' or bind per port "
                         f"({valid_list([*b.inputs, *b.outputs])})", where, block=block)
    return found[0]


def _number(value: Any, what: str, where: Where, block: str, port: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise GraphError(f"hardware {block}.{port}: {what} must be a finite number, got "
                         f"{value!r}", where, block=block, port=port)
    return float(value)


def _pair(value: Any, what: str, where: Where, block: str, port: str,
          symmetric: bool) -> tuple[float, float]:
    if symmetric and not isinstance(value, (list, tuple)):
        v = abs(_number(value, what, where, block, port))
        return -v, v
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise GraphError(f"hardware {block}.{port}: {what} must be [low, high]"
                         + (" or a number L for [-L, L]" if symmetric else "")
                         + f", got {value!r}", where, block=block, port=port)
    lo, hi = (_number(v, what, where, block, port) for v in value)
    if not lo < hi:
        raise GraphError(f"hardware {block}.{port}: {what} [{lo:g}, {hi:g}] must have low < high",
                         where, block=block, port=port)
    return lo, hi


def _kind(physical: Any, direction: str, block: str, port: str, where: Where) -> str:
    kinds = ("ao",) if direction == "in" else ("ai", "ci_encoder")
    if not isinstance(physical, str):
        raise GraphError(f"hardware {block}.{port}: channel must be a string such as "
                         f"{EXAMPLE[kinds[0]]}, got {physical!r}", where, block=block, port=port)
    for kind, pattern in PHYSICAL.items():
        if pattern.match(physical):
            if kind not in kinds:
                role = ("an input of the block (a command the controller drives): bind it to an "
                        "analog output such as Dev1/ao0" if direction == "in" else
                        "an output of the block (a measurement): bind it to an analog input "
                        "such as Dev1/ai0 or an encoder counter such as Dev1/ctr0")
                raise GraphError(f"hardware {block}.{port}: {physical} is a {kind} channel, but "
                                 f"{block}.{port} is {role}", where, block=block, port=port)
            _check_numbers(physical, kind, where, block, port)
            return kind
    raise GraphError(f"hardware {block}.{port}: {physical!r} is not a physical channel; write "
                     f"DEVICE/aiN, DEVICE/aoN, DEVICE/ctrN or DEVICE/portP/lineL, e.g. "
                     f"{EXAMPLE[kinds[0]]}", where, block=block, port=port)


def _check_numbers(physical: str, kind: str, where: Where, block: str, port: str | None) -> None:
    numbers = [int(n) for n in re.findall(r"\d+", physical.split("/", 1)[1])]
    if any(n > top for n, top in zip(numbers, HIGHEST[kind])):
        valid = "/".join(f"0-{top}" for top in HIGHEST[kind])
        raise GraphError(f"hardware {block}{'.' + port if port else ''}: {physical} is beyond "
                         f"any NI card: {kind} channel numbers run {valid}", where,
                         block=block, port=port)


def _scale(spec: dict, kind: str, unit: str | None, decoding: int, block: str, port: str,
           where: Where) -> tuple[float, int]:
    """(port units per volt or per reported count, pulses per revolution or 0)."""
    encoder = kind == "ci_encoder"
    keys = ENCODER_SCALES if encoder else ANALOG_SCALES
    given = [k for k in SCALE_KEYS if k in spec]
    per = ("a count: scale (units per count), counts_per_unit, meters_per_count, "
           "radians_per_count or pulses_per_rev (angular encoder)" if encoder else
           "a volt: scale (units per volt), volts_per_unit, "
           + ", ".join(k for k in ANALOG_SCALES if k.endswith("_per_volt")))
    if len(given) != 1:
        raise GraphError(f"hardware {block}.{port}: give exactly one scale per {per}"
                         + (f"; got {', '.join(given)}" if given else ""), where,
                         block=block, port=port)
    key = given[0]
    if key not in keys:
        raise GraphError(f"hardware {block}.{port}: {key} does not apply to a {kind} channel; "
                         f"give its scale per {per}", where, block=block, port=port)
    value = _number(spec[key], key, where, block, port)
    if value == 0.0:
        raise GraphError(f"hardware {block}.{port}: {key} must not be 0", where,
                         block=block, port=port)
    alias_unit = SCALE_KEYS[key]
    if alias_unit and unit is not None and _dim(unit) != _dim(alias_unit):
        raise GraphError(f"hardware {block}.{port}: {key} is for ports in {alias_unit}, but "
                         f"{block}.{port} is in {unit!r}; use 'scale' ({unit} per "
                         f"{'count' if encoder else 'volt'}) or "
                         f"'{'counts' if encoder else 'volts'}_per_unit'", where,
                         block=block, port=port)
    if key == "pulses_per_rev":
        if value != int(value) or value < 1:
            raise GraphError(f"hardware {block}.{port}: pulses_per_rev must be a whole number "
                             f">= 1 (encoder cycles per revolution), got {value:g}", where,
                             block=block, port=port)
        return 2.0 * math.pi / (value * decoding), int(value)
    return (1.0 / value if key in INVERSE_SCALES else value), 0


def _decoding(spec: dict, kind: str, block: str, port: str, where: Where) -> int:
    if "decoding" in spec and kind != "ci_encoder":
        raise GraphError(f"hardware {block}.{port}: decoding applies to encoder channels "
                         f"(DEVICE/ctrN), not to a {kind} channel", where, block=block, port=port)
    name = spec.get("decoding", "X4")
    if name not in DECODINGS:
        raise GraphError(f"hardware {block}.{port}: decoding must be X1, X2 or X4 (counts per "
                         f"encoder cycle: 1, 2 or 4), got {name!r}", where, block=block, port=port)
    return DECODINGS[name]


def _terminal(spec: dict, kind: str, block: str, port: str, where: Where) -> str:
    if "terminal" in spec and kind != "ai":
        raise GraphError(f"hardware {block}.{port}: terminal applies to analog inputs "
                         f"(DEVICE/aiN), not to a {kind} channel", where, block=block, port=port)
    name = spec.get("terminal", "DEFAULT")
    if not isinstance(name, str) or name.upper() not in TERMINALS:
        raise GraphError(f"hardware {block}.{port}: terminal must be one of "
                         f"{', '.join(TERMINALS)} (NI-DAQmx terminal configurations), got "
                         f"{name!r}", where, block=block, port=port)
    return name.upper()


def _dim(unit: str) -> tuple[int, ...]:
    try:
        return dimension(unit)
    except UnitError:
        return ()


def _channel(graph: Graph, block: str, port: str, spec: dict, where: Where,
             out: Bindings) -> None:
    b = graph.nodes[block].block
    unknown = [k for k in spec if k not in CHANNEL_KEYS]
    if unknown:
        raise GraphError(f"hardware {block}.{port}: unknown key {unknown[0]!r}"
                         f"{suggest(unknown[0], CHANNEL_KEYS)} Valid keys: "
                         f"{', '.join(CHANNEL_KEYS)}", where, block=block, port=port)
    if "channel" not in spec:
        raise GraphError(f"hardware {block}.{port}: missing 'channel' (e.g. Dev1/ai0)", where,
                         block=block, port=port)
    direction = "in" if port in b.inputs else "out"
    if port in b.inputs and port in b.outputs:      # an input and an output share the name
        is_ao = isinstance(spec["channel"], str) and bool(PHYSICAL["ao"].match(spec["channel"]))
        direction = "in" if is_ao else "out"
    pspec = b.inputs[port] if direction == "in" else b.outputs[port]
    if pspec.shape != (1,) or pspec.dtype != "f8":
        raise GraphError(f"hardware {block}.{port} is {pspec.describe()}; only scalar float "
                         "ports (shape (1,), f8) can be bound to a channel", where,
                         block=block, port=port)
    kind = _kind(spec["channel"], direction, block, port, where)
    unit = pspec.unit
    decoding = _decoding(spec, kind, block, port, where)
    terminal = _terminal(spec, kind, block, port, where)
    low, high = _pair(spec.get("range", [-CARD_VOLTS, CARD_VOLTS]), "range", where, block, port,
                      symmetric=False)
    if kind != "ci_encoder" and (low < -CARD_VOLTS or high > CARD_VOLTS):
        raise GraphError(f"hardware {block}.{port}: range [{low:g}, {high:g}] V exceeds the "
                         f"card's +-{CARD_VOLTS:g} V", where, block=block, port=port)
    custom = _custom(spec, kind, low, high, block, port, where)
    scale, pulses = (0.0, 0) if custom else _scale(spec, kind, unit, decoding, block, port,
                                                   where)
    offset = _number(spec.get("offset", 0.0), "offset", where, block, port)
    ref = f"{block}.{port}"
    if "limit" in spec:
        out.limits[ref] = _pair(spec["limit"], "limit", where, block, port, symmetric=True)
    if "velocity_limit" in spec:
        if direction != "out" or not unit or _dim(unit) not in POSITION_DIMS:
            raise GraphError(f"hardware {ref}: velocity_limit applies to a measured position "
                             f"(a port in {', '.join(POSITION_UNITS)}: the limit is in that unit "
                             f"per s), not to {ref} ("
                             f"{'a command' if direction == 'in' else 'a measurement'} in "
                             f"{unit or 'no unit'})", where, block=block, port=port)
        limit = _number(spec["velocity_limit"], "velocity_limit", where, block, port)
        if not limit > 0:
            raise GraphError(f"hardware {ref}: velocity_limit must be > 0 {unit}/s (it trips "
                             f"the safety stop above it), got {limit:g}", where, block=block,
                             port=port)
        out.velocity_limits[ref] = limit
    if "ramp" in spec or kind == "ao":
        if kind != "ao":
            raise GraphError(f"hardware {ref}: ramp applies to analog outputs (commands)", where,
                             block=block, port=port)
        ramp = _number(spec.get("ramp", DEFAULT_RAMP), "ramp", where, block, port)
        if ramp < 0:
            raise GraphError(f"hardware {ref}: ramp must be >= 0 s", where, block=block, port=port)
        out.ramps[ref] = ramp
    if "tare" in spec:
        if kind != "ai":
            raise GraphError(f"hardware {ref}: tare applies to analog inputs (a force sensor "
                             f"on DEVICE/aiN), not to a {kind} channel", where, block=block,
                             port=port)
        seconds = _number(spec["tare"], "tare", where, block, port)
        if not 0 < seconds <= 10:
            raise GraphError(f"hardware {ref}: tare is the time in s to average the input at "
                             f"arm time, in (0, 10], got {seconds:g}", where, block=block,
                             port=port)
        out.tares[ref] = seconds
    if "home" in spec:
        if kind != "ci_encoder":
            raise GraphError(f"hardware {ref}: home applies to encoders (DEVICE/ctrN), not to a "
                             f"{kind} channel", where, block=block, port=port)
        out.homes[ref] = spec["home"]          # checked by _home once every channel is bound
    z_index, z_phase, width = _encoder_extras(spec, kind, scale, offset, decoding, unit, ref,
                                              out.velocity_limits.get(ref), where)
    out.channels.append(Channel(ref, kind, spec["channel"], scale, offset, low, high, unit or "",
                                decoding=decoding, pulses_per_rev=pulses, terminal=terminal,
                                z_index=z_index, z_phase=z_phase, filter=width, custom=custom))
    out.where[ref] = where


def _custom(spec: dict, kind: str, low: float, high: float, block: str, port: str,
            where: Where) -> scales.Scale | None:
    """The channel's custom scale (``polynomial`` or ``table``), checked; None if linear."""
    given = [k for k in CUSTOM_SCALES if k in spec]
    if not given:
        return None
    if kind not in ("ai", "ao"):
        raise GraphError(f"hardware {block}.{port}: {given[0]} scales apply to analog channels "
                         f"(DEVICE/aiN, DEVICE/aoN), not to a {kind} channel: give its scale "
                         f"per count", where, block=block, port=port)
    others = [k for k in (*SCALE_KEYS, *CUSTOM_SCALES, "offset") if k in spec and k != given[0]]
    if others:
        raise GraphError(f"hardware {block}.{port}: {given[0]} is the whole scale (its constant "
                         f"term is the offset); remove {', '.join(others)}", where, block=block,
                         port=port)
    try:
        return scales.parse(given[0], spec[given[0]], low, high)
    except ValueError as e:
        raise GraphError(f"hardware {block}.{port}: {e}", where, block=block, port=port) from None


def _encoder_extras(spec: dict, kind: str, scale: float, offset: float, decoding: int,
                    unit: str | None, ref: str, velocity_limit: float | None,
                    where: Where) -> tuple[int | None, str, float]:
    """(Z index reset count or None, Z phase, filter width in s) of an encoder binding."""
    block, port = ref.split(".")
    given = [k for k in ("z_index", "z_phase", "filter") if k in spec]
    if given and kind != "ci_encoder":
        raise GraphError(f"hardware {ref}: {given[0]} applies to encoder channels (DEVICE/ctrN), "
                         f"not to a {kind} channel", where, block=block, port=port)
    z_index = None
    if "z_index" in spec:
        z_index = round((_number(spec["z_index"], "z_index", where, block, port) - offset) / scale)
    phase = spec.get("z_phase", "AHIGH_BHIGH")
    if phase not in Z_PHASES or ("z_phase" in spec and z_index is None):
        raise GraphError(f"hardware {ref}: z_phase must be one of {', '.join(Z_PHASES)} (the A/B "
                         f"state of the Z reset), with z_index set; got {phase!r}", where,
                         block=block, port=port)
    width = 0.0
    if "filter" in spec:
        width = _number(spec["filter"], "filter", where, block, port)
        if not 0 < width <= 1:
            raise GraphError(f"hardware {ref}: filter is the digital filter's minimum pulse width "
                             f"in s, in (0, 1], got {width:g}", where, block=block, port=port)
        fastest = filter_rate(width) / (4 / decoding) * abs(scale)
        if velocity_limit is not None and fastest < velocity_limit:
            raise GraphError(f"hardware {ref}: filter {width:g} s passes at most "
                             f"{filter_rate(width):.4g} quadrature edges/s = {fastest:.4g} {unit}/s "
                             f"(an A pulse lasts two edges), less than the velocity limit "
                             f"{velocity_limit:g} {unit}/s: counts would be lost before it trips; "
                             f"shorten the filter below {2 / (velocity_limit / abs(scale) * 4 / decoding):.3g} s",
                             where, block=block, port=port)
    return z_index, phase, width


def _home(ref: str, spec: Any, out: Bindings) -> Home:
    """The ``home:`` mapping of encoder ``ref``, checked against the other bindings."""
    where = out.where[ref]
    block, port = ref.split(".")
    form = ("home must be a mapping {command: BLOCK or BLOCK.PORT of an analog output, "
            "drive: COMMAND (its sign: towards the stop), at: POSITION OF THE STOP, "
            "settle: S, timeout: S, travel: DISTANCE, to: stop or index}")
    if not isinstance(spec, dict):
        raise GraphError(f"hardware {ref}: {form}; got {spec!r}", where, block=block, port=port)
    unknown = [k for k in spec if k not in HOME_KEYS]
    if unknown or "command" not in spec or "drive" not in spec:
        what = (f"unknown key {unknown[0]!r}{suggest(unknown[0], HOME_KEYS)}" if unknown else
                f"'{'command' if 'command' not in spec else 'drive'}' is missing")
        raise GraphError(f"hardware {ref}: home: {what} ({form})", where, block=block, port=port)
    commands = [c for c in out.channels if c.kind == "ao"]
    name = spec["command"]
    found = [c for c in commands if isinstance(name, str) and name in (c.port, c.port.split(".")[0])]
    if len(found) != 1:
        raise GraphError(f"hardware {ref}: home command {name!r} is not one bound analog output; "
                         f"bound: {valid_list(c.port for c in commands)}", where, block=block,
                         port=port)
    cmd = found[0]
    enc = next(c for c in out.channels if c.port == ref)
    values = {k: _number(spec.get(k, HOME_DEFAULTS.get(k)), f"home {k}", where, block, port)
              for k in ("drive", "at", "settle", "timeout")}
    drive = values["drive"]
    lo, hi = out.limits.get(cmd.port, (-math.inf, math.inf))
    if drive == 0 or not lo < drive < hi:
        raise GraphError(f"hardware {ref}: home drive {drive:g} {cmd.unit} must be nonzero (its "
                         f"sign points to the stop) and within {cmd.port}'s limit "
                         f"[{lo:g}, {hi:g}] {cmd.unit}", where, block=block, port=port)
    for k in ("settle", "timeout"):
        if not values[k] > 0:
            raise GraphError(f"hardware {ref}: home {k} must be > 0 s, got {values[k]:g}", where,
                             block=block, port=port)
    to = spec.get("to", "stop")
    if to not in TARGETS:
        raise GraphError(f"hardware {ref}: home to must be 'stop' (the end stop, where it stands "
                         f"still, reads 'at') or 'index' (the first Z index pulse on the way "
                         f"reads z_index); got {to!r}", where, block=block, port=port)
    if to == "index":
        _index_home(ref, spec, enc, where)
    stroke = out.limits.get(ref)
    if to == "stop" and stroke is not None and not stroke[0] < values["at"] < stroke[1]:
        raise GraphError(f"hardware {ref}: home at {values['at']:g} {enc.unit} is outside the "
                         f"stroke limit [{stroke[0]:g}, {stroke[1]:g}] {enc.unit}: the first tick "
                         f"would trip; put the stop inside the limit", where, block=block,
                         port=port)
    if "travel" in spec:
        travel = _number(spec["travel"], "home travel", where, block, port)
    elif stroke is not None:
        travel = stroke[1] - stroke[0]
    else:
        raise GraphError(f"hardware {ref}: home needs 'travel' (the most the carriage may move "
                         f"while homing, in {enc.unit}) when {ref} has no stroke limit", where,
                         block=block, port=port)
    if not travel > 0:
        raise GraphError(f"hardware {ref}: home travel must be > 0 {enc.unit}, got {travel:g}",
                         where, block=block, port=port)
    return Home(ref, cmd.port, drive, values["at"], values["settle"], values["timeout"], travel,
                to)


def _index_home(ref: str, spec: dict, enc: Channel, where: Where) -> None:
    """Homing to the index needs the encoder's Z reset, and takes its position from it."""
    block, port = ref.split(".")
    if enc.z_index is None:
        raise GraphError(f"hardware {ref}: home to: index needs the encoder's Z index reset: "
                         f"add z_index (the position the index reads, in {enc.unit})", where,
                         block=block, port=port)
    if "at" in spec:
        raise GraphError(f"hardware {ref}: home to: index takes the position from z_index "
                         f"({enc.offset + enc.scale * enc.z_index:g} {enc.unit}); 'at' is the "
                         f"stop's position for to: stop; remove it", where, block=block,
                         port=port)
    if abs(enc.z_index) > SEEK_RANGE:
        raise GraphError(f"hardware {ref}: z_index is count {enc.z_index}, beyond +-{SEEK_RANGE} "
                         f"counts: homing to the index could not tell the reset from the "
                         f"counts before it; choose an offset nearer the index", where,
                         block=block, port=port)


def _enable(block: str, spec: Any, where: Where, out: Bindings) -> None:
    line, active = (spec, "high") if not isinstance(spec, dict) else (
        spec.get("line"), spec.get("active", "high"))
    unknown = [k for k in spec if k not in ENABLE_KEYS] if isinstance(spec, dict) else []
    if unknown or not isinstance(line, str) or not PHYSICAL["do"].match(line):
        raise GraphError(f"hardware {block}: enable must be a digital output line such as "
                         f"Dev1/port0/line0, or {{line: Dev1/port0/line0, active: low}} for an "
                         f"active-low amplifier enable input; got {spec!r}", where, block=block)
    if active not in ("high", "low"):
        raise GraphError(f"hardware {block}: enable active must be 'high' (the amplifier runs "
                         f"while the line is high) or 'low'; got {active!r}", where, block=block)
    _check_numbers(line, "do", where, block, None)
    ref = f"{block}.enable"
    safe = 1.0 if active == "low" else 0.0
    out.channels.append(Channel(ref, "do", line, 1.0, 0.0, 0.0, 1.0, "", safe))
    out.where[ref] = where


def check_consistency(graph: Graph, bindings: Bindings) -> None:
    """Check scales against the simulated twins (an encoder's resolution).

    Raises
    ------
    GraphError
        When an encoder's ``meters_per_count`` differs from its twin's ``resolution``.
    """
    for c in bindings.channels:
        if c.kind != "ci_encoder":
            continue
        block, port = c.port.split(".")
        twin = graph.nodes[block].block
        resolution = twin.values.get("resolution")
        if resolution is not None and abs(c.scale - resolution) > 1e-9 * abs(resolution):
            raise GraphError(f"hardware {c.port}: meters_per_count {c.scale:g} m differs from "
                             f"the resolution {resolution:g} m of its twin {block!r} "
                             f"({type(twin).__name__}); make them equal", bindings.where[c.port],
                             block=block, port=port)
