"""Task 0.1: the scalar float operators in ``module0/operators.py``.

Expected values come from literals, :mod:`math` and NumPy, never from the operators
themselves. Derivatives are checked against central differences written out here.
Every result goes through ``exact_float``/``exact_bool`` (``tests/strict.py``) before it
is compared, so only a real ``float`` (or ``bool``) can pass.
"""

from __future__ import annotations

import builtins
import math
import sys
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module0 import operators
from tests.strict import exact_bool, exact_float

pytestmark = pytest.mark.task0_1

INF = math.inf
NAN = math.nan
BIG = sys.float_info.max

finite = st.floats(allow_nan=False, allow_infinity=False)
moderate = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)
nonzero_moderate = st.floats(min_value=1e-100, max_value=1e100).flatmap(
    lambda a: st.sampled_from([a, -a])
)


def central(f: Callable[[float], float], x: float, h: float) -> float:
    """Central-difference estimate of ``f'(x)`` with step ``h``."""
    return (f(x + h) - f(x - h)) / (2.0 * h)


def stable_sigmoid_oracle(x: float) -> float:
    """NumPy reference: ``sigmoid(x) = exp(-log(1 + exp(-x)))``, overflow-free."""
    return float(np.exp(-np.logaddexp(0.0, -x)))


def is_negative_zero(x: float) -> bool:
    return x == 0.0 and math.copysign(1.0, x) < 0.0


# -- mul, id, add, neg ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [(2.0, 3.0, 6.0), (-1.5, 4.0, -6.0), (0.0, 7.0, 0.0), (-2.0, -2.5, 5.0), (1e200, 1e200, INF)],
)
def test_mul_values(x: float, y: float, expected: float) -> None:
    assert exact_float(operators.mul(x, y)) == expected


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [(2.0, 3.0, 5.0), (-1.5, 4.0, 2.5), (0.0, 0.0, 0.0), (0.1, 0.2, 0.1 + 0.2), (BIG, BIG, INF)],
)
def test_add_values(x: float, y: float, expected: float) -> None:
    assert exact_float(operators.add(x, y)) == expected


@pytest.mark.parametrize("x", [0.0, 1.0, -3.25, 1e-300, -BIG, INF])
def test_id_values(x: float) -> None:
    result = exact_float(operators.id(x))
    assert result == x
    assert math.copysign(1.0, result) == math.copysign(1.0, x)


def test_id_keeps_nan() -> None:
    assert math.isnan(exact_float(operators.id(NAN)))


@pytest.mark.parametrize(
    ("x", "expected"), [(1.0, -1.0), (-2.5, 2.5), (1e300, -1e300), (INF, -INF), (-INF, INF)]
)
def test_neg_values(x: float, expected: float) -> None:
    assert exact_float(operators.neg(x)) == expected


def test_neg_of_zero_is_negative_zero() -> None:
    assert is_negative_zero(exact_float(operators.neg(0.0)))
    assert exact_float(operators.neg(-0.0)) == 0.0
    assert not is_negative_zero(exact_float(operators.neg(-0.0)))


@given(finite, finite)
def test_add_and_mul_match_python_and_commute(x: float, y: float) -> None:
    assert exact_float(operators.add(x, y)) == x + y
    assert exact_float(operators.add(x, y)) == exact_float(operators.add(y, x))
    assert exact_float(operators.mul(x, y)) == x * y
    assert exact_float(operators.mul(x, y)) == exact_float(operators.mul(y, x))


@given(moderate, moderate, moderate)
def test_mul_distributes_over_add(x: float, y: float, z: float) -> None:
    lhs = exact_float(operators.mul(z, operators.add(x, y)))
    rhs = exact_float(operators.add(operators.mul(z, x), operators.mul(z, y)))
    assert lhs == pytest.approx(z * (x + y), rel=1e-12, abs=1e-12)
    scale = abs(z * x) + abs(z * y)
    assert math.isclose(lhs, rhs, rel_tol=1e-12, abs_tol=1e-12 * scale + 1e-300)


@given(finite)
def test_neg_is_an_involution_and_id_is_identity(x: float) -> None:
    assert exact_float(operators.neg(x)) == -x
    assert exact_float(operators.neg(operators.neg(x))) == x
    assert exact_float(operators.id(x)) == x


# -- lt, eq, max, is_close --------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [(1.0, 2.0, 1.0), (2.0, 1.0, 0.0), (3.0, 3.0, 0.0), (-INF, -BIG, 1.0), (-0.0, 0.0, 0.0)],
)
def test_lt_values(x: float, y: float, expected: float) -> None:
    result = exact_float(operators.lt(x, y))
    assert result == expected
    assert isinstance(result, float)


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [(1.0, 1.0, 1.0), (1.0, 2.0, 0.0), (0.0, -0.0, 1.0), (INF, INF, 1.0), (NAN, NAN, 0.0)],
)
def test_eq_values(x: float, y: float, expected: float) -> None:
    result = exact_float(operators.eq(x, y))
    assert result == expected
    assert isinstance(result, float)


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [(1.0, 2.0, 2.0), (5.0, -3.0, 5.0), (-1.0, -1.0, -1.0), (-INF, -BIG, -BIG), (INF, 0.0, INF)],
)
def test_max_values(x: float, y: float, expected: float) -> None:
    assert exact_float(operators.max(x, y)) == expected


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        (1.0, 1.0, True),
        (1.0, 1.005, True),
        (1.0, 0.995, True),
        (1.0, 1.02, False),
        (0.0, 0.0099, True),
        (0.0, 0.011, False),
        (-5.0, 5.0, False),
    ],
)
def test_is_close_values(x: float, y: float, expected: bool) -> None:
    assert exact_bool(operators.is_close(x, y)) is expected


@given(finite, finite)
def test_lt_eq_partition_finite_pairs(x: float, y: float) -> None:
    """Exactly one of ``x < y``, ``y < x``, ``x == y`` holds."""
    less = exact_float(operators.lt(x, y))
    greater = exact_float(operators.lt(y, x))
    equal = exact_float(operators.eq(x, y))
    total = less + greater + equal
    assert total == 1.0
    assert exact_float(operators.lt(x, y)) == (1.0 if x < y else 0.0)
    assert exact_float(operators.eq(x, y)) == (1.0 if x == y else 0.0)


@given(finite, finite)
def test_max_matches_builtin(x: float, y: float) -> None:
    result = exact_float(operators.max(x, y))
    assert result == builtins.max(x, y)
    assert result >= x
    assert result >= y


@given(st.floats(min_value=-1e10, max_value=1e10), st.floats(min_value=0.02, max_value=1e6))
def test_is_close_property(x: float, gap: float) -> None:
    assert exact_bool(operators.is_close(x, x)) is True
    assert exact_bool(operators.is_close(x, x + 0.001)) is True
    assert exact_bool(operators.is_close(x, x + gap)) is False
    assert exact_bool(operators.is_close(x + gap, x)) is False


# -- sigmoid ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (0.0, 0.5),
        (1.0, 1.0 / (1.0 + math.exp(-1.0))),
        (-1.0, math.exp(-1.0) / (1.0 + math.exp(-1.0))),
        (2.0, 0.8807970779778823),
        (-3.0, 0.04742587317756678),
        (10.0, 0.9999546021312976),
    ],
)
def test_sigmoid_values(x: float, expected: float) -> None:
    assert exact_float(operators.sigmoid(x)) == pytest.approx(expected, rel=1e-12)


def test_sigmoid_large_positive_is_one() -> None:
    assert exact_float(operators.sigmoid(800.0)) == 1.0
    assert exact_float(operators.sigmoid(BIG)) == 1.0
    assert exact_float(operators.sigmoid(40.0)) == pytest.approx(1.0, abs=1e-15)


def test_sigmoid_large_negative_is_tiny_and_nonnegative() -> None:
    for x in (-800.0, -1e5, -BIG):
        value = exact_float(operators.sigmoid(x))
        assert 0.0 <= value < 1e-300
    # Still representable: sigmoid(-700) ~ exp(-700) ~ 9.86e-305, not rounded to 0.
    assert exact_float(operators.sigmoid(-700.0)) == pytest.approx(math.exp(-700.0), rel=1e-12)
    assert exact_float(operators.sigmoid(-700.0)) > 0.0


@given(finite)
def test_sigmoid_in_unit_interval(x: float) -> None:
    value = exact_float(operators.sigmoid(x))
    assert 0.0 <= value <= 1.0


@given(st.floats(min_value=-700.0, max_value=700.0))
def test_sigmoid_matches_numpy(x: float) -> None:
    expected = stable_sigmoid_oracle(x)
    assert exact_float(operators.sigmoid(x)) == pytest.approx(expected, rel=1e-12, abs=1e-300)


@given(st.floats(min_value=-50.0, max_value=50.0))
def test_sigmoid_symmetry(x: float) -> None:
    other_side = 1.0 - exact_float(operators.sigmoid(x))
    assert exact_float(operators.sigmoid(-x)) == pytest.approx(other_side, abs=1e-12)


@given(st.floats(min_value=-20.0, max_value=20.0), st.floats(min_value=1e-3, max_value=10.0))
def test_sigmoid_strictly_increasing(x: float, step: float) -> None:
    assert exact_float(operators.sigmoid(x)) < exact_float(operators.sigmoid(x + step))


# -- relu -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "expected"),
    [(3.5, 3.5), (-2.0, 0.0), (0.0, 0.0), (1e-300, 1e-300), (-INF, 0.0), (INF, INF)],
)
def test_relu_values(x: float, expected: float) -> None:
    assert exact_float(operators.relu(x)) == expected


@given(finite)
def test_relu_nonnegative_idempotent(x: float) -> None:
    value = exact_float(operators.relu(x))
    assert value >= 0.0
    assert value == builtins.max(x, 0.0)
    assert exact_float(operators.relu(value)) == value


# -- log and exp ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "expected"),
    [(1.0, 0.0), (math.e, 1.0), (10.0, math.log(10.0)), (0.5, -math.log(2.0)), (INF, INF)],
)
def test_log_values(x: float, expected: float) -> None:
    assert exact_float(operators.log(x)) == pytest.approx(expected, rel=1e-15, abs=1e-15)


def test_log_ieee_edge_cases() -> None:
    assert exact_float(operators.log(0.0)) == -INF
    assert exact_float(operators.log(-0.0)) == -INF
    assert math.isnan(exact_float(operators.log(-1.0)))
    assert math.isnan(exact_float(operators.log(-1e-300)))
    assert math.isnan(exact_float(operators.log(-INF)))
    assert math.isnan(exact_float(operators.log(NAN)))


@pytest.mark.parametrize(
    ("x", "expected"),
    [(0.0, 1.0), (1.0, math.e), (-1.0, 1.0 / math.e), (2.0, math.exp(2.0)), (-INF, 0.0)],
)
def test_exp_values(x: float, expected: float) -> None:
    assert exact_float(operators.exp(x)) == pytest.approx(expected, rel=1e-15)


def test_exp_overflow_is_inf_not_an_exception() -> None:
    assert exact_float(operators.exp(710.0)) == INF
    assert exact_float(operators.exp(1000.0)) == INF
    assert exact_float(operators.exp(BIG)) == INF
    assert exact_float(operators.exp(INF)) == INF
    assert exact_float(operators.exp(709.0)) == pytest.approx(math.exp(709.0), rel=1e-15)
    assert exact_float(operators.exp(-1000.0)) == 0.0


@given(st.floats(min_value=1e-300, max_value=BIG))
def test_log_matches_math(x: float) -> None:
    assert exact_float(operators.log(x)) == pytest.approx(math.log(x), rel=1e-15, abs=1e-300)


@given(st.floats(min_value=-700.0, max_value=700.0))
def test_exp_matches_numpy(x: float) -> None:
    assert exact_float(operators.exp(x)) == pytest.approx(float(np.exp(x)), rel=1e-14)


@given(st.floats(min_value=-100.0, max_value=100.0))
def test_log_inverts_exp(x: float) -> None:
    assert exact_float(operators.log(operators.exp(x))) == pytest.approx(x, rel=1e-12, abs=1e-12)


@given(st.floats(min_value=1e-50, max_value=1e50))
def test_exp_inverts_log(x: float) -> None:
    assert exact_float(operators.exp(operators.log(x))) == pytest.approx(x, rel=1e-12)


# -- inv --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "expected"),
    [(2.0, 0.5), (-4.0, -0.25), (0.1, 10.0), (1.0, 1.0), (INF, 0.0), (-INF, -0.0)],
)
def test_inv_values(x: float, expected: float) -> None:
    assert exact_float(operators.inv(x)) == pytest.approx(expected, rel=1e-15)


def test_inv_of_signed_zero() -> None:
    assert exact_float(operators.inv(0.0)) == INF
    assert exact_float(operators.inv(-0.0)) == -INF
    assert math.isnan(exact_float(operators.inv(NAN)))


@given(nonzero_moderate)
def test_inv_is_an_involution(x: float) -> None:
    assert exact_float(operators.inv(x)) == pytest.approx(1.0 / x, rel=1e-15)
    assert exact_float(operators.inv(operators.inv(x))) == pytest.approx(x, rel=1e-12)


# -- log_back, inv_back, relu_back ------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "d", "expected"),
    [(2.0, 3.0, 1.5), (0.5, 1.0, 2.0), (4.0, -2.0, -0.5), (10.0, 0.0, 0.0)],
)
def test_log_back_values(x: float, d: float, expected: float) -> None:
    assert exact_float(operators.log_back(x, d)) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(
    ("x", "d", "expected"),
    [(2.0, 1.0, -0.25), (-2.0, 1.0, -0.25), (0.5, 3.0, -12.0), (1.0, -2.0, 2.0)],
)
def test_inv_back_values(x: float, d: float, expected: float) -> None:
    assert exact_float(operators.inv_back(x, d)) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(
    ("x", "d", "expected"),
    [(0.0, 1.0, INF), (0.0, -2.0, -INF), (-0.0, 3.0, -INF), (-0.0, -0.5, INF)],
)
def test_log_back_at_zero_is_signed_infinity(x: float, d: float, expected: float) -> None:
    """``d / x`` would raise ZeroDivisionError: the contract is IEEE's ``d * (1 / x)``."""
    assert exact_float(operators.log_back(x, d)) == expected


@pytest.mark.parametrize(
    ("x", "d", "expected"),
    [(0.0, 1.0, -INF), (-0.0, 1.0, -INF), (0.0, -2.0, INF), (1e-200, 1.0, -INF)],
)
def test_inv_back_at_zero_is_signed_infinity(x: float, d: float, expected: float) -> None:
    """``-d / x**2`` would raise ZeroDivisionError (or overflow): IEEE's ``-d * (1 / x²)``."""
    assert exact_float(operators.inv_back(x, d)) == expected


def test_back_functions_at_zero_with_zero_upstream_are_nan() -> None:
    assert math.isnan(exact_float(operators.log_back(0.0, 0.0)))
    assert math.isnan(exact_float(operators.inv_back(0.0, 0.0)))
    assert math.isnan(exact_float(operators.inv_back(-0.0, 0.0)))


@pytest.mark.parametrize(
    ("x", "d", "expected"),
    [(2.0, 5.0, 5.0), (-2.0, 5.0, 0.0), (0.0, 5.0, 0.0), (1e-9, -3.0, -3.0), (-1e-9, 3.0, 0.0)],
)
def test_relu_back_values(x: float, d: float, expected: float) -> None:
    assert exact_float(operators.relu_back(x, d)) == expected


@given(st.floats(min_value=0.1, max_value=100.0), st.floats(min_value=-10.0, max_value=10.0))
def test_log_back_matches_central_difference(x: float, d: float) -> None:
    slope = central(math.log, x, 1e-6 * x)
    assert exact_float(operators.log_back(x, d)) == pytest.approx(d * slope, rel=1e-6, abs=1e-9)


@given(
    st.floats(min_value=0.1, max_value=100.0).flatmap(lambda a: st.sampled_from([a, -a])),
    st.floats(min_value=-10.0, max_value=10.0),
)
def test_inv_back_matches_central_difference(x: float, d: float) -> None:
    slope = central(lambda t: 1.0 / t, x, 1e-6 * abs(x))
    assert exact_float(operators.inv_back(x, d)) == pytest.approx(d * slope, rel=1e-6, abs=1e-9)


@given(
    st.floats(min_value=1e-3, max_value=1e3).flatmap(lambda a: st.sampled_from([a, -a])),
    st.floats(min_value=-10.0, max_value=10.0),
)
def test_relu_back_matches_central_difference(x: float, d: float) -> None:
    slope = central(lambda t: builtins.max(t, 0.0), x, 1e-4 * abs(x))
    assert exact_float(operators.relu_back(x, d)) == pytest.approx(d * slope, rel=1e-6, abs=1e-9)


# -- nothing raises on IEEE edge inputs -------------------------------------------------

EDGE_INPUTS = [0.0, -0.0, 1.0, -1.0, 1e-320, -1e-320, 800.0, -800.0, BIG, -BIG, INF, -INF]


@pytest.mark.parametrize("x", EDGE_INPUTS)
def test_unary_operators_never_raise(x: float) -> None:
    results = {
        "sigmoid": exact_float(operators.sigmoid(x), what="sigmoid"),
        "relu": exact_float(operators.relu(x), what="relu"),
        "log": exact_float(operators.log(x), what="log"),
        "exp": exact_float(operators.exp(x), what="exp"),
        "inv": exact_float(operators.inv(x), what="inv"),
        "neg": exact_float(operators.neg(x), what="neg"),
    }
    assert all(isinstance(v, float) for v in results.values())
    assert 0.0 <= results["sigmoid"] <= 1.0
    assert results["relu"] >= 0.0
    assert results["exp"] >= 0.0
    assert results["neg"] == -x


def test_relu_and_max_propagate_nan() -> None:
    assert math.isnan(exact_float(operators.relu(NAN)))
    assert math.isnan(exact_float(operators.max(NAN, 1.0)))
    assert math.isnan(exact_float(operators.max(1.0, NAN)))
    assert exact_float(operators.relu_back(NAN, 2.0)) == 0.0
