"""Tasks 4.3 and 4.4: pooling, max and argmax, softmax, log-softmax and dropout.

Everything here is built from stage 1's differentiable Tensor operations (views,
permutes, contiguous copies, elementwise ops, reductions) or from a :class:`Function`
whose forward and backward run the backend's kernels, so it works unchanged on every
backend (``SimpleBackend``, ``FastTensorBackend``, the CUDA backend) and autodiff needs
nothing new. The one exception is max pooling on the CPU backends: two Numba kernels
(:func:`maxpool2d_forward`, :func:`maxpool2d_backward`), because it runs after every
convolution of a CNN and the composed version costs several copies each way.
"""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np
from numba import njit, prange

from module0.autodiff import Context
from module1.creation import default_generator
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError, TensorData, is_device_array
from module1.tensor_functions import Function
from module4.fast_conv import _host, _wrap

Kernel = int | tuple[int, int]
"""A pooling window: ``(kh, kw)``, or one int for a square window."""


def _pool_args(name: str, input: Tensor, kernel: Kernel) -> tuple[int, int]:
    """``kernel`` as ``(kh, kw)`` after checking that ``input`` is ``(B, C, H, W)`` and
    the window tiles ``H`` and ``W`` exactly (ShapeError naming both otherwise)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name} needs a Tensor, got {type(input).__name__}")
    pair = (kernel, kernel) if isinstance(kernel, int | np.integer) else tuple(kernel)
    if len(pair) != 2 or not all(isinstance(k, int | np.integer) for k in pair):
        raise TypeError(f"{name}: kernel must be an int or a pair of ints, got {kernel!r}")
    kh, kw = int(pair[0]), int(pair[1])
    if kh < 1 or kw < 1:
        raise ShapeError(f"{name}: kernel {(kh, kw)} must be positive")
    if input.dims != 4:
        raise ShapeError(
            f"{name} needs a 4-D input (batch, channels, height, width), got shape {input.shape}"
        )
    _, _, height, width = input.shape
    if height % kh or width % kw:
        raise ShapeError(
            f"{name}: kernel {(kh, kw)} does not divide the height and width of input "
            f"shape {input.shape} ({height} % {kh} = {height % kh}, {width} % {kw} = "
            f"{width % kw}); crop or pad the input first"
        )
    return kh, kw


# ## Task 4.3: pooling


def tile(input: Tensor, kernel: Kernel) -> tuple[Tensor, int, int]:
    """Regroup ``input`` ``(B, C, H, W)`` so each ``kh x kw`` pooling window is one row:
    the result is ``(B, C, H // kh, W // kw, kh * kw)``, returned with ``H // kh`` and
    ``W // kw``. Made of views, permutes and one contiguous copy, so it is
    differentiable, and pooling becomes a reduction over the last dimension.

    The copy is stored *window-major* (as ``(kh * kw, B, C, H // kh, W // kw)``; the
    result is a permuted view of it): entry ``k`` of every window lies in one contiguous
    run, which is the layout the backends reduce and broadcast over fastest (see
    :func:`maxpool2d`).
    """
    kh, kw = _pool_args("tile", input, kernel)
    # BEGIN SOLUTION 4.3
    batch, channels, height, width = input.shape
    new_h, new_w = height // kh, width // kw
    # Split H into (new_h, kh) and W into (new_w, kw): a view of the contiguous storage.
    split = input.contiguous().view(batch, channels, new_h, kh, new_w, kw)
    # The two in-window dimensions first, copied, merged into one; then moved last.
    stacked = split.permute(3, 5, 0, 1, 2, 4).contiguous()
    stacked = stacked.view(kh * kw, batch, channels, new_h, new_w)
    return stacked.permute(1, 2, 3, 4, 0), new_h, new_w
    # END SOLUTION


def avgpool2d(input: Tensor, kernel: Kernel) -> Tensor:
    """The mean of each non-overlapping ``kh x kw`` window: ``(B, C, H // kh, W // kw)``."""
    kh, kw = _pool_args("avgpool2d", input, kernel)
    # BEGIN SOLUTION 4.3
    windows, new_h, new_w = tile(input, kernel)
    # (kh * kw, B * C * new_h * new_w): reduce over the leading dimension (see maxpool2d).
    stacked = windows.permute(4, 0, 1, 2, 3).contiguous().view(kh * kw, -1)
    return stacked.mean(0).view(input.shape[0], input.shape[1], new_h, new_w)
    # END SOLUTION


@njit(parallel=True, cache=True)
def maxpool2d_forward(out: Any, where: Any, input: Any, kh: int, kw: int) -> None:
    """Max pooling of ``input`` ``(B, C, H, W)`` into ``out`` ``(B, C, H // kh, W // kw)``,
    recording in ``where`` (same shape, int64) the position ``p * kw + q`` of each
    window's first maximal entry, for the backward pass. Parallel over ``(b, c)``
    planes, which no two threads share."""
    # BEGIN SOLUTION 4.3
    batch, channels, out_h, out_w = out.shape
    for plane in prange(batch * channels):
        b, c = plane // channels, plane % channels
        for i in range(out_h):
            for j in range(out_w):
                best = input[b, c, i * kh, j * kw]
                at = 0
                for p in range(kh):
                    for q in range(kw):
                        value = input[b, c, i * kh + p, j * kw + q]
                        if value > best:
                            best = value
                            at = p * kw + q
                out[b, c, i, j] = best
                where[b, c, i, j] = at
    # END SOLUTION


@njit(parallel=True, cache=True)
def maxpool2d_backward(grad_input: Any, grad_out: Any, where: Any, kh: int, kw: int) -> None:
    """The gradient of :func:`maxpool2d_forward`: each window's gradient goes to the
    entry ``where`` names, every other entry of ``grad_input`` gets 0."""
    # BEGIN SOLUTION 4.3
    batch, channels, out_h, out_w = grad_out.shape
    for plane in prange(batch * channels):
        b, c = plane // channels, plane % channels
        grad_input[b, c] = 0.0
        for i in range(out_h):
            for j in range(out_w):
                at = where[b, c, i, j]
                grad_input[b, c, i * kh + at // kw, j * kw + at % kw] = grad_out[b, c, i, j]
    # END SOLUTION


class MaxPool2dFun(Function):
    """Max pooling on the CPU backends in one kernel each way (see :func:`maxpool2d`)."""

    @staticmethod
    def forward(ctx: Context, input: Tensor, kh: int, kw: int) -> Tensor:
        x = _host(input, "maxpool2d")
        batch, channels, height, width = x.shape
        out = np.empty((batch, channels, height // kh, width // kw), x.dtype)
        where = np.empty(out.shape, dtype=np.int64)
        maxpool2d_forward(out, where, x, kh, kw)
        ctx.save_for_backward(x.shape, where, kh, kw)
        return _wrap(out, input.backend)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        shape, where, kh, kw = ctx.saved_values
        grad = np.empty(shape, d.dtype)
        maxpool2d_backward(grad, _host(d, "maxpool2d"), where, kh, kw)
        return _wrap(grad, d.backend)


def maxpool2d(input: Tensor, kernel: Kernel) -> Tensor:
    """The largest entry of each non-overlapping ``kh x kw`` window:
    ``(B, C, H // kh, W // kw)``. The gradient of a window goes to its first maximal
    entry (see :func:`max`).

    On the CPU backends this is one Numba kernel forward and one backward
    (:func:`maxpool2d_forward`, :func:`maxpool2d_backward`): pooling sits between the
    convolutions of every CNN, and composed from tensor operations (below, for tensors in
    GPU memory) it took about 8x the time of both kernels, most of it in copies through
    permuted layouts. The composed version reduces the windows as a
    ``(kh * kw, B * C * H // kh * W // kw)`` matrix over its first dimension, where each
    step of the backends' kernels is one long contiguous row.
    """
    kh, kw = _pool_args("maxpool2d", input, kernel)
    if not is_device_array(input._tensor._storage):
        return MaxPool2dFun.apply(input, kh, kw)
    windows, new_h, new_w = tile(input, kernel)
    stacked = windows.permute(4, 0, 1, 2, 3).contiguous().view(kh * kw, -1)  # no copy
    return max(stacked, 0).view(input.shape[0], input.shape[1], new_h, new_w)


# ## Task 4.3: max and argmax along a dimension


def _dim_of(name: str, input: Tensor, dim: int) -> int:
    """``dim`` as an index in ``0 .. input.dims - 1`` (negative counts from the end);
    IndexingError for one out of range, ShapeError for an empty dimension (no maximum)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name} needs a Tensor, got {type(input).__name__}")
    if not isinstance(dim, int | np.integer) or isinstance(dim, bool):
        raise TypeError(f"{name}: dim must be an int, got {dim!r}")
    d = input._dim(int(dim))  # IndexingError naming dim and shape
    if input.shape[d] == 0:
        raise ShapeError(f"{name} over dim {dim} of shape {input.shape}: the dimension is empty")
    return d


def _without(shape: tuple[int, ...], dim: int) -> tuple[int, ...]:
    """``shape`` with dimension ``dim`` dropped (what ``keepdim=False`` returns)."""
    return shape[:dim] + shape[dim + 1 :]


def _countdown(input: Tensor, dim: int) -> Tensor:
    """``n, n - 1, ..., 1`` along ``dim`` (``n = input.shape[dim]``: entry ``i`` holds
    ``n - i``), size 1 in every other dimension (it broadcasts against ``input``), on
    ``input``'s backend: multiplied by a 0/1 mask of the maximal entries, its largest
    product along ``dim`` is at the first maximum."""
    n = input.shape[dim]
    shape = tuple(n if d == dim else 1 for d in range(input.dims))
    return input._new(TensorData(np.arange(n, 0, -1, dtype=input.dtype), shape))


class Max(Function):
    """The maximum over dimension ``dim`` (kept, with size 1). Unlike stage 1's
    ``Tensor.max``, which shares the gradient of a tie evenly, the whole gradient goes to
    one entry per slice, the first maximal one: what ``torch.max(x, dim)`` and max
    pooling do, and the derivative of the max function wherever it has one."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int) -> Tensor:
        # BEGIN SOLUTION 4.3
        m = a.backend.max_reduce(a, dim)
        ctx.save_for_backward(a, m, dim)
        return m
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 4.3
        a, m, dim = ctx.saved_values
        f = d.backend
        # Score each maximal entry n - i (others 0): the best score marks the first one.
        score = f.mul_zip(f.eq_zip(a, m), _countdown(a, dim))
        first = f.eq_zip(score, f.max_reduce(score, dim))  # 1.0 there, 0.0 elsewhere
        return f.mul_zip(first, d)
        # END SOLUTION


def max(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    """The largest value along ``dim`` (``torch.max(input, dim).values``); the gradient
    of each slice goes to its first maximal entry. ``dim`` is dropped from the shape
    unless ``keepdim``."""
    d = _dim_of("max", input, dim)
    out = Max.apply(input, d)
    return out if keepdim else out.view(*_without(out.shape, d))


def argmax(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    """The index (as a float) of the first largest value along ``dim``, like
    ``torch.argmax``; a constant (indices have no gradient). ``dim`` is dropped from the
    shape unless ``keepdim``."""
    d = _dim_of("argmax", input, dim)
    a = input.detach()
    # BEGIN SOLUTION 4.3
    f = a.backend
    score = f.mul_zip(f.eq_zip(a, f.max_reduce(a, d)), _countdown(a, d))
    best = f.max_reduce(score, d)  # n - (index of the first maximum)
    index = f.add_zip(f.neg_map(best), a.full((), float(a.shape[d])))
    return index if keepdim else index._reshaped(_without(index.shape, d))
    # END SOLUTION


# ## Task 4.4: softmax and log-softmax


def _softmax_dim(name: str, input: Tensor, dim: int) -> int:
    if not isinstance(input, Tensor):
        raise TypeError(f"{name} needs a Tensor, got {type(input).__name__}")
    if not isinstance(dim, int | np.integer) or isinstance(dim, bool):
        raise TypeError(f"{name}: dim must be an int, got {dim!r}")
    return input._dim(int(dim))


def softmax(input: Tensor, dim: int) -> Tensor:
    r"""``exp(x_i) / sum_j exp(x_j)`` along ``dim``: positive entries that sum to 1.

    Computed as ``exp(x_i - m) / sum_j exp(x_j - m)`` with ``m`` the maximum along
    ``dim``: the same value (the factor ``e^{-m}`` cancels) without overflow, since every
    exponent is at most 0 and the largest is exactly 0. ``m`` is a constant to autodiff,
    which is exact: softmax does not change when a constant is added along ``dim``.
    """
    d = _softmax_dim("softmax", input, dim)
    # BEGIN SOLUTION 4.4
    shift = input.detach().max(d, keepdim=True)
    e = (input - shift).exp()
    return e / e.sum(d, keepdim=True)
    # END SOLUTION


def logsoftmax(input: Tensor, dim: int) -> Tensor:
    r"""``x_i - log sum_j exp(x_j)`` along ``dim``, the log of :func:`softmax`.

    Computed with the log-sum-exp trick, ``x_i - m - log sum_j exp(x_j - m)`` (``m`` the
    maximum along ``dim``, a constant to autodiff): finite for any finite input, where
    ``log(softmax(x))`` gives ``-inf`` once an entry's softmax underflows to 0.
    """
    d = _softmax_dim("logsoftmax", input, dim)
    # BEGIN SOLUTION 4.4
    shifted = input - input.detach().max(d, keepdim=True)
    return shifted - shifted.exp().sum(d, keepdim=True).log()
    # END SOLUTION


# ## Task 4.4: dropout


def dropout(
    input: Tensor, p: float, training: bool = True, rng: np.random.Generator | None = None
) -> Tensor:
    """Inverted dropout: each entry is zeroed with probability ``p`` and the kept ones
    are scaled by ``1 / (1 - p)``, so every entry's expected value is unchanged and the
    network needs no rescaling at evaluation time.

    The identity when ``training`` is False or ``p == 0``; all zeros when ``p == 1``.
    The mask is drawn on the host with NumPy from ``rng``; without one, from the
    framework's generator (the one ``rand`` uses and ``manual_seed`` restarts), so a
    run is reproducible yet successive calls draw different masks. ValueError for ``p``
    outside ``[0, 1]``.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"dropout needs a Tensor, got {type(input).__name__}")
    if not isinstance(p, Real) or isinstance(p, bool) or not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p!r}")
    p = float(p)
    if not training or p == 0.0:
        return input
    generator = rng if rng is not None else default_generator()
    # BEGIN SOLUTION 4.4
    keep = generator.random(input.shape) >= p  # True with probability 1 - p
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    mask = from_numpy(keep * scale, input.backend, dtype=input.dtype)
    return input * mask
    # END SOLUTION
