"""Toy task 0.2: ``total``."""

from __future__ import annotations

import pytest

from module0.sums import total

pytestmark = pytest.mark.task0_2


def test_total_of_a_list() -> None:
    assert total([1.0, 2.0, 3.5]) == 6.5


def test_total_of_nothing_is_zero() -> None:
    assert total([]) == 0.0
