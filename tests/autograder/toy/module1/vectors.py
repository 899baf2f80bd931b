"""Toy stage 1: the dot product of two lists (task 1.1), by stage 0's operators."""

from __future__ import annotations

from module0 import operators, sums


def dot(xs: list[float], ys: list[float]) -> float:
    """The dot product of ``xs`` and ``ys``; ValueError naming both lengths if they differ."""
    # BEGIN SOLUTION 1.1
    if len(xs) != len(ys):
        raise ValueError(f"dot: lengths {len(xs)} and {len(ys)} differ")
    return sums.total(operators.mul(x, y) for x, y in zip(xs, ys, strict=True))
    # END SOLUTION
