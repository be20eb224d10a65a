"""Named parameters and states (hapflow/names.py) and the validation hook (Block.validate)."""
import pickle

import numpy as np
import pytest
from numba import njit

import hapflow as hf
from hapflow import registry
from hapflow.block import Block, ParamError
from hapflow.names import Derived
from hapflow.params import Live, positive
from hapflow.ports import In, Out


class NamedSpring(Block, register=False):
    """A mass on a spring, written with names: m a = force - 2 k x.

    Ports
    -----
    force : in, (1,), N
    pos   : out, (1,), m
    """

    inputs = {"force": In(1, unit="N")}
    outputs = {"pos": Out(1, unit="m", depends="state")}
    params = {"mass": Live(2.0, unit="kg", check=positive),
              "k": Live(50.0, unit="N/m"),
              "x_min": Live(-1.0, unit="m"),
              "x_max": Live(1.0, unit="m")}
    derived = {"k2": Derived(lambda b: 2.0 * b.k, unit="N/m", doc="both springs")}
    cstate = ("pos", "vel")

    def validate(self, changed):
        if not self.x_min < self.x_max:
            raise ParamError(changed or "x_min", "'x_min' must be < 'x_max'")

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force, dx):
        dx[SX.pos] = x[SX.vel]
        dx[SX.vel] = (force[0] - p[SP.k2] * x[SX.pos]) / p[SP.mass]

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, pos):
        pos[0] = x[SX.pos]


SP, SX = NamedSpring.P, NamedSpring.X


@pytest.fixture(autouse=True)
def named_spring_in_the_registry():
    """The graph files here name NamedSpring; it leaves the registry with the module's tests."""
    with registry.registered(NamedSpring):
        yield


def test_offsets_follow_the_declarations_and_pack_puts_values_there():
    assert NamedSpring.P == (0, 1, 2, 3, 4) and NamedSpring.P._fields[-1] == "k2"
    assert NamedSpring.X == (0, 1) and NamedSpring.cstate == 2
    block = NamedSpring(k=30.0)
    p = block.pack()
    assert p[SP.k] == 30.0 and p[SP.k2] == 60.0 and p[SP.mass] == 2.0 and p.size == 5
    assert [n for n, _, _ in block.packed_names()] == list(NamedSpring.P._fields)


def test_a_derived_value_of_the_wrong_size_is_named():
    class Wrong(Block, register=False):
        params = {"a": Live(1.0)}
        derived = {"pair": Derived(lambda b: [b.a, b.a], size=1)}
    with pytest.raises(ParamError, match="derived parameter 'pair' of Wrong has 2 values, "
                                         "declared 1"):
        Wrong().pack()


def test_no_offsets_after_an_array_parameter_or_for_a_block_that_packs_by_hand():
    class Arrays(Block, register=False):
        params = {"a": Live(1.0), "gains": Live([1.0, 2.0], kind="floats"), "b": Live(0.0)}

    class ByHand(Block, register=False):
        params = {"a": Live(1.0)}

        def pack(self):
            return np.array([2.0 * self.a])
    assert Arrays.P._fields == ("a", "gains") and not hasattr(ByHand, "P")
    assert ByHand().packed_names() is None


def test_validate_runs_on_construction_and_set_is_undone_when_it_fails():
    with pytest.raises(ParamError, match="x_min"):
        NamedSpring(x_min=2.0)
    block = NamedSpring()
    with pytest.raises(ParamError) as err:
        block.set("x_max", -3.0)
    assert err.value.param == "x_max" and block.x_max == 1.0       # named, and rolled back
    block.set("x_max", 3.0)
    assert block.x_max == 3.0


GRAPH = """\
name: named
rate: 1000
blocks:
  drive: {type: Step, time: 0.0, initial: 0.0, final: 1.0, unit: N}
  spring: {type: NamedSpring, mass: 0.5, k: 40.0}
wires:
  - drive.y -> spring.force
record: [spring.pos]
"""


def test_the_generated_source_folds_names_to_offsets_and_lists_them():
    sim = hf.Simulation(hf.loads(GRAPH))
    source = sim.program.source
    slot = sim.layout.blocks["spring"]["p"]
    base = 0
    for array in ("x", "d"):
        base += sim.layout.sizes[array]
    k2 = base + slot.start + SP.k2
    assert f"f[{k2}]" in source and "g_SP" not in source and "g_SX" not in source
    assert f"#   f[{k2}]" in source and "spring.p.k2" in source and "spring.x.vel" in source


def test_a_named_kernel_follows_its_closed_form():
    sim = hf.Simulation(hf.loads(GRAPH))
    result = sim.run(0.5, progress=False)
    k2, mass = 80.0, 0.5                        # x(t) = (1 - cos(w t)) / k2 under a unit step
    w = np.sqrt(k2 / mass)
    want = (1.0 - np.cos(w * result.time)) / k2
    np.testing.assert_allclose(result["spring.pos"][:, 0], want, atol=2e-6)


def test_an_optional_alternative_is_not_packed_its_derived_value_is():
    class Rates(Block, register=False):
        params = {"k": Live(100.0, unit="N/m"),
                  "k_alt": Live(None, unit="N/m", doc="optional: replaces k")}
        derived = {"k_used": Derived(lambda b: b.k if b.k_alt is None else b.k_alt)}
    assert Rates.P._fields == ("k", "k_used")
    np.testing.assert_array_equal(Rates().pack(), [100.0, 100.0])         # no NaN for None
    np.testing.assert_array_equal(Rates(k_alt=7.0).pack(), [100.0, 7.0])


def test_a_param_error_is_a_hapflow_error_naming_block_parameter_file_and_line():
    with pytest.raises(hf.HapflowError) as err:            # from Python: the block type
        NamedSpring(mass=-1.0)
    assert isinstance(err.value, ParamError) and err.value.param == "mass"
    assert str(err.value).startswith("NamedSpring: parameter 'mass' [kg] must be > 0")
    bad = GRAPH.replace("k: 40.0}", "k: 40.0,\n           x_min: 5.0}")
    with pytest.raises(hf.HapflowError) as err:            # from a graph file: file and line
        hf.loads(bad, "spring.yaml")
    assert str(err.value) == ("spring.yaml:6: block 'spring' (NamedSpring): "
                              "'x_min' must be < 'x_max'")
    assert (err.value.block, err.value.param, err.value.where.line) == ("spring", "x_min", 6)
    graph = hf.loads(GRAPH, "spring.yaml")
    with pytest.raises(ParamError) as err:                 # a value set later is not in the file
        graph.set("spring.x_max", -2.0)
    assert str(err.value) == "block 'spring' (NamedSpring): 'x_min' must be < 'x_max'"
    again = pickle.loads(pickle.dumps(err.value))          # crosses process boundaries (studies)
    assert (str(again), again.param, again.block) == (str(err.value), "x_max", "spring")


def test_initial_from_starts_named_states_at_parameter_values():
    class Started(Block, register=False):
        params = {"x0": Live(0.25, unit="m"), "q0": Live([1.0, 2.0, 3.0], kind="floats")}
        cstate = ("pos", "vel")
        dstate = {"count": 1, "q": 3}
        initial_from = {"pos": "x0", "q": "q0"}
    x, d, m = Started(x0=-0.5).initial_state()
    np.testing.assert_array_equal(x, [-0.5, 0.0])
    np.testing.assert_array_equal(d, [0.0, 1.0, 2.0, 3.0])
    assert m.size == 0
    x, _, _ = hf.blocks.DCMotor(angle0=0.3).initial_state()
    assert x[hf.blocks.DCMotor.X.angle] == 0.3 and x[hf.blocks.DCMotor.X.current] == 0.0


def test_initial_from_must_name_a_state_and_a_parameter():
    with pytest.raises(TypeError, match=r"Loose.initial_from: speed: x0 does not map a named "
                                        r"state \(pos, vel\) to a parameter"):
        class Loose(Block, register=False):
            params = {"x0": Live(0.0)}
            cstate = ("pos", "vel")
            initial_from = {"speed": "x0"}


def test_initial_parameters_are_the_declared_ones_and_an_undeclared_override_reads_any():
    class Started(Block, register=False):
        params = {"x0": Live(0.0, unit="m"), "k": Live(1.0, unit="N/m"), "s": Live(1.0)}
        cstate = ("pos",)
        initial_from = {"pos": "x0"}

    class Moded(Started, register=False):
        istate = 1
        initial_depends = ("s",)

        def initial_state(self):
            x, d, m = super().initial_state()
            m[0] = self.x0 < self.s
            return x, d, m

    class Undeclared(Moded, register=False):
        def initial_state(self):
            x, d, m = super().initial_state()
            x[0] += self.k
            return x, d, m

    assert Started.initial_parameters() == {"x0"}
    assert Moded.initial_parameters() == {"x0", "s"}
    assert Undeclared.initial_parameters() is None
    with pytest.raises(TypeError, match=r"Typo.initial_depends: q is not a parameter "
                                        r"\(valid: x0, k, s\)"):
        class Typo(Started, register=False):
            initial_depends = ("q",)


def test_derived_reads_names_the_parameters_read_on_the_path_taken():
    """What :meth:`Block.derived_reads` reports: each value read on the way (as an
    attribute or by key; iterating reads them all), at the current values; None when a
    derived value raises."""
    class Rates(Block, register=False):
        params = {"k": Live(100.0, unit="N/m"), "c": Live(2.0, unit="N s/m"),
                  "k_alt": Live(None, unit="N/m", doc="optional: replaces k")}
        derived = {"k_used": Derived(lambda b: b.k if b.k_alt is None else b.k_alt),
                   "c_half": Derived(lambda b: b.values["c"] / 2.0)}
    assert Rates().derived_reads() == {"k", "k_alt", "c"}
    assert Rates(k_alt=7.0).derived_reads() == {"k_alt", "c"}

    class Everything(Block, register=False):
        params = {"a": Live(1.0), "b": Live(2.0)}
        derived = {"total": Derived(lambda b: sum(b.values.values()))}
    assert Everything().derived_reads() == {"a", "b"}

    class Raises(Block, register=False):
        params = {"a": Live(1.0)}
        derived = {"inverse": Derived(lambda b: 1.0 / (b.a - 1.0))}
    block = Raises()
    assert block.derived_reads() is None and block.values == {"a": 1.0}
