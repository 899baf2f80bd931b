"""Graded checks of stage 3 (see ``autograder/checks.py``): each calls the student's CUDA
kernels on inputs drawn from ``rng`` and returns what came back; the grader compares that
with what the reference returns for the same inputs, outside the student's process.

Without a GPU the kernels run on Numba's CUDA simulator (the grader sets
``NUMBA_ENABLE_CUDASIM=1``), where every thread is a Python thread: sizes are tiny.

An unimplemented kernel (a ``nowrite`` stub) writes nothing, so whatever a kernel writes
starts as nan, which no correct answer holds there: kernels launched directly write into
nan-filled device arrays, and the answer is the whole storage read back, so the slots
outside the output (gaps, spare slots, a spare block of threads past the end) must stay
nan too; the backend's own outputs (``cuda.device_array``: uninitialised memory, which
may still hold an earlier, right answer) are nan-filled while a check runs
(:func:`_nan_memory`). Answers carry values as nested lists, nan as ``"nan"``
(:data:`Values`).

Each task's checks run its own kernels only, where given code allows: the reductions'
and the products' checks call no map or zip (no ``contiguous()`` copy, no ``backward``),
and the optimizers' checks set gradients by hand."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from autograder.checks import check, raised

Shape = tuple[int, ...]
Layout = tuple[tuple[int, ...], int]
"""``(order, step)``: values stored with their dimensions permuted by ``order`` and
``step - 1`` unused (nan) slots between neighbours in storage."""
Operand = tuple[np.ndarray, Shape, Shape]
"""A storage, a shape and strides: what a kernel reads or writes."""
Values = Any
"""Floats as answers give them: nested lists of floats (a float for a 0-d tensor), nan
as the string ``"nan"`` (an output slot no kernel wrote), so a failure reads "expected
'nan', got 1.5" or "expected 1.5, got 'nan'"."""

FOLD = {"rtol": 1e-7, "atol": 1e-9}
"""Reductions and products: a kernel may fold in another order (float64, small sizes:
the differences are about 1e-13; a missed or doubled entry moves a value by 1e-4 and
more, the inputs having 4 decimal places)."""
STEP = {"rtol": 1e-8, "atol": 1e-10}
"""Optimizer steps: the same formula, written another way, agrees to rounding."""

_EDGES = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0])


def _try(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or ``Raised(type)``: one case of a check (arguments bound now)."""
    return raised(lambda: fn(*args))


# -- inputs ---------------------------------------------------------------------------------


def _values(rng: np.random.Generator, shape: Shape, kind: str = "any") -> np.ndarray:
    """Float64 values of ``shape``, rounded to 4 places: ``any`` (edge values, so ties,
    and uniform draws), ``positive``, ``nonzero``, ``near`` (close together, for
    is_close), ``exponent`` or ``factor`` (of magnitude 0.6 to 1.5, for products)."""
    n = math.prod(shape)
    if kind == "positive":
        x = rng.uniform(0.1, 4.0, n)
    elif kind == "nonzero":
        x = rng.uniform(0.25, 4.0, n) * rng.choice([-1.0, 1.0], n)
    elif kind == "near":
        x = np.where(rng.random(n) < 0.3, rng.choice(_EDGES, n), rng.uniform(-0.03, 0.03, n))
    elif kind == "exponent":
        x = rng.uniform(-3.0, 3.0, n)
    elif kind == "factor":
        x = rng.uniform(0.6, 1.5, n) * rng.choice([-1.0, 1.0], n)
    else:
        x = np.where(rng.random(n) < 0.3, rng.choice(_EDGES, n), rng.uniform(-4.0, 4.0, n))
    return np.round(x, 4).reshape(shape)


def _shape(rng: np.random.Generator, low: int = 1, high: int = 3, size: int = 4) -> Shape:
    """``low`` to ``high`` dimensions of sizes 1 to ``size``."""
    return tuple(int(n) for n in rng.integers(1, size + 1, int(rng.integers(low, high + 1))))


def _broadcast_pair(rng: np.random.Generator, dims: int = 3) -> tuple[Shape, Shape]:
    """Two shapes of 1 to ``dims`` dimensions that broadcast: one list of sizes, then
    each side sets some sizes to 1 and may drop leading dimensions."""
    n = int(rng.integers(1, dims + 1))
    sizes = rng.integers(1, 5, n)
    sides = []
    for _ in range(2):
        ones = rng.random(n) < 0.3
        cut = int(rng.integers(0, n))
        sides.append(tuple(1 if one else int(s) for s, one in zip(sizes, ones, strict=True))[cut:])
    return sides[0], sides[1]


def _broadcast(*shapes: Shape) -> Shape:
    return tuple(int(n) for n in np.broadcast_shapes(*shapes))


def _layout(rng: np.random.Generator, ndim: int) -> Layout:
    """A random order of the dimensions and a step of 1 or 2."""
    return tuple(int(d) for d in rng.permutation(ndim)), int(rng.integers(1, 3))


def _strided(values: np.ndarray, layout: Layout) -> Operand:
    """A storage holding ``values`` in ``layout`` (gaps hold nan), shape and strides
    (the tests' ``strided``)."""
    from tests.layouts import strided

    storage, strides = strided(values, layout)
    return storage, tuple(int(n) for n in values.shape), strides


def _nans(shape: Shape, layout: Layout) -> Operand:
    """A nan-filled output storage for ``shape`` in ``layout``."""
    storage, shape, strides = _strided(np.zeros(shape), layout)
    storage[:] = np.nan
    return storage, shape, strides


def _launch(size: int, threads: int) -> tuple[int, int]:
    """Blocks of ``threads`` threads covering ``size`` entries, plus a spare block whose
    threads are all past the end."""
    return -(-size // threads) + 1, threads


def _describe(op: Operand) -> str:
    return f"{op[1]} strides {op[2]}"


# -- device arrays and tensors ----------------------------------------------------------------


def _dev(storage: np.ndarray) -> Any:
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(storage, dtype=np.float64))


def _plain(values: Any) -> Values:
    """``values`` as :data:`Values`."""
    array = np.array(values, dtype=np.float64)
    plain = array.astype(object)
    plain[np.isnan(array)] = "nan"
    return plain.tolist()


def _host(array: Any) -> Values:
    """A device array's values (Numba's own ``copy_to_host``), flat."""
    return _plain(np.asarray(array.copy_to_host()).reshape(-1))


def _leaf(
    values: np.ndarray, layout: Layout, on_device: bool = False, requires_grad: bool = False
) -> Any:
    """A tensor on the CUDA backend holding ``values`` in ``layout``, its storage on the
    host or already on the device."""
    from module1.tensor import Tensor
    from module1.tensor_data import TensorData
    from module3.cuda_ops import CudaTensorBackend

    storage, shape, strides = _strided(np.asarray(values, dtype=np.float64), layout)
    data = TensorData(_dev(storage) if on_device else storage, shape, strides)
    return Tensor(data, backend=CudaTensorBackend, requires_grad=requires_grad)


def _numpy(t: Any) -> Values:
    """A tensor's values (given code: ``to_numpy`` copies a device storage back)."""
    return _plain(t.to_numpy())


def _nan_memory(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with every new float ``cuda.device_array`` nan-filled (the tests'
    helper): what an entry that no kernel wrote then holds."""
    from tests.module3.device import nan_device_arrays

    with nan_device_arrays():
        return fn(*args)


def _on_backend(fn: Callable[..., Any], *args: Any) -> Any:
    """One case on the backend: ``fn(*args)`` in nan-filled memory, or ``Raised``."""
    return raised(lambda: _nan_memory(fn, *args))


def _shared_memory_use(kernel: Any, launch: Callable[[], None], blocks: int, threads: int) -> Any:
    """Run ``launch()``; whether it combined each block's work in shared memory behind a
    barrier. On the simulator, per block: whether at least half its threads wrote into a
    shared array, and whether its threads met at a barrier (shared arrays start
    nan-filled here, so reading an entry no thread wrote shows in the values). On a GPU:
    whether the PTX of ``kernel`` stores to shared memory and holds a barrier."""
    import os
    import re

    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        launch()
        ptx = "\n".join(kernel.inspect_asm().values())
        return {
            "stores_to_shared": re.search(r"\bst\.shared\.", ptx) is not None,
            "barrier": re.search(r"\bbar(rier)?(\.cta)?\.sync\b", ptx) is not None,
        }
    from tests.module3.device import shared_memory_log

    with shared_memory_log() as log:  # the tests' recorder of the simulator's threads
        launch()
    writers, barriers, sites = log.writers, log.barriers, log.sites
    per_block = [(b, 0, 0) for b in range(blocks)]
    return {
        "allocates_shared": bool(sites),
        "half_the_threads_write_shared": [
            len({t for b, t in writers if b == block}) >= threads // 2 for block in per_block
        ],
        "barrier": [any(b == block for b, _ in barriers) for block in per_block],
    }


# -- the float functions -------------------------------------------------------------------

_UNARY = (
    ("neg", "any"), ("sigmoid", "any"), ("relu", "any"), ("log", "positive"),
    ("exp", "any"), ("id", "any"), ("inv", "nonzero"), ("tanh", "any"),
)  # fmt: skip
_BINARY = (
    ("add", "any", "any"), ("mul", "any", "any"), ("lt", "any", "any"),
    ("eq", "any", "any"), ("max", "any", "any"), ("power", "positive", "exponent"),
    ("relu_back", "any", "any"), ("log_back", "nonzero", "any"),
    ("inv_back", "nonzero", "any"), ("is_close", "near", "near"),
)  # fmt: skip
_KINDS = {name: kinds for name, *kinds in (*_UNARY, *_BINARY)}


def _fn(name: str) -> Callable[..., float]:
    """Stage 0's operator ``name`` (``is_close``: the backend's float version of it)."""
    from module0 import operators
    from module1.tensor_ops import is_close_float

    return is_close_float if name == "is_close" else getattr(operators, name)


# -- 3.1 map and zip --------------------------------------------------------------------------


def _run_1d(factory: str, name: str, out: Operand, ins: list[Operand], threads: int,
            aligned: bool) -> Values:  # fmt: skip
    """The map or zip kernel (``factory``) of ``name`` launched directly over ``out``
    (nan-filled) with a spare block; the whole output storage back."""
    from module3 import cuda_ops

    kernel = getattr(cuda_ops, factory)(_fn(name))
    storage, shape, strides = out
    size = math.prod(shape)
    o = _dev(storage)
    operands = [a for s, in_shape, in_strides in ins for a in (_dev(s), in_shape, in_strides)]
    kernel[_launch(size, threads)](o, shape, strides, size, *operands, aligned)
    return _host(o)


def _elementwise_kernel(rng: np.random.Generator, factory: str, table: Any) -> Any:
    """Each function of ``table``: inputs in any layout broadcast (against each other)
    into an output that is permuted or has gaps, blocks of 4 or 32 threads."""
    inputs, out = [], []
    for name, *kinds in table:
        first, second = _broadcast_pair(rng)
        shapes = [first] if len(kinds) == 1 else [first, second]
        xs = [_values(rng, shape, kind) for shape, kind in zip(shapes, kinds, strict=True)]
        ins = [_strided(x, _layout(rng, x.ndim)) for x in xs]
        out_shape = _broadcast(first, second)
        target = _nans(out_shape, _layout(rng, len(out_shape)))
        threads = int(rng.choice([4, 32]))
        inputs.append(f"{name}: {' and '.join(map(_describe, ins))} -> {_describe(target)}, "
                      f"{threads} threads")  # fmt: skip
        out.append(_try(_run_1d, factory, name, target, ins, threads, False))
    return {"inputs": inputs, "out": out}


@check("3.1", "tensor_map")
def tensor_map_kernel(rng: np.random.Generator) -> Any:
    """Every stage-0 unary function, the kernel launched directly (general path)."""
    return _elementwise_kernel(rng, "tensor_map", _UNARY)


@check("3.1", "tensor_zip")
def tensor_zip_kernel(rng: np.random.Generator) -> Any:
    """Every stage-0 binary function, the kernel launched directly (general path)."""
    return _elementwise_kernel(rng, "tensor_zip", _BINARY)


def _aligned_cases(rng: np.random.Generator, factory: str, table: Any) -> Any:
    """Output and inputs of one shape and strides (row-major or reversed), storages of
    exactly ``size`` entries: with ``aligned`` True and False, and into an output storage
    one slot longer (``aligned`` False), whose extra slot stays nan."""
    inputs, out = [], []
    for _ in range(3):
        name = str(table[int(rng.integers(len(table)))][0])
        shape = _shape(rng, 2, 3)
        order = tuple(range(len(shape)))[:: 1 if rng.random() < 0.5 else -1]
        ins = [_strided(_values(rng, shape, kind), (order, 1)) for kind in _KINDS[name]]
        strides = ins[0][2]
        for aligned, extra in ((True, 0), (False, 0), (False, 1)):
            target = (np.full(math.prod(shape) + extra, np.nan), shape, strides)
            inputs.append(f"{name}: {shape} strides {strides}, aligned={aligned}, "
                          f"{target[0].size} slots")  # fmt: skip
            out.append(_try(_run_1d, factory, name, target, ins, 8, aligned))
    return {"inputs": inputs, "out": out}


@check("3.1", "tensor_map aligned")
def tensor_map_aligned(rng: np.random.Generator) -> Any:
    return _aligned_cases(rng, "tensor_map", _UNARY)


@check("3.1", "tensor_zip aligned")
def tensor_zip_aligned(rng: np.random.Generator) -> Any:
    return _aligned_cases(rng, "tensor_zip", _BINARY)


_TENSOR_UNARY: tuple[tuple[str, Callable[[Any], Any], str], ...] = (
    ("-t", lambda t: -t, "any"),
    ("exp", lambda t: t.exp(), "any"),
    ("log", lambda t: t.log(), "positive"),
    ("sigmoid", lambda t: t.sigmoid(), "any"),
    ("relu", lambda t: t.relu(), "any"),
    ("tanh", lambda t: t.tanh(), "any"),
    ("1 / t", lambda t: 1.0 / t, "nonzero"),
    ("t ** 2", lambda t: t**2.0, "any"),
    ("t ** 0.5", lambda t: t**0.5, "positive"),
    ("2 - 3 t", lambda t: 2.0 - t * 3.0, "any"),
)
_TENSOR_BINARY: tuple[tuple[str, Callable[[Any, Any], Any], str, str], ...] = (
    ("a + b", lambda a, b: a + b, "any", "any"),
    ("a - b", lambda a, b: a - b, "any", "any"),
    ("a * b", lambda a, b: a * b, "any", "any"),
    ("a / b", lambda a, b: a / b, "any", "nonzero"),
    ("a < b", lambda a, b: a < b, "any", "any"),
    ("a > b", lambda a, b: a > b, "any", "any"),
    ("a == b", lambda a, b: a == b, "any", "any"),
    ("a.is_close(b)", lambda a, b: a.is_close(b), "near", "near"),
)


def _apply(op: Callable[..., Any], xs: list[np.ndarray], layouts: list[Layout],
           on_device: bool) -> Values:  # fmt: skip
    """``op`` of CUDA-backend leaves holding ``xs`` in ``layouts``: its values."""
    leaves = [_leaf(x, layout, on_device) for x, layout in zip(xs, layouts, strict=True)]
    return _numpy(op(*leaves))


@check("3.1")
def unary_ops_on_the_cuda_backend(rng: np.random.Generator) -> Any:
    """Stage 1's unary operations on ``CudaTensorBackend`` leaves in any layout, on the
    host or on the device."""
    inputs, out = [], []
    for name, op, kind in _TENSOR_UNARY:
        x = _values(rng, _shape(rng), kind)
        layout, on_device = _layout(rng, x.ndim), bool(rng.random() < 0.5)
        inputs.append(f"{name}: {x.shape} layout {layout}, on the device: {on_device}")
        out.append(_on_backend(_apply, op, [x], [layout], on_device))
    return {"inputs": inputs, "out": out}


@check("3.1")
def binary_ops_on_the_cuda_backend(rng: np.random.Generator) -> Any:
    """Stage 1's binary operations on ``CudaTensorBackend`` leaves whose shapes broadcast,
    in any layout; then a chain of them."""
    inputs, out = [], []
    for name, op, a_kind, b_kind in _TENSOR_BINARY:
        a_shape, b_shape = _broadcast_pair(rng)
        xs = [_values(rng, a_shape, a_kind), _values(rng, b_shape, b_kind)]
        layouts = [_layout(rng, x.ndim) for x in xs]
        on_device = bool(rng.random() < 0.5)
        inputs.append(f"{name}: {a_shape} {layouts[0]} and {b_shape} {layouts[1]}, "
                      f"on the device: {on_device}")  # fmt: skip
        out.append(_on_backend(_apply, op, xs, layouts, on_device))
    xs = [_values(rng, (6, 10)), _values(rng, (6, 10))]
    inputs.append("(a * b * 0.25).exp() - a of shape (6, 10), a transposed, b with gaps")
    chain = lambda a, b: (a * b * 0.25).exp() - a  # noqa: E731
    out.append(_on_backend(_apply, chain, xs, [((1, 0), 1), ((0, 1), 2)], False))
    return {"inputs": inputs, "out": out}


def _map_into(name: str, x: np.ndarray, where: str) -> list[Any]:
    """The backend's ``name`` map of a 3-D leaf with gaps into a nan-filled 4-D ``out``
    on the host or the device: whether it returned ``out``, ``out``'s values and the
    input's values after."""
    from module1.tensor import Tensor
    from module1.tensor_data import TensorData
    from module3.cuda_ops import CudaTensorBackend

    t = _leaf(x, ((2, 0, 1), 2), on_device=True)
    big = (2, *x.shape)
    nans = np.full(math.prod(big), np.nan)
    strides = tuple(math.prod(big[d + 1 :]) for d in range(len(big)))
    storage = nans if where == "host" else _dev(nans)
    out = Tensor(TensorData(storage, big, strides), backend=CudaTensorBackend)
    result = getattr(CudaTensorBackend, name)(t, out)
    return [result is out, _numpy(out), _numpy(t)]


def _new_functions(x: np.ndarray, row: np.ndarray) -> list[Values]:
    """A map and a zip of float functions that are not stage 0's operators."""
    from module3.cuda_ops import CudaOps

    triple = CudaOps.map(lambda v: v * 3.0 + 1.0)
    add_half = CudaOps.zip(lambda u, v: u + 0.5 * v)
    return [
        _numpy(triple(_leaf(x, ((1, 2, 0), 1)))),
        _numpy(add_half(_leaf(x, ((0, 1, 2), 2)), _leaf(row, ((0,), 1), True))),
    ]


@check("3.1")
def map_into_out_and_new_functions(rng: np.random.Generator) -> Any:
    """``map(fn)(a, out)`` broadcasts into a nan-filled ``out`` on the host or the device
    (what a sum's backward does); a map and a zip of functions outside stage 0's table
    are compiled on their own."""
    x = _values(rng, (2, 3, 4))
    row = _values(rng, (4,), "nonzero")
    out: dict[str, Any] = {}
    for where in ("host", "device"):
        for name in ("id_map", "exp_map", "neg_map"):
            out[f"{name} into an out on the {where}"] = _try(_map_into, name, x, where)
    out["v * 3 + 1, u + 0.5 v"] = _on_backend(_new_functions, x, row)
    return out


def _gradients(op: Callable[..., Any], xs: list[np.ndarray], layouts: list[Layout],
               w: np.ndarray) -> list[Values]:  # fmt: skip
    """The leaves' gradients after ``op(*leaves).backward(w)``."""
    from module1.tensor import from_numpy
    from module3.cuda_ops import CudaTensorBackend

    leaves = [_leaf(x, layout, requires_grad=True) for x, layout in zip(xs, layouts, strict=True)]
    op(*leaves).backward(from_numpy(w, backend=CudaTensorBackend))
    return [_numpy(t.grad) for t in leaves]


@check("3.1")
def backward_through_maps_and_zips(rng: np.random.Generator) -> Any:
    """Gradients of unary operations and of same-shape binary ones by ``backward(w)``
    (maps and zips only: no reduction is involved)."""
    cases: list[tuple[str, Callable[..., Any], tuple[str, ...]]] = [
        *((name, op, (kind,)) for name, op, kind in _TENSOR_UNARY),
        *((name, op, kinds) for name, op, *kinds in _TENSOR_BINARY[:4]),
        ("(a * b).sigmoid() + a.relu()", lambda a, b: (a * b).sigmoid() + a.relu(), ("any",) * 2),
    ]
    inputs, out = [], []
    for name, op, kinds in cases:
        shape = _shape(rng)
        xs = [_values(rng, shape, kind) for kind in kinds]
        layouts = [_layout(rng, len(shape)) for _ in xs]
        w = _values(rng, shape)
        inputs.append(f"{name}: {shape} layouts {layouts}")
        out.append(_on_backend(_gradients, op, xs, layouts, w))
    return {"inputs": inputs, "out": out}


# -- 3.2 reductions -------------------------------------------------------------------------


def _block_sums_kernel(a: np.ndarray, blocks: int) -> Values:
    """``sum_practice`` over ``a`` with ``blocks`` blocks, into ``blocks + 1`` nan slots."""
    from module3.cuda_ops import BLOCK_DIM, sum_practice

    o = _dev(np.full(blocks + 1, np.nan))
    sum_practice[blocks, BLOCK_DIM](o, _dev(a), a.size)
    return _host(o)


@check("3.2", "sum_practice", **FOLD)
def sum_practice_kernel(rng: np.random.Generator) -> Any:
    """Blocks of ``BLOCK_DIM`` threads over an array whose last block is short or full, a
    spare block past the end (its sum is 0) and an output one slot longer (stays nan)."""
    from module3.cuda_ops import BLOCK_DIM

    sizes = [int(rng.integers(BLOCK_DIM + 1, 2 * BLOCK_DIM)), BLOCK_DIM, int(rng.integers(1, 8))]
    arrays = [_values(rng, (n,)) for n in sizes]
    blocks = [-(-n // BLOCK_DIM) + 1 for n in sizes]
    return {
        "inputs": [f"{n} entries, {b} blocks" for n, b in zip(sizes, blocks, strict=True)],
        "out": [_try(_block_sums_kernel, a, b) for a, b in zip(arrays, blocks, strict=True)],
    }


def _sum_practice_shared(a: np.ndarray) -> Any:
    from module3.cuda_ops import BLOCK_DIM, sum_practice

    o = _dev(np.full(2, np.nan))
    launch = lambda: sum_practice[2, BLOCK_DIM](o, _dev(a), a.size)  # noqa: E731
    use = _shared_memory_use(sum_practice, launch, 2, BLOCK_DIM)
    return {"out": _host(o), "shared": use}


@check("3.2", "sum_practice shared memory", **FOLD)
def sum_practice_shared_memory(rng: np.random.Generator) -> Any:
    """Each block's threads put their entries in shared memory and add them up there,
    behind barriers: one thread summing its block alone fails."""
    from module3.cuda_ops import BLOCK_DIM

    a = _values(rng, (int(rng.integers(BLOCK_DIM + 1, 2 * BLOCK_DIM)),))
    return _try(_sum_practice_shared, a)


def _block_sums(a: np.ndarray) -> Values:
    from module3.cuda_ops import block_sums

    return _plain(block_sums(a))


@check("3.2", **FOLD)
def block_sums(rng: np.random.Generator) -> Any:
    """``block_sums`` (given: it launches ``sum_practice``) on a few sizes."""
    from module3.cuda_ops import BLOCK_DIM

    sizes = [
        1,
        int(rng.integers(2, BLOCK_DIM)),
        int(rng.integers(2 * BLOCK_DIM + 1, 3 * BLOCK_DIM)),
    ]
    arrays = [_values(rng, (n,)) for n in sizes]
    return {"inputs": sizes, "out": [_on_backend(_block_sums, a) for a in arrays]}


_REDUCE_FNS = (("add", 0.0, "any"), ("mul", 1.0, "factor"), ("max", -math.inf, "any"))


def _run_reduce(name: str, start: float, out: Operand, a: Operand, dim: int,
                threads: int) -> Values:  # fmt: skip
    """The reduce kernel of ``name`` launched directly: a block of ``threads`` threads
    per output entry; the whole output storage back."""
    from module3.cuda_ops import tensor_reduce

    storage, shape, strides = out
    size = math.prod(shape)
    o = _dev(storage)
    tensor_reduce(_fn(name))[size, threads](o, shape, strides, size, _dev(a[0]), a[1], a[2], dim,
                                             start)  # fmt: skip
    return _host(o)


@check("3.2", "tensor_reduce", **FOLD)
def tensor_reduce_kernel(rng: np.random.Generator) -> Any:
    """Sum, product and max along a dimension of 1 to 11 entries, folded by blocks of 1
    to 16 threads (fewer threads than entries: each folds several; more: some fold
    none), from any layout into an output that is permuted or has gaps (stay nan)."""
    from module3.cuda_ops import reduce_threads

    inputs, out = [], []
    for k in range(6):
        name, start, kind = _REDUCE_FNS[k % 3]
        before = [int(n) for n in rng.integers(1, 3, int(rng.integers(0, 2)))]
        after = [int(n) for n in rng.integers(1, 3, int(rng.integers(0, 2)))]
        length = int(rng.integers(1, 12))
        threads = int(rng.choice([1, 2, 4, reduce_threads(length), 16]))
        x = _values(rng, (*before, length, *after), kind)
        a = _strided(x, _layout(rng, x.ndim))
        target = _nans((*before, 1, *after), _layout(rng, x.ndim))
        inputs.append(f"{name} over dim {len(before)} of {_describe(a)} -> "
                      f"{_describe(target)}, {threads} threads")  # fmt: skip
        out.append(_try(_run_reduce, name, start, target, a, len(before), threads))
    return {"inputs": inputs, "out": out}


@check("3.2", "tensor_reduce more threads than entries", **FOLD)
def tensor_reduce_idle_threads(rng: np.random.Generator) -> Any:
    """Blocks of 8 or 16 threads over a dimension of 1 to 5 entries, for every function:
    a thread with no entry must hand the tree ``start`` (1 for a product, -inf for a
    max of negative entries), not 0. Two outputs, so two blocks, into an output with
    gaps (which stay nan)."""
    inputs, out = [], []
    for name, start, kind in _REDUCE_FNS:
        length = int(rng.integers(1, 6))
        threads = int(rng.choice([8, 16]))
        x = _values(rng, (2, length), kind)
        if name == "max":
            x = -np.abs(x) - 0.5  # all below 0: a padding of 0 would win the max
        a = _strided(x, _layout(rng, 2))
        target = _nans((2, 1), (tuple(int(d) for d in rng.permutation(2)), 2))
        inputs.append(f"{name} over dim 1 of {_describe(a)} -> {_describe(target)}, "
                      f"{threads} threads")  # fmt: skip
        out.append(_try(_run_reduce, name, start, target, a, 1, threads))
    return {"inputs": inputs, "out": out}


def _reduce_shared(name: str, start: float, x: np.ndarray) -> Any:
    """Two blocks of 8 threads fold the rows of ``x``, under the shared-memory log."""
    from module3.cuda_ops import tensor_reduce

    kernel = tensor_reduce(_fn(name))
    o = _dev(np.full(2, np.nan))
    a = _dev(x.reshape(-1))
    strides = (x.shape[1], 1)
    launch = lambda: kernel[2, 8](o, (2, 1), (1, 1), 2, a, x.shape, strides, 1, start)  # noqa: E731
    use = _shared_memory_use(kernel, launch, 2, 8)
    return {"out": _host(o), "shared": use}


@check("3.2", "tensor_reduce shared memory", **FOLD)
def tensor_reduce_shared_memory(rng: np.random.Generator) -> Any:
    """Blocks of 8 threads fold a dimension of 17 to 23 entries: each thread folds a part
    and the block combines the parts in shared memory behind barriers; one thread
    folding the whole dimension fails."""
    out: dict[str, Any] = {}
    for name, start, kind in (_REDUCE_FNS[0], _REDUCE_FNS[2]):
        x = _values(rng, (2, int(rng.integers(17, 24))), kind)
        out[name] = _try(_reduce_shared, name, start, x)
    return out


def _backend_reduce(op: str, x: np.ndarray, layout: Layout, on_device: bool) -> list[Any]:
    """The backend's reduction ``op`` along each dimension, then the input's values."""
    from module3.cuda_ops import CudaTensorBackend

    t = _leaf(x, layout, on_device)
    return [*(_numpy(getattr(CudaTensorBackend, op)(t, d)) for d in range(x.ndim)), _numpy(t)]


@check("3.2", **FOLD)
def backend_reduce_along_every_dim(rng: np.random.Generator) -> Any:
    """The backend's ``add_reduce``, ``mul_reduce`` and ``max_reduce`` of a leaf in any
    layout (on the host or the device) along each dimension in turn."""
    inputs, out = [], []
    for op, kind in (("add_reduce", "any"), ("mul_reduce", "factor"), ("max_reduce", "any")):
        x = _values(rng, _shape(rng, 2, 3), kind)
        layout, on_device = _layout(rng, x.ndim), bool(rng.random() < 0.5)
        inputs.append(f"{op}: {x.shape} layout {layout}, on the device: {on_device}")
        out.append(_on_backend(_backend_reduce, op, x, layout, on_device))
    return {"inputs": inputs, "out": out}


def _method(x: np.ndarray, layout: Layout, method: str, *args: Any) -> Values:
    return _numpy(getattr(_leaf(x, layout), method)(*args))


@check("3.2", **FOLD)
def tensor_sum_and_max(rng: np.random.Generator) -> Any:
    """``t.sum(dim, keepdim)`` and ``t.max(dim, keepdim)`` (stage 1's Sum and Max: one
    reduction each), and ``sum()`` of a contiguous tensor."""
    inputs, out = [], []
    for k in range(6):
        x = _values(rng, _shape(rng))
        layout = _layout(rng, x.ndim)
        args = (("sum", "max")[k % 2], int(rng.integers(-x.ndim, x.ndim)), bool(rng.random() < 0.5))
        inputs.append(f"{args[0]}{args[1:]} of {x.shape} layout {layout}")
        out.append(_on_backend(_method, x, layout, *args))
    x = _values(rng, _shape(rng, 2, 3))
    inputs.append(f"sum() of {x.shape}, contiguous")
    out.append(_on_backend(_method, x, (tuple(range(x.ndim)), 1), "sum"))
    return {"inputs": inputs, "out": out}


def _mul_reduce(x: np.ndarray, dim: int) -> Values:
    from module3.cuda_ops import CudaTensorBackend

    return _numpy(CudaTensorBackend.mul_reduce(_leaf(x, ((0, 1), 1)), dim))


@check("3.2", **FOLD)
def long_reductions(rng: np.random.Generator) -> Any:
    """A dimension of 100 to 200 entries, more than the block has threads (each folds
    several), plain and transposed."""
    length = int(rng.integers(100, 201))
    x = _values(rng, (2, length))
    factors = np.round(rng.uniform(0.98, 1.02, (2, length)), 4) * rng.choice(
        [-1.0, 1.0], (2, length)
    )
    return {
        "sum(1)": _on_backend(_method, x, ((0, 1), 1), "sum", 1),
        "max(1)": _on_backend(_method, x, ((0, 1), 2), "max", 1),
        "mul_reduce": _on_backend(_mul_reduce, factors, 1),
        "transposed sum(0)": _on_backend(_method, x.T.copy(), ((1, 0), 1), "sum", 0),
    }


def _unbroadcast(g: np.ndarray, layout: Layout, shape: Shape) -> Values:
    from module1.tensor_functions import unbroadcast

    return _numpy(unbroadcast(_leaf(g, layout), shape))


@check("3.2", **FOLD)
def gradient_summed_over_broadcast_dims(rng: np.random.Generator) -> Any:
    """Stage 1's ``unbroadcast`` on the CUDA backend: a gradient summed back to the shape
    of an input that was broadcast (``add_reduce`` over each broadcast dimension)."""
    inputs, out = [], []
    for _ in range(4):
        small, other = _broadcast_pair(rng)
        big = _broadcast(small, other)
        extra = len(big) - len(small)
        if all(n == 1 or (d >= extra and small[d - extra] != 1) for d, n in enumerate(big)):
            big = (2, *big)  # something to sum over (else a copy, by a map, is all it does)
        g = _values(rng, big)
        layout = _layout(rng, g.ndim)
        inputs.append(f"{big} layout {layout} -> {small}")
        out.append(_on_backend(_unbroadcast, g, layout, small))
    return {"inputs": inputs, "out": out}


# -- 3.3 matrix multiply --------------------------------------------------------------------


def _run_matmul(out: Operand, a: Operand, b: Operand) -> Values:
    """The matmul kernel launched directly, on the grid the backend uses, into ``out``
    (nan-filled); the whole output storage back."""
    from module3.cuda_ops import TILE, TILE_ROWS, tensor_matrix_multiply

    storage, shape, strides = out
    n, p = shape[-2], shape[-1]
    grid = (-(-p // TILE), -(-n // TILE), math.prod(shape) // (n * p))
    o = _dev(storage)
    tensor_matrix_multiply[grid, (TILE, TILE_ROWS)](
        o, shape, strides, _dev(a[0]), a[1], a[2], _dev(b[0]), b[1], b[2]
    )
    return _host(o)


def _matmul_case(x: np.ndarray, y: np.ndarray, a: Layout, b: Layout, o: Layout) -> Any:
    """``x @ y``, the operands in layouts ``a`` and ``b``, the output in ``o``."""
    out_shape = tuple(int(n) for n in np.matmul(x, y).shape)
    return _nans(out_shape, o), _strided(x, a), _strided(y, b)


def _matmul_operands(
    rng: np.random.Generator, broadcast: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``(*batch_a, n, m)`` and ``(*batch_b, m, p)``, n, m, p from 1 to 5, and batch
    dimensions (at most 2 batches) that broadcast, sometimes on one side only; with
    ``broadcast``, 2 batches on one side and 1 on the other."""
    batch_a: Shape = ()
    batch_b: Shape = ()
    if broadcast:
        batch_a, batch_b = ((2,), (1,)) if rng.random() < 0.5 else ((1,), (2,))
    elif rng.random() < 0.7:
        batch_a, batch_b = (tuple(min(s, 2) for s in side) for side in _broadcast_pair(rng, 1))
        if rng.random() < 0.3:
            batch_a, batch_b = ((), batch_b) if rng.random() < 0.5 else (batch_a, ())
    n, m, p = (int(v) for v in rng.integers(1, 6, 3))
    return _values(rng, (*batch_a, n, m)), _values(rng, (*batch_b, m, p))


@check("3.3", "tensor_matrix_multiply", **FOLD)
def tensor_matrix_multiply_kernel(rng: np.random.Generator) -> Any:
    """Small batched products, batch dimensions broadcast, operands in any layout, into an
    output that is permuted or has gaps (which stay nan)."""
    inputs, out = [], []
    for k in range(3):
        x, y = _matmul_operands(rng, broadcast=k == 0)
        layouts = _layout(rng, x.ndim), _layout(rng, y.ndim), _layout(rng, np.matmul(x, y).ndim)
        target, a, b = _matmul_case(x, y, *layouts)
        inputs.append(f"{_describe(a)} @ {_describe(b)} -> {_describe(target)}")
        out.append(_try(_run_matmul, target, a, b))
    return {"inputs": inputs, "out": out}


@check("3.3", "tensor_matrix_multiply transposed output", **FOLD)
def tensor_matrix_multiply_transposed_output(rng: np.random.Generator) -> Any:
    """Into an output stored last dimension first, with 3 spare slots, ``a`` broadcast
    over the batch (stride 0) and ``b`` stored column by column."""
    x, y = _values(rng, (3, 4)), _values(rng, (2, 4, 5))
    yt = np.ascontiguousarray(np.swapaxes(y, -1, -2)).reshape(-1)
    target = (np.full(2 * 3 * 5 + 3, np.nan), (2, 3, 5), (3, 1, 6))  # stored as (5, 2, 3)
    a, b = (x.reshape(-1), (1, 3, 4), (0, 4, 1)), (yt, y.shape, (20, 1, 4))
    return _try(_run_matmul, target, a, b)


@check("3.3", "tensor_matrix_multiply several tiles", **FOLD)
def tensor_matrix_multiply_several_tiles(rng: np.random.Generator) -> Any:
    """Sizes past one tile and not multiples of it: 2 x 2 output tiles and 2 steps along
    the inner dimension, each with a short edge; then an inner dimension of 3 tiles and
    a bit, into a transposed output with gaps."""
    n, m, p = (int(v) for v in rng.integers(33, 40, 3))
    k = int(rng.integers(65, 90))
    x, y = _values(rng, (n, m)), _values(rng, (m, p))
    u, v = _values(rng, (2, k)), _values(rng, (k, 3))
    rows, columns = ((0, 1), 1), ((1, 0), 1)
    return {
        "inputs": [f"({n}, {m}) @ ({m}, {p})", f"(2, {k}) @ ({k}, 3)"],
        "out": [
            _try(_run_matmul, *_matmul_case(x, y, rows, columns, rows)),
            _try(_run_matmul, *_matmul_case(u, v, rows, columns, ((1, 0), 2))),
        ],
    }


@check("3.3", "tensor_matrix_multiply batch dimensions", **FOLD)
def tensor_matrix_multiply_batch_dimensions(rng: np.random.Generator) -> Any:
    """Two batch dimensions, broadcast on both sides ((2, 1, 3, 4) @ (2, 4, 2): the
    output's batch ``z`` is an index of two dimensions, not an offset along one),
    contiguous; then (2, 1, 2, 3) @ (1, 3, 2), ``b`` broadcast over both, in random
    layouts."""
    x, y = _values(rng, (2, 1, 3, 4)), _values(rng, (2, 4, 2))
    u, v = _values(rng, (2, 1, 2, 3)), _values(rng, (1, 3, 2))
    plain = [((0, 1, 2, 3), 1), ((0, 1, 2), 1), ((0, 1, 2, 3), 1)]
    shuffled = [_layout(rng, 4), _layout(rng, 3), _layout(rng, 4)]
    target, a, b = _matmul_case(x, y, *plain)
    other, c, d = _matmul_case(u, v, *shuffled)
    return {
        "inputs": [f"{_describe(a)} @ {_describe(b)} -> {_describe(target)}",
                   f"{_describe(c)} @ {_describe(d)} -> {_describe(other)}"],
        "out": [_try(_run_matmul, target, a, b), _try(_run_matmul, other, c, d)],
    }  # fmt: skip


@check("3.3", **FOLD)
def matmul_on_the_cuda_backend(rng: np.random.Generator) -> Any:
    """``a @ b`` of leaves in any layout on the host or the device: batches that
    broadcast, and a 1-D operand on either side."""
    inputs, out = [], []
    for k in range(3):
        x, y = _matmul_operands(rng, broadcast=k == 0)
        if k == 1:
            x = x.reshape(-1, *x.shape[-2:])[0, 0]  # a vector of length m
        elif k == 2:
            y = y.reshape(-1, *y.shape[-2:])[0, :, 0]
        # A 1-D operand is contiguous: another would be copied first, by a map (3.1).
        layouts = [_layout(rng, v.ndim) if v.ndim > 1 else ((0,), 1) for v in (x, y)]
        on_device = bool(rng.random() < 0.5)
        inputs.append(f"{x.shape} {layouts[0]} @ {y.shape} {layouts[1]}, "
                      f"on the device: {on_device}")  # fmt: skip
        out.append(_on_backend(_apply, lambda a, b: a @ b, [x, y], layouts, on_device))
    return {"inputs": inputs, "out": out}


def _backward_products(x: np.ndarray, y: np.ndarray, d: np.ndarray) -> list[Values]:
    """``d @ b^T`` and ``a^T @ d`` by the backend's ``matrix_multiply``."""
    from module3.cuda_ops import CudaTensorBackend

    mm = CudaTensorBackend.matrix_multiply
    a, b = _leaf(x, ((0, 1), 1), True), _leaf(y, ((0, 1), 2))
    g = _leaf(d, ((1, 0), 1))
    return [_numpy(mm(g, b.transpose())), _numpy(mm(a.transpose(), g))]


@check("3.3", **FOLD)
def matmul_of_transposed_views(rng: np.random.Generator) -> Any:
    """``a.transpose() @ b.transpose()`` of leaves stored the other way round, and the
    products a matmul's backward makes, ``d @ b^T`` and ``a^T @ d``: operands that are
    views, not contiguous."""
    x, y = _matmul_operands(rng)
    xs = [np.swapaxes(x, -1, -2).copy(), np.swapaxes(y, -1, -2).copy()]
    layouts = [_layout(rng, x.ndim), _layout(rng, y.ndim)]
    op = lambda a, b: a.transpose() @ b.transpose()  # noqa: E731
    u, v, d = _values(rng, (3, 4)), _values(rng, (4, 2)), _values(rng, (3, 2))
    return {
        "inputs": f"{x.shape} {layouts[0]} and {y.shape} {layouts[1]}, stored transposed",
        "transposed views": _on_backend(_apply, op, xs, layouts, False),
        "backward products": _on_backend(_backward_products, u, v, d),
    }


# -- 3.4 fused optimizer kernels ------------------------------------------------------------

_THREADS = 16


def _gradient(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Normal values of a random scale, with some exact zeros."""
    g = np.asarray(rng.normal(scale=float(rng.choice([1e-3, 1.0, 50.0])), size=shape))
    return np.where(rng.random(shape) < 0.1, 0.0, g)


def _adam_steps(p0: np.ndarray, grads: list[np.ndarray], hyper: tuple[float, ...]) -> Any:
    """``adam_kernel`` launched directly, one step per gradient: the parameter and both
    moments after each."""
    from module3.cuda_optim import adam_kernel

    lr, beta1, beta2, eps = hyper
    param, m, v = _dev(p0), _dev(np.zeros(p0.size)), _dev(np.zeros(p0.size))
    trace = []
    for t, g in enumerate(grads, start=1):
        adam_kernel[_launch(p0.size, _THREADS)](
            param, _dev(g), m, v, lr, beta1, beta2, eps, 1.0 - beta1**t, 1.0 - beta2**t
        )
        trace.append([_host(param), _host(m), _host(v)])
    return trace


def _adam_hyper(rng: np.random.Generator) -> tuple[float, float, float, float]:
    """lr, beta1, beta2, eps."""
    return (float(rng.uniform(0.01, 0.5)), float(rng.uniform(0.5, 0.95)),
            float(rng.uniform(0.9, 0.999)), float(10.0 ** rng.uniform(-8, -3)))  # fmt: skip


@check("3.4", "adam_kernel", **STEP)
def adam_kernel_steps(rng: np.random.Generator) -> Any:
    """Three steps on flat device arrays of 1 to 40 entries, with a spare block."""
    inputs, out = [], []
    for n in (1, int(rng.integers(2, _THREADS)), int(rng.integers(_THREADS + 1, 41))):
        hyper = _adam_hyper(rng)
        p0 = rng.normal(size=n)
        grads = [_gradient(rng, (n,)) for _ in range(3)]
        inputs.append(f"{n} entries, lr, betas, eps: {hyper}")
        out.append(_try(_adam_steps, p0, grads, hyper))
    return {"inputs": inputs, "out": out}


def _sgd_steps(p0: np.ndarray, grads: list[np.ndarray], lr: float, momentum: float) -> Any:
    """``sgd_kernel`` launched directly, one step per gradient, the velocity nan at first
    (``has_velocity`` False on the first step): the parameter and velocity after each."""
    from module3.cuda_optim import sgd_kernel

    param, velocity = _dev(p0), _dev(np.full(p0.size, np.nan))
    trace = []
    for step, g in enumerate(grads):
        sgd_kernel[_launch(p0.size, _THREADS)](param, _dev(g), velocity, lr, momentum, step > 0)
        trace.append([_host(param), _host(velocity)])
    return trace


@check("3.4", "sgd_kernel", **STEP)
def sgd_kernel_steps(rng: np.random.Generator) -> Any:
    """Three steps without momentum (the velocity, nan, is not touched) and with it (the
    first step must not read the velocity), on 1 to 40 entries, with a spare block."""
    inputs, out = [], []
    for momentum in (0.0, float(rng.uniform(0.3, 0.95))):
        for n in (int(rng.integers(1, _THREADS)), int(rng.integers(_THREADS + 1, 41))):
            lr = float(rng.uniform(0.01, 1.0))
            p0 = rng.normal(size=n)
            grads = [_gradient(rng, (n,)) for _ in range(3)]
            inputs.append(f"{n} entries, lr {lr}, momentum {momentum}")
            out.append(_try(_sgd_steps, p0, grads, lr, momentum))
    return {"inputs": inputs, "out": out}


def _optimizer_case(rng: np.random.Generator) -> Any:
    """1 to 3 parameters (0-d to 3-d, any layout, on the host or the device) and their
    gradients for 3 steps (any layout, on the other side; after the first step,
    sometimes none)."""
    specs = []
    for _ in range(int(rng.integers(1, 4))):
        shape = _shape(rng, 0, 3)
        specs.append((shape, _layout(rng, len(shape)), bool(rng.random() < 0.5)))
    values = [np.asarray(rng.normal(size=shape)) for shape, _, _ in specs]
    grads = [  # the first step updates every parameter: a kernel that writes nothing shows
        [None if step and rng.random() < 0.2 else _gradient(rng, shape) for shape, _, _ in specs]
        for step in range(3)
    ]
    grad_layouts = [_layout(rng, len(shape)) for shape, _, _ in specs]
    return specs, values, grads, grad_layouts


def _optimizer_steps(case: Any, make: Callable[[list[Any]], Any]) -> list[list[Values]]:
    """The optimizer ``make`` builds over the case's parameters, gradients set by hand
    before each step: every parameter's values after each step."""
    from module0.module import Parameter

    specs, values, grads, grad_layouts = case
    params = [
        Parameter(_leaf(x, layout, on_device), f"p{i}")
        for i, (x, (_, layout, on_device)) in enumerate(zip(values, specs, strict=True))
    ]
    optimizer = make(params)
    trace = []
    for step in grads:
        for p, g, layout, (_, _, on_device) in zip(params, step, grad_layouts, specs, strict=True):
            p.value.grad = None if g is None else _leaf(g, layout, not on_device)
        optimizer.step()
        trace.append([_numpy(p.value) for p in params])
    return trace


def _cuda_adam(hyper: tuple[float, ...]) -> Callable[[list[Any]], Any]:
    from module3.cuda_optim import CudaAdam

    lr, beta1, beta2, eps = hyper
    return lambda params: CudaAdam(params, lr=lr, betas=(beta1, beta2), eps=eps)


def _cuda_sgd(lr: float, momentum: float) -> Callable[[list[Any]], Any]:
    from module3.cuda_optim import CudaSGD

    return lambda params: CudaSGD(params, lr=lr, momentum=momentum)


@check("3.4", "CudaAdam.step", **STEP)
def cuda_adam(rng: np.random.Generator) -> Any:
    """``CudaAdam`` (given: one ``adam_kernel`` launch per parameter) over three steps."""
    case, hyper = _optimizer_case(rng), _adam_hyper(rng)
    return {"inputs": [str(case[0]), hyper], "out": _try(_optimizer_steps, case, _cuda_adam(hyper))}


@check("3.4", "CudaSGD.step", **STEP)
def cuda_sgd(rng: np.random.Generator) -> Any:
    """``CudaSGD`` (given: one ``sgd_kernel`` launch per parameter) over three steps,
    without momentum and with it."""
    inputs, out = [], []
    for momentum in (0.0, float(rng.uniform(0.3, 0.95))):
        case, lr = _optimizer_case(rng), float(rng.uniform(0.01, 1.0))
        inputs.append(f"parameters {case[0]}, lr {lr}, momentum {momentum}")
        out.append(_try(_optimizer_steps, case, _cuda_sgd(lr, momentum)))
    return {"inputs": inputs, "out": out}
