"""Plain solutions of tasks 2.1, 2.2 and 2.3: what a student may write for full marks.

MiniTorch-sized kernels straight from the contracts in ``module2/README.md``: a
``prange`` over output entries, and for each entry stage 1's index functions to find
where it is in ``out`` and what it reads in each input (``to_index``,
``broadcast_index``, ``index_to_position``, compiled by the handout), with index
buffers of its own. The reduce folds each output's line in order and ignores the
``parts`` hint; the matrix product runs a plain ``k`` loop per output entry. None of
the reference's fast paths, chunking or row folds, and only names that the handout's
``module2/fast_ops.py`` has. ``gemm`` (2.3) is the README's i-k-j loop over contiguous
rows: ``b`` copied row by row, each output row summed in a row of its own.

Each passes ``i + 0``, not the ``prange`` variable itself, to ``to_index``: Numba
refuses an inlined function that reassigns the loop index ("Overwrite of parallel loop
index"), as ``module2/README.md`` warns.

``BODIES`` maps (task id, function as the registry names it) to the code that replaces
the stub between the task's begin and end lines (see ``autograder.regions.fill_text``).
"""

from __future__ import annotations

TENSOR_MAP = """
size = size_of(out_shape)
for i in prange(size):
    out_index = np.empty(len(out_shape), np.int32)
    in_index = np.empty(len(in_shape), np.int32)
    to_index(i + 0, out_shape, out_index)  # i + 0: a new value, not the loop index
    broadcast_index(out_index, out_shape, in_shape, in_index)
    value = in_storage[index_to_position(in_index, in_strides)]
    out[index_to_position(out_index, out_strides)] = unary(op, value)
"""

TENSOR_ZIP = """
size = size_of(out_shape)
for i in prange(size):
    out_index = np.empty(len(out_shape), np.int32)
    a_index = np.empty(len(a_shape), np.int32)
    b_index = np.empty(len(b_shape), np.int32)
    to_index(i + 0, out_shape, out_index)
    broadcast_index(out_index, out_shape, a_shape, a_index)
    broadcast_index(out_index, out_shape, b_shape, b_index)
    x = a_storage[index_to_position(a_index, a_strides)]
    y = b_storage[index_to_position(b_index, b_strides)]
    out[index_to_position(out_index, out_strides)] = binary(op, x, y)
"""

TENSOR_REDUCE = """
size = size_of(out_shape)
n = a_shape[reduce_dim]
step = a_strides[reduce_dim]
for i in prange(size):
    index = np.empty(len(out_shape), np.int32)
    to_index(i + 0, out_shape, index)  # index[reduce_dim] is 0: the fold's first entry
    o = index_to_position(index, out_strides)
    start = index_to_position(index, a_strides)
    acc = out[o]
    for k in range(n):
        acc = binary(op, acc, a_storage[start + k * step])
    out[o] = acc
"""

TENSOR_MATRIX_MULTIPLY = """
a_dims, b_dims = len(a_shape), len(b_shape)
m = a_shape[a_dims - 1]
a_step = a_strides[a_dims - 1]
b_step = b_strides[b_dims - 2]
size = size_of(out_shape)
for i in prange(size):
    out_index = np.empty(len(out_shape), np.int32)
    a_index = np.empty(a_dims, np.int32)
    b_index = np.empty(b_dims, np.int32)
    to_index(i + 0, out_shape, out_index)
    broadcast_index(out_index, out_shape, a_shape, a_index)
    broadcast_index(out_index, out_shape, b_shape, b_index)
    a_index[a_dims - 1] = 0  # row i of a, from its first column
    b_index[b_dims - 2] = 0  # column j of b, from its first row
    a_start = index_to_position(a_index, a_strides)
    b_start = index_to_position(b_index, b_strides)
    total = 0.0
    for k in range(m):
        total += a_storage[a_start + k * a_step] * b_storage[b_start + k * b_step]
    out[index_to_position(out_index, out_strides)] = total
"""

GEMM = """
b_rows = np.empty((k, n))  # b copied row by row: the inner loop reads it contiguously
for p in prange(k):
    for j in range(n):
        b_rows[p, j] = b[b_base + p * b_row + j * b_col]
for i in prange(m):
    row = np.zeros(n)  # row i of the product, summed in order of k
    for p in range(k):
        a_ip = a[a_base + i * a_row + p * a_col]
        for j in range(n):
            row[j] += a_ip * b_rows[p, j]
    for j in range(n):
        out[o_base + i * o_row + j * o_col] += row[j]
"""

NAIVE_GEMM = """
for i in prange(m):
    for j in range(n):
        total = 0.0
        for p in range(k):
            total += a[a_base + i * a_row + p * a_col] * b[b_base + p * b_row + j * b_col]
        out[o_base + i * o_row + j * o_col] += total
"""
"""The textbook triple loop, in parallel: right values, but not the speed task 2.3
promises (not in ``BODIES``: ``test_plain_solutions`` checks it loses the speed check
and nothing else)."""

BODIES: dict[tuple[str, str], str] = {
    ("2.1", "tensor_map_kernel"): TENSOR_MAP,
    ("2.1", "tensor_zip_kernel"): TENSOR_ZIP,
    ("2.1", "tensor_reduce_kernel"): TENSOR_REDUCE,
    ("2.2", "tensor_matrix_multiply_kernel"): TENSOR_MATRIX_MULTIPLY,
    ("2.3", "gemm"): GEMM,
}
