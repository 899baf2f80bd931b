"""Stage 5's GPT (``module5/gpt.py``): shapes, the tied head, causality, the KV cache,
generation, clear errors, and a few training steps that learn.

Oracles: the model's own full forward for the KV cache (incremental decoding must give
the same logits), NumPy for the pieces (a LayerNorm and a tied head recomputed by hand),
central differences for a whole block's backward, and a text with a rule (a repeating
pattern) that a few AdamW steps must learn well below the uniform guess's loss.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from module1.grad_check import grad_check
from module1.tensor import from_numpy
from module1.tensor_data import ShapeError
from module2.fast_ops import FastTensorBackend as FAST
from module4.losses import cross_entropy
from module5.gpt import GPT, Block, GPTConfig, KVCache, MultiHeadAttention
from module5.optim import AdamW, decay_groups

pytestmark = pytest.mark.task5_3

SMALL = GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=16)


def model(config: GPTConfig = SMALL, seed: int = 1) -> GPT:
    return GPT(config, seed=seed)


def tokens(shape: tuple[int, int], seed: int = 0, vocab: int = 13) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, shape)


def test_logits_have_one_row_per_position_and_the_head_is_the_token_table() -> None:
    gpt = model()
    idx = tokens((3, 5))
    logits = gpt(idx)
    assert logits.shape == (3, 5, 13)
    names = [n for n, _ in gpt.named_parameters()]
    assert not any("head" in n or "lm_head" in n for n in names)  # tied: no table of its own
    c = SMALL.n_embd
    per_block = (
        2 * 2 * c + (c * 3 * c + 3 * c) + (c * c + c) + (c * 4 * c + 4 * c) + (4 * c * c + c)
    )
    want = 13 * c + 8 * c + SMALL.n_layer * per_block + 2 * c
    assert gpt.num_parameters() == want
    assert f"Total parameters: {want:,}" in gpt.summary()


def test_the_tied_head_multiplies_by_the_token_table() -> None:
    gpt = model()
    idx = tokens((1, 4))
    with_table = gpt(idx).to_numpy()
    table = gpt.wte.weight.value.to_numpy().copy()
    gpt.wte.weight.update(from_numpy(table * 2.0, FAST))  # reads and writes double
    doubled = gpt(idx).to_numpy()
    assert not np.allclose(doubled, with_table)
    logits = gpt(idx)
    (logits.sum()).backward()
    grad = gpt.wte.weight.value.grad.to_numpy()
    assert np.abs(grad[np.setdiff1d(np.arange(13), idx)]).max() > 0  # the head reaches all rows


def test_the_model_is_causal_forward_and_backward() -> None:
    """Changing the tokens after position ``t`` changes no logit at or before ``t``, and
    a loss on positions up to ``t`` sends no gradient to later position embeddings."""
    gpt = model()
    idx = tokens((2, 8), seed=3)
    changed = idx.copy()
    changed[:, 5:] = (changed[:, 5:] + 1) % 13
    one, two = gpt(idx).to_numpy(), gpt(changed).to_numpy()
    np.testing.assert_array_equal(one[:, :5], two[:, :5])
    assert not np.allclose(one[:, 5:], two[:, 5:])
    logits = gpt(idx)
    weights = np.zeros(logits.shape)
    weights[:, :5] = np.random.default_rng(0).normal(size=(2, 5, 13))
    (logits * from_numpy(weights, FAST)).sum().backward()
    wpe = gpt.wpe.weight.value.grad.to_numpy()
    assert (wpe[5:] == 0.0).all() and np.abs(wpe[:5]).min() > 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_kv_cache_gives_the_full_forwards_logits(dtype: type) -> None:
    gpt = model().to(dtype)
    idx = tokens((2, 8), seed=4)
    full = gpt(idx).to_numpy()
    cache = KVCache()
    parts = [gpt(idx[:, :3], cache).to_numpy()]
    for i in range(3, 8):
        parts.append(gpt(idx[:, i : i + 1], cache).to_numpy())
        assert cache.length == i + 1
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(np.concatenate(parts, axis=1), full, rtol=rtol, atol=rtol)
    assert [layer.k.shape for layer in cache.layers] == [(2, 2, 8, 8)] * 2


def test_generation_with_and_without_the_cache_samples_the_same_tokens() -> None:
    gpt = model()
    context = tokens((2, 3), seed=5)
    cached = gpt.generate(context, 5, temperature=0.8, top_k=5, seed=7)
    plain = gpt.generate(context, 5, temperature=0.8, top_k=5, seed=7, use_cache=False)
    np.testing.assert_array_equal(cached, plain)
    assert cached.shape == (2, 8) and (cached[:, :3] == context).all()
    assert cached.min() >= 0 and cached.max() < 13
    longer = gpt.generate(context[:1], 20, seed=1)  # past block_size: the cache restarts
    assert longer.shape == (1, 23)
    assert gpt.training  # generate puts back the mode it found


def test_past_block_size_the_cache_is_rebuilt_every_half_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Generation past ``block_size`` (8) stays O(T) per token: the first forward takes
    the context (3 tokens), the cache fills a position at a time to 8, then it is
    rebuilt from the last 4 tokens and filled again, and so on; never a whole-block
    forward per token. Planted bug caught: rebuilding from ``block_size - 1`` tokens
    (a 7-token forward at every step past the block)."""
    gpt = model()
    lengths: list[int] = []
    forward = GPT.forward

    def counted(self: GPT, idx: np.ndarray, cache: KVCache | None = None) -> object:
        lengths.append(np.asarray(idx).shape[1])
        return forward(self, idx, cache)

    monkeypatch.setattr(GPT, "forward", counted)
    out = gpt.generate(tokens((1, 3), seed=5), 20, seed=2)
    assert out.shape == (1, 23)
    window = [1, 1, 1, 1]
    assert lengths == [3, 1, 1, 1, 1, 1, 4, *window, 4, *window, 4, 1, 1, 1]


def test_top_k_of_one_is_greedy() -> None:
    gpt = model()
    context = tokens((1, 4), seed=6)
    out = gpt.generate(context, 1, top_k=1, seed=3)
    assert out[0, -1] == int(np.argmax(gpt(context).to_numpy()[0, -1]))


def test_a_block_backward_matches_central_differences() -> None:
    block = Block(8, 2, 0.0, 1, np.random.default_rng(0), FAST)
    x = from_numpy(np.random.default_rng(1).normal(size=(2, 3, 8)), FAST)
    grad_check(block, x, checks=12)


def test_bad_input_is_told_with_its_shapes() -> None:
    gpt = model()
    with pytest.raises(ShapeError, match="9 positions is longer than the model's block_size 8"):
        gpt(tokens((1, 9)))
    with pytest.raises(IndexError, match=r"token 13 is outside the vocabulary \[0, 13\)"):
        gpt(np.array([[1, 13]]))
    with pytest.raises(ShapeError, match=r"want \(B, T\)"):
        gpt(np.array([1, 2]))
    with pytest.raises(ShapeError, match="n_embd 10 is not divisible by n_head 4"):
        GPTConfig(vocab_size=5, n_embd=10, n_head=4)
    with pytest.raises(ShapeError, match="n_embd 10 is not divisible by n_head 3"):
        MultiHeadAttention(10, 3)
    cache = KVCache()
    gpt(tokens((1, 6)), cache)
    with pytest.raises(ShapeError, match="10 positions"):
        gpt(tokens((1, 4)), cache)


def test_a_few_adamw_steps_learn_a_pattern() -> None:
    """``0 1 2 ... 6 0 1 2 ...``: each token determines the next, so the loss can fall
    far below the uniform guess's ``log 7``."""
    config = GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=2, n_embd=16)
    gpt = GPT(config, seed=0)
    stream = np.arange(200) % 7
    rng = np.random.default_rng(0)
    opt = AdamW(decay_groups(gpt, 0.1), lr=1e-2)
    losses = []
    for _ in range(40):
        starts = rng.integers(0, len(stream) - 9, 8)
        x = np.stack([stream[s : s + 8] for s in starts])
        y = np.stack([stream[s + 1 : s + 9] for s in starts])
        loss = cross_entropy(gpt(x).contiguous().view(64, 7), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 0.8 * math.log(7)
    assert losses[-1] < 0.3, losses[::5]
