"""Toy task 1.1: ``dot``."""

from __future__ import annotations

import pytest

from module1.vectors import dot

pytestmark = pytest.mark.task1_1


def test_dot() -> None:
    assert dot([1.0, 2.0], [3.0, -4.0]) == -5.0


def test_dot_names_both_lengths() -> None:
    with pytest.raises(ValueError, match="2 and 3"):
        dot([1.0, 2.0], [1.0, 2.0, 3.0])
