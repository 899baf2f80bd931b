"""The reference's fast paths for tasks 4.1 and 4.2: convolution as unfolded patches
(``unfold_1d`` / ``unfold_2d``) multiplied by the weights in register-blocked 4x4 tiles,
the input's gradient folded back, the weight's gradient in chunks of output channels.

Not a task, and not in the handout: the tasks grade the three kernels of each
convolution (``module4/fast_conv.py``), and a plain loop nest with a ``prange`` over
outputs earns full marks. ``module4/README.md`` describes this design; the kernels
call these from their solution regions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

# ## The reference's own helpers (not in the handout: the tasks grade the kernels only)
#
# A convolution is a matrix product in disguise. Write the kernel as *taps*, one per
# (in_channel, kernel offset); output channel o is sum_tap weight[o, tap] *
# shifted(input, tap), where shifted(input, tap) is the input the tap sees at every
# output position. The unfold functions lay those shifted inputs out so that each tap's
# is one contiguous run of memory (offsets[tap]), and three loops do the arithmetic on
# runs: correlate_taps (forward), spread_taps (the runs' gradient, which fold adds back
# onto the input) and accumulate_taps (the weight's gradient).
#
# Copying the input once per tap (im2col) would cost kernel_size times the input's
# memory; the unfold copies it once per *column* offset of the kernel (kw): along a row
# of the output, tap (c, kh, kw) reads rows kh apart of the same copy, so every kernel
# row shares one copy. A stride along the height is folded in by splitting rows by
# row % stride (see unfold_2d), so every run stays contiguous for any stride and
# padding. Each kernel works image by image in parallel; the weight gradient's chunks of
# images sum into their own partial results, added at the end. Under PARALLEL_MIN
# multiply-adds a kernel runs on the calling thread. Task 4.2's reference uses these
# helpers too (both tasks' regions are always released together).

FASTMATH = {"contract", "reassoc"}
"""Fuse multiply-adds and regroup sums, which lets LLVM vectorize the loops."""

PARALLEL_MIN = 1 << 16
"""Multiply-adds below which a kernel runs on the calling thread: starting the thread
pool costs more than that much work (tests and tiny layers are mostly such calls)."""

WEIGHT_CHUNKS = 16
"""Partial sums of a weight gradient: the batch is cut into at most this many chunks,
one parallel job each. A constant, so the result does not depend on the thread count."""


# Vectorized loops on runs


@njit(inline="always", fastmath=FASTMATH)
def axpy_4x4(
    acc0: Any, acc1: Any, acc2: Any, acc3: Any, w0: Any, w1: Any, w2: Any, w3: Any, t: int,
    x0: Any, x1: Any, x2: Any, x3: Any, n: int,
) -> None:  # fmt: skip
    """``acc_r += w_r[t] x0 + w_r[t+1] x1 + w_r[t+2] x2 + w_r[t+3] x3`` for ``r = 0..3``
    over ``n`` entries: four outputs from four inputs, 16 multiply-adds for 8 loads and
    4 stores per step (1-D arrays indexed by the loop variable alone, so LLVM vectorizes
    the loop; the 16 weights stay in registers)."""
    a0, a1, a2, a3 = w0[t], w0[t + 1], w0[t + 2], w0[t + 3]
    b0, b1, b2, b3 = w1[t], w1[t + 1], w1[t + 2], w1[t + 3]
    c0, c1, c2, c3 = w2[t], w2[t + 1], w2[t + 2], w2[t + 3]
    d0, d1, d2, d3 = w3[t], w3[t + 1], w3[t + 2], w3[t + 3]
    for j in range(n):
        y0, y1, y2, y3 = x0[j], x1[j], x2[j], x3[j]
        acc0[j] += a0 * y0 + a1 * y1 + a2 * y2 + a3 * y3
        acc1[j] += b0 * y0 + b1 * y1 + b2 * y2 + b3 * y3
        acc2[j] += c0 * y0 + c1 * y1 + c2 * y2 + c3 * y3
        acc3[j] += d0 * y0 + d1 * y1 + d2 * y2 + d3 * y3


@njit(fastmath=FASTMATH)
def correlate_taps(out: Any, cols: Any, offsets: Any, taps: Any) -> None:
    """``out[o, :] = sum_t taps[o, t] * cols[offsets[t] : offsets[t] + L]`` for the
    ``(O, L)`` array ``out``. ``taps`` is ``(O4, T4)``, both multiples of 4, with rows
    past ``O`` ignored and padding taps of weight 0 (at any valid offset). Four runs at
    a time, added to every output row while they are in the L1 cache."""
    rows, n = out.shape
    rows4, t4 = taps.shape
    acc = np.zeros((rows4, n), out.dtype)
    for t in range(0, t4, 4):
        p0, p1, p2, p3 = offsets[t], offsets[t + 1], offsets[t + 2], offsets[t + 3]
        x0, x1 = cols[p0 : p0 + n], cols[p1 : p1 + n]
        x2, x3 = cols[p2 : p2 + n], cols[p3 : p3 + n]
        for o in range(0, rows4, 4):
            w0, w1, w2, w3 = taps[o], taps[o + 1], taps[o + 2], taps[o + 3]
            axpy_4x4(acc[o], acc[o + 1], acc[o + 2], acc[o + 3], w0, w1, w2, w3, t,
                     x0, x1, x2, x3, n)  # fmt: skip
    for o in range(rows):
        for j in range(n):
            out[o, j] = acc[o, j]


@njit(fastmath=FASTMATH)
def spread_taps(cols_grad: Any, offsets: Any, taps: Any, grad: Any) -> None:
    """``cols_grad[offsets[t] : offsets[t] + L] += sum_o taps[t, o] * grad[o, :]`` for
    every tap ``t``: the gradient of :func:`correlate_taps` for ``cols``. ``grad`` is
    ``(O4, L)`` and ``taps`` ``(T4, O4)``, both multiples of 4 (rows of ``grad`` past the
    real ones zero). Taps ``t .. t + 3`` (``t`` a multiple of 4) are updated together
    and their runs must not overlap: overlapping runs still give the right sums, but
    LLVM's check for them then sends the loop down its slow scalar path."""
    t4, o4 = taps.shape
    n = grad.shape[1]
    for t in range(0, t4, 4):
        p0, p1, p2, p3 = offsets[t], offsets[t + 1], offsets[t + 2], offsets[t + 3]
        acc0, acc1 = cols_grad[p0 : p0 + n], cols_grad[p1 : p1 + n]
        acc2, acc3 = cols_grad[p2 : p2 + n], cols_grad[p3 : p3 + n]
        w0, w1, w2, w3 = taps[t], taps[t + 1], taps[t + 2], taps[t + 3]
        for o in range(0, o4, 4):
            g0, g1, g2, g3 = grad[o], grad[o + 1], grad[o + 2], grad[o + 3]
            axpy_4x4(acc0, acc1, acc2, acc3, w0, w1, w2, w3, o, g0, g1, g2, g3, n)


@njit(inline="always", fastmath=FASTMATH)
def dot_4x4(
    acc: Any, o: int, t: int, g0: Any, g1: Any, g2: Any, g3: Any,
    x0: Any, x1: Any, x2: Any, x3: Any, n: int,
) -> None:  # fmt: skip
    """``acc[o + r, t + q] += g_r[:n] . x_q[:n]`` for ``r, q = 0..3``: 16 dot products
    at once, their sums in registers (8 loads per step, 16 multiply-adds), kept in the
    operands' dtype. Written out sum by sum: an index into a tuple of sums would make
    LLVM build a switch (seconds of compile time)."""
    zero = acc.dtype.type(0)
    s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = zero
    s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = zero
    for j in range(n):
        a0, a1, a2, a3 = g0[j], g1[j], g2[j], g3[j]
        b0, b1, b2, b3 = x0[j], x1[j], x2[j], x3[j]
        s00 += a0 * b0
        s01 += a0 * b1
        s02 += a0 * b2
        s03 += a0 * b3
        s10 += a1 * b0
        s11 += a1 * b1
        s12 += a1 * b2
        s13 += a1 * b3
        s20 += a2 * b0
        s21 += a2 * b1
        s22 += a2 * b2
        s23 += a2 * b3
        s30 += a3 * b0
        s31 += a3 * b1
        s32 += a3 * b2
        s33 += a3 * b3
    r0, r1, r2, r3 = acc[o], acc[o + 1], acc[o + 2], acc[o + 3]
    r0[t] += s00
    r0[t + 1] += s01
    r0[t + 2] += s02
    r0[t + 3] += s03
    r1[t] += s10
    r1[t + 1] += s11
    r1[t + 2] += s12
    r1[t + 3] += s13
    r2[t] += s20
    r2[t + 1] += s21
    r2[t + 2] += s22
    r2[t + 3] += s23
    r3[t] += s30
    r3[t + 1] += s31
    r3[t + 2] += s32
    r3[t + 3] += s33


@njit(fastmath=FASTMATH)
def accumulate_taps(acc: Any, grad: Any, cols: Any, offsets: Any) -> None:
    """``acc[o, t] += grad[o, :] . cols[offsets[t] : offsets[t] + L]``: the gradient of
    :func:`correlate_taps` for ``taps``. ``acc`` is ``(O4, T4)``, ``grad`` ``(O4, L)``,
    both sizes multiples of 4 (padding rows of ``grad`` zero): blocks of 4 x 4 dot
    products (:func:`dot_4x4`), four runs against four rows of ``grad``."""
    o4, t4 = acc.shape
    n = grad.shape[1]
    for t in range(0, t4, 4):
        p0, p1, p2, p3 = offsets[t], offsets[t + 1], offsets[t + 2], offsets[t + 3]
        x0, x1 = cols[p0 : p0 + n], cols[p1 : p1 + n]
        x2, x3 = cols[p2 : p2 + n], cols[p3 : p3 + n]
        for o in range(0, o4, 4):
            dot_4x4(acc, o, t, grad[o], grad[o + 1], grad[o + 2], grad[o + 3],
                    x0, x1, x2, x3, n)  # fmt: skip


@njit
def sum_partials(out: Any, partial: Any) -> None:
    """``out[o, t] = sum_j partial[j, o, t]`` over the rows and columns of ``out`` (the
    partial arrays may be larger: rounded up to multiples of 4). The last step of a
    weight gradient; each chunk's partial sum is added in a fixed order."""
    rows, cols = out.shape
    for o in range(rows):
        for t in range(cols):
            total = 0.0
            for j in range(partial.shape[0]):
                total += partial[j, o, t]
            out[o, t] = total


@njit(inline="always")
def round_up(n: int, m: int) -> int:
    """``n`` rounded up to a multiple of ``m``."""
    return (n + m - 1) // m * m


@njit(inline="always")
def valid_range(k: int, padding: int, stride: int, n: int, n_out: int) -> tuple[int, int]:
    """The outputs ``o`` in ``[lo, hi)`` for which kernel offset ``k`` reads inside the
    input: ``0 <= o * stride + k - padding < n`` and ``0 <= o < n_out``."""
    lo = min(n_out, (padding - k + stride - 1) // stride) if k < padding else 0
    last = n - 1 + padding - k  # o * stride <= last
    hi = min(n_out, last // stride + 1) if last >= 0 else 0
    return lo, max(lo, hi)


@njit
def unfold_1d(cols: Any, image: Any, stride: int, padding: int) -> None:
    """``cols[k, c, x] = image[c, x * stride + k - padding]``, zero where that falls in
    the padding, for ``cols`` ``(K, C, W_out)`` and ``image`` ``(C, W)``: the input tap
    ``(c, k)`` sees at every output position is the run ``cols[k, c, :]``."""
    kernel, channels, n_out = cols.shape
    width = image.shape[1]
    flat = cols.reshape(-1)
    pos = 0
    for k in range(kernel):
        lo, hi = valid_range(k, padding, stride, width, n_out)
        for c in range(channels):
            src = image[c]
            for x in range(lo):
                flat[pos + x] = 0.0
            for x in range(lo, hi):
                flat[pos + x] = src[x * stride + k - padding]
            for x in range(hi, n_out):
                flat[pos + x] = 0.0
            pos += n_out


@njit
def fold_1d(image_grad: Any, cols_grad: Any, stride: int, padding: int) -> None:
    """The gradient of :func:`unfold_1d`: ``image_grad[c, i]`` (every entry written) is
    the sum of the entries of ``cols_grad`` that copied ``image[c, i]``. ``cols_grad``
    may have more channels than ``image_grad``; the extra ones are ignored."""
    channels, width = image_grad.shape
    kernel, n_out = cols_grad.shape[0], cols_grad.shape[2]
    for c in range(channels):
        for i in range(width):
            image_grad[c, i] = 0.0
    for k in range(kernel):
        lo, hi = valid_range(k, padding, stride, width, n_out)
        for c in range(channels):
            dst, run = image_grad[c], cols_grad[k, c]
            for x in range(lo, hi):
                dst[x * stride + k - padding] += run[x]


@njit
def conv1d_forward_image(
    out: Any, image: Any, kernel: int, offsets: Any, taps: Any, stride: int, padding: int
) -> None:
    """One image of :func:`conv1d_forward` (``out`` ``(C_out, W_out)``, ``image``
    ``(C_in, W)``): unfold it, then :func:`correlate_taps`."""
    cols = np.empty((kernel, image.shape[0], out.shape[1]), out.dtype)
    unfold_1d(cols, image, stride, padding)
    correlate_taps(out, cols.reshape(-1), offsets, taps)


@njit
def conv1d_backward_input_image(
    image_grad: Any, grad: Any, kernel: int, planes: int, offsets: Any, taps: Any,
    stride: int, padding: int,
) -> None:  # fmt: skip
    """One image of :func:`conv1d_backward_input` (``image_grad`` ``(C_in, W)``,
    ``grad`` ``(C_out, W_out)``): :func:`spread_taps` into the gradient of the unfolded
    image (``planes`` channels), then :func:`fold_1d` it back."""
    out_channels, n_out = grad.shape
    rows = np.zeros((taps.shape[1], n_out), image_grad.dtype)
    for o in range(out_channels):
        for x in range(n_out):
            rows[o, x] = grad[o, x]
    cols_grad = np.zeros((kernel, planes, n_out), image_grad.dtype)
    spread_taps(cols_grad.reshape(-1), offsets, taps, rows)
    fold_1d(image_grad, cols_grad, stride, padding)


@njit
def conv1d_weight_chunk(
    acc: Any, input: Any, grad_out: Any, lo: int, hi: int, kernel: int, offsets: Any,
    stride: int, padding: int,
) -> None:  # fmt: skip
    """Images ``lo:hi`` of :func:`conv1d_backward_weight`: add each one's
    :func:`accumulate_taps` to ``acc`` (``(C_out rounded up to 4, taps rounded up to 4)``)."""
    out_channels, n_out = grad_out.shape[1], grad_out.shape[2]
    cols = np.empty((kernel, input.shape[1], n_out), acc.dtype)
    rows = np.zeros((acc.shape[0], n_out), acc.dtype)
    for b in range(lo, hi):
        unfold_1d(cols, input[b], stride, padding)
        for o in range(out_channels):
            for x in range(n_out):
                rows[o, x] = grad_out[b, o, x]
        accumulate_taps(acc, rows, cols.reshape(-1), offsets)


@njit
def unfold_2d(cols: Any, image: Any, stride_h: int, stride_w: int, pad_h: int, pad_w: int) -> None:
    """``cols[kw, c, a, i, x] = image[c, i * stride_h + a - pad_h, x * stride_w + kw -
    pad_w]``, zero where that falls in the padding (or past it), for ``cols`` of shape
    ``(KW, C, stride_h, R, W_out)`` and ``image`` ``(C, H, W)``. Rows are split by their
    remainder ``a`` modulo ``stride_h``, so tap ``(c, kh, kw)`` sees, at output rows
    ``0, 1, 2, ...``, rows ``kh // stride_h + 0, 1, 2, ...`` of ``cols[kw, c, kh %
    stride_h]``: one contiguous run of ``H_out * W_out`` entries."""
    kernel_w, channels, phases, rows, n_out = cols.shape
    height, width = image.shape[1], image.shape[2]
    flat = cols.reshape(-1)
    pos = 0
    for kw in range(kernel_w):
        lo, hi = valid_range(kw, pad_w, stride_w, width, n_out)
        for c in range(channels):
            for a in range(phases):
                for i in range(rows):
                    r = i * stride_h + a - pad_h
                    if r < 0 or r >= height:
                        for x in range(n_out):
                            flat[pos + x] = 0.0
                    else:
                        src = image[c, r]
                        for x in range(lo):
                            flat[pos + x] = 0.0
                        for x in range(lo, hi):
                            flat[pos + x] = src[x * stride_w + kw - pad_w]
                        for x in range(hi, n_out):
                            flat[pos + x] = 0.0
                    pos += n_out


@njit
def fold_2d(
    image_grad: Any, cols_grad: Any, stride_h: int, stride_w: int, pad_h: int, pad_w: int
) -> None:
    """The gradient of :func:`unfold_2d`: ``image_grad[c, r, s]`` (every entry written)
    is the sum of the entries of ``cols_grad`` that copied ``image[c, r, s]``.
    ``cols_grad`` may have more channels than ``image_grad``; the extra ones are
    ignored."""
    channels, height, width = image_grad.shape
    kernel_w, _, phases, rows, n_out = cols_grad.shape
    flat = image_grad.reshape(-1)
    for i in range(len(flat)):
        flat[i] = 0.0
    for kw in range(kernel_w):
        lo, hi = valid_range(kw, pad_w, stride_w, width, n_out)
        for c in range(channels):
            for a in range(phases):
                for i in range(rows):
                    r = i * stride_h + a - pad_h
                    if 0 <= r < height:
                        dst, run = image_grad[c, r], cols_grad[kw, c, a, i]
                        for x in range(lo, hi):
                            dst[x * stride_w + kw - pad_w] += run[x]


@njit
def conv2d_forward_image(
    out: Any, image: Any, kernel_w: int, rows: int, offsets: Any, taps: Any,
    stride_h: int, stride_w: int, pad_h: int, pad_w: int,
) -> None:  # fmt: skip
    """One image of :func:`conv2d_forward` (``out`` ``(C_out, H_out, W_out)``,
    ``image`` ``(C_in, H, W)``): unfold it, then :func:`correlate_taps`."""
    out_channels, out_h, out_w = out.shape
    cols = np.empty((kernel_w, image.shape[0], stride_h, rows, out_w), out.dtype)
    unfold_2d(cols, image, stride_h, stride_w, pad_h, pad_w)
    correlate_taps(out.reshape(out_channels, out_h * out_w), cols.reshape(-1), offsets, taps)


@njit
def conv2d_backward_input_image(
    image_grad: Any, grad: Any, kernel_w: int, planes: int, rows: int, offsets: Any,
    taps: Any, stride_h: int, stride_w: int, pad_h: int, pad_w: int,
) -> None:  # fmt: skip
    """One image of :func:`conv2d_backward_input` (``image_grad`` ``(C_in, H, W)``,
    ``grad`` ``(C_out, H_out, W_out)``): :func:`spread_taps` into the gradient of the
    unfolded image (``planes`` channels), then :func:`fold_2d` it back."""
    out_channels, out_h, out_w = grad.shape
    grad_rows = np.zeros((taps.shape[1], out_h * out_w), image_grad.dtype)
    for o in range(out_channels):
        for y in range(out_h):
            for x in range(out_w):
                grad_rows[o, y * out_w + x] = grad[o, y, x]
    cols_grad = np.zeros((kernel_w, planes, stride_h, rows, out_w), image_grad.dtype)
    spread_taps(cols_grad.reshape(-1), offsets, taps, grad_rows)
    fold_2d(image_grad, cols_grad, stride_h, stride_w, pad_h, pad_w)


@njit
def conv2d_weight_chunk(
    acc: Any, input: Any, grad_out: Any, lo: int, hi: int, kernel_w: int, rows: int,
    offsets: Any, stride_h: int, stride_w: int, pad_h: int, pad_w: int,
) -> None:  # fmt: skip
    """Images ``lo:hi`` of :func:`conv2d_backward_weight`: add each one's
    :func:`accumulate_taps` to ``acc`` (``(C_out rounded up to 4, taps rounded up to 4)``)."""
    out_channels, out_h, out_w = grad_out.shape[1], grad_out.shape[2], grad_out.shape[3]
    cols = np.empty((kernel_w, input.shape[1], stride_h, rows, out_w), acc.dtype)
    grad_rows = np.zeros((acc.shape[0], out_h * out_w), acc.dtype)
    for b in range(lo, hi):
        unfold_2d(cols, input[b], stride_h, stride_w, pad_h, pad_w)
        for o in range(out_channels):
            for y in range(out_h):
                for x in range(out_w):
                    grad_rows[o, y * out_w + x] = grad_out[b, o, y, x]
        accumulate_taps(acc, grad_rows, cols.reshape(-1), offsets)
