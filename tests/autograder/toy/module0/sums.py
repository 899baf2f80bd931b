"""Toy stage 0: a sum over a list by ``add`` (task 0.2)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from module0.operators import add


# BEGIN SOLUTION 0.2 omit
def _fold(fn: Callable[[float, float], float], start: float, xs: Iterable[float]) -> float:
    result = start
    for x in xs:
        result = fn(result, x)
    return result


# END SOLUTION


def total(xs: Iterable[float]) -> float:
    """The sum of ``xs`` by ``add``, left to right (0.0 for an empty list)."""
    # BEGIN SOLUTION 0.2
    return _fold(add, 0.0, xs)
    # END SOLUTION
