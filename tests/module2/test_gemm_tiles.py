"""The reference's choice of task 2.3's tile by CPU (``module2/tuning.py`` and the
constants of ``module2/fast_matmul.py``): reference-only, like the tile itself (a
handout's ``gemm`` is the student's own; see ``autograder/release.py``).

* The feature lists: which vector width and register count each names, and the AVX2
  list made from an AVX-512 machine's.
* The edge sizes of ``test_fast_matmul.py`` straddle this machine's tile: for its rows,
  its columns in both dtypes and its depth, a size at a multiple, one past and one
  short.
* On an AVX-512 machine, ``test_fast_matmul.py``'s value tests run again in a child
  process that compiles for AVX2 (``tuning.avx2_environment``): the 3-row tile is
  checked at every edge, in both dtypes, on a machine whose own tile is 8 rows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

from module2 import fast_matmul, tuning
from tests.module2.test_fast_matmul import FLOAT32_EDGES, PACKED_SIZES

HOST = llvm.get_host_cpu_features().flatten()
AVX512 = "+avx512f,+avx512dq,+avx2,+fma,+avx,+sse4.2,+prefer-256-bit"
AVX2 = "+avx2,+fma,+avx,+sse4.2,-avx512f"


def test_feature_lists_give_vector_width_and_registers() -> None:
    assert (tuning.vector_bytes(AVX512), tuning.vector_registers(AVX512)) == (64, 32)
    assert (tuning.vector_bytes(AVX2), tuning.vector_registers(AVX2)) == (32, 16)
    assert tuning.vector_bytes("+avx2,-fma") == 16  # AVX2 without FMA: no fused tile
    assert (tuning.vector_bytes("+sse2"), tuning.vector_registers("+sse2")) == (16, 16)
    assert (tuning.vector_bytes("+neon"), tuning.vector_registers("+neon")) == (16, 32)
    assert tuning.vector_bytes("") == 16


def test_without_avx512_switches_off_every_avx512_and_amx_flag_only() -> None:
    got = tuning.without_avx512("+avx2,+avx512f,-avx512vl,+amx-tile,+fma,+avx512bw")
    assert got == "+avx2,-avx512f,-avx512vl,-amx-tile,+fma,-avx512bw"
    assert tuning.vector_bytes(got) == 32
    assert tuning.vector_bytes(tuning.avx2_environment()["NUMBA_CPU_FEATURES"]) in (16, 32)


def test_the_tile_follows_the_compile_features() -> None:
    expected = (8, 2) if tuning.vector_registers() == 32 else (3, 4)
    assert (fast_matmul.TILE_ROWS, fast_matmul.TILE_VECTORS) == expected
    assert fast_matmul.TILE_BYTES == fast_matmul.TILE_VECTORS * tuning.vector_bytes()
    if tuning.vector_bytes() == 64 and "NUMBA_CPU_FEATURES" not in os.environ:
        pytest.fail("an AVX-512 CPU without 512-bit vectors preferred")


def straddles(sizes: list[int], tile: int) -> bool:
    """Whether ``sizes`` hold a multiple of ``tile``, one past one and one short of one
    (a size of 1 is not one past a tile)."""
    return all(any(s >= tile - 1 and s % tile == r % tile for s in sizes) for r in (0, 1, -1))


def test_edge_sizes_straddle_this_machines_tile() -> None:
    rows = [n for n, _, _ in PACKED_SIZES] + FLOAT32_EDGES
    columns = [p for _, _, p in PACKED_SIZES] + FLOAT32_EDGES
    depths = [m for _, m, _ in PACKED_SIZES]
    assert straddles(rows, fast_matmul.TILE_ROWS)
    for itemsize in (8, 4):
        assert straddles(columns, fast_matmul.TILE_BYTES // itemsize)
    assert straddles(depths, fast_matmul.DEPTH)


@pytest.mark.skipif(
    tuning.vector_bytes(HOST) != 64,
    reason="this machine has no AVX-512: its own tile is the AVX2 one, tested in-process",
)
def test_gemm_compiled_for_avx2_at_every_edge() -> None:
    env = {**os.environ, **tuning.avx2_environment()}
    tests = Path(__file__).with_name("test_fast_matmul.py")
    select = "tile_edge or batches_and_blocks or strided_slice or every_layout or widest"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
               "-k", select, str(tests)]  # fmt: skip
    probe = "from module2 import fast_matmul as f; print(f.TILE_ROWS, f.TILE_BYTES)"
    tile = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert tile.stdout.split() == ["3", "128"], tile.stderr[-2000:]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-2000:]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize(
    ("m", "n", "k"),
    [(5, 7, 0), (9, 17, 3), (9, 33, 513), (67, 131, 1031), (131, 67, 300)],
    ids=str,
)
def test_gemm_into_overwrites_every_entry(dtype: type, m: int, n: int, k: int) -> None:
    """The reference's ``gemm_into`` with ``overwrite`` (the backend's driver calls it so,
    without zeroing the output first): on the calling thread and in parallel, one block
    of depth and several (the first writes, the rest add), ``k = 0`` (zeros), and an
    output stored column by column (the edge path writes from the small tile), starting
    as NaN. Planted bugs caught: every block writing instead of the first; the edge path
    adding instead of writing."""
    rng = np.random.default_rng(m * n + k)
    a, b = rng.uniform(-1, 1, (m, k)).astype(dtype), rng.uniform(-1, 1, (k, n)).astype(dtype)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    for transposed in (False, True):
        out = np.full((n, m) if transposed else (m, n), np.nan, dtype)
        o_row, o_col = (1, m) if transposed else (n, 1)
        fast_matmul.gemm_into(out.reshape(-1), 0, o_row, o_col, a.reshape(-1), 0, k, 1,
                              b.reshape(-1), 0, n, 1, m, n, k, True)  # fmt: skip
        got = out.T if transposed else out
        tol = 1e-12 if dtype is np.float64 else 1e-4
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * max(1, k),
                                   err_msg=f"output stored transposed: {transposed}")  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_gemm_serial_from_compiled_code_takes_its_constants_as_run_time_values(
    dtype: type,
) -> None:
    """Compiled callers pass ``gemm_serial`` constants (attention's ``0``, ``1``, ``True``,
    ``False``); each constant has a type of its own in Numba, and every set of argument
    types compiled another copy of the product (and of the micro-kernel with it). The
    wrapper passes them on as run-time values, so the product is compiled with plain
    ints and bools only, and gives the right answer for each call. Planted bug caught:
    the wrapper passing its arguments on as they come."""
    from numba import njit, types

    @njit
    def three_calls(out: np.ndarray, a: np.ndarray, b: np.ndarray, n: int) -> None:
        fast_matmul.gemm_serial(out, 0, n, 1, a, 0, n, 1, b, 0, n, 1, n, n, n, True)
        fast_matmul.gemm_serial(out, 0, n, 1, a, 0, 1, n, b, 0, n, 1, n, n, n, False)
        fast_matmul.gemm_serial(out, 0, 1, n, a, 0, n, 1, b, 0, 1, n, n, n, n, False)

    n = 9
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, (n, n)).astype(dtype), rng.uniform(-1, 1, (n, n)).astype(dtype)
    out = np.full(n * n, np.nan, dtype)
    three_calls(out, a.reshape(-1), b.reshape(-1), n)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    expected = a64 @ b64 + a64.T @ b64 + (a64 @ b64.T).T
    tol = 1e-12 if dtype is np.float64 else 1e-5
    np.testing.assert_allclose(out.reshape(n, n), expected, rtol=tol, atol=tol)
    literal = [sig for sig in fast_matmul.serial_product.signatures
               if any(isinstance(t, types.Literal) for t in sig)]  # fmt: skip
    assert not literal, f"{len(literal)} copies of serial_product for constants: {literal[0]}"


def test_the_driver_calls_gemm_into_with_the_ints_stage_4_passes() -> None:
    """The backend's driver takes its strides and sizes from the tensors' int32 arrays;
    it passes them on as Python ints, as stage 4's fast Linear does, so a model that
    uses both compiles one ``gemm_into`` per dtype, not two (8-9 s each, cold: a float32
    GPT's first steps 58.6 s -> 49.3). Planted bug caught: the int32 values passed on."""
    from numba import types

    from module1.creation import from_numpy
    from module2.fast_ops import FastTensorBackend

    rng = np.random.default_rng(4)
    a, b = (from_numpy(rng.random((96, 96)).astype(np.float32), FastTensorBackend)
            for _ in range(2))  # fmt: skip
    out = a.zeros((96, 96))
    fast_matmul.tensor_matrix_multiply_packed(
        *out.tuple_arrays(), *a.tuple_arrays(), *b.tuple_arrays()
    )
    np.testing.assert_allclose(out.to_numpy(), a.to_numpy() @ b.to_numpy(), rtol=1e-5)
    narrow = [sig for sig in fast_matmul.gemm_into.signatures
              if any(isinstance(t, types.Integer) and t.bitwidth < 64 for t in sig)]  # fmt: skip
    assert not narrow, f"gemm_into compiled for narrow ints: {narrow[0]}"


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_tasks_cut_the_panels_evenly_and_whole(
    threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``split_tasks`` and ``task_span`` (run as Python): every panel of ``a`` and of ``b``
    in exactly one task, no task past :data:`BLOCK_ROWS` rows or :data:`BLOCK_PANELS`
    panels, the row tasks a multiple of the threads where there are panels enough, and
    each thread's run of tasks within one panel of the others' (a planted split with a
    short last task gives one of two threads 90 of AVX2's 171 panels at n = 512)."""
    monkeypatch.setattr(fast_matmul, "THREADS", threads)
    split = fast_matmul.split_tasks.py_func
    span = fast_matmul.task_span.py_func
    caps = fast_matmul.BLOCK_ROWS // fast_matmul.TILE_ROWS, fast_matmul.BLOCK_PANELS
    for a_panels in [1, 2, 3, 5, 7, 8, 9, 31, 32, 33, 86, 171, 342, 1000]:
        for b_panels in [1, 2, 3, 8, 63, 64, 65, 129, 1000]:
            row_tasks, col_tasks = split(a_panels, b_panels)
            cuts = zip((row_tasks, col_tasks), (a_panels, b_panels), caps, strict=True)
            for tasks, panels, cap in cuts:
                spans = [span(t, tasks, panels) for t in range(tasks)]
                assert [s[0] for s in spans] == [0] + [s[1] for s in spans[:-1]]
                assert spans[-1][1] == panels and all(0 < e - s <= cap for s, e in spans)
            if a_panels >= threads * fast_matmul.TASKS_PER_THREAD:
                assert row_tasks % threads == 0, (a_panels, b_panels)
                runs = [
                    sum(e - s for s, e in (span(t, row_tasks, a_panels) for t in
                        range(i * row_tasks // threads, (i + 1) * row_tasks // threads)))
                    for i in range(threads)
                ]  # fmt: skip
                assert max(runs) - min(runs) <= 1, (a_panels, runs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_gemm_reads_a_row_major_a_in_place_at_each_boundary(dtype: type, parallel: bool) -> None:
    """``multiply_block`` reads a row-major ``a`` where it lies, and packs it otherwise:
    against NumPy for ``n`` one panel short of, at and past :data:`IN_PLACE_PANELS`
    panels of ``b`` (a task's), ``m`` two whole tiles and one row (the last panel
    packed, the others in place), and ``a`` as a column slice of a wider matrix (rows
    ``k + 3`` apart): at the start of its storage (in place) and at the end, where its
    last row ends before a whole ``a_row`` does (packed; read in place it would run past
    the storage). On the calling thread (``k = 5``) and in parallel (``k`` deep enough
    for :data:`SERIAL_MAX`). Planted bugs caught: the view's strides swapped; the
    storage bound left out."""
    width = fast_matmul.tile_cols(np.zeros(1, dtype))
    m = 2 * fast_matmul.TILE_ROWS + 1
    rng = np.random.default_rng(int(parallel))
    for panels in (fast_matmul.IN_PLACE_PANELS - 1, fast_matmul.IN_PLACE_PANELS,
                   fast_matmul.IN_PLACE_PANELS + 1):  # fmt: skip
        n = panels * width - 1
        k = fast_matmul.SERIAL_MAX // (m * n) + 1 if parallel else 5
        assert (m * n * k >= fast_matmul.SERIAL_MAX) == parallel
        b = rng.uniform(-1, 1, (k, n)).astype(dtype)
        wide = rng.uniform(-1, 1, (m, k + 3)).astype(dtype)
        for first in (0, 3):  # the slice wide[:, :k], or wide[:, 3:]
            a = wide[:, first : first + k]
            storage = wide.reshape(-1)
            if first:  # its last row ends at the storage's end
                assert first + m * (k + 3) > storage.size
            out = np.full((m, n), np.nan, dtype)
            fast_matmul.gemm_into(out.reshape(-1), 0, n, 1, storage, first, k + 3, 1,
                                  b.reshape(-1), 0, n, 1, m, n, k, True)  # fmt: skip
            expected = a.astype(np.float64) @ b.astype(np.float64)
            tol = 1e-12 if dtype is np.float64 else 1e-4
            np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * k,
                                       err_msg=f"{panels} panels, a at {first}")  # fmt: skip
