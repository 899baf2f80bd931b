"""The reference's fast paths for a training step's clipping and AdamW (reference-only,
like ``fast_block.py``: a handout's task 5.4 is the student's own).

* :func:`sum_of_squares`: one compiled pass over a gradient, summing its squares in
  float64. Task 5.4's answer, ``np.square(g, dtype=np.float64).sum()``, first writes a
  float64 copy of every gradient and then reads it: for the milestone GPT's 53 float32
  gradients (809K entries) 470 us against 70 for one pass (2-core AMD EPYC). The sum is
  the same up to the order of the additions.
* :func:`adamw_update`: AdamW's decoupled weight decay folded into stage 2's Adam update
  (task 2.4's :func:`~module2.fast_optim.adam_update`): one pass over a decayed
  parameter instead of a NumPy ``*=`` and then the update. The values are the task
  route's exactly: the decay is rounded to the parameter's dtype and stored before the
  step reads it, as the two passes do.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit, prange

from module1.tensor import Tensor
from module1.tensor_data import Storage
from module2.fast_optim import PARALLEL_MIN, _prepare, _state, adam_entry

if TYPE_CHECKING:
    from module5.optim import AdamW

SERIAL_MAX = 1 << 15
"""Gradients of fewer entries are summed on the calling thread (waking the thread pool
costs more than the second core saves on a LayerNorm's 128 entries)."""


@njit(parallel=True, cache=True, fastmath={"reassoc", "contract"})
def sum_of_squares(x: Storage) -> float:
    """The sum of ``x[i] ** 2`` over a flat array, in float64 whatever ``x``'s dtype
    (regrouped into vector lanes: no flags that assume away NaN or infinity, so a NaN
    or infinite gradient gives a NaN or infinite sum)."""
    total = 0.0
    if len(x) < SERIAL_MAX:
        for i in range(len(x)):
            value = np.float64(x[i])
            total += value * value
        return total
    for i in prange(len(x)):
        value = np.float64(x[i])
        total += value * value
    return total


@njit(parallel=True, cache=True, fastmath=False)
def adamw_update(
    param: Storage, grad: Storage, m: Storage, v: Storage, keep: Any,
    lr: float, beta1: float, beta2: float, eps: float, t: int,
) -> None:  # fmt: skip
    """``param *= keep`` (``1 - lr * weight_decay``, a scalar of ``param``'s dtype), then
    :func:`~module2.fast_optim.adam_update`'s step ``t``, entry by entry in one pass."""
    n = len(param)
    if len(grad) != n or len(m) != n or len(v) != n:
        raise ValueError("adamw_update: param, grad, m and v must have the same length")
    bias1 = 1.0 - beta1 ** float(t)  # C's pow, as adam_update
    bias2 = 1.0 - beta2 ** float(t)

    if n < PARALLEL_MIN:
        for i in range(n):
            param[i] = param[i] * keep  # rounded to the dtype, as NumPy's *= stores it
            adam_entry(param, grad, m, v, i, lr, beta1, beta2, eps, bias1, bias2)
    else:
        for i in prange(n):
            param[i] = param[i] * keep
            adam_entry(param, grad, m, v, i, lr, beta1, beta2, eps, bias1, bias2)


def flat_values(g: Tensor) -> Storage:
    """``g``'s values as a flat array: its storage where that holds exactly them in
    order, else a contiguous copy (a gradient that is a view)."""
    data = g._tensor
    if data.is_contiguous() and data._storage.size == data.size:
        return data._storage
    return np.ascontiguousarray(g.to_numpy()).reshape(-1)


def global_norm(grads: list[Tensor]) -> float:
    """The L2 norm of all of ``grads`` together (task 5.4's ``total``): one
    :func:`sum_of_squares` pass per gradient."""
    return math.sqrt(sum(sum_of_squares(flat_values(g)) for g in grads))


def adamw_step(optimizer: AdamW) -> None:
    """``optimizer.step()`` (task 5.4's AdamW) by :func:`adamw_update`: the same
    parameters, states and step counts, one pass per parameter."""
    beta1, beta2 = optimizer.betas
    lr = optimizer.lr
    for i, p, param, grad in _prepare(optimizer.parameters, optimizer._checked):
        m, _ = _state(optimizer.first_moment, i, p, param.size, "first moment")
        v, _ = _state(optimizer.second_moment, i, p, param.size, "second moment")
        optimizer.steps[i] += 1
        keep = param.dtype.type(1.0 - lr * optimizer.weight_decays[i])
        adamw_update(param, grad, m, v, keep, lr, beta1, beta2, optimizer.eps, optimizer.steps[i])
