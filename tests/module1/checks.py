"""Graded checks of stage 1 (see ``autograder/checks.py``): each calls the student's code
on inputs drawn from ``rng`` and returns what came back; the grader compares that with
what the reference returns for the same inputs, outside the student's process.

Two pieces of trusted code here keep one task's checks from depending on another task of
this stage:

* :func:`_given_indexing` runs a check with NumPy versions of the index functions of
  tasks 1.1 and 1.2 (``strides_from_shape``, ``to_index``, ``broadcast_index``, ...,
  ``TensorData.permute``) swapped in, so the kernels and tensor operations of tasks
  1.3-1.5 are graded on their own even when task 1.1 or 1.2 is wrong;
* :func:`_numpy_backend` is a :class:`~module1.tensor_ops.TensorBackend` whose four
  operations are NumPy, so the tensor Functions' ``forward`` and ``backward`` (and the
  layers of 1.5) are graded without the student's kernels.

Every input (values, layouts, upstream gradients) is drawn before the student's code
runs, so a check that raises part-way leaves the inputs of the next cases unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from autograder.checks import check, raised

Shape = tuple[int, ...]
Layout = tuple[tuple[int, ...], int]
"""How a tensor sits in its storage: the order its dimensions are stored in (the first
outermost) and the step between neighbouring entries (2 leaves a gap)."""

# -- inputs -------------------------------------------------------------------------------

_GRID = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0])
"""Values that recur, so that comparisons, maxima and ``is_close`` meet ties."""


_GAP = -99.0
"""What fills the storage slots a layout leaves unused: a kernel that reads one gets it,
one that writes there shows. (Not nan: answers hold finite numbers only.)"""
_UNSET = 555.0
"""What an output's entries hold before a kernel writes them."""


def _shape(
    rng: np.random.Generator, min_dims: int = 1, max_dims: int = 3, max_size: int = 4,
    min_size: int = 1,
) -> Shape:  # fmt: skip
    n = int(rng.integers(min_dims, max_dims + 1))
    return tuple(int(s) for s in rng.integers(min_size, max_size + 1, n))


def _order(rng: np.random.Generator, ndim: int) -> tuple[int, ...]:
    """A permutation of ``ndim`` dimensions; mostly (4 in 5) one that is not its own
    inverse (from 3 dimensions on) and not the identity, so that using the order where
    its inverse belongs shows."""
    order = tuple(int(i) for i in rng.permutation(ndim))
    if ndim >= 2 and rng.random() < 0.8:
        while order == tuple(range(ndim)) or (
            ndim >= 3 and all(order[order[d]] == d for d in range(ndim))
        ):
            order = tuple(int(i) for i in rng.permutation(ndim))
    return order


def _broadcast_pair(
    rng: np.random.Generator, min_dims: int = 0, max_dims: int = 3, max_size: int = 4
) -> tuple[Shape, Shape]:
    """Two shapes that broadcast: one list of sizes, each side with some sizes replaced by
    1 and maybe some leading dimensions dropped (either side may be the smaller)."""
    n = max_dims if rng.random() < 0.6 else int(rng.integers(max(min_dims, 1), max_dims + 1))
    sizes = [int(s) for s in rng.integers(2, max_size + 1, n)]
    a = tuple(1 if rng.random() < 0.25 else s for s in sizes)
    b = tuple(1 if rng.random() < 0.25 else s for s in sizes)
    drop, cut = rng.random(), int(rng.integers(1, n - min_dims + 1)) if n > min_dims else 0
    if drop < 0.3:
        a = a[cut:]
    elif drop < 0.6:
        b = b[cut:]
    return a, b


def _values(
    rng: np.random.Generator, shape: Shape, low: float = -4.0, high: float = 4.0, ties: bool = True
) -> np.ndarray:
    """Values in ``[low, high]`` rounded to 3 decimals, a quarter of them (with ``ties``)
    from a small grid so that equal values occur."""
    x = np.round(np.asarray(rng.uniform(low, high, shape), dtype=np.float64), 3)
    grid = _GRID[(_GRID >= low) & (_GRID <= high)]
    if ties and grid.size:
        x = np.where(rng.random(shape) < 0.25, rng.choice(grid, shape), x)
    return np.asarray(x, dtype=np.float64).reshape(shape)


def _domain(rng: np.random.Generator, shape: Shape, domain: str) -> np.ndarray:
    """Values of a named domain: ``any``, ``positive``, ``nonzero`` or ``away0`` (no
    value near 0, where relu bends)."""
    if domain == "positive":
        return _values(rng, shape, 0.2, 4.0, ties=False)
    if domain in ("nonzero", "away0"):
        sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        return (sign * _values(rng, shape, 0.25, 4.0, ties=False)).reshape(shape)
    return _values(rng, shape)


def _layout(rng: np.random.Generator, ndim: int) -> Layout:
    return tuple(int(i) for i in rng.permutation(ndim)), int(rng.integers(1, 3))


def _contiguous(ndim: int) -> Layout:
    return tuple(range(ndim)), 1


def _strided(
    values: np.ndarray, layout: Layout, dtype: Any = np.float64
) -> tuple[np.ndarray, tuple[int, ...]]:
    """A storage of ``dtype`` holding ``values`` in ``layout`` (gaps hold ``_GAP``) and
    its strides."""
    order, step = layout
    base = np.ascontiguousarray(np.transpose(values, order))
    storage = np.full(max(base.size * step, 1), _GAP, dtype=dtype)
    storage[::step][: base.size] = base.reshape(-1)
    base_strides = [1] * base.ndim
    for d in range(base.ndim - 2, -1, -1):
        base_strides[d] = base_strides[d + 1] * base.shape[d + 1]
    inverse = [int(k) for k in np.argsort(order)] if order else []
    strides = tuple(base_strides[k] * step for k in inverse)
    return storage, strides


def _read(storage: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """The values ``storage`` holds under ``shape`` and ``strides`` (NumPy only)."""
    shape, strides = tuple(int(s) for s in shape), tuple(int(s) for s in strides)
    if math.prod(shape) and (
        min(strides, default=0) < 0
        or sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) >= storage.size
    ):
        raise IndexError(f"shape {shape} with strides {strides} leaves the storage")
    view = np.lib.stride_tricks.as_strided(storage, shape, tuple(s * 8 for s in strides))
    return np.array(view, dtype=np.float64)


def _ints(t: Sequence[int]) -> np.ndarray:
    return np.array(t, dtype=np.int32)


def _make(
    values: np.ndarray,
    layout: Layout,
    backend: Any,
    requires_grad: bool = False,
    dtype: Any = np.float64,
) -> Any:
    """A tensor holding ``values`` in ``layout`` (explicit strides: no student code)."""
    from module1.tensor import Tensor
    from module1.tensor_data import TensorData

    storage, strides = _strided(values, layout, dtype)
    return Tensor(
        TensorData(storage, values.shape, strides), backend=backend, requires_grad=requires_grad
    )


def _factor(rng: np.random.Generator, size: int) -> Shape:
    """A random shape of ``size`` entries (1 to 3 dimensions)."""
    dims, rest = [], size
    for _ in range(int(rng.integers(0, 3))):
        d = int(rng.choice([k for k in range(1, rest + 1) if rest % k == 0]))
        dims.append(d)
        rest //= d
    dims.append(rest)
    return tuple(int(d) for d in rng.permutation(dims))


# -- trusted index functions (tasks 1.1 and 1.2, in NumPy) ------------------------------


def _row_major(shape: Sequence[int]) -> tuple[int, ...]:
    sizes = [int(s) for s in shape]
    return tuple(math.prod(sizes[d + 1 :]) for d in range(len(sizes)))


def _given_position(index: Sequence[int], strides: Sequence[int]) -> int:
    return int(np.dot(np.asarray(index, dtype=np.int64), np.asarray(strides, dtype=np.int64)))


def _given_to_index(ordinal: int, shape: Sequence[int], out_index: np.ndarray) -> None:
    sizes = tuple(int(s) for s in shape)
    if sizes:
        out_index[: len(sizes)] = np.unravel_index(int(ordinal), sizes)


def _given_shape_broadcast(shape1: Sequence[int], shape2: Sequence[int]) -> tuple[int, ...]:
    from module1.tensor_data import ShapeError

    a, b = tuple(int(s) for s in shape1), tuple(int(s) for s in shape2)
    try:
        return tuple(int(s) for s in np.broadcast_shapes(a, b))
    except ValueError:
        raise ShapeError(f"shapes {a} and {b} do not broadcast") from None


def _given_broadcast_index(
    big_index: np.ndarray, big_shape: np.ndarray, shape: np.ndarray, out_index: np.ndarray
) -> None:
    n = len(shape)
    if n:
        tail = np.asarray(big_index)[len(big_shape) - n :]
        out_index[:n] = np.where(np.asarray(shape) == 1, 0, tail)


def _given_is_contiguous(self: Any) -> bool:
    return all(
        size == 1 or stride == want
        for size, stride, want in zip(self.shape, self.strides, _row_major(self.shape),
                                      strict=True)
    )  # fmt: skip


def _given_indices(self: Any) -> Iterator[tuple[int, ...]]:
    for index in np.ndindex(*self.shape):
        yield tuple(int(i) for i in index)


def _given_permute(self: Any, *order: int) -> Any:
    from module1.tensor_data import ShapeError

    if sorted(order) != list(range(self.dims)):
        raise ShapeError(f"permute{tuple(order)} of shape {self.shape}")
    shape = [int(self.shape[d]) for d in order]
    return type(self)(self._storage, shape, [int(self.strides[d]) for d in order])


_GIVEN_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "strides_from_shape": _row_major,
    "index_to_position": _given_position,
    "to_index": _given_to_index,
    "shape_broadcast": _given_shape_broadcast,
    "broadcast_index": _given_broadcast_index,
}
_GIVEN_METHODS: dict[str, Callable[..., Any]] = {
    "is_contiguous": _given_is_contiguous,
    "indices": _given_indices,
    "permute": _given_permute,
}


def _given_indexing(
    fn: Callable[[np.random.Generator], Any],
) -> Callable[[np.random.Generator], Any]:
    """``fn`` run with the trusted index functions above in place of the student's
    (wherever stage 1's modules refer to them), restored afterwards."""

    def run(rng: np.random.Generator) -> Any:
        import module1
        from module1 import tensor, tensor_data, tensor_functions, tensor_nn, tensor_ops

        modules = (tensor_data, tensor_ops, tensor_functions, tensor, tensor_nn, module1)
        swaps: list[tuple[Any, str, Any]] = []
        try:
            for name, given in _GIVEN_FUNCTIONS.items():
                original = getattr(tensor_data, name)
                for module in modules:
                    if getattr(module, name, None) is original:
                        swaps.append((module, name, original))
                        setattr(module, name, given)
            for name, given in _GIVEN_METHODS.items():
                swaps.append((tensor_data.TensorData, name, getattr(tensor_data.TensorData, name)))
                setattr(tensor_data.TensorData, name, given)
            return fn(rng)
        finally:
            for target, name, value in reversed(swaps):
                setattr(target, name, value)

    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


# -- a trusted backend: the four operations in NumPy ------------------------------------

_BACKENDS: dict[str, Any] = {}


def _new_tensor(like: Any, values: np.ndarray) -> Any:
    """A row-major tensor of ``values`` in ``like``'s dtype, on its backend."""
    from module1.tensor_data import TensorData

    values = np.array(values, dtype=like._tensor._storage.dtype)
    return like._new(TensorData(values.reshape(-1), values.shape, _row_major(values.shape)))


def _each(fn: Callable[..., float], *arrays: np.ndarray) -> np.ndarray:
    """``fn`` entry by entry over arrays of one shape, as NumPy float64 scalars."""
    shape = arrays[0].shape
    flat = [a.reshape(-1) for a in arrays]
    return np.array([fn(*v) for v in zip(*flat, strict=True)], dtype=np.float64).reshape(shape)


def _write(t: Any, values: np.ndarray) -> None:
    """Write ``values`` (``t``'s shape) into ``t``'s storage through its strides."""
    storage, shape, strides = t._tensor.tuple()
    positions = np.zeros(shape, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides, strict=True)):
        axis = [1] * len(shape)
        axis[d] = n
        positions = positions + np.arange(n, dtype=np.int64).reshape(axis) * s
    storage[positions.reshape(-1)] = np.asarray(values, dtype=np.float64).reshape(-1)


def _numpy_backend() -> Any:
    """A TensorBackend (given code) over NumPy operations: no student kernel runs."""
    if "numpy" in _BACKENDS:
        return _BACKENDS["numpy"]
    from module1.tensor_data import ShapeError
    from module1.tensor_ops import TensorBackend, TensorOps

    class NumpyOps(TensorOps):
        @staticmethod
        def map(fn: Callable[[float], float]) -> Any:
            def apply(a: Any, out: Any = None) -> Any:
                x = a.to_numpy()
                if out is None:
                    return _new_tensor(a, _each(fn, x))
                if _given_shape_broadcast(a.shape, out.shape) != out.shape:
                    raise ShapeError(f"map: {a.shape} does not fit out {out.shape}")
                _write(out, _each(fn, np.broadcast_to(x, out.shape)))
                return out

            return apply

        @staticmethod
        def zip(fn: Callable[[float, float], float]) -> Any:
            def apply(a: Any, b: Any) -> Any:
                shape = _given_shape_broadcast(a.shape, b.shape)
                x = np.broadcast_to(a.to_numpy(), shape)
                y = np.broadcast_to(b.to_numpy(), shape)
                return _new_tensor(a, _each(fn, x, y))

            return apply

        @staticmethod
        def reduce(fn: Callable[[float, float], float], start: float = 0.0) -> Any:
            def apply(a: Any, dim: int) -> Any:
                x = np.moveaxis(a.to_numpy(), dim, -1)
                out = np.full(x.shape[:-1], start, dtype=np.float64)
                for index in np.ndindex(*out.shape):
                    acc: Any = out[index]
                    for v in x[index]:
                        acc = fn(acc, v)
                    out[index] = acc
                return _new_tensor(a, np.expand_dims(out, dim))

            return apply

        @staticmethod
        def matrix_multiply(a: Any, b: Any) -> Any:
            return _new_tensor(a, np.matmul(a.to_numpy(), b.to_numpy()))

    _BACKENDS["numpy"] = TensorBackend(NumpyOps)
    return _BACKENDS["numpy"]


def _simple_backend() -> Any:
    from module1.tensor_ops import SimpleBackend

    return SimpleBackend


# -- 1.1 strides, indexing, views ------------------------------------------------------


@check("1.1")
def strides_from_shape(rng: np.random.Generator) -> Any:
    from module1.tensor_data import strides_from_shape as strides

    shapes = [(), (1,), (5,), (2, 3, 4), (3, 1, 2)] + [_shape(rng, 1, 5, 5) for _ in range(8)]
    return {"inputs": shapes, "out": [raised(lambda s=s: strides(s)) for s in shapes]}


@check("1.1")
def index_to_position(rng: np.random.Generator) -> Any:
    """Strides of permuted, gapped and broadcast (stride 0) layouts."""
    from module1.tensor_data import index_to_position as position

    cases: list[tuple[tuple[int, ...], tuple[int, ...]]] = [((), ())]
    for _ in range(12):
        shape = _shape(rng, 1, 4, 5)
        _, strides = _strided(np.zeros(shape), _layout(rng, len(shape)))
        strides = tuple(0 if rng.random() < 0.15 else s for s in strides)
        index = tuple(int(rng.integers(0, n)) for n in shape)
        cases.append((index, strides))
    out = [raised(lambda c=c: int(position(_ints(c[0]), _ints(c[1])))) for c in cases]
    return {"inputs": cases, "out": out}


@check("1.1")
def to_index(rng: np.random.Generator) -> Any:
    from module1.tensor_data import to_index as unravel

    cases: list[tuple[Shape, int]] = [((), 0), ((1,), 0)]
    for _ in range(6):
        shape = _shape(rng, 1, 4, 4)
        size = math.prod(shape)
        for ordinal in sorted({0, size - 1, *(int(k) for k in rng.integers(0, size, 3))}):
            cases.append((shape, ordinal))

    def run(shape: Shape, ordinal: int) -> list[int]:
        out = np.full(len(shape), 9, dtype=np.int32)
        unravel(ordinal, _ints(shape), out)
        return [int(i) for i in out]

    return {"inputs": cases, "out": [raised(lambda c=c: run(*c)) for c in cases]}


def _data(shape: Shape, layout: Layout) -> Any:
    """A TensorData of ``arange`` values in ``layout``, built with explicit strides."""
    from module1.tensor_data import TensorData

    storage, strides = _strided(np.arange(float(math.prod(shape))).reshape(shape), layout)
    return TensorData(storage, shape, strides)


@check("1.1", "TensorData.is_contiguous")
def is_contiguous(rng: np.random.Generator) -> Any:
    """Row-major, permuted, gapped layouts, and size-1 dimensions with any stride."""
    from module1.tensor_data import TensorData

    cases: list[tuple[Shape, tuple[int, ...]]] = [((), ()), ((3, 1), (1, 1)), ((1, 3), (1, 1))]
    for _ in range(10):
        shape = _shape(rng, 1, 4, 4)
        layout = _layout(rng, len(shape)) if rng.random() < 0.6 else _contiguous(len(shape))
        _, strides = _strided(np.zeros(shape), layout)
        cases.append((shape, strides))
    for _ in range(4):  # a dimension of size 1 never moves: its stride does not matter
        shape = _shape(rng, 2, 4, 4)
        one = int(rng.integers(0, len(shape)))
        shape = tuple(1 if d == one else s for d, s in enumerate(shape))
        strides = tuple(int(rng.integers(2, 40)) if n == 1 else s
                        for n, s in zip(shape, _row_major(shape), strict=True))  # fmt: skip
        cases.append((shape, strides))

    def run(shape: Shape, strides: tuple[int, ...]) -> Any:
        extent = sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
        return TensorData(np.zeros(extent + 1), shape, strides).is_contiguous()

    return {"inputs": cases, "out": [raised(lambda c=c: run(*c)) for c in cases]}


@check("1.1", "TensorData.indices")
def indices(rng: np.random.Generator) -> Any:
    """Every index in row-major order, whatever the strides (and none of an empty shape)."""
    cases: list[tuple[Shape, Layout]] = [((), ((), 1)), ((2, 0), ((0, 1), 1))]
    for _ in range(6):
        shape = _shape(rng, 1, 4, 3)
        cases.append((shape, _layout(rng, len(shape))))

    def run(shape: Shape, layout: Layout) -> Any:
        got = list(_data(shape, layout).indices())
        return {"tuples": all(type(i) is tuple for i in got),
                "indices": [[int(k) for k in i] for i in got]}  # fmt: skip

    return {"inputs": cases, "out": [raised(lambda c=c: run(*c)) for c in cases]}


@check("1.1", "TensorData.permute")
def permute(rng: np.random.Generator) -> Any:
    """The view's shape, strides and values, and that it shares the storage; also a
    permute of a permuted view."""
    cases = []
    for _ in range(8):
        shape = _shape(rng, 1, 4, 4, min_size=2 if rng.random() < 0.7 else 1)
        order, again = _order(rng, len(shape)), _order(rng, len(shape))
        cases.append((shape, _layout(rng, len(shape)), order, again))

    def run(shape: Shape, layout: Layout, order: tuple[int, ...], again: tuple[int, ...]) -> Any:
        data = _data(shape, layout)
        once = data.permute(*order)
        twice = once.permute(*again)
        return [
            (v.shape, v.strides, _read(v.tuple()[0], v.shape, v.strides),
             bool(np.shares_memory(v.tuple()[0], data.tuple()[0])))
            for v in (once, twice)
        ]  # fmt: skip

    return {"inputs": cases, "out": [raised(lambda c=c: run(*c)) for c in cases]}


@check("1.1", "TensorData.get_through_views")
def get_through_views(rng: np.random.Generator) -> Any:
    """Integration: default strides, a permuted view, ``get`` at every ``indices()``."""
    from module1.tensor_data import TensorData

    cases = []
    for _ in range(5):
        shape = _shape(rng, 1, 4, 3, min_size=2)
        cases.append((shape, _order(rng, len(shape))))

    def run(shape: Shape, order: tuple[int, ...]) -> Any:
        view = TensorData(np.arange(float(math.prod(shape))), shape).permute(*order)
        return [view.get(index) for index in view.indices()]

    return {"inputs": cases, "out": [raised(lambda c=c: run(*c)) for c in cases]}


def _compiled_answers(name: str, cases: list[tuple[Any, ...]]) -> Any:
    """``name`` compiled as stage 2 will (``tests/module1/numba_rule.py``): "compiles" and
    its answers, or the start of the reason it does not compile."""
    from tests.module1.numba_rule import NotCompilableError, compiled

    try:
        fn = compiled(name)
    except NotCompilableError as exc:
        reason = str(exc).split("Numba said: ")[-1][:80]
        return {"numba": f"not compilable by Numba: {reason}", "out": None}

    def run(args: tuple[Any, ...]) -> Any:
        arrays = [_ints(a) if isinstance(a, tuple) else a for a in args]
        value = fn(*arrays)  # index_to_position returns; the others write their last
        return [int(i) for i in arrays[-1]] if value is None else int(value)

    return {"numba": "compiles", "out": [raised(lambda c=c: run(c)) for c in cases]}


@check("1.1")
def index_functions_compile_with_numba(rng: np.random.Generator) -> Any:
    """``index_to_position`` and ``to_index`` compiled with ``numba.njit``, as stage 2
    compiles them, and run on int32 arrays (a non-compilable answer fails here, at task
    1.1, not at task 2.1)."""
    positions: list[tuple[Any, ...]] = []
    ordinals: list[tuple[Any, ...]] = []
    for _ in range(6):
        shape = _shape(rng, 1, 4, 4)
        index = tuple(int(rng.integers(0, n)) for n in shape)
        positions.append((index, _row_major(shape)))
        ordinals.append((int(rng.integers(0, math.prod(shape))), shape, (9,) * len(shape)))
    return {"index_to_position": _compiled_answers("index_to_position", positions),
            "to_index": _compiled_answers("to_index", ordinals)}  # fmt: skip


# -- 1.2 broadcasting ---------------------------------------------------------------------


@check("1.2")
def broadcast_index_compiles_with_numba(rng: np.random.Generator) -> Any:
    """``broadcast_index`` compiled with ``numba.njit``, as stage 2 compiles it."""
    cases: list[tuple[Any, ...]] = []
    for _ in range(6):
        small, other = _broadcast_pair(rng, 1, 4, 4)
        big = tuple(int(n) for n in np.broadcast_shapes(small, other))
        index = tuple(int(rng.integers(0, n)) for n in big)
        cases.append((index, big, small, (9,) * len(small)))
    return _compiled_answers("broadcast_index", cases)


@check("1.2")
def shape_broadcast(rng: np.random.Generator) -> Any:
    from module1.tensor_data import shape_broadcast as broadcast

    pairs: list[tuple[Shape, Shape]] = [((3, 1), (4,)), ((1,), (2, 3)), ((5, 1, 4), (3, 1)),
                                        ((), ()), ((), (2, 1)), ((2, 3), (2, 3))]  # fmt: skip
    for _ in range(10):
        a, b = _broadcast_pair(rng, 0, 4, 4)
        pairs += [(a, b), (b, a)]
    return {"inputs": pairs, "out": [raised(lambda p=p: broadcast(*p)) for p in pairs]}


@check("1.2")
def shape_broadcast_errors(rng: np.random.Generator) -> Any:
    """Shapes that do not broadcast raise ShapeError (mixed with some that do)."""
    from module1.tensor_data import shape_broadcast as broadcast

    pairs: list[tuple[Shape, Shape]] = [((2, 3), (4,)), ((3, 2), (2, 3)), ((5,), (2, 5, 3))]
    for _ in range(9):
        n = int(rng.integers(1, 4))
        a = [1 if rng.random() < 0.3 else int(s) for s in rng.integers(2, 5, n)]
        b = [1 if rng.random() < 0.3 else s for s in a]
        d = int(rng.integers(0, n))
        if rng.random() < 0.7:  # one dimension where two sizes above 1 differ
            a[d], b[d] = (int(s) for s in rng.choice([2, 3, 4, 5], 2, replace=False))
        cut = int(rng.integers(0, d + 1))
        pair = (tuple(a[cut:]), tuple(b)) if rng.random() < 0.5 else (tuple(a), tuple(b[cut:]))
        pairs.append(pair)
    return {"inputs": pairs, "out": [raised(lambda p=p: broadcast(*p)) for p in pairs]}


@check("1.2")
def shape_broadcast_message(rng: np.random.Generator) -> Any:
    """The ShapeError of shapes that clash names both shapes, as tuples (README, and
    ``test_shape_broadcast_names_incompatible_shapes``): its type, and whether each
    shape's ``str`` is in the message."""
    from module1.tensor_data import shape_broadcast as broadcast

    pairs: list[tuple[Shape, Shape]] = [((2, 3), (4,)), ((3, 2), (2, 3)), ((5,), (2, 5, 3))]
    for _ in range(5):
        n = int(rng.integers(1, 4))
        a = [1 if rng.random() < 0.3 else int(s) for s in rng.integers(2, 5, n)]
        b = list(a)
        d = int(rng.integers(0, n))
        a[d], b[d] = (int(s) for s in rng.choice([2, 3, 4, 5], 2, replace=False))
        cut = int(rng.integers(0, d + 1))
        left = rng.random() < 0.5
        pairs.append((tuple(a[cut:]), tuple(b)) if left else (tuple(a), tuple(b[cut:])))

    def run(a: Shape, b: Shape) -> Any:
        try:
            return broadcast(a, b)
        except Exception as exc:  # the error is the answer
            return [type(exc).__name__, str(a) in str(exc), str(b) in str(exc)]

    return {"inputs": pairs, "out": [raised(lambda p=p: run(*p)) for p in pairs]}


@check("1.2")
def shape_broadcast_empty(rng: np.random.Generator) -> Any:
    """1 against 0 gives 0 (the size that is not 1); 0 against 2 does not broadcast."""
    from module1.tensor_data import shape_broadcast as broadcast

    pairs: list[tuple[Shape, Shape]] = [((2, 0), (1,)), ((0,), ()), ((1, 3), (0, 1)),
                                        ((0, 4), (4,)), ((2, 0), (2, 1)), ((0,), (2,))]  # fmt: skip
    pairs += [(b, a) for a, b in pairs]
    return {"inputs": pairs, "out": [raised(lambda p=p: broadcast(*p)) for p in pairs]}


@check("1.2")
def broadcast_index(rng: np.random.Generator) -> Any:
    """Every index of the broadcast shape mapped into the smaller shape."""
    from module1.tensor_data import broadcast_index as index_into

    cases: list[tuple[Shape, Shape]] = [((), (2, 3)), ((1, 4), (2, 3, 4)), ((1,), (2, 3))]
    for _ in range(5):
        a, b = _broadcast_pair(rng, 0, 4, 3)
        cases.append((a, _given_shape_broadcast(a, b)))

    def run(small: Shape, big: Shape) -> list[list[int]]:
        got = []
        for index in np.ndindex(*big):
            out = np.full(len(small), 7, dtype=np.int32)
            index_into(_ints(index), _ints(big), _ints(small), out)
            got.append([int(i) for i in out])
        return got

    return {"inputs": cases, "out": [raised(lambda c=c: run(*c)) for c in cases]}


# -- 1.3 the kernels ----------------------------------------------------------------------


Operand = tuple[np.ndarray, Shape, tuple[int, ...]]
"""What a kernel reads or writes: ``(storage, shape, strides)``."""


def _operand(rng: np.random.Generator, values: np.ndarray) -> Operand:
    """``values`` in a random layout, as a kernel operand."""
    storage, strides = _strided(values, _layout(rng, values.ndim))
    return storage, values.shape, strides


def _kernel(call: Callable[..., None], operands: Sequence[Operand], *extra: Any) -> np.ndarray:
    """``call`` on the operands (the output first) as the kernels take them, then the
    output's whole storage: its entries and the gaps it must leave alone."""
    call(*(x for st, shape, strides in operands for x in (st, _ints(shape), _ints(strides))),
         *extra)  # fmt: skip
    return operands[0][0]


@check("1.3")
@_given_indexing
def tensor_map(rng: np.random.Generator) -> Any:
    """Inputs and outputs in any layout; the input broadcast to the output's shape; 0-d
    inputs and outputs (``-s``, ``s.exp()`` of a 0-d ``s``)."""
    from module1.tensor_ops import tensor_map as kernel

    cases, outs = [], []
    pairs = [((3, 1), (2, 3, 4)), ((1, 4), (3, 1)), ((), ()), ((), (2, 3))]
    pairs += [_broadcast_pair(rng) for _ in range(6)]
    for in_shape, other in pairs:
        out_shape = _given_shape_broadcast(in_shape, other)
        a = _operand(rng, _values(rng, in_shape))
        out = _operand(rng, np.full(out_shape, _UNSET))
        cases.append({"a": in_shape, "a_strides": a[2], "out": out_shape, "out_strides": out[2]})
        fn = kernel(lambda x: 3.0 * x - 1.0)
        outs.append(raised(lambda fn=fn, out=out, a=a: _kernel(fn, [out, a])))
    return {"inputs": cases, "out": outs}


@check("1.3")
@_given_indexing
def tensor_zip(rng: np.random.Generator) -> Any:
    """Both inputs broadcast to the output's shape; every operand in any layout; 0-d
    operands and outputs (``s * s + 1`` of a 0-d ``s``)."""
    from module1.tensor_ops import tensor_zip as kernel

    cases, outs = [], []
    pairs = [((2, 1, 3), (4, 1)), ((1, 3), (2, 1)), ((), ()), ((3,), ())]
    pairs += [_broadcast_pair(rng) for _ in range(6)]
    for a_shape, b_shape in pairs:
        out_shape = _given_shape_broadcast(a_shape, b_shape)
        a, b = _operand(rng, _values(rng, a_shape)), _operand(rng, _values(rng, b_shape))
        out = _operand(rng, np.full(out_shape, _UNSET))
        cases.append({"a": a_shape, "b": b_shape, "out": out_shape, "out_strides": out[2]})
        fn = kernel(lambda x, y: x - 2.0 * y)
        outs.append(raised(lambda fn=fn, out=out, a=a, b=b: _kernel(fn, [out, a, b])))
    return {"inputs": cases, "out": outs}


_REDUCERS: dict[str, tuple[Callable[[float, float], float], float]] = {
    "add": (lambda acc, x: acc + x, 0.5),
    "mul": (lambda acc, x: acc * x, 1.0),
    "max": (lambda acc, x: acc if acc >= x else x, -math.inf),
    "fold": (lambda acc, x: acc * 0.5 + x, 0.25),  # order matters: folds in index order
}


@check("1.3")
@_given_indexing
def tensor_reduce(rng: np.random.Generator) -> Any:
    """Add, multiply, max and an order-sensitive fold, over any dim, from the start value
    already in ``out``; inputs and outputs in any layout."""
    from module1.tensor_ops import tensor_reduce as kernel

    cases, outs = [], []
    for name, (fn, start) in list(_REDUCERS.items()) * 2:
        shape = _shape(rng, 1, 3, 4)
        dim = int(rng.integers(0, len(shape)))
        out_shape = tuple(1 if d == dim else s for d, s in enumerate(shape))
        a = _operand(rng, _values(rng, shape, -2.0, 2.0))
        out = _operand(rng, np.full(out_shape, start))
        cases.append({"reduce": name, "a": shape, "dim": dim, "a_strides": a[2]})
        call = kernel(fn)
        outs.append(raised(lambda call=call, out=out, a=a, dim=dim: _kernel(call, [out, a], dim)))
    return {"inputs": cases, "out": outs}


@check("1.3")
@_given_indexing
def tensor_reduce_empty(rng: np.random.Generator) -> Any:
    """Tensors with an empty dimension (``all()`` / ``any()`` of a ``(2, 0)`` tensor in
    ``test_all_and_any_known_values``): over the empty dim every entry of ``out`` keeps
    its start value, over another dim there is nothing to write."""
    from module1.tensor_ops import tensor_reduce as kernel

    empty: list[tuple[Shape, int]] = [((2, 0), 1), ((0, 3), 0), ((3, 0, 2), 1), ((2, 0), 0),
                                      ((0,), 0)]  # fmt: skip
    cases, outs = [], []
    for name, (fn, start) in _REDUCERS.items():
        for shape, dim in empty:
            out_shape = tuple(1 if d == dim else s for d, s in enumerate(shape))
            a = _operand(rng, np.zeros(shape))
            out = _operand(rng, np.full(out_shape, start))
            cases.append({"reduce": name, "a": shape, "dim": dim, "out_strides": out[2]})
            call = kernel(fn)
            outs.append(raised(lambda call=call, out=out, a=a, dim=dim:
                               _kernel(call, [out, a], dim)))  # fmt: skip
    return {"inputs": cases, "out": outs}


def _matmul_shapes(rng: np.random.Generator, broadcast: bool = True) -> tuple[Shape, Shape]:
    """Operand shapes ``(..., n, m)`` and ``(..., m, p)``: batch dimensions that broadcast,
    or (``broadcast=False``) none or equal ones."""
    batch_a, batch_b = _broadcast_pair(rng, 0, 2, 3) if broadcast else ((), ())
    if not broadcast and rng.random() < 0.5:
        batch_a = batch_b = _shape(rng, 1, 2, 3)
    n, m, p = (int(k) for k in rng.integers(1, 5, 3))
    return (*batch_a, n, m), (*batch_b, m, p)


@check("1.3")
@_given_indexing
def tensor_matrix_multiply(rng: np.random.Generator) -> Any:
    """Batch dimensions broadcast; operands and output in any layout."""
    from module1.tensor_ops import tensor_matrix_multiply as kernel

    cases, outs = [], []
    for _ in range(6):
        a_shape, b_shape = _matmul_shapes(rng)
        batch = _given_shape_broadcast(a_shape[:-2], b_shape[:-2])
        a, b = _operand(rng, _values(rng, a_shape)), _operand(rng, _values(rng, b_shape))
        out = _operand(rng, np.full((*batch, a_shape[-2], b_shape[-1]), _UNSET))
        cases.append({"a": a_shape, "b": b_shape, "out_strides": out[2]})
        outs.append(raised(lambda out=out, a=a, b=b: _kernel(kernel, [out, a, b])))
    return {"inputs": cases, "out": outs}


# -- 1.3 the tensor Functions' forward (on the trusted backend) ----------------------------


def _function(name: str) -> Any:
    from module1 import tensor_functions

    return getattr(tensor_functions, name)


def _forward_answer(out: Any, inputs: Sequence[Any], arrays: Sequence[np.ndarray]) -> Any:
    """The result's values, and whether the inputs still hold their values."""
    intact = all(np.array_equal(t.to_numpy(), x) for t, x in zip(inputs, arrays, strict=True))
    return {"value": out.to_numpy(), "intact": intact}


_UNARY = {"Neg": "any", "Inv": "nonzero", "Sigmoid": "any", "ReLU": "any", "Tanh": "any",
          "Log": "positive", "Exp": "any"}  # fmt: skip
_BINARY = ("Add", "Mul", "LT", "EQ", "IsClose")


def _unary_forward(name: str) -> Callable[[np.random.Generator], Any]:
    def forward(rng: np.random.Generator) -> Any:
        function, backend = _function(name), _numpy_backend()
        cases, outs = [], []
        for _ in range(6):
            shape = _shape(rng, 0, 3)
            x = _domain(rng, shape, _UNARY[name])
            t = _make(x, _layout(rng, len(shape)), backend, bool(rng.random() < 0.5))
            cases.append(shape)
            outs.append(raised(lambda t=t, x=x: _forward_answer(function.apply(t), [t], [x])))
        return {"inputs": cases, "out": outs}

    return forward


for _name in _UNARY:
    check("1.3", f"{_name}.forward")(_given_indexing(_unary_forward(_name)))


@check("1.3", "Pow.forward")
@_given_indexing
def pow_forward(rng: np.random.Generator) -> Any:
    """Integer exponents of any base; fractional and negative ones of positive bases."""
    function, backend = _function("Pow"), _numpy_backend()
    cases, outs = [], []
    for n in (2.0, 3.0, 1.0, 0.0, 0.5, -1.5, -1.0):
        shape = _shape(rng, 0, 3)
        x = _domain(rng, shape, "any" if n in (2.0, 3.0, 1.0, 0.0) else "positive")
        t = _make(x, _layout(rng, len(shape)), backend)
        cases.append((shape, n))
        outs.append(raised(lambda t=t, x=x, n=n: _forward_answer(function.apply(t, n), [t], [x])))
    return {"inputs": cases, "out": outs}


def _binary_forward(name: str) -> Callable[[np.random.Generator], Any]:
    def forward(rng: np.random.Generator) -> Any:
        function, backend = _function(name), _numpy_backend()
        cases, outs = [], []
        for _ in range(6):
            a_shape, b_shape = _broadcast_pair(rng)
            x = _values(rng, a_shape, -2.0, 3.0)
            y = _values(rng, b_shape, -2.0, 3.0)
            if name == "IsClose":  # near misses and near hits of |x - y| < 1e-2
                nudge = rng.choice([0.0, 0.003, -0.004, 0.02, -0.5], b_shape)
                y = np.round(rng.choice(_GRID, b_shape) + nudge, 3).reshape(b_shape)
                x = rng.choice(_GRID, a_shape).reshape(a_shape)
            a = _make(x, _layout(rng, len(a_shape)), backend, bool(rng.random() < 0.5))
            b = _make(y, _layout(rng, len(b_shape)), backend)
            cases.append((a_shape, b_shape))
            outs.append(raised(lambda a=a, b=b, x=x, y=y:
                               _forward_answer(function.apply(a, b), [a, b], [x, y])))  # fmt: skip
        return {"inputs": cases, "out": outs}

    return forward


for _name in _BINARY:
    check("1.3", f"{_name}.forward")(_given_indexing(_binary_forward(_name)))


def _reduce_forward(name: str) -> Callable[[np.random.Generator], Any]:
    def forward(rng: np.random.Generator) -> Any:
        function, backend = _function(name), _numpy_backend()
        cases, outs = [], []
        for k in range(7):
            shape = () if k == 0 else _shape(rng, 1, 3)
            dim = None if k < 2 or rng.random() < 0.25 else int(rng.integers(0, len(shape)))
            x = _values(rng, shape, -3.0, 1.0)
            t = _make(x, _layout(rng, len(shape)), backend, bool(rng.random() < 0.5))
            cases.append((shape, dim))
            outs.append(raised(lambda t=t, x=x, dim=dim:
                               _forward_answer(function.apply(t, dim), [t], [x])))  # fmt: skip
        return {"inputs": cases, "out": outs}

    return forward


for _name in ("Sum", "Max"):
    check("1.3", f"{_name}.forward")(_given_indexing(_reduce_forward(_name)))


def _write_through(base: Any, view: Any, index: tuple[int, ...]) -> Any:
    """The view's values, and its values after ``base[index] = 100``."""
    before = view.to_numpy()
    base[index] = 100.0
    return {"value": before, "after_write": view.to_numpy()}


@check("1.3", "Permute.forward")
@_given_indexing
def permute_forward(rng: np.random.Generator) -> Any:
    """A view: the result sees a later write to the input."""
    function, backend = _function("Permute"), _numpy_backend()
    cases, outs = [], []
    for _ in range(6):
        shape = _shape(rng, 2, 4, 3, min_size=2 if rng.random() < 0.7 else 1)
        order = _order(rng, len(shape))
        t = _make(_values(rng, shape), _layout(rng, len(shape)), backend)
        index = tuple(int(rng.integers(0, n)) for n in shape)
        cases.append((shape, order))
        outs.append(raised(lambda t=t, order=order, index=index:
                           _write_through(t, function.apply(t, order), index)))  # fmt: skip
    return {"inputs": cases, "out": outs}


@check("1.3", "Permute.forward_errors")
@_given_indexing
def permute_forward_errors(rng: np.random.Generator) -> Any:
    """An order that is not a permutation of the dimensions raises ShapeError naming the
    shape (``test_permute_that_is_not_a_permutation_names_it``): a view built by hand
    must still go through ``TensorData.permute``'s check. Mixed with valid orders."""
    from module1.tensor_data import ShapeError

    function, backend = _function("Permute"), _numpy_backend()
    cases: list[tuple[Shape, tuple[int, ...]]] = [
        ((2, 3), (0, 0)), ((2, 3), (1,)), ((2, 3), (0, 1, 2)), ((2, 3), (0, 5))
    ]  # fmt: skip
    for _ in range(4):
        shape = _shape(rng, 2, 3, 4, min_size=2)
        n = len(shape)
        order = [int(i) for i in rng.permutation(n)]
        kind = int(rng.integers(0, 4))
        if kind == 0:  # a repeated dimension
            order[int(rng.integers(1, n))] = order[0]
        elif kind == 1:  # one dimension too few
            order = order[1:]
        elif kind == 2:  # a dimension that does not exist
            order[int(rng.integers(0, n))] = n + int(rng.integers(0, 3))
        cases.append((shape, tuple(order)))
    tensors = [_make(_values(rng, shape), _layout(rng, len(shape)), backend) for shape, _ in cases]

    def run(t: Any, order: tuple[int, ...]) -> Any:
        try:
            return function.apply(t, order).to_numpy()
        except ShapeError as exc:
            return ["ShapeError", str(t.shape) in str(exc)]

    outs = [raised(lambda t=t, c=c: run(t, c[1])) for t, c in zip(tensors, cases, strict=True)]
    return {"inputs": cases, "out": outs}


@check("1.3", "View.forward")
@_given_indexing
def view_forward(rng: np.random.Generator) -> Any:
    """The same storage under a new shape: the result sees a later write to the input."""
    function, backend = _function("View"), _numpy_backend()
    cases, outs = [], []
    for _ in range(6):
        shape = _shape(rng, 1, 3, 4)
        new = _factor(rng, math.prod(shape))
        t = _make(_values(rng, shape), _contiguous(len(shape)), backend)
        index = tuple(int(rng.integers(0, n)) for n in shape)
        cases.append((shape, new))
        outs.append(raised(lambda t=t, new=new, index=index:
                           _write_through(t, function.apply(t, new), index)))  # fmt: skip
    return {"inputs": cases, "out": outs}


@check("1.3", "Copy.forward")
@_given_indexing
def copy_forward(rng: np.random.Generator) -> Any:
    """A contiguous copy: its values, its contiguity, and that a later write to the input
    does not reach it (also when the input is already contiguous: still a copy)."""
    function, backend = _function("Copy"), _numpy_backend()
    cases, outs = [], []
    for k in range(6):
        shape = _shape(rng, 1, 3, 4)
        layout = _contiguous(len(shape)) if k == 0 else _layout(rng, len(shape))
        t = _make(_values(rng, shape), layout, backend)
        index = tuple(int(rng.integers(0, n)) for n in shape)
        cases.append(shape)

        def run(t: Any = t, index: tuple[int, ...] = index) -> Any:
            c = function.apply(t)
            return {**_write_through(t, c, index), "contiguous": c._tensor.is_contiguous()}

        outs.append(raised(run))
    return {"inputs": cases, "out": outs}


@check("1.3", "MatMul.forward")
@_given_indexing
def matmul_forward(rng: np.random.Generator) -> Any:
    function, backend = _function("MatMul"), _numpy_backend()
    cases, outs = [], []
    for _ in range(6):
        a_shape, b_shape = _matmul_shapes(rng)
        x, y = _values(rng, a_shape), _values(rng, b_shape)
        a = _make(x, _layout(rng, len(a_shape)), backend, bool(rng.random() < 0.5))
        b = _make(y, _layout(rng, len(b_shape)), backend)
        cases.append((a_shape, b_shape))
        outs.append(raised(lambda a=a, b=b, x=x, y=y:
                           _forward_answer(function.apply(a, b), [a, b], [x, y])))  # fmt: skip
    return {"inputs": cases, "out": outs}


# -- 1.3 integration: the simple backend, the tensor API ----------------------------------


@check("1.3")
@_given_indexing
def simple_backend(rng: np.random.Generator) -> Any:
    """The given SimpleOps wrappers over the student's kernels, on tensors in any layout."""
    f = _simple_backend()
    cases, outs = [], []
    for _ in range(4):
        a_shape, b_shape = _broadcast_pair(rng, 1, 3, 3)
        big = _given_shape_broadcast(a_shape, b_shape)
        a = _make(_values(rng, a_shape), _layout(rng, len(a_shape)), f)
        b = _make(_values(rng, b_shape), _layout(rng, len(b_shape)), f)
        dim = int(rng.integers(0, len(a_shape)))
        m_shapes = _matmul_shapes(rng)
        m = [_make(_values(rng, s), _layout(rng, len(s)), f) for s in m_shapes]
        cases.append((a_shape, b_shape, dim, m_shapes))

        def run(a: Any = a, b: Any = b, big: Shape = big, dim: int = dim, m: Any = m) -> Any:
            out = a.zeros(big)
            return [f.neg_map(a).to_numpy(), f.exp_map(a).to_numpy(),
                    f.id_map(a, out).to_numpy(), f.add_zip(a, b).to_numpy(),
                    f.lt_zip(a, b).to_numpy(), f.eq_zip(a, b).to_numpy(),
                    f.add_reduce(a, dim).to_numpy(), f.max_reduce(a, dim).to_numpy(),
                    f.mul_reduce(a, dim).to_numpy(),
                    f.matrix_multiply(m[0], m[1]).to_numpy()]  # fmt: skip

        outs.append(raised(run))
    return {"inputs": cases, "out": outs}


@check("1.3")
@_given_indexing
def tensor_expressions(rng: np.random.Generator) -> Any:
    """Integration: expressions through the Tensor API on the simple backend."""
    f = _simple_backend()
    cases, outs = [], []
    for _ in range(3):
        a_shape, b_shape = _broadcast_pair(rng, 2, 3, 3)
        a = _make(_values(rng, a_shape), _layout(rng, len(a_shape)), f)
        b = _make(_domain(rng, b_shape, "nonzero"), _layout(rng, len(b_shape)), f)
        order = _order(rng, len(a_shape))
        m_shapes = _matmul_shapes(rng)
        m = [_make(_values(rng, s), _layout(rng, len(s)), f) for s in m_shapes]
        v = _make(_values(rng, (m_shapes[1][-2],)), ((0,), 1), f)
        cases.append((a_shape, b_shape, order, m_shapes))

        def run(a: Any = a, b: Any = b, order: Any = order, m: Any = m, v: Any = v) -> Any:
            e = ((a * 2.0 - b / 3.0).sigmoid() + (a < b) - (a == 0.5) * a.exp()).relu()
            return [e.to_numpy(), (a**2.0 + b.exp()).log().to_numpy(), e.sum().item(),
                    a.mean(0).to_numpy(), a.max(-1, keepdim=True).to_numpy(),
                    a.permute(*order).contiguous().view(-1).to_numpy(),
                    (m[0] @ m[1]).to_numpy(), (m[0] @ v).to_numpy(), a.all(1).to_numpy(),
                    a.is_close(b).any().item()]  # fmt: skip

        outs.append(raised(run))
    return {"inputs": cases, "out": outs}


@check("1.3")
@_given_indexing
def empty_reductions(rng: np.random.Generator) -> Any:
    """Integration: ``all``, ``any`` and ``sum`` of tensors with an empty dimension, over
    every dim and over everything, on the simple backend (``test_all_and_any_known_values``:
    an empty ``all`` is 1.0, an empty ``any`` 0.0); and of a tensor with zeros."""
    f = _simple_backend()
    shapes: list[Shape] = [(2, 0), (0, 3), (3, 0, 2), _shape(rng, 1, 3, 3)]
    arrays = [np.zeros(s) for s in shapes[:3]]
    arrays.append(np.where(rng.random(shapes[3]) < 0.3, 0.0, _values(rng, shapes[3])))
    tensors = [_make(x, _layout(rng, x.ndim), f) for x in arrays]

    def run(t: Any) -> Any:
        dims: list[int | None] = [None, *range(t.dims)]
        return [[t.all(d).to_numpy(), t.any(d).to_numpy(), t.sum(d, keepdim=True).to_numpy()]
                for d in dims]  # fmt: skip

    return {"inputs": shapes, "out": [raised(lambda t=t: run(t)) for t in tensors]}


# -- 1.4 backward (on the trusted backend) ------------------------------------------------


def _grads(out: Any, upstream: Any, leaves: Sequence[Any]) -> list[Any]:
    """``out.backward(upstream)``, then every leaf's gradient (None for none)."""
    out.backward(upstream)
    return [None if leaf.grad is None else leaf.grad.to_numpy() for leaf in leaves]


def _upstream(rng: np.random.Generator, shape: Shape) -> Any:
    """A random upstream gradient in a random layout (so often non-contiguous)."""
    return _make(_values(rng, shape, -2.0, 2.0, ties=False), _layout(rng, len(shape)),
                 _numpy_backend())  # fmt: skip


def _float32_answer(out: Any, leaves: Sequence[Any], upstream: Any) -> Any:
    """The result's and the gradients' dtypes and values, after ``out.backward``."""
    out.backward(upstream)
    grads = [leaf.grad for leaf in leaves]
    return {
        "dtypes": [str(out.dtype), *(None if g is None else str(g.dtype) for g in grads)],
        "value": out.to_numpy(),
        "grads": [None if g is None else g.to_numpy() for g in grads],
    }


@check("1.4", "float32", rtol=1e-5, atol=1e-6)
@_given_indexing
def float32_forward_and_backward(rng: np.random.Generator) -> Any:
    """Every Function forward and backward on float32 tensors (the NumPy backend: no
    kernel of the student's runs): results and gradients stay float32, so a float64
    constant made in a forward or backward (``DtypeError`` when it meets a float32
    tensor) loses this check (``tests/module1/test_tensor_dtype.py``)."""
    backend, f32 = _numpy_backend(), np.float32
    cases, outs = [], []
    specs: list[tuple[str, Any]] = [(name, None) for name in _UNARY]
    specs += [("Add", None), ("Mul", None), ("Pow", 3.0), ("Sum", 1), ("Sum", None),
              ("Max", 0), ("Permute", (1, 0)), ("View", (6,))]  # fmt: skip
    for name, arg in specs:
        domain = {"ReLU": "away0", "Log": "positive", "Inv": "nonzero"}.get(name, "any")
        x = _domain(rng, (2, 3), domain).astype(f32)
        layout = _contiguous(2) if name == "View" else _layout(rng, 2)
        leaf = _make(x, layout, backend, True, f32)
        leaves = [leaf]
        if name in ("Add", "Mul"):
            other = _make(_values(rng, (3,)).astype(f32), _contiguous(1), backend, True, f32)
            leaves.append(other)
            args: tuple[Any, ...] = (leaf, other)
        else:
            args = (leaf,) if arg is None and name in _UNARY else (leaf, arg)
        cases.append((name, arg))

        def run(args: tuple[Any, ...] = args, name: str = name, leaves: list = leaves) -> Any:
            out = _function(name).apply(*args)
            w = _make(np.ones(out.shape, f32), _contiguous(len(out.shape)), backend, False, f32)
            return _float32_answer(out, leaves, w)

        outs.append(raised(run))
    return {"inputs": cases, "out": outs}


def _unary_backward(name: str) -> Callable[[np.random.Generator], Any]:
    domain = {"ReLU": "away0", "Log": "positive", "Inv": "nonzero"}.get(name, "any")

    def backward(rng: np.random.Generator) -> Any:
        function, backend = _function(name), _numpy_backend()
        cases, outs = [], []
        for _ in range(5):
            shape = _shape(rng, 0, 3)
            x = _domain(rng, shape, domain)
            leaf = _make(x, _layout(rng, len(shape)), backend, requires_grad=True)
            w = _upstream(rng, shape)
            cases.append(shape)
            outs.append(raised(lambda leaf=leaf, w=w: _grads(function.apply(leaf), w, [leaf])))
        return {"inputs": cases, "out": outs}

    return backward


for _name in _UNARY:
    check("1.4", f"{_name}.backward")(_given_indexing(_unary_backward(_name)))


@check("1.4", "Pow.backward")
@_given_indexing
def pow_backward(rng: np.random.Generator) -> Any:
    function, backend = _function("Pow"), _numpy_backend()
    cases, outs = [], []
    for n in (2.0, 3.0, 1.0, 0.5, -1.5):
        shape = _shape(rng, 0, 3)
        x = _domain(rng, shape, "any" if n >= 1.0 else "positive")
        leaf = _make(x, _layout(rng, len(shape)), backend, requires_grad=True)
        w = _upstream(rng, shape)
        cases.append((shape, n))
        outs.append(raised(lambda leaf=leaf, w=w, n=n: _grads(function.apply(leaf, n), w, [leaf])))
    return {"inputs": cases, "out": outs}


def _binary_backward(name: str) -> Callable[[np.random.Generator], Any]:
    """Operands of one shape (no broadcasting: that is the unbroadcast checks' part); in
    the last case the second operand is a constant, which gets no gradient."""

    def backward(rng: np.random.Generator) -> Any:
        function, backend = _function(name), _numpy_backend()
        cases, outs = [], []
        for k in range(5):
            shape = _shape(rng, 0, 3)
            a = _make(_values(rng, shape), _layout(rng, len(shape)), backend, True)
            b = _make(_values(rng, shape), _layout(rng, len(shape)), backend, k < 4)
            w = _upstream(rng, shape)
            cases.append(shape)
            outs.append(raised(lambda a=a, b=b, w=w: _grads(function.apply(a, b), w, [a, b])))
        return {"inputs": cases, "out": outs}

    return backward


for _name in _BINARY:
    check("1.4", f"{_name}.backward")(_given_indexing(_binary_backward(_name)))


@check("1.4")
@_given_indexing
def comparison_broadcast_backward(rng: np.random.Generator) -> Any:
    """LT, EQ and IsClose of operands that broadcast (0-d ones too): zero gradients, each
    in its own operand's shape (``test_comparisons_pass_zero_gradients_back_in_each_
    input_shape``), so zeros shaped like one operand do not do for the other."""
    backend = _numpy_backend()
    names = ("LT", "EQ", "IsClose")
    pairs: list[tuple[Shape, Shape]] = [((3, 1), (4,)), ((2,), (3, 1)), ((), (2, 3))]
    pairs += [_broadcast_pair(rng, 0, 3, 3) for _ in range(6)]
    cases, outs = [], []
    for k, (a_shape, b_shape) in enumerate(pairs):
        name = names[k % 3]
        a = _make(_values(rng, a_shape), _layout(rng, len(a_shape)), backend, True)
        b = _make(_values(rng, b_shape), _layout(rng, len(b_shape)), backend, True)
        w = _upstream(rng, _given_shape_broadcast(a_shape, b_shape))
        fn = _function(name)
        cases.append((name, a_shape, b_shape))
        outs.append(raised(lambda a=a, b=b, w=w, fn=fn: _grads(fn.apply(a, b), w, [a, b])))
    return {"inputs": cases, "out": outs}


@check("1.4", "ReLU.backward_at_zero")
@_given_indexing
def relu_backward_at_zero(rng: np.random.Generator) -> Any:
    """ReLU's gradient is ``d`` where ``a > 0`` and 0 elsewhere, so 0 at ``a = 0`` (and
    ``-0.0``), as the README's table says (the loss of 1.5 relies on it at ``z = 0``)."""
    function, backend = _function("ReLU"), _numpy_backend()
    cases, outs = [], []
    for _ in range(4):
        shape = _shape(rng, 1, 3, 4)
        x = np.where(rng.random(shape) < 0.4, rng.choice([0.0, -0.0], shape), _values(rng, shape))
        x = np.asarray(x, dtype=np.float64).reshape(shape)
        x.reshape(-1)[0] = 0.0
        leaf = _make(x, _layout(rng, len(shape)), backend, requires_grad=True)
        w = _upstream(rng, shape)
        cases.append(shape)
        outs.append(raised(lambda leaf=leaf, w=w: _grads(function.apply(leaf), w, [leaf])))
    return {"inputs": cases, "out": outs}


def _backward_alone(name: str, saved: tuple[Any, ...], upstream: Any) -> np.ndarray:
    """``backward`` called directly, with the Context the given part of ``forward``
    fills (``Permute``, ``View`` and ``Sum`` save their order or shape outside the
    student's region): no student forward runs."""
    from module0.autodiff import Context

    function = _function(name)
    ctx = Context(function)
    ctx.save_for_backward(*saved)
    return function.backward(ctx, upstream).to_numpy()


@check("1.4", "Sum.backward")
@_given_indexing
def sum_backward(rng: np.random.Generator) -> Any:
    """Over a dim (kept with size 1) or everything (a 0-d upstream gradient)."""
    cases, outs = [], []
    for k in range(6):
        shape = _shape(rng, 1, 3)
        dim = None if k < 2 else int(rng.integers(0, len(shape)))
        out_shape = () if dim is None else tuple(1 if d == dim else s
                                                 for d, s in enumerate(shape))  # fmt: skip
        w = _upstream(rng, out_shape)
        cases.append((shape, dim))
        outs.append(raised(lambda shape=shape, w=w: _backward_alone("Sum", (shape,), w)))
    return {"inputs": cases, "out": outs}


@check("1.4", "Max.backward")
@_given_indexing
def max_backward(rng: np.random.Generator) -> Any:
    """Over a dim or everything; ties (every other case is full of them) share the
    gradient evenly."""
    function, backend = _function("Max"), _numpy_backend()
    cases, outs = [], []
    for k in range(6):
        shape = _shape(rng, 1, 3, min_size=2 if k % 2 else 1)
        dim = None if k < 2 else int(rng.integers(0, len(shape)))
        ties = rng.choice([-1.0, 0.5, 2.0], shape, p=[0.2, 0.2, 0.6])
        x = ties if k % 2 else _values(rng, shape)
        leaf = _make(np.asarray(x).reshape(shape), _layout(rng, len(shape)), backend, True)
        out_shape = () if dim is None else tuple(1 if d == dim else s
                                                 for d, s in enumerate(shape))  # fmt: skip
        w = _upstream(rng, out_shape)
        cases.append((shape, dim))
        outs.append(raised(lambda leaf=leaf, dim=dim, w=w:
                           _grads(function.apply(leaf, dim), w, [leaf])))  # fmt: skip
    return {"inputs": cases, "out": outs}


@check("1.4", "Permute.backward")
@_given_indexing
def permute_backward(rng: np.random.Generator) -> Any:
    """Mostly orders that are not their own inverse, so using the order itself shows."""
    cases, outs = [], []
    for _ in range(6):
        shape = _shape(rng, 2, 4, 3, min_size=2 if rng.random() < 0.7 else 1)
        order = _order(rng, len(shape))
        w = _upstream(rng, tuple(shape[d] for d in order))
        cases.append((shape, order))
        outs.append(raised(lambda order=order, w=w: _backward_alone("Permute", (order,), w)))
    return {"inputs": cases, "out": outs}


@check("1.4", "View.backward")
@_given_indexing
def view_backward(rng: np.random.Generator) -> Any:
    """Upstream gradients in non-contiguous layouts."""
    cases, outs = [], []
    for _ in range(6):
        shape = _shape(rng, 1, 3, 4)
        new = _factor(rng, math.prod(shape))
        w = _upstream(rng, new)
        cases.append((shape, new))
        outs.append(raised(lambda shape=shape, w=w: _backward_alone("View", (shape,), w)))
    return {"inputs": cases, "out": outs}


@check("1.4", "Copy.backward")
@_given_indexing
def copy_backward(rng: np.random.Generator) -> Any:
    function, backend = _function("Copy"), _numpy_backend()
    cases, outs = [], []
    for _ in range(5):
        shape = _shape(rng, 1, 3, 4)
        leaf = _make(_values(rng, shape), _layout(rng, len(shape)), backend, True)
        w = _upstream(rng, shape)
        cases.append(shape)
        outs.append(raised(lambda leaf=leaf, w=w: _grads(function.apply(leaf), w, [leaf])))
    return {"inputs": cases, "out": outs}


@check("1.4", "MatMul.backward")
@_given_indexing
def matmul_backward(rng: np.random.Generator) -> Any:
    """Matrices and equal batch dimensions (broadcast batches: matmul_broadcast_backward)."""
    function, backend = _function("MatMul"), _numpy_backend()
    cases, outs = [], []
    for _ in range(5):
        a_shape, b_shape = _matmul_shapes(rng, broadcast=False)
        a = _make(_values(rng, a_shape), _layout(rng, len(a_shape)), backend, True)
        b = _make(_values(rng, b_shape), _layout(rng, len(b_shape)), backend, True)
        w = _upstream(rng, (*a_shape[:-1], b_shape[-1]))
        cases.append((a_shape, b_shape))
        outs.append(raised(lambda a=a, b=b, w=w: _grads(function.apply(a, b), w, [a, b])))
    return {"inputs": cases, "out": outs}


@check("1.4")
@_given_indexing
def unbroadcast(rng: np.random.Generator) -> Any:
    """A gradient (in any layout) summed back to a smaller shape it was broadcast from:
    leading dimensions dropped, size-1 dimensions, both, and down to 0-d."""
    from module1.tensor_functions import unbroadcast as unbroadcast_fn

    backend = _numpy_backend()
    cases: list[tuple[Shape, Shape]] = [((2, 3), ()), ((2, 3), (1,)), ((2, 3), (2, 1)),
                                        ((1, 3, 2), (3, 2))]  # fmt: skip
    for _ in range(6):
        big = _shape(rng, 1, 4, 4)
        cut = int(rng.integers(0, len(big) + 1))
        small = tuple(1 if rng.random() < 0.4 else s for s in big[cut:])
        cases.append((big, small if small != big else small[1:]))
    grads = [_make(_values(rng, big, ties=False), _layout(rng, len(big)), backend)
             for big, _ in cases]  # fmt: skip
    outs = [raised(lambda g=g, c=c: unbroadcast_fn(g, c[1]).to_numpy())
            for g, c in zip(grads, cases, strict=True)]  # fmt: skip
    return {"inputs": cases, "out": outs}


@check("1.4")
@_given_indexing
def broadcast_backward(rng: np.random.Generator) -> Any:
    """Integration: binary operations on broadcasting operands (0-d ones too), each
    gradient summed back to its operand's shape."""
    backend = _numpy_backend()
    ops: list[Callable[[Any, Any], Any]] = [
        lambda a, b: _function("Add").apply(a, b), lambda a, b: _function("Mul").apply(a, b),
        lambda a, b: a - b, lambda a, b: a / b, lambda a, b: (a * b).sigmoid() + (a - b).exp() * b,
    ]  # fmt: skip
    cases, outs = [], []
    for k in range(8):
        a_shape, b_shape = _broadcast_pair(rng, 0, 3, 3)
        a = _make(_values(rng, a_shape, -2.0, 2.0), _layout(rng, len(a_shape)), backend, True)
        b = _make(_domain(rng, b_shape, "positive"), _layout(rng, len(b_shape)), backend, True)
        w = _upstream(rng, _given_shape_broadcast(a_shape, b_shape))
        op = ops[k % len(ops)]
        cases.append((k % len(ops), a_shape, b_shape))
        outs.append(raised(lambda a=a, b=b, w=w, op=op: _grads(op(a, b), w, [a, b])))
    return {"inputs": cases, "out": outs}


@check("1.4")
@_given_indexing
def matmul_broadcast_backward(rng: np.random.Generator) -> Any:
    """Integration: batch dimensions that broadcast, and 1-D operands (``matmul``)."""
    from module1.tensor import matmul

    function, backend = _function("MatMul"), _numpy_backend()
    cases, outs = [], []
    for k in range(6):
        a_shape, b_shape = _matmul_shapes(rng)
        if k >= 4:  # vectors: a row on the left, a column on the right
            a_shape = a_shape[-1:] if k == 4 else a_shape
            b_shape = b_shape[-2:-1] if k == 5 else b_shape
        a = _make(_values(rng, a_shape), _layout(rng, len(a_shape)), backend, True)
        b = _make(_values(rng, b_shape), _layout(rng, len(b_shape)), backend, True)
        out_shape = np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape
        w = _upstream(rng, tuple(int(s) for s in out_shape))
        cases.append((a_shape, b_shape))
        apply = matmul if k >= 4 else function.apply
        outs.append(raised(lambda a=a, b=b, w=w, apply=apply: _grads(apply(a, b), w, [a, b])))
    return {"inputs": cases, "out": outs}


@check("1.4")
@_given_indexing
def graph_backward(rng: np.random.Generator) -> Any:
    """Integration: a tensor used many times, reductions, views, and gradients that
    accumulate over two backward calls."""
    backend = _numpy_backend()
    cases, outs = [], []
    for _ in range(3):
        shape = _shape(rng, 2, 3, 3)
        x0 = _values(rng, shape, -1.5, 1.5, ties=False)
        x = _make(x0, _layout(rng, len(shape)), backend, True)
        y = _make(_domain(rng, shape[-1:], "positive"), ((0,), 1), backend, True)
        cases.append(shape)

        def run(x: Any = x, y: Any = y) -> Any:
            t = x.tanh()
            z = x * x + x.exp() * x + t * t + t / y
            flat = (y.log() * x).permute(*reversed(range(x.dims))).contiguous().view(-1)
            (z.sum(0).mean() + z.max() * 0.5 + flat.sum()).backward()
            first = [x.grad.to_numpy(), y.grad.to_numpy()]
            ((x * 3.0).exp().sum() - y.sum()).backward()
            return [first, [x.grad.to_numpy(), y.grad.to_numpy()]]

        outs.append(raised(run))
    return {"inputs": cases, "out": outs}


# -- 1.5 layers and training (on the trusted backend) -------------------------------------


def _reaches(out: Any, targets: Sequence[Any]) -> list[bool]:
    """Whether each target is an input, through the recorded history, of ``out``."""
    seen: dict[int, Any] = {}
    stack = [out]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen[id(v)] = v
        history = getattr(v, "history", None)
        stack.extend(getattr(history, "inputs", ()) or ())
    return [any(v is t for v in seen.values()) for t in targets]


@check("1.5", "Linear.forward")
@_given_indexing
def linear_forward(rng: np.random.Generator) -> Any:
    """Inputs in any layout; the weights come from the given constructor."""
    from module1.tensor_nn import Linear

    backend = _numpy_backend()
    cases, outs = [], []
    for _ in range(6):
        batch, n_in, n_out = (int(k) for k in rng.integers(1, 6, 3))
        layer = Linear(n_in, n_out, np.random.default_rng(int(rng.integers(0, 2**16))), backend)
        x = _make(_values(rng, (batch, n_in)), _layout(rng, 2), backend)
        cases.append((batch, n_in, n_out))
        outs.append(raised(lambda layer=layer, x=x: layer(x).to_numpy()))
    return {"inputs": cases, "out": outs}


@check("1.5", "Linear.forward_graph")
@_given_indexing
def linear_graph(rng: np.random.Generator) -> Any:
    """The output is made from the input, the weight and the bias through recorded
    operations (so training reaches the parameters)."""
    from module1.tensor_nn import Linear

    backend = _numpy_backend()
    cases, outs = [], []
    for _ in range(3):
        batch, n_in, n_out = (int(k) for k in rng.integers(1, 5, 3))
        layer = Linear(n_in, n_out, np.random.default_rng(int(rng.integers(0, 2**16))), backend)
        x = _make(_values(rng, (batch, n_in)), _layout(rng, 2), backend, True)
        cases.append((batch, n_in, n_out))

        def run(layer: Any = layer, x: Any = x) -> Any:
            out = layer(x)
            return [out.requires_grad,
                    _reaches(out, [x, layer.weight.value, layer.bias.value])]  # fmt: skip

        outs.append(raised(run))
    return {"inputs": cases, "out": outs}


@check("1.5", "MLP.forward")
@_given_indexing
def mlp_forward(rng: np.random.Generator) -> Any:
    """ReLU between the layers, none after the last; one to three layers."""
    from module1.tensor_nn import MLP

    backend = _numpy_backend()
    cases, outs = [], []
    for k in range(6):
        sizes = tuple(int(s) for s in rng.integers(1, 6, 2 + k % 3))
        model = MLP(sizes, seed=int(rng.integers(0, 2**16)), backend=backend)
        batch = int(rng.integers(1, 6))
        x = _make(_values(rng, (batch, sizes[0]), -3.0, 3.0), _layout(rng, 2), backend)
        cases.append((sizes, batch))
        outs.append(raised(lambda model=model, x=x: model(x).to_numpy()))
    return {"inputs": cases, "out": outs}


@check("1.5", "MLP.forward_graph")
@_given_indexing
def mlp_graph(rng: np.random.Generator) -> Any:
    """Every parameter of every layer is reached from the output."""
    from module1.tensor_nn import MLP

    backend = _numpy_backend()
    cases, outs = [], []
    for k in range(3):
        sizes = tuple(int(s) for s in rng.integers(1, 5, 2 + k))
        model = MLP(sizes, seed=int(rng.integers(0, 2**16)), backend=backend)
        x = _make(_values(rng, (3, sizes[0])), _layout(rng, 2), backend)
        cases.append(sizes)

        def run(model: Any = model, x: Any = x) -> Any:
            return _reaches(model(x), [p.value for p in model.parameters()])

        outs.append(raised(run))
    return {"inputs": cases, "out": outs}


def _bce_inputs(rng: np.random.Generator, shape: Shape) -> tuple[np.ndarray, np.ndarray]:
    z = np.round(rng.normal(scale=4.0, size=shape), 3)
    z = np.where(rng.random(shape) < 0.15, rng.choice([0.0, 1000.0, -1000.0, 40.0], shape), z)
    y = rng.integers(0, 2, shape).astype(float)
    if rng.random() < 0.3:  # soft targets
        y = np.round(rng.uniform(0.0, 1.0, shape), 3)
    return np.asarray(z, dtype=float).reshape(shape), np.asarray(y, dtype=float).reshape(shape)


@check("1.5")
@_given_indexing
def binary_cross_entropy_with_logits(rng: np.random.Generator) -> Any:
    """Moderate logits and huge ones (±1000, where a naive formula gives inf or nan)."""
    from module1.tensor_nn import binary_cross_entropy_with_logits as bce

    backend = _numpy_backend()
    cases, outs = [], []
    for k in range(7):
        shape = [(6, 1), (5,), (2, 3), (1, 1)][k % 4] if k < 6 else (4, 1)
        z, y = _bce_inputs(rng, shape)
        if k == 6:  # every logit huge, every prediction right or wrong by far
            z = np.array([[1000.0], [-1000.0], [1000.0], [-1000.0]])
            y = np.array([[1.0], [0.0], [0.0], [1.0]])
        logits = _make(z, _layout(rng, len(shape)), backend)
        targets = _make(y, _layout(rng, len(shape)), backend)
        cases.append(shape)
        outs.append(raised(lambda a=logits, b=targets: bce(a, b).to_numpy()))
    return {"inputs": cases, "out": outs}


@check("1.5")
@_given_indexing
def bce_gradient(rng: np.random.Generator) -> Any:
    """The gradient of the loss in the logits: ``(sigmoid(z) - y) / n``, finite for huge
    logits, and ``(1/2 - y) / n`` at exactly ``z = 0``."""
    from module1.tensor_nn import binary_cross_entropy_with_logits as bce

    backend = _numpy_backend()
    cases, outs = [], []
    for k in range(4):
        shape = [(6, 1), (4,), (2, 3), (5, 1)][k]
        z, y = _bce_inputs(rng, shape)
        z.reshape(-1)[0] = 0.0
        logits = _make(z, _layout(rng, len(shape)), backend, True)
        targets = _make(y, _layout(rng, len(shape)), backend)
        cases.append(shape)

        def run(logits: Any = logits, targets: Any = targets) -> Any:
            bce(logits, targets).backward()
            return logits.grad.to_numpy()

        outs.append(raised(run))
    return {"inputs": cases, "out": outs}


@check("1.5")
@_given_indexing
def train_steps(rng: np.random.Generator) -> Any:
    """Integration: a few full-batch gradient steps of an MLP on the loss (the update
    itself is done here, in NumPy): the losses and the final parameters."""
    from module1.tensor import from_numpy
    from module1.tensor_nn import MLP
    from module1.tensor_nn import binary_cross_entropy_with_logits as bce

    backend = _numpy_backend()
    points = np.round(rng.uniform(-1.0, 1.0, (12, 2)), 3)
    labels = (points[:, :1] + 0.5 * points[:, 1:] > 0.1).astype(float)
    model = MLP((2, 4, 3, 1), seed=int(rng.integers(0, 2**16)), backend=backend)

    def run() -> Any:
        X, y = from_numpy(points, backend), from_numpy(labels, backend)
        losses = []
        for _ in range(4):
            for p in model.parameters():
                p.value.zero_grad_()
            loss = bce(model(X), y)
            loss.backward()
            losses.append(loss.item())
            for p in model.parameters():
                value = p.value.to_numpy() - 0.5 * p.value.grad.to_numpy()
                p.value.data = from_numpy(value, backend)
        return {"losses": losses, "parameters": [p.value.to_numpy() for p in model.parameters()]}

    return raised(run)


# -- 1.6 indexing: views, gather, scatter-add --------------------------------------------


def _basic_key(rng: np.random.Generator, shape: Shape) -> tuple[Any, ...]:
    """A user's basic key for ``shape``: ints (negative too), slices with steps 1 to 3
    and bounds past the ends, None; sometimes an Ellipsis for trailing dimensions."""
    key: list[Any] = []
    for size in shape:
        kind = rng.choice(["int", "slice", "slice", "none"])
        if kind == "int":
            key.append(int(rng.integers(-size, size)))
            continue
        if kind == "none":
            key.append(None)
        bounds = [None if rng.random() < 0.3 else int(rng.integers(-size - 1, size + 2))
                  for _ in range(2)]  # fmt: skip
        step = None if rng.random() < 0.3 else int(rng.integers(1, 4))
        key.append(slice(bounds[0], bounds[1], step))
    if rng.random() < 0.3:
        cut = int(rng.integers(0, len(key) + 1))
        key = [*key[:cut], Ellipsis]
    return tuple(key)


def _upstream_on(rng: np.random.Generator, shape: Shape, backend: Any) -> Any:
    """:func:`_upstream` on ``backend`` (a gradient's backward runs on its backend)."""
    values = _values(rng, shape, -2.0, 2.0, ties=False)
    return _make(values, _layout(rng, len(shape)), backend)


def _index_backend() -> Any:
    """The NumPy backend with the student's gather and scatter-add (SimpleOps, 1.6): the
    1.6 checks through tensors then run no kernel of 1.3."""
    if "index" in _BACKENDS:
        return _BACKENDS["index"]
    from module1.tensor_ops import SimpleOps, TensorBackend

    numpy_ops = _numpy_backend().ops

    class IndexOps(numpy_ops):  # type: ignore[misc, valid-type]
        gather = SimpleOps.gather
        scatter_add = SimpleOps.scatter_add

    _BACKENDS["index"] = TensorBackend(IndexOps)
    return _BACKENDS["index"]


@check("1.6")
def index_view(rng: np.random.Generator) -> Any:
    """The view's offset, shape and strides (those of its dimensions longer than 1:
    the others' strides never matter) for normalised keys over gapped, permuted
    layouts."""
    from module1.indexing import parse_key
    from module1.tensor_data import index_view as view

    cases = []
    for _ in range(14):
        shape = _shape(rng, 1, 4, 5)
        _, strides = _strided(np.zeros(shape), _layout(rng, len(shape)))
        key = parse_key(shape, _basic_key(rng, shape)).basic
        cases.append((shape, strides, key))

    def run(shape: Shape, strides: tuple[int, ...], key: tuple[Any, ...]) -> Any:
        offset, out_shape, out_strides = view(shape, strides, key)
        kept = [int(s) for s, n in zip(out_strides, out_shape, strict=True) if int(n) > 1]
        return int(offset), [int(n) for n in out_shape], kept

    inputs = [(s, st, repr(k)) for s, st, k in cases]
    return {"inputs": inputs, "out": [raised(lambda c=c: run(*c)) for c in cases]}


@check("1.6", "Tensor.__getitem__basic")
@_given_indexing
def getitem_basic(rng: np.random.Generator) -> Any:
    """``x[key]`` for basic keys: the values, whether the result shares x's storage, and
    x's gradient for a random upstream gradient; then ``x[key] = v`` (no graph)."""
    backend = _index_backend()
    cases = []
    for _ in range(8):
        shape = _shape(rng, 1, 3, 4, min_size=2)
        key = _basic_key(rng, shape)
        values = _values(rng, shape)
        layout = _layout(rng, len(shape))
        want_shape = np.zeros(shape)[key].shape
        upstream = _upstream_on(rng, want_shape, backend)
        fill = np.round(rng.uniform(-9, 9, want_shape[-1:] if want_shape else ()), 3)
        cases.append((shape, key, values, layout, upstream, fill))

    def run(shape: Shape, key: Any, values: np.ndarray, layout: Layout, upstream: Any,
            fill: np.ndarray) -> Any:  # fmt: skip
        from module0.autodiff import no_grad
        from module1.tensor import from_numpy

        x = _make(values, layout, backend, True)
        out = x[key]
        shared = bool(np.shares_memory(out._tensor._storage, x._tensor._storage))
        value = out.to_numpy()
        out.backward(upstream)
        with no_grad():
            x[key] = from_numpy(fill, backend)
        return {"value": value, "shares": shared, "grad": x.grad.to_numpy(), "after": x.to_numpy()}

    inputs = [(c[0], repr(c[1])) for c in cases]
    return {"inputs": inputs, "out": [raised(lambda c=c: run(*c)) for c in cases]}


def _ordinal_case(rng: np.random.Generator) -> tuple[Shape, Layout, np.ndarray]:
    shape = _shape(rng, 1, 3, 4)
    size = math.prod(shape)
    count = int(rng.integers(0, 2 * size + 1))
    picks = rng.integers(0, size, count)
    if count > 1:  # repeats, always
        picks[-1] = picks[0]
    return shape, _layout(rng, len(shape)), picks.astype(np.int64)


@check("1.6")
@_given_indexing
def tensor_gather(rng: np.random.Generator) -> Any:
    """The kernel called directly: inputs in gapped, permuted layouts, ordinals with
    repeats (an empty list too); the output starts as a marker value."""
    from module1.tensor_ops import tensor_gather as gather

    cases = [_ordinal_case(rng) for _ in range(10)]

    def run(shape: Shape, layout: Layout, ordinals: np.ndarray) -> Any:
        values = np.arange(1.0, 1.0 + math.prod(shape)).reshape(shape)
        storage, strides = _strided(values, layout)
        out = np.full(len(ordinals), _UNSET)
        gather(out, storage, _ints(shape), _ints(strides), ordinals)
        return out

    inputs = [(s, la, o.tolist()) for s, la, o in cases]
    return {"inputs": inputs, "out": [raised(lambda c=c: run(*c)) for c in cases]}


@check("1.6")
@_given_indexing
def tensor_scatter_add(rng: np.random.Generator) -> Any:
    """The kernel called directly: the gradient in a gapped, permuted layout of the
    ordinals' shape, repeated ordinals (their entries must add up)."""
    from module1.tensor_ops import tensor_scatter_add as scatter_add

    cases = []
    for _ in range(10):
        shape, _, ordinals = _ordinal_case(rng)
        rows = int(rng.integers(1, 3)) if len(ordinals) % 2 == 0 and len(ordinals) else 1
        d_shape = (rows, len(ordinals) // rows)
        cases.append((shape, ordinals, _values(rng, d_shape), _layout(rng, 2)))

    def run(shape: Shape, ordinals: np.ndarray, d: np.ndarray, layout: Layout) -> Any:
        storage, strides = _strided(d, layout)
        out = np.zeros(math.prod(shape))
        scatter_add(out, storage, _ints(d.shape), _ints(strides), ordinals)
        return out

    inputs = [(s, o.tolist()) for s, o, _, _ in cases]
    return {"inputs": inputs, "out": [raised(lambda c=c: run(*c)) for c in cases]}


@check("1.6", "Tensor.__getitem__advanced")
@_given_indexing
def getitem_advanced(rng: np.random.Generator) -> Any:
    """``x[key]`` for integer lists (repeats, negatives), tensors of whole numbers and
    boolean masks, mixed with slices: values and x's gradient (repeats add up)."""
    from module1.tensor import from_numpy

    backend = _index_backend()
    cases = []
    for i in range(8):
        shape = _shape(rng, 2, 3, 4, min_size=2)
        picks = [int(v) for v in rng.integers(-shape[0], shape[0], int(rng.integers(1, 6)))]
        kinds: list[Any] = [
            (picks,),
            (slice(None), [0, -1, 0]),
            (np.asarray(rng.random(shape[:2]) < 0.5),),
            (from_numpy(np.array([*picks, -1], dtype=np.float64), backend), slice(1, None)),
        ]
        key = kinds[i % len(kinds)]
        values = _values(rng, shape)
        want_shape = np.zeros(shape)[
            tuple(k.to_numpy().astype(int) if hasattr(k, "_tensor") else k for k in key)
        ].shape
        cases.append((shape, key, values, _layout(rng, len(shape)),
                      _upstream_on(rng, want_shape, backend)))  # fmt: skip

    def run(shape: Shape, key: Any, values: np.ndarray, layout: Layout, upstream: Any) -> Any:
        x = _make(values, layout, backend, True)
        out = x[key]
        value = out.to_numpy()
        out.backward(upstream)
        return {"value": value, "grad": x.grad.to_numpy()}

    inputs = [(c[0], repr(c[1])[:80]) for c in cases]
    return {"inputs": inputs, "out": [raised(lambda c=c: run(*c)) for c in cases]}
