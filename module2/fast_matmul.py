"""Task 2.3 (optional): a faster matrix multiply — packing and register blocking.

Task 2.2's i-k-j loop streams a row of ``b`` through the cache for every ``a[i, k]``
and loads and stores the output row for every multiply-add: memory, not arithmetic,
sets its speed. High-performance BLAS libraries (Goto and van de Geijn; BLIS) reorganise
the same sum so that most operands come from registers. The task is :func:`gemm`: one
strided 2-D product, correct for any strides and sizes, parallel, and much faster on
one core than a naive triple loop (the README gives the bar and the reference's way
there: cache blocks, packed copies, a register-blocked micro-kernel).

Until it is done, ``FastOps.matrix_multiply`` computes large products with task 2.2's
kernel (see :func:`packed_product`): nothing else waits for this task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numba import config, njit, prange

from module1.tensor_data import Shape, Storage, Strides
from module2.compiled_ops import broadcast_index, index_to_position, size_of, to_index

if TYPE_CHECKING:
    from module1.tensor import Tensor

FASTMATH = {"contract", "reassoc"}
"""Fuse multiply-adds and regroup the sums (which vectorizes the dot products)."""


# BEGIN SOLUTION 2.3 omit
from llvmlite import ir  # noqa: E402
from numba.core import cgutils, types  # noqa: E402
from numba.extending import intrinsic, overload  # noqa: E402

from module2 import tuning  # noqa: E402

# The reference's gemm is laid out as BLAS libraries are (the README's "Task 2.3"):
# both operands packed into micro-panels, then blocks of the output in parallel, each
# computed by a micro-kernel that keeps a tile of the output in registers across the
# whole depth of a panel and adds one outer product per step of k. The tile's shape
# follows the vector registers of the CPU the kernels are compiled for (BLIS chooses
# its micro-kernel per CPU the same way), found when this module is imported.
VECTOR_BYTES = tuning.vector_bytes()
"""Bytes in a vector register: 64 with AVX-512, 32 with AVX2 and FMA, 16 otherwise."""
TILE_ROWS, TILE_VECTORS = (8, 2) if tuning.vector_registers() == 32 else (3, 4)
"""The tile: ``TILE_ROWS`` rows of ``TILE_VECTORS`` vectors of running sums, plus the
vectors of one row of ``b`` and one broadcast value of ``a`` in registers at once.

* 32 registers (AVX-512): 8 x 2 vectors, 16 sums; 8 float64 x 16, 8 float32 x 32.
  Eight rows rather than six: no edge panels when ``m`` is a multiple of 8, and 10
  loads per 16 vector multiply-adds instead of 8 per 12 (measured at 256 / 512 / 1024
  against 6 x 16, float64, in one process, alternating: +9%, +2%, +3%).
* 16 registers (AVX2): 3 x 4 vectors, 12 sums; 3 float64 x 16, 3 float32 x 32. BLIS's
  Haswell kernel is 6 x 2 vectors, but LLVM schedules all six broadcasts of ``a``
  before the multiply-adds and spills sums to the stack; 3 x 4 it keeps in registers.
  Compiled for Haswell on a Xeon, the kernel alone on one core (panels in L1, best
  of 7 alternating rounds): 36.4 GFLOP/s float64 and 71.5 float32, the CPU's peak at its
  2.3 GHz base clock (4 x 2 flops x 2 units per cycle); 6 x 8 made 23.2 and 44.2."""
TILE_BYTES = TILE_VECTORS * VECTOR_BYTES
"""Bytes in a row of the tile (128 with AVX-512 or AVX2): :func:`tile_cols` values."""
DEPTH = 512
"""Depth of a packed micro-panel (``KC`` in BLIS): a 512-deep panel of ``b`` is 64 KiB
(512 x 16 float64, or 512 x 32 float32), more than an L1 cache; read in order, stride
1, it streams from L2 (the CPU's own prefetcher). Each block of depth is one more pass
of loads and stores over the output, and on a 2-core AMD EPYC (Zen 4, 32 KiB L1, 1 MiB
L2) 512 beat 256 at n = 1024 in three alternating runs of 1024^3 products: float64
92.5 / 96.7 / 91.0 against 84.0 / 87.1 / 46.7 GFLOP/s (a slow spell), float32 194 /
203 / 191 against 177 / 186 / 101; 128 lost (81 against 88 in float64); 1024 measured
as 512."""
BLOCK_ROWS = 64
"""The most rows of ``a`` in one parallel task (``MC`` in BLIS): 8 panels of 8 rows, 128
KiB of packed ``a`` in float64 at :data:`DEPTH` (AVX2: 21 panels of 3 rows). A task
packs its own rows just before it multiplies them, so they are in L2 when the kernel
reads them."""
BLOCK_PANELS = 64
"""The most panels of ``b`` in one task (``NC`` in BLIS): 1024 columns in float64, 2048
in float32, 4 MiB packed at :data:`DEPTH`, which stay in L3 while every task of that
block of columns reads them. Measured (Zen 4, float64, best of 2 rounds, GFLOP/s):
1024 x 512 @ 512 x 16384 99 with 64, 96 with 128, 85 with no bound; 32 made the same
as 64 at that size but less at 256 x 256 @ 256 x 32768 (81 against 82)."""
TASKS_PER_THREAD = 4
"""Tasks a product is cut into, at least, per thread, while it has panels of ``a`` to
cut (fewer rows a task, down to one panel), and then blocks of columns; the count of
tasks rounded up to a multiple of the threads. With AVX2's 3-row tile a 1024 x 1024
product is 342 panels of ``a``: 17 tasks of 21 panels left one of two threads a task
more than the other (0.94 of the work each way); 18 tasks of 19 do not."""
THREADS = int(config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
"""Numba's threads when the kernels were compiled (``get_num_threads()`` in a kernel
would keep it out of the on-disk cache)."""
SERIAL_MAX = 1 << 20
"""Products of fewer multiply-adds run on the calling thread: waking the thread pool
twice cost more than the second core saved."""
IN_PLACE_PANELS = 32
"""A task reads a row-major ``a`` in place (:func:`multiply_block`) when it multiplies it
by this many panels of ``b`` at most; past that, packing costs less than the kernel
reading 3 or 8 rows far apart (float64 lost 1-2% at n = 1024-2048 in place)."""
RANK1_FASTMATH = {"contract"}
"""Fused multiply-adds but no reassociation: with ``reassoc`` LLVM's loop vectorizer
turns the 96 running sums into 96 reductions along ``k`` instead."""


def rank1_kernel_source(rows: int, cols: int) -> str:
    """The Python source of a ``rows x cols`` rank-1 micro-kernel: one scalar running
    sum per entry of the tile, written out, so LLVM's SLP vectorizer (switched on by
    ``module2/__init__.py``) packs each row's sums into vector registers. Writing the
    tile out by hand would be ``rows * cols`` lines; this writes them.

    ``rank1_kernel(a_panel, b_panel, kc, zero, out, base, o_row, store, ...)``:
    ``a_panel`` is ``(kc, rows)`` (column ``r`` is row ``r`` of the tile's rows of
    ``a``), ``b_panel`` is ``(kc, cols)``, ``zero`` a 0 of their dtype. Adds the tile
    to ``out[base + r * o_row + q]`` (contiguous rows of ``cols`` values), or with
    ``store`` writes it there; the caller points ``out`` at a small buffer for a tile
    that is not whole inside the output. Each sum is written out once per branch: a
    third branch that wrote the tile to the buffer made the 8 x 16 kernel 587 lines, not
    454, and ``gemm`` slower to compile; writing the sums only to the buffer and then
    adding it to the output by a loop (321 lines) took a 64 x 64 x 32 product, as
    attention's, from 5.3 to 6.1 us (float32).

    While it runs, it asks the cache for what comes next (:func:`prefetch`): the
    output rows it will add to, and, one row per step of ``k``, the panel of ``a`` the
    next call reads (``a_next``). Not the next panel of ``b``: that is the one this call
    reads for all but the last panel of ``a`` of a task, and the hints only took load
    slots (AVX2 code 2-4% slower with them; docs/benchmarks.md)."""
    sums = [[f"s{r}_{q}" for q in range(cols)] for r in range(rows)]
    lines = ["def rank1_kernel(a_panel, b_panel, kc, zero, out, base, o_row, store, a_next):"]
    lines += [f"    prefetch(out, base + {r} * o_row)" for r in range(rows)]
    lines += [f"    prefetch(out, base + {r} * o_row + {cols - 1})" for r in range(rows)]
    lines += ["    " + " = ".join(row) + " = zero" for row in sums]
    lines.append("    for p in range(kc):")
    lines.append("        prefetch(a_next, (p, 0))")
    lines += [f"        b{q} = b_panel[p, {q}]" for q in range(cols)]
    for r in range(rows):
        lines.append(f"        a{r} = a_panel[p, {r}]")
        lines += [f"        {sums[r][q]} += a{r} * b{q}" for q in range(cols)]
    for test, op in (("    if store:", "="), ("    else:", "+=")):
        lines.append(test)
        for r in range(rows):
            lines.append(f"        row = out[base + {r} * o_row :]")
            lines += [f"        row[{q}] {op} {sums[r][q]}" for q in range(cols)]
    return "\n".join(lines) + "\n"


@intrinsic
def prefetch(typingctx: Any, array: Any, index: Any) -> Any:
    """``prefetch(array, index)``: a hint that ``array[index]`` (an int, or a tuple of
    ints for a 2-D array) is read soon, so the CPU starts bringing its cache line into
    L1 now (LLVM's ``llvm.prefetch``: x86 ``prefetcht0``). It reads and changes nothing,
    and an address past the array cannot fault. The rank-1 kernel hides the latency of
    the next panels and of the output rows this way, as BLAS kernels do: measured, the
    multiply phase went from 49-51 to 53-54 GFLOP/s on one core at 512 and 1024."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        indices = (
            cgutils.unpack_tuple(builder, args[1])
            if isinstance(index, types.BaseTuple)
            else [args[1]]
        )
        view = context.make_array(array)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array, view, indices, wraparound=False)
        i32 = ir.IntType(32)
        hint = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32]),
            "llvm.prefetch.p0",
        )
        # read (0), keep in all levels (3), data cache (1)
        builder.call(hint, [builder.bitcast(pointer, cgutils.voidptr_t), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen


def _generate(cols: int) -> Any:
    """The ``TILE_ROWS x cols`` rank-1 kernel as a Python function (from our source)."""
    namespace: dict[str, Any] = {"prefetch": prefetch}
    exec(compile(rank1_kernel_source(TILE_ROWS, cols), f"<rank1_kernel_{cols}>", "exec"), namespace)
    return namespace["rank1_kernel"]


_KERNELS = {8: _generate(TILE_BYTES // 8), 4: _generate(TILE_BYTES // 4)}
"""The generated kernels by item size (:data:`TILE_ROWS` x :func:`tile_cols`): with
AVX-512, 8 x 16 for float64 and 8 x 32 for float32."""


@njit(inline="always")
def tile_cols(like: Any) -> int:
    """Columns of the tile for ``like``'s dtype: :data:`TILE_BYTES` of values."""
    return TILE_BYTES // like.itemsize


def rank1_kernel(
    a_panel: Any, b_panel: Any, kc: int, zero: Any, out: Storage, base: int, o_row: int,
    store: bool, a_next: Any,
) -> None:  # fmt: skip
    """The generated kernel for the panels' dtype (:data:`_KERNELS`), chosen when the
    caller compiles: each dtype's gemm compiles its own kernel only. Called, not
    inlined (one call per 8 x 512 x 16 or 32 block of multiply-adds): inlined through
    the overload, ``gemm`` took 16.5 s to compile in float64 and 31.7 s in float32
    (8.3 and 7.6 with one inlined 8 x 16 kernel); called, 7.7 and 12.5 s, as fast."""
    _KERNELS[b_panel.itemsize](a_panel, b_panel, kc, zero, out, base, o_row, store, a_next)


@overload(rank1_kernel, jit_options={"fastmath": RANK1_FASTMATH})
def _rank1_kernel(a_panel, b_panel, kc, zero, out, base, o_row, store, a_next):
    # unannotated, as vector_math._exp_loop
    return _KERNELS[b_panel.dtype.bitwidth // 8]


def unliteral(value: Any) -> Any:
    """``value`` itself, typed as a run-time value in compiled code: a constant argument
    (``0``, ``True``) is no longer a literal type (:func:`_unliteral`)."""
    return value


@overload(unliteral)
def _unliteral(value):  # unannotated, as _rank1_kernel
    # Numba types an overload's arguments without their literal values first, so this
    # compiles once per type, and what it returns has that type.
    return lambda value: value


@njit
def empty_aligned(shape: tuple[int, int, int], like: Storage) -> Any:
    """``np.empty(shape, like.dtype)`` starting on a 64-byte boundary (a cache line, and
    one AVX-512 vector): Numba aligns large arrays to 32 bytes only, and then every
    vector load of a packed panel's row spans two cache lines."""
    size = shape[0] * shape[1] * shape[2]
    lanes = 64 // like.itemsize
    flat = np.empty(size + lanes, like.dtype)
    skip = (-(flat.ctypes.data // like.itemsize)) % lanes
    return flat[skip : skip + size].reshape(shape)


@njit
def pack_a(
    dst: Any, block: int, r0: int, a: Storage, a_base: int, a_row: int, a_col: int, m: int, k: int,
) -> None:  # fmt: skip
    """``dst[p, r] = a[r0 + r, block * DEPTH + p]``: the micro-panel of ``a``'s rows
    ``r0 : r0 + TILE_ROWS`` in block ``block`` of depth; the rows past ``m`` are zeros.
    One row of the panel per step of ``k``, its values unrolled (a read per row, one
    contiguous write): on two threads at 1024 as fast as walking ``a``'s unit stride,
    twice as fast on one thread, and for a transposed ``a``."""
    p0 = block * DEPTH
    kc, rows = min(DEPTH, k - p0), min(TILE_ROWS, m - r0)
    if rows == TILE_ROWS:  # a whole panel: a constant count per step of k
        for p in range(kc):
            start = a_base + r0 * a_row + (p0 + p) * a_col
            for r in range(TILE_ROWS):
                dst[p, r] = a[start + r * a_row]
        return
    for p in range(kc):
        start = a_base + r0 * a_row + (p0 + p) * a_col
        for r in range(rows):
            dst[p, r] = a[start + r * a_row]
        for r in range(rows, TILE_ROWS):
            dst[p, r] = 0.0


@njit
def pack_b(
    b_pack: Any, block: int, panel: int,
    b: Storage, b_base: int, b_row: int, b_col: int, k: int, n: int,
) -> None:  # fmt: skip
    """``b_pack[panel][p, q] = b[block * DEPTH + p, panel * width + q]`` (``width`` the
    panel's: :func:`tile_cols`); the columns past ``n`` are zeros."""
    dst = b_pack[panel]
    width = dst.shape[1]
    p0, q0 = block * DEPTH, panel * width
    kc, cols = min(DEPTH, k - p0), min(width, n - q0)
    if b_col == 1:
        for p in range(kc):
            src = b[b_base + (p0 + p) * b_row + q0 :]
            row = dst[p]
            for q in range(cols):
                row[q] = src[q]
    else:
        for q in range(cols):
            start = b_base + p0 * b_row + (q0 + q) * b_col
            for p in range(kc):
                dst[p, q] = b[start + p * b_row]
    if cols < width:
        for p in range(kc):
            for q in range(cols, width):
                dst[p, q] = 0.0


@njit(fastmath=RANK1_FASTMATH)
def multiply_block(
    out: Storage, o_base: int, o_row: int, o_col: int,
    a: Storage, a_base: int, a_row: int, a_col: int, b_pack: Any, block: int,
    m: int, n: int, k: int, rows: tuple[int, int], cols: tuple[int, int], store: bool,
) -> None:  # fmt: skip
    """Add block ``block`` of depth of ``a``'s panels ``rows[0]:rows[1]`` times the
    packed panels ``cols[0]:cols[1]`` of ``b`` to ``out`` (with ``store``, write it over
    what ``out`` holds: the first block of an overwriting product): for each panel of
    ``b`` (it streams from L2 and L3), for each panel of ``a``, one call of the
    micro-kernel.

    A row-major ``a`` (unit stride along ``k``, its rows whole inside its storage), in a
    task of at most :data:`IN_PLACE_PANELS` panels of ``b``, is read where it lies: a
    panel is a view ``(kc, TILE_ROWS)`` of ``a`` with strides ``(1, a_row)``, whose rows
    the kernel reads as 3 or 8 streams in order, which the cache follows. Packing them
    first took 9% of a 256 x 256 product; read in place, float32 at n = 256 went from
    184 to 197 GFLOP/s (docs/benchmarks.md, the fifth round).

    Any other ``a`` (a transpose, rows past its storage, the rows past ``m``) is packed
    by :func:`pack_a`, each task its own panels just before it multiplies them: packed
    in a parallel loop of their own, every panel went through L3 (or memory) on its way
    from the packing to the kernel, and the loop was one more wait for every thread.
    Measured against that (Zen 4, 2 threads, best of 7 alternating rounds, GFLOP/s,
    float64 / float32): n = 256 93.7 / 179 to 95.3 / 184, 1024 99.1 / 202 to 103 / 208;
    AVX2 code 73 / 136 to 84 / 163 at 256, 93 / 187 to 98 / 194 at 1024."""
    width, depth = b_pack.shape[2], b_pack.shape[1]
    p0, count = block * DEPTH, rows[1] - rows[0]
    kc = min(DEPTH, k - p0)
    in_place = a_col == 1 and a_row >= k and a_base + m * a_row <= len(a)
    in_place = in_place and cols[1] - cols[0] <= IN_PLACE_PANELS
    # a as an (m, a_row) matrix where it is read in place (else an empty one)
    a_rows = a[a_base : a_base + m * a_row if in_place else a_base]
    a_rows = a_rows.reshape((m, a_row) if in_place else (0, 1))
    a_pack = empty_aligned((count, depth, TILE_ROWS), b_pack)
    for i in range(count):
        r0 = (rows[0] + i) * TILE_ROWS
        if not in_place or r0 + TILE_ROWS > m:
            pack_a(a_pack[i], block, r0, a, a_base, a_row, a_col, m, k)
    tile = np.zeros(TILE_ROWS * width, b_pack.dtype)  # an edge tile, row by row
    zero, start, written = tile[0], unliteral(0), unliteral(True)  # (one compiled kernel)
    for jp in range(cols[0], cols[1]):
        b_panel = b_pack[jp]
        nr = min(width, n - jp * width)
        a_panel = a_panel_at(a_rows, a_pack, rows[0], 0, p0, kc, m)
        for i in range(count):
            ip = rows[0] + i
            mr = min(TILE_ROWS, m - ip * TILE_ROWS)
            base = o_base + ip * TILE_ROWS * o_row + jp * width * o_col
            a_next = a_panel_at(a_rows, a_pack, rows[0], i + 1 if i + 1 < count else 0, p0, kc, m)
            if mr == TILE_ROWS and nr == width and o_col == 1:  # the tile, whole
                rank1_kernel(a_panel, b_panel, kc, zero, out, base, o_row, store, a_next)
            else:
                rank1_kernel(a_panel, b_panel, kc, zero, tile, start, width, written, a_next)
                for r in range(mr):  # the edge of the matrix, or strided output rows
                    for q in range(nr):
                        if store:
                            out[base + r * o_row + q * o_col] = tile[r * width + q]
                        else:
                            out[base + r * o_row + q * o_col] += tile[r * width + q]
            a_panel = a_next


@njit(inline="always")
def a_panel_at(a_rows: Any, a_pack: Any, first: int, i: int, p0: int, kc: int, m: int) -> Any:
    """Panel ``first + i`` of ``a`` for :func:`multiply_block`: a view of ``a_rows``
    (``(kc, TILE_ROWS)``, strides ``(1, a_row)``) where ``a`` is read in place and the
    panel's rows are all inside the matrix, else ``a_pack[i]``. One type either way
    (any layout), so one compiled micro-kernel serves both."""
    r0 = (first + i) * TILE_ROWS
    if a_rows.shape[0] > 0 and r0 + TILE_ROWS <= m:
        return a_rows[r0 : r0 + TILE_ROWS, p0 : p0 + kc].T
    return a_pack[i]


@njit
def b_buffer(a: Storage, n: int, k: int) -> Any:
    """An empty ``b_pack`` ``(panels, depth, width)`` for one block of depth of an ``(m,
    k) @ (k, n)`` product in ``a``'s dtype: panels of :func:`tile_cols` columns,
    ``min(DEPTH, k)`` deep (a shallow product's panels lie next to each other).

    One block at a time, the buffer reused for the next: packing all of a deep product
    at once took the product's whole size again, and past glibc's 32 MiB (a large GPT's
    weight gradients, 384 x 4096 @ 4096 x 1152 in float64: 50 MB) every call paid a
    page fault per 4 KiB; those products ran at 60-70 GFLOP/s where NumPy made 97."""
    width = tile_cols(a)
    return empty_aligned(((n + width - 1) // width, min(DEPTH, k), width), a)


@njit
def split_tasks(a_panels: int, b_panels: int) -> tuple[int, int]:
    """How many parallel tasks cut the panels of ``a`` and of ``b`` (:data:`BLOCK_ROWS`,
    :data:`BLOCK_PANELS`, :data:`TASKS_PER_THREAD`): tasks as tall as allowed, but at
    least :data:`TASKS_PER_THREAD` per thread, in a multiple of the threads; blocks of
    columns only for products too short to give that many, or too wide for one. The
    caller cuts evenly (:func:`task_span`)."""
    wanted, most = TASKS_PER_THREAD * THREADS, BLOCK_ROWS // TILE_ROWS
    row_tasks = max(wanted, (a_panels + most - 1) // most)
    row_tasks = min(a_panels, (row_tasks + THREADS - 1) // THREADS * THREADS)
    col_tasks = 1
    while row_tasks * col_tasks < wanted and col_tasks < b_panels:
        col_tasks *= 2
    col_tasks = max(col_tasks, (b_panels + BLOCK_PANELS - 1) // BLOCK_PANELS)
    return row_tasks, min(b_panels, col_tasks)


@njit(inline="always")
def task_span(task: int, tasks: int, panels: int) -> tuple[int, int]:
    """Task ``task`` of ``tasks``'s panels: sizes that differ by one at most. Numba gives
    each thread an equal run of tasks, so equal tasks keep the threads equal: with
    AVX2's 3-row tile a 512-row product is 171 panels of ``a``, and ten tasks of 18
    (the last of 9) gave one of two threads 90 panels, the other 81; cut evenly, 86 and
    85 (4-6% faster)."""
    return task * panels // tasks, (task + 1) * panels // tasks


@njit
def zero_matrix(out: Storage, o_base: int, o_row: int, o_col: int, m: int, n: int) -> None:
    """``out``'s ``m x n`` matrix at ``o_base`` set to zeros (a product over ``k = 0``)."""
    for i in range(m):
        for j in range(n):
            out[o_base + i * o_row + j * o_col] = 0.0


@njit(fastmath=RANK1_FASTMATH)
def serial_product(
    out: Storage, o_base: int, o_row: int, o_col: int,
    a: Storage, a_base: int, a_row: int, a_col: int,
    b: Storage, b_base: int, b_row: int, b_col: int,
    m: int, n: int, k: int, overwrite: bool,
) -> None:  # fmt: skip
    """:func:`gemm_into`'s contract on the calling thread: for each block of depth,
    every panel of ``b`` packed, then one :func:`multiply_block` over the whole
    product. Called through :func:`gemm_serial`."""
    if k == 0:
        if overwrite:
            zero_matrix(out, o_base, o_row, o_col, m, n)
        return
    b_pack = b_buffer(a, n, k)
    a_panels, b_panels = (m + TILE_ROWS - 1) // TILE_ROWS, b_pack.shape[0]
    for block in range((k + DEPTH - 1) // DEPTH):
        for panel in range(b_panels):
            pack_b(b_pack, block, panel, b, b_base, b_row, b_col, k, n)
        multiply_block(out, o_base, o_row, o_col, a, a_base, a_row, a_col, b_pack, block,
                       m, n, k, (0, a_panels), (0, b_panels), overwrite and block == 0)  # fmt: skip


@njit(inline="always")
def gemm_serial(
    out: Storage, o_base: int, o_row: int, o_col: int,
    a: Storage, a_base: int, a_row: int, a_col: int,
    b: Storage, b_base: int, b_row: int, b_col: int,
    m: int, n: int, k: int, overwrite: bool,
) -> None:  # fmt: skip
    """:func:`serial_product` (``gemm_into`` on the calling thread), for small products
    and for kernels that already run one task per thread (stage 5's attention).

    Inlined, so that every argument reaches :func:`serial_product` as a run-time value
    (:func:`unliteral`). Numba compiles a function called from compiled code once per
    set of argument types, and a constant argument has a type of its own: attention's
    seven calls, with their ``0``, ``1``, ``True`` and ``False``, made four compiled
    copies of the product per dtype, each with its own copy of the rank-1 kernel, and
    compiling stage 5's attention (forward and backward, both dtypes) took 64 s."""
    serial_product(
        out, unliteral(o_base), unliteral(o_row), unliteral(o_col),
        a, unliteral(a_base), unliteral(a_row), unliteral(a_col),
        b, unliteral(b_base), unliteral(b_row), unliteral(b_col),
        unliteral(m), unliteral(n), unliteral(k), unliteral(overwrite),
    )  # fmt: skip


def product(
    out: Storage, o_base: int, o_row: int, o_col: int,
    a: Storage, a_base: int, a_row: int, a_col: int,
    b: Storage, b_base: int, b_row: int, b_col: int,
    m: int, n: int, k: int, overwrite: bool,
) -> None:  # fmt: skip
    """:func:`gemm`'s product, added to ``out`` or, with ``overwrite``, written over it:
    the first block of depth stores its tiles instead of adding them, so the backend's
    driver need not zero the output first (a pass over it: 1-2% of a 256-512 product).
    A ``k = 0`` product writes zeros. Compiled twice (below): as :func:`gemm_into` for
    Python callers, and inlined into :func:`gemm`, whose own ``prange`` loops they
    become (a ``parallel=True`` kernel that only calls another has none, and Numba
    warns)."""
    if m * n * k < SERIAL_MAX:  # the same steps on this thread
        gemm_serial(out, o_base, o_row, o_col, a, a_base, a_row, a_col,
                    b, b_base, b_row, b_col, m, n, k, overwrite)  # fmt: skip
        return
    b_pack = b_buffer(a, n, k)
    a_panels, b_panels = (m + TILE_ROWS - 1) // TILE_ROWS, b_pack.shape[0]
    row_tasks, col_tasks = split_tasks(a_panels, b_panels)
    for block in range((k + DEPTH - 1) // DEPTH):  # packed, then multiplied, block by block
        for panel in prange(b_panels):
            pack_b(b_pack, block, panel, b, b_base, b_row, b_col, k, n)
        for task in prange(row_tasks * col_tasks):  # the tasks of a block of columns together
            multiply_block(
                out, o_base, o_row, o_col, a, a_base, a_row, a_col, b_pack, block, m, n, k,
                task_span(task % row_tasks, row_tasks, a_panels),
                task_span(task // row_tasks, col_tasks, b_panels), overwrite and block == 0,
            )  # fmt: skip


gemm_into = njit(parallel=True, cache=True, fastmath=FASTMATH)(product)
"""The product's kernel for Python callers: the backend's driver (``overwrite``) and
stage 4's fast Linear (adding to the bias)."""
product_inlined = njit(inline="always", fastmath=FASTMATH)(product)
"""The product inlined into :func:`gemm`."""


# END SOLUTION


# ## Task 2.3: the blocked, packed product


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def gemm(
    out: Storage, o_base: int, o_row: int, o_col: int,
    a: Storage, a_base: int, a_row: int, a_col: int,
    b: Storage, b_base: int, b_row: int, b_col: int,
    m: int, n: int, k: int,
) -> None:  # fmt: skip
    """``out += a @ b`` for one ``(m, k) @ (k, n)`` product of strided 2-D slices:
    element ``(i, j)`` of ``out`` is at ``o_base + i * o_row + j * o_col``, and likewise
    for ``a`` (``a_base``, ``a_row``, ``a_col``) and ``b``. Any strides (a transposed
    operand too), any sizes; adds to what ``out`` holds and writes nothing else. In
    parallel, and at least 2x as fast on one core as a naive triple loop (see the
    README)."""
    # BEGIN SOLUTION 2.3
    product_inlined(out, o_base, o_row, o_col, a, a_base, a_row, a_col,
                    b, b_base, b_row, b_col, m, n, k, False)  # fmt: skip
    # END SOLUTION


@njit(cache=True)
def batch_bases(
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_shape: Shape, a_strides: Strides, b_shape: Shape, b_strides: Strides,
) -> Any:  # fmt: skip
    """Zero ``out`` and give, for each output matrix of the batch (batch dimensions
    broadcast), the positions of its ``(0, 0)`` entry in ``out``, ``a`` and ``b``."""
    dims, a_dims, b_dims = len(out_shape), len(a_shape), len(b_shape)
    n, p = out_shape[dims - 2], out_shape[dims - 1]
    out_index = np.zeros(dims, np.int32)
    a_index = np.zeros(a_dims, np.int32)
    b_index = np.zeros(b_dims, np.int32)
    matrices = size_of(out_shape) // (n * p) if n * p > 0 else 0
    bases = np.empty((matrices, 3), np.int64)
    whole = len(out) == size_of(out_shape)  # the storage is the output's alone
    if whole:
        out[:] = 0.0
    for batch in range(matrices):
        to_index(batch * n * p, out_shape, out_index)  # (..., 0, 0)
        broadcast_index(out_index, out_shape, a_shape, a_index)
        broadcast_index(out_index, out_shape, b_shape, b_index)
        bases[batch, 0] = o_base = index_to_position(out_index, out_strides)
        bases[batch, 1] = index_to_position(a_index, a_strides)
        bases[batch, 2] = index_to_position(b_index, b_strides)
        if whole:
            continue
        for i in range(n):
            for j in range(p):
                out[o_base + i * out_strides[dims - 2] + j * out_strides[dims - 1]] = 0.0
    return bases


ZERO_CHUNK = 1 << 16
"""Entries per parallel task of :func:`zero_fill`; outputs of fewer are zeroed by one
``fill`` on the calling thread (waking the pool costs more)."""


@njit(parallel=True, cache=True)
def zero_fill(out: Storage) -> None:
    """``out[:] = 0`` in chunks of :data:`ZERO_CHUNK` on every thread: a GPT step zeroes
    48 product outputs of 0.4-1.5 MB, 2.9 ms on one thread (memory-bound: two threads
    halve it)."""
    n = len(out)
    for c in prange((n + ZERO_CHUNK - 1) // ZERO_CHUNK):
        out[c * ZERO_CHUNK : min(n, (c + 1) * ZERO_CHUNK)] = 0.0


def tensor_matrix_multiply_packed(
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    b_storage: Storage, b_shape: Shape, b_strides: Strides,
) -> None:  # fmt: skip
    """The batched product of task 2.2's contract (batch dimensions broadcast, any
    layout), one :func:`gemm` per output matrix, each called from Python as compiled on
    its own (the products sent here have at least 64^3 multiply-adds each, so a call
    per matrix costs nothing measurable). The output is zeroed with one fill when its
    storage is its own (:func:`zero_fill` on every thread when it is large): the
    strided loop of :func:`batch_bases` took a tenth of a float32 product at 512."""
    n, p, m = out_shape[-2], out_shape[-1], a_shape[-1]
    # BEGIN SOLUTION 2.3 omit
    if len(out_shape) == 2 and len(out) == n * p:  # the reference writes it: no zeroing
        # Python ints, as stage 4's fast Linear passes: with the strides' int32 this was
        # a second compiled gemm_into per dtype (8-9 s more of a cold start)
        gemm_into(
            out, 0, int(out_strides[-2]), int(out_strides[-1]),
            a_storage, 0, int(a_strides[-2]), int(a_strides[-1]),
            b_storage, 0, int(b_strides[-2]), int(b_strides[-1]),
            int(n), int(p), int(m), True,
        )  # fmt: skip
        return
    # END SOLUTION
    if len(out_shape) == 2 and len(out) == n * p:  # one matrix, its storage its own
        if len(out) >= 2 * ZERO_CHUNK:
            zero_fill(out)
        else:
            out.fill(0.0)
        bases = [(0, 0, 0)]  # a 2-D view starts at position 0 of its storage
    else:
        bases = batch_bases(
            out, out_shape, out_strides, a_shape, a_strides, b_shape, b_strides
        ).tolist()
    for o_base, a_base, b_base in bases:
        gemm(
            out, o_base, out_strides[-2], out_strides[-1],
            a_storage, a_base, a_strides[-2], a_strides[-1],
            b_storage, b_base, b_strides[-2], b_strides[-1],
            n, p, m,
        )  # fmt: skip


use_packed = True
"""Whether ``FastOps.matrix_multiply`` sends large products here. Task 2.3 is optional:
the first time :func:`gemm` raises the handout's own stub error (a NotImplementedError
whose message starts with ``"Task 2.3:"``), this turns False for the rest of the
process and task 2.2's kernel computes every product. Any other error propagates."""


def packed_product(out: Tensor, a: Tensor, b: Tensor) -> bool:
    """``out = a @ b`` (``out`` of the broadcast shape) by
    :func:`tensor_matrix_multiply_packed`; False, leaving ``out`` for task 2.2's kernel
    to write, while :func:`gemm` is still the handout's stub."""
    global use_packed
    if not use_packed:
        return False
    try:
        tensor_matrix_multiply_packed(*out.tuple_arrays(), *a.tuple_arrays(), *b.tuple_arrays())
    except NotImplementedError as error:
        if not str(error).startswith("Task 2.3:"):
            raise
        use_packed = False
        return False
    return True
