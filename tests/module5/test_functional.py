"""Stage 5's operations (``module5/functional.py``): LayerNorm, GELU, the masked softmax,
attention, and narrow / split / cat.

Oracles: NumPy for values (float64 and float32), central differences
(``module1.grad_check``) for every backward in float64, and Hypothesis properties: a
softmax row sums to 1 and does not change when a constant is added to it; LayerNorm
does not change when a row is shifted or scaled; attention is causal (changing the
keys, values or queries after position ``t`` changes no output at or before ``t``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from module1.grad_check import grad_check
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module2.fast_ops import FastTensorBackend as FAST
from module5 import fused_route
from module5.functional import (
    MASKED,
    causal_mask,
    gelu,
    layer_norm,
    masked_softmax,
    scaled_dot_product_attention,
)

DTYPES = [np.float64, np.float32]
TOL = {np.float64: 1e-10, np.float32: 2e-5}


@pytest.fixture(autouse=True, scope="module")
def plain_route() -> object:
    """Tasks 5.1 and 5.2's own code, even once task 5.5's fused kernels would take these
    calls (they have their own tests: ``test_fused.py``)."""
    with fused_route.plain_route():
        yield


def t(values: np.ndarray, dtype: object = np.float64) -> Tensor:
    return from_numpy(np.asarray(values, dtype=dtype), FAST)


def np_layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    x = x.astype(np.float64)
    c = x - x.mean(-1, keepdims=True)
    return c / np.sqrt((c * c).mean(-1, keepdims=True) + eps) * w + b


def np_gelu(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def np_softmax(x: np.ndarray, keep: np.ndarray) -> np.ndarray:
    filled = np.where(keep, x, -np.inf)
    m = np.max(np.where(keep, x, -np.inf), -1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(keep, np.exp(filled - m), 0.0)
    s = e.sum(-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


# -- LayerNorm ---------------------------------------------------------------------------


@pytest.mark.task5_1
@pytest.mark.parametrize("dtype", DTYPES)
@given(shape=shapes, seed=st.integers(0, 2**16))
@settings(max_examples=30)
def test_layer_norm_matches_numpy(dtype: type, shape: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, w, b = rng.normal(size=shape), rng.normal(size=shape[-1]), rng.normal(size=shape[-1])
    got = layer_norm(t(x, dtype), t(w, dtype), t(b, dtype)).to_numpy()
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_allclose(
        got, np_layer_norm(x, w, b, 1e-5), rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10
    )


@pytest.mark.task5_1
def test_layer_norm_of_a_non_contiguous_input() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 3))
    view = t(x).permute(1, 0)  # (3, 5), strides (1, 3)
    assert not view.is_contiguous()
    w, b = rng.normal(size=5), rng.normal(size=5)
    np.testing.assert_allclose(
        layer_norm(view, t(w), t(b)).to_numpy(), np_layer_norm(x.T, w, b, 1e-5), rtol=1e-10
    )
    grad_check(lambda a, c, d: layer_norm(a, c, d), view, t(w), t(b))


@pytest.mark.task5_1
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_is_stable_for_a_row_with_a_large_mean(dtype: type) -> None:
    """``E[x^2] - E[x]^2`` would lose every digit here (in float32: the variance 1e-2
    against squares of 1e8); centring first keeps them."""
    rng = np.random.default_rng(2)
    x = 1e4 + rng.normal(scale=0.1, size=(3, 64))
    got = layer_norm(t(x, dtype), t(np.ones(64), dtype), t(np.zeros(64), dtype)).to_numpy()
    want = np_layer_norm(x.astype(dtype), np.ones(64), np.zeros(64), 1e-5)
    np.testing.assert_allclose(got, want, atol=1e-2 if dtype == np.float32 else 1e-9)
    assert got.std(-1).min() > 0.99  # unit rows (less the eps's share of a 1e-2 variance)


@pytest.mark.task5_1
@given(seed=st.integers(0, 2**16), shift=st.floats(-50, 50), scale=st.floats(0.5, 20))
@settings(max_examples=25)
def test_layer_norm_ignores_a_shift_and_a_scale_of_a_row(
    seed: int, shift: float, scale: float
) -> None:
    rng = np.random.default_rng(seed)
    x, w, b = rng.normal(size=(2, 7)), rng.normal(size=7), rng.normal(size=7)
    plain = layer_norm(t(x), t(w), t(b), eps=0.0).to_numpy()
    moved = layer_norm(t(x * scale + shift), t(w), t(b), eps=0.0).to_numpy()
    np.testing.assert_allclose(moved, plain, rtol=1e-8, atol=1e-8)


@pytest.mark.task5_1
@given(shape=shapes, seed=st.integers(0, 2**16))
@settings(max_examples=15)
def test_layer_norm_backward_matches_central_differences(shape: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    if shape[-1] == 1:  # one entry: the output is the bias alone
        shape = (*shape[:-1], 2)
    x, w, b = rng.normal(size=shape), rng.normal(size=shape[-1]), rng.normal(size=shape[-1])
    grad_check(lambda a, c, d: layer_norm(a, c, d), t(x), t(w), t(b))


@pytest.mark.task5_1
def test_layer_norm_names_the_shapes_it_refuses() -> None:
    with pytest.raises(ShapeError, match=r"\(2, 3\) must end in the size 4"):
        layer_norm(t(np.zeros((2, 3))), t(np.ones(4)), t(np.zeros(4)))
    with pytest.raises(ShapeError, match=r"bias \(3,\)"):
        layer_norm(t(np.zeros((2, 4))), t(np.ones(4)), t(np.zeros(3)))


# -- GELU --------------------------------------------------------------------------------


@pytest.mark.task5_1
@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_matches_numpy(dtype: type) -> None:
    x = np.concatenate([np.linspace(-8, 8, 101), [0.0, -30.0, 30.0]])
    got = gelu(t(x, dtype)).to_numpy()
    assert got.dtype == dtype
    np.testing.assert_allclose(got, np_gelu(x), rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    assert got[-3] == 0.0 and got[-2] == 0.0 and got[-1] == 30.0


@pytest.mark.task5_1
def test_gelu_backward_matches_central_differences() -> None:
    x = np.random.default_rng(3).normal(scale=2.0, size=(4, 9))
    grad_check(gelu, t(x))
    grad_check(gelu, t(x).permute(1, 0))


# -- the masked softmax ------------------------------------------------------------------


@pytest.mark.task5_2
@given(seed=st.integers(0, 2**16), rows=st.integers(1, 4), cols=st.integers(1, 6),
       shift=st.floats(-100, 100))  # fmt: skip
@settings(max_examples=30)
def test_softmax_rows_sum_to_one_and_ignore_a_constant(
    seed: int, rows: int, cols: int, shift: float
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=5.0, size=(rows, cols))
    keep = rng.random((rows, cols)) < 0.7
    keep[:, 0] = True
    p = masked_softmax(t(x), keep).to_numpy()
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(p, np_softmax(x, keep), rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(masked_softmax(t(x + shift), keep).to_numpy(), p, atol=1e-9)
    assert (p[~keep] == 0.0).all()


@pytest.mark.task5_2
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_row_with_every_entry_masked_is_zero_and_never_nan(dtype: type) -> None:
    """Row 1 keeps nothing: all 0, in the values and the gradient (small values here;
    large ones: the next test)."""
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [0.5, -0.5, 0.0]])
    keep = np.array([[True, False, True], [False, False, False], [True, True, False]])
    xt = from_numpy(x.astype(dtype), FAST, requires_grad=True)
    p = masked_softmax(xt, keep)
    values = p.to_numpy()
    assert (values[1] == 0.0).all(), f"a row that keeps nothing gave {values[1]}, want 0s"
    assert values[0, 1] == 0.0 and values[2, 2] == 0.0, f"masked entries not 0: {values}"
    np.testing.assert_allclose(values, np_softmax(x, keep), rtol=TOL[dtype])
    (p * t(np.arange(9.0).reshape(3, 3), dtype)).sum().backward()
    grad = xt.grad.to_numpy()
    assert not np.isnan(grad).any(), f"NaN in the gradient: {grad}"
    assert (grad[~keep] == 0.0).all(), f"masked entries got a gradient: {grad}"


@pytest.mark.task5_2
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("masked", [False, True], ids=["no mask", "mask"])
def test_large_scores_overflow_nowhere(dtype: type, masked: bool) -> None:
    """Scores of +-1000 (``exp(1000)`` overflows float64; float32 already at 89): the
    row's maximum is subtracted first, with a mask or without one."""
    x = np.array([[1000.0, 0.0, -1000.0], [-1000.0, 1000.0, 999.0], [100.0, 99.0, 98.0]])
    keep = np.array([[True, True, False], [True, True, True], [False, True, True]])
    keep = keep if masked else np.ones_like(keep)
    xt = from_numpy(x.astype(dtype), FAST, requires_grad=True)
    p = masked_softmax(xt, keep if masked else None)
    values = p.to_numpy()
    assert np.isfinite(values).all(), f"masked_softmax of {x.tolist()} gave {values.tolist()}"
    np.testing.assert_allclose(values, np_softmax(x, keep), rtol=TOL[dtype], atol=1e-30)
    (p * t(np.arange(9.0).reshape(3, 3), dtype)).sum().backward()
    assert np.isfinite(xt.grad.to_numpy()).all(), f"gradient {xt.grad.to_numpy()}"


@pytest.mark.task5_2
@pytest.mark.parametrize("dtype", DTYPES)
def test_what_a_masked_entry_holds_never_reaches_the_kept_ones(dtype: type) -> None:
    """NaN, +inf and -inf at masked positions (``NaN * 0`` is NaN: ``masked_fill``, not a
    multiplication by the mask): the kept entries are the softmax of the kept scores,
    the masked ones exactly 0, and the gradient finite."""
    x = np.array([[1.0, np.nan, 2.0, np.inf], [-np.inf, 0.5, np.nan, -1.0]])
    keep = np.isfinite(x)
    xt = from_numpy(x.astype(dtype), FAST, requires_grad=True)
    p = masked_softmax(xt, keep)
    values = p.to_numpy()
    want = np_softmax(np.where(keep, x, 0.0), keep)
    assert np.isfinite(values).all(), (
        f"masked_softmax of {x.tolist()} keeping {keep.tolist()} gave {values.tolist()}: "
        "NaN or inf at a masked position reached the kept entries (NaN * 0 is NaN)"
    )
    np.testing.assert_allclose(values, want, rtol=TOL[dtype])
    assert (values[~keep] == 0.0).all()
    (p * t(np.arange(8.0).reshape(2, 4), dtype)).sum().backward()
    grad = xt.grad.to_numpy()
    assert np.isfinite(grad).all() and (grad[~keep] == 0.0).all(), f"gradient {grad}"


def test_masked_fill_replaces_what_it_fills_and_passes_the_rest_back() -> None:
    from module5.functional import masked_fill

    x = from_numpy(np.array([[1.0, np.nan], [np.inf, 4.0]]), FAST, requires_grad=True)
    fill = np.array([False, True])  # broadcast over the rows
    y = masked_fill(x, fill, -7.0)
    np.testing.assert_array_equal(y.to_numpy(), [[1.0, -7.0], [np.inf, -7.0]])
    (y * t(np.array([[2.0, 3.0], [4.0, 5.0]]))).sum().backward()
    np.testing.assert_array_equal(x.grad.to_numpy(), [[2.0, 0.0], [4.0, 0.0]])
    with pytest.raises(ShapeError, match=r"mask of shape \(3,\) does not broadcast to \(2, 2\)"):
        masked_fill(x, np.ones(3, bool), 0.0)


@pytest.mark.task5_2
def test_masked_softmax_backward_matches_central_differences() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 5))
    keep = causal_mask(3, 5)
    grad_check(lambda a: masked_softmax(a, keep), t(x))
    grad_check(lambda a: masked_softmax(a), t(x))


def test_masked_scores_never_reach_the_exponential_as_infinity() -> None:
    assert np.isfinite(np.float32(MASKED))


# -- attention ---------------------------------------------------------------------------


def np_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, mask: np.ndarray | None = None
) -> np.ndarray:
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    t_, s_ = scores.shape[-2:]
    keep = np.tril(np.ones((t_, s_), bool), k=s_ - t_) if causal else np.ones((t_, s_), bool)
    if mask is not None:
        keep = keep & mask
    return np_softmax(scores, np.broadcast_to(keep, scores.shape)) @ v


@pytest.mark.task5_2
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_numpy_over_batch_and_head_dimensions(dtype: type, causal: bool) -> None:
    rng = np.random.default_rng(5)
    q, k, v = (
        rng.normal(size=(2, 3, 4, 8)),
        rng.normal(size=(2, 3, 6, 8)),
        rng.normal(size=(2, 3, 6, 5)),
    )
    got = scaled_dot_product_attention(
        t(q, dtype), t(k, dtype), t(v, dtype), causal=causal
    ).to_numpy()
    assert got.shape == (2, 3, 4, 5) and got.dtype == dtype
    np.testing.assert_allclose(
        got, np_attention(q, k, v, causal), rtol=TOL[dtype] * 20, atol=TOL[dtype] * 20
    )


@pytest.mark.task5_2
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_padding_mask_and_the_causal_mask_both_hold(dtype: type) -> None:
    """A user's mask (padding: sequence 0's last two keys, sequence 1's first) with
    ``causal=True``: an entry is kept only where both allow it (a padding mask must not
    re-open the future), and a query left with no key gives 0."""
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    pad = np.ones((2, 1, 5), bool)
    pad[0, 0, 3:] = False
    pad[1, 0, 0] = False  # sequence 1's first query keeps no key at all
    got = scaled_dot_product_attention(
        t(q, dtype), t(k, dtype), t(v, dtype), causal=True, mask=pad
    ).to_numpy()
    want = np_attention(q, k, v, True, pad)
    assert (want[1, 0] == 0.0).all()
    tol = TOL[dtype] * 20
    np.testing.assert_allclose(
        got, want, rtol=tol, atol=tol, err_msg="causal and mask: keep where BOTH allow"
    )


@pytest.mark.task5_2
@pytest.mark.parametrize("route", ["plain", "fused"])
@pytest.mark.parametrize("shapes", [((2, 0, 4), (2, 0, 4), (2, 0, 3)),
                                    ((0, 3, 4), (0, 3, 4), (0, 3, 3))],
                         ids=["no queries", "empty batch"])  # fmt: skip
def test_attention_of_nothing_is_empty(
    route: str, shapes: tuple[tuple[int, ...], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``T = 0`` and an empty batch give an empty result of the right shape (on the
    fused route too, where task 5.5 is done), and a backward that gives empty
    gradients."""
    if route == "fused":  # this file's fixture holds the plain route
        monkeypatch.setattr(fused_route, "_plain", 0)
    q, k, v = (from_numpy(np.ones(s), FAST, requires_grad=True) for s in shapes)
    for causal in (False, True):
        y = scaled_dot_product_attention(q, k, v, causal=causal)
        assert y.shape == (*shapes[0][:-1], shapes[2][-1])
        y.sum().backward()
        assert q.grad is not None and q.grad.shape == q.shape


@pytest.mark.task5_2
@given(seed=st.integers(0, 2**16), n=st.integers(2, 7), at=st.integers(0, 5))
@settings(max_examples=25)
def test_attention_is_causal(seed: int, n: int, at: int) -> None:
    """Changing the queries, keys and values after position ``at`` changes no output
    at or before it."""
    at = min(at, n - 2)
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(2, n, 4)) for _ in range(3))
    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    for a in (q2, k2, v2):
        a[:, at + 1 :] = rng.normal(scale=10.0, size=a[:, at + 1 :].shape)
    one = scaled_dot_product_attention(t(q), t(k), t(v), causal=True).to_numpy()
    two = scaled_dot_product_attention(t(q2), t(k2), t(v2), causal=True).to_numpy()
    np.testing.assert_array_equal(
        one[:, : at + 1], two[:, : at + 1],
        err_msg=f"changing positions after {at} changed an output at or before it",
    )  # fmt: skip
    assert not np.allclose(one[:, at + 1 :], two[:, at + 1 :]), (
        f"changing positions after {at} changed no output after it either: "
        "does the attention read the queries, keys and values at all?"
    )


@pytest.mark.task5_2
def test_attention_backward_matches_central_differences() -> None:
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    grad_check(lambda a, b, c: scaled_dot_product_attention(a, b, c, causal=True), t(q), t(k), t(v))
    grad_check(lambda a, b, c: scaled_dot_product_attention(a, b, c), t(q), t(k), t(v))


@pytest.mark.task5_2
def test_attention_dropout_drops_weights_and_rescales_the_rest() -> None:
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(1, 4, 3)), rng.normal(size=(1, 4, 3)), np.eye(4)[None]
    got = scaled_dot_product_attention(t(q), t(k), t(v), causal=True, dropout=0.5,
                                       rng=np.random.default_rng(0)).to_numpy()  # fmt: skip
    plain = np_attention(q, k, v, True)  # v = I: the output is the weights themselves
    kept = np.random.default_rng(0).random((1, 4, 4)) >= 0.5
    np.testing.assert_allclose(got, np.where(kept, plain * 2.0, 0.0), rtol=1e-12)
    with pytest.raises(ValueError, match="dropout needs an rng"):
        scaled_dot_product_attention(t(q), t(k), t(v), dropout=0.1)


@pytest.mark.task5_2
def test_attention_names_the_shapes_that_do_not_fit() -> None:
    q, k = t(np.zeros((2, 3, 4))), t(np.zeros((2, 5, 4)))
    with pytest.raises(ShapeError, match=r"q \(2, 3, 4\), k \(2, 5, 4\), v \(2, 4, 4\)"):
        scaled_dot_product_attention(q, k, t(np.zeros((2, 4, 4))))
    with pytest.raises(ShapeError, match=r"k \(2, 5, 3\)"):
        scaled_dot_product_attention(q, t(np.zeros((2, 5, 3))), t(np.zeros((2, 5, 3))))
    with pytest.raises(ShapeError, match="3 keys for 4 queries"):
        causal_mask(4, 3)


def test_the_causal_mask_of_a_cache_lets_each_query_see_its_own_past() -> None:
    np.testing.assert_array_equal(causal_mask(2, 4), [[1, 1, 1, 0], [1, 1, 1, 1]])
    np.testing.assert_array_equal(causal_mask(3), np.tril(np.ones((3, 3))))
