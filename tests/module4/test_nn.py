"""Tasks 4.3 and 4.4 (``module4/nn.py``): tile, pooling, max and argmax; softmax,
log-softmax and dropout.

The oracles are NumPy alone: ``reshape``/``transpose`` for tile and pooling,
``np.max``/``np.argmax`` (whose ties go to the first index, as ``nn.max``'s gradient
must), a stable NumPy softmax, and central differences of ``sum(f(x) * w)`` with a
random constant ``w`` computed from values read back with ``exact_tensor``
(``tests/strict.py``). Inputs are small Hypothesis shapes, on ``SimpleBackend`` and
``FastTensorBackend``, some of them non-contiguous views (``tests/layouts.py``). Max
gradients are checked numerically only on distinct values (no ties, so no kink) and by
their closed form (a one-hot at the first maximum) on values with ties. The max-pooling
kernels must really run in parallel (``tests/parallel.py``: per-thread CPU clocks).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module1.tensor import Tensor, from_numpy, manual_seed
from module1.tensor_data import IndexingError, ShapeError
from module1.tensor_ops import SimpleBackend, TensorBackend
from module2.fast_ops import FastTensorBackend
from module4 import nn
from tests.layouts import layouts, make
from tests.parallel import assert_parallel
from tests.strict import exact_int, exact_tensor

task4_3 = pytest.mark.task4_3
task4_4 = pytest.mark.task4_4

BACKENDS = pytest.mark.parametrize(
    "backend", [SimpleBackend, FastTensorBackend], ids=["simple", "fast"]
)
EPS = 1e-6
seeds = st.integers(0, 2**32 - 1)
# (batch, channels, windows down, windows across, kernel height, kernel width)
pool_cases = st.tuples(*(st.integers(1, 2),) * 2, *(st.integers(1, 3),) * 4)


# -- NumPy oracles --------------------------------------------------------------------


def np_tile(x: np.ndarray, kh: int, kw: int) -> np.ndarray:
    b, c, h, w = x.shape
    windows = x.reshape(b, c, h // kh, kh, w // kw, kw).transpose(0, 1, 2, 4, 3, 5)
    return windows.reshape(b, c, h // kh, w // kw, kh * kw)


def np_untile(t: np.ndarray, kh: int, kw: int) -> np.ndarray:
    """The inverse of :func:`np_tile`: windows back in place."""
    b, c, nh, nw, _ = t.shape
    return (
        t.reshape(b, c, nh, nw, kh, kw).transpose(0, 1, 2, 4, 3, 5).reshape(b, c, nh * kh, nw * kw)
    )


def np_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def np_logsoftmax(x: np.ndarray, dim: int) -> np.ndarray:
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


def first_max_onehot(x: np.ndarray, dim: int) -> np.ndarray:
    """1.0 at the first maximal entry of each slice along ``dim``, 0.0 elsewhere."""
    onehot = np.zeros_like(x)
    np.put_along_axis(onehot, np.expand_dims(np.argmax(x, axis=dim), dim), 1.0, axis=dim)
    return onehot


def distinct(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values at least 0.25 apart (a shuffled grid, jittered): no ties, no kinks."""
    size = int(np.prod(shape))
    grid = rng.permutation(size) * 0.5 - size * 0.25
    return (grid + rng.uniform(-0.1, 0.1, size)).reshape(shape)


# -- the framework, read back strictly ----------------------------------------------------


def forward(fn: Callable[[Tensor], Tensor], x: np.ndarray, backend: TensorBackend) -> np.ndarray:
    return exact_tensor(fn(from_numpy(x, backend)))


def gradient(
    fn: Callable[[Tensor], Tensor], x: np.ndarray, w: np.ndarray, backend: TensorBackend
) -> np.ndarray:
    """The framework's gradient of ``sum(fn(x) * w)`` with respect to ``x``."""
    leaf = from_numpy(x, backend, requires_grad=True)
    (fn(leaf) * from_numpy(w, backend)).sum().backward()
    return exact_tensor(leaf.grad, "x.grad")


def central(
    fn: Callable[[Tensor], Tensor],
    x: np.ndarray,
    w: np.ndarray,
    backend: TensorBackend,
    entries: int = 10,
    seed: int = 0,
) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Central differences of ``sum(fn(x) * w)`` at up to ``entries`` random entries."""
    rng = np.random.default_rng(seed)
    flat = rng.permutation(x.size)[:entries]
    index = [tuple(int(i) for i in np.unravel_index(k, x.shape)) for k in flat]
    numeric = []
    for i in index:
        up, down = x.copy(), x.copy()
        up[i] += EPS
        down[i] -= EPS
        diff = np.sum(forward(fn, up, backend) * w) - np.sum(forward(fn, down, backend) * w)
        numeric.append(diff / (2 * EPS))
    return index, np.array(numeric)


def check_gradient(
    fn: Callable[[Tensor], Tensor], x: np.ndarray, backend: TensorBackend, seed: int = 0
) -> None:
    w = np.random.default_rng(seed + 1).normal(size=forward(fn, x, backend).shape)
    analytic = gradient(fn, x, w, backend)
    assert analytic.shape == x.shape
    index, numeric = central(fn, x, w, backend, seed=seed)
    got = np.array([analytic[i] for i in index])
    np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-6, err_msg=f"entries {index}")


# == Task 4.3: tile ========================================================================


@task4_3
@BACKENDS
@given(pool_cases, layouts(4), seeds)
def test_tile_matches_numpy_on_any_layout(
    backend: TensorBackend,
    case: tuple[int, ...],
    layout: tuple[tuple[int, ...], int],
    seed: int,
) -> None:
    b, c, nh, nw, kh, kw = case
    x = np.random.default_rng(seed).normal(size=(b, c, nh * kh, nw * kw))
    out, new_h, new_w = nn.tile(make(x, layout, backend), (kh, kw))
    assert (exact_int(new_h, "new_h"), exact_int(new_w, "new_w")) == (nh, nw)
    got = exact_tensor(out)
    assert got.shape == (b, c, nh, nw, kh * kw)
    np.testing.assert_array_equal(got, np_tile(x, kh, kw))


@task4_3
@BACKENDS
@given(pool_cases, seeds)
def test_tile_gradient_puts_each_window_back(
    backend: TensorBackend, case: tuple[int, ...], seed: int
) -> None:
    b, c, nh, nw, kh, kw = case
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(b, c, nh * kh, nw * kw))
    w = rng.normal(size=(b, c, nh, nw, kh * kw))
    got = gradient(lambda t: nn.tile(t, (kh, kw))[0], x, w, backend)
    np.testing.assert_array_equal(got, np_untile(w, kh, kw))


# == Task 4.3: pooling =====================================================================


@task4_3
@BACKENDS
@given(pool_cases, layouts(4), seeds)
def test_avgpool2d_matches_numpy(
    backend: TensorBackend,
    case: tuple[int, ...],
    layout: tuple[tuple[int, ...], int],
    seed: int,
) -> None:
    b, c, nh, nw, kh, kw = case
    x = np.random.default_rng(seed).normal(size=(b, c, nh * kh, nw * kw))
    got = exact_tensor(nn.avgpool2d(make(x, layout, backend), (kh, kw)))
    want = x.reshape(b, c, nh, kh, nw, kw).mean(axis=(3, 5))
    assert got.shape == (b, c, nh, nw)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@task4_3
@BACKENDS
@given(pool_cases, layouts(4), seeds)
def test_maxpool2d_matches_numpy(
    backend: TensorBackend,
    case: tuple[int, ...],
    layout: tuple[tuple[int, ...], int],
    seed: int,
) -> None:
    b, c, nh, nw, kh, kw = case
    x = np.random.default_rng(seed).normal(size=(b, c, nh * kh, nw * kw))
    got = exact_tensor(nn.maxpool2d(make(x, layout, backend), (kh, kw)))
    assert got.shape == (b, c, nh, nw)
    np.testing.assert_array_equal(got, x.reshape(b, c, nh, kh, nw, kw).max(axis=(3, 5)))


@task4_3
@BACKENDS
@given(pool_cases, seeds)
def test_pooling_gradients_match_central_differences(
    backend: TensorBackend, case: tuple[int, ...], seed: int
) -> None:
    b, c, nh, nw, kh, kw = case
    x = distinct(np.random.default_rng(seed), (b, c, nh * kh, nw * kw))
    check_gradient(lambda t: nn.avgpool2d(t, (kh, kw)), x, backend, seed)
    check_gradient(lambda t: nn.maxpool2d(t, (kh, kw)), x, backend, seed)


@task4_3
@BACKENDS
def test_maxpool2d_gradient_on_a_tie_goes_to_the_first_entry(backend: TensorBackend) -> None:
    # Every window of a constant input is a tie: its gradient goes to its top-left entry.
    x = np.full((1, 2, 4, 6), 3.0)
    w = np.random.default_rng(0).normal(size=(1, 2, 2, 2))
    got = gradient(lambda t: nn.maxpool2d(t, (2, 3)), x, w, backend)
    want = np.zeros_like(x)
    want[:, :, ::2, ::3] = w
    np.testing.assert_array_equal(got, want)


@task4_3
def test_maxpool2d_kernels_run_in_parallel() -> None:
    # 63 * 5 planes (no multiple of 2, 4 or 16) of 24 x 30, 3 x 2 windows.
    x = np.random.default_rng(0).normal(size=(63, 5, 24, 30))
    out = np.empty((63, 5, 8, 15))
    where = np.empty(out.shape, dtype=np.int64)
    forward, backward = nn.maxpool2d_forward, nn.maxpool2d_backward
    assert_parallel(lambda: forward(out, where, x, 3, 2), "maxpool2d_forward", forward)
    np.testing.assert_array_equal(out, x.reshape(63, 5, 8, 3, 15, 2).max(axis=(3, 5)))
    grad = np.empty(x.shape)
    assert_parallel(lambda: backward(grad, out, where, 3, 2), "maxpool2d_backward", backward)
    assert np.count_nonzero(grad) == out.size  # one entry per window (x has no zeros)


@task4_3
def test_a_square_kernel_may_be_one_int() -> None:
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    got = exact_tensor(nn.maxpool2d(from_numpy(x), 2))
    np.testing.assert_array_equal(got, [[[[5.0, 7.0], [13.0, 15.0]]]])


@task4_3
@BACKENDS
@given(pool_cases, seeds, st.floats(-50.0, 50.0))
def test_pooling_laws(
    backend: TensorBackend, case: tuple[int, ...], seed: int, shift: float
) -> None:
    b, c, nh, nw, kh, kw = case
    x = np.random.default_rng(seed).normal(size=(b, c, nh * kh, nw * kw))
    constant = np.full_like(x, shift)
    out_shape = (b, c, nh, nw)
    # The average of a constant is the constant.
    np.testing.assert_allclose(
        forward(lambda t: nn.avgpool2d(t, (kh, kw)), constant, backend),
        np.full(out_shape, shift),
        rtol=1e-12,
        atol=1e-12,
    )
    biggest = forward(lambda t: nn.maxpool2d(t, (kh, kw)), x, backend)
    average = forward(lambda t: nn.avgpool2d(t, (kh, kw)), x, backend)
    assert biggest.shape == average.shape == out_shape
    assert np.all(biggest >= average - 1e-12)
    # Shifting the input shifts both poolings.
    moved = forward(lambda t: nn.maxpool2d(t, (kh, kw)), x + shift, backend)
    np.testing.assert_allclose(moved, biggest + shift, rtol=1e-12, atol=1e-12)
    moved = forward(lambda t: nn.avgpool2d(t, (kh, kw)), x + shift, backend)
    np.testing.assert_allclose(moved, average + shift, rtol=1e-12, atol=1e-10)


# == Task 4.3: max and argmax ==============================================================

small_shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
tie_values = st.sampled_from([-1.0, 0.0, 2.0])


@st.composite
def tensors_with_ties(draw: st.DrawFn) -> tuple[np.ndarray, int, tuple[tuple[int, ...], int]]:
    shape = draw(small_shapes)
    values = draw(st.lists(tie_values, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return np.array(values).reshape(shape), dim, draw(layouts(len(shape)))


@task4_3
@BACKENDS
@given(tensors_with_ties(), st.booleans())
def test_max_and_argmax_match_numpy_with_ties(
    backend: TensorBackend,
    case: tuple[np.ndarray, int, tuple[tuple[int, ...], int]],
    keepdim: bool,
) -> None:
    x, dim, layout = case
    t = make(x, layout, backend)
    values = exact_tensor(nn.max(t, dim, keepdim=keepdim), "max")
    indices = exact_tensor(nn.argmax(t, dim, keepdim=keepdim), "argmax")
    np.testing.assert_array_equal(values, np.max(x, axis=dim, keepdims=keepdim))
    want = np.argmax(x, axis=dim)
    np.testing.assert_array_equal(indices, np.expand_dims(want, dim) if keepdim else want)


@task4_3
@BACKENDS
@given(tensors_with_ties(), seeds)
def test_max_gradient_goes_to_the_first_maximum(
    backend: TensorBackend,
    case: tuple[np.ndarray, int, tuple[tuple[int, ...], int]],
    seed: int,
) -> None:
    x, dim, layout = case
    w = np.random.default_rng(seed).normal(size=np.max(x, axis=dim).shape)
    leaf = make(x, layout, backend, requires_grad=True)
    (nn.max(leaf, dim) * from_numpy(w, backend)).sum().backward()
    got = exact_tensor(leaf.grad, "x.grad")
    want = first_max_onehot(x, dim) * np.expand_dims(w, dim)
    np.testing.assert_array_equal(got, want)


@task4_3
@BACKENDS
@given(small_shapes, st.data(), seeds)
def test_max_gradient_matches_central_differences(
    backend: TensorBackend, shape: tuple[int, ...], data: st.DataObject, seed: int
) -> None:
    dim = data.draw(st.integers(0, len(shape) - 1))
    x = distinct(np.random.default_rng(seed), shape)
    check_gradient(lambda t: nn.max(t, dim), x, backend, seed)


@task4_3
def test_argmax_is_a_constant() -> None:
    x = from_numpy(np.array([[1.0, 5.0, 5.0], [7.0, -1.0, 7.0]]), requires_grad=True)
    out = nn.argmax(x, 1)
    np.testing.assert_array_equal(exact_tensor(out), [1.0, 0.0])
    assert out.requires_grad is False and out.history is None


# -- argument errors (ungraded) ------------------------------------------------------------


@pytest.mark.parametrize("fn", [nn.avgpool2d, nn.maxpool2d, lambda x, k: nn.tile(x, k)[0]])
def test_pooling_names_the_shape_and_kernel_that_do_not_fit(fn: Callable[..., Tensor]) -> None:
    x = from_numpy(np.zeros((1, 2, 5, 4)))
    with pytest.raises(ShapeError, match=r"\(2, 2\).*\(1, 2, 5, 4\)"):
        fn(x, (2, 2))
    with pytest.raises(ShapeError, match=r"4-D.*\(5, 4\)"):
        fn(from_numpy(np.zeros((5, 4))), (1, 1))
    with pytest.raises(ShapeError, match=r"\(0, 1\)"):
        fn(x, (0, 1))
    with pytest.raises(TypeError, match="kernel"):
        fn(x, (1, 1, 1))


@pytest.mark.parametrize("fn", [nn.max, nn.argmax])
def test_max_and_argmax_name_a_dim_out_of_range(fn: Callable[..., Tensor]) -> None:
    x = from_numpy(np.zeros((2, 3)))
    with pytest.raises(IndexingError, match=r"dim 2.*\(2, 3\)"):
        fn(x, 2)
    with pytest.raises(ShapeError, match="empty"):
        fn(from_numpy(np.zeros((2, 0))), 1)


# == Task 4.4: softmax and log-softmax =====================================================


@st.composite
def rows(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    """A small tensor (1 to 3 dimensions) of normal values at a drawn scale, and a dim."""
    shape = draw(small_shapes)
    scale = draw(st.sampled_from([0.1, 1.0, 30.0]))
    x = np.random.default_rng(draw(seeds)).normal(scale=scale, size=shape)
    return x, draw(st.integers(-len(shape), len(shape) - 1))


@task4_4
@BACKENDS
@given(rows(), st.floats(-100.0, 100.0))
def test_softmax_matches_numpy_sums_to_one_and_ignores_a_shift(
    backend: TensorBackend, case: tuple[np.ndarray, int], shift: float
) -> None:
    x, dim = case
    got = forward(lambda t: nn.softmax(t, dim), x, backend)
    np.testing.assert_allclose(got, np_softmax(x, dim), rtol=1e-10, atol=1e-14)
    assert np.all(got >= 0.0)
    np.testing.assert_allclose(got.sum(axis=dim), 1.0, rtol=1e-12)
    # A constant added along dim (a different one per slice) changes nothing.
    per_slice = np.random.default_rng(0).uniform(-abs(shift), abs(shift) + 1.0, size=x.shape)
    per_slice = np.broadcast_to(np.take(per_slice, [0], axis=dim), x.shape)
    moved = forward(lambda t: nn.softmax(t, dim), x + per_slice, backend)
    np.testing.assert_allclose(moved, got, rtol=1e-8, atol=1e-12)


@task4_4
@BACKENDS
@given(rows())
def test_logsoftmax_matches_numpy_and_is_the_log_of_softmax(
    backend: TensorBackend, case: tuple[np.ndarray, int]
) -> None:
    x, dim = case
    got = forward(lambda t: nn.logsoftmax(t, dim), x, backend)
    np.testing.assert_allclose(got, np_logsoftmax(x, dim), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.exp(got).sum(axis=dim), 1.0, rtol=1e-12)
    probabilities = forward(lambda t: nn.softmax(t, dim), x, backend)
    tiny = probabilities > 1e-300  # where log(softmax) is still finite
    np.testing.assert_allclose(got[tiny], np.log(probabilities[tiny]), rtol=1e-9, atol=1e-12)


@task4_4
@BACKENDS
def test_softmax_and_logsoftmax_are_stable_for_huge_entries(backend: TensorBackend) -> None:
    x = np.array([[1000.0, -1000.0, 0.0], [1000.0, 1000.0, 999.0], [-1000.0, -1000.0, -1001.0]])
    for fn, oracle in ((nn.softmax, np_softmax), (nn.logsoftmax, np_logsoftmax)):
        leaf = from_numpy(x, backend, requires_grad=True)
        out = fn(leaf, 1)
        (out * from_numpy(np.arange(9.0).reshape(3, 3), backend)).sum().backward()
        got = exact_tensor(out)
        grad = exact_tensor(leaf.grad, "x.grad")
        assert np.all(np.isfinite(got)) and np.all(np.isfinite(grad)), fn.__name__
        np.testing.assert_allclose(got, oracle(x, 1), rtol=1e-12, atol=1e-300)


@task4_4
@BACKENDS
@given(rows(), seeds)
def test_softmax_gradients_match_closed_forms_and_central_differences(
    backend: TensorBackend, case: tuple[np.ndarray, int], seed: int
) -> None:
    x, dim = case
    if np.ptp(x) > 100.0:  # keep central differences meaningful
        x = x / 30.0
    w = np.random.default_rng(seed).normal(size=x.shape)
    s = np_softmax(x, dim)
    # d/dx sum(w * softmax) = s * (w - sum(w * s)); d/dx sum(w * logsoftmax) = w - s sum(w)
    want = s * (w - np.sum(w * s, axis=dim, keepdims=True))
    got = gradient(lambda t: nn.softmax(t, dim), x, w, backend)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)
    want = w - s * np.sum(w, axis=dim, keepdims=True)
    got = gradient(lambda t: nn.logsoftmax(t, dim), x, w, backend)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)
    check_gradient(lambda t: nn.softmax(t, dim), x, backend, seed)
    check_gradient(lambda t: nn.logsoftmax(t, dim), x, backend, seed)


def test_softmax_names_a_dim_out_of_range() -> None:
    with pytest.raises(IndexingError, match=r"dim -3.*\(2, 3\)"):
        nn.softmax(from_numpy(np.zeros((2, 3))), -3)
    with pytest.raises(IndexingError, match=r"dim 2"):
        nn.logsoftmax(from_numpy(np.zeros((2, 3))), 2)


# == Task 4.4: dropout =====================================================================

probabilities = st.sampled_from([0.1, 0.25, 0.5, 0.8])


@task4_4
@BACKENDS
@given(probabilities, seeds)
def test_dropout_keeps_entries_scaled_and_repeats_with_the_seed(
    backend: TensorBackend, p: float, seed: int
) -> None:
    x = np.random.default_rng(seed).uniform(1.0, 2.0, size=(4, 50))
    first = exact_tensor(nn.dropout(from_numpy(x, backend), p, rng=np.random.default_rng(seed)))
    again = exact_tensor(nn.dropout(from_numpy(x, backend), p, rng=np.random.default_rng(seed)))
    kept = first != 0.0
    np.testing.assert_array_equal(again, first)  # same seed, same mask
    np.testing.assert_allclose(first[kept], x[kept] / (1.0 - p), rtol=1e-12)
    assert 0 < kept.sum() < x.size  # 200 draws: all kept or all dropped is (nearly) impossible


@task4_4
@BACKENDS
@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_preserves_the_mean(backend: TensorBackend, p: float) -> None:
    x = np.ones((100, 200))
    out = exact_tensor(nn.dropout(from_numpy(x, backend), p, rng=np.random.default_rng(7)))
    assert abs(np.mean(out == 0.0) - p) < 0.02  # about p of the entries dropped
    assert abs(out.mean() - 1.0) < 0.05  # standard error sqrt(p / (1 - p) / 20000) < 0.015
    other = exact_tensor(nn.dropout(from_numpy(x, backend), p, rng=np.random.default_rng(8)))
    assert np.any(other != out)  # another seed, another mask


@task4_4
@BACKENDS
@given(probabilities, seeds)
def test_dropout_gradient_flows_only_through_kept_entries(
    backend: TensorBackend, p: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.uniform(1.0, 2.0, size=(3, 4, 5))
    w = rng.normal(size=x.shape)
    leaf = from_numpy(x, backend, requires_grad=True)
    out = nn.dropout(leaf, p, rng=np.random.default_rng(seed))
    (out * from_numpy(w, backend)).sum().backward()
    kept = exact_tensor(out) != 0.0
    grad = exact_tensor(leaf.grad, "x.grad")
    np.testing.assert_allclose(grad, np.where(kept, w / (1.0 - p), 0.0), rtol=1e-12)


@task4_4
@BACKENDS
def test_dropout_with_p_one_drops_everything(backend: TensorBackend) -> None:
    x = np.random.default_rng(0).uniform(1.0, 2.0, size=(3, 7))
    leaf = from_numpy(x, backend, requires_grad=True)
    out = nn.dropout(leaf, 1.0, rng=np.random.default_rng(0))
    out.sum().backward()
    np.testing.assert_array_equal(exact_tensor(out), np.zeros_like(x))
    np.testing.assert_array_equal(exact_tensor(leaf.grad, "x.grad"), np.zeros_like(x))


@task4_4
def test_dropout_without_a_generator_follows_manual_seed() -> None:
    x = from_numpy(np.ones((10, 10)))
    manual_seed(5)
    first = exact_tensor(nn.dropout(x, 0.5))
    second = exact_tensor(nn.dropout(x, 0.5))
    manual_seed(5)
    np.testing.assert_array_equal(exact_tensor(nn.dropout(x, 0.5)), first)
    assert np.any(first != second)  # successive calls draw new masks
    manual_seed(0)


# -- given behaviour (ungraded) -------------------------------------------------------------


def test_dropout_is_the_identity_when_not_training_or_p_is_zero() -> None:
    x = from_numpy(np.arange(6.0).reshape(2, 3))
    assert nn.dropout(x, 0.5, training=False) is x
    assert nn.dropout(x, 0.0) is x


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_dropout_refuses_a_probability_outside_zero_one(p: float) -> None:
    with pytest.raises(ValueError, match="dropout probability"):
        nn.dropout(from_numpy(np.ones(3)), p)
