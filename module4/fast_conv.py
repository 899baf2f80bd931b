"""Tasks 4.1 and 4.2: 1-D and 2-D convolution, forward and backward, on the CPU.

``conv1d`` and ``conv2d`` follow PyTorch: cross-correlation (the kernel is not
flipped), inputs ``(batch, channels, width)`` / ``(batch, channels, height, width)``,
weights ``(out_channels, in_channels, kernel...)``, zero padding, output size
``(n + 2 * padding - kernel) // stride + 1`` per spatial dimension, no bias.

Each task is three Numba kernels: the forward pass, the gradient for the input and the
gradient for the weight. They take C-contiguous NumPy arrays of their natural rank,
all float64 or all float32 (the tensors' dtype; Numba compiles each once), and write
every entry of a preallocated output of that dtype (from ``np.empty``); the given
``Conv1dFun`` / ``Conv2dFun`` make those arrays from the tensors and wrap the results.

The kernels are module-level ``njit(parallel=PARALLEL, cache=True)`` functions (cached
on disk; see module2's notes), so a loop written with ``prange`` runs on all of
Numba's threads. Images are independent in the forward pass and in the input's
gradient; the weight's gradient sums over the images, so it needs a parallel loop
whose iterations never add into the same entries (over output channels, say). A plain
loop nest with a ``prange`` over outputs earns full marks; ``module4/README.md``
describes how the reference goes faster (an ungraded suggestion).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit, prange
from numba.core.cpu_options import ParallelOptions

from module0.autodiff import Context
from module1.tensor import Tensor
from module1.tensor_data import ShapeError, TensorData, is_device_array
from module1.tensor_functions import BackendError, Function

# BEGIN SOLUTION 4.1 omit
from module4.conv_paths import (  # the reference's fast paths (not in the handout)
    PARALLEL_MIN,
    WEIGHT_CHUNKS,
    conv1d_backward_input_image,
    conv1d_forward_image,
    conv1d_weight_chunk,
    conv2d_backward_input_image,
    conv2d_forward_image,
    conv2d_weight_chunk,
    round_up,
    sum_partials,
)

# END SOLUTION

if TYPE_CHECKING:
    from module1.tensor_ops import TensorBackend

PARALLEL: Any = ParallelOptions({
    "prange": True,
    "comprehension": False, "reduction": False, "inplace_binop": False, "setitem": False,
    "numpy": False, "stencil": False, "fusion": False,
})  # fmt: skip
"""``njit``'s ``parallel`` option for the kernels: only their ``prange`` loops run in
parallel. With ``parallel=True`` Numba also turns every ``np.zeros`` and array
expression of the set-up into a parallel loop of its own: more to compile (about
0.7 s per kernel) and a wake-up of the thread pool for a few hundred entries.

An options object, not the plain dict it is made from: Numba reads such a dict with
``dict.pop``, so one dict shared by several kernels is emptied by the first kernel that
compiles, and the others then get every parallel transformation (``parallel=True``)."""


# ## Task 4.1: conv1d


@njit(parallel=PARALLEL, cache=True)
def conv1d_forward(out: Any, input: Any, weight: Any, stride: int, padding: int) -> None:
    """``out[b, o, x] = sum_{c, k} weight[o, c, k] * input[b, c, x * stride + k - padding]``
    (zero outside the input) for ``out`` ``(B, C_out, W_out)``, ``input``
    ``(B, C_in, W)`` and ``weight`` ``(C_out, C_in, K)``. Writes every entry of ``out``."""
    # BEGIN SOLUTION 4.1
    batch, channels, _ = input.shape
    out_channels, _, kernel = weight.shape
    n_out = out.shape[2]
    n_taps = channels * kernel  # tap (c, k) is column c * kernel + k of the weight
    offsets = np.zeros(round_up(n_taps, 4), np.int64)
    taps = np.zeros((round_up(out_channels, 4), len(offsets)), out.dtype)
    for c in range(channels):
        for k in range(kernel):
            t = c * kernel + k
            offsets[t] = (k * channels + c) * n_out
            for o in range(out_channels):
                taps[o, t] = weight[o, c, k]
    if batch * out_channels * n_out * n_taps < PARALLEL_MIN:
        for b in range(batch):
            conv1d_forward_image(out[b], input[b], kernel, offsets, taps, stride, padding)
        return
    for b in prange(batch):
        conv1d_forward_image(out[b], input[b], kernel, offsets, taps, stride, padding)
    # END SOLUTION


@njit(parallel=PARALLEL, cache=True)
def conv1d_backward_input(
    grad_input: Any, grad_out: Any, weight: Any, stride: int, padding: int
) -> None:
    """``grad_input[b, c, i] = sum_{o, k, x: x * stride + k - padding = i} weight[o, c, k]
    * grad_out[b, o, x]``: the gradient of :func:`conv1d_forward` for its input, shapes
    as there. Writes every entry of ``grad_input``."""
    # BEGIN SOLUTION 4.1
    batch, channels, _ = grad_input.shape
    out_channels, _, kernel = weight.shape
    n_out = grad_out.shape[2]
    # Taps in (k, c) order over a multiple of 4 channels, so that the four taps
    # spread_taps updates together are different channels: runs that never overlap.
    planes = round_up(channels, 4)
    offsets = np.zeros(kernel * planes, np.int64)
    taps = np.zeros((kernel * planes, round_up(out_channels, 4)), grad_input.dtype)
    for k in range(kernel):
        for c in range(planes):
            t = k * planes + c
            offsets[t] = (k * planes + c) * n_out
            for o in range(out_channels if c < channels else 0):
                taps[t, o] = weight[o, c, k]
    if batch * out_channels * n_out * channels * kernel < PARALLEL_MIN:
        for b in range(batch):
            conv1d_backward_input_image(
                grad_input[b], grad_out[b], kernel, planes, offsets, taps, stride, padding
            )
        return
    for b in prange(batch):
        conv1d_backward_input_image(
            grad_input[b], grad_out[b], kernel, planes, offsets, taps, stride, padding
        )
    # END SOLUTION


@njit(parallel=PARALLEL, cache=True)
def conv1d_backward_weight(
    grad_weight: Any, input: Any, grad_out: Any, stride: int, padding: int
) -> None:
    """``grad_weight[o, c, k] = sum_{b, x} grad_out[b, o, x] * input[b, c, x * stride + k
    - padding]``: the gradient of :func:`conv1d_forward` for its weight, shapes as
    there. Writes every entry of ``grad_weight``."""
    # BEGIN SOLUTION 4.1
    batch, channels, _ = input.shape
    out_channels, _, kernel = grad_weight.shape
    n_out = grad_out.shape[2]
    n_taps = channels * kernel
    offsets = np.zeros(round_up(n_taps, 4), np.int64)
    for c in range(channels):
        for k in range(kernel):
            offsets[c * kernel + k] = (k * channels + c) * n_out
    chunks = max(1, min(batch, WEIGHT_CHUNKS))
    partial = np.zeros((chunks, round_up(out_channels, 4), len(offsets)), grad_weight.dtype)
    if batch * out_channels * n_out * n_taps < PARALLEL_MIN:
        for j in range(chunks):
            lo, hi = j * batch // chunks, (j + 1) * batch // chunks
            conv1d_weight_chunk(partial[j], input, grad_out, lo, hi, kernel, offsets, stride,
                                padding)  # fmt: skip
    else:
        for j in prange(chunks):
            lo, hi = j * batch // chunks, (j + 1) * batch // chunks
            conv1d_weight_chunk(partial[j], input, grad_out, lo, hi, kernel, offsets, stride,
                                padding)  # fmt: skip
    sum_partials(grad_weight.reshape(out_channels, n_taps), partial)
    # END SOLUTION


# ## Task 4.2: conv2d


@njit(parallel=PARALLEL, cache=True)
def conv2d_forward(
    out: Any, input: Any, weight: Any, stride_h: int, stride_w: int, pad_h: int, pad_w: int
) -> None:
    """``out[b, o, y, x] = sum_{c, kh, kw} weight[o, c, kh, kw] * input[b, c, y *
    stride_h + kh - pad_h, x * stride_w + kw - pad_w]`` (zero outside the input) for
    ``out`` ``(B, C_out, H_out, W_out)``, ``input`` ``(B, C_in, H, W)`` and ``weight``
    ``(C_out, C_in, KH, KW)``. Writes every entry of ``out``."""
    # BEGIN SOLUTION 4.2
    batch, channels, height, _ = input.shape
    out_channels, _, kernel_h, kernel_w = weight.shape
    n_out = out.shape[2] * out.shape[3]
    rows = (height + 2 * pad_h + stride_h - 1) // stride_h  # rows per remainder
    n_taps = channels * kernel_h * kernel_w  # tap (c, kh, kw): its column of the weight
    offsets = np.zeros(round_up(n_taps, 4), np.int64)
    taps = np.zeros((round_up(out_channels, 4), len(offsets)), out.dtype)
    for c in range(channels):
        for kh in range(kernel_h):
            for kw in range(kernel_w):
                plane = (kw * channels + c) * stride_h + kh % stride_h
                first_row = plane * rows + kh // stride_h
                t = (c * kernel_h + kh) * kernel_w + kw
                offsets[t] = first_row * out.shape[3]
                for o in range(out_channels):
                    taps[o, t] = weight[o, c, kh, kw]
    if batch * out_channels * n_out * n_taps < PARALLEL_MIN:
        for b in range(batch):
            conv2d_forward_image(
                out[b], input[b], kernel_w, rows, offsets, taps, stride_h, stride_w, pad_h, pad_w
            )
        return
    for b in prange(batch):
        conv2d_forward_image(
            out[b], input[b], kernel_w, rows, offsets, taps, stride_h, stride_w, pad_h, pad_w
        )
    # END SOLUTION


@njit(parallel=PARALLEL, cache=True)
def conv2d_backward_input(
    grad_input: Any, grad_out: Any, weight: Any,
    stride_h: int, stride_w: int, pad_h: int, pad_w: int,
) -> None:  # fmt: skip
    """``grad_input[b, c, r, s] = sum weight[o, c, kh, kw] * grad_out[b, o, y, x]`` over
    the ``(o, kh, kw, y, x)`` with ``y * stride_h + kh - pad_h = r`` and ``x * stride_w +
    kw - pad_w = s``: the gradient of :func:`conv2d_forward` for its input, shapes as
    there. Writes every entry of ``grad_input``."""
    # BEGIN SOLUTION 4.2
    batch, channels, height, _ = grad_input.shape
    out_channels, _, kernel_h, kernel_w = weight.shape
    out_w = grad_out.shape[3]
    n_out = grad_out.shape[2] * out_w
    rows = (height + 2 * pad_h + stride_h - 1) // stride_h
    # Taps in (kh, kw, c) order over a multiple of 4 channels: the four taps spread_taps
    # updates together are runs of different channels, which never overlap.
    planes = round_up(channels, 4)
    n_taps = kernel_h * kernel_w * planes
    offsets = np.zeros(n_taps, np.int64)
    taps = np.zeros((n_taps, round_up(out_channels, 4)), grad_input.dtype)
    for kh in range(kernel_h):
        for kw in range(kernel_w):
            for c in range(planes):
                t = (kh * kernel_w + kw) * planes + c
                plane = (kw * planes + c) * stride_h + kh % stride_h
                offsets[t] = (plane * rows + kh // stride_h) * out_w  # first row * width
                for o in range(out_channels if c < channels else 0):
                    taps[t, o] = weight[o, c, kh, kw]
    work = batch * out_channels * n_out * channels * kernel_h * kernel_w
    if work < PARALLEL_MIN:
        for b in range(batch):
            conv2d_backward_input_image(
                grad_input[b], grad_out[b], kernel_w, planes, rows, offsets, taps,
                stride_h, stride_w, pad_h, pad_w,
            )  # fmt: skip
        return
    for b in prange(batch):
        conv2d_backward_input_image(
            grad_input[b], grad_out[b], kernel_w, planes, rows, offsets, taps,
            stride_h, stride_w, pad_h, pad_w,
        )  # fmt: skip
    # END SOLUTION


@njit(parallel=PARALLEL, cache=True)
def conv2d_backward_weight(
    grad_weight: Any, input: Any, grad_out: Any,
    stride_h: int, stride_w: int, pad_h: int, pad_w: int,
) -> None:  # fmt: skip
    """``grad_weight[o, c, kh, kw] = sum_{b, y, x} grad_out[b, o, y, x] * input[b, c, y *
    stride_h + kh - pad_h, x * stride_w + kw - pad_w]``: the gradient of
    :func:`conv2d_forward` for its weight, shapes as there. Writes every entry of
    ``grad_weight``."""
    # BEGIN SOLUTION 4.2
    batch, channels, height, _ = input.shape
    out_channels, _, kernel_h, kernel_w = grad_weight.shape
    out_w = grad_out.shape[3]
    n_out = grad_out.shape[2] * out_w
    rows = (height + 2 * pad_h + stride_h - 1) // stride_h
    n_taps = channels * kernel_h * kernel_w
    offsets = np.zeros(round_up(n_taps, 4), np.int64)
    for c in range(channels):
        for kh in range(kernel_h):
            for kw in range(kernel_w):
                plane = (kw * channels + c) * stride_h + kh % stride_h
                first_row = plane * rows + kh // stride_h
                offsets[(c * kernel_h + kh) * kernel_w + kw] = first_row * out_w
    chunks = max(1, min(batch, WEIGHT_CHUNKS))
    partial = np.zeros((chunks, round_up(out_channels, 4), len(offsets)), grad_weight.dtype)
    if batch * out_channels * n_out * n_taps < PARALLEL_MIN:
        for j in range(chunks):
            conv2d_weight_chunk(
                partial[j], input, grad_out, j * batch // chunks, (j + 1) * batch // chunks,
                kernel_w, rows, offsets, stride_h, stride_w, pad_h, pad_w,
            )  # fmt: skip
    else:
        for j in prange(chunks):
            conv2d_weight_chunk(
                partial[j], input, grad_out, j * batch // chunks, (j + 1) * batch // chunks,
                kernel_w, rows, offsets, stride_h, stride_w, pad_h, pad_w,
            )  # fmt: skip
    sum_partials(grad_weight.reshape(out_channels, n_taps), partial)
    # END SOLUTION


# ## Given: checks, Functions and the public conv1d / conv2d


def conv_output_size(n: int, kernel: int, stride: int = 1, padding: int = 0) -> int:
    """The output length along one dimension: ``(n + 2 * padding - kernel) // stride + 1``."""
    return (n + 2 * padding - kernel) // stride + 1


def _int_arg(op: str, name: str, value: Any, minimum: int) -> int:
    """``value`` as an int, ShapeError unless it is one (not a bool or float) and at
    least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ShapeError(f"{op}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ShapeError(f"{op}: {name} must be at least {minimum}, got {value}")
    return int(value)


def _pair_arg(op: str, name: str, value: Any, minimum: int) -> tuple[int, int]:
    """An int or an ``(h, w)`` pair of ints as a pair, checked like :func:`_int_arg`."""
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise ShapeError(f"{op}: {name} must be an int or an (h, w) pair, got {value!r}")
        return _int_arg(op, name, value[0], minimum), _int_arg(op, name, value[1], minimum)
    one = _int_arg(op, name, value, minimum)
    return one, one


def _check_shapes(
    op: str, input: Tensor, weight: Tensor, stride: tuple[int, ...], padding: tuple[int, ...]
) -> None:
    """ShapeError naming both shapes unless ``input`` is ``(B, C_in, *spatial)`` and
    ``weight`` ``(C_out, C_in, *kernel)`` with a kernel that fits the padded input."""
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    dims = len(stride)
    layout = "width" if dims == 1 else "height, width"
    kernel = "kernel_width" if dims == 1 else "kernel_height, kernel_width"
    shapes = f"input shape {input.shape}, weight shape {weight.shape}"
    if input.dims != dims + 2:
        raise ShapeError(f"{op}: input must be (batch, channels, {layout}), got {shapes}")
    if weight.dims != dims + 2:
        raise ShapeError(
            f"{op}: weight must be (out_channels, in_channels, {kernel}), got {shapes}"
        )
    if input.shape[1] != weight.shape[1]:
        raise ShapeError(
            f"{op}: input has {input.shape[1]} channels but weight expects {weight.shape[1]} "
            f"({shapes})"
        )
    for d in range(dims):
        n, k = input.shape[2 + d], weight.shape[2 + d]
        if k < 1 or n + 2 * padding[d] < k:
            raise ShapeError(
                f"{op}: kernel size {k} does not fit the padded input size "
                f"{n} + 2 * {padding[d]} = {n + 2 * padding[d]} ({shapes})"
            )


def _check_cpu(op: str, *tensors: Tensor) -> None:
    """BackendError naming ``op`` for a tensor whose storage is in GPU memory: the
    kernels read NumPy arrays (and a silent copy would hide where the time goes)."""
    for t in tensors:
        if is_device_array(t._tensor._storage):
            raise BackendError(
                f"{op} runs on the CPU backends (SimpleBackend, FastTensorBackend), but a "
                f"tensor of shape {t.shape} is in GPU memory ({t.backend!r}); copy it to a "
                "CPU backend first"
            )


def _host(t: Tensor, op: str) -> np.ndarray:
    """``t``'s values as a C-contiguous NumPy array of its shape and dtype: a view of the
    storage when the tensor is contiguous, else a copy. BackendError for GPU memory."""
    _check_cpu(op, t)
    data = t._tensor
    storage = data._storage
    if data.is_contiguous() and storage.size == data.size:
        return storage.reshape(data.shape)
    view = np.lib.stride_tricks.as_strided(
        storage, data.shape, tuple(s * storage.itemsize for s in data.strides)
    )
    return np.ascontiguousarray(view)


def _wrap(array: np.ndarray, backend: TensorBackend) -> Tensor:
    """A constant tensor on ``backend`` over ``array``'s memory (no copy)."""
    return Tensor(TensorData(array.reshape(-1), array.shape), backend=backend)


def _wanted(ctx: Context) -> tuple[bool, bool]:
    """Whether the input and the weight need a gradient: a first layer's input does
    not, and its gradient is the most expensive one to compute."""
    input, weight = ctx.inputs
    return input.requires_grad, weight.requires_grad


class Conv1dFun(Function):
    """``conv1d`` as a differentiable operation (see :func:`conv1d`)."""

    @staticmethod
    def forward(ctx: Context, input: Tensor, weight: Tensor, stride: int, padding: int) -> Tensor:
        x, w = _host(input, "conv1d"), _host(weight, "conv1d")
        width = conv_output_size(x.shape[2], w.shape[2], stride, padding)
        out = np.empty((x.shape[0], w.shape[0], width), x.dtype)
        conv1d_forward(out, x, w, stride, padding)
        ctx.save_for_backward(x, w, stride, padding)
        return _wrap(out, input.backend)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor]:
        x, w, stride, padding = ctx.saved_values
        g = _host(d, "conv1d")
        want_input, want_weight = _wanted(ctx)
        grad_input = (np.empty if want_input else np.zeros)(x.shape, x.dtype)
        grad_weight = (np.empty if want_weight else np.zeros)(w.shape, w.dtype)
        if want_input:
            conv1d_backward_input(grad_input, g, w, stride, padding)
        if want_weight:
            conv1d_backward_weight(grad_weight, x, g, stride, padding)
        return _wrap(grad_input, d.backend), _wrap(grad_weight, d.backend)


class Conv2dFun(Function):
    """``conv2d`` as a differentiable operation (see :func:`conv2d`)."""

    @staticmethod
    def forward(
        ctx: Context, input: Tensor, weight: Tensor,
        stride_h: int, stride_w: int, pad_h: int, pad_w: int,
    ) -> Tensor:  # fmt: skip
        x, w = _host(input, "conv2d"), _host(weight, "conv2d")
        height = conv_output_size(x.shape[2], w.shape[2], stride_h, pad_h)
        width = conv_output_size(x.shape[3], w.shape[3], stride_w, pad_w)
        out = np.empty((x.shape[0], w.shape[0], height, width), x.dtype)
        conv2d_forward(out, x, w, stride_h, stride_w, pad_h, pad_w)
        ctx.save_for_backward(x, w, (stride_h, stride_w, pad_h, pad_w))
        return _wrap(out, input.backend)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor]:
        x, w, geometry = ctx.saved_values
        g = _host(d, "conv2d")
        want_input, want_weight = _wanted(ctx)
        grad_input = (np.empty if want_input else np.zeros)(x.shape, x.dtype)
        grad_weight = (np.empty if want_weight else np.zeros)(w.shape, w.dtype)
        if want_input:
            conv2d_backward_input(grad_input, g, w, *geometry)
        if want_weight:
            conv2d_backward_weight(grad_weight, x, g, *geometry)
        return _wrap(grad_input, d.backend), _wrap(grad_weight, d.backend)


def conv1d(input: Tensor, weight: Tensor, stride: int = 1, padding: int = 0) -> Tensor:
    """1-D convolution (cross-correlation, as in PyTorch) of ``input`` ``(batch,
    in_channels, width)`` with ``weight`` ``(out_channels, in_channels, kernel)``:
    ``(batch, out_channels, (width + 2 * padding - kernel) // stride + 1)``, zero
    padding, no bias. Differentiable in both tensors; on the CPU backends only."""
    s = _int_arg("conv1d", "stride", stride, 1)
    p = _int_arg("conv1d", "padding", padding, 0)
    _check_shapes("conv1d", input, weight, (s,), (p,))
    _check_cpu("conv1d", input, weight)
    return Conv1dFun.apply(input, weight, s, p)


def conv2d(
    input: Tensor,
    weight: Tensor,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
) -> Tensor:
    """2-D convolution (cross-correlation, as in PyTorch) of ``input`` ``(batch,
    in_channels, height, width)`` with ``weight`` ``(out_channels, in_channels, kh,
    kw)``: ``(batch, out_channels, H_out, W_out)`` with ``H_out = (height + 2 * pad_h -
    kh) // stride_h + 1`` (likewise ``W_out``). ``stride`` and ``padding`` are an int or
    an ``(h, w)`` pair; zero padding, no bias. Differentiable in both tensors; on the CPU
    backends only."""
    sh, sw = _pair_arg("conv2d", "stride", stride, 1)
    ph, pw = _pair_arg("conv2d", "padding", padding, 0)
    _check_shapes("conv2d", input, weight, (sh, sw), (ph, pw))
    _check_cpu("conv2d", input, weight)
    return Conv2dFun.apply(input, weight, sh, sw, ph, pw)
