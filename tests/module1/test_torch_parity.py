"""PyTorch parity for tensors: values, shapes and gradients of composite expressions
against ``torch`` (float64, CPU) on the simple backend and, where stage 2 exists, the
fast one. Skipped where PyTorch is not installed; not graded (no task marker).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from module1.tensor import from_numpy  # noqa: E402
from module1.tensor_nn import binary_cross_entropy_with_logits  # noqa: E402
from module1.tensor_ops import SimpleBackend, TensorBackend  # noqa: E402
from tests.strict import exact_tensor  # noqa: E402

BACKENDS: list[TensorBackend] = [SimpleBackend]
try:
    from module2.fast_ops import FastTensorBackend

    BACKENDS.append(FastTensorBackend)
except ImportError:  # stage 2 not in this checkout
    pass

Expr = Callable[[Any, Any], Any]

CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], Expr]] = {
    "broadcast arithmetic": ((3, 1, 4), (2, 4), lambda a, b: (a * b - b / (a * a + 1.0)).tanh()),
    "matmul batch broadcast": ((2, 1, 3, 4), (5, 4, 2), lambda a, b: (a @ b).sigmoid()),
    "vector matmul": ((4,), (3, 4, 2), lambda a, b: (a @ b).relu() + 0.5),
    "reductions": (
        (3, 4, 5),
        (5,),
        lambda a, b: (a * b).sum(1) + a.mean(-2, keepdim=True).sum(1) * b.max(),
    ),
    "layout": (
        (2, 3, 4),
        (4, 3),
        lambda a, b: a.permute(2, 0, 1).reshape(4, 6) * b.sum(1).view(4, 1),
    ),
    "exp log pow": ((3, 4), (4,), lambda a, b: (a * a + 1.0).log() + (b * 0.5).exp() ** 1.5),
}


def torch_version(expr: Expr, a: np.ndarray, b: np.ndarray) -> tuple[Any, ...]:
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    out = expr(ta, tb)
    weight = torch.linspace(-1.0, 1.0, out.numel(), dtype=torch.float64).reshape(out.shape)
    (out * weight).sum().backward()
    return out.detach().numpy(), ta.grad.numpy(), tb.grad.numpy(), weight.numpy()


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_pytorch(case: str, backend: TensorBackend) -> None:
    a_shape, b_shape, expr = CASES[case]
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=a_shape), rng.normal(size=b_shape)
    expected, grad_a, grad_b, weight = torch_version(expr, a, b)
    x = from_numpy(a, backend, requires_grad=True)
    y = from_numpy(b, backend, requires_grad=True)
    out = expr(x, y)
    got = exact_tensor(out)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    (out * from_numpy(weight, backend)).sum().backward()
    np.testing.assert_allclose(exact_tensor(x.grad), grad_a, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(exact_tensor(y.grad), grad_b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_bce_with_logits_matches_pytorch(backend: TensorBackend) -> None:
    z = np.array([[-800.0], [-3.0], [0.0], [2.5], [900.0]])
    y = np.array([[0.0], [1.0], [1.0], [0.0], [1.0]])
    tz = torch.tensor(z, requires_grad=True)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(tz, torch.tensor(y))
    loss.backward()
    x = from_numpy(z, backend, requires_grad=True)
    ours = binary_cross_entropy_with_logits(x, from_numpy(y, backend))
    np.testing.assert_allclose(exact_tensor(ours), loss.item(), rtol=1e-12)
    ours.backward()
    np.testing.assert_allclose(exact_tensor(x.grad), tz.grad.numpy(), rtol=1e-10, atol=1e-15)


INDEX_CASES: list[tuple[str, Any, Any]] = [
    ("last column", lambda x: x[:, -1], None),
    ("strided slice and None", lambda x: x[None, 1:, ::2], None),
    ("repeated rows", lambda x: x[[2, 0, 2, 2]], lambda x: x[[2, 0, 2, 2]]),
    ("pairs of indices", lambda x: x[[0, 2], [3, 3]], lambda x: x[[0, 2], [3, 3]]),
    ("mask", lambda x: x[(x > 0.0).bool()], lambda x: x[x > 0.0]),
    ("gather", lambda x: x.gather(1, np.array([[0, 0], [3, 1], [2, 2]])),
     lambda x: x.gather(1, torch.tensor([[0, 0], [3, 1], [2, 2]]))),
    ("unsqueeze, expand, squeeze", lambda x: x.unsqueeze(0).expand(2, 3, 4).squeeze(),
     lambda x: x.unsqueeze(0).expand(2, 3, 4).squeeze()),
]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("case", INDEX_CASES, ids=lambda c: c[0])
def test_indexing_matches_torch(case: tuple[str, Any, Any], backend: TensorBackend) -> None:
    """Values and gradients of task 1.6's indexing (and the views around it) against
    PyTorch's, with a weighted sum as the loss."""
    _, ours, theirs = case
    theirs = theirs or ours
    x = np.random.default_rng(5).normal(size=(3, 4))
    mine = from_numpy(x.copy(), backend).requires_grad_()
    reference = torch.tensor(x, requires_grad=True)
    out, want = ours(mine), theirs(reference)
    assert out.shape == tuple(want.shape)
    np.testing.assert_allclose(exact_tensor(out, "value"), want.detach().numpy())
    weights = np.random.default_rng(6).normal(size=out.shape)
    (out * from_numpy(weights, backend)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    assert mine.grad is not None and reference.grad is not None
    np.testing.assert_allclose(exact_tensor(mine.grad, "grad"), reference.grad.numpy())


def test_assignment_matches_torch() -> None:
    x = np.arange(1.0, 7.0)
    mine = from_numpy(x.copy(), SimpleBackend).requires_grad_()
    reference = torch.tensor(x, requires_grad=True)
    y, z = mine * 1.0, reference * 1.0
    y[1:5:2] = 0.0
    z[1:5:2] = 0.0
    (y * y).sum().backward()
    (z * z).sum().backward()
    assert mine.grad is not None and reference.grad is not None
    np.testing.assert_array_equal(exact_tensor(mine.grad, "grad"), reference.grad.numpy())
