"""Gather and scatter-add on the fast backend (``module2/fast_index.py``, given code)
against the plain kernels of task 1.6's reference written in NumPy (``np.take`` and
``np.add.at``), at every boundary of its paths: the contiguous ``np.take`` path and the
parallel kernel (inputs not contiguous), around the kernel's chunk of 1024 outputs,
around ``PARALLEL_MIN`` (serial ``np.add.at`` below it, the sorted parallel scatter at and
above), with many repeats (every thread's run long) and none, in both dtypes. The
scatter-add must give the same bits in every run: each destination is summed by one
thread in a fixed order."""

from __future__ import annotations

import numpy as np
import pytest

from module1.tensor import Tensor
from module1.tensor_data import TensorData
from module2.compiled_ops import PARALLEL_MIN
from module2.fast_ops import FastTensorBackend

DTYPES = [np.float64, np.float32]


def transposed(values: np.ndarray) -> Tensor:
    """A (n, 2) tensor of ``values`` stored column by column: not contiguous."""
    base = np.ascontiguousarray(values.T)
    n = values.shape[0]
    return Tensor(TensorData(base.reshape(-1), values.shape, (1, n)), backend=FastTensorBackend)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [0, 1, 1023, 1024, 1025, 3000])
def test_gather_on_both_paths_matches_numpy(dtype: type, count: int) -> None:
    rng = np.random.default_rng(count)
    values = rng.normal(size=(700, 2)).astype(dtype)
    ordinals = rng.integers(0, values.size, count).astype(np.int64)
    want = values.reshape(-1)[ordinals]
    contiguous = Tensor(TensorData(values.reshape(-1).copy(), values.shape),
                        backend=FastTensorBackend)  # fmt: skip
    for tensor in (contiguous, transposed(values)):
        got = FastTensorBackend.gather(tensor, ordinals)
        assert got.dtype == dtype and got.shape == (count,)
        np.testing.assert_array_equal(got.to_numpy(), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [PARALLEL_MIN - 1, PARALLEL_MIN, PARALLEL_MIN + 1])
@pytest.mark.parametrize("targets", [3, 50_000])
def test_scatter_add_around_the_parallel_threshold(dtype: type, count: int, targets: int) -> None:
    """Few targets (long runs of repeats: a racy kernel loses updates) and many."""
    rng = np.random.default_rng(count + targets)
    ordinals = rng.integers(0, targets, count).astype(np.int64)
    d = rng.normal(size=(count, 1)).astype(dtype)
    grads = transposed(d)
    want = np.zeros(targets, np.float64)
    np.add.at(want, ordinals, d.reshape(-1).astype(np.float64))
    first = FastTensorBackend.scatter_add(grads, ordinals.reshape(count, 1), (targets,))
    assert first.dtype == dtype and first.shape == (targets,)
    tol = 1e-9 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(first.to_numpy(), want, rtol=tol, atol=tol)
    again = FastTensorBackend.scatter_add(grads, ordinals.reshape(count, 1), (targets,))
    np.testing.assert_array_equal(again.to_numpy(), first.to_numpy())  # the same bits


def test_a_large_gather_backward_through_the_tensor_api() -> None:
    """x[idx] with 40000 picks among 10 rows: the gradient of each row is its count."""
    rng = np.random.default_rng(7)
    x = Tensor(TensorData(rng.normal(size=30), (10, 3)), backend=FastTensorBackend)
    x.requires_grad_()
    idx = rng.integers(0, 10, 40_000)
    x[idx].sum().backward()
    assert x.grad is not None
    counts = np.bincount(idx, minlength=10).astype(float)
    np.testing.assert_array_equal(x.grad.to_numpy(), np.repeat(counts[:, None], 3, 1))
