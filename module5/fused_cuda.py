"""The reference's fused softmax and LayerNorm on stage 3's CUDA backend.

Not a task, and not in the handout (``autograder/release.py``): task 5.5 asks for the
CPU kernels; these are what the same fusion looks like on a GPU. One block of
:data:`THREADS` threads per row: the threads stride over the row, and combine their
partial maxima and sums through shared memory in a tree (stage 3's ``sum_practice``),
so a row is read from global memory a fixed number of times whatever its length (a
row of fewer entries gets fewer threads: :func:`threads_for`). The
statistics are kept in float64 whatever the tensor's dtype. ``module5/fused_route.py``'s
:func:`~module5.fused_route.softmax` and :func:`~module5.fused_route.layer_norm` take these for a
tensor in GPU memory; tested on Numba's CUDA simulator (``tests/module5/
test_fused_cuda.py``), and on a GPU where one is present.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda, float64

from module0.autodiff import Context
from module1.tensor import Tensor
from module1.tensor_data import TensorData
from module1.tensor_functions import Function

THREADS = 128
"""The most threads per block; a row of fewer entries gets the smallest power of two
that covers it (:func:`threads_for`), so the tree and the strides use
``cuda.blockDim.x``."""


def threads_for(n: int) -> int:
    """Threads per block for rows of ``n`` entries: a power of two, at most
    :data:`THREADS` (on the simulator, where every thread is a Python thread, this is
    what keeps small rows cheap)."""
    threads = 1
    while threads < min(n, THREADS):
        threads *= 2
    return threads


@cuda.jit(device=True)
def _block_reduce(cache: Any, t: int, value: float, largest: bool) -> float:
    """The block's sum (or maximum) of each thread's ``value``, returned to every thread."""
    cache[t] = value
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            other = cache[t + stride]
            if largest:
                cache[t] = other if other > cache[t] else cache[t]
            else:
                cache[t] += other
        cuda.syncthreads()
        stride //= 2
    result = cache[0]
    cuda.syncthreads()  # every thread has read it before the cache is used again
    return result


@cuda.jit
def softmax_rows_kernel(x: Any, out: Any, n: int, period: int, shift: int) -> None:
    """Block ``r``: the softmax of row ``r`` over its first ``min(n, r % period + shift
    + 1)`` entries, zeros after (``module5.fused.softmax_rows``'s contract)."""
    cache = cuda.shared.array(THREADS, float64)
    r, t = cuda.blockIdx.x, cuda.threadIdx.x
    base = r * n
    kept = min(n, r % period + shift + 1)
    top = -math.inf
    for j in range(t, kept, cuda.blockDim.x):
        v = x[base + j]
        top = v if v > top else top
    top = _block_reduce(cache, t, top, True)
    total = 0.0
    for j in range(t, kept, cuda.blockDim.x):
        e = math.exp(x[base + j] - top)
        out[base + j] = e
        total += e
    total = _block_reduce(cache, t, total, False)
    for j in range(t, n, cuda.blockDim.x):
        out[base + j] = out[base + j] / total if j < kept else 0.0


@cuda.jit
def softmax_backward_kernel(y: Any, dy: Any, dx: Any, n: int) -> None:
    """Block ``r``: ``dx = y * (dy - sum(y * dy))`` over row ``r``."""
    cache = cuda.shared.array(THREADS, float64)
    r, t = cuda.blockIdx.x, cuda.threadIdx.x
    base = r * n
    dot = 0.0
    for j in range(t, n, cuda.blockDim.x):
        dot += y[base + j] * dy[base + j]
    dot = _block_reduce(cache, t, dot, False)
    for j in range(t, n, cuda.blockDim.x):
        dx[base + j] = y[base + j] * (dy[base + j] - dot)


@cuda.jit
def layer_norm_kernel(
    x: Any, weight: Any, bias: Any, eps: float, out: Any, mean: Any, rstd: Any, n: int
) -> None:
    """Block ``r``: LayerNorm of row ``r``, its statistics from sums of the row minus its
    first entry (one pass; a large mean cancels first), into ``mean[r]``, ``rstd[r]``."""
    cache = cuda.shared.array(THREADS, float64)
    r, t = cuda.blockIdx.x, cuda.threadIdx.x
    base = r * n
    first = float64(x[base])
    total = 0.0
    squares = 0.0
    for j in range(t, n, cuda.blockDim.x):
        v = x[base + j] - first
        total += v
        squares += v * v
    total = _block_reduce(cache, t, total, False)
    squares = _block_reduce(cache, t, squares, False)
    shifted = total / n
    m = first + shifted
    s = 1.0 / math.sqrt(max(squares / n - shifted * shifted, 0.0) + eps)
    if t == 0:
        mean[r] = m
        rstd[r] = s
    for j in range(t, n, cuda.blockDim.x):
        out[base + j] = (x[base + j] - m) * s * weight[j] + bias[j]


@cuda.jit
def layer_norm_backward_kernel(
    d: Any, x: Any, weight: Any, mean: Any, rstd: Any, dx: Any, n: int
) -> None:
    """Block ``r``: row ``r``'s ``dx`` (``module5.fused.layer_norm_rows_backward``)."""
    cache = cuda.shared.array(THREADS, float64)
    r, t = cuda.blockIdx.x, cuda.threadIdx.x
    base = r * n
    m, s = mean[r], rstd[r]
    g_sum = 0.0
    gx_sum = 0.0
    for j in range(t, n, cuda.blockDim.x):
        g = d[base + j] * weight[j]
        g_sum += g
        gx_sum += g * (x[base + j] - m) * s
    g_mean = _block_reduce(cache, t, g_sum, False) / n
    gx_mean = _block_reduce(cache, t, gx_sum, False) / n
    for j in range(t, n, cuda.blockDim.x):
        xhat = (x[base + j] - m) * s
        dx[base + j] = s * (d[base + j] * weight[j] - g_mean - xhat * gx_mean)


@cuda.jit
def column_sums_kernel(
    d: Any, x: Any, mean: Any, rstd: Any, dweight: Any, dbias: Any, rows: int, n: int
) -> None:
    """Thread ``j``: ``dweight[j] = sum_r d[r, j] xhat[r, j]`` and ``dbias[j] = sum_r
    d[r, j]`` (neighbouring threads read neighbouring entries of each row)."""
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if j >= n:
        return
    w = 0.0
    b = 0.0
    for r in range(rows):
        g = d[r * n + j]
        w += g * (x[r * n + j] - mean[r]) * rstd[r]
        b += g
    dweight[j] = w
    dbias[j] = b


# ## The Functions


def _flat(t: Tensor) -> Any:
    """``t``'s entries in GPU memory, row by row (the backend's copy when not already)."""
    data = t._tensor
    if not (data.is_contiguous() and data._storage.size == t.size):
        data = t.contiguous()._tensor
    return data._storage


def _tensor(storage: Any, shape: tuple[int, ...], like: Tensor) -> Tensor:
    return Tensor(TensorData(storage, shape), backend=like.backend)


class CudaSoftmax(Function):
    """Softmax over the last dimension by :func:`softmax_rows_kernel`."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, period: int, shift: int) -> Tensor:
        n = x.shape[-1]
        rows = x.size // n
        out = cuda.device_array(x.size, dtype=x.dtype)
        softmax_rows_kernel[rows, threads_for(n)](_flat(x), out, n, period, shift)
        ctx.save_for_backward(out, n)
        return _tensor(out, x.shape, x)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        y, n = ctx.saved_values
        dx = cuda.device_array(y.size, dtype=y.dtype)
        softmax_backward_kernel[y.size // n, threads_for(n)](y, _flat(d), dx, n)
        return _tensor(dx, d.shape, d)


class CudaLayerNorm(Function):
    """LayerNorm over the last dimension by :func:`layer_norm_kernel`."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
        n = x.shape[-1]
        rows = x.size // n
        flat, w = _flat(x), _flat(weight)
        out = cuda.device_array(x.size, dtype=x.dtype)
        mean, rstd = cuda.device_array(rows, np.float64), cuda.device_array(rows, np.float64)
        layer_norm_kernel[rows, threads_for(n)](flat, w, _flat(bias), eps, out, mean, rstd, n)
        ctx.save_for_backward(flat, w, mean, rstd, n, weight.shape)
        return _tensor(out, x.shape, x)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        flat, w, mean, rstd, n, wshape = ctx.saved_values
        rows = flat.size // n
        g = _flat(d)
        dx = cuda.device_array(flat.size, dtype=flat.dtype)
        layer_norm_backward_kernel[rows, threads_for(n)](g, flat, w, mean, rstd, dx, n)
        dweight = cuda.device_array(n, dtype=flat.dtype)
        dbias = cuda.device_array(n, dtype=flat.dtype)
        column_sums_kernel[-(-n // threads_for(n)), threads_for(n)](
            g, flat, mean, rstd, dweight, dbias, rows, n
        )
        return _tensor(dx, d.shape, d), _tensor(dweight, wshape, d), _tensor(dbias, wshape, d)
