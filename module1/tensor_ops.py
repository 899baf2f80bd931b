"""Task 1.3: the tensor backend — map, zip, reduce and matrix multiply over strided storage.

A *backend* does the numeric work of tensors. :class:`TensorOps` is its protocol: four
higher-order operations, each turning a float function into a whole-tensor operation.
:class:`TensorBackend` builds, from one TensorOps, every specialised operation the tensor
functions use (``add_zip``, ``exp_map``, ``sum_reduce``, ...). Stage 1's
:class:`SimpleOps` runs plain Python loops; stage 2 compiles the same loops with Numba
and stage 3 runs them as CUDA kernels, behind the same protocol.

The low-level kernels (:func:`tensor_map`, :func:`tensor_zip`, :func:`tensor_reduce`,
:func:`tensor_matrix_multiply`) work on ``(storage, shape, strides)`` triples, so they
read and write any layout: contiguous, permuted or broadcast. They use only loops,
integer arithmetic and the index functions of ``tensor_data``, the Python that Numba
compiles.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from module0 import operators
from module1.tensor_data import (
    Shape,
    ShapeError,
    Storage,
    Strides,
    broadcast_index,
    index_to_position,
    shape_broadcast,
    to_index,
)

if TYPE_CHECKING:
    from module1.tensor import Tensor

UnaryFn = Callable[[float], float]
BinaryFn = Callable[[float, float], float]
Ordinals = np.ndarray
"""Row-major entry numbers (int64) into a tensor's shape: what advanced indexing
selects (see ``module1.indexing``)."""


# ## A float function the backend lifts (beyond module0.operators)


def is_close_float(a: float, b: float) -> float:
    """1.0 where ``a`` and ``b`` are close (see ``operators.is_close``), else 0.0."""
    return 1.0 if operators.is_close(a, b) else 0.0


# ## The protocol


class MapProto(Protocol):
    def __call__(self, a: Tensor, out: Tensor | None = None, /) -> Tensor: ...


class TensorOps:
    """The operations a backend provides. Each is a classmethod/staticmethod so a backend
    is a class, not an instance."""

    cuda: bool = False
    """True when the backend's kernels run on a GPU."""

    @staticmethod
    def map(fn: UnaryFn) -> MapProto:
        """``fn`` applied to every entry. ``map(fn)(a, out)`` writes into ``out``
        (which ``a`` must broadcast to); ``map(fn)(a)`` returns a new tensor."""
        raise NotImplementedError

    @staticmethod
    def zip(fn: BinaryFn) -> Callable[[Tensor, Tensor], Tensor]:
        """``fn`` applied entry by entry to two tensors broadcast together."""
        raise NotImplementedError

    @staticmethod
    def reduce(fn: BinaryFn, start: float = 0.0) -> Callable[[Tensor, int], Tensor]:
        """``reduce(fn, start)(a, dim)`` folds ``fn`` along ``dim`` starting from
        ``start``; the result has size 1 in ``dim``."""
        raise NotImplementedError

    @staticmethod
    def matrix_multiply(a: Tensor, b: Tensor) -> Tensor:
        """Batched matrix product over the last two dimensions, batch dimensions
        broadcast: ``(..., n, m) @ (..., m, p) -> (..., n, p)``."""
        raise NotImplementedError

    @staticmethod
    def gather(a: Tensor, ordinals: Ordinals) -> Tensor:
        """A new tensor of ``ordinals.shape`` whose entry ``j`` (in row-major order) is
        the entry of ``a`` numbered ``ordinals.flat[j]`` in ``a``'s row-major order:
        what advanced indexing reads (``ordinals`` are int64, in range)."""
        raise NotImplementedError

    @staticmethod
    def scatter_add(d: Tensor, ordinals: Ordinals, shape: tuple[int, ...]) -> Tensor:
        """A new tensor of ``shape``: zeros, plus each entry of ``d`` (of
        ``ordinals.shape``) added at the entry numbered by its ordinal; entries that
        several ordinals name receive the sum. The adjoint of :meth:`gather`."""
        raise NotImplementedError


class TensorBackend:
    """Every specialised operation the tensor functions need, built from one TensorOps.

    ``SimpleBackend = TensorBackend(SimpleOps)``; a later stage makes its own backend
    from its own ops class and every Tensor operation runs on it unchanged.
    """

    def __init__(self, ops: type[TensorOps]) -> None:
        self.ops = ops
        self.cuda = ops.cuda
        self.name = ops.__name__

        # Unary.
        self.neg_map = ops.map(operators.neg)
        self.sigmoid_map = ops.map(operators.sigmoid)
        self.relu_map = ops.map(operators.relu)
        self.tanh_map = ops.map(operators.tanh)
        self.log_map = ops.map(operators.log)
        self.exp_map = ops.map(operators.exp)
        self.id_map = ops.map(operators.id)
        self.inv_map = ops.map(operators.inv)

        # Binary.
        self.add_zip = ops.zip(operators.add)
        self.mul_zip = ops.zip(operators.mul)
        self.lt_zip = ops.zip(operators.lt)
        self.eq_zip = ops.zip(operators.eq)
        self.is_close_zip = ops.zip(is_close_float)
        self.pow_zip = ops.zip(operators.power)
        self.relu_back_zip = ops.zip(operators.relu_back)
        self.log_back_zip = ops.zip(operators.log_back)
        self.inv_back_zip = ops.zip(operators.inv_back)

        # Reductions.
        self.add_reduce = ops.reduce(operators.add, 0.0)
        self.mul_reduce = ops.reduce(operators.mul, 1.0)
        self.max_reduce = ops.reduce(operators.max, -math.inf)

        self.matrix_multiply = ops.matrix_multiply

        # Advanced indexing.
        self.gather = ops.gather
        self.scatter_add = ops.scatter_add

    def __repr__(self) -> str:
        return f"TensorBackend({self.name})"


# ## Task 1.3: the kernels


def tensor_map(
    fn: UnaryFn,
) -> Callable[[Storage, Shape, Strides, Storage, Shape, Strides], None]:
    """The kernel of ``map``: for every index of ``out_shape``, write ``fn`` of the entry
    of the input it reads (the input broadcast to ``out_shape``).

    Arguments of the returned function: ``out, out_shape, out_strides, in_storage,
    in_shape, in_strides``. Both layouts may be anything: contiguous, permuted, or
    (for the input) smaller than the output and broadcast.
    """

    def _map(
        out: Storage,
        out_shape: Shape,
        out_strides: Strides,
        in_storage: Storage,
        in_shape: Shape,
        in_strides: Strides,
    ) -> None:
        # BEGIN SOLUTION 1.3
        out_index = np.zeros(len(out_shape), dtype=np.int32)
        in_index = np.zeros(len(in_shape), dtype=np.int32)
        size = 1
        for dim in range(len(out_shape)):
            size *= out_shape[dim]
        for ordinal in range(size):
            to_index(ordinal, out_shape, out_index)
            broadcast_index(out_index, out_shape, in_shape, in_index)
            value = in_storage[index_to_position(in_index, in_strides)]
            out[index_to_position(out_index, out_strides)] = fn(value)
        # END SOLUTION

    return _map


def tensor_zip(
    fn: BinaryFn,
) -> Callable[[Storage, Shape, Strides, Storage, Shape, Strides, Storage, Shape, Strides], None]:
    """The kernel of ``zip``: for every index of ``out_shape``, write ``fn(a, b)`` of
    the entries of ``a`` and ``b`` it reads (both broadcast to ``out_shape``).

    Arguments of the returned function: ``out, out_shape, out_strides, a_storage,
    a_shape, a_strides, b_storage, b_shape, b_strides``.
    """

    def _zip(
        out: Storage,
        out_shape: Shape,
        out_strides: Strides,
        a_storage: Storage,
        a_shape: Shape,
        a_strides: Strides,
        b_storage: Storage,
        b_shape: Shape,
        b_strides: Strides,
    ) -> None:
        # BEGIN SOLUTION 1.3
        out_index = np.zeros(len(out_shape), dtype=np.int32)
        a_index = np.zeros(len(a_shape), dtype=np.int32)
        b_index = np.zeros(len(b_shape), dtype=np.int32)
        size = 1
        for dim in range(len(out_shape)):
            size *= out_shape[dim]
        for ordinal in range(size):
            to_index(ordinal, out_shape, out_index)
            broadcast_index(out_index, out_shape, a_shape, a_index)
            broadcast_index(out_index, out_shape, b_shape, b_index)
            a = a_storage[index_to_position(a_index, a_strides)]
            b = b_storage[index_to_position(b_index, b_strides)]
            out[index_to_position(out_index, out_strides)] = fn(a, b)
        # END SOLUTION

    return _zip


def tensor_reduce(
    fn: BinaryFn,
) -> Callable[[Storage, Shape, Strides, Storage, Shape, Strides, int], None]:
    """The kernel of ``reduce``: ``out`` has the input's shape with size 1 in
    ``reduce_dim`` and already holds the start value; fold every entry of the input
    along ``reduce_dim`` into it, in index order: ``out = fn(out, a[..., k, ...])``.

    Arguments of the returned function: ``out, out_shape, out_strides, a_storage,
    a_shape, a_strides, reduce_dim``.
    """

    def _reduce(
        out: Storage,
        out_shape: Shape,
        out_strides: Strides,
        a_storage: Storage,
        a_shape: Shape,
        a_strides: Strides,
        reduce_dim: int,
    ) -> None:
        # BEGIN SOLUTION 1.3
        index = np.zeros(len(out_shape), dtype=np.int32)
        size = 1
        for dim in range(len(out_shape)):
            size *= out_shape[dim]
        step = a_strides[reduce_dim]
        for ordinal in range(size):
            to_index(ordinal, out_shape, index)
            out_position = index_to_position(index, out_strides)
            position = index_to_position(index, a_strides)  # index[reduce_dim] is 0
            acc = out[out_position]
            for _ in range(a_shape[reduce_dim]):
                acc = fn(acc, a_storage[position])
                position += step
            out[out_position] = acc
        # END SOLUTION

    return _reduce


def tensor_matrix_multiply(
    out: Storage,
    out_shape: Shape,
    out_strides: Strides,
    a_storage: Storage,
    a_shape: Shape,
    a_strides: Strides,
    b_storage: Storage,
    b_shape: Shape,
    b_strides: Strides,
) -> None:
    """The kernel of the batched matrix product: ``out[..., i, j] = sum_k a[..., i, k] *
    b[..., k, j]``, where ``a`` is ``(..., n, m)``, ``b`` is ``(..., m, p)``, ``out`` is
    ``(..., n, p)`` and the batch dimensions ``...`` of ``a`` and ``b`` broadcast to
    those of ``out``. Every operand has at least two dimensions; any layout."""
    # BEGIN SOLUTION 1.3
    out_index = np.zeros(len(out_shape), dtype=np.int32)
    a_index = np.zeros(len(a_shape), dtype=np.int32)
    b_index = np.zeros(len(b_shape), dtype=np.int32)
    inner = a_shape[len(a_shape) - 1]
    a_step = a_strides[len(a_strides) - 1]
    b_step = b_strides[len(b_strides) - 2]
    size = 1
    for dim in range(len(out_shape)):
        size *= out_shape[dim]
    for ordinal in range(size):
        to_index(ordinal, out_shape, out_index)
        # Batch dimensions broadcast; row i of a, column j of b, and k starts at 0.
        broadcast_index(out_index, out_shape, a_shape, a_index)
        broadcast_index(out_index, out_shape, b_shape, b_index)
        a_index[len(a_shape) - 1] = 0
        b_index[len(b_shape) - 2] = 0
        a_position = index_to_position(a_index, a_strides)
        b_position = index_to_position(b_index, b_strides)
        acc = 0.0
        for _ in range(inner):
            acc += a_storage[a_position] * b_storage[b_position]
            a_position += a_step
            b_position += b_step
        out[index_to_position(out_index, out_strides)] = acc
    # END SOLUTION


# ## Task 1.6: gather and scatter-add


def tensor_gather(
    out: Storage,
    a_storage: Storage,
    a_shape: Shape,
    a_strides: Strides,
    ordinals: Ordinals,
) -> None:
    """The kernel of advanced indexing: ``out[j]`` (``out`` is a new contiguous storage
    of ``len(ordinals)`` entries) is the entry of ``a`` whose row-major number in
    ``a_shape`` is ``ordinals[j]`` (``ordinals`` flat, int64, in range). ``a``'s layout
    may be anything: find the entry's index, then its storage position."""
    # BEGIN SOLUTION 1.6
    a_index = np.zeros(len(a_shape), dtype=np.int32)
    for j in range(len(ordinals)):
        to_index(ordinals[j], a_shape, a_index)
        out[j] = a_storage[index_to_position(a_index, a_strides)]
    # END SOLUTION


def tensor_scatter_add(
    out: Storage,
    d_storage: Storage,
    d_shape: Shape,
    d_strides: Strides,
    ordinals: Ordinals,
) -> None:
    """The kernel of gather's backward: ``out`` (a contiguous storage of the indexed
    tensor's shape, zeroed) gets the ``j``-th entry of ``d`` (row-major order of
    ``d_shape``, any layout) added at position ``ordinals[j]``. An ordinal that appears
    twice receives both entries: add, never overwrite."""
    # BEGIN SOLUTION 1.6
    d_index = np.zeros(len(d_shape), dtype=np.int32)
    for j in range(len(ordinals)):
        to_index(j, d_shape, d_index)
        out[ordinals[j]] += d_storage[index_to_position(d_index, d_strides)]
    # END SOLUTION


# ## The simple backend: the kernels above, called from plain Python


class SimpleOps(TensorOps):
    """The reference backend: the kernels above run as ordinary Python."""

    @staticmethod
    def map(fn: UnaryFn) -> MapProto:
        kernel = tensor_map(fn)

        def apply(a: Tensor, out: Tensor | None = None) -> Tensor:
            out = map_output(a, out)
            kernel(*out.tuple_arrays(), *a.tuple_arrays())
            return out

        return apply

    @staticmethod
    def zip(fn: BinaryFn) -> Callable[[Tensor, Tensor], Tensor]:
        kernel = tensor_zip(fn)

        def apply(a: Tensor, b: Tensor) -> Tensor:
            out = zip_output(a, b)
            kernel(*out.tuple_arrays(), *a.tuple_arrays(), *b.tuple_arrays())
            return out

        return apply

    @staticmethod
    def reduce(fn: BinaryFn, start: float = 0.0) -> Callable[[Tensor, int], Tensor]:
        kernel = tensor_reduce(fn)

        def apply(a: Tensor, dim: int) -> Tensor:
            out = reduce_output(a, dim, start)
            kernel(*out.tuple_arrays(), *a.tuple_arrays(), dim)
            return out

        return apply

    @staticmethod
    def matrix_multiply(a: Tensor, b: Tensor) -> Tensor:
        out = a.zeros(matmul_shape(a.shape, b.shape))
        tensor_matrix_multiply(*out.tuple_arrays(), *a.tuple_arrays(), *b.tuple_arrays())
        return out

    @staticmethod
    def gather(a: Tensor, ordinals: Ordinals) -> Tensor:
        out = a.empty(ordinals.shape)
        tensor_gather(out._tensor._storage, *a.tuple_arrays(), ordinals.reshape(-1))
        return out

    @staticmethod
    def scatter_add(d: Tensor, ordinals: Ordinals, shape: tuple[int, ...]) -> Tensor:
        out = d.zeros(shape)
        tensor_scatter_add(out._tensor._storage, *d.tuple_arrays(), ordinals.reshape(-1))
        return out


def map_output(a: Tensor, out: Tensor | None) -> Tensor:
    """``out`` checked to hold ``a`` broadcast, or a new tensor of ``a``'s shape."""
    if out is None:
        return a.empty(a._tensor.shape)
    if shape_broadcast(a.shape, out.shape) != out.shape:
        raise ShapeError(f"map: input of shape {a.shape} does not fit out {out.shape}")
    return out


def zip_output(a: Tensor, b: Tensor) -> Tensor:
    """A new tensor (values unset: the kernel writes them all) of the shape ``a`` and
    ``b`` broadcast to."""
    a_shape, b_shape = a._tensor.shape, b._tensor.shape
    if a_shape == b_shape or not b_shape:  # the same shape, or b a single number
        return a.empty(a_shape)
    return a.empty(b_shape if not a_shape else shape_broadcast(a_shape, b_shape))


def reduce_output(a: Tensor, dim: int, start: float) -> Tensor:
    """A new tensor of ``a``'s shape with size 1 in ``dim``, filled with ``start``."""
    shape = list(a.shape)
    shape[dim] = 1
    return a.full(tuple(shape), start)


def matmul_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of ``a @ b`` for operands of at least two dimensions; ShapeError names
    both shapes when the inner dimensions differ or the batch dimensions do not
    broadcast."""
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise ShapeError(f"matrix_multiply needs 2-D or more, got {a_shape} and {b_shape}")
    if a_shape[-1] != b_shape[-2]:
        raise ShapeError(
            f"matmul of shapes {a_shape} and {b_shape}: inner dimensions "
            f"{a_shape[-1]} and {b_shape[-2]} differ"
        )
    if len(a_shape) == 2 and len(b_shape) == 2:  # no batch dimensions
        return (a_shape[0], b_shape[1])
    try:
        batch = shape_broadcast(a_shape[:-2], b_shape[:-2])
    except ShapeError:
        raise ShapeError(
            f"matmul of shapes {a_shape} and {b_shape}: batch dimensions "
            f"{a_shape[:-2]} and {b_shape[:-2]} do not broadcast"
        ) from None
    return (*batch, a_shape[-2], b_shape[-1])


SimpleBackend = TensorBackend(SimpleOps)
"""The default backend of stage 1."""
