"""float32 through stage 4: convolutions, pooling, softmax, dropout, the losses, the
layers and models, ``Module.to``, the fused optimizers and ``state_dict`` keep a
float32 model float32, and agree with the same computation in float64 to float32
precision, forward and backward.

The oracle is the float64 computation on the same (float32-exact) values, itself
checked against NumPy and central differences by the other tests. Every result is read
with ``exact_tensor``, which checks the storage's dtype too.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from module1.tensor import Tensor, from_numpy
from module1.tensor_data import float32, float64
from module2.fast_ops import FastTensorBackend
from module2.fast_optim import FastAdam, FastSGD
from module4 import layers, losses, nn
from module4.fast_conv import conv1d, conv2d
from module4.models import DigitCNN, SentenceCNN
from tests.strict import exact_tensor

B = FastTensorBackend


def _pair(seed: int, shape: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    values = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
    x64 = from_numpy(values.astype(np.float64), B, requires_grad=True)
    return x64, from_numpy(values, B, requires_grad=True)


def _agree(name: str, fn: Callable[..., Tensor], *shapes: tuple[int, ...]) -> None:
    """``fn`` of float32 inputs: a float32 result and float32 gradients, each equal to
    float64's to float32 precision."""
    pairs = [_pair(seed, shape) for seed, shape in enumerate(shapes, 1)]
    results = []
    for k, dtype in ((0, np.float64), (1, np.float32)):
        out = fn(*(p[k] for p in pairs))
        weights = from_numpy(np.linspace(-1, 1, out.size).reshape(out.shape), B, dtype=dtype)
        (out * weights).sum().backward()
        grads = [exact_tensor(p[k].grad, f"{name}: gradient", dtype=dtype) for p in pairs]
        results.append((exact_tensor(out, name, dtype=dtype), grads))
    (want, want_grads), (got, got_grads) = results
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)
    for g32, g64 in zip(got_grads, want_grads, strict=True):
        np.testing.assert_allclose(g32, g64, rtol=1e-4, atol=1e-5, err_msg=f"{name} gradient")


@pytest.mark.task4_1
def test_conv1d_runs_in_float32() -> None:
    _agree("conv1d", lambda x, w: conv1d(x, w, stride=2, padding=1), (2, 3, 11), (4, 3, 3))


@pytest.mark.task4_2
def test_conv2d_runs_in_float32() -> None:
    _agree("conv2d", lambda x, w: conv2d(x, w, padding=1), (2, 3, 6, 7), (5, 3, 3, 3))


@pytest.mark.task4_3
def test_pooling_runs_in_float32() -> None:
    _agree("maxpool2d", lambda x: nn.maxpool2d(x, (2, 2)), (2, 3, 4, 6))
    _agree("avgpool2d", lambda x: nn.avgpool2d(x, (2, 3)), (2, 3, 4, 6))
    _agree("max", lambda x: nn.max(x, 1), (3, 5))


@pytest.mark.task4_4
def test_softmax_losses_and_dropout_run_in_float32() -> None:
    targets = np.array([0, 3, 1])
    _agree("softmax", lambda x: nn.softmax(x, 1), (3, 4))
    _agree("logsoftmax", lambda x: nn.logsoftmax(x, 1), (3, 4))
    _agree("cross_entropy", lambda x: losses.cross_entropy(x, targets), (3, 4))
    _agree("mse_loss", losses.mse_loss, (3, 4), (3, 4))
    _agree("binary_cross_entropy",
           lambda p, y: losses.binary_cross_entropy(p.sigmoid(), (y + 1.0) * 0.5),
           (3, 4), (3, 4))  # fmt: skip
    _agree("dropout", lambda x: nn.dropout(x, 0.5, rng=np.random.default_rng(0)), (4, 5))


@pytest.mark.task4_4
def test_a_float32_model_trains_and_saves_in_float32(tmp_path) -> None:
    model = DigitCNN(size=8, channels=(4, 6), hidden=8, seed=1).to(float32)
    assert all(p.value.dtype == float32 for p in model.parameters())
    x = from_numpy(np.random.default_rng(2).uniform(0, 1, (5, 1, 8, 8)), B, dtype=float32)
    for optimizer in (FastAdam(model.parameters(), lr=1e-2), FastSGD(model.parameters(), 0.1)):
        optimizer.zero_grad()
        loss = losses.cross_entropy(model(x), np.array([0, 1, 2, 3, 4]))
        exact_tensor(loss, "loss", dtype=np.float32)
        loss.backward()
        optimizer.step()
        for name, p in model.named_parameters():
            exact_tensor(p.value, name, dtype=np.float32)
    state = layers.state_dict(model)
    assert all(v.dtype == np.float32 for v in state.values())
    other = DigitCNN(size=8, channels=(4, 6), hidden=8, seed=7).float()
    layers.load_state_dict(other, {k: v.astype(np.float64) for k, v in state.items()})
    for (name, p), q in zip(model.named_parameters(), other.parameters(), strict=True):
        np.testing.assert_array_equal(
            exact_tensor(q.value, name, dtype=np.float32), exact_tensor(p.value, name, np.float32)
        )
    assert other.double() is other and other.conv1.weight.value.dtype == float64


@pytest.mark.task4_4
def test_embeddings_and_a_sentence_model_run_in_float32() -> None:
    model = SentenceCNN(vocab_size=20, dim=6, widths=(2, 3), filters=4, seed=0).float()
    tokens = np.random.default_rng(3).integers(0, 20, (3, 7))
    logits = model(tokens)
    exact_tensor(logits, "logits", dtype=np.float32)
    losses.cross_entropy(logits, np.array([0, 1, 0])).backward()
    assert all(p.value.grad.dtype == float32 for p in model.parameters())
    frozen = layers.Embedding(5, 3, freeze=True).float()
    exact_tensor(frozen(np.array([[0, 4]])), "frozen lookup", dtype=np.float32)


def test_module_to_refuses_scalar_parameters() -> None:
    from module0.module import Module
    from module0.scalar import Scalar

    class Tiny(Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = self.add_parameter("w", Scalar(1.0))

    with pytest.raises(TypeError, match="no dtype"):
        Tiny().to(float32)
