"""Task 1.3: the simple backend's kernels and the forward pass of every tensor operation.

NumPy is the oracle. Inputs are laid out in every way a kernel must read: contiguous,
with the dimensions stored in another order (permuted, non-contiguous), with gaps
between the entries (every other storage slot, the gaps holding nan so that a read of
one shows), and broadcast against a smaller shape. The kernels are also called directly
with outputs in those layouts, and the gaps of an output must be left untouched.

Every value read back from a Tensor goes through ``exact_tensor`` (``tests/strict.py``),
which reads the storage with NumPy alone, before it is compared with ``numpy.testing``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from module0.autodiff import no_grad
from module1.tensor import Tensor, tensor
from module1.tensor_data import ShapeError, TensorData
from module1.tensor_ops import (
    SimpleBackend,
    tensor_map,
    tensor_matrix_multiply,
    tensor_reduce,
    tensor_zip,
)
from tests.layouts import (
    broadcast_pairs,
    gaps,
    ints,
    layouts,
    make,
    nonzero,
    positive,
    read,
    strided,
    values,
)
from tests.strict import exact_bool, exact_int, exact_tensor, exact_tuple

pytestmark = pytest.mark.task1_3

"""How a tensor sits in its storage: the order its dimensions are stored in (the first
one outermost) and the step between neighbouring storage slots (2 leaves a gap)."""

# -- strategies -------------------------------------------------------------------------

sizes = st.integers(min_value=1, max_value=4)
shapes = st.lists(sizes, min_size=1, max_size=4).map(tuple)


@st.composite
def arrays(
    draw: st.DrawFn, shape: tuple[int, ...] | None = None, elements: Any = values
) -> np.ndarray:
    if shape is None:
        shape = draw(shapes)
    return draw(hnp.arrays(np.float64, shape, elements=elements))


@st.composite
def tensors(
    draw: st.DrawFn, shape: tuple[int, ...] | None = None, elements: Any = values
) -> tuple[Tensor, np.ndarray]:
    """A tensor in a random layout (maybe requiring grad) and its values."""
    expected = draw(arrays(shape, elements))
    layout = draw(layouts(expected.ndim))
    return make(expected, layout, requires_grad=draw(st.booleans())), expected


def check(got: Any, expected: np.ndarray | float, what: str = "result") -> None:
    """``got`` is a Tensor of ``expected``'s shape with (nearly) its values."""
    array = exact_tensor(got, what)
    expected = np.asarray(expected, dtype=np.float64)
    assert array.shape == expected.shape, f"{what}: shape {array.shape}, want {expected.shape}"
    np.testing.assert_allclose(array, expected, rtol=1e-12, atol=1e-10, err_msg=what)


# -- the kernels, called directly -------------------------------------------------------


@given(broadcast_pairs(), st.data())
def test_tensor_map_reads_and_writes_any_layout(
    pair: tuple[tuple[int, ...], tuple[int, ...]], data: st.DataObject
) -> None:
    in_shape, other = pair
    out_shape = np.broadcast_shapes(in_shape, other)
    a = data.draw(arrays(in_shape))
    a_storage, a_strides = strided(a, data.draw(layouts(a.ndim)))
    out, out_strides = strided(np.zeros(out_shape), data.draw(layouts(len(out_shape))))
    out[:] = np.nan
    tensor_map(lambda x: 3.0 * x - 1.0)(
        out, ints(out_shape), ints(out_strides), a_storage, ints(in_shape), ints(a_strides)
    )
    np.testing.assert_allclose(
        read(out, out_shape, out_strides), np.broadcast_to(3.0 * a - 1.0, out_shape)
    )
    assert np.isnan(gaps(out, out_shape, out_strides)).all(), "map wrote outside the output"


@given(broadcast_pairs(), st.data())
def test_tensor_zip_reads_and_writes_any_layout(
    pair: tuple[tuple[int, ...], tuple[int, ...]], data: st.DataObject
) -> None:
    a_shape, b_shape = pair
    out_shape = np.broadcast_shapes(a_shape, b_shape)
    a, b = data.draw(arrays(a_shape)), data.draw(arrays(b_shape))
    a_storage, a_strides = strided(a, data.draw(layouts(a.ndim)))
    b_storage, b_strides = strided(b, data.draw(layouts(b.ndim)))
    out, out_strides = strided(np.zeros(out_shape), data.draw(layouts(len(out_shape))))
    out[:] = np.nan
    tensor_zip(lambda x, y: x - 2.0 * y)(
        out, ints(out_shape), ints(out_strides),
        a_storage, ints(a_shape), ints(a_strides),
        b_storage, ints(b_shape), ints(b_strides),
    )  # fmt: skip
    np.testing.assert_allclose(read(out, out_shape, out_strides), a - 2.0 * b)
    assert np.isnan(gaps(out, out_shape, out_strides)).all(), "zip wrote outside the output"


REDUCERS = [
    pytest.param(lambda acc, x: acc + x, 0.5, lambda a, d: np.sum(a, d, keepdims=True) + 0.5,
                 id="add"),
    pytest.param(lambda acc, x: acc * x, 1.0, lambda a, d: np.prod(a, d, keepdims=True),
                 id="mul"),
    pytest.param(lambda acc, x: acc if acc >= x else x, -math.inf,
                 lambda a, d: np.max(a, d, keepdims=True), id="max"),
]  # fmt: skip


@pytest.mark.parametrize(("fn", "start", "oracle"), REDUCERS)
@given(arrays(), st.data())
def test_tensor_reduce_folds_each_dim_into_the_start_value(
    fn: Callable[[float, float], float],
    start: float,
    oracle: Callable[[np.ndarray, int], np.ndarray],
    a: np.ndarray,
    data: st.DataObject,
) -> None:
    dim = data.draw(st.integers(0, a.ndim - 1), label="dim")
    out_shape = tuple(1 if d == dim else s for d, s in enumerate(a.shape))
    a_storage, a_strides = strided(a, data.draw(layouts(a.ndim)))
    out, out_strides = strided(np.full(out_shape, start), data.draw(layouts(a.ndim)))
    tensor_reduce(fn)(
        out, ints(out_shape), ints(out_strides), a_storage, ints(a.shape), ints(a_strides), dim
    )
    got = read(out, out_shape, out_strides)
    np.testing.assert_allclose(got, oracle(a, dim), rtol=1e-12, atol=1e-10)
    assert np.isnan(gaps(out, out_shape, out_strides)).all(), "reduce wrote outside the output"


def test_tensor_reduce_folds_in_index_order() -> None:
    # acc * 10 + x writes the digits in the order they were folded.
    digits = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    fold = tensor_reduce(lambda acc, x: acc * 10.0 + x)
    for layout in [((0, 1), 1), ((1, 0), 1), ((1, 0), 2)]:
        storage, strides = strided(digits, layout)
        for dim, want in [(1, [[123.0], [456.0]]), (0, [[14.0, 25.0, 36.0]])]:
            out_shape = (2, 1) if dim == 1 else (1, 3)
            out = np.zeros(int(np.prod(out_shape)))
            fold(out, ints(out_shape), ints((*out_shape[1:], 1)), storage, ints((2, 3)),
                 ints(strides), dim)  # fmt: skip
            np.testing.assert_array_equal(out.reshape(out_shape), want, err_msg=str(layout))


@st.composite
def matmul_operands(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    batch_a, batch_b = draw(broadcast_pairs(min_dims=1, max_dims=2, min_size=2, max_size=3))
    n, m, p = draw(sizes), draw(sizes), draw(sizes)
    return draw(arrays((*batch_a, n, m))), draw(arrays((*batch_b, m, p)))


@given(matmul_operands(), st.data())
def test_tensor_matrix_multiply_broadcasts_batch_dims_in_any_layout(
    operands: tuple[np.ndarray, np.ndarray], data: st.DataObject
) -> None:
    a, b = operands
    expected = np.matmul(a, b)
    a_storage, a_strides = strided(a, data.draw(layouts(a.ndim)))
    b_storage, b_strides = strided(b, data.draw(layouts(b.ndim)))
    out, out_strides = strided(expected * 0.0, data.draw(layouts(expected.ndim)))
    out[:] = np.nan
    tensor_matrix_multiply(
        out, ints(expected.shape), ints(out_strides),
        a_storage, ints(a.shape), ints(a_strides),
        b_storage, ints(b.shape), ints(b_strides),
    )  # fmt: skip
    got = read(out, expected.shape, out_strides)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-10)
    assert np.isnan(gaps(out, expected.shape, out_strides)).all(), "wrote outside the output"


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "out_shape"),
    [((2, 1, 3, 4), (5, 4, 2), (2, 5, 3, 2)), ((3, 4), (2, 1, 4, 5), (2, 1, 3, 5)),
     ((2, 1, 3, 4), (1, 5, 4, 2), (2, 5, 3, 2)), ((3, 2, 1), (1, 1, 4), (3, 2, 4))],
)  # fmt: skip
def test_tensor_matrix_multiply_examples(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...], out_shape: tuple[int, ...]
) -> None:
    a = np.arange(float(np.prod(a_shape))).reshape(a_shape)
    b = np.arange(float(np.prod(b_shape))).reshape(b_shape) - 20.0
    out = np.full(int(np.prod(out_shape)), np.nan)
    tensor_matrix_multiply(
        out, ints(out_shape), ints([s // 8 for s in np.zeros(out_shape).strides]),
        a.reshape(-1), ints(a_shape), ints([s // 8 for s in a.strides]),
        b.reshape(-1), ints(b_shape), ints([s // 8 for s in b.strides]),
    )  # fmt: skip
    np.testing.assert_array_equal(out.reshape(out_shape), np.matmul(a, b))


# -- the simple backend, on tensors ---------------------------------------------------


@given(broadcast_pairs(), st.data())
def test_simple_backend_maps_zips_and_reduces_tensors(
    pair: tuple[tuple[int, ...], tuple[int, ...]], data: st.DataObject
) -> None:
    a, x = data.draw(tensors(pair[0]), label="a")
    b, y = data.draw(tensors(pair[1]), label="b")
    f = SimpleBackend
    check(f.neg_map(a), -x, "neg_map(a)")
    check(f.exp_map(a), np.exp(x), "exp_map(a)")
    check(f.id_map(a), x, "id_map(a)")
    check(f.add_zip(a, b), x + y, "add_zip(a, b)")
    check(f.mul_zip(a, b), x * y, "mul_zip(a, b)")
    check(f.lt_zip(a, b), (x < y) * 1.0, "lt_zip(a, b)")
    big = np.broadcast_shapes(x.shape, y.shape)
    out = Tensor(TensorData(np.zeros(int(np.prod(big))), big))
    check(f.id_map(a, out), np.broadcast_to(x, big), "id_map(a, out)")
    if x.ndim:
        dim = data.draw(st.integers(0, x.ndim - 1), label="dim")
        check(f.add_reduce(a, dim), np.sum(x, dim, keepdims=True), f"add_reduce(a, {dim})")
        check(f.max_reduce(a, dim), np.max(x, dim, keepdims=True), f"max_reduce(a, {dim})")
    check(a, x, "a after the operations")


# -- tensor operations, forward --------------------------------------------------------

UNARY = [
    pytest.param(lambda t: -t, np.negative, values, id="neg"),
    pytest.param(lambda t: t.neg(), np.negative, values, id="neg-method"),
    pytest.param(Tensor.exp, np.exp, values, id="exp"),
    pytest.param(Tensor.log, np.log, positive, id="log"),
    pytest.param(Tensor.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)), values, id="sigmoid"),
    pytest.param(Tensor.relu, lambda x: np.where(x > 0.0, x, 0.0), values, id="relu"),
    pytest.param(Tensor.tanh, np.tanh, values, id="tanh"),
    pytest.param(lambda t: 1.0 / t, lambda x: 1.0 / x, nonzero, id="inv"),
    pytest.param(lambda t: t**2, np.square, values, id="pow2"),
    pytest.param(lambda t: t**3.0, lambda x: x**3.0, values, id="pow3"),
    pytest.param(lambda t: t**0.5, np.sqrt, positive, id="sqrt"),
    pytest.param(lambda t: t ** (-1.5), lambda x: x**-1.5, positive, id="pow-1.5"),
    pytest.param(lambda t: 2.0 - t * 3, lambda x: 2.0 - x * 3.0, values, id="numbers"),
    pytest.param(lambda t: (t + 1) / 4 - 0.5, lambda x: (x + 1.0) * 0.25 - 0.5, values,
                 id="more-numbers"),
]  # fmt: skip


@pytest.mark.parametrize(("op", "oracle", "elements"), UNARY)
@given(st.data())
def test_unary_ops_match_numpy_in_any_layout(
    op: Callable[[Tensor], Tensor],
    oracle: Callable[[np.ndarray], np.ndarray],
    elements: st.SearchStrategy[float],
    data: st.DataObject,
) -> None:
    t, x = data.draw(tensors(elements=elements))
    check(op(t), oracle(x))
    check(t, x, "the input after the operation")


BINARY = [
    pytest.param(lambda a, b: a + b, np.add, values, id="add"),
    pytest.param(lambda a, b: a.add(b), np.add, values, id="add-method"),
    pytest.param(lambda a, b: a - b, np.subtract, values, id="sub"),
    pytest.param(lambda a, b: a * b, np.multiply, values, id="mul"),
    pytest.param(lambda a, b: a / b, lambda x, y: x * (1.0 / y), nonzero, id="div"),
    pytest.param(lambda a, b: a < b, lambda x, y: (x < y) * 1.0, values, id="lt"),
    pytest.param(lambda a, b: a > b, lambda x, y: (x > y) * 1.0, values, id="gt"),
    pytest.param(lambda a, b: a == b, lambda x, y: (x == y) * 1.0, values, id="eq"),
    pytest.param(lambda a, b: a != b, lambda x, y: (x != y) * 1.0, values, id="ne"),
    pytest.param(lambda a, b: a.is_close(b), lambda x, y: (np.abs(x - y) < 1e-2) * 1.0,
                 st.one_of(values, st.floats(-0.03, 0.03)), id="is_close"),
]  # fmt: skip


@pytest.mark.parametrize(("op", "oracle", "b_elements"), BINARY)
@given(broadcast_pairs(), st.data())
def test_binary_ops_broadcast_like_numpy(
    op: Callable[[Tensor, Tensor], Tensor],
    oracle: Callable[[np.ndarray, np.ndarray], np.ndarray],
    b_elements: st.SearchStrategy[float],
    pair: tuple[tuple[int, ...], tuple[int, ...]],
    data: st.DataObject,
) -> None:
    a_elements = values if b_elements is nonzero else b_elements
    a, x = data.draw(tensors(pair[0], a_elements), label="a")
    b, y = data.draw(tensors(pair[1], b_elements), label="b")
    check(op(a, b), oracle(x, y))
    check(a, x, "a after the operation")
    check(b, y, "b after the operation")


def test_numbers_mix_in_on_either_side() -> None:
    x = np.array([[1.0, -2.0, 0.5], [4.0, 0.0, -0.25]])
    t = tensor(x.tolist())
    check(t + 2, x + 2.0, "t + 2")
    check(2 + t, x + 2.0, "2 + t")
    check(t - 1.5, x - 1.5, "t - 1.5")
    check(1.5 - t, 1.5 - x, "1.5 - t")
    check(t * 3, x * 3.0, "t * 3")
    check(3 * t, x * 3.0, "3 * t")
    check(t / 4, x / 4.0, "t / 4")
    check(4 / (t + 3), 4.0 / (x + 3.0), "4 / (t + 3)")
    check(t < 0.5, (x < 0.5) * 1.0, "t < 0.5")
    check(t > 0.5, (x > 0.5) * 1.0, "t > 0.5")
    check(t == 0.5, (x == 0.5) * 1.0, "t == 0.5")
    check(t.is_close(4.005), (np.abs(x - 4.005) < 1e-2) * 1.0, "t.is_close(4.005)")


def test_zero_dim_tensors() -> None:
    s = tensor(2.0)
    check(-s, -2.0, "-s")
    check(s.exp(), math.exp(2.0), "s.exp()")
    check(s * s + 1, 5.0, "s * s + 1")
    check(s + tensor([[1.0, 2.0]]), [[3.0, 4.0]], "s + row")
    check(tensor([1.0, 5.0]) < s, [1.0, 0.0], "vector < s")
    check(s.sum(), 2.0, "s.sum()")
    check(s.max(), 2.0, "s.max()")


REDUCTIONS = [
    pytest.param(Tensor.sum, np.sum, id="sum"),
    pytest.param(Tensor.mean, np.mean, id="mean"),
    pytest.param(Tensor.max, np.max, id="max"),
]


@pytest.mark.parametrize(("op", "oracle"), REDUCTIONS)
@given(tensors(), st.data())
def test_reductions_over_a_dim_match_numpy(
    op: Callable[..., Tensor],
    oracle: Callable[..., np.ndarray],
    case: tuple[Tensor, np.ndarray],
    data: st.DataObject,
) -> None:
    t, x = case
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")
    check(op(t, dim, keepdim), oracle(x, axis=dim, keepdims=keepdim))
    check(op(t, dim=dim), oracle(x, axis=dim), "without keepdim")
    check(t, x, "the input after the reduction")


@pytest.mark.parametrize(("op", "oracle"), REDUCTIONS)
@given(tensors())
def test_reductions_over_everything_give_a_0d_tensor(
    op: Callable[..., Tensor], oracle: Callable[..., np.ndarray], case: tuple[Tensor, np.ndarray]
) -> None:
    t, x = case
    check(op(t), np.asarray(oracle(x)))


ZERO_OR_NOT = st.sampled_from([0.0, -0.0, 0.0, 1.0, -2.5, math.nan, math.inf])
"""Mostly zeros (so every kind of slice occurs), and nan, which counts as nonzero."""


@pytest.mark.parametrize(("name", "oracle"), [("all", np.all), ("any", np.any)])
@given(tensors(elements=ZERO_OR_NOT), st.data())
def test_all_and_any_match_numpy(
    name: str, oracle: Callable[..., np.ndarray], case: tuple[Tensor, np.ndarray],
    data: st.DataObject,
) -> None:  # fmt: skip
    t, x = case
    dim = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")
    got = getattr(t, name)(dim, keepdim)
    check(got, oracle(x, axis=dim, keepdims=keepdim) * 1.0, f"{name}({dim}, {keepdim})")
    check(getattr(t, name)(), oracle(x) * 1.0, f"{name}()")
    assert exact_bool(got.requires_grad) is False  # like PyTorch's bool result: no gradient


def test_all_and_any_known_values() -> None:
    t = tensor([[1.0, 0.0, 2.0], [3.0, -4.0, math.nan]])
    check(t.all(), 0.0, "all()")
    check(t.any(), 1.0, "any()")
    check(t.all(1), [0.0, 1.0], "all(1)")
    check(t.all(0, keepdim=True), [[1.0, 0.0, 1.0]], "all(0, keepdim=True)")
    check((t * 0.0).any(-1), [0.0, 1.0], "any(-1) of zeros (and 0 * nan, a nan)")
    empty = tensor(np.zeros((2, 0)).tolist())
    check(empty.all(), 1.0, "all() of an empty tensor")
    check(empty.any(), 0.0, "any() of an empty tensor")
    check(empty.all(1), [1.0, 1.0], "all(1) over an empty dimension")
    check(empty.any(1), [0.0, 0.0], "any(1) over an empty dimension")


def test_max_of_negative_values_and_ties() -> None:
    t = tensor([[-3.0, -1.0, -7.0], [-2.0, -5.0, -2.0]])
    check(t.max(), -1.0, "max()")
    check(t.max(1), [-1.0, -2.0], "max(1)")
    check(t.max(0, keepdim=True), [[-2.0, -1.0, -2.0]], "max(0, keepdim=True)")
    check(t.sum(1), [-11.0, -9.0], "sum(1)")
    check(t.mean(), -20.0 / 6.0, "mean()")


@given(tensors(), st.data())
def test_permute_matches_numpy_and_is_a_view(
    case: tuple[Tensor, np.ndarray], data: st.DataObject
) -> None:
    t, x = case
    order = tuple(data.draw(st.permutations(range(x.ndim)), label="order"))
    p = t.permute(*order)
    check(p, np.transpose(x, order))
    check(t.permute(order), np.transpose(x, order), "permute(tuple)")
    index = tuple(data.draw(st.integers(0, s - 1)) for s in x.shape)
    with no_grad():  # t may be a leaf that requires grad
        t[index] = 100.0
    x[index] = 100.0
    check(p, np.transpose(x, order), "the permuted view after writing to the original")


def test_permute_with_negative_dims_and_transpose() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    t = tensor(x.tolist())
    check(t.permute(-1, 0, 1), np.transpose(x, (2, 0, 1)), "permute(-1, 0, 1)")
    check(t.transpose(), np.swapaxes(x, -2, -1), "transpose()")
    check(t.transpose(0, 2), np.swapaxes(x, 0, 2), "transpose(0, 2)")
    check(t.transpose(-3, 1), np.swapaxes(x, 0, 1), "transpose(-3, 1)")
    check(t.transpose(1, 2).transpose(1, 2), x, "transpose twice")


@st.composite
def reshapes(draw: st.DrawFn, size: int) -> tuple[int, ...]:
    """A shape of ``size`` entries, maybe with one size given as -1."""
    dims, rest = [], size
    for _ in range(draw(st.integers(0, 3))):
        d = draw(st.sampled_from([k for k in range(1, rest + 1) if rest % k == 0]))
        dims.append(d)
        rest //= d
    dims = list(draw(st.permutations([*dims, rest])))
    if draw(st.booleans()):
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    return tuple(dims)


@given(arrays(), st.data())
def test_view_matches_numpy_reshape_and_shares_storage(x: np.ndarray, data: st.DataObject) -> None:
    t = make(x, (tuple(range(x.ndim)), 1))  # contiguous: view needs it
    shape = data.draw(reshapes(x.size), label="shape")
    v = t.view(*shape)
    check(v, x.reshape(shape))
    check(t.view(shape), x.reshape(shape), "view(tuple)")
    t[(0,) * x.ndim] = 100.0
    check(v, np.concatenate([[100.0], x.reshape(-1)[1:]]).reshape(shape), "view after a write")


@given(tensors(), st.data())
def test_contiguous_and_reshape_copy_any_layout(
    case: tuple[Tensor, np.ndarray], data: st.DataObject
) -> None:
    t, x = case
    c = t.contiguous()
    check(c, x, "contiguous()")
    strides = exact_tuple(c._tensor.strides, exact_int, "contiguous().strides")
    row_major = [s // 8 for s in np.zeros(x.shape).strides]
    assert all(
        n == 1 or got == want for n, got, want in zip(x.shape, strides, row_major, strict=True)
    ), f"contiguous() of shape {x.shape} has strides {strides}"
    shape = data.draw(reshapes(x.size), label="shape")
    check(t.reshape(*shape), x.reshape(shape), f"reshape{shape}")
    check(t, x, "the input after the copies")


@st.composite
def matmul_tensors(draw: st.DrawFn) -> tuple[Tensor, Tensor, np.ndarray, np.ndarray]:
    """Operands for ``@``: matrices with broadcast batch dims, or 1-D vectors."""
    x, y = draw(matmul_operands())
    if draw(st.booleans()):
        x = x.reshape(-1, *x.shape[-2:])[0, 0].copy()  # a vector of length m
    if draw(st.booleans()):
        y = y.reshape(-1, *y.shape[-2:])[0, :, 0].copy()
    # 1-D operands stay contiguous: matmul views them as a row or a column.
    a = make(x, draw(layouts(x.ndim)) if x.ndim > 1 else ((0,), 1))
    b = make(y, draw(layouts(y.ndim)) if y.ndim > 1 else ((0,), 1))
    return a, b, x, y


@given(matmul_tensors())
def test_matmul_follows_numpy_rules(case: tuple[Tensor, Tensor, np.ndarray, np.ndarray]) -> None:
    a, b, x, y = case
    expected = np.matmul(x, y)
    check(a @ b, expected, f"{x.shape} @ {y.shape}")
    check(a.matmul(b), expected, "a.matmul(b)")
    check(a, x, "a after the product")
    check(b, y, "b after the product")


def test_matmul_examples() -> None:
    x = np.arange(24.0).reshape(2, 1, 3, 4)
    y = np.arange(40.0).reshape(5, 4, 2) - 20.0
    got = tensor(x.tolist()) @ tensor(y.tolist())
    check(got, np.matmul(x, y), "(2, 1, 3, 4) @ (5, 4, 2)")
    m = tensor([[1.0, 2.0], [3.0, 4.0]])
    v = tensor([1.0, -1.0])
    check(m @ v, [-1.0, -1.0], "matrix @ vector")
    check(v @ m, [-2.0, -2.0], "vector @ matrix")
    check(v @ v, 2.0, "vector @ vector")
    check(m.transpose() @ m, [[10.0, 14.0], [14.0, 20.0]], "m.T @ m")


# -- errors of operations that run the forward pass ----------------------------------------


@pytest.mark.parametrize(("op", "oracle", "elements"), [p for p in BINARY if p.id != "div"])
def test_zip_of_shapes_that_do_not_broadcast_names_both(
    op: Callable[[Tensor, Tensor], Tensor],
    oracle: Callable[[np.ndarray, np.ndarray], np.ndarray],
    elements: object,
) -> None:
    x, y = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), np.array([2.0, 2.0, 3.005])
    a = tensor(x.tolist())
    check(op(a, tensor(y.tolist())), oracle(x, y), "shapes (2, 3) and (3,)")
    for shape in [(4,), (3, 2), (2, 2, 2)]:
        b = tensor(np.ones(shape).tolist())
        with pytest.raises(ShapeError) as err:
            op(a, b)
        assert "(2, 3)" in str(err.value) and str(shape) in str(err.value), str(err.value)
        with pytest.raises(ValueError):  # a ShapeError is a ValueError
            op(b, a)


def test_permute_that_is_not_a_permutation_names_it() -> None:
    t = tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    check(t.permute(1, 0), [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]], "permute(1, 0)")
    for order in [(0, 0), (1,), (0, 1, 2), (0, 5)]:
        with pytest.raises(ShapeError) as err:
            t.permute(*order)
        assert "(2, 3)" in str(err.value), str(err.value)
    with pytest.raises(ShapeError, match=r"permute\(1, 1\)"):
        t.permute(1, 1)
