"""Cutting, joining and selecting (``module1/shape_ops.py``, given code): ``narrow``,
``split``, ``chunk``, ``cat``, ``stack``, ``where`` and ``masked_fill`` against NumPy's
own, on stage 1's backend, in both dtypes; every backward against central
differences; ``split`` and ``cat`` inverse (Hypothesis); clear errors naming the shapes.
Not a task's tests: given code, which holds on the handout too."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from module1.grad_check import grad_check
from module1.shape_ops import cat, chunk, masked_fill, narrow, split, stack, where
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module1.tensor_ops import SimpleBackend

BACKENDS = [SimpleBackend]  # stage 1's; stage 2's backend runs them in tests/module2
ids = ["simple"]


def t(values: np.ndarray, backend: object = SimpleBackend, dtype: type = np.float64) -> Tensor:
    return from_numpy(np.asarray(values, dtype=dtype), backend)


@pytest.mark.parametrize("backend", BACKENDS, ids=ids)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_each_matches_numpy_in_its_dtype_and_backend(backend: object, dtype: type) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3))
    cond = rng.random((5, 1)) < 0.5
    got = {
        "narrow": narrow(t(x, backend, dtype), 1, 1, 3),
        "cat": cat([t(x, backend, dtype), t(y, backend, dtype)], -1),
        "stack": stack([t(x, backend, dtype), t(y, backend, dtype)], 1),
        "where": where(cond, t(x, backend, dtype), t(y, backend, dtype)),
        "where scalar": where(cond, t(x, backend, dtype), 0.5),
        "masked_fill": masked_fill(t(x, backend, dtype), cond, -2.0),
    }
    want = {
        "narrow": x[:, 1:4], "cat": np.concatenate([x, y], -1), "stack": np.stack([x, y], 1),
        "where": np.where(cond, x, y), "where scalar": np.where(cond, x, 0.5),
        "masked_fill": np.where(cond, -2.0, x),
    }  # fmt: skip
    for name, tensor in got.items():
        assert tensor.backend is backend and tensor.dtype == dtype, name
        np.testing.assert_allclose(tensor.to_numpy(), want[name].astype(dtype), err_msg=name)


@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=4), piece=st.integers(1, 5))
@settings(max_examples=25)
def test_split_then_cat_is_the_tensor(sizes: list[int], piece: int) -> None:
    """Pieces of ``piece`` along a dimension (the last one shorter), or of listed sizes;
    ``cat`` of the pieces is the tensor back."""
    n = sum(sizes)
    x = np.arange(2.0 * n).reshape(2, n)
    parts = split(t(x), piece, 1)
    want = [min(piece, n - i) for i in range(0, n, piece)] or [0]  # one empty piece
    assert [p.shape[1] for p in parts] == want
    np.testing.assert_array_equal(cat(parts, 1).to_numpy(), x)
    listed = split(t(x), sizes, 1)
    assert [p.shape[1] for p in listed] == sizes
    np.testing.assert_array_equal(cat(listed, 1).to_numpy(), x)


def test_chunk_cuts_like_pytorch() -> None:
    x = t(np.arange(7.0))
    assert [p.shape for p in chunk(x, 3)] == [(3,), (3,), (1,)]
    assert [p.shape for p in chunk(x, 7)] == [(1,)] * 7
    assert [p.shape for p in chunk(t(np.arange(6.0)), 4)] == [(2,), (2,), (2,)]


def test_every_backward_matches_central_differences() -> None:
    rng = np.random.default_rng(1)
    x, y = t(rng.normal(size=(3, 4))), t(rng.normal(size=(3, 4)))
    cond = rng.random((3, 4)) < 0.5
    grad_check(lambda a: narrow(a, 1, 1, 2), x)
    grad_check(lambda a: split(a, [1, 3], 1)[1] * 2.0, x)
    grad_check(lambda a, b: cat([a, b], 0), x, y)
    grad_check(lambda a, b: stack([a, b], -1), x, y)
    grad_check(lambda a, b: where(cond, a, b), x, y)
    grad_check(lambda a: masked_fill(a, cond, 3.0), x)


def test_where_sums_the_gradient_of_a_broadcast_input_back_to_its_shape() -> None:
    x = t(np.array([1.0, 2.0, 3.0])).requires_grad_()
    y = t(np.zeros((2, 1))).requires_grad_()
    cond = np.array([[True, False, True], [False, False, True]])
    where(cond, x, y).sum().backward()
    np.testing.assert_array_equal(x.grad.to_numpy(), [1.0, 0.0, 2.0])
    np.testing.assert_array_equal(y.grad.to_numpy(), [[1.0], [2.0]])


def test_a_filled_entry_gets_no_gradient_and_its_value_is_gone() -> None:
    x = t(np.array([[1.0, np.nan], [np.inf, 4.0]])).requires_grad_()
    y = masked_fill(x, np.array([False, True]), -7.0)
    np.testing.assert_array_equal(y.to_numpy(), [[1.0, -7.0], [np.inf, -7.0]])
    (y * t(np.array([[2.0, 3.0], [4.0, 5.0]]))).sum().backward()
    np.testing.assert_array_equal(x.grad.to_numpy(), [[2.0, 0.0], [4.0, 0.0]])


def test_bad_input_names_the_shapes() -> None:
    x = t(np.zeros((2, 3, 6)))
    with pytest.raises(ShapeError, match=r"sizes \[2, 2\] do not add up to dimension 2 \(6\)"):
        split(x, [2, 2], -1)
    with pytest.raises(ShapeError, match="a piece size of 0"):
        split(x, 0, 0)
    with pytest.raises(ShapeError, match=r"cat along dimension 1: shapes .* differ"):
        cat([x, t(np.zeros((2, 3, 5)))], 1)
    with pytest.raises(ShapeError, match=r"stack \(all dimensions\)"):
        stack([x, t(np.zeros((2, 3, 5)))])
    with pytest.raises(ShapeError, match=r"narrow: 5:8 along dimension 2 of a tensor of shape"):
        narrow(x, 2, 5, 3)
    with pytest.raises(ShapeError, match=r"mask of shape \(4,\) does not broadcast to \(2, 3, 6\)"):
        masked_fill(x, np.ones(4, bool), 0.0)
    with pytest.raises(ShapeError, match=r"where: condition \(4,\)"):
        where(np.ones(4, bool), x, 0.0)
    with pytest.raises(ValueError, match="cat: no tensors"):
        cat([], 0)
