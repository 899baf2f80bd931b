"""The reference's fast path for ``Linear`` (``module4/fast_linear.py``): reference-only,
like that file (a handout leaves both out; see ``autograder/release.py``).

Oracle: NumPy's ``x @ w + b`` and its gradients (``d @ w.T``, ``x.T @ d``, ``d.sum(0)``),
in float64 arithmetic, for shapes on each side of where the path starts
(``PACKED_MIN_SIDE``, ``PACKED_MIN_MULTIPLY_ADDS``), of gemm's serial threshold
(``SERIAL_MAX``) and of :func:`fill_rows`'s block of rows, with tile edges (widths
that are no multiple of a vector) and a transposed input, in both dtypes.
"""

from __future__ import annotations

import numpy as np
import pytest

from module1 import tensor_functions
from module1.tensor import Tensor, from_numpy
from module1.tensor_ops import SimpleBackend
from module2.fast_matmul import SERIAL_MAX
from module2.fast_ops import PACKED_MIN_MULTIPLY_ADDS, PACKED_MIN_SIDE, FastTensorBackend
from module4 import fast_linear
from module4.fast_linear import ROWS_PER_TASK, LinearBias
from module4.layers import Linear

TOL = {"float64": 1e-10, "float32": 2e-4}
SIDE = PACKED_MIN_SIDE
SHAPES = [
    (SIDE, SIDE, PACKED_MIN_MULTIPLY_ADDS // SIDE**2),  # the smallest product it takes
    (ROWS_PER_TASK - 1, 33, 47),
    (ROWS_PER_TASK + 1, 40, 31),
    (2 * ROWS_PER_TASK + 1, 17, 100),
    (64, 128, SERIAL_MAX // (64 * 128) - 1),  # gemm on one thread
    (64, 128, SERIAL_MAX // (64 * 128) + 1),  # gemm in parallel
    (300, 130, 70),
]


def _layer(k: int, m: int, dtype: str, seed: int) -> tuple[Linear, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    layer = Linear(k, m, rng=rng)
    w, b = rng.normal(size=(k, m)), rng.normal(size=m)
    layer.weight.update(from_numpy(w.astype(dtype), FastTensorBackend))
    layer.bias.update(from_numpy(b.astype(dtype), FastTensorBackend))
    return layer, w.astype(dtype).astype(np.float64), b.astype(dtype).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("n", "k", "m"), SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_the_layer_and_its_gradients_are_numpys(
    dtype: str, n: int, k: int, m: int, transposed: bool
) -> None:
    layer, w, b = _layer(k, m, dtype, n + k + m)
    rng = np.random.default_rng(n)
    xs = rng.normal(size=(n, k)).astype(dtype)
    x = from_numpy(np.ascontiguousarray(xs.T) if transposed else xs, FastTensorBackend)
    x.requires_grad = True
    leaf = x
    if transposed:  # a (n, k) view of a (k, n) storage: strides (1, n)
        x = x.permute(1, 0)
    y = layer(x)
    assert y.history is not None and y.history.last_fn is LinearBias
    d = rng.normal(size=(n, m)).astype(dtype)
    (y * from_numpy(d, FastTensorBackend)).sum().backward()
    x64, d64 = xs.astype(np.float64), d.astype(np.float64)
    tol = TOL[dtype]
    assert y.dtype == np.dtype(dtype) and y.shape == (n, m)
    np.testing.assert_allclose(y.to_numpy(), x64 @ w + b, rtol=tol, atol=tol)
    assert leaf.grad is not None
    dx = leaf.grad.to_numpy()
    np.testing.assert_allclose(dx.T if transposed else dx, d64 @ w.T, rtol=tol, atol=tol)
    dw, db = layer.weight.value.grad.to_numpy(), layer.bias.value.grad.to_numpy()
    np.testing.assert_allclose(dw, x64.T @ d64, rtol=tol, atol=tol * n)
    np.testing.assert_allclose(db, d64.sum(0), rtol=tol, atol=tol * n)


def test_a_constant_input_gets_no_gradient() -> None:
    layer, _, _ = _layer(32, 48, "float64", 0)
    x = from_numpy(np.ones((64, 32)), FastTensorBackend)
    y = layer(x)
    y.sum().backward()
    assert x.grad is None
    np.testing.assert_allclose(layer.weight.value.grad.to_numpy(), np.full((32, 48), 64.0))


def _taken(x: Tensor, layer: Linear) -> bool:
    y = layer(x)
    return y.history is not None and y.history.last_fn is LinearBias


def test_it_steps_aside_where_the_task_code_must_run() -> None:
    """Below its sizes, another backend, a routing rule (stage 6's autocast installs
    one), a broadcast input."""
    layer, _, _ = _layer(SIDE, 64, "float32", 1)
    rows = np.random.default_rng(0).normal(size=(64, SIDE)).astype(np.float32)
    x = from_numpy(rows, FastTensorBackend)
    x.requires_grad = True
    assert _taken(x, layer)
    assert not _taken(from_numpy(rows[:, : SIDE - 1], FastTensorBackend),
                      _layer(SIDE - 1, 64, "float32", 1)[0])  # fmt: skip
    assert not _taken(from_numpy(rows[: SIDE - 1], FastTensorBackend), layer)
    with pytest.MonkeyPatch.context() as routed:
        routed.setattr(tensor_functions, "dispatch", lambda cls, vals: None)
        assert not _taken(x, layer)
    wide = from_numpy(rows[:1], FastTensorBackend).expand(64, SIDE)
    assert not _taken(wide, layer)
    assert fast_linear.linear(
        from_numpy(rows.astype(np.float64), SimpleBackend),
        from_numpy(np.ones((SIDE, 64)), SimpleBackend),
        from_numpy(np.ones(64), SimpleBackend),
    ) is None  # fmt: skip
