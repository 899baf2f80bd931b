"""Tasks 2.1 and 2.2: the fast CPU backend — stage 1's kernels compiled with Numba.

:class:`FastOps` implements stage 1's :class:`~module1.tensor_ops.TensorOps` protocol
with ``numba.njit(parallel=True)`` kernels, so every Tensor operation, every Function
and the autodiff engine run on it unchanged (``FastTensorBackend``).

Two design points, both about Numba's on-disk cache (``cache=True``):

* **One module-level kernel per shape of work**, cached. A kernel built inside a factory
  closure (``def tensor_map(fn): ... return njit(_map)``) is never loaded from the cache
  (numba 0.68.1 saves a new ``.nbc`` file in every process), and neither is a kernel that
  takes the float function as an argument. So the kernels take an *op code*, a small int
  naming the float function (``OP_RELU``), and :func:`unary` / :func:`binary` switch on
  it. A float function outside the table still works, through an uncached compiled copy
  of stage 1's kernel (see :meth:`FastOps.map`).
* **Stage 0's operators and stage 1's index functions are compiled, not rewritten**:
  :func:`jit_functions` compiles them from their own source, and the cache key includes
  those files (see :mod:`module2.cache`), so editing ``module1/tensor_data.py`` or
  ``module0/operators.py`` recompiles the kernels instead of loading stale ones.

The tasks' kernels (2.1: map, zip, reduce; 2.2: the batched matrix product) are graded
by their contract alone: right values for every layout, and parallel for large inputs.
A ``prange`` over outputs with the index functions for each entry earns full marks;
``module2/README.md`` describes the faster paths the reference takes, as an option.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit, prange
from numba import types as nb_types
from numba.extending import overload

from module0 import operators
from module1 import tensor_data
from module1.tensor_data import Shape, Storage, Strides
from module1.tensor_ops import (
    MapProto,
    TensorBackend,
    TensorOps,
    is_close_float,
    map_output,
    matmul_shape,
    reduce_output,
    tensor_map,
    tensor_reduce,
    tensor_zip,
    zip_output,
)
from module2 import cache

if TYPE_CHECKING:
    from module1.tensor import Tensor

cache.install()


def jit_functions(
    module: types.ModuleType,
    names: Iterable[str],
    decorator: Callable[[Callable[..., Any]], Any] | None = None,
) -> dict[str, Any]:
    """Compile the functions ``names`` of ``module`` with ``decorator``, by default
    ``njit(inline="always")`` (stage 3 passes ``cuda.jit(device=True)``).

    They may call each other (``log_back`` calls ``inv``): each is rebuilt from its own
    code object over a shared namespace in which every listed name is its compiled
    version, so Numba resolves those calls to compiled code."""
    jit = decorator if decorator is not None else njit(inline="always")
    namespace: dict[str, Any] = dict(vars(module))
    compiled: dict[str, Any] = {}
    for name in names:
        fn = getattr(module, name)
        clone = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__)
        compiled[name] = jit(clone)
    namespace.update(compiled)
    return compiled


_index = jit_functions(tensor_data, ("to_index", "index_to_position", "broadcast_index"))
to_index = _index["to_index"]
index_to_position = _index["index_to_position"]
broadcast_index = _index["broadcast_index"]

UNARY_NAMES = ("neg", "sigmoid", "relu", "log", "exp", "id", "inv", "tanh")
BINARY_NAMES = (
    "add", "mul", "lt", "eq", "max", "power", "relu_back", "log_back", "inv_back", "is_close",
)  # fmt: skip
_ops = jit_functions(operators, UNARY_NAMES + BINARY_NAMES)
_neg, _sigmoid, _relu, _log, _exp, _id, _inv, _tanh = (_ops[n] for n in UNARY_NAMES)
_add, _mul, _lt, _eq, _max, _power, _relu_back, _log_back, _inv_back, _is_close = (
    _ops[n] for n in BINARY_NAMES
)

# Op codes: the float function each kernel applies.
OP_NEG, OP_SIGMOID, OP_RELU, OP_LOG, OP_EXP, OP_ID, OP_INV, OP_TANH = range(8)
(
    OP_ADD, OP_MUL, OP_LT, OP_EQ, OP_MAX, OP_POW, OP_RELU_BACK, OP_LOG_BACK, OP_INV_BACK,
    OP_IS_CLOSE,
) = range(10)  # fmt: skip

UNARY_OPS: dict[Callable[..., Any], int] = {
    getattr(operators, name): code for code, name in enumerate(UNARY_NAMES)
}
BINARY_OPS: dict[Callable[..., Any], int] = {
    getattr(operators, name): code for code, name in enumerate(BINARY_NAMES)
}
BINARY_OPS[is_close_float] = OP_IS_CLOSE


@njit(inline="always")
def unary(op: int, x: float) -> float:
    """The unary float function with op code ``op``."""
    if op == OP_NEG:
        return _neg(x)
    if op == OP_SIGMOID:
        return _sigmoid(x)
    if op == OP_RELU:
        return _relu(x)
    if op == OP_LOG:
        return _log(x)
    if op == OP_EXP:
        return _exp(x)
    if op == OP_INV:
        return _inv(x)
    if op == OP_TANH:
        return _tanh(x)
    return _id(x)


@njit(inline="always")
def binary(op: int, x: float, y: float) -> float:
    """The binary float function with op code ``op``."""
    if op == OP_ADD:
        return _add(x, y)
    if op == OP_MUL:
        return _mul(x, y)
    if op == OP_LT:
        return _lt(x, y)
    if op == OP_EQ:
        return _eq(x, y)
    if op == OP_MAX:
        return _max(x, y)
    if op == OP_POW:
        return _power(x, y)
    if op == OP_RELU_BACK:
        return _relu_back(x, y)
    if op == OP_LOG_BACK:
        return _log_back(x, y)
    if op == OP_INV_BACK:
        return _inv_back(x, y)
    return 1.0 if _is_close(x, y) else 0.0


PARALLEL_MIN = 1 << 15
"""The reference's cut-off: kernels with fewer outputs (or multiply-adds) than this run
on the calling thread, where waking the thread pool costs more than the loop. Optional:
a kernel that always runs its ``prange`` loop is correct too, only slower on small
tensors."""


@njit(inline="always")
def size_of(shape: Shape) -> int:
    """The number of entries of ``shape``."""
    size = 1
    for dim in range(len(shape)):
        size *= shape[dim]
    return size


# BEGIN SOLUTION 2.1 omit
CHUNK = 1024
"""About how many entries one parallel iteration handles on the general (strided) path
(whole rows of the output: at least one)."""

BLOCK = 1 << 13
"""Entries one parallel iteration handles on the aligned fast path."""


@njit(inline="always")
def aligned(
    out: Storage, out_shape: Shape, out_strides: Strides,
    in_storage: Storage, in_shape: Shape, in_strides: Strides, size: int,
) -> bool:  # fmt: skip
    """True when entry ``i`` of the input's storage feeds entry ``i`` of the output's: the
    same shape and strides over storages that hold exactly ``size`` values (contiguous,
    or both permuted the same way)."""
    if len(out) != size or len(in_storage) != size or len(out_shape) != len(in_shape):
        return False
    for dim in range(len(out_shape)):
        if out_shape[dim] != in_shape[dim] or out_strides[dim] != in_strides[dim]:
            return False
    return True


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


@njit
def vector_math_loop64(op: int, out: Storage, x: Storage) -> None:
    """``out = unary(op, x)`` for log, sigmoid or tanh on float64 1-D arrays."""
    if op == OP_LOG:
        log_loop64(out, x)
    elif op == OP_SIGMOID:
        sigmoid_loop64(out, x)
    else:
        tanh_loop64(out, x)


@njit
def vector_math_loop32(op: int, out: Storage, x: Storage) -> None:
    """:func:`vector_math_loop64` on float32 1-D arrays."""
    if op == OP_LOG:
        log_loop32(out, x)
    elif op == OP_SIGMOID:
        sigmoid_loop32(out, x)
    else:
        tanh_loop32(out, x)


@njit
def per_entry(op: int, out: Storage, x: Storage) -> None:
    """``out[i] = unary(op, x[i])``: stage 0's scalar function, entry by entry."""
    for i in range(len(out)):
        out[i] = unary(op, x[i])


def vector_math_loop(op: int, out: Storage, x: Storage) -> None:
    """``out = unary(op, x)`` for log, sigmoid or tanh on 1-D arrays of equal length: in
    compiled code :func:`vector_math_loop32` for two float32 arrays,
    :func:`vector_math_loop64` for two float64 ones, :func:`per_entry` otherwise (mixed
    dtypes), chosen when the caller compiles, as :func:`exp_loop`."""
    for i in range(len(out)):
        out[i] = unary(op, x[i])


@overload(vector_math_loop)
def _vector_math_loop(op, out, x):  # unannotated, as _exp_loop
    if out.dtype == x.dtype == nb_types.float32:
        return lambda op, out, x: vector_math_loop32(op, out, x)
    if out.dtype == x.dtype == nb_types.float64:
        return lambda op, out, x: vector_math_loop64(op, out, x)
    return lambda op, out, x: per_entry(op, out, x)


VECTOR_MATH_OPS = (OP_LOG, OP_SIGMOID, OP_TANH)
"""The maps :func:`vector_math_map` computes (exp stays in the map kernel)."""
VECTOR_MATH_MIN = 1 << 14
"""Maps with fewer entries stay in the map kernel, entry by entry."""


@njit(parallel=True, cache=True)
def vector_math_map(op: int, out: Storage, x: Storage) -> None:
    """``out = unary(op, x)`` for log, sigmoid or tanh over two storages of one length
    (entry ``i`` of ``x`` feeds entry ``i`` of ``out``), by their vectorized loops, in
    parallel blocks. A kernel of its own, which ``FastOps.map`` calls only for a large,
    aligned map: inside the map kernel the three loops took its compile from 8 to 14
    s, paid by every program on its first run (the main job's cold start among them),
    where few ever take the log of a large tensor."""
    n = len(out)
    for block in prange((n + BLOCK - 1) // BLOCK):
        lo, hi = block * BLOCK, min(n, (block + 1) * BLOCK)
        vector_math_loop(op, out[lo:hi], x[lo:hi])


def vector_math_applies(out: Any, x: Any) -> bool:
    """Whether a map from TensorData ``x`` to ``out`` can run on flat storage: at least
    :data:`VECTOR_MATH_MIN` entries, one shape and strides, storages of exactly that
    many values."""
    return (
        out.size >= VECTOR_MATH_MIN
        and len(out._storage) == len(x._storage) == out.size
        and out.shape == x.shape
        and out.strides == x.strides
    )


# Loops over flat storage, one per common op. The op is tested once, before the loop:
# a loop whose body switches on the op does not vectorize (LLVM does not hoist a switch
# this large out of a loop). They are plain (not inlined) compiled functions: linked
# into each kernel once, where inlining them at every call site made the reduce kernel
# take over a minute to compile.


binary_call = njit(binary.py_func)
""":func:`binary` compiled as a function of its own, called rather than inlined: the
reduce kernel's path for op codes other than the folds a tensor uses (add, mul, max).
Inlining all ten cases at each of the kernel's eight fold sites made it the slowest
kernel to compile (15 s of a 36 s cold start; 7.6 s calling this). The map and zip
kernels keep :func:`unary` and :func:`binary` inline: calling them there made the
MNIST CNN's epoch a quarter slower (0.91 against 1.14 s in float32)."""


@njit
def unary_loop(op: int, out: Storage, x: Storage) -> None:
    """``out[i] = unary(op, x[i])`` for 1-D arrays of equal length."""
    if op == OP_RELU:
        for i in range(len(out)):
            out[i] = _relu(x[i])
    elif op == OP_NEG:
        for i in range(len(out)):
            out[i] = _neg(x[i])
    elif op == OP_ID:
        for i in range(len(out)):
            out[i] = _id(x[i])
    elif op == OP_EXP:
        exp_loop(out, x)
    else:
        for i in range(len(out)):
            out[i] = unary(op, x[i])


@njit
def binary_loop(op: int, out: Storage, x: Storage, y: Storage) -> None:
    """``out[i] = binary(op, x[i], y[i])`` for 1-D arrays of equal length."""
    if op == OP_ADD:
        for i in range(len(out)):
            out[i] = _add(x[i], y[i])
    elif op == OP_MUL:
        for i in range(len(out)):
            out[i] = _mul(x[i], y[i])
    elif op == OP_RELU_BACK:
        for i in range(len(out)):
            out[i] = _relu_back(x[i], y[i])
    elif op == OP_LT:
        for i in range(len(out)):
            out[i] = _lt(x[i], y[i])
    else:
        for i in range(len(out)):
            out[i] = binary(op, x[i], y[i])


@njit(inline="always")
def fold(op: int, x: float, y: float) -> float:
    """``binary(op, x, y)``, with add, mul and max inline and the rest called."""
    if op == OP_ADD:
        return _add(x, y)
    if op == OP_MUL:
        return _mul(x, y)
    if op == OP_MAX:
        return _max(x, y)
    return binary_call(op, x, y)


@njit
def fold_loop(op: int, acc: Storage, x: Storage) -> None:
    """``acc[i] = binary(op, acc[i], x[i])`` for 1-D arrays of equal length: one step of
    many folds side by side (each fold keeps its order)."""
    if op == OP_ADD:
        for i in range(len(acc)):
            acc[i] = _add(acc[i], x[i])
    elif op == OP_MAX:
        for i in range(len(acc)):
            acc[i] = _max(acc[i], x[i])
    elif op == OP_MUL:
        for i in range(len(acc)):
            acc[i] = _mul(acc[i], x[i])
    else:
        for i in range(len(acc)):
            acc[i] = binary_call(op, acc[i], x[i])


@njit(inline="always")
def row_length(shape: Shape) -> int:
    """Entries per row (the last dimension; 1 for a 0-d tensor)."""
    return shape[len(shape) - 1] if len(shape) > 0 else 1


@njit(inline="always")
def row_step(shape: Shape, strides: Strides) -> int:
    """The storage step of a tensor broadcast to an output, along the output's last
    dimension: 0 where it is broadcast (size 1 there, or no dimensions)."""
    dims = len(shape)
    if dims == 0 or shape[dims - 1] == 1:
        return 0
    return strides[dims - 1]


@njit
def map_chunk(
    op: int,
    out: Storage, out_shape: Shape, out_strides: Strides,
    in_storage: Storage, in_shape: Shape, in_strides: Strides, start: int, stop: int,
) -> None:  # fmt: skip
    """The general path of :func:`tensor_map_kernel` for the output rows
    ``start:stop`` (a row: all entries that differ only in the last index), with its
    own index buffers. The index functions run once per row; along the row, each
    storage position moves by a fixed step."""
    n = row_length(out_shape)
    out_step = row_step(out_shape, out_strides)
    in_step = row_step(in_shape, in_strides)
    out_index = np.empty(len(out_shape), np.int32)
    in_index = np.empty(len(in_shape), np.int32)
    for row in range(start, stop):
        to_index(row * n, out_shape, out_index)
        broadcast_index(out_index, out_shape, in_shape, in_index)
        o = index_to_position(out_index, out_strides)
        i = index_to_position(in_index, in_strides)
        for j in range(n):
            out[o + j * out_step] = unary(op, in_storage[i + j * in_step])


@njit(inline="always")
def run_step(shape: Shape, strides: Strides, dims: int, dim: int, run: int) -> int:
    """How a tensor broadcast to a ``dims``-dimensional output moves along output
    dimension ``dim``, inside a run of ``run`` entries: 0 (broadcast there), 1 (its
    stride there is ``run``: it moves on contiguously), or 2 (anything else)."""
    own = dim - (dims - len(shape))
    if own < 0 or shape[own] == 1:
        return 0
    return 1 if strides[own] == run else 2


@njit
def zip_run(
    out_shape: Shape, out_strides: Strides,
    a_shape: Shape, a_strides: Strides, b_shape: Shape, b_strides: Strides,
) -> tuple[int, int, int, int]:  # fmt: skip
    """``(n, out_step, a_step, b_step)``: the row of :func:`zip_chunk` (``n`` output
    entries whose storage positions move by a fixed step each). The trailing dimensions
    over which the output is contiguous and each input is either contiguous too or
    broadcast (a bias over ``(..., channels, height, width)``, say) merge into one row;
    otherwise a row is the last dimension, at any steps."""
    dims = len(out_shape)
    n, a_mode, b_mode = 1, -1, -1
    for dim in range(dims - 1, -1, -1):
        size = out_shape[dim]
        if size == 1:
            continue
        if out_strides[dim] != n:
            break
        a = run_step(a_shape, a_strides, dims, dim, n)
        b = run_step(b_shape, b_strides, dims, dim, n)
        if a == 2 or b == 2 or (a_mode >= 0 and a != a_mode) or (b_mode >= 0 and b != b_mode):
            break
        a_mode, b_mode, n = a, b, n * size
    if n > 1:
        return n, 1, a_mode, b_mode
    return (
        row_length(out_shape), row_step(out_shape, out_strides),
        row_step(a_shape, a_strides), row_step(b_shape, b_strides),
    )  # fmt: skip


@njit(inline="always")
def broadcast_steps(shape: Shape, strides: Strides, dims: int, outer: int) -> Any:
    """How far a tensor broadcast to a ``dims``-dimensional output moves in storage for
    one step along each of the output's first ``outer`` dimensions (0 where broadcast)."""
    steps = np.zeros(dims, np.int64)
    for dim in range(outer):
        own = dim - (dims - len(shape))
        if own >= 0 and shape[own] != 1:
            steps[dim] = strides[own]
    return steps


@njit
def zip_chunk(
    op: int,
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    b_storage: Storage, b_shape: Shape, b_strides: Strides,
    run: tuple[int, int, int, int], start: int, stop: int,
) -> None:  # fmt: skip
    """The general path of :func:`tensor_zip_kernel` for the output rows
    ``start:stop``, rows as :func:`zip_run` gives them (``run``), like
    :func:`map_chunk`. A row whose steps are all 0 or 1 goes through
    :func:`binary_loop` (vectorized), a broadcast input's value copied along a row
    buffer first."""
    n, out_step, a_step, b_step = run
    dims = len(out_shape)
    out_index = np.empty(dims, np.int32)
    a_index = np.empty(len(a_shape), np.int32)
    b_index = np.empty(len(b_shape), np.int32)
    unit = out_step == 1 and a_step <= 1 and b_step <= 1
    a_row = np.empty(n if unit and a_step == 0 else 0, a_storage.dtype)
    b_row = np.empty(n if unit and b_step == 0 else 0, b_storage.dtype)
    # The first row's positions from the index functions; each next row's by adding
    # strides (an odometer over the dimensions outside the row, ``outer`` of them).
    outer, inside = dims, 1
    while outer > 0 and inside < n:
        outer -= 1
        inside *= out_shape[outer]
    a_steps = broadcast_steps(a_shape, a_strides, dims, outer)
    b_steps = broadcast_steps(b_shape, b_strides, dims, outer)
    to_index(start * n, out_shape, out_index)
    broadcast_index(out_index, out_shape, a_shape, a_index)
    broadcast_index(out_index, out_shape, b_shape, b_index)
    o = index_to_position(out_index, out_strides)
    pa = index_to_position(a_index, a_strides)
    pb = index_to_position(b_index, b_strides)
    for row in range(start, stop):
        if row > start:  # move on one row: the last outer dimension, carrying
            dim = outer - 1
            while dim >= 0:
                out_index[dim] += 1
                o, pa, pb = o + out_strides[dim], pa + a_steps[dim], pb + b_steps[dim]
                if out_index[dim] < out_shape[dim]:
                    break
                size = out_shape[dim]
                o, pa, pb = (
                    o - size * out_strides[dim],
                    pa - size * a_steps[dim],
                    pb - size * b_steps[dim],
                )
                out_index[dim] = 0
                dim -= 1
        if unit:
            x = a_storage[pa : pa + n]
            if a_step == 0:
                a_row[:] = a_storage[pa]
                x = a_row
            y = b_storage[pb : pb + n]
            if b_step == 0:
                b_row[:] = b_storage[pb]
                y = b_row
            binary_loop(op, out[o : o + n], x, y)
            continue
        for j in range(n):
            value = binary(op, a_storage[pa + j * a_step], b_storage[pb + j * b_step])
            out[o + j * out_step] = value


# END SOLUTION


# ## Task 2.1: parallel map, zip and reduce


@njit(parallel=True, cache=True)
def tensor_map_kernel(
    op: int,
    out: Storage, out_shape: Shape, out_strides: Strides,
    in_storage: Storage, in_shape: Shape, in_strides: Strides,
) -> None:  # fmt: skip
    """``out = unary(op, input)`` with the input broadcast to ``out_shape``; any layout
    of either (permuted, with gaps). Every output entry is written once, nothing else
    in ``out``. The loop over outputs is a ``prange``, so a large map uses every
    core."""
    # BEGIN SOLUTION 2.1
    # The reference's fast paths (see the README): aligned layouts loop straight over
    # storage in parallel blocks; otherwise each parallel iteration takes a chunk of
    # output rows with its own index buffers. Small maps run on the calling thread.
    size = size_of(out_shape)
    if aligned(out, out_shape, out_strides, in_storage, in_shape, in_strides, size):
        if size < PARALLEL_MIN:
            unary_loop(op, out, in_storage)
            return
        for block in prange((size + BLOCK - 1) // BLOCK):
            lo, hi = block * BLOCK, min(size, (block + 1) * BLOCK)
            unary_loop(op, out[lo:hi], in_storage[lo:hi])
        return
    if size == 0:
        return
    rows = size // row_length(out_shape)
    if size < PARALLEL_MIN:
        map_chunk(op, out, out_shape, out_strides, in_storage, in_shape, in_strides, 0, rows)
        return
    per_chunk = max(1, CHUNK // row_length(out_shape))  # rows per parallel iteration
    for chunk in prange((rows + per_chunk - 1) // per_chunk):
        lo, hi = chunk * per_chunk, min(rows, (chunk + 1) * per_chunk)
        map_chunk(op, out, out_shape, out_strides, in_storage, in_shape, in_strides, lo, hi)
    # END SOLUTION


@njit(parallel=True, cache=True)
def tensor_zip_kernel(
    op: int,
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    b_storage: Storage, b_shape: Shape, b_strides: Strides,
) -> None:  # fmt: skip
    """``out = binary(op, a, b)`` with both inputs broadcast to ``out_shape``; any
    layout, every output entry written once, in parallel over outputs, as
    :func:`tensor_map_kernel`."""
    # BEGIN SOLUTION 2.1
    # The same paths as the map's: aligned blocks, chunks of rows, small zips serial.
    size = size_of(out_shape)
    if aligned(out, out_shape, out_strides, a_storage, a_shape, a_strides, size) and aligned(
        out, out_shape, out_strides, b_storage, b_shape, b_strides, size
    ):
        if size < PARALLEL_MIN:
            binary_loop(op, out, a_storage, b_storage)
            return
        for block in prange((size + BLOCK - 1) // BLOCK):
            lo, hi = block * BLOCK, min(size, (block + 1) * BLOCK)
            binary_loop(op, out[lo:hi], a_storage[lo:hi], b_storage[lo:hi])
        return
    if size == 0:
        return
    run = zip_run(out_shape, out_strides, a_shape, a_strides, b_shape, b_strides)
    rows = size // run[0]
    if size < PARALLEL_MIN:
        zip_chunk(
            op, out, out_shape, out_strides, a_storage, a_shape, a_strides,
            b_storage, b_shape, b_strides, run, 0, rows,
        )  # fmt: skip
        return
    per_chunk = max(1, CHUNK // run[0])
    for chunk in prange((rows + per_chunk - 1) // per_chunk):
        lo, hi = chunk * per_chunk, min(rows, (chunk + 1) * per_chunk)
        zip_chunk(
            op, out, out_shape, out_strides, a_storage, a_shape, a_strides,
            b_storage, b_shape, b_strides, run, lo, hi,
        )  # fmt: skip
    # END SOLUTION


# BEGIN SOLUTION 2.1 omit
LANES = 64
"""Interleaved partial folds in :func:`fold_contiguous`."""


fold_lanes = njit(inline="always")(fold_loop.py_func)
""":func:`fold_loop` inlined, for the call sites that run it once per short row (a call
there costs as much as the work)."""


@njit
def fold_contiguous(op: int, x: Storage) -> float:
    """``binary(op, .)`` folded over the 1-D ``x`` (at least one entry), regrouped into
    :data:`LANES` interleaved folds that are combined at the end: the same result up to
    reassociation, and a loop that vectorizes (one running value cannot)."""
    n = len(x)
    acc = x[0]
    if n < 2 * LANES:
        for i in range(1, n):
            acc = fold(op, acc, x[i])
        return acc
    lanes = x[:LANES].copy()
    full = n // LANES * LANES
    for lo in range(LANES, full, LANES):
        fold_lanes(op, lanes, x[lo : lo + LANES])
    acc = lanes[0]
    for i in range(1, LANES):
        acc = fold(op, acc, lanes[i])
    for i in range(full, n):
        acc = fold(op, acc, x[i])
    return acc


@njit(inline="always")
def is_contiguous(shape: Shape, strides: Strides) -> bool:
    """True when ``strides`` are the row-major strides of ``shape``."""
    expected = 1
    for dim in range(len(shape) - 1, -1, -1):
        if shape[dim] != 1 and strides[dim] != expected:
            return False
        expected *= shape[dim]
    return True


@njit
def fold_rows(
    op: int, out: Storage, a_storage: Storage, n: int, inner: int, job: int, width: int
) -> None:
    """Job ``job`` of the rows path of :func:`tensor_reduce_kernel`: one block of
    ``width`` outputs ``out[o, lo:hi]`` of a contiguous ``(outer, n, inner)`` input,
    folded row by row (each fold in order, the loop over the block vectorized)."""
    blocks = (inner + width - 1) // width
    o, block = job // blocks, job % blocks
    lo, hi = block * width, min(inner, (block + 1) * width)
    acc = out[o * inner + lo : o * inner + hi]
    for k in range(n):
        row = (o * n + k) * inner
        fold_lanes(op, acc, a_storage[row + lo : row + hi])


@njit
def fold_part(
    op: int, out_shape: Shape, a_storage: Storage, a_shape: Shape, a_strides: Strides,
    reduce_dim: int, parts: int, job: int, index: Strides,
) -> float:  # fmt: skip
    """Job ``job`` of the general path of :func:`tensor_reduce_kernel`: part
    ``job % parts`` of output ``job // parts``'s fold (``index`` is a scratch buffer)."""
    n, step = a_shape[reduce_dim], a_strides[reduce_dim]
    i, part = job // parts, job % parts
    to_index(i, out_shape, index)
    start = part * n // parts
    stop = (part + 1) * n // parts
    position = index_to_position(index, a_strides) + start * step
    if step == 1:
        return fold_contiguous(op, a_storage[position : position + stop - start])
    acc = a_storage[position]
    for _ in range(start + 1, stop):
        position += step
        acc = fold(op, acc, a_storage[position])
    return acc


@njit
def combine(
    op: int, out: Storage, out_shape: Shape, out_strides: Strides,
    partial: Storage, parts: int, start: int, stop: int,
) -> None:  # fmt: skip
    """Fold the ``parts`` partial results of outputs ``start:stop`` into ``out``, in
    order, after the start value ``out`` holds."""
    index = np.empty(len(out_shape), np.int32)
    for i in range(start, stop):
        to_index(i, out_shape, index)
        out_position = index_to_position(index, out_strides)
        acc = out[out_position]
        for part in range(parts):
            acc = fold(op, acc, partial[i * parts + part])
        out[out_position] = acc


# END SOLUTION


@njit(parallel=True, cache=True)
def tensor_reduce_kernel(
    op: int,
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    reduce_dim: int, parts: int,
) -> None:  # fmt: skip
    """Fold ``binary(op, ., .)`` along ``reduce_dim`` into ``out``, which has size 1 there
    and already holds the start value of each fold: ``out[i] = op(... op(op(out[i],
    a[i, 0]), a[i, 1]) ..., a[i, n - 1])`` (up to floating-point reassociation); any
    layout of either, in parallel over outputs.

    ``parts`` is a hint from the caller: into how many pieces each fold may be cut so
    that a few long folds (the sum of a whole tensor) still use every core; 1 when
    there are enough outputs. A kernel may ignore it."""
    # BEGIN SOLUTION 2.1
    # The reference's paths (see the README): contiguous tensors reduced along a
    # dimension other than the last fold blocks of outputs side by side, row by row
    # (fold_rows); otherwise each fold is cut into `parts` folded in parallel
    # (fold_part) and then combined in order. Small reductions run on one thread.
    size = size_of(out_shape)
    n = a_shape[reduce_dim]
    serial = size * n < PARALLEL_MIN
    inner = 1  # entries per step along reduce_dim, when contiguous
    for dim in range(reduce_dim + 1, len(a_shape)):
        inner *= a_shape[dim]
    if inner > 1 and is_contiguous(a_shape, a_strides) and is_contiguous(out_shape, out_strides):
        # Blocks of outputs: at most BLOCK wide, and in parallel at least 8 of them for
        # each outer index (so one wide row of outputs still keeps every core busy);
        # on one thread whole rows (half the calls for a (50, 100) bias gradient).
        width = min(BLOCK, inner if serial else max(LANES, (inner + 7) // 8))
        jobs = size // inner * ((inner + width - 1) // width)
        if serial:
            for job in range(jobs):
                fold_rows(op, out, a_storage, n, inner, job, width)
            return
        for job in prange(jobs):
            fold_rows(op, out, a_storage, n, inner, job, width)
        return
    parts = max(1, min(parts, n))
    jobs = size * parts
    partial = np.empty(jobs, np.float64)
    if serial:
        index = np.empty(len(out_shape), np.int32)
        for job in range(jobs):
            partial[job] = fold_part(
                op, out_shape, a_storage, a_shape, a_strides, reduce_dim, parts, job, index
            )
    else:
        per_chunk = max(1, min(CHUNK, jobs // 64))  # few long jobs: one per iteration
        for chunk in prange((jobs + per_chunk - 1) // per_chunk):
            index = np.empty(len(out_shape), np.int32)
            for job in range(chunk * per_chunk, min(jobs, (chunk + 1) * per_chunk)):
                partial[job] = fold_part(
                    op, out_shape, a_storage, a_shape, a_strides, reduce_dim, parts, job, index
                )
    if serial:
        combine(op, out, out_shape, out_strides, partial, parts, 0, size)
        return
    for chunk in prange((size + CHUNK - 1) // CHUNK):
        combine(
            op,
            out,
            out_shape,
            out_strides,
            partial,
            parts,
            chunk * CHUNK,
            min(size, (chunk + 1) * CHUNK),
        )
    # END SOLUTION


# BEGIN SOLUTION 2.2 omit
@njit
def matmul_rows(
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    b_storage: Storage, b_shape: Shape, b_strides: Strides, start: int, stop: int,
) -> None:  # fmt: skip
    """Rows ``start:stop`` of the output of :func:`tensor_matrix_multiply_kernel`
    (counting every batch's rows in order), with index buffers and a row accumulator
    of their own."""
    dims = len(out_shape)
    p = out_shape[dims - 1]
    m = a_shape[len(a_shape) - 1]
    a_col = a_strides[len(a_shape) - 1]
    b_row, b_col = b_strides[len(b_shape) - 2], b_strides[len(b_shape) - 1]
    o_col = out_strides[dims - 1]
    out_index = np.empty(dims, np.int32)
    a_index = np.empty(len(a_shape), np.int32)
    b_index = np.empty(len(b_shape), np.int32)
    # Accumulate a row in a local buffer: the compiler knows it overlaps nothing else,
    # so the j loop vectorizes (out and b could alias, as far as it knows).
    row_sum = np.empty(p)
    for row in range(start, stop):
        to_index(row * p, out_shape, out_index)  # (..., i, 0)
        broadcast_index(out_index, out_shape, a_shape, a_index)
        broadcast_index(out_index, out_shape, b_shape, b_index)
        a_index[len(a_shape) - 1] = 0
        b_index[len(b_shape) - 2] = 0
        b_index[len(b_shape) - 1] = 0
        a_base = index_to_position(a_index, a_strides)
        b_base = index_to_position(b_index, b_strides)
        o_base = index_to_position(out_index, out_strides)
        if p == 1:  # a dot product (a layer with one output): no row buffer
            acc = 0.0
            for k in range(m):
                acc += a_storage[a_base + k * a_col] * b_storage[b_base + k * b_row]
            out[o_base] = acc
            continue
        row_sum[:] = 0.0
        for k in range(m):
            aik = a_storage[a_base + k * a_col]
            b_k = b_base + k * b_row
            if b_col == 1:
                b_k_row = b_storage[b_k : b_k + p]  # indexed by j alone: vectorizes
                for j in range(p):
                    row_sum[j] += aik * b_k_row[j]
            else:
                for j in range(p):
                    row_sum[j] += aik * b_storage[b_k + j * b_col]
        for j in range(p):
            out[o_base + j * o_col] = row_sum[j]


@njit(cache=True, fastmath={"contract", "reassoc"})
def matmul_small(
    out: Storage, a: Storage, a_row: int, a_col: int, b: Storage, b_row: int, b_col: int,
    n: int, m: int, p: int,
) -> None:  # fmt: skip
    """``out = a @ b`` for one small 2-D product into a fresh C-order ``out`` (``n x
    p``), ``a`` and ``b`` at any strides: an MLP's thin products (a layer of one unit,
    two inputs, a transposed operand in backward), whose cost in task 2.2's kernel is
    its generality: index buffers, the batch index per row, and a dot product summed in
    order, each add waiting for the last. Scalar strides, and the loop order that reads
    contiguous memory innermost (so it vectorizes; ``reassoc`` lets the dots split)."""
    if p == 1 and a_row == 1 and a_col != 1:  # a transposed: add columns of a, scaled
        out[:n] = 0.0
        for k in range(m):
            column, scale = a[k * a_col : k * a_col + n], b[k * b_row]
            for i in range(n):
                out[i] += column[i] * scale
        return
    if p == 1:  # one dot product per row of a
        for i in range(n):
            acc = 0.0
            if a_col == 1 and b_row == 1:
                row, column = a[i * a_row : i * a_row + m], b[:m]
                for k in range(m):
                    acc += row[k] * column[k]
            else:
                for k in range(m):
                    acc += a[i * a_row + k * a_col] * b[k * b_row]
            out[i] = acc
        return
    for i in range(n):  # i-k-j: a row of out at a time, scaled rows of b added in
        row = out[i * p : i * p + p]
        row[:] = 0.0
        for k in range(m):
            aik = a[i * a_row + k * a_col]
            if b_col == 1:
                b_k = b[k * b_row : k * b_row + p]
                for j in range(p):
                    row[j] += aik * b_k[j]
            else:
                for j in range(p):
                    row[j] += aik * b[k * b_row + j * b_col]


# END SOLUTION


# ## Task 2.2: parallel batched matrix multiply


@njit(parallel=True, cache=True)
def tensor_matrix_multiply_kernel(
    out: Storage, out_shape: Shape, out_strides: Strides,
    a_storage: Storage, a_shape: Shape, a_strides: Strides,
    b_storage: Storage, b_shape: Shape, b_strides: Strides,
) -> None:  # fmt: skip
    """``out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]`` with batch dimensions
    broadcast, any layout of all three; every output entry written once (``out`` may
    hold anything before), in parallel over the output's entries or rows."""
    # BEGIN SOLUTION 2.2
    # The reference: chunks of output rows in parallel (matmul_rows), the index
    # functions once per row and the inner loops in i-k-j order over strides.
    dims = len(out_shape)
    p = out_shape[dims - 1]
    m = a_shape[len(a_shape) - 1]
    rows = size_of(out_shape) // p if p > 0 else 0
    a = (a_storage, a_shape, a_strides)
    b = (b_storage, b_shape, b_strides)
    if rows * m * p < PARALLEL_MIN:
        matmul_rows(out, out_shape, out_strides, *a, *b, 0, rows)
        return
    per_chunk = (rows + 63) // 64  # about 64 parallel iterations
    for chunk in prange((rows + per_chunk - 1) // per_chunk):
        lo, hi = chunk * per_chunk, min(rows, (chunk + 1) * per_chunk)
        matmul_rows(out, out_shape, out_strides, *a, *b, lo, hi)
    # END SOLUTION


# ## The backend

PACKED_MIN_MULTIPLY_ADDS = 1 << 16
"""Products of at least this many multiply-adds per matrix (40^3), and no side under
:data:`PACKED_MIN_SIDE`, use task 2.3's packed kernel (``module2/fast_matmul.py``);
smaller or thinner ones, where a call of it costs more than it saves (about 6 us
before any arithmetic), use task 2.2's."""

PACKED_MIN_SIDE = 16
"""Below it task 2.2's kernel wins. Measured with the reference's gemm (2-core AMD
EPYC, microseconds, task 2.2 / gemm): 8 x 100 @ 100 x 100 9.8 / 19.8; 32 x 32 @ 32 x 32
10.0 / 9.5; 50 x 100 @ 100 x 100 56 / 40; the MNIST CNN's 32 x 784 @ 784 x 64 float32
113 / 56; 100 x 100 @ 100 x 100 float32 102 / 50."""


def compile_stage1(kernel: Callable[..., None]) -> Any:
    """Compile one of stage 1's kernel closures (uncached): the same code over a
    namespace in which its index functions are the compiled ones. The fallback for a
    float function outside the op tables."""
    namespace = dict(kernel.__globals__)
    namespace.update(
        to_index=to_index, index_to_position=index_to_position, broadcast_index=broadcast_index
    )
    clone = types.FunctionType(
        kernel.__code__, namespace, kernel.__name__, kernel.__defaults__, kernel.__closure__
    )
    return njit(clone)


class FastOps(TensorOps):
    """Stage 1's protocol on the compiled kernels above."""

    @staticmethod
    def map(fn: Callable[[float], float]) -> MapProto:
        op = UNARY_OPS.get(fn)
        if op is None:  # not in the table: compile stage 1's kernel for it (not cached)
            fallback = compile_stage1(tensor_map(njit(fn)))

        def apply(a: Tensor, out: Tensor | None = None) -> Tensor:
            out = map_output(a, out)
            o, i = out._tensor, a._tensor  # the arguments spelled out: no tuples to unpack
            if op is None:
                fallback(o._storage, o._shape, o._strides, i._storage, i._shape, i._strides)
            # BEGIN SOLUTION 2.1 omit
            elif op in VECTOR_MATH_OPS and vector_math_applies(o, i):
                vector_math_map(op, o._storage, i._storage)
            # END SOLUTION
            else:
                tensor_map_kernel(
                    op, o._storage, o._shape, o._strides, i._storage, i._shape, i._strides
                )
            return out

        return apply

    @staticmethod
    def zip(fn: Callable[[float, float], float]) -> Callable[[Tensor, Tensor], Tensor]:
        op = BINARY_OPS.get(fn)
        if op is None:
            fallback = compile_stage1(tensor_zip(njit(fn)))

        def apply(a: Tensor, b: Tensor) -> Tensor:
            out = zip_output(a, b)
            o, i, j = out._tensor, a._tensor, b._tensor
            if op is None:
                fallback(
                    o._storage, o._shape, o._strides, i._storage, i._shape, i._strides,
                    j._storage, j._shape, j._strides,
                )  # fmt: skip
            else:
                tensor_zip_kernel(
                    op, o._storage, o._shape, o._strides, i._storage, i._shape, i._strides,
                    j._storage, j._shape, j._strides,
                )  # fmt: skip
            return out

        return apply

    @staticmethod
    def reduce(
        fn: Callable[[float, float], float], start: float = 0.0
    ) -> Callable[[Tensor, int], Tensor]:
        op = BINARY_OPS.get(fn)
        if op is None:
            fallback = compile_stage1(tensor_reduce(njit(fn)))

        def apply(a: Tensor, dim: int) -> Tensor:
            out = reduce_output(a, dim, start)
            if op is None:
                fallback(*out.tuple_arrays(), *a.tuple_arrays(), dim)
            elif a.shape[dim] > 0:
                # Few outputs and long folds: split each fold so every thread works.
                outputs, n = out.size, a.shape[dim]
                parts = 1 if outputs >= 64 else max(1, min(64 // outputs, n // 4096))
                tensor_reduce_kernel(op, *out.tuple_arrays(), *a.tuple_arrays(), dim, parts)
            return out

        return apply

    @staticmethod
    def matrix_multiply(a: Tensor, b: Tensor) -> Tensor:
        out = a.empty(matmul_shape(a.shape, b.shape))  # both kernels write every entry
        if not out.size:
            return out
        n, m, p = a.shape[-2], a.shape[-1], b.shape[-1]
        # BEGIN SOLUTION 2.2 omit
        if n * m * p < PARALLEL_MIN and len(out.shape) == 2:  # small 2-D: scalar strides
            (a_row, a_col), (b_row, b_col) = a._tensor.strides, b._tensor.strides
            matmul_small(
                out._tensor._storage, a._tensor._storage, a_row, a_col,
                b._tensor._storage, b_row, b_col, n, m, p,
            )  # fmt: skip
            return out
        # END SOLUTION
        if n * m * p >= PACKED_MIN_MULTIPLY_ADDS and min(n, m, p) >= PACKED_MIN_SIDE:
            from module2 import fast_matmul  # it imports this module

            if fast_matmul.packed_product(out, a, b):
                return out
        if b._tensor.strides[-1] != 1 and p > 1:
            b = FastTensorBackend.id_map(b)  # rows of b contiguous: the inner loop vectorizes
        tensor_matrix_multiply_kernel(*out.tuple_arrays(), *a.tuple_arrays(), *b.tuple_arrays())
        return out


FastTensorBackend = TensorBackend(FastOps)
"""The stage-2 backend: ``tensor(..., backend=FastTensorBackend)``."""
