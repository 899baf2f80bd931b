"""The reference's fused softmax and LayerNorm on the CUDA backend
(``module5/fused_cuda.py``): reference-only, like that file (see
``autograder/release.py``).

On Numba's CUDA simulator where no GPU is present (every CUDA thread a Python thread:
few, small rows), on the GPU where one is. Oracles: NumPy in float64 for the values
and the gradients' formulas. Rows of 1 entry, of fewer and more entries than a block's
128 threads, causal and unmasked, both dtypes; the kernels' blocks combine their partial
sums through shared memory behind barriers (``tests/module3/device.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from module1.tensor import Tensor, from_numpy
from module1.tensor_ops import SimpleBackend
from module3.cuda_ops import to_cuda
from module5 import functional, fused_cuda, fused_route

DTYPES = [np.float64, np.float32]
TOL = {np.float64: 1e-12, np.float32: 2e-6}


def on_gpu(values: np.ndarray) -> Tensor:
    return to_cuda(from_numpy(values, SimpleBackend)).requires_grad_()


def fused_run(fn, arrays: list[np.ndarray], g: np.ndarray) -> list[np.ndarray]:
    """Value and gradients of ``sum(fn(...) * g)`` on the CUDA backend, asserting that the
    reference's CUDA kernels made the value."""
    inputs = [on_gpu(a) for a in arrays]
    y = fn(*inputs)
    made = y.history.last_fn.__name__ if y.history else ""
    assert made.startswith("Cuda"), f"the CUDA kernels were not used: {made}"
    (y * to_cuda(from_numpy(g, SimpleBackend))).sum().backward()
    return [y.to_numpy()] + [i.grad.to_numpy() for i in inputs]


def np_softmax(x: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    x = x.astype(np.float64)
    filled = x if keep is None else np.where(keep, x, -np.inf)
    e = np.exp(filled - filled.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def close(got: np.ndarray, want: np.ndarray, dtype: type, what: str, scale: float = 1.0) -> None:
    assert got.dtype == dtype, what
    np.testing.assert_allclose(got, want, rtol=TOL[dtype] * 10 * scale,
                               atol=TOL[dtype] * 10 * scale, err_msg=what)  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_cuda_softmax_matches_numpy(dtype: type) -> None:
    """Rows of 1 and 5 entries, 127 (one block of 128 threads, one idle) and 129 (a
    thread takes two entries), causal and unmasked."""
    rng = np.random.default_rng(0)
    for shape, causal in (((3, 1), False), ((2, 5), False), ((1, 127), False),
                          ((1, 129), False), ((1, 3, 5), True), ((1, 2, 130), True)):  # fmt: skip
        x = rng.normal(scale=3.0, size=shape).astype(dtype)
        keep = functional.causal_mask(shape[-2], shape[-1]) if causal else None
        g = rng.normal(size=shape).astype(dtype)
        y, dx = fused_run(lambda a, k=keep: functional.masked_softmax(a, k), [x], g)
        what = f"{np.dtype(dtype).name} {shape} causal {causal}"
        want = np_softmax(x, keep)
        close(y, want, dtype, what)
        if causal:
            assert np.all(y[..., ~keep] == 0), what
        close(dx, want * (g - (want * g).sum(-1, keepdims=True)), dtype, f"{what}: gradient")


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_cuda_layer_norm_matches_numpy(dtype: type) -> None:
    rng = np.random.default_rng(1)
    for shape, mean in (((3, 2), 0.0), ((2, 5), 100.0), ((2, 129), 0.0), ((1, 2, 3), 0.0)):
        x = (mean + rng.normal(size=shape)).astype(dtype)
        w, b = rng.normal(size=shape[-1]).astype(dtype), rng.normal(size=shape[-1]).astype(dtype)
        g = rng.normal(size=shape).astype(dtype)
        y, dx, dw, db = fused_run(lambda a, c, d: functional.layer_norm(a, c, d), [x, w, b], g)
        x64 = x.astype(np.float64)
        c = x64 - x64.mean(-1, keepdims=True)
        rstd = 1 / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5)
        xhat = c * rstd
        gw = g * w
        want_dx = rstd * (gw - gw.mean(-1, keepdims=True)
                          - xhat * (gw * xhat).mean(-1, keepdims=True))  # fmt: skip
        what = f"{np.dtype(dtype).name} {shape} mean {mean}"
        scale = 1.0 if mean == 0 or dtype == np.float64 else 1e3  # float32 x holds 1e-5 of 100
        close(y, xhat * w + b, dtype, what, scale)
        close(dx, want_dx, dtype, f"{what}: dx", scale * 10)
        rows = (g * xhat).reshape(-1, shape[-1])
        close(dw, rows.sum(0), dtype, f"{what}: dweight", scale * 10)
        close(db, g.reshape(-1, shape[-1]).sum(0), dtype, f"{what}: dbias", 10)


def test_the_plain_route_leaves_the_cuda_kernels_alone() -> None:
    x = on_gpu(np.random.default_rng(3).normal(size=(2, 3)))
    with fused_route.plain_route():
        y = functional.masked_softmax(x)
    assert y.history is not None and y.history.last_fn.__name__ != "CudaSoftmax"


def test_the_blocks_reduce_through_shared_memory() -> None:
    from tests.module3.device import shared_memory_log

    x = np.random.default_rng(2).normal(size=(2, 200))
    out = fused_cuda.cuda.device_array(x.size, x.dtype)
    with shared_memory_log() as log:
        fused_cuda.softmax_rows_kernel[2, fused_cuda.THREADS](
            fused_cuda.cuda.to_device(x.reshape(-1)), out, 200, 1, 199
        )
    log.assert_blocks_cooperate(fused_cuda.softmax_rows_kernel, 2, fused_cuda.THREADS)
    np.testing.assert_allclose(out.copy_to_host().reshape(2, 200), np_softmax(x, None), rtol=1e-12)
