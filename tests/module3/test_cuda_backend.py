"""The CUDA backend's given code: where it runs, what it refuses, and how it says so.

Not graded (no task marker): none of these runs a kernel that a task fills in, so they
pass on the handout too. They check that the test suite switched Numba's CUDA simulator
on where no GPU is present, that the backend explains what is missing when Numba finds
neither a GPU nor the simulator (in Python, and from the training script's command line,
which exits with status 2 and no traceback), that tensors of different backends do not
mix, that shapes the kernels cannot take are refused before any launch, and that the
results of operations stay on the device.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numba import cuda

from autograder.pytest_plugin import gpu_present
from module0.errors import MiniTorchError
from module0.module import Parameter
from module1.tensor import Tensor, from_numpy, zeros
from module1.tensor_data import ShapeError, is_device_array
from module1.tensor_functions import BackendError
from module1.tensor_ops import SimpleBackend
from module2.fast_ops import FastTensorBackend
from module3 import cuda_ops
from module3.cuda_ops import (
    MAX_BATCHES,
    MAX_DIMS,
    CudaTensorBackend,
    CudaUnavailableError,
    block_sums,
    require_cuda,
)
from module3.cuda_optim import CudaAdam, CudaSGD

ROOT = Path(__file__).resolve().parents[2]


def gpu(values: Any) -> Tensor:
    return from_numpy(np.asarray(values, dtype=np.float64), backend=CudaTensorBackend)


def test_the_suite_runs_on_the_simulator_without_a_gpu() -> None:
    """``autograder/pytest_plugin`` sets ``NUMBA_ENABLE_CUDASIM=1`` before Numba is
    imported where the driver reports no GPU; Numba then runs kernels on its simulator."""
    if gpu_present():
        pytest.skip("a GPU is present: the kernels run on it")
    assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    assert cuda.is_available()
    assert type(cuda.device_array(1)).__module__.startswith("numba.cuda.simulator")


def test_without_gpu_or_simulator_the_backend_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = gpu([1.0, 2.0])
    p = Parameter(gpu([1.0, 2.0]))
    p.value.grad = gpu([1.0, 1.0])
    require_cuda.cache_clear()  # it remembers a success
    try:
        with monkeypatch.context() as patch:
            patch.setattr(cuda_ops.cuda, "is_available", lambda: False)
            with pytest.raises(CudaUnavailableError) as caught:
                require_cuda()
            message = str(caught.value)
            assert "NUMBA_ENABLE_CUDASIM=1" in message
            assert "pip install -e '.[cuda]'" in message and "numba-cuda" in message
            assert "--backend fast" in message
            assert isinstance(caught.value, MiniTorchError | RuntimeError)
            calls: list[Callable[[], Any]] = [
                lambda: x.exp(),
                lambda: x + x,
                lambda: x.sum(0),
                lambda: x.view(1, 2) @ x.view(2, 1),
                lambda: block_sums(np.ones(3)),
                lambda: CudaAdam([p]).step(),
                lambda: CudaSGD([p]).step(),
            ]
            for call in calls:
                with pytest.raises(CudaUnavailableError, match="NUMBA_ENABLE_CUDASIM"):
                    call()
    finally:
        require_cuda.cache_clear()
    require_cuda()  # available again


def test_the_training_script_without_gpu_or_simulator_exits_2(tmp_path: Path) -> None:
    if gpu_present():
        pytest.skip("a GPU is present: the CUDA backend is available without the simulator")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "MPLBACKEND": "Agg", "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "project.train", "--backend", "cuda", "--epochs", "1",
         "--no-figure", "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    stderr = " ".join(proc.stderr.split())
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert stderr.startswith("error: the CUDA backend needs an NVIDIA GPU"), stderr
    assert "NUMBA_ENABLE_CUDASIM=1" in stderr and "'.[cuda]'" in stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not any(tmp_path.iterdir()), "nothing is written"


@pytest.mark.parametrize("other", [FastTensorBackend, SimpleBackend], ids=lambda b: b.name)
def test_cuda_tensors_do_not_mix_with_other_backends(other: Any) -> None:
    a = gpu([[1.0, 2.0], [3.0, 4.0]])
    b = from_numpy(np.ones((2, 2)), backend=other)
    for op, name in [
        (lambda: a + b, "Add"),
        (lambda: b * a, "Mul"),
        (lambda: a < b, "LT"),
        (lambda: a @ b, "MatMul"),
        (lambda: b @ a, "MatMul"),
    ]:
        with pytest.raises(BackendError) as caught:
            op()
        message = str(caught.value)
        assert message.startswith(f"{name}: input 0 is on ")
        assert "TensorBackend(CudaOps)" in message and f"TensorBackend({other.name})" in message
        assert isinstance(caught.value, MiniTorchError | TypeError)


def test_more_dimensions_than_the_kernels_take_are_refused() -> None:
    too_many = (1,) * (MAX_DIMS + 1)
    x = gpu(np.ones(too_many))
    message = f"at most {MAX_DIMS} dimensions"
    for op in (
        lambda: x.exp(),
        lambda: x + x,
        lambda: CudaTensorBackend.add_reduce(x, 0),
        lambda: x @ x,
    ):
        with pytest.raises(ShapeError, match=message):
            op()


def test_more_batches_than_one_launch_takes_are_refused() -> None:
    a = gpu(np.ones((MAX_BATCHES + 1, 1, 1)))
    with pytest.raises(ShapeError, match=f"launches at most {MAX_BATCHES}"):
        a @ gpu([[1.0]])


def test_empty_tensors_need_no_kernel() -> None:
    """Empty results, reductions of an empty dimension (the start value) and products
    over an empty inner dimension (zeros) are made without a launch."""
    e = zeros(2, 0, backend=CudaTensorBackend)
    assert e.exp().shape == (2, 0)
    assert (e + e).shape == (2, 0)
    np.testing.assert_array_equal(CudaTensorBackend.add_reduce(e, 1).to_numpy(), [[0.0], [0.0]])
    np.testing.assert_array_equal(CudaTensorBackend.mul_reduce(e, 1).to_numpy(), [[1.0], [1.0]])
    assert CudaTensorBackend.max_reduce(e, 1).to_numpy().tolist() == [[-np.inf], [-np.inf]]
    product = e @ zeros(0, 3, backend=CudaTensorBackend)
    np.testing.assert_array_equal(product.to_numpy(), np.zeros((2, 3)))


def test_results_stay_on_the_device() -> None:
    """Every kind of operation returns a tensor whose storage is a device array, even
    from inputs on the host; ``to_numpy`` copies back."""
    x = gpu([[1.0, -2.0], [3.0, 0.5]])
    assert type(x._tensor._storage) is np.ndarray
    for result in (x.exp(), x * x, x.sum(0), x @ x):
        storage = result._tensor._storage
        assert is_device_array(storage) and not isinstance(storage, np.ndarray)
        assert type(storage).__module__.startswith("numba.cuda")
        assert type(result.to_numpy()) is np.ndarray
