"""The reference's fast path for a ``Linear`` layer: the bias in the product's epilogue.

Task 1.5's ``x @ weight + bias`` is two Functions: the product writes its output, then
the bias ``zip`` reads it whole again and writes a new tensor; the backward sends the
gradient through the addition and sums it for the bias. Here the output starts as the
bias, row after row, and task 2.3's product adds to it (``gemm_into`` without
``overwrite``, as ``gemm`` adds to what ``out`` holds): one pass over the output fewer,
one output fewer to allocate, one Function fewer in the graph. The backward is the two
products of ``MatMul``'s and the bias's sum over the rows.

It applies to a 2-D input on the fast CPU backend, float32 or float64, where
``FastOps.matrix_multiply`` would take task 2.3's packed product and no autocast is
routing Functions; elsewhere, and in a handout (which leaves this file out), the layer
computes ``x @ weight + bias`` as the task wrote it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from module0.autodiff import Context
from module1 import tensor_functions
from module1.tensor import Tensor
from module1.tensor_data import is_device_array
from module1.tensor_functions import Function, _swap_last, _wanted
from module2 import fast_matmul, threads
from module2.fast_ops import PACKED_MIN_MULTIPLY_ADDS, PACKED_MIN_SIDE, FastTensorBackend

ROWS_PER_TASK = 64
"""Rows of the output one parallel task of :func:`fill_rows` writes."""


@njit(parallel=True, cache=True)
def fill_rows(out: Any, row: Any) -> None:
    """Every row of ``out`` ``(n, m)`` set to ``row`` ``(m,)``, in parallel by blocks of
    :data:`ROWS_PER_TASK` rows."""
    n = out.shape[0]
    for task in prange((n + ROWS_PER_TASK - 1) // ROWS_PER_TASK):
        for i in range(task * ROWS_PER_TASK, min(n, (task + 1) * ROWS_PER_TASK)):
            out[i, :] = row


class LinearBias(Function):
    """``x @ w + b`` for ``x`` ``(n, k)``, ``w`` ``(k, m)``, ``b`` ``(m,)``: the output
    filled with ``b``, then task 2.3's product (``gemm_into``) adds ``x @ w`` to it."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        threads.follow()
        (n, k), m = x.shape, w.shape[1]
        out = x.empty((n, m))
        storage = out._tensor._storage
        fill_rows(storage.reshape(n, m), b._tensor._storage)
        (x_row, x_col), (w_row, w_col) = x._tensor.strides, w._tensor.strides
        fast_matmul.gemm_into(
            storage, 0, m, 1, x._tensor._storage, 0, x_row, x_col,
            w._tensor._storage, 0, w_row, w_col, n, m, k, False,
        )  # fmt: skip
        return out

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor]:
        x, w = ctx.saved_values
        f = d.backend
        want_x, want_w, _ = _wanted(ctx) if ctx.inputs else [True] * 3
        return (
            f.matrix_multiply(d, _swap_last(w)) if want_x else None,
            f.matrix_multiply(_swap_last(x), d) if want_w else None,
            f.add_reduce(d, 0).view(d.shape[1]),
        )


def _host(t: Tensor) -> bool:
    return not is_device_array(t._tensor._storage)


def linear(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor | None:
    """``x @ weight + bias`` by :class:`LinearBias`, or None where it does not apply (see
    the module's docstring)."""
    if tensor_functions.dispatch is not None or not fast_matmul.use_packed:
        return None
    if len(x.shape) != 2 or x.backend is not FastTensorBackend:
        return None
    n, k = x.shape
    m = weight.shape[1]
    if n * k * m < PACKED_MIN_MULTIPLY_ADDS or min(n, k, m) < PACKED_MIN_SIDE:
        return None
    dtype = x.dtype
    if dtype not in (np.float32, np.float64) or weight.dtype != dtype or bias.dtype != dtype:
        return None
    if weight.backend is not x.backend or bias.backend is not x.backend:
        return None
    if not (_host(x) and _host(weight) and _host(bias)):
        return None
    b = bias._tensor
    if not (b.is_contiguous() and b._storage.size == m):
        return None
    if x._tensor._storage.size != x.size or weight._tensor._storage.size != weight.size:
        return None  # a view into a larger storage: gemm reads from position 0
    return LinearBias.apply(x, weight, bias)
