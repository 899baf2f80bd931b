"""``module5/losses.py``: the language model's one-copy cross-entropy against stage 4's
``cross_entropy`` (values and gradients, both dtypes, non-contiguous logits), central
differences, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from module1.grad_check import grad_check
from module1.tensor import from_numpy
from module1.tensor_data import IndexingError, ShapeError
from module2.fast_ops import FastTensorBackend as FAST
from module4.losses import cross_entropy
from module5.losses import lm_cross_entropy


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("transposed", [False, True])
def test_the_loss_and_gradient_are_stage_4s(dtype: type, transposed: bool) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(scale=5.0, size=(9, 13)).astype(dtype)
    targets = rng.integers(0, 13, 9)
    grads = []
    for fn in (lm_cross_entropy, cross_entropy):
        if transposed:  # the same values, stored column by column
            leaf = from_numpy(np.ascontiguousarray(x.T), FAST, requires_grad=True)
            logits = leaf.permute(1, 0)
            assert not logits.is_contiguous()
        else:
            leaf = logits = from_numpy(x, FAST, requires_grad=True)
        loss = fn(logits, targets)
        assert loss.shape == () and loss.dtype == dtype
        (loss * 3.0).backward()
        grads.append((loss.item(), leaf.grad.to_numpy()))
    (ours, g_ours), (theirs, g_theirs) = grads
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert ours == pytest.approx(theirs, rel=tol)
    np.testing.assert_allclose(g_ours, g_theirs, rtol=tol * 10, atol=tol)


def test_the_backward_matches_central_differences() -> None:
    rng = np.random.default_rng(1)
    targets = rng.integers(0, 6, 5)
    grad_check(lambda t: lm_cross_entropy(t, targets), from_numpy(rng.normal(size=(5, 6)), FAST))


def test_bad_targets_and_a_second_backward_are_refused() -> None:
    logits = from_numpy(np.zeros((3, 4)), FAST, requires_grad=True)
    with pytest.raises(IndexingError, match=r"lm_cross_entropy: target 4 at position 1"):
        lm_cross_entropy(logits, [0, 4, 1])
    with pytest.raises(ShapeError, match=r"shape \(3,\)"):
        lm_cross_entropy(logits, [0, 1])
    loss = lm_cross_entropy(logits, [0, 1, 2])
    loss.backward(retain_graph=True)  # its probabilities became the gradient: no second
    assert loss.item() == pytest.approx(np.log(4))
    with pytest.raises(RuntimeError, match="second backward"):
        loss.backward()
