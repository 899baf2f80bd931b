"""float32 tensors: the constructors and ``to`` keep or take a dtype (provided code),
every operation of tasks 1.3 and 1.4 runs in float32 and agrees with float64 to float32
precision, results keep their inputs' dtype, and two dtypes in one operation are an
error naming both.

The oracle is the same computation in float64 (itself checked against NumPy by the
other tests) and NumPy in float32; every result is read with ``exact_tensor``, which
also checks the storage's dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from module1.tensor import Tensor, from_numpy, ones, rand, tensor, zeros
from module1.tensor_data import TensorData, as_dtype, float32, float64
from module1.tensor_functions import DtypeError
from module1.tensor_ops import SimpleBackend, TensorBackend
from tests.strict import exact_tensor

RTOL, ATOL = 2e-5, 1e-6
"""float32 has 24 bits of mantissa (about 6e-8 relative); a few operations in a row
stay well within 2e-5."""


def pair(
    seed: int,
    shape: tuple[int, ...],
    low: float = -3.0,
    high: float = 3.0,
    backend: TensorBackend = SimpleBackend,
) -> tuple[Tensor, Tensor]:
    """The same values as a float64 and a float32 tensor (float32-exact, so both start
    equal)."""
    values = np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)
    return from_numpy(values.astype(np.float64), backend), from_numpy(values, backend)


def agree_in_float32(
    name: str,
    fn: Callable[..., Tensor],
    shapes: list[tuple[int, ...]],
    backend: TensorBackend,
    atol: float = ATOL,
) -> None:
    """``fn`` on float32 inputs gives a float32 result equal, to float32 precision, to
    ``fn`` on the same values in float64 (``atol`` for long sums that cancel)."""
    pairs = [pair(seed, shape, backend=backend) for seed, shape in enumerate(shapes, 1)]
    got = exact_tensor(fn(*(p[1] for p in pairs)), f"{name} of float32", dtype=np.float32)
    want = exact_tensor(fn(*(p[0] for p in pairs)), f"{name} of float64")
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=atol, err_msg=name)


def gradients_agree_in_float32(backend: TensorBackend) -> None:
    """The gradients of :func:`loss` in float32 equal those in float64, to float32
    precision."""
    x64, x32 = pair(7, (3, 4), -1.0, 1.0, backend)
    y64, y32 = pair(8, (4, 4), -1.0, 1.0, backend)
    for t in (x64, x32, y64, y32):
        t.requires_grad_()
    loss(x64, y64).backward()
    loss(x32, y32).backward()
    for t32, t64, name in ((x32, x64, "x"), (y32, y64, "y")):
        got = exact_tensor(t32.grad, f"{name}.grad of float32", dtype=np.float32)
        np.testing.assert_allclose(got, exact_tensor(t64.grad), rtol=1e-4, atol=1e-5)


# -- provided: constructors and conversions ----------------------------------------------


def test_constructors_take_a_dtype_and_default_to_float64() -> None:
    assert tensor([1, 2]).dtype == float64
    assert tensor([1, 2], dtype=float32).dtype == float32
    assert tensor(2.5, dtype="float32").dtype == float32
    for make in (zeros, ones, rand):
        assert make(2, 3).dtype == float64
        made = make(2, 3, dtype=np.float32)
        assert made.dtype == float32
        exact_tensor(made, dtype=np.float32)
    np.testing.assert_array_equal(exact_tensor(ones(2, dtype=float32), dtype=float32), [1, 1])
    np.testing.assert_allclose(
        exact_tensor(rand(50, seed=3, dtype=float32), dtype=float32),
        exact_tensor(rand(50, seed=3)),
        rtol=1e-7,
    )


def test_float32_rand_stays_below_one() -> None:
    values = exact_tensor(rand(200_000, seed=11, dtype=float32), dtype=float32)
    assert values.max() < 1.0 and values.min() >= 0.0


def test_from_numpy_keeps_float32_and_float64_and_converts_the_rest() -> None:
    assert from_numpy(np.zeros(3, np.float32)).dtype == float32
    assert from_numpy(np.zeros(3, np.float64)).dtype == float64
    assert from_numpy(np.arange(3)).dtype == float64
    assert from_numpy(np.zeros(3, np.float16)).dtype == float64
    assert from_numpy(np.zeros(3, np.float32), dtype=float64).dtype == float64
    storage = np.arange(6, dtype=np.float32)
    assert TensorData(storage, (2, 3))._storage is storage  # kept, not copied


def test_an_unsupported_dtype_is_refused_by_name() -> None:
    for bad in ("int32", np.int8, "complex128"):
        with pytest.raises(TypeError, match="float64, float32"):
            as_dtype(bad)
        with pytest.raises(TypeError, match="float64, float32"):
            zeros(2, dtype=bad)
    with pytest.raises(TypeError, match="float64, float32"):
        tensor([1.0], dtype="int64")


def test_repr_names_float32() -> None:
    assert "dtype=float32" in repr(tensor([1.0], dtype=float32))
    assert "dtype" not in repr(tensor([1.0]))


# -- task 1.3: forward in float32 ---------------------------------------------------------


UNARY: dict[str, Callable[[Tensor], Tensor]] = {
    "neg": lambda x: -x,
    "sigmoid": lambda x: x.sigmoid(),
    "relu": lambda x: x.relu(),
    "tanh": lambda x: x.tanh(),
    "exp": lambda x: x.exp(),
    "log": lambda x: (x * x + 0.5).log(),
    "inv": lambda x: 1.0 / (x * x + 0.5),
    "pow": lambda x: x**3,
    "sum": lambda x: x.sum(1),
    "sum all": lambda x: x.sum(),
    "mean": lambda x: x.mean(0),
    "max": lambda x: x.max(1),
    "permute": lambda x: x.permute(1, 0).contiguous(),
    "view": lambda x: x.contiguous().view(12),
}

BINARY: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / (y * y + 0.5),
    "lt": lambda x, y: x < y,
    "eq": lambda x, y: x == x + 0.0 * y,
    "broadcast add": lambda x, y: x + y.sum(0),
    "matmul": lambda x, y: x @ y.permute(1, 0),
}


@pytest.mark.task1_3
@pytest.mark.parametrize("name", UNARY)
def test_unary_operations_run_in_float32(name: str) -> None:
    agree_in_float32(name, UNARY[name], [(3, 4)], SimpleBackend)


@pytest.mark.task1_3
@pytest.mark.parametrize("name", BINARY)
def test_binary_operations_run_in_float32(name: str) -> None:
    agree_in_float32(name, BINARY[name], [(3, 4), (3, 4)], SimpleBackend)


@pytest.mark.task1_3
def test_numbers_do_not_change_a_tensors_dtype() -> None:
    _, x32 = pair(4, (5,))
    for result in (x32 + 1, 2.0 * x32, x32 / 3, 1 - x32, x32 < 0.5, x32**2):
        exact_tensor(result, dtype=np.float32)


@pytest.mark.task1_3
def test_to_converts_both_ways_and_keeps_values() -> None:
    x64, x32 = pair(5, (2, 3))
    up = exact_tensor(x32.double(), dtype=np.float64)
    np.testing.assert_array_equal(up, exact_tensor(x64))
    down = exact_tensor(x64.permute(1, 0).float(), dtype=np.float32)
    np.testing.assert_array_equal(down, exact_tensor(x64).T.astype(np.float32))
    assert x32.to(float32) is x32 and x32.to("float64").dtype == float64


@pytest.mark.task1_3
def test_two_dtypes_in_one_operation_are_an_error_naming_both() -> None:
    x64, x32 = pair(6, (2, 2))
    for combine in (lambda: x64 + x32, lambda: x32 * x64, lambda: x64 @ x32):
        with pytest.raises(DtypeError, match=r"float64.*float32|float32.*float64"):
            combine()
    exact_tensor(x64 + x32.double())


# -- task 1.4: backward in float32 --------------------------------------------------------


def loss(x: Tensor, y: Tensor) -> Tensor:
    """Every kind of backward: maps, zips with broadcasting, reductions, views, matmul."""
    h = (x @ y).sigmoid() * x.sum(1).view(3, 1) + (x * x + 1.0).log().sum(0).view(1, 4)
    return (h.relu() + h.exp() / (h * h + 1.0) - h.max(1).view(3, 1)).sum()


@pytest.mark.task1_4
def test_gradients_in_float32_match_float64() -> None:
    gradients_agree_in_float32(SimpleBackend)


@pytest.mark.task1_4
def test_gradients_flow_through_to_in_the_inputs_dtype() -> None:
    x64, _ = pair(9, (2, 3))
    x64.requires_grad_()
    y = x64.float()
    (y * y * 3.0).sum().backward()
    grad = exact_tensor(x64.grad, "x.grad", dtype=np.float64)
    np.testing.assert_allclose(grad, 6.0 * exact_tensor(x64), rtol=1e-6)
