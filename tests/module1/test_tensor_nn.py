"""Task 1.5: the tensor Linear layer, the MLP, the stable binary cross-entropy, and
training with them (the 2-D classifier script and the sin regression).

NumPy is the oracle for values and gradients. Every tensor read back from the code under
test goes through ``exact_tensor`` and every float through ``exact_float``
(``tests/strict.py``) before it is compared.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module0.datasets import load_dataset
from module0.optim import Adam
from module1.tensor import from_numpy
from module1.tensor_data import ShapeError
from module1.tensor_nn import MLP, Linear, binary_cross_entropy_with_logits
from module1.tensor_ops import SimpleBackend
from project import regress_sin, train
from tests.strict import exact_float, exact_int, exact_str, exact_tensor

pytestmark = pytest.mark.task1_5


def numpy_mlp(model: MLP, x: np.ndarray) -> np.ndarray:
    """The MLP's forward in NumPy, from its parameters read back exactly."""
    for i, layer in enumerate(model.layers):
        w = exact_tensor(layer.weight.value, what=f"layer {i} weight")
        b = exact_tensor(layer.bias.value, what=f"layer {i} bias")
        x = x @ w + b
        if i < len(model.layers) - 1:
            x = np.maximum(x, 0.0)
    return x


def numpy_bce(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.mean(np.logaddexp(0.0, z) - z * y)


# -- Linear -------------------------------------------------------------------------------


@given(
    st.integers(1, 5),
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(0, 2**16),
)
def test_linear_forward_matches_numpy(batch: int, n_in: int, n_out: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    layer = Linear(n_in, n_out, rng)
    x = rng.normal(size=(batch, n_in))
    out = exact_tensor(layer(from_numpy(x)))
    w = exact_tensor(layer.weight.value)
    b = exact_tensor(layer.bias.value)
    assert out.shape == (batch, n_out)
    np.testing.assert_allclose(out, x @ w + b, rtol=1e-12, atol=1e-12)


def test_linear_parameters_and_gradients() -> None:
    rng = np.random.default_rng(1)
    layer = Linear(3, 2, rng)
    names = sorted(exact_str(name) for name, _ in layer.named_parameters())
    assert names == ["bias", "weight"]
    x = rng.normal(size=(4, 3))
    upstream = rng.normal(size=(4, 2))
    out = layer(from_numpy(x))
    (out * from_numpy(upstream)).sum().backward()
    w_grad = exact_tensor(layer.weight.value.grad, what="weight.grad")
    b_grad = exact_tensor(layer.bias.value.grad, what="bias.grad")
    np.testing.assert_allclose(w_grad, x.T @ upstream, rtol=1e-10)
    np.testing.assert_allclose(b_grad, upstream.sum(axis=0), rtol=1e-10)


def test_linear_refuses_a_wrong_input_shape() -> None:
    layer = Linear(3, 2)
    with pytest.raises(ShapeError, match=r"\(5, 4\)"):
        layer(from_numpy(np.zeros((5, 4))))
    # and the right shape works:
    assert exact_tensor(layer(from_numpy(np.zeros((5, 3))))).shape == (5, 2)


# -- MLP ----------------------------------------------------------------------------------


@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 2**16))
def test_mlp_forward_matches_numpy(batch: int, hidden: int, seed: int) -> None:
    model = MLP((2, hidden, hidden, 1), seed=seed)
    x = np.random.default_rng(seed).normal(size=(batch, 2))
    out = exact_tensor(model(from_numpy(x)))
    np.testing.assert_allclose(out, numpy_mlp(model, x), rtol=1e-10, atol=1e-12)


def test_mlp_has_a_layer_per_size_pair() -> None:
    model = MLP((2, 5, 3, 1))
    out = exact_tensor(model(from_numpy(np.ones((7, 2)))))
    assert out.shape == (7, 1)
    assert exact_int(model.num_parameters()) == (2 * 5 + 5) + (5 * 3 + 3) + (3 * 1 + 1)


# -- loss ---------------------------------------------------------------------------------


@given(st.integers(1, 8), st.integers(0, 2**16))
def test_bce_with_logits_matches_numpy(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=4.0, size=(n, 1))
    y = rng.integers(0, 2, size=(n, 1)).astype(float)
    loss = exact_tensor(binary_cross_entropy_with_logits(from_numpy(z), from_numpy(y)))
    assert loss.shape == ()
    np.testing.assert_allclose(loss, numpy_bce(z, y), rtol=1e-10, atol=1e-12)


def test_bce_is_finite_for_huge_logits_and_has_the_right_gradient() -> None:
    z = np.array([[1000.0], [-1000.0], [1000.0], [-1000.0], [0.5], [0.0]])
    y = np.array([[1.0], [0.0], [0.0], [1.0], [1.0], [1.0]])  # z = 0: gradient (1/2 - 1) / 6
    logits = from_numpy(z, requires_grad=True)
    loss = binary_cross_entropy_with_logits(logits, from_numpy(y))
    value = float(exact_tensor(loss))
    np.testing.assert_allclose(value, numpy_bce(z, y), rtol=1e-10)
    loss.backward()
    grad = exact_tensor(logits.grad, what="logits.grad")
    sigmoid = 0.5 * (1.0 + np.tanh(z / 2.0))
    np.testing.assert_allclose(grad, (sigmoid - y) / len(z), rtol=1e-8, atol=1e-12)


# -- training -----------------------------------------------------------------------------


def test_tensor_mlp_learns_the_simple_dataset() -> None:
    data = load_dataset("simple", 20, seed=3)
    model = MLP((2, 4, 4, 1), seed=0)
    X = from_numpy(np.array(data.X))
    y = from_numpy(np.array(data.y, dtype=float).reshape(-1, 1))
    optimizer = Adam(model.parameters(), lr=0.1)
    for _ in range(40):
        train.tensor_epoch(model, X, y, optimizer)
    # Accuracy from outputs read back exactly, not from what the epoch reported.
    logits = exact_tensor(model(X))
    accuracy = np.mean((logits[:, 0] > 0.0) == (np.array(data.y) == 1))
    assert accuracy >= 0.95
    np.testing.assert_allclose(logits, numpy_mlp(model, np.array(data.X)), rtol=1e-10)


def test_training_script_with_the_simple_backend(tmp_path: Path) -> None:
    code = train.main(
        ["--backend", "simple", "--dataset", "diag", "--points", "12", "--hidden", "3",
         "--epochs", "6", "--out", str(tmp_path), "--log-every", "2"]
    )  # fmt: skip
    assert code == 0
    run = tmp_path / "simple_diag"
    with open(run / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    losses = [float(r["loss"]) for r in rows]
    assert all(math.isfinite(v) and v > 0 for v in losses)
    assert losses[-1] < losses[0]
    assert all(float(r["seconds"]) > 0 for r in rows)
    assert (run / "figure.png").read_bytes()[:4] == b"\x89PNG"


def test_sin_regression_fits(tmp_path: Path) -> None:
    model, fit = regress_sin.fit_sin(SimpleBackend, hidden=8, epochs=80, points=16, lr=0.02)
    first, last = exact_float(fit.losses[0]), exact_float(fit.losses[-1])
    assert last < 0.05 < first
    xs = np.linspace(-3.0, 3.0, 16).reshape(-1, 1)
    prediction = numpy_mlp(model, xs)
    assert np.mean((prediction - np.sin(xs)) ** 2) < 0.05
    path = regress_sin.plot_fit(model, fit, SimpleBackend, tmp_path / "sin.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
