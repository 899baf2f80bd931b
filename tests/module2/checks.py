"""Graded checks of stage 2 (see ``autograder/checks.py``): each calls the student's code
on inputs drawn from ``rng`` and returns what came back; the grader compares that with
what the reference returns for the same inputs, outside the student's process.

The kernels are called directly, on NumPy storages built here: layouts the backend never
builds itself are reached too (outputs permuted or with gaps, inputs stored alike or
not), and no other task's kernel runs (2.2's checks never map, 2.3's never reach 2.2's
kernel). Every output slot starts as nan, so an entry left unwritten shows, and each
answer says whether the slots between entries (the gaps) were left alone. Large cases
have at least 32768 outputs or multiply-adds (the reference's parallel cut-off) and
sizes that no block or chunk size divides, so a parallel loop that drops or repeats its
last piece shows. The optimizer checks set gradients by hand on tensors of the simple
backend: no kernel of 2.1 or 2.2 runs there either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autograder.checks import Raised, Timed, check, raised

Shape = tuple[int, ...]
Layout = tuple[tuple[int, ...], int]
"""How a tensor sits in its storage: the order its dimensions are stored in (the first
one outermost) and the step between neighbouring slots (2 leaves a gap of nan)."""

# Tolerances: entry-by-entry kernels (map, zip, the optimizer steps) apply the same float
# function to the same values: rtol 1e-9. Folds, matrix products and gradients may sum
# in another order in a correct kernel: rtol 1e-8, atol 1e-10 (float64 rounding of these
# small sums stays below 1e-12).


# -- storages, layouts and values (NumPy alone) -------------------------------------------


def _ints(values: Sequence[int]) -> np.ndarray:
    """Sizes or strides as the int32 array the kernels take."""
    return np.array(values, dtype=np.int32)


def _layout(rng: np.random.Generator, ndim: int) -> Layout:
    """A random order of the dimensions and a step of 1 or 2."""
    return tuple(int(d) for d in rng.permutation(ndim)), int(rng.integers(1, 3))


def _plain(ndim: int, step: int = 1) -> Layout:
    return tuple(range(ndim)), step


def _reversed(ndim: int, step: int = 1) -> Layout:
    return tuple(reversed(range(ndim))), step


def _strided(values: np.ndarray, layout: Layout, extra: int = 0) -> tuple[np.ndarray, Shape]:
    """A storage holding ``values`` in ``layout`` (gaps and ``extra`` trailing slots hold
    nan), and its strides."""
    order, step = layout
    base = np.ascontiguousarray(np.transpose(values, order), dtype=np.float64)
    storage = np.full(max(base.size * step, 1) + extra, np.nan)
    storage[: base.size * step : step] = base.reshape(-1)
    base_strides = [s // 8 * step for s in base.strides]
    strides = tuple(base_strides[int(k)] for k in np.argsort(order))
    return storage, strides


def _read(storage: np.ndarray, shape: Shape, strides: Sequence[int]) -> np.ndarray:
    """A copy of the values ``storage`` holds under ``shape`` and ``strides``."""
    view = np.lib.stride_tricks.as_strided(storage, shape, tuple(int(s) * 8 for s in strides))
    return np.array(view, dtype=np.float64)


def _gaps_untouched(storage: np.ndarray, shape: Shape, strides: Sequence[int]) -> bool:
    """True when every slot of ``storage`` that the layout does not use is still nan."""
    used = np.zeros(storage.size, dtype=bool)
    positions = np.zeros(shape, dtype=np.int64)
    for dim, stride in enumerate(strides):
        index = np.arange(shape[dim]).reshape([-1 if d == dim else 1 for d in range(len(shape))])
        positions = positions + index * int(stride)
    used[positions.reshape(-1)] = True
    return bool(np.isnan(storage[~used]).all())


LARGE = 4096
"""Results with more entries than this come back as a digest (:func:`_compact`)."""


def _compact(values: np.ndarray) -> Any:
    """``values``, or for a large result a digest that keeps every entry in play: its
    shape, 256 of its entries (the first and last 64, 128 at fixed random places) and
    4 sums of all entries with fixed random weights."""
    flat = values.reshape(-1)
    if flat.size <= LARGE:
        return values
    fixed = np.random.default_rng(flat.size)
    ends = np.r_[0:64, flat.size - 64 : flat.size]
    picks = np.unique(np.concatenate([ends, fixed.choice(flat.size, 128, replace=False)]))
    return {
        "shape": tuple(int(n) for n in values.shape),
        "sample": flat[picks],
        "weighted_sums": fixed.normal(size=(4, flat.size)) @ flat,
    }


def _array(values: np.ndarray) -> Any:
    """``values`` as an answer (a digest when large), or, if it holds nan or inf, an
    error that says so (the answers' encoding reads back no non-finite NumPy entry)."""
    values = np.asarray(values, dtype=np.float64)
    if not np.isfinite(values).all():
        return Raised("nan or inf in the result")
    return _compact(values)


def _output(storage: np.ndarray, shape: Shape, strides: Sequence[int]) -> dict[str, Any]:
    """What a kernel wrote into a nan-filled output: how many entries it left unwritten
    (nan), the values (unwritten ones as 0; a digest when large), and whether every
    other slot of the storage is still nan."""
    values = _read(storage, shape, strides)
    unwritten = np.isnan(values)
    return {
        "unwritten": int(np.count_nonzero(unwritten)),
        "values": _array(np.where(unwritten, 0.0, values)),
        "gaps_untouched": _gaps_untouched(storage, shape, strides),
    }


TIES = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0])


def _draw(rng: np.random.Generator, shape: Shape, kind: str = "values") -> np.ndarray:
    """Entries for an operation's domain: ``values`` (in +-10, a third of them from a
    few repeated numbers, for ties), ``positive``, ``nonzero``, ``near`` (within 0.03
    of 0: pairs either side of is_close's 1e-2), ``exponents``, ``unit`` (magnitudes
    0.8 to 1.25, for products)."""
    if kind == "positive":
        x = rng.uniform(0.1, 10.0, shape)
    elif kind == "nonzero":
        x = rng.uniform(0.25, 10.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif kind == "near":
        x = rng.uniform(-0.03, 0.03, shape)
    elif kind == "exponents":
        x = rng.uniform(-3.0, 3.0, shape)
    elif kind == "unit":
        x = rng.uniform(0.8, 1.25, shape) * rng.choice([-1.0, 1.0], shape)
    else:
        x = rng.uniform(-10.0, 10.0, shape)
        x = np.where(rng.random(shape) < 0.35, rng.choice(TIES, shape), x)
    return np.array(x, dtype=np.float64).reshape(shape)


def _shape(rng: np.random.Generator, low: int = 1, high: int = 4, size: int = 5) -> Shape:
    return tuple(int(n) for n in rng.integers(1, size + 1, int(rng.integers(low, high + 1))))


def _broadcast_pair(
    rng: np.random.Generator, min_dims: int = 1, max_dims: int = 4, max_size: int = 5
) -> tuple[Shape, Shape]:
    """Two shapes that broadcast: one list of sizes, then each side replaces some sizes
    with 1 and may drop leading dimensions (either side, or neither, is the smaller)."""
    dims = int(rng.integers(min_dims, max_dims + 1))
    sizes = [int(n) for n in rng.integers(1, max_size + 1, dims)]

    def side() -> Shape:
        ones = rng.random(dims) < 0.3
        cut = int(rng.integers(0, dims + 1)) if rng.random() < 0.5 else 0
        return tuple(1 if one else n for n, one in zip(sizes, ones, strict=True))[cut:]

    return side(), side()


def _broadcast(*shapes: Shape) -> Shape:
    return tuple(int(n) for n in np.broadcast_shapes(*shapes))


def _where(shape: Shape, layout: Layout) -> str:
    order, step = layout
    return f"{shape} stored in order {order}, step {step}"


Run = tuple[str, Callable[..., Any], tuple[Any, ...]]
"""One case of a check: its description, and a function with the arguments to call it
with."""


def _cases(runs: list[Run]) -> dict[str, Any]:
    """Each case run apart (an error fails that case alone), with its description as
    the failure's context."""
    return {
        "inputs": [what for what, _, _ in runs],
        "out": [raised(_call(f, args)) for _, f, args in runs],
    }


def _call(f: Callable[..., Any], args: tuple[Any, ...]) -> Callable[[], Any]:
    return lambda: f(*args)


# =========================================================================================
# Task 2.1: map, zip and reduce
# =========================================================================================

UNARY = [("neg", "values"), ("sigmoid", "values"), ("relu", "values"), ("log", "positive"),
         ("exp", "values"), ("id", "values"), ("inv", "nonzero"), ("tanh", "values")]  # fmt: skip
"""Each op code of the map kernel (``OP_<NAME>``) and its entries."""

BINARY = [("add", "values", "values"), ("mul", "values", "values"), ("lt", "values", "values"),
          ("eq", "values", "values"), ("max", "values", "values"),
          ("pow", "positive", "exponents"), ("relu_back", "values", "values"),
          ("log_back", "nonzero", "values"), ("inv_back", "nonzero", "values"),
          ("is_close", "near", "near")]  # fmt: skip
"""Each op code of the zip kernel and the entries of its two inputs."""


def _op(name: str) -> int:
    from module2 import compiled_ops

    return int(getattr(compiled_ops, "OP_" + name.upper()))


def _unchanged(storages: list[np.ndarray], copies: list[np.ndarray]) -> bool:
    return all(np.array_equal(s, c, equal_nan=True) for s, c in zip(storages, copies, strict=True))


def _map(
    name: str, x: np.ndarray, layout: Layout, out_shape: Shape, out_layout: Layout, extra: int = 0
) -> dict[str, Any]:
    """``tensor_map_kernel`` of ``x`` (stored in ``layout``) into a nan-filled output."""
    from module2.fast_ops import tensor_map_kernel

    storage, strides = _strided(x, layout)
    before = storage.copy()
    out, out_strides = _strided(np.zeros(out_shape), out_layout, extra)
    out[:] = np.nan
    tensor_map_kernel(_op(name), out, _ints(out_shape), _ints(out_strides),
                      storage, _ints(x.shape), _ints(strides))  # fmt: skip
    result = _output(out, out_shape, out_strides)
    result["input_unchanged"] = _unchanged([storage], [before])
    return result


def _zip(
    name: str,
    x: np.ndarray, x_layout: Layout,
    y: np.ndarray, y_layout: Layout,
    out_shape: Shape, out_layout: Layout, extra: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """``tensor_zip_kernel`` of ``x`` and ``y`` into a nan-filled output."""
    from module2.fast_ops import tensor_zip_kernel

    a, a_strides = _strided(x, x_layout)
    b, b_strides = _strided(y, y_layout)
    before = [a.copy(), b.copy()]
    out, out_strides = _strided(np.zeros(out_shape), out_layout, extra)
    out[:] = np.nan
    tensor_zip_kernel(_op(name), out, _ints(out_shape), _ints(out_strides),
                      a, _ints(x.shape), _ints(a_strides),
                      b, _ints(y.shape), _ints(b_strides))  # fmt: skip
    result = _output(out, out_shape, out_strides)
    result["inputs_unchanged"] = _unchanged([a, b], before)
    return result


@check("2.1", rtol=1e-9, atol=1e-12)
def tensor_map_kernel(rng: np.random.Generator) -> Any:
    """Every unary op code, the input broadcast to the output, both in random layouts."""
    runs: list[Run] = []
    for name, kind in UNARY * 2:
        in_shape, other = _broadcast_pair(rng)
        out_shape = _broadcast(in_shape, other)
        x = _draw(rng, in_shape, kind)
        layout, out_layout = _layout(rng, len(in_shape)), _layout(rng, len(out_shape))
        what = f"{name}: {_where(in_shape, layout)} into {_where(out_shape, out_layout)}"
        runs.append((what, _map, (name, x, layout, out_shape, out_layout)))
    return _cases(runs)


@check("2.1", rtol=1e-9, atol=1e-12)
def tensor_zip_kernel(rng: np.random.Generator) -> Any:
    """Every binary op code, both inputs broadcast to the output, all in random layouts."""
    runs: list[Run] = []
    for name, a_kind, b_kind in BINARY * 2:
        a_shape, b_shape = _broadcast_pair(rng)
        out_shape = _broadcast(a_shape, b_shape)
        x, y = _draw(rng, a_shape, a_kind), _draw(rng, b_shape, b_kind)
        lx, ly = _layout(rng, len(a_shape)), _layout(rng, len(b_shape))
        lo = _layout(rng, len(out_shape))
        what = f"{name}: a {_where(a_shape, lx)}, b {_where(b_shape, ly)}, "
        what += f"out {_where(out_shape, lo)}"
        runs.append((what, _zip, (name, x, lx, y, ly, out_shape, lo)))
    return _cases(runs)


def _same_layout_cases(rng: np.random.Generator) -> list[tuple[Shape, Layout]]:
    """Shapes of 2 to 4 dimensions, stored contiguous, permuted, permuted with gaps."""
    cases = []
    for kind in ("contiguous", "permuted", "gaps", "permuted", "gaps"):
        shape = _shape(rng, 2, 4)
        order = tuple(int(d) for d in rng.permutation(len(shape)))
        if kind == "contiguous":
            order = tuple(range(len(shape)))
        elif order == tuple(range(len(shape))):
            order = tuple(reversed(order))
        cases.append((shape, (order, 2 if kind == "gaps" else 1)))
    return cases


@check("2.1", rtol=1e-9, atol=1e-12)
def tensor_map_kernel_same_layout(rng: np.random.Generator) -> Any:
    """Output and input with the same shape and strides: once over storages that hold
    exactly the entries, once into an output with one spare slot; and, with the same
    storage sizes, different strides (a permuted input or output)."""
    runs: list[Run] = []
    for shape, layout in _same_layout_cases(rng):
        x = _draw(rng, shape, "nonzero")
        for name in ("exp", "inv", "neg"):
            for extra in (0, 1):
                what = f"{name}: {_where(shape, layout)} into the same, {extra} spare slot(s)"
                runs.append((what, _map, (name, x, layout, shape, layout, extra)))
        plain, other = _plain(len(shape)), _reversed(len(shape))
        for lx, lo in ((other, plain), (plain, other)):
            what = f"id: {_where(shape, lx)} into {_where(shape, lo)}"
            runs.append((what, _map, ("id", x, lx, shape, lo)))
    return _cases(runs)


@check("2.1", rtol=1e-9, atol=1e-12)
def tensor_zip_kernel_same_layout(rng: np.random.Generator) -> Any:
    """As ``tensor_map_kernel_same_layout``: both inputs and the output alike, then one
    input or the output stored another way."""
    runs: list[Run] = []
    for shape, layout in _same_layout_cases(rng):
        x, y = _draw(rng, shape, "nonzero"), _draw(rng, shape)
        for name in ("add", "mul", "log_back"):
            for extra in (0, 1):
                what = f"{name}: all {_where(shape, layout)}, {extra} spare slot(s)"
                runs.append((what, _zip, (name, x, layout, y, layout, shape, layout, extra)))
        plain, other = _plain(len(shape)), _reversed(len(shape))
        for lx, ly, lo in [(other, plain, plain), (plain, other, plain), (other, other, plain),
                           (plain, plain, other)]:  # fmt: skip
            what = f"add: {shape}, a in order {lx[0]}, b in order {ly[0]}, out in order {lo[0]}"
            runs.append((what, _zip, ("add", x, lx, y, ly, shape, lo)))
    return _cases(runs)


BIG = (211, 199)
"""41,989 entries: no block or chunk size divides either dimension."""
LONG = 40_961
"""A prime."""


@check("2.1", rtol=1e-9, atol=1e-12)
def tensor_map_kernel_large(rng: np.random.Generator) -> Any:
    """At least 32768 outputs: aligned, broadcast along either dimension, into outputs
    stored transposed or with gaps."""
    cases: list[tuple[str, Shape, Layout, Shape, Layout]] = [
        ("exp", (LONG,), _plain(1), (LONG,), _plain(1)),
        ("relu", BIG, _reversed(2), BIG, _reversed(2)),
        ("sigmoid", (BIG[0], 1), _plain(2), BIG, _reversed(2, 2)),
        ("neg", (7, 1), _plain(2), (3, 7, 1601), _plain(3, 2)),
    ]
    runs: list[Run] = []
    for name, in_shape, layout, out_shape, out_layout in cases:
        x = rng.uniform(-3.0, 3.0, in_shape)
        what = f"{name}: {_where(in_shape, layout)} into {_where(out_shape, out_layout)}"
        runs.append((what, _map, (name, x, layout, out_shape, out_layout)))
    return _cases(runs)


@check("2.1", rtol=1e-9, atol=1e-12)
def tensor_zip_kernel_large(rng: np.random.Generator) -> Any:
    """At least 32768 outputs: aligned, and broadcast either way, in several layouts."""
    cases: list[tuple[str, Shape, Layout, Shape, Layout, Layout]] = [
        ("add", (LONG,), _plain(1), (LONG,), _plain(1), _plain(1)),
        ("mul", BIG, _reversed(2, 2), BIG, _reversed(2, 2), _reversed(2, 2)),
        ("max", BIG, _plain(2), (BIG[1],), _plain(1), _reversed(2)),
        ("add", (BIG[0], 1), _reversed(2), BIG, _plain(2), _plain(2, 2)),
        ("mul", (3, 1, 2003), _plain(3), (7, 1), _reversed(2), _plain(3)),
    ]
    runs: list[Run] = []
    for name, a_shape, la, b_shape, lb, lo in cases:
        x, y = rng.uniform(-3.0, 3.0, a_shape), rng.uniform(-3.0, 3.0, b_shape)
        out_shape = _broadcast(a_shape, b_shape)
        what = f"{name}: a {_where(a_shape, la)}, b {_where(b_shape, lb)}, "
        what += f"out {_where(out_shape, lo)}"
        runs.append((what, _zip, (name, x, la, y, lb, out_shape, lo)))
    return _cases(runs)


REDUCE = [("add", "values", "values"), ("mul", "unit", "unit"), ("max", "values", "values")]
"""Op codes of the reduce kernel, the entries and the start values."""


def _reduce(
    name: str, x: np.ndarray, layout: Layout, dim: int, start: np.ndarray, out_layout: Layout,
    parts: int,
) -> dict[str, Any]:  # fmt: skip
    """``tensor_reduce_kernel`` of ``x`` along ``dim`` into an output holding ``start``."""
    from module2.fast_ops import tensor_reduce_kernel

    storage, strides = _strided(x, layout)
    before = storage.copy()
    out, out_strides = _strided(start, out_layout)
    tensor_reduce_kernel(_op(name), out, _ints(start.shape), _ints(out_strides),
                         storage, _ints(x.shape), _ints(strides), dim, parts)  # fmt: skip
    result = _output(out, start.shape, out_strides)
    result["input_unchanged"] = _unchanged([storage], [before])
    return result


@check("2.1", rtol=1e-8, atol=1e-10)
def tensor_reduce_kernel(rng: np.random.Generator) -> Any:
    """Sum, product and max along any dimension, in random layouts, folded into start
    values already in ``out`` (not the op's identity), with ``parts`` hints of 1 to 64
    (a kernel may ignore them); some dimensions of length 50."""
    runs: list[Run] = []
    for name, kind, start_kind in REDUCE * 6:
        sizes = list(_shape(rng, 1, 4))
        dim = int(rng.integers(0, len(sizes)))
        if rng.random() < 0.4:
            sizes[dim] = 50
        shape = tuple(sizes)
        out_shape = tuple(1 if d == dim else n for d, n in enumerate(shape))
        x, start = _draw(rng, shape, kind), _draw(rng, out_shape, start_kind)
        layout, out_layout = _layout(rng, len(shape)), _layout(rng, len(shape))
        parts = int(rng.choice([1, 2, 3, 7, 64]))
        what = f"{name} over dim {dim} of {_where(shape, layout)}, "
        what += f"out in order {out_layout[0]}, step {out_layout[1]}, parts {parts}"
        runs.append((what, _reduce, (name, x, layout, dim, start, out_layout, parts)))
    return _cases(runs)


@check("2.1", rtol=1e-8, atol=1e-10)
def tensor_reduce_kernel_examples(rng: np.random.Generator) -> Any:
    """A 3 x 4 matrix stored column by column, reduced along each dimension with every
    ``parts`` hint up to the length, for each op."""
    x = rng.integers(-9, 10, (3, 4)).astype(np.float64)
    runs: list[Run] = []
    for dim, parts in [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3), (1, 4)]:
        out_shape = (1, 4) if dim == 0 else (3, 1)
        for name in ("add", "mul", "max"):
            start = np.full(out_shape, float(rng.choice([100.0, -0.5, 9.5, -20.0])))
            what = f"{name} over dim {dim}, parts {parts}, start {start.flat[0]}"
            runs.append((what, _reduce, (name, x, _reversed(2), dim, start, _plain(2), parts)))
    return _cases(runs)


@check("2.1", rtol=1e-8, atol=1e-10)
def tensor_reduce_kernel_large(rng: np.random.Generator) -> Any:
    """Along a middle dimension of a contiguous tensor, along the last, few long folds
    cut into parts, many short folds of a transposed input, and with gaps; sums and
    maxima of positive entries (no cancellation) into start values."""
    cases: list[tuple[Shape, int, Layout, int]] = [
        ((3, 101, 113), 1, _plain(3), 1),
        ((301, 37, 3), 1, _plain(3), 1),
        ((37, 1031), 1, _plain(2), 1),
        ((3, 20011), 1, _plain(2), 4),
        ((20011, 3), 0, _plain(2), 7),
        ((1511, 29), 1, _reversed(2), 1),
        ((29, 1511), 0, _plain(2, 2), 1),
    ]
    runs: list[Run] = []
    for shape, dim, layout, parts in cases:
        x = rng.uniform(0.5, 1.5, shape)
        x.reshape(-1)[int(rng.integers(x.size))] = 9.0  # one maximum somewhere inside
        out_shape = tuple(1 if d == dim else n for d, n in enumerate(shape))
        out_layout = _reversed(len(shape), 2)
        for name in ("add", "max"):
            start = rng.uniform(-2.0, 2.0, out_shape)
            what = f"{name} over dim {dim} of {_where(shape, layout)}, parts {parts}"
            runs.append((what, _reduce, (name, x, layout, dim, start, out_layout, parts)))
    return _cases(runs)


@check("2.1", rtol=1e-8, atol=1e-10)
def tensor_reduce_kernel_contiguous(rng: np.random.Generator) -> Any:
    """Input and output both contiguous, as the backend makes them (the large cases
    above write into outputs with gaps): along the first or a middle dimension, where
    a kernel may fold blocks of neighbouring outputs side by side (widths of outputs
    that no block size divides), and the long folds of a whole tensor's sum cut into
    the backend's ``parts``; small ones along every dimension, each op."""
    cases: list[tuple[Shape, int, int]] = [
        ((211, 199), 0, 1),
        ((1000, 1009), 0, 1),
        ((3, 101, 113), 1, 1),
        ((7, 5, 1031), 1, 1),
        ((301, 37, 3), 0, 1),
        ((50_000, 4), 0, 1),
        ((200_003,), 0, 48),
        ((2, 100_001), 1, 24),
    ]
    runs: list[Run] = []
    for shape, dim, parts in cases:
        x = rng.uniform(0.5, 1.5, shape)
        x.reshape(-1)[int(rng.integers(x.size))] = 9.0  # one maximum somewhere inside
        out_shape = tuple(1 if d == dim else n for d, n in enumerate(shape))
        plain = _plain(len(shape))
        for name in ("add", "max"):
            start = rng.uniform(-2.0, 2.0, out_shape)
            what = f"{name} over dim {dim} of {shape}, contiguous into contiguous, parts {parts}"
            runs.append((what, _reduce, (name, x, plain, dim, start, plain, parts)))
    shape = _shape(rng, 3, 3, 6)
    for dim in range(3):
        out_shape = tuple(1 if d == dim else n for d, n in enumerate(shape))
        for name, kind, start_kind in REDUCE:
            x, start = _draw(rng, shape, kind), _draw(rng, out_shape, start_kind)
            what = f"{name} over dim {dim} of {shape}, contiguous into contiguous"
            runs.append((what, _reduce, (name, x, _plain(3), dim, start, _plain(3), 1)))
    return _cases(runs)


@check("2.1", rtol=1e-9, atol=1e-12)
def kernels_0d(rng: np.random.Generator) -> Any:
    """0-d tensors (a number in a tensor: ``t * 2.0`` makes one): a map and a zip into a
    0-d output (aligned, and with a spare slot), and 0-d inputs broadcast to every
    entry of a larger output."""
    zero_d = _plain(0)
    map_cases: list[tuple[str, Layout, Shape, Layout]] = [
        ("neg", zero_d, (), zero_d),
        ("exp", zero_d, (), _plain(0, 2)),
        ("sigmoid", _plain(0, 2), (3, 4), _reversed(2, 2)),
        ("relu", zero_d, (5,), _plain(1)),
    ]
    runs: list[Run] = []
    for name, layout, out_shape, out_layout in map_cases:
        x = _draw(rng, ())
        what = f"{name}: {_where((), layout)} into {_where(out_shape, out_layout)}"
        runs.append((what, _map, (name, x, layout, out_shape, out_layout)))
    zip_cases: list[tuple[str, Shape, Layout, Shape, Layout, Layout]] = [
        ("add", (), zero_d, (), zero_d, zero_d),
        ("mul", (), zero_d, (), _plain(0, 2), _plain(0, 2)),
        ("max", (4,), _plain(1, 2), (), zero_d, _plain(1)),
        ("lt", (), _plain(0, 2), (2, 3), _reversed(2), _plain(2, 2)),
        ("log_back", (), zero_d, (3, 1, 2), _plain(3), _reversed(3)),
    ]
    for name, a_shape, la, b_shape, lb, lo in zip_cases:
        a_kind = "nonzero" if name == "log_back" else "values"
        x, y = _draw(rng, a_shape, a_kind), _draw(rng, b_shape)
        out_shape = _broadcast(a_shape, b_shape)
        what = f"{name}: a {_where(a_shape, la)}, b {_where(b_shape, lb)}, "
        what += f"out {_where(out_shape, lo)}"
        runs.append((what, _zip, (name, x, la, y, lb, out_shape, lo)))
    return _cases(runs)


# -- through the Tensor API on the fast backend (given code around the three kernels) ------


def _leaf(x: np.ndarray, layout: Layout) -> Any:
    from module1.tensor import Tensor
    from module1.tensor_data import TensorData
    from module2.fast_ops import FastTensorBackend

    storage, strides = _strided(x, layout)
    data = TensorData(storage, x.shape, strides)
    return Tensor(data, backend=FastTensorBackend, requires_grad=True)


def _forward_backward(
    f: Callable[..., Any], xs: list[np.ndarray], layouts: list[Layout], w_seed: int
) -> dict[str, Any]:
    """``f`` of leaves in ``layouts`` on the fast backend: its values, then the gradients
    of ``(f(...) * w).sum()`` (``w`` random), and the leaves' values after."""
    from module1.tensor import from_numpy
    from module2.fast_ops import FastTensorBackend

    leaves = [_leaf(x, lay) for x, lay in zip(xs, layouts, strict=True)]
    out = f(*leaves)
    values = out.to_numpy()
    w = np.random.default_rng(w_seed).normal(size=values.shape)
    (out * from_numpy(w, backend=FastTensorBackend)).sum().backward()
    grads = [None if leaf.grad is None else _array(leaf.grad.to_numpy()) for leaf in leaves]
    return {"values": _array(values), "grads": grads,
            "leaves": [_array(leaf.to_numpy()) for leaf in leaves]}  # fmt: skip


TENSOR_UNARY: list[tuple[str, Callable[[Any], Any], str]] = [
    ("neg", lambda t: -t, "values"),
    ("exp", lambda t: t.exp(), "values"),
    ("log", lambda t: t.log(), "positive"),
    ("sigmoid", lambda t: t.sigmoid(), "values"),
    ("relu", lambda t: t.relu(), "values"),
    ("tanh", lambda t: t.tanh(), "values"),
    ("1 / t", lambda t: 1.0 / t, "nonzero"),
    ("t ** 2", lambda t: t**2.0, "values"),
    ("t ** 0.5", lambda t: t**0.5, "positive"),
    ("2 - 3 t", lambda t: 2.0 - t * 3.0, "values"),
    ("(t + 1) / 4 - 0.5", lambda t: (t + 1.0) / 4.0 - 0.5, "values"),
]


@check("2.1", rtol=1e-8, atol=1e-10)
def tensor_api_unary(rng: np.random.Generator) -> Any:
    """Every stage-1 unary operation on ``FastTensorBackend``, forward and backward, on
    leaves stored in random layouts."""
    runs: list[Run] = []
    for name, f, kind in TENSOR_UNARY:
        shape = _shape(rng)
        x, layout = _draw(rng, shape, kind), _layout(rng, len(shape))
        seed = int(rng.integers(1 << 30))
        runs.append((f"{name} of {_where(shape, layout)}", _forward_backward,
                     (f, [x], [layout], seed)))  # fmt: skip
    return _cases(runs)


TENSOR_BINARY: list[tuple[str, Callable[[Any, Any], Any], str, str]] = [
    ("a + b", lambda a, b: a + b, "values", "values"),
    ("a - b", lambda a, b: a - b, "values", "values"),
    ("a * b", lambda a, b: a * b, "values", "values"),
    ("a / b", lambda a, b: a / b, "values", "nonzero"),
    ("a < b", lambda a, b: a < b, "values", "values"),
    ("a > b", lambda a, b: a > b, "values", "values"),
    ("a == b", lambda a, b: a == b, "values", "values"),
    ("a != b", lambda a, b: a != b, "values", "values"),
    ("a.is_close(b)", lambda a, b: a.is_close(b), "near", "near"),
]


@check("2.1", rtol=1e-8, atol=1e-10)
def tensor_api_binary(rng: np.random.Generator) -> Any:
    """Every stage-1 binary operation on ``FastTensorBackend`` with broadcasting, forward
    and backward (gradients summed back over broadcast dimensions)."""
    runs: list[Run] = []
    for name, f, a_kind, b_kind in TENSOR_BINARY:
        a_shape, b_shape = _broadcast_pair(rng)
        x, y = _draw(rng, a_shape, a_kind), _draw(rng, b_shape, b_kind)
        lx, ly = _layout(rng, len(a_shape)), _layout(rng, len(b_shape))
        seed = int(rng.integers(1 << 30))
        runs.append((f"{name}: a {_where(a_shape, lx)}, b {_where(b_shape, ly)}",
                     _forward_backward, (f, [x, y], [lx, ly], seed)))  # fmt: skip
    return _cases(runs)


def _reduction(name: str, dim: int | None, keepdim: bool) -> Callable[[Any], Any]:
    return lambda t: getattr(t, name)(dim, keepdim)


@check("2.1", rtol=1e-8, atol=1e-10)
def tensor_api_reductions(rng: np.random.Generator) -> Any:
    """``sum``, ``mean`` and ``max`` over one dimension (negative too) or all, with and
    without ``keepdim``, forward and backward (the max's gradient shared on ties)."""
    runs: list[Run] = []
    for name in ("sum", "mean", "max") * 4:
        shape = _shape(rng)
        x, layout = _draw(rng, shape), _layout(rng, len(shape))
        dim = None if rng.random() < 0.25 else int(rng.integers(-len(shape), len(shape)))
        keepdim = bool(rng.random() < 0.5)
        seed = int(rng.integers(1 << 30))
        what = f"{name}(dim={dim}, keepdim={keepdim}) of {_where(shape, layout)}"
        runs.append(
            (what, _forward_backward, (_reduction(name, dim, keepdim), [x], [layout], seed))
        )
    return _cases(runs)


def _view_then_exp(kind: str, shape: Shape, order: tuple[int, ...]) -> Callable[[Any], Any]:
    """A view (or copy) of a tensor of ``shape``, then ``exp`` (which reads its layout)."""
    backwards = tuple(reversed(shape))
    views: dict[str, Callable[[Any], Any]] = {
        "permute": lambda t: t.permute(*order),
        "transpose": lambda t: t.transpose(0, -1),
        "contiguous": lambda t: t.contiguous(),
        "view": lambda t: t.contiguous().view(*backwards),
        "reshape": lambda t: t.reshape(-1),
        "view-then-permute": lambda t: t.contiguous().view(*backwards).permute(*order),
    }
    view = views[kind]
    return lambda t: view(t).exp()


@check("2.1", rtol=1e-8, atol=1e-10)
def tensor_api_views(rng: np.random.Generator) -> Any:
    """Views (permute, transpose, view, reshape) and copies followed by ``exp``, forward
    and backward."""
    runs: list[Run] = []
    for kind in ("permute", "transpose", "contiguous", "view", "reshape", "view-then-permute"):
        shape = _shape(rng)
        x, layout = _draw(rng, shape), _layout(rng, len(shape))
        order = tuple(int(d) for d in rng.permutation(len(shape)))
        seed = int(rng.integers(1 << 30))
        f = _view_then_exp(kind, shape, order)
        what = f"{kind} (order {order}) of {_where(shape, layout)}, then exp"
        runs.append((what, _forward_backward, (f, [x], [layout], seed)))
    return _cases(runs)


# =========================================================================================
# Task 2.2: batched matrix multiply
# =========================================================================================


def _product_shape(a_shape: Shape, b_shape: Shape) -> Shape:
    return (*_broadcast(a_shape[:-2], b_shape[:-2]), a_shape[-2], b_shape[-1])


def _matmul(
    x: np.ndarray, lx: Layout, y: np.ndarray, ly: Layout, lo: Layout, extra: int = 0
) -> dict[str, Any]:
    """``tensor_matrix_multiply_kernel`` of ``x`` and ``y`` into a nan-filled output."""
    from module2.fast_ops import tensor_matrix_multiply_kernel

    out_shape = _product_shape(x.shape, y.shape)
    a, a_strides = _strided(x, lx)
    b, b_strides = _strided(y, ly)
    before = [a.copy(), b.copy()]
    out, out_strides = _strided(np.zeros(out_shape), lo, extra)
    out[:] = np.nan
    tensor_matrix_multiply_kernel(out, _ints(out_shape), _ints(out_strides),
                                  a, _ints(x.shape), _ints(a_strides),
                                  b, _ints(y.shape), _ints(b_strides))  # fmt: skip
    result = _output(out, out_shape, out_strides)
    result["inputs_unchanged"] = _unchanged([a, b], before)
    return result


def _operands(rng: np.random.Generator, size: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """``(*batch_a, n, m)`` and ``(*batch_b, m, p)``: batch dimensions that broadcast
    (0 to 2 of them, sizes 1 to 3), n, m, p in 1..size."""
    batch_a, batch_b = _broadcast_pair(rng, 0, 2, 3)
    n, m, p = (int(v) for v in rng.integers(1, size + 1, 3))
    x = rng.uniform(-2.0, 2.0, (*batch_a, n, m))
    return x, rng.uniform(-2.0, 2.0, (*batch_b, m, p))


def _swap_last(ndim: int, step: int = 1) -> Layout:
    """The last two dimensions stored the other way round (a transposed matrix)."""
    return (*range(ndim - 2), ndim - 1, ndim - 2), step


@check("2.2", rtol=1e-8, atol=1e-10)
def tensor_matrix_multiply_kernel(rng: np.random.Generator) -> Any:
    """Batched products with broadcast batch dimensions, operands in random layouts
    (``b`` too), into an output that is permuted or has gaps."""
    runs: list[Run] = []
    for _ in range(16):
        x, y = _operands(rng)
        lx, ly = _layout(rng, x.ndim), _layout(rng, y.ndim)
        lo = _layout(rng, max(x.ndim, y.ndim))
        what = f"a {_where(x.shape, lx)}, b {_where(y.shape, ly)}, out in order {lo[0]}, "
        what += f"step {lo[1]}"
        runs.append((what, _matmul, (x, lx, y, ly, lo)))
    return _cases(runs)


def _zero_stride(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """``x`` of shape ``(1, n, m)`` broadcast by a batch stride of 0, ``y`` of shape
    ``(batch, m, p)`` stored column by column."""
    from module2.fast_ops import tensor_matrix_multiply_kernel

    (_, n, m), (batch, _, p) = x.shape, y.shape
    out = np.full(batch * n * p, np.nan)
    out_strides = (n * p, p, 1)
    yt = np.ascontiguousarray(np.swapaxes(y, -1, -2)).reshape(-1)
    tensor_matrix_multiply_kernel(out, _ints((batch, n, p)), _ints(out_strides),
                                  x.reshape(-1).copy(), _ints(x.shape), _ints((0, m, 1)),
                                  yt, _ints(y.shape), _ints((m * p, 1, m)))  # fmt: skip
    return _output(out, (batch, n, p), out_strides)


@check("2.2", rtol=1e-8, atol=1e-10)
def tensor_matrix_multiply_kernel_examples(rng: np.random.Generator) -> Any:
    """Fixed shapes: batch dimensions broadcast both ways, both operands stored
    transposed (last two dimensions swapped, ``b`` with gaps), an output stored as
    ``(p, batch, n)`` with spare slots after it, and an operand broadcast by a zero
    stride."""
    shapes = [((2, 1, 3, 4), (3, 4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 1, 4, 5)),
              ((2, 1, 3, 4), (1, 5, 4, 2)), ((1, 3, 4), (2, 4, 5)), ((6, 1), (1, 7)),
              ((1, 1), (1, 1))]  # fmt: skip
    runs: list[Run] = []
    for a_shape, b_shape in shapes:
        x, y = rng.normal(size=a_shape), rng.normal(size=b_shape)
        plain = _plain(max(x.ndim, y.ndim))
        runs.append((f"{a_shape} @ {b_shape}, contiguous", _matmul,
                     (x, _plain(x.ndim), y, _plain(y.ndim), plain)))  # fmt: skip
        runs.append((f"{a_shape} @ {b_shape}, stored transposed", _matmul,
                     (x, _swap_last(x.ndim), y, _swap_last(y.ndim, 2), plain)))  # fmt: skip
    x, y = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 5))
    runs.append(("(2, 3, 4) @ (2, 4, 5) into an output stored as (5, 2, 3), 3 spare slots",
                 _matmul, (x, _plain(3), y, _plain(3), ((2, 0, 1), 1), 3)))  # fmt: skip
    runs.append(("a (1, 3, 4) with batch stride 0, b (2, 4, 5) stored column by column",
                 _zero_stride, (rng.normal(size=(1, 3, 4)), y)))  # fmt: skip
    return _cases(runs)


@check("2.2", rtol=1e-8, atol=1e-10)
def tensor_matrix_multiply_kernel_large(rng: np.random.Generator) -> Any:
    """Products of at least 32768 multiply-adds whose sizes no chunk or tile size
    divides: contiguous, and stored transposed into a transposed output with gaps."""
    shapes = [((3, 67, 29), (29, 31)), ((2, 1, 45, 53), (3, 53, 41)), ((97, 61), (61, 83)),
              ((37, 1), (1, 1031))]  # fmt: skip
    runs: list[Run] = []
    for a_shape, b_shape in shapes:
        x, y = rng.normal(size=a_shape), rng.normal(size=b_shape)
        dims = max(x.ndim, y.ndim)
        runs.append((f"{a_shape} @ {b_shape}, contiguous", _matmul,
                     (x, _plain(x.ndim), y, _plain(y.ndim), _plain(dims))))  # fmt: skip
        if a_shape != (37, 1):  # one output that large is enough
            what = f"{a_shape} @ {b_shape}, all stored transposed, out with gaps"
            args = (x, _reversed(x.ndim), y, _reversed(y.ndim), _reversed(dims, 2))
            runs.append((what, _matmul, args))
    return _cases(runs)


@check("2.2", rtol=1e-8, atol=1e-10)
def tensor_matrix_multiply_kernel_thin(rng: np.random.Generator) -> Any:
    """Sizes of 1 where they are easy to mix up: one row, one column, an inner size of 1
    (an outer product), and batch dimensions of size 1 broadcast against larger ones,
    in random layouts."""
    shapes = [((1, 7), (7, 6)), ((5, 7), (7, 1)), ((4, 1), (1, 6)), ((1, 1, 9), (9, 1)),
              ((3, 1, 1, 6), (1, 4, 6, 1)), ((1, 2, 5, 3), (4, 1, 3, 2)),
              ((2, 1, 1, 4), (3, 4, 1))]  # fmt: skip
    runs: list[Run] = []
    for a_shape, b_shape in shapes:
        x, y = rng.normal(size=a_shape), rng.normal(size=b_shape)
        lx, ly = _layout(rng, x.ndim), _layout(rng, y.ndim)
        lo = _layout(rng, max(x.ndim, y.ndim))
        what = f"a {_where(a_shape, lx)}, b {_where(b_shape, ly)}, out in order {lo[0]}, "
        what += f"step {lo[1]}"
        runs.append((what, _matmul, (x, lx, y, ly, lo)))
    return _cases(runs)


def _tensor_matmul(x: np.ndarray, lx: Layout, y: np.ndarray) -> np.ndarray:
    """``a @ b`` on the fast backend, ``a`` holding ``x`` in ``lx``, ``b`` contiguous."""
    from module1.tensor import Tensor
    from module1.tensor_data import TensorData
    from module2.fast_ops import FastTensorBackend

    a_storage, a_strides = _strided(x, lx)
    a = Tensor(TensorData(a_storage, x.shape, a_strides), backend=FastTensorBackend)
    b = Tensor(TensorData(y.reshape(-1).copy(), y.shape), backend=FastTensorBackend)
    return _array((a @ b).to_numpy())


@check("2.2", rtol=1e-8, atol=1e-10)
def matmul_tensor_api(rng: np.random.Generator) -> Any:
    """``a @ b`` on ``FastTensorBackend`` (the given ``FastOps.matrix_multiply`` around the
    kernel): ``a`` in random layouts, batch dimensions broadcast, 1-D operands; ``b``
    contiguous and the products small, so that no other task's kernel runs."""
    runs: list[Run] = []
    for i in range(12):
        x, y = _operands(rng)
        if i % 4 == 1:
            x = x.reshape(-1, x.shape[-1])[0].copy()  # a 1-D left operand, of length m
        if i % 4 == 2:
            y = y.reshape(-1, y.shape[-1])[: x.shape[-1], 0].copy()  # 1-D, of length m
        lx = _layout(rng, x.ndim) if x.ndim > 1 else _plain(1)
        runs.append((f"a {_where(x.shape, lx)} @ b {y.shape}", _tensor_matmul, (x, lx, y)))
    return _cases(runs)


# =========================================================================================
# Task 2.3: gemm (its values, and its speed against the naive loop: timed)
# =========================================================================================


def _stored(x: np.ndarray, transposed: bool) -> tuple[np.ndarray, int, int]:
    """A matrix's storage stored row by row (or column by column), its two strides."""
    rows, cols = x.shape
    if transposed:
        return np.ascontiguousarray(x.T).reshape(-1), 1, rows
    return np.ascontiguousarray(x).reshape(-1), cols, 1


def _gemm(
    a: np.ndarray, b: np.ndarray, start: np.ndarray, flags: tuple[bool, bool, bool]
) -> np.ndarray:
    """``start + a @ b`` by ``gemm`` on whole matrices, each stored row by row or
    column by column (``flags``: a, b, out transposed)."""
    from module2.fast_matmul import gemm as kernel

    (m, k), n = a.shape, b.shape[1]
    ao, ar, ac = _stored(a, flags[0])
    bo, br, bc = _stored(b, flags[1])
    oo, orow, ocol = _stored(start, flags[2])
    kernel(oo, 0, orow, ocol, ao, 0, ar, ac, bo, 0, br, bc, m, n, k)
    return _array(_read(oo, (m, n), (orow, ocol)))


def _gemm_run(rng: np.random.Generator, m: int, n: int, k: int, flags: Any) -> Run:
    flags = tuple(bool(f) for f in flags)
    a, b, start = rng.normal(size=(m, k)), rng.normal(size=(k, n)), rng.normal(size=(m, n))
    what = f"{m} x {k} @ {k} x {n}, stored transposed (a, b, out): {flags}"
    return what, _gemm, (a, b, start, flags)


@check("2.3", rtol=1e-8, atol=1e-10)
def gemm(rng: np.random.Generator) -> Any:
    """Sizes 1 to 35 (across every small tile edge), each operand stored either way,
    adding to what ``out`` holds."""
    runs = [_gemm_run(rng, 1, 1, 1, (False, False, False))]
    for _ in range(14):
        m, n, k = (int(v) for v in rng.integers(1, 36, 3))
        runs.append(_gemm_run(rng, m, n, k, rng.random(3) < 0.5))
    return _cases(runs)


@check("2.3", rtol=1e-8, atol=1e-10)
def gemm_blocks(rng: np.random.Generator) -> Any:
    """Sizes past the reference's blocks (k past 256 and 512, more than 64 columns, rows
    not a multiple of 4), in several layouts of the operands."""
    runs: list[Run] = []
    for flags in [(False, False, False), (True, False, False), (False, True, True),
                  (True, True, False)]:  # fmt: skip
        m = int(rng.choice([61, 63, 67, 69]))
        n = int(rng.choice([65, 71, 131, 133]))
        k = int(rng.choice([257, 301, 515, 521]))
        runs.append(_gemm_run(rng, m, n, k, flags))
    runs.append(_gemm_run(rng, 5, int(rng.choice([257, 509])), 37, (False, False, False)))
    return _cases(runs)


def _gemm_slice(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` added, transposed, into a corner of a larger buffer of 0.5 (from an
    offset), ``a`` stored column by column after 5 spare slots, ``b`` the middle of a
    wider buffer: the whole buffer after."""
    from module2.fast_matmul import gemm as kernel

    (m, k), n = a.shape, b.shape[1]
    buffer = np.full((n + 2) * (m + 3), 0.5)
    a_store = np.concatenate([np.full(5, np.nan), np.ascontiguousarray(a.T).reshape(-1)])
    b_wide = np.full((k, n + 4), np.nan)
    b_wide[:, 2 : n + 2] = b
    kernel(buffer, 2 * (m + 3) + 1, 1, m + 3, a_store, 5, 1, m,
           b_wide.reshape(-1), 2, n + 4, 1, m, n, k)  # fmt: skip
    return _array(buffer.reshape(n + 2, m + 3))


@check("2.3", rtol=1e-8, atol=1e-10)
def gemm_strided_slice(rng: np.random.Generator) -> Any:
    """Offsets and strides of slices of larger buffers; every other slot of ``out``
    keeps its value."""
    runs: list[Run] = []
    for _ in range(4):
        m, n, k = (int(v) for v in rng.integers(3, 30, 3))
        a, b = rng.normal(size=(m, k)), rng.normal(size=(k, n))
        runs.append((f"{m} x {k} @ {k} x {n}", _gemm_slice, (a, b)))
    return _cases(runs)


def _gemm_twice(a: np.ndarray, b: np.ndarray, start: np.ndarray) -> list[np.ndarray]:
    """``gemm`` called twice on one contiguous output: ``start + a @ b``, then
    ``start + 2 a @ b`` (it adds, it does not overwrite)."""
    from module2.fast_matmul import gemm as kernel

    (m, k), n = a.shape, b.shape[1]
    out = start.reshape(-1).copy()
    seen = []
    for _ in range(2):
        kernel(out, 0, n, 1, a.reshape(-1).copy(), 0, k, 1, b.reshape(-1).copy(), 0, n, 1, m, n, k)
        seen.append(_array(out.reshape(m, n)))
    return seen


@check("2.3", rtol=1e-8, atol=1e-10)
def gemm_accumulates(rng: np.random.Generator) -> Any:
    """Two calls on the same output add the product twice."""
    runs: list[Run] = []
    for _ in range(4):
        m, n, k = (int(v) for v in rng.integers(1, 20, 3))
        a, b, start = rng.normal(size=(m, k)), rng.normal(size=(k, n)), rng.normal(size=(m, n))
        runs.append((f"{m} x {k} @ {k} x {n}, twice", _gemm_twice, (a, b, start)))
    return _cases(runs)


@check("2.3", rtol=1e-8, atol=1e-10)
def gemm_thin(rng: np.random.Generator) -> Any:
    """One size 1 and the others long: a dot product, an outer product, a row times a
    matrix, a matrix times a column, in random layouts."""
    runs: list[Run] = []
    for m, n, k in [(1, 1, 300), (70, 69, 1), (1, 133, 5), (133, 1, 7), (2, 3, 1)]:
        runs.append(_gemm_run(rng, m, n, k, rng.random(3) < 0.5))
    return _cases(runs)


SPEED_SIZES = (509, 503, 499)
"""``m, n, k`` of the timed product: about 500 cubed, sizes no tile divides."""
_speed_buffers: dict[str, np.ndarray] = {}


def _speed_inputs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The operands of the timed product (row by row, uniform in [-0.5, 0.5)) and the
    positions of the entries the answer reports. The arrays are made once and refilled:
    a round's time is the product's, not the memory system's first touch of new pages."""
    m, n, k = SPEED_SIZES
    if not _speed_buffers:
        _speed_buffers.update(a=np.empty((m, k)), b=np.empty((k, n)))
    a, b = _speed_buffers["a"], _speed_buffers["b"]
    rng.random(out=a)
    rng.random(out=b)
    a -= 0.5
    b -= 0.5
    return a, b, rng.integers(0, m * n, 16)


def _speed_out() -> np.ndarray:
    """The timed product's output, zeroed (made once)."""
    m, n, _ = SPEED_SIZES
    out = _speed_buffers.setdefault("out", np.empty((m, n)))
    out.fill(0.0)
    return out


def _speed_answer(out: np.ndarray, picks: np.ndarray) -> dict[str, Any]:
    """What a product is judged by: sums that need every entry (no linear shortcut such
    as ``a @ (b @ v)`` gives them), its extremes and some entries."""
    return {"abs_sum": float(np.abs(out).sum()), "square_sum": float(np.square(out).sum()),
            "max": float(out.max()), "min": float(out.min()),
            "entries": _array(out.reshape(-1)[picks])}  # fmt: skip


def _naive_speed(rng: np.random.Generator) -> dict[str, Any]:
    """The bar of ``gemm_speed``: the same inputs multiplied by the textbook triple loop,
    parallel over rows, on the same machine (trusted: only the reference's process runs
    it)."""
    from tests.module2.naive import naive_product

    a, b, picks = _speed_inputs(rng)
    out = _speed_out()
    naive_product(out, a, b)
    return _speed_answer(out, picks)


@check("2.3", rtol=1e-8, atol=1e-10,
       timed=Timed(_naive_speed, within=1 / 2, rounds=5, what="the naive triple loop"))  # fmt: skip
def gemm_speed(rng: np.random.Generator) -> Any:
    """A product of about 500 cubed at least 2x as fast as the naive triple loop (parallel
    over rows) on the same inputs and machine, both on all its cores: timed by the
    grader, from when it sends a round's seed to when the right answer arrives."""
    from module2.fast_matmul import gemm as kernel

    a, b, picks = _speed_inputs(rng)
    (m, k), n = a.shape, b.shape[1]
    out = _speed_out()
    kernel(out.reshape(-1), 0, n, 1, a.reshape(-1), 0, k, 1, b.reshape(-1), 0, n, 1, m, n, k)
    return _speed_answer(out, picks)


# =========================================================================================
# Task 2.4: the fused optimizer steps
# =========================================================================================

SIZES = [1, 7, 511, 512, 1541, 40_961]
"""Both sides of the reference's ``PARALLEL_MIN`` (512), and sizes no chunk divides (the
last, a prime, past any chunk or block size a kernel may cut a large parameter into)."""


def _gradient(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Normal values of a random scale, with some exact zeros."""
    g = rng.normal(scale=float(rng.choice([1e-3, 1.0, 50.0])), size=shape)
    return np.array(np.where(rng.random(shape) < 0.1, 0.0, g), dtype=np.float64)


def _adam_steps(
    param: np.ndarray, grads: list[np.ndarray], hyper: tuple[float, float, float, float]
) -> list[dict[str, Any]]:
    """``adam_update`` for t = 1, 2, ... in place, from zero moments: the parameter,
    ``m`` and ``v`` after each step."""
    from module2.fast_optim import adam_update as kernel

    m, v = np.zeros(param.size), np.zeros(param.size)
    steps = []
    for t, g in enumerate(grads, start=1):
        kernel(param, g, m, v, *hyper, t)
        steps.append({"param": _array(param), "m": _array(m), "v": _array(v)})
    return steps


@check("2.4", rtol=1e-9, atol=1e-11)
def adam_update(rng: np.random.Generator) -> Any:
    """Three steps per size with random hyperparameters."""
    runs: list[Run] = []
    for n in SIZES:
        lr, beta1 = float(rng.uniform(1e-3, 0.5)), float(rng.uniform(0.0, 0.99))
        beta2, eps = float(rng.uniform(0.5, 0.9999)), float(10.0 ** rng.uniform(-10, -2))
        grads = [_gradient(rng, (n,)) for _ in range(3)]
        what = f"n {n}, lr {lr}, betas ({beta1}, {beta2}), eps {eps}"
        runs.append((what, _adam_steps, (rng.normal(size=n), grads, (lr, beta1, beta2, eps))))
    return _cases(runs)


def _all_nan(values: np.ndarray) -> bool:
    return bool(np.isnan(values).all())


def _sgd_steps(
    param: np.ndarray, velocity: np.ndarray, grads: list[np.ndarray], lr: float, momentum: float
) -> list[dict[str, Any]]:
    """``sgd_update`` in place, ``has_velocity`` False on the first step: the parameter
    and ``velocity`` after each step."""
    from module2.fast_optim import sgd_update as kernel

    steps = []
    for step, g in enumerate(grads):
        kernel(param, g, velocity, lr, momentum, step > 0)
        if momentum == 0.0:  # velocity must stay as it was: empty, or nan
            steps.append({"param": _array(param), "velocity_untouched": _all_nan(velocity)})
        else:
            steps.append({"param": _array(param), "velocity": _array(velocity)})
    return steps


@check("2.4", rtol=1e-9, atol=1e-11)
def sgd_update(rng: np.random.Generator) -> Any:
    """Three steps per size, without momentum (``velocity`` empty, or nan that must stay
    untouched) and with (the first step must not read ``velocity``, which starts nan)."""
    runs: list[Run] = []
    for n in SIZES:
        for momentum in (0.0, float(rng.uniform(0.1, 0.99))):
            lr = float(rng.uniform(1e-3, 2.0))
            velocity = np.empty(0) if momentum == 0.0 and n % 2 else np.full(n, np.nan)
            grads = [_gradient(rng, (n,)) for _ in range(3)]
            what = f"n {n}, lr {lr}, momentum {momentum}, velocity of {velocity.size}"
            runs.append((what, _sgd_steps, (rng.normal(size=n), velocity, grads, lr, momentum)))
    return _cases(runs)


def _simple_tensor(x: np.ndarray, layout: Layout) -> Any:
    """A tensor of the simple backend holding ``x`` in ``layout``."""
    from module1.tensor import Tensor
    from module1.tensor_data import TensorData

    storage, strides = _strided(x, layout)
    return Tensor(TensorData(storage, x.shape, strides))


def _optimizer_steps(
    make: Callable[[Any], Any],
    values: list[tuple[np.ndarray, Layout]],
    plan: list[list[tuple[np.ndarray, Layout] | None]],
) -> list[list[np.ndarray]]:
    """Parameters holding ``values``, one step of the optimizer ``make(parameters)``
    per entry of ``plan`` (each parameter's gradient, or None): every parameter's
    values after each step."""
    from module0.module import Parameter

    params = [Parameter(_simple_tensor(*v), f"p{i}") for i, v in enumerate(values)]
    optimizer = make(params)
    steps = []
    for grads in plan:
        for p, g in zip(params, grads, strict=True):
            p.value.grad = None if g is None else _simple_tensor(*g)
        optimizer.step()
        steps.append([_array(p.value.to_numpy()) for p in params])
    return steps


def _optimizer_run(rng: np.random.Generator, what: str, make: Callable[[Any], Any]) -> Run:
    """1 to 4 parameters (0-d to 3-d, stored in random layouts, on the simple backend)
    given gradients by hand (in random layouts too; on some steps none), four steps."""
    shapes = [_shape(rng, 0, 3, 4) for _ in range(int(rng.integers(1, 5)))]
    values = [(rng.normal(size=s), _layout(rng, len(s))) for s in shapes]
    plan = [[None if rng.random() < 0.2 else (_gradient(rng, s), _layout(rng, len(s)))
             for s in shapes] for _ in range(4)]  # fmt: skip
    return f"{what}, parameters of shapes {shapes}", _optimizer_steps, (make, values, plan)


def _fast_adam(lr: float, betas: tuple[float, float], eps: float) -> Callable[[Any], Any]:
    from module2.fast_optim import FastAdam

    return lambda params: FastAdam(params, lr=lr, betas=betas, eps=eps)


def _fast_sgd(lr: float, momentum: float) -> Callable[[Any], Any]:
    from module2.fast_optim import FastSGD

    return lambda params: FastSGD(params, lr=lr, momentum=momentum)


@check("2.4", "FastAdam.step", rtol=1e-9, atol=1e-11)
def fast_adam_step(rng: np.random.Generator) -> Any:
    """The given ``FastAdam`` (one ``adam_update`` per parameter per step), over
    hyperparameters and parameter layouts."""
    runs: list[Run] = []
    for _ in range(4):
        lr = float(rng.uniform(1e-3, 1.0))
        betas = (float(rng.uniform(0.0, 0.99)), float(rng.uniform(0.0, 0.9999)))
        eps = float(10.0 ** rng.uniform(-10, -2))
        what = f"lr {lr}, betas {betas}, eps {eps}"
        runs.append(_optimizer_run(rng, what, _fast_adam(lr, betas, eps)))
    return _cases(runs)


@check("2.4", "FastSGD.step", rtol=1e-9, atol=1e-11)
def fast_sgd_step(rng: np.random.Generator) -> Any:
    """The given ``FastSGD`` (one ``sgd_update`` per parameter per step), with and
    without momentum."""
    runs: list[Run] = []
    for momentum in (0.0, float(rng.uniform(0.0, 0.99)), 0.0, float(rng.uniform(0.5, 0.99))):
        lr = float(rng.uniform(1e-3, 2.0))
        runs.append(_optimizer_run(rng, f"lr {lr}, momentum {momentum}", _fast_sgd(lr, momentum)))
    return _cases(runs)


def _train(
    make: Callable[[Any], Any], points: np.ndarray, labels: np.ndarray, seed: int
) -> dict[str, Any]:
    """A 2-6-6-1 classifier on the simple backend, 12 full-batch steps of the optimizer
    ``make(parameters)``: the loss at each step and the final weights."""
    from module1.tensor import from_numpy
    from module1.tensor_nn import MLP, binary_cross_entropy_with_logits

    model = MLP((2, 6, 6, 1), seed=seed)
    optimizer = make(model.parameters())
    x, y = from_numpy(points), from_numpy(labels)
    losses = []
    for _ in range(12):
        loss = binary_cross_entropy_with_logits(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses, "weights": [_array(p.value.to_numpy()) for p in model.parameters()]}


@check("2.4", rtol=1e-7, atol=1e-9)
def training(rng: np.random.Generator) -> Any:
    """Training a small classifier with the fused Adam, and with the fused SGD with
    momentum. The simple backend computes the forward and backward passes (stage 1),
    so only the optimizers' kernels are this task's."""
    points = rng.uniform(-1.0, 1.0, (16, 2))
    labels = (points[:, 0] * points[:, 1] > 0.0).astype(np.float64).reshape(-1, 1)
    seed = int(rng.integers(1 << 30))
    return _cases([
        ("FastAdam, lr 0.05", _train, (_fast_adam(0.05, (0.9, 0.999), 1e-8), points, labels, seed)),
        ("FastSGD, lr 0.5, momentum 0.9", _train, (_fast_sgd(0.5, 0.9), points, labels, seed)),
    ])  # fmt: skip
