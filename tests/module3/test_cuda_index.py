"""Gather and scatter-add on the CUDA backend (``module3/cuda_index.py``, given code)
against NumPy, on the simulator where no GPU is present: repeated destinations (the
atomic adds must lose nothing), more threads than entries (a partly used block), an
empty index, both dtypes, and advanced indexing through the Tensor API."""

from __future__ import annotations

import numpy as np
import pytest

from module1.tensor import Tensor, from_numpy
from module1.tensor_data import TensorData
from module3.cuda_ops import CudaTensorBackend
from tests.module3.device import uninitialised_memory_is_nan  # noqa: F401


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("count", [0, 5, 300])
def test_gather_and_scatter_add_match_numpy(dtype: type, count: int) -> None:
    rng = np.random.default_rng(count)
    values = rng.normal(size=(4, 3)).astype(dtype)
    base = np.ascontiguousarray(values.T)  # stored column by column: not contiguous
    tensor = Tensor(TensorData(base.reshape(-1), (4, 3), (1, 4)), backend=CudaTensorBackend)
    ordinals = rng.integers(0, 12, count).astype(np.int64)
    got = CudaTensorBackend.gather(tensor, ordinals)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.to_numpy(), values.reshape(-1)[ordinals])
    d = from_numpy(rng.normal(size=count).astype(dtype), CudaTensorBackend)
    summed = CudaTensorBackend.scatter_add(d, ordinals, (4, 3))
    want = np.zeros(12)
    np.add.at(want, ordinals, d.to_numpy().astype(np.float64))
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(summed.to_numpy().reshape(-1), want, rtol=tol, atol=tol)


def test_indexing_and_its_gradient_on_the_device() -> None:
    x = from_numpy(np.arange(12.0).reshape(3, 4), CudaTensorBackend).requires_grad_()
    picked = x[[2, 0, 2], 1:3]
    assert picked.tolist() == [[9.0, 10.0], [1.0, 2.0], [9.0, 10.0]]
    picked.sum().backward()
    assert x.grad is not None
    assert x.grad.tolist() == [[0, 1, 1, 0], [0, 0, 0, 0], [0, 2, 2, 0]]
