"""float32 on the fast backend: every kind of kernel (map, zip, reduce; the batched
matmul of task 2.2 and the packed one of task 2.3) runs on float32 storage, keeps the
dtype and agrees with float64 to float32 precision; gradients too.

Numba compiles a float32 version of each kernel the first time one runs on float32
storage (and caches it on disk); float64 runs never compile it. The oracle is the same
computation in float64 (checked against NumPy by the other tests).
"""

from __future__ import annotations

import numpy as np
import pytest

from module1.tensor import from_numpy
from module2.fast_matmul import tensor_matrix_multiply_packed
from module2.fast_ops import FastTensorBackend
from tests.module1.test_tensor_dtype import (
    BINARY,
    UNARY,
    agree_in_float32,
    gradients_agree_in_float32,
)
from tests.strict import exact_tensor


@pytest.mark.task2_1
def test_maps_zips_and_reductions_run_in_float32() -> None:
    for name, fn in UNARY.items():
        agree_in_float32(name, fn, [(3, 4)], FastTensorBackend)
    for name, fn in BINARY.items():
        if name != "matmul":
            agree_in_float32(name, fn, [(3, 4), (3, 4)], FastTensorBackend)
    big = [(9000, 3)]  # long contiguous folds: the backend's split reductions
    # float32 sums of 9000 terms of up to 3 in size: errors of ~1e-4 are float32's own
    agree_in_float32("sum of a long column", lambda x: x.sum(0), big, FastTensorBackend, 2e-3)
    agree_in_float32("exp, large", lambda x: (x * 0.5).exp(), big, FastTensorBackend)


@pytest.mark.task2_2
def test_batched_matmul_runs_in_float32() -> None:
    agree_in_float32("matmul", lambda x, y: x @ y, [(2, 5, 7), (7, 3)], FastTensorBackend)
    agree_in_float32(
        "matmul of a transposed view", lambda x, y: x @ y.permute(1, 0),
        [(6, 4), (5, 4)], FastTensorBackend,
    )  # fmt: skip


@pytest.mark.task2_3
def test_gemm_runs_in_float32() -> None:
    # Through the packed driver itself: the backend would fall back to task 2.2's kernel
    # while gemm is a stub.
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (2, 67, 75)).astype(np.float32)
    b = rng.uniform(-1, 1, (75, 61)).astype(np.float32)
    x, y = from_numpy(a, FastTensorBackend), from_numpy(b, FastTensorBackend)
    out = x.zeros((2, 67, 61))
    tensor_matrix_multiply_packed(*out.tuple_arrays(), *x.tuple_arrays(), *y.tuple_arrays())
    got = exact_tensor(out, "packed matmul of float32", dtype=np.float32)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-5)


@pytest.mark.task2_1
@pytest.mark.task2_2
def test_gradients_in_float32_on_the_fast_backend() -> None:
    gradients_agree_in_float32(FastTensorBackend)


@pytest.mark.task2_4
def test_the_classifier_trains_in_float32(tmp_path) -> None:
    from module0.datasets import load_dataset
    from project.train import Config, TensorTrainer, make_optimizer, parse_args

    config = parse_args(["--backend", "fast", "--dtype", "float32", "--out", str(tmp_path)])
    assert config.dtype == "float32"
    trainer = TensorTrainer(config, load_dataset("xor", 50, 0), FastTensorBackend)
    optimizer = make_optimizer(config, trainer.model)
    losses = [trainer.epoch(optimizer)[0] for _ in range(40)]
    assert losses[-1] < 0.7 * losses[0], losses
    for name, p in trainer.model.named_parameters():
        exact_tensor(p.value, name, dtype=np.float32)
    with pytest.raises(SystemExit):
        parse_args(["--backend", "scalar", "--dtype", "float32"])
    assert Config().dtype == "float64"


@pytest.mark.task2_1
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_large_exp_map_is_within_an_ulp_with_every_special_value(dtype: type) -> None:
    # Large enough for the parallel path; the specials sit among ordinary values.
    rng = np.random.default_rng(12)
    specials = [0.0, -0.0, 1e-300, -1e-300, 88.0, 88.8, -87.5, -103.9, 708.9, 709.78, 709.8,
                -708.1, -745.1, -746.0, 1e308, -1e308, np.inf, -np.inf, np.nan]  # fmt: skip
    values = np.concatenate([rng.uniform(-700, 700, 60_000), rng.uniform(-8, 8, 60_000)])
    values[rng.choice(len(values), len(specials), replace=False)] = specials
    with np.errstate(over="ignore"):  # 1e308 is inf in float32
        x = values.astype(dtype)
    got = exact_tensor(FastTensorBackend.exp_map(from_numpy(x, FastTensorBackend)), "exp",
                       dtype=dtype)  # fmt: skip
    with np.errstate(over="ignore", under="ignore"):
        want = np.exp(x.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2.5 * np.finfo(dtype).eps,
                               atol=np.finfo(dtype).smallest_subnormal * 4)  # fmt: skip


TRANSCENDENTAL = {  # name: (ordinary values, specials, relative tolerance in eps)
    "log": ((1e-300, 1e300), [0.0, -0.0, -1.0, -np.inf, 1e-310, 5e-324, 1.0, 2.0, 0.5,
                              1 - 2**-52, 1 + 2**-52, 1e38, 1e-38, 1e-45, 1.7e308,
                              np.inf, np.nan], 2.5),
    "sigmoid": ((-40.0, 40.0), [0.0, -0.0, 1e-300, -1e-300, 87.0, -87.0, 100.0, -100.0,
                                -745.0, -750.0, 710.0, 1e308, -1e308, np.inf, -np.inf,
                                np.nan], 3.0),
    "tanh": ((-20.0, 20.0), [0.0, -0.0, 1e-300, -1e-300, 1e-8, -1e-8, 0.17, 0.35, 0.55,
                             9.0, 19.0, 43.0, 44.0, -44.0, 354.0, 355.0, -400.0, 1e308,
                             np.inf, -np.inf, np.nan], 4.0),
}  # fmt: skip


@pytest.mark.task2_1
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", list(TRANSCENDENTAL))
def test_large_log_sigmoid_and_tanh_maps_match_stage_0(name: str, dtype: type) -> None:
    """Contiguous and transposed, with every special value among ordinary ones: within
    a few float ulps of stage 0's scalar function (computed in float64 and rounded),
    infinities, nans and signed zeros exactly."""
    from module0 import operators

    (low, high), specials, ulps = TRANSCENDENTAL[name]
    rng = np.random.default_rng(21)
    if name == "log":  # spread over the exponents as well as over [0.5, 2]
        values = np.concatenate([np.exp(rng.uniform(np.log(low), np.log(high), 60_000)),
                                 rng.uniform(0.5, 2.0, 60_000)])  # fmt: skip
    else:
        values = np.concatenate([rng.uniform(low, high, 60_000), rng.uniform(-1, 1, 60_000)])
    values[rng.choice(len(values), len(specials), replace=False)] = specials
    with np.errstate(over="ignore", under="ignore"):  # out of float32's range: inf or 0
        x = values.astype(dtype)
        fn = getattr(operators, name)
        want = np.array([fn(float(v)) for v in x]).astype(dtype)
    transposed = from_numpy(x.reshape(300, 400).T.copy(), FastTensorBackend).permute(1, 0)
    for layout, tensor in (("contiguous", from_numpy(x, FastTensorBackend)),
                           ("transposed", transposed)):  # fmt: skip
        result = getattr(FastTensorBackend, f"{name}_map")(tensor)
        got = exact_tensor(result, f"{name} of a {layout} tensor", dtype=dtype).reshape(-1)
        what = f"{name} map of a {layout} {np.dtype(dtype).name} tensor"
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), what)
        np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)], what)
        zeros = want == 0.0
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]), what)
        finite = np.isfinite(want)
        tiny = np.finfo(dtype).smallest_subnormal * 4
        np.testing.assert_allclose(got[finite], want[finite], ulps * np.finfo(dtype).eps, tiny,
                                   err_msg=what)  # fmt: skip


EDGE_SIZES = [16_383, 16_384, 16_385, 24_577, 32_767, 32_768, 32_769, 40_961]
"""Sizes on both sides of the reference's cut-offs (16,384 entries: log, sigmoid and
tanh go to their vectorised loops; 32,768: the map runs in parallel) and one past a
multiple of its blocks of 8,192, so the last block holds one entry."""
ALONE = {"exp": [709.5, 88.5, -708.5], "log": [1e-310, 1e-40, np.inf],
         "sigmoid": [-708.5, -87.5, np.nan], "tanh": [np.nan, 354.5, 43.7]}  # fmt: skip
"""Values outside the fast ranges of the reference's loops ([-708, 709] and [-87, 88]
for exp, positive normal numbers for log...), one at a time."""


@pytest.mark.task2_1
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", list(ALONE))
def test_a_large_map_with_one_special_value_at_its_last_entry(name: str, dtype: type) -> None:
    """A contiguous map of ordinary values with one special value alone at the last
    entry (a block of its own past the last full block), and at the first: within a few
    ulps of stage 0's scalar function (as above), at every size of :data:`EDGE_SIZES`.
    Planted bug caught: the map kernel's aligned path looping over ``size // BLOCK``
    parallel blocks, which left the last, partial block unwritten."""
    from module0 import operators

    fn = getattr(operators, name)
    low, high = (0.25, 8.0) if name == "log" else (-20.0, 20.0)
    base = np.random.default_rng(8).uniform(low, high, 1000).astype(dtype)
    base_want = np.array([fn(float(v)) for v in base]).astype(dtype)
    ulps = {"exp": 2.5, "log": 2.5, "sigmoid": 3.0, "tanh": 4.0}[name]
    for n in EDGE_SIZES:
        for value in ALONE[name]:
            with np.errstate(over="ignore"):
                special = dtype(value)
            with np.errstate(over="ignore", under="ignore"):
                special_want = dtype(fn(float(special)))
            for position in (n - 1, 0):
                x, want = np.resize(base, n), np.resize(base_want, n)
                x[position], want[position] = special, special_want
                result = getattr(FastTensorBackend, f"{name}_map")(from_numpy(x, FastTensorBackend))
                got = exact_tensor(result, f"{name} map", dtype=dtype)
                what = f"{name} of {n} {np.dtype(dtype).name} entries, {special!r} at {position}"
                np.testing.assert_array_equal(np.isnan(got), np.isnan(want), what)
                finite = np.isfinite(want)
                np.testing.assert_array_equal(got[~finite], want[~finite], what)
                tiny = np.finfo(dtype).smallest_subnormal * 4
                np.testing.assert_allclose(got[finite], want[finite], ulps * np.finfo(dtype).eps,
                                           tiny, err_msg=what)  # fmt: skip
