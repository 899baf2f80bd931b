"""Automatic mixed precision: :func:`autocast` (given code).

Within ``with autocast(bfloat16):`` (or ``float16``) the operations that do most of
the arithmetic and keep big inputs for their backward run in half precision: matrix
products (:class:`~module1.tensor_functions.MatMul`, so every ``Linear``),
convolutions and the fused causal attention, and the activations after them (ReLU,
GELU), whose inputs are big and already half-precision values. Each rounds its float32
operands to the half type, computes with float32 sums, rounds its result to the half
type, and keeps what its backward needs in half-precision storage (half the bytes).
Its backward rounds the incoming gradient and the gradients it returns the same way.
Everything else (sums, softmax, LayerNorm, losses, the optimizer) stays float32, and
so do the parameters: they are the float32 master weights the optimizer updates,
rounded afresh for every product.

It works as PyTorch's autocast does, by dispatch: ``Function.apply`` asks
:func:`_route` first (``module1.tensor_functions.dispatch``). A half-precision tensor
(``x.to(bfloat16)``) is widened to float32 where an operation outside the list meets
it; outside ``autocast`` it is storage only, and an operation on it is an error.
float64 work, and tensors in GPU memory (stage 3), are left as they are. The rule is
the process's, not a thread's (PyTorch's autocast is per thread): an ``autocast`` in
one thread applies to every thread's operations while it is on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from module0.autodiff import Context, Variable
from module1 import tensor_functions
from module1.tensor import Tensor
from module1.tensor_data import TensorData, float32, is_device_array
from module1.tensor_functions import Cast, Function, MatMul, ReLU
from module4.fast_conv import Conv1dFun, Conv2dFun
from module5.functional import GELUFun
from module5.fused_route import FusedAttention, FusedGELU
from module6.half import HALF, bfloat16, half_dtype, round_to, to_float32, to_half

HALF_OPS: set[type[Function]] = {
    MatMul, Conv1dFun, Conv2dFun, FusedAttention, ReLU, GELUFun, FusedGELU,
}  # fmt: skip
"""The operations ``autocast`` runs in half precision: the products, and the activations
that follow them (which PyTorch runs in their input's half type)."""

_dtype: np.dtype | None = None  # the half type while autocast is on
_inside = 0  # > 0 while a half-precision operation runs its own forward or backward


@contextlib.contextmanager
def autocast(dtype: Any = bfloat16, enabled: bool = True) -> Iterator[None]:
    """Within it, the operations of :data:`HALF_OPS` run in ``dtype`` (bfloat16 or
    float16) on float32 tensors; ``enabled=False`` leaves everything float32 (one code
    path for both). Nests; the innermost wins."""
    global _dtype
    kind = half_dtype(dtype) if enabled else None
    before, before_rule = _dtype, tensor_functions.dispatch
    _dtype = kind
    tensor_functions.dispatch = _route if kind is not None else None
    try:
        yield
    finally:
        _dtype, tensor_functions.dispatch = before, before_rule


def is_autocast_enabled() -> bool:
    """Whether an :func:`autocast` is on here."""
    return _dtype is not None


def _is_half(v: Any) -> bool:
    return isinstance(v, Tensor) and v._tensor._storage.dtype in HALF


def _route(cls: type[Function], vals: tuple[Any, ...]) -> Tensor | None:
    """``Function.apply``'s first question while autocast is on: a listed operation on
    float32 (or half) tensors runs as :class:`HalfOp`; any other operation meeting a
    half tensor gets it widened to float32; everything else runs as it is (None)."""
    if _inside or cls is HalfOp or cls is Cast:
        return None
    if cls in HALF_OPS:
        tensors = [v for v in vals if isinstance(v, Tensor)]
        on_host = not any(is_device_array(t._tensor._storage) for t in tensors)
        if on_host and {t.dtype for t in tensors} <= {float32, *HALF}:
            leaves = tuple(isinstance(v, Tensor) and v.history is None for v in vals)
            return HalfOp.apply(cls, _dtype, leaves, *(_widened(v) for v in vals))
        return None
    if any(_is_half(v) for v in vals):
        return cls.apply(*(_widened(v) for v in vals))
    return None


def _widened(v: Any) -> Any:
    return v.to(float32) if _is_half(v) else v


def _values(t: Tensor) -> np.ndarray:
    """``t``'s values in C order: its storage itself when that is all of them in order
    (no copy), else a copy."""
    data = t._tensor
    storage = data._storage
    if isinstance(storage, np.ndarray) and storage.size == t.size and data.is_contiguous():
        return storage
    return t.to_numpy()


def _rounded(t: Tensor, dtype: np.dtype) -> Tensor:
    """A new float32 tensor of ``t``'s values rounded to ``dtype``."""
    values = round_to(_values(t), dtype)
    return t._new(TensorData.contiguous(values.reshape(-1), t.shape))


class Packed:
    """A float32 array or tensor a half-precision operation saved for its backward,
    kept in half-precision storage (``array``, in the saved value's own shape) until the
    backward widens it again. ``like``: the shape and backend of a saved tensor (None
    for an array); ``leaf``: it is the rounded copy of a leaf (a parameter, an input
    batch), not an activation."""

    __slots__ = ("array", "leaf", "like")

    def __init__(self, array: np.ndarray, like: tuple[Any, Any] | None, leaf: bool) -> None:
        self.array, self.like, self.leaf = array, like, leaf

    def unpack(self) -> Any:
        values = to_float32(self.array)
        if self.like is None:
            return values
        shape, backend = self.like
        return Tensor(TensorData.contiguous(values.reshape(-1), shape), backend=backend)


def _pack(value: Any, dtype: np.dtype, known: dict[int, tuple[np.ndarray, bool]]) -> Any:
    """``value`` in half storage when it is a float32 array or tensor, else as it is
    (float64 statistics, shapes and numbers are kept). ``known``: the half-precision
    values of the operation's rounded operands, by the id of their float32 storage,
    and whether each is a leaf's: a saved value that is a whole operand reuses them."""
    array = _array_of(value)
    if array is None or array.dtype != float32:
        return value
    is_tensor = isinstance(value, Tensor)
    like = (value.shape, value.backend) if is_tensor else None
    root = _root(array)
    half, leaf = known.get(id(root), (None, False))
    in_order = value._tensor.is_contiguous() if is_tensor else array.flags.c_contiguous
    whole = in_order and array.size == root.size and (not is_tensor or value.size == root.size)
    if half is None or not whole:
        half = to_half(_values(value) if is_tensor else array, dtype)
    return Packed(half.reshape(value.shape), like, leaf)


def _unpack(value: Any) -> Any:
    return value.unpack() if isinstance(value, Packed) else value


class HalfOp(Function):
    """One operation of :data:`HALF_OPS` in half precision: ``HalfOp.apply(op, dtype,
    *args)`` runs ``op`` on ``args`` rounded to ``dtype`` and returns its result rounded
    to ``dtype`` (a float32 tensor); what ``op`` saved is kept in ``dtype`` storage.
    ``leaves[i]``: whether ``args[i]`` is a leaf (for :func:`saved_bytes`)."""

    @staticmethod
    def forward(
        ctx: Context, op: type[Function], dtype: np.dtype, leaves: tuple[bool, ...], *args: Any
    ) -> Tensor:
        global _inside
        known: dict[int, tuple[np.ndarray, bool]] = {}
        rounded = list(args)
        for i, a in enumerate(args):
            if isinstance(a, Tensor):  # to half, and back to float32 to compute with
                half = to_half(_values(a), dtype)
                wide = to_float32(half).reshape(-1)
                rounded[i] = a._new(TensorData.contiguous(wide, a.shape))
                known[id(_root(wide))] = (half, leaves[i])
        inner = Context(op, ctx.inputs)
        _inside += 1
        try:
            out = op.forward(inner, *rounded)
        finally:
            _inside -= 1
        inner.saved_values = tuple(_pack(v, dtype, known) for v in inner.saved_values)
        ctx.save_for_backward(inner, dtype)
        return _rounded(out, dtype)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Any:
        global _inside
        inner, dtype = ctx.saved_values
        packed = inner.saved_values
        inner.saved_values = tuple(_unpack(v) for v in packed)
        _inside += 1
        try:
            grads = inner.last_fn.backward(inner, _rounded(d, dtype))
        finally:
            _inside -= 1
            inner.saved_values = packed  # half storage again (retain_graph=True)
        if isinstance(grads, tuple):
            return tuple(None if g is None else _rounded(g, dtype) for g in grads)
        return _rounded(grads, dtype)


def saved_bytes(output: Variable, leaves: Any = ()) -> int:
    """The bytes the graph behind ``output`` keeps for its backward (the activations):
    every array and tensor its operations saved, each storage counted once, leaving out
    the storages of ``leaves`` (the parameters, the input batch) and, under autocast,
    the half-precision copies of any leaf (weights rounded for a product)."""
    skip = {id(_root(p.value._tensor._storage if hasattr(p, "value") else p._tensor._storage))
            for p in leaves}  # fmt: skip
    seen: set[int] = set()
    counted: set[int] = set()
    total = 0
    stack = [output]
    while stack:
        var = stack.pop()
        ctx = getattr(var, "history", None)
        if ctx is None or id(ctx) in seen:
            continue
        seen.add(id(ctx))
        values = list(ctx.saved_values) if isinstance(ctx.saved_values, tuple) else []
        while values:
            v = values.pop()
            if isinstance(v, Context):  # a half-precision operation's own record
                values.extend(v.saved_values)
                continue
            array = _array_of(v)
            if array is None or (isinstance(v, Packed) and v.leaf):
                continue
            root = _root(array)
            if id(root) not in counted and id(root) not in skip:
                counted.add(id(root))
                total += root.nbytes
        stack.extend(ctx.inputs)
    return total


def _array_of(value: Any) -> np.ndarray | None:
    """The host array behind a saved value, or None (a number, a shape, GPU memory)."""
    if isinstance(value, Packed):
        return value.array
    if isinstance(value, Tensor):
        value = value._tensor._storage
    return value if isinstance(value, np.ndarray) else None


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array
