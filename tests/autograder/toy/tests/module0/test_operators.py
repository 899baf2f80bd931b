"""Toy task 0.1: the operators, against Python's own arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from module0 import operators

pytestmark = pytest.mark.task0_1

small = st.floats(-100, 100)


@given(small, small)
def test_mul(x: float, y: float) -> None:
    assert operators.mul(x, y) == x * y


@given(small, small)
def test_add(x: float, y: float) -> None:
    assert operators.add(x, y) == x + y


def test_neg() -> None:
    assert operators.neg(2.5) == -2.5
    assert operators.neg(-1.0) == 1.0
