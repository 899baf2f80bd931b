"""Provided (ungraded) parts of stage 1's tensors: the constructors, seeding, reading
and writing entries, and the typed errors that the provided code raises before any
kernel runs (indices out of range, views that cannot be views, matrix products whose
shapes do not fit).

NumPy is the oracle for values; every tensor is read back with ``exact_tensor``
(``tests/strict.py``). These tests run none of task 1.3's code, but the constructors
build on task 1.1's ``TensorData`` (and the map check on task 1.2's broadcasting).
"""

from __future__ import annotations

import numpy as np
import pytest

from module1.tensor import Tensor, from_numpy, manual_seed, ones, rand, tensor, zeros
from module1.tensor_data import IndexingError, ShapeError, TensorData
from module1.tensor_ops import SimpleBackend
from tests.strict import exact_float, exact_int, exact_tensor, exact_tuple


def test_tensor_from_nested_lists_and_numbers() -> None:
    got = exact_tensor(tensor([[1, 2, 3], [4, 5, 6]]))
    np.testing.assert_array_equal(got, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert got.shape == (2, 3)
    scalar = tensor(2.5)
    assert exact_tuple(scalar.shape, exact_int) == ()
    assert exact_float(scalar.item()) == 2.5
    assert exact_tuple(tensor([[[7.0]]]).shape, exact_int) == (1, 1, 1)
    with pytest.raises(ShapeError, match="rectangular"):
        tensor([[1.0, 2.0], [3.0]])


def test_zeros_and_ones_take_sizes_or_a_tuple() -> None:
    for t in (zeros(2, 3), zeros((2, 3)), zeros([2, 3])):
        np.testing.assert_array_equal(exact_tensor(t), np.zeros((2, 3)))
    np.testing.assert_array_equal(exact_tensor(ones(4)), np.ones(4))
    np.testing.assert_array_equal(exact_tensor(ones(1, 2, 1)), np.ones((1, 2, 1)))
    assert exact_tuple(zeros().shape, exact_int) == ()
    with pytest.raises(ShapeError, match="negative"):
        zeros(2, -1)
    with pytest.raises(TypeError):
        ones(2.0, 3)  # type: ignore[arg-type]


def test_rand_is_uniform_and_seeded() -> None:
    values = exact_tensor(rand(50, 4, seed=3))
    assert values.shape == (50, 4)
    assert values.min() >= 0.0 and values.max() < 1.0
    assert len(np.unique(values)) == values.size
    np.testing.assert_array_equal(exact_tensor(rand(50, 4, seed=3)), values)
    assert not np.array_equal(exact_tensor(rand(50, 4, seed=4)), values)
    manual_seed(7)
    first, second = exact_tensor(rand(3, 2)), exact_tensor(rand(3, 2))
    assert not np.array_equal(first, second)
    manual_seed(7)
    np.testing.assert_array_equal(exact_tensor(rand(3, 2)), first)
    np.testing.assert_array_equal(exact_tensor(rand(3, 2)), second)
    manual_seed(7)
    rand(5, seed=11)  # a seeded draw leaves the shared generator alone
    np.testing.assert_array_equal(exact_tensor(rand(3, 2)), first)
    manual_seed(0)


def test_from_numpy_copies_and_to_numpy_round_trips() -> None:
    array = np.arange(6).reshape(2, 3)
    t = from_numpy(array)
    array[0, 0] = 100
    np.testing.assert_array_equal(exact_tensor(t), np.arange(6.0).reshape(2, 3))
    back = t.to_numpy()
    assert type(back) is np.ndarray and back.dtype == np.float64
    np.testing.assert_array_equal(back, np.arange(6.0).reshape(2, 3))
    back[0, 0] = -1.0  # a copy: the tensor keeps its values
    np.testing.assert_array_equal(exact_tensor(t), np.arange(6.0).reshape(2, 3))
    # A layout that is not row-major reads back in index order.
    transposed = Tensor(TensorData(np.arange(6.0), (3, 2), (1, 3)))
    np.testing.assert_array_equal(transposed.to_numpy(), np.arange(6.0).reshape(2, 3).T)
    assert transposed.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


def test_item_and_indexing() -> None:
    t = tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert exact_float(t[1, 2].item()) == 6.0
    assert exact_float(t[(0, 1)].item()) == 2.0
    assert exact_float(t[-1, -3].item()) == 4.0
    assert exact_float(float(t[-1, -3])) == 4.0
    assert t[1, 2].shape == ()
    t[0, 0] = 10
    assert exact_float(t[0, 0].item()) == 10.0
    assert exact_float(tensor([[3.5]]).item()) == 3.5
    with pytest.raises(ShapeError, match=r"\(2, 3\)"):
        t.item()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(t)


def test_index_errors_name_the_dimension_the_index_and_the_size() -> None:
    t = tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for index, dim, i, size in [((2, 0), 0, 2, 2), ((0, 3), 1, 3, 3), ((-3, 0), 0, -3, 2)]:
        with pytest.raises(IndexingError) as err:
            t[index]
        text = str(err.value)
        assert f"index {i}" in text and f"dimension {dim} of size {size}" in text, text
        assert "(2, 3)" in text, text
    with pytest.raises(IndexError, match="too many indices"):  # an IndexingError is one
        t[0, 0, 0] = 1.0
    with pytest.raises(IndexingError, match="cannot index with float"):
        t[0.5]


def test_reduction_over_a_dim_that_does_not_exist() -> None:
    t = tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for reduce in (t.sum, t.mean, t.max):
        with pytest.raises(IndexingError, match=r"dim 2 .*\(2, 3\)"):
            reduce(2)
        with pytest.raises(IndexingError, match=r"dim -3"):
            reduce(-3)
    with pytest.raises(IndexingError, match=r"\(2, 3\)"):
        t.transpose(0, 2)


def test_view_errors_name_the_shapes() -> None:
    non_contiguous = Tensor(TensorData(np.arange(6.0), (3, 2), (1, 3)))
    with pytest.raises(ShapeError) as err:
        non_contiguous.view(6)
    message = str(err.value)
    assert "(3, 2)" in message and "(1, 3)" in message and "contiguous()" in message, message
    t = tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    with pytest.raises(ShapeError) as err:
        t.view(4, 2)
    assert "(4, 2)" in str(err.value) and "(2, 3)" in str(err.value), str(err.value)
    with pytest.raises(ShapeError, match=r"\(2, 3\)"):
        t.view(4, -1)
    with pytest.raises(ShapeError, match="-1"):
        t.view(-1, -1)
    with pytest.raises(ValueError):  # a ShapeError is a ValueError
        t.view(7)


def test_matmul_shape_errors_name_both_shapes() -> None:
    cases = [((2, 3), (2, 3)), ((4, 2, 3), (5, 3, 1)), ((2, 3), (4, 2))]
    for a_shape, b_shape in cases:
        a, b = zeros(*a_shape), zeros(*b_shape)
        with pytest.raises(ShapeError) as err:
            a @ b
        message = str(err.value)
        assert str(a_shape) in message and str(b_shape) in message, message
    with pytest.raises(ShapeError, match=r"\(\).*\(2,\)"):
        tensor(1.0) @ zeros(2)
    with pytest.raises(TypeError):
        zeros(2, 2) @ 2.0  # type: ignore[operator]


def test_operands_must_be_numbers_or_tensors() -> None:
    t = tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="str"):
        t + "1"  # type: ignore[operator]
    with pytest.raises(TypeError, match="constant number"):
        t ** tensor(2.0)  # type: ignore[operator]
    with pytest.raises(TypeError, match="ints"):
        t.view(2.0)  # type: ignore[arg-type]


def test_contiguous_of_a_contiguous_tensor_is_itself() -> None:
    t = tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.contiguous() is t
    assert Tensor(TensorData(np.zeros(3), (3, 1), (1, 7))).is_contiguous()


def test_map_into_an_output_that_does_not_fit() -> None:
    with pytest.raises(ShapeError) as err:
        SimpleBackend.neg_map(tensor([1.0, 2.0, 3.0]), zeros(2))
    assert "(3,)" in str(err.value) and "(2,)" in str(err.value), str(err.value)


def test_tensor_data_checks_each_layout_the_same_way_every_time() -> None:
    """``TensorData`` keeps each (shape, strides) layout's checks and index arrays after
    the first use: a layout made again, or spelled with lists or NumPy ints, gives the
    same fields, and a bad layout raises every time, not only the first."""
    storage = np.arange(12.0)
    for shape, strides, want in [
        ((3, 4), None, (4, 1)),
        ([3, 4], None, (4, 1)),
        ((4, 3), (1, 4), (1, 4)),
        ((np.int64(4), 3), [1, 4], (1, 4)),
    ]:
        for _ in range(2):
            data = TensorData(storage, shape, strides)
            assert exact_tuple(data.shape, exact_int) == tuple(int(s) for s in shape)
            assert exact_tuple(data.strides, exact_int) == want
            assert data._shape.dtype == np.int32 and data._strides.dtype == np.int32
            assert data._shape.tolist() == list(data.shape)
            assert data._strides.tolist() == list(want)
            assert exact_int(data.size) == 12 and exact_int(data.dims) == 2
    for _ in range(2):
        with pytest.raises(ShapeError, match="negative"):
            TensorData(storage, (-1, 3))
        with pytest.raises(ShapeError, match="do not match"):
            TensorData(storage, (3, 4), (1,))
        with pytest.raises(ShapeError, match="too small"):
            TensorData(np.arange(5.0), (3, 4))
        with pytest.raises(ShapeError, match="too small"):
            TensorData(storage, (3, 4), (8, 1))


def test_mixed_dtypes_name_the_input_that_differs() -> None:
    """``Function.apply`` checks every tensor argument against the first; the error names
    the operation, both dtypes and the position of the one that differs."""
    from module1.tensor_functions import DtypeError, Function

    class First(Function):
        @staticmethod
        def forward(ctx: object, a: Tensor, b: Tensor, c: Tensor) -> Tensor:
            return a

    x, y = tensor([1.0, 2.0]), tensor([3.0, 4.0])
    with pytest.raises(DtypeError, match="First: input 0 is float64 and input 2 is float32"):
        First.apply(x, y, y.float())
    with pytest.raises(DtypeError, match="First: input 0 is float64 and input 1 is float32"):
        First.apply(x, y.float(), y)
    np.testing.assert_array_equal(exact_tensor(First.apply(x, y, y)), [1.0, 2.0])
