"""Cutting, joining and selecting tensors, with autodiff: ``narrow``, ``split``,
``chunk``, ``cat``, ``stack``, ``where`` and ``masked_fill``, as PyTorch names them.

Given code, once, in the earliest stage that can hold it (stage 5's attention heads and
KV cache use them). Each is a Function whose forward copies through NumPy and whose
backward hands each input its own part of the gradient, so they run on every backend
(the values come back on the input's backend, in its dtype). The views that basic
indexing returns, without a copy, are another lesson.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from module0.autodiff import Context
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module1.tensor_functions import Function


def _index(ndim: int, dim: int, part: slice) -> tuple[Any, ...]:
    index: list[Any] = [slice(None)] * ndim
    index[dim] = part
    return tuple(index)


def _tensor(values: np.ndarray, like: Tensor) -> Tensor:
    return from_numpy(np.ascontiguousarray(values, dtype=like.dtype), like.backend, copy=False)


class _Narrow(Function):
    """Entries ``start:start + length`` along ``dim`` (a copy); the backward puts the
    gradient back in place, zeros elsewhere."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, dim: int, start: int, length: int) -> Tensor:
        ctx.save_for_backward(x.shape, dim, start, length)
        return _tensor(x.numpy()[_index(len(x.shape), dim, slice(start, start + length))], x)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        shape, dim, start, length = ctx.saved_values
        grad = np.zeros(shape, d.dtype)
        grad[_index(len(shape), dim, slice(start, start + length))] = d.numpy()
        return _tensor(grad, d)


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """``x`` restricted to ``start:start + length`` along ``dim``."""
    d = x._dim(dim)
    if not (0 <= start and length >= 0 and start + length <= x.shape[d]):
        raise ShapeError(
            f"narrow: {start}:{start + length} along dimension {d} of a tensor of shape {x.shape}"
        )
    return _Narrow.apply(x, d, int(start), int(length))


def split(x: Tensor, split_size: int | Sequence[int], dim: int = 0) -> list[Tensor]:
    """``x`` cut along ``dim``: into pieces of ``split_size`` (the last one shorter when
    it does not divide; an empty dimension gives one empty piece, as PyTorch), or of the
    sizes listed (which must add up to the dimension)."""
    d = x._dim(dim)
    n = x.shape[d]
    if isinstance(split_size, int):
        if split_size <= 0:
            raise ShapeError(f"split: a piece size of {split_size}; want a positive one")
        sizes = [min(split_size, n - i) for i in range(0, n, split_size)] or [0]  # PyTorch's
    else:
        sizes = [int(s) for s in split_size]
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ShapeError(
                f"split: sizes {sizes} do not add up to dimension {d} ({n}) of shape {x.shape}"
            )
    starts = np.cumsum([0, *sizes])[:-1]
    return [narrow(x, d, int(s), n_) for s, n_ in zip(starts, sizes, strict=True)]


def chunk(x: Tensor, chunks: int, dim: int = 0) -> list[Tensor]:
    """``x`` cut along ``dim`` into ``chunks`` pieces of ``ceil(size / chunks)`` (fewer
    where the size runs out first), as PyTorch's ``chunk``."""
    if chunks <= 0:
        raise ShapeError(f"chunk: {chunks} chunks; want at least one")
    n = x.shape[x._dim(dim)]
    return split(x, max(1, -(-n // chunks)), dim)


class _Cat(Function):
    """Tensors joined along ``dim``; the backward hands each its own slice."""

    @staticmethod
    def forward(ctx: Context, dim: int, *parts: Tensor) -> Tensor:
        sizes = [p.shape[dim] for p in parts]
        ctx.save_for_backward(dim, sizes)
        return _tensor(np.concatenate([p.numpy() for p in parts], axis=dim), parts[0])

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, ...]:
        dim, sizes = ctx.saved_values
        pieces = np.split(d.numpy(), np.cumsum(sizes)[:-1], axis=dim)
        return tuple(_tensor(p, d) for p in pieces)


def _same_shapes(name: str, parts: Sequence[Tensor], but: int | None) -> None:
    first = parts[0]
    for p in parts[1:]:
        if len(p.shape) != len(first.shape) or any(
            a != b for i, (a, b) in enumerate(zip(p.shape, first.shape, strict=True)) if i != but
        ):
            where = f"along dimension {but}" if but is not None else "(all dimensions)"
            raise ShapeError(f"{name} {where}: shapes {[q.shape for q in parts]} differ")


def cat(parts: Sequence[Tensor], dim: int = 0) -> Tensor:
    """``parts`` joined along ``dim``: every other dimension must agree."""
    if not parts:
        raise ValueError("cat: no tensors")
    d = parts[0]._dim(dim)
    _same_shapes("cat", parts, d)
    return _Cat.apply(d, *parts)


def stack(parts: Sequence[Tensor], dim: int = 0) -> Tensor:
    """``parts`` (all of one shape) joined along a new dimension ``dim``."""
    if not parts:
        raise ValueError("stack: no tensors")
    _same_shapes("stack", parts, None)
    ndim = len(parts[0].shape) + 1
    d = dim + ndim if dim < 0 else dim
    if not 0 <= d < ndim:
        raise IndexError(f"stack: dimension {dim} of a result with {ndim} dimensions")
    shape = parts[0].shape
    return cat([p.contiguous().view(*shape[:d], 1, *shape[d:]) for p in parts], d)


class _Where(Function):
    """``x`` where ``cond``, ``y`` elsewhere (both broadcast to the result); each gets
    the gradient of its own entries (autodiff sums it back to the input's shape)."""

    @staticmethod
    def forward(ctx: Context, cond: np.ndarray, x: Tensor, y: Tensor) -> Tensor:
        out = np.where(cond, x.numpy(), y.numpy())
        ctx.save_for_backward(cond)
        return _tensor(out, x)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor]:
        (cond,) = ctx.saved_values
        g = d.numpy()
        zero = np.zeros((), g.dtype)
        return _tensor(np.where(cond, g, zero), d), _tensor(np.where(cond, zero, g), d)


def where(cond: Any, x: Tensor | float, y: Tensor | float) -> Tensor:
    """``x`` where ``cond`` (booleans: an array or a tensor) is true, ``y`` elsewhere,
    all three broadcast together; a number stands for a constant tensor."""
    like = x if isinstance(x, Tensor) else y
    if not isinstance(like, Tensor):
        raise TypeError("where: x or y must be a Tensor")
    mask = cond.to_numpy() if isinstance(cond, Tensor) else np.asarray(cond)
    mask = mask.astype(bool)
    x = x if isinstance(x, Tensor) else from_numpy(np.full((), x, like.dtype), like.backend)
    y = y if isinstance(y, Tensor) else from_numpy(np.full((), y, like.dtype), like.backend)
    try:
        shape = np.broadcast_shapes(mask.shape, x.shape, y.shape)
    except ValueError:
        raise ShapeError(
            f"where: condition {mask.shape}, x {x.shape} and y {y.shape} do not broadcast"
        ) from None
    return _Where.apply(np.broadcast_to(mask, shape), x, y)


class _MaskedFill(Function):
    """``value`` where ``fill`` is True, ``x`` elsewhere (a copy); the gradient flows to
    the entries kept, never to the filled ones."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, fill: np.ndarray, value: float) -> Tensor:
        ctx.save_for_backward(fill)
        return _tensor(np.where(fill, np.asarray(value, x.dtype), x.numpy()), x)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (fill,) = ctx.saved_values
        return _tensor(np.where(fill, np.zeros((), d.dtype), d.numpy()), d)


def masked_fill(x: Tensor, fill: Any, value: float) -> Tensor:
    """``x`` with ``value`` wherever ``fill`` (booleans broadcasting to ``x``'s shape) is
    True, as PyTorch's ``masked_fill``. Unlike ``x * on + off``, whatever the filled
    entries held (NaN, infinity) is gone: ``NaN * 0`` is NaN."""
    mask = np.asarray(fill.to_numpy() if isinstance(fill, Tensor) else fill, dtype=bool)
    try:
        mask = np.broadcast_to(mask, x.shape)
    except ValueError:
        raise ShapeError(
            f"masked_fill: mask of shape {mask.shape} does not broadcast to {x.shape}"
        ) from None
    return _MaskedFill.apply(x, mask, float(value))
