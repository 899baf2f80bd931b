"""Task 1.6: indexing and slicing with autodiff (``index_view`` in ``tensor_data.py``,
``tensor_gather`` and ``tensor_scatter_add`` in ``tensor_ops.py``; the rest of
``module1/indexing.py`` is given).

Oracles: NumPy's own indexing (values, the view's offset and strides in bytes, which
storage it shares), ``np.add.at`` for repeated indices, central differences for every
backward, and the adjoint identity <gather(x), y> = <x, scatter_add(y)> (Hypothesis).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from module0.autodiff import no_grad
from module1.grad_check import grad_check
from module1.indexing import ModifiedError, parse_key
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import IndexingError, ShapeError, TensorData, index_view
from module1.tensor_ops import SimpleBackend, tensor_gather, tensor_scatter_add

pytestmark = pytest.mark.task1_6


def t(values: Any, dtype: type = np.float64, grad: bool = False) -> Tensor:
    out = from_numpy(np.array(values, dtype=dtype), SimpleBackend)
    return out.requires_grad_() if grad else out


def permuted(x: np.ndarray, order: tuple[int, ...]) -> Tensor:
    """A tensor of ``x``'s values whose storage holds them in ``order`` (not contiguous
    unless ``order`` is the identity)."""
    base = np.ascontiguousarray(np.transpose(x, order))
    strides = [0] * x.ndim
    for position, dim in enumerate(order):
        strides[dim] = base.strides[position] // base.itemsize
    return Tensor(TensorData(base.reshape(-1).copy(), x.shape, tuple(strides)))


# -- basic keys: views -----------------------------------------------------------------


@st.composite
def basic_keys(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], tuple[Any, ...]]:
    """A shape, a storage order, and a basic key: ints (negative too), slices with
    positive steps and bounds past the ends, None, and at most one Ellipsis."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    order = tuple(draw(st.permutations(range(len(shape)))))
    key: list[Any] = []
    for size in shape:
        kind = draw(st.sampled_from(["int", "slice", "slice", "none"]))
        if kind == "int":
            key.append(draw(st.integers(-size, size - 1)))
        else:
            if kind == "none":
                key.append(None)
            start = draw(st.none() | st.integers(-size - 2, size + 2))
            stop = draw(st.none() | st.integers(-size - 2, size + 2))
            step = draw(st.none() | st.integers(1, 3))
            key.append(slice(start, stop, step))
    if draw(st.booleans()):  # an ellipsis standing for a run of full slices (or none)
        start = draw(st.integers(0, len(key)))
        end = start
        while end < len(key) and key[end] == slice(None) and draw(st.booleans()):
            end += 1
        key[start:end] = [Ellipsis]
    return shape, order, tuple(key)


@given(basic_keys())
@settings(max_examples=150)
def test_basic_indexing_is_numpys_view(case: tuple[Any, ...]) -> None:
    """Values, shape, strides and offset as NumPy's view of the same layout has them,
    and the storage shared (writing through the original shows in the view)."""
    shape, order, key = case
    x = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape)
    tensor = permuted(x, order)
    view = tensor[key]
    want = x[key]
    assert view.shape == want.shape, (key, view.shape, want.shape)
    np.testing.assert_array_equal(view.to_numpy(), want)
    # NumPy's view of the same storage: strides in entries, offset from the first byte.
    storage = tensor._tensor._storage
    steps = tuple(s * storage.itemsize for s in tensor._tensor.strides)
    whole = key if any(k is Ellipsis for k in key) else (*key, Ellipsis)  # a 0-d view too
    mirror = np.lib.stride_tricks.as_strided(storage, shape, steps)[whole]
    if mirror.size:
        want_offset = (mirror.__array_interface__["data"][0] - storage.ctypes.data) // 8
        assert view._tensor.offset == want_offset, key
        have = tuple(s for s, n in zip(view._tensor.strides, view.shape, strict=True) if n > 1)
        numpy_has = tuple(
            s // 8 for s, n in zip(mirror.strides, mirror.shape, strict=True) if n > 1
        )
        assert have == numpy_has, (key, view._tensor.strides, mirror.strides)
        assert np.shares_memory(view._tensor._storage, storage)
        with no_grad():
            tensor[key] = -7.0
        assert (view.to_numpy() == -7.0).all(), "the view does not share the storage"


def test_index_view_on_the_lesson_example() -> None:
    """A (3, 4) tensor: row 1 starts at 4; column 2 at 2 with stride 4; every other
    entry of row 2 from column 1 at 9 with stride 2; None adds a dimension."""
    strides = (4, 1)
    assert index_view((3, 4), strides, (1, slice(0, 4, 1))) == (4, (4,), (1,))
    assert index_view((3, 4), strides, (slice(0, 3, 1), 2)) == (2, (3,), (4,))
    assert index_view((3, 4), strides, (2, slice(1, 4, 2))) == (9, (2,), (2,))
    offset, shape, steps = index_view((3, 4), strides, (None, 1, slice(3, 1, 1)))
    assert (offset, shape) == (7, (1, 0)) and steps[1] == 1
    # A transposed layout: strides (1, 3) for shape (4, 3).
    assert index_view((4, 3), (1, 3), (slice(1, 3, 1), 2)) == (7, (2,), (1,))


def test_a_view_of_a_view_counts_the_offset_from_the_first_storage() -> None:
    x = t(np.arange(20.0).reshape(4, 5))
    inner = x[1:][:, 2:][1]
    assert inner.tolist() == [12.0, 13.0, 14.0]
    assert inner._tensor.offset == 12 and inner._tensor.strides == (1,)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_slices_and_ints_pass_their_gradient_back_in_place(dtype: type) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 6)).astype(dtype)
    for key in [(slice(None), -1), (slice(1, 5, 2),), (1, slice(1, 5, 2)), (None, Ellipsis, 0)]:
        leaf = t(x, dtype, grad=True)
        out = leaf[key]
        upstream = rng.normal(size=out.shape).astype(dtype)
        out.backward(t(upstream, dtype))
        want = np.zeros_like(x)
        want[key] = upstream
        assert leaf.grad is not None and leaf.grad.dtype == dtype
        np.testing.assert_allclose(leaf.grad.to_numpy(), want, rtol=1e-6, err_msg=str(key))
    grad_check(lambda a: (a[:, 1::2] * a[:, 1::2]).sum(), t(x.astype(np.float64), grad=True))


# -- advanced keys: gathers --------------------------------------------------------------


ADVANCED: list[Any] = [
    ([0, 1, 1, -1, 0],),
    (slice(None), [2, 2, -1]),
    ([[0, 1], [1, 1]], slice(1, 3)),
    ([0, 1], slice(None), [2, 0]),  # separated: the index dimension goes first
    (slice(None), [0, 2], [1, 1]),  # adjacent: it stays in place
    (np.array([True, False]),),
    (1, np.array([True, False, True]), slice(None, None, 2)),
    (Ellipsis, None, [1]),
]


@pytest.mark.parametrize("key", ADVANCED, ids=lambda k: repr(k)[:40])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_advanced_indexing_is_numpys_and_its_backward_adds_repeats(key: Any, dtype: type) -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3, 4)).astype(dtype)
    leaf = t(x, dtype, grad=True)
    out = leaf[key]
    want = x[key]
    assert out.shape == want.shape and out.dtype == dtype
    np.testing.assert_array_equal(out.to_numpy(), want, err_msg=f"x[{key}] against NumPy's")
    upstream = rng.normal(size=out.shape).astype(dtype)
    out.backward(t(upstream, dtype))
    expected = np.zeros_like(x)
    np.add.at(expected, key, upstream)  # repeated entries get the sum
    assert leaf.grad is not None
    np.testing.assert_allclose(
        leaf.grad.to_numpy(), expected, rtol=1e-6,
        err_msg=f"x.grad after x[{key}].backward(g), against np.add.at(zeros, key, g): "
        "an entry picked twice gets both gradients",
    )  # fmt: skip


def test_repeated_indices_accumulate_against_central_differences() -> None:
    idx = [2, 0, 2, 2]
    grad_check(lambda a: (a[idx] * a[idx]).sum(), t([0.5, -1.0, 2.0], grad=True))
    grad_check(
        lambda a: a[np.array([True, False, True])].exp().sum(), t([0.5, -1.0, 2.0], grad=True)
    )


def test_tensors_index_with_whole_numbers_and_masks_come_from_bool() -> None:
    x = t(np.arange(6.0).reshape(2, 3))
    assert x[t([1.0, 0.0, 1.0])].tolist() == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert x[(x > 2.5).bool()].tolist() == [3.0, 4.0, 5.0]
    with pytest.raises(IndexingError, match=r"ambiguous .* \(x > 2\).bool\(\)"):
        x[x > 2.5]  # a comparison's 0.0 / 1.0 would read as the indices 0 and 1
    assert x[:, t([[2.0]])].shape == (2, 1, 1)


@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    picks=st.lists(st.integers(0, 10**6), min_size=0, max_size=12),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=60)
def test_gather_and_scatter_add_are_adjoint(shape: list[int], picks: list[int], seed: int) -> None:
    """<gather(x, o), y> == <x, scatter_add(y, o)> for any ordinals o (repeats too), any
    layout of x and y: the kernels called directly."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    ordinals = np.array([p % size for p in picks], dtype=np.int64)
    x = rng.normal(size=shape)
    order = tuple(int(i) for i in rng.permutation(len(shape)))
    xt = permuted(x, order)
    gathered = np.full(len(ordinals), 555.0)
    tensor_gather(gathered, *xt.tuple_arrays(), ordinals)
    np.testing.assert_array_equal(gathered, x.reshape(-1)[ordinals])
    y = rng.normal(size=(len(ordinals), 1))
    yt = permuted(y, (1, 0))  # a column stored as a row: strides (1, n)
    scattered = np.zeros(size)
    tensor_scatter_add(scattered, *yt.tuple_arrays(), ordinals)
    want = np.zeros(size)
    np.add.at(want, ordinals, y.reshape(-1))
    np.testing.assert_allclose(scattered, want, atol=1e-12)
    np.testing.assert_allclose(gathered @ y.reshape(-1), x.reshape(-1) @ scattered, atol=1e-9)


# -- assignment --------------------------------------------------------------------------


def test_assignment_writes_like_numpy_with_broadcasting() -> None:
    x = np.arange(24.0).reshape(4, 6)
    cases: list[tuple[Any, Any]] = [
        ((slice(1, 5, 2),), 0.0),
        ((slice(None), 2), np.array([9.0, 8.0, 7.0, 6.0])),
        ((1, slice(None)), np.array([1.0])),
        (([0, 3], slice(None, 2)), np.array([[-1.0, -2.0]])),
        ((np.arange(24).reshape(4, 6) % 5 == 0,), -5.0),
    ]
    for key, value in cases:
        tensor, array = permuted(x, (1, 0)), x.copy()
        tensor[key] = value if isinstance(value, float) else t(value)
        array[key] = value
        np.testing.assert_array_equal(tensor.to_numpy(), array, err_msg=str(key))
    with pytest.raises(ShapeError, match=r"\(3,\) does not broadcast to the \(4,\)"):
        permuted(x, (0, 1))[:, 0] = t([1.0, 2.0, 3.0])


def test_assignment_is_in_the_graph() -> None:
    """x[1:5:2] = 0 on a tensor computed from a leaf: those entries no longer depend on
    it; a tensor value assigned gets the gradient of the entries it filled."""
    x = t(np.arange(1.0, 7.0), grad=True)
    y = x * 1.0
    y[1:5:2] = 0.0
    (y * y).sum().backward()
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.to_numpy(), [2.0, 0.0, 6.0, 0.0, 10.0, 12.0])
    v = t([3.0], grad=True)
    z = t(np.zeros(4))
    z[[0, 2]] = v
    (z * t([1.0, 10.0, 100.0, 1000.0])).sum().backward()
    assert v.grad is not None and v.grad.tolist() == [101.0]


def test_a_graph_that_saved_the_old_values_refuses_to_backpropagate() -> None:
    x = t([1.0, 2.0, 3.0], grad=True)
    y = x * 2.0
    z = (y * y).sum()  # Mul saved y
    y[0] = 0.0
    with pytest.raises(ModifiedError, match="assigned to"):
        z.backward()
    used = y + 1.0  # Add saves nothing, but it used y before the assignment
    y[1] = 0.0
    with pytest.raises(ModifiedError, match="input of shape"):
        used.sum().backward()
    fine = (y * 3.0).sum()  # made after the assignments: nothing stale
    fine.backward()
    assert x.grad is not None and x.grad.tolist() == [0.0, 0.0, 6.0]


# -- the views and selections people reach for next ----------------------------------------


def test_squeeze_unsqueeze_flatten_expand_as_numpy_with_gradients() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 1, 3))
    leaf = t(x, grad=True)
    assert leaf.unsqueeze(0).shape == (1, 2, 1, 3) and leaf.unsqueeze(-1).shape == (2, 1, 3, 1)
    np.testing.assert_array_equal(leaf.squeeze().to_numpy(), x.squeeze())
    assert leaf.squeeze(0).shape == (2, 1, 3) and leaf.squeeze(1).shape == (2, 3)
    np.testing.assert_array_equal(leaf.flatten().to_numpy(), x.reshape(-1))
    assert leaf.flatten(1).shape == (2, 3)
    wide = leaf.expand(4, 2, 5, 3)
    np.testing.assert_array_equal(wide.to_numpy(), np.broadcast_to(x, (4, 2, 5, 3)))
    assert wide._tensor.strides[0] == 0 and np.shares_memory(
        wide._tensor._storage, leaf._tensor._storage
    )
    grad_check(lambda a: (a.expand(4, 2, 5, 3) * a.unsqueeze(0).expand(4, -1, 5, -1)).sum(), leaf)
    with pytest.raises(ShapeError, match="size 2 of dimension 0 cannot become 3"):
        leaf.expand(3, 1, 3)


def test_gather_and_index_select_as_pytorch_defines_them() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 4))
    index = np.array([[0, 0, 3], [1, 2, 1]])
    leaf = t(x, grad=True)
    got = leaf.gather(1, index[:, :3])
    np.testing.assert_array_equal(got.to_numpy(), np.take_along_axis(x[:2], index, 1))
    rows = leaf.gather(0, np.array([[2, 0, 1, 2]]))
    np.testing.assert_array_equal(rows.to_numpy(), x[[2, 0, 1, 2], [0, 1, 2, 3]][None])
    selected = leaf.index_select(1, [3, 0, 3])
    np.testing.assert_array_equal(selected.to_numpy(), x[:, [3, 0, 3]])
    grad_check(lambda a: (a.gather(1, index) ** 2).sum() + a.index_select(0, [2, 2]).sum(), leaf)
    with pytest.raises(IndexingError, match="out of range for size 4"):
        leaf.gather(1, np.array([[4]]))


def test_element_access_is_a_zero_d_view_and_item_gives_the_float() -> None:
    x = t([[1.0, 2.0], [3.0, 4.0]])
    entry = x[1, 0]
    assert entry.shape == () and entry.item() == 3.0 and float(entry) == 3.0
    x[1, 0] = 30.0
    assert entry.item() == 30.0  # a view: it sees the write
    row = x[1]  # one int for two dimensions: a basic key (index_view)
    assert row.tolist() == [30.0, 4.0] and row._tensor.offset == 2
    assert parse_key((2, 2), (1, 0)).basic == (1, 0)
