"""Gather and scatter-add on the fast backend: advanced indexing's kernels, in parallel.

Given code (stage 1's task 1.6 wrote the plain versions). A gather is embarrassingly
parallel: each output reads one entry. Its adjoint, the scatter-add, is not: two
outputs that read the same entry send their gradients to one place, and two threads
adding into one float lose an update now and then (a data race: the result changes
from run to run). So the work is split by *destination*, not by source: the ordinals
are sorted once (a stable argsort: repeated entries keep their order, so the sums are
the same in every run), and each thread owns whole runs of equal ordinals, adding them
into the entry it alone writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit, prange

from module1.tensor_data import Shape, Storage, Strides
from module2 import cache
from module2.compiled_ops import PARALLEL_MIN, index_to_position, to_index

if TYPE_CHECKING:
    from module1.tensor import Tensor

cache.install()


@njit(parallel=True, cache=True)
def gather_kernel(
    out: Storage, a_storage: Storage, a_shape: Shape, a_strides: Strides, ordinals: np.ndarray
) -> None:
    """``out[j] = a[entry ordinals[j]]`` for every ``j``, a ``prange`` over chunks."""
    n = len(ordinals)
    chunk = 1024
    for c in prange((n + chunk - 1) // chunk):
        index = np.empty(len(a_shape), np.int32)
        for j in range(c * chunk, min(n, (c + 1) * chunk)):
            to_index(ordinals[j], a_shape, index)
            out[j] = a_storage[index_to_position(index, a_strides)]


@njit(parallel=True, cache=True)
def scatter_add_kernel(
    out: Storage,
    d_storage: Storage, d_shape: Shape, d_strides: Strides,
    ordinals: np.ndarray, order: np.ndarray, starts: np.ndarray,
) -> None:  # fmt: skip
    """``out[ordinals[j]] += d[j]``: ``order`` sorts the ordinals (stably) and ``starts``
    marks where each run of equal ordinals begins (with ``len(order)`` last), so the
    ``prange`` over runs gives every destination to one thread."""
    runs = len(starts) - 1
    for r in prange(runs):
        index = np.empty(len(d_shape), np.int32)
        total = 0.0
        for k in range(starts[r], starts[r + 1]):
            j = order[k]
            to_index(j, d_shape, index)
            total += d_storage[index_to_position(index, d_strides)]
        out[ordinals[order[starts[r]]]] += total


def gather(a: Tensor, ordinals: np.ndarray) -> Tensor:
    """FastOps.gather: the kernel above for large gathers, NumPy's ``take`` on a
    contiguous input and stage 1's kernel shape for small ones (no thread start-up)."""
    out = a.empty(ordinals.shape)
    flat = ordinals.reshape(-1)
    data = a._tensor
    if data.is_contiguous() and len(data._storage) == data.size:
        np.take(data._storage, flat, out=out._tensor._storage)
    elif len(flat):
        gather_kernel(out._tensor._storage, data._storage, data._shape, data._strides, flat)
    return out


def scatter_add(d: Tensor, ordinals: np.ndarray, shape: tuple[int, ...]) -> Tensor:
    """FastOps.scatter_add: sort by destination, then one thread per run of equal
    destinations (no two threads write one entry). Small ones run serially in NumPy
    (``np.add.at`` adds repeated indices unbuffered)."""
    out = d.zeros(shape)
    flat = ordinals.reshape(-1)
    if len(flat) < PARALLEL_MIN:
        np.add.at(out._tensor._storage, flat, d.to_numpy().reshape(-1))
        return out
    order = np.argsort(flat, kind="stable")
    ranked = flat[order]
    starts = np.flatnonzero(np.diff(ranked)) + 1
    starts = np.concatenate(([0], starts, [len(flat)])).astype(np.int64)
    data = d._tensor
    scatter_add_kernel(
        out._tensor._storage, data._storage, data._shape, data._strides, flat, order, starts
    )
    return out
