"""The reference's fast path for a training step's attention: the heads taken straight
from the query/key/value product and put straight back, around task 5.5's kernels.

``MultiHeadAttention.forward`` (task 5.3) splits the product ``(B, T, 3C)`` into three
tensors, views each as ``(B, H, T, D)`` heads, and merges the heads' output back to
``(B, T, C)``: copies by ``split``, by the fused route (which wants each head's rows
contiguous) and by ``contiguous``. The backward retraces every one of them, and each
piece's gradient comes back as a zero-filled whole ``(B, T, 3C)`` that the engine then
adds up: about ten passes over the product and a dozen Functions per layer, 50-60 ms of
a large step (6 x 384, context 256, batch 16; 2-core AMD EPYC).

:class:`QKVAttention` is one Function from the product to the merged output: one
compiled pass lays the product out as the kernels' contiguous heads, one lays their
output out as ``(B, T, C)``, and the backward makes the same two passes the other way
(the product's gradient is written once, whole). The values are the fused route's: the
same kernels on the same numbers.

It applies where the fused route's attention does (the fast CPU backend, float32 or
float64, no dropout on the weights, no KV cache) and no autocast routing is on;
elsewhere, and in a handout (which leaves this file out), the task's own code runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, prange

from module0.autodiff import Context
from module1 import tensor_functions
from module1.tensor import Tensor
from module1.tensor_functions import Function
from module5 import fused as kernels
from module5 import fused_route

SERIAL_ROWS = 64
"""Products of fewer positions (``B * T``) are laid out on the calling thread."""


@njit(parallel=True, cache=True)
def move_heads(tokens: Any, split: Any, heads: int, to_split: bool) -> None:
    """Copy between the token layout ``tokens`` ``(B, T, P * C)`` and the heads' layout
    ``split`` ``(P, B * H, T, D)`` (each of the ``P`` parts, queries, keys and values,
    as contiguous heads): ``split[p, b * H + h, t, :]`` is ``tokens[b, t, p * C + h * D
    : ... + D]``. Into ``split`` when ``to_split``, else back into ``tokens``."""
    rows = tokens.shape[0] * tokens.shape[1]
    if rows < SERIAL_ROWS:
        for row in range(rows):
            _move_row(tokens, split, heads, row, to_split)
        return
    for row in prange(rows):
        _move_row(tokens, split, heads, row, to_split)


@njit(inline="always")
def _move_row(tokens: Any, split: Any, heads: int, row: int, to_split: bool) -> None:
    steps, parts, d = tokens.shape[1], split.shape[0], split.shape[3]
    c = tokens.shape[2] // parts
    b, t = row // steps, row % steps
    for p in range(parts):
        for h in range(heads):
            start = p * c + h * d
            if to_split:
                split[p, b * heads + h, t, :] = tokens[b, t, start : start + d]
            else:
                tokens[b, t, start : start + d] = split[p, b * heads + h, t, :]


class QKVAttention(Function):
    """Causal attention of ``heads`` heads from the query/key/value product ``qkv``
    ``(B, T, 3C)`` to the heads' merged output ``(B, T, C)``; the heads, the output
    and one float64 number per query are saved."""

    @staticmethod
    def forward(ctx: Context, qkv: Tensor, heads: int) -> Tensor:
        b, t, width = qkv.shape
        c = width // 3
        d = c // heads
        src = fused_route._rows(qkv, (b, t, width))
        packed = np.empty((3, b * heads, t, d), src.dtype)
        move_heads(src, packed, heads, True)
        out = np.empty((1, b * heads, t, d), src.dtype)
        lse = np.empty((b * heads, t))
        scale = 1.0 / math.sqrt(d)
        kernels.causal_attention(packed[0], packed[1], packed[2], out[0], lse, scale)
        y = np.empty((b, t, c), src.dtype)
        move_heads(y, out, heads, False)
        ctx.save_for_backward(packed, out, lse, scale, heads)
        return fused_route._tensor(y, (b, t, c), qkv)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        packed, out, lse, scale, heads = ctx.saved_values
        b, t = d.shape[0], d.shape[1]
        dy = fused_route._rows(d, (b, t, d.shape[2])).astype(packed.dtype, copy=False)
        dout = np.empty_like(out)
        move_heads(dy, dout, heads, True)
        dpacked = np.empty_like(packed)
        q, k, v = packed[0], packed[1], packed[2]
        kernels.causal_attention_backward(
            q, k, v, out[0], lse, dout[0], dpacked[0], dpacked[1], dpacked[2], scale
        )
        dqkv = np.empty((b, t, 3 * d.shape[2]), packed.dtype)
        move_heads(dqkv, dpacked, heads, False)
        return fused_route._tensor(dqkv, dqkv.shape, d)


def applies(x: Tensor) -> bool:
    """Whether :func:`qkv_attention` takes a block's input ``x`` ``(B, T, C)``: the fused
    route's attention applies to its dtype and backend, and no autocast is routing
    Functions (module6's ``autocast`` decides their precision)."""
    return tensor_functions.dispatch is None and len(x.shape) == 3 and fused_route.applies(x)


def qkv_attention(qkv: Tensor, heads: int) -> Tensor:
    """Causal attention of ``heads`` heads over ``qkv`` ``(B, T, 3C)``: ``(B, T, C)``."""
    return QKVAttention.apply(qkv, heads)
