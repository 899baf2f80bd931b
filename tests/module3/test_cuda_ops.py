"""Tasks 3.1, 3.2 and 3.3: the CUDA backend against NumPy.

NumPy is the only oracle: no expected value comes from another task's code (not the
fast backend of stage 2, nor the simple one of stage 1), so a bug elsewhere costs its
own task's points and not these. Checked two ways:

* **through the Tensor API** on ``CudaTensorBackend``: every stage-1 operation, forward
  and backward. Forward values are compared with NumPy; gradients with closed forms in
  NumPy (elementwise derivatives summed back over broadcast dimensions, the reductions'
  gradients with ties shared) or, for the smooth layout operations and the matrix
  product, central differences of the NumPy forward. Leaves hold their values on the
  host or already on the device, in any layout;
* **the kernels launched directly** on device arrays, so that layouts and launches the
  backend never makes itself are reached too: outputs that are permuted or have gaps,
  both sides of the aligned fast path of map and zip, more threads than entries, a
  reduction folded by fewer threads than entries, a product written into a transposed
  output, and ``sum_practice`` (through ``block_sums`` and launched with a spare block);
* **how** the reductions work: on the simulator the test records the shared arrays a
  kernel allocates, which threads write into them and the barriers, so a reduction that
  one thread does alone fails; on a GPU the compiled kernel's PTX must store to shared
  memory and hold a barrier (``tests/module3/device.py``).

Task 3.1's tests use map and zip alone: gradients are taken with ``out.backward(w)``
(no reduction), and binary operations broadcast only forward. Their gradients through
broadcasting (summed back by ``add_reduce``) are tested with task 3.2.

Without a GPU everything runs on Numba's CUDA simulator (``autograder/pytest_plugin``
switches it on), where every CUDA thread is a Python thread: a launch costs about 0.2 ms
per thread, a matmul block of 256 threads about half a second. So shapes are tiny (1 to
3 dimensions of sizes 1 to 4), each Hypothesis test runs 5 or 10 examples and does not
shrink a failing one (``tests/module3/device.py``), and only a few launches are larger:
two products past one 32x32 tile, maps and zips and a reduction past one block of
threads, all at sizes that are not multiples of the block or tile.

An unimplemented kernel writes nothing into an uninitialised output, which may happen
to hold the right values already; the autouse fixture ``uninitialised_memory_is_nan``
(``tests/module3/device.py``) fills every new device array with nan, so a kernel that
skips an entry is always caught. Values read back from the framework go through
``exact_tensor`` (``tests/strict.py``), which copies a device storage with Numba's own
method.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from module0 import operators
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import TensorData
from module1.tensor_ops import is_close_float
from module3.cuda_ops import (
    BLOCK_DIM,
    TILE,
    TILE_ROWS,
    CudaOps,
    CudaTensorBackend,
    block_sums,
    reduce_threads,
    sum_practice,
    tensor_map,
    tensor_matrix_multiply,
    tensor_reduce,
    tensor_zip,
)
from tests.layouts import (
    UNARY_OPS,
    Layout,
    assert_close,
    broadcast_pairs,
    check,
    gaps,
    layouts,
    nonzero,
    positive,
    read,
    strided,
    values,
)
from tests.module3.device import (
    device_copy,
    examples,
    host,
    shared_memory_log,
    uninitialised_memory_is_nan,
)
from tests.strict import exact_tensor

Shape = tuple[int, ...]
Array = np.ndarray

__all__ = ["uninitialised_memory_is_nan"]  # an autouse fixture: every test here uses it


# Examples per Hypothesis test: on the simulator one costs 10-500 ms (a matmul block,
# a tenth of a second and more; the gradients of a product, three products).
MANY = examples(10)
FEW = examples(5)

# -- strategies and helpers -------------------------------------------------------------

sizes = st.integers(min_value=1, max_value=4)
shapes = st.lists(sizes, min_size=1, max_size=3).map(tuple)
near = st.one_of(values, st.floats(-0.03, 0.03))
seeds = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def arrays(draw: st.DrawFn, shape: Shape | None = None, elements: Any = values) -> Array:
    if shape is None:
        shape = draw(shapes)
    return draw(hnp.arrays(np.float64, shape, elements=elements))


def leaves(
    xs: Sequence[Array], layouts_: Sequence[Layout], backend: Any, on_device: bool = False
) -> list[Tensor]:
    """Leaves that want gradients, holding ``xs`` in ``layouts_`` (gaps hold nan), their
    storages on the host or (``on_device``) already in device memory."""
    out = []
    for x, layout in zip(xs, layouts_, strict=True):
        storage, strides = strided(x, layout)
        data = TensorData(device_copy(storage) if on_device else storage, x.shape, strides)
        out.append(Tensor(data, backend=backend, requires_grad=True))
    return out


GradOracle = Callable[[Sequence[Array], Array], list[Array]]
"""Given the inputs and the gradient ``w`` of the output, each input's gradient."""

EPS = 1e-6
"""Step of the central differences."""


def sum_to(grad: Array, shape: Shape) -> Array:
    """``grad`` summed back to ``shape`` over the dimensions NumPy broadcast it along."""
    extra = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(extra))) if extra else grad
    ones = tuple(d for d, s in enumerate(shape) if s == 1 and grad.shape[d] != 1)
    return grad.sum(axis=ones, keepdims=True) if ones else grad


def elementwise(*partials: Callable[..., Any]) -> GradOracle:
    """The gradients of an elementwise function of broadcast inputs: ``w`` times the
    partial derivative with respect to each input, summed back to its shape."""

    def grads(xs: Sequence[Array], w: Array) -> list[Array]:
        return [
            sum_to(w * np.broadcast_to(partial(*xs), w.shape), x.shape)
            for partial, x in zip(partials, xs, strict=True)
        ]

    return grads


def central(f_np: Callable[..., Array]) -> GradOracle:
    """The gradients of ``sum(f_np(*xs) * w)`` by central differences, entry by entry;
    the two forwards are subtracted before weighting, so outputs an entry does not
    touch cancel exactly. For smooth functions only (no kinks, ties or jumps)."""

    def grads(xs: Sequence[Array], w: Array) -> list[Array]:
        out = []
        for arg, x in enumerate(xs):
            grad = np.zeros(x.shape)
            for index in np.ndindex(*x.shape):
                plus = [a.copy() for a in xs]
                minus = [a.copy() for a in xs]
                plus[arg][index] += EPS
                minus[arg][index] -= EPS
                grad[index] = np.sum((f_np(*plus) - f_np(*minus)) * w) / (2.0 * EPS)
            out.append(grad)
        return out

    return grads


def check_cuda(
    f: Callable[..., Tensor],
    oracle: Callable[..., Array],
    grads: GradOracle | None,
    xs: Sequence[Array],
    layouts_: Sequence[Layout],
    seed: int,
    on_device: bool = False,
    backward: str = "sum",
) -> None:
    """``f`` of leaves holding ``xs`` in ``layouts_`` on the CUDA backend: its values
    against ``oracle(*xs)``; then (unless ``grads`` is None) the leaves' gradients of
    ``(f(...) * w).sum()`` (``backward="sum"``) or of ``f(...)`` with gradient ``w``
    (``"direct"``: maps and zips only), ``w`` random, against ``grads(xs, w)``."""
    gpu = leaves(xs, layouts_, CudaTensorBackend, on_device)
    out = f(*gpu)
    want = np.asarray(oracle(*xs), dtype=np.float64)
    check(out, want, "cuda result vs NumPy")
    if grads is None:
        return
    w = np.random.default_rng(seed).normal(size=want.shape).reshape(want.shape)
    if backward == "sum":
        (out * from_numpy(w, backend=CudaTensorBackend)).sum().backward()
    else:
        out.backward(from_numpy(w, backend=CudaTensorBackend))
    for i, (leaf, x, expected) in enumerate(zip(gpu, xs, grads(xs, w), strict=True)):
        got = exact_tensor(leaf.grad, f"input {i}.grad")
        assert got.shape == x.shape, f"input {i}.grad has shape {got.shape}, not {x.shape}"
        scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
        np.testing.assert_allclose(
            got, expected, rtol=1e-6, atol=1e-8 * scale, err_msg=f"input {i}.grad vs NumPy"
        )
        check(leaf, x, f"input {i} after forward and backward")


def launch_1d(size: int, threads: int) -> tuple[int, int]:
    """A grid of ``threads``-thread blocks covering ``size`` entries, plus a spare block
    whose threads are all past the end."""
    return -(-size // threads) + 1, threads


# =========================================================================================
# Task 3.1: map and zip
# =========================================================================================

# -- through the Tensor API ----------------------------------------------------------------


# (operation, NumPy forward, NumPy derivative, inputs): relu's derivative at 0 is 0.
UNARY = [
    *UNARY_OPS,
    pytest.param(Tensor.contiguous, lambda x: x, lambda x: 1.0, values, id="copy"),
]  # fmt: skip


@pytest.mark.task3_1
@pytest.mark.parametrize(("op", "oracle", "derivative", "elements"), UNARY)
@MANY
@given(data=st.data(), on_device=st.booleans(), seed=seeds)
def test_unary_ops_forward_and_backward(
    op: Callable[[Tensor], Tensor],
    oracle: Callable[[Array], Array],
    derivative: Callable[[Array], Any],
    elements: st.SearchStrategy[float],
    data: st.DataObject,
    on_device: bool,
    seed: int,
) -> None:
    x = data.draw(arrays(elements=elements), label="x")
    order, step = data.draw(layouts(x.ndim), label="layout")
    if op is Tensor.contiguous:
        step = 2  # never contiguous, so the copy runs
    grads = elementwise(derivative)
    check_cuda(op, oracle, grads, [x], [(order, step)], seed, on_device, backward="direct")


ZERO = elementwise(lambda x, y: 0.0, lambda x, y: 0.0)
"""The comparisons' gradients: zero (they are constant almost everywhere)."""

# (operation, NumPy forward, NumPy gradients, values of b)
BINARY = [
    pytest.param(lambda a, b: a + b, np.add, elementwise(lambda x, y: 1.0, lambda x, y: 1.0),
                 values, id="add"),
    pytest.param(lambda a, b: a - b, np.subtract,
                 elementwise(lambda x, y: 1.0, lambda x, y: -1.0), values, id="sub"),
    pytest.param(lambda a, b: a * b, np.multiply, elementwise(lambda x, y: y, lambda x, y: x),
                 values, id="mul"),
    pytest.param(lambda a, b: a / b, lambda x, y: x / y,
                 elementwise(lambda x, y: 1.0 / y, lambda x, y: -x / (y * y)), nonzero,
                 id="div"),
    pytest.param(lambda a, b: a < b, lambda x, y: (x < y) * 1.0, ZERO, values, id="lt"),
    pytest.param(lambda a, b: a > b, lambda x, y: (x > y) * 1.0, ZERO, values, id="gt"),
    pytest.param(lambda a, b: a == b, lambda x, y: (x == y) * 1.0, ZERO, values, id="eq"),
    pytest.param(lambda a, b: a != b, lambda x, y: (x != y) * 1.0, ZERO, values, id="ne"),
    pytest.param(lambda a, b: a.is_close(b), lambda x, y: (np.abs(x - y) < 1e-2) * 1.0, ZERO,
                 near, id="is_close"),
]  # fmt: skip


def binary_inputs(
    data: st.DataObject, pair: tuple[Shape, Shape], b_elements: st.SearchStrategy[float]
) -> tuple[Array, Array, Layout, Layout]:
    a_elements = values if b_elements is nonzero else b_elements
    x = data.draw(arrays(pair[0], a_elements), label="a")
    y = data.draw(arrays(pair[1], b_elements), label="b")
    return x, y, data.draw(layouts(x.ndim), label="a layout"), data.draw(layouts(y.ndim))


@pytest.mark.task3_1
@pytest.mark.parametrize(("op", "oracle", "grads", "b_elements"), BINARY)
@MANY
@given(pair=broadcast_pairs(min_dims=1, max_dims=3), data=st.data(), on_device=st.booleans())
def test_binary_ops_broadcast_forward(
    op: Callable[[Tensor, Tensor], Tensor],
    oracle: Callable[[Array, Array], Array],
    grads: GradOracle,
    b_elements: st.SearchStrategy[float],
    pair: tuple[Shape, Shape],
    data: st.DataObject,
    on_device: bool,
) -> None:
    x, y, lx, ly = binary_inputs(data, pair, b_elements)
    check_cuda(op, oracle, None, [x, y], [lx, ly], 0, on_device)


@pytest.mark.task3_1
@pytest.mark.parametrize(("op", "oracle", "grads", "b_elements"), BINARY)
@MANY
@given(shape=shapes, data=st.data(), on_device=st.booleans(), seed=seeds)
def test_binary_ops_same_shape_forward_and_backward(
    op: Callable[[Tensor, Tensor], Tensor],
    oracle: Callable[[Array, Array], Array],
    grads: GradOracle,
    b_elements: st.SearchStrategy[float],
    shape: Shape,
    data: st.DataObject,
    on_device: bool,
    seed: int,
) -> None:
    x, y, lx, ly = binary_inputs(data, (shape, shape), b_elements)
    check_cuda(op, oracle, grads, [x, y], [lx, ly], seed, on_device, backward="direct")


LAYOUT_OPS = ["permute", "transpose", "view", "reshape", "view-then-permute"]


@pytest.mark.task3_1
@pytest.mark.parametrize("kind", LAYOUT_OPS)
@MANY
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
        "view": (lambda t: t.contiguous().view(*backwards), lambda v: v.reshape(backwards)),
        "reshape": (lambda t: t.reshape(-1), lambda v: v.reshape(-1)),
        "view-then-permute": (
            lambda t: t.contiguous().view(*backwards).permute(*order),
            lambda v: np.transpose(v.reshape(backwards), order),
        ),
    }
    f, f_np = cases[kind]
    forward = lambda v: np.exp(f_np(v))  # noqa: E731
    check_cuda(lambda t: f(t).exp(), forward, central(forward), [x], [layout], seed,
               backward="direct")  # fmt: skip


@pytest.mark.task3_1
def test_maps_and_zips_past_one_block_of_threads() -> None:
    """300 entries: a full block of 256 threads and part of a second one (the only
    launches of the backend's maps and zips past one block), from a transposed leaf and
    one with gaps, on the host and on the device, forward and backward."""
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(20, 15)), rng.normal(size=(20, 15))
    grads = elementwise(lambda u, v: v * np.exp(u * v) - 1.0, lambda u, v: u * np.exp(u * v))
    for on_device in (False, True):
        check_cuda(
            lambda a, b: (a * b).exp() - a, lambda u, v: np.exp(u * v) - u, grads, [x, y],
            [((1, 0), 1), ((0, 1), 2)], 9, on_device, backward="direct",
        )  # fmt: skip


@pytest.mark.task3_1
def test_maps_into_an_out_tensor_and_functions_outside_the_table() -> None:
    """``map(fn, out)`` broadcasts into ``out`` (on the host or the device: what a sum's
    backward does), and a float function of no stage-0 name is compiled on its own."""
    x = np.linspace(-2.0, 2.0, 24).reshape(2, 3, 4)
    storage, strides = strided(x, ((2, 0, 1), 2))
    t = Tensor(TensorData(device_copy(storage), x.shape, strides), backend=CudaTensorBackend)
    big = (2, 2, 3, 4)
    for where in ("host", "device"):
        nans = np.full(math.prod(big), np.nan)
        out = Tensor(
            TensorData(nans if where == "host" else device_copy(nans), big, (24, 12, 4, 1)),
            backend=CudaTensorBackend,
        )
        assert CudaTensorBackend.id_map(t, out) is out
        check(out, np.broadcast_to(x, big), f"id map into an out on the {where}")
        assert CudaTensorBackend.exp_map(t, out) is out
        check(out, np.broadcast_to(np.exp(x), big), f"exp map into an out on the {where}")
    triple = CudaOps.map(lambda v: v * 3.0 + 1.0)
    check(triple(t), x * 3.0 + 1.0, "a map of a new function")
    add_half = CudaOps.zip(lambda u, v: u + 0.5 * v)
    row = from_numpy(np.array([1.0, -2.0, 4.0, 8.0]), backend=CudaTensorBackend)
    check(add_half(t, row), x + 0.5 * np.array([1.0, -2.0, 4.0, 8.0]), "a zip of a new function")
    check(t, x, "the input after the maps")


# -- the kernels, launched directly ---------------------------------------------------------

UNARY_FNS = [
    pytest.param(operators.neg, np.negative, values, id="neg"),
    pytest.param(operators.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)), values, id="sigmoid"),
    pytest.param(operators.relu, lambda x: np.where(x > 0.0, x, 0.0), values, id="relu"),
    pytest.param(operators.log, np.log, positive, id="log"),
    pytest.param(operators.exp, np.exp, values, id="exp"),
    pytest.param(operators.id, lambda x: x, values, id="id"),
    pytest.param(operators.inv, lambda x: 1.0 / x, nonzero, id="inv"),
    pytest.param(operators.tanh, np.tanh, values, id="tanh"),
]

BINARY_FNS = [
    pytest.param(operators.add, np.add, values, values, id="add"),
    pytest.param(operators.mul, np.multiply, values, values, id="mul"),
    pytest.param(operators.lt, lambda x, y: (x < y) * 1.0, values, values, id="lt"),
    pytest.param(operators.eq, lambda x, y: (x == y) * 1.0, values, values, id="eq"),
    pytest.param(operators.max, np.maximum, values, values, id="max"),
    pytest.param(operators.power, np.power, positive, st.floats(-3.0, 3.0), id="pow"),
    pytest.param(operators.relu_back, lambda x, d: np.where(x > 0.0, d, 0.0), values, values,
                 id="relu_back"),
    pytest.param(operators.log_back, lambda x, d: d / x, nonzero, values, id="log_back"),
    pytest.param(operators.inv_back, lambda x, d: -d / (x * x), nonzero, values, id="inv_back"),
    pytest.param(is_close_float, lambda x, y: (np.abs(x - y) < 1e-2) * 1.0, near, near,
                 id="is_close"),
]  # fmt: skip

threads_per_block = st.sampled_from([4, 32])


def output_storage(shape: Shape, layout: Layout) -> tuple[Any, Shape, int]:
    """A nan-filled device storage for ``shape`` in ``layout``: array, strides, length."""
    storage, strides = strided(np.zeros(shape), layout)
    storage[:] = np.nan
    return device_copy(storage), strides, storage.size


@pytest.mark.task3_1
@pytest.mark.parametrize(("fn", "oracle", "elements"), UNARY_FNS)
@MANY
@given(pair=broadcast_pairs(min_dims=1, max_dims=3), data=st.data(), threads=threads_per_block)
def test_map_kernel_reads_and_writes_any_layout(
    fn: Callable[[float], float],
    oracle: Callable[[Array], Array],
    elements: st.SearchStrategy[float],
    pair: tuple[Shape, Shape],
    data: st.DataObject,
    threads: int,
) -> None:
    """Input broadcast into an output that is permuted or has gaps (nan, which must stay
    nan), with a spare block of threads past the last entry."""
    in_shape = pair[0]
    out_shape = tuple(np.broadcast_shapes(*pair))
    x = data.draw(arrays(in_shape, elements), label="x")
    in_storage, in_strides = strided(x, data.draw(layouts(x.ndim), label="in layout"))
    out, out_strides, length = output_storage(out_shape, data.draw(layouts(len(out_shape))))
    size = math.prod(out_shape)
    tensor_map(fn)[launch_1d(size, threads)](
        out, out_shape, out_strides, size, device_copy(in_storage), in_shape, in_strides, False
    )
    got = host(out, length)
    assert_close(read(got, out_shape, out_strides), np.broadcast_to(oracle(x), out_shape))
    assert np.isnan(gaps(got, out_shape, out_strides)).all(), "map wrote outside the output"


@pytest.mark.task3_1
@pytest.mark.parametrize(("fn", "oracle", "a_elements", "b_elements"), BINARY_FNS)
@MANY
@given(pair=broadcast_pairs(min_dims=1, max_dims=3), data=st.data(), threads=threads_per_block)
def test_zip_kernel_reads_and_writes_any_layout(
    fn: Callable[[float, float], float],
    oracle: Callable[[Array, Array], Array],
    a_elements: st.SearchStrategy[float],
    b_elements: st.SearchStrategy[float],
    pair: tuple[Shape, Shape],
    data: st.DataObject,
    threads: int,
) -> None:
    a_shape, b_shape = pair
    out_shape = tuple(np.broadcast_shapes(a_shape, b_shape))
    x = data.draw(arrays(a_shape, a_elements), label="a")
    y = data.draw(arrays(b_shape, b_elements), label="b")
    a_storage, a_strides = strided(x, data.draw(layouts(x.ndim), label="a layout"))
    b_storage, b_strides = strided(y, data.draw(layouts(y.ndim), label="b layout"))
    out, out_strides, length = output_storage(out_shape, data.draw(layouts(len(out_shape))))
    size = math.prod(out_shape)
    tensor_zip(fn)[launch_1d(size, threads)](
        out, out_shape, out_strides, size,
        device_copy(a_storage), a_shape, a_strides,
        device_copy(b_storage), b_shape, b_strides, False,
    )  # fmt: skip
    got = host(out, length)
    assert_close(read(got, out_shape, out_strides), oracle(x, y))
    assert np.isnan(gaps(got, out_shape, out_strides)).all(), "zip wrote outside the output"


@pytest.mark.task3_1
@MANY
@given(data=st.data(), permuted=st.booleans(), threads=threads_per_block)
def test_aligned_fast_path_equals_general_path(
    data: st.DataObject, permuted: bool, threads: int
) -> None:
    """Output and inputs of one shape and strides, storages of exactly ``size`` entries:
    with ``aligned`` True (storage slot ``i`` is entry ``i`` of each) and False, and
    into an output storage one slot longer (whose extra slot stays nan). All give
    NumPy's values."""
    shape = data.draw(st.lists(sizes, min_size=2, max_size=3).map(tuple), label="shape")
    x = data.draw(arrays(shape, nonzero), label="x")
    y = data.draw(arrays(shape, values), label="y")
    order = tuple(reversed(range(len(shape)))) if permuted else tuple(range(len(shape)))
    xs, strides = strided(x, (order, 1))
    ys, _ = strided(y, (order, 1))
    size = xs.size
    a, b = device_copy(xs), device_copy(ys)
    kernels: list[tuple[Any, Callable[..., Array], tuple[Any, ...]]] = [
        (tensor_map(operators.exp), np.exp, (a,)),
        (tensor_map(operators.inv), lambda v: 1.0 / v, (a,)),
        (tensor_zip(operators.add), np.add, (a, b)),
        (tensor_zip(operators.log_back), lambda v, d: d / v, (a, b)),
    ]
    for kernel, oracle, args in kernels:
        want = oracle(*(x, y)[: len(args)])
        for aligned, extra in ((True, 0), (False, 0), (False, 1)):
            out = device_copy(np.full(size + extra, np.nan))
            operands = [arg for array in args for arg in (array, shape, strides)]
            kernel[launch_1d(size, threads)](out, shape, strides, size, *operands, aligned)
            got = host(out, size + extra)
            what = f"{len(args)} input(s), aligned={aligned}, {size + extra} slots"
            assert_close(read(got, shape, strides), want, what)
            assert np.isnan(got[size:]).all(), f"{what}: wrote past the output"


# =========================================================================================
# Task 3.2: reductions
# =========================================================================================


@pytest.mark.task3_2
@pytest.mark.parametrize("size", [1, 5, BLOCK_DIM - 1, BLOCK_DIM, BLOCK_DIM + 1, 3 * BLOCK_DIM + 7])
def test_block_sums_matches_numpy(size: int) -> None:
    a = np.random.default_rng(size).normal(size=size) + 1.0
    got = block_sums(a)
    padded = np.concatenate([a, np.zeros(-size % BLOCK_DIM)])
    want = padded.reshape(-1, BLOCK_DIM).sum(axis=1)
    assert type(got) is np.ndarray and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.task3_2
def test_sum_practice_kernel_blocks_past_the_end_write_zero() -> None:
    """Three blocks over 40 entries (the second one short, the third empty), each writing
    its own slot of an output with one slot more, which stays nan."""
    a = np.arange(1.0, 41.0)
    out = device_copy(np.full(4, np.nan))
    sum_practice[3, BLOCK_DIM](out, device_copy(a), a.size)
    got = host(out, 4)
    np.testing.assert_allclose(got[:3], [a[:32].sum(), a[32:].sum(), 0.0], rtol=1e-12)
    assert np.isnan(got[3])


@pytest.mark.task3_2
def test_sum_practice_combines_each_block_in_shared_memory() -> None:
    """The threads of a block put their entries in shared memory and add them up there,
    behind barriers; one thread summing its block alone fails (``tests/module3/device.py``
    watches the shared arrays on the simulator and reads the PTX on a GPU)."""
    a = np.arange(1.0, 41.0)
    out = device_copy(np.full(2, np.nan))
    with shared_memory_log() as log:
        sum_practice[2, BLOCK_DIM](out, device_copy(a), a.size)
    np.testing.assert_allclose(host(out, 2), [a[:32].sum(), a[32:].sum()], rtol=1e-12)
    log.assert_blocks_cooperate(sum_practice, blocks=2, threads=BLOCK_DIM)


@pytest.mark.task3_2
@pytest.mark.parametrize(("fn", "start", "oracle"), [
    pytest.param(operators.add, 0.0, np.sum, id="sum"),
    pytest.param(operators.max, -math.inf, np.max, id="max"),
])  # fmt: skip
def test_reduce_kernel_folds_in_shared_memory_with_several_threads(
    fn: Callable[[float, float], float], start: float, oracle: Callable[..., Array]
) -> None:
    """Blocks of 8 threads fold a dimension of 21 entries (not a multiple of 8): each
    thread folds a part and the block combines the parts in shared memory behind
    barriers, as ``sum_practice`` does; one thread folding the whole dimension fails."""
    x = np.random.default_rng(3).normal(size=(2, 21))
    kernel = tensor_reduce(fn)
    out = device_copy(np.full(2, np.nan))
    with shared_memory_log() as log:
        kernel[2, 8](out, (2, 1), (1, 1), 2, device_copy(x.reshape(-1)), (2, 21), (21, 1), 1,
                     start)  # fmt: skip
    np.testing.assert_allclose(host(out, 2), oracle(x, axis=1), rtol=1e-12)
    log.assert_blocks_cooperate(kernel, blocks=2, threads=8)


REDUCTIONS = [
    pytest.param("sum", np.sum, id="sum"),
    pytest.param("mean", np.mean, id="mean"),
    pytest.param("max", np.max, id="max"),
]


@pytest.mark.task3_2
@pytest.mark.parametrize(("name", "oracle"), REDUCTIONS)
@MANY
@given(x=arrays(), data=st.data(), on_device=st.booleans(), seed=seeds)
def test_reductions_forward_and_backward(
    name: str, oracle: Callable[..., Array], x: Array, data: st.DataObject, on_device: bool,
    seed: int,
) -> None:  # fmt: skip
    layout = data.draw(layouts(x.ndim), label="layout")
    dim = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")

    def f(t: Tensor) -> Tensor:
        return getattr(t, name)(dim, keepdim)

    def f_np(v: Array) -> Array:
        return oracle(v, axis=dim, keepdims=keepdim)

    def grads(xs: Sequence[Array], w: Array) -> list[Array]:
        """Each entry gets the gradient of the output it went into: all of it for sum,
        a share ``1 / n`` for mean, and for max the entries equal to the maximum share
        it evenly (ties)."""
        (v,) = xs
        spread = w if keepdim or dim is None else np.expand_dims(w, dim)
        count = v.size if dim is None else v.shape[dim]
        if name == "sum":
            return [np.broadcast_to(spread, v.shape) * 1.0]
        if name == "mean":
            return [np.broadcast_to(spread, v.shape) / count]
        hits = (v == np.max(v, axis=dim, keepdims=True)) * 1.0
        return [hits * spread / np.sum(hits, axis=dim, keepdims=True)]

    check_cuda(f, f_np, grads, [x], [layout], seed, on_device)


BACKEND_REDUCTIONS = [
    pytest.param("add_reduce", np.sum, values, id="sum"),
    pytest.param("mul_reduce", np.prod, st.one_of(st.floats(0.5, 2.0), st.floats(-2.0, -0.5)),
                 id="prod"),
    pytest.param("max_reduce", np.max, values, id="max"),
]  # fmt: skip


@pytest.mark.task3_2
@pytest.mark.parametrize(("name", "oracle", "elements"), BACKEND_REDUCTIONS)
@MANY
@given(data=st.data(), on_device=st.booleans())
def test_backend_reduce_along_every_dim(
    name: str,
    oracle: Callable[..., Array],
    elements: st.SearchStrategy[float],
    data: st.DataObject,
    on_device: bool,
) -> None:
    """The backend's ``add_reduce``, ``mul_reduce`` (no Tensor method uses it) and
    ``max_reduce`` along each dimension in turn, against NumPy."""
    x = data.draw(arrays(elements=elements), label="x")
    layout = data.draw(layouts(x.ndim), label="layout")
    [gpu] = leaves([x], [layout], CudaTensorBackend, on_device)
    for dim in range(x.ndim):
        check(getattr(CudaTensorBackend, name)(gpu, dim), oracle(x, dim, keepdims=True))
    check(gpu, x, "the input after the reductions")


REDUCE_FNS = [
    pytest.param(operators.add, 0.0, lambda a, d: np.sum(a, d, keepdims=True), values, id="sum"),
    pytest.param(operators.mul, 1.0, lambda a, d: np.prod(a, d, keepdims=True),
                 st.one_of(st.floats(0.6, 1.5), st.floats(-1.5, -0.6)), id="prod"),
    pytest.param(operators.max, -math.inf, lambda a, d: np.max(a, d, keepdims=True), values,
                 id="max"),
]  # fmt: skip


@pytest.mark.task3_2
@pytest.mark.parametrize(("fn", "start", "oracle", "elements"), REDUCE_FNS)
@MANY
@given(data=st.data())
def test_reduce_kernel_any_layout_and_any_number_of_threads(
    fn: Callable[[float, float], float],
    start: float,
    oracle: Callable[[Array, int], Array],
    elements: st.SearchStrategy[float],
    data: st.DataObject,
) -> None:
    """A dimension of length 1 to 9 folded by blocks of 1 to 16 threads (fewer threads
    than entries: each folds several; more: some fold none), from any layout into an
    output that is permuted or has gaps (which stay nan)."""
    before = data.draw(st.lists(st.integers(1, 3), max_size=1), label="dims before")
    after = data.draw(st.lists(st.integers(1, 3), max_size=1), label="dims after")
    length = data.draw(st.integers(1, 9), label="length")
    threads = data.draw(st.sampled_from([1, 2, 4, reduce_threads(length), 16]), label="threads")
    shape = (*before, length, *after)
    dim = len(before)
    out_shape = (*before, 1, *after)
    x = data.draw(arrays(shape, elements), label="a")
    a_storage, a_strides = strided(x, data.draw(layouts(x.ndim), label="a layout"))
    out, out_strides, slots = output_storage(out_shape, data.draw(layouts(x.ndim)))
    out_size = math.prod(out_shape)
    tensor_reduce(fn)[out_size, threads](
        out, out_shape, out_strides, out_size,
        device_copy(a_storage), shape, a_strides, dim, start,
    )  # fmt: skip
    got = host(out, slots)
    assert_close(read(got, out_shape, out_strides), oracle(x, dim))
    assert np.isnan(gaps(got, out_shape, out_strides)).all(), "reduce wrote outside the output"


@pytest.mark.task3_2
def test_long_reductions_match_numpy() -> None:
    """A dimension of 300 entries, more than the block has threads (each folds several),
    through the backend, the sum's gradient included."""
    rng = np.random.default_rng(5)
    v = rng.normal(size=(2, 300))
    x = from_numpy(v, backend=CudaTensorBackend, requires_grad=True)
    check(x.sum(1), v.sum(1), "sum(1)")
    check(x.max(1), v.max(1), "max(1)")
    check(CudaTensorBackend.mul_reduce(x * 0.0 + 1.001, 1), np.full((2, 1), 1.001**300), "prod")
    check(x.transpose().sum(0), v.sum(1), "transposed sum(0)")
    (x.sum(1) * from_numpy(np.array([1.0, -2.0]), backend=CudaTensorBackend)).sum().backward()
    check(x.grad, np.repeat([[1.0], [-2.0]], 300, axis=1), "x.grad")


@pytest.mark.task3_2
@pytest.mark.parametrize(("op", "oracle", "grads", "b_elements"), BINARY[:4])
@FEW
@given(pair=broadcast_pairs(min_dims=1, max_dims=3), data=st.data(), seed=seeds)
def test_binary_ops_broadcast_backward_sums_the_gradient(
    op: Callable[[Tensor, Tensor], Tensor],
    oracle: Callable[[Array, Array], Array],
    grads: GradOracle,
    b_elements: st.SearchStrategy[float],
    pair: tuple[Shape, Shape],
    data: st.DataObject,
    seed: int,
) -> None:
    """The gradient of a broadcast input is summed back to its shape (``add_reduce``)."""
    x, y, lx, ly = binary_inputs(data, pair, b_elements)
    check_cuda(op, oracle, grads, [x, y], [lx, ly], seed)


# =========================================================================================
# Task 3.3: matrix multiply
# =========================================================================================


@st.composite
def matmul_cases(draw: st.DrawFn, vectors: bool = True) -> tuple[Array, Array]:
    """Operands ``(*batch_a, n, m)`` and ``(*batch_b, m, p)`` with n, m, p in 1..5 and
    broadcast batch dimensions of at most 2 batches; with ``vectors``, sometimes a 1-D
    operand of length m."""
    batch_a, batch_b = draw(broadcast_pairs(min_dims=0, max_dims=1, min_size=1, max_size=2))
    n, m, p = (draw(st.integers(1, 5), label=name) for name in "nmp")
    a_shape: Shape = (*batch_a, n, m)
    b_shape: Shape = (*batch_b, m, p)
    if vectors and draw(st.integers(0, 4)) == 0:
        a_shape = (m,)
    elif vectors and draw(st.integers(0, 4)) == 0:
        b_shape = (m,)
    elements = st.floats(-2.0, 2.0)
    return draw(arrays(a_shape, elements), label="a"), draw(arrays(b_shape, elements), label="b")


@pytest.mark.task3_3
@FEW
@given(case=matmul_cases(), data=st.data(), on_device=st.booleans(), seed=seeds)
def test_matmul_forward_and_backward(
    case: tuple[Array, Array], data: st.DataObject, on_device: bool, seed: int
) -> None:
    x, y = case
    lx = data.draw(layouts(x.ndim), label="a layout")
    ly = data.draw(layouts(y.ndim), label="b layout")
    check_cuda(lambda a, b: a @ b, np.matmul, central(np.matmul), [x, y], [lx, ly], seed,
               on_device)  # fmt: skip


@pytest.mark.task3_3
@FEW
@given(case=matmul_cases(vectors=False), data=st.data(), seed=seeds)
def test_matmul_of_transposed_views_forward_and_backward(
    case: tuple[Array, Array], data: st.DataObject, seed: int
) -> None:
    """``a.transpose() @ b.transpose()`` on leaves stored the other way round."""
    x, y = case
    xt, yt = np.swapaxes(x, -1, -2).copy(), np.swapaxes(y, -1, -2).copy()
    lx = data.draw(layouts(x.ndim), label="a layout")
    ly = data.draw(layouts(y.ndim), label="b layout")

    def f_np(a: Array, b: Array) -> Array:
        return np.swapaxes(a, -1, -2) @ np.swapaxes(b, -1, -2)

    check_cuda(lambda a, b: a.transpose() @ b.transpose(), f_np, central(f_np), [xt, yt],
               [lx, ly], seed)  # fmt: skip


def launch_matmul(out: Any, out_shape: Shape, out_strides: Shape, *operands: Any) -> None:
    n, p = out_shape[-2], out_shape[-1]
    batches = math.prod(out_shape) // (n * p)
    grid = (-(-p // TILE), -(-n // TILE), batches)
    tensor_matrix_multiply[grid, (TILE, TILE_ROWS)](out, out_shape, out_strides, *operands)


@pytest.mark.task3_3
@FEW
@given(case=matmul_cases(vectors=False), data=st.data())
def test_matmul_kernel_writes_any_output_layout(
    case: tuple[Array, Array], data: st.DataObject
) -> None:
    """The kernel launched directly: operands in any layout, into an output that is
    permuted or has gaps (which stay nan)."""
    x, y = case
    want = np.matmul(x, y)
    a_storage, a_strides = strided(x, data.draw(layouts(x.ndim), label="a layout"))
    b_storage, b_strides = strided(y, data.draw(layouts(y.ndim), label="b layout"))
    out, out_strides, slots = output_storage(want.shape, data.draw(layouts(want.ndim)))
    launch_matmul(
        out, want.shape, out_strides,
        device_copy(a_storage), x.shape, a_strides,
        device_copy(b_storage), y.shape, b_strides,
    )  # fmt: skip
    got = host(out, slots)
    assert_close(read(got, want.shape, out_strides), want)
    assert np.isnan(gaps(got, want.shape, out_strides)).all(), "wrote outside the output"


@pytest.mark.task3_3
def test_matmul_kernel_into_a_transposed_output() -> None:
    x = np.arange(24.0).reshape(2, 3, 4) / 7.0
    y = np.arange(-20.0, 20.0).reshape(2, 4, 5) / 3.0
    want = x @ y  # (2, 3, 5)
    out = device_copy(np.full(2 * 3 * 5 + 3, np.nan))  # stored as (5, 2, 3), 3 spare slots
    out_strides = (3, 1, 6)
    launch_matmul(
        out, want.shape, out_strides,
        device_copy(x.reshape(-1)), x.shape, (12, 4, 1),
        device_copy(y.reshape(-1)), y.shape, (20, 5, 1),
    )  # fmt: skip
    got = host(out, 33)
    np.testing.assert_allclose(read(got, want.shape, out_strides), want, rtol=1e-12)
    assert np.isnan(got[30:]).all(), "wrote past the output"
    # b stored column by column (stride 4 between neighbours in a row), a broadcast.
    yt = np.ascontiguousarray(np.swapaxes(y, -1, -2))
    out = device_copy(np.full(33, np.nan))
    launch_matmul(
        out, want.shape, out_strides,
        device_copy(x[0].reshape(-1)), (1, 3, 4), (0, 4, 1),
        device_copy(yt.reshape(-1)), y.shape, (20, 1, 4),
    )  # fmt: skip
    np.testing.assert_allclose(read(host(out, 33), want.shape, out_strides), x[0] @ y, rtol=1e-12)


@pytest.mark.task3_3
def test_matmul_across_several_tiles_matches_numpy() -> None:
    """Sizes past one tile and not multiples of it: 2 x 2 output tiles, 2 steps along
    the inner dimension, each with a short edge; forward and backward, then the same
    product of transposed views."""
    rng = np.random.default_rng(7)
    av, bv = rng.normal(size=(33, 35)), rng.normal(size=(35, 34))
    a = from_numpy(av, backend=CudaTensorBackend, requires_grad=True)
    b = from_numpy(bv, backend=CudaTensorBackend, requires_grad=True)
    out = a @ b
    check(out, av @ bv, "(33, 35) @ (35, 34)")
    w = rng.normal(size=(33, 34))
    (out * from_numpy(w, backend=CudaTensorBackend)).sum().backward()
    check(a.grad, w @ bv.T, "a.grad")
    check(b.grad, av.T @ w, "b.grad")
    at = from_numpy(av.T.copy(), backend=CudaTensorBackend).transpose()
    bt = from_numpy(bv.T.copy(), backend=CudaTensorBackend).transpose()
    check(at @ bt, av @ bv, "transposed operands")


@pytest.mark.task3_3
def test_matmul_long_inner_dimension_and_batches() -> None:
    """An inner dimension of 3 tiles and a bit (3 x 70 @ 70 x 2), and a batch broadcast
    on both sides (shapes (2, 1, 3, 4) @ (2, 4, 2))."""
    rng = np.random.default_rng(8)
    av, bv = rng.normal(size=(3, 70)), rng.normal(size=(70, 2))
    a, b = (from_numpy(v, backend=CudaTensorBackend) for v in (av, bv))
    check(a @ b, av @ bv, "(3, 70) @ (70, 2)")
    av, bv = rng.normal(size=(2, 1, 3, 4)), rng.normal(size=(2, 4, 2))
    a, b = (from_numpy(v, backend=CudaTensorBackend) for v in (av, bv))
    check(a @ b, av @ bv, "(2, 1, 3, 4) @ (2, 4, 2)")
