"""Block reference text generated from docstrings and declarations (``hapflow blocks``)."""
from __future__ import annotations

import inspect

from .block import Block, ParamError
from .params import REQUIRED


def _ports(block: Block | type[Block]) -> list[str]:
    lines = []
    for direction, ports in (("in", block.inputs), ("out", block.outputs)):
        for name, spec in ports.items():
            extra = ""
            if direction == "out" and spec.depends == "state":
                extra = ", state only"
            elif direction == "out" and spec.depends:
                extra = f", depends on {', '.join(spec.depends)}"
            lines.append(f"  {name:14s} {direction:3s} {spec.describe()}{extra}  {spec.doc}")
    return lines


def reference(cls: type[Block]) -> str:
    """Reference text of a block type: docstring, ports (at defaults), parameters, state."""
    out = [cls.__name__, "=" * len(cls.__name__), inspect.getdoc(cls) or "", ""]
    try:
        sample: Block | type[Block] = cls()
        note = "ports with default parameters:"
    except ParamError:
        sample, note = cls, "declared ports:"
    out += [note, *_ports(sample), "", "parameters:"]
    for name, spec in cls.params.items():
        kind = "live" if spec.live else "structural"
        default = "required" if spec.default is REQUIRED else f"default {spec.default!r}"
        unit = spec.unit or "-"
        out.append(f"  {name:18s} {kind:10s} [{unit}] {default}  {spec.doc}")
    out += ["", f"state: {sample.cstate} continuous, {sample.dstate} discrete, "
                f"{sample.istate} integer; {sample.nguards} event guard(s)"]
    return "\n".join(out)
