"""Task 2.3: the packed, register-tiled matrix multiply (``module2/fast_matmul.py``).

NumPy's ``@`` is the oracle. Sizes are drawn across the register-block edges (``MR``,
``NR``) and the cache-block edges (``KC``, ``NC``), with transposed and broadcast
operands; the kernel's outputs are read back with ``exact_tensor`` (``tests/strict.py``)
before comparing.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module1.tensor import Tensor, from_numpy
from module2.fast_matmul import KC, MR, NC, NR, gemm, micro_kernel, tensor_matrix_multiply_packed
from module2.fast_ops import FastTensorBackend
from tests.strict import exact_tensor

pytestmark = pytest.mark.task2_3


def fast(array: np.ndarray) -> Tensor:
    return from_numpy(array, FastTensorBackend)


def stored_transposed(array: np.ndarray) -> Tensor:
    """A tensor with ``array``'s values whose last two dimensions are a transposed view."""
    return fast(np.ascontiguousarray(np.swapaxes(array, -1, -2))).transpose()


def packed_matmul(a: Tensor, b: Tensor, out_shape: tuple[int, ...]) -> np.ndarray:
    out = a.zeros(out_shape).fill_(np.nan)  # every entry must be written
    tensor_matrix_multiply_packed(*out.tuple_arrays(), *a.tuple_arrays(), *b.tuple_arrays())
    return exact_tensor(out)


sizes = st.integers(1, 2 * MR * NR + 3)


@given(sizes, sizes, sizes, st.booleans(), st.booleans(), st.integers(0, 2**16))
def test_packed_matmul_matches_numpy_across_tile_edges(
    n: int, m: int, p: int, a_transposed: bool, b_transposed: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(n, m)), rng.normal(size=(m, p))
    ta = stored_transposed(a) if a_transposed else fast(a)
    tb = stored_transposed(b) if b_transposed else fast(b)
    np.testing.assert_allclose(packed_matmul(ta, tb, (n, p)), a @ b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((2, 1, 9, 17), (3, 17, 18)),
        ((5, 3), (4, 1, 3, 33)),
        ((MR + 5, KC + 44), (KC + 44, NC + 5)),  # crosses an NC and a KC block edge
        ((1, 1), (1, 1)),
    ],
)
def test_packed_matmul_batches_and_blocks(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=a_shape), rng.normal(size=b_shape)
    expected = a @ b
    got = packed_matmul(fast(a), stored_transposed(b), expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_gemm_accumulates_into_a_strided_slice() -> None:
    rng = np.random.default_rng(3)
    m, n, k = 11, 19, 23
    a, b = rng.normal(size=(m, k)), rng.normal(size=(k, n))
    out = np.full((n + 2, m + 3), 0.5)  # write the product transposed into a corner
    flat = out.reshape(-1)
    a_t = np.ascontiguousarray(a.T).reshape(-1)  # a stored column-major
    gemm(flat, 2 * (m + 3) + 1, 1, m + 3, a_t, 0, 1, m, b.reshape(-1), 0, n, 1, m, n, k)
    expected = np.full((n + 2, m + 3), 0.5)
    expected[2:, 1 : m + 1] += (a @ b).T
    np.testing.assert_allclose(flat.reshape(out.shape), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("mr", "nr"), [(MR, NR), (3, NR), (MR, 2), (1, 1)])
def test_micro_kernel_adds_a_block_of_dot_products(mr: int, nr: int) -> None:
    rng = np.random.default_rng(mr * 100 + nr)
    kc = 13
    a_pack = rng.normal(size=(MR + 5, kc + 2))  # rows 5..5+MR, first kc columns
    bt_pack = rng.normal(size=(NR + 3, kc + 2))  # rows 3..3+NR: columns of b
    out = np.full((MR + 2) * (NR + 2), 1.0)
    micro_kernel(a_pack, 5, bt_pack, 3, kc, out, NR + 3, NR + 2, 1, mr, nr)
    expected = np.full((MR + 2, NR + 2), 1.0)
    product = a_pack[5 : 5 + MR, :kc] @ bt_pack[3 : 3 + NR, :kc].T
    expected[1 : 1 + mr, 1 : 1 + nr] += product[:mr, :nr]
    np.testing.assert_allclose(out.reshape(MR + 2, NR + 2), expected, rtol=1e-10)


def test_fast_backend_uses_it_for_large_products() -> None:
    rng = np.random.default_rng(11)
    a = fast(rng.normal(size=(96, 80)))
    b = fast(rng.normal(size=(80, 112)))
    a.requires_grad_()
    b.requires_grad_()
    out = a @ b
    np.testing.assert_allclose(exact_tensor(out), a.to_numpy() @ b.to_numpy(), rtol=1e-10)
    w = rng.normal(size=(96, 112))
    (out * fast(w)).sum().backward()
    np.testing.assert_allclose(exact_tensor(a.grad), w @ b.to_numpy().T, rtol=1e-10)
    np.testing.assert_allclose(exact_tensor(b.grad), a.to_numpy().T @ w, rtol=1e-10)
