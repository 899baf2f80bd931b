"""The reference's fast path for generation (``module5/fast_decode.py``): reference-only,
like that file (a handout leaves both out; see ``autograder/release.py``).

Oracle: the GPT written in NumPy in ``test_gpt.py`` (:func:`np_gpt`), on the model's own
weights after every parameter is drawn at random (so a LayerNorm, bias or product wired
another way gives other logits). The decoder's last-position logits after ``start`` on
every prefix length up to ``block_size`` and after each ``step`` to a full cache, for
one and several sequences, in both dtypes; and the tokens ``generate`` samples, with the
fast path and through the model's own forward (``fused_route.plain_route()``), past
several rebuilds of the cache.
"""

from __future__ import annotations

import numpy as np
import pytest

from module1.tensor_ops import SimpleBackend
from module5 import fused_route
from module5.fast_decode import Decoder, decoder_for
from module5.gpt import GELU, GPT, GPTConfig, LayerNorm
from tests.module5.checks import randomize
from tests.module5.test_gpt import np_gpt

CONFIG = GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=16)
TOL = {"float64": 1e-10, "float32": 2e-4}


def random_model(dtype: str, seed: int = 4, config: GPTConfig = CONFIG) -> tuple[GPT, dict]:
    gpt = GPT(config, seed=seed)
    gpt.to(dtype)
    return gpt, randomize(gpt, seed)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("batch", [1, 3])
def test_start_and_step_give_the_numpy_gpts_last_logits(dtype: str, batch: int) -> None:
    gpt, params = random_model(dtype)
    idx = np.random.default_rng(batch).integers(0, 13, (batch, CONFIG.block_size))
    decoder = decoder_for(gpt, batch)
    assert isinstance(decoder, Decoder)
    for length in range(1, CONFIG.block_size + 1):  # every prefix from position 0
        got = decoder.start(idx[:, :length])
        want = np_gpt(params, idx[:, :length], CONFIG)[:, -1]
        np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype],
                                   err_msg=f"start on {length} tokens")  # fmt: skip
        assert decoder.length == length and got.dtype == np.float64
    for first in (1, 5):  # then one position at a time up to a full cache
        decoder.start(idx[:, :first])
        for length in range(first + 1, CONFIG.block_size + 1):
            got = decoder.step(idx[:, length - 1 : length])
            want = np_gpt(params, idx[:, :length], CONFIG)[:, -1]
            np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype],
                                       err_msg=f"step to {length} after {first}")  # fmt: skip


def test_a_wider_model_with_more_heads() -> None:
    """Heads of 8 channels (not the 8 of ``CONFIG`` by chance: 4 heads of 8 in 32)."""
    config = GPTConfig(vocab_size=13, block_size=6, n_layer=1, n_head=4, n_embd=32)
    gpt, params = random_model("float64", 9, config)
    idx = np.random.default_rng(0).integers(0, 13, (2, 6))
    decoder = decoder_for(gpt, 2)
    assert decoder is not None
    decoder.start(idx[:, :2])
    for length in range(3, 7):
        got = decoder.step(idx[:, length - 1 : length])
        np.testing.assert_allclose(got, np_gpt(params, idx[:, :length], config)[:, -1],
                                   rtol=1e-10, atol=1e-10)  # fmt: skip


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_generate_samples_what_the_models_own_forward_samples(dtype: str) -> None:
    """Past ``block_size`` (8): the cache is rebuilt from the last 4 tokens, again and
    again; the fast path and the model's forward draw the same tokens."""
    gpt, _ = random_model(dtype, seed=5)
    context = np.random.default_rng(1).integers(0, 13, (2, 3))
    fast = gpt.generate(context, 25, temperature=0.9, top_k=6, seed=3)
    with fused_route.plain_route():
        plain = gpt.generate(context, 25, temperature=0.9, top_k=6, seed=3)
    np.testing.assert_array_equal(fast, plain)


def test_generate_uses_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    gpt, _ = random_model("float32")
    calls: list[int] = []
    monkeypatch.setattr(GPT, "forward", lambda *a, **k: calls.append(1))
    gpt.generate(np.zeros((1, 1), np.int64), 12, seed=0)
    assert calls == []  # not one forward of the model


class _ScaledGELU(GELU):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return super().forward(x) * 2.0


class _SubGPT(GPT):
    pass


def test_it_steps_aside_where_it_would_compute_something_else() -> None:
    """A subclass anywhere (its forward may differ), another backend, the plain route."""
    assert decoder_for(random_model("float64")[0], 1) is not None
    assert decoder_for(_SubGPT(CONFIG), 1) is None
    gpt = GPT(CONFIG)
    gpt.h0.mlp.gelu = _ScaledGELU()
    assert decoder_for(gpt, 1) is None
    gpt = GPT(CONFIG)
    gpt.h1.ln_2 = type("Norm", (LayerNorm,), {})(CONFIG.n_embd)
    assert decoder_for(gpt, 1) is None
    assert decoder_for(GPT(CONFIG, backend=SimpleBackend), 1) is None
    with fused_route.plain_route():
        assert decoder_for(GPT(CONFIG), 1) is None


def test_a_changed_gelu_changes_what_generate_samples() -> None:
    """The planted bug a fast path invites: a model that differs from the packed
    weights' layout still generating by them."""
    gpt, _ = random_model("float64", seed=6)
    context = np.zeros((1, 1), np.int64)
    before = gpt.generate(context, 10, temperature=0.5, seed=1)
    gpt.h0.mlp.gelu = _ScaledGELU()
    with fused_route.plain_route():
        want = gpt.generate(context, 10, temperature=0.5, seed=1)
    got = gpt.generate(context, 10, temperature=0.5, seed=1)
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(want, before)
