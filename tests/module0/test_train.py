"""Task 0.6: optimizers, the scalar Linear layer, and training the scalar network.

Values, derivatives, names and lists read back from the code under test go through the
``exact_*`` helpers of ``tests/strict.py`` before they are compared.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from module0.datasets import load_dataset
from module0.module import Module, Parameter
from module0.optim import SGD, Adam
from module0.scalar import Scalar
from module0.scalar_nn import ScalarLinear, ScalarNetwork
from project import train_scalar
from tests.strict import exact_float, exact_list, exact_str

pytestmark = pytest.mark.task0_6


def params_with_grads(values: list[float], grads: list[float | None]) -> list[Parameter]:
    params = [Parameter(Scalar(v)) for v in values]
    for p, g in zip(params, grads, strict=True):
        p.value.derivative = g
    return params


# -- SGD --------------------------------------------------------------------------------


def test_sgd_step_moves_against_the_gradient() -> None:
    params = params_with_grads([1.0, -2.0, 5.0], [0.5, -1.0, None])
    SGD(params, lr=0.1).step()
    assert exact_float(params[0].value.data) == pytest.approx(0.95)
    assert exact_float(params[1].value.data) == pytest.approx(-1.9)
    assert exact_float(params[2].value.data) == 5.0  # no gradient: untouched


def test_sgd_momentum_accumulates_velocity() -> None:
    (p,) = params_with_grads([0.0], [1.0])
    opt = SGD([p], lr=0.5, momentum=0.9)
    opt.step()  # v = 1
    assert exact_float(p.value.data) == pytest.approx(-0.5)
    p.value.derivative = 2.0
    opt.step()  # v = 0.9 * 1 + 2 = 2.9
    assert exact_float(p.value.data) == pytest.approx(-0.5 - 0.5 * 2.9)
    p.value.derivative = 0.0
    opt.step()  # v = 0.9 * 2.9
    assert exact_float(p.value.data) == pytest.approx(-0.5 - 0.5 * 2.9 - 0.5 * 0.9 * 2.9)


def test_sgd_minimises_a_quadratic() -> None:
    x = Parameter(Scalar(5.0))
    opt = SGD([x], lr=0.1, momentum=0.5)
    for _ in range(100):
        opt.zero_grad()
        ((x.value - 3.0) ** 2).backward()
        opt.step()
    assert exact_float(x.value.data) == pytest.approx(3.0, abs=1e-4)


# -- Adam -------------------------------------------------------------------------------


def reference_adam(grads: list[float], lr: float, b1: float, b2: float, eps: float) -> float:
    """Adam's position after these gradients, from the paper's update, starting at 0."""
    x, m, v = 0.0, 0.0, 0.0
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x -= lr * (m / (1 - b1**t)) / (math.sqrt(v / (1 - b2**t)) + eps)
    return x


def test_adam_first_step_is_lr_times_the_sign() -> None:
    params = params_with_grads([1.0, 1.0], [250.0, -0.003])
    Adam(params, lr=0.01).step()
    assert exact_float(params[0].value.data) == pytest.approx(0.99, abs=1e-7)
    assert exact_float(params[1].value.data) == pytest.approx(1.01, abs=1e-5)


def test_adam_matches_the_update_rule_over_several_steps() -> None:
    grads = [0.3, -1.2, 0.8, 0.05, 2.0]
    (p,) = params_with_grads([0.0], [None])
    opt = Adam([p], lr=0.05, betas=(0.8, 0.95), eps=1e-6)
    for g in grads:
        p.value.derivative = g
        opt.step()
    expected = reference_adam(grads, 0.05, 0.8, 0.95, 1e-6)
    assert exact_float(p.value.data) == pytest.approx(expected, rel=1e-9)


def test_adam_minimises_a_quadratic() -> None:
    x = Parameter(Scalar(-4.0))
    opt = Adam([x], lr=0.1)
    for _ in range(300):
        opt.zero_grad()
        ((x.value - 1.5) ** 2).backward()
        opt.step()
    assert exact_float(x.value.data) == pytest.approx(1.5, abs=1e-2)


# -- ScalarLinear and the network ---------------------------------------------------


def test_scalar_linear_matches_numpy() -> None:
    layer = ScalarLinear(3, 2)
    rng = np.random.default_rng(0)
    w = rng.normal(size=(3, 2))
    b = rng.normal(size=2)
    for i in range(3):
        for j in range(2):
            layer.weights[i][j].value.data = float(w[i, j])
    for j in range(2):
        layer.bias[j].value.data = float(b[j])
    x = [0.5, -1.0, 2.0]
    out = exact_list(layer(x), item=None)
    assert [exact_float(o.data) for o in out] == pytest.approx(list(np.asarray(x) @ w + b))


def test_scalar_linear_backpropagates_to_its_weights() -> None:
    layer = ScalarLinear(2, 1)
    layer.weights[0][0].value.data = 2.0
    layer.weights[1][0].value.data = -1.0
    layer.bias[0].value.data = 0.5
    x = [Scalar(3.0), Scalar(4.0)]
    (out,) = exact_list(layer(x), item=None)
    assert exact_float(out.data) == pytest.approx(2.5)
    out.backward()
    assert exact_float(layer.weights[0][0].value.derivative) == pytest.approx(3.0)
    assert exact_float(layer.weights[1][0].value.derivative) == pytest.approx(4.0)
    assert exact_float(layer.bias[0].value.derivative) == pytest.approx(1.0)
    assert exact_float(x[0].derivative) == pytest.approx(2.0)


def test_scalar_linear_parameters_are_named() -> None:
    layer = ScalarLinear(2, 3)
    names = [exact_str(name) for name, _ in layer.named_parameters()]
    assert len(names) == 2 * 3 + 3
    assert "weight_1_2" in names and "bias_2" in names
    out = exact_list(layer([1.0, 1.0]), item=None)
    assert len(out) == 3


def test_network_learns_the_simple_dataset() -> None:
    data = load_dataset("simple", 20, seed=3)
    model = ScalarNetwork(hidden=4, seed=0)
    opt = Adam(model.parameters(), lr=0.1)
    accuracy = 0.0
    for _ in range(40):
        _, accuracy = train_scalar.epoch(model, data, opt)
    assert accuracy >= 0.95
    # epoch() counts hits by comparing the model's outputs, which could fake a comparison:
    # count them again from outputs checked to be real floats.
    outputs = [exact_float(model(x).data) for x in data.X]
    hits = [(p > 0.5) == (label == 1) for p, label in zip(outputs, data.y, strict=True)]
    assert sum(hits) / data.N >= 0.95
    first = exact_float(model.layer1.weights[0][0].value.data)
    assert isinstance(model, Module) and math.isfinite(first)


def test_training_script_logs_every_epoch_and_saves_its_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_epoch = train_scalar.epoch

    def checked_epoch(*args: Any) -> tuple[float, float]:
        # The loss comes from the model under test: make sure the log gets a real float.
        loss, accuracy = real_epoch(*args)
        return exact_float(loss, what="loss"), exact_float(accuracy, what="accuracy")

    monkeypatch.setattr(train_scalar, "epoch", checked_epoch)
    code = train_scalar.main(
        ["--dataset", "diag", "--points", "12", "--hidden", "3", "--epochs", "5",
         "--out", str(tmp_path), "--log-every", "1"]
    )  # fmt: skip
    assert code == 0
    run = tmp_path / "scalar_diag"
    with open(run / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3, 4, 5]
    losses = [float(r["loss"]) for r in rows]
    assert all(math.isfinite(v) and v > 0 for v in losses)
    assert losses[-1] < losses[0]
    assert (run / "figure.png").read_bytes()[:4] == b"\x89PNG"
