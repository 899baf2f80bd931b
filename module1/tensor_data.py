"""Task 1.1 and 1.2: strided storage and broadcasting.

A tensor's numbers live in one flat ``storage`` array of float64 (the default) or
float32 (:data:`DTYPES`). Its ``shape`` says how
many entries each dimension has; its ``strides`` say how far apart in storage two
neighbours along each dimension are. The entry at multi-index ``(i0, i1, ...)`` lives at
``storage[i0 * strides[0] + i1 * strides[1] + ...]``. Changing only shape and strides
gives a new *view* of the same numbers: a permutation (transpose) copies nothing.

The index functions below use only integer arithmetic on NumPy arrays and plain loops,
the subset of Python that Numba compiles: stage 2 jits these same functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from module0.errors import MiniTorchError

Storage = npt.NDArray[np.float64]
Index = npt.NDArray[np.int32]
OutIndex = npt.NDArray[np.int32]
Shape = npt.NDArray[np.int32]
Strides = npt.NDArray[np.int32]
UserIndex = Sequence[int]
UserShape = Sequence[int]
UserStrides = Sequence[int]


class ShapeError(MiniTorchError, ValueError):
    """Shapes that do not fit together; the message names them."""


class IndexingError(MiniTorchError, IndexError):
    """An index outside a tensor's shape, or with the wrong number of dimensions."""


# ## Task 1.1: strides and indexing


def strides_from_shape(shape: UserShape) -> tuple[int, ...]:
    """The contiguous (row-major) strides of ``shape``: the last dimension has stride 1,
    each earlier one the product of the sizes after it. ``(2, 3, 4) -> (12, 4, 1)``."""
    # BEGIN SOLUTION 1.1
    strides = [1] * len(shape)
    for dim in range(len(shape) - 2, -1, -1):
        strides[dim] = strides[dim + 1] * shape[dim + 1]
    return tuple(strides)
    # END SOLUTION


def index_to_position(index: Index, strides: Strides) -> int:
    """The storage position of multi-index ``index``: ``sum(index[d] * strides[d])``."""
    # BEGIN SOLUTION 1.1
    position = 0
    for dim in range(len(index)):
        position += index[dim] * strides[dim]
    return position
    # END SOLUTION


def to_index(ordinal: int, shape: Shape, out_index: OutIndex) -> None:
    """Write into ``out_index`` the multi-index of the ``ordinal``-th entry of a
    contiguous tensor of ``shape`` (row-major order; the inverse of enumerating
    ``indices()``). ``ordinal`` must be in ``[0, size)``."""
    # BEGIN SOLUTION 1.1
    rest = ordinal
    for dim in range(len(shape) - 1, -1, -1):
        out_index[dim] = rest % shape[dim]
        rest = rest // shape[dim]
    # END SOLUTION


# ## Task 1.2: broadcasting


def shape_broadcast(shape1: UserShape, shape2: UserShape) -> tuple[int, ...]:
    """The shape two tensors broadcast to, by NumPy's rules: align the shapes on the
    right; along each dimension the sizes must be equal or one of them 1 (a missing
    dimension counts as 1); the result takes the size that is not 1 (so 1 against 0
    gives 0, an empty dimension). ShapeError names both shapes otherwise."""
    # BEGIN SOLUTION 1.2
    ndim = max(len(shape1), len(shape2))
    padded1 = (1,) * (ndim - len(shape1)) + tuple(shape1)
    padded2 = (1,) * (ndim - len(shape2)) + tuple(shape2)
    result = []
    for a, b in zip(padded1, padded2, strict=True):
        if a != b and a != 1 and b != 1:
            raise ShapeError(
                f"shapes {tuple(shape1)} and {tuple(shape2)} do not broadcast: "
                f"sizes {a} and {b} meet in one dimension"
            )
        result.append(b if a == 1 else a)
    return tuple(result)
    # END SOLUTION


def broadcast_index(big_index: Index, big_shape: Shape, shape: Shape, out_index: OutIndex) -> None:
    """Map ``big_index`` (an index into the broadcast shape ``big_shape``) to the index
    of the entry it reads in a tensor of the smaller ``shape``, written to ``out_index``:
    dimensions are aligned on the right, and a dimension of size 1 always reads entry 0.
    """
    # BEGIN SOLUTION 1.2
    offset = len(big_shape) - len(shape)
    for dim in range(len(shape)):
        out_index[dim] = big_index[dim + offset] if shape[dim] > 1 else 0
    # END SOLUTION


# ## Task 1.6: basic indexing as a view

BasicKey = Sequence[object]
"""A normalised basic index, one entry per item of the key (see :func:`index_view`)."""


def index_view(
    shape: UserShape, strides: UserStrides, key: BasicKey
) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """``(offset, shape, strides)`` of the view that the basic index ``key`` selects of
    a tensor with ``shape`` and ``strides``: ``offset`` is the storage position of the
    view's first entry (its index ``(0, 0, ...)``), relative to the tensor's own.

    ``key`` is already checked and normalised: one entry per dimension of the tensor,
    each ``int`` (in ``[0, size)``: the dimension is dropped), or a ``slice`` with
    non-negative ``start``, ``stop`` and a positive ``step`` (``slice.indices`` of the
    size: the dimension keeps ``len(range(start, stop, step))`` entries, ``step`` times
    as far apart), plus ``None`` entries anywhere, which consume no dimension and insert
    one of size 1 (its stride does not matter: use 0). Nothing is copied: the view reads
    the same storage from ``offset`` on.
    """
    # BEGIN SOLUTION 1.6
    offset = 0
    out_shape: list[int] = []
    out_strides: list[int] = []
    dim = 0
    for item in key:
        if item is None:
            out_shape.append(1)
            out_strides.append(0)
            continue
        if isinstance(item, slice):
            start, stop, step = item.start, item.stop, item.step
            offset += start * strides[dim]
            out_shape.append(len(range(start, stop, step)))
            out_strides.append(strides[dim] * step)
        else:
            offset += int(item) * strides[dim]  # type: ignore[call-overload]
        dim += 1
    return offset, tuple(out_shape), tuple(out_strides)
    # END SOLUTION


# ## TensorData


def is_device_array(storage: object) -> bool:
    """True for an array in GPU memory (a Numba CUDA device array, stage 3), which
    TensorData keeps as it is; everything else becomes a NumPy array. Duck-typed, so
    this stage needs no GPU library: a device array is what copies itself to the host."""
    return not isinstance(storage, np.ndarray) and hasattr(storage, "copy_to_host")


float64 = np.dtype(np.float64)
float32 = np.dtype(np.float32)
DTYPES = (float64, float32)
"""The dtypes a storage can have: float64, the default (gradient checks need its
precision), and float32 (half the memory and twice the numbers per vector instruction;
the only fast dtype on most GPUs)."""

storage_only: dict[np.dtype, str] = {}
"""Dtypes a tensor may be stored in but no operation computes in, each with the advice
its errors give: a later stage registers its half-precision types here (stage 6's
float16 and bfloat16, computed in float32 under its ``autocast``)."""


_LAYOUTS: dict[
    tuple[object, object, object],
    tuple[tuple[int, ...], tuple[int, ...], Shape, Strides, int, int],
] = {}
"""(strides rule, shape, strides or None) -> what :func:`_view_layout` gives. Made once
per layout: the checks and the two int32 arrays took 2 of the 2.5 us of a
``TensorData``, and every operation makes one or more."""


def _view_layout(
    shape: UserShape, strides: UserStrides | None
) -> tuple[tuple[int, ...], tuple[int, ...], Shape, Strides, int, int]:
    """``(shape, strides, both as int32 arrays, size, values of storage needed)`` of a
    view, checked: ShapeError for a negative size or strides of another length."""
    exact = tuple(map(int, shape))
    if exact and min(exact) < 0:
        raise ShapeError(f"a shape cannot have a negative size: {exact}")
    size = math.prod(exact)
    if strides is None:  # row-major: exactly `size` values needed
        steps = tuple(map(int, strides_from_shape(exact)))
        needed = size
    else:
        steps = tuple(map(int, strides))
        if len(steps) != len(exact):
            raise ShapeError(f"strides {steps} do not match shape {exact}")
        extent = sum((s - 1) * st for s, st in zip(exact, steps, strict=True))
        needed = 1 + extent if size else 0
    arrays = np.array(exact, dtype=np.int32), np.array(steps, dtype=np.int32)
    return exact, steps, *arrays, size, needed


def _layout(
    shape: UserShape, strides: UserStrides | None
) -> tuple[tuple[int, ...], tuple[int, ...], Shape, Strides, int, int]:
    """:func:`_view_layout`, from :data:`_LAYOUTS` after its first use. The strides rule
    is part of the key (a graded check may swap ``strides_from_shape``); a list shape
    or strides (unhashable) is checked every time."""
    try:
        key = (strides_from_shape, shape, strides)
        layout = _LAYOUTS.get(key)
    except TypeError:
        return _view_layout(shape, strides)
    if layout is None:
        layout = _view_layout(shape, strides)
        if len(_LAYOUTS) < 4096:
            _LAYOUTS[key] = layout
    return layout


def as_dtype(dtype: object) -> np.dtype:
    """``dtype`` (``np.float32``, ``"float32"``, a NumPy dtype, ``float``) as one of
    :data:`DTYPES` or :data:`storage_only`; TypeError naming it otherwise."""
    try:
        found = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        found = None
    if found not in DTYPES and found not in storage_only:
        kinds = ", ".join(str(d) for d in (*DTYPES, *storage_only))
        raise TypeError(f"tensors hold {kinds}; not {dtype!r}")
    return found


class TensorData:
    """A flat float64 (or float32) storage viewed through a shape and strides.

    A NumPy storage of either dtype is kept as it is (no copy when it is contiguous);
    anything else (lists, ints, bools) becomes float64.
    """

    def __init__(
        self,
        storage: Sequence[float] | Storage,
        shape: UserShape,
        strides: UserStrides | None = None,
    ) -> None:
        if is_device_array(storage):  # a GPU array (stage 3): kept where it is
            if storage.ndim != 1:  # type: ignore[union-attr]
                raise ShapeError(f"a device storage must be 1-D, got {storage.ndim} dimensions")  # type: ignore[union-attr]
            self._storage: Storage = storage  # type: ignore[assignment]
        else:
            array = np.ascontiguousarray(storage)
            if array.dtype.char not in "df" and array.dtype not in storage_only:
                array = array.astype(np.float64)  # float64, float32 and storage-only kept
            self._storage = array if array.ndim == 1 else array.reshape(-1)
        self.offset = 0
        self._set_layout(shape, strides)

    def _set_layout(self, shape: UserShape, strides: UserStrides | None) -> None:
        """Shape, strides, index arrays, size and dims from :func:`_layout`; ShapeError
        when the storage is too small for them."""
        layout = _layout(shape, strides)
        self.shape, self.strides, self._shape, self._strides, self.size, needed = layout
        if needed > len(self._storage):
            raise ShapeError(
                f"storage of {len(self._storage)} values is too small for shape {self.shape} "
                f"with strides {self.strides}"
            )
        self.dims = len(self.shape)

    @classmethod
    def contiguous(cls, storage: Storage, shape: tuple[int, ...]) -> TensorData:
        """A row-major TensorData over a new 1-D ``storage`` of exactly the shape's size
        (float64 or float32, on the host or the device): what a backend allocates for a
        result. ``__init__``'s conversion of the storage is skipped, and the layout comes
        from the cache ``__init__`` uses (:func:`_layout`): a shape's strides and index
        arrays are made once and shared by every TensorData of that shape (kernels only
        read them)."""
        self = cls.__new__(cls)
        self._storage = storage
        self.offset = 0
        self.shape, self.strides, self._shape, self._strides, self.size, _ = _layout(shape, None)
        self.dims = len(self.shape)
        return self

    @classmethod
    def view(cls, storage: Storage, shape: tuple[int, ...], strides: tuple[int, ...]) -> TensorData:
        """Another view (``shape``, ``strides``) of an existing TensorData's ``storage``,
        without ``__init__``'s conversion of the storage: what ``permute`` gives, for the
        code that makes one per operation. The storage must hold the view (checked)."""
        self = cls.__new__(cls)
        self._storage = storage
        self.offset = 0
        self._set_layout(shape, strides)
        return self

    def sliced(self, offset: int, shape: UserShape, strides: UserStrides) -> TensorData:
        """The view ``(shape, strides)`` whose first entry is at storage position
        ``offset`` of this one (what :func:`index_view` computes): its storage is this
        storage from ``offset`` on, cut to the entries the view reaches (a NumPy or
        device-array slice: shared, not copied), so a contiguous view's storage holds
        exactly its entries. ``offset`` (counted from the first tensor of the chain) is
        kept for display."""
        exact, steps, *_, size, needed = _layout(tuple(shape), tuple(strides))
        if not size:  # an empty view reads nothing: its offset may lie past the end
            offset = needed = 0
        end = offset + needed
        if offset < 0 or end > len(self._storage):
            raise ShapeError(
                f"a view at offset {offset} with shape {exact} and strides {steps} "
                f"reaches past a storage of {len(self._storage)} values"
            )
        view = TensorData.view(self._storage[offset:end], exact, steps)
        view.offset = self.offset + offset
        return view

    def is_contiguous(self) -> bool:
        """True when the strides are the row-major strides of the shape (dimensions of
        size 1 may have any stride), so storage order is index order."""
        # BEGIN SOLUTION 1.1
        expected = 1
        for dim in range(self.dims - 1, -1, -1):
            if self.shape[dim] != 1 and self.strides[dim] != expected:
                return False
            expected *= self.shape[dim]
        return True
        # END SOLUTION

    def index(self, index: int | UserIndex) -> int:
        """The storage position of a user index; IndexingError names the index and shape."""
        idx = (index,) if isinstance(index, int) else tuple(index)
        if len(idx) != self.dims:
            raise IndexingError(
                f"index {idx} has {len(idx)} dimensions, shape {self.shape} has {self.dims}"
            )
        for i, s in zip(idx, self.shape, strict=True):
            if not 0 <= i < s:
                raise IndexingError(f"index {idx} is out of range for shape {self.shape}")
        return index_to_position(np.array(idx, dtype=np.int32), self._strides)

    def indices(self) -> Iterator[tuple[int, ...]]:
        """Every multi-index of the shape, in row-major order."""
        # BEGIN SOLUTION 1.1
        out = np.zeros(self.dims, dtype=np.int32)
        for ordinal in range(self.size):
            to_index(ordinal, self._shape, out)
            yield tuple(int(i) for i in out)
        # END SOLUTION

    @property
    def dtype(self) -> np.dtype:
        """The storage's dtype: float64 or float32."""
        return self._storage.dtype

    def host_storage(self) -> Storage:
        """The storage as a NumPy array: the storage itself, or a copy of a device array
        (read-only use: writing to the copy changes nothing)."""
        if is_device_array(self._storage):
            return self._storage.copy_to_host()  # type: ignore[attr-defined]
        return self._storage

    def fill(self, value: float, position: int | None = None) -> None:
        """Set one storage position (or, with ``position`` None, every one) to ``value``,
        on the host or on the device."""
        if is_device_array(self._storage):
            host = self._storage.copy_to_host()  # type: ignore[attr-defined]
            host[slice(None) if position is None else position] = value
            self._storage.copy_to_device(host)  # type: ignore[attr-defined]
        else:
            self._storage[slice(None) if position is None else position] = value

    def get(self, key: UserIndex) -> float:
        position = self.index(key)
        if is_device_array(self._storage):
            return float(self._storage[position : position + 1].copy_to_host()[0])  # type: ignore[attr-defined]
        return float(self._storage[position])

    def set(self, key: UserIndex, value: float) -> None:
        self.fill(value, self.index(key))

    def permute(self, *order: int) -> TensorData:
        """A view with the dimensions reordered: dimension ``d`` of the result is
        dimension ``order[d]`` of this one. Shares the storage (no copy)."""
        if sorted(order) != list(range(self.dims)):
            raise ShapeError(
                f"permute{tuple(order)} is not a permutation of the {self.dims} dimensions "
                f"of shape {self.shape}"
            )
        # BEGIN SOLUTION 1.1
        view = TensorData(
            self._storage,
            tuple(self.shape[d] for d in order),
            tuple(self.strides[d] for d in order),
        )
        # END SOLUTION
        view.offset = self.offset
        return view

    def tuple(self) -> tuple[Storage, tuple[int, ...], tuple[int, ...]]:
        """``(storage, shape, strides)``, what the backend kernels take."""
        return self._storage, self.shape, self.strides

    def to_string(self) -> str:
        return f"TensorData(shape={self.shape}, strides={self.strides}, offset={self.offset})"

    def __repr__(self) -> str:
        return self.to_string()
