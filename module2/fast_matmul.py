"""Task 2.3: a matrix multiply that competes with BLAS — packing and register tiling.

Task 2.2's i-k-j loop streams a row of ``b`` through the cache for every ``a[i, k]``: it
does two memory reads per multiply-add, and memory, not arithmetic, sets its speed.
This kernel follows the structure of high-performance BLAS (Goto and van de Geijn;
BLIS):

* **Blocking.** ``k`` is cut into blocks of ``KC`` and the rows of ``a`` into blocks of
  ``MC``, so one block of ``a`` (``MC x KC``, 256 KiB) and one panel of ``b``
  (``KC x NR``, 32 KiB) stay in the caches while they are reused.
* **Packing.** Each block is copied once into a contiguous buffer, in exactly the order
  the micro-kernel reads it: ``a`` in panels of ``MR`` rows (column by column), ``b`` in
  panels of ``NR`` columns (row by row). Any strides, any transposition, are paid once
  here, and panels past the edge are padded with zeros so the micro-kernel never
  branches on the matrix size.
* **Register tiling.** The micro-kernel keeps an ``MR x NR`` (8 x 16) tile of the output
  in registers and, for each ``p``, adds the outer product of ``MR`` values of ``a`` and
  ``NR`` values of ``b``: 128 multiply-adds for 24 loads. The tile is a small local
  array with constant bounds, which LLVM keeps in vector registers after unrolling;
  ``fastmath={"contract"}`` lets it fuse multiply and add (FMA).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from module1.tensor_data import Shape, Storage, Strides
from module2.fast_ops import broadcast_index, index_to_position, size_of, to_index

MR = 8
"""Rows of the register tile."""
NR = 16
"""Columns of the register tile (two AVX-512 vectors of float64, four AVX2 ones)."""
KC = 256
"""Depth of a packed block: ``KC x NR`` floats of ``b`` (32 KiB) fit in the L1 cache."""
MC = 128
"""Rows of ``a`` per packed block (``MC x KC`` floats, 256 KiB, for the L2 cache)."""


# ## Task 2.3: the micro-kernel and the blocked, packed product


@njit(inline="always", fastmath={"contract"})
def micro_kernel(
    kc: int,
    a_pack: Storage, a_offset: int,
    b_pack: Storage, b_offset: int,
    out: Storage, o_offset: int, o_row: int, o_col: int,
    mr: int, nr: int,
) -> None:  # fmt: skip
    """``out[:mr, :nr] += A_panel @ B_panel`` for one ``MR x kc`` panel of packed ``a``
    (column ``p`` at ``a_offset + p * MR``) and one ``kc x NR`` panel of packed ``b``
    (row ``p`` at ``b_offset + p * NR``), accumulating an ``MR x NR`` tile in registers.
    Only the first ``mr`` rows and ``nr`` columns are written (the edge of the matrix)."""
    # BEGIN SOLUTION 2.3
    tile = np.zeros((MR, NR))
    for p in range(kc):
        a_p = a_offset + p * MR
        b_p = b_offset + p * NR
        for i in range(MR):
            a_value = a_pack[a_p + i]
            for j in range(NR):
                tile[i, j] += a_value * b_pack[b_p + j]
    for i in range(mr):
        for j in range(nr):
            out[o_offset + i * o_row + j * o_col] += tile[i, j]
    # END SOLUTION


@njit(parallel=True, cache=True, fastmath={"contract"})
def gemm(
    out: Storage, o_base: int, o_row: int, o_col: int,
    a: Storage, a_base: int, a_row: int, a_col: int,
    b: Storage, b_base: int, b_row: int, b_col: int,
    m: int, n: int, k: int,
) -> None:  # fmt: skip
    """``out += a @ b`` for one ``(m, k) @ (k, n)`` product of strided 2-D slices:
    element ``(i, j)`` of ``out`` is at ``o_base + i * o_row + j * o_col``, and likewise
    for ``a`` and ``b``. Parallel over blocks of ``MC`` rows."""
    # BEGIN SOLUTION 2.3
    n_panels = (n + NR - 1) // NR
    m_blocks = (m + MC - 1) // MC
    b_pack = np.empty(n_panels * KC * NR)
    for pc in range(0, k, KC):
        kc = min(KC, k - pc)
        # Pack b[pc:pc+kc, :] into panels of NR columns, row by row, zero-padded.
        for jp in prange(n_panels):
            for p in range(kc):
                src = b_base + (pc + p) * b_row
                dst = (jp * kc + p) * NR
                for j in range(NR):
                    col = jp * NR + j
                    b_pack[dst + j] = b[src + col * b_col] if col < n else 0.0
        for block in prange(m_blocks):
            ic = block * MC
            mc = min(MC, m - ic)
            m_panels = (mc + MR - 1) // MR
            # Pack a[ic:ic+mc, pc:pc+kc] into panels of MR rows, column by column.
            a_pack = np.empty(m_panels * kc * MR)
            for ip in range(m_panels):
                for p in range(kc):
                    src = a_base + (pc + p) * a_col
                    dst = (ip * kc + p) * MR
                    for i in range(MR):
                        row = ic + ip * MR + i
                        a_pack[dst + i] = a[src + row * a_row] if row < m else 0.0
            for jp in range(n_panels):
                nr = min(NR, n - jp * NR)
                for ip in range(m_panels):
                    mr = min(MR, mc - ip * MR)
                    o_offset = o_base + (ic + ip * MR) * o_row + jp * NR * o_col
                    micro_kernel(
                        kc, a_pack, ip * kc * MR, b_pack, jp * kc * NR,
                        out, o_offset, o_row, o_col, mr, nr,
                    )  # fmt: skip
    # END SOLUTION


@njit(cache=True)
def tensor_matrix_multiply_packed(
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    b_storage: Storage, b_shape: Shape, b_strides: Strides,
) -> None:  # fmt: skip
    """The batched product of task 2.2's contract (batch dimensions broadcast, any
    layout), one :func:`gemm` per output matrix."""
    dims, a_dims, b_dims = len(out_shape), len(a_shape), len(b_shape)
    n, p = out_shape[dims - 2], out_shape[dims - 1]
    m = a_shape[a_dims - 1]
    out_index = np.zeros(dims, np.int32)
    a_index = np.zeros(a_dims, np.int32)
    b_index = np.zeros(b_dims, np.int32)
    matrices = size_of(out_shape) // (n * p) if n * p > 0 else 0
    for batch in range(matrices):
        to_index(batch * n * p, out_shape, out_index)  # (..., 0, 0)
        broadcast_index(out_index, out_shape, a_shape, a_index)
        broadcast_index(out_index, out_shape, b_shape, b_index)
        o_base = index_to_position(out_index, out_strides)
        for i in range(n):
            for j in range(p):
                out[o_base + i * out_strides[dims - 2] + j * out_strides[dims - 1]] = 0.0
        gemm(
            out, o_base, out_strides[dims - 2], out_strides[dims - 1],
            a_storage, index_to_position(a_index, a_strides),
            a_strides[a_dims - 2], a_strides[a_dims - 1],
            b_storage, index_to_position(b_index, b_strides),
            b_strides[b_dims - 2], b_strides[b_dims - 1],
            n, p, m,
        )  # fmt: skip
