"""Graded checks of stage 4 (see ``autograder/checks.py``): each calls the student's code
on inputs drawn from ``rng`` and returns what came back; the grader compares that with
what the reference returns for the same inputs, outside the student's process.

Tensors are built with given code (``from_numpy``, or a ``TensorData`` over a permuted
storage for non-contiguous layouts) and read back with ``to_numpy``. They run on a twin
of ``SimpleBackend`` (:func:`_simple`: the same kernels, which compile nothing, but not
the default backend, so a constant made on the default backend shows): stage-4 code is
the same on every backend, and ``FastTensorBackend``'s kernels would add about half a
minute of Numba compilation to every grade (the state-dict checks also use it: they run
none of its kernels). The convolution and max-pooling kernels are called directly on
NumPy arrays (outputs filled with nan, so an entry a kernel skips shows). Where a task's
code calls another stage-4 task's code, the check swaps that code for a NumPy stand-in
while it runs (:class:`_Patched`): the conv layers of 4.4 run on NumPy kernels instead
of 4.1/4.2's, and the networks of 4.5 on NumPy convolution, pooling, max, flatten and
dropout layers, so each task is graded on its own functions. Initialisers and dropout
draw random numbers: their checks return statistics that a judge holds to bounds at six
standard deviations.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autograder.checks import Raised, check, raised

Array = np.ndarray
Shape = tuple[int, ...]
NAN = float("nan")


# -- tensors in and out -----------------------------------------------------------------


@functools.cache
def _simple() -> Any:
    """A twin of ``SimpleBackend``: its kernels (it compiles nothing), another identity.
    A constant that student code makes on the default backend (``from_numpy(a)``,
    ``tensor(v)``) instead of the input's then raises BackendError when combined with
    the input, as the tests' runs on ``FastTensorBackend`` do (the README: make the
    one-hot and the dropout mask on the input's backend)."""
    from module1.tensor_ops import SimpleOps, TensorBackend

    return TensorBackend(SimpleOps)


def _fast() -> Any:
    from module2.fast_ops import FastTensorBackend

    return FastTensorBackend


def _order(rng: np.random.Generator, ndim: int) -> tuple[int, ...]:
    """A random order of ``ndim`` dimensions (the storage layout of a tensor)."""
    return tuple(int(i) for i in rng.permutation(ndim))


def _make(
    values: Array,
    backend: Any,
    order: Sequence[int] | None = None,
    grad: bool = False,
    dtype: Any = np.float64,
) -> Any:
    """A tensor of ``values`` whose storage holds them permuted by ``order`` (so it is
    not contiguous unless ``order`` is the identity), built with given code only."""
    from module1.tensor import Tensor
    from module1.tensor_data import TensorData

    values = np.asarray(values, dtype=dtype)
    order = tuple(order) if order is not None else tuple(range(values.ndim))
    base = np.ascontiguousarray(np.transpose(values, order))
    base_strides = [s // values.itemsize for s in base.strides]
    strides = tuple(int(base_strides[int(k)]) for k in np.argsort(order))
    data = TensorData(base.reshape(-1).copy(), values.shape, strides)
    return Tensor(data, backend=backend, requires_grad=grad)


def _constant(values: Array, backend: Any) -> Any:
    from module1.tensor import from_numpy

    return from_numpy(np.asarray(values, dtype=np.float64), backend)


def _read(t: Any) -> Array:
    return t.to_numpy()


def _grad(t: Any) -> Array | None:
    return None if t.grad is None else t.grad.to_numpy()


class _Patched:
    """Attributes replaced while a ``with`` block runs, restored after (even when it
    raises): how a check swaps another task's code for a NumPy stand-in."""

    def __init__(self, changes: Sequence[tuple[Any, str, Any]]) -> None:
        self.changes = list(changes)
        self.saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> _Patched:
        for owner, name, value in self.changes:
            self.saved.append((owner, name, vars(owner)[name]))
            setattr(owner, name, value)
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)
        self.saved.clear()


def _safe(judge: Callable[[Any, Any], str | None]) -> Callable[[Any, Any], str | None]:
    """A judge that answers a reason instead of raising on a malformed answer."""

    def run(reference: Any, answer: Any) -> str | None:
        try:
            return judge(reference, answer)
        except Exception as exc:  # a malformed answer from the sandbox
            return f"the answer could not be judged ({type(exc).__name__}: {exc})"[:300]

    return run


# -- NumPy oracles (as in tests/module4/test_conv.py and test_nn.py) ---------------------


def _out_size(size: Shape, kernel: Shape, stride: Shape, padding: Shape) -> Shape:
    return tuple((n + 2 * p - k) // s + 1
                 for n, k, s, p in zip(size, kernel, stride, padding, strict=True))  # fmt: skip


def _np_conv(x: Array, w: Array, stride: Shape, padding: Shape) -> Array:
    """PyTorch's conv1d / conv2d (cross-correlation, no bias): the tests' NumPy oracle."""
    from tests.module4.reference import ref_conv

    return ref_conv(x, w, stride, padding)


def _np_conv_grads(
    x: Array, w: Array, g: Array, stride: Shape, padding: Shape
) -> tuple[Array, Array]:
    """The gradients of ``sum(_np_conv(x, w) * g)`` for ``x`` and ``w``."""
    from tests.module4.reference import ref_grads

    return ref_grads(x, w, g, stride, padding)


def _np_kernels() -> dict[str, Callable[..., None]]:
    """NumPy stand-ins for the six kernels of ``module4.fast_conv`` (same signatures)."""

    def f1(out: Array, x: Array, w: Array, s: int, p: int) -> None:
        out[...] = _np_conv(x, w, (s,), (p,))

    def bi1(dx: Array, g: Array, w: Array, s: int, p: int) -> None:
        dx[...] = _np_conv_grads(np.zeros(dx.shape), w, g, (s,), (p,))[0]

    def bw1(dw: Array, x: Array, g: Array, s: int, p: int) -> None:
        dw[...] = _np_conv_grads(x, np.zeros(dw.shape), g, (s,), (p,))[1]

    def f2(out: Array, x: Array, w: Array, sh: int, sw: int, ph: int, pw: int) -> None:
        out[...] = _np_conv(x, w, (sh, sw), (ph, pw))

    def bi2(dx: Array, g: Array, w: Array, sh: int, sw: int, ph: int, pw: int) -> None:
        dx[...] = _np_conv_grads(np.zeros(dx.shape), w, g, (sh, sw), (ph, pw))[0]

    def bw2(dw: Array, x: Array, g: Array, sh: int, sw: int, ph: int, pw: int) -> None:
        dw[...] = _np_conv_grads(x, np.zeros(dw.shape), g, (sh, sw), (ph, pw))[1]

    kernels = (f1, bi1, bw1, f2, bi2, bw2)
    names = [
        f"conv{d}d_{w}" for d in (1, 2) for w in ("forward", "backward_input", "backward_weight")
    ]
    return dict(zip(names, kernels, strict=True))


def _np_windows(x: Array, kh: int, kw: int) -> Array:
    """``(B, C, H, W)`` -> ``(B, C, H // kh, W // kw, kh * kw)``: each window a row."""
    b, c, h, w = x.shape
    tiles = x.reshape(b, c, h // kh, kh, w // kw, kw).transpose(0, 1, 2, 4, 3, 5)
    return tiles.reshape(b, c, h // kh, w // kw, kh * kw)


def _np_unwindows(t: Array, kh: int, kw: int) -> Array:
    b, c, nh, nw, _ = t.shape
    return (
        t.reshape(b, c, nh, nw, kh, kw).transpose(0, 1, 2, 4, 3, 5).reshape(b, c, nh * kh, nw * kw)
    )


def _np_maxpool_forward(out: Array, where: Array, x: Array, kh: int, kw: int) -> None:
    windows = _np_windows(x, kh, kw)
    out[...] = windows.max(axis=-1)
    where[...] = windows.argmax(axis=-1)


def _np_maxpool_backward(grad: Array, g: Array, where: Array, kh: int, kw: int) -> None:
    onehot = np.arange(kh * kw) == where[..., None]
    grad[...] = _np_unwindows(onehot * g[..., None], kh, kw)


def _keep_mask(shape: Shape) -> Array:
    """A fixed dropout mask: entry ``j`` (row-major, within each example) of example
    ``b`` is dropped when ``(7 j + 3 b) % 5 == 0``. It depends only on positions, so
    where (and in which order) a network applies dropout decides what it drops."""
    if len(shape) == 0:
        return np.ones(())
    n = int(np.prod(shape[1:], dtype=np.int64))
    b, j = np.meshgrid(np.arange(shape[0]), np.arange(n), indexing="ij")
    return ((7 * j + 3 * b) % 5 != 0).astype(np.float64).reshape(shape)


def _init_standins() -> list[tuple[Any, str, Any]]:
    """Stand-ins for the initialisers (4.4) that the given layer constructors call:
    fixed draws from the layer's generator (not He's or Xavier's), so building a layer
    runs no student code."""
    from module4 import layers

    def he_normal(shape: Sequence[int], fan_in: int, rng: np.random.Generator) -> Array:
        return rng.uniform(-1.0, 1.0, tuple(shape)) / math.sqrt(fan_in)

    def xavier_uniform(
        shape: Sequence[int], fan_in: int, fan_out: int, rng: np.random.Generator
    ) -> Array:
        return rng.uniform(-1.0, 1.0, tuple(shape)) / math.sqrt(fan_in + fan_out)

    return [(layers, "he_normal", he_normal), (layers, "xavier_uniform", xavier_uniform)]


def _standins() -> list[tuple[Any, str, Any]]:
    """NumPy stand-ins for the stage-4 code the networks of task 4.5 call: the
    initialisers, the conv layers' forward (4.4) and kernels (4.1, 4.2), Flatten (4.4),
    dropout (4.4), the max-pooling kernels and ``Max`` (4.3). Given code still does the
    rest."""
    from module0.autodiff import Context
    from module1.tensor import Tensor, from_numpy
    from module1.tensor_functions import Function
    from module4 import fast_conv, layers, nn

    class ConvBias(Function):
        """``conv(x, w) + b`` in NumPy, forward and backward."""

        @staticmethod
        def forward(ctx: Context, x: Tensor, w: Tensor, b: Tensor, stride: Shape,
                    padding: Shape) -> Tensor:  # fmt: skip
            xv, wv, bv = x.to_numpy(), w.to_numpy(), b.to_numpy()
            ctx.save_for_backward(xv, wv, stride, padding)
            out = _np_conv(xv, wv, stride, padding)
            return from_numpy(out + bv.reshape(1, -1, *(1,) * len(stride)), x.backend)

        @staticmethod
        def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            xv, wv, stride, padding = ctx.saved_values
            g = d.to_numpy()
            dx, dw = _np_conv_grads(xv, wv, g, stride, padding)
            db = g.sum(axis=(0, *range(2, g.ndim)))
            return from_numpy(dx, d.backend), from_numpy(dw, d.backend), from_numpy(db, d.backend)

    class Reshape(Function):
        @staticmethod
        def forward(ctx: Context, x: Tensor) -> Tensor:
            ctx.save_for_backward(x.shape)
            return from_numpy(x.to_numpy().reshape(x.shape[0], -1), x.backend)

        @staticmethod
        def backward(ctx: Context, d: Tensor) -> Tensor:
            (shape,) = ctx.saved_values
            return from_numpy(d.to_numpy().reshape(shape), d.backend)

    class Max(Function):
        """The maximum along ``dim`` (kept), its gradient to the first maximum."""

        @staticmethod
        def forward(ctx: Context, a: Tensor, dim: int) -> Tensor:
            x = a.to_numpy()
            first = np.zeros_like(x)
            np.put_along_axis(first, np.expand_dims(np.argmax(x, axis=dim), dim), 1.0, axis=dim)
            ctx.save_for_backward(first)
            return from_numpy(x.max(axis=dim, keepdims=True), a.backend)

        @staticmethod
        def backward(ctx: Context, d: Tensor) -> Tensor:
            (first,) = ctx.saved_values
            return from_numpy(first * d.to_numpy(), d.backend)

    def conv1d_forward(self: Any, x: Tensor) -> Tensor:
        w, b = self.weight.value, self.bias.value
        return ConvBias.apply(x, w, b, (self.stride,), (self.padding,))

    def conv2d_forward(self: Any, x: Tensor) -> Tensor:
        w, b = self.weight.value, self.bias.value
        return ConvBias.apply(x, w, b, tuple(self.stride), tuple(self.padding))

    def flatten_forward(self: Any, x: Tensor) -> Tensor:
        return Reshape.apply(x)

    def dropout(input: Tensor, p: float, training: bool = True, rng: Any = None) -> Tensor:
        if not training or p == 0.0:
            return input
        scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
        return input * from_numpy(_keep_mask(input.shape) * scale, input.backend)

    changes: list[tuple[Any, str, Any]] = [
        (layers.Conv1d, "forward", conv1d_forward),
        (layers.Conv2d, "forward", conv2d_forward),
        (layers.Flatten, "forward", flatten_forward),
        (layers, "dropout", dropout),
        (nn, "dropout", dropout),
        (nn, "maxpool2d_forward", _np_maxpool_forward),
        (nn, "maxpool2d_backward", _np_maxpool_backward),
        (nn, "Max", Max),
    ]
    changes += [(fast_conv, name, fn) for name, fn in _np_kernels().items()]
    return changes + _init_standins()


# == 4.1 and 4.2: convolution kernels ====================================================

Case = tuple[int, int, int, Shape, Shape, Shape, Shape]
"""(batch, in_channels, out_channels, size, kernel, stride, padding)."""

_EDGES: dict[int, list[tuple[Shape, Shape, Shape, Shape]]] = {
    1: [((7,), (3,), (1,), (0,)), ((6,), (2,), (2,), (1,)), ((5,), (5,), (1,), (2,)),
        ((9,), (4,), (3,), (2,)), ((1,), (3,), (1,), (1,)), ((1,), (7,), (1,), (3,)),
        ((10,), (2,), (4,), (0,)), ((4,), (1,), (1,), (0,))],
    2: [((5, 6), (3, 3), (1, 1), (0, 0)), ((6, 5), (2, 3), (2, 1), (1, 0)),
        ((4, 4), (3, 2), (1, 2), (2, 1)), ((7, 5), (3, 3), (3, 2), (1, 1)),
        ((1, 2), (5, 4), (1, 2), (2, 1)), ((6, 7), (1, 1), (2, 3), (0, 0)),
        ((9, 8), (2, 2), (4, 3), (0, 1))],
}  # fmt: skip
"""Fixed geometries (size, kernel, stride, padding): a kernel that covers the padded input
exactly, a size-1 input, strides above the kernel size (inputs no window reads), 1x1."""

_LARGE: dict[int, list[Case]] = {
    1: [(19, 5, 7, (40,), (5,), (1,), (0,)), (21, 6, 5, (95,), (4,), (3,), (2,))],
    2: [(19, 3, 6, (13, 12), (3, 4), (1, 1), (0, 0)), (21, 5, 6, (15, 14), (3, 2), (2, 3), (1, 0))],
}
"""More work than the reference's serial threshold (2^16 multiply-adds) and batches over
16 that are no multiple of it, channel counts no multiple of 4: parallel paths, chunks
and blocks that drop or double work show."""


def _conv_cases(rng: np.random.Generator, dims: int, drawn: int = 6) -> list[Case]:
    cases: list[Case] = []
    for size, kernel, stride, padding in _EDGES[dims]:
        b, ci, co = (int(v) for v in rng.integers(1, 6, 3))
        cases.append((b, ci, co, size, kernel, stride, padding))
    top = 10 if dims == 1 else 6
    for _ in range(drawn):
        kernel = tuple(int(rng.integers(1, 6)) for _ in range(dims))
        padding = tuple(int(rng.integers(0, 4)) for _ in range(dims))
        stride = tuple(int(rng.integers(1, 4)) for _ in range(dims))
        size = tuple(int(rng.integers(max(1, k - 2 * p), max(1, k - 2 * p) + top + 1))
                     for k, p in zip(kernel, padding, strict=True))  # fmt: skip
        b, ci, co = (int(v) for v in rng.integers(1, 6, 3))
        cases.append((b, ci, co, size, kernel, stride, padding))
    return cases


def _conv_arrays(rng: np.random.Generator, case: Case) -> tuple[Array, Array, Array]:
    batch, cin, cout, size, kernel, stride, padding = case
    x = rng.normal(size=(batch, cin, *size))
    w = rng.normal(size=(cout, cin, *kernel))
    g = rng.normal(size=(batch, cout, *_out_size(size, kernel, stride, padding)))
    return x, w, g


def _geometry(case: Case) -> tuple[int, ...]:
    """The kernels' trailing arguments: (stride, padding) or (sh, sw, ph, pw)."""
    return (*case[5], *case[6])


def _run_kernel(dims: int, which: str, case: Case, x: Array, w: Array, g: Array) -> Any:
    """One kernel called directly on fresh contiguous arrays, into a nan-filled output:
    the output, and whether the kernel left its inputs as they were."""
    from module4 import fast_conv

    kernel = getattr(fast_conv, f"conv{dims}d_{which}")
    xs, ws, gs = x.copy(), w.copy(), g.copy()
    if which == "forward":
        result = np.full(g.shape, NAN)
        kernel(result, xs, ws, *_geometry(case))
    elif which == "backward_input":
        result = np.full(x.shape, NAN)
        kernel(result, gs, ws, *_geometry(case))
    else:
        result = np.full(w.shape, NAN)
        kernel(result, xs, gs, *_geometry(case))
    unchanged = bool(np.array_equal(xs, x) and np.array_equal(ws, w) and np.array_equal(gs, g))
    return [result, unchanged]


def _kernel_check(dims: int, which: str) -> Callable[[np.random.Generator], Any]:
    def run(rng: np.random.Generator) -> Any:
        cases = _conv_cases(rng, dims)
        out = []
        for case in cases:
            x, w, g = _conv_arrays(rng, case)
            out.append(raised(lambda c=case, x=x, w=w, g=g: _run_kernel(dims, which, c, x, w, g)))
        return {"inputs": cases, "out": out}

    run.__doc__ = f"conv{dims}d_{which} on edge geometries and drawn ones."
    return run


def _large_check(dims: int) -> Callable[[np.random.Generator], Any]:
    def run(rng: np.random.Generator) -> Any:
        """All three kernels on batches big enough for any parallel path."""
        out = []
        for case in _LARGE[dims]:
            x, w, g = _conv_arrays(rng, case)
            for which in ("forward", "backward_input", "backward_weight"):
                out.append(raised(lambda c=case, x=x, w=w, g=g, k=which:
                                  _run_kernel(dims, k, c, x, w, g)))  # fmt: skip
        return {"inputs": [c for c in _LARGE[dims] for _ in range(3)], "out": out}

    return run


def _autodiff_check(dims: int) -> Callable[[np.random.Generator], Any]:
    def run(rng: np.random.Generator) -> Any:
        """``conv1d`` / ``conv2d`` on tensors of any layout: the value and, through the
        given Function's backward, both gradients."""
        from module4.fast_conv import conv1d, conv2d

        cases = _conv_cases(rng, dims, drawn=4)
        out = []
        for case in cases:
            x, w, g = _conv_arrays(rng, case)
            backend = _simple()
            xt = _make(x, backend, _order(rng, dims + 2), grad=True)
            wt = _make(w, backend, _order(rng, dims + 2), grad=True)
            stride: Any = case[5]
            padding: Any = case[6]
            if dims == 1 or (stride[0] == stride[1] and rng.random() < 0.5):
                stride = stride[0]  # conv2d takes one int for both
            if dims == 1 or (padding[0] == padding[1] and rng.random() < 0.5):
                padding = padding[0]

            def go(xt: Any = xt, wt: Any = wt, g: Array = g, s: Any = stride, p: Any = padding,
                   backend: Any = backend) -> Any:  # fmt: skip
                y = (conv1d if dims == 1 else conv2d)(xt, wt, s, p)
                y.backward(_constant(g, backend))
                return [_read(y), _grad(xt), _grad(wt)]

            out.append(raised(go))
        return {"inputs": cases, "out": out}

    return run


for _dims, _task in ((1, "4.1"), (2, "4.2")):
    for _which in ("forward", "backward_input", "backward_weight"):
        check(_task, f"conv{_dims}d_{_which}", rtol=1e-6, atol=1e-8)(_kernel_check(_dims, _which))
    check(_task, f"conv{_dims}d_large_batches", rtol=1e-6, atol=1e-8)(_large_check(_dims))
    check(_task, f"conv{_dims}d", rtol=1e-6, atol=1e-8)(_autodiff_check(_dims))


# == 4.3 pooling, max and argmax =========================================================

PoolCase = tuple[int, int, int, int, int, int]
"""(batch, channels, windows down, windows across, kernel height, kernel width)."""


def _pool_cases(rng: np.random.Generator, n: int = 8) -> list[PoolCase]:
    cases: list[PoolCase] = [(1, 1, 1, 1, 1, 1), (2, 3, 2, 3, 2, 2), (1, 2, 3, 1, 1, 4)]
    for _ in range(n):
        b, c = (int(v) for v in rng.integers(1, 4, 2))
        nh, nw, kh, kw = (int(v) for v in rng.integers(1, 5, 4))
        cases.append((b, c, nh, nw, kh, kw))
    return cases


def _pool_input(rng: np.random.Generator, case: PoolCase, ties: bool = False) -> Array:
    b, c, nh, nw, kh, kw = case
    shape = (b, c, nh * kh, nw * kw)
    if ties:
        return rng.choice([-1.0, 0.0, 2.0], size=shape)
    return np.round(rng.normal(size=shape), 6)


def _kernel_arg(rng: np.random.Generator, kh: int, kw: int) -> Any:
    """The window as a pair, or as one int when it is square (half of the time)."""
    return kh if kh == kw and rng.random() < 0.5 else (kh, kw)


@check("4.3")
def tile(rng: np.random.Generator) -> Any:
    from module4 import nn

    cases, out = _pool_cases(rng), []
    for case in cases:
        x = _pool_input(rng, case)
        t = _make(x, _simple(), _order(rng, 4))
        kernel = _kernel_arg(rng, case[4], case[5])

        def run(t: Any = t, kernel: Any = kernel) -> Any:
            windows, new_h, new_w = nn.tile(t, kernel)
            return [_read(windows), new_h, new_w]

        out.append(raised(run))
    return {"inputs": cases, "out": out}


@check("4.3", "tile.backward")
def tile_backward(rng: np.random.Generator) -> Any:
    """The gradient of ``sum(tile(x) * w)``: each window's gradient back in place."""
    from module4 import nn

    cases, out = _pool_cases(rng), []
    for case in cases:
        x = _pool_input(rng, case)
        b, c, nh, nw, kh, kw = case
        w = rng.normal(size=(b, c, nh, nw, kh * kw))
        backend = _simple()
        leaf = _make(x, backend, _order(rng, 4), grad=True)

        def run(
            leaf: Any = leaf, w: Array = w, kernel: Any = (kh, kw), backend: Any = backend
        ) -> Any:
            (nn.tile(leaf, kernel)[0] * _constant(w, backend)).sum().backward()
            return _grad(leaf)

        out.append(raised(run))
    return {"inputs": cases, "out": out}


@check("4.3", rtol=1e-9, atol=1e-12)
def avgpool2d(rng: np.random.Generator) -> Any:
    from module4 import nn

    cases, out = _pool_cases(rng), []
    for case in cases:
        x = _pool_input(rng, case)
        t = _make(x, _simple(), _order(rng, 4))
        kernel = _kernel_arg(rng, case[4], case[5])
        out.append(raised(lambda t=t, kernel=kernel: _read(nn.avgpool2d(t, kernel))))
    return {"inputs": cases, "out": out}


@check("4.3", "avgpool2d.backward", rtol=1e-9, atol=1e-12)
def avgpool2d_backward(rng: np.random.Generator) -> Any:
    from module4 import nn

    cases, out = _pool_cases(rng), []
    for case in cases:
        b, c, nh, nw, kh, kw = case
        x = _pool_input(rng, case)
        w = rng.normal(size=(b, c, nh, nw))
        backend = _simple()
        leaf = _make(x, backend, _order(rng, 4), grad=True)

        def run(
            leaf: Any = leaf, w: Array = w, kernel: Any = (kh, kw), backend: Any = backend
        ) -> Any:
            (nn.avgpool2d(leaf, kernel) * _constant(w, backend)).sum().backward()
            return _grad(leaf)

        out.append(raised(run))
    return {"inputs": cases, "out": out}


_BIG_POOL: PoolCase = (17, 3, 5, 7, 3, 2)
"""51 planes (no multiple of 2, 4 or 16): a parallel loop that drops or repeats planes."""


@check("4.3")
def maxpool2d_forward(rng: np.random.Generator) -> Any:
    """The kernel called directly (nan-filled ``out``, ``where`` filled with -1), on
    inputs with ties: ``where`` must name each window's first maximum."""
    from module4 import nn

    cases = [*_pool_cases(rng), _BIG_POOL]
    out = []
    for i, case in enumerate(cases):
        x = _pool_input(rng, case, ties=i % 2 == 0)
        b, c, nh, nw, kh, kw = case

        def run(x: Array = x, kh: int = kh, kw: int = kw, shape: Shape = (b, c, nh, nw)) -> Any:
            result = np.full(shape, NAN)
            where = np.full(shape, -1, dtype=np.int64)
            before = x.copy()
            nn.maxpool2d_forward(result, where, x, kh, kw)
            return [result, where, bool(np.array_equal(before, x))]

        out.append(raised(run))
    return {"inputs": cases, "out": out}


@check("4.3")
def maxpool2d_backward(rng: np.random.Generator) -> Any:
    """The kernel called directly, with ``where`` drawn here: each window's gradient to
    the entry ``where`` names, 0 everywhere else (every entry written)."""
    from module4 import nn

    cases = [*_pool_cases(rng), _BIG_POOL]
    out = []
    for case in cases:
        b, c, nh, nw, kh, kw = case
        g = rng.normal(size=(b, c, nh, nw))
        where = rng.integers(0, kh * kw, size=(b, c, nh, nw)).astype(np.int64)

        def run(g: Array = g, where: Array = where, kh: int = kh, kw: int = kw,
                shape: Shape = (b, c, nh * kh, nw * kw)) -> Any:  # fmt: skip
            result = np.full(shape, NAN)
            nn.maxpool2d_backward(result, g, where, kh, kw)
            return result

        out.append(raised(run))
    return {"inputs": cases, "out": out}


@check("4.3")
def maxpool2d(rng: np.random.Generator) -> Any:
    """``nn.maxpool2d`` (given code around the two kernels) on tensors of any layout:
    values, and the gradient (with ties: to the first maximum)."""
    from module4 import nn

    cases, out = _pool_cases(rng), []
    for i, case in enumerate(cases):
        b, c, nh, nw, kh, kw = case
        x = _pool_input(rng, case, ties=i % 2 == 1)
        w = rng.normal(size=(b, c, nh, nw))
        backend = _simple()
        leaf = _make(x, backend, _order(rng, 4), grad=True)
        kernel = _kernel_arg(rng, kh, kw)

        def run(
            leaf: Any = leaf, w: Array = w, kernel: Any = kernel, backend: Any = backend
        ) -> Any:
            y = nn.maxpool2d(leaf, kernel)
            (y * _constant(w, backend)).sum().backward()
            return [_read(y), _grad(leaf)]

        out.append(raised(run))
    return {"inputs": cases, "out": out}


MaxCase = tuple[Shape, int, bool]
"""(shape, dim, keepdim)."""


def _max_cases(rng: np.random.Generator) -> list[MaxCase]:
    cases: list[MaxCase] = [((1,), 0, False), ((5,), -1, True), ((2, 3, 4), 1, False),
                            ((3, 1, 2), 1, True), ((4, 3), -2, False)]  # fmt: skip
    for _ in range(7):
        shape = tuple(int(v) for v in rng.integers(1, 5, int(rng.integers(1, 4))))
        dim = int(rng.integers(-len(shape), len(shape)))
        cases.append((shape, dim, bool(rng.random() < 0.5)))
    return cases


def _max_input(rng: np.random.Generator, shape: Shape, i: int) -> Array:
    """Values with many ties (most cases), or distinct ones."""
    if i % 3 == 2:
        return np.round(rng.normal(size=shape), 6)
    return rng.choice([-1.0, 0.0, 2.0], size=shape)


@check("4.3", "Max.forward")
def max_forward(rng: np.random.Generator) -> Any:
    from module4 import nn

    cases, out = _max_cases(rng), []
    for i, (shape, dim, keepdim) in enumerate(cases):
        x = _max_input(rng, shape, i)
        t = _make(x, _simple(), _order(rng, len(shape)))
        out.append(raised(lambda t=t, d=dim, k=keepdim: _read(nn.max(t, d, keepdim=k))))
    return {"inputs": cases, "out": out}


@check("4.3", "Max.backward")
def max_backward(rng: np.random.Generator) -> Any:
    """The whole gradient of each slice goes to its first maximal entry."""
    from module4 import nn

    cases, out = _max_cases(rng), []
    for i, (shape, dim, keepdim) in enumerate(cases):
        x = _max_input(rng, shape, i)
        w = rng.normal(size=np.max(x, axis=dim, keepdims=keepdim).shape)
        backend = _simple()
        leaf = _make(x, backend, _order(rng, len(shape)), grad=True)

        def run(leaf: Any = leaf, w: Array = w, d: int = dim, k: bool = keepdim,
                backend: Any = backend) -> Any:  # fmt: skip
            (nn.max(leaf, d, keepdim=k) * _constant(w, backend)).sum().backward()
            return _grad(leaf)

        out.append(raised(run))
    return {"inputs": cases, "out": out}


@check("4.3")
def argmax(rng: np.random.Generator) -> Any:
    """Indices (as floats) of the first maximum; a constant even for an input that
    requires a gradient."""
    from module4 import nn

    cases, out = _max_cases(rng), []
    for i, (shape, dim, keepdim) in enumerate(cases):
        x = _max_input(rng, shape, i)
        t = _make(x, _simple(), _order(rng, len(shape)), grad=True)

        def run(t: Any = t, d: int = dim, k: bool = keepdim) -> Any:
            index = nn.argmax(t, d, keepdim=k)
            return [_read(index), bool(index.requires_grad), index.history is None]

        out.append(raised(run))
    return {"inputs": cases, "out": out}


# == 4.4 softmax, log-softmax, dropout ===================================================

SoftCase = tuple[Shape, int, float]
"""(shape, dim, scale of the values)."""


def _soft_cases(rng: np.random.Generator) -> list[SoftCase]:
    cases: list[SoftCase] = [((1,), 0, 1.0), ((4,), -1, 1.0), ((3, 1), 1, 1.0), ((2, 3, 4), 1, 1.0)]
    for _ in range(8):
        shape = tuple(int(v) for v in rng.integers(1, 5, int(rng.integers(1, 4))))
        dim = int(rng.integers(-len(shape), len(shape)))
        cases.append((shape, dim, float(rng.choice([0.1, 1.0, 30.0]))))
    return cases


_HUGE = np.array([[1000.0, -1000.0, 0.0], [1000.0, 1000.0, 999.0], [-1000.0, -1000.0, -1001.0]])
"""Rows a softmax without its shift overflows on (exp(1000) is inf)."""


def _soft_check(name: str, backward: bool) -> Callable[[np.random.Generator], Any]:
    def run(rng: np.random.Generator) -> Any:
        from module4 import nn

        fn = getattr(nn, name)
        cases = _soft_cases(rng)
        inputs: list[Any] = [*cases, "huge rows, dim 1", "huge rows, dim 0"]
        values = [rng.normal(scale=s, size=shape) for shape, _, s in cases] + [_HUGE, _HUGE.T]
        dims = [d for _, d, _ in cases] + [1, 0]
        out = []
        for x, dim in zip(values, dims, strict=True):
            backend = _simple()
            leaf = _make(x, backend, _order(rng, x.ndim), grad=backward)
            w = rng.normal(size=x.shape)

            def go(leaf: Any = leaf, dim: int = dim, w: Array = w, backend: Any = backend) -> Any:
                y = fn(leaf, dim)
                if not backward:
                    return _read(y)
                (y * _constant(w, backend)).sum().backward()
                return _grad(leaf)

            out.append(raised(go))
        return {"inputs": inputs, "out": out}

    return run


check("4.4", "softmax", rtol=1e-7, atol=1e-12)(_soft_check("softmax", False))
check("4.4", "softmax.backward", rtol=1e-6, atol=1e-10)(_soft_check("softmax", True))
check("4.4", "logsoftmax", rtol=1e-7, atol=1e-10)(_soft_check("logsoftmax", False))
check("4.4", "logsoftmax.backward", rtol=1e-6, atol=1e-10)(_soft_check("logsoftmax", True))


def _dropout_case(x: Array, p: float, seed: int, backend: Any, order: tuple[int, ...],
                  large: bool) -> dict[str, Any]:  # fmt: skip
    """What one call of dropout did, summarised: the output's shape, whether every entry
    is 0 or its input over 1 - p, the share dropped, whether the gradient is the mask over
    1 - p, and whether the same seed repeats the mask (and another changes it)."""
    from module4 import nn

    w = np.random.default_rng(seed + 1).normal(size=x.shape)
    leaf = _make(x, backend, order, grad=True)
    y = nn.dropout(leaf, p, rng=np.random.default_rng(seed))
    (y * _constant(w, backend)).sum().backward()
    got, grad = _read(y), _grad(leaf)
    kept = got != 0.0
    if p == 1.0:
        values_ok = bool(np.all(got == 0.0))
        grad_ok = grad is not None and bool(np.all(grad == 0.0))
    else:
        values_ok = bool(np.allclose(got[kept], x[kept] / (1.0 - p), rtol=1e-12, atol=0.0))
        want = np.where(kept, w / (1.0 - p), 0.0)
        grad_ok = grad is not None and bool(np.allclose(grad, want, rtol=1e-12, atol=1e-300))
    again = _read(nn.dropout(_make(x, backend, order), p, rng=np.random.default_rng(seed)))
    summary: dict[str, Any] = {
        "shape": tuple(int(s) for s in got.shape),
        "values_ok": values_ok,
        "grad_ok": grad_ok,
        "dropped": float(np.mean(~kept)),
        "same_seed_same_mask": bool(np.array_equal(again, got)),
    }
    if large:
        other = _read(nn.dropout(_make(x, backend, order), p, rng=np.random.default_rng(seed + 7)))
        summary["other_seed_other_mask"] = bool(not np.array_equal(other, got))
    return summary


@_safe
def _dropout_judge(reference: Any, answer: Any) -> str | None:
    """Exact flags as the reference's; the share dropped within 6 standard deviations
    of ``p`` for the large cases."""
    cases = reference["cases"]
    mine = answer.get("cases") if isinstance(answer, dict) else None
    if not isinstance(mine, list) or len(mine) != len(cases):
        return f"expected {len(cases)} cases, got {str(answer)[:200]}"
    for i, (ref, got) in enumerate(zip(cases, mine, strict=True)):
        what = f"case {i} ({ref['input']})"
        summary, want = got.get("summary") if isinstance(got, dict) else None, ref["summary"]
        if isinstance(summary, Raised):
            return f"{what}: raised {summary.type}"
        if not isinstance(summary, dict):
            return f"{what}: no answer"
        for key, value in want.items():
            if key != "dropped" and summary.get(key) != value:
                return f"{what}: {key} is {summary.get(key)!r}, expected {value!r}"
        dropped, p, n = summary.get("dropped"), ref["p"], ref["n"]
        if type(dropped) is not float or not 0.0 <= dropped <= 1.0:
            return f"{what}: the share dropped is {dropped!r}"
        if ref["large"]:
            bound = 6.0 * math.sqrt(p * (1.0 - p) / n) + 1.0 / n
            if not abs(dropped - p) <= bound:
                return (f"{what}: dropped a share {dropped:.4f} of {n} entries, expected "
                        f"{p} ± {bound:.4f}")  # fmt: skip
    return None


@check("4.4", "dropout", judge=_dropout_judge)
def dropout(rng: np.random.Generator) -> Any:
    """Masks are random, so a judge checks what they must satisfy (see
    :func:`_dropout_case`)."""
    cases = []
    plan = [  # (shape, p, large: the share dropped is judged, stored permuted)
        ((100, 200), 0.5, True, False),
        ((80, 150), float(rng.choice([0.1, 0.25, 0.8])), True, False),
        ((3, 4, 5), 0.2, False, True),
        ((2, 3), 0.5, False, False),
        ((4, 1, 6), 1.0, False, False),
        ((6, 7), float(rng.choice([0.3, 0.6])), False, True),
    ]
    for shape, p, large, permuted in plan:
        seed = int(rng.integers(0, 2**31))
        x = rng.uniform(1.0, 2.0, size=shape)
        backend = _simple()
        order = _order(rng, len(shape)) if permuted else tuple(range(len(shape)))
        summary = raised(lambda x=x, p=p, s=seed, b=backend, o=order, lg=large:
                         _dropout_case(x, p, s, b, o, lg))  # fmt: skip
        cases.append({"input": f"shape {shape}, p {p}", "p": p, "n": int(np.prod(shape)),
                      "large": large, "summary": summary})  # fmt: skip
    return {"cases": cases}


@check("4.4")
def dropout_default_generator(rng: np.random.Generator) -> Any:
    """Without ``rng``, masks come from the framework's generator: ``manual_seed``
    repeats them, and successive calls draw new ones."""
    from module1 import creation
    from module1.tensor import manual_seed
    from module4 import nn

    saved = creation._generator
    x = _constant(np.ones((20, 30)), _simple())
    seed = int(rng.integers(0, 2**31))
    try:

        def run() -> Any:
            manual_seed(seed)
            first, second = _read(nn.dropout(x, 0.5)), _read(nn.dropout(x, 0.5))
            manual_seed(seed)
            again = _read(nn.dropout(x, 0.5))
            return [bool(np.array_equal(first, again)), bool(not np.array_equal(first, second)),
                    sorted({float(v) for v in np.unique(first)})]  # fmt: skip

        return raised(run)
    finally:
        creation._generator = saved


# == 4.4 losses ==========================================================================


def _targets(y: Array, kind: str, backend: Any) -> Any:
    if kind == "list":
        return [int(v) for v in y]
    if kind == "array":
        return y.astype(np.int64)
    if kind == "float array":
        return y.astype(np.float64)
    return _constant(y.astype(np.float64), backend)


_KINDS = ("list", "array", "tensor", "float array")


def _np_logsoftmax(x: Array) -> Array:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _class_check(name: str) -> Callable[[np.random.Generator], Any]:
    def run(rng: np.random.Generator) -> Any:
        from module4 import losses

        fn = getattr(losses, name)
        sizes = [(1, 1), (1, 4), (5, 1), (3, 3)] + [
            (int(rng.integers(1, 8)), int(rng.integers(1, 6))) for _ in range(6)
        ]
        inputs, out = [], []
        for i, (n, k) in enumerate(sizes):
            logits = rng.normal(scale=float(rng.choice([0.1, 1.0, 10.0])), size=(n, k))
            x = logits if name == "cross_entropy" else _np_logsoftmax(logits)
            y = rng.integers(0, k, size=n)
            kind = _KINDS[i % len(_KINDS)]
            backend = _simple()
            order = _order(rng, 2)
            inputs.append(((n, k), [int(v) for v in y], kind))
            out.append(raised(lambda x=x, y=y, kind=kind, b=backend, o=order:
                              _loss_run(fn, x, y, kind, b, o)))  # fmt: skip
        if name == "cross_entropy":  # huge logits: right, wrong by 2000, a tie
            x = np.array([[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 0.0], [500.0, 500.0, -500.0]])
            inputs.append(("huge logits", [0, 0, 1], "array"))
            out.append(raised(lambda: _loss_run(fn, x, np.array([0, 0, 1]), "array", _simple(),
                                                (1, 0))))  # fmt: skip
        return {"inputs": inputs, "out": out}

    return run


def _loss_run(fn: Callable[..., Any], x: Array, y: Array, kind: str, backend: Any,
              order: tuple[int, ...]) -> Any:  # fmt: skip
    """A class loss: its value and its gradient for the scores (the targets given as a
    list, an integer or float array, or a tensor)."""
    leaf = _make(x, backend, order, grad=True)
    loss = fn(leaf, _targets(y, kind, backend))
    loss.backward()
    return [_read(loss), _grad(leaf)]


check("4.4", "nll_loss", rtol=1e-9, atol=1e-12)(_class_check("nll_loss"))
check("4.4", "cross_entropy", rtol=1e-8, atol=1e-12)(_class_check("cross_entropy"))


def _pair_loss_cases(rng: np.random.Generator) -> list[Shape]:
    return [(), (1,), (4,), (2, 3)] + [
        tuple(int(v) for v in rng.integers(1, 5, int(rng.integers(1, 4)))) for _ in range(4)
    ]


def _pair_loss(fn: Callable[..., Any], a: Array, b: Array, backend: Any,
               order: tuple[int, ...]) -> Any:  # fmt: skip
    """The loss, and its gradients for both arguments."""
    first = _make(a, backend, order, grad=True)
    second = _make(b, backend, None, grad=True)
    loss = fn(first, second)
    loss.backward()
    return [_read(loss), _grad(first), _grad(second)]


@check("4.4", rtol=1e-9, atol=1e-12)
def binary_cross_entropy(rng: np.random.Generator) -> Any:
    """Probabilities inside (0, 1) with soft targets, and the clamp at log = -100 for
    probabilities of exactly 0 and 1 (finite value, zero gradient in the clamped term)."""
    from module4 import losses

    shapes = _pair_loss_cases(rng)
    out = []
    for shape in shapes:
        p = rng.uniform(0.02, 0.98, size=shape)
        y = rng.uniform(0.0, 1.0, size=shape)
        backend = _simple()
        order = _order(rng, len(shape))
        out.append(raised(lambda p=p, y=y, b=backend, o=order:
                          _pair_loss(losses.binary_cross_entropy, p, y, b, o)))  # fmt: skip
    p = np.array([0.0, 1.0, 0.0, 1.0, 0.5, 0.25])
    y = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.5])
    out.append(raised(lambda: _pair_loss(losses.binary_cross_entropy, p, y, _simple(), (0,))))
    return {"inputs": [*shapes, "p = [0, 1, 0, 1, 0.5, 0.25], y = [1, 0, 0, 1, 1, 0.5]"],
            "out": out}  # fmt: skip


@check("4.4", rtol=1e-9, atol=1e-12)
def mse_loss(rng: np.random.Generator) -> Any:
    from module4 import losses

    shapes = _pair_loss_cases(rng)
    out = []
    for shape in shapes:
        a, b = rng.normal(size=shape), rng.normal(size=shape)
        backend = _simple()
        order = _order(rng, len(shape))
        out.append(raised(lambda a=a, b=b, be=backend, o=order:
                          _pair_loss(losses.mse_loss, a, b, be, o)))  # fmt: skip
    return {"inputs": shapes, "out": out}


# == 4.4 initialisation ==================================================================

_NORMAL_WITHIN = (0.5, 1.0, 2.0, 3.0)
"""Multiples of the standard deviation: the share of |w| below each is judged."""
_UNIFORM_WITHIN = (0.25, 0.5, 0.75)
"""Fractions of the bound: the share of |w| below each is judged."""


def _sample(w: Any, scale: float, within: Sequence[float]) -> dict[str, Any]:
    """Statistics of a drawn weight array (``scale``: the std or the bound)."""
    summary: dict[str, Any] = {"type": type(w).__name__}
    if not isinstance(w, np.ndarray):
        return summary
    a = np.asarray(w, dtype=np.float64)
    summary.update(dtype=w.dtype.kind, shape=tuple(int(s) for s in w.shape),
                   finite=bool(np.all(np.isfinite(a))))  # fmt: skip
    if a.size and summary["finite"]:
        summary.update(
            mean=float(a.mean()), std=float(a.std()), max_abs=float(np.abs(a).max()),
            positive=float(np.mean(a > 0.0)),
            within=[float(np.mean(np.abs(a) <= t * scale)) for t in within],
        )  # fmt: skip
    return summary


def _init_case(draw: Callable[[np.random.Generator], Any], seed: int, scale: float,
               within: Sequence[float], large: bool) -> dict[str, Any]:  # fmt: skip
    """One initialiser call summarised, and whether it draws from the generator it is
    given (the same seed repeats the array; for large arrays another seed changes it)."""
    w = draw(np.random.default_rng(seed))
    again = draw(np.random.default_rng(seed))
    summary = _sample(w, scale, within)
    summary["repeats"] = bool(type(again) is type(w) and np.array_equal(again, w))
    if large:
        other = draw(np.random.default_rng(seed + 1))
        summary["other_seed_differs"] = bool(not np.array_equal(other, w))
    return summary


def _init_judge(kind: str) -> Callable[[Any, Any], str | None]:
    @_safe
    def judge(reference: Any, answer: Any) -> str | None:
        cases = reference["cases"]
        mine = answer.get("cases") if isinstance(answer, dict) else None
        if not isinstance(mine, list) or len(mine) != len(cases):
            return f"expected {len(cases)} cases, got {str(answer)[:200]}"
        for i, (ref, got) in enumerate(zip(cases, mine, strict=True)):
            what = f"case {i} ({ref['input']})"
            s = got.get("summary") if isinstance(got, dict) else None
            if isinstance(s, Raised):
                return f"{what}: raised {s.type}"
            if not isinstance(s, dict):
                return f"{what}: no answer"
            want = ref["summary"]
            for key in ("type", "dtype", "shape", "finite", "repeats", "other_seed_differs"):
                if key in want and s.get(key) != want[key]:
                    return f"{what}: {key} is {s.get(key)!r}, expected {want[key]!r}"
            if ref["large"] and (problem := _init_stats(kind, ref, s)) is not None:
                return f"{what}: {problem}"
        return None

    return judge


def _init_stats(kind: str, ref: dict[str, Any], s: dict[str, Any]) -> str | None:
    """Six-sigma bounds on the statistics of ``n`` draws (a correct initialiser fails
    one of them with probability far below 1e-6)."""
    n, scale = ref["n"], ref["scale"]

    def near(name: str, value: Any, center: float, bound: float) -> str | None:
        if type(value) is not float or not abs(value - center) <= bound:  # nan fails
            return f"{name} is {value!r}, expected {center:.5g} ± {bound:.3g} over {n} draws"
        return None

    checks = [
        near("the share of positive entries", s.get("positive"), 0.5, 6 * math.sqrt(0.25 / n))
    ]
    shares = s.get("within")
    if not isinstance(shares, list):
        return "no statistics"
    if kind == "he":
        std = scale
        checks.append(near("the mean", s.get("mean"), 0.0, 6 * std / math.sqrt(n)))
        checks.append(near("the std", s.get("std"), std, 6 * std / math.sqrt(2 * n)))
        for t, share in zip(_NORMAL_WITHIN, shares, strict=True):
            q = math.erf(t / math.sqrt(2.0))
            checks.append(
                near(f"the share within {t} std", share, q, 6 * math.sqrt(q * (1 - q) / n))
            )
    else:
        bound = scale
        std = bound / math.sqrt(3.0)
        checks.append(near("the mean", s.get("mean"), 0.0, 6 * std / math.sqrt(n)))
        var_sd = bound**2 * math.sqrt(4.0 / 45.0 / n)
        got_std = s.get("std")
        var = got_std**2 if type(got_std) is float else got_std
        checks.append(near("the variance", var, bound**2 / 3.0, 6 * var_sd))
        for t, share in zip(_UNIFORM_WITHIN, shares, strict=True):
            checks.append(near(f"the share within {t} of the bound", share, t,
                               6 * math.sqrt(t * (1 - t) / n)))  # fmt: skip
        top = s.get("max_abs")
        if type(top) is not float or not bound * (1 - 30.0 / n) <= top <= bound * (1 + 1e-12):
            checks.append(f"the largest |w| is {top!r}, expected just under the bound {bound:.6g}")
    return next((c for c in checks if c is not None), None)


@check("4.4", judge=_init_judge("he"))
def he_normal(rng: np.random.Generator) -> Any:
    from module4 import layers

    plan: list[tuple[Any, int, bool]] = [((200, 300), 50, True), ([40, 30, 5, 5], 750, True),
                                         ((3,), 1, False), ((2, 3, 3, 3), 27, False)]  # fmt: skip
    cases = []
    for shape, fan_in, large in plan:
        std = math.sqrt(2.0 / fan_in)
        seed = int(rng.integers(0, 2**31))
        summary = raised(lambda shape=shape, fan_in=fan_in, std=std, seed=seed, large=large:
                         _init_case(lambda g: layers.he_normal(shape, fan_in, g), seed, std,
                                    _NORMAL_WITHIN, large))  # fmt: skip
        cases.append({"input": f"shape {tuple(shape)}, fan_in {fan_in}", "n": int(np.prod(shape)),
                      "scale": std, "large": large, "summary": summary})  # fmt: skip
    return {"cases": cases}


@check("4.4", judge=_init_judge("xavier"))
def xavier_uniform(rng: np.random.Generator) -> Any:
    from module4 import layers

    plan: list[tuple[Any, int, int, bool]] = [
        ((300, 200), 30, 70, True),
        ([16, 8, 3, 3], 72, 144, True),
        ((4, 2), 4, 2, False),
        ((5,), 3, 11, False),
    ]
    cases = []
    for shape, fan_in, fan_out, large in plan:
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        seed = int(rng.integers(0, 2**31))
        summary = raised(lambda shape=shape, a=fan_in, b=fan_out, bound=bound, seed=seed,
                         large=large: _init_case(lambda g: layers.xavier_uniform(shape, a, b, g),
                                                 seed, bound, _UNIFORM_WITHIN, large))  # fmt: skip
        cases.append({"input": f"shape {tuple(shape)}, fans {fan_in}, {fan_out}",
                      "n": int(np.prod(shape)), "scale": bound, "large": large,
                      "summary": summary})  # fmt: skip
    return {"cases": cases}


# == 4.4 layers and state dicts ==========================================================


def _conv_layer_check(dims: int) -> Callable[[np.random.Generator], Any]:
    def run(rng: np.random.Generator) -> Any:
        """The layer on NumPy kernels (not 4.1/4.2's): its output (convolution plus a
        bias per channel), and the gradients of input, weight and bias."""
        from module4 import fast_conv, layers

        out, inputs = [], []
        kernels = [(fast_conv, name, fn) for name, fn in _np_kernels().items()]
        with _Patched(kernels + _init_standins()):
            for _ in range(6):
                cin, cout = (int(v) for v in rng.integers(1, 5, 2))
                kernel = tuple(int(v) for v in rng.integers(1, 4, dims))
                stride = tuple(int(v) for v in rng.integers(1, 3, dims))
                padding = tuple(int(v) for v in rng.integers(0, 3, dims))
                size = tuple(int(max(1, k - 2 * p) + rng.integers(0, 6))
                             for k, p in zip(kernel, padding, strict=True))  # fmt: skip
                batch = int(rng.integers(1, 4))
                backend = _simple()
                x = rng.normal(size=(batch, cin, *size))
                bias = rng.normal(size=cout)
                g = rng.normal(size=(batch, cout, *_out_size(size, kernel, stride, padding)))
                seed = int(rng.integers(0, 2**31))
                order = _order(rng, dims + 2)
                inputs.append((batch, cin, cout, size, kernel, stride, padding))

                def go(cin: int = cin, cout: int = cout, kernel: Shape = kernel,
                       stride: Shape = stride, padding: Shape = padding, backend: Any = backend,
                       x: Array = x, bias: Array = bias, g: Array = g, seed: int = seed,
                       order: tuple[int, ...] = order) -> Any:  # fmt: skip
                    generator = np.random.default_rng(seed)
                    if dims == 1:
                        layer = layers.Conv1d(cin, cout, kernel[0], stride[0], padding[0],
                                              rng=generator, backend=backend)  # fmt: skip
                    else:
                        k: Any = kernel[0] if kernel[0] == kernel[1] else kernel
                        layer = layers.Conv2d(cin, cout, k, stride, padding, rng=generator,
                                              backend=backend)  # fmt: skip
                    layer.bias.update(_constant(bias, backend))
                    leaf = _make(x, backend, order, grad=True)
                    y = layer(leaf)
                    y.backward(_constant(g, backend))
                    return [_read(y), _grad(leaf), _grad(layer.weight.value),
                            _grad(layer.bias.value)]  # fmt: skip

                out.append(raised(go))
        return {"inputs": inputs, "out": out}

    return run


check("4.4", "Conv1d.forward", rtol=1e-9, atol=1e-11)(_conv_layer_check(1))
check("4.4", "Conv2d.forward", rtol=1e-9, atol=1e-11)(_conv_layer_check(2))


@check("4.4", "Flatten.forward")
def flatten_forward(rng: np.random.Generator) -> Any:
    """Non-contiguous inputs of 2 to 5 dimensions: the batch kept, the rest flattened in
    row-major order; the gradient goes back in place."""
    from module4.layers import Flatten

    shapes = [(2, 3), (1, 4, 1), (2, 3, 4, 5)] + [
        tuple(int(v) for v in rng.integers(1, 5, int(rng.integers(2, 6)))) for _ in range(4)
    ]
    out = []
    for shape in shapes:
        x = rng.normal(size=shape)
        w = rng.normal(size=(shape[0], int(np.prod(shape[1:]))))
        backend = _simple()
        leaf = _make(x, backend, _order(rng, len(shape)), grad=True)

        def go(leaf: Any = leaf, w: Array = w, backend: Any = backend) -> Any:
            y = Flatten()(leaf)
            (y * _constant(w, backend)).sum().backward()
            return [_read(y), _grad(leaf)]

        out.append(raised(go))
    return {"inputs": shapes, "out": out}


def _affine_module(scale: float, shift: float) -> Any:
    """A check-made layer ``x * scale + shift`` (given Module, stage-1 operations)."""
    from module0.module import Module

    class Affine(Module):
        def forward(self, x: Any) -> Any:
            return x * scale + shift

    return Affine()


@check("4.4", "Sequential.forward", rtol=1e-9, atol=1e-12)
def sequential_forward(rng: np.random.Generator) -> Any:
    """Layers run in the order given (ReLU between affine maps does not commute), nested
    Sequentials, none at all, and a first layer that takes a NumPy array."""
    from module4.layers import Embedding, Linear, ReLU, Sequential

    backend = _simple()
    out = []
    for _ in range(3):
        generator = np.random.default_rng(int(rng.integers(0, 2**31)))
        x = rng.normal(size=(4, 3))
        a, b = (round(float(v), 3) for v in rng.uniform(-2, 2, 2))
        c, d = (round(float(v), 3) for v in rng.uniform(-2, 2, 2))

        def go(x: Array = x, g: Any = generator, a: float = a, b: float = b, c: float = c,
               d: float = d) -> Any:  # fmt: skip
            with _Patched(_init_standins()):
                first = Linear(3, 5, rng=g, backend=backend)
                last = Linear(5, 2, rng=g, backend=backend)
            inner = Sequential(_affine_module(c, d), ReLU())
            model = Sequential(first, _affine_module(a, b), ReLU(), inner, last,
                               _affine_module(-1.5, 0.25))  # fmt: skip
            leaf = _make(x, backend, (1, 0), grad=True)
            y = model(leaf)
            y.sum().backward()
            return [_read(y), _grad(leaf), _grad(first.weight.value)]

        out.append(raised(go))
    x = rng.normal(size=(2, 2))
    out.append(raised(lambda: _read(Sequential()(_constant(x, backend)))))
    tokens = rng.integers(0, 6, size=(2, 3))
    out.append(raised(lambda: _read(
        Sequential(Embedding(6, 2, rng=np.random.default_rng(1), backend=backend),
                   _affine_module(2.0, -1.0))(tokens))))  # fmt: skip
    return out


def _small_model(seed: int, backend: Any) -> Any:
    """A model with nested names: Sequential of a Conv2d, Flatten, Linear, and a
    check-made block holding its own parameter and a child."""
    from module0.module import Module, Parameter
    from module4.layers import Conv2d, Flatten, Linear, Sequential

    g = np.random.default_rng(seed)

    class Block(Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = Parameter(_constant(g.normal(size=(2, 3)), backend), "scale")
            self.inner = Linear(3, 2, rng=g, backend=backend)

    with _Patched(_init_standins()):
        return Sequential(Conv2d(1, 2, 3, rng=g, backend=backend), Flatten(),
                          Linear(8, 3, rng=g, backend=backend), Block())  # fmt: skip


@check("4.4")
def state_dict(rng: np.random.Generator) -> Any:
    """Every parameter by dotted name as a NumPy array of its values, a copy."""
    from module4 import layers

    out = []
    for backend in (_simple(), _fast()):
        model = _small_model(int(rng.integers(0, 2**31)), backend)

        def go(model: Any = model) -> Any:
            state = layers.state_dict(model)
            types = {str(k): type(v).__name__ for k, v in state.items()}
            arrays = {str(k): np.array(v, dtype=np.float64) for k, v in state.items()}
            for v in state.values():
                if isinstance(v, np.ndarray) and v.size:
                    v.reshape(-1)[0] = 1234.5  # a copy: the model must not change
            after = {name: p.value.to_numpy() for name, p in model.named_parameters()}
            return {"state": arrays, "types": types, "model_after": after}

        out.append(raised(go))
    return out


@check("4.4")
def load_state_dict(rng: np.random.Generator) -> Any:
    """Every parameter set from the dict (values, still trainable, on its backend);
    arrays given in any memory order."""
    from module4 import layers

    out = []
    for backend in (_simple(), _fast()):
        model = _small_model(int(rng.integers(0, 2**31)), backend)
        state = {}
        for i, (name, p) in enumerate(model.named_parameters()):
            values = rng.normal(size=p.value.shape)
            state[name] = np.asfortranarray(values) if i % 2 else values

        def go(model: Any = model, state: dict[str, Array] = state, backend: Any = backend) -> Any:
            layers.load_state_dict(model, state)
            return {
                name: [p.value.to_numpy(), bool(p.value.requires_grad), p.value.backend is backend]
                for name, p in model.named_parameters()
            }

        out.append(raised(go))
    return out


# == 4.5 the networks ====================================================================


def _digit_model(rng: np.random.Generator, backend: Any) -> tuple[Any, int]:
    from module4.models import DigitCNN

    size = int(rng.choice([4, 8, 12]))
    channels = (int(rng.integers(1, 4)), int(rng.integers(1, 5)))
    model = DigitCNN(size=size, channels=channels, hidden=int(rng.integers(2, 6)),
                     classes=int(rng.integers(2, 5)), dropout=0.4,
                     seed=int(rng.integers(0, 2**31)), backend=backend)  # fmt: skip
    return model, size


def _sentence_model(rng: np.random.Generator, backend: Any) -> tuple[Any, Array]:
    from module4.models import SentenceCNN

    widths = [(2, 3), (3, 4, 5), (1,), (4, 2)][int(rng.integers(0, 4))]
    vocab = int(rng.integers(5, 15))
    model = SentenceCNN(vocab, dim=int(rng.integers(1, 5)), widths=widths,
                        filters=int(rng.integers(1, 4)), classes=int(rng.integers(2, 4)),
                        dropout=0.4, seed=int(rng.integers(0, 2**31)), backend=backend)  # fmt: skip
    length = max(widths) + int(rng.integers(0, 4))
    tokens = rng.integers(0, vocab, size=(int(rng.integers(1, 5)), length))
    tokens[:, -1] = 0  # padding
    return model, tokens


def _network_check(which: str, mode: str) -> Callable[[np.random.Generator], Any]:
    def run(rng: np.random.Generator) -> Any:
        seeds = [int(s) for s in rng.integers(0, 2**31, 3)]  # one generator per case
        out = []
        for seed in seeds:
            backend = _simple()
            with _Patched(_standins()):
                out.append(raised(lambda b=backend, s=seed: _network_run(
                    np.random.default_rng(s), which, mode, b)))  # fmt: skip
        return out

    return run


def _network_run(rng: np.random.Generator, which: str, mode: str, backend: Any) -> Any:
    """A network's forward in eval or training mode (dropout as a fixed mask), or the
    gradients of ``sum(logits * w)`` for its input or embedding and every parameter."""
    if which == "digit":
        model, size = _digit_model(rng, backend)
        x: Any = _make(rng.random((int(rng.integers(1, 4)), 1, size, size)), backend,
                       _order(rng, 4), grad=mode == "backward")  # fmt: skip
    else:
        model, x = _sentence_model(rng, backend)
    if mode == "eval":
        model.eval()
    logits = model(x)
    if mode != "backward":
        return _read(logits)
    w = rng.normal(size=logits.shape)
    (logits * _constant(w, backend)).sum().backward()
    grads: dict[str, Any] = {name: _grad(p.value) for name, p in model.named_parameters()}
    if which == "digit":
        grads["input"] = _grad(x)
    return {"logits": _read(logits), "grads": grads}


@check("4.5", "DigitCNN.forward", rtol=1e-9, atol=1e-11)
def digit_forward(rng: np.random.Generator) -> Any:
    """Eval mode (no dropout): two conv, ReLU, 2x2 max-pool stages, then the hidden and
    output Linear layers (the conv, pool and flatten layers are NumPy stand-ins here)."""
    return _network_check("digit", "eval")(rng)


@check("4.5", "DigitCNN.forward_training", rtol=1e-9, atol=1e-11)
def digit_training(rng: np.random.Generator) -> Any:
    """Training mode: dropout (a fixed stand-in mask) on the flattened features."""
    return _network_check("digit", "train")(rng)


@check("4.5", "DigitCNN.backward", rtol=1e-8, atol=1e-11)
def digit_backward(rng: np.random.Generator) -> Any:
    """Gradients reach the input and every parameter (nothing detached on the way)."""
    return _network_check("digit", "backward")(rng)


@check("4.5", "SentenceCNN.forward", rtol=1e-9, atol=1e-11)
def sentence_forward(rng: np.random.Generator) -> Any:
    """Eval mode: embeddings, one Conv1d per width with ReLU, max over time, and the
    per-width Linear heads added (conv and max are NumPy stand-ins here)."""
    return _network_check("sentence", "eval")(rng)


@check("4.5", "SentenceCNN.forward_training", rtol=1e-9, atol=1e-11)
def sentence_training(rng: np.random.Generator) -> Any:
    """Training mode: dropout (a fixed stand-in mask) on each width's pooled features."""
    return _network_check("sentence", "train")(rng)


@check("4.5", "SentenceCNN.backward", rtol=1e-8, atol=1e-11)
def sentence_backward(rng: np.random.Generator) -> Any:
    """Gradients reach the embedding table and every conv and head parameter."""
    return _network_check("sentence", "backward")(rng)


@check("4.5", rtol=1e-7, atol=1e-10)
def digit_sgd_steps(rng: np.random.Generator) -> Any:
    """A few SGD steps (stage 0's optimizer) on a squared error in training mode: the
    losses and the first layer's weight after them."""
    from module0.optim import SGD

    backend = _simple()
    with _Patched(_standins()):
        model, size = _digit_model(rng, backend)
        x = rng.random((4, 1, size, size))
        labels = rng.integers(0, model.out.weight.value.shape[1], size=4)
        target = np.eye(model.out.weight.value.shape[1])[labels]

        def run() -> Any:
            optimizer = SGD(model.parameters(), lr=0.05)
            losses = []
            for _ in range(3):
                for p in model.parameters():
                    p.value.zero_grad_()
                diff = model(_constant(x, backend)) - _constant(target, backend)
                loss = (diff * diff).mean()
                loss.backward()
                optimizer.step()
                losses.append(_read(loss))
            return [losses, model.conv1.weight.value.to_numpy()]

        return raised(run)


__all__ = ["Raised"]


@check("4.4", "float32", rtol=1e-5, atol=1e-6)
def float32_losses_dropout_and_state_dicts(rng: np.random.Generator) -> Any:
    """The losses and dropout on float32 inputs (the twin backend), and a float32 model
    loading a float64 state dict: results, gradients and parameters stay float32, so a
    one-hot or a mask made in float64 (``DtypeError`` when it meets the input) or a
    state dict loaded as float64 loses this check (``tests/module4/test_dtype.py``)."""
    from module4 import layers, losses, nn

    backend, f32 = _simple(), np.float32
    x = rng.normal(size=(4, 3)).astype(f32)
    t = rng.uniform(0.05, 0.95, (4, 3)).astype(f32)
    y = rng.integers(0, 3, 4)
    runs: dict[str, Callable[[Any], Any]] = {
        "nll_loss": lambda a: losses.nll_loss(nn.logsoftmax(a, 1), y),
        "cross_entropy": lambda a: losses.cross_entropy(a, y),
        "mse_loss": lambda a: losses.mse_loss(a, _make(t, backend, dtype=f32)),
        "binary_cross_entropy": lambda a: losses.binary_cross_entropy(
            a.sigmoid(), _make(t, backend, dtype=f32)
        ),
    }

    def loss_run(fn: Callable[[Any], Any]) -> Any:
        leaf = _make(x, backend, (1, 0), grad=True, dtype=f32)
        loss = fn(leaf)
        loss.backward()
        return {"dtypes": [str(loss.dtype), str(leaf.grad.dtype)], "value": _read(loss),
                "grad": _grad(leaf)}  # fmt: skip

    def dropout_run() -> Any:
        leaf = _make(x, backend, (1, 0), grad=True, dtype=f32)
        out = nn.dropout(leaf, 0.5, rng=np.random.default_rng(int(rng.integers(1 << 30))))
        out.sum().backward()
        values, grad = _read(out), _grad(leaf)
        kept = values != 0
        return {"dtypes": [str(out.dtype), str(leaf.grad.dtype)],
                "kept entries are 2x": bool(np.all(values[kept] == 2 * x[kept])),
                "gradient is the mask x 2": bool(np.all(grad == 2.0 * kept))}  # fmt: skip

    def state_run() -> Any:
        model = layers.Linear(3, 2).float()
        state = {k: v.astype(np.float64) + 1.0 for k, v in layers.state_dict(model).items()}
        layers.load_state_dict(model, state)
        return [str(p.value.dtype) for p in model.parameters()]

    answer: dict[str, Any] = {name: raised(lambda fn=fn: loss_run(fn)) for name, fn in runs.items()}
    answer["dropout"] = raised(dropout_run)
    answer["load_state_dict"] = raised(state_run)
    return answer


# == 4.6 batch normalization ============================================================
# As tests/module4/test_batchnorm.py: NumPy's statistics of each channel over every
# dimension but 1, PyTorch's running estimates (the unbiased batch variance, momentum or
# the plain average), gradients of ``sum(y * g)``; both dtypes, non-contiguous inputs.

_BN_SHAPES = ((5, 3), (4, 2, 6), (3, 2, 4, 5), (2, 4, 1, 3))
"""BatchNorm1d's (N, C) and (N, C, L), BatchNorm2d's (N, C, H, W), as the tests'."""


def _bn_cases(rng: np.random.Generator, n: int = 6) -> list[dict[str, Any]]:
    """Inputs of every kind of shape (the tests' and drawn ones), both dtypes, random
    storage orders, random weights and biases; a large mean in cases 2 and 6 (float64:
    in float32 the rounding of the mean alone moves the answer past any tolerance)."""
    cases = []
    for i in range(n):
        if i < len(_BN_SHAPES):
            shape: Shape = _BN_SHAPES[i]
        else:
            dims = int(rng.integers(2, 5))
            shape = tuple(int(s) for s in (rng.integers(2, 5), *rng.integers(1, 5, dims - 1)))
        mean = 100.0 if i % 4 == 2 else float(rng.normal())
        scale = 0.1 if i % 4 == 2 else float(rng.uniform(0.5, 3.0))
        cases.append({
            "x": mean + scale * rng.normal(size=shape), "order": _order(rng, len(shape)),
            "w": rng.normal(size=shape[1]), "b": rng.normal(size=shape[1]),
            "eps": float(rng.choice([1e-5, 1e-3])), "dtype": (np.float64, np.float32)[i % 2],
        })  # fmt: skip
    return cases


def _bn_layer(shape: Shape, backend: Any, dtype: Any, **options: Any) -> Any:
    from module4.batchnorm import BatchNorm1d, BatchNorm2d

    kind = BatchNorm2d if len(shape) == 4 else BatchNorm1d
    return kind(shape[1], backend=backend, **options).to(dtype)


def _bn_inputs(shape: Shape) -> dict[str, Any]:
    return {"shape": list(shape)}


@check("4.6", rtol=2e-5, atol=2e-5)
def channel_stats(rng: np.random.Generator) -> Any:
    """Each channel's mean and biased variance of ``(N, C, S)`` inputs, shape
    ``(1, C, 1)``, in the input's dtype; a channel with a large mean (centre first)."""
    from module4.batchnorm import channel_stats as fn

    out = []
    for c in _bn_cases(rng, 8):
        x = c["x"].reshape(c["x"].shape[0], c["x"].shape[1], -1)
        order = _order(rng, 3)

        def go(x: Array = x, c: dict[str, Any] = c, order: Shape = order) -> Any:
            mean, var = fn(_make(x, _simple(), order, dtype=c["dtype"]))
            return [_read(mean), _read(var)]

        out.append(raised(go))
    return out


@check("4.6", "channel_stats.large_mean", rtol=1e-2, atol=1e-6)
def channel_stats_large_mean(rng: np.random.Generator) -> Any:
    """float32 channels around 1e4 with a spread of 0.1, as the test's: the variance of
    the centred values keeps two digits, ``E[x^2] - E[x]^2`` none."""
    from module4.batchnorm import channel_stats as fn

    out = []
    for _ in range(3):
        shape = (int(rng.integers(4, 10)), int(rng.integers(1, 4)), int(rng.integers(8, 20)))
        x = 1e4 + rng.normal(scale=0.1, size=shape)
        out.append(
            raised(lambda x=x: [_read(v) for v in fn(_make(x, _simple(), dtype=np.float32))])
        )
    return out


@check("4.6", "BatchNormFun.forward", rtol=2e-5, atol=2e-5)
def batchnorm_forward(rng: np.random.Generator) -> Any:
    """The training forward of BatchNorm1d and BatchNorm2d (the batch's statistics,
    weight and bias); a batch of one refused in training (ValueError)."""
    out = []
    for c in _bn_cases(rng):
        shape, d = c["x"].shape, c["dtype"]

        def go(c: dict[str, Any] = c, shape: Shape = shape, d: Any = d) -> Any:
            backend = _simple()
            layer = _bn_layer(shape, backend, d, eps=c["eps"])
            layer.weight.update(_make(c["w"], backend, dtype=d))
            layer.bias.update(_make(c["b"], backend, dtype=d))
            y = layer(_make(c["x"], backend, c["order"], dtype=d))
            return [str(y.dtype), _read(y)]

        out.append({"inputs": _bn_inputs(shape), "out": raised(go)})
    x = rng.normal(size=(1, 3, 1, 1))
    out.append({"one": raised(lambda: _read(_bn_layer((1, 3, 1, 1), _simple(), np.float64)(
        _make(x, _simple()))))})  # fmt: skip
    return out


@check("4.6", "BatchNormFun.backward", rtol=1e-4, atol=1e-5)
def batchnorm_backward(rng: np.random.Generator) -> Any:
    """The gradients of ``sum(y * g)`` for the input, the weight and the bias (and for
    the input alone without ``affine``)."""
    out = []
    for i, c in enumerate(_bn_cases(rng)):
        shape, d = c["x"].shape, c["dtype"]
        g = rng.normal(size=shape)
        affine = i != 3

        def go(c: dict[str, Any] = c, shape: Shape = shape, d: Any = d, g: Array = g,
               affine: bool = affine) -> Any:  # fmt: skip
            backend = _simple()
            layer = _bn_layer(shape, backend, d, eps=c["eps"], affine=affine)
            if affine:
                layer.weight.update(_make(c["w"], backend, dtype=d))
                layer.bias.update(_make(c["b"], backend, dtype=d))
            x = _make(c["x"], backend, c["order"], grad=True, dtype=d)
            (layer(x) * _make(g, backend, dtype=d)).sum().backward()
            params = [_grad(p.value) for p in layer.parameters()]
            return [_grad(x), *params]

        out.append({"inputs": _bn_inputs(shape), "out": raised(go)})
    return out


@check("4.6", rtol=1e-9, atol=1e-12)
def update_running_stats(rng: np.random.Generator) -> Any:
    """The new running mean and variance from the batch's mean and (unbiased) variance;
    then the layers' running estimates after several training steps (momentum 0.1, a
    drawn one, None: the plain average), their batch count, and the eval forward with
    them."""
    from module4.batchnorm import update_running_stats as fn

    out: list[Any] = []
    for _ in range(3):
        c = int(rng.integers(1, 6))
        rm, rv, mean = rng.normal(size=c), rng.uniform(0.1, 3, c), rng.normal(size=c)
        var, count, factor = rng.uniform(0, 3, c), int(rng.integers(2, 40)), float(rng.random())
        out.append(raised(lambda a=rm, b=rv, m=mean, v=var, n=count, f=factor: [
            _read(t) for t in fn(*(_make(z, _simple()) for z in (a, b, m, v)), n, f)]))  # fmt: skip
    for momentum in (0.1, round(float(rng.uniform(0.2, 0.9)), 3), None):
        shape = _BN_SHAPES[int(rng.integers(0, len(_BN_SHAPES)))]
        batches = [float(rng.normal()) + (1 + k) * rng.normal(size=shape) for k in range(3)]
        x, order = rng.normal(size=shape), _order(rng, len(shape))

        def go(shape: Shape = shape, batches: list[Array] = batches, x: Array = x,
               momentum: float | None = momentum, order: Shape = order) -> Any:  # fmt: skip
            backend = _simple()
            layer = _bn_layer(shape, backend, np.float64, momentum=momentum)
            for batch in batches:
                layer(_make(batch, backend, order))
            layer.eval()
            return [_read(layer.running_mean), _read(layer.running_var),
                    int(layer.num_batches_tracked), _read(layer(_make(x, backend)))]  # fmt: skip

        out.append({"inputs": {"shape": list(shape), "momentum": momentum}, "out": raised(go)})
    return out
