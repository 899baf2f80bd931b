"""Tasks 4.1 and 4.2: ``conv1d`` and ``conv2d`` (``module4/fast_conv.py``), forward and
backward.

Oracles, all computed with NumPy alone from the same inputs:

* **values**: the windows of a zero-padded copy of the input
  (``sliding_window_view``, every ``stride``-th one) contracted with the weight
  (``einsum``);
* **gradients**: for every kernel offset, the strided slice of the padded input it
  reads gives its weight gradient, and its gradient is added back onto that slice for
  the input's gradient (explicitly the adjoint of the forward sum), plus central
  differences (written here, on values read back with NumPy) on small cases.

Hypothesis draws batch, channels, sizes, kernel sizes, stride and padding (small, so
each example takes milliseconds), both CPU backends, and non-contiguous layouts of the
input and the weight. Fixed larger cases (``LARGE``) have enough work for any parallel
path and sizes that are multiples of no chunk or block: an odd batch above 16, channel
and tap counts that are not multiples of 4, strides and paddings, so a dropped last
chunk or block shows. The kernels are also called directly with nan-filled outputs:
every entry must be written. Each kernel must really run in parallel
(``tests/parallel.py``: per-thread CPU clocks, not timings). Results are read with
``exact_tensor`` (``tests/strict.py``). Error messages and the GPU check are ungraded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError, TensorData
from module1.tensor_functions import BackendError
from module1.tensor_ops import SimpleBackend, TensorBackend
from module2.fast_ops import FastTensorBackend
from module4 import fast_conv
from module4.fast_conv import conv1d, conv2d
from tests.layouts import layouts, make
from tests.module4.reference import ref_conv, ref_grads
from tests.parallel import assert_parallel
from tests.strict import exact_tensor

Array = np.ndarray
Ints = tuple[int, ...]

BACKENDS = (SimpleBackend, FastTensorBackend)
RTOL, ATOL = 1e-10, 1e-11
EPS = 1e-6
PARALLEL_WORK = 1 << 16
"""Multiply-adds that a ``LARGE`` case's every kernel exceeds: the reference's
``PARALLEL_MIN``, under which its kernels stay on the calling thread."""
BATCH_CHUNKS = 16
"""The reference's ``WEIGHT_CHUNKS``: ``LARGE`` batches exceed it and are no multiple."""


# -- NumPy references --------------------------------------------------------------------


def out_size(n: Ints, k: Ints, stride: Ints, padding: Ints) -> Ints:
    return tuple(
        (ni + 2 * p - ki) // s + 1 for ni, ki, s, p in zip(n, k, stride, padding, strict=True)
    )


def close(got: Array, want: Array, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * scale, err_msg=what)


# -- cases ---------------------------------------------------------------------------------


class Case:
    """One drawn convolution: shapes, stride, padding and values."""

    def __init__(
        self, batch: int, cin: int, cout: int, size: Ints, kernel: Ints, stride: Ints,
        padding: Ints, seed: int,
    ) -> None:  # fmt: skip
        rng = np.random.default_rng(seed)
        self.stride, self.padding = stride, padding
        self.x = rng.normal(size=(batch, cin, *size))
        self.w = rng.normal(size=(cout, cin, *kernel))
        self.g = rng.normal(size=(batch, cout, *out_size(size, kernel, stride, padding)))

    def __repr__(self) -> str:
        return (
            f"Case(x {self.x.shape}, w {self.w.shape}, stride {self.stride}, "
            f"padding {self.padding})"
        )


@st.composite
def cases(draw: st.DrawFn, dims: int) -> Case:
    kernel = tuple(draw(st.integers(1, 5)) for _ in range(dims))
    padding = tuple(draw(st.integers(0, 3)) for _ in range(dims))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(dims))
    top = 10 if dims == 1 else 7
    size = tuple(
        draw(st.integers(max(1, k - 2 * p), max(1, k - 2 * p) + top))
        for k, p in zip(kernel, padding, strict=True)
    )
    return Case(
        draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 4)), size, kernel,
        stride, padding, draw(st.integers(0, 2**32 - 1)),
    )  # fmt: skip


def run_conv(case: Case, x: Tensor, w: Tensor, as_pair: bool = True) -> Tensor:
    """``conv1d`` / ``conv2d`` on ``x`` and ``w`` with the case's stride and padding
    (for conv2d an int where both agree and ``as_pair`` is False)."""
    if len(case.stride) == 1:
        return conv1d(x, w, case.stride[0], case.padding[0])
    stride: Any = case.stride
    padding: Any = case.padding
    if not as_pair and stride[0] == stride[1]:
        stride = stride[0]
    if not as_pair and padding[0] == padding[1]:
        padding = padding[0]
    return conv2d(x, w, stride, padding)


def check_forward_and_backward(
    case: Case, backend: TensorBackend, x_layout: Any, w_layout: Any, as_pair: bool
) -> None:
    """Values, result backend and both gradients against the NumPy references."""
    x = make(case.x, x_layout, backend, requires_grad=True)
    w = make(case.w, w_layout, backend, requires_grad=True)
    y = run_conv(case, x, w, as_pair)
    close(exact_tensor(y, "conv result"), ref_conv(case.x, case.w, case.stride, case.padding),
          f"forward of {case}")  # fmt: skip
    assert y.backend is backend, "the result must be on the input's backend"
    y.backward(from_numpy(case.g, backend))
    dx, dw = ref_grads(case.x, case.w, case.g, case.stride, case.padding)
    close(exact_tensor(x.grad, "input grad"), dx, f"input gradient of {case}")
    close(exact_tensor(w.grad, "weight grad"), dw, f"weight gradient of {case}")


def check_kernels(case: Case) -> None:
    """The three kernels called directly, each into a nan-filled output (an entry the
    kernel skips stays nan) on fresh contiguous arrays."""
    dims = len(case.stride)
    geometry = (case.stride[0], case.padding[0]) if dims == 1 else (*case.stride, *case.padding)
    forward, backward_input, backward_weight = (
        (fast_conv.conv1d_forward, fast_conv.conv1d_backward_input,
         fast_conv.conv1d_backward_weight) if dims == 1 else
        (fast_conv.conv2d_forward, fast_conv.conv2d_backward_input,
         fast_conv.conv2d_backward_weight)
    )  # fmt: skip
    x, w, g = case.x.copy(), case.w.copy(), case.g.copy()
    out = np.full(g.shape, np.nan)
    forward(out, x, w, *geometry)
    close(out, ref_conv(case.x, case.w, case.stride, case.padding), f"{forward.__name__}")
    dx_want, dw_want = ref_grads(case.x, case.w, case.g, case.stride, case.padding)
    dx = np.full(x.shape, np.nan)
    backward_input(dx, g, w, *geometry)
    close(dx, dx_want, f"{backward_input.__name__}")
    dw = np.full(w.shape, np.nan)
    backward_weight(dw, x, g, *geometry)
    close(dw, dw_want, f"{backward_weight.__name__}")
    for name, a, b in (("input", x, case.x), ("weight", w, case.w), ("grad_out", g, case.g)):
        np.testing.assert_array_equal(a, b, err_msg=f"the kernels changed their {name}")


def check_grad(case: Case, backend: TensorBackend, entries: int = 4) -> None:
    """The gradients of ``sum(conv(x, w) * g)`` against central differences of the
    forward pass at ``entries`` random entries of the input and of the weight (the
    convolution is linear in each, so the differences are exact up to rounding)."""
    x = from_numpy(case.x, backend, requires_grad=True)
    w = from_numpy(case.w, backend, requires_grad=True)
    run_conv(case, x, w).backward(from_numpy(case.g, backend))
    grads = (exact_tensor(x.grad, "input grad"), exact_tensor(w.grad, "weight grad"))

    def loss(xv: Array, wv: Array) -> float:
        y = exact_tensor(run_conv(case, from_numpy(xv, backend), from_numpy(wv, backend)))
        return float(np.sum(y * case.g))

    rng = np.random.default_rng(case.x.size)
    for which, (name, grad) in enumerate(zip(("input", "weight"), grads, strict=True)):
        values = (case.x, case.w)[which]
        for flat in rng.choice(values.size, min(entries, values.size), replace=False):
            index = np.unravel_index(flat, values.shape)
            moved = []
            for step in (EPS, -EPS):
                args = [case.x.copy(), case.w.copy()]
                args[which][index] += step
                moved.append(loss(*args))
            numeric = (moved[0] - moved[1]) / (2 * EPS)
            assert abs(grad[index] - numeric) <= 1e-6 + 1e-5 * abs(numeric), (
                f"{name} gradient of {case} at {index}: backward {grad[index]!r}, "
                f"central difference {numeric!r}"
            )


LARGE = {
    1: [
        Case(19, 5, 7, (40,), (5,), (1,), (0,), 7),
        Case(23, 5, 7, (41,), (5,), (1,), (2,), 8),
        Case(21, 6, 5, (95,), (4,), (3,), (2,), 9),
    ],
    2: [
        Case(19, 3, 6, (13, 12), (3, 4), (1, 1), (0, 0), 7),
        Case(23, 3, 7, (13, 12), (3, 3), (1, 1), (2, 2), 8),
        Case(21, 5, 6, (15, 14), (3, 2), (2, 3), (1, 0), 9),
    ],
}
"""Enough work for the parallel path of every kernel; odd batches above
``BATCH_CHUNKS``, channel and tap counts that are not multiples of 4, strides and
paddings: a chunk, block or image that a parallel loop drops shows."""


def large_id(case: Case) -> str:
    return f"x{case.x.shape}-w{case.w.shape}-s{case.stride}-p{case.padding}".replace(" ", "")


def parallel_check(dims: int, which: str) -> None:
    """``assert_parallel`` on one kernel at a size where each call takes milliseconds."""
    if dims == 1:
        case = Case(32, 32, 32, (128,), (5,), (1,), (2,), 3)
        geometry: tuple[int, ...] = (1, 2)
    else:
        case = Case(32, 16, 16, (16, 16), (3, 3), (1, 1), (1, 1), 3)
        geometry = (1, 1, 1, 1)
    kernel = getattr(fast_conv, f"conv{dims}d_{which}")
    x, w, g = case.x, case.w, case.g
    if which == "forward":
        out = np.empty(g.shape)
        assert_parallel(lambda: kernel(out, x, w, *geometry), kernel.__name__, kernel)
    elif which == "backward_input":
        dx = np.empty(x.shape)
        assert_parallel(lambda: kernel(dx, g, w, *geometry), kernel.__name__, kernel)
    else:
        dw = np.empty(w.shape)
        assert_parallel(lambda: kernel(dw, x, g, *geometry), kernel.__name__, kernel)


# =========================================================================================
# Task 4.1: conv1d
# =========================================================================================


@pytest.mark.task4_1
@given(cases(1), st.sampled_from(BACKENDS), layouts(3), layouts(3))
def test_conv1d_forward_and_backward_match_numpy(
    case: Case, backend: TensorBackend, x_layout: Any, w_layout: Any
) -> None:
    check_forward_and_backward(case, backend, x_layout, w_layout, True)


@pytest.mark.task4_1
@given(cases(1))
def test_conv1d_kernels_write_every_entry(case: Case) -> None:
    check_kernels(case)


@pytest.mark.task4_1
@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding"),
    [(7, 3, 1, 0), (6, 2, 2, 1), (5, 5, 1, 2), (9, 4, 3, 2), (1, 3, 1, 1), (1, 7, 1, 3)],
)
def test_conv1d_gradients_match_central_differences(
    backend: TensorBackend, size: int, kernel: int, stride: int, padding: int
) -> None:
    check_grad(Case(2, 3, 2, (size,), (kernel,), (stride,), (padding,), size + kernel), backend)


@pytest.mark.task4_1
@pytest.mark.parametrize("case", LARGE[1], ids=large_id)
def test_conv1d_large_batch_parallel_path(case: Case) -> None:
    check_kernels(case)
    check_forward_and_backward(case, FastTensorBackend, ((0, 1, 2), 1), ((0, 1, 2), 1), True)


@pytest.mark.task4_1
@pytest.mark.parametrize("which", ["forward", "backward_input", "backward_weight"])
def test_conv1d_kernels_run_in_parallel(which: str) -> None:
    parallel_check(1, which)


@pytest.mark.task4_1
def test_conv1d_takes_numpy_integers() -> None:
    x = from_numpy(np.ones((1, 2, 6)))
    w = from_numpy(np.ones((3, 2, 3)))
    y = exact_tensor(conv1d(x, w, stride=np.int64(2), padding=np.int32(1)))
    np.testing.assert_array_equal(y, np.full((1, 3, 3), 6.0) - [[[2.0, 0.0, 0.0]]])


@pytest.mark.task4_1
def test_conv1d_known_values() -> None:
    # A hand-checked case: a moving difference and a moving sum, stride 2, padding 1.
    x = from_numpy(np.array([[[1.0, 2.0, 4.0, 8.0, 16.0]]]))
    w = from_numpy(np.array([[[-1.0, 1.0]], [[1.0, 1.0]]]))
    y = exact_tensor(conv1d(x, w, stride=2, padding=1))
    # padded input 0 1 2 4 8 16 0; windows at 0, 2, 4: (0, 1), (2, 4), (8, 16)
    np.testing.assert_array_equal(y, [[[1.0, 2.0, 8.0], [1.0, 6.0, 24.0]]])


# =========================================================================================
# Task 4.2: conv2d
# =========================================================================================


@pytest.mark.task4_2
@given(cases(2), st.sampled_from(BACKENDS), layouts(4), layouts(4), st.booleans())
def test_conv2d_forward_and_backward_match_numpy(
    case: Case, backend: TensorBackend, x_layout: Any, w_layout: Any, as_pair: bool
) -> None:
    check_forward_and_backward(case, backend, x_layout, w_layout, as_pair)


@pytest.mark.task4_2
@given(cases(2))
def test_conv2d_kernels_write_every_entry(case: Case) -> None:
    check_kernels(case)


@pytest.mark.task4_2
@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding"),
    [
        ((5, 6), (3, 3), (1, 1), (0, 0)),
        ((6, 5), (2, 3), (2, 1), (1, 0)),
        ((4, 4), (3, 2), (1, 2), (2, 1)),
        ((7, 5), (3, 3), (3, 2), (1, 1)),
        ((1, 2), (5, 4), (1, 2), (2, 1)),  # the kernel covers the padded input exactly
    ],
)
def test_conv2d_gradients_match_central_differences(
    backend: TensorBackend, size: Ints, kernel: Ints, stride: Ints, padding: Ints
) -> None:
    check_grad(Case(2, 2, 3, size, kernel, stride, padding, sum(size)), backend)


@pytest.mark.task4_2
@pytest.mark.parametrize("case", LARGE[2], ids=large_id)
def test_conv2d_large_batch_parallel_path(case: Case) -> None:
    check_kernels(case)
    check_forward_and_backward(case, FastTensorBackend, ((0, 1, 2, 3), 1), ((0, 1, 2, 3), 1),
                               False)  # fmt: skip


@pytest.mark.task4_2
@pytest.mark.parametrize("which", ["forward", "backward_input", "backward_weight"])
def test_conv2d_kernels_run_in_parallel(which: str) -> None:
    parallel_check(2, which)


@pytest.mark.task4_2
def test_conv2d_gradient_only_where_required() -> None:
    # A first layer's input needs no gradient: the weight still gets its exact one.
    case = Case(3, 2, 4, (6, 5), (3, 2), (1, 2), (1, 0), 3)
    x = from_numpy(case.x, FastTensorBackend)
    w = from_numpy(case.w, FastTensorBackend, requires_grad=True)
    conv2d(x, w, case.stride, case.padding).backward(from_numpy(case.g, FastTensorBackend))
    assert x.grad is None
    close(exact_tensor(w.grad, "weight grad"), ref_grads(case.x, case.w, case.g, case.stride,
          case.padding)[1], "weight gradient")  # fmt: skip


@pytest.mark.task4_2
def test_conv2d_known_values() -> None:
    # An identity kernel with padding 1 returns the input; an all-ones 2x2 kernel with
    # stride 2 sums each 2x2 block.
    x_values = np.arange(16.0).reshape(1, 1, 4, 4)
    x = from_numpy(x_values)
    identity = np.zeros((1, 1, 3, 3))
    identity[0, 0, 1, 1] = 1.0
    np.testing.assert_array_equal(exact_tensor(conv2d(x, from_numpy(identity), 1, 1)), x_values)
    blocks = exact_tensor(conv2d(x, from_numpy(np.ones((1, 1, 2, 2))), stride=2))
    np.testing.assert_array_equal(blocks, [[[[10.0, 18.0], [42.0, 50.0]]]])


# =========================================================================================
# Ungraded: argument checking, the GPU check, PyTorch parity
# =========================================================================================


def tensors(*shapes: Ints) -> list[Tensor]:
    return [from_numpy(np.zeros(s)) for s in shapes]


@pytest.mark.parametrize(
    ("op", "x_shape", "w_shape", "kwargs", "words"),
    [
        (
            conv1d,
            (2, 3, 8, 1),
            (4, 3, 3),
            {},
            ["conv1d", "(2, 3, 8, 1)", "(batch, channels, width)"],
        ),
        (conv1d, (2, 3, 8), (4, 3), {}, ["conv1d", "(4, 3)", "kernel_width"]),
        (conv1d, (2, 3, 8), (4, 4, 3), {}, ["conv1d", "3 channels", "expects 4", "(4, 4, 3)"]),
        (conv1d, (2, 3, 4), (4, 3, 7), {"padding": 1}, ["conv1d", "7", "4 + 2 * 1 = 6"]),
        (conv2d, (3, 8, 8), (4, 3, 3, 3), {}, ["conv2d", "(3, 8, 8)", "height, width"]),
        (conv2d, (1, 3, 8, 8), (4, 3, 3), {}, ["conv2d", "(4, 3, 3)", "kernel_height"]),
        (conv2d, (1, 3, 8, 8), (4, 2, 3, 3), {}, ["conv2d", "3 channels", "expects 2"]),
        (conv2d, (1, 3, 8, 3), (4, 3, 3, 5), {"padding": (0, 0)}, ["conv2d", "5", "3 + 2 * 0"]),
    ],
)
def test_shape_errors_name_the_shapes(
    op: Any, x_shape: Ints, w_shape: Ints, kwargs: dict[str, Any], words: list[str]
) -> None:
    x, w = tensors(x_shape, w_shape)
    with pytest.raises(ShapeError) as err:
        op(x, w, **kwargs)
    for word in words:
        assert word in str(err.value), f"{word!r} not in {err.value}"


@pytest.mark.parametrize(
    ("op", "kwargs", "words"),
    [
        (conv1d, {"stride": 0}, ["conv1d", "stride", "at least 1", "0"]),
        (conv1d, {"padding": -1}, ["conv1d", "padding", "at least 0", "-1"]),
        (conv1d, {"stride": 1.0}, ["conv1d", "stride", "int", "float"]),
        (conv1d, {"padding": True}, ["conv1d", "padding", "int", "bool"]),
        (conv2d, {"stride": (1, 0)}, ["conv2d", "stride", "at least 1"]),
        (conv2d, {"padding": (1, -2)}, ["conv2d", "padding", "-2"]),
        (conv2d, {"stride": (1, 2, 3)}, ["conv2d", "stride", "(h, w) pair"]),
        (conv2d, {"padding": "same"}, ["conv2d", "padding", "str"]),
    ],
)
def test_stride_and_padding_errors(op: Any, kwargs: dict[str, Any], words: list[str]) -> None:
    shapes = ((1, 2, 6), (3, 2, 3)) if op is conv1d else ((1, 2, 6, 6), (3, 2, 3, 3))
    x, w = tensors(*shapes)
    with pytest.raises(ShapeError) as err:
        op(x, w, **kwargs)
    for word in words:
        assert word in str(err.value), f"{word!r} not in {err.value}"


class FakeDeviceArray:
    """What ``is_device_array`` takes for GPU memory: not a NumPy array, and it copies
    itself to the host (as a Numba CUDA device array does)."""

    ndim = 1

    def __init__(self, size: int) -> None:
        self.host = np.zeros(size)

    def __len__(self) -> int:
        return self.host.size

    def copy_to_host(self) -> Array:
        return self.host.copy()


@pytest.mark.parametrize(("op", "x_shape", "w_shape"), [
    (conv1d, (1, 2, 6), (3, 2, 3)), (conv2d, (1, 2, 5, 5), (3, 2, 2, 2)),
])  # fmt: skip
@pytest.mark.parametrize("on_device", ["input", "weight"])
def test_gpu_tensors_get_a_backend_error(
    op: Any, x_shape: Ints, w_shape: Ints, on_device: str
) -> None:
    x, w = tensors(x_shape, w_shape)
    shape = x_shape if on_device == "input" else w_shape
    device = Tensor(TensorData(FakeDeviceArray(int(np.prod(shape))), shape))  # type: ignore[arg-type]
    args = (device, w) if on_device == "input" else (x, device)
    with pytest.raises(BackendError, match=rf"{op.__name__} runs on the CPU backends"):
        op(*args)


def test_mixed_backends_get_a_backend_error() -> None:
    x = from_numpy(np.zeros((1, 2, 5, 5)), SimpleBackend)
    w = from_numpy(np.zeros((3, 2, 2, 2)), FastTensorBackend)
    with pytest.raises(BackendError):
        conv2d(x, w)


def work(case: Case) -> int:
    """Multiply-adds of the forward pass (each gradient does as many)."""
    return case.g.size * case.w[0].size


@pytest.mark.parametrize("dims", [1, 2])
def test_large_cases_cover_the_references_chunks_and_blocks(dims: int) -> None:
    """The sizes above stay off every multiple the reference splits work by (checked
    against its constants where this tree is the reference: a handout lacks them)."""
    try:  # the reference's own helpers (module4/conv_paths.py)
        from module4 import conv_paths
    except ModuleNotFoundError:
        pass
    else:
        assert (conv_paths.PARALLEL_MIN, conv_paths.WEIGHT_CHUNKS) == (PARALLEL_WORK, BATCH_CHUNKS)
    for case in LARGE[dims]:
        batch, cin = case.x.shape[:2]
        cout = case.w.shape[0]
        assert work(case) > PARALLEL_WORK, case
        assert batch > BATCH_CHUNKS and batch % BATCH_CHUNKS and batch % 2, case
        assert cin % 4 and cout % 4, case
    assert any(c.w[0].size % 4 for c in LARGE[dims])
    assert any(max(c.stride) > 1 for c in LARGE[dims])
    assert any(max(c.padding) > 0 for c in LARGE[dims])


def test_output_size() -> None:
    assert fast_conv.conv_output_size(28, 5) == 24
    assert fast_conv.conv_output_size(12, 5, padding=2) == 12
    assert fast_conv.conv_output_size(7, 3, stride=2, padding=1) == 4


@pytest.mark.parametrize("dims", [1, 2])
def test_matches_torch(dims: int) -> None:
    torch = pytest.importorskip("torch")
    case = Case(3, 4, 5, (9,) * dims, (3,) * dims, (2,) * dims, (1,) * dims, 11)
    tx = torch.tensor(case.x, requires_grad=True)
    tw = torch.tensor(case.w, requires_grad=True)
    torch_conv = torch.nn.functional.conv1d if dims == 1 else torch.nn.functional.conv2d
    ty = torch_conv(tx, tw, stride=2, padding=1)
    ty.backward(torch.tensor(case.g))
    x = from_numpy(case.x, FastTensorBackend, requires_grad=True)
    w = from_numpy(case.w, FastTensorBackend, requires_grad=True)
    y = run_conv(case, x, w)
    y.backward(from_numpy(case.g, FastTensorBackend))
    close(exact_tensor(y), ty.detach().numpy(), "values")
    close(exact_tensor(x.grad), tx.grad.numpy(), "input gradient")
    close(exact_tensor(w.grad), tw.grad.numpy(), "weight gradient")
