"""Tasks 2.1 and 2.2: the fast (Numba) backend against NumPy and the simple backend.

Task 2.1 (``tensor_map_kernel``, ``tensor_zip_kernel``, ``tensor_reduce_kernel``) and
task 2.2 (``tensor_matrix_multiply_kernel``) are checked two ways:

* **through the Tensor API** on ``FastTensorBackend``: every stage-1 operation, forward and
  backward. The forward values are compared with NumPy; the forward values and the
  gradients of ``(f(x) * w).sum()`` (``w`` a random constant) with the same computation
  on stage 1's ``SimpleBackend``, the pure-Python reference;
* **the kernels called directly** with NumPy storages, so that layouts the backend never
  builds itself are reached too: outputs that are permuted or have gaps, both sides of
  the aligned fast path of map and zip, a reduction split into ``parts`` with a start
  value already in ``out``, and a matrix product written into a transposed output.

Hypothesis draws shapes of 1 to 4 dimensions of sizes 1 to 5, broadcasting pairs where
either side (or neither) is the smaller, and layouts: the dimensions stored in another
order (non-contiguous) and, sometimes, a gap after every entry. Gaps hold nan, so a read
of one shows up in the result, and a kernel must leave an output's gaps untouched.

Every value read back from a framework result goes through ``exact_tensor``
(``tests/strict.py``), which reads the storage with NumPy alone. Reductions may
reassociate (a fold split into parts), so comparisons allow ``rtol=1e-9``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from module1.tensor import Tensor, from_numpy, rand
from module1.tensor_ops import SimpleBackend
from module2.fast_ops import (
    OP_ADD,
    OP_EQ,
    OP_EXP,
    OP_ID,
    OP_INV,
    OP_INV_BACK,
    OP_IS_CLOSE,
    OP_LOG,
    OP_LOG_BACK,
    OP_LT,
    OP_MAX,
    OP_MUL,
    OP_NEG,
    OP_POW,
    OP_RELU,
    OP_RELU_BACK,
    OP_SIGMOID,
    OP_TANH,
    FastOps,
    FastTensorBackend,
    tensor_map_kernel,
    tensor_matrix_multiply_kernel,
    tensor_reduce_kernel,
    tensor_zip_kernel,
)
from tests.layouts import (
    Layout,
    assert_close,
    broadcast_pairs,
    check,
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
from tests.strict import exact_tensor

Shape = tuple[int, ...]
Array = np.ndarray
"""How a tensor sits in its storage: the order its dimensions are stored in (the first
one outermost) and the step between neighbouring storage slots (2 leaves a gap)."""


# -- strategies -------------------------------------------------------------------------

sizes = st.integers(min_value=1, max_value=5)
shapes = st.lists(sizes, min_size=1, max_size=4).map(tuple)
near = st.one_of(values, st.floats(-0.03, 0.03))
seeds = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def arrays(draw: st.DrawFn, shape: Shape | None = None, elements: Any = values) -> Array:
    if shape is None:
        shape = draw(shapes)
    return draw(hnp.arrays(np.float64, shape, elements=elements))


def plain(x: Array) -> Layout:
    return tuple(range(x.ndim)), 1


def compare_backends(
    f: Callable[..., Tensor],
    oracle: Callable[..., Array] | None,
    xs: Sequence[Array],
    layouts_: Sequence[Layout],
    seed: int,
) -> None:
    """``f`` of leaves holding ``xs`` in ``layouts_`` on the fast backend: its values
    against ``oracle(*xs)`` (if given) and against ``f`` on the simple backend, then the
    gradients of ``(f(...) * w).sum()`` on both backends."""
    fast = [make(x, lay, FastTensorBackend, True) for x, lay in zip(xs, layouts_, strict=True)]
    simple = [make(x, lay, SimpleBackend, True) for x, lay in zip(xs, layouts_, strict=True)]
    out_fast = f(*fast)
    out_simple = f(*simple)
    want = exact_tensor(out_simple, "simple backend result")
    if oracle is not None:
        np_want = np.asarray(oracle(*xs), dtype=np.float64)
        check(out_fast, np_want, "fast backend result vs NumPy")
    check(out_fast, want, "fast backend result vs simple backend")
    w = np.random.default_rng(seed).normal(size=want.shape).reshape(want.shape)
    (out_fast * from_numpy(w, backend=FastTensorBackend)).sum().backward()
    (out_simple * from_numpy(w)).sum().backward()
    for i, (a, b, x) in enumerate(zip(fast, simple, xs, strict=True)):
        grad_simple = exact_tensor(b.grad, f"simple input {i}.grad")
        assert grad_simple.shape == x.shape
        check(a.grad, grad_simple, f"input {i}.grad vs simple backend")
        check(a, x, f"input {i} after forward and backward")


# =========================================================================================
# Task 2.1: map, zip and reduce
# =========================================================================================

# -- every stage-1 operation but matmul, through the Tensor API ----------------------------

UNARY = [
    pytest.param(lambda t: -t, np.negative, values, id="neg"),
    pytest.param(Tensor.exp, np.exp, values, id="exp"),
    pytest.param(Tensor.log, np.log, positive, id="log"),
    pytest.param(Tensor.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)), values, id="sigmoid"),
    pytest.param(Tensor.relu, lambda x: np.where(x > 0.0, x, 0.0), values, id="relu"),
    pytest.param(Tensor.tanh, np.tanh, values, id="tanh"),
    pytest.param(lambda t: 1.0 / t, lambda x: 1.0 / x, nonzero, id="inv"),
    pytest.param(lambda t: t**2.0, np.square, values, id="pow2"),
    pytest.param(lambda t: t**0.5, np.sqrt, positive, id="sqrt"),
    pytest.param(lambda t: t ** (-1.5), lambda x: x**-1.5, positive, id="pow-1.5"),
    pytest.param(lambda t: 2.0 - t * 3.0, lambda x: 2.0 - x * 3.0, values, id="numbers"),
    pytest.param(lambda t: (t + 1.0) / 4.0 - 0.5, lambda x: (x + 1.0) / 4.0 - 0.5, values,
                 id="more-numbers"),
]  # fmt: skip


@pytest.mark.task2_1
@pytest.mark.parametrize(("op", "oracle", "elements"), UNARY)
@given(data=st.data(), seed=seeds)
def test_unary_ops_forward_and_backward(
    op: Callable[[Tensor], Tensor],
    oracle: Callable[[Array], Array],
    elements: st.SearchStrategy[float],
    data: st.DataObject,
    seed: int,
) -> None:
    x = data.draw(arrays(elements=elements), label="x")
    layout = data.draw(layouts(x.ndim), label="layout")
    compare_backends(op, oracle, [x], [layout], seed)


BINARY = [
    pytest.param(lambda a, b: a + b, np.add, values, id="add"),
    pytest.param(lambda a, b: a - b, np.subtract, values, id="sub"),
    pytest.param(lambda a, b: a * b, np.multiply, values, id="mul"),
    pytest.param(lambda a, b: a / b, lambda x, y: x / y, nonzero, id="div"),
    pytest.param(lambda a, b: a < b, lambda x, y: (x < y) * 1.0, values, id="lt"),
    pytest.param(lambda a, b: a > b, lambda x, y: (x > y) * 1.0, values, id="gt"),
    pytest.param(lambda a, b: a == b, lambda x, y: (x == y) * 1.0, values, id="eq"),
    pytest.param(lambda a, b: a != b, lambda x, y: (x != y) * 1.0, values, id="ne"),
    pytest.param(lambda a, b: a.is_close(b), lambda x, y: (np.abs(x - y) < 1e-2) * 1.0, near,
                 id="is_close"),
]  # fmt: skip


@pytest.mark.task2_1
@pytest.mark.parametrize(("op", "oracle", "b_elements"), BINARY)
@given(pair=broadcast_pairs(min_dims=1, max_size=5), data=st.data(), seed=seeds)
def test_binary_ops_broadcast_forward_and_backward(
    op: Callable[[Tensor, Tensor], Tensor],
    oracle: Callable[[Array, Array], Array],
    b_elements: st.SearchStrategy[float],
    pair: tuple[Shape, Shape],
    data: st.DataObject,
    seed: int,
) -> None:
    a_elements = values if b_elements is nonzero else b_elements
    x = data.draw(arrays(pair[0], a_elements), label="a")
    y = data.draw(arrays(pair[1], b_elements), label="b")
    lx = data.draw(layouts(x.ndim), label="a layout")
    ly = data.draw(layouts(y.ndim), label="b layout")
    compare_backends(op, oracle, [x, y], [lx, ly], seed)


REDUCTIONS = [
    pytest.param("sum", np.sum, id="sum"),
    pytest.param("mean", np.mean, id="mean"),
    pytest.param("max", np.max, id="max"),
]


@pytest.mark.task2_1
@pytest.mark.parametrize(("name", "oracle"), REDUCTIONS)
@given(x=arrays(), data=st.data(), seed=seeds)
def test_reductions_forward_and_backward(
    name: str, oracle: Callable[..., Array], x: Array, data: st.DataObject, seed: int
) -> None:
    layout = data.draw(layouts(x.ndim), label="layout")
    dim = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")

    def f(t: Tensor) -> Tensor:
        return getattr(t, name)(dim, keepdim)

    def f_np(v: Array) -> Array:
        return oracle(v, axis=dim, keepdims=keepdim)

    compare_backends(f, f_np, [x], [layout], seed)


LAYOUT_OPS = ["permute", "transpose", "contiguous", "view", "reshape", "view-then-permute"]


@pytest.mark.task2_1
@pytest.mark.parametrize("kind", LAYOUT_OPS)
@given(x=arrays(), data=st.data(), seed=seeds)
def test_layout_ops_forward_and_backward(
    kind: str, x: Array, data: st.DataObject, seed: int
) -> None:
    layout = data.draw(layouts(x.ndim), label="layout")
    order = tuple(data.draw(st.permutations(range(x.ndim)), label="order"))
    backwards = tuple(reversed(x.shape))
    # Each is followed by an exp, so the kernels read the view's layout.
    cases: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Array], Array]]] = {
        "permute": (lambda t: t.permute(*order), lambda v: np.transpose(v, order)),
        "transpose": (lambda t: t.transpose(0, -1), lambda v: np.swapaxes(v, 0, -1)),
        "contiguous": (lambda t: t.contiguous(), lambda v: v),
        "view": (lambda t: t.contiguous().view(*backwards), lambda v: v.reshape(backwards)),
        "reshape": (lambda t: t.reshape(-1), lambda v: v.reshape(-1)),
        "view-then-permute": (
            lambda t: t.contiguous().view(*backwards).permute(*order),
            lambda v: np.transpose(v.reshape(backwards), order),
        ),
    }
    f, f_np = cases[kind]
    compare_backends(lambda t: f(t).exp(), lambda v: np.exp(f_np(v)), [x], [layout], seed)


# -- the kernels, called directly -----------------------------------------------------------

UNARY_CODES = [
    pytest.param(OP_NEG, np.negative, values, id="neg"),
    pytest.param(OP_SIGMOID, lambda x: 1.0 / (1.0 + np.exp(-x)), values, id="sigmoid"),
    pytest.param(OP_RELU, lambda x: np.where(x > 0.0, x, 0.0), values, id="relu"),
    pytest.param(OP_LOG, np.log, positive, id="log"),
    pytest.param(OP_EXP, np.exp, values, id="exp"),
    pytest.param(OP_ID, lambda x: x, values, id="id"),
    pytest.param(OP_INV, lambda x: 1.0 / x, nonzero, id="inv"),
    pytest.param(OP_TANH, np.tanh, values, id="tanh"),
]

BINARY_CODES = [
    pytest.param(OP_ADD, np.add, values, values, id="add"),
    pytest.param(OP_MUL, np.multiply, values, values, id="mul"),
    pytest.param(OP_LT, lambda x, y: (x < y) * 1.0, values, values, id="lt"),
    pytest.param(OP_EQ, lambda x, y: (x == y) * 1.0, values, values, id="eq"),
    pytest.param(OP_MAX, np.maximum, values, values, id="max"),
    pytest.param(OP_POW, np.power, positive, st.floats(-3.0, 3.0), id="pow"),
    pytest.param(OP_RELU_BACK, lambda x, d: np.where(x > 0.0, d, 0.0), values, values,
                 id="relu_back"),
    pytest.param(OP_LOG_BACK, lambda x, d: d / x, nonzero, values, id="log_back"),
    pytest.param(OP_INV_BACK, lambda x, d: -d / (x * x), nonzero, values, id="inv_back"),
    pytest.param(OP_IS_CLOSE, lambda x, y: (np.abs(x - y) < 1e-2) * 1.0, near, near,
                 id="is_close"),
]  # fmt: skip


@pytest.mark.task2_1
@pytest.mark.parametrize(("code", "oracle", "elements"), UNARY_CODES)
@given(pair=broadcast_pairs(min_dims=1, max_size=5), data=st.data())
def test_map_kernel_reads_and_writes_any_layout(
    code: int,
    oracle: Callable[[Array], Array],
    elements: st.SearchStrategy[float],
    pair: tuple[Shape, Shape],
    data: st.DataObject,
) -> None:
    in_shape = pair[0]
    out_shape = tuple(np.broadcast_shapes(*pair))
    x = data.draw(arrays(in_shape, elements), label="x")
    in_storage, in_strides = strided(x, data.draw(layouts(x.ndim), label="in layout"))
    out, out_strides = strided(np.zeros(out_shape), data.draw(layouts(len(out_shape))))
    out[:] = np.nan
    tensor_map_kernel(
        code, out, ints(out_shape), ints(out_strides), in_storage, ints(in_shape),
        ints(in_strides),
    )  # fmt: skip
    assert_close(read(out, out_shape, out_strides), np.broadcast_to(oracle(x), out_shape))
    assert np.isnan(gaps(out, out_shape, out_strides)).all(), "map wrote outside the output"


@pytest.mark.task2_1
@pytest.mark.parametrize(("code", "oracle", "a_elements", "b_elements"), BINARY_CODES)
@given(pair=broadcast_pairs(min_dims=1, max_size=5), data=st.data())
def test_zip_kernel_reads_and_writes_any_layout(
    code: int,
    oracle: Callable[[Array, Array], Array],
    a_elements: st.SearchStrategy[float],
    b_elements: st.SearchStrategy[float],
    pair: tuple[Shape, Shape],
    data: st.DataObject,
) -> None:
    a_shape, b_shape = pair
    out_shape = tuple(np.broadcast_shapes(a_shape, b_shape))
    x = data.draw(arrays(a_shape, a_elements), label="a")
    y = data.draw(arrays(b_shape, b_elements), label="b")
    a_storage, a_strides = strided(x, data.draw(layouts(x.ndim), label="a layout"))
    b_storage, b_strides = strided(y, data.draw(layouts(y.ndim), label="b layout"))
    out, out_strides = strided(np.zeros(out_shape), data.draw(layouts(len(out_shape))))
    out[:] = np.nan
    tensor_zip_kernel(
        code, out, ints(out_shape), ints(out_strides),
        a_storage, ints(a_shape), ints(a_strides),
        b_storage, ints(b_shape), ints(b_strides),
    )  # fmt: skip
    assert_close(read(out, out_shape, out_strides), oracle(x, y))
    assert np.isnan(gaps(out, out_shape, out_strides)).all(), "zip wrote outside the output"


FAST_PATH_LAYOUTS = ["contiguous", "permuted", "permuted-with-gaps"]


def same_layout(kind: str, x: Array, data: st.DataObject) -> Layout:
    if kind == "contiguous":
        return plain(x)
    order = tuple(data.draw(st.permutations(range(x.ndim)), label="order"))
    if kind == "permuted" and x.ndim > 1 and order == tuple(range(x.ndim)):
        order = tuple(reversed(order))
    return order, 2 if kind == "permuted-with-gaps" else 1


@pytest.mark.task2_1
@pytest.mark.parametrize("kind", FAST_PATH_LAYOUTS)
@given(data=st.data())
def test_map_and_zip_fast_path_equals_general_path(kind: str, data: st.DataObject) -> None:
    """Output and inputs with the same shape and strides: once over storages holding
    exactly the entries (the aligned fast path when there are no gaps), once into an
    output storage with one slot more (never aligned: the general path). Both give
    NumPy's values, the same in both runs, and leave every other slot alone."""
    shape = data.draw(st.lists(sizes, min_size=2, max_size=4).map(tuple), label="shape")
    x = data.draw(arrays(shape, nonzero), label="x")
    y = data.draw(arrays(shape, values), label="y")
    layout = same_layout(kind, x, data)
    xs, strides = strided(x, layout)
    ys, _ = strided(y, layout)
    s, st_ = ints(shape), ints(strides)
    for code, oracle, args in [
        (OP_EXP, np.exp, (x,)),
        (OP_INV, lambda v: 1.0 / v, (x,)),
        (OP_ADD, np.add, (x, y)),
        (OP_MUL, np.multiply, (x, y)),
        (OP_LOG_BACK, lambda v, d: d / v, (x, y)),
    ]:
        runs = []
        for extra in (0, 1):
            out = np.full(xs.size + extra, np.nan)
            if len(args) == 1:
                tensor_map_kernel(code, out, s, st_, xs, s, st_)
            else:
                tensor_zip_kernel(code, out, s, st_, xs, s, st_, ys, s, st_)
            what = f"op {code} with {len(args)} input(s), {'general' if extra else 'aligned'}"
            assert_close(read(out, shape, strides), oracle(*args), what)
            assert np.isnan(gaps(out, shape, strides)).all(), f"{what}: wrote into a gap"
            runs.append(out[: xs.size])
        np.testing.assert_allclose(runs[0], runs[1], rtol=1e-15, atol=0.0, err_msg=str(code))


@pytest.mark.task2_1
@pytest.mark.parametrize(
    ("shape", "order"),
    [((2, 3), (1, 0)), ((3, 4, 5), (2, 0, 1)), ((4, 1, 3), (2, 1, 0))],
    ids=lambda dims: "x".join(map(str, dims)),
)
def test_fast_path_needs_the_same_strides(shape: Shape, order: tuple[int, ...]) -> None:
    """Same shape and storage sizes but different strides: no entry-by-entry copy."""
    x = np.arange(float(np.prod(shape))).reshape(shape) - 7.0
    y = np.linspace(-1.0, 1.0, x.size).reshape(shape)
    xs, x_strides = strided(x, (order, 1))
    ys, y_strides = strided(y, plain(y))
    out = np.full(x.size, np.nan)
    s = ints(shape)
    row_major = ints(y_strides)
    tensor_map_kernel(OP_NEG, out, s, row_major, xs, s, ints(x_strides))
    np.testing.assert_array_equal(out.reshape(shape), -x, err_msg="map, permuted input")
    tensor_map_kernel(OP_ID, out, s, ints(x_strides), ys, s, row_major)
    np.testing.assert_array_equal(read(out, shape, x_strides), y, err_msg="map, permuted out")
    for a, a_strides, b, b_strides, what in [
        (xs, x_strides, ys, y_strides, "zip, a permuted"),
        (ys, y_strides, xs, x_strides, "zip, b permuted"),
    ]:
        out[:] = np.nan
        tensor_zip_kernel(OP_ADD, out, s, row_major, a, s, ints(a_strides), b, s, ints(b_strides))
        np.testing.assert_allclose(out.reshape(shape), x + y, rtol=1e-15, err_msg=what)
    out[:] = np.nan
    zs, _ = strided(y, (order, 1))
    tensor_zip_kernel(OP_MUL, out, s, row_major, xs, s, ints(x_strides), zs, s, ints(x_strides))
    np.testing.assert_allclose(out.reshape(shape), x * y, rtol=1e-15, err_msg="zip, both")


REDUCE_CODES = [
    pytest.param(OP_ADD, lambda a, d, s: s + np.sum(a, d, keepdims=True), values,
                 st.floats(-5.0, 5.0), id="sum"),
    pytest.param(OP_MUL, lambda a, d, s: s * np.prod(a, d, keepdims=True),
                 st.one_of(st.floats(0.6, 1.5), st.floats(-1.5, -0.6)), st.floats(0.5, 2.0),
                 id="mul"),
    pytest.param(OP_MAX, lambda a, d, s: np.maximum(s, np.max(a, d, keepdims=True)), values,
                 st.floats(-10.0, 12.0), id="max"),
]  # fmt: skip


@pytest.mark.task2_1
@pytest.mark.parametrize("parts", [1, 3, 7, 64])
@pytest.mark.parametrize(("code", "oracle", "elements", "starts"), REDUCE_CODES)
@given(data=st.data())
def test_reduce_kernel_split_into_parts_folds_into_the_start_value(
    code: int,
    oracle: Callable[[Array, int, Array], Array],
    elements: st.SearchStrategy[float],
    starts: st.SearchStrategy[float],
    parts: int,
    data: st.DataObject,
) -> None:
    """A dimension of length 50 reduced in ``parts`` pieces (64 is more pieces than
    entries), in any layout, into an ``out`` that already holds a start value per entry
    (different ones, not the op's identity)."""
    before = data.draw(st.lists(st.integers(1, 3), max_size=2), label="dims before")
    after = data.draw(st.lists(st.integers(1, 3), max_size=2), label="dims after")
    shape = (*before, 50, *after)
    dim = len(before)
    out_shape = (*before, 1, *after)
    x = data.draw(arrays(shape, elements), label="a")
    start = data.draw(arrays(out_shape, starts), label="start")
    a_storage, a_strides = strided(x, data.draw(layouts(x.ndim), label="a layout"))
    out, out_strides = strided(start, data.draw(layouts(x.ndim), label="out layout"))
    tensor_reduce_kernel(
        code, out, ints(out_shape), ints(out_strides), a_storage, ints(shape), ints(a_strides),
        dim, parts,
    )  # fmt: skip
    assert_close(read(out, out_shape, out_strides), oracle(x, dim, start))
    assert np.isnan(gaps(out, out_shape, out_strides)).all(), "reduce wrote outside the output"


@pytest.mark.task2_1
def test_reduce_kernel_examples() -> None:
    x = np.arange(1.0, 13.0).reshape(3, 4)
    storage, strides = strided(x, ((1, 0), 1))  # stored column by column
    for dim, parts in [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3), (1, 4)]:
        out_shape = (1, 4) if dim == 0 else (3, 1)
        for code, start, want in [
            (OP_ADD, 100.0, 100.0 + x.sum(dim, keepdims=True)),
            (OP_MUL, -0.5, -0.5 * x.prod(dim, keepdims=True)),
            (OP_MAX, 9.5, np.maximum(9.5, x.max(dim, keepdims=True))),
        ]:
            out = np.full(int(np.prod(out_shape)), start)
            tensor_reduce_kernel(
                code, out, ints(out_shape), ints((out_shape[1], 1)), storage, ints(x.shape),
                ints(strides), dim, parts,
            )  # fmt: skip
            np.testing.assert_allclose(
                out.reshape(out_shape), want, rtol=1e-15, err_msg=f"op {code}, dim {dim}, "
                f"parts {parts}"
            )  # fmt: skip


@pytest.mark.task2_1
def test_big_reductions_match_numpy() -> None:
    """One output over 200 000 entries (the backend splits the fold), and a few outputs
    over long dimensions, contiguous and strided."""
    x = rand(200_000, backend=FastTensorBackend, seed=3)
    v = check(x, np.random.default_rng(3).random(200_000), "rand(200_000)")
    check(x.sum(), np.sum(v), "sum()")
    check(x.mean(), np.mean(v), "mean()")
    check(x.max(), np.max(v), "max()")
    check((x - 0.5).sum(), np.sum(v - 0.5), "(x - 0.5).sum()")
    check(x.view(2, 100_000).sum(1), v.reshape(2, 100_000).sum(1), "view(2, 100_000).sum(1)")
    m = v.reshape(50_000, 4)
    check(x.view(50_000, 4).sum(0), m.sum(0), "view(50_000, 4).sum(0)")
    check(x.view(50_000, 4).permute(1, 0).sum(1), m.sum(0), "permuted sum(1)")
    check(x.view(50_000, 4).max(0), m.max(0), "view(50_000, 4).max(0)")
    y = rand(3, 70_000, backend=FastTensorBackend, seed=4, requires_grad=True)
    w = np.random.default_rng(4).random((3, 70_000))
    check(y.sum(1, keepdim=True), w.sum(1, keepdims=True), "rand(3, 70_000).sum(1)")
    (y.sum(1) * from_numpy(np.array([1.0, 2.0, 3.0]), backend=FastTensorBackend)).sum().backward()
    check(y.grad, np.repeat([[1.0], [2.0], [3.0]], 70_000, axis=1), "y.grad")


@pytest.mark.task2_1
def test_a_float_function_outside_the_table_still_works() -> None:
    """``FastOps.map`` of a function it has no op code for compiles a fallback; its
    result equals the same computation on the backend's own kernels, and NumPy's."""
    x = np.linspace(-2.0, 2.0, 24).reshape(2, 3, 4)
    t = make(x, ((2, 0, 1), 2), FastTensorBackend)
    triple = FastOps.map(lambda v: v * 3.0 + 1.0)
    check(triple(t), x * 3.0 + 1.0, "fallback map")
    check(t * 3.0 + 1.0, x * 3.0 + 1.0, "t * 3.0 + 1.0 with the table's kernels")
    out = from_numpy(np.zeros((5, 2, 3, 4)), backend=FastTensorBackend)
    result = triple(t, out)
    assert result is out
    check(out, np.broadcast_to(x * 3.0 + 1.0, (5, 2, 3, 4)), "fallback map into out")
    assert FastTensorBackend.id_map(t, out) is out
    check(out, np.broadcast_to(x, (5, 2, 3, 4)), "the table's id map into out")
    add_half = FastOps.zip(lambda u, v: u + 0.5 * v)
    row = from_numpy(np.array([1.0, -2.0, 4.0, 8.0]), backend=FastTensorBackend)
    check(add_half(t, row), x + 0.5 * np.array([1.0, -2.0, 4.0, 8.0]), "fallback zip")
    check(t, x, "the input after the maps")


# =========================================================================================
# Task 2.2: matrix multiply
# =========================================================================================


@st.composite
def matmul_cases(draw: st.DrawFn, vectors: bool = True) -> tuple[Array, Array]:
    """Operands ``(*batch_a, n, m)`` and ``(*batch_b, m, p)`` with broadcast batch dims
    and n, m, p in 1..8; with ``vectors``, sometimes a 1-D operand of length m."""
    batch_a, batch_b = draw(broadcast_pairs(min_dims=0, max_dims=2, min_size=1, max_size=3))
    n, m, p = (draw(st.integers(1, 8), label=name) for name in "nmp")
    a_shape: Shape = (*batch_a, n, m)
    b_shape: Shape = (*batch_b, m, p)
    if vectors and draw(st.integers(0, 3)) == 0:
        a_shape = (m,)
    if vectors and draw(st.integers(0, 3)) == 0:
        b_shape = (m,)
    elements = st.floats(-2.0, 2.0)
    return draw(arrays(a_shape, elements), label="a"), draw(arrays(b_shape, elements), label="b")


@pytest.mark.task2_2
@given(case=matmul_cases(), data=st.data(), seed=seeds)
def test_matmul_forward_and_backward(
    case: tuple[Array, Array], data: st.DataObject, seed: int
) -> None:
    x, y = case
    lx = data.draw(layouts(x.ndim), label="a layout")
    ly = data.draw(layouts(y.ndim), label="b layout")
    compare_backends(lambda a, b: a @ b, np.matmul, [x, y], [lx, ly], seed)


@pytest.mark.task2_2
@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((2, 1, 3, 4), (3, 4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 1, 4, 5)),
     ((2, 1, 3, 4), (1, 5, 4, 2)), ((1, 3, 4), (2, 4, 5)), ((4,), (2, 4, 3)),
     ((2, 3, 4), (4,)), ((4,), (4,)), ((6, 1), (1, 7))],
    ids=lambda shape: "x".join(map(str, shape)),
)  # fmt: skip
def test_matmul_broadcast_examples(a_shape: Shape, b_shape: Shape) -> None:
    rng = np.random.default_rng(sum(a_shape) * 31 + sum(b_shape))
    x, y = rng.normal(size=a_shape), rng.normal(size=b_shape)
    compare_backends(lambda a, b: a @ b, np.matmul, [x, y], [plain(x), plain(y)], 0)
    # The same product with both operands stored transposed (last two dims swapped).
    if x.ndim > 1 and y.ndim > 1:
        swap_x = (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2)
        swap_y = (*range(y.ndim - 2), y.ndim - 1, y.ndim - 2)
        compare_backends(lambda a, b: a @ b, np.matmul, [x, y], [(swap_x, 1), (swap_y, 2)], 1)


@pytest.mark.task2_2
@given(case=matmul_cases(vectors=False), data=st.data(), seed=seeds)
def test_matmul_of_transposed_views_forward_and_backward(
    case: tuple[Array, Array], data: st.DataObject, seed: int
) -> None:
    """``a.transpose() @ b.transpose()`` on leaves stored the other way round: the
    product reads transposed operands and the backward sends transposed gradients."""
    x, y = case
    xt, yt = np.swapaxes(x, -1, -2).copy(), np.swapaxes(y, -1, -2).copy()
    lx = data.draw(layouts(x.ndim), label="a layout")
    ly = data.draw(layouts(y.ndim), label="b layout")
    compare_backends(
        lambda a, b: (a.transpose() @ b.transpose()).tanh(),
        lambda a, b: np.tanh(np.swapaxes(a, -1, -2) @ np.swapaxes(b, -1, -2)),
        [xt, yt],
        [lx, ly],
        seed,
    )


@pytest.mark.task2_2
@given(case=matmul_cases(vectors=False), data=st.data())
def test_matmul_kernel_writes_any_output_layout(
    case: tuple[Array, Array], data: st.DataObject
) -> None:
    """The kernel called directly: operands in any layout (``b`` too, though the backend
    hands it rows of stride 1), into an output that is permuted or has gaps."""
    x, y = case
    want = np.matmul(x, y)
    a_storage, a_strides = strided(x, data.draw(layouts(x.ndim), label="a layout"))
    b_storage, b_strides = strided(y, data.draw(layouts(y.ndim), label="b layout"))
    out, out_strides = strided(want * 0.0, data.draw(layouts(want.ndim), label="out layout"))
    out[:] = np.nan
    tensor_matrix_multiply_kernel(
        out, ints(want.shape), ints(out_strides),
        a_storage, ints(x.shape), ints(a_strides),
        b_storage, ints(y.shape), ints(b_strides),
    )  # fmt: skip
    assert_close(read(out, want.shape, out_strides), want)
    assert np.isnan(gaps(out, want.shape, out_strides)).all(), "wrote outside the output"


@pytest.mark.task2_2
def test_matmul_kernel_into_a_transposed_output() -> None:
    x = np.arange(24.0).reshape(2, 3, 4) / 7.0
    y = np.arange(-20.0, 20.0).reshape(2, 4, 5) / 3.0
    want = x @ y  # (2, 3, 5)
    out = np.full(2 * 3 * 5 + 3, np.nan)  # stored as (5, 2, 3), then three spare slots
    out_strides = (3, 1, 6)
    tensor_matrix_multiply_kernel(
        out, ints(want.shape), ints(out_strides),
        x.reshape(-1), ints(x.shape), ints((12, 4, 1)),
        y.reshape(-1), ints(y.shape), ints((20, 5, 1)),
    )  # fmt: skip
    np.testing.assert_allclose(read(out, want.shape, out_strides), want, rtol=1e-12)
    assert np.isnan(out[30:]).all(), "wrote past the output"
    # b stored column by column (stride 4 between neighbours in a row), a broadcast.
    yt = np.ascontiguousarray(np.swapaxes(y, -1, -2))
    out[:] = np.nan
    tensor_matrix_multiply_kernel(
        out, ints(want.shape), ints(out_strides),
        x[0].reshape(-1), ints((1, 3, 4)), ints((0, 4, 1)),
        yt.reshape(-1), ints(y.shape), ints((20, 1, 4)),
    )  # fmt: skip
    np.testing.assert_allclose(read(out, want.shape, out_strides), x[0] @ y, rtol=1e-12)


@pytest.mark.task2_2
def test_larger_matmul_matches_numpy() -> None:
    rng = np.random.default_rng(7)
    av, bv = rng.normal(size=(64, 48)), rng.normal(size=(48, 80))
    a = from_numpy(av, backend=FastTensorBackend, requires_grad=True)
    b = from_numpy(bv, backend=FastTensorBackend, requires_grad=True)
    out = a @ b
    check(out, av @ bv, "(64, 48) @ (48, 80)")
    w = rng.normal(size=(64, 80))
    (out * from_numpy(w, backend=FastTensorBackend)).sum().backward()
    check(a.grad, w @ bv.T, "a.grad")
    check(b.grad, av.T @ w, "b.grad")
    # Stored transposed, and with batch dimensions broadcast on both sides.
    at = from_numpy(av.T.copy(), backend=FastTensorBackend).transpose()
    bt = from_numpy(bv.T.copy(), backend=FastTensorBackend).transpose()
    check(at @ bt, av @ bv, "transposed operands")
    ab, bb = rng.normal(size=(3, 1, 64, 48)), rng.normal(size=(2, 48, 80))
    batched = from_numpy(ab, backend=FastTensorBackend) @ from_numpy(bb, backend=FastTensorBackend)
    check(batched, ab @ bb, "(3, 1, 64, 48) @ (2, 48, 80)")
