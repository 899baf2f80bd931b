"""The reference's vectorized exp, log, sigmoid and tanh over flat storage (float64 and
float32), used by its fast map paths (``module2/fast_paths.py``).

Not a task, and not in the handout: ``math.exp`` and friends are a library call per
entry, which no loop vectorizes, so the reference computes each function from a range
reduction and a polynomial in loops of plain arithmetic that LLVM turns into vector
instructions, and redoes the rare entries outside the fast range with stage 0's scalar
function. Each loop is tested against that scalar function at the edges of its fast
range, in both dtypes (``tests/module2/test_fast_paths.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit
from numba import types as nb_types
from numba.extending import overload

from module1.tensor_data import Storage
from module2.compiled_ops import _exp, _log, _tanh

# exp over flat storage, vectorized. ``math.exp`` is a library call per entry, which no
# loop vectorizes: here each entry is ``e^x = 2^k * e^r`` with ``k = round(x / ln 2)``
# and ``|r| <= ln(2) / 2``, ``e^r`` a degree-11 polynomial (error below 2e-17 relative,
# :data:`_EXP_Q`) and ``2^k`` added into the result's exponent bits, all in loops of
# arithmetic that LLVM turns into vector instructions. ``k`` is never converted from
# float to int (no vector instruction does that on AVX2): ``x / ln 2 + 1.5 * 2^52``
# rounds to an integer whose low bits are ``k``, read through an int64 view.
# Entries outside [-708, 709] (overflow, subnormal results, inf, nan) are then redone
# with the scalar ``exp``. Float32 has its own steps in float32 arithmetic (twice the
# lanes): :func:`exp_loop32`.

EXP_LANES = 512
"""Entries per pass of :func:`exp_loop` (its two scratch arrays stay in L1)."""
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 in 32 significant bits: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10  # ln 2 - _LN2_HI
_SHIFTER = 6755399441055744.0  # 1.5 * 2**52
_SHIFTER_BITS = 0x4338000000000000  # its bits
_EXP_Q = (
    2.5100375832561234e-08, 2.7620075879983367e-07, 2.7557268480310024e-06,
    2.4801521322368692e-05, 0.00019841269863040545, 0.0013888888917196719,
    0.008333333333330065, 0.041666666666624164, 0.16666666666666669, 0.5000000000000001,
)  # fmt: skip
"""``e^r = 1 + r + r^2 q(r)`` on ``|r| <= ln(2) / 2``: the coefficients of ``q``, degree
9 down to 0. Computed as ``mpmath.chebyfit((e^r - 1 - r) / r^2, [-ln 2 / 2, ln 2 / 2],
10)`` at 40 digits: the whole polynomial is within 1.7e-17 of ``e^r`` (relative), as
close as the degree-13 Taylor polynomial it replaces, with two multiply-adds fewer.
``1 + r`` stays exact, so rounding the coefficients to float64 costs nothing."""
# float32: the same in float32 arithmetic (twice the lanes), on [-87, 88], degree 6.
_LOG2E_F = np.float32(1.4426950408889634)
_LN2_HI_F = np.float32(0.693359375)  # 9 significant bits: k * _LN2_HI_F is exact
_LN2_LO_F = np.float32(-2.12194440e-4)  # ln 2 - _LN2_HI_F
_SHIFTER_F = np.float32(12582912.0)  # 1.5 * 2**23
_SHIFTER_BITS_F = 0x4B400000
_EXP_QF = tuple(
    np.float32(c)
    for c in (0.0013926175888627768, 0.008363173343241215, 0.041666556149721146,
              0.16666577756404877, 0.5)
)  # fmt: skip
""":data:`_EXP_Q` for float32: ``q`` of degree 4 (``e^r`` of degree 6), by the same
``chebyfit``, rounded to float32: within 1e-8 of ``e^r`` (relative), a twelfth of a
float32 ulp; the degree-7 Taylor polynomial it replaces took one multiply-add more."""


@njit(fastmath={"contract"})
def exp_reduced(p: Storage, t: Storage, x: Storage, one: float) -> int:
    """``p[i] = e^r`` and ``t[i] = k + 1.5 * 2^52`` for ``x[i] = k ln 2 + r`` (clamped
    to [-708, 709]), for 1-D arrays of equal length; how many entries were outside
    (nan included). With ``one = 0``, ``p[i] = e^r - 1`` instead, to full relative
    precision (for :func:`tanh_loop64`). Multiply-adds may fuse (``contract``): one
    rounding, not two."""
    q11, q10, q9, q8, q7, q6, q5, q4, q3, q2 = _EXP_Q
    outside = 0
    for i in range(len(p)):
        v = float(x[i])
        outside += 0 if (v >= -708.0 and v <= 709.0) else 1
        v = v if v > -708.0 else -708.0  # nan too: redone by exp_loop
        v = v if v < 709.0 else 709.0
        shifted = v * _LOG2E + _SHIFTER
        k = shifted - _SHIFTER
        r = (v - k * _LN2_HI) - k * _LN2_LO
        e = q11 * r + q10
        e = e * r + q9
        e = e * r + q8
        e = e * r + q7
        e = e * r + q6
        e = e * r + q5
        e = e * r + q4
        e = e * r + q3
        e = e * r + q2
        e = e * r + 1.0
        p[i] = e * r + one
        t[i] = shifted
    return outside


@njit(fastmath={"contract"})
def exp_reduced32(p: Any, t: Any, x: Any, plus: float) -> int:
    """:func:`exp_reduced` in float32 arithmetic for float32 ``x``, on [-87, 88] (where
    ``e^x`` and every step are normal float32 numbers): ``p``, ``t`` float32; ``plus``
    is its ``one``."""
    q6, q5, q4, q3, q2 = _EXP_QF
    one, last = np.float32(1.0), np.float32(plus)
    outside = 0
    for i in range(len(p)):
        v = np.float32(x[i])
        outside += 0 if (v >= -87.0 and v <= 88.0) else 1
        v = v if v > np.float32(-87.0) else np.float32(-87.0)  # nan too: redone
        v = v if v < np.float32(88.0) else np.float32(88.0)
        shifted = v * _LOG2E_F + _SHIFTER_F
        k = shifted - _SHIFTER_F
        r = (v - k * _LN2_HI_F) - k * _LN2_LO_F
        e = q6 * r + q5
        e = e * r + q4
        e = e * r + q3
        e = e * r + q2
        e = e * r + one
        p[i] = e * r + last
        t[i] = shifted
    return outside


@njit
def exp_scale(p_bits: Any, t_bits: Any) -> None:
    """Multiply each ``p`` by ``2^k``: add ``k`` (the low bits of ``t``) to its exponent."""
    for i in range(len(p_bits)):
        p_bits[i] += (t_bits[i] - _SHIFTER_BITS) << 52


@njit
def exp_scale32(p_bits: Any, t_bits: Any) -> None:
    """:func:`exp_scale` for float32 (int32 bits, 23 mantissa bits)."""
    for i in range(len(p_bits)):
        p_bits[i] += (t_bits[i] - _SHIFTER_BITS_F) << 23


@njit
def exp_redo(out: Storage, x: Storage, lo: int, hi: int, low: float, high: float) -> None:
    """Entries ``lo:hi`` whose ``x`` is outside ``[low, high]`` (nan too) again, by the
    scalar ``exp``."""
    for i in range(lo, hi):
        v = x[i]
        if not (v >= low and v <= high):
            out[i] = _exp(v)


@njit
def exp_chunk32(out: Any, x: Any, p: Any, t: Any) -> None:
    """``out = exp(x)`` for float32 1-D arrays of at most ``len(p)`` entries, ``p`` and
    ``t`` float32 scratch (in float32 arithmetic: within an ulp of the correctly rounded
    result)."""
    m = len(out)
    outside = exp_reduced32(p[:m], t[:m], x, 1.0)
    exp_scale32(p.view(np.int32)[:m], t.view(np.int32)[:m])
    out[:] = p[:m]
    if outside:
        exp_redo(out, x, 0, m, -87.0, 88.0)


@njit
def exp_loop32(out: Storage, x: Storage) -> None:
    """:func:`exp_loop` for float32 ``out`` and ``x``, in float32 arithmetic (within an
    ulp of the correctly rounded result)."""
    n = len(out)
    p = np.empty(EXP_LANES, np.float32)
    t = np.empty(EXP_LANES, np.float32)
    for lo in range(0, n, EXP_LANES):
        hi = min(n, lo + EXP_LANES)
        exp_chunk32(out[lo:hi], x[lo:hi], p, t)


def exp_loop(out: Storage, x: Storage) -> None:
    """``out[i] = exp(x[i])`` for 1-D arrays of equal length (float64 or float32): in
    compiled code, :func:`exp_loop32` for float32 arrays and :func:`exp_loop64` for
    the rest, chosen when the caller is compiled (see ``_exp_loop``), so a kernel
    compiled for one dtype holds one of them. A test of ``itemsize`` inside a compiled
    function would compile both (1.9 of the map kernel's 9 s)."""
    if out.dtype == np.float32 and x.dtype == np.float32:
        exp_loop32(out, x)
    else:
        exp_loop64(out, x)


@overload(exp_loop)
def _exp_loop(out, x):  # unannotated: Numba compares its parameters with the lambdas'
    if out.dtype == nb_types.float32 and x.dtype == nb_types.float32:
        return lambda out, x: exp_loop32(out, x)
    return lambda out, x: exp_loop64(out, x)


@njit
def exp_chunk64(out: Storage, x: Storage, p: Any, t: Any) -> None:
    """``out = exp(x)`` for 1-D arrays of at most ``len(p)`` entries, ``out`` float64,
    ``p`` and ``t`` float64 scratch."""
    m = len(out)
    outside = exp_reduced(p[:m], t[:m], x, 1.0)
    exp_scale(p.view(np.int64)[:m], t.view(np.int64)[:m])
    out[:] = p[:m]
    if outside:
        exp_redo(out, x, 0, m, -708.0, 709.0)


@njit
def exp_loop64(out: Storage, x: Storage) -> None:
    """:func:`exp_loop` for float64 ``out`` (``x`` of any float dtype)."""
    n = len(out)
    p = np.empty(EXP_LANES)
    t = np.empty(EXP_LANES)
    for lo in range(0, n, EXP_LANES):
        hi = min(n, lo + EXP_LANES)
        exp_chunk64(out[lo:hi], x[lo:hi], p, t)


# log, sigmoid and tanh over flat storage, vectorized like exp (stage 0 calls the C
# library once per entry for each: 3.5-8 ms for 10^6 float64 entries on 2 cores, where
# NumPy takes 1-1.8 ms on one).
#
# log: ``x = 2^k z`` with ``z`` in [sqrt(2)/2, sqrt(2)), both read from the bits of
# ``x`` with integer arithmetic (no float-to-int conversion); then with ``f = z - 1``
# and ``s = f / (2 + f)``, ``log z = 2 atanh(s) = f - (f^2/2 - s (f^2/2 + R))``, where
# ``R = 2 s^2 / 3 + 2 s^4 / 5 + ...`` is a polynomial in ``w = s^2`` (at most 0.0295),
# and ``log x = k ln 2 + log z``. Zero, negatives, subnormals, inf and nan are redone
# with stage 0's scalar ``log``.

_LOG_R = (
    0.13086626147840102138, 0.13268773138656885185, 0.15386239702814658188,
    0.18181795640132906276, 0.22222222391713917442, 0.28571428570803611811,
    0.40000000000000876983, 0.66666666666666666465,
)  # fmt: skip
"""``R / w`` on ``0 <= w <= (3 - 2 sqrt 2)^2``, coefficients of degree 7 down to 0:
``mpmath.chebyfit((2 atanh(sqrt w) / sqrt w - 2) / w, [0, 0.02944], 8)`` at 40 digits,
within 2.1e-18 (``log z`` is then within 1e-18 relative before rounding; the degree-6
fit, 3.1e-16, was not enough). Its Taylor series has ``2 / (2 n + 1)``: 2/3, 2/5, ..."""
_LOG_RF = tuple(
    np.float32(c) for c in (0.233304672163, 0.28550820816, 0.400001218398, 0.666666665545)
)
""":data:`_LOG_R` for float32: degree 3, within 1.2e-9 (degree 2 was 1.9e-7)."""
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD  # about sqrt(2) / 2, as float64 bits
_SQRT_HALF_BITS_F = 0x3F3504F3  # as float32 bits
_TINY = 2.2250738585072014e-308  # the smallest normal float64
_TINY_F = 1.1754943508222875e-38
_HUGE = 1.7976931348623157e308
_HUGE_F = 3.4028234663852886e38


@njit
def log_split(z_bits: Any, k_bits: Any, x_bits: Any, exponent_bits: int, offset: int) -> None:
    """``x = 2^k z``, ``z`` in [sqrt(2)/2, sqrt(2)), on the integer views of the arrays
    (``exponent_bits``: 52 for float64, 23 for float32; ``offset``: the bits of about
    sqrt(2)/2): ``z_bits`` gets ``z``, ``k_bits`` the bits of ``k + 1.5 * 2^(p-1)``
    (the shifter of :func:`exp_reduced`: subtracting it gives ``k`` as a float)."""
    shifter = _SHIFTER_BITS if exponent_bits == 52 else _SHIFTER_BITS_F
    high = -(1 << exponent_bits)  # sign and exponent bits set
    for i in range(len(z_bits)):
        ix = x_bits[i]
        tmp = ix - offset
        z_bits[i] = ix - (tmp & high)
        k_bits[i] = (tmp >> exponent_bits) + shifter


@njit(fastmath={"contract"}, error_model="numpy")
def log_reduced(out: Storage, z: Any, k: Any, x: Storage) -> int:
    """``out[i] = k ln 2 + log z`` from :func:`log_split`'s ``z`` and ``k`` (float64);
    how many ``x`` are not positive normal numbers (left for :func:`log_redo`)."""
    r7, r6, r5, r4, r3, r2, r1, r0 = _LOG_R
    outside = 0
    for i in range(len(out)):
        v = x[i]
        outside += 0 if (v >= _TINY and v <= _HUGE) else 1
        n = k[i] - _SHIFTER
        f = z[i] - 1.0
        hfsq = 0.5 * f * f
        s = f / (2.0 + f)
        w = s * s
        r = r7 * w + r6
        r = r * w + r5
        r = r * w + r4
        r = r * w + r3
        r = r * w + r2
        r = r * w + r1
        r = r * w + r0
        r = r * w
        out[i] = n * _LN2_HI + (f - (hfsq - (s * (hfsq + r) + n * _LN2_LO)))
    return outside


@njit(fastmath={"contract"}, error_model="numpy")
def log_reduced32(out: Storage, z: Any, k: Any, x: Storage) -> int:
    """:func:`log_reduced` in float32 arithmetic."""
    r3, r2, r1, r0 = _LOG_RF
    half, one, two = np.float32(0.5), np.float32(1.0), np.float32(2.0)
    ln2 = np.float32(0.6931471805599453)
    outside = 0
    for i in range(len(out)):
        v = x[i]
        outside += 0 if (v >= _TINY_F and v <= _HUGE_F) else 1
        n = k[i] - _SHIFTER_F
        f = z[i] - one
        hfsq = half * f * f
        s = f / (two + f)
        w = s * s
        r = r3 * w + r2
        r = r * w + r1
        r = r * w + r0
        r = r * w
        out[i] = n * ln2 + (f - (hfsq - s * (hfsq + r)))
    return outside


@njit
def log_redo(out: Storage, x: Storage, tiny: float, huge: float) -> None:
    """Entries whose ``x`` is not in ``[tiny, huge]`` (nan too) again, by stage 0's
    scalar ``log`` (``-inf`` at 0, nan below)."""
    for i in range(len(out)):
        v = x[i]
        if not (v >= tiny and v <= huge):
            out[i] = _log(v)


@njit
def log_loop64(out: Storage, x: Storage) -> None:
    """``out[i] = log(x[i])`` for float64 1-D arrays of equal length (within an ulp)."""
    n = len(out)
    z = np.empty(EXP_LANES)
    k = np.empty(EXP_LANES)
    z_bits, k_bits, x_bits = z.view(np.int64), k.view(np.int64), x.view(np.int64)
    for lo in range(0, n, EXP_LANES):
        m = min(EXP_LANES, n - lo)
        log_split(z_bits[:m], k_bits[:m], x_bits[lo : lo + m], 52, _SQRT_HALF_BITS)
        if log_reduced(out[lo : lo + m], z[:m], k[:m], x[lo : lo + m]):
            log_redo(out[lo : lo + m], x[lo : lo + m], _TINY, _HUGE)


@njit
def log_loop32(out: Storage, x: Storage) -> None:
    """:func:`log_loop64` for float32 arrays, in float32 arithmetic."""
    n = len(out)
    z = np.empty(EXP_LANES, np.float32)
    k = np.empty(EXP_LANES, np.float32)
    z_bits, k_bits, x_bits = z.view(np.int32), k.view(np.int32), x.view(np.int32)
    for lo in range(0, n, EXP_LANES):
        m = min(EXP_LANES, n - lo)
        log_split(z_bits[:m], k_bits[:m], x_bits[lo : lo + m], 23, _SQRT_HALF_BITS_F)
        if log_reduced32(out[lo : lo + m], z[:m], k[:m], x[lo : lo + m]):
            log_redo(out[lo : lo + m], x[lo : lo + m], _TINY_F, _HUGE_F)


# sigmoid: ``e = exp(-|x|)`` by the exp steps above, then ``1 / (1 + e)`` for ``x >= 0``
# and ``e / (1 + e)`` otherwise: stage 0's two forms, chosen per entry without a branch.
# tanh: ``u = expm1(-2|x|) = 2^k (e^r - 1) + (2^k - 1)`` (``e^r - 1`` from
# :func:`exp_reduced` with ``one = 0``, so a small ``x`` keeps its relative precision),
# then ``tanh x = copysign(-u / (2 + u), x)``; ``|x| > 354`` and nan are redone with
# stage 0's scalar ``tanh``.


@njit
def negate_abs(a: Any, x: Storage, scale: Any) -> None:
    """``a = scale * |x|`` (``scale`` negative, in ``a``'s dtype)."""
    for i in range(len(a)):
        a[i] = scale * abs(x[i])


@njit(error_model="numpy")
def sigmoid_finish(out: Storage, x: Storage, e: Any, one: Any) -> None:
    """``out = 1 / (1 + e)`` where ``x >= 0``, else ``e / (1 + e)``, for ``e = exp(-|x|)``
    (``one``: 1 in ``out``'s dtype, so float32 stays float32)."""
    for i in range(len(out)):
        top = one if x[i] >= 0.0 else e[i]
        out[i] = top / (one + e[i])


@njit
def sigmoid_loop64(out: Storage, x: Storage) -> None:
    """``out[i] = sigmoid(x[i])`` for float64 1-D arrays of equal length."""
    n = len(out)
    a, e = np.empty(EXP_LANES), np.empty(EXP_LANES)
    p, t = np.empty(EXP_LANES), np.empty(EXP_LANES)
    for lo in range(0, n, EXP_LANES):
        m = min(EXP_LANES, n - lo)
        negate_abs(a[:m], x[lo : lo + m], -1.0)
        exp_chunk64(e[:m], a[:m], p, t)
        sigmoid_finish(out[lo : lo + m], x[lo : lo + m], e, 1.0)


@njit
def sigmoid_loop32(out: Storage, x: Storage) -> None:
    """:func:`sigmoid_loop64` for float32 arrays, in float32 arithmetic."""
    n = len(out)
    f32 = np.float32
    a, e = np.empty(EXP_LANES, f32), np.empty(EXP_LANES, f32)
    p, t = np.empty(EXP_LANES, f32), np.empty(EXP_LANES, f32)
    for lo in range(0, n, EXP_LANES):
        m = min(EXP_LANES, n - lo)
        negate_abs(a[:m], x[lo : lo + m], f32(-1.0))
        exp_chunk32(e[:m], a[:m], p, t)
        sigmoid_finish(out[lo : lo + m], x[lo : lo + m], e, f32(1.0))


@njit
def expm1_scale(s_bits: Any, t_bits: Any, exponent_bits: int, bias: int) -> None:
    """``s = 2^k`` from the shifted ``k`` in ``t`` (integer views; ``exponent_bits`` 52
    and ``bias`` 1023 for float64, 23 and 127 for float32)."""
    shifter = _SHIFTER_BITS if exponent_bits == 52 else _SHIFTER_BITS_F
    for i in range(len(s_bits)):
        s_bits[i] = (t_bits[i] - shifter + bias) << exponent_bits


@njit(fastmath={"contract"}, error_model="numpy")
def tanh_finish(out: Storage, x: Storage, s: Any, pm1: Any, one: Any, two: Any) -> None:
    """``out = copysign(-u / (2 + u), x)`` with ``u = s (e^r - 1) + (s - 1)``."""
    for i in range(len(out)):
        u = s[i] * pm1[i] + (s[i] - one)
        out[i] = math.copysign(-u / (two + u), x[i])


@njit
def tanh_redo(out: Storage, x: Storage, limit: float) -> None:
    """Entries with ``|x| > limit`` (nan too) again, by stage 0's scalar ``tanh``."""
    for i in range(len(out)):
        v = x[i]
        if not (abs(v) <= limit):
            out[i] = _tanh(v)


@njit
def tanh_loop64(out: Storage, x: Storage) -> None:
    """``out[i] = tanh(x[i])`` for float64 1-D arrays of equal length."""
    n = len(out)
    a, pm1, t = np.empty(EXP_LANES), np.empty(EXP_LANES), np.empty(EXP_LANES)
    s = np.empty(EXP_LANES)
    s_bits, t_bits = s.view(np.int64), t.view(np.int64)
    for lo in range(0, n, EXP_LANES):
        m = min(EXP_LANES, n - lo)
        negate_abs(a[:m], x[lo : lo + m], -2.0)
        outside = exp_reduced(pm1[:m], t[:m], a[:m], 0.0)
        expm1_scale(s_bits[:m], t_bits[:m], 52, 1023)
        tanh_finish(out[lo : lo + m], x[lo : lo + m], s[:m], pm1[:m], 1.0, 2.0)
        if outside:
            tanh_redo(out[lo : lo + m], x[lo : lo + m], 354.0)


@njit
def tanh_loop32(out: Storage, x: Storage) -> None:
    """:func:`tanh_loop64` for float32 arrays, in float32 arithmetic."""
    n = len(out)
    f32 = np.float32
    a, pm1 = np.empty(EXP_LANES, f32), np.empty(EXP_LANES, f32)
    t, s = np.empty(EXP_LANES, f32), np.empty(EXP_LANES, f32)
    s_bits, t_bits = s.view(np.int32), t.view(np.int32)
    for lo in range(0, n, EXP_LANES):
        m = min(EXP_LANES, n - lo)
        negate_abs(a[:m], x[lo : lo + m], f32(-2.0))
        outside = exp_reduced32(pm1[:m], t[:m], a[:m], 0.0)
        expm1_scale(s_bits[:m], t_bits[:m], 23, 127)
        tanh_finish(out[lo : lo + m], x[lo : lo + m], s[:m], pm1[:m], f32(1.0), f32(2.0))
        if outside:
            tanh_redo(out[lo : lo + m], x[lo : lo + m], 43.0)


# tanh for float32 in one expression, with no exp: ``tanh x = x P(x^2) / Q(x^2)`` on
# ``|x| <= 9`` (P of degree 5, Q of degree 3), and exactly +-1 beyond (float32's tanh
# rounds to 1 from 8.7 on). A loop of it is a dozen multiply-adds and one division per
# entry, vectorized whole: for kernels that take a tanh inside their own loop (task
# 5.5's GELU), where the exp steps above would need scratch arrays and passes.
_TANH_P = (
    1.8254986064447642e-11, -1.2780319025296194e-08, 9.267373570764903e-06,
    0.0029207561165094376, 0.12919223308563232, 0.9999999403953552,
)  # fmt: skip
_TANH_Q = (0.00022809943766333163, 0.0237631443887949, 0.46252506971359253, 1.0)
"""``P`` and ``Q`` (degree down to 0), the rational fit to ``tanh(x) / x`` in ``s = x^2``
on [0, 81] with relative error 6e-8, by linearised least squares (Sanathanan-Koerner,
then Lawson's reweighting towards the minimax), against ``mpmath.tanh``. In float32
arithmetic the result is within 6 ulp of the correctly rounded tanh (checked at 10^6
points of [-9, 9] in ``tests/module2/test_fast_paths.py``)."""
_TANH_PF = tuple(np.float32(c) for c in _TANH_P)
_TANH_QF = tuple(np.float32(c) for c in _TANH_Q)
_TANH_PD = tuple(np.float64(c) for c in _TANH_P)
_TANH_QD = tuple(np.float64(c) for c in _TANH_Q)


@njit(inline="always", fastmath={"contract"}, error_model="numpy")
def tanh32(v: Any) -> Any:
    """``tanh(v)`` of a float32 in float32 arithmetic (within 6 ulp): exactly +-1 for
    ``|v| >= 9``, nan for nan. Inlined, so the caller's loop vectorizes with it."""
    p5, p4, p3, p2, p1, p0 = _TANH_PF
    q3, q2, q1, q0 = _TANH_QF
    top, one = np.float32(9.0), np.float32(1.0)
    c = top if v > top else v  # a nan passes both clamps
    c = -top if c < -top else c
    s = c * c
    p = ((((p5 * s + p4) * s + p3) * s + p2) * s + p1) * s + p0
    q = ((q3 * s + q2) * s + q1) * s + q0
    t = c * p / q
    t = one if v >= top else t
    return -one if v <= -top else t


@njit(inline="always", fastmath={"contract"}, error_model="numpy")
def tanh32_wide(v: Any) -> Any:
    """:func:`tanh32`'s rational function evaluated in float64 for a float32 ``v``: a
    float64 within the fit's 6e-8 of ``tanh(v)`` (relative), so ``1 +- tanh`` near
    saturation keeps float32 precision (GELU's backward); twice the work of
    :func:`tanh32`, whose few ulp of float32 rounding are 1e-4 of ``1 + tanh(-3)``."""
    p5, p4, p3, p2, p1, p0 = _TANH_PD
    q3, q2, q1, q0 = _TANH_QD
    w = np.float64(v)  # (float() of a float32 stays float32 in Numba)
    c = 9.0 if w > 9.0 else w  # a nan passes both clamps
    c = -9.0 if c < -9.0 else c
    s = c * c
    p = ((((p5 * s + p4) * s + p3) * s + p2) * s + p1) * s + p0
    q = ((q3 * s + q2) * s + q1) * s + q0
    t: Any = c * p / q
    t = 1.0 if w >= 9.0 else t
    return -1.0 if w <= -9.0 else t
