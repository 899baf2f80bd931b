"""Task 6.4: dynamic loss scaling. float16 training whose gradients lie below float16's
range learns nothing without a scaler (they are flushed to zero) and, with one, takes
float32's steps; a step with an inf or a NaN gradient is skipped and the scale backs
off; the scale grows after ``growth_interval`` clean steps; misuse is an error."""

from __future__ import annotations

import numpy as np
import pytest

from module0.module import Module, Parameter
from module0.optim import SGD
from module1.creation import from_numpy
from module1.tensor import Tensor
from module2.fast_ops import FastTensorBackend
from module6.amp import autocast
from module6.scaler import GradScaler, ScalerError


class Tiny(Module):
    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.w1 = Parameter(
            from_numpy(rng.standard_normal((8, 16)).astype(np.float32) / 3, FastTensorBackend)
        )
        self.w2 = Parameter(
            from_numpy(rng.standard_normal((16, 4)).astype(np.float32) / 4, FastTensorBackend)
        )

    def forward(self, x: Tensor) -> Tensor:
        return (x @ self.w1.value).relu() @ self.w2.value


def _data() -> tuple[Tensor, Tensor]:
    rng = np.random.default_rng(1)
    x = from_numpy(rng.standard_normal((32, 8)).astype(np.float32), FastTensorBackend)
    y = from_numpy(rng.standard_normal((32, 4)).astype(np.float32), FastTensorBackend)
    return x, y


TINY = 1e-7  # the loss's weight: its gradients lie below float16's smallest, 6e-8


def _train(steps: int, amp: str | None, scaler: GradScaler | None) -> tuple[Tiny, list[np.ndarray]]:
    """SGD on ``TINY`` times a squared error, at a learning rate that undoes ``TINY``."""
    model, (x, y) = Tiny(), _data()
    optimizer = SGD(model.parameters(), lr=0.05 / TINY)
    firsts = []
    for _ in range(steps):
        with autocast(amp or "float16", enabled=amp is not None):
            loss = ((model(x) - y) ** 2).mean() * TINY
        optimizer.zero_grad()
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.unscale_(optimizer)
        firsts.append(model.w1.value.grad.to_numpy().copy())
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
    return model, firsts


def test_float16_without_a_scaler_flushes_the_gradients_to_zero() -> None:
    """The premise (given code alone): no scaler, no learning."""
    model, grads = _train(3, "float16", None)
    assert all(not g.any() for g in grads)
    start = Tiny()
    np.testing.assert_array_equal(model.w1.value.to_numpy(), start.w1.value.to_numpy())


@pytest.mark.task6_4
def test_float16_with_a_scaler_takes_float32s_steps() -> None:
    full, full_grads = _train(5, None, None)
    scaler = GradScaler()
    mixed, mixed_grads = _train(5, "float16", scaler)
    for f, m in zip(full_grads, mixed_grads, strict=False):  # float16's 3 digits: close, in norm
        assert np.linalg.norm(m - f) <= 0.03 * np.linalg.norm(f) and np.abs(f).max() > 0
    for name in ("w1", "w2"):
        got, want = getattr(mixed, name).value.to_numpy(), getattr(full, name).value.to_numpy()
        start = getattr(Tiny(), name).value.to_numpy()
        assert np.abs(got - start).max() > 0.01  # it learned
        moved, wanted = got - start, want - start
        assert np.linalg.norm(moved - wanted) <= 0.03 * np.linalg.norm(wanted)
    assert scaler.get_scale() == 2.0**16 and scaler.skipped == 0


def _one_step(scaler: GradScaler, grads: list[np.ndarray]) -> tuple[bool, SGD, list[Parameter]]:
    params = [Parameter(from_numpy(np.ones(g.shape, np.float32), FastTensorBackend)) for g in grads]
    for p, g in zip(params, grads, strict=False):
        p.value.grad = from_numpy(np.asarray(g, np.float32) * scaler.get_scale(), FastTensorBackend)
    optimizer = SGD(params, lr=1.0)
    took = scaler.step(optimizer)
    scaler.update()
    return took, optimizer, params


@pytest.mark.task6_4
def test_unscale_divides_every_gradient_and_finds_what_is_not_finite() -> None:
    scaler = GradScaler(init_scale=1024.0)
    params = [Parameter(from_numpy(np.zeros(3, np.float32), FastTensorBackend)) for _ in range(3)]
    params[0].value.grad = from_numpy(
        np.array([1024.0, -2048.0, 512.0], np.float32), FastTensorBackend
    )
    params[2].value.grad = from_numpy(np.array([3.0, 0.0, 1e6], np.float32), FastTensorBackend)
    optimizer = SGD(params, lr=1.0)
    scaler.unscale_(optimizer)
    np.testing.assert_array_equal(params[0].value.grad.to_numpy(), [1.0, -2.0, 0.5])
    np.testing.assert_allclose(params[2].value.grad.to_numpy(), [3 / 1024, 0.0, 1e6 / 1024])
    assert params[1].value.grad is None and params[0].value.grad.dtype == np.float32
    assert scaler.found_inf is False
    scaler.update()
    params[1].value.grad = from_numpy(np.array([1.0, np.inf, 2.0], np.float32), FastTensorBackend)
    scaler.unscale_(optimizer)
    assert scaler.found_inf is True, "unscale_ must set found_inf: a gradient holds inf"


@pytest.mark.task6_4
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_a_step_with_a_gradient_not_finite_is_skipped_and_the_scale_backs_off(bad: float) -> None:
    scaler = GradScaler(init_scale=256.0, backoff_factor=0.25)
    took, _, params = _one_step(scaler, [np.array([1.0, 2.0]), np.array([bad, 1.0])])
    assert not took, f"step took a step on a gradient holding {bad} (is found_inf set?)"
    assert scaler.skipped == 1, f"skipped is {scaler.skipped} after one skipped step"
    assert scaler.get_scale() == 64.0, f"scale {scaler.get_scale()}: 256 backed off by 0.25"
    for p in params:
        np.testing.assert_array_equal(p.value.to_numpy(), 1.0)  # untouched
    took, _, params = _one_step(scaler, [np.array([1.0, 2.0])])
    assert took and scaler.get_scale() == 64.0
    np.testing.assert_allclose(params[0].value.to_numpy(), [0.0, -1.0])  # unscaled step


@pytest.mark.task6_4
def test_the_scale_grows_after_growth_interval_clean_steps_in_a_row() -> None:
    scaler = GradScaler(init_scale=8.0, growth_interval=3)
    scales = []
    for bad in [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]:
        _one_step(scaler, [np.array([np.inf if bad else 1.0])])
        scales.append(scaler.get_scale())
    assert scales == [8, 8, 16, 16, 16, 8, 8, 8, 16, 16, 16, 32]


@pytest.mark.task6_4
def test_a_scaler_stepped_twice_or_unscaled_twice_is_an_error() -> None:
    scaler = GradScaler()
    param = Parameter(from_numpy(np.zeros(2, np.float32), FastTensorBackend))
    param.value.grad = from_numpy(np.ones(2, np.float32), FastTensorBackend)
    optimizer = SGD([param], lr=1.0)
    scaler.unscale_(optimizer)
    with pytest.raises(ScalerError, match="unscale_ called twice"):
        scaler.unscale_(optimizer)
    scaler.step(optimizer)
    with pytest.raises(ScalerError, match="step after step"):
        scaler.step(optimizer)
    scaler.update()
    scaler.step(optimizer)  # a new step after update is fine


def test_a_disabled_scaler_changes_nothing() -> None:
    scaler = GradScaler(enabled=False)
    took, _, params = _one_step(scaler, [np.array([np.inf])])
    assert took and scaler.get_scale() == 1.0 and np.isinf(params[0].value.to_numpy()).all()


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="backoff_factor"):
        GradScaler(backoff_factor=1.5)
    with pytest.raises(ValueError, match="growth_interval"):
        GradScaler(growth_interval=0)
