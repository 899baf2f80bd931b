"""Stage 5's layers and the GPT: LayerNorm, GELU, causal multi-head self-attention with
a KV cache, pre-LayerNorm blocks, and a decoder-only language model with a head tied to
its token embedding, and sampling from it.

Shapes: ``B`` sequences, ``T`` positions, ``C = n_embd`` channels, ``H = n_head`` heads
of ``D = C / H`` channels each, ``V`` tokens in the vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from module0.autodiff import no_grad
from module0.module import Module, Parameter
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module1.tensor_ops import TensorBackend
from module2.fast_ops import FastTensorBackend
from module4.layers import Dropout, Embedding, Linear
from module5.functional import cat, gelu, layer_norm, scaled_dot_product_attention, split

INIT_STD = 0.02
"""GPT-2's initial scale: every weight N(0, 0.02²), the residual projections
N(0, (0.02 / sqrt(2 n_layer))²) so the residual stream's variance does not grow with
depth; biases 0, LayerNorms 1 and 0."""


class LayerNorm(Module):
    """LayerNorm over the last dimension of size ``n``, with a weight (1) and bias (0)."""

    def __init__(self, n: int, eps: float = 1e-5, backend: TensorBackend = FastTensorBackend):
        super().__init__()
        self.weight = Parameter(from_numpy(np.ones(n), backend), "weight")
        self.bias = Parameter(from_numpy(np.zeros(n), backend), "bias")
        self.n, self.eps = n, eps

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.weight.value, self.bias.value, self.eps)

    def __repr__(self) -> str:
        return f"LayerNorm({self.n})"


class GELU(Module):
    """GELU (tanh form) entry by entry."""

    def forward(self, x: Tensor) -> Tensor:
        return gelu(x)

    def __repr__(self) -> str:
        return "GELU()"


@dataclass
class LayerCache:
    """One attention layer's keys and values so far, ``(B, H, S, D)`` each."""

    k: Tensor | None = None
    v: Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]


@dataclass
class KVCache:
    """The keys and values of every layer for the positions decoded so far: the next
    token's forward computes its own query, key and value only, and attends to these."""

    layers: list[LayerCache] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.layers[0].length if self.layers else 0


def _normal(shape: tuple[int, ...], std: float, rng: np.random.Generator) -> np.ndarray:
    return rng.normal(0.0, std, shape)


def _linear(
    n_in: int, n_out: int, std: float, rng: np.random.Generator, backend: TensorBackend
) -> Linear:
    layer = Linear(n_in, n_out, rng=rng, backend=backend)
    layer.weight.update(from_numpy(_normal((n_in, n_out), std, rng), backend))
    return layer


def _tokens(layer: Linear, x: Tensor) -> Tensor:
    """A 2-D ``Linear`` applied to every position of ``x`` ``(B, T, C)``."""
    b, t, c = x.shape
    return layer(x.contiguous().view(b * t, c)).view(b, t, layer.out_size)


class MultiHeadAttention(Module):
    """Causal self-attention of ``n_head`` heads: one fused projection to queries, keys
    and values ``(B, T, 3C)``, the heads split by ``view`` and ``permute`` to
    ``(B, H, T, D)``, attention per head, the heads merged back to ``(B, T, C)`` and an
    output projection."""

    def __init__(
        self,
        n_embd: int,
        n_head: int,
        dropout: float = 0.0,
        n_layer: int = 1,
        rng: np.random.Generator | None = None,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:
        super().__init__()
        if n_head <= 0 or n_embd % n_head:
            raise ShapeError(
                f"MultiHeadAttention: n_embd {n_embd} is not divisible by n_head {n_head}"
            )
        rng = rng if rng is not None else np.random.default_rng(0)
        self.c_attn = _linear(n_embd, 3 * n_embd, INIT_STD, rng, backend)
        self.c_proj = _linear(n_embd, n_embd, INIT_STD / math.sqrt(2 * n_layer), rng, backend)
        self.resid_drop = Dropout(dropout, seed=int(rng.integers(2**31)))
        self.n_embd, self.n_head, self.dropout = n_embd, n_head, dropout
        self.rng = np.random.default_rng(int(rng.integers(2**31)))

    def _heads(self, x: Tensor, b: int, t: int) -> Tensor:
        """``(B, T, C)`` -> ``(B, H, T, D)``."""
        h = self.n_head
        return x.contiguous().view(b, t, h, self.n_embd // h).permute(0, 2, 1, 3)

    def forward(self, x: Tensor, cache: LayerCache | None = None) -> Tensor:
        if len(x.shape) != 3 or x.shape[-1] != self.n_embd:
            raise ShapeError(
                f"MultiHeadAttention({self.n_embd}, {self.n_head}): input of shape "
                f"{x.shape}, want (B, T, {self.n_embd})"
            )
        # BEGIN SOLUTION 5.3 omit
        if cache is None and not (self.training and self.dropout):  # module5/fast_block.py
            from module5 import fast_block

            if fast_block.applies(x):
                y = fast_block.qkv_attention(_tokens(self.c_attn, x), self.n_head)
                return self.resid_drop(_tokens(self.c_proj, y))
        # END SOLUTION
        # BEGIN SOLUTION 5.3
        b, t, c = x.shape
        q, k, v = (self._heads(part, b, t) for part in split(_tokens(self.c_attn, x), c, -1))
        if cache is not None:
            if cache.k is not None and cache.v is not None:
                k, v = cat([cache.k, k], 2), cat([cache.v, v], 2)
            cache.k, cache.v = k.detach(), v.detach()
        drop = self.dropout if self.training else 0.0
        y = scaled_dot_product_attention(q, k, v, causal=True, dropout=drop, rng=self.rng)
        y = y.permute(0, 2, 1, 3).contiguous().view(b, t, c)
        return self.resid_drop(_tokens(self.c_proj, y))
        # END SOLUTION

    def __repr__(self) -> str:
        return f"MultiHeadAttention({self.n_embd}, n_head={self.n_head})"


class MLP(Module):
    """``Linear(C, 4C)``, GELU, ``Linear(4C, C)``, dropout."""

    def __init__(
        self, n_embd: int, dropout: float, n_layer: int, rng: np.random.Generator,
        backend: TensorBackend,
    ) -> None:  # fmt: skip
        super().__init__()
        self.c_fc = _linear(n_embd, 4 * n_embd, INIT_STD, rng, backend)
        self.gelu = GELU()
        self.c_proj = _linear(4 * n_embd, n_embd, INIT_STD / math.sqrt(2 * n_layer), rng, backend)
        self.drop = Dropout(dropout, seed=int(rng.integers(2**31)))

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(_tokens(self.c_proj, self.gelu(_tokens(self.c_fc, x))))


class Block(Module):
    """A pre-LayerNorm transformer block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(
        self, n_embd: int, n_head: int, dropout: float, n_layer: int,
        rng: np.random.Generator, backend: TensorBackend,
    ) -> None:  # fmt: skip
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, backend=backend)
        self.attn = MultiHeadAttention(n_embd, n_head, dropout, n_layer, rng, backend)
        self.ln_2 = LayerNorm(n_embd, backend=backend)
        self.mlp = MLP(n_embd, dropout, n_layer, rng, backend)

    def forward(self, x: Tensor, cache: LayerCache | None = None) -> Tensor:
        # BEGIN SOLUTION 5.3
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))
        # END SOLUTION


@dataclass(frozen=True)
class GPTConfig:
    """The model's sizes. The defaults are nanoGPT's documented CPU configuration for
    character-level Shakespeare (its ``vocab_size`` comes from the tokenizer)."""

    vocab_size: int
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            if getattr(self, name) <= 0:
                raise ValueError(f"GPTConfig: {name} must be positive, got {getattr(self, name)}")
        if self.n_embd % self.n_head:
            raise ShapeError(
                f"GPTConfig: n_embd {self.n_embd} is not divisible by n_head {self.n_head}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig: dropout must be in [0, 1), got {self.dropout}")


class GPT(Module):
    """A decoder-only transformer language model.

    ``forward(idx)`` maps token indices ``(B, T)`` (``T <= block_size``) to logits
    ``(B, T, V)``: token embeddings plus learned position embeddings, ``n_layer``
    pre-LayerNorm blocks, a final LayerNorm, and a head that multiplies by the token
    embedding's transpose (tied weights: one ``(V, C)`` table both reads and writes
    tokens)."""

    def __init__(
        self,
        config: GPTConfig,
        seed: int = 0,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        c = config
        self.config = c
        self.wte = Embedding(
            c.vocab_size,
            c.n_embd,
            weights=_normal((c.vocab_size, c.n_embd), INIT_STD, rng),
            backend=backend,
        )
        self.wpe = Embedding(
            c.block_size,
            c.n_embd,
            weights=_normal((c.block_size, c.n_embd), INIT_STD, rng),
            backend=backend,
        )
        self.drop = Dropout(c.dropout, seed=int(rng.integers(2**31)))
        for i in range(c.n_layer):
            setattr(self, f"h{i}", Block(c.n_embd, c.n_head, c.dropout, c.n_layer, rng, backend))
        self.ln_f = LayerNorm(c.n_embd, backend=backend)

    @property
    def blocks(self) -> list[Block]:
        return [getattr(self, f"h{i}") for i in range(self.config.n_layer)]

    def _indices(self, idx: npt.ArrayLike, start: int) -> npt.NDArray[np.int64]:
        tokens = np.asarray(idx)
        if tokens.ndim != 2:
            raise ShapeError(f"GPT: token indices of shape {tokens.shape}, want (B, T)")
        if tokens.dtype.kind not in "iu":
            raise TypeError(f"GPT: token indices must be integers, got dtype {tokens.dtype}")
        t = tokens.shape[1]
        if tokens.size == 0:
            raise ShapeError(
                f"GPT: token indices of shape {tokens.shape}: no position to run "
                "(want at least one sequence of at least one token)"
            )
        if start + t > self.config.block_size:
            raise ShapeError(
                f"GPT: a context of {start + t} positions is longer than the model's "
                f"block_size {self.config.block_size}"
            )
        v = self.config.vocab_size
        if tokens.size and (tokens.min() < 0 or tokens.max() >= v):
            bad = int(tokens.max()) if tokens.max() >= v else int(tokens.min())
            raise IndexError(f"GPT: token {bad} is outside the vocabulary [0, {v})")
        return tokens.astype(np.int64)

    def forward(self, idx: npt.ArrayLike, cache: KVCache | None = None) -> Tensor:
        start = cache.length if cache is not None else 0
        tokens = self._indices(idx, start)
        # BEGIN SOLUTION 5.3
        b, t = tokens.shape
        positions = np.broadcast_to(np.arange(start, start + t), (b, t))
        x = self.drop(self.wte(tokens) + self.wpe(positions))
        if cache is not None and not cache.layers:
            cache.layers = [LayerCache() for _ in range(self.config.n_layer)]
        for i, block in enumerate(self.blocks):
            x = block(x, cache.layers[i] if cache is not None else None)
        x = self.ln_f(x).contiguous().view(b * t, self.config.n_embd)  # one 2-D product
        return (x @ self.wte.weight.value.transpose(0, 1)).view(b, t, self.config.vocab_size)
        # END SOLUTION

    def summary(self) -> str:
        """A table of the parameters, by layer, with the total."""
        rows = [
            (name, str(p.value.shape), f"{p.value.size:,}") for name, p in self.named_parameters()
        ]
        widths = [
            max(len(r[i]) for r in [*rows, ("Parameter", "Shape", "Count")]) for i in range(3)
        ]
        line = "-" * (sum(widths) + 4)
        out = [f"{'Parameter':<{widths[0]}}  {'Shape':<{widths[1]}}  {'Count':>{widths[2]}}", line]
        out += [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:>{widths[2]}}" for a, b, c in rows]
        out += [line, f"Total parameters: {self.num_parameters():,} (the head is tied to wte)"]
        return "\n".join(out)

    def generate(
        self,
        context: npt.ArrayLike,
        n: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int = 0,
        use_cache: bool = True,
    ) -> npt.NDArray[np.int64]:
        """``context`` ``(B, T0)`` followed by ``n`` sampled tokens, ``(B, T0 + n)``.

        Each new token is drawn from ``softmax(logits / temperature)`` of the last
        position, restricted to the ``top_k`` largest logits when given. With the KV
        cache (the default) each step runs the model on one new position against the
        cached keys and values (O(T) work per token); without it, on the whole context
        (the last ``block_size`` tokens).

        Past ``block_size`` tokens the cache cannot slide: every cached key was made
        with its position's embedding. When it is full it is rebuilt from the last
        ``block_size // 2`` tokens (one forward over them), and the next ``block_size
        // 2`` tokens are decoded one position at a time again: about two positions'
        work per token, where rebuilding at every token would be ``block_size``. The
        price: right after a rebuild a token sees half a block of context, where the
        cache-free loop shows it a whole block."""
        if temperature <= 0.0:
            raise ValueError(f"generate: temperature must be positive, got {temperature}")
        if top_k is not None and not 1 <= top_k:
            raise ValueError(f"generate: top_k must be at least 1, got {top_k}")
        tokens = self._indices(np.atleast_2d(np.asarray(context)), 0)
        if tokens.shape[1] == 0:
            raise ShapeError("generate: the context needs at least one token")
        rng = np.random.default_rng(seed)
        was_training = self.training
        self.eval()
        block = self.config.block_size
        decoder: TokenDecoder = _CachedDecoder(self)
        # BEGIN SOLUTION 5.3 omit
        if use_cache:  # the reference's fast path, where it applies: module5/fast_decode.py
            from module5.fast_decode import decoder_for

            decoder = decoder_for(self, tokens.shape[0]) or decoder
        # END SOLUTION
        try:
            with no_grad():
                for _ in range(n):
                    if not use_cache:
                        logits = self.forward(tokens[:, -block:]).to_numpy()[:, -1, :]
                    elif 0 < decoder.length < block:
                        logits = decoder.step(tokens[:, -1:])
                    else:  # the first step, or the cache is full: (re)build it
                        keep = block if decoder.length == 0 else max(1, block // 2)
                        logits = decoder.start(tokens[:, -keep:])
                    last = logits.astype(np.float64) / temperature
                    tokens = np.concatenate([tokens, _sample(last, top_k, rng)[:, None]], axis=1)
        finally:
            self.train(was_training)
        return tokens


class TokenDecoder(Protocol):
    """What ``generate`` decodes with: ``start(tokens)`` runs ``(B, T)`` tokens from
    position 0 into a fresh cache, ``step(tokens)`` one more position against it; each
    returns the last position's logits ``(B, V)``; ``length`` is the positions cached."""

    @property
    def length(self) -> int: ...

    def start(self, tokens: npt.NDArray[np.int64]) -> np.ndarray: ...

    def step(self, tokens: npt.NDArray[np.int64]) -> np.ndarray: ...


class _CachedDecoder:
    """The :class:`TokenDecoder` of ``generate``: the GPT's own forward with a
    :class:`KVCache`."""

    def __init__(self, model: GPT) -> None:
        self.model, self.cache = model, KVCache()

    @property
    def length(self) -> int:
        return self.cache.length

    def start(self, tokens: npt.NDArray[np.int64]) -> np.ndarray:
        self.cache = KVCache()
        return self.step(tokens)

    def step(self, tokens: npt.NDArray[np.int64]) -> np.ndarray:
        return self.model.forward(tokens, self.cache).to_numpy()[:, -1, :]


def _sample(logits: np.ndarray, top_k: int | None, rng: np.random.Generator) -> np.ndarray:
    """One token per row of ``logits`` ``(B, V)``."""
    if top_k is not None and top_k < logits.shape[-1]:
        cut = np.sort(logits, axis=-1)[:, -top_k][:, None]
        logits = np.where(logits < cut, -np.inf, logits)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.array([rng.choice(p.shape[-1], p=row) for row in p], dtype=np.int64)
