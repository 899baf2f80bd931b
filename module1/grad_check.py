"""``grad_check``: a Function's backward against central differences, entry by entry.

Given code, used by the tests and by anyone writing a Function of their own (stage 4's
layers): the oracle for every backward of the course.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from module0.autodiff import Variable, no_grad
from module1.tensor_data import TensorData

if TYPE_CHECKING:
    from module1.tensor import Tensor


_ROUNDING = 4 * float(np.finfo(np.float64).eps)
"""Relative rounding error allowed in each output value the numerical check reads."""


def grad_check(
    f: Callable[..., Tensor],
    *vals: Tensor,
    wrt: Iterable[int] | None = None,
    checks: int | None = None,
    epsilon: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    seed: int = 0,
) -> None:
    """Check the backward of ``f`` at ``vals`` against central differences, entry by
    entry.

    ``f`` runs on copies of ``vals`` (same values and layout, the caller's tensors stay
    untouched); the inputs numbered in ``wrt`` (default: all) are marked
    ``requires_grad`` by this function, the others are constants. With ``w`` a fixed
    random weight per output entry (magnitude 0.5 to 1.5, either sign, drawn from
    ``seed``), the backward of ``sum(f(x) * w)`` (``f(x).backward(w)``) gives each input
    entry's gradient ``b``. The numerical estimate ``n`` for the same entry takes
    ``f(x + h e) - f(x - h e)`` output entry by output entry, *then* weights and sums:
    outputs the entry does not affect cancel exactly, so a large output never swamps a
    small one. The step is ``h = epsilon * max(1, |x|)``. The entry passes when
    ``|b - n| <= atol + rtol * |n| + r``, where ``r`` bounds the estimate's rounding
    error (``4 * machine epsilon`` of every output value that changed, weighted, divided
    by the step). Random weights also catch a backward that ignores its ``d``.

    Every entry of every checked input is checked, or ``checks`` random entries of each
    (for large inputs: each entry costs two forward passes). Raises AssertionError
    naming the input, the entry and both numbers on a mismatch, or an input that got no
    gradient.
    """
    if not all(isinstance(v, Variable) and hasattr(v, "_tensor") for v in vals):
        raise TypeError("grad_check: every argument after f must be a Tensor")
    checked = sorted(set(range(len(vals)) if wrt is None else wrt))
    rng = np.random.default_rng(seed)
    storages = [np.array(v._tensor.host_storage(), dtype=np.float64, copy=True) for v in vals]
    leaves = [_like(v, storages[i], i in checked) for i, v in enumerate(vals)]
    out = f(*leaves)
    weights = rng.uniform(0.5, 1.5, out.shape) * rng.choice([-1.0, 1.0], out.shape)
    if not out.requires_grad:
        raise AssertionError(f"f's result (shape {out.shape}) does not depend on inputs {checked}")
    out.backward(_like(out, weights.reshape(-1), False, out.shape))
    for arg in checked:
        x = leaves[arg]
        if x.grad is None:
            raise AssertionError(f"input {arg} (shape {x.shape}) got no gradient")
        grad = x.grad.to_numpy()
        if grad.shape != x.shape:
            raise AssertionError(f"input {arg} (shape {x.shape}) got a gradient of {grad.shape}")
        indices = list(np.ndindex(*x.shape))
        if checks is not None and checks < len(indices):
            indices = [indices[k] for k in sorted(rng.choice(len(indices), checks, False))]
        for index in indices:
            numeric, noise = _central(f, vals, storages, arg, index, weights, epsilon)
            analytic = float(grad[index])
            if not abs(analytic - numeric) <= atol + rtol * abs(numeric) + noise:
                raise AssertionError(
                    f"gradient of input {arg} (shape {x.shape}) at {index}: backward gave "
                    f"{analytic!r}, central difference {numeric!r}"
                )


def _like(
    x: Tensor, storage: np.ndarray, requires_grad: bool, shape: tuple[int, ...] | None = None
) -> Tensor:
    """A new leaf on ``x``'s backend over ``storage``: with ``x``'s shape and strides, or
    row-major in ``shape``."""
    data = (
        TensorData(storage, x.shape, x._tensor.strides)
        if shape is None
        else TensorData(storage, shape)
    )
    return type(x)(data, backend=x.backend, requires_grad=requires_grad)


def _central(
    f: Callable[..., Tensor],
    vals: tuple[Tensor, ...],
    storages: list[np.ndarray],
    arg: int,
    index: tuple[int, ...],
    weights: np.ndarray,
    eps: float,
) -> tuple[float, float]:
    """The central difference of ``sum(f(*vals) * weights)`` in entry ``index`` of input
    ``arg`` (differenced per output entry before weighting), and its rounding bound."""
    position = sum(i * s for i, s in zip(index, vals[arg]._tensor.strides, strict=True))
    value = float(storages[arg][position])
    step = eps * max(1.0, abs(value))
    results = []
    for moved in (value + step, value - step):
        storage = storages[arg].copy()
        storage[position] = moved
        inputs = [_like(v, s, False) for v, s in zip(vals, storages, strict=True)]
        inputs[arg] = _like(vals[arg], storage, False)
        with no_grad():
            results.append(f(*inputs).to_numpy())
    width = (value + step) - (value - step)
    plus, minus = results
    size = np.where(plus != minus, np.abs(plus) + np.abs(minus), 0.0)
    noise = _ROUNDING * np.sum(np.abs(weights) * size) / width
    return float(np.sum((plus - minus) * weights) / width), float(noise)
