"""Task 4.6: BatchNorm1d and BatchNorm2d (``module4/batchnorm.py``).

Oracles: NumPy for the values of the training and the evaluation forward and for the
running statistics after several steps (a loop written here, PyTorch's rules), central
differences (``module1.grad_check``) for the gradients of the input, the weight and the
bias, and Hypothesis properties: in training, shifting a channel of the input by a
constant or scaling it by a positive number changes nothing. Both the simple and the
fast backend, float64 and float32, non-contiguous inputs; the errors name the layer and
the shape. The graded checks (``tests/module4/checks.py``, 4.6) state the same contract.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from module1.grad_check import grad_check
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module1.tensor_ops import SimpleBackend, TensorBackend
from module2.fast_ops import FastTensorBackend
from module4 import layers
from module4.batchnorm import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNormFun,
    channel_stats,
    update_running_stats,
)
from module4.layers import StateDictError
from module4.models import DigitCNN
from project import train_digits
from project.cnn_train import FitConfig, Split, fit
from project.digits_data import digits_split

task = pytest.mark.task4_6

BACKENDS = {"simple": SimpleBackend, "fast": FastTensorBackend}
TOL = {np.float64: 1e-10, np.float32: 2e-5}
SHAPES = [(5, 3), (4, 2, 6), (3, 2, 4, 5), (2, 4, 1, 3)]
"""BatchNorm1d's (N, C) and (N, C, L), BatchNorm2d's (N, C, H, W)."""


def t(a: np.ndarray, backend: TensorBackend = SimpleBackend, dtype: Any = np.float64) -> Tensor:
    return from_numpy(np.asarray(a, dtype=dtype), backend)


def layer_for(shape: tuple[int, ...], **options: Any) -> BatchNorm1d | BatchNorm2d:
    kind = BatchNorm2d if len(shape) == 4 else BatchNorm1d
    return kind(shape[1], **options)


def with_params(layer: Any, w: np.ndarray, b: np.ndarray, backend: TensorBackend,
                dtype: Any = np.float64) -> Any:  # fmt: skip
    layer.weight.update(t(w, backend, dtype))
    layer.bias.update(t(b, backend, dtype))
    return layer


def np_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each channel's mean and biased variance over every dimension but 1."""
    axes = tuple(d for d in range(x.ndim) if d != 1)
    return x.mean(axis=axes), x.var(axis=axes)


def along(v: np.ndarray, ndim: int) -> np.ndarray:
    """A per-channel vector shaped to broadcast against an input of ``ndim`` dims."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def np_normalize(x: np.ndarray, mean: np.ndarray, var: np.ndarray, w: np.ndarray,
                 b: np.ndarray, eps: float) -> np.ndarray:  # fmt: skip
    n = x.ndim
    return (x - along(mean, n)) / np.sqrt(along(var, n) + eps) * along(w, n) + along(b, n)


def np_train(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mean, var = np_stats(x)
    return np_normalize(x, mean, var, w, b, eps)


def np_running(batches: list[np.ndarray], momentum: float | None) -> tuple[Any, Any]:
    """PyTorch's running mean and variance after training steps on ``batches``: an
    exponential average (or the plain one for momentum None) of the batch means and of
    the *unbiased* batch variances."""
    c = batches[0].shape[1]
    mean, var = np.zeros(c), np.ones(c)
    for k, x in enumerate(batches, start=1):
        m = x.size // c
        bm, bv = np_stats(x)
        f = 1.0 / k if momentum is None else momentum
        mean = (1 - f) * mean + f * bm
        var = (1 - f) * var + f * bv * m / (m - 1)
    return mean, var


# -- the statistics and the training forward ---------------------------------------------


@task
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_channel_stats_are_the_mean_and_biased_variance(backend: str, dtype: Any) -> None:
    rng = np.random.default_rng(0)
    x = 3.0 + 2.0 * rng.normal(size=(4, 3, 5))
    mean, var = channel_stats(t(x, BACKENDS[backend], dtype))
    assert mean.shape == var.shape == (1, 3, 1) and mean.dtype == var.dtype == dtype
    want_mean, want_var = np_stats(x)
    tol = TOL[dtype] * 10
    np.testing.assert_allclose(mean.to_numpy().reshape(3), want_mean, rtol=tol, atol=tol)
    np.testing.assert_allclose(var.to_numpy().reshape(3), want_var, rtol=tol, atol=tol)


@task
def test_channel_stats_are_stable_for_a_channel_with_a_large_mean() -> None:
    """``E[x^2] - E[x]^2`` loses every digit here in float32; centring first keeps them."""
    x = 1e4 + np.random.default_rng(1).normal(scale=0.1, size=(8, 2, 16))
    _, var = channel_stats(t(x, dtype=np.float32))
    np.testing.assert_allclose(var.to_numpy().reshape(2), np_stats(x)[1], rtol=1e-2)


@task
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_training_forward_matches_numpy(backend: str, dtype: Any, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape) * 10 + shape[0])
    x, w, b = rng.normal(2.0, 3.0, size=shape), rng.normal(size=shape[1]), rng.normal(size=shape[1])
    be = BACKENDS[backend]
    layer = with_params(layer_for(shape, backend=be).to(dtype), w, b, be, dtype)
    got = layer(t(x, be, dtype))
    assert got.shape == shape and got.dtype == dtype
    tol = TOL[dtype] * 10
    np.testing.assert_allclose(got.to_numpy(), np_train(x, w, b), rtol=tol, atol=tol)


@task
@pytest.mark.parametrize("backend", BACKENDS)
def test_training_forward_of_a_non_contiguous_input(backend: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(5, 3, 4, 2))  # (W, C, H, N) in storage
    be = BACKENDS[backend]
    view = t(x, be).permute(3, 1, 2, 0)  # (2, 3, 4, 5)
    assert not view.is_contiguous()
    w, b = rng.normal(size=3), rng.normal(size=3)
    layer = with_params(BatchNorm2d(3, backend=be), w, b, be)
    want = np_train(x.transpose(3, 1, 2, 0), w, b)
    np.testing.assert_allclose(layer(view).to_numpy(), want, rtol=1e-10, atol=1e-10)


@task
@given(seed=st.integers(0, 2**16), channel=st.integers(0, 2), shift=st.floats(-50, 50),
       scale=st.floats(0.05, 20))  # fmt: skip
@settings(max_examples=25, deadline=None)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_training_output_ignores_a_shift_and_a_scale_of_a_channel(
    dtype: Any, seed: int, channel: int, shift: float, scale: float
) -> None:
    """In float32 a channel moved to 50 ± 0.05 keeps about 4 digits of its spread."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4, 3, 2, 3))
    moved = x.copy()
    moved[:, channel] = moved[:, channel] * scale + shift
    layer = BatchNorm2d(3, eps=0.0, backend=SimpleBackend).to(dtype)
    with_params(layer, rng.normal(size=3), rng.normal(size=3), SimpleBackend, dtype)
    tol = 1e-7 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(layer(t(moved, dtype=dtype)).to_numpy(),
                               layer(t(x, dtype=dtype)).to_numpy(), rtol=tol, atol=tol)  # fmt: skip


# -- running statistics, evaluation mode -------------------------------------------------


@task
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("momentum", [0.1, 0.6, None])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_running_statistics_follow_a_numpy_loop(
    backend: str, momentum: float | None, shape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(3)
    be = BACKENDS[backend]
    layer = layer_for(shape, momentum=momentum, backend=be)
    batches = [rng.normal(rng.normal(), 1 + k, size=shape) for k in range(4)]
    for x in batches:
        layer(t(x, be))
    mean, var = np_running(batches, momentum)
    assert layer.num_batches_tracked == 4
    np.testing.assert_allclose(layer.running_mean.to_numpy(), mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(layer.running_var.to_numpy(), var, rtol=1e-10, atol=1e-12)


@task
@pytest.mark.parametrize("backend", BACKENDS)
def test_eval_mode_normalizes_with_the_running_statistics(backend: str) -> None:
    rng = np.random.default_rng(4)
    be = BACKENDS[backend]
    w, b = rng.normal(size=2), rng.normal(size=2)
    layer = with_params(BatchNorm1d(2, backend=be), w, b, be)
    batches = [rng.normal(5.0, 2.0, size=(6, 2, 3)) for _ in range(3)]
    for x in batches:
        layer(t(x, be))
    layer.eval()
    mean, var = np_running(batches, 0.1)
    x = rng.normal(size=(3, 2, 3))
    np.testing.assert_allclose(layer(t(x, be)).to_numpy(), np_normalize(x, mean, var, w, b, 1e-5),
                               rtol=1e-10, atol=1e-10)  # fmt: skip
    # One example alone gives the same output as inside a batch, and nothing is updated.
    alone = layer(t(x[:1], be)).to_numpy()
    np.testing.assert_allclose(alone, layer(t(x, be)).to_numpy()[:1], rtol=1e-12)
    assert layer.num_batches_tracked == 3
    np.testing.assert_allclose(layer.running_mean.to_numpy(), mean, rtol=1e-10)


@task
def test_eval_gradients_treat_the_running_statistics_as_constants() -> None:
    rng = np.random.default_rng(5)
    layer = BatchNorm2d(2, backend=SimpleBackend)
    for _ in range(2):
        layer(t(rng.normal(size=(3, 2, 2, 2))))
    layer.eval()
    x = t(rng.normal(size=(2, 2, 3, 1)))

    def f(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        layer.weight.update(w)
        layer.bias.update(b)
        return layer(x)

    grad_check(f, x, t(rng.normal(size=2)), t(rng.normal(size=2)))


@task
def test_without_running_statistics_eval_uses_the_batch() -> None:
    rng = np.random.default_rng(6)
    layer = BatchNorm1d(3, track_running_stats=False, backend=SimpleBackend)
    assert layer.running_mean is None and layer.running_var is None
    assert layer.num_batches_tracked is None and layer.buffer_names == ()
    w, b = rng.normal(size=3), rng.normal(size=3)
    with_params(layer, w, b, SimpleBackend)
    x = rng.normal(size=(4, 3))
    layer.eval()
    np.testing.assert_allclose(layer(t(x)).to_numpy(), np_train(x, w, b), rtol=1e-10, atol=1e-10)


@task
def test_update_running_stats_uses_the_unbiased_variance() -> None:
    rm, rv = t(np.array([1.0, -2.0])), t(np.array([4.0, 0.5]))
    mean, var = t(np.array([3.0, 0.0])), t(np.array([2.0, 6.0]))
    new_mean, new_var = update_running_stats(rm, rv, mean, var, 4, 0.25)
    np.testing.assert_allclose(new_mean.to_numpy(), [1.5, -1.5])
    np.testing.assert_allclose(new_var.to_numpy(), [0.75 * 4 + 0.25 * 8 / 3, 0.375 + 0.25 * 8.0])


@task
def test_affine_false_has_no_parameters_and_normalizes() -> None:
    layer = BatchNorm1d(2, affine=False, backend=SimpleBackend)
    assert layer.parameters() == []
    x = np.random.default_rng(7).normal(size=(5, 2))
    got = layer(t(x)).to_numpy()
    np.testing.assert_allclose(got, np_train(x, np.ones(2), np.zeros(2)), rtol=1e-10, atol=1e-12)


# -- gradients ---------------------------------------------------------------------------


@task
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_backward_matches_central_differences(backend: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(8 + len(shape))
    be = BACKENDS[backend]
    layer = layer_for(shape, backend=be)

    def f(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        layer.weight.update(w)
        layer.bias.update(b)
        return layer(x)

    x = rng.normal(1.0, 2.0, size=shape)
    grad_check(f, t(x, be), t(rng.normal(size=shape[1]), be), t(rng.normal(size=shape[1]), be))


@task
def test_backward_of_a_non_contiguous_input_and_without_affine() -> None:
    rng = np.random.default_rng(9)
    view = t(rng.normal(size=(6, 3))).permute(1, 0)  # (3, 6) stored as (6, 3)
    grad_check(BatchNorm1d(6, affine=False, backend=SimpleBackend), view)


@task
def test_backward_is_the_compact_formula_in_one_function() -> None:
    """One BatchNormFun node in the graph; its backward gives x, weight and bias their
    gradients (the statistics are constants to autograd)."""
    rng = np.random.default_rng(10)
    x = t(rng.normal(size=(4, 2, 3))).requires_grad_()
    layer = BatchNorm1d(2, eps=0.0, backend=SimpleBackend)
    y = layer(x)
    assert y.history is not None
    fns = set()
    stack = [y]
    while stack:
        v = stack.pop()
        if v.history is not None and v.history.last_fn is not None:
            fns.add(v.history.last_fn.__name__)
            stack.extend(v.history.inputs)  # type: ignore[arg-type]
    assert "BatchNormFun" in fns and "Sum" not in fns and "Pow" not in fns
    g = rng.normal(size=(4, 2, 3))
    y.backward(t(g))
    xh = np_train(x.to_numpy(), np.ones(2), np.zeros(2), eps=0.0)
    np.testing.assert_allclose(layer.weight.value.grad.to_numpy(), (g * xh).sum(axis=(0, 2)))
    np.testing.assert_allclose(layer.bias.value.grad.to_numpy(), g.sum(axis=(0, 2)))
    # With eps 0, dx sums to zero over each channel and is orthogonal to xhat.
    dx = x.grad.to_numpy()  # type: ignore[union-attr]
    np.testing.assert_allclose(dx.sum(axis=(0, 2)), 0.0, atol=1e-12)
    np.testing.assert_allclose((dx * xh).sum(axis=(0, 2)), 0.0, atol=1e-12)


@task
def test_float32_gradients_stay_float32() -> None:
    rng = np.random.default_rng(11)
    layer = BatchNorm2d(2, backend=FastTensorBackend).float()
    assert layer.running_mean.dtype == np.float32
    x = t(rng.normal(size=(3, 2, 2, 2)), FastTensorBackend, np.float32).requires_grad_()
    layer(x).sum().backward()
    assert x.grad.dtype == np.float32 and layer.weight.value.grad.dtype == np.float32  # type: ignore[union-attr]
    assert layer.running_var.dtype == np.float32


# -- errors ------------------------------------------------------------------------------


@task
def test_a_batch_of_one_is_refused_in_training_and_fine_in_eval() -> None:
    layer = BatchNorm2d(8, backend=SimpleBackend)
    with pytest.raises(ValueError, match=r"BatchNorm2d: training needs more than one value "
                       r"per channel, got input of shape \(1, 8, 1, 1\)"):  # fmt: skip
        layer(t(np.ones((1, 8, 1, 1))))
    with pytest.raises(ValueError, match=r"BatchNorm1d: .* \(1, 3\)"):
        BatchNorm1d(3, backend=SimpleBackend)(t(np.ones((1, 3))))
    assert layer.num_batches_tracked == 0  # nothing was counted
    layer(t(np.random.default_rng(0).normal(size=(1, 8, 2, 1))))  # two values per channel
    layer.eval()
    assert layer(t(np.ones((1, 8, 1, 1)))).shape == (1, 8, 1, 1)


def test_wrong_shapes_name_the_layer_the_channels_and_the_shape() -> None:
    """Given code (ungraded): the layers check their input before any work."""
    with pytest.raises(ShapeError, match=r"BatchNorm2d\(4\): expected input of shape "
                       r"\(N, 4, H, W\), got \(2, 3, 5, 5\)"):  # fmt: skip
        BatchNorm2d(4, backend=SimpleBackend)(t(np.zeros((2, 3, 5, 5))))
    with pytest.raises(ShapeError, match=r"BatchNorm2d\(4\).*got \(2, 4, 5\)"):
        BatchNorm2d(4, backend=SimpleBackend)(t(np.zeros((2, 4, 5))))
    with pytest.raises(ShapeError, match=r"BatchNorm1d\(3\): expected input of shape "
                       r"\(N, 3\) or \(N, 3, L\), got \(2, 4\)"):  # fmt: skip
        BatchNorm1d(3, backend=SimpleBackend)(t(np.zeros((2, 4))))
    with pytest.raises(ValueError, match="momentum must be in"):
        BatchNorm1d(3, momentum=1.5)
    with pytest.raises(ValueError, match="num_features"):
        BatchNorm2d(0)
    with pytest.raises(TypeError, match="needs a Tensor"):
        BatchNorm1d(3)(np.zeros((2, 3)))  # type: ignore[arg-type]


# -- state dicts, models -----------------------------------------------------------------


@task
def test_state_dict_saves_and_loads_the_running_statistics(tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    model = DigitCNN(size=8, channels=(2, 3), hidden=4, seed=0, batchnorm=True)
    for _ in range(3):
        model(t(rng.random((4, 1, 8, 8)), FastTensorBackend))
    state = layers.state_dict(model)
    assert state["conv1.norm.num_batches_tracked"].dtype == np.int64
    assert int(state["conv2.norm.num_batches_tracked"]) == 3
    np.testing.assert_array_equal(state["conv1.norm.running_var"],
                                  model.conv1.norm.running_var.to_numpy())  # fmt: skip
    path = layers.save(model, tmp_path / "bn.npz")
    fresh = DigitCNN(size=8, channels=(2, 3), hidden=4, seed=1, batchnorm=True)
    layers.load(fresh, path)
    model.eval()
    fresh.eval()
    x = t(rng.random((2, 1, 8, 8)), FastTensorBackend)
    np.testing.assert_array_equal(fresh(x).to_numpy(), model(x).to_numpy())
    assert fresh.conv2.norm.num_batches_tracked == 3
    del state["conv1.norm.running_mean"]
    with pytest.raises(StateDictError, match=r"conv1\.norm\.running_mean"):
        layers.load_state_dict(fresh, state)


@task
def test_digit_cnn_with_batchnorm_matches_numpy_in_eval_mode() -> None:
    from tests.module4.reference import np_conv, np_maxpool

    rng = np.random.default_rng(13)
    model = DigitCNN(size=8, channels=(2, 3), hidden=4, seed=2, batchnorm=True)
    model(t(rng.random((5, 1, 8, 8)), FastTensorBackend))  # running statistics move
    model.eval()
    p = layers.state_dict(model)
    x = rng.random((3, 1, 8, 8))

    def block(h: np.ndarray, name: str) -> np.ndarray:
        h = np_conv(h, p[f"{name}.weight"], padding=1)
        h = np_normalize(h, p[f"{name}.norm.running_mean"], p[f"{name}.norm.running_var"],
                         p[f"{name}.norm.weight"], p[f"{name}.norm.bias"], 1e-5)  # fmt: skip
        return np_maxpool(np.maximum(h, 0.0))

    h = block(block(x, "conv1"), "conv2").reshape(3, -1)
    h = np.maximum(h @ p["hidden.weight"] + p["hidden.bias"], 0.0)
    want = h @ p["out.weight"] + p["out.bias"]
    got = model(t(x, FastTensorBackend)).to_numpy()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    assert "bias=False) + BatchNorm2d(2" in repr(model.conv1)


@task
def test_a_short_digits_run_with_batchnorm_learns(tmp_path: Path) -> None:
    x_train, y_train, x_test, y_test = digits_split()
    model = DigitCNN(size=8, seed=0, batchnorm=True)
    result = fit(model, model.conv1.weight, Split(x_train, y_train), Split(x_test, y_test),
                 FitConfig("digits-bn", epochs=2, lr=3e-3, out=tmp_path, figures=False),
                 train_digits.images_to_input)  # fmt: skip
    assert result.test_acc[-1] >= 0.85, result.test_acc
    assert model.conv1.norm.num_batches_tracked == 2 * 45  # 1,438 examples, batches of 32
    assert result.gate(0.85)[0]


@task
def test_batchnorm_fun_needs_its_stats_as_tensors() -> None:
    """The Function's signature, as the layer calls it: x, weight, bias, mean, var, eps."""
    rng = np.random.default_rng(14)
    x = t(rng.normal(size=(3, 2, 2)))
    mean, var = channel_stats(x)
    y = BatchNormFun.apply(x, t(np.ones((1, 2, 1))), t(np.zeros((1, 2, 1))), mean, var, 1e-5)
    np.testing.assert_allclose(y.to_numpy(), np_train(x.to_numpy(), np.ones(2), np.zeros(2)),
                               rtol=1e-10, atol=1e-12)  # fmt: skip


@task
def test_the_digits_script_with_batchnorm_writes_its_own_run(tmp_path: Path) -> None:
    args = ["--batchnorm", "--epochs", "1", "--gate", "0.5", "--no-figures", "--out", str(tmp_path)]
    assert train_digits.main(args) == 0
    rows = (tmp_path / "digits-bn" / "log.csv").read_text().splitlines()
    assert len(rows) == 2 and float(rows[-1].split(",")[4]) >= 0.5
    with np.load(tmp_path / "digits-bn" / "model.npz") as saved:
        assert int(saved["conv2.norm.num_batches_tracked"]) == 45
        assert "conv1.bias" not in saved.files
