"""Gather and scatter-add on the CUDA backend: advanced indexing's kernels.

Given code (task 1.6 wrote the plain versions). A thread per entry either way. The
gather's threads each write their own output; the scatter-add's threads may meet at one
destination (an index picked twice), so each adds with ``cuda.atomic.add``, which the
hardware serialises per address: no update is lost. (Sums of floats added in another
order differ in the last bits, so the result may vary between runs by rounding, as
PyTorch's ``index_add_`` on a GPU does.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numba import cuda, int32

from module1.tensor_data import TensorData
from module3.cuda_ops import (
    MAX_DIMS,
    _blocks,
    _layout,
    _threads,
    index_to_position,
    require_cuda,
    to_device,
    to_index,
)

if TYPE_CHECKING:
    from module1.tensor import Tensor


@cuda.jit
def gather_kernel(
    out: Any, a_storage: Any, a_shape: Any, a_strides: Any, ordinals: Any, n: int
) -> None:
    """Thread ``j`` writes ``out[j]``, the entry of ``a`` numbered ``ordinals[j]``."""
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    index = cuda.local.array(MAX_DIMS, int32)[: len(a_shape)]
    if j < n:
        to_index(ordinals[j], a_shape, index)
        out[j] = a_storage[index_to_position(index, a_strides)]


@cuda.jit
def scatter_add_kernel(
    out: Any, d_storage: Any, d_shape: Any, d_strides: Any, ordinals: Any, n: int
) -> None:
    """Thread ``j`` adds entry ``j`` of ``d`` into ``out[ordinals[j]]``, atomically."""
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    index = cuda.local.array(MAX_DIMS, int32)[: len(d_shape)]
    if j < n:
        to_index(j, d_shape, index)
        cuda.atomic.add(out, ordinals[j], d_storage[index_to_position(index, d_strides)])


def gather(a: Tensor, ordinals: np.ndarray) -> Tensor:
    """CudaOps.gather: a new device tensor of ``ordinals.shape``."""
    require_cuda()
    flat = np.ascontiguousarray(ordinals.reshape(-1))
    out = cuda.device_array(max(1, len(flat)), dtype=a.dtype)[: len(flat)]
    if len(flat):
        threads = _threads(len(flat))
        data = a._tensor
        gather_kernel[_blocks(len(flat), threads), threads](
            out, to_device(data._storage), *_layout(data), cuda.to_device(flat), len(flat)
        )
    return a._new(TensorData(out, ordinals.shape))


def scatter_add(d: Tensor, ordinals: np.ndarray, shape: tuple[int, ...]) -> Tensor:
    """CudaOps.scatter_add: zeros of ``shape`` on the device, ``d`` added at the
    ordinals."""
    require_cuda()
    flat = np.ascontiguousarray(ordinals.reshape(-1))
    size = int(np.prod(shape))
    out = cuda.to_device(np.zeros(max(1, size), d.dtype))[:size]
    if len(flat):
        threads = _threads(len(flat))
        data = d._tensor
        scatter_add_kernel[_blocks(len(flat), threads), threads](
            out, to_device(data._storage), *_layout(data), cuda.to_device(flat), len(flat)
        )
    return d._new(TensorData(out, shape))
