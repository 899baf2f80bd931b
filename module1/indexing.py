"""Indexing and slicing tensors, with autodiff: ``x[key]`` and ``x[key] = value``.

Two kinds of key, as in NumPy and PyTorch:

- **basic** (ints, slices with a positive step, ``None``, ``...``): the result is a
  *view* sharing the tensor's storage; its offset, shape and strides come from
  :func:`~module1.tensor_data.index_view` (task 1.6). The backward puts the gradient
  back in place in a tensor of zeros.
- **advanced** (integer lists, arrays or tensors; boolean masks as NumPy arrays or
  :meth:`Tensor.bool`): the result is a copy, a *gather* of the entries the key names,
  found as row-major entry numbers ("ordinals"); the backward is its adjoint, a
  *scatter-add*, so an entry picked twice gets both gradients (task 1.6's kernels).

Assignment writes in place. It is refused on a leaf that requires a gradient (outside
``no_grad``) and on a view of a tensor in a graph; elsewhere it is recorded in the
graph (the tensor's history becomes the assignment, as PyTorch's). A graph that saved
the old values for its backward finds out at ``backward()``: every assignment stamps its
storage, and a node whose saved tensors were stamped after it was made raises
:class:`ModifiedError` (PyTorch's version counter), as does a node whose input was
assigned to (and so became a new node) after it.

Also here: ``gather`` and ``index_select`` (PyTorch's), and the views people reach for
next (``unsqueeze``, ``squeeze``, ``flatten``, ``expand``), each once.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import TYPE_CHECKING, Any

import numpy as np

from module0.autodiff import Context, grad_mode, next_unique_id
from module0.errors import MiniTorchError
from module1.tensor_data import IndexingError, ShapeError, index_view, is_device_array
from module1.tensor_functions import Function, Permute, View

if TYPE_CHECKING:
    from module1.tensor import Tensor


class ModifiedError(MiniTorchError, RuntimeError):
    """A tensor that a graph saved for its backward was assigned to afterwards."""


# ## Keys


@dataclass(frozen=True)
class Key:
    """A parsed key: ``basic`` (one normalised entry per item, for ``index_view``) for
    a basic key, else ``ordinals`` (the int64 row-major entry numbers the key selects,
    in the result's shape)."""

    basic: tuple[Any, ...] | None
    ordinals: np.ndarray | None
    text: str
    """The key as the user wrote it, for messages."""


def _is_int(item: object) -> bool:
    return isinstance(item, Integral) and not isinstance(item, bool | np.bool_)


def _key_text(key: object) -> str:
    items = key if isinstance(key, tuple) else (key,)
    parts = []
    for item in items:
        if isinstance(item, slice):
            text = ":".join("" if v is None else str(v) for v in (item.start, item.stop))
            parts.append(text + ("" if item.step is None else f":{item.step}"))
        elif item is Ellipsis:
            parts.append("...")
        elif isinstance(item, np.ndarray) or hasattr(item, "_tensor"):
            parts.append(f"<{type(item).__name__} of shape {tuple(item.shape)}>")
        else:
            parts.append(repr(item))
    return ", ".join(parts)


def _as_index_array(item: Any, text: str, like: tuple[int, ...] = ()) -> np.ndarray:
    """A Tensor (whole numbers) or a list as a NumPy index array. A tensor of 0s and 1s
    shaped like the dimensions it would mask (``like``) is refused as ambiguous:
    ``x[x > 2]`` means a mask, but comparisons give float tensors of 0.0 and 1.0, which
    would read as the indices 0 and 1."""
    if hasattr(item, "_tensor"):
        values = item.to_numpy()
        if values.ndim and values.shape == like[: values.ndim] and np.isin(values, (0, 1)).all():
            raise IndexingError(
                f"x[{text}]: a tensor of 0s and 1s shaped like x's dimensions is ambiguous "
                "(comparisons such as x > 2 give float tensors): for a mask pass "
                "(x > 2).bool(); for the indices 0 and 1 pass a list or an int array"
            )
        whole = values.astype(np.int64)
        if not np.array_equal(whole, values):
            raise IndexingError(
                f"x[{text}]: a tensor used as an index must hold whole numbers; for a "
                "mask pass a boolean array, e.g. x[(x > 0).bool()]"
            )
        return whole
    array = np.asarray(item)
    if array.dtype == object or not (array.dtype.kind in "iub" or array.size == 0):
        raise IndexingError(f"x[{text}]: an index array must hold ints or bools, not {array.dtype}")
    return array if array.dtype.kind == "b" else array.astype(np.int64)


def parse_key(shape: tuple[int, ...], key: Any) -> Key:
    """``key`` checked against ``shape``: IndexingError names the dimension, the index
    and the size (or what is wrong with the key)."""
    text = _key_text(key)
    items = key if isinstance(key, tuple) else (key,)
    advanced = any(
        isinstance(i, list | np.ndarray | bool | np.bool_) or hasattr(i, "_tensor") for i in items
    )
    if advanced:
        return Key(None, _ordinals(shape, items, text), text)
    for item in items:
        if not (_is_int(item) or item is None or item is Ellipsis or isinstance(item, slice)):
            raise IndexingError(
                f"x[{text}]: cannot index with {type(item).__name__} {item!r}; use ints, "
                "slices, None, ..., integer lists or tensors, or boolean arrays"
            )
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexingError(f"x[{text}]: an index can only have one ellipsis (...)")
    if used > len(shape):
        raise IndexingError(
            f"x[{text}]: too many indices for a tensor of shape {shape}: {used} given, "
            f"{len(shape)} dimensions"
        )
    expanded: list[Any] = []
    for item in items:
        if item is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - used))
        else:
            expanded.append(item)
    expanded.extend([slice(None)] * (len(shape) - sum(1 for i in expanded if i is not None)))
    basic: list[Any] = []
    dim = 0
    for item in expanded:
        if item is None:
            basic.append(None)
            continue
        size = shape[dim]
        if isinstance(item, slice):
            if item.step is not None and not (_is_int(item.step) and item.step > 0):
                raise IndexingError(
                    f"x[{text}]: the step along dimension {dim} is {item.step!r}; steps "
                    "must be positive ints"
                    + (
                        " (flip a tensor with an index list instead)"
                        if _is_int(item.step) and item.step < 0
                        else ""
                    )
                )
            for bound in (item.start, item.stop):
                if bound is not None and not _is_int(bound):
                    raise IndexingError(f"x[{text}]: slice bounds must be ints, got {bound!r}")
            basic.append(slice(*item.indices(size)))
        else:
            i = int(item)
            if not -size <= i < size:
                raise IndexingError(
                    f"x[{text}]: index {i} is out of range for dimension {dim} of size "
                    f"{size} (shape {shape})"
                )
            basic.append(i + size if i < 0 else i)
        dim += 1
    return Key(tuple(basic), None, text)


def _ordinals(shape: tuple[int, ...], items: Sequence[Any], text: str) -> np.ndarray:
    """The row-major entry numbers that an advanced key selects, in the result's shape.

    NumPy knows the rules of mixing advanced and basic items (where the broadcast index
    dimensions go, what a mask means): index, with the key, one read-only broadcast view
    per dimension holding ``i * (row-major stride)`` along it, and add. Memory and time
    are those of the result (times the dimensions), never of the whole tensor."""
    converted: list[Any] = []
    dim = 0  # the dimension an item starts at (exact before any Ellipsis, as masks are)
    for i in items:
        if isinstance(i, list | np.ndarray | bool | np.bool_) or hasattr(i, "_tensor"):
            converted.append(_as_index_array(i, text, shape[dim:]))
            dim += converted[-1].ndim if converted[-1].dtype == bool else 1
        else:
            converted.append(i)
            dim += 0 if i is None or i is Ellipsis else 1
    ordinals: Any = None
    step = 1
    try:
        for dim in range(len(shape) - 1, -1, -1):
            along = np.arange(shape[dim], dtype=np.int64) * step
            along = along.reshape((-1,) + (1,) * (len(shape) - 1 - dim))
            part = np.broadcast_to(along, shape)[tuple(converted)]
            ordinals = part if ordinals is None else ordinals + part
            step *= shape[dim]
        if ordinals is None:  # a 0-d tensor
            ordinals = np.broadcast_to(np.int64(0), shape)[tuple(converted)]
    except IndexError as error:
        message = str(error).replace("axis", "dimension")  # the course's word for it
        raise IndexingError(f"x[{text}] of a tensor of shape {shape}: {message}") from None
    return np.ascontiguousarray(ordinals, dtype=np.int64)


# ## Reading: views and gathers


def _view(t: Tensor, basic: tuple[Any, ...]) -> Tensor:
    """A constant view of ``t`` through a normalised basic key."""
    offset, shape, strides = index_view(t.shape, t._tensor.strides, basic)
    return t._new(t._tensor.sliced(offset, shape, strides))


class IndexView(Function):
    """``x[key]`` for a basic key: a view (shared storage, computed offset and strides).
    The backward writes the gradient into the same view of a tensor of zeros."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, basic: tuple[Any, ...]) -> Tensor:
        ctx.save_for_backward(a.shape, basic)
        return _view(a, basic)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        shape, basic = ctx.saved_values
        grad = d.zeros(shape)
        d.backend.id_map(d, _view(grad, basic))
        return grad


class Element(Function):
    """``x[i, j, ...]`` with one int per dimension: a 0-d view of one entry, found with
    task 1.1's ``index_to_position`` (so element access works before task 1.6 is done,
    and costs no key parsing); the backward puts the gradient at that entry."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, index: tuple[int, ...]) -> Tensor:
        ctx.save_for_backward(a.shape, index)
        data = a._tensor
        return a._new(data.sliced(data.index(index), (), ()))

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        shape, index = ctx.saved_values
        grad = d.zeros(shape)
        grad._tensor.fill(d.item(), grad._tensor.index(index))
        return grad


def _element_key(shape: tuple[int, ...], key: Any) -> tuple[int, ...] | None:
    """``key`` as a checked index when it is one int per dimension (negative ones
    counted from the end), else None."""
    items = key if isinstance(key, tuple) else (key,)
    if len(items) != len(shape) or not all(_is_int(i) for i in items):
        return None
    index = []
    for item, size in zip(items, shape, strict=True):
        i = int(item)
        if not -size <= i < size:
            return None  # parse_key says what is wrong
        index.append(i + size if i < 0 else i)
    return tuple(index)


class Gather(Function):
    """``x[key]`` for an advanced key: the entries the ordinals name, copied; the
    backward scatter-adds the gradient back (entries named twice get the sum)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, ordinals: np.ndarray) -> Tensor:
        ctx.save_for_backward(a.shape, ordinals)
        return a.backend.gather(a, ordinals)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        shape, ordinals = ctx.saved_values
        return d.backend.scatter_add(d, ordinals, shape)


def getitem(t: Tensor, key: Any) -> Tensor:
    """``t[key]`` (``Tensor.__getitem__``)."""
    index = _element_key(t.shape, key)
    if index is not None:
        return Element.apply(t, index)
    parsed = parse_key(t.shape, key)
    if parsed.basic is not None:
        return IndexView.apply(t, parsed.basic)
    return Gather.apply(t, parsed.ordinals)


# ## Writing: assignment, recorded in the graph


VIEWS: tuple[type[Function], ...] = (IndexView, Element, View, Permute)
"""Functions whose result shares its input's storage."""


class IndexPut(Function):
    """``x[key] = value`` as a graph node: the old ``x`` gets the gradient except where
    the key wrote, ``value`` the gradient of the entries it filled (summed back to its
    shape by autodiff). Neither needs the old values."""

    @staticmethod
    def forward(ctx: Context, old: Tensor, value: Tensor) -> Tensor:  # pragma: no cover
        raise RuntimeError("IndexPut is recorded by setitem, not applied")

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor]:
        shape, ordinals = ctx.saved_values
        keep = np.ones(int(np.prod(shape)), d.dtype)
        keep[ordinals.reshape(-1)] = 0.0
        from module1.tensor import from_numpy

        d_old = d * from_numpy(keep.reshape(shape), d.backend)
        return d_old, d.backend.gather(d, ordinals)


def _positions(t: Tensor, ordinals: np.ndarray) -> np.ndarray:
    """The storage positions of entries given by row-major ordinals."""
    index = np.unravel_index(ordinals, t.shape) if t.shape else ()
    positions = np.zeros(ordinals.shape, np.int64)
    for i, step in zip(index, t._tensor.strides, strict=True):
        positions += i * step
    return positions


def setitem(t: Tensor, key: Any, value: Any) -> None:
    """``t[key] = value`` (``Tensor.__setitem__``): ``value`` (a number or a tensor
    broadcasting to ``t[key]``'s shape) written in place."""
    from module1.tensor import Tensor

    recording = grad_mode.enabled
    if recording and t.history is None and t.requires_grad:
        raise RuntimeError(
            f"x[{_key_text(key)}] = ...: x is a leaf tensor that requires grad, and writing "
            "into it would change what its gradient means; assign under no_grad() (as "
            "an optimizer does) or into a copy (x.detach().contiguous() ... )"
        )
    if recording and t.history is not None and t.history.last_fn in VIEWS:
        raise RuntimeError(
            f"x[{_key_text(key)}] = ...: x is a view ({t.history.last_fn.__name__}) of a "
            "tensor in a graph; assign into the tensor it views instead (base[i, j] = v, "
            "not base[i][j] = v)"
        )
    if isinstance(value, Tensor):
        if value.dtype != t.dtype or value.backend is not t.backend:
            raise TypeError(
                f"x[{_key_text(key)}] = value: value is {value.dtype} on {value.backend!r}, "
                f"x is {t.dtype} on {t.backend!r}; convert it with .to() first"
            )
        v = value
    elif isinstance(value, int | float | np.integer | np.floating):
        v = t.full((), float(value))
    else:
        raise TypeError(f"x[{_key_text(key)}] = value: value must be a number or a Tensor")
    element = _element_key(t.shape, key)
    parsed = Key(None, None, _key_text(key)) if element is not None else parse_key(t.shape, key)
    if element is not None:  # one entry, found with task 1.1's index_to_position
        if v.shape != ():
            raise ShapeError(
                f"x[{parsed.text}] = value: value of shape {v.shape} for one entry; give a "
                "number or a 0-d tensor (.item() or .view() it)"
            )
        t._tensor.fill(v.item(), t._tensor.index(element))
        ordinals: np.ndarray | None = np.array(np.ravel_multi_index(element, t.shape))
    elif parsed.basic is not None:
        target = _view(t, parsed.basic)
        if not _fits(v.shape, target.shape):
            raise ShapeError(
                f"x[{parsed.text}] = value: value of shape {v.shape} does not broadcast to "
                f"the {target.shape} entries selected"
            )
        t.backend.id_map(v.detach(), target)
        ordinals = None
    else:
        ordinals = parsed.ordinals
        assert ordinals is not None
        if not _fits(v.shape, ordinals.shape):
            raise ShapeError(
                f"x[{parsed.text}] = value: value of shape {v.shape} does not broadcast to "
                f"the {ordinals.shape} entries selected"
            )
        values = np.broadcast_to(v.to_numpy(), ordinals.shape)
        positions = _positions(t, ordinals)
        storage = t._tensor._storage
        if is_device_array(storage):
            host = storage.copy_to_host()  # type: ignore[attr-defined]
            host[positions] = values
            storage.copy_to_device(host)  # type: ignore[attr-defined]
        else:
            storage[positions] = values
    mark_modified(t)
    if recording and (t.requires_grad or v.requires_grad):
        if ordinals is None:
            ordinals = _ordinals(t.shape, parsed.basic, parsed.text)  # type: ignore[arg-type]
        old = t.detach()
        old.history, old.requires_grad, old.unique_id = t.history, t.requires_grad, t.unique_id
        ctx = Context(IndexPut, (old, v))
        ctx.save_for_backward(t.shape, ordinals)
        t.history, t.requires_grad, t.unique_id = ctx, True, next_unique_id()


def _fits(shape: tuple[int, ...], into: tuple[int, ...]) -> bool:
    """Whether ``shape`` broadcasts to exactly ``into``."""
    try:
        return np.broadcast_shapes(shape, into) == tuple(into)
    except ValueError:
        return False


# ## Stale saved tensors (PyTorch's version counter)


_modified: dict[int, tuple[Any, int]] = {}
"""id(root storage) -> (weak reference to it, the id stamp of its last assignment)."""


def _root(storage: Any) -> Any:
    """The array that owns a storage's memory (NumPy views keep it as ``base``)."""
    while isinstance(getattr(storage, "base", None), np.ndarray):
        storage = storage.base
    return storage


def mark_modified(t: Tensor) -> None:
    """Stamp ``t``'s storage as written now; from then on ``Tensor.backward`` checks
    the graph first (:func:`check_graph`)."""
    root = _root(t._tensor._storage)
    key = id(root)
    ref: Callable[[], Any]
    try:
        ref = weakref.ref(root, functools.partial(_forget, key))
    except TypeError:  # not weak-referable: kept alive
        ref = functools.partial(_same, root)
    _modified[key] = (ref, next_unique_id())


def _forget(key: int, _: object) -> None:
    _modified.pop(key, None)


def _same(value: Any) -> Any:
    return value


def _stamp(value: Any) -> int:
    """When ``value``'s storage was last assigned to (0: never, or not a tensor)."""
    data = getattr(value, "_tensor", None)
    if data is None or not _modified:
        return 0
    root = _root(data._storage)
    entry = _modified.get(id(root))
    return entry[1] if entry is not None and entry[0]() is root else 0


def check_graph(output: Tensor) -> None:
    """ModifiedError unless every node of ``output``'s graph can backpropagate: no
    tensor it saved for its backward was assigned to after the node was made (its id
    is later than the node's), and no input was (an assignment recorded in the graph
    makes its tensor a new node: a node made before sees the new one, not the values it
    used). ``Tensor.backward`` calls it once some tensor has been assigned to."""
    seen = {output.unique_id}
    stack = [output]
    while stack:
        node = stack.pop()
        history = node.history
        if history is None or history.released:
            continue
        made = node.unique_id
        for saved in history.saved_values:
            if _stamp(saved) > made:
                raise ModifiedError(
                    f"backward through {history.last_fn.__name__}: a tensor of shape "
                    f"{getattr(saved, 'shape', '?')} that it saved for its backward was "
                    "assigned to (x[...] = ...) after the operation ran, so its gradient "
                    "would use the new values; assign into a copy, or build the new tensor "
                    "with where / masked_fill"
                )
        for parent in history.inputs:
            if parent.unique_id > made:
                raise ModifiedError(
                    f"backward through {history.last_fn.__name__}: its input of shape "
                    f"{getattr(parent, 'shape', '?')} was assigned to (x[...] = ...) after "
                    "the operation ran; assign before using the tensor, or into a copy"
                )
            if parent.requires_grad and parent.unique_id not in seen:
                seen.add(parent.unique_id)
                stack.append(parent)  # type: ignore[arg-type]


# ## Gather along a dimension, and the views people reach for next


def index_select(t: Tensor, dim: int, index: Any) -> Tensor:
    """The entries at ``index`` (ints) along ``dim``, as PyTorch's ``index_select``."""
    d = t._dim(dim)
    array = _as_index_array(index, "index")
    if array.ndim != 1:
        raise ShapeError(f"index_select: the index must be 1-D, got shape {array.shape}")
    return getitem(t, (slice(None),) * d + (array,))


def gather(t: Tensor, dim: int, index: Any) -> Tensor:
    """PyTorch's ``gather``: ``out[i][j][k] = t[index[i][j][k]][j][k]`` for ``dim = 0``
    (and so on): ``index`` has ``t``'s number of dimensions, no larger than it in any
    dimension but ``dim``; the result has ``index``'s shape."""
    d = t._dim(dim)
    array = _as_index_array(index, "index")
    if array.ndim != t.dims or any(array.shape[k] > t.shape[k] for k in range(t.dims) if k != d):
        raise ShapeError(
            f"gather along {d}: index of shape {array.shape} for a tensor of shape {t.shape}"
        )
    size = t.shape[d]
    if array.size and (array.min() < -size or array.max() >= size):
        raise IndexingError(
            f"gather along {d}: an index in [{array.min()}, {array.max()}] is out of range "
            f"for size {size}"
        )
    grid: list[Any] = list(np.indices(array.shape, dtype=np.int64))
    grid[d] = np.where(array < 0, array + size, array)
    ordinals = np.ravel_multi_index(tuple(grid), t.shape) if t.size else grid[d]
    return Gather.apply(t, np.ascontiguousarray(ordinals, dtype=np.int64))


def unsqueeze(t: Tensor, dim: int) -> Tensor:
    """A view with a new dimension of size 1 at ``dim`` (``-1``: last)."""
    d = dim + t.dims + 1 if dim < 0 else dim
    if not 0 <= d <= t.dims:
        raise IndexingError(f"unsqueeze({dim}) of a tensor of shape {t.shape}")
    return getitem(t, (slice(None),) * d + (None,))


def squeeze(t: Tensor, dim: int | None = None) -> Tensor:
    """A view without dimensions of size 1 (only ``dim``, when given and of size 1)."""
    if dim is None:
        drop = [k for k, s in enumerate(t.shape) if s == 1]
    else:
        k = t._dim(dim)
        drop = [k] if t.shape[k] == 1 else []
    if not drop:
        return t
    return getitem(t, tuple(0 if k in drop else slice(None) for k in range(t.dims)))


def flatten(t: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Dimensions ``start_dim..end_dim`` merged into one (a view when contiguous)."""
    if not t.dims:
        return t.reshape(1)
    a, b = t._dim(start_dim), t._dim(end_dim)
    if a > b:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    merged = int(np.prod(t.shape[a : b + 1]))
    return t.reshape(*t.shape[:a], merged, *t.shape[b + 1 :])


class Expand(Function):
    """A view of ``a`` broadcast to ``shape`` (stride 0 along repeated dimensions); the
    backward sums the gradient back (autodiff's unbroadcast)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, shape: tuple[int, ...]) -> Tensor:
        extra = len(shape) - a.dims
        strides = [0] * extra + [
            0 if s == 1 and n != 1 else st
            for s, n, st in zip(a.shape, shape[extra:], a._tensor.strides, strict=True)
        ]
        return a._new(a._tensor.sliced(0, shape, strides))

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        return d  # Tensor.fit_derivative sums it back to the input's shape


def expand(t: Tensor, *sizes: int) -> Tensor:
    """A view of ``t`` repeated along dimensions of size 1 (``-1`` keeps a size), as
    PyTorch's ``expand``: no copy; write to it only through a copy."""
    one = len(sizes) == 1 and isinstance(sizes[0], tuple | list)
    shape = tuple(int(s) for s in (sizes[0] if one else sizes))  # type: ignore[union-attr]
    if len(shape) < t.dims:
        raise ShapeError(f"expand{shape}: fewer dimensions than the tensor's {t.shape}")
    extra = len(shape) - t.dims
    full = list(shape)
    for k, s in enumerate(t.shape):
        n = shape[extra + k]
        if n == -1:
            full[extra + k] = s
        elif s != 1 and n != s:
            raise ShapeError(
                f"expand{shape} of a tensor of shape {t.shape}: size {s} of dimension {k} "
                f"cannot become {n} (only sizes of 1 expand)"
            )
    if any(s < 0 for s in full):
        raise ShapeError(f"expand{shape}: -1 only for an existing dimension")
    return Expand.apply(t, tuple(full))
