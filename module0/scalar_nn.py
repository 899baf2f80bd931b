"""Task 0.6: a fully connected layer and a small network made of Scalars.

Every weight is its own Scalar Parameter, so a layer of ``n`` inputs and ``m`` outputs
builds ``2 n m`` graph nodes per example: slow, but every step is visible. Stage 1
replaces this with tensors.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from module0.module import Module, Parameter
from module0.scalar import Scalar, ScalarLike


class ScalarLinear(Module):
    r"""``y_j = b_j + \sum_i x_i w_{ij}`` over Scalars.

    Weights and biases start uniform in :math:`\pm 1/\sqrt{in}` (PyTorch's default for
    Linear), drawn from ``rng`` (a fresh ``random.Random(0)`` when omitted).
    Parameters are named ``weight_i_j`` and ``bias_j``.
    """

    def __init__(self, in_size: int, out_size: int, rng: random.Random | None = None) -> None:
        super().__init__()
        if in_size < 1 or out_size < 1:
            raise ValueError(f"ScalarLinear sizes must be positive, got {in_size}x{out_size}")
        rng = rng or random.Random(0)
        bound = 1.0 / math.sqrt(in_size)
        self.in_size = in_size
        self.out_size = out_size
        self.weights: list[list[Parameter]] = [
            [
                self.add_parameter(f"weight_{i}_{j}", Scalar(rng.uniform(-bound, bound)))
                for j in range(out_size)
            ]
            for i in range(in_size)
        ]
        self.bias: list[Parameter] = [
            self.add_parameter(f"bias_{j}", Scalar(rng.uniform(-bound, bound)))
            for j in range(out_size)
        ]

    def forward(self, inputs: Sequence[ScalarLike]) -> list[Scalar]:
        """Map ``in_size`` inputs to ``out_size`` Scalars."""
        if len(inputs) != self.in_size:
            raise ValueError(
                f"ScalarLinear({self.in_size}, {self.out_size}) got {len(inputs)} inputs"
            )
        # BEGIN SOLUTION 0.6
        outputs: list[Scalar] = []
        for j, bias in enumerate(self.bias):
            y: Scalar = bias.value
            for x, row in zip(inputs, self.weights, strict=True):
                y = y + x * row[j].value
            outputs.append(y)
        return outputs
        # END SOLUTION


class ScalarNetwork(Module):
    """``2 -> hidden -> hidden -> 1``: two ReLU layers and a sigmoid output, the
    probability that a 2-D point is in class 1."""

    def __init__(self, hidden: int = 10, seed: int = 0) -> None:
        super().__init__()
        rng = random.Random(seed)
        self.layer1 = ScalarLinear(2, hidden, rng)
        self.layer2 = ScalarLinear(hidden, hidden, rng)
        self.layer3 = ScalarLinear(hidden, 1, rng)

    def logit(self, x: Sequence[ScalarLike]) -> Scalar:
        """The pre-sigmoid score of a point."""
        h = [v.relu() for v in self.layer1(x)]
        h = [v.relu() for v in self.layer2(h)]
        return self.layer3(h)[0]

    def forward(self, x: Sequence[ScalarLike]) -> Scalar:
        return self.logit(x).sigmoid()
