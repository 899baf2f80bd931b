"""The reference's fast paths for clipping and AdamW (``module5/fast_optim.py``):
reference-only, like that file (a handout leaves both out; see ``autograder/release.py``).

Oracles: NumPy's float64 sum of squares; the task's own route (``module5.optim`` with
``fast_optim`` set to None: NumPy's ``*=`` for the decay, then task 2.4's
``adam_update``), which the fast AdamW must match exactly; NumPy's AdamW
(``test_optim.np_adamw``). Sizes around the serial thresholds (``SERIAL_MAX`` entries
for the sum, ``PARALLEL_MIN`` for the update) and the vector widths, in both dtypes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from module0.module import Parameter
from module1.tensor import from_numpy
from module2.fast_ops import FastTensorBackend as FAST
from module2.fast_optim import PARALLEL_MIN, adam_update
from module5 import fast_optim, optim
from module5.optim import AdamW, clip_grad_norm_
from tests.module5.test_optim import np_adamw

DTYPES = ["float64", "float32"]
SUM_SIZES = [0, 1, 7, 8, 9, 15, 16, 17, 33, fast_optim.SERIAL_MAX - 1, fast_optim.SERIAL_MAX,
             fast_optim.SERIAL_MAX + 1, 3 * fast_optim.SERIAL_MAX + 5]  # fmt: skip
UPDATE_SIZES = [1, 9, PARALLEL_MIN - 1, PARALLEL_MIN, PARALLEL_MIN + 1, 4 * PARALLEL_MIN + 3]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_of_squares_is_numpys_float64_sum(dtype: str) -> None:
    """Values of ``0.1 + noise``: summed in float32, 98K of them lose about 1e-4 of the
    total (a planted float32 accumulator fails here)."""
    rng = np.random.default_rng(0)
    for n in SUM_SIZES:
        x = (0.1 + 1e-3 * rng.standard_normal(n)).astype(dtype)
        expected = float(np.sum(x.astype(np.float64) ** 2))
        got = fast_optim.sum_of_squares(x)
        assert got == pytest.approx(expected, rel=1e-12, abs=0.0), f"{dtype}, {n} entries"


@pytest.mark.parametrize("n", [5, fast_optim.SERIAL_MAX + 1])
def test_sum_of_squares_keeps_a_nan_or_an_infinity(n: int) -> None:
    x = np.ones(n, np.float32)
    x[n // 2] = np.nan
    assert math.isnan(fast_optim.sum_of_squares(x))
    x[n // 2] = -np.inf
    assert fast_optim.sum_of_squares(x) == math.inf


def _parameters(dtype: str, seed: int) -> list[Parameter]:
    """Parameters at :data:`UPDATE_SIZES` (one a transposed view) with gradients."""
    rng = np.random.default_rng(seed)
    params = []
    for n in UPDATE_SIZES:
        p = Parameter(from_numpy(rng.standard_normal(n).astype(dtype), FAST, requires_grad=True))
        params.append(p)
    square = Parameter(from_numpy(rng.standard_normal((5, 3)).astype(dtype), FAST).permute(1, 0))
    params.append(square)
    return params


def _set_grads(params: list[Parameter], rng: np.random.Generator) -> None:
    for p in params:
        g = rng.standard_normal(p.value.shape).astype(p.value.dtype)
        p.value.grad = from_numpy(g, FAST)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adamw_step_is_the_task_routes_exactly(dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three steps of AdamW with two groups (decayed and not) through the fast path and
    through the task's route give bit-identical parameters and moments; and NumPy's
    AdamW's values. Planted bugs caught: the decay left out, the decay applied to the
    group without it, the decay unrounded (a float64 product in a float32 step)."""
    runs = []
    for fast in (True, False):
        monkeypatch.setattr(optim, "fast_optim", fast_optim if fast else None)
        params = _parameters(dtype, 1)
        start = [p.value.to_numpy().copy() for p in params]
        opt = AdamW([{"params": params[::2], "weight_decay": 0.1}, {"params": params[1::2]}],
                    lr=0.05, betas=(0.9, 0.99), weight_decay=0.0)  # fmt: skip
        rng, grads = np.random.default_rng(2), []
        for _ in range(3):
            _set_grads(params, rng)
            grads.append([p.value.grad.to_numpy() for p in params])
            opt.step()
        runs.append(([p.value.to_numpy() for p in params], opt))
    (fast_values, fast_opt), (route_values, route_opt) = runs
    for i, (a, b) in enumerate(zip(fast_values, route_values, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"parameter {i} ({a.size} entries)")
        np.testing.assert_array_equal(fast_opt.first_moment[i], route_opt.first_moment[i])
        np.testing.assert_array_equal(fast_opt.second_moment[i], route_opt.second_moment[i])
    assert fast_opt.steps == route_opt.steps == [3] * len(fast_values)
    for i, value in enumerate(fast_values):
        wd = 0.1 if i % 2 == 0 else 0.0
        gs = [step[i].astype(np.float64) for step in grads]
        expected = np_adamw(start[i].astype(np.float64), gs, 0.05, 0.9, 0.99, 1e-8, wd)
        rtol = 1e-12 if dtype == "float64" else 1e-5
        np.testing.assert_allclose(value, expected, rtol=rtol, atol=rtol, err_msg=f"param {i}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_adamw_update_is_the_decay_then_adam_update(dtype: str) -> None:
    """The kernel alone, at each size around ``PARALLEL_MIN``, against NumPy's ``*=``
    then task 2.4's ``adam_update`` on copies: bit-identical."""
    rng = np.random.default_rng(3)
    for n in UPDATE_SIZES:
        p, g, m, v = (rng.standard_normal(n).astype(dtype) for _ in range(4))
        v = np.abs(v)
        p2, m2, v2 = p.copy(), m.copy(), v.copy()
        keep = 1.0 - 0.05 * 0.1
        fast_optim.adamw_update(p, g, m, v, p.dtype.type(keep), 0.05, 0.9, 0.99, 1e-8, 4)
        p2 *= keep
        adam_update(p2, g, m2, v2, 0.05, 0.9, 0.99, 1e-8, 4)
        for got, want in ((p, p2), (m, m2), (v, v2)):
            np.testing.assert_array_equal(got, want, err_msg=f"{dtype}, {n} entries")
    with pytest.raises(ValueError, match="same length"):
        fast_optim.adamw_update(np.zeros(3), np.zeros(2), np.zeros(3), np.zeros(3), 1.0,
                                0.1, 0.9, 0.99, 1e-8, 1)  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("max_norm", [0.5, 1e6, 0.0])
def test_clipping_is_the_task_routes(
    dtype: str, max_norm: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The norm and the gradients after clipping (one of them a transposed view) through
    the fast path and the task's route. Planted bugs caught: a view's gradient left
    unscaled, a float32 sum of squares."""
    results = []
    for fast in (True, False):
        monkeypatch.setattr(optim, "fast_optim", fast_optim if fast else None)
        params = _parameters(dtype, 4)
        _set_grads(params, np.random.default_rng(5))
        last = params[-1].value
        last.grad = from_numpy(last.grad.to_numpy().T.copy(), FAST).permute(1, 0)  # a view
        total = clip_grad_norm_(params, max_norm)
        results.append((total, [p.value.grad.to_numpy() for p in params]))
    (fast_total, fast_grads), (route_total, route_grads) = results
    assert fast_total == pytest.approx(route_total, rel=1e-12)
    rtol = 1e-12 if dtype == "float64" else 1e-6
    for i, (a, b) in enumerate(zip(fast_grads, route_grads, strict=True)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0.0, err_msg=f"gradient {i}")
    if max_norm < fast_total:
        after = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in fast_grads))
        assert after == pytest.approx(max_norm, rel=1e-5, abs=1e-9)
