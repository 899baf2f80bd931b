"""The naive matrix product that task 2.3's ``gemm`` must beat: the test times both on
one Numba thread; the graded check ``gemm_speed`` times it on all of them, in the
reference's process (never in a submission's)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def naive_product(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """``out = a @ b`` by the textbook triple loop (i-j-k, a running sum per output),
    its rows in parallel."""
    m, k = a.shape
    n = b.shape[1]
    for i in prange(m):
        for j in range(n):
            total = 0.0
            for p in range(k):
                total += a[i, p] * b[p, j]
            out[i, j] = total
