"""PyTorch parity for stage 4's batch normalization: BatchNorm1d and BatchNorm2d against
``torch.nn.BatchNorm1d`` / ``BatchNorm2d`` on the CPU, in float64 and float32, over
several training steps (outputs, gradients of the input, weight and bias, running
statistics and the batch count), then in evaluation mode; every momentum kind, with and
without running statistics, and through a state dict. Skipped where PyTorch is not
installed; not graded (no task marker)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from module1.tensor import from_numpy  # noqa: E402
from module2.fast_ops import FastTensorBackend as FAST  # noqa: E402
from module4 import layers  # noqa: E402
from module4.batchnorm import BatchNorm1d, BatchNorm2d  # noqa: E402

DTYPES = {np.float64: torch.float64, np.float32: torch.float32}
TOL = {np.float64: 1e-9, np.float32: 3e-5}
CASES = [
    ((6, 3), 0.1, True),
    ((4, 2, 7), None, True),
    ((3, 4, 5, 2), 0.3, True),
    ((2, 3, 4, 4), 0.1, False),
]
"""(input shape, momentum, track_running_stats)."""


def pair(shape: tuple[int, ...], momentum: float | None, track: bool, dtype: Any) -> Any:
    c = shape[1]
    ours_kind, theirs_kind = (
        (BatchNorm2d, torch.nn.BatchNorm2d)
        if len(shape) == 4
        else (BatchNorm1d, torch.nn.BatchNorm1d)
    )
    ours = ours_kind(c, momentum=momentum, track_running_stats=track, backend=FAST).to(dtype)
    theirs = theirs_kind(c, momentum=momentum, track_running_stats=track).to(DTYPES[dtype])
    rng = np.random.default_rng(c)
    w, b = rng.normal(size=c), rng.normal(size=c)
    ours.weight.update(from_numpy(w.astype(dtype), FAST))
    ours.bias.update(from_numpy(b.astype(dtype), FAST))
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
        theirs.bias.copy_(torch.tensor(b))
    return ours, theirs


def close(ours: np.ndarray, theirs: Any, dtype: Any) -> None:
    np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("shape", "momentum", "track"), CASES, ids=str)
def test_batchnorm_matches_torch_over_training_steps_and_in_eval(
    dtype: Any, shape: tuple[int, ...], momentum: float | None, track: bool
) -> None:
    ours, theirs = pair(shape, momentum, track, dtype)
    rng = np.random.default_rng(len(shape))
    for step in range(3):
        x = rng.normal(step, 1.0 + step, size=shape)
        g = rng.normal(size=shape)
        mine = from_numpy(x.astype(dtype), FAST, requires_grad=True)
        xt = torch.tensor(x, dtype=DTYPES[dtype], requires_grad=True)
        y, yt = ours(mine), theirs(xt)
        close(y.to_numpy(), yt, dtype)
        (y * from_numpy(g.astype(dtype), FAST)).sum().backward()
        (yt * torch.tensor(g, dtype=DTYPES[dtype])).sum().backward()
        close(mine.grad.to_numpy(), xt.grad, dtype)
        close(ours.weight.value.grad.to_numpy(), theirs.weight.grad, dtype)
        close(ours.bias.value.grad.to_numpy(), theirs.bias.grad, dtype)
        ours.weight.value.zero_grad_()
        ours.bias.value.zero_grad_()
        theirs.zero_grad()
        if track:
            close(ours.running_mean.to_numpy(), theirs.running_mean, dtype)
            close(ours.running_var.to_numpy(), theirs.running_var, dtype)
            assert ours.num_batches_tracked == int(theirs.num_batches_tracked) == step + 1
    ours.eval()
    theirs.eval()
    x = rng.normal(size=shape)
    close(ours(from_numpy(x.astype(dtype), FAST)).to_numpy(),
          theirs(torch.tensor(x, dtype=DTYPES[dtype])), dtype)  # fmt: skip


def test_state_dict_names_and_values_match_torch() -> None:
    ours, theirs = pair((5, 3, 2, 2), 0.1, True, np.float64)
    x = np.random.default_rng(0).normal(size=(5, 3, 2, 2))
    ours(from_numpy(x, FAST))
    theirs(torch.tensor(x))
    mine = layers.state_dict(ours)
    their_state = theirs.state_dict()
    assert set(mine) == set(their_state)
    for name, value in their_state.items():
        np.testing.assert_allclose(mine[name], value.numpy(), rtol=1e-12)
    assert mine["num_batches_tracked"].dtype == their_state["num_batches_tracked"].numpy().dtype
