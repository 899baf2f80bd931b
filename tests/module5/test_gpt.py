"""Stage 5's GPT (``module5/gpt.py``): shapes, the tied head, causality, the KV cache,
generation, clear errors, and a few training steps that learn.

Oracles: a whole GPT written in NumPy below (:func:`np_gpt`), run on the model's own
weights after every parameter is drawn at random (so ``ln_1``, ``ln_2`` and ``ln_f``
differ, and a block wired another way gives other logits); central differences of that
NumPy forward for every parameter's gradient; the model's own full forward for the KV
cache (decoding in chunks must give the same logits); and a text with a rule (a
repeating pattern) that a few Adam steps must learn well below the uniform guess's loss.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from module1.grad_check import grad_check
from module1.tensor import from_numpy
from module1.tensor_data import ShapeError
from module2.fast_ops import FastTensorBackend as FAST
from module2.fast_optim import FastAdam
from module4.losses import cross_entropy
from module5 import fused_route
from module5.gpt import GPT, Block, GPTConfig, KVCache, MultiHeadAttention
from tests.module5.checks import randomize

pytestmark = pytest.mark.task5_3

SMALL = GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=16)


def model(config: GPTConfig = SMALL, seed: int = 1) -> GPT:
    return GPT(config, seed=seed)


def tokens(shape: tuple[int, int], seed: int = 0, vocab: int = 13) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, shape)


# -- the GPT in NumPy: the oracle of the wiring ------------------------------------------


def np_layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    c = x - x.mean(-1, keepdims=True)
    return c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5) * w + b


def np_gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def np_attention(x: np.ndarray, p: dict[str, np.ndarray], pre: str, heads: int) -> np.ndarray:
    b, t, c = x.shape
    d = c // heads
    qkv = x @ p[pre + "c_attn.weight"] + p[pre + "c_attn.bias"]
    q, k, v = (a.reshape(b, t, heads, d).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, -1))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    scores = np.where(np.tri(t, dtype=bool), scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    y = (w / w.sum(-1, keepdims=True)) @ v
    y = y.transpose(0, 2, 1, 3).reshape(b, t, c)
    return y @ p[pre + "c_proj.weight"] + p[pre + "c_proj.bias"]


def np_block(x: np.ndarray, p: dict[str, np.ndarray], pre: str, heads: int) -> np.ndarray:
    """GPT-2's pre-LayerNorm block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""
    ln = {i: (p[f"{pre}ln_{i}.weight"], p[f"{pre}ln_{i}.bias"]) for i in (1, 2)}
    x = x + np_attention(np_layer_norm(x, *ln[1]), p, pre + "attn.", heads)
    h = np_gelu(np_layer_norm(x, *ln[2]) @ p[pre + "mlp.c_fc.weight"] + p[pre + "mlp.c_fc.bias"])
    return x + h @ p[pre + "mlp.c_proj.weight"] + p[pre + "mlp.c_proj.bias"]


def np_gpt(p: dict[str, np.ndarray], idx: np.ndarray, config: GPTConfig) -> np.ndarray:
    """Token plus position embeddings, the blocks, ``ln_f``, the tied head."""
    x = p["wte.weight"][idx] + p["wpe.weight"][np.arange(idx.shape[1])]
    for i in range(config.n_layer):
        x = np_block(x, p, f"h{i}.", config.n_head)
    return np_layer_norm(x, p["ln_f.weight"], p["ln_f.bias"]) @ p["wte.weight"].T


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


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_block_is_the_numpy_pre_layernorm_block(dtype: type) -> None:
    """One Block with every parameter drawn at random: ``x + attn(ln_1(x))``, then
    ``x + mlp(ln_2(x))`` (the MLP through ``ln_2``, not ``ln_1``; no LayerNorm after the
    sum: that is the post-LN block of the 2017 transformer, not GPT-2's)."""
    block = Block(16, 2, 0.0, 1, np.random.default_rng(0), FAST)
    block.to(dtype)
    params = randomize(block, seed=3)
    x = np.random.default_rng(1).normal(size=(2, 5, 16))
    got = block(from_numpy(x.astype(dtype), FAST)).to_numpy()
    rtol = 1e-10 if dtype == np.float64 else 2e-4
    np.testing.assert_allclose(got, np_block(x, params, "", 2), rtol=rtol, atol=rtol,
                               err_msg="Block.forward against GPT-2's block in NumPy")  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_gpt_is_the_numpy_gpt(dtype: type) -> None:
    """The whole model against :func:`np_gpt`, every parameter random: embeddings, two
    blocks, the final LayerNorm, the tied head."""
    gpt = model().to(dtype)
    params = randomize(gpt, seed=4)
    idx = tokens((3, 7), seed=9)
    got = gpt(idx).to_numpy()
    rtol = 1e-10 if dtype == np.float64 else 2e-4
    np.testing.assert_allclose(got, np_gpt(params, idx, SMALL), rtol=rtol, atol=rtol,
                               err_msg="GPT.forward against the GPT in NumPy")  # fmt: skip


def test_every_parameter_gets_its_gradient() -> None:
    """The gradient of a weighted sum of the logits for every parameter, against central
    differences of the NumPy GPT at three entries of each: a parameter the forward
    skips (``ln_2`` unused, ``ln_f`` missing) gets none, and says which."""
    gpt = model()
    params = randomize(gpt, seed=5)
    idx = tokens((2, 6), seed=10)
    weights = np.random.default_rng(11).normal(size=(2, 6, 13))
    (gpt(idx) * from_numpy(weights, FAST)).sum().backward()
    rng = np.random.default_rng(12)
    for name, p in gpt.named_parameters():
        assert p.value.grad is not None, f"{name} got no gradient"
        grad = p.value.grad.to_numpy()
        assert grad.shape == params[name].shape, f"{name}: gradient of shape {grad.shape}"
        for flat in rng.choice(grad.size, min(3, grad.size), replace=False):
            at = np.unravel_index(flat, grad.shape)
            up, down = dict(params), dict(params)
            up[name], down[name] = params[name].copy(), params[name].copy()
            up[name][at] += 1e-6
            down[name][at] -= 1e-6
            slope = ((np_gpt(up, idx, SMALL) - np_gpt(down, idx, SMALL)) * weights).sum() / 2e-6
            assert grad[at] == pytest.approx(slope, rel=1e-5, abs=1e-7), f"{name}{list(at)}"


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
@pytest.mark.parametrize("chunks", [(3, 1, 1, 1, 1, 1), (2, 3, 3)], ids=["one at a time", "chunks"])
def test_the_kv_cache_gives_the_full_forwards_logits(dtype: type, chunks: tuple[int, ...]) -> None:
    """Decoding with a cache, a position at a time or several at once, gives the full
    forward's logits. Chunks of several positions show the order of the cached keys
    (new ones after the cached ones): one-position steps cannot, since attention does
    not depend on the order of its keys."""
    gpt = model().to(dtype)
    randomize(gpt, seed=6)
    idx = tokens((2, 8), seed=4)
    full = gpt(idx).to_numpy()
    cache = KVCache()
    parts, done = [], 0
    for n in chunks:
        parts.append(gpt(idx[:, done : done + n], cache).to_numpy())
        done += n
        assert cache.length == done
    rtol = 1e-12 if dtype == np.float64 else 1e-4
    got = np.concatenate(parts, axis=1)
    np.testing.assert_allclose(got, full, rtol=rtol, atol=rtol, err_msg=f"KVCache, chunks {chunks}")
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
    with fused_route.plain_route():  # the model's own forward, not a fast path
        out = gpt.generate(tokens((1, 3), seed=5), 20, seed=2)
    assert out.shape == (1, 23)
    window = [1, 1, 1, 1]
    assert lengths == [3, 1, 1, 1, 1, 1, 4, *window, 4, *window, 4, 1, 1, 1]


def greedy(gpt: GPT, context: np.ndarray, n: int) -> np.ndarray:
    """The argmax of the last position's logits, ``n`` times (no cache)."""
    out = context
    for _ in range(n):
        logits = gpt(out[:, -SMALL.block_size :]).to_numpy()[:, -1]
        out = np.concatenate([out, logits.argmax(-1)[:, None]], axis=1)
    return out


def test_top_k_of_one_is_greedy() -> None:
    gpt = model()
    randomize(gpt, seed=7)
    context = tokens((2, 4), seed=6)
    np.testing.assert_array_equal(
        gpt.generate(context, 6, top_k=1, seed=3), greedy(gpt, context, 6)
    )


def test_a_tiny_temperature_is_greedy() -> None:
    """``softmax(logits / T)`` with ``T -> 0`` puts every chance on the largest logit
    (multiplying by ``T`` instead would flatten it towards uniform)."""
    gpt = model()
    randomize(gpt, seed=8)
    context = tokens((2, 3), seed=2)
    got = gpt.generate(context, 6, temperature=1e-4, seed=5)
    want = greedy(gpt, context, 6)
    np.testing.assert_array_equal(got, want, err_msg="temperature=1e-4 is not greedy decoding")
    hot = gpt.generate(np.repeat(context[:1], 64, axis=0), 1, temperature=1e3, seed=5)
    assert len(np.unique(hot[:, -1])) > 5  # a high temperature spreads the draws


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
    for empty in ((0, 3), (2, 0)):
        with pytest.raises(ShapeError, match=rf"shape \({empty[0]}, {empty[1]}\): no position"):
            gpt(np.zeros(empty, dtype=np.int64))
    with pytest.raises(ShapeError, match="n_embd 10 is not divisible by n_head 4"):
        GPTConfig(vocab_size=5, n_embd=10, n_head=4)
    with pytest.raises(ShapeError, match="n_embd 10 is not divisible by n_head 3"):
        MultiHeadAttention(10, 3)
    cache = KVCache()
    gpt(tokens((1, 6)), cache)
    with pytest.raises(ShapeError, match="10 positions"):
        gpt(tokens((1, 4)), cache)


def test_a_few_adam_steps_learn_a_pattern() -> None:
    """``0 1 2 ... 6 0 1 2 ...``: each token determines the next, so the loss can fall
    far below the uniform guess's ``log 7``. (Stage 2's Adam, not task 5.4's AdamW: a
    test of task 5.3 needs no later task.)"""
    config = GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=2, n_embd=16)
    gpt = GPT(config, seed=0)
    stream = np.arange(200) % 7
    rng = np.random.default_rng(0)
    opt = FastAdam(gpt.parameters(), lr=1e-2)
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
