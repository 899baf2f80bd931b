"""Task 0.1 and 0.2: the float operators every later stage builds on, and higher-order
functions over lists.

The task 0.1 operators take and return plain floats and use only float arithmetic and
``math``, so stage 2 can compile them with Numba unchanged (jitting each operator that
another one calls, such as ``inv`` inside ``log_back``).

Domain conventions (IEEE 754, as NumPy and PyTorch do):
``log(0) == -inf``, ``log(x) is nan`` for ``x < 0``; ``inv(0.0) == inf`` and
``inv(-0.0) == -inf``; ``log_back`` and ``inv_back`` at ``x = ±0`` are ``±inf`` (``nan``
when ``d`` is 0 too), the values of PyTorch's gradients there. Nothing here raises for
these inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

# ## Task 0.1: operators

_LOG_MAX_FLOAT = 709.782712893384  # log of the largest float64; exp overflows past it


def mul(x: float, y: float) -> float:
    """Return ``x * y``."""
    # BEGIN SOLUTION 0.1
    return x * y
    # END SOLUTION


def id(x: float) -> float:
    """Return ``x`` unchanged."""
    # BEGIN SOLUTION 0.1
    return x
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


def lt(x: float, y: float) -> float:
    """Return 1.0 if ``x < y`` else 0.0."""
    # BEGIN SOLUTION 0.1
    return 1.0 if x < y else 0.0
    # END SOLUTION


def eq(x: float, y: float) -> float:
    """Return 1.0 if ``x == y`` else 0.0."""
    # BEGIN SOLUTION 0.1
    return 1.0 if x == y else 0.0
    # END SOLUTION


def max(x: float, y: float) -> float:
    """Return the larger of ``x`` and ``y`` (``x`` when they are equal; nan if either is
    nan, as ``torch.maximum``)."""
    # BEGIN SOLUTION 0.1
    return x if x >= y or math.isnan(x) else y
    # END SOLUTION


def is_close(x: float, y: float) -> bool:
    """Return True when ``|x - y| < 1e-2``."""
    # BEGIN SOLUTION 0.1
    return abs(x - y) < 1e-2
    # END SOLUTION


def sigmoid(x: float) -> float:
    r"""The logistic function :math:`1 / (1 + e^{-x})`.

    Computed without overflow for any finite ``x``: for ``x >= 0`` use
    :math:`1 / (1 + e^{-x})`, otherwise the equal form :math:`e^{x} / (1 + e^{x})`, so
    ``exp`` only ever sees a non-positive argument.
    """
    # BEGIN SOLUTION 0.1
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)
    # END SOLUTION


def relu(x: float) -> float:
    """Return ``x`` if ``x > 0`` else 0.0 (nan stays nan, as in PyTorch)."""
    # BEGIN SOLUTION 0.1
    return 0.0 if x <= 0.0 else x
    # END SOLUTION


def log(x: float) -> float:
    """Natural log: ``-inf`` at 0, ``nan`` below 0 (never raises)."""
    # BEGIN SOLUTION 0.1
    if x > 0.0:
        return math.log(x)
    if x == 0.0:
        return -math.inf
    return math.nan
    # END SOLUTION


def exp(x: float) -> float:
    """Return :math:`e^x` (``inf`` when it overflows, never raises)."""
    # BEGIN SOLUTION 0.1
    if x > _LOG_MAX_FLOAT:
        return math.inf
    return math.exp(x)
    # END SOLUTION


def inv(x: float) -> float:
    """Return ``1 / x``: ``inf`` at ``0.0`` and ``-inf`` at ``-0.0`` (never raises)."""
    # BEGIN SOLUTION 0.1
    if x == 0.0:
        return math.copysign(math.inf, x)
    return 1.0 / x
    # END SOLUTION


def log_back(x: float, d: float) -> float:
    """Derivative of ``log`` at ``x`` times ``d``: ``d / x``, computed as ``d * inv(x)``
    so that ``x = ±0`` gives ``±inf`` (times the sign of ``d``; ``nan`` for ``d = 0``), as
    PyTorch's ``grad / x`` does, where Python's ``d / x`` raises ZeroDivisionError."""
    # BEGIN SOLUTION 0.1
    return d * inv(x)
    # END SOLUTION


def inv_back(x: float, d: float) -> float:
    """Derivative of ``inv`` at ``x`` times ``d``: ``-d / x**2``, computed as
    ``-d * inv(x * x)``: ``-inf`` at ``x = ±0`` for ``d > 0`` (``inf`` for ``d < 0``,
    ``nan`` for ``d = 0``), never ZeroDivisionError."""
    # BEGIN SOLUTION 0.1
    return -d * inv(x * x)
    # END SOLUTION


def relu_back(x: float, d: float) -> float:
    """Derivative of ``relu`` at ``x`` times ``d`` (0 at ``x == 0``, as PyTorch)."""
    # BEGIN SOLUTION 0.1
    return d if x > 0.0 else 0.0
    # END SOLUTION


# ## Given: two more float functions (used by Scalar and by every tensor backend)


def tanh(x: float) -> float:
    """Hyperbolic tangent, in (-1, 1) for every finite ``x`` (never overflows)."""
    return math.tanh(x)


def power(a: float, n: float) -> float:
    """``a ** n`` as IEEE floats: nan for a negative base with a fractional exponent,
    inf on overflow or for ``0 ** negative``; never raises, never returns a complex.

    Written without try/except so that Numba compiles it too (stage 2)."""
    if a == 0.0 and n < 0.0:
        return math.inf
    if a < 0.0 and n % 1.0 != 0.0:
        return math.nan
    if a != 0.0 and n * math.log(abs(a)) > _LOG_MAX_FLOAT:
        return -math.inf if a < 0.0 and n % 2.0 != 0.0 else math.inf
    return math.pow(a, n)


# ## Task 0.2: higher-order functions


def map(fn: Callable[[float], float]) -> Callable[[Iterable[float]], list[float]]:
    """Lift ``fn`` to lists: ``map(fn)(xs) == [fn(x) for x in xs]``."""

    # BEGIN SOLUTION 0.2
    def apply(xs: Iterable[float]) -> list[float]:
        return [fn(x) for x in xs]

    return apply
    # END SOLUTION


def zipWith(
    fn: Callable[[float, float], float],
) -> Callable[[Iterable[float], Iterable[float]], list[float]]:
    """Lift a binary ``fn`` to pairs of lists, elementwise.

    The lists must have equal length; otherwise ValueError names both lengths.
    """

    # BEGIN SOLUTION 0.2
    def apply(xs: Iterable[float], ys: Iterable[float]) -> list[float]:
        left, right = list(xs), list(ys)
        if len(left) != len(right):
            raise ValueError(f"zipWith: lists of different lengths {len(left)} and {len(right)}")
        return [fn(x, y) for x, y in zip(left, right, strict=False)]

    return apply
    # END SOLUTION


def reduce(fn: Callable[[float, float], float], start: float) -> Callable[[Iterable[float]], float]:
    """Fold a list from the left: ``reduce(fn, s)([a, b]) == fn(fn(s, a), b)``."""

    # BEGIN SOLUTION 0.2
    def apply(xs: Iterable[float]) -> float:
        acc = start
        for x in xs:
            acc = fn(acc, x)
        return acc

    return apply
    # END SOLUTION


def negList(xs: Iterable[float]) -> list[float]:
    """Negate every element, with ``map``."""
    # BEGIN SOLUTION 0.2
    return map(neg)(xs)
    # END SOLUTION


def addLists(xs: Iterable[float], ys: Iterable[float]) -> list[float]:
    """Add two lists elementwise, with ``zipWith``."""
    # BEGIN SOLUTION 0.2
    return zipWith(add)(xs, ys)
    # END SOLUTION


def sum(xs: Iterable[float]) -> float:
    """Sum a list (0.0 when empty), with ``reduce``."""
    # BEGIN SOLUTION 0.2
    return reduce(add, 0.0)(xs)
    # END SOLUTION


def prod(xs: Iterable[float]) -> float:
    """Multiply a list (1.0 when empty), with ``reduce``."""
    # BEGIN SOLUTION 0.2
    return reduce(mul, 1.0)(xs)
    # END SOLUTION
