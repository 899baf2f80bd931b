"""Shared test helpers for tensors: entry values, broadcasting shape pairs, and random
strided layouts built and read with NumPy alone (so the oracle never runs the code under
test).

A *layout* is ``(order, step)``: the values are stored permuted by ``order`` (so the
tensor is non-contiguous unless ``order`` is the identity) with ``step - 1`` unused slots,
filled with nan, between neighbours in storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

from module1.tensor import Tensor
from module1.tensor_data import TensorData
from module1.tensor_ops import SimpleBackend, TensorBackend
from tests.strict import exact_tensor

Shape = tuple[int, ...]
Layout = tuple[tuple[int, ...], int]
Array = np.ndarray

RTOL = 1e-9
ATOL = 1e-12
"""How close a backend's values must be to the oracle's: kernels may reassociate a sum
(a fold split into parts, a tree), so not bit for bit."""

floats = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False)
# Repeated values make ties for ==, <, max and is_close.
values = st.one_of(st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0]), floats)
positive = st.floats(min_value=0.1, max_value=10.0)
nonzero = st.one_of(st.floats(min_value=0.25, max_value=10.0), st.floats(-10.0, -0.25))


def sigmoid(x: Array) -> Array:
    return 1.0 / (1.0 + np.exp(-x))


UNARY_OPS = [
    pytest.param(lambda t: -t, np.negative, lambda x: -np.ones_like(x), values, id="neg"),
    pytest.param(Tensor.exp, np.exp, np.exp, values, id="exp"),
    pytest.param(Tensor.log, np.log, lambda x: 1.0 / x, positive, id="log"),
    pytest.param(Tensor.sigmoid, sigmoid, lambda x: sigmoid(x) * (1.0 - sigmoid(x)), values,
                 id="sigmoid"),
    pytest.param(Tensor.relu, lambda x: np.where(x > 0.0, x, 0.0), lambda x: (x > 0.0) * 1.0,
                 values, id="relu"),
    pytest.param(Tensor.tanh, np.tanh, lambda x: 1.0 - np.tanh(x) ** 2, values, id="tanh"),
    pytest.param(lambda t: 1.0 / t, lambda x: 1.0 / x, lambda x: -1.0 / (x * x), nonzero,
                 id="inv"),
    pytest.param(lambda t: t**2.0, np.square, lambda x: 2.0 * x, values, id="pow2"),
    pytest.param(lambda t: t**0.5, np.sqrt, lambda x: 0.5 / np.sqrt(x), positive, id="sqrt"),
    pytest.param(lambda t: 2.0 - t * 3.0, lambda x: 2.0 - x * 3.0, lambda x: np.full_like(x, -3.0),
                 values, id="numbers"),
]  # fmt: skip
"""Every stage-1 unary operation, as (operation, NumPy forward, NumPy derivative, entry
values; relu's derivative at 0 is 0): each backend's tests run them all."""


def broadcast_pairs(
    min_dims: int = 0, max_dims: int = 4, min_size: int = 1, max_size: int = 4
) -> st.SearchStrategy[tuple[Shape, Shape]]:
    """Two shapes that broadcast: one list of sizes, then each side replaces some sizes
    with 1 and drops some leading dimensions (so either side, or neither, is smaller)."""
    dims = st.lists(
        st.tuples(st.integers(min_size, max_size), st.booleans(), st.booleans()),
        min_size=min_dims,
        max_size=max_dims,
    )
    return dims.flatmap(
        lambda ds: st.tuples(st.integers(0, len(ds)), st.integers(0, len(ds))).map(
            lambda cut: (
                tuple(1 if one_a else n for n, one_a, _ in ds)[cut[0] :],
                tuple(1 if one_b else n for n, _, one_b in ds)[cut[1] :],
            )
        )
    )


def layouts(ndim: int) -> st.SearchStrategy[Layout]:
    """A random permutation of ``ndim`` dimensions and a step of 1 or 2."""
    return st.tuples(st.permutations(range(ndim)).map(tuple), st.sampled_from([1, 2]))


def read(storage: np.ndarray, shape: Shape, strides: Sequence[int]) -> np.ndarray:
    """A copy of the values ``storage`` holds under ``shape`` and ``strides``."""
    view = np.lib.stride_tricks.as_strided(storage, shape, tuple(s * 8 for s in strides))
    return np.array(view, dtype=np.float64)


def strided(values: np.ndarray, layout: Layout) -> tuple[np.ndarray, Shape]:
    """A storage holding ``values`` in ``layout`` (gaps hold nan) and its strides."""
    order, step = layout
    base = np.ascontiguousarray(np.transpose(values, order))
    storage = np.full(max(base.size * step, 1), np.nan)
    storage[::step] = base.reshape(-1)
    base_strides = [s // 8 * step for s in base.strides]
    strides = tuple(base_strides[int(k)] for k in np.argsort(order))
    np.testing.assert_array_equal(read(storage, values.shape, strides), values)
    return storage, strides


def gaps(storage: np.ndarray, shape: Shape, strides: Sequence[int]) -> np.ndarray:
    """The slots of ``storage`` that the layout does not use."""
    used = np.zeros(storage.size, dtype=bool)
    for index in np.ndindex(*shape):
        used[sum(i * s for i, s in zip(index, strides, strict=True))] = True
    return storage[~used]


def ints(t: Sequence[int]) -> np.ndarray:
    """Sizes or strides as the int32 array the kernels take."""
    return np.array(t, dtype=np.int32)


def make(
    values: np.ndarray,
    layout: Layout,
    backend: TensorBackend = SimpleBackend,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor holding ``values`` in ``layout`` on ``backend``."""
    storage, strides = strided(values, layout)
    return Tensor(
        TensorData(storage, values.shape, strides), backend=backend, requires_grad=requires_grad
    )


def check(got: Any, expected: Array | float, what: str = "result") -> Array:
    """``got`` is a Tensor of ``expected``'s shape with (nearly) its values."""
    array = exact_tensor(got, what)
    expected = np.asarray(expected, dtype=np.float64)
    assert array.shape == expected.shape, f"{what}: shape {array.shape}, want {expected.shape}"
    atol = ATOL * max(1.0, float(np.max(np.abs(expected), initial=0.0))) * max(expected.size, 1)
    np.testing.assert_allclose(array, expected, rtol=RTOL, atol=atol, err_msg=what)
    return array


def assert_close(got: Array, want: Array, what: str = "result") -> None:
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * 10.0 * max(want.size, 1),
                               err_msg=what)  # fmt: skip
