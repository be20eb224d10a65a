"""Unit strings: parsing, dimension equivalence, and errors that name the bad token."""
from __future__ import annotations

import pytest

from hapflow.units import UnitError, dimension, same_dimension

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
    ("furlong", "furlong"),
    ("N/furlong", "furlong"),
    ("mm", "mm"),               # no SI prefixes: write the value in m
    ("ms", "ms"),
    ("newton", "newton"),
    ("kg*m^", "m^"),
    ("m^x", "m^x"),
    ("2m", "2m"),
])
def test_unknown_symbol_names_the_token(unit, token):
    with pytest.raises(UnitError) as info:
        dimension(unit)
    msg = str(info.value)
    assert f"unknown unit {token!r}" in msg
    assert repr(unit) in msg                      # the whole unit string
    assert "m, kg, s" in msg and "N" in msg       # the valid symbols


def test_unit_error_is_a_value_error():
    assert issubclass(UnitError, ValueError)
