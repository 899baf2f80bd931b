"""The stage-0 pieces of training: one epoch of the scalar network, and its predictor.

    python -m project.train_scalar --dataset xor

is ``python -m project.train --backend scalar`` (see ``project/train.py`` for the options
and defaults). With the defaults the scalar network reaches >= 95% train accuracy on
simple, diag and split and >= 90% on xor; the run writes
``runs/scalar_<dataset>/log.csv`` and ``figure.png``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from module0.autodiff import no_grad
from module0.datasets import Graph
from module0.optim import Optimizer
from module0.scalar import Scalar
from module0.scalar_nn import ScalarNetwork


def epoch(model: ScalarNetwork, data: Graph, optimizer: Optimizer) -> tuple[float, float]:
    """One full-batch step; return (mean loss, accuracy) measured during the forward."""
    total: Scalar | None = None
    correct = 0
    for x, label in zip(data.X, data.y, strict=True):
        p = model(x)
        correct += int((p.data > 0.5) == bool(label))
        # Binary cross-entropy: -log P(the true class).
        loss = -(p if label == 1 else 1.0 - p).log()
        total = loss if total is None else total + loss
    assert total is not None
    mean = total / data.N
    optimizer.zero_grad()
    mean.backward()
    optimizer.step()
    return mean.data, correct / data.N


def predictor(model: ScalarNetwork) -> Callable[[Sequence[tuple[float, float]]], list[float]]:
    """P(class 1) for a batch of points, computed without building graphs."""

    def predict(points: Sequence[tuple[float, float]]) -> list[float]:
        with no_grad():
            return [model(p).data for p in points]

    return predict


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m project.train`` with the scalar backend as the default."""
    from project import train

    return train.main(argv, backend="scalar")


if __name__ == "__main__":
    raise SystemExit(main())
