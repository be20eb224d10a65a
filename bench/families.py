"""Graph families for the compile-time benchmark (``bench/compile.py``).

:func:`replicated` chains ``n/10`` structurally identical copies of one 10-block,
three-rate position loop; :func:`distinct` draws ``n`` blocks of every eligible
library type, wired at random with delayed feedback and three rates.  Run
``python bench/families.py`` to print block counts and ``Graph.check`` times.
"""
from __future__ import annotations

import bisect
import math
import time
from collections import Counter
from typing import Any

import numpy as np

import hapflow
from hapflow import registry
from hapflow.block import Block
from hapflow.units import dimension

BASE = 4000.0
RATES = (4000.0, 1000.0, 250.0)
FEEDBACK = 0.2
SIZES = (10, 30, 100, 300, 1000)
AMP = 1e-3
_KF = dict(A=[1.0, 2.5e-4, 0.0, 1.0], H=[1.0, 0.0], Q=[1e-10, 0.0, 0.0, 1e-6], R=[1e-8])

EXCLUDED: dict[str, str] = {
    "MidiSink": "Python side (overrides drain/close): writes MIDI files and ports",
    "SoundSink": "Python side (overrides drain/close): plays or writes audio",
    "FlexibleLink": "a freely rotating mechanism: random torques at the family's 4 kHz RK4 step "
                    "spin it out of range within 1 s (graphs/flexible_link.yaml drives it "
                    "with the thesis's torques at 10 kHz)",
    "FlexibleLinkEKF": "FlexibleLink's observer: random angles and torques are no state of the "
                       "arm it linearises (graphs/flexible_link_ekf.yaml runs it on the arm)",
    "FlexibleLinkFull": "FlexibleLink with all 30 dofs: its 4.7 kHz mode needs RK4 steps of "
                        "0.05 ms, the family's 4 kHz step diverges "
                        "(graphs/flexible_link_truth_ekf.yaml runs it at 20 kHz)",
    "SwitchingGradientObserver": "reads a switching system's integer mode and its state; the "
                                 "family's sources make floats (tests/evals/test_adaptation.py "
                                 "runs it on SwitchingFirstOrder)",
    "SwitchingNewtonObserver": "reads a switching system's integer mode and switch times "
                               "(tests/evals/test_adaptation.py runs it on SwitchingFirstOrder)",
    "ExcavatorArm": "a 3.4 t arm under gravity needs its servo's 100 kN cylinder forces: with the "
                    "family's milli-newton inputs it falls through its joint range "
                    "(tests/evals/test_excavator.py runs it with ExcavatorServo)",
    "ExcavatorServo": "computed torque for the excavator arm, meaningless on random angles "
                      "(tests/evals/test_excavator.py)",
    "DiggingCycle": "the excavator's scenario source (tests/evals/test_excavator.py)",
}
"""Types left out of :func:`distinct` and why (any other ``has_drain()`` type is, too)."""

PARAMS: dict[str, dict[str, Any]] = {
    "BallOnPaddle": {}, "BouncingBall": {}, "DetentSwitch": {}, "EWLS": {}, "Encoder": {},
    "HardeningSpringDevice": {}, "Integrator": {}, "LinearMotor": {}, "Multisine": {},
    "PianoActionA": {}, "PianoActionB": {}, "ProbeKKF": {}, "Product": {}, "RestitutionObserver": {},
    "Saturation": {}, "SliderCrank": {}, "Sum": {}, "SwitchingFirstOrder": {}, "UnitDelay": {},
    "VirtualWall": {}, "ButterworthFilter": dict(order=2, cutoff=[50.0]),
    "Chirp": dict(amplitude=AMP, f_start=1.0, f_end=10.0), "Constant": dict(value=[AMP]),
    "Differentiator": dict(cutoff=5.0), "Gain": dict(gain=0.5), "ImpedanceHead": dict(cutoff=50.0),
    "ExtendedKalmanFilter": dict(model="pendulum", Q=[1e-6, 0.0, 0.0, 1e-4], R=[1e-4]),
    "KalmanFilter": dict(states=2, measurements=1, **_KF),
    "UnscentedKalmanFilter": dict(states=2, measurements=1, **_KF),
    "LeadLag": dict(f_zero=10.0, f_pole=50.0), "PIDFeedforward": dict(kp=100.0, kd=1.0, limit=10.0),
    "MassSpringDamper": dict(mass=1.0, damping=2.0, stiffness=100.0),
    "PiecewiseImpedance": dict(x=[-0.01, 0.01], k=[100.0, 200.0], f0=[0.0, 0.0]),
    "Admittance": dict(x=[-0.01, 0.01], m=[0.01, 0.01], b=[1.0, 1.0], k=[100.0, 200.0],
                       f0=[0.0, 0.0]),
    "PolynomialImpedance": dict(stiffness=[0.0, 100.0, 0.0, 1e6], damping=[1.0]),
    # 1 kg, a soft cubic: random wiring drives it with unbounded forces (seed 0: a piano
    # action's), and 10 g on a 1e6 N/m^3 cubic spring made distinct(300, 0) diverge
    "PolynomialAdmittance": dict(mass=1.0, stiffness=[0.0, 100.0, 0.0, 1e4], damping=[20.0]),
    "Sine": dict(amplitude=AMP, frequency=5.0), "Step": dict(time=1e-3, final=AMP),
    "TorqueMeter": dict(full_scale=1.0),
    # a motor with a load (1 kg m^2, 100 N m s/rad): random wiring gives it load torques of
    # kN m (seed 0: a motion-driven SliderCrank's, through a TorqueMeter); bare, its angle
    # ran away and, as a piano action's key, made distinct(1000, 0) diverge at 0.134 s
    "DCMotor": dict(load_inertia=1.0, damping=100.0),
    "SweptSine": dict(amplitude=AMP), "TransferFunction": dict(num=[0.1], den=[1.0, -0.9]),
    "Waypoints": dict(times=[0.0, 0.5], points=[0.0, AMP], unit="m"), "WhiteNoise": dict(std=AMP),
}
"""One valid, gentle parameter set per block type (absent: defaults; filters at most 50 Hz
so they also design at 250 Hz; sources and noise at 1e-3 so random wiring stays finite)."""


# ------------------------------------------------------------------ replicated
def _loop_blocks() -> list[tuple[str, Block, float | None]]:
    """The 10 blocks of one copy as (role, block, rate), in the order they are added."""
    b = registry.lookup
    a = math.exp(-2.0 * math.pi * 40.0 / 250.0)          # 40 Hz first-order low-pass at 250 Hz
    return [("ref", b("Sine")(amplitude=0.005, frequency=2.0, unit="m"), None),
            ("sum", b("Sum")(signs="++"), None),
            ("pid", b("PIDFeedforward")(kp=1000.0, kd=20.0, deriv_cutoff=100.0, mass_ff=0.5,
                                        limit=40.0), 1000.0),
            ("motor", b("LinearMotor")(bandwidth=25.0, peak_force=40.0), None),
            ("plant", b("MassSpringDamper")(mass=0.5, damping=5.0, stiffness=200.0), None),
            ("enc", b("Encoder")(resolution=5e-6), None),
            ("filt", b("TransferFunction")(num=[1.0 - a], den=[1.0, -a]), 250.0),
            ("delay", b("UnitDelay")(), 1000.0),
            ("gain", b("Gain")(gain=0.2), None),
            ("sat", b("Saturation")(lower=-0.01, upper=0.01), None)]


def _add_copy(g: hapflow.Graph, j: int) -> None:
    """Add copy ``j``; its set-point offset is the output of copy ``j-1`` (its own for j = 0)."""
    for role, block, rate in _loop_blocks():
        g.add(f"c{j}_{role}", block, rate=rate)
    c, prev = f"c{j}_", f"c{max(j - 1, 0)}_"
    for src, dst in (("ref.y", "sum.u1"), ("sum.y", "pid.ref_pos"), ("ref.dy", "pid.ref_vel"),
                     ("ref.ddy", "pid.ref_acc"), ("delay.y", "pid.meas_pos"),
                     ("pid.force_cmd", "motor.force_cmd"), ("motor.force", "plant.force"),
                     ("plant.pos", "enc.true_pos"), ("enc.pos", "filt.u"), ("filt.y", "delay.u"),
                     ("plant.pos", "gain.u"), ("gain.y", "sat.u")):
        g.wire(c + src, c + dst)
    g.wire(prev + "sat.y", c + "sum.u2")
    g.record(c + "plant.pos")


def replicated(n: int) -> hapflow.Graph:
    """``n/10`` chained copies of a 10-block, three-rate position loop.

    Each copy: Sine reference plus the previous copy's output (Sum; copy 0
    reads its own) -> PID (1 kHz) -> LinearMotor -> MassSpringDamper ->
    Encoder -> low-pass TransferFunction (250 Hz) -> UnitDelay (1 kHz) -> the
    PID's measurement; Gain (0.2) and Saturation of the position are the
    copy's output.  Blocks are named ``c{j}_{role}``; every copy adds the
    same types and parameters in the same order.

    Parameters
    ----------
    n : int
        Number of blocks, a positive multiple of 10.

    Returns
    -------
    hapflow.Graph
        Graph ``replicated_{n}`` at 4 kHz, duration 1 s, one position recorded per copy.

    Raises
    ------
    ValueError
        If ``n`` is not a positive multiple of 10.
    """
    if n <= 0 or n % 10:
        raise ValueError(f"n must be a positive multiple of 10, got {n}")
    g = hapflow.Graph(f"replicated_{n}", rate=BASE, duration=1.0)
    for j in range(n // 10):
        _add_copy(g, j)
    return g


# ------------------------------------------------------------------ distinct
def eligible_types() -> list[str]:
    """Library block types without a Python side and not in :data:`EXCLUDED`, sorted (blocks
    that tests or plug-ins register are left out)."""
    return [t for t in registry.names()
            if t not in EXCLUDED and not registry.lookup(t).has_drain()
            and registry.lookup(t).__module__.startswith("hapflow.blocks.")]


class _Builder:
    """Adds blocks to a graph, wiring each input as it goes and tracking output units."""

    def __init__(self, g: hapflow.Graph, rng: np.random.Generator):
        self.g, self.rng = g, rng
        self.outs: list[tuple[str, str, Any, str | None, int]] = []  # block, port, spec, unit, index
        # the outputs again by (shape, dtype), each with its unit's dimension: _matches runs for
        # every input over every earlier output (1.5 million candidates at N = 1000)
        self.kinds: dict[tuple, list[tuple[str, str, str | None, Any, int]]] = {}
        # what _matches found so far, by (shape, dtype, dimension, concrete), with how many
        # of that kind's outputs it has looked at: filtering every earlier output again for
        # each input was half of the time to build N = 1000 (and, for the delays' feedback,
        # a third of what was left)
        self.found: dict[tuple, tuple[list[tuple[str, str, str | None, Any, int]], int]] = {}
        self.pending: list[list] = []                # [delay, unit, index of the block it feeds]

    def _name(self, type_name: str) -> str:
        """A unique block name: the lower-case type and the block's index."""
        return f"{type_name.lower()}_{len(self.g.nodes)}"

    def _rate(self, block: Block) -> float | None:
        """A random rate for a discrete block without continuous state or events, else None."""
        discrete = "update" in block.kernels() and not (block.cstate or block.nguards)
        return float(self.rng.choice(RATES)) if discrete else None

    def _matches(self, spec: Any, unit: str | None, after: int = -1, concrete: bool = False
                 ) -> list[tuple[str, str, str | None, Any, int]]:
        """Outputs (of blocks added after index ``after``) that may drive input ``spec`` in
        ``unit``, as in :attr:`kinds`; the caller must not change the list."""
        want = None if unit is None else dimension(unit)

        def fits(u: str | None, dim: Any) -> bool:
            return (u is not None or not concrete) and (u is None or want is None or dim == want)
        outputs = self.kinds.get((spec.shape, spec.dtype), [])
        key = (spec.shape, spec.dtype, want, concrete)
        found, seen = self.found.get(key, ([], 0))
        found.extend(output for output in outputs[seen:] if fits(output[2], output[3]))
        self.found[key] = (found, len(outputs))
        # found is in the order of the blocks: the outputs after ``after`` are its tail
        first = bisect.bisect_right(found, after, key=lambda output: output[4])
        return found[first:] if first else found

    def _pick(self, found: list) -> tuple[str, str, str | None]:
        """A random output of ``found`` (of :meth:`_matches`): (block, port, unit)."""
        return found[self.rng.integers(len(found))][:3]

    def _source(self, spec: Any, unit: str | None) -> tuple[str, str, str | None]:
        """Add a small Sine in ``unit`` (a Constant for vectors) and return its output."""
        block = registry.lookup("Sine")(amplitude=AMP, frequency=5.0, unit=unit) \
            if spec.shape == (1,) else registry.lookup("Constant")(value=[AMP] * spec.size, unit=unit)
        return (*self.add(block, None)[0], unit)

    def _driver(self, spec: Any, unit: str | None) -> tuple[str, str, str | None]:
        """Choose (or create) the output driving an input: (block, port, unit)."""
        typed = self._matches(spec, unit, concrete=True)
        if typed and spec.shape == (1,) and self.rng.random() < FEEDBACK:
            return self._delay(unit if unit is not None else self._pick(typed)[2])
        found = (typed if unit is not None else []) or self._matches(spec, unit)
        return self._pick(found) if found else self._source(spec, unit)

    def _delay(self, unit: str) -> tuple[str, str, str]:
        """Add a UnitDelay in ``unit`` whose input :meth:`close_feedback` wires later."""
        delay, name = registry.lookup("UnitDelay")(), self._name("UnitDelay")
        self.g.add(name, delay, rate=self._rate(delay))
        self.pending.append([name, unit, None])
        return name, "y", unit

    def add(self, block: Block, rate: float | None) -> list[tuple[str, str]]:
        """Wire every input of ``block``, add it, and return its outputs."""
        srcs: dict[str, tuple[str, str, str | None]] = {}
        mark = len(self.pending)
        for port, spec in block.inputs.items():
            ref = spec.unit[1:] if spec.unit and spec.unit.startswith("=") else None
            srcs[port] = self._driver(spec, srcs[ref][2] if ref else spec.unit)
        name, index = self._name(type(block).__name__), len(self.g.nodes)
        self.g.add(name, block, rate=rate)
        for entry in self.pending[mark:]:
            entry[2] = index
        for port, (b, p, _) in srcs.items():
            self.g.wire(f"{b}.{p}", f"{name}.{port}")
        for port, o in block.outputs.items():
            ref = o.unit[1:] if o.unit and o.unit.startswith("=") else None
            unit = srcs[ref][2] if ref else o.unit
            self.outs.append((name, port, o, unit, index))
            self.kinds.setdefault((o.shape, o.dtype), []).append(
                (name, port, unit, None if unit is None else dimension(unit), index))
        return [(name, p) for p in block.outputs]

    def add_type(self, type_name: str, room: int) -> None:
        """Add a ``type_name`` block, or a Gain (Sine for the last slot) if it may not fit ``room``."""
        block = registry.lookup(type_name)(**PARAMS.get(type_name, {}))
        if 1 + len(block.inputs) > room:
            pad = "Gain" if room >= 2 and self.outs else "Sine"
            block = registry.lookup(pad)(**PARAMS[pad])
        self.add(block, self._rate(block))

    def close_feedback(self) -> None:
        """Wire each pending UnitDelay from a block added after its consumer (else from any)."""
        spec = registry.lookup("UnitDelay")().inputs["u"]
        for delay, unit, consumer in self.pending:
            b, p, _ = self._pick(self._matches(spec, unit, consumer, True)
                                 or self._matches(spec, unit, -1, True))
            self.g.wire(f"{b}.{p}", f"{delay}.u")


def distinct(n: int, seed: int = 0) -> hapflow.Graph:
    """``n`` blocks of every eligible library type, wired at random with delayed feedback.

    Types (:func:`eligible_types`, :data:`PARAMS`) come each once in shuffled
    order, then at random.  An input reads a random earlier output of its shape,
    dtype and unit (else a new small Sine), or with probability
    :data:`FEEDBACK` a UnitDelay of a later block's output.  Discrete blocks
    without continuous state or events run at 4000, 1000 or 250 Hz.  Sources
    and delays count towards ``n``; near the end, Gains (a Sine) pad it.

    Parameters
    ----------
    n : int
        Exact number of blocks, >= 1.
    seed : int
        Seed of ``numpy.random.default_rng`` (and of the graph's random sources).

    Returns
    -------
    hapflow.Graph
        Graph ``distinct_{n}_{seed}`` at 4 kHz, duration 1 s, three outputs recorded.

    Raises
    ------
    ValueError
        If ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    g = hapflow.Graph(f"distinct_{n}_{seed}", rate=BASE, duration=1.0, seed=seed)
    types = eligible_types()
    order = [types[k] for k in rng.permutation(len(types))]
    builder = _Builder(g, rng)
    while len(g.nodes) < n:
        pick = order.pop(0) if order else types[rng.integers(len(types))]
        builder.add_type(pick, n - len(g.nodes))
    builder.close_feedback()
    f8 = [(b, p) for b, p, o, u, k in builder.outs if o.dtype == "f8"]
    for k in rng.choice(len(f8), size=min(3, len(f8)), replace=False):
        g.record(f"{f8[k][0]}.{f8[k][1]}")
    return g


def _report(g: hapflow.Graph) -> None:
    """Print the graph's block counts by type and the time ``check()`` takes (best of 3)."""
    took = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        g.check()
        took = min(took, time.perf_counter() - start)
    counts = Counter(type(node.block).__name__ for node in g.nodes.values())
    print(f"{g.name}: {len(g.nodes)} blocks, {len(g.wires)} wires, check {took * 1e3:.1f} ms (best of 3)")
    print("  " + ", ".join(f"{t} {c}" for t, c in sorted(counts.items())))


if __name__ == "__main__":
    for size in SIZES:
        _report(replicated(size))
        _report(distinct(size))
