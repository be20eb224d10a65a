"""What a DAQ product has: its physical channels, as NI specifies them.

The simulated cards (``--daq sim`` and the gRPC device server) look like a
PCIe-6351 (NI X Series: 16 analog inputs, 2 analog outputs, 4 counters,
24 digital lines -- port0 line0..7 hardware-timed, port1 and port2 line0..7
on the PFI 0-15 pins -- and a watchdog timer that covers the digital lines
only).  A real card answers the same questions through NI-DAQmx (its product
type and physical channel lists), so the arm sequence
(:mod:`hapflow.hil.arm`) checks a graph against either the same way.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Product:
    """The physical channels of one DAQ product (without the device prefix).

    Attributes
    ----------
    name : str
        NI product type, e.g. ``"PCIe-6351"``.
    channels : dict
        Channel kind (``ai``, ``ao``, ``ci_encoder``, ``do``) -> physical
        channel names, e.g. ``("ai0", ...)``, ``("port0/line0", ...)``.
    self_test : bool
        Whether NI-DAQmx can self-test it (DAQmxSelfTestDevice).
    terminals : tuple of str
        Analog input terminal configurations it has (nidaqmx
        ``TerminalConfiguration`` names; ``DEFAULT`` is always accepted).
    diff_pairs : int
        Differential pairs: ``aiN`` (N < diff_pairs) pairs with ``aiN+diff_pairs``,
        which cannot be differential itself.
    filters : tuple of float
        Fixed digital filter minimum pulse widths (s) of its counter inputs; besides
        them one custom width per device (NI-DAQmx Help, "Digital Filtering
        Considerations for X Series": 90 ns, 5.12 us, 2.56 ms; "the custom filter
        value must be the same for all lines across the device").
    """

    name: str
    channels: dict[str, tuple[str, ...]]
    self_test: bool = True
    terminals: tuple[str, ...] = ("RSE", "NRSE", "DIFF")
    diff_pairs: int = 8
    filters: tuple[float, ...] = (90e-9, 5.12e-6, 2.56e-3)

    def custom_filter(self, width: float) -> bool:
        """Whether a digital filter ``width`` (s) is a custom one, not a fixed setting."""
        return not any(abs(width - f) <= 1e-9 * f for f in self.filters)

    def terminal_problem(self, local: str, terminal: str) -> str:
        """Why analog input ``local`` (``"ai3"``) cannot use ``terminal``; '' when it can."""
        if terminal == "DEFAULT":
            return ""
        if terminal not in self.terminals:
            return (f"the {self.name} has no {terminal} analog inputs; its terminal "
                    f"configurations: {', '.join(self.terminals)} (or DEFAULT)")
        if terminal == "DIFF" and int(local[2:]) >= self.diff_pairs:
            return (f"{local} is the negative input of ai{int(local[2:]) - self.diff_pairs}'s "
                    f"differential pair on the {self.name}: a differential input is one of "
                    f"ai0..ai{self.diff_pairs - 1}")
        return ""

    def on(self, device: str) -> dict[str, list[str]]:
        """The physical channels of kind -> ``DEVICE/channel`` names on ``device``."""
        return {kind: [f"{device}/{p}" for p in names] for kind, names in self.channels.items()}


PCIE_6351 = Product("PCIe-6351", {
    "ai": tuple(f"ai{i}" for i in range(16)),
    "ao": ("ao0", "ao1"),
    "ci_encoder": tuple(f"ctr{i}" for i in range(4)),
    "do": tuple(f"port{p}/line{i}" for p in range(3) for i in range(8)),
})
"""NI PCIe-6351 (X Series) specifications: 16 AI (RSE, NRSE, or 8 differential pairs
aiN/aiN+8), 2 AO, 4 counters, 3 ports of 8 lines."""

PRODUCTS = {p.name: p for p in (PCIE_6351,)}
"""Products whose capabilities hapflow knows beyond NI-DAQmx's lists (terminal configurations)."""
