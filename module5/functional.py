"""Stage 5's operations: LayerNorm and GELU with their own backward, a softmax that
honours a mask, scaled dot-product attention, and the slicing and joining of tensors
that attention heads and a KV cache need.

Every operation here works on any backend: the Functions compute with the backend's
own tensor operations on their (detached) inputs, so stage 2's fast CPU kernels and
stage 3's CUDA kernels run them unchanged. On the fast CPU backend, once task 5.5 is
done, :func:`layer_norm`, :func:`gelu`, :func:`masked_softmax` (unmasked or causal) and
causal :func:`scaled_dot_product_attention` take its fused kernels instead
(``module5/fused.py``, through ``module5/fused_route.py``); ``fused_route.plain_route()``
turns that off. ``narrow``,
``split``, ``cat`` and ``masked_fill`` are stage 1's (``module1/shape_ops.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from module0.autodiff import Context
from module1.shape_ops import cat, masked_fill, narrow, split  # noqa: F401  (stage 5 names them)
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module1.tensor_functions import Function
from module5 import fused_route

# -- LayerNorm -----------------------------------------------------------------------------


def _last_dim(name: str, x: Tensor, size: int) -> int:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} needs a Tensor, got {type(x).__name__}")
    if not x.shape or x.shape[-1] != size:
        raise ShapeError(f"{name}: input of shape {x.shape} must end in the size {size}")
    return size


def _rows(t: Tensor) -> Tensor:
    """``t`` as a matrix of its last dimension's rows (a copy when not contiguous)."""
    return t.contiguous().view(-1, t.shape[-1])


class LayerNormFun(Function):
    r"""``y = (x - mean) / sqrt(var + eps) * weight + bias`` over the last dimension.

    The mean is taken first and the variance from the centred values (never as
    ``E[x^2] - E[x]^2``, which cancels catastrophically for a row with a large mean).
    The backward, with :math:`\hat x` the normalised row and :math:`g = d \cdot w`:
    :math:`dx = r (g - \bar g - \hat x\, \overline{g \hat x})`, :math:`r = 1/\sqrt{var + eps}`.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
        # BEGIN SOLUTION 5.1
        n = x.shape[-1]
        centred = x - x.sum(-1, keepdim=True) * (1.0 / n)
        var = (centred * centred).sum(-1, keepdim=True) * (1.0 / n)
        rstd = (var + eps) ** -0.5
        xhat = centred * rstd
        ctx.save_for_backward(xhat, rstd, weight)
        return xhat * weight + bias
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # BEGIN SOLUTION 5.1
        xhat, rstd, weight = ctx.saved_values
        n = d.shape[-1]
        g = d * weight
        mean_g = g.sum(-1, keepdim=True) * (1.0 / n)
        mean_gx = (g * xhat).sum(-1, keepdim=True) * (1.0 / n)
        dx = (g - mean_g - xhat * mean_gx) * rstd
        dweight = _rows(d * xhat).sum(0)
        dbias = _rows(d).sum(0)
        return dx, dweight, dbias
        # END SOLUTION


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """LayerNorm of ``x`` over its last dimension, of size ``weight.shape == (n,)``."""
    n = _last_dim("layer_norm", x, weight.shape[0] if weight.shape else -1)
    if weight.shape != (n,) or bias.shape != (n,):
        raise ShapeError(
            f"layer_norm: weight {weight.shape} and bias {bias.shape} must both be ({n},)"
        )
    fast = fused_route.layer_norm(x, weight, bias, float(eps))  # task 5.5's kernels, once done
    return fast if fast is not None else LayerNormFun.apply(x, weight, bias, float(eps))


# -- GELU ----------------------------------------------------------------------------------

GELU_C = math.sqrt(2.0 / math.pi)
"""The tanh form's constant: ``gelu(x) = x/2 (1 + tanh(C (x + 0.044715 x^3)))``."""


class GELUFun(Function):
    r"""GPT-2's GELU, the tanh approximation of :math:`x \Phi(x)`.

    With :math:`u = C(x + 0.044715 x^3)` and :math:`t = \tanh u`:
    :math:`y = \tfrac{x}{2}(1 + t)`, and
    :math:`y' = \tfrac12(1 + t) + \tfrac{x}{2}(1 - t^2)\, C (1 + 3 \cdot 0.044715 x^2)`.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        # BEGIN SOLUTION 5.1
        x2 = x * x
        t = ((x + x2 * x * 0.044715) * GELU_C).tanh()
        ctx.save_for_backward(x, x2, t)
        return x * (t + 1.0) * 0.5
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 5.1
        x, x2, t = ctx.saved_values
        du = (x2 * (3.0 * 0.044715) + 1.0) * GELU_C
        slope = (t + 1.0) * 0.5 + x * (-(t * t) + 1.0) * du * 0.5
        return d * slope
        # END SOLUTION


def gelu(x: Tensor) -> Tensor:
    """GELU (tanh form) entry by entry."""
    if not isinstance(x, Tensor):
        raise TypeError(f"gelu needs a Tensor, got {type(x).__name__}")
    fast = fused_route.gelu(x)  # task 5.5's kernels, once done
    return fast if fast is not None else GELUFun.apply(x)


# -- softmax with a mask, attention --------------------------------------------------------

MASKED = -1e30
"""What a masked score becomes before the exponential (finite in float32 as well, so
no ``inf - inf``); its probability is then set to exactly 0."""


def causal_mask(t: int, s: int | None = None) -> np.ndarray:
    """``(t, s)`` booleans, True where query ``i`` may attend to key ``j``: the keys up to
    its own position. With ``s > t`` (a KV cache holding ``s - t`` earlier positions) the
    queries are the last ``t`` positions, so query ``i`` sees keys ``j <= i + s - t``."""
    s = t if s is None else s
    if s < t:
        raise ShapeError(f"causal_mask: {s} keys for {t} queries; a query needs its own key")
    return np.tril(np.ones((t, s), dtype=bool), k=s - t)


def masked_softmax(x: Tensor, keep: np.ndarray | None = None) -> Tensor:
    """Softmax over the last dimension of ``x``, where only the entries with ``keep``
    True (a boolean array that broadcasts to ``x``'s shape) take part.

    Masked entries are exactly 0, whatever ``x`` holds there (NaN and infinities
    included); a row with no entry kept is all 0 (never NaN). The row's maximum over its
    kept entries is subtracted first (a constant to autodiff), so no exponent is
    positive and nothing overflows."""
    if keep is not None:
        keep = np.asarray(keep, dtype=bool)
        try:
            np.broadcast_shapes(keep.shape, x.shape)
        except ValueError:
            raise ShapeError(
                f"masked_softmax: mask of shape {keep.shape} does not broadcast to {x.shape}"
            ) from None
    fast = fused_route.softmax(x, keep)  # task 5.5's kernels, once done (no mask or causal)
    if fast is not None:
        return fast
    # BEGIN SOLUTION 5.2
    if keep is None:
        shift = x.detach().max(-1, keepdim=True)
        e = (x - shift).exp()
        return e / e.sum(-1, keepdim=True)
    on = from_numpy(keep.astype(x.dtype), x.backend)
    filled = masked_fill(x, ~keep, MASKED)
    e = (filled - filled.detach().max(-1, keepdim=True)).exp() * on
    empty = from_numpy((~keep.any(-1, keepdims=True)).astype(x.dtype), x.backend)
    return e / (e.sum(-1, keepdim=True) + empty)
    # END SOLUTION


def dropout_mask(shape: Sequence[int], p: float, rng: np.random.Generator) -> np.ndarray:
    """Inverted dropout's multipliers: 0 with probability ``p``, else ``1 / (1 - p)``."""
    return (rng.random(tuple(shape)) >= p) / (1.0 - p)


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    causal: bool = False,
    mask: np.ndarray | None = None,
    dropout: float = 0.0,
    rng: np.random.Generator | None = None,
) -> Tensor:
    """``softmax(q k^T / sqrt(d)) v`` over any leading (batch, head) dimensions.

    ``q`` is ``(..., T, d)``, ``k`` ``(..., S, d)``, ``v`` ``(..., S, dv)``; the result is
    ``(..., T, dv)``. ``causal``: query ``i`` attends to keys up to its position (the
    last ``T`` of ``S``, see :func:`causal_mask`). ``mask``: booleans broadcasting to
    ``(..., T, S)``, True where attention is allowed (combined with ``causal``).
    ``dropout``: the probability of dropping an attention weight (needs ``rng``).
    """
    for name, arg in (("q", q), ("k", k), ("v", v)):
        if not isinstance(arg, Tensor) or len(arg.shape) < 2:
            raise ShapeError(f"attention: {name} must be a tensor of at least 2 dimensions")
    if (
        q.shape[-1] != k.shape[-1]
        or k.shape[-2] != v.shape[-2]
        or q.shape[:-2] != k.shape[:-2]
        or k.shape[:-2] != v.shape[:-2]
    ):
        raise ShapeError(
            f"attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit: want "
            "(..., T, d), (..., S, d), (..., S, dv) with the same leading dimensions"
        )
    if dropout > 0.0 and rng is None:
        raise ValueError("attention: dropout needs an rng")
    if causal and mask is None and dropout == 0.0:  # task 5.5's kernel, once done
        fast = fused_route.attention(q, k, v)
        if fast is not None:
            return fast
    # BEGIN SOLUTION 5.2
    t, s = q.shape[-2], k.shape[-2]
    keep = causal_mask(t, s) if causal else None
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        keep = mask if keep is None else (keep & mask)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    weights = masked_softmax(scores, keep)
    if dropout > 0.0 and rng is not None:
        weights = weights * from_numpy(
            dropout_mask(weights.shape, dropout, rng).astype(q.dtype), q.backend
        )
    return weights @ v
    # END SOLUTION
