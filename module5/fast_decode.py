"""The reference's fast path for ``GPT.generate`` with its KV cache: the whole model's
forward for the new positions in one compiled call.

Generating a token runs the model on one position. That is little arithmetic (two
multiply-adds per parameter, 1.6 million for the milestone's model) spread over about
150 Functions, so the framework's Python around each kernel, not the kernels, sets the
speed: 571 tokens per second against PyTorch's 1,466 with its own KV cache (2-core AMD
EPYC). Here the same computation is one ``njit`` function over the model's weights,
packed once per ``generate`` call into a few contiguous arrays, and a cache of keys and
values it owns: LayerNorm, the fused query/key/value product, attention against the
cache, the output projection, the MLP with GELU, and the tied head, position by
position, each product a vector times a matrix whose rows stream through the cache
once.

It runs on the calling thread: one position's products are too small to pay for waking
a thread pool, and a generation that never waits on a second thread is not slowed by
whatever else holds the machine's other core.

It applies only where it computes what ``GPT.forward`` computes: a :class:`GPT` and its
own block, attention, MLP and LayerNorm classes (not subclasses, whose forward may
differ), on the fast CPU backend in float32 or float64. Elsewhere ``generate`` runs the
model's forward, which is also what the handout's ``generate`` always does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from numba import njit

if TYPE_CHECKING:
    from module5.gpt import GPT

FASTMATH = {"contract", "reassoc", "arcp", "nsz"}
"""Fused multiply-adds and regrouped sums (which vectorize the dot products and the
rows of each product); no flags that assume finite values."""


@njit(fastmath=FASTMATH, inline="always")
def _layer_norm(x: Any, w: Any, b: Any, eps: float, out: Any) -> None:
    """``out = (x - mean) / sqrt(var + eps) * w + b`` over one row (statistics in
    float64, the biased variance, as ``layer_norm``)."""
    n = len(x)
    mean = 0.0
    for i in range(n):
        mean += x[i]
    mean /= n
    var = 0.0
    for i in range(n):
        var += (x[i] - mean) * (x[i] - mean)
    rstd = 1.0 / math.sqrt(var / n + eps)
    for i in range(n):
        out[i] = (x[i] - mean) * rstd * w[i] + b[i]


@njit(fastmath=FASTMATH, inline="always")
def _vec_mat(x: Any, w: Any, bias: Any, out: Any) -> None:
    """``out = x @ w + bias``: ``w`` is ``(len(x), len(out))``, one row of it per entry
    of ``x`` added along the contiguous row (the loop LLVM vectorizes)."""
    out[:] = bias
    for i in range(w.shape[0]):
        xi = x[i]
        row = w[i]
        for j in range(w.shape[1]):
            out[j] += xi * row[j]


@njit(fastmath=FASTMATH, error_model="numpy", inline="always")
def _gelu(x: Any) -> None:
    """GELU (tanh form) in place: ``x / 2 * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``."""
    c = math.sqrt(2.0 / math.pi)
    for i in range(len(x)):
        v = x[i]
        x[i] = 0.5 * v * (1.0 + math.tanh(c * (v + 0.044715 * v * v * v)))


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def decode(
    tokens: Any, start: int, n_head: int,
    wte: Any, wpe: Any, norms: Any, eps: Any,
    attn_w: Any, attn_b: Any, proj_w: Any, proj_b: Any,
    fc_w: Any, fc_b: Any, out_w: Any, out_b: Any,
    k_cache: Any, v_cache: Any, logits: Any,
) -> None:  # fmt: skip
    """Run the model on ``tokens`` ``(B, T)`` at positions ``start .. start + T - 1``,
    writing their keys and values into ``k_cache`` and ``v_cache`` ``(L, B, H, P, D)``
    (``P`` the block size; positions before ``start`` must already be there), and the
    last position's logits into ``logits`` ``(B, V)``.

    The weights, ``L`` layers stacked: ``norms`` ``(2L + 1, 2, C)`` (each LayerNorm's
    weight and bias: ``ln_1``, ``ln_2`` of every layer, then ``ln_f``) with ``eps``
    ``(2L + 1,)``; ``attn_w`` ``(L, C, 3C)`` and ``attn_b``; ``proj_w`` ``(L, C, C)``;
    ``fc_w`` ``(L, C, 4C)``; ``out_w`` ``(L, 4C, C)``; the head is ``wte`` transposed."""
    batch, t_new = tokens.shape
    layers, c = attn_w.shape[0], wte.shape[1]
    d = c // n_head
    scale = 1.0 / math.sqrt(d)
    x = np.empty(c, wte.dtype)
    h = np.empty(c, wte.dtype)
    y = np.empty(c, wte.dtype)
    qkv = np.empty(3 * c, wte.dtype)
    f = np.empty(4 * c, wte.dtype)
    scores = np.empty(k_cache.shape[3], np.float64)
    for b in range(batch):
        for t in range(t_new):
            pos = start + t
            x[:] = wte[tokens[b, t]]
            x += wpe[pos]
            for layer in range(layers):
                _layer_norm(x, norms[2 * layer, 0], norms[2 * layer, 1], eps[2 * layer], h)
                _vec_mat(h, attn_w[layer], attn_b[layer], qkv)
                for head in range(n_head):
                    k_cache[layer, b, head, pos] = qkv[c + head * d : c + (head + 1) * d]
                    v_cache[layer, b, head, pos] = qkv[2 * c + head * d : 2 * c + (head + 1) * d]
                for head in range(n_head):  # causal attention of this position, per head
                    q = qkv[head * d : (head + 1) * d]
                    keys, values = k_cache[layer, b, head], v_cache[layer, b, head]
                    top = -np.inf
                    for s in range(pos + 1):
                        dot = 0.0
                        for i in range(d):
                            dot += q[i] * keys[s, i]
                        scores[s] = dot * scale
                        top = max(top, scores[s])
                    total = 0.0
                    for s in range(pos + 1):
                        scores[s] = math.exp(scores[s] - top)
                        total += scores[s]
                    out = y[head * d : (head + 1) * d]
                    out[:] = 0.0
                    for s in range(pos + 1):
                        p = scores[s] / total
                        for i in range(d):
                            out[i] += p * values[s, i]
                _vec_mat(y, proj_w[layer], proj_b[layer], h)
                x += h
                _layer_norm(x, norms[2 * layer + 1, 0], norms[2 * layer + 1, 1],
                            eps[2 * layer + 1], h)  # fmt: skip
                _vec_mat(h, fc_w[layer], fc_b[layer], f)
                _gelu(f)
                _vec_mat(f, out_w[layer], out_b[layer], h)
                x += h
        last = 2 * layers
        _layer_norm(x, norms[last, 0], norms[last, 1], eps[last], h)
        for v in range(wte.shape[0]):  # the tied head: one dot product per token
            acc = 0.0
            row = wte[v]
            for i in range(c):
                acc += h[i] * row[i]
            logits[b, v] = acc


def _array(parameter: Any) -> npt.NDArray[Any]:
    """A Parameter's values as a contiguous array of its shape."""
    return np.ascontiguousarray(parameter.value.to_numpy())


class Decoder:
    """A GPT's weights packed for :func:`decode`, and its KV cache: ``start(tokens)``
    fills the cache from position 0 and ``step(tokens)`` appends one position; both
    return the last position's logits ``(B, V)`` as float64."""

    def __init__(self, model: GPT, batch: int) -> None:
        cfg = model.config
        blocks = model.blocks
        stack = lambda get: np.stack([_array(get(block)) for block in blocks])  # noqa: E731
        self.n_head = cfg.n_head
        self.wte, self.wpe = _array(model.wte.weight), _array(model.wpe.weight)
        dtype = self.wte.dtype
        norms = [n for block in blocks for n in (block.ln_1, block.ln_2)] + [model.ln_f]
        self.norms = np.stack([np.stack([_array(n.weight), _array(n.bias)]) for n in norms])
        self.eps = np.array([n.eps for n in norms], np.float64)
        self.attn_w = stack(lambda blk: blk.attn.c_attn.weight)
        self.attn_b = stack(lambda blk: blk.attn.c_attn.bias)
        self.proj_w = stack(lambda blk: blk.attn.c_proj.weight)
        self.proj_b = stack(lambda blk: blk.attn.c_proj.bias)
        self.fc_w = stack(lambda blk: blk.mlp.c_fc.weight)
        self.fc_b = stack(lambda blk: blk.mlp.c_fc.bias)
        self.out_w = stack(lambda blk: blk.mlp.c_proj.weight)
        self.out_b = stack(lambda blk: blk.mlp.c_proj.bias)
        d = cfg.n_embd // cfg.n_head
        shape = (cfg.n_layer, batch, cfg.n_head, cfg.block_size, d)
        self.k_cache, self.v_cache = np.empty(shape, dtype), np.empty(shape, dtype)
        self.logits = np.empty((batch, cfg.vocab_size), dtype)
        self.length = 0

    def _run(self, tokens: npt.NDArray[np.int64], start: int) -> npt.NDArray[np.float64]:
        decode(
            tokens, start, self.n_head, self.wte, self.wpe, self.norms, self.eps,
            self.attn_w, self.attn_b, self.proj_w, self.proj_b,
            self.fc_w, self.fc_b, self.out_w, self.out_b,
            self.k_cache, self.v_cache, self.logits,
        )  # fmt: skip
        self.length = start + tokens.shape[1]
        return self.logits.astype(np.float64)

    def start(self, tokens: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return self._run(np.ascontiguousarray(tokens), 0)

    def step(self, tokens: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return self._run(np.ascontiguousarray(tokens), self.length)


def decoder_for(model: GPT, batch: int) -> Decoder | None:
    """A :class:`Decoder` for ``model`` when :func:`decode` computes what its forward
    does (see the module's docstring); None otherwise."""
    from module2.fast_ops import FastTensorBackend
    from module4.layers import Dropout, Embedding, Linear
    from module5 import fused_route
    from module5.gpt import GELU, GPT, MLP, Block, LayerNorm, MultiHeadAttention

    if type(model) is not GPT or not fused_route.use_fused or fused_route._plain:
        return None
    table = model.wte.weight.value
    if table.backend is not FastTensorBackend or table.dtype not in (np.float32, np.float64):
        return None
    layers = model.config.n_layer
    expected = {
        GPT: 1, Embedding: 2, Dropout: 1 + 2 * layers, Block: layers,
        MultiHeadAttention: layers, MLP: layers, GELU: layers, LayerNorm: 2 * layers + 1,
        Linear: 4 * layers,
    }  # fmt: skip
    counts: dict[type, int] = {}
    todo: list[Any] = [model]
    while todo:  # every module of the model, by exact class
        module = todo.pop()
        counts[type(module)] = counts.get(type(module), 0) + 1
        todo += module.modules()
    if counts != expected:
        return None
    if any(p.value.dtype != table.dtype for p in model.parameters()):
        return None
    return Decoder(model, batch)
