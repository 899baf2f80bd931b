"""Tasks 2.1 and 2.2: the fast CPU backend — stage 1's kernels compiled with Numba.

:class:`FastOps` implements stage 1's :class:`~module1.tensor_ops.TensorOps` protocol
with ``numba.njit(parallel=True)`` kernels, so every Tensor operation, every Function
and the autodiff engine run on it unchanged (``FastTensorBackend``).

Two design points, both about Numba's on-disk cache (``cache=True``):

* **One module-level kernel per shape of work**, cached. A kernel built inside a factory
  closure (``def tensor_map(fn): ... return njit(_map)``) is never loaded from the cache
  (numba 0.68.1 saves a new ``.nbc`` file in every process), and neither is a kernel that
  takes the float function as an argument. So the kernels take an *op code*, a small int
  naming the float function (``OP_RELU``), and :func:`unary` / :func:`binary` switch on
  it. A float function outside the table still works, through an uncached compiled copy
  of stage 1's kernel (see :meth:`FastOps.map`).
* **Stage 0's operators and stage 1's index functions are compiled, not rewritten**:
  :func:`jit_functions` compiles them from their own source, and the cache key includes
  those files (see :mod:`module2.cache`), so editing ``module1/tensor_data.py`` or
  ``module0/operators.py`` recompiles the kernels instead of loading stale ones.

The tasks' kernels (2.1: map, zip, reduce; 2.2: the batched matrix product) are graded
by their contract alone: right values for every layout, and parallel for large inputs.
A ``prange`` over outputs with the index functions for each entry earns full marks;
``module2/README.md`` describes the faster paths the reference takes, as an option.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit, prange

from module1.tensor_data import Shape, Storage, Strides
from module1.tensor_ops import (
    MapProto,
    TensorBackend,
    TensorOps,
    map_output,
    matmul_shape,
    reduce_output,
    tensor_map,
    tensor_reduce,
    tensor_zip,
    zip_output,
)
from module2 import cache, fast_index, threads
from module2.compiled_ops import (  # the kernels' building blocks: see that file
    BINARY_OPS,
    PARALLEL_MIN,
    UNARY_OPS,
    binary,  # noqa: F401 - a plain answer's zip and reduce use it
    broadcast_index,
    index_to_position,
    size_of,
    to_index,
    unary,  # noqa: F401 - a plain answer's map uses it
)

# BEGIN SOLUTION 2.1 omit
from module2.fast_paths import (  # the reference's fast paths (not in the handout)
    BLOCK,
    CHUNK,
    LANES,
    THIN_SERIAL_MAX,
    VECTOR_MATH_OPS,
    aligned,
    binary_loop,
    combine,
    fold_part,
    fold_rows,
    is_contiguous,
    map_chunk,
    matmul_rows,
    matmul_small,
    row_length,
    unary_loop,
    vector_math_applies,
    vector_math_map,
    zip_chunk,
    zip_run,
)

# END SOLUTION

if TYPE_CHECKING:
    from module1.tensor import Tensor

cache.install()


# ## Task 2.1: parallel map, zip and reduce


@njit(parallel=True, cache=True)
def tensor_map_kernel(
    op: int,
    out: Storage, out_shape: Shape, out_strides: Strides,
    in_storage: Storage, in_shape: Shape, in_strides: Strides,
) -> None:  # fmt: skip
    """``out = unary(op, input)`` with the input broadcast to ``out_shape``; any layout
    of either (permuted, with gaps). Every output entry is written once, nothing else
    in ``out``. The loop over outputs is a ``prange``, so a large map uses every
    core."""
    # BEGIN SOLUTION 2.1
    # The reference's fast paths (see the README): aligned layouts loop straight over
    # storage in parallel blocks; otherwise each parallel iteration takes a chunk of
    # output rows with its own index buffers. Small maps run on the calling thread.
    size = size_of(out_shape)
    if aligned(out, out_shape, out_strides, in_storage, in_shape, in_strides, size):
        if size < PARALLEL_MIN:
            unary_loop(op, out, in_storage)
            return
        for block in prange((size + BLOCK - 1) // BLOCK):
            lo, hi = block * BLOCK, min(size, (block + 1) * BLOCK)
            unary_loop(op, out[lo:hi], in_storage[lo:hi])
        return
    if size == 0:
        return
    rows = size // row_length(out_shape)
    if size < PARALLEL_MIN:
        map_chunk(op, out, out_shape, out_strides, in_storage, in_shape, in_strides, 0, rows)
        return
    per_chunk = max(1, CHUNK // row_length(out_shape))  # rows per parallel iteration
    for chunk in prange((rows + per_chunk - 1) // per_chunk):
        lo, hi = chunk * per_chunk, min(rows, (chunk + 1) * per_chunk)
        map_chunk(op, out, out_shape, out_strides, in_storage, in_shape, in_strides, lo, hi)
    # END SOLUTION


@njit(parallel=True, cache=True)
def tensor_zip_kernel(
    op: int,
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    b_storage: Storage, b_shape: Shape, b_strides: Strides,
) -> None:  # fmt: skip
    """``out = binary(op, a, b)`` with both inputs broadcast to ``out_shape``; any
    layout, every output entry written once, in parallel over outputs, as
    :func:`tensor_map_kernel`."""
    # BEGIN SOLUTION 2.1
    # The same paths as the map's: aligned blocks, chunks of rows, small zips serial.
    size = size_of(out_shape)
    if aligned(out, out_shape, out_strides, a_storage, a_shape, a_strides, size) and aligned(
        out, out_shape, out_strides, b_storage, b_shape, b_strides, size
    ):
        if size < PARALLEL_MIN:
            binary_loop(op, out, a_storage, b_storage)
            return
        for block in prange((size + BLOCK - 1) // BLOCK):
            lo, hi = block * BLOCK, min(size, (block + 1) * BLOCK)
            binary_loop(op, out[lo:hi], a_storage[lo:hi], b_storage[lo:hi])
        return
    if size == 0:
        return
    run = zip_run(out_shape, out_strides, a_shape, a_strides, b_shape, b_strides)
    rows = size // run[0]
    if size < PARALLEL_MIN:
        zip_chunk(
            op, out, out_shape, out_strides, a_storage, a_shape, a_strides,
            b_storage, b_shape, b_strides, run, 0, rows,
        )  # fmt: skip
        return
    per_chunk = max(1, CHUNK // run[0])
    for chunk in prange((rows + per_chunk - 1) // per_chunk):
        lo, hi = chunk * per_chunk, min(rows, (chunk + 1) * per_chunk)
        zip_chunk(
            op, out, out_shape, out_strides, a_storage, a_shape, a_strides,
            b_storage, b_shape, b_strides, run, lo, hi,
        )  # fmt: skip
    # END SOLUTION


@njit(parallel=True, cache=True)
def tensor_reduce_kernel(
    op: int,
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    reduce_dim: int, parts: int,
) -> None:  # fmt: skip
    """Fold ``binary(op, ., .)`` along ``reduce_dim`` into ``out``, which has size 1 there
    and already holds the start value of each fold: ``out[i] = op(... op(op(out[i],
    a[i, 0]), a[i, 1]) ..., a[i, n - 1])`` (up to floating-point reassociation); any
    layout of either, in parallel over outputs.

    ``parts`` is a hint from the caller: into how many pieces each fold may be cut so
    that a few long folds (the sum of a whole tensor) still use every core; 1 when
    there are enough outputs. A kernel may ignore it."""
    # BEGIN SOLUTION 2.1
    # The reference's paths (see the README): contiguous tensors reduced along a
    # dimension other than the last fold blocks of outputs side by side, row by row
    # (fold_rows); otherwise each fold is cut into `parts` folded in parallel
    # (fold_part) and then combined in order. Small reductions run on one thread.
    size = size_of(out_shape)
    n = a_shape[reduce_dim]
    serial = size * n < PARALLEL_MIN
    inner = 1  # entries per step along reduce_dim, when contiguous
    for dim in range(reduce_dim + 1, len(a_shape)):
        inner *= a_shape[dim]
    if inner > 1 and is_contiguous(a_shape, a_strides) and is_contiguous(out_shape, out_strides):
        # Blocks of outputs: at most BLOCK wide, and in parallel at least 8 of them for
        # each outer index (so one wide row of outputs still keeps every core busy);
        # on one thread whole rows (half the calls for a (50, 100) bias gradient).
        width = min(BLOCK, inner if serial else max(LANES, (inner + 7) // 8))
        jobs = size // inner * ((inner + width - 1) // width)
        if serial:
            for job in range(jobs):
                fold_rows(op, out, a_storage, n, inner, job, width)
            return
        for job in prange(jobs):
            fold_rows(op, out, a_storage, n, inner, job, width)
        return
    parts = max(1, min(parts, n))
    jobs = size * parts
    partial = np.empty(jobs, np.float64)
    if serial:
        index = np.empty(len(out_shape), np.int32)
        for job in range(jobs):
            partial[job] = fold_part(
                op, out_shape, a_storage, a_shape, a_strides, reduce_dim, parts, job, index
            )
    else:
        per_chunk = max(1, min(CHUNK, jobs // 64))  # few long jobs: one per iteration
        for chunk in prange((jobs + per_chunk - 1) // per_chunk):
            index = np.empty(len(out_shape), np.int32)
            for job in range(chunk * per_chunk, min(jobs, (chunk + 1) * per_chunk)):
                partial[job] = fold_part(
                    op, out_shape, a_storage, a_shape, a_strides, reduce_dim, parts, job, index
                )
    if serial:
        combine(op, out, out_shape, out_strides, partial, parts, 0, size)
        return
    for chunk in prange((size + CHUNK - 1) // CHUNK):
        combine(
            op,
            out,
            out_shape,
            out_strides,
            partial,
            parts,
            chunk * CHUNK,
            min(size, (chunk + 1) * CHUNK),
        )
    # END SOLUTION


# ## Task 2.2: parallel batched matrix multiply


@njit(parallel=True, cache=True)
def tensor_matrix_multiply_kernel(
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    b_storage: Storage, b_shape: Shape, b_strides: Strides,
) -> None:  # fmt: skip
    """``out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]`` with batch dimensions
    broadcast, any layout of all three; every output entry written once (``out`` may
    hold anything before), in parallel over the output's entries or rows."""
    # BEGIN SOLUTION 2.2
    # The reference: chunks of output rows in parallel (matmul_rows), the index
    # functions once per row and the inner loops in i-k-j order over strides.
    dims = len(out_shape)
    p = out_shape[dims - 1]
    m = a_shape[len(a_shape) - 1]
    rows = size_of(out_shape) // p if p > 0 else 0
    a = (a_storage, a_shape, a_strides)
    b = (b_storage, b_shape, b_strides)
    if rows * m * p < PARALLEL_MIN:
        matmul_rows(out, out_shape, out_strides, *a, *b, 0, rows)
        return
    per_chunk = (rows + 63) // 64  # about 64 parallel iterations
    for chunk in prange((rows + per_chunk - 1) // per_chunk):
        lo, hi = chunk * per_chunk, min(rows, (chunk + 1) * per_chunk)
        matmul_rows(out, out_shape, out_strides, *a, *b, lo, hi)
    # END SOLUTION


# ## The backend

PACKED_MIN_MULTIPLY_ADDS = 1 << 16
"""Products of at least this many multiply-adds per matrix (40^3), and no side under
:data:`PACKED_MIN_SIDE`, use task 2.3's packed kernel (``module2/fast_matmul.py``);
smaller or thinner ones, where a call of it costs more than it saves (about 6 us
before any arithmetic), use task 2.2's."""

PACKED_MIN_SIDE = 16
"""Below it task 2.2's kernel wins. Measured with the reference's gemm (2-core AMD
EPYC, microseconds, task 2.2 / gemm): 8 x 100 @ 100 x 100 9.8 / 19.8; 32 x 32 @ 32 x 32
10.0 / 9.5; 50 x 100 @ 100 x 100 56 / 40; the MNIST CNN's 32 x 784 @ 784 x 64 float32
113 / 56; 100 x 100 @ 100 x 100 float32 102 / 50."""


def compile_stage1(kernel: Callable[..., None]) -> Any:
    """Compile one of stage 1's kernel closures (uncached): the same code over a
    namespace in which its index functions are the compiled ones. The fallback for a
    float function outside the op tables."""
    namespace = dict(kernel.__globals__)
    namespace.update(
        to_index=to_index, index_to_position=index_to_position, broadcast_index=broadcast_index
    )
    clone = types.FunctionType(
        kernel.__code__, namespace, kernel.__name__, kernel.__defaults__, kernel.__closure__
    )
    return njit(clone)


class FastOps(TensorOps):
    """Stage 1's protocol on the compiled kernels above."""

    @staticmethod
    def map(fn: Callable[[float], float]) -> MapProto:
        op = UNARY_OPS.get(fn)
        if op is None:  # not in the table: compile stage 1's kernel for it (not cached)
            fallback = compile_stage1(tensor_map(njit(fn)))

        def apply(a: Tensor, out: Tensor | None = None) -> Tensor:
            threads.follow()  # threads for the machine's load: module2/threads.py
            out = map_output(a, out)
            o, i = out._tensor, a._tensor  # the arguments spelled out: no tuples to unpack
            if op is None:
                fallback(o._storage, o._shape, o._strides, i._storage, i._shape, i._strides)
            # BEGIN SOLUTION 2.1 omit
            elif op in VECTOR_MATH_OPS and vector_math_applies(o, i):
                vector_math_map(op, o._storage, i._storage)
            # END SOLUTION
            else:
                tensor_map_kernel(
                    op, o._storage, o._shape, o._strides, i._storage, i._shape, i._strides
                )
            return out

        return apply

    @staticmethod
    def zip(fn: Callable[[float, float], float]) -> Callable[[Tensor, Tensor], Tensor]:
        op = BINARY_OPS.get(fn)
        if op is None:
            fallback = compile_stage1(tensor_zip(njit(fn)))

        def apply(a: Tensor, b: Tensor) -> Tensor:
            threads.follow()
            out = zip_output(a, b)
            o, i, j = out._tensor, a._tensor, b._tensor
            if op is None:
                fallback(
                    o._storage, o._shape, o._strides, i._storage, i._shape, i._strides,
                    j._storage, j._shape, j._strides,
                )  # fmt: skip
            else:
                tensor_zip_kernel(
                    op, o._storage, o._shape, o._strides, i._storage, i._shape, i._strides,
                    j._storage, j._shape, j._strides,
                )  # fmt: skip
            return out

        return apply

    @staticmethod
    def reduce(
        fn: Callable[[float, float], float], start: float = 0.0
    ) -> Callable[[Tensor, int], Tensor]:
        op = BINARY_OPS.get(fn)
        if op is None:
            fallback = compile_stage1(tensor_reduce(njit(fn)))

        def apply(a: Tensor, dim: int) -> Tensor:
            threads.follow()
            out = reduce_output(a, dim, start)
            if op is None:
                fallback(*out.tuple_arrays(), *a.tuple_arrays(), dim)
            elif a.shape[dim] > 0 and out.size:
                # Few outputs and long folds: split each fold so every thread works.
                outputs, n = out.size, a.shape[dim]
                parts = 1 if outputs >= 64 else max(1, min(64 // outputs, n // 4096))
                tensor_reduce_kernel(op, *out.tuple_arrays(), *a.tuple_arrays(), dim, parts)
            return out

        return apply

    @staticmethod
    def matrix_multiply(a: Tensor, b: Tensor) -> Tensor:
        threads.follow()
        out = a.empty(matmul_shape(a.shape, b.shape))  # both kernels write every entry
        if not out.size:
            return out
        n, m, p = a.shape[-2], a.shape[-1], b.shape[-1]
        # BEGIN SOLUTION 2.2 omit
        thin = min(n, p) < PACKED_MIN_SIDE and n * m * p < THIN_SERIAL_MAX
        if (n * m * p < PARALLEL_MIN or thin) and len(out.shape) == 2:  # 2-D: scalar strides
            (a_row, a_col), (b_row, b_col) = a._tensor.strides, b._tensor.strides
            matmul_small(
                out._tensor._storage, a._tensor._storage, a_row, a_col,
                b._tensor._storage, b_row, b_col, n, m, p,
            )  # fmt: skip
            return out
        # END SOLUTION
        if n * m * p >= PACKED_MIN_MULTIPLY_ADDS and min(n, m, p) >= PACKED_MIN_SIDE:
            from module2 import fast_matmul  # it imports this module

            if fast_matmul.packed_product(out, a, b):
                return out
        if b._tensor.strides[-1] != 1 and p > 1:
            b = FastTensorBackend.id_map(b)  # rows of b contiguous: the inner loop vectorizes
        tensor_matrix_multiply_kernel(*out.tuple_arrays(), *a.tuple_arrays(), *b.tuple_arrays())
        return out

    @staticmethod
    def gather(a: Tensor, ordinals: np.ndarray) -> Tensor:
        return fast_index.gather(a, ordinals)

    @staticmethod
    def scatter_add(d: Tensor, ordinals: np.ndarray, shape: tuple[int, ...]) -> Tensor:
        return fast_index.scatter_add(d, ordinals, shape)


FastTensorBackend = TensorBackend(FastOps)
"""The stage-2 backend: ``tensor(..., backend=FastTensorBackend)``."""
