"""The reference's fast paths for task 2.1's map, zip and reduce and task 2.2's matrix
product: straight loops over aligned storage in parallel blocks, chunks of output rows
with index buffers of their own, interleaved folds that vectorize, row-by-row matrix
products for small operands.

Not a task, and not in the handout: a ``prange`` over outputs with the index functions
for each entry earns full marks (``module2/README.md``). The kernels of
``module2/fast_ops.py`` call these from their solution regions; each path is tested at
its boundaries against the plain path, in both dtypes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange
from numba import types as nb_types
from numba.extending import overload

from module1.tensor_data import Shape, Storage, Strides
from module2.compiled_ops import (
    OP_ADD,
    OP_EXP,
    OP_ID,
    OP_LOG,
    OP_LT,
    OP_MAX,
    OP_MUL,
    OP_NEG,
    OP_RELU,
    OP_RELU_BACK,
    OP_SIGMOID,
    OP_TANH,
    _add,
    _id,
    _lt,
    _max,
    _mul,
    _neg,
    _relu,
    _relu_back,
    binary,
    broadcast_index,
    index_to_position,
    to_index,
    unary,
)
from module2.vector_math import (
    exp_loop,
    log_loop32,
    log_loop64,
    sigmoid_loop32,
    sigmoid_loop64,
    tanh_loop32,
    tanh_loop64,
)

CHUNK = 1024
"""About how many entries one parallel iteration handles on the general (strided) path
(whole rows of the output: at least one)."""

BLOCK = 1 << 13
"""Entries one parallel iteration handles on the aligned fast path."""


@njit(inline="always")
def aligned(
    out: Storage, out_shape: Shape, out_strides: Strides,
    in_storage: Storage, in_shape: Shape, in_strides: Strides, size: int,
) -> bool:  # fmt: skip
    """True when entry ``i`` of the input's storage feeds entry ``i`` of the output's: the
    same shape and strides over storages that hold exactly ``size`` values (contiguous,
    or both permuted the same way)."""
    if len(out) != size or len(in_storage) != size or len(out_shape) != len(in_shape):
        return False
    for dim in range(len(out_shape)):
        if out_shape[dim] != in_shape[dim] or out_strides[dim] != in_strides[dim]:
            return False
    return True


@njit
def vector_math_loop64(op: int, out: Storage, x: Storage) -> None:
    """``out = unary(op, x)`` for log, sigmoid or tanh on float64 1-D arrays."""
    if op == OP_LOG:
        log_loop64(out, x)
    elif op == OP_SIGMOID:
        sigmoid_loop64(out, x)
    else:
        tanh_loop64(out, x)


@njit
def vector_math_loop32(op: int, out: Storage, x: Storage) -> None:
    """:func:`vector_math_loop64` on float32 1-D arrays."""
    if op == OP_LOG:
        log_loop32(out, x)
    elif op == OP_SIGMOID:
        sigmoid_loop32(out, x)
    else:
        tanh_loop32(out, x)


@njit
def per_entry(op: int, out: Storage, x: Storage) -> None:
    """``out[i] = unary(op, x[i])``: stage 0's scalar function, entry by entry."""
    for i in range(len(out)):
        out[i] = unary(op, x[i])


def vector_math_loop(op: int, out: Storage, x: Storage) -> None:
    """``out = unary(op, x)`` for log, sigmoid or tanh on 1-D arrays of equal length: in
    compiled code :func:`vector_math_loop32` for two float32 arrays,
    :func:`vector_math_loop64` for two float64 ones, :func:`per_entry` otherwise (mixed
    dtypes), chosen when the caller compiles, as :func:`exp_loop`."""
    for i in range(len(out)):
        out[i] = unary(op, x[i])


@overload(vector_math_loop)
def _vector_math_loop(op, out, x):  # unannotated, as _exp_loop
    if out.dtype == x.dtype == nb_types.float32:
        return lambda op, out, x: vector_math_loop32(op, out, x)
    if out.dtype == x.dtype == nb_types.float64:
        return lambda op, out, x: vector_math_loop64(op, out, x)
    return lambda op, out, x: per_entry(op, out, x)


VECTOR_MATH_OPS = (OP_LOG, OP_SIGMOID, OP_TANH)
"""The maps :func:`vector_math_map` computes (exp stays in the map kernel)."""
VECTOR_MATH_MIN = 1 << 14
"""Maps with fewer entries stay in the map kernel, entry by entry."""


@njit(parallel=True, cache=True)
def vector_math_map(op: int, out: Storage, x: Storage) -> None:
    """``out = unary(op, x)`` for log, sigmoid or tanh over two storages of one length
    (entry ``i`` of ``x`` feeds entry ``i`` of ``out``), by their vectorized loops, in
    parallel blocks. A kernel of its own, which ``FastOps.map`` calls only for a large,
    aligned map: inside the map kernel the three loops took its compile from 8 to 14
    s, paid by every program on its first run (the main job's cold start among them),
    where few ever take the log of a large tensor."""
    n = len(out)
    for block in prange((n + BLOCK - 1) // BLOCK):
        lo, hi = block * BLOCK, min(n, (block + 1) * BLOCK)
        vector_math_loop(op, out[lo:hi], x[lo:hi])


def vector_math_applies(out: Any, x: Any) -> bool:
    """Whether a map from TensorData ``x`` to ``out`` can run on flat storage: at least
    :data:`VECTOR_MATH_MIN` entries, one shape and strides, storages of exactly that
    many values."""
    return (
        out.size >= VECTOR_MATH_MIN
        and len(out._storage) == len(x._storage) == out.size
        and out.shape == x.shape
        and out.strides == x.strides
    )


# Loops over flat storage, one per common op. The op is tested once, before the loop:
# a loop whose body switches on the op does not vectorize (LLVM does not hoist a switch
# this large out of a loop). They are plain (not inlined) compiled functions: linked
# into each kernel once, where inlining them at every call site made the reduce kernel
# take over a minute to compile.


binary_call = njit(binary.py_func)
""":func:`binary` compiled as a function of its own, called rather than inlined: the
reduce kernel's path for op codes other than the folds a tensor uses (add, mul, max).
Inlining all ten cases at each of the kernel's eight fold sites made it the slowest
kernel to compile (15 s of a 36 s cold start; 7.6 s calling this). The map and zip
kernels keep :func:`unary` and :func:`binary` inline: calling them there made the
MNIST CNN's epoch a quarter slower (0.91 against 1.14 s in float32)."""


@njit
def unary_loop(op: int, out: Storage, x: Storage) -> None:
    """``out[i] = unary(op, x[i])`` for 1-D arrays of equal length."""
    if op == OP_RELU:
        for i in range(len(out)):
            out[i] = _relu(x[i])
    elif op == OP_NEG:
        for i in range(len(out)):
            out[i] = _neg(x[i])
    elif op == OP_ID:
        for i in range(len(out)):
            out[i] = _id(x[i])
    elif op == OP_EXP:
        exp_loop(out, x)
    else:
        for i in range(len(out)):
            out[i] = unary(op, x[i])


@njit
def binary_loop(op: int, out: Storage, x: Storage, y: Storage) -> None:
    """``out[i] = binary(op, x[i], y[i])`` for 1-D arrays of equal length."""
    if op == OP_ADD:
        for i in range(len(out)):
            out[i] = _add(x[i], y[i])
    elif op == OP_MUL:
        for i in range(len(out)):
            out[i] = _mul(x[i], y[i])
    elif op == OP_RELU_BACK:
        for i in range(len(out)):
            out[i] = _relu_back(x[i], y[i])
    elif op == OP_LT:
        for i in range(len(out)):
            out[i] = _lt(x[i], y[i])
    else:
        for i in range(len(out)):
            out[i] = binary(op, x[i], y[i])


@njit(inline="always")
def fold(op: int, x: float, y: float) -> float:
    """``binary(op, x, y)``, with add, mul and max inline and the rest called."""
    if op == OP_ADD:
        return _add(x, y)
    if op == OP_MUL:
        return _mul(x, y)
    if op == OP_MAX:
        return _max(x, y)
    return binary_call(op, x, y)


@njit
def fold_loop(op: int, acc: Storage, x: Storage) -> None:
    """``acc[i] = binary(op, acc[i], x[i])`` for 1-D arrays of equal length: one step of
    many folds side by side (each fold keeps its order)."""
    if op == OP_ADD:
        for i in range(len(acc)):
            acc[i] = _add(acc[i], x[i])
    elif op == OP_MAX:
        for i in range(len(acc)):
            acc[i] = _max(acc[i], x[i])
    elif op == OP_MUL:
        for i in range(len(acc)):
            acc[i] = _mul(acc[i], x[i])
    else:
        for i in range(len(acc)):
            acc[i] = binary_call(op, acc[i], x[i])


@njit(inline="always")
def row_length(shape: Shape) -> int:
    """Entries per row (the last dimension; 1 for a 0-d tensor)."""
    return shape[len(shape) - 1] if len(shape) > 0 else 1


@njit(inline="always")
def row_step(shape: Shape, strides: Strides) -> int:
    """The storage step of a tensor broadcast to an output, along the output's last
    dimension: 0 where it is broadcast (size 1 there, or no dimensions)."""
    dims = len(shape)
    if dims == 0 or shape[dims - 1] == 1:
        return 0
    return strides[dims - 1]


@njit
def map_chunk(
    op: int,
    out: Storage, out_shape: Shape, out_strides: Strides,
    in_storage: Storage, in_shape: Shape, in_strides: Strides, start: int, stop: int,
) -> None:  # fmt: skip
    """The general path of :func:`tensor_map_kernel` for the output rows
    ``start:stop`` (a row: all entries that differ only in the last index), with its
    own index buffers. The index functions run once per row; along the row, each
    storage position moves by a fixed step."""
    n = row_length(out_shape)
    out_step = row_step(out_shape, out_strides)
    in_step = row_step(in_shape, in_strides)
    out_index = np.empty(len(out_shape), np.int32)
    in_index = np.empty(len(in_shape), np.int32)
    for row in range(start, stop):
        to_index(row * n, out_shape, out_index)
        broadcast_index(out_index, out_shape, in_shape, in_index)
        o = index_to_position(out_index, out_strides)
        i = index_to_position(in_index, in_strides)
        for j in range(n):
            out[o + j * out_step] = unary(op, in_storage[i + j * in_step])


@njit(inline="always")
def run_step(shape: Shape, strides: Strides, dims: int, dim: int, run: int) -> int:
    """How a tensor broadcast to a ``dims``-dimensional output moves along output
    dimension ``dim``, inside a run of ``run`` entries: 0 (broadcast there), 1 (its
    stride there is ``run``: it moves on contiguously), or 2 (anything else)."""
    own = dim - (dims - len(shape))
    if own < 0 or shape[own] == 1:
        return 0
    return 1 if strides[own] == run else 2


@njit
def zip_run(
    out_shape: Shape, out_strides: Strides,
    a_shape: Shape, a_strides: Strides, b_shape: Shape, b_strides: Strides,
) -> tuple[int, int, int, int]:  # fmt: skip
    """``(n, out_step, a_step, b_step)``: the row of :func:`zip_chunk` (``n`` output
    entries whose storage positions move by a fixed step each). The trailing dimensions
    over which the output is contiguous and each input is either contiguous too or
    broadcast (a bias over ``(..., channels, height, width)``, say) merge into one row;
    otherwise a row is the last dimension, at any steps."""
    dims = len(out_shape)
    n, a_mode, b_mode = 1, -1, -1
    for dim in range(dims - 1, -1, -1):
        size = out_shape[dim]
        if size == 1:
            continue
        if out_strides[dim] != n:
            break
        a = run_step(a_shape, a_strides, dims, dim, n)
        b = run_step(b_shape, b_strides, dims, dim, n)
        if a == 2 or b == 2 or (a_mode >= 0 and a != a_mode) or (b_mode >= 0 and b != b_mode):
            break
        a_mode, b_mode, n = a, b, n * size
    if n > 1:
        return n, 1, a_mode, b_mode
    return (
        row_length(out_shape), row_step(out_shape, out_strides),
        row_step(a_shape, a_strides), row_step(b_shape, b_strides),
    )  # fmt: skip


@njit(inline="always")
def broadcast_steps(shape: Shape, strides: Strides, dims: int, outer: int) -> Any:
    """How far a tensor broadcast to a ``dims``-dimensional output moves in storage for
    one step along each of the output's first ``outer`` dimensions (0 where broadcast)."""
    steps = np.zeros(dims, np.int64)
    for dim in range(outer):
        own = dim - (dims - len(shape))
        if own >= 0 and shape[own] != 1:
            steps[dim] = strides[own]
    return steps


@njit
def zip_chunk(
    op: int,
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    b_storage: Storage, b_shape: Shape, b_strides: Strides,
    run: tuple[int, int, int, int], start: int, stop: int,
) -> None:  # fmt: skip
    """The general path of :func:`tensor_zip_kernel` for the output rows
    ``start:stop``, rows as :func:`zip_run` gives them (``run``), like
    :func:`map_chunk`. A row whose steps are all 0 or 1 goes through
    :func:`binary_loop` (vectorized), a broadcast input's value copied along a row
    buffer first."""
    n, out_step, a_step, b_step = run
    dims = len(out_shape)
    out_index = np.empty(dims, np.int32)
    a_index = np.empty(len(a_shape), np.int32)
    b_index = np.empty(len(b_shape), np.int32)
    unit = out_step == 1 and a_step <= 1 and b_step <= 1
    a_row = np.empty(n if unit and a_step == 0 else 0, a_storage.dtype)
    b_row = np.empty(n if unit and b_step == 0 else 0, b_storage.dtype)
    # The first row's positions from the index functions; each next row's by adding
    # strides (an odometer over the dimensions outside the row, ``outer`` of them).
    outer, inside = dims, 1
    while outer > 0 and inside < n:
        outer -= 1
        inside *= out_shape[outer]
    a_steps = broadcast_steps(a_shape, a_strides, dims, outer)
    b_steps = broadcast_steps(b_shape, b_strides, dims, outer)
    to_index(start * n, out_shape, out_index)
    broadcast_index(out_index, out_shape, a_shape, a_index)
    broadcast_index(out_index, out_shape, b_shape, b_index)
    o = index_to_position(out_index, out_strides)
    pa = index_to_position(a_index, a_strides)
    pb = index_to_position(b_index, b_strides)
    for row in range(start, stop):
        if row > start:  # move on one row: the last outer dimension, carrying
            dim = outer - 1
            while dim >= 0:
                out_index[dim] += 1
                o, pa, pb = o + out_strides[dim], pa + a_steps[dim], pb + b_steps[dim]
                if out_index[dim] < out_shape[dim]:
                    break
                size = out_shape[dim]
                o, pa, pb = (
                    o - size * out_strides[dim],
                    pa - size * a_steps[dim],
                    pb - size * b_steps[dim],
                )
                out_index[dim] = 0
                dim -= 1
        if unit:
            x = a_storage[pa : pa + n]
            if a_step == 0:
                a_row[:] = a_storage[pa]
                x = a_row
            y = b_storage[pb : pb + n]
            if b_step == 0:
                b_row[:] = b_storage[pb]
                y = b_row
            binary_loop(op, out[o : o + n], x, y)
            continue
        for j in range(n):
            value = binary(op, a_storage[pa + j * a_step], b_storage[pb + j * b_step])
            out[o + j * out_step] = value


LANES = 64
"""Interleaved partial folds in :func:`fold_contiguous`."""


fold_lanes = njit(inline="always")(fold_loop.py_func)
""":func:`fold_loop` inlined, for the call sites that run it once per short row (a call
there costs as much as the work)."""


@njit
def fold_contiguous(op: int, x: Storage) -> float:
    """``binary(op, .)`` folded over the 1-D ``x`` (at least one entry), regrouped into
    :data:`LANES` interleaved folds that are combined at the end: the same result up to
    reassociation, and a loop that vectorizes (one running value cannot)."""
    n = len(x)
    acc = x[0]
    if n < 2 * LANES:
        for i in range(1, n):
            acc = fold(op, acc, x[i])
        return acc
    lanes = x[:LANES].copy()
    full = n // LANES * LANES
    for lo in range(LANES, full, LANES):
        fold_lanes(op, lanes, x[lo : lo + LANES])
    acc = lanes[0]
    for i in range(1, LANES):
        acc = fold(op, acc, lanes[i])
    for i in range(full, n):
        acc = fold(op, acc, x[i])
    return acc


@njit(inline="always")
def is_contiguous(shape: Shape, strides: Strides) -> bool:
    """True when ``strides`` are the row-major strides of ``shape``."""
    expected = 1
    for dim in range(len(shape) - 1, -1, -1):
        if shape[dim] != 1 and strides[dim] != expected:
            return False
        expected *= shape[dim]
    return True


@njit
def fold_rows(
    op: int, out: Storage, a_storage: Storage, n: int, inner: int, job: int, width: int
) -> None:
    """Job ``job`` of the rows path of :func:`tensor_reduce_kernel`: one block of
    ``width`` outputs ``out[o, lo:hi]`` of a contiguous ``(outer, n, inner)`` input,
    folded row by row (each fold in order, the loop over the block vectorized)."""
    blocks = (inner + width - 1) // width
    o, block = job // blocks, job % blocks
    lo, hi = block * width, min(inner, (block + 1) * width)
    acc = out[o * inner + lo : o * inner + hi]
    for k in range(n):
        row = (o * n + k) * inner
        fold_lanes(op, acc, a_storage[row + lo : row + hi])


@njit
def fold_part(
    op: int, out_shape: Shape, a_storage: Storage, a_shape: Shape, a_strides: Strides,
    reduce_dim: int, parts: int, job: int, index: Strides,
) -> float:  # fmt: skip
    """Job ``job`` of the general path of :func:`tensor_reduce_kernel`: part
    ``job % parts`` of output ``job // parts``'s fold (``index`` is a scratch buffer)."""
    n, step = a_shape[reduce_dim], a_strides[reduce_dim]
    i, part = job // parts, job % parts
    to_index(i, out_shape, index)
    start = part * n // parts
    stop = (part + 1) * n // parts
    position = index_to_position(index, a_strides) + start * step
    if step == 1:
        return fold_contiguous(op, a_storage[position : position + stop - start])
    acc = a_storage[position]
    for _ in range(start + 1, stop):
        position += step
        acc = fold(op, acc, a_storage[position])
    return acc


@njit
def combine(
    op: int, out: Storage, out_shape: Shape, out_strides: Strides,
    partial: Storage, parts: int, start: int, stop: int,
) -> None:  # fmt: skip
    """Fold the ``parts`` partial results of outputs ``start:stop`` into ``out``, in
    order, after the start value ``out`` holds."""
    index = np.empty(len(out_shape), np.int32)
    for i in range(start, stop):
        to_index(i, out_shape, index)
        out_position = index_to_position(index, out_strides)
        acc = out[out_position]
        for part in range(parts):
            acc = fold(op, acc, partial[i * parts + part])
        out[out_position] = acc


@njit
def matmul_rows(
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    b_storage: Storage, b_shape: Shape, b_strides: Strides, start: int, stop: int,
) -> None:  # fmt: skip
    """Rows ``start:stop`` of the output of :func:`tensor_matrix_multiply_kernel`
    (counting every batch's rows in order), with index buffers and a row accumulator
    of their own."""
    dims = len(out_shape)
    p = out_shape[dims - 1]
    m = a_shape[len(a_shape) - 1]
    a_col = a_strides[len(a_shape) - 1]
    b_row, b_col = b_strides[len(b_shape) - 2], b_strides[len(b_shape) - 1]
    o_col = out_strides[dims - 1]
    out_index = np.empty(dims, np.int32)
    a_index = np.empty(len(a_shape), np.int32)
    b_index = np.empty(len(b_shape), np.int32)
    # Accumulate a row in a local buffer: the compiler knows it overlaps nothing else,
    # so the j loop vectorizes (out and b could alias, as far as it knows).
    row_sum = np.empty(p)
    for row in range(start, stop):
        to_index(row * p, out_shape, out_index)  # (..., i, 0)
        broadcast_index(out_index, out_shape, a_shape, a_index)
        broadcast_index(out_index, out_shape, b_shape, b_index)
        a_index[len(a_shape) - 1] = 0
        b_index[len(b_shape) - 2] = 0
        b_index[len(b_shape) - 1] = 0
        a_base = index_to_position(a_index, a_strides)
        b_base = index_to_position(b_index, b_strides)
        o_base = index_to_position(out_index, out_strides)
        if p == 1:  # a dot product (a layer with one output): no row buffer
            acc = 0.0
            for k in range(m):
                acc += a_storage[a_base + k * a_col] * b_storage[b_base + k * b_row]
            out[o_base] = acc
            continue
        row_sum[:] = 0.0
        for k in range(m):
            aik = a_storage[a_base + k * a_col]
            b_k = b_base + k * b_row
            if b_col == 1:
                b_k_row = b_storage[b_k : b_k + p]  # indexed by j alone: vectorizes
                for j in range(p):
                    row_sum[j] += aik * b_k_row[j]
            else:
                for j in range(p):
                    row_sum[j] += aik * b_storage[b_k + j * b_col]
        for j in range(p):
            out[o_base + j * o_col] = row_sum[j]


THIN_SERIAL_MAX = 1 << 19
"""Thin 2-D products (fewer than ``PACKED_MIN_SIDE`` rows or columns, so not for the
packed kernel) of fewer multiply-adds than this run :func:`matmul_small` on the calling
thread rather than task 2.2's parallel kernel: a decoding step's one-row products.
Measured float32, microseconds, serial / parallel kernel (2-core Xeon): 1 x 128 @ 128 x
384 6.7 / 12.4 (63 through the tensor), 1 x 512 @ 512 x 128 7.3 / 12.7, 1 x 384 @ 384 x
1152 47 / 76, 4 x 128 @ 128 x 384 15.7 / 16.4; at 64 x 128 @ 128 x 128 (10^6) the
parallel kernel wins, 109 / 133."""


@njit(cache=True, fastmath={"contract", "reassoc"})
def matmul_small(
    out: Storage, a: Storage, a_row: int, a_col: int, b: Storage, b_row: int, b_col: int,
    n: int, m: int, p: int,
) -> None:  # fmt: skip
    """``out = a @ b`` for one small 2-D product into a fresh C-order ``out`` (``n x
    p``), ``a`` and ``b`` at any strides: an MLP's thin products (a layer of one unit,
    two inputs, a transposed operand in backward), whose cost in task 2.2's kernel is
    its generality: index buffers, the batch index per row, and a dot product summed in
    order, each add waiting for the last. Scalar strides, and the loop order that reads
    contiguous memory innermost (so it vectorizes; ``reassoc`` lets the dots split)."""
    if p == 1 and a_row == 1 and a_col != 1:  # a transposed: add columns of a, scaled
        out[:n] = 0.0
        for k in range(m):
            column, scale = a[k * a_col : k * a_col + n], b[k * b_row]
            for i in range(n):
                out[i] += column[i] * scale
        return
    if p == 1:  # one dot product per row of a
        for i in range(n):
            acc = 0.0
            if a_col == 1 and b_row == 1:
                row, column = a[i * a_row : i * a_row + m], b[:m]
                for k in range(m):
                    acc += row[k] * column[k]
            else:
                for k in range(m):
                    acc += a[i * a_row + k * a_col] * b[k * b_row]
            out[i] = acc
        return
    for i in range(n):  # i-k-j: a row of out at a time, scaled rows of b added in
        row = out[i * p : i * p + p]
        row[:] = 0.0
        for k in range(m):
            aik = a[i * a_row + k * a_col]
            if b_col == 1:
                b_k = b[k * b_row : k * b_row + p]
                for j in range(p):
                    row[j] += aik * b_k[j]
            else:
                for j in range(p):
                    row[j] += aik * b[k * b_row + j * b_col]
