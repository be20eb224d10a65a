"""The arm sequence: what is checked and prepared before a real-time run enables the outputs.

:func:`arm` runs, for every device the graph's bindings name, in this order:

1. **product and channels**: the device's product type, and every bound
   channel and line looked up among the device's physical channels (from
   NI-DAQmx for a real card, from :mod:`hapflow.hil.products` for the
   simulated one).  A channel the card does not have refuses the graph with
   the file and line of its binding, the port, and what the product has;
2. **self-test** of the device where NI-DAQmx supports it (DAQmxSelfTestDevice);
   a failure refuses the run.

Then the runner opens the tasks, drives the outputs to their safe state,
arms the hardware watchdog and starts the card; on the running card, before
tick 0 (:mod:`hapflow.hil.homing`), it tares the analog inputs bound with
``tare`` (outputs safe) and homes the encoders bound with ``home`` (driven
against their stop until still, that count then reads the stop's position),
so stroke limits are relative to the mechanics.  An encoder without ``home``
counts from 0 where the carriage sits when the card starts: its positions
and limits are relative to that.  Each step is one line of the log that
:func:`arm` returns (the runner appends the tare and homing lines); the
runner stores it in the recording (``arm_log``) and ``hapflow hil arm``
prints the checks (it moves nothing, so it neither tares nor homes).
"""
from __future__ import annotations

from hapflow.errors import GraphError

from .backend import Backend
from .bindings import Bindings
from .homing import plan
from .products import PRODUCTS


def arm(backend: Backend, bindings: Bindings) -> list[str]:
    """Check the bound channels against the devices and self-test them; return the log.

    Raises
    ------
    GraphError
        When a bound channel or line does not exist on its device, naming the
        binding's file and line, the port, and the channels the product has.
    DaqError
        When a device is missing, cannot be queried or fails its self-test.
    """
    log = []
    channels = bindings.channels
    for device in dict.fromkeys(c.device for c in channels):
        product, present = backend.device(device)
        known = PRODUCTS.get(product)
        for c in (c for c in channels if c.device == device):
            if c.physical not in present[c.kind]:
                block, port = c.port.split(".")
                raise GraphError(f"hardware {c.port}: {device} ({product}) has no {c.kind} "
                                 f"channel {c.physical.split('/', 1)[1]!r}; it has "
                                 f"{_span(present[c.kind])}", bindings.where[c.port],
                                 block=block, port=port)
            problem = known.terminal_problem(c.physical.split("/", 1)[1], c.terminal) \
                if known is not None and c.kind == "ai" else ""
            if problem:
                block, port = c.port.split(".")
                raise GraphError(f"hardware {c.port}: terminal {c.terminal}: {problem}",
                                 bindings.where[c.port], block=block, port=port)
        if known is not None:
            _check_filters(known, [c for c in channels if c.device == device and c.filter], bindings)
        bound = [c for c in channels if c.device == device]
        log.append(f"{device}: {product}; {len(bound)} bound channels present "
                   f"({', '.join(c.physical.split('/', 1)[1] for c in bound)})")
        log.append(f"{device}: self-test " + ("passed" if backend.self_test(device) else
                                              "not supported by the device"))
    free = [c.physical for c in channels if c.kind == "ci_encoder" and c.port not in bindings.homes]
    if free:
        log.append(f"encoder zero: {', '.join(free)} count from 0 where the carriage sits when "
                   "the card starts (no home: positions and stroke limits are relative to it)")
    for h in bindings.homes.values():
        log.append(f"home {h.port}: at start, {plan(h)}")
    for port, seconds in bindings.tares.items():
        log.append(f"tare {port}: at start, averaged over {seconds:g} s with the outputs safe")
    return log


def _check_filters(product, encoders: list, bindings: Bindings) -> None:
    """One custom digital filter width per device (besides the product's fixed ones)."""
    custom = [c for c in encoders if product.custom_filter(c.filter)]
    for c in custom[1:]:
        if abs(c.filter - custom[0].filter) > 1e-12:
            block, port = c.port.split(".")
            fixed = ", ".join(f"{w * 1e6:g} us" for w in product.filters)
            raise GraphError(f"hardware {c.port}: filter {c.filter:g} s: the {product.name} has one "
                             f"custom digital filter width per device and {custom[0].port} uses "
                             f"{custom[0].filter:g} s; use the same, or a fixed width ({fixed})",
                             bindings.where[c.port], block=block, port=port)


def _span(names: list[str]) -> str:
    """``ai0 .. ai15`` style summary of physical channel names, per port for lines."""
    local = [n.split("/", 1)[1] for n in names]
    if not local:
        return "none"
    groups: dict[str, list[str]] = {}
    for name in local:
        head, _, tail = name.rpartition("/")
        groups.setdefault(head, []).append(tail)
    return ", ".join(f"{head + '/' if head else ''}{tails[0]}..{tails[-1]}"
                     if len(tails) > 1 else f"{head + '/' if head else ''}{tails[0]}"
                     for head, tails in groups.items())
