"""Task 6.3: the bfloat16 codec, against ``ml_dtypes`` (an independent implementation
of the same rounding); and the given code around it: float16's codec, against NumPy,
and half-precision tensors, storage only, with a clear error wherever an operation
meets one outside ``autocast``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module1.creation import from_numpy, tensor
from module1.tensor_functions import DtypeError
from module2.fast_ops import FastTensorBackend
from module6.half import (
    bfloat16,
    bfloat16_decode,
    bfloat16_encode,
    float16,
    half_dtype,
    round_to,
    to_float32,
    to_half,
)

EDGES = np.array(
    [0x00000000, 0x80000000, 0x3F800000, 0xBF800000,  # ±0, ±1
     0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001,  # ties to even, either side of one
     0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0xFF7FFFFF,  # the top: some round to ±inf
     0x7F800000, 0xFF800000,  # ±inf
     0x00000001, 0x00008000, 0x00018000, 0x007FFFFF, 0x80008001,  # subnormals
     0x00800000, 0x0000FFFF],
    dtype=np.uint32,
)  # fmt: skip
NANS = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x7FA12345],
                dtype=np.uint32)  # fmt: skip


def _encode(bits: np.ndarray) -> np.ndarray:
    out = np.full(len(bits), 0xDEAD, np.uint16)
    bfloat16_encode(np.ascontiguousarray(bits, np.uint32), out)
    return out


def _reference(bits: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return bits.view(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


@pytest.mark.task6_3
def test_encode_rounds_to_nearest_even_at_the_edges() -> None:
    got = _encode(EDGES)
    np.testing.assert_array_equal(got, _reference(EDGES))
    # Read by hand: 1 + 2**-8 is a tie between 1 and 1 + 2**-7: to 1 (even fraction).
    assert got[4] == 0x3F80 and got[5] == 0x3F82 and got[6] == 0x3F80 and got[7] == 0x3F81
    assert got[10] == 0x7F80 and got[11] == 0xFF80  # past the largest: infinite


@pytest.mark.task6_3
def test_encode_keeps_a_nan_a_nan_with_its_sign() -> None:
    got = _encode(NANS).view(ml_dtypes.bfloat16).astype(np.float32)
    assert np.isnan(got).all()
    np.testing.assert_array_equal(np.signbit(got), NANS >= 0x80000000)


@pytest.mark.task6_3
def test_encode_matches_ml_dtypes_on_a_million_random_patterns() -> None:
    bits = np.random.default_rng(0).integers(0, 2**32, 1_000_003, dtype=np.uint64)
    bits = bits.astype(np.uint32)
    bits = bits[~np.isnan(bits.view(np.float32))]
    np.testing.assert_array_equal(_encode(bits), _reference(bits))


@pytest.mark.task6_3
@given(st.floats(width=32, allow_nan=False))
def test_encode_matches_ml_dtypes_on_any_float32(x: float) -> None:
    bits = np.array([x], np.float32).view(np.uint32)
    assert _encode(bits)[0] == _reference(bits)[0]


@pytest.mark.task6_3
def test_decode_is_exact_for_all_65536_patterns_and_undoes_encode() -> None:
    every = np.arange(2**16, dtype=np.uint16)
    out = np.full(len(every), 0xDEADBEEF, np.uint32)
    bfloat16_decode(every, out)
    np.testing.assert_array_equal(
        out, every.view(ml_dtypes.bfloat16).astype(np.float32).view(np.uint32)
    )
    finite = ~np.isnan(out.view(np.float32))
    np.testing.assert_array_equal(_encode(out)[finite], every[finite])  # a bfloat16 is kept


@pytest.mark.task6_3
@pytest.mark.parametrize("shape", [(0,), (1,), (3, 5), (2, 3, 4)])
def test_to_half_and_back_round_like_ml_dtypes_in_any_shape(shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 100
    h = to_half(x, "bfloat16")
    assert h.dtype == bfloat16 and h.shape == x.shape
    np.testing.assert_array_equal(h.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))
    np.testing.assert_array_equal(to_float32(h), x.astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(round_to(x, bfloat16), to_float32(h))


def test_the_given_float16_codec_gives_numpys_bits() -> None:
    rng = np.random.default_rng(2)
    bits = np.concatenate([
        rng.integers(0, 2**32, 300_000, dtype=np.uint64).astype(np.uint32),
        # float16's range, where its subnormals, ties and overflow are
        rng.integers(0x33000000 - 2**22, 0x47800000 + 2**22, 300_000, dtype=np.uint32),
        np.array([0x38800000, 0x387FFFFF, 0x33800000, 0x337FFFFF, 0x33000000, 0x33000001,
                  0x477FEFFF, 0x477FF000, 0x7F800000, 0xFF800000, 0, 0x80000000], np.uint32),
    ])  # fmt: skip
    x = bits.view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16)
    got = to_half(x, float16)
    number = ~np.isnan(x)
    np.testing.assert_array_equal(got.view(np.uint16)[number], want.view(np.uint16)[number])
    assert np.isnan(got[~number].astype(np.float32)).all()
    every = np.arange(2**16, dtype=np.uint16).view(np.float16)
    np.testing.assert_array_equal(to_float32(every).view(np.uint32),
                                  every.astype(np.float32).view(np.uint32))  # fmt: skip
    assert round_to(np.array([1e-9, 70000.0], np.float32), float16).tolist() == [0.0, np.inf]


def test_half_dtype_names_what_it_refuses() -> None:
    assert half_dtype("bfloat16") == bfloat16 and half_dtype(np.float16) == float16
    with pytest.raises(TypeError, match="float16 or bfloat16, not 'float32'"):
        half_dtype("float32")


def test_a_half_tensor_holds_two_bytes_a_value_and_converts_back() -> None:
    """Given code: ``Tensor.to`` converts with NumPy's cast (ml_dtypes' for bfloat16)."""
    values = np.array([[1.0, 1.00390625], [3.14159, -2.5e-3]], np.float32)
    h = from_numpy(values, FastTensorBackend).to(bfloat16)
    assert h.dtype == bfloat16 and h._tensor._storage.nbytes == 8 and h.shape == (2, 2)
    back = h.float()
    assert back.dtype == np.float32
    want = values.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(back.to_numpy(), want)
    assert "dtype=bfloat16" in repr(h)


def test_a_half_tensor_outside_autocast_is_a_clear_error() -> None:
    x = tensor([1.0, 2.0], dtype="float32", backend=FastTensorBackend)
    h = x.to(float16)
    with pytest.raises(
        DtypeError, match=r"Add: input 0 is float16 and input 1 is float32; .*autocast"
    ):
        h + x
    with pytest.raises(
        DtypeError, match=r"Mul: the input is float16, a storage-only dtype; .*\.float\(\)"
    ):
        h * h
    with pytest.raises(DtypeError, match="Exp: the input is float16"):
        h.exp()
