"""Task 4.4 (layers): initialisation, Conv1d/Conv2d/Flatten/Sequential, state dicts.

Values come from NumPy references written here; the layer tests check the layer's own
work (bias broadcast, reshaping, running layers in order), the initialisation tests the
statistics of many draws, and the state-dict tests a full round trip through a file.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from module0.module import Module
from module1.tensor import from_numpy
from module1.tensor_data import ShapeError
from module2.fast_ops import FastTensorBackend
from module4 import layers
from module4.layers import (
    Conv1d,
    Conv2d,
    Dropout,
    Embedding,
    Flatten,
    Linear,
    MaxPool2d,
    ReLU,
    Sequential,
    StateDictError,
)
from tests.layouts import check
from tests.module4.reference import np_conv
from tests.strict import exact_tensor

task = pytest.mark.task4_4


def tensor(a: np.ndarray, grad: bool = False):
    t = from_numpy(np.array(a, dtype=np.float64), FastTensorBackend)
    return t.requires_grad_() if grad else t


# ## Initialisation


@task
def test_he_normal_has_std_sqrt_2_over_fan_in() -> None:
    w = layers.he_normal((400, 250), 50, np.random.default_rng(1))
    assert type(w) is np.ndarray and w.shape == (400, 250)
    assert abs(w.mean()) < 0.01
    assert w.std() == pytest.approx(math.sqrt(2 / 50), rel=0.02)


@task
def test_xavier_uniform_fills_its_bound() -> None:
    w = layers.xavier_uniform((300, 200), 30, 70, np.random.default_rng(2))
    bound = math.sqrt(6 / 100)
    assert type(w) is np.ndarray and w.shape == (300, 200)
    assert np.abs(w).max() <= bound
    assert np.abs(w).max() > 0.99 * bound
    assert w.var() == pytest.approx(2 / 100, rel=0.03)


@task
def test_layers_use_their_fans() -> None:
    conv = Conv2d(3, 64, 5, rng=np.random.default_rng(0))
    w = exact_tensor(conv.weight.value)
    assert w.shape == (64, 3, 5, 5)
    assert w.std() == pytest.approx(math.sqrt(2 / 75), rel=0.05)
    assert not exact_tensor(conv.bias.value).any()
    lin = Linear(200, 300, init="xavier", rng=np.random.default_rng(0))
    assert np.abs(exact_tensor(lin.weight.value)).max() <= math.sqrt(6 / 500)
    c1 = Conv1d(20, 30, 3, rng=np.random.default_rng(0))
    assert exact_tensor(c1.weight.value).std() == pytest.approx(math.sqrt(2 / 60), rel=0.05)


def test_unknown_init_is_named() -> None:
    with pytest.raises(ValueError, match="unknown init 'kaiming'"):
        Linear(2, 3, init="kaiming")


# ## Layers


@task
def test_conv2d_layer_adds_a_bias_per_channel() -> None:
    rng = np.random.default_rng(3)
    conv = Conv2d(2, 3, (3, 2), padding=1, rng=rng)
    conv.bias.update(tensor([1.0, -2.0, 0.5]))
    x = rng.normal(size=(2, 2, 5, 4))
    w = conv.weight.value.to_numpy()
    want = np_conv(x, w, padding=1) + np.array([1.0, -2.0, 0.5])[None, :, None, None]
    check(conv(tensor(x)), want, "Conv2d layer")


@task
def test_conv1d_layer_adds_a_bias_per_channel_and_strides() -> None:
    rng = np.random.default_rng(4)
    conv = Conv1d(3, 2, 3, stride=2, padding=1, rng=rng)
    conv.bias.update(tensor([0.25, -1.0]))
    x = rng.normal(size=(2, 3, 9))
    want = np_conv(x, conv.weight.value.to_numpy(), 2, 1) + np.array([0.25, -1.0])[None, :, None]
    check(conv(tensor(x)), want, "Conv1d layer")


@task
def test_conv_layer_gradients_reach_weight_and_bias() -> None:
    rng = np.random.default_rng(5)
    conv = Conv2d(1, 2, 2, rng=rng)
    x = rng.normal(size=(3, 1, 4, 4))
    conv(tensor(x)).sum().backward()
    bias_grad = exact_tensor(conv.bias.value.grad)
    np.testing.assert_allclose(bias_grad, [27.0, 27.0])  # 3 images x 3 x 3 outputs each
    weight_grad = exact_tensor(conv.weight.value.grad)
    windows = np.lib.stride_tricks.sliding_window_view(x[:, 0], (2, 2), axis=(1, 2))
    np.testing.assert_allclose(weight_grad[0, 0], windows.sum(axis=(0, 1, 2)))


@task
def test_flatten_keeps_the_batch_and_order() -> None:
    x = np.arange(2 * 3 * 4 * 5, dtype=float).reshape(2, 3, 4, 5)
    t = tensor(x.transpose(0, 2, 1, 3)).permute(0, 2, 1, 3)  # non-contiguous view of x
    check(Flatten()(t), x.reshape(2, -1), "Flatten")


@task
def test_sequential_runs_layers_in_order_and_names_parameters() -> None:
    rng = np.random.default_rng(6)
    model = Sequential(Linear(4, 3, rng=rng), ReLU(), Linear(3, 2, rng=rng))
    names = [n for n, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = rng.normal(size=(5, 4))
    p = {n: p.value.to_numpy() for n, p in model.named_parameters()}
    hidden = np.maximum(x @ p["0.weight"] + p["0.bias"], 0.0)
    check(model(tensor(x)), hidden @ p["2.weight"] + p["2.bias"], "Sequential")


def test_summary_lists_shapes_and_parameter_counts() -> None:
    model = Sequential(Conv2d(1, 4, 3, padding=1), ReLU(), MaxPool2d(2), Flatten(), Linear(64, 10))
    text = model.summary((2, 1, 8, 8))
    assert "(2, 4, 8, 8)" in text and "(2, 4, 4, 4)" in text and "(2, 64)" in text
    assert "(2, 10)" in text and "40" in text and "650" in text
    assert f"Total parameters: {40 + 650}" in text
    assert model.training  # restored after the eval-mode pass


def test_summary_names_the_layer_that_rejects_the_shape() -> None:
    model = Sequential(Conv2d(1, 4, 3), Flatten(), Linear(10, 2))
    with pytest.raises(ShapeError, match=r"Sequential layer 2 \(Linear"):
        model.summary((1, 1, 6, 6))


def test_dropout_layer_is_identity_in_eval_mode() -> None:
    layer = Dropout(0.5, seed=1)
    x = tensor(np.ones((4, 5)))
    assert (layer(x).to_numpy() == 0).any()
    layer.eval()
    np.testing.assert_array_equal(layer(x).to_numpy(), np.ones((4, 5)))


def test_embedding_looks_up_rows_and_adds_repeated_gradients() -> None:
    emb = Embedding(5, 3, rng=np.random.default_rng(0))
    table = emb.weight.value.to_numpy()
    idx = np.array([[1, 4, 1], [0, 0, 2]])
    out = emb(idx)
    np.testing.assert_array_equal(out.to_numpy(), table[idx])
    out.sum().backward()
    np.testing.assert_array_equal(emb.weight.value.grad.to_numpy()[:, 0], [2, 2, 1, 0, 1])
    with pytest.raises(IndexError, match="index 5 is out of range"):
        emb(np.array([[5]]))
    frozen = Embedding(5, 3, weights=table, freeze=True)
    assert frozen.parameters() == []


# ## State dicts


def small_model(seed: int) -> Module:
    rng = np.random.default_rng(seed)
    return Sequential(Conv2d(1, 2, 3, rng=rng), Flatten(), Linear(8, 3, rng=rng))


@task
def test_state_dict_copies_every_parameter_by_name() -> None:
    model = small_model(0)
    state = layers.state_dict(model)
    assert sorted(state) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    for name, p in model.named_parameters():
        value = state[name]
        assert type(value) is np.ndarray and value.shape == p.value.shape
        np.testing.assert_array_equal(value, p.value.to_numpy())
    state["0.weight"][...] = 123.0  # a copy: the model is unchanged
    assert not (model.named_parameters()[0][1].value.to_numpy() == 123.0).any()


@task
def test_save_and_load_round_trip(tmp_path: Path) -> None:
    a, b = small_model(0), small_model(1)
    path = layers.save(a, tmp_path / "model.npz")
    layers.load(b, path)
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        np.testing.assert_array_equal(exact_tensor(pb.value), pa.value.to_numpy(), err_msg=name)
        assert pb.value.requires_grad
    x = tensor(np.random.default_rng(2).normal(size=(2, 1, 4, 4)))
    np.testing.assert_array_equal(exact_tensor(b(x)), a(x).to_numpy())
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]


def test_load_names_the_parameter_with_a_wrong_shape(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    other = Sequential(Conv2d(1, 2, 3, rng=rng), Flatten(), Linear(8, 4, rng=rng))
    path = layers.save(other, tmp_path / "other.npz")
    model = small_model(0)
    before = layers.state_dict(model)
    with pytest.raises(ShapeError, match=r"'2.weight'.*\(8, 3\).*\(8, 4\)"):
        layers.load(model, path)
    for name, value in layers.state_dict(model).items():  # nothing changed
        np.testing.assert_array_equal(value, before[name])


def test_load_lists_missing_and_unexpected_names() -> None:
    model = small_model(0)
    state = layers.state_dict(model)
    state["3.weight"] = state.pop("2.weight")
    with pytest.raises(StateDictError, match=r"missing \['2.weight'\], unexpected \['3.weight'\]"):
        layers.load_state_dict(model, state)


def test_save_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = small_model(0)
    path = layers.save(model, tmp_path / "model.npz")
    good = path.read_bytes()

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken)
    with pytest.raises(OSError, match="disk full"):
        layers.save(small_model(1), path)
    assert path.read_bytes() == good  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]  # no temporary left


def test_load_rejects_a_corrupt_file_by_name(tmp_path: Path) -> None:
    path = tmp_path / "bad.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match=r"bad\.npz is not a readable \.npz"):
        layers.load(small_model(0), path)
    with pytest.raises(ValueError, match=r"writes \.npz"):
        layers.save(small_model(0), tmp_path / "model.pt")
