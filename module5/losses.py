"""The language model's loss: cross-entropy over ``(N, V)`` logits (``N = B x T``
positions, ``V`` tokens) that copies the logits once.

Stage 4's ``cross_entropy`` composes a log-softmax and a one-hot product: each step
makes an ``(N, V)`` array (the shifted logits, their exponentials, the log-softmax,
the one-hot, the product), which for a language model is the largest tensor of the step.
This Function makes one: the softmax probabilities, written in place into a single
buffer, kept for the backward, which turns them into the gradient
``(softmax - onehot) / N`` in the same buffer.
"""

from __future__ import annotations

import numpy as np

from module0.autodiff import Context
from module1.tensor import Tensor
from module1.tensor_data import TensorData, is_device_array
from module1.tensor_functions import Function
from module4.losses import Targets, _class_indices, _scores, cross_entropy


class _LMCrossEntropy(Function):
    @staticmethod
    def forward(ctx: Context, logits: Tensor, targets: np.ndarray) -> Tensor:
        data = logits._tensor
        n, v = logits.shape
        if data.is_contiguous() and data._storage.size == n * v:
            x = data._storage.reshape(n, v)  # the logits themselves, no copy
        else:
            x = logits.numpy()
        rows = np.arange(n)
        top = x.max(axis=1, keepdims=True)
        p = np.subtract(x, top)  # the one (N, V) array: shifted, then exponentiated,
        np.exp(p, out=p)  # then normalised in place
        total = p.sum(axis=1, keepdims=True)
        p /= total
        loss = float(np.mean(np.log(total[:, 0]) + top[:, 0] - x[rows, targets]))
        ctx.save_for_backward([p], targets, logits.backend)
        return Tensor(TensorData(np.array([loss], dtype=x.dtype), ()), backend=logits.backend)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        kept, targets, backend = ctx.saved_values
        if not kept:
            raise RuntimeError("lm_cross_entropy: a second backward through the same loss")
        grad = kept.pop()  # the probabilities become the gradient, in place
        grad[np.arange(len(targets)), targets] -= 1.0
        grad *= float(d.numpy().reshape(-1)[0]) / len(targets)
        return Tensor(TensorData(grad.reshape(-1), grad.shape), backend=backend)


def lm_cross_entropy(logits: Tensor, targets: Targets) -> Tensor:
    """The mean cross-entropy of ``(N, V)`` logits against ``N`` token indices: the same
    value and gradient as stage 4's ``cross_entropy``, with one ``(N, V)`` array made
    instead of several. A tensor in GPU memory takes stage 4's route."""
    n, v = _scores("lm_cross_entropy", logits, "logits")
    indices = _class_indices("lm_cross_entropy", targets, n, v)
    if is_device_array(logits._tensor._storage):
        return cross_entropy(logits, indices)
    return _LMCrossEntropy.apply(logits, indices)
