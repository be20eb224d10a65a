"""Unit strings: parsing, dimension equivalence, and errors that name the bad token."""
from __future__ import annotations

import math
import re

import pytest

from hapflow.units import UnitError, dimension, same_dimension, si_text, to_si

#            m  kg  s  A  K mol cd rad count
NEWTON = (1, 1, -2, 0, 0, 0, 0, 0, 0)


def test_base_and_derived_dimensions():
    assert dimension("m") == (1, 0, 0, 0, 0, 0, 0, 0, 0)
    assert dimension("N") == NEWTON
    assert dimension("kg*m/s^2") == NEWTON
    assert dimension("rad") == (0, 0, 0, 0, 0, 0, 0, 1, 0)
    assert dimension("count") == (0, 0, 0, 0, 0, 0, 0, 0, 1)


@pytest.mark.parametrize("text", ["", "1", "-", "  ", "m/m", "N s^2/kg/m"])
def test_dimensionless(text):
    assert dimension(text) == (0,) * 9


@pytest.mark.parametrize("a, b", [
    ("N s/m", "kg/s"),          # damping
    ("N*s/m", "kg s^-1"),
    ("N/m", "kg/s^2"),          # stiffness
    ("m/s^2", "m s^-2"),
    ("m/s^2", "m/s/s"),
    ("m/s^2", "m*s**-2"),
    ("m/s^2", "m/s2"),          # exponent without '^'
    ("N*m", "J"),               # torque and energy share the SI dimension
    ("N·m", "J"),
    ("J/s", "W"),
    ("V*A", "W"),
    ("ohm*A", "V"),
    ("1/s", "Hz"),
    ("Pa*m^2", "N"),
    ("C/s", "A"),
    ("kg*m^2", "kg m^2"),
])
def test_equivalent_units(a, b):
    assert dimension(a) == dimension(b)
    assert same_dimension(a, b)


@pytest.mark.parametrize("a, b", [
    ("rad", "m"),               # an angle is not a length
    ("rad", ""),                # nor a plain number
    ("rad/s", "Hz"),            # angular velocity is not a frequency
    ("count", ""),              # encoder counts are their own dimension
    ("count", "m"),
    ("N", "kg"),
    ("m/s", "m/s^2"),
    ("N*m", "N/m"),
    ("N s/m", "N/m"),           # damping is not stiffness
    ("V", "W"),
])
def test_different_units(a, b):
    assert dimension(a) != dimension(b)
    assert not same_dimension(a, b)


@pytest.mark.parametrize("unit, token", [
    ("bogus", "bogus"),
    ("N/bogus", "bogus"),
])
def test_unknown_symbol_names_the_token(unit, token):
    with pytest.raises(UnitError) as info:
        dimension(unit)
    msg = str(info.value)
    assert f"unknown unit {token!r}" in msg
    assert repr(unit) in msg                      # the whole unit string
    assert "m, kg, s" in msg and "N" in msg       # the valid symbols


@pytest.mark.parametrize("unit, si", [("mm", "m"), ("ms", "s"), ("furlong", "m"), ("gf", "N"),
                                      ("lbf", "N"), ("deg", "rad"), ("kHz", "Hz"), ("%", "")])
def test_a_port_or_parameter_unit_must_be_si_without_prefix(unit, si):
    """A port in mm wired to one in m would carry values 1000x wrong: refused, naming the
    SI unit to write instead."""
    with pytest.raises(UnitError, match=f"write the value in {si or 'plain numbers'}$"):
        dimension(unit)


@pytest.mark.parametrize("unit", ["kg*m^", "m^x", "2m", "N/(m"])
def test_a_unit_that_does_not_parse_is_refused(unit):
    with pytest.raises(UnitError, match=f"unit {re.escape(repr(unit))} cannot be parsed"):
        dimension(unit)


@pytest.mark.parametrize("unit, factor, si", [
    ("mm", 1e-3, "m"), ("um", 1e-6, "m"), ("in", 0.0254, "m"),
    ("gf", 9.80665e-3, "N"), ("kgf", 9.80665, "N"), ("lbf", 4.4482216152605, "N"),
    ("mN", 1e-3, "N"), ("ms", 1e-3, "s"), ("deg", math.pi / 180.0, "rad"),
    ("rpm", math.pi / 30.0, "rad/s"), ("N mm", 1e-3, "N m"), ("mH", 1e-3, "H"),
])
def test_any_unit_converts_to_si_for_data_files_and_scales(unit, factor, si):
    """CSV headers and HIL scales may be in any unit pint knows (exact definitions: the inch
    is 25.4 mm, the gram-force and kilogram-force 9.80665 mN and N, the pound-force
    0.45359237 kg x 9.80665 m/s^2)."""
    got, dims = to_si(unit)
    assert got == pytest.approx(factor, rel=1e-14) and dims == dimension(si)
    assert si_text(dims) == si


def test_henry_newton_metre_and_radian_are_checked_dimensions():
    assert dimension("H") == dimension("V s/A") == dimension("ohm s") == dimension("Wb/A")
    assert dimension("N m") == dimension("J") != dimension("N m/rad")   # torque vs stiffness
    # pint makes the radian dimensionless (as SI does); hapflow makes it a base dimension so
    # an angle never meets a plain number or a frequency unnoticed
    assert dimension("rad") != dimension("") and dimension("rad/s") != dimension("Hz")
    assert to_si("turn") == (pytest.approx(2 * math.pi), dimension("rad"))


def test_unit_error_is_a_value_error():
    assert issubclass(UnitError, ValueError)
