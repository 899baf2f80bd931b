"""Task 5.5 (optional): the fused kernels (``module5/fused.py``) and the route to them.

Oracles: NumPy in float64 for every kernel, and the plain route (tasks 5.1 and 5.2's
Functions, under ``fused_route.plain_route()``) for the values and gradients of
``layer_norm``, ``gelu`` and ``masked_softmax`` through the fused Functions; central
differences in float64 for those gradients. Sizes sit on both sides of every boundary
the reference has: a row of 1, sizes around the vectorized ``exp``'s 512-entry chunks
and GELU's ``CHUNK``, inputs just under, at and over ``SERIAL_MAX`` entries (the
parallel loop), row counts around LayerNorm's 64-row gradient blocks; both dtypes.
A student's kernels need no such boundaries, and pass the same tests.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from module1.grad_check import grad_check
from module1.tensor import Tensor, from_numpy
from module2.fast_ops import FastTensorBackend as FAST
from module5 import functional, fused_route
from module5.fused import (
    causal_attention,
    causal_attention_backward,
    gelu_backward,
    gelu_forward,
    layer_norm_rows,
    layer_norm_rows_backward,
    softmax_rows,
    softmax_rows_backward,
)

pytestmark = pytest.mark.task5_5

DTYPES = [np.float64, np.float32]
ULPS = {np.float64: 64 * np.finfo(np.float64).eps, np.float32: 64 * np.finfo(np.float32).eps}
"""A relative bound, well above rounding, far below a wrong term."""
SERIAL = 1 << 15  # the reference's SERIAL_MAX: inputs from here run in parallel
ROW_SIZES = [1, 2, 7, 64, 511, 512, 513]
# (rows, n) with rows * n just under, at and over 2^15, and rows around 64-row blocks
BIG = [(63, 520), (64, 512), (65, 512), (129, 256), (1, SERIAL + 1)]


def t(values: np.ndarray) -> Tensor:
    return from_numpy(values, FAST)


def np_softmax_rows(x: np.ndarray, period: int, shift: int) -> np.ndarray:
    rows, n = x.shape
    x = x.astype(np.float64)
    out = np.zeros_like(x)
    for r in range(rows):
        kept = min(n, r % period + shift + 1)
        e = np.exp(x[r, :kept] - x[r, :kept].max())
        out[r, :kept] = e / e.sum()
    return out


def close(
    got: np.ndarray, want: np.ndarray, dtype: type, scale: float = 1.0, what: str = ""
) -> None:
    assert got.dtype == dtype, f"{what}: dtype {got.dtype}, want {np.dtype(dtype).name}"
    np.testing.assert_allclose(got, want, rtol=ULPS[dtype], atol=ULPS[dtype] * scale, err_msg=what)


# -- softmax ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_softmax_rows_match_numpy_at_every_size_and_mask(dtype: type) -> None:
    rng = np.random.default_rng(0)
    shapes = [(3, n) for n in ROW_SIZES] + BIG
    for rows, n in shapes:
        x = rng.normal(scale=4.0, size=(rows, n)).astype(dtype)
        for period, shift in ((1, n - 1), (min(rows, n), n - min(rows, n)), (rows, 0)):
            out = np.full_like(x, np.nan)
            softmax_rows(x, out, period, shift)
            what = f"softmax_rows {np.dtype(dtype).name} {(rows, n)} period {period} shift {shift}"
            close(out, np_softmax_rows(x, period, shift), dtype, what=what)
            kept = np.minimum(n, np.arange(rows) % period + shift + 1)
            masked = np.arange(n)[None, :] >= kept[:, None]
            assert np.all(out[masked] == 0) and not np.signbit(out[masked]).any(), (
                f"{what}: a masked entry is not exactly +0"
            )


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_softmax_rows_do_not_overflow_and_keep_a_nan_to_its_row(dtype: type) -> None:
    x = np.array([[1000.0, 999.0, -1000.0], [0.0, np.nan, 1.0], [-800.0, -800.0, 5.0]], dtype)
    out = np.empty_like(x)
    softmax_rows(x, out, 1, 2)
    close(out[[0, 2]], np_softmax_rows(x[[0, 2]], 1, 2), dtype, what="large rows")
    assert np.isnan(out[1]).all(), f"a row holding a NaN gives NaN: got {out[1]}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_softmax_rows_backward_matches_numpy(dtype: type) -> None:
    rng = np.random.default_rng(1)
    for rows, n in [(3, n) for n in ROW_SIZES] + BIG:
        x = rng.normal(size=(rows, n)).astype(dtype)
        y = np.empty_like(x)
        softmax_rows(x, y, rows, max(0, n - rows))
        dy = rng.normal(size=(rows, n)).astype(dtype)
        dx = np.full_like(x, np.nan)
        softmax_rows_backward(y, dy, dx)
        y64 = y.astype(np.float64)
        want = y64 * (dy - (y64 * dy).sum(-1, keepdims=True))
        close(dx, want, dtype, scale=float(np.abs(dy).max()), what=f"softmax backward {(rows, n)}")
        assert np.all(dx[y == 0] == 0), "a masked entry's gradient is not 0"


# -- LayerNorm --------------------------------------------------------------------------


def np_layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> tuple:
    x = x.astype(np.float64)
    mean = x.mean(-1)
    var = ((x - mean[:, None]) ** 2).mean(-1)
    rstd = 1 / np.sqrt(var + eps)
    return (x - mean[:, None]) * rstd[:, None] * w + b, mean, rstd


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_layer_norm_rows_match_numpy_with_large_means(dtype: type) -> None:
    rng = np.random.default_rng(2)
    for rows, n in [(4, n) for n in ROW_SIZES if n > 1] + BIG:
        for mean in (0.0, 1e4):
            x = (mean + rng.normal(size=(rows, n))).astype(dtype)
            w, b = rng.normal(size=n).astype(dtype), rng.normal(size=n).astype(dtype)
            out, m, s = np.full_like(x, np.nan), np.empty(rows), np.empty(rows)
            layer_norm_rows(x, w, b, 1e-5, out, m, s)
            want, wm, ws = np_layer_norm(x, w, b, 1e-5)
            what = f"layer_norm_rows {np.dtype(dtype).name} {(rows, n)}, rows near {mean}"
            # float32 rows of mean 1e4 hold each value to 1e-3: that is the input's error
            lost = 1.0 if mean == 0 else float(np.spacing(np.float32(mean)) / np.finfo(dtype).eps)
            close(
                out, want, dtype, scale=10 * min(lost, 1e3) * np.abs(w).max(), what=f"{what}: out"
            )
            # The graded check's tolerance (tests/module5/checks.py: layer_norm_rows), no
            # stricter: a plain solution that shifts in float32 and sums in float64 meets
            # it and earns full marks there, so it must pass here too.
            hint = " (float64 statistics: in Numba, float() of a float32 stays float32)"
            np.testing.assert_allclose(m, wm, rtol=2e-5, atol=2e-5, err_msg=f"{what}: mean{hint}")
            np.testing.assert_allclose(s, ws, rtol=2e-5, atol=2e-5, err_msg=f"{what}: rstd{hint}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_layer_norm_rows_backward_matches_numpy(dtype: type) -> None:
    rng = np.random.default_rng(3)
    for rows, n in [(4, n) for n in ROW_SIZES if n > 1] + BIG:
        x = rng.normal(size=(rows, n)).astype(dtype)
        w, b = rng.normal(size=n).astype(dtype), rng.normal(size=n).astype(dtype)
        out, m, s = np.empty_like(x), np.empty(rows), np.empty(rows)
        layer_norm_rows(x, w, b, 1e-5, out, m, s)
        d = rng.normal(size=(rows, n)).astype(dtype)
        dx, dw, db = np.full_like(x, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        layer_norm_rows_backward(d, x, w, m, s, dx, dw, db)
        _, mean, rstd = np_layer_norm(x, w, b, 1e-5)
        xhat = (x - mean[:, None]) * rstd[:, None]
        g = d * w
        want = rstd[:, None] * (
            g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True)
        )
        what = f"layer_norm backward {np.dtype(dtype).name} {(rows, n)}"
        close(dx, want, dtype, scale=10 * float(np.abs(g).max() * rstd.max()), what=what)
        assert dw.dtype == db.dtype == np.float64, what
        np.testing.assert_allclose(
            dw, (d * xhat).sum(0), rtol=ULPS[dtype] * rows, atol=ULPS[dtype] * rows, err_msg=what
        )
        np.testing.assert_allclose(
            db,
            d.astype(np.float64).sum(0),
            rtol=ULPS[dtype] * rows,
            atol=ULPS[dtype] * rows,
            err_msg=what,
        )


RACE_RUNS = 8
"""How often the race tests run a kernel: a lost update shows in some runs, not all."""


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_layer_norm_backward_sums_over_rows_lose_nothing(dtype: type) -> None:
    """``dweight`` and ``dbias`` sum over every row. Rows in parallel that all add into
    the same ``n`` entries race: an update is lost now and then. Many rows and few
    columns (the most collisions), run several times: every run must give the sums."""
    rng = np.random.default_rng(5)
    rows, n = 1 << 17, 4
    x = rng.normal(size=(rows, n)).astype(dtype)
    w, b = rng.normal(size=n).astype(dtype), rng.normal(size=n).astype(dtype)
    out, m, s = np.empty_like(x), np.empty(rows), np.empty(rows)
    layer_norm_rows(x, w, b, 1e-5, out, m, s)
    d = rng.normal(size=(rows, n)).astype(dtype)
    _, mean, rstd = np_layer_norm(x, w, b, 1e-5)
    xhat = (x - mean[:, None]) * rstd[:, None]
    want_w, want_b = (d * xhat).sum(0), d.astype(np.float64).sum(0)
    bar = 4 * ULPS[dtype] * math.sqrt(rows) * 8  # rounding grows like sqrt(rows); one term ~1
    for run in range(RACE_RUNS):
        dx, dw, db = np.empty_like(x), np.zeros(n), np.zeros(n)
        layer_norm_rows_backward(d, x, w, m, s, dx, dw, db)
        for name, got, want in (("dweight", dw, want_w), ("dbias", db, want_b)):
            err = float(np.abs(got - want).max())
            assert err <= bar, (
                f"run {run + 1} of {RACE_RUNS}: {name} is off the sum over {rows} rows by "
                f"{err:.3g}: two threads adding into one entry lose updates (the chapter: "
                "'No two threads add into one entry')"
            )


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_attention_backward_sums_over_queries_lose_nothing(dtype: type) -> None:
    """``dk`` and ``dv`` sum over the queries: queries in parallel that add into the
    same key's row race. Two heads of 384 queries, run several times."""
    rng = np.random.default_rng(6)
    heads, t_, d = 2, 384, 8
    q, k, v, g = (rng.normal(size=(heads, t_, d)).astype(dtype) for _ in range(4))
    out, lse = np.empty_like(q), np.empty((heads, t_))
    scale = 1 / math.sqrt(d)
    causal_attention(q, k, v, out, lse, scale)
    _, _, p = np_attention(q, k, v)
    g64 = g.astype(np.float64)
    want_dv = np.swapaxes(p, -1, -2) @ g64
    dp = g64 @ np.swapaxes(v.astype(np.float64), -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * scale
    want_dk = np.swapaxes(ds, -1, -2) @ q.astype(np.float64)
    for run in range(RACE_RUNS):
        dq, dk, dv = (np.empty_like(a) for a in (q, k, v))
        causal_attention_backward(q, k, v, out, lse, g, dq, dk, dv, scale)
        for name, got, want in (("dk", dk, want_dk), ("dv", dv, want_dv)):
            close(got, want, dtype, scale=16.0 * math.sqrt(t_),
                  what=f"run {run + 1} of {RACE_RUNS}: {name} (a lost update from two "
                  "threads adding into one key's row?)")  # fmt: skip


# -- GELU -------------------------------------------------------------------------------

C = math.sqrt(2 / math.pi)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_gelu_kernels_match_numpy_across_chunks(dtype: type) -> None:
    rng = np.random.default_rng(4)
    for n in (1, 511, 512, 513, 1025, SERIAL - 1, SERIAL, SERIAL + 513):
        x = rng.normal(scale=4.0, size=n).astype(dtype)
        x[: min(n, 4)] = np.array([0.0, -30.0, 30.0, -3.0])[: min(n, 4)]  # tails, and 0
        x64 = x.astype(np.float64)
        th = np.tanh(C * (x64 + 0.044715 * x64**3))
        out = np.full_like(x, np.nan)
        gelu_forward(x, out)
        close(out, 0.5 * x64 * (1 + th), dtype, scale=4.0, what=f"gelu_forward {n}")
        d = rng.normal(size=n).astype(dtype)
        dx = np.full_like(x, np.nan)
        gelu_backward(x, d, dx)
        slope = 0.5 * (1 + th) + 0.5 * x64 * (1 - th**2) * C * (1 + 3 * 0.044715 * x64**2)
        close(dx, d * slope, dtype, scale=16.0, what=f"gelu_backward {n}")


def test_float32_gelu_backward_within_the_graded_tolerance_where_the_slope_cancels() -> None:
    """The graded check compares a submission's GELU with the reference's at ``rtol =
    atol = 1e-5``, inputs ``N(0, 4^2)``: where ``x`` is about -3 the slope is ``0.5 (1 +
    tanh) + ...`` with ``1 + tanh`` near 0.002, so a float32 ``tanh`` a few ulp off is a
    1e-4 error of the slope. The float32 kernels must stay within 3/4 of that tolerance
    of float64's GELU over 20 draws, as the check's inputs are drawn. Planted bug
    caught: the backward's slope in float32 from ``tanh32`` (1.04x here; 1.5x over 200
    draws)."""
    worst = 0.0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        x = rng.normal(scale=4.0, size=40_000).astype(np.float32)
        d = rng.normal(size=x.size).astype(np.float32)
        v = x.astype(np.float64)
        th = np.tanh(C * (v + 0.044715 * v**3))
        slope = 0.5 * (1 + th) + 0.5 * v * (1 - th**2) * C * (1 + 3 * 0.044715 * v**2)
        y, dx = np.empty_like(x), np.empty_like(x)
        gelu_forward(x, y)
        gelu_backward(x, d, dx)
        for got, want in ((y, 0.5 * v * (1 + th)), (dx, d * slope)):
            ratio = np.abs(got - want) / (1e-5 + 1e-5 * np.abs(want))
            worst = max(worst, float(ratio.max()))
    assert worst <= 0.75, f"float32 GELU is {worst:.2f}x the graded tolerance off float64's"


# -- causal attention -------------------------------------------------------------------


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple:
    """Causal attention in float64 with every weight kept: out, lse and the weights."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    t, s = q.shape[-2], k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(np.tri(t, s, s - t, dtype=bool), scores, -np.inf)
    top = scores.max(-1, keepdims=True)
    e = np.exp(scores - top)
    total = e.sum(-1, keepdims=True)
    p = e / total
    return p @ v, (top + np.log(total))[..., 0], p


# (heads, T, S, D, Dv): T around the 64-query block, keys past the queries (a KV
# cache), one query, head widths that are not a power of two or past one tile of the
# reference's micro-kernel (16 float64 or 32 float32 columns, 8 rows), and more keys
# than one 256- or 512-deep panel of it (S = 300, 520)
ATTENTION_SHAPES = [
    (3, 5, 5, 4, 4), (2, 31, 31, 8, 8), (2, 32, 32, 8, 3), (1, 33, 65, 16, 16),
    (2, 64, 64, 5, 7), (1, 65, 129, 8, 8), (3, 1, 7, 4, 4), (1, 40, 200, 32, 32),
    (1, 63, 63, 33, 17), (1, 20, 300, 8, 40), (1, 130, 300, 9, 9), (1, 3, 520, 8, 8),
]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_causal_attention_matches_numpy(dtype: type) -> None:
    rng = np.random.default_rng(9)
    for heads, t_, s_, d, dv in ATTENTION_SHAPES:
        q, k = rng.normal(size=(heads, t_, d)), rng.normal(size=(heads, s_, d))
        v = rng.normal(size=(heads, s_, dv))
        q, k, v = (a.astype(dtype) for a in (q, k, v))
        out, lse = np.full((heads, t_, dv), np.nan, dtype), np.full((heads, t_), np.nan)
        causal_attention(q, k, v, out, lse, 1 / math.sqrt(d))
        want, want_lse, _ = np_attention(q, k, v)
        what = f"causal_attention {np.dtype(dtype).name} heads {heads} T {t_} S {s_} D {d}"
        close(out, want, dtype, scale=4.0, what=what)
        np.testing.assert_allclose(
            lse, want_lse, rtol=ULPS[dtype], atol=ULPS[dtype] * 16, err_msg=what
        )


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_causal_attention_backward_matches_numpy(dtype: type) -> None:
    rng = np.random.default_rng(10)
    for heads, t_, s_, d, dv in ATTENTION_SHAPES:
        q, k = rng.normal(size=(heads, t_, d)), rng.normal(size=(heads, s_, d))
        v, g = rng.normal(size=(heads, s_, dv)), rng.normal(size=(heads, t_, dv))
        q, k, v, g = (a.astype(dtype) for a in (q, k, v, g))
        out, lse = np.empty((heads, t_, dv), dtype), np.empty((heads, t_))
        scale = 1 / math.sqrt(d)
        causal_attention(q, k, v, out, lse, scale)
        dq, dk, dv_ = (np.full_like(a, np.nan) for a in (q, k, v))
        causal_attention_backward(q, k, v, out, lse, g, dq, dk, dv_, scale)
        _, _, p = np_attention(q, k, v)
        g64 = g.astype(np.float64)
        want_dv = np.swapaxes(p, -1, -2) @ g64
        dp = g64 @ np.swapaxes(v.astype(np.float64), -1, -2)
        ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * scale
        want_dq, want_dk = ds @ k.astype(np.float64), np.swapaxes(ds, -1, -2) @ q.astype(np.float64)
        what = f"attention backward {np.dtype(dtype).name} heads {heads} T {t_} S {s_} D {d}"
        for name, got, want in (("dq", dq, want_dq), ("dk", dk, want_dk), ("dv", dv_, want_dv)):
            close(got, want, dtype, scale=16.0 * math.sqrt(s_), what=f"{what}: {name}")


# -- the route --------------------------------------------------------------------------


def both_routes(fn, *arrays: np.ndarray, seed: int = 0) -> list[list[np.ndarray]]:
    """``fn``'s value and every input's gradient of ``sum(fn(...) * g)``, by the fused
    route and under ``plain_route()``; asserts which Function made each."""
    g = np.random.default_rng(seed).normal(size=fn(*(t(a) for a in arrays)).shape)
    results = []
    for plain in (False, True):
        inputs = [t(a).requires_grad_() for a in arrays]
        if plain:
            with fused_route.plain_route():
                y = fn(*inputs)
        else:
            y = fn(*inputs)
        made = y.history.last_fn.__name__ if y.history else ""
        assert plain or made.startswith("Fused"), f"the fast route was not taken: {made}"
        (y * t(g.astype(arrays[0].dtype))).sum().backward()
        results.append([y.to_numpy()] + [i.grad.to_numpy() for i in inputs])
    return results


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_the_fused_route_matches_the_plain_one(dtype: type) -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 3, 5, 9)).astype(dtype)
    view = np.swapaxes(rng.normal(size=(9, 5)).astype(dtype), 0, 1)  # non-contiguous
    w, b = rng.normal(size=9).astype(dtype), rng.normal(size=9).astype(dtype)
    keep = functional.causal_mask(5, 9)
    cases = {
        "layer_norm": (lambda a, c, d: functional.layer_norm(a, c, d), (x, w, b)),
        "layer_norm of a view": (lambda a, c, d: functional.layer_norm(a, c, d), (view, w, b)),
        "gelu": (functional.gelu, (x,)),
        "softmax": (lambda a: functional.masked_softmax(a), (x,)),
        "causal softmax": (lambda a: functional.masked_softmax(a, keep), (x,)),
        "causal attention": (
            lambda a, c, d: functional.scaled_dot_product_attention(a, c, d, causal=True),
            (x[..., :4], x[..., 1:5], x),  # q, k of 4 channels, v of 9; 5 queries and keys
        ),
        "attention over a cache": (
            lambda a, c, d: functional.scaled_dot_product_attention(a, c, d, causal=True),
            (x[:, :, :2, :4], x[..., :4], x),  # 2 queries over 5 keys
        ),
    }
    for name, (fn, arrays) in cases.items():
        fast, plain = both_routes(fn, *arrays)
        for i, (p, q) in enumerate(zip(fast, plain, strict=True)):
            np.testing.assert_allclose(p, q, rtol=ULPS[dtype] * 16, atol=ULPS[dtype] * 16,
                                       err_msg=f"{name}: {'value' if i == 0 else i}")  # fmt: skip


def fused_only(fn, made: list[str]):
    """``fn``, noting in ``made`` which Function made each result that has a history
    (the central differences run without one)."""

    def call(*args: Tensor) -> Tensor:
        y = fn(*args)
        if y.history is not None:
            made.append(y.history.last_fn.__name__)
        return y

    return call


def test_fused_gradients_match_central_differences() -> None:
    rng = np.random.default_rng(6)
    x, w, b = rng.normal(size=(3, 6)), rng.normal(size=6), rng.normal(size=6)
    keep = functional.causal_mask(3, 6)
    made: list[str] = []
    grad_check(fused_only(lambda a, c, d: functional.layer_norm(a, c, d), made), t(x), t(w), t(b))
    grad_check(fused_only(functional.gelu, made), t(x * 3))
    grad_check(fused_only(lambda a: functional.masked_softmax(a, keep), made), t(x))
    grad_check(fused_only(lambda a: functional.masked_softmax(a), made), t(x))
    qkv = rng.normal(size=(3, 2, 4, 3))

    def attend(a: Tensor, c: Tensor, d: Tensor) -> Tensor:
        return functional.scaled_dot_product_attention(a, c, d, causal=True)

    grad_check(fused_only(attend, made), t(qkv[0]), t(qkv[1]), t(qkv[2]))
    grad_check(fused_only(attend, made), t(qkv[0][:, 1:]), t(qkv[1]), t(qkv[2]))
    assert made == ["FusedLayerNorm", "FusedGELU", "FusedSoftmax", "FusedSoftmax",
                    "FusedAttention", "FusedAttention"], made  # fmt: skip
