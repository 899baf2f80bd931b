"""Task 6.3: half-precision storage.

A float32 is 1 sign bit, 8 exponent bits and 23 fraction bits. **bfloat16** keeps the
sign and all 8 exponent bits and only 7 fraction bits: it is the upper 16 bits of a
float32, with float32's range and about 3 significant digits. **float16** (IEEE half)
has 5 exponent bits and 10 fraction bits: more digits, but nothing above 65504 and
nothing below about 6e-8 (:mod:`module6.scaler` is about that).

No kernel of this framework computes in 16 bits (NumPy has no bfloat16 arithmetic, and
Numba none for either type on a CPU): a half tensor is *storage*, widened to float32
to compute and rounded back to store. The student writes the bfloat16 codec as two
Numba kernels on the bit patterns (:func:`bfloat16_encode`, :func:`bfloat16_decode`);
float16's, given, are longer for its narrow exponent (NumPy has float16, but converts
several times slower). ``ml_dtypes`` gives NumPy a ``bfloat16`` dtype, so
a bfloat16 storage prints and converts like any NumPy array.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from numba import njit, prange

from module1.tensor_data import storage_only

float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
HALF = (float16, bfloat16)
"""The two half-precision storage dtypes."""

ADVICE = (
    "half-precision tensors are storage: compute under module6.autocast(dtype), or "
    "convert with .float()"
)
for _half in HALF:
    storage_only[_half] = ADVICE


@njit(cache=True, parallel=True)
def bfloat16_encode(x: Any, out: Any) -> None:
    """``out[i]`` = the bits of the bfloat16 nearest to the float32 whose bits are
    ``x[i]`` (``x`` a float32 array viewed as uint32, ``out`` uint16), ties to the even
    one. Infinities stay infinite, a NaN stays a NaN (with its sign), and a value that
    rounds past the largest bfloat16 becomes infinite. Both arrays are 1-D, of one
    length."""
    # BEGIN SOLUTION 6.3
    for i in prange(len(x)):
        b = x[i]
        if (b & 0x7FFFFFFF) > 0x7F800000:  # a NaN: its top bits, made a quiet NaN
            out[i] = (b >> 16) | 0x0040
        else:  # add just under half a step, and one more when the kept part is odd
            out[i] = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    # END SOLUTION


@njit(cache=True, parallel=True)
def bfloat16_decode(bits: Any, out: Any) -> None:
    """``out[i]`` = the bits of the float32 equal to the bfloat16 whose bits are
    ``bits[i]`` (``bits`` uint16, ``out`` a float32 array viewed as uint32): exact,
    since every bfloat16 is a float32. Both arrays are 1-D, of one length."""
    # BEGIN SOLUTION 6.3
    for i in prange(len(bits)):
        out[i] = np.uint32(bits[i]) << 16
    # END SOLUTION


@njit(cache=True)
def _float16_bits(b: Any) -> Any:
    """The float16 nearest to the float32 whose bits are ``b``, ties to even, as bits:
    every case (see :func:`float16_encode`)."""
    sign = (b >> 16) & 0x8000
    exponent = (b >> 23) & 0xFF
    fraction = b & 0x7FFFFF
    if exponent == 0xFF:  # infinity, or a NaN kept quiet
        return sign | 0x7C00 | (0x0200 | (fraction >> 13) if fraction else 0)
    e = exponent - 112  # float16's biased exponent (127 - 15 = 112)
    if e >= 31:
        return sign | 0x7C00
    if e <= 0:  # a subnormal float16, or zero: the implicit 1 shifts down too
        if e < -10:
            return sign
        fraction = fraction | 0x800000
        drop = 14 - e
    else:
        fraction = fraction | (e << 23)  # exponent and fraction round together
        drop = 13
    kept = fraction >> drop
    rest = fraction & ((1 << drop) - 1)
    half_way = 1 << (drop - 1)
    if rest > half_way or (rest == half_way and (kept & 1) == 1):
        kept += 1  # a carry into the exponent is right (up to infinity)
    return sign | kept


@njit(cache=True, parallel=True)
def float16_encode(x: Any, out: Any) -> None:
    """float16's counterpart of :func:`bfloat16_encode` (given): the same rounding to
    the nearest (ties to even), with float16's 5-bit exponent. A number too small for a
    normal float16 becomes a subnormal one (or zero), and past 65504 it overflows to
    infinity. NumPy's conversion gives the same bits, about five times slower."""
    for i in prange(len(x)):
        b = x[i]
        magnitude = b & 0x7FFFFFFF
        if 0x38800000 <= magnitude < 0x477FF000:  # a normal float16 (the usual case):
            # rebias the exponent (127 -> 15) and round 13 bits away as bfloat16 does 16
            kept = (magnitude - 0x38000000 + 0x0FFF + ((magnitude >> 13) & 1)) >> 13
            out[i] = ((b >> 16) & 0x8000) | kept
        else:
            out[i] = _float16_bits(b)


@njit(cache=True, parallel=True)
def float16_decode(bits: Any, out: Any) -> None:
    """float16's counterpart of :func:`bfloat16_decode` (given): exact, subnormals
    made normal float32s, infinities and NaNs kept."""
    for i in prange(len(bits)):
        h = np.uint32(bits[i])
        sign = (h & 0x8000) << 16
        exponent = (h >> 10) & 0x1F
        fraction = h & 0x3FF
        if exponent == 0x1F:
            out[i] = sign | 0x7F800000 | (fraction << 13)
        elif exponent != 0:  # rebias the exponent (15 -> 127): one addition
            out[i] = sign | (((h & 0x7FFF) << 13) + 0x38000000)
        elif fraction == 0:
            out[i] = sign
        else:  # subnormal: shift the leading 1 up to the implicit bit's place
            shift = 0
            while (fraction & 0x400) == 0:
                fraction <<= 1
                shift += 1
            out[i] = sign | ((113 - shift) << 23) | ((fraction & 0x3FF) << 13)


def half_dtype(dtype: Any) -> np.dtype:
    """``dtype`` (``"bfloat16"``, ``np.float16``, ``module6.bfloat16``, ...) as one of
    :data:`HALF`; TypeError naming it otherwise."""
    try:
        found = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    except TypeError:
        found = None
    if found not in HALF:
        raise TypeError(f"half precision is float16 or bfloat16, not {dtype!r}")
    return found


def to_half(values: np.ndarray, dtype: Any) -> np.ndarray:
    """A new array of ``values`` (float32, any shape) rounded to ``dtype``, same shape."""
    dtype = half_dtype(dtype)
    flat = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    bits = np.empty(flat.size, np.uint16)
    (float16_encode if dtype == float16 else bfloat16_encode)(flat.view(np.uint32), bits)
    return bits.view(dtype).reshape(np.shape(values))


def to_float32(values: np.ndarray) -> np.ndarray:
    """A new float32 array of half-precision ``values`` (exact), same shape."""
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.dtype not in HALF:
        raise TypeError(f"to_float32 widens float16 or bfloat16, not {flat.dtype}")
    out = np.empty(flat.size, np.float32)
    decode = float16_decode if flat.dtype == float16 else bfloat16_decode
    decode(flat.view(np.uint16), out.view(np.uint32))
    return out.reshape(values.shape)


def round_to(values: np.ndarray, dtype: Any) -> np.ndarray:
    """A new float32 array of ``values`` rounded to ``dtype``: what a half-precision
    storage would give back."""
    return to_float32(to_half(values, dtype))
