"""Toy stage 0's graded checks (see ``autograder/checks.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks import check, raised


def _pairs(rng: np.random.Generator, n: int = 8) -> list[tuple[float, float]]:
    return [(round(float(x), 3), round(float(y), 3)) for x, y in rng.uniform(-9, 9, (n, 2))]


@check("0.1")
def mul(rng: np.random.Generator) -> Any:
    from module0 import operators

    pairs = _pairs(rng)
    return {"inputs": pairs, "out": [raised(lambda p=p: operators.mul(*p)) for p in pairs]}


@check("0.1")
def add(rng: np.random.Generator) -> Any:
    from module0 import operators

    pairs = _pairs(rng)
    return {"inputs": pairs, "out": [raised(lambda p=p: operators.add(*p)) for p in pairs]}


@check("0.1")
def neg(rng: np.random.Generator) -> Any:
    from module0 import operators

    xs = [x for x, _ in _pairs(rng)]
    return {"inputs": xs, "out": [raised(lambda x=x: operators.neg(x)) for x in xs]}


@check("0.2")
def total(rng: np.random.Generator) -> Any:
    from module0.sums import total as fn

    lists = [[round(float(v), 3) for v in rng.uniform(-9, 9, n)] for n in (0, 1, 5, 12)]
    return {"inputs": lists, "out": [raised(lambda xs=xs: fn(xs)) for xs in lists]}
