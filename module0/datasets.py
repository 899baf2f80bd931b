"""Seeded 2-D binary classification sets: points in the unit square, labels 0/1.

``load_dataset("xor", 50, seed=0)`` returns the same points every time; the names are
those of :data:`DATASETS`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from module0.errors import UnknownDatasetError

Point = tuple[float, float]


@dataclass(frozen=True)
class Graph:
    """A labelled point set."""

    name: str
    X: list[Point]
    y: list[int]

    @property
    def N(self) -> int:
        return len(self.X)


def _points(n: int, rng: random.Random) -> list[Point]:
    return [(rng.random(), rng.random()) for _ in range(n)]


def _labelled(name: str, n: int, seed: int, rule: Callable[[float, float], bool]) -> Graph:
    if n < 1:
        raise ValueError(f"dataset {name!r} needs at least one point, got N={n}")
    X = _points(n, random.Random(seed))
    return Graph(name, X, [int(rule(a, b)) for a, b in X])


def simple(n: int, seed: int = 0) -> Graph:
    """Class 1 left of the vertical line x1 = 0.5."""
    return _labelled("simple", n, seed, lambda a, b: a < 0.5)


def diag(n: int, seed: int = 0) -> Graph:
    """Class 1 below the diagonal x1 + x2 = 0.5."""
    return _labelled("diag", n, seed, lambda a, b: a + b < 0.5)


def split(n: int, seed: int = 0) -> Graph:
    """Class 1 in the two outer bands x1 < 0.2 and x1 > 0.8."""
    return _labelled("split", n, seed, lambda a, b: a < 0.2 or a > 0.8)


def xor(n: int, seed: int = 0) -> Graph:
    """Class 1 in the top-left and bottom-right quarters."""
    return _labelled("xor", n, seed, lambda a, b: (a < 0.5) != (b < 0.5))


def circle(n: int, seed: int = 0) -> Graph:
    """Class 1 outside the circle of radius sqrt(0.1) around the centre."""
    return _labelled("circle", n, seed, lambda a, b: (a - 0.5) ** 2 + (b - 0.5) ** 2 > 0.1)


def spiral(n: int, seed: int = 0) -> Graph:
    """Two interleaved spiral arms, half the points each, with a little jitter."""
    if n < 2:
        raise ValueError(f"dataset 'spiral' needs at least two points, got N={n}")
    rng = random.Random(seed)
    X: list[Point] = []
    y: list[int] = []
    half = n // 2
    for label, count in ((0, half), (1, n - half)):
        for k in range(count):
            t = 0.25 + 2.75 * math.pi * k / max(count - 1, 1)
            r = 0.45 * t / (3.0 * math.pi)
            angle = t + (math.pi if label else 0.0)
            jitter = rng.uniform(-0.01, 0.01)
            X.append((0.5 + r * math.cos(angle) + jitter, 0.5 + r * math.sin(angle) + jitter))
            y.append(label)
    order = list(range(n))
    rng.shuffle(order)
    return Graph("spiral", [X[i] for i in order], [y[i] for i in order])


DATASETS: dict[str, Callable[..., Graph]] = {
    "simple": simple,
    "diag": diag,
    "split": split,
    "xor": xor,
    "circle": circle,
    "spiral": spiral,
}


def load_dataset(name: str, n: int = 50, seed: int = 0) -> Graph:
    """The dataset called ``name`` with ``n`` points; UnknownDatasetError lists the names."""
    try:
        make = DATASETS[name]
    except KeyError:
        raise UnknownDatasetError(
            f"unknown dataset {name!r}; choose one of: {', '.join(DATASETS)}"
        ) from None
    return make(n, seed)
