"""Task 4.4 (``module4/losses.py``): cross-entropy, negative log-likelihood, binary
cross-entropy and mean squared error.

The oracles are NumPy formulas (a stable log-sum-exp for cross-entropy), the closed-form
gradients (``(softmax - onehot) / N`` for cross-entropy, ``-onehot / N`` for the NLL,
``2 (pred - target) / size`` for the MSE) and central differences, all on values read
back with ``exact_tensor`` (``tests/strict.py``). Targets come as a list, a NumPy array
and a Tensor; both CPU backends run every graded test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module1 import tensor_nn
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import IndexingError, ShapeError
from module1.tensor_ops import SimpleBackend, TensorBackend
from module2.fast_ops import FastTensorBackend
from module4 import losses, nn
from tests.strict import exact_tensor

task4_4 = pytest.mark.task4_4

BACKENDS = pytest.mark.parametrize(
    "backend", [SimpleBackend, FastTensorBackend], ids=["simple", "fast"]
)
EPS = 1e-6
seeds = st.integers(0, 2**32 - 1)
TARGET_KINDS = ("list", "array", "tensor")


def np_logsoftmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def onehot(targets: np.ndarray, k: int) -> np.ndarray:
    return np.eye(k)[targets]


def as_kind(targets: np.ndarray, kind: str, backend: TensorBackend) -> Any:
    if kind == "list":
        return [int(t) for t in targets]
    if kind == "array":
        return targets.copy()
    return from_numpy(targets.astype(float), backend)


@st.composite
def classification(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Logits ``(N, K)`` at a drawn scale and ``N`` class indices."""
    n, k = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(seeds))
    scale = draw(st.sampled_from([0.1, 1.0, 10.0]))
    return rng.normal(scale=scale, size=(n, k)), rng.integers(0, k, size=n)


def loss_value(loss: Tensor) -> float:
    value = exact_tensor(loss, "loss")
    assert value.shape == (), f"a loss is a 0-d tensor, got shape {value.shape}"
    return float(value)


def loss_and_grad(
    fn: Callable[[Tensor], Tensor], x: np.ndarray, backend: TensorBackend
) -> tuple[float, np.ndarray]:
    leaf = from_numpy(x, backend, requires_grad=True)
    loss = fn(leaf)
    loss.backward()
    return loss_value(loss), exact_tensor(leaf.grad, "grad")


def central(fn: Callable[[Tensor], Tensor], x: np.ndarray, backend: TensorBackend) -> np.ndarray:
    """Central differences of the loss at every entry of ``x`` (shapes here are small)."""
    grad = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[i] += EPS
        down[i] -= EPS
        high = loss_value(fn(from_numpy(up, backend)))
        low = loss_value(fn(from_numpy(down, backend)))
        grad[i] = (high - low) / (2 * EPS)
    return grad


# == cross-entropy and NLL =================================================================


@task4_4
@BACKENDS
@given(classification(), st.sampled_from(TARGET_KINDS))
def test_cross_entropy_matches_numpy_and_its_gradient_is_softmax_minus_onehot(
    backend: TensorBackend, case: tuple[np.ndarray, np.ndarray], kind: str
) -> None:
    x, y = case
    n, k = x.shape
    targets = as_kind(y, kind, backend)
    value, grad = loss_and_grad(lambda t: losses.cross_entropy(t, targets), x, backend)
    log_probs = np_logsoftmax(x)
    np.testing.assert_allclose(value, -log_probs[np.arange(n), y].mean(), rtol=1e-10, atol=1e-12)
    want = (np.exp(log_probs) - onehot(y, k)) / n
    np.testing.assert_allclose(grad, want, rtol=1e-8, atol=1e-12)


@task4_4
@BACKENDS
@given(classification(), st.sampled_from(TARGET_KINDS))
def test_nll_loss_matches_numpy_and_its_gradient_is_minus_onehot(
    backend: TensorBackend, case: tuple[np.ndarray, np.ndarray], kind: str
) -> None:
    x, y = case
    n, k = x.shape
    targets = as_kind(y, kind, backend)
    value, grad = loss_and_grad(lambda t: losses.nll_loss(t, targets), x, backend)
    np.testing.assert_allclose(value, -x[np.arange(n), y].mean(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, -onehot(y, k) / n, rtol=1e-12, atol=0.0)


@task4_4
@BACKENDS
@given(classification())
def test_cross_entropy_is_the_nll_of_logsoftmax(
    backend: TensorBackend, case: tuple[np.ndarray, np.ndarray]
) -> None:
    x, y = case
    direct = loss_value(losses.cross_entropy(from_numpy(x, backend), y))
    composed = loss_value(losses.nll_loss(nn.logsoftmax(from_numpy(x, backend), 1), y))
    np.testing.assert_allclose(direct, composed, rtol=1e-12, atol=1e-14)


@task4_4
@BACKENDS
def test_cross_entropy_gradients_match_central_differences(backend: TensorBackend) -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(4, 3)), np.array([2, 0, 0, 1])
    for fn in (
        lambda t: losses.cross_entropy(t, y),
        lambda t: losses.nll_loss(nn.logsoftmax(t, 1), y),
    ):
        _, grad = loss_and_grad(fn, x, backend)
        np.testing.assert_allclose(grad, central(fn, x, backend), rtol=1e-6, atol=1e-8)


@task4_4
@BACKENDS
def test_cross_entropy_is_finite_for_huge_logits(backend: TensorBackend) -> None:
    x = np.array([[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 0.0], [500.0, 500.0, -500.0]])
    y = np.array([0, 0, 1])
    value, grad = loss_and_grad(lambda t: losses.cross_entropy(t, y), x, backend)
    # Row 0 is right (loss ~0), row 1 wrong by 2000, row 2 a tie (log 2).
    np.testing.assert_allclose(value, (0.0 + 2000.0 + np.log(2.0)) / 3, rtol=1e-12)
    want = (np.exp(np_logsoftmax(x)) - onehot(y, 3)) / 3
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, want, rtol=1e-10, atol=1e-14)


# == binary cross-entropy and MSE ==========================================================

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@task4_4
@BACKENDS
@given(shapes, seeds)
def test_binary_cross_entropy_matches_numpy_and_central_differences(
    backend: TensorBackend, shape: tuple[int, ...], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, size=shape)
    y = rng.uniform(0.0, 1.0, size=shape)  # soft targets are allowed
    target = from_numpy(y, backend)

    def fn(t: Tensor) -> Tensor:
        return losses.binary_cross_entropy(t, target)

    value, grad = loss_and_grad(fn, p, backend)
    want = np.mean(-(y * np.log(p) + (1.0 - y) * np.log(1.0 - p)))
    np.testing.assert_allclose(value, want, rtol=1e-10, atol=1e-12)
    size = max(p.size, 1)
    np.testing.assert_allclose(grad, (p - y) / (p * (1.0 - p)) / size, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(grad, central(fn, p, backend), rtol=1e-5, atol=1e-7)


@task4_4
@BACKENDS
def test_binary_cross_entropy_clamps_the_log_at_minus_100(backend: TensorBackend) -> None:
    p = np.array([0.0, 1.0, 0.0, 1.0, 0.5])
    y = np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    value, grad = loss_and_grad(
        lambda t: losses.binary_cross_entropy(t, from_numpy(y, backend)), p, backend
    )
    # Two confident mistakes cost 100 each (not inf), two confident hits 0, and log 2.
    np.testing.assert_allclose(value, (100.0 + 100.0 + 0.0 + 0.0 + np.log(2.0)) / 5, rtol=1e-12)
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad[4], -2.0 / 5, rtol=1e-12)


@task4_4
@BACKENDS
@given(shapes, seeds)
def test_mse_loss_matches_numpy_and_its_gradient(
    backend: TensorBackend, shape: tuple[int, ...], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    pred, target = rng.normal(size=shape), rng.normal(size=shape)

    def fn(t: Tensor) -> Tensor:
        return losses.mse_loss(t, from_numpy(target, backend))

    value, grad = loss_and_grad(fn, pred, backend)
    size = max(pred.size, 1)
    np.testing.assert_allclose(value, np.mean((pred - target) ** 2), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grad, 2.0 * (pred - target) / size, rtol=1e-12, atol=1e-14)


# -- argument errors and the re-export (ungraded) ------------------------------------------


@pytest.mark.parametrize("fn", [losses.cross_entropy, losses.nll_loss])
def test_class_losses_name_what_does_not_fit(fn: Callable[..., Tensor]) -> None:
    scores = from_numpy(np.zeros((3, 4)))
    with pytest.raises(ShapeError, match=r"\(N, K\).*\(12,\)"):
        fn(from_numpy(np.zeros(12)), [0] * 12)
    with pytest.raises(ShapeError, match=r"\(3,\).*\(2,\)"):
        fn(scores, [0, 1])
    with pytest.raises(IndexingError, match=r"target 4 at position 2.*\[0, 4\)"):
        fn(scores, [0, 3, 4])
    with pytest.raises(IndexingError, match=r"target -1 at position 0"):
        fn(scores, np.array([-1, 0, 0]))
    with pytest.raises(ValueError, match=r"target 1\.5 at position 1"):
        fn(scores, from_numpy(np.array([0.0, 1.5, 2.0])))
    with pytest.raises(TypeError, match="integer class indices"):
        fn(scores, np.array([True, False, True]))
    with pytest.raises(TypeError, match="class indices"):
        fn(scores, 3)


@pytest.mark.parametrize("fn", [losses.binary_cross_entropy, losses.mse_loss])
def test_elementwise_losses_need_one_shape(fn: Callable[..., Tensor]) -> None:
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(3, 2\)"):
        fn(from_numpy(np.zeros((2, 3))), from_numpy(np.zeros((3, 2))))
    with pytest.raises(TypeError, match="Tensor"):
        fn(from_numpy(np.zeros(2)), [0.0, 1.0])


def test_binary_cross_entropy_with_logits_is_stage_ones() -> None:
    assert losses.binary_cross_entropy_with_logits is tensor_nn.binary_cross_entropy_with_logits
