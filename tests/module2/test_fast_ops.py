"""Tasks 2.1 and 2.2: the fast (Numba) backend against NumPy.

Task 2.1 (``tensor_map_kernel``, ``tensor_zip_kernel``, ``tensor_reduce_kernel``) and
task 2.2 (``tensor_matrix_multiply_kernel``) are checked three ways:

* **through the Tensor API** on ``FastTensorBackend``: every stage-1 operation, forward and
  backward. NumPy is the only oracle: the forward values against NumPy's, and the
  gradients of ``(f(x) * w).sum()`` (``w`` a random constant) against the derivatives
  written out in NumPy below (never another task's code: one bug, one penalty);
* **the kernels called directly** with NumPy storages, so that layouts the backend never
  builds itself are reached too: outputs that are permuted or have gaps, inputs stored
  alike (aligned) and not, a reduction with a ``parts`` hint and a start value already in
  ``out``, a matrix product written into a transposed output; and large inputs whose
  sizes no block, chunk or tile size divides (odd, most of them primes), so that a
  parallel loop that drops or repeats its last piece shows;
* **in parallel**: each kernel, on a large input, must spread its work over Numba's
  threads (``tests/parallel.py`` reads every thread's CPU clock: a deterministic check,
  not a timing).

Hypothesis draws shapes of 1 to 4 dimensions of sizes 1 to 5, broadcasting pairs where
either side (or neither) is the smaller, and layouts: the dimensions stored in another
order (non-contiguous) and, sometimes, a gap after every entry. Gaps hold nan, so a read
of one shows up in the result, and a kernel must leave an output's gaps untouched.

Every value read back from a framework result goes through ``exact_tensor``
(``tests/strict.py``), which reads the storage with NumPy alone. Reductions may
reassociate (a fold split into parts), so comparisons allow ``rtol=1e-9``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from module1.tensor import Tensor, from_numpy, rand
from module2 import fast_matmul, fast_ops
from module2.compiled_ops import (
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
)
from module2.fast_ops import (
    FastOps,
    FastTensorBackend,
    tensor_map_kernel,
    tensor_matrix_multiply_kernel,
    tensor_reduce_kernel,
    tensor_zip_kernel,
)
from tests.layouts import (
    UNARY_OPS,
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
from tests.parallel import assert_parallel

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


def transposed(x: Array, step: int = 1) -> Layout:
    """All dimensions stored in reverse order (the last one outermost)."""
    return tuple(reversed(range(x.ndim))), step


Gradients = Callable[..., Sequence[Array]]
"""``grads(w, *xs)``: NumPy's gradients of ``(f(*xs) * w).sum()`` for each input."""


def compare(
    f: Callable[..., Tensor],
    oracle: Callable[..., Array],
    grads: Gradients,
    xs: Sequence[Array],
    layouts_: Sequence[Layout],
    seed: int,
) -> None:
    """``f`` of leaves holding ``xs`` in ``layouts_`` on the fast backend: its values
    against ``oracle(*xs)``, then the gradients of ``(f(...) * w).sum()`` against
    ``grads(w, *xs)``, all NumPy; the leaves keep their values."""
    leaves = [make(x, lay, FastTensorBackend, True) for x, lay in zip(xs, layouts_, strict=True)]
    out = f(*leaves)
    want = np.asarray(oracle(*xs), dtype=np.float64)
    check(out, want, "fast backend result vs NumPy")
    w = np.asarray(np.random.default_rng(seed).normal(size=want.shape), dtype=np.float64)
    (out * from_numpy(w, backend=FastTensorBackend)).sum().backward()
    for i, (leaf, x, g) in enumerate(zip(leaves, xs, grads(w, *xs), strict=True)):
        check(leaf.grad, np.asarray(g, dtype=np.float64).reshape(x.shape), f"input {i}.grad")
        check(leaf, x, f"input {i} after forward and backward")


def unbroadcast(g: Array, shape: Shape) -> Array:
    """``g`` (of a broadcast shape) summed back to ``shape``."""
    while g.ndim > len(shape):
        g = g.sum(0)
    for dim, size in enumerate(shape):
        if size == 1 and g.shape[dim] != 1:
            g = g.sum(dim, keepdims=True)
    return g


def elementwise(derivative: Callable[[Array], Array]) -> Gradients:
    """The gradient of a unary entry-by-entry function with this derivative."""
    return lambda w, x: [w * derivative(x)]


def pairwise(partials: Callable[[Array, Array], tuple[Any, Any]]) -> Gradients:
    """The gradients of a broadcast binary function with these partial derivatives."""

    def grads(w: Array, x: Array, y: Array) -> list[Array]:
        dx, dy = partials(*np.broadcast_arrays(x, y))
        return [unbroadcast(w * dx, x.shape), unbroadcast(w * dy, y.shape)]

    return grads


def zero(x: Array, y: Array) -> tuple[float, float]:
    return 0.0, 0.0


# =========================================================================================
# Task 2.1: map, zip and reduce
# =========================================================================================

# -- every stage-1 operation but matmul, through the Tensor API ----------------------------

UNARY = [
    *UNARY_OPS,
    pytest.param(lambda t: t ** (-1.5), lambda x: x**-1.5, lambda x: -1.5 * x**-2.5, positive,
                 id="pow-1.5"),
    pytest.param(lambda t: (t + 1.0) / 4.0 - 0.5, lambda x: (x + 1.0) / 4.0 - 0.5,
                 lambda x: np.full_like(x, 0.25), values, id="more-numbers"),
]  # fmt: skip


@pytest.mark.task2_1
@pytest.mark.parametrize(("op", "oracle", "derivative", "elements"), UNARY)
@given(data=st.data(), seed=seeds)
def test_unary_ops_forward_and_backward(
    op: Callable[[Tensor], Tensor],
    oracle: Callable[[Array], Array],
    derivative: Callable[[Array], Array],
    elements: st.SearchStrategy[float],
    data: st.DataObject,
    seed: int,
) -> None:
    x = data.draw(arrays(elements=elements), label="x")
    layout = data.draw(layouts(x.ndim), label="layout")
    compare(op, oracle, elementwise(derivative), [x], [layout], seed)


BINARY = [
    pytest.param(lambda a, b: a + b, np.add, lambda x, y: (1.0, 1.0), values, id="add"),
    pytest.param(lambda a, b: a - b, np.subtract, lambda x, y: (1.0, -1.0), values, id="sub"),
    pytest.param(lambda a, b: a * b, np.multiply, lambda x, y: (y, x), values, id="mul"),
    pytest.param(lambda a, b: a / b, lambda x, y: x / y, lambda x, y: (1.0 / y, -x / (y * y)),
                 nonzero, id="div"),
    pytest.param(lambda a, b: a < b, lambda x, y: (x < y) * 1.0, zero, values, id="lt"),
    pytest.param(lambda a, b: a > b, lambda x, y: (x > y) * 1.0, zero, values, id="gt"),
    pytest.param(lambda a, b: a == b, lambda x, y: (x == y) * 1.0, zero, values, id="eq"),
    pytest.param(lambda a, b: a != b, lambda x, y: (x != y) * 1.0, zero, values, id="ne"),
    pytest.param(lambda a, b: a.is_close(b), lambda x, y: (np.abs(x - y) < 1e-2) * 1.0, zero,
                 near, id="is_close"),
]  # fmt: skip


@pytest.mark.task2_1
@pytest.mark.parametrize(("op", "oracle", "partials", "b_elements"), BINARY)
@given(pair=broadcast_pairs(min_dims=1, max_size=5), data=st.data(), seed=seeds)
def test_binary_ops_broadcast_forward_and_backward(
    op: Callable[[Tensor, Tensor], Tensor],
    oracle: Callable[[Array, Array], Array],
    partials: Callable[[Array, Array], tuple[Any, Any]],
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
    compare(op, oracle, pairwise(partials), [x, y], [lx, ly], seed)


def reduction_grads(name: str, dim: int | None) -> Gradients:
    """The gradient of ``x.<name>(dim, keepdim)``: ``w`` spread back over the reduced
    dimension(s); the max's goes to the entries equal to the maximum, shared on ties."""

    def grads(w: Array, x: Array) -> list[Array]:
        axis = None if dim is None else dim % x.ndim
        kept = tuple(1 if axis in (None, d) else n for d, n in enumerate(x.shape))
        spread = np.broadcast_to(w.reshape(kept), x.shape)
        if name == "sum":
            return [spread]
        if name == "mean":
            return [spread / (x.size if axis is None else x.shape[axis])]
        mask = (x == np.max(x, axis=axis, keepdims=True)) * 1.0
        return [mask * spread / np.sum(mask, axis=axis, keepdims=True)]

    return grads


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

    compare(f, f_np, reduction_grads(name, dim), [x], [layout], seed)


def rearranged_grads(f_np: Callable[[Array], Array]) -> Gradients:
    """The gradient of ``exp(f(x))`` for an ``f`` that only moves entries (a view): each
    entry's ``w * exp`` goes back to the entry it came from."""

    def grads(w: Array, x: Array) -> list[Array]:
        source = f_np(np.arange(x.size, dtype=np.float64).reshape(x.shape)).astype(np.int64)
        g = np.zeros(x.size)
        np.add.at(g, source.reshape(-1), (w * np.exp(f_np(x))).reshape(-1))
        return [g.reshape(x.shape)]

    return grads


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
    compare(
        lambda t: f(t).exp(), lambda v: np.exp(f_np(v)), rearranged_grads(f_np), [x], [layout],
        seed,
    )  # fmt: skip


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


# -- large inputs: every parallel piece, the last one too -----------------------------------

# Sizes that no block, chunk or tile size divides (odd, most of them primes), each
# with at least 32768 outputs, so that the reference's parallel paths run: a kernel that
# drops, repeats or misplaces the last piece of its parallel loop fails these.
BIG = (211, 199)  # 41,989 entries
LONG = 40_961  # a prime


def big_layouts(shape: Shape) -> list[tuple[str, Layout]]:
    dims = len(shape)
    return [
        ("contiguous", (tuple(range(dims)), 1)),
        ("stored transposed", (tuple(reversed(range(dims))), 1)),
        ("with gaps", (tuple(range(dims)), 2)),
    ]


def only_entries_written(out: Array, size: int) -> bool:
    """True when exactly ``size`` slots of ``out`` (filled with nan before) hold a number:
    with every entry already checked against a finite oracle, no gap was written."""
    return int(np.count_nonzero(~np.isnan(out))) == size


@pytest.mark.task2_1
@pytest.mark.parametrize(
    ("code", "oracle"),
    [(OP_EXP, np.exp), (OP_RELU, lambda x: np.where(x > 0.0, x, 0.0)),
     (OP_SIGMOID, lambda x: 1.0 / (1.0 + np.exp(-x)))],
    ids=["exp", "relu", "sigmoid"],
)  # fmt: skip
def test_large_maps_write_every_entry(code: int, oracle: Callable[[Array], Array]) -> None:
    """Aligned and not, broadcast along either dimension, into outputs in any layout."""
    rng = np.random.default_rng(code)
    cases: list[tuple[Shape, Shape]] = [((LONG,), (LONG,)), (BIG, BIG), (BIG, (BIG[0], 1)),
                                        (BIG, (BIG[1],)), ((3, 7, 2003), (7, 1))]  # fmt: skip
    for out_shape, in_shape in cases:
        x = rng.uniform(-3.0, 3.0, size=in_shape)
        want = np.broadcast_to(oracle(x), out_shape)
        for in_name, in_layout in big_layouts(in_shape):
            for out_name, out_layout in big_layouts(out_shape):
                storage, in_strides = strided(x, in_layout)
                out, out_strides = strided(np.zeros(out_shape), out_layout)
                out[:] = np.nan
                tensor_map_kernel(
                    code, out, ints(out_shape), ints(out_strides), storage, ints(in_shape),
                    ints(in_strides),
                )  # fmt: skip
                what = f"map {in_shape} ({in_name}) to {out_shape} ({out_name})"
                assert_close(read(out, out_shape, out_strides), want, what)
                assert only_entries_written(out, want.size), f"{what}: wrote a gap"


@pytest.mark.task2_1
@pytest.mark.parametrize(
    ("code", "oracle"), [(OP_ADD, np.add), (OP_MUL, np.multiply), (OP_MAX, np.maximum)],
    ids=["add", "mul", "max"],
)  # fmt: skip
def test_large_zips_write_every_entry(code: int, oracle: Callable[[Array, Array], Array]) -> None:
    rng = np.random.default_rng(code)
    cases: list[tuple[Shape, Shape]] = [((LONG,), (LONG,)), (BIG, BIG), (BIG, (BIG[1],)),
                                        ((BIG[0], 1), BIG), ((3, 1, 2003), (7, 1)),
                                        # a bias over channels, both ways round
                                        ((5, 7, 31, 37), (1, 7, 1, 1)),
                                        ((7, 1, 1), (5, 7, 31, 37))]  # fmt: skip
    for a_shape, b_shape in cases:
        out_shape = tuple(np.broadcast_shapes(a_shape, b_shape))
        x, y = rng.uniform(-3.0, 3.0, size=a_shape), rng.uniform(-3.0, 3.0, size=b_shape)
        want = oracle(x, y)
        for name, layout in big_layouts(out_shape):
            # a and the output alike (aligned when both are whole tensors), b as given
            a_storage, a_strides = strided(x, layout if a_shape == out_shape else plain(x))
            b_storage, b_strides = strided(y, plain(y))
            out, out_strides = strided(np.zeros(out_shape), layout)
            out[:] = np.nan
            tensor_zip_kernel(
                code, out, ints(out_shape), ints(out_strides),
                a_storage, ints(a_shape), ints(a_strides),
                b_storage, ints(b_shape), ints(b_strides),
            )  # fmt: skip
            what = f"zip {a_shape} and {b_shape} ({name})"
            assert_close(read(out, out_shape, out_strides), want, what)
            assert only_entries_written(out, want.size), f"{what}: wrote a gap"


BIG_REDUCTIONS = [
    # (input shape, dim, layout of the input, parts): along a middle dimension of a
    # contiguous tensor (outputs side by side), along the last (long contiguous folds),
    # few long folds cut into parts, many short folds of a transposed input.
    pytest.param((3, 101, 1009), 1, "contiguous", 1, id="middle-dim"),
    pytest.param((301, 113, 3), 1, "contiguous", 1, id="middle-dim-narrow"),
    pytest.param((37, 1031), 1, "contiguous", 1, id="last-dim"),
    pytest.param((3, 20011), 1, "contiguous", 4, id="few-long-folds"),
    pytest.param((20011, 3), 0, "contiguous", 7, id="few-long-folds-dim0"),
    pytest.param((1511, 29), 1, "stored transposed", 1, id="transposed-many-outputs"),
    pytest.param((29, 1511), 0, "with gaps", 1, id="gaps-dim0"),
]


@pytest.mark.task2_1
@pytest.mark.parametrize(("shape", "dim", "layout_name", "parts"), BIG_REDUCTIONS)
def test_large_reductions_fold_every_entry(
    shape: Shape, dim: int, layout_name: str, parts: int
) -> None:
    """Sum and max into start values (not the op's identity), against NumPy. Positive
    entries, so the sums do not cancel and reassociation stays within ``rtol``."""
    rng = np.random.default_rng(sum(shape))
    x = rng.uniform(0.5, 1.5, size=shape)
    x.reshape(-1)[rng.integers(x.size)] = 9.0  # one maximum somewhere inside
    out_shape = tuple(1 if d == dim else n for d, n in enumerate(shape))
    layout = dict(big_layouts(shape))[layout_name]
    a_storage, a_strides = strided(x, layout)
    for code, oracle in [
        (OP_ADD, lambda s: s + x.sum(dim, keepdims=True)),
        (OP_MAX, lambda s: np.maximum(s, x.max(dim, keepdims=True))),
    ]:
        start = rng.uniform(-2.0, 2.0, size=out_shape)
        out, out_strides = strided(start, (tuple(reversed(range(len(shape)))), 2))
        tensor_reduce_kernel(
            code, out, ints(out_shape), ints(out_strides), a_storage, ints(shape),
            ints(a_strides), dim, parts,
        )  # fmt: skip
        what = f"op {code} over dim {dim} of {shape} ({layout_name}, parts {parts})"
        assert_close(read(out, out_shape, out_strides), oracle(start), what)
        assert only_entries_written(out, start.size), f"{what}: wrote a gap"


# -- in parallel ----------------------------------------------------------------------------


def kernel_args(*arrays_: tuple[Array, Layout]) -> tuple[Any, ...]:
    """Storage, shape and strides (int32) of each ``(values, layout)`` in turn."""
    args: list[Any] = []
    for x, layout in arrays_:
        storage, strides = strided(x, layout)
        args += [storage, ints(x.shape), ints(strides)]
    return tuple(args)


@pytest.mark.task2_1
@pytest.mark.parametrize("layout_name", ["contiguous", "stored transposed"])
def test_map_kernel_runs_in_parallel(layout_name: str) -> None:
    x = np.random.default_rng(1).uniform(-1.0, 1.0, size=(1000, 1009))
    layout = dict(big_layouts(x.shape))[layout_name]
    out = np.empty(x.size)
    s, st_ = ints(x.shape), ints((1009, 1))
    args = kernel_args((x, layout))
    assert_parallel(lambda: tensor_map_kernel(OP_EXP, out, s, st_, *args), "tensor_map_kernel",
                    tensor_map_kernel)  # fmt: skip
    np.testing.assert_allclose(out.reshape(x.shape), np.exp(x), rtol=1e-12)


@pytest.mark.task2_1
@pytest.mark.parametrize("b_shape", [(1000, 1009), (1009,)], ids=["same-shape", "broadcast"])
def test_zip_kernel_runs_in_parallel(b_shape: Shape) -> None:
    rng = np.random.default_rng(2)
    x, y = rng.uniform(0.5, 1.5, size=(1000, 1009)), rng.uniform(-1.0, 1.0, size=b_shape)
    out = np.empty(x.size)
    s, st_ = ints(x.shape), ints((1009, 1))
    args = kernel_args((x, plain(x)), (y, plain(y)))
    assert_parallel(lambda: tensor_zip_kernel(OP_POW, out, s, st_, *args), "tensor_zip_kernel",
                    tensor_zip_kernel)  # fmt: skip
    np.testing.assert_allclose(out.reshape(x.shape), np.power(x, y), rtol=1e-12)


@pytest.mark.task2_1
@pytest.mark.parametrize("dim", [0, 1])
def test_reduce_kernel_runs_in_parallel(dim: int) -> None:
    """Many outputs (1000 or 1009), each the sum of a line of the other dimension."""
    x = np.random.default_rng(3).uniform(0.0, 1.0, size=(1000, 1009))
    out_shape = (1, 1009) if dim == 0 else (1000, 1)
    out = np.zeros(x.size // x.shape[dim])
    out_strides = ints((out_shape[1], 1))
    args = kernel_args((x, plain(x)))

    def call() -> None:
        out[:] = 0.0
        tensor_reduce_kernel(OP_ADD, out, ints(out_shape), out_strides, *args, dim, 1)

    assert_parallel(call, "tensor_reduce_kernel", tensor_reduce_kernel)
    np.testing.assert_allclose(out.reshape(out_shape), x.sum(dim, keepdims=True), rtol=1e-12)


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


def matmul_grads(w: Array, x: Array, y: Array) -> list[Array]:
    """The gradients of ``(x @ y * w).sum()``: ``w @ y^T`` and ``x^T @ w``, summed over
    broadcast batch dimensions; a 1-D operand is a row (left) or column (right)."""
    a = x.reshape(1, -1) if x.ndim == 1 else x
    b = y.reshape(-1, 1) if y.ndim == 1 else y
    w = w.reshape(np.matmul(a, b).shape)
    ga = unbroadcast(w @ np.swapaxes(b, -1, -2), a.shape)
    gb = unbroadcast(np.swapaxes(a, -1, -2) @ w, b.shape)
    return [ga.reshape(x.shape), gb.reshape(y.shape)]


def transposed_tanh_grads(w: Array, xt: Array, yt: Array) -> list[Array]:
    """The gradients of ``(tanh(xt^T @ yt^T) * w).sum()``."""
    a, b = np.swapaxes(xt, -1, -2), np.swapaxes(yt, -1, -2)
    ga, gb = matmul_grads(w * (1.0 - np.tanh(a @ b) ** 2), a, b)
    return [np.swapaxes(ga, -1, -2), np.swapaxes(gb, -1, -2)]


@pytest.mark.task2_2
@given(case=matmul_cases(), data=st.data(), seed=seeds)
def test_matmul_forward_and_backward(
    case: tuple[Array, Array], data: st.DataObject, seed: int
) -> None:
    x, y = case
    lx = data.draw(layouts(x.ndim), label="a layout")
    ly = data.draw(layouts(y.ndim), label="b layout")
    compare(lambda a, b: a @ b, np.matmul, matmul_grads, [x, y], [lx, ly], seed)


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
    compare(lambda a, b: a @ b, np.matmul, matmul_grads, [x, y], [plain(x), plain(y)], 0)
    # The same product with both operands stored transposed (last two dims swapped).
    if x.ndim > 1 and y.ndim > 1:
        swap_x = (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2)
        swap_y = (*range(y.ndim - 2), y.ndim - 1, y.ndim - 2)
        layouts_ = [(swap_x, 1), (swap_y, 2)]
        compare(lambda a, b: a @ b, np.matmul, matmul_grads, [x, y], layouts_, 1)


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
    compare(
        lambda a, b: (a.transpose() @ b.transpose()).tanh(),
        lambda a, b: np.tanh(np.swapaxes(a, -1, -2) @ np.swapaxes(b, -1, -2)),
        transposed_tanh_grads,
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


@pytest.mark.task2_2
@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((257, 131), (131, 139)), ((3, 67, 29), (29, 31)), ((2, 1, 45, 53), (3, 53, 41)),
     ((37, 1), (1, 1031))],
    ids=lambda shape: "x".join(map(str, shape)),
)  # fmt: skip
def test_large_matmul_kernel_writes_every_entry(a_shape: Shape, b_shape: Shape) -> None:
    """Products of at least 32768 multiply-adds whose sizes no chunk or tile size divides,
    the kernel called directly: operands contiguous or stored transposed (``b`` too),
    into a contiguous output or a transposed one with gaps."""
    rng = np.random.default_rng(sum(a_shape) + sum(b_shape))
    x, y = rng.normal(size=a_shape), rng.normal(size=b_shape)
    want = np.matmul(x, y)
    for name, layout in [("contiguous", plain), ("transposed", transposed)]:
        a_storage, a_strides = strided(x, layout(x))
        b_storage, b_strides = strided(y, layout(y))
        out_layout = plain(want) if name == "contiguous" else transposed(want, 2)
        out, out_strides = strided(np.zeros(want.shape), out_layout)
        out[:] = np.nan
        tensor_matrix_multiply_kernel(
            out, ints(want.shape), ints(out_strides),
            a_storage, ints(x.shape), ints(a_strides),
            b_storage, ints(y.shape), ints(b_strides),
        )  # fmt: skip
        what = f"{a_shape} @ {b_shape}, {name}"
        np.testing.assert_allclose(
            read(out, want.shape, out_strides), want, rtol=1e-10, atol=1e-10, err_msg=what
        )
        assert only_entries_written(out, want.size), f"{what}: wrote a gap"


@pytest.mark.task2_2
def test_matmul_kernel_runs_in_parallel() -> None:
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(2, 150, 200)), rng.normal(size=(200, 170))
    want = np.matmul(x, y)
    out = np.empty(want.size)
    args = kernel_args((x, plain(x)), (y, plain(y)))
    shape, strides = ints(want.shape), ints((150 * 170, 170, 1))
    assert_parallel(
        lambda: tensor_matrix_multiply_kernel(out, shape, strides, *args),
        "tensor_matrix_multiply_kernel",
        tensor_matrix_multiply_kernel,
    )
    np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-10, atol=1e-10)


# =========================================================================================
# Provided (ungraded): the given backend's routing of large products
# =========================================================================================

STUB_2_3 = "Task 2.3: implement gemm in module2/fast_matmul.py (see module2/README.md)"


def test_an_unfinished_task_2_3_leaves_large_products_to_task_2_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Task 2.3 is optional: while its kernel raises the handout's stub error, large
    products go to task 2.2's kernel (the stub is tried once per process); any other
    error from it propagates. Both kernels are stand-ins here, so this checks the given
    routing alone."""
    calls: list[str] = []

    def numpy_product(out: Array, out_shape: Array, out_strides: Array, *operands: Any) -> None:
        a = read(operands[0], tuple(operands[1]), operands[2])
        b = read(operands[3], tuple(operands[4]), operands[5])
        view = np.lib.stride_tricks.as_strided(
            out, tuple(out_shape), tuple(int(s) * 8 for s in out_strides)
        )
        view[...] = a @ b

    def task_2_2(*args: Any) -> None:
        calls.append("2.2")
        numpy_product(*args)

    def stub(*args: Any) -> None:
        calls.append("2.3")
        raise NotImplementedError(STUB_2_3)

    monkeypatch.setattr(fast_matmul, "use_packed", True)
    monkeypatch.setattr(fast_ops, "tensor_matrix_multiply_kernel", task_2_2)
    monkeypatch.setattr(fast_matmul, "tensor_matrix_multiply_packed", stub)
    rng = np.random.default_rng(9)
    av, bv = rng.normal(size=(70, 80)), rng.normal(size=(80, 90))  # 504,000 multiply-adds
    a, b = from_numpy(av, FastTensorBackend), from_numpy(bv, FastTensorBackend)
    for _ in range(2):
        check(FastOps.matrix_multiply(a, b), av @ bv, "a large product while 2.3 is a stub")
    assert calls == ["2.3", "2.2", "2.2"]
    assert fast_matmul.use_packed is False

    def broken(*args: Any) -> None:
        raise NotImplementedError("micro_kernel is not written yet")

    monkeypatch.setattr(fast_matmul, "use_packed", True)
    monkeypatch.setattr(fast_matmul, "tensor_matrix_multiply_packed", broken)
    with pytest.raises(NotImplementedError, match="micro_kernel is not written yet"):
        FastOps.matrix_multiply(a, b)
    assert fast_matmul.use_packed is True


def test_every_cached_kernel_is_keyed_on_the_files_it_inlines() -> None:
    """``module2/cache.py`` keys each cached kernel of a watched file on the files whose
    code it inlines, so an edit to ``module0/operators.py`` recompiles it. Numba picks a
    kernel's cache locator when the kernel is decorated. Bug caught: ``cache.install()``
    ran in fast_ops.py after ``from module2.fast_paths import ...``, so fast_paths.py's
    cached kernels (``vector_math_map``, ``matmul_small``) kept Numba's plain locator
    and loaded stale code after an edit of vector_math.py or operators.py."""
    import importlib

    from module2 import cache

    checked = []
    for name in ("module2.fast_ops", "module2.fast_matmul", "module2.fast_paths",
                 "module4.fast_conv", "module5.fused"):  # fmt: skip
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:  # fast_paths: the reference's alone
            continue
        watched = os.path.abspath(module.__file__ or "") in cache.WATCHED
        for attr, value in vars(module).items():
            impl = getattr(getattr(value, "_cache", None), "_impl", None)
            if impl is None or getattr(value, "__module__", None) != name:
                continue
            locator = type(impl._locator)
            assert not watched or locator is cache.DependencyLocator, (name, attr, locator)
            # Numba names the file when it cannot cache a kernel (no AttributeError then)
            assert impl._locator._py_file == os.path.abspath(module.__file__ or ""), attr
            checked.append(attr)
    assert {"tensor_map_kernel", "gemm"} <= set(checked), checked
    try:  # stage 5, where the handout reaches it
        importlib.import_module("module5.fused")
    except ModuleNotFoundError:
        return
    assert "causal_attention" in checked, checked
