"""Tasks 3.1, 3.2 and 3.3: the CUDA backend — tensor kernels that run on an NVIDIA GPU.

:class:`CudaOps` implements stage 1's :class:`~module1.tensor_ops.TensorOps` protocol
with kernels written in Python and compiled by Numba for the GPU (``numba.cuda``;
install the ``cuda`` extra, numba-cuda, on a GPU machine). Every Tensor operation,
every Function and the autodiff engine run on it unchanged (``CudaTensorBackend``).

Where the data lives: an operation's result stays in GPU memory (its storage is a
Numba device array), so a chain of operations moves nothing between host and device.
A tensor made on the host (``tensor(..., backend=CudaTensorBackend)``) keeps its host
storage, which every kernel that reads it copies to the device; :func:`to_cuda` moves
one to the device once (data used every step, such as a training set).
``to_numpy()``, ``item()`` and printing copy back.

Without a GPU the same kernels run, unchanged, on Numba's CUDA *simulator*: set
``NUMBA_ENABLE_CUDASIM=1`` before Numba is imported. The simulator runs every thread as
a Python thread — a block of 256 threads costs about a tenth of a second — so it is for
correctness on small tensors, never for speed. The test suite switches it on by itself
where no GPU is present.

The kernels are built per float function (a closure over its device-compiled version)
and compiled on first use; stage 0's operators and stage 1's index functions are
compiled as CUDA device functions from their own source, not rewritten.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda, float64, int32

from module0 import operators
from module0.errors import MiniTorchError
from module1 import tensor_data
from module1.tensor import Tensor
from module1.tensor_data import ShapeError, TensorData, is_device_array
from module1.tensor_ops import (
    MapProto,
    TensorBackend,
    TensorOps,
    is_close_float,
    matmul_shape,
    shape_broadcast,
)
from module2.compiled_ops import BINARY_NAMES, UNARY_NAMES, jit_functions


def _quiet_low_occupancy() -> None:
    """A training step launches many small grids, and Numba warns about each one. The
    setting lives in numba's config, or (with numba-cuda installed) in its own."""
    for name in ("numba.core.config", "numba.cuda.core.config"):
        try:
            config: Any = importlib.import_module(name)
            config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
        except ImportError:
            pass


_quiet_low_occupancy()

MAX_DIMS = 16
"""The most dimensions a tensor on this backend may have: a kernel's index buffers are
thread-local arrays, whose size must be a compile-time constant."""

THREADS_PER_BLOCK = 256
"""Threads per block of the map and zip kernels (fewer for a smaller tensor)."""

REDUCE_THREADS = 256
"""The most threads that fold one output of a reduction (a power of 2)."""

FOLD_PER_THREAD = 8
"""Entries each thread of a reduction folds on its own before the block's tree, for a
reduced dimension of up to ``REDUCE_THREADS * FOLD_PER_THREAD`` entries (more past
that): a tree step costs a barrier, a serial step one read."""

BLOCK_DIM = 32
"""Threads per block of the practice kernel :func:`sum_practice`."""

TILE = 32
"""The matmul kernel multiplies ``TILE x TILE`` tiles held in shared memory."""

TILE_ROWS = 8
"""Thread rows of a matmul block: a block is ``TILE x TILE_ROWS`` threads, and each
thread computes ``TILE // TILE_ROWS`` outputs of one column of the tile."""

ROWS_PER_THREAD = TILE // TILE_ROWS


class CudaUnavailableError(MiniTorchError, RuntimeError):
    """The CUDA backend was used where Numba finds neither a GPU nor the simulator."""


@functools.cache
def require_cuda() -> None:
    """Raise :class:`CudaUnavailableError`, saying how to get either, unless Numba can
    run CUDA kernels here: on a GPU, or on the simulator."""
    if cuda.is_available():
        return
    raise CudaUnavailableError(
        "the CUDA backend needs an NVIDIA GPU or Numba's CUDA simulator, and Numba finds "
        "neither here. On a machine with an NVIDIA GPU and its driver, install the CUDA "
        "extra: pip install -e '.[cuda]' (numba-cuda). Without a GPU, run on the "
        "simulator (slow; small tensors only) by setting NUMBA_ENABLE_CUDASIM=1 before "
        "Numba is imported, e.g. NUMBA_ENABLE_CUDASIM=1 python -m project.train "
        "--backend cuda. Or use --backend fast, the CPU backend."
        + (
            ""
            if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1"
            else " (NUMBA_ENABLE_CUDASIM=1 is set, but only after Numba was imported.)"
        )
    )


# ## Device functions: stage 0's operators and stage 1's index functions, compiled

_device = cuda.jit(device=True)
_index = jit_functions(tensor_data, ("to_index", "index_to_position", "broadcast_index"), _device)
to_index = _index["to_index"]
index_to_position = _index["index_to_position"]
broadcast_index = _index["broadcast_index"]

_ops = jit_functions(operators, (*UNARY_NAMES, *BINARY_NAMES), _device)
DEVICE_FUNCTIONS: dict[Callable[..., Any], Any] = {
    getattr(operators, name): compiled for name, compiled in _ops.items()
}
_is_close = _ops["is_close"]


@cuda.jit(device=True)
def _is_close_float(a: float, b: float) -> float:
    return 1.0 if _is_close(a, b) else 0.0


DEVICE_FUNCTIONS[is_close_float] = _is_close_float


def device_function(fn: Callable[..., float]) -> Any:
    """``fn`` compiled as a CUDA device function: the precompiled one for stage 0's
    operators, else ``fn`` compiled on its own (it may call only what Numba's CUDA
    target compiles: math functions and other device functions)."""
    compiled = DEVICE_FUNCTIONS.get(fn)
    return compiled if compiled is not None else _device(fn)


# ## Task 3.1: map and zip, a thread per output entry


def tensor_map(fn: Callable[[float], float]) -> Any:
    """The CUDA kernel of ``map(fn)``: thread ``i`` of the grid writes output entry
    ``i`` (in row-major order of ``out_shape``), ``fn`` of the input entry it reads.

    Kernel arguments: ``out, out_shape, out_strides, out_size, in_storage, in_shape,
    in_strides, aligned``. Shapes and strides are tuples of ints (passed by value: no
    copy to the device). ``aligned`` is True when input and output have the same shape
    and strides and storages of exactly ``out_size`` entries: then entry ``i`` of one
    storage feeds entry ``i`` of the other, and no index arithmetic is needed.
    """
    f = device_function(fn)

    def _map(
        out: Any, out_shape: Any, out_strides: Any, out_size: int,
        in_storage: Any, in_shape: Any, in_strides: Any, aligned: bool,
    ) -> None:  # fmt: skip
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        out_index = cuda.local.array(MAX_DIMS, int32)[: len(out_shape)]
        in_index = cuda.local.array(MAX_DIMS, int32)[: len(in_shape)]
        # BEGIN SOLUTION 3.1 nowrite
        if i >= out_size:
            return
        if aligned:
            out[i] = f(in_storage[i])
            return
        to_index(i, out_shape, out_index)
        broadcast_index(out_index, out_shape, in_shape, in_index)
        value = in_storage[index_to_position(in_index, in_strides)]
        out[index_to_position(out_index, out_strides)] = f(value)
        # END SOLUTION

    return cuda.jit(_map)


def tensor_zip(fn: Callable[[float, float], float]) -> Any:
    """The CUDA kernel of ``zip(fn)``: thread ``i`` writes output entry ``i``,
    ``fn(a, b)`` of the entries of ``a`` and ``b`` it reads (both broadcast).

    Kernel arguments: ``out, out_shape, out_strides, out_size, a_storage, a_shape,
    a_strides, b_storage, b_shape, b_strides, aligned`` (as in :func:`tensor_map`;
    ``aligned`` covers all three tensors).
    """
    f = device_function(fn)

    def _zip(
        out: Any, out_shape: Any, out_strides: Any, out_size: int,
        a_storage: Any, a_shape: Any, a_strides: Any,
        b_storage: Any, b_shape: Any, b_strides: Any, aligned: bool,
    ) -> None:  # fmt: skip
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        out_index = cuda.local.array(MAX_DIMS, int32)[: len(out_shape)]
        a_index = cuda.local.array(MAX_DIMS, int32)[: len(a_shape)]
        b_index = cuda.local.array(MAX_DIMS, int32)[: len(b_shape)]
        # BEGIN SOLUTION 3.1 nowrite
        if i >= out_size:
            return
        if aligned:
            out[i] = f(a_storage[i], b_storage[i])
            return
        to_index(i, out_shape, out_index)
        broadcast_index(out_index, out_shape, a_shape, a_index)
        broadcast_index(out_index, out_shape, b_shape, b_index)
        a = a_storage[index_to_position(a_index, a_strides)]
        b = b_storage[index_to_position(b_index, b_strides)]
        out[index_to_position(out_index, out_strides)] = f(a, b)
        # END SOLUTION

    return cuda.jit(_zip)


# ## Task 3.2: reductions with shared memory


@cuda.jit
def sum_practice(out: Any, a: Any, size: int) -> None:
    """Practice: block ``b`` writes ``out[b]``, the sum of ``a[b * BLOCK_DIM]`` up to
    ``a[(b + 1) * BLOCK_DIM - 1]`` (entries past ``size`` count as 0).

    Each of the block's ``BLOCK_DIM`` threads loads one entry into shared memory; then
    a tree: in each round the first half of the still-active threads adds the second
    half's values to its own, until thread 0 holds the sum. ``cuda.syncthreads()``
    between rounds, so no thread reads a value before it is written.
    """
    cache = cuda.shared.array(BLOCK_DIM, float64)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.threadIdx.x
    # BEGIN SOLUTION 3.2 nowrite
    cache[t] = a[i] if i < size else 0.0
    cuda.syncthreads()
    stride = BLOCK_DIM // 2
    while stride > 0:
        if t < stride:
            cache[t] += cache[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[cuda.blockIdx.x] = cache[0]
    # END SOLUTION


def block_sums(a: np.ndarray) -> np.ndarray:
    """The sums of consecutive ``BLOCK_DIM``-entry blocks of the 1-D array ``a`` (the
    last block may be short), computed by :func:`sum_practice` on the device."""
    require_cuda()
    values = np.ascontiguousarray(a, dtype=np.float64).reshape(-1)
    blocks = max(1, -(-values.size // BLOCK_DIM))
    out = cuda.device_array(blocks, dtype=np.float64)
    sum_practice[blocks, BLOCK_DIM](out, cuda.to_device(values), values.size)
    return out.copy_to_host()


def tensor_reduce(fn: Callable[[float, float], float]) -> Any:
    """The CUDA kernel of ``reduce(fn, start)``: block ``o`` of the grid computes output
    entry ``o`` (row-major order of ``out_shape``, which is ``a_shape`` with size 1 in
    ``reduce_dim``), the fold of ``fn`` over the entries of ``a`` along ``reduce_dim``.

    Kernel arguments: ``out, out_shape, out_strides, out_size, a_storage, a_shape,
    a_strides, reduce_dim, start``. The block has a power-of-2 number of threads, at
    most ``REDUCE_THREADS``. Thread ``t`` folds, from ``start``, the entries ``t``,
    ``t + blockDim``, ``t + 2 blockDim``, ... of the reduced dimension; then the
    block combines the threads' values with a shared-memory tree, as in
    :func:`sum_practice`, and thread 0 writes the output. (The order of the fold
    differs from stage 1's, so results agree to rounding: ``fn`` is add, mul or max.)
    """
    f = device_function(fn)

    def _reduce(
        out: Any, out_shape: Any, out_strides: Any, out_size: int,
        a_storage: Any, a_shape: Any, a_strides: Any, reduce_dim: int, start: float,
    ) -> None:  # fmt: skip
        cache = cuda.shared.array(REDUCE_THREADS, float64)
        index = cuda.local.array(MAX_DIMS, int32)[: len(out_shape)]
        o = cuda.blockIdx.x
        t = cuda.threadIdx.x
        threads = cuda.blockDim.x
        # BEGIN SOLUTION 3.2 nowrite
        to_index(o, out_shape, index)
        position = index_to_position(index, a_strides)  # index[reduce_dim] is 0
        step = a_strides[reduce_dim]
        acc = start
        for k in range(t, a_shape[reduce_dim], threads):
            acc = f(acc, a_storage[position + k * step])
        cache[t] = acc
        cuda.syncthreads()
        stride = threads // 2
        while stride > 0:
            if t < stride:
                cache[t] = f(cache[t], cache[t + stride])
            cuda.syncthreads()
            stride //= 2
        if t == 0:
            out[index_to_position(index, out_strides)] = cache[0]
        # END SOLUTION

    return cuda.jit(_reduce)


# ## Task 3.3: matrix multiply with shared-memory tiles


@cuda.jit
def tensor_matrix_multiply(
    out: Any, out_shape: Any, out_strides: Any,
    a_storage: Any, a_shape: Any, a_strides: Any,
    b_storage: Any, b_shape: Any, b_strides: Any,
) -> None:  # fmt: skip
    """The batched product ``out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]``, with
    ``TILE x TILE`` tiles of ``a`` and ``b`` in shared memory.

    The grid is ``(ceil(p / TILE), ceil(n / TILE), batches)`` blocks of
    ``(TILE, TILE_ROWS)`` threads: block ``(bx, by, z)`` computes the output tile of
    rows ``by * TILE ...`` and columns ``bx * TILE ...`` of batch ``z``, and thread
    ``(tx, ty)`` its column ``tx``, rows ``ty, ty + TILE_ROWS, ty + 2 TILE_ROWS, ...``
    (``ROWS_PER_THREAD`` outputs, summed in registers). For each step ``k0`` of
    ``TILE`` along the inner dimension, the block loads ``a[rows, k0 ...]`` and
    ``b[k0 ..., columns]`` into shared memory (0 past the edges), waits, multiplies
    the tiles, and waits again before the next load. Each entry of ``a`` and ``b`` is
    read from global memory ``ceil(p / TILE)`` or ``ceil(n / TILE)`` times, not ``p``
    or ``n`` times.

    Batch dimensions broadcast; any strides. Every operand has at least 2 dimensions.
    """
    a_tile = cuda.shared.array((TILE, TILE), float64)
    b_tile = cuda.shared.array((TILE, TILE), float64)
    acc = cuda.local.array(ROWS_PER_THREAD, float64)
    out_index = cuda.local.array(MAX_DIMS, int32)[: len(out_shape)]
    a_index = cuda.local.array(MAX_DIMS, int32)[: len(a_shape)]
    b_index = cuda.local.array(MAX_DIMS, int32)[: len(b_shape)]
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    batch = cuda.blockIdx.z
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + tx
    # BEGIN SOLUTION 3.3 nowrite
    dims = len(out_shape)
    n = out_shape[dims - 2]
    p = out_shape[dims - 1]
    m = a_shape[len(a_shape) - 1]
    # The first entry of this batch: its index, then where it starts in a, b and out.
    to_index(batch * n * p, out_shape, out_index)
    broadcast_index(out_index, out_shape, a_shape, a_index)
    broadcast_index(out_index, out_shape, b_shape, b_index)
    a_base = index_to_position(a_index, a_strides)
    b_base = index_to_position(b_index, b_strides)
    out_base = index_to_position(out_index, out_strides)
    a_row, a_col = a_strides[len(a_shape) - 2], a_strides[len(a_shape) - 1]
    b_row, b_col = b_strides[len(b_shape) - 2], b_strides[len(b_shape) - 1]
    for r in range(ROWS_PER_THREAD):
        acc[r] = 0.0
    for k0 in range(0, m, TILE):
        for r in range(ROWS_PER_THREAD):
            row = ty + r * TILE_ROWS
            i = row0 + row
            k = k0 + tx
            inside = i < n and k < m
            a_tile[row, tx] = a_storage[a_base + i * a_row + k * a_col] if inside else 0.0
            k = k0 + row
            inside = k < m and col < p
            b_tile[row, tx] = b_storage[b_base + k * b_row + col * b_col] if inside else 0.0
        cuda.syncthreads()
        for kk in range(TILE):
            b = b_tile[kk, tx]
            for r in range(ROWS_PER_THREAD):
                acc[r] += a_tile[ty + r * TILE_ROWS, kk] * b
        cuda.syncthreads()
    out_row, out_col = out_strides[dims - 2], out_strides[dims - 1]
    for r in range(ROWS_PER_THREAD):
        i = row0 + ty + r * TILE_ROWS
        if i < n and col < p:
            out[out_base + i * out_row + col * out_col] = acc[r]
    # END SOLUTION


# ## The backend: launching the kernels


def to_device(storage: Any) -> Any:
    """``storage`` on the device: itself if it is there, else a copy."""
    return storage if is_device_array(storage) else cuda.to_device(storage)


def to_cuda(t: Tensor) -> Tensor:
    """A constant tensor on :data:`CudaTensorBackend` with ``t``'s values, contiguous,
    in GPU memory: one copy now instead of one per kernel that reads a host tensor."""
    require_cuda()
    values = cuda.to_device(np.ascontiguousarray(t.to_numpy()).reshape(-1))
    return Tensor(TensorData(values, t.shape), backend=CudaTensorBackend)


def _layout(data: TensorData) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and strides as the kernels take them: a 0-d tensor (one entry) as shape
    ``(1,)``, since a kernel's index buffers cannot be empty; ShapeError past
    ``MAX_DIMS`` dimensions."""
    if data.dims > MAX_DIMS:
        raise ShapeError(
            f"the CUDA backend handles at most {MAX_DIMS} dimensions, got shape {data.shape}"
        )
    if data.dims == 0:
        return (1,), (1,)
    return data.shape, data.strides


def _device_tensor(like: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A new constant tensor of ``shape`` and ``like``'s dtype on its backend, its
    storage an uninitialised device array (the kernel writes every entry)."""
    storage = cuda.device_array(math.prod(shape), dtype=like._tensor._storage.dtype)
    return like._new(TensorData(storage, shape))


def _aligned(size: int, *tensors: TensorData) -> bool:
    """True when every tensor has the first one's shape and strides and a storage of
    exactly ``size`` entries: storage position ``i`` is entry ``i`` of each."""
    first = tensors[0]
    return all(
        t.shape == first.shape and t.strides == first.strides and len(t._storage) == size
        for t in tensors
    )


def _blocks(size: int, threads: int) -> int:
    return -(-size // threads)


def _threads(size: int) -> int:
    """Threads per block for ``size`` outputs: fewer than ``THREADS_PER_BLOCK`` only
    for a smaller tensor (which matters on the simulator, where every thread costs)."""
    return max(1, min(THREADS_PER_BLOCK, size))


def reduce_threads(length: int) -> int:
    """Threads that fold one output of a reduction over ``length`` entries: the power
    of 2 at or above ``length / FOLD_PER_THREAD``, at most ``REDUCE_THREADS``."""
    threads = 1
    while threads * FOLD_PER_THREAD < length and threads < REDUCE_THREADS:
        threads *= 2
    return threads


MAX_BATCHES = 65535
"""The most batches one matmul launch covers (CUDA's limit on the grid's z size)."""


class CudaOps(TensorOps):
    """Stage 1's TensorOps protocol on the GPU (or the simulator)."""

    cuda = True

    @staticmethod
    def map(fn: Callable[[float], float]) -> MapProto:
        kernel = tensor_map(fn)

        def apply(a: Tensor, out: Tensor | None = None) -> Tensor:
            require_cuda()
            if out is None:
                out = _device_tensor(a, a.shape)
            elif shape_broadcast(a.shape, out.shape) != out.shape:
                raise ShapeError(f"map: input of shape {a.shape} does not fit out {out.shape}")
            if out.size == 0:
                return out
            o, i = out._tensor, a._tensor
            aligned = _aligned(o.size, o, i)
            threads = _threads(o.size)
            # A host ``out`` is passed as it is: Numba copies it in and back.
            kernel[_blocks(o.size, threads), threads](
                o._storage, *_layout(o), o.size,
                to_device(i._storage), *_layout(i), aligned,
            )  # fmt: skip
            return out

        return apply

    @staticmethod
    def zip(fn: Callable[[float, float], float]) -> Callable[[Tensor, Tensor], Tensor]:
        kernel = tensor_zip(fn)

        def apply(a: Tensor, b: Tensor) -> Tensor:
            require_cuda()
            shape = a.shape if a.shape == b.shape else shape_broadcast(a.shape, b.shape)
            out = _device_tensor(a, shape)
            if out.size == 0:
                return out
            o, x, y = out._tensor, a._tensor, b._tensor
            aligned = _aligned(o.size, o, x, y)
            threads = _threads(o.size)
            kernel[_blocks(o.size, threads), threads](
                o._storage, *_layout(o), o.size,
                to_device(x._storage), *_layout(x),
                to_device(y._storage), *_layout(y), aligned,
            )  # fmt: skip
            return out

        return apply

    @staticmethod
    def reduce(fn: Callable[[float, float], float], start: float = 0.0) -> Any:
        kernel = tensor_reduce(fn)

        def apply(a: Tensor, dim: int) -> Tensor:
            require_cuda()
            shape = list(a.shape)
            length = shape[dim]
            shape[dim] = 1
            if length == 0:  # nothing to fold: every output is the start value
                return a.full(tuple(shape), start)
            out = _device_tensor(a, tuple(shape))
            if out.size == 0:
                return out
            o, x = out._tensor, a._tensor
            kernel[o.size, reduce_threads(length)](
                o._storage, *_layout(o), o.size,
                to_device(x._storage), *_layout(x), dim, float(start),
            )  # fmt: skip
            return out

        return apply

    @staticmethod
    def matrix_multiply(a: Tensor, b: Tensor) -> Tensor:
        require_cuda()
        shape = matmul_shape(a.shape, b.shape)
        if math.prod(shape) and a.shape[-1] == 0:  # every output an empty sum: zeros
            return a.zeros(shape)
        out = _device_tensor(a, shape)
        if out.size == 0:
            return out
        o, x, y = out._tensor, a._tensor, b._tensor
        n, p = shape[-2], shape[-1]
        batches = o.size // (n * p)
        if batches > MAX_BATCHES:
            raise ShapeError(
                f"matmul of shapes {a.shape} and {b.shape}: {batches} batches, the CUDA "
                f"backend launches at most {MAX_BATCHES}; view the batch dimensions as fewer"
            )
        grid = (_blocks(p, TILE), _blocks(n, TILE), batches)
        tensor_matrix_multiply[grid, (TILE, TILE_ROWS)](
            o._storage, *_layout(o),
            to_device(x._storage), *_layout(x),
            to_device(y._storage), *_layout(y),
        )  # fmt: skip
        return out

    @staticmethod
    def gather(a: Tensor, ordinals: np.ndarray) -> Tensor:
        from module3 import cuda_index  # it imports this module

        return cuda_index.gather(a, ordinals)

    @staticmethod
    def scatter_add(d: Tensor, ordinals: np.ndarray, shape: tuple[int, ...]) -> Tensor:
        from module3 import cuda_index

        return cuda_index.scatter_add(d, ordinals, shape)


CudaTensorBackend = TensorBackend(CudaOps)
"""The backend of stage 3: ``tensor(..., backend=CudaTensorBackend)``."""
