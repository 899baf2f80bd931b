"""Toy stage 1's graded checks (see ``autograder/checks.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks import check, raised


@check("1.1")
def dot(rng: np.random.Generator) -> Any:
    from module1.vectors import dot

    n = int(rng.integers(2, 9))
    xs, ys = (rng.uniform(-9, 9, n).round(3).tolist() for _ in range(2))
    return {"inputs": [xs, ys], "out": raised(lambda: dot(xs, ys))}


@check("1.1")
def dot_lengths(rng: np.random.Generator) -> Any:
    from module1.vectors import dot

    return raised(lambda: dot([1.0, 2.0], [1.0]))
