"""float32 on the CUDA backend (on the simulator without a GPU): map, zip, reduce and
the tiled matmul run on float32 device storage, keep the dtype and agree with float64
to float32 precision; gradients too. Tiny sizes: every simulated thread is a Python
thread."""

from __future__ import annotations

import pytest

from module3.cuda_ops import CudaTensorBackend
from tests.module1.test_tensor_dtype import (
    BINARY,
    UNARY,
    agree_in_float32,
    gradients_agree_in_float32,
)
from tests.module3.device import uninitialised_memory_is_nan

__all__ = ["uninitialised_memory_is_nan"]  # an autouse fixture: every test here uses it

B = CudaTensorBackend


@pytest.mark.task3_1
def test_maps_and_zips_run_in_float32() -> None:
    for name in ("neg", "sigmoid", "exp", "log", "inv", "permute"):
        agree_in_float32(name, UNARY[name], [(3, 4)], B)
    for name in ("add", "mul", "lt", "broadcast add"):
        agree_in_float32(name, BINARY[name], [(3, 4), (3, 4)], B)


@pytest.mark.task3_2
def test_reductions_run_in_float32() -> None:
    for name in ("sum", "sum all", "max"):
        agree_in_float32(name, UNARY[name], [(3, 4)], B)


@pytest.mark.task3_3
def test_matmul_runs_in_float32() -> None:
    agree_in_float32("matmul", lambda x, y: x @ y, [(2, 5, 6), (6, 3)], B)


@pytest.mark.task3_1
@pytest.mark.task3_2
@pytest.mark.task3_3
def test_gradients_in_float32_on_the_cuda_backend() -> None:
    gradients_agree_in_float32(B)
