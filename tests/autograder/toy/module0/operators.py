"""Toy stage 0: three scalar operators (task 0.1)."""

from __future__ import annotations


def mul(x: float, y: float) -> float:
    """Return ``x * y``."""
    # BEGIN SOLUTION 0.1
    return x * y
    # END SOLUTION


def add(x: float, y: float) -> float:
    """Return ``x + y``."""
    # BEGIN SOLUTION 0.1
    return x + y
    # END SOLUTION


def neg(x: float) -> float:
    """Return ``-x``."""
    # BEGIN SOLUTION 0.1
    return -x
    # END SOLUTION
