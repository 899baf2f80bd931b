"""Task 5.5 (optional): fused softmax, LayerNorm, GELU and causal attention kernels on
the fast CPU backend.

Tasks 5.1 and 5.2 compose LayerNorm and the masked softmax from tensor operations:
each step (subtract the mean, square, sum, scale, ...) is a kernel that reads a whole
tensor and writes another, and the backward keeps several of them. A fused kernel does
a row's work in one place while the row sits in the cache: LayerNorm's statistics in
one pass over the row, then one pass that writes the output; softmax's maximum, its
exponentials and their sum, then one scaling pass. The backward of each needs one
saved row (softmax: its output; LayerNorm: the input, with two numbers per row). GELU,
eleven tensor operations forward and backward, becomes one pass each way.

The task is the eight kernels below (four forwards, four backwards), on contiguous
NumPy arrays of float64 or float32. Until they are done (the handout's stubs raise
``NotImplementedError("Task 5.5: ...")``), ``fused_route``'s ``softmax``, ``layer_norm``,
``gelu`` and ``attention`` answer None and ``module5.functional`` computes with
tasks 5.1 and 5.2's code: nothing else waits for this task. The README's "Task 5.5"
gives the contracts and the bar. The Functions around the kernels, and the switch that
routes stage 5's operations to them, are given in ``module5/fused_route.py``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, prange

FASTMATH = {"contract", "reassoc"}
"""Fused multiply-adds and regrouped sums (so the row sums vectorize); no assumption
that values are finite, so a NaN or an infinity in a row still shows in its output."""
SERIAL_MAX = 1 << 15
"""Inputs of fewer entries run on the calling thread: waking the thread pool costs more
than a second core saves on a row or two (a generation step's attention)."""
ROWS_PER_TASK = 16
"""Rows of one parallel task of the softmax (its scratch row is made once per task)."""
CHUNK, SPAN = 512, 8192
"""GELU's kernels work through ``CHUNK`` entries at a time (scratch that stays in L1),
a parallel task taking ``SPAN`` entries."""
GELU_C = math.sqrt(2.0 / math.pi)
"""GELU's tanh form: ``x/2 (1 + tanh(C (x + 0.044715 x^3)))``, as ``module5.functional``."""
BLOCK_Q = 64
"""Causal attention's block of queries: a parallel task of the forward, a step of a
head's backward."""
ROW_BLOCK = 64
"""Rows per partial sum of LayerNorm's weight and bias gradients (each block of rows
sums into its own row of a scratch array, in parallel; then the blocks are added)."""


# BEGIN SOLUTION 5.5 omit
from numba import types as nb_types  # noqa: E402
from numba.extending import overload  # noqa: E402

from module2.fast_matmul import gemm_serial  # noqa: E402
from module2.vector_math import exp_loop, tanh32, tanh32_wide  # noqa: E402


@njit(fastmath=FASTMATH)
def row_max(x: Any, kept: int) -> Any:
    """The largest of ``x[:kept]`` (``kept >= 1``), as 16 running maxima over blocks of
    16 (a maximum that skips NaN does not vectorize as one running value; 16 of them
    side by side do, by the SLP vectorizer), then the rest. A NaN may be skipped: it
    makes its row's sum, so the whole row, NaN anyway."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = x[0]
    m8 = m9 = m10 = m11 = m12 = m13 = m14 = m15 = x[0]
    blocks = kept // 16
    for i in range(blocks):
        b = x[i * 16 : i * 16 + 16]
        m0 = b[0] if b[0] > m0 else m0
        m1 = b[1] if b[1] > m1 else m1
        m2 = b[2] if b[2] > m2 else m2
        m3 = b[3] if b[3] > m3 else m3
        m4 = b[4] if b[4] > m4 else m4
        m5 = b[5] if b[5] > m5 else m5
        m6 = b[6] if b[6] > m6 else m6
        m7 = b[7] if b[7] > m7 else m7
        m8 = b[8] if b[8] > m8 else m8
        m9 = b[9] if b[9] > m9 else m9
        m10 = b[10] if b[10] > m10 else m10
        m11 = b[11] if b[11] > m11 else m11
        m12 = b[12] if b[12] > m12 else m12
        m13 = b[13] if b[13] > m13 else m13
        m14 = b[14] if b[14] > m14 else m14
        m15 = b[15] if b[15] > m15 else m15
    top = m0
    for v in (m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15):
        top = v if v > top else top
    for j in range(blocks * 16, kept):
        top = x[j] if x[j] > top else top
    return top


@njit(fastmath=FASTMATH)
def softmax_row(x: Any, out: Any, kept: int, scratch: Any) -> None:
    """``out[:kept]`` = the softmax of ``x[:kept]``, ``out[kept:]`` = 0. ``scratch`` holds
    the shifted row (``exp_loop`` must not write over what it reads)."""
    top = row_max(x, kept)
    for j in range(kept):
        scratch[j] = x[j] - top
    exp_loop(out[:kept], scratch[:kept])
    total = out[0] * 0.0
    for j in range(kept):
        total += out[j]
    scratch[0] = 1.0 / total  # the scale in the row's dtype: float32 stays float32
    scale = scratch[0]
    for j in range(kept):
        out[j] *= scale
    for j in range(kept, len(out)):
        out[j] = 0.0


@njit(fastmath=FASTMATH)
def softmax_backward_row(y: Any, dy: Any, dx: Any) -> None:
    """``dx = y * (dy - sum(y * dy))``: a masked entry (``y = 0``) gets 0."""
    dot = 0.0
    for j in range(len(y)):
        dot += y[j] * dy[j]
    for j in range(len(y)):
        dx[j] = y[j] * (dy[j] - dot)


@njit(fastmath=FASTMATH)
def layer_norm_row(
    x: Any, weight: Any, bias: Any, eps: float, out: Any, mean: Any, rstd: Any, r: int
) -> None:
    """One row: its mean and ``1 / sqrt(var + eps)`` in one pass (sums of the row minus
    its first entry, in float64: a large mean cancels before anything is squared), then
    the output."""
    n = len(x)
    first = np.float64(x[0])
    total = 0.0
    squares = 0.0
    for j in range(n):
        v = np.float64(x[j]) - first
        total += v
        squares += v * v
    shift = total / n
    var = max(squares / n - shift * shift, 0.0)
    m = first + shift
    s = 1.0 / math.sqrt(var + eps)
    mean[r] = m
    rstd[r] = s
    for j in range(n):
        out[j] = (x[j] - m) * s * weight[j] + bias[j]


@njit(fastmath=FASTMATH)
def layer_norm_backward_row(
    d: Any, x: Any, weight: Any, m: float, s: float, dx: Any, dweight: Any, dbias: Any
) -> None:
    """One row's ``dx`` (see ``LayerNormFun``), and its terms added to the block's sums."""
    n = len(x)
    mean_g = 0.0
    mean_gx = 0.0
    for j in range(n):
        xhat = (x[j] - m) * s
        g = d[j] * weight[j]
        mean_g += g
        mean_gx += g * xhat
        dweight[j] += d[j] * xhat
        dbias[j] += d[j]
    mean_g /= n
    mean_gx /= n
    for j in range(n):
        xhat = (x[j] - m) * s
        dx[j] = s * (d[j] * weight[j] - mean_g - xhat * mean_gx)


@njit(fastmath=FASTMATH)
def layer_norm_backward_block(
    d: Any, x: Any, weight: Any, mean: Any, rstd: Any, dx: Any, parts: Any, block: int
) -> None:
    """The rows of block ``block``: their ``dx``, and their weight and bias gradient
    terms summed into ``parts[block]`` (float64)."""
    n = x.shape[1]
    dweight = parts[block, :n]
    dbias = parts[block, n:]
    dweight[:] = 0.0
    dbias[:] = 0.0
    for r in range(block * ROW_BLOCK, min(x.shape[0], (block + 1) * ROW_BLOCK)):
        layer_norm_backward_row(d[r], x[r], weight, mean[r], rstd[r], dx[r], dweight, dbias)


@njit(fastmath=FASTMATH, error_model="numpy")
def gelu_tanh(x: Any, t: Any, e: Any, k: Any) -> None:
    """``t = tanh(C (x + 0.044715 x^3))`` for a chunk, as ``1 - 2 / (exp(2u) + 1)`` (the
    vectorized ``exp``; an overflow to inf gives exactly 1), ``e`` scratch, ``k`` the
    constants in the arrays' dtype (:func:`gelu_constants`)."""
    a, b, one, two = k[0], k[1], k[2], k[3]
    for j in range(len(x)):
        v = x[j]
        t[j] = v * (a + b * v * v)
    exp_loop(e, t)
    for j in range(len(x)):
        t[j] = one - two / (e[j] + one)


@njit(fastmath=FASTMATH)
def gelu_constants(like: Any) -> Any:
    """GELU's constants as an array of ``like``'s dtype, so that float32 arithmetic
    stays float32 (a Python float would make every operation float64: twice the
    instructions, and float64 divisions)."""
    k = np.empty(8, like.dtype)
    k[0], k[1], k[2], k[3] = 2.0 * GELU_C, 2.0 * GELU_C * 0.044715, 1.0, 2.0
    k[4], k[5], k[6] = 0.5, GELU_C, 3.0 * 0.044715 * GELU_C
    return k


@njit(fastmath=FASTMATH, error_model="numpy")
def gelu_span(x: Any, out: Any, d: Any, backward: bool) -> None:
    """GELU of ``x`` into ``out``, or (``backward``) its slope times ``d``, a chunk of
    :data:`CHUNK` at a time through two scratch arrays made once (float64: ``tanh``
    from the vectorized ``exp``). ``error_model="numpy"``: a division that may meet 0
    is not checked entry by entry, which kept the loops scalar (1.5x as long)."""
    t = np.empty(CHUNK, x.dtype)
    e = np.empty(CHUNK, x.dtype)
    k = gelu_constants(x)
    one, half, c, c3 = k[2], k[4], k[5], k[6]
    for lo in range(0, len(x), CHUNK):
        hi = min(len(x), lo + CHUNK)
        xs, ts = x[lo:hi], t[: hi - lo]
        gelu_tanh(xs, ts, e[: hi - lo], k)
        if not backward:
            for j in range(hi - lo):
                out[lo + j] = half * xs[j] * (one + ts[j])
            continue
        for j in range(hi - lo):
            v, tj = xs[j], ts[j]
            du = c + c3 * v * v
            out[lo + j] = d[lo + j] * (half * (one + tj) + half * v * (one - tj * tj) * du)


@njit(fastmath=FASTMATH, error_model="numpy")
def gelu_span32(x: Any, out: Any, d: Any, backward: bool) -> None:
    """:func:`gelu_span` for float32, in one vectorized pass with stage 2's rational
    ``tanh32`` (a dozen multiply-adds and a division per entry; 6-8x as fast as the
    ``exp`` steps, which take three passes through scratch). The backward takes its
    slope in float64 (``tanh32_wide``): ``1 + tanh`` at ``x = -3`` is 0.0024, and
    float32's few ulp of ``tanh`` were 1.5x the graded checks' tolerance there."""
    k = gelu_constants(x)
    one, half, c = k[2], k[4], k[5]
    b = k[1] * half  # C * 0.044715
    if not backward:
        for j in range(len(x)):
            v = x[j]
            out[j] = half * v * (one + tanh32(v * (c + b * v * v)))
        return
    for j in range(len(x)):  # the slope in float64: it takes 1 +- tanh, which cancels
        v = np.float64(x[j])
        t = tanh32_wide(x[j] * (c + b * x[j] * x[j]))
        du = GELU_C + 3.0 * 0.044715 * GELU_C * v * v
        out[j] = d[j] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du)


def gelu_any(x: Any, out: Any, d: Any, backward: bool) -> None:
    """:func:`gelu_span32` for float32 arrays, :func:`gelu_span` for the rest: chosen
    when the caller is compiled (``_gelu_any``), so each dtype compiles one of them."""
    (gelu_span32 if x.dtype == np.float32 else gelu_span)(x, out, d, backward)


@overload(gelu_any)
def _gelu_any(x, out, d, backward):  # unannotated: Numba compares them with the lambdas'
    if x.dtype == nb_types.float32:
        return lambda x, out, d, backward: gelu_span32(x, out, d, backward)
    return lambda x, out, d, backward: gelu_span(x, out, d, backward)


@njit(fastmath=FASTMATH, error_model="numpy")
def attention_block(
    q: Any, k: Any, v: Any, out: Any, lse: Any, b: int, i0: int, i1: int, shift: int,
    scale: float,
) -> None:  # fmt: skip
    """Causal attention of queries ``i0:i1`` of head ``b`` (``q`` ``(BH, T, D)``, ``k``
    ``(BH, S, D)``, ``v`` ``(BH, S, Dv)``, contiguous): the block's scores ``q k^T``
    against the keys its last query sees, by stage 2's packed micro-kernel
    (``gemm_serial``, strides reading ``k`` transposed); each row's softmax over its own
    keys (stage 2's vectorized ``exp``), masked keys exactly 0; then the weights times
    ``v`` by the same kernel. Scratch: the block's rows of scores, ``(i1 - i0) x S``,
    never ``T x S``. Constants are taken in the arrays' dtype (``work``), so float32
    loops stay float32."""
    t, d, sk, dvn = q.shape[1], q.shape[2], k.shape[1], v.shape[2]
    rows = i1 - i0
    last = min(sk, i1 + shift)  # the keys the block's last query sees
    qf, kf, vf = q.reshape(-1), k.reshape(-1), v.reshape(-1)
    s = np.empty(rows * last, q.dtype)  # written whole by the product
    gemm_serial(s, 0, last, 1, qf, (b * t + i0) * d, d, 1, kf, b * sk * d, 1, d, rows, last, d,
                True)  # fmt: skip
    p = np.empty(rows * last, q.dtype)
    work = np.empty(3, q.dtype)
    work[0], work[2] = scale, -80.0  # exp(-80) is a normal number: no slow path
    sc, off = work[0], work[2]
    tops = np.empty(rows)
    for r in range(rows):  # shift each row by its maximum; masked keys to -80
        kept = i0 + r + shift + 1
        sr = s[r * last : (r + 1) * last]
        top = row_max(sr, kept) * sc
        tops[r] = top
        work[1] = top
        shifted = work[1]
        for j in range(kept):
            sr[j] = sr[j] * sc - shifted
        sr[kept:] = off
    exp_loop(p, s)  # one vector loop over the whole block, not a call per row
    total = np.empty(rows)
    for r in range(rows):
        kept = i0 + r + shift + 1
        pr = p[r * last : (r + 1) * last]
        acc = 0.0
        for j in range(kept):
            acc += pr[j]
        pr[kept:] = 0.0
        total[r] = acc
        lse[b, i0 + r] = tops[r] + math.log(acc)
    o = np.empty(rows * dvn, q.dtype)
    gemm_serial(o, 0, dvn, 1, p, 0, last, 1, vf, b * sk * dvn, dvn, 1, rows, dvn, last, True)
    for r in range(rows):
        work[1] = 1.0 / total[r]
        inv = work[1]
        for c in range(dvn):
            out[b, i0 + r, c] = o[r * dvn + c] * inv


@njit(fastmath=FASTMATH, error_model="numpy")
def attention_backward_head(
    q: Any, k: Any, v: Any, out: Any, lse: Any, dout: Any,
    dq: Any, dk: Any, dv: Any, b: int, shift: int, scale: float,
) -> None:  # fmt: skip
    """The gradients of head ``b``'s causal attention, recomputing each weight ``p =
    exp(scale q_i . k_j - lse_i)`` from the saved log-sum-exp (FlashAttention's
    backward), :data:`BLOCK_Q` queries at a time: with ``D_i = dout_i . out_i`` and
    ``ds = scale p (dout_i . v_j - D_i)``, ``dq = ds k``, ``dk += ds^T q``, ``dv += p^T
    dout``. Each of the five products (the two score blocks, then those three) is
    stage 2's packed micro-kernel on the calling thread (``gemm_serial``); transposes
    are strides. One head per task, so no two threads add into one ``dk`` or ``dv``.
    Scratch: a block's rows of scores, never ``T x S``."""
    t, d, sk, dvn = q.shape[1], q.shape[2], k.shape[1], v.shape[2]
    qf, kf, vf, dof = q.reshape(-1), k.reshape(-1), v.reshape(-1), dout.reshape(-1)
    dqf, dkf, dvf = dq.reshape(-1), dk.reshape(-1), dv.reshape(-1)
    qb, kb, vb, ob = b * t * d, b * sk * d, b * sk * dvn, b * t * dvn
    dq[b], dk[b], dv[b] = 0.0, 0.0, 0.0
    work = np.empty(3, q.dtype)
    work[0], work[2] = scale, -80.0  # exp(-80 - lse): a normal number, no slow path
    sc, off = work[0], work[2]
    big_d = np.empty(t, q.dtype)
    for i in range(t):
        acc = sc - sc
        for c in range(dvn):
            acc += dout[b, i, c] * out[b, i, c]
        big_d[i] = acc
    for i0 in range(0, t, BLOCK_Q):
        i1 = min(t, i0 + BLOCK_Q)
        rows, last = i1 - i0, min(sk, i1 + shift)
        s = np.empty(rows * last, q.dtype)  # both written whole by their products
        dp = np.empty(rows * last, q.dtype)
        gemm_serial(s, 0, last, 1, qf, qb + i0 * d, d, 1, kf, kb, 1, d, rows, last, d, True)
        gemm_serial(dp, 0, last, 1, dof, ob + i0 * dvn, dvn, 1, vf, vb, 1, dvn, rows, last, dvn,
                    True)  # fmt: skip
        p = np.empty(rows * last, q.dtype)
        for r in range(rows):  # the scores less each row's log-sum-exp; masked to -80
            i = i0 + r
            kept = i + shift + 1
            sr = s[r * last : (r + 1) * last]
            work[1] = lse[b, i]
            lse_i = work[1]
            for j in range(kept):
                sr[j] = sr[j] * sc - lse_i
            sr[kept:] = off
        exp_loop(p, s)  # one vector loop over the block
        for r in range(rows):
            i = i0 + r
            kept = i + shift + 1
            pr, dr = p[r * last : (r + 1) * last], dp[r * last : (r + 1) * last]
            pr[kept:] = 0.0
            bd = big_d[i]
            for j in range(kept):  # dp becomes ds, in place
                dr[j] = pr[j] * (dr[j] - bd) * sc
            dr[kept:] = 0.0
        gemm_serial(dqf, qb + i0 * d, d, 1, dp, 0, last, 1, kf, kb, d, 1, rows, d, last, False)
        gemm_serial(dkf, kb, d, 1, dp, 0, 1, last, qf, qb + i0 * d, d, 1, last, d, rows, False)
        gemm_serial(dvf, vb, dvn, 1, p, 0, 1, last, dof, ob + i0 * dvn, dvn, 1, last, dvn, rows,
                    False)  # fmt: skip


# END SOLUTION


# ## Task 5.5: the fused kernels


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def softmax_rows(x: Any, out: Any, period: int, shift: int) -> None:
    """``out[r]`` = the softmax of row ``r`` of ``x`` over its first ``kept = min(n, r %
    period + shift + 1)`` entries, and exactly 0 after them: with ``period = T`` and
    ``shift = S - T``, the causal mask of ``T`` queries over ``S`` keys, rows taken
    ``T`` at a time; with ``period = 1, shift = n - 1``, no mask. The row's maximum is
    subtracted first, so nothing overflows. ``x`` and ``out`` are contiguous ``(rows,
    n)`` arrays of one dtype, ``shift >= 0``."""
    # BEGIN SOLUTION 5.5
    rows, n = x.shape
    if rows * n < SERIAL_MAX:
        scratch = np.empty(n, x.dtype)
        for r in range(rows):
            softmax_row(x[r], out[r], min(n, r % period + shift + 1), scratch)
        return
    tasks = (rows + ROWS_PER_TASK - 1) // ROWS_PER_TASK
    for task in prange(tasks):
        scratch = np.empty(n, x.dtype)  # one per task, not per row
        for r in range(task * ROWS_PER_TASK, min(rows, (task + 1) * ROWS_PER_TASK)):
            softmax_row(x[r], out[r], min(n, r % period + shift + 1), scratch)
    # END SOLUTION


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def softmax_rows_backward(y: Any, dy: Any, dx: Any) -> None:
    """``dx[r] = y[r] * (dy[r] - sum(y[r] * dy[r]))`` for each row: the gradient of the
    softmax whose output is ``y`` (masked entries, where ``y`` is 0, get 0). Contiguous
    ``(rows, n)`` arrays of one dtype."""
    # BEGIN SOLUTION 5.5
    rows = y.shape[0]
    if rows * y.shape[1] < SERIAL_MAX:
        for r in range(rows):
            softmax_backward_row(y[r], dy[r], dx[r])
        return
    for r in prange(rows):
        softmax_backward_row(y[r], dy[r], dx[r])
    # END SOLUTION


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def layer_norm_rows(
    x: Any, weight: Any, bias: Any, eps: float, out: Any, mean: Any, rstd: Any
) -> None:
    """LayerNorm of each row of ``x`` (contiguous ``(rows, n)``) into ``out``:
    ``(x - mean) * rstd * weight + bias``, with ``rstd = 1 / sqrt(var + eps)``; the
    row's mean and ``rstd`` go to ``mean[r]`` and ``rstd[r]`` (float64 arrays of
    ``rows``) for the backward. The statistics are taken in one pass over the row, and
    a large mean must not cost accuracy (``var`` is not ``E[x^2] - E[x]^2``)."""
    # BEGIN SOLUTION 5.5
    rows, n = x.shape
    if rows * n < SERIAL_MAX:
        for r in range(rows):
            layer_norm_row(x[r], weight, bias, eps, out[r], mean, rstd, r)
        return
    for r in prange(rows):
        layer_norm_row(x[r], weight, bias, eps, out[r], mean, rstd, r)
    # END SOLUTION


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def layer_norm_rows_backward(
    d: Any, x: Any, weight: Any, mean: Any, rstd: Any, dx: Any, dweight: Any, dbias: Any
) -> None:
    """The gradients of :func:`layer_norm_rows` for the upstream gradient ``d`` (the
    shape of ``x``): ``dx`` (``x``'s shape and dtype), and ``dweight``, ``dbias``
    (float64 arrays of ``n``: the sums over all rows of ``d * xhat`` and ``d``), from the
    input and the saved ``mean`` and ``rstd``."""
    # BEGIN SOLUTION 5.5
    rows, n = x.shape
    blocks = (rows + ROW_BLOCK - 1) // ROW_BLOCK
    parts = np.empty((blocks, 2 * n))
    if rows * n < SERIAL_MAX:
        for block in range(blocks):
            layer_norm_backward_block(d, x, weight, mean, rstd, dx, parts, block)
    else:
        for block in prange(blocks):
            layer_norm_backward_block(d, x, weight, mean, rstd, dx, parts, block)
    for j in range(n):
        dweight[j] = 0.0
        dbias[j] = 0.0
    for block in range(blocks):
        for j in range(n):
            dweight[j] += parts[block, j]
            dbias[j] += parts[block, n + j]
    # END SOLUTION


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def gelu_forward(x: Any, out: Any) -> None:
    """``out = x/2 (1 + tanh(C (x + 0.044715 x^3)))`` entry by entry, for flat contiguous
    arrays of one dtype (task 5.1's GELU, in one pass)."""
    # BEGIN SOLUTION 5.5
    n = len(x)
    if n < SERIAL_MAX:
        gelu_any(x, out, x, False)
        return
    for c in prange((n + SPAN - 1) // SPAN):
        lo, hi = c * SPAN, min(n, (c + 1) * SPAN)
        gelu_any(x[lo:hi], out[lo:hi], x[lo:hi], False)
    # END SOLUTION


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def gelu_backward(x: Any, d: Any, dx: Any) -> None:
    """``dx = d * gelu'(x)`` entry by entry (flat contiguous arrays of one dtype): the
    slope is recomputed from ``x``, so the forward saves only its input."""
    # BEGIN SOLUTION 5.5
    n = len(x)
    if n < SERIAL_MAX:
        gelu_any(x, dx, d, True)
        return
    for c in prange((n + SPAN - 1) // SPAN):
        lo, hi = c * SPAN, min(n, (c + 1) * SPAN)
        gelu_any(x[lo:hi], dx[lo:hi], d[lo:hi], True)
    # END SOLUTION


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def causal_attention(q: Any, k: Any, v: Any, out: Any, lse: Any, scale: float) -> None:
    """``out = softmax(scale q k^T, causal) v`` for each of ``q.shape[0]`` (batch, head)
    pairs: ``q`` ``(BH, T, D)``, ``k`` ``(BH, S, D)``, ``v`` ``(BH, S, Dv)``, ``out``
    ``(BH, T, Dv)``, contiguous, one dtype, ``S >= T``; query ``i`` sees keys ``j <= i +
    S - T``. ``lse[b, i]`` (float64) gets the log of query ``i``'s softmax denominator
    with the maximum put back (``log sum_j exp(score_ij)``), for the backward. Memory:
    a block of scores per row at a time, never ``T x S`` (the online softmax)."""
    # BEGIN SOLUTION 5.5
    heads, t = q.shape[0], q.shape[1]
    shift = k.shape[1] - t
    blocks = (t + BLOCK_Q - 1) // BLOCK_Q
    for task in prange(heads * blocks):
        b, i0 = task // blocks, task % blocks * BLOCK_Q
        attention_block(q, k, v, out, lse, b, i0, min(t, i0 + BLOCK_Q), shift, scale)
    # END SOLUTION


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def causal_attention_backward(
    q: Any, k: Any, v: Any, out: Any, lse: Any, dout: Any,
    dq: Any, dk: Any, dv: Any, scale: float,
) -> None:  # fmt: skip
    """The gradients of :func:`causal_attention` for the upstream gradient ``dout``
    (``out``'s shape): ``dq``, ``dk``, ``dv`` (the shapes of ``q``, ``k``, ``v``), from
    the inputs, ``out`` and ``lse``, recomputing the attention weights (no ``T x S``
    array kept from the forward)."""
    # BEGIN SOLUTION 5.5
    shift = k.shape[1] - q.shape[1]
    for b in prange(q.shape[0]):  # b is unsigned in the threads, b + 0 signed everywhere:
        # the head compiles once per dtype, not twice
        attention_backward_head(q, k, v, out, lse, dout, dq, dk, dv, b + 0, shift, scale)
    # END SOLUTION
