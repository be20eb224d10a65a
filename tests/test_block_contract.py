"""Contract every registered block keeps, present and future: its docstring documents its ports."""
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import hapflow.blocks  # noqa: F401 - registers the library
from hapflow import registry
from hapflow.block import Block, ParamError
from hapflow.params import Live
from hapflow.ports import In, Out
from hapflow.units import UnitError, dimension


def documented_ports(cls: type) -> dict[str, str]:
    """Port name -> its line in the ``Ports`` section of ``cls``'s docstring (``u1, u2, ...``
    documents every ``u<k>``)."""
    doc = inspect.getdoc(cls) or ""
    section = re.search(r"^Ports\n-+\n(.*?)(?:\n\n|\Z)", doc, re.S | re.M)
    out: dict[str, str] = {}
    for line in section.group(1).splitlines() if section else ():
        if line.startswith(" ") or " : " not in line:        # a continuation line
            continue
        for name in line.split(" : ")[0].split(","):
            out[name.strip()] = line
    return out


def port_problems(block: Block) -> list[str]:
    """What the docstring of ``block``'s class gets wrong about its ports (empty: none).

    Every declared port must be documented; a documented port the block does
    not declare must say when it exists (its line names a structural parameter,
    or says ``only``)."""
    cls = type(block)
    documented = documented_ports(cls)
    declared = [*block.inputs, *block.outputs]
    numbered = "u1" in documented and "..." in documented
    problems = [f"port {name!r} is not documented" for name in declared
                if name not in documented and not (numbered and re.fullmatch(r"u\d+", name))]
    structural = [n for n, spec in cls.params.items() if not spec.live]
    for name, line in documented.items():
        if name in declared or name == "..." or (numbered and re.fullmatch(r"u\d+", name)):
            continue
        if not any(re.search(rf"\b{re.escape(word)}\b", line) for word in [*structural, "only"]):
            problems.append(f"documented port {name!r} is not declared, and its line does not "
                            "say when it exists")
    return problems


DATA = Path(__file__).resolve().parent / "data"
_FILTER = dict(states=2, measurements=1, A=[1.0, 1e-3, 0.0, 1.0], H=[1.0, 0.0],
               Q=[1e-4, 0.0, 0.0, 1e-3], R=[1e-2], x0=[0.0, 0.0], P0=[1.0, 0.0, 0.0, 1.0],
               controls=1, B=[0.0, 1e-3])
EXAMPLES = {"KalmanFilter": _FILTER, "ExtendedKalmanFilter": _FILTER,
            "UnscentedKalmanFilter": _FILTER, "TransferFunction": dict(num=[1.0], den=[1.0, -0.5]),
            "PiecewiseImpedance": dict(x=[-0.01, 0.01], k=[100.0, 200.0], f0=[0.0, 0.0]),
            "Admittance": dict(x=[-0.01, 0.01], m=[0.01, 0.01], k=[100.0, 200.0], f0=[0.0, 0.0]),
            "PolynomialImpedance": dict(stiffness=[0.0, 100.0, 0.0, 1e6]),
            "PolynomialAdmittance": dict(mass=0.01, stiffness=[0.0, 100.0, 0.0, 1e6]),
            "Playback": dict(file=f"{DATA}/playback/sine.csv", column="y")}
"""Values for blocks that have required parameters (every optional port declared); a new
block that cannot be built from its defaults needs an entry here."""


def _instance(cls: type) -> Block:
    """The block with its defaults, or with its :data:`EXAMPLES` values."""
    return cls(**EXAMPLES.get(cls.__name__, {}))


@pytest.mark.parametrize("name", registry.names())
def test_every_block_documents_its_ports(name):
    assert port_problems(_instance(registry.lookup(name))) == []


def test_the_contract_fails_on_a_documented_port_the_block_does_not_declare():
    class Documented(Block, register=False):
        """A block whose docstring promises a port it lacks.

        Ports
        -----
        u     : in, (1,), m     input
        extra : out, (1,), m    promised, never declared
        """

        inputs = {"u": In(1, unit="m")}
        outputs = {"y": Out(1, unit="m")}
    assert port_problems(Documented()) == [
        "port 'y' is not documented",
        "documented port 'extra' is not declared, and its line does not say when it exists"]


def feedthrough_problems(block: Block, seed: int = 0) -> list[str]:
    """Outputs that change when an input they are declared not to depend on changes.

    The output kernel runs (as plain Python) on the block's initial state with
    random inputs, then again with one input changed; an output declared
    ``depends="state"``, or with a ``depends`` list without that input, must
    come out the same (the scheduler relies on it to order the tick)."""
    kernel = block.kernels().get("output")
    if kernel is None:
        return []
    kernel = getattr(kernel, "py_func", kernel)
    rng = np.random.default_rng(seed)
    x, d, m = block.initial_state()
    p = block.pack()
    inputs = {name: rng.normal(0.0, 0.1, spec.size) for name, spec in block.inputs.items()}

    def run(values: dict) -> list[np.ndarray]:
        outs = [np.zeros(spec.size, dtype=spec.dtype) for spec in block.outputs.values()]
        kernel(0.1, x.copy(), d.copy(), m.copy(), p, *values.values(), *outs)
        return outs
    base = run(inputs)
    problems = []
    for changed in inputs:
        moved = run({**inputs, changed: inputs[changed] + rng.normal(0.0, 0.1, inputs[changed].size)})
        for (name, spec), a, b in zip(block.outputs.items(), base, moved):
            free = spec.depends == "state" or (spec.depends is not None
                                                and changed not in spec.depends)
            if free and not np.array_equal(a, b, equal_nan=True):
                problems.append(f"output {name!r} changes with input {changed!r} but declares "
                                f"depends={spec.depends!r}")
    return problems


@pytest.mark.parametrize("name", registry.names())
def test_every_output_that_declares_no_feedthrough_has_none(name):
    block = _instance(registry.lookup(name))
    block.sample_time = 2.5e-5                 # 40 kHz: above every block's Nyquist limit
    assert feedthrough_problems(block) == []


def test_the_feedthrough_contract_fails_on_an_undeclared_feedthrough():
    class Leaky(Block, register=False):
        """Says its output holds state; it passes its input through.

        Ports
        -----
        u : in, (1,), m
        y : out, (1,), m
        """

        inputs = {"u": In(1, unit="m")}
        outputs = {"y": Out(1, unit="m", depends="state")}

        @staticmethod
        def output(t, x, d, m, p, u, y):
            y[0] = u[0]
    assert feedthrough_problems(Leaky()) == [
        "output 'y' changes with input 'u' but declares depends='state'"]


def unit_problems(cls: type) -> list[str]:
    """Parameters whose declared unit is not a coherent SI unit pint parses."""
    problems = []
    for name, spec in cls.params.items():
        try:
            dimension(spec.unit)
        except UnitError as exc:
            problems.append(f"parameter {name!r}: {exc}")
    return problems


@pytest.mark.parametrize("name", registry.names())
def test_every_parameter_unit_parses(name):
    assert unit_problems(registry.lookup(name)) == []


def test_the_unit_contract_fails_on_a_unit_that_does_not_parse_or_is_not_si():
    class Sloppy(Block, register=False):
        params = {"gap": Live(1.0, unit="mm"), "gain": Live(1.0, unit="N/furlongs"),
                  "k": Live(1.0, unit="N/m")}
    problems = unit_problems(Sloppy)
    assert len(problems) == 2 and "'gap'" in problems[0] and "'gain'" in problems[1]
    assert "write the value in m" in problems[0] and "furlongs" in problems[1]


def _nearby(value) -> list:
    """Values near ``value``, of its kind, to try in turn (a rule between parameters may
    refuse some); none for text or an unset optional value."""
    if isinstance(value, (bool, np.bool_)):
        return [not value]
    if isinstance(value, (int, np.integer)):
        return [value + 1, value - 1]
    if isinstance(value, (float, np.floating)):
        return [value * 1.25 + 0.0625, value * 0.75 - 0.03125, value * 0.5]
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) \
            and all(isinstance(v, (int, float, np.number)) for v in np.ravel(value)):
        array = np.asarray(value, dtype=np.float64)
        return [(array * 1.25 + 0.0625).tolist(), (array * 0.75).tolist()]
    return []


def initial_state_problems(block: Block) -> list[str]:
    """Live parameters that change the block's initial state though it does not declare
    that it starts from them (:meth:`Block.initial_parameters`): a batch of runs would
    start the runs that set one from the graph's value."""
    declared = block.initial_parameters()
    if declared is None:
        return []
    base = block.initial_state()
    problems = []
    for name, spec in block.params.items():
        if not spec.live or name in declared:
            continue
        old = block.values[name]
        for value in _nearby(old):
            try:
                block.set(name, value)
            except ParamError:
                continue
            try:
                moved = block.initial_state()
            finally:
                block.set(name, old)
            if any(not np.array_equal(a, b, equal_nan=True) for a, b in zip(base, moved)):
                problems.append(f"the initial state changes with parameter {name!r}, which "
                                "neither initial_from nor initial_depends names")
            break
    return problems


@pytest.mark.parametrize("name", registry.names())
def test_every_initial_state_depends_only_on_the_parameters_it_declares(name):
    block = _instance(registry.lookup(name))
    block.sample_time = 2.5e-5
    assert initial_state_problems(block) == []


def test_the_initial_state_contract_fails_on_an_undeclared_dependency():
    class Forgetful(Block, register=False):
        params = {"x0": Live(0.0, unit="m"), "v0": Live(0.0, unit="m/s")}
        cstate = ("pos", "vel")
        initial_depends = ("x0",)

        def initial_state(self):
            x, d, m = super().initial_state()
            x[:] = self.x0, self.v0
            return x, d, m
    assert initial_state_problems(Forgetful()) == [
        "the initial state changes with parameter 'v0', which neither initial_from nor "
        "initial_depends names"]
