"""Tasks 1.1 and 1.2: strides, indexing, permuted views and broadcasting, against NumPy.

NumPy is the oracle: ``np.lib.stride_tricks.as_strided`` reads the same storage through
the same shape and strides, and ``np.broadcast_shapes`` / ``np.broadcast_to`` define
broadcasting.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module1 import tensor_data
from module1.tensor_data import (
    IndexingError,
    ShapeError,
    TensorData,
    broadcast_index,
    index_to_position,
    shape_broadcast,
    strides_from_shape,
    to_index,
)
from tests.module1.numba_rule import compiled
from tests.strict import exact_bool, exact_int, exact_tuple

shapes = st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=4).map(tuple)


def numpy_view(data: TensorData) -> np.ndarray:
    storage, shape, strides = data.tuple()
    return np.lib.stride_tricks.as_strided(storage, shape, tuple(s * 8 for s in strides))


def contiguous(shape: tuple[int, ...]) -> TensorData:
    return TensorData(np.arange(float(np.prod(shape))), shape)


@st.composite
def permuted(draw: st.DrawFn) -> tuple[TensorData, tuple[int, ...]]:
    shape = draw(shapes)
    order = tuple(draw(st.permutations(range(len(shape)))))
    return contiguous(shape).permute(*order), order


# -- task 1.1 ---------------------------------------------------------------------------


@pytest.mark.task1_1
def test_strides_from_shape_values() -> None:
    assert exact_tuple(strides_from_shape((2, 3, 4)), exact_int) == (12, 4, 1)
    assert exact_tuple(strides_from_shape((5,)), exact_int) == (1,)
    assert exact_tuple(strides_from_shape((3, 1, 2)), exact_int) == (2, 2, 1)
    assert exact_tuple(strides_from_shape(()), exact_int) == ()


@pytest.mark.task1_1
@given(shapes)
def test_strides_from_shape_match_numpy(shape: tuple[int, ...]) -> None:
    expected = tuple(s // 8 for s in np.zeros(shape).strides)
    assert exact_tuple(strides_from_shape(shape), exact_int) == expected


@pytest.mark.task1_1
def test_index_to_position_values() -> None:
    strides = np.array([12, 4, 1], dtype=np.int32)
    assert int(index_to_position(np.array([1, 2, 3], dtype=np.int32), strides)) == 23
    assert int(index_to_position(np.array([0, 0, 0], dtype=np.int32), strides)) == 0
    permuted_strides = np.array([1, 12, 4], dtype=np.int32)
    assert int(index_to_position(np.array([3, 1, 2], dtype=np.int32), permuted_strides)) == 23


@pytest.mark.task1_1
@given(shapes, st.data())
def test_to_index_inverts_row_major_order(shape: tuple[int, ...], data: st.DataObject) -> None:
    size = int(np.prod(shape))
    ordinal = data.draw(st.integers(min_value=0, max_value=size - 1))
    out = np.zeros(len(shape), dtype=np.int32)
    to_index(ordinal, np.array(shape, dtype=np.int32), out)
    assert tuple(int(i) for i in out) == tuple(int(i) for i in np.unravel_index(ordinal, shape))
    strides = np.array(strides_from_shape(shape), dtype=np.int32)
    assert int(index_to_position(out, strides)) == ordinal


@pytest.mark.task1_1
@given(shapes)
def test_indices_enumerate_every_index_in_order(shape: tuple[int, ...]) -> None:
    got = list(contiguous(shape).indices())
    assert got == [tuple(int(i) for i in idx) for idx in np.ndindex(*shape)]
    assert all(type(i) is tuple for i in got)


@pytest.mark.task1_1
@given(permuted())
def test_permute_is_a_view_that_numpy_agrees_with(case: tuple[TensorData, tuple[int, ...]]) -> None:
    view, order = case
    base = np.arange(float(view.size)).reshape(
        tuple(view.shape[order.index(d)] for d in range(len(order)))
    )
    expected = np.transpose(base, order)
    assert view.shape == expected.shape
    for index in view.indices():
        assert view.get(index) == expected[index]
    np.testing.assert_array_equal(numpy_view(view), expected)


@pytest.mark.task1_1
def test_permute_shares_storage() -> None:
    data = contiguous((2, 3))
    view = data.permute(1, 0)
    assert exact_tuple(view.shape, exact_int) == (3, 2)
    assert exact_tuple(view.strides, exact_int) == (1, 3)
    view.set((2, 1), 100.0)
    assert data.get((1, 2)) == 100.0
    assert np.shares_memory(view.tuple()[0], data.tuple()[0])


@pytest.mark.task1_1
def test_is_contiguous() -> None:
    data = contiguous((2, 3, 4))
    assert exact_bool(data.is_contiguous()) is True
    assert exact_bool(data.permute(1, 0, 2).is_contiguous()) is False
    assert exact_bool(data.permute(0, 1, 2).is_contiguous()) is True
    assert exact_bool(contiguous((3, 1)).permute(1, 0).is_contiguous()) is True


# -- task 1.2 ---------------------------------------------------------------------------

broadcast_pairs = st.lists(
    st.tuples(st.integers(1, 4), st.booleans(), st.booleans()), min_size=1, max_size=4
).flatmap(
    lambda dims: st.tuples(st.integers(0, len(dims)), st.integers(0, len(dims))).map(
        lambda cut: (
            tuple(1 if one_a else n for n, one_a, _ in dims)[cut[0] :],
            tuple(1 if one_b else n for n, _, one_b in dims)[cut[1] :],
        )
    )
)


@pytest.mark.task1_2
def test_shape_broadcast_values() -> None:
    assert exact_tuple(shape_broadcast((3, 1), (4,)), exact_int) == (3, 4)
    assert exact_tuple(shape_broadcast((1,), (2, 3)), exact_int) == (2, 3)
    assert exact_tuple(shape_broadcast((5, 1, 4), (3, 1)), exact_int) == (5, 3, 4)
    assert exact_tuple(shape_broadcast((2, 3), (2, 3)), exact_int) == (2, 3)


@pytest.mark.task1_2
@pytest.mark.parametrize(
    ("a", "b"), [((2, 0), (1,)), ((0,), ()), ((1, 3), (0, 1)), ((0, 4), (4,)), ((2, 0), (2, 1))]
)
def test_shape_broadcast_keeps_empty_dimensions(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    """1 against 0 gives 0 (NumPy's rule: the size that is not 1), not the larger size."""
    expected = np.broadcast_shapes(a, b)
    assert exact_tuple(shape_broadcast(a, b), exact_int) == expected
    assert exact_tuple(shape_broadcast(b, a), exact_int) == expected
    with pytest.raises(ShapeError):
        shape_broadcast((0,), (2,))


@pytest.mark.task1_2
@given(broadcast_pairs)
def test_shape_broadcast_matches_numpy(pair: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    a, b = pair
    expected = np.broadcast_shapes(a, b)
    assert exact_tuple(shape_broadcast(a, b), exact_int) == expected
    assert exact_tuple(shape_broadcast(b, a), exact_int) == expected


@pytest.mark.task1_2
def test_shape_broadcast_names_incompatible_shapes() -> None:
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(4,\)"):
        shape_broadcast((2, 3), (4,))
    with pytest.raises(ShapeError, match=r"\(3, 2\).*\(2, 3\)"):
        shape_broadcast((3, 2), (2, 3))
    with pytest.raises(ValueError):  # ShapeError is a ValueError
        shape_broadcast((5,), (2, 5, 3))


@pytest.mark.task1_2
@given(broadcast_pairs)
def test_broadcast_index_reads_what_numpy_broadcasting_reads(
    pair: tuple[tuple[int, ...], tuple[int, ...]],
) -> None:
    small, other = pair
    big = np.broadcast_shapes(small, other)
    values = np.arange(float(np.prod(small))).reshape(small)
    expected = np.broadcast_to(values, big)
    out = np.zeros(len(small), dtype=np.int32)
    for index in np.ndindex(*big):
        broadcast_index(
            np.array(index, dtype=np.int32), np.array(big, dtype=np.int32),
            np.array(small, dtype=np.int32), out,
        )  # fmt: skip
        assert values[tuple(int(i) for i in out)] == expected[index]


@pytest.mark.task1_2
def test_broadcast_index_values() -> None:
    out = np.zeros(2, dtype=np.int32)
    broadcast_index(np.array([1, 2, 3], np.int32), np.array([2, 3, 4], np.int32),
                    np.array([1, 4], np.int32), out)  # fmt: skip
    assert [int(i) for i in out] == [0, 3]
    out1 = np.zeros(1, dtype=np.int32)
    broadcast_index(np.array([1, 2], np.int32), np.array([2, 3], np.int32),
                    np.array([1], np.int32), out1)  # fmt: skip
    assert [int(i) for i in out1] == [0]


# -- provided code: errors -----------------------------------------------------------------


def test_bad_permutations_and_indices_are_named() -> None:
    data = TensorData(np.zeros(6), (2, 3))
    with pytest.raises(ShapeError, match=r"permute\(0, 0\).*\(2, 3\)"):
        data.permute(0, 0)
    with pytest.raises(ShapeError, match="permutation"):
        data.permute(1, 0, 2)
    with pytest.raises(IndexingError, match=r"\(2, 0\).*out of range.*\(2, 3\)"):
        data.get((2, 0))
    with pytest.raises(IndexingError, match="3 dimensions"):
        data.get((0, 0, 0))
    with pytest.raises(ShapeError, match="too small"):
        TensorData(np.zeros(5), (2, 3))


# -- tasks 1.1 and 1.2: the index functions compile as stage 2 compiles them --------------


@pytest.mark.parametrize(
    "name",
    [pytest.param("index_to_position", marks=pytest.mark.task1_1),
     pytest.param("to_index", marks=pytest.mark.task1_1),
     pytest.param("broadcast_index", marks=pytest.mark.task1_2)],
)  # fmt: skip
def test_index_functions_compile_with_numba(name: str) -> None:
    """Stage 2 runs these inside ``numba.njit`` kernels: an answer Numba cannot compile
    (``zip(strict=True)``, a tuple built on the fly) fails here with Numba's message,
    not at task 2.1. The compiled function must also give NumPy's answers."""
    i32 = np.int32
    sample = {"index_to_position": (np.array([1, 2], i32), np.array([3, 1], i32)),
              "to_index": (5, np.array([2, 3], i32), np.zeros(2, i32)),
              "broadcast_index": (np.array([1, 2], i32), np.array([2, 3], i32),
                                  np.array([3], i32), np.zeros(1, i32))}  # fmt: skip
    getattr(tensor_data, name)(*sample[name])  # as Python first: "where to look" names it
    fn = compiled(name)  # raises NotCompilableError, naming the rule, if Numba refuses
    if name == "index_to_position":
        storage = np.arange(24).reshape(4, 3, 2).transpose(2, 1, 0)  # strides (1, 2, 6)
        for index in np.ndindex(2, 3, 4):
            assert int(fn(np.array(index, i32), np.array([1, 2, 6], i32))) == storage[index]
    elif name == "to_index":
        out = np.zeros(3, i32)
        for ordinal in range(24):
            fn(ordinal, np.array([2, 3, 4], i32), out)
            assert tuple(int(i) for i in out) == np.unravel_index(ordinal, (2, 3, 4))
    else:
        values = np.arange(4.0).reshape(1, 4)
        expected = np.broadcast_to(values, (2, 3, 4))
        out = np.zeros(2, i32)
        for index in np.ndindex(2, 3, 4):
            fn(np.array(index, i32), np.array([2, 3, 4], i32), np.array([1, 4], i32), out)
            assert values[tuple(int(i) for i in out)] == expected[index]
