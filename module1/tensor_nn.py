"""Task 1.5: layers made of tensors, and the loss the 2-D classifiers train with.

One :class:`Linear` layer is two Parameters (a weight matrix and a bias vector) and one
matrix product per batch, where stage 0's ScalarLinear built ``2 n m`` graph nodes per
example.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from module0.module import Module, Parameter
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module1.tensor_ops import SimpleBackend, TensorBackend


class Linear(Module):
    r"""``y = x @ weight + bias`` for a batch ``x`` of shape ``(batch, in_size)``.

    ``weight`` is ``(in_size, out_size)`` and ``bias`` ``(out_size,)``, both drawn
    uniform in :math:`\pm 1/\sqrt{in\_size}` (PyTorch's default) from ``rng`` (a fresh
    ``numpy.random.default_rng(0)`` when omitted).
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        rng: np.random.Generator | None = None,
        backend: TensorBackend = SimpleBackend,
    ) -> None:
        super().__init__()
        if in_size < 1 or out_size < 1:
            raise ValueError(f"Linear sizes must be positive, got {in_size}x{out_size}")
        rng = rng if rng is not None else np.random.default_rng(0)
        bound = 1.0 / math.sqrt(in_size)
        self.in_size = in_size
        self.out_size = out_size
        self.weight = Parameter(
            from_numpy(rng.uniform(-bound, bound, (in_size, out_size)), backend), "weight"
        )
        self.bias = Parameter(from_numpy(rng.uniform(-bound, bound, (out_size,)), backend), "bias")

    def forward(self, x: Tensor) -> Tensor:
        """Map a batch ``(batch, in_size)`` to ``(batch, out_size)``."""
        if x.dims != 2 or x.shape[1] != self.in_size:
            raise ShapeError(
                f"Linear({self.in_size}, {self.out_size}) needs input of shape "
                f"(batch, {self.in_size}), got {x.shape}"
            )
        # BEGIN SOLUTION 1.5
        return x @ self.weight.value + self.bias.value
        # END SOLUTION

    def __repr__(self) -> str:
        return f"Linear(in_size={self.in_size}, out_size={self.out_size})"


class MLP(Module):
    """Linear layers of the given ``sizes`` (``(2, 10, 10, 1)``: three layers) with
    ReLU between them; the last layer's output is returned as it is (logits)."""

    def __init__(
        self, sizes: Sequence[int], seed: int = 0, backend: TensorBackend = SimpleBackend
    ) -> None:
        super().__init__()
        if len(sizes) < 2:
            raise ValueError(f"MLP needs at least an input and an output size, got {sizes}")
        rng = np.random.default_rng(seed)
        self.sizes = tuple(sizes)
        self.layers: list[Linear] = []
        for i, (a, b) in enumerate(itertools.pairwise(sizes)):
            layer = Linear(a, b, rng, backend)
            setattr(self, f"layer{i + 1}", layer)
            self.layers.append(layer)

    def forward(self, x: Tensor) -> Tensor:
        """Logits of shape ``(batch, sizes[-1])`` for a batch ``(batch, sizes[0])``."""
        # BEGIN SOLUTION 1.5
        for layer in self.layers[:-1]:
            x = layer(x).relu()
        return self.layers[-1](x)
        # END SOLUTION


def binary_cross_entropy_with_logits(logits: Tensor, targets: Tensor) -> Tensor:
    r"""The mean of :math:`-[y \log \sigma(z) + (1-y) \log(1-\sigma(z))]`, computed as
    :math:`(z + |z|)/2 - z y + \log(1 + e^{-|z|})`, which never takes the log of 0.

    (``(z + |z|) / 2`` is ``max(z, 0)`` written so that autodiff gets the derivative
    right at ``z = 0`` too: with ``|z| = relu(z) + relu(-z)``, whose derivative there is
    0, it gives ``1/2``, where ``relu(z)`` would give 0.)"""
    if logits.shape != targets.shape:
        raise ShapeError(f"logits of shape {logits.shape} and targets of shape {targets.shape}")
    # BEGIN SOLUTION 1.5
    # The same sum regrouped into fewer operations (each costs a few microseconds, and
    # most of an MLP step's operations are the loss's): z (1/2 - y) + |z|/2 + log(1 +
    # e^{-|z|}), the last term as -log(sigmoid(|z|)), a log of a value in [1/2, 1].
    magnitude = logits.relu() + (-logits).relu()
    weight = -targets + 0.5  # a constant: the targets need no gradient
    return (logits * weight + magnitude * 0.5 - magnitude.sigmoid().log()).mean()
    # END SOLUTION
