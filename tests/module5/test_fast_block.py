"""The reference's fast path for a training step's attention (``module5/fast_block.py``):
reference-only, like that file (a handout leaves both out; see ``autograder/release.py``).

Oracles: the GPT written in NumPy in ``test_gpt.py`` (:func:`np_gpt`) for the logits, on
the model's own weights drawn at random; the task's own route (split, heads, the fused
route's attention: ``fused_route.plain_route()`` turns this path off) for every
parameter's gradient; NumPy's reshape and transpose for the head layouts. Sizes around
the attention kernels' block of queries (``BLOCK_Q`` = 64) and the layouts' serial
threshold (``SERIAL_ROWS`` = 64 positions), in both dtypes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from module1 import tensor_functions
from module1.tensor_ops import SimpleBackend
from module5 import fast_block, fused_route
from module5.fused import BLOCK_Q
from module5.gpt import GPT, GPTConfig, KVCache
from module5.losses import lm_cross_entropy
from tests.module5.checks import randomize
from tests.module5.test_gpt import np_gpt

TOL = {"float64": 1e-10, "float32": 3e-4}


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The calls of :class:`QKVAttention`'s forward from now on (one per block)."""
    calls: list[int] = []
    forward = fast_block.QKVAttention.forward

    def counted(ctx: Any, *args: Any) -> Any:
        calls.append(1)
        return forward(ctx, *args)

    monkeypatch.setattr(fast_block.QKVAttention, "forward", staticmethod(counted))
    return calls


def _grads(gpt: GPT, idx: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, list]:
    for p in gpt.parameters():
        p.value.grad = None
    logits = gpt(idx)
    b, t, v = logits.shape
    lm_cross_entropy(logits.view(b * t, v), targets.reshape(-1)).backward()
    return logits.to_numpy(), [p.value.grad.to_numpy() for p in gpt.parameters()]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    ("batch", "t", "heads"),
    [(1, 1, 1), (3, 5, 2), (1, BLOCK_Q - 1, 2), (1, BLOCK_Q, 4), (2, BLOCK_Q + 1, 2)],
)
def test_a_gpt_step_through_it_gives_the_numpy_logits_and_the_tasks_gradients(
    dtype: str, batch: int, t: int, heads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = GPTConfig(vocab_size=11, block_size=t, n_layer=2, n_head=heads, n_embd=8 * heads)
    gpt = GPT(config, seed=2)
    gpt.to(dtype)
    params = randomize(gpt, 7)
    rng = np.random.default_rng(t)
    idx, targets = rng.integers(0, 11, (batch, t)), rng.integers(0, 11, (batch, t))
    calls = _counting(monkeypatch)
    logits, grads = _grads(gpt, idx, targets)
    assert len(calls) == config.n_layer  # the path was taken, once per block
    tol = TOL[dtype]
    np.testing.assert_allclose(logits, np_gpt(params, idx, config), rtol=tol, atol=tol)
    with fused_route.plain_route():
        _, want = _grads(gpt, idx, targets)
    for (name, _), got, w in zip(gpt.named_parameters(), grads, want, strict=True):
        np.testing.assert_allclose(got, w, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("positions", [fast_block.SERIAL_ROWS - 1, fast_block.SERIAL_ROWS, 65])
@pytest.mark.parametrize("parts", [1, 3])
def test_the_head_layouts_are_numpys_reshape_and_transpose(
    dtype: str, positions: int, parts: int
) -> None:
    batch, heads, d = (1, 3, 4) if positions % 2 else (positions // 8, 2, 5)
    t = positions // batch
    src = np.random.default_rng(positions).normal(size=(batch, t, parts * heads * d))
    src = src.astype(dtype)
    want = src.reshape(batch, t, parts, heads, d).transpose(2, 0, 3, 1, 4)
    got = np.full((parts, batch * heads, t, d), np.nan, dtype)
    fast_block.move_heads(src, got, heads, True)
    np.testing.assert_array_equal(got, want.reshape(parts, batch * heads, t, d))
    back = np.full_like(src, np.nan)
    fast_block.move_heads(back, got, heads, False)
    np.testing.assert_array_equal(back, src)


def test_it_steps_aside_where_the_task_route_must_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another backend, the plain route, a routing rule (stage 6's autocast installs
    one), a KV cache, dropout while training."""
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16)
    idx = np.zeros((1, 8), np.int64)
    calls = _counting(monkeypatch)
    GPT(config, backend=SimpleBackend)(idx)
    with fused_route.plain_route():
        GPT(config)(idx)
    with monkeypatch.context() as routed:
        routed.setattr(tensor_functions, "dispatch", lambda cls, vals: None)
        GPT(config)(idx)
    GPT(config)(idx, KVCache())
    dropping = GPT(GPTConfig(11, 8, 1, 2, 16, dropout=0.1))
    dropping(idx)
    assert calls == []
    dropping.eval()
    dropping(idx)
    assert calls == [1]
