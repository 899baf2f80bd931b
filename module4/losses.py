"""Task 4.4: the losses classifiers and regressors train with.

Each loss is built from differentiable Tensor operations, so its gradient comes from
autodiff, and returns a 0-d tensor: the mean over the batch. Class targets are plain
indices (a list, a NumPy array or a Tensor); they are checked and turned into a one-hot
matrix on the host with NumPy, then into a constant tensor on the input's backend.

``binary_cross_entropy_with_logits`` is stage 1's (``module1.tensor_nn``), re-exported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from module1.tensor import Tensor, from_numpy
from module1.tensor_data import IndexingError, ShapeError
from module1.tensor_nn import binary_cross_entropy_with_logits
from module4.nn import logsoftmax

__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "mse_loss",
    "nll_loss",
]

Targets = Sequence[int] | npt.NDArray[np.integer] | Tensor
"""Class indices, one per row: a list of ints, an integer (or integral float) NumPy
array, or a Tensor of shape ``(N,)`` holding whole numbers."""

LOG_FLOOR = -100.0
"""The smallest log :func:`binary_cross_entropy` takes (PyTorch's clamp): a probability
of exactly 0 or 1 then costs at most 100 instead of ``inf``."""


def _scores(name: str, scores: Tensor, what: str) -> tuple[int, int]:
    """``(N, K)`` of a 2-D ``scores`` (ShapeError naming its shape otherwise)."""
    if not isinstance(scores, Tensor):
        raise TypeError(f"{name}: {what} must be a Tensor, got {type(scores).__name__}")
    if scores.dims != 2 or scores.shape[0] == 0 or scores.shape[1] == 0:
        raise ShapeError(
            f"{name} needs {what} of shape (N, K) with N, K >= 1 (a row of class scores "
            f"per example), got shape {scores.shape}"
        )
    return scores.shape[0], scores.shape[1]


def _class_indices(name: str, targets: Targets, n: int, k: int) -> npt.NDArray[np.int64]:
    """``targets`` as ``n`` int64 class indices in ``[0, k)``. ShapeError when there are
    not ``n``; TypeError for non-numbers; ValueError naming the position of a value that
    is not a whole number; IndexingError naming the index and position of one out of
    range."""
    if isinstance(targets, Tensor):
        values = targets.to_numpy()
    elif isinstance(targets, np.ndarray | Sequence) and not isinstance(targets, str | bytes):
        values = np.asarray(targets)
    else:
        raise TypeError(
            f"{name}: targets must be class indices (a list, NumPy array or Tensor), "
            f"got {type(targets).__name__}"
        )
    if values.shape != (n,):
        raise ShapeError(f"{name}: {n} rows of scores need targets of shape ({n},), got "
                         f"shape {values.shape}")  # fmt: skip
    if values.dtype.kind not in "iuf":
        raise TypeError(f"{name}: targets must be integer class indices, got dtype {values.dtype}")
    if values.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"{name}: target {float(values[i])!r} at position {i} is not a whole class index"
            )
    indices = values.astype(np.int64)
    outside = np.flatnonzero((indices < 0) | (indices >= k))
    if outside.size:
        i = int(outside[0])
        raise IndexingError(
            f"{name}: target {int(indices[i])} at position {i} is not a class index in "
            f"[0, {k}) for scores of shape ({n}, {k})"
        )
    return indices


def _same_shape(name: str, a: Tensor, b: Tensor, what: tuple[str, str]) -> None:
    for t, label in zip((a, b), what, strict=True):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: {label} must be a Tensor, got {type(t).__name__}")
    if a.shape != b.shape:
        raise ShapeError(
            f"{name}: {what[0]} of shape {a.shape} and {what[1]} of shape {b.shape} "
            "must have the same shape"
        )


def nll_loss(log_probs: Tensor, targets: Targets) -> Tensor:
    """The negative log-likelihood ``-mean_n log_probs[n, targets[n]]`` of rows of log
    probabilities ``(N, K)`` (from :func:`~module4.nn.logsoftmax`).

    The entries are picked by multiplying with a one-hot matrix, so every entry of
    ``log_probs`` must be finite (``-inf * 0`` is nan): use ``logsoftmax``, not
    ``log(softmax)``, which underflows.
    """
    n, k = _scores("nll_loss", log_probs, "log_probs")
    indices = _class_indices("nll_loss", targets, n, k)
    # BEGIN SOLUTION 4.4
    onehot = np.zeros((n, k), log_probs.dtype)
    onehot[np.arange(n), indices] = 1.0
    picked = log_probs * from_numpy(onehot, log_probs.backend)
    return -picked.sum() / float(n)
    # END SOLUTION


def cross_entropy(logits: Tensor, targets: Targets) -> Tensor:
    """The mean cross-entropy of rows of unnormalised class scores ``(N, K)`` against
    class indices: ``nll_loss(logsoftmax(logits, 1), targets)``. Its gradient with
    respect to the logits is ``(softmax(logits) - onehot(targets)) / N``."""
    n, k = _scores("cross_entropy", logits, "logits")
    _class_indices("cross_entropy", targets, n, k)
    # BEGIN SOLUTION 4.4
    return nll_loss(logsoftmax(logits, 1), targets)
    # END SOLUTION


def binary_cross_entropy(probs: Tensor, targets: Tensor) -> Tensor:
    """The mean of ``-[y log p + (1 - y) log(1 - p)]`` for probabilities ``p`` in
    ``[0, 1]`` and targets ``y`` of the same shape.

    Both logs are clamped at :data:`LOG_FLOOR` (-100), as PyTorch does, by flooring the
    argument at ``e^-100``: ``p = 0`` or ``1`` gives a finite loss and a finite (zero)
    gradient in the clamped term, not ``inf`` and nan. Given logits, prefer
    :func:`binary_cross_entropy_with_logits`, which needs no clamp.
    """
    _same_shape("binary_cross_entropy", probs, targets, ("probs", "targets"))
    # BEGIN SOLUTION 4.4
    floor = math.exp(LOG_FLOOR)

    def clamped_log(x: Tensor) -> Tensor:
        return ((x - floor).relu() + floor).log()  # log(max(x, e^-100))

    per_entry = targets * clamped_log(probs) + (1.0 - targets) * clamped_log(1.0 - probs)
    return -per_entry.mean()
    # END SOLUTION


def mse_loss(pred: Tensor, target: Tensor) -> Tensor:
    """The mean squared error ``mean((pred - target) ** 2)`` over every entry."""
    _same_shape("mse_loss", pred, target, ("pred", "target"))
    # BEGIN SOLUTION 4.4
    diff = pred - target
    return (diff * diff).mean()
    # END SOLUTION
