"""Stage 5's training tools (``module5/optim.py``) against NumPy: AdamW with decoupled
weight decay and parameter groups, clipping by the global norm, the cosine schedule."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from module0.module import Parameter
from module1.tensor import from_numpy
from module2.fast_ops import FastTensorBackend as FAST
from module5.gpt import GPT, GPTConfig
from module5.optim import AdamW, clip_grad_norm_, cosine_lr, decay_groups

pytestmark = pytest.mark.task5_4


def np_adamw(p, grads, lr, b1, b2, eps, wd):  # type: ignore[no-untyped-def]
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return p


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_adamw_matches_numpy_with_two_groups(dtype: type) -> None:
    rng = np.random.default_rng(0)
    start = [rng.normal(size=(3, 4)), rng.normal(size=5)]
    params = [Parameter(from_numpy(s.astype(dtype), FAST, requires_grad=True)) for s in start]
    grads = [[rng.normal(size=s.shape) for _ in range(3)] for s in start]
    opt = AdamW([{"params": [params[0]]}, {"params": [params[1]], "weight_decay": 0.0}],
                lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.3)  # fmt: skip
    for step in range(3):
        for p, g in zip(params, grads, strict=True):
            p.value.grad = from_numpy(g[step].astype(dtype), FAST)
        opt.step()
    rtol = 1e-10 if dtype == np.float64 else 1e-5
    for p, s, g, wd in zip(params, start, grads, (0.3, 0.0), strict=True):
        want = np_adamw(s, g, 0.05, 0.8, 0.95, 1e-6, wd)
        np.testing.assert_allclose(p.value.to_numpy(), want, rtol=rtol, atol=rtol)
        assert p.value.dtype == dtype


def test_decay_groups_decay_only_the_linear_matrices() -> None:
    gpt = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
    decay, keep = decay_groups(gpt, 0.1)
    names = {id(p): n for n, p in gpt.named_parameters()}
    decayed = sorted(names[id(p)] for p in decay["params"])
    assert decayed == ["h0.attn.c_attn.weight", "h0.attn.c_proj.weight",
                       "h0.mlp.c_fc.weight", "h0.mlp.c_proj.weight"]  # fmt: skip
    assert keep["weight_decay"] == 0.0 and len(keep["params"]) + 4 == len(names)


def test_decay_groups_are_the_same_for_a_model_inside_a_wrapper() -> None:
    from module0.module import Module

    gpt = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
    wrapper = Module()
    wrapper.module = gpt  # as DistributedDataParallel holds it: names start "module."
    for inner, outer in zip(decay_groups(gpt, 0.1), decay_groups(wrapper, 0.1), strict=True):
        assert [id(p) for p in inner["params"]] == [id(p) for p in outer["params"]]


def test_clipping_scales_every_gradient_by_the_global_norm() -> None:
    rng = np.random.default_rng(1)
    gs = [rng.normal(size=(3, 3)), rng.normal(size=4)]
    params = [Parameter(from_numpy(np.zeros(g.shape), FAST, requires_grad=True)) for g in gs]
    for p, g in zip(params, gs, strict=True):
        p.value.grad = from_numpy(g, FAST)
    total = math.sqrt(sum(float((g * g).sum()) for g in gs))
    assert clip_grad_norm_(params, 1.0) == pytest.approx(total, rel=1e-12)
    after = math.sqrt(sum(float((p.value.grad.to_numpy() ** 2).sum()) for p in params))
    assert after == pytest.approx(1.0, rel=1e-5)
    np.testing.assert_allclose(params[1].value.grad.to_numpy(), gs[1] / total, rtol=1e-5)
    assert clip_grad_norm_(params, 10.0) == pytest.approx(after)  # under the bar: unchanged
    np.testing.assert_allclose(params[1].value.grad.to_numpy(), gs[1] / total, rtol=1e-5)


def test_clipping_scales_a_gradient_that_is_a_view() -> None:
    """A gradient that is not contiguous (a transposed view, as a backward may leave
    it) is scaled like any other, and counts in the norm."""
    rng = np.random.default_rng(2)
    g0, g1 = rng.normal(size=(4, 3)), rng.normal(size=5)
    params = [Parameter(from_numpy(np.zeros((3, 4)), FAST, requires_grad=True)),
              Parameter(from_numpy(np.zeros(5), FAST, requires_grad=True))]  # fmt: skip
    params[0].value.grad = from_numpy(g0, FAST).permute(1, 0)  # a view: strides (1, 3)
    params[1].value.grad = from_numpy(g1, FAST)
    assert not params[0].value.grad._tensor.is_contiguous()
    total = math.sqrt(float((g0**2).sum() + (g1**2).sum()))
    assert clip_grad_norm_(params, 0.5) == pytest.approx(total, rel=1e-12)
    scale = 0.5 / (total + 1e-6)
    np.testing.assert_allclose(params[0].value.grad.to_numpy(), g0.T * scale, rtol=1e-12,
                               err_msg="the transposed gradient was not scaled")  # fmt: skip
    np.testing.assert_allclose(params[1].value.grad.to_numpy(), g1 * scale, rtol=1e-12)


def test_clipping_to_zero_zeroes_and_a_negative_bar_is_refused() -> None:
    """``max_norm = 0`` scales every gradient to 0 (as ``torch.nn.utils.clip_grad_norm_``);
    a missing gradient is skipped; a negative bar is a mistake."""
    params = [Parameter(from_numpy(np.zeros(3), FAST, requires_grad=True)) for _ in range(2)]
    params[0].value.grad = from_numpy(np.array([3.0, 0.0, -4.0]), FAST)
    assert clip_grad_norm_(params, 0.0) == pytest.approx(5.0)
    np.testing.assert_array_equal(params[0].value.grad.to_numpy(), 0.0)
    assert params[1].value.grad is None
    with pytest.raises(ValueError, match="max_norm must be at least 0, got -1"):
        clip_grad_norm_(params, -1.0)


def test_the_cosine_schedule_warms_up_then_falls_to_its_floor() -> None:
    lrs = [cosine_lr(s, 1.0, 10, 110, 0.1) for s in range(120)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[60] == pytest.approx(0.1 + 0.9 * 0.5)  # half way down the cosine
    assert lrs[110] == lrs[119] == 0.1
    assert all(a >= b for a, b in itertools.pairwise(lrs[10:]))
