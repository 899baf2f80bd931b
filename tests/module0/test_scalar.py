"""Task 0.4: central differences and the forward pass of every ScalarFunction.

Every value read back from a Scalar (``.data``) or from ``central_difference`` goes
through ``exact_float`` (``tests/strict.py``) before it is compared.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from module0.autodiff import central_difference
from module0.scalar import Scalar
from tests.strict import exact_bool, exact_float, exact_str, exact_tuple

pytestmark = pytest.mark.task0_4

small = st.floats(min_value=-20.0, max_value=20.0, allow_nan=False)
positive = st.floats(min_value=1e-3, max_value=100.0, allow_nan=False)


# -- central_difference ---------------------------------------------------------------


def test_central_difference_of_a_square() -> None:
    assert exact_float(central_difference(lambda x: x * x, 3.0)) == pytest.approx(6.0, abs=1e-5)


def test_central_difference_picks_the_argument() -> None:
    f = lambda x, y: x * x * y  # noqa: E731
    assert exact_float(central_difference(f, 2.0, 5.0, arg=0)) == pytest.approx(20.0, abs=1e-4)
    assert exact_float(central_difference(f, 2.0, 5.0, arg=1)) == pytest.approx(4.0, abs=1e-4)


def test_central_difference_respects_epsilon() -> None:
    # For a cubic the symmetric difference has error exactly eps**2.
    value = exact_float(central_difference(lambda x: x**3, 1.0, epsilon=0.1))
    assert value == pytest.approx(3.0 + 0.01, abs=1e-12)


@given(small)
def test_central_difference_of_sin_is_cos(x: float) -> None:
    assert exact_float(central_difference(math.sin, x)) == pytest.approx(math.cos(x), abs=1e-6)


# -- forward values ---------------------------------------------------------------------


def test_binary_forward_values() -> None:
    x, y = Scalar(3.0), Scalar(-2.0)
    assert exact_float((x + y).data) == 1.0
    assert exact_float((x - y).data) == 5.0
    assert exact_float((x * y).data) == -6.0
    assert exact_float((x / y).data) == -1.5
    assert exact_float((x < y).data) == 0.0
    assert exact_float((y < x).data) == 1.0
    assert exact_float((x > y).data) == 1.0
    assert exact_float((x == y).data) == 0.0
    assert exact_float((x == Scalar(3.0)).data) == 1.0


def test_unary_forward_values() -> None:
    x = Scalar(0.5)
    assert exact_float((-x).data) == -0.5
    assert exact_float(x.log().data) == pytest.approx(math.log(0.5))
    assert exact_float(x.exp().data) == pytest.approx(math.exp(0.5))
    assert exact_float(x.sigmoid().data) == pytest.approx(1.0 / (1.0 + math.exp(-0.5)))
    assert exact_float(x.relu().data) == 0.5
    assert exact_float(Scalar(-0.5).relu().data) == 0.0
    assert exact_float(x.tanh().data) == pytest.approx(math.tanh(0.5))
    assert exact_float((x**3).data) == pytest.approx(0.125)
    assert exact_float((Scalar(4.0) ** 0.5).data) == pytest.approx(2.0)
    assert exact_float((1 / Scalar(4.0)).data) == 0.25


def test_operator_overloads_on_both_sides() -> None:
    x = Scalar(4.0)
    assert exact_float((2 + x).data) == 6.0
    assert exact_float((x + 2).data) == 6.0
    assert exact_float((10 - x).data) == 6.0
    assert exact_float((x - 10).data) == -6.0
    assert exact_float((3 * x).data) == 12.0
    assert exact_float((x * 3).data) == 12.0
    assert exact_float((2 / x).data) == 0.5
    assert exact_float((x / 2).data) == 2.0
    assert exact_float((x < 5).data) == 1.0
    assert exact_float((5 < x).data) == 0.0
    assert exact_float((x > 5).data) == 0.0
    assert exact_float((5 > x).data) == 1.0
    for result in (2 + x, x * 3, 2 / x, x < 5):
        assert isinstance(result, Scalar)
        assert type(result.data) is float


def test_results_record_their_history() -> None:
    x = Scalar(2.0)
    y = x * 3.0
    assert y.history is not None
    assert exact_str(y.history.last_fn.__name__) == "Mul"
    inputs = exact_tuple(y.history.inputs)
    assert inputs[0] is x
    assert exact_float(inputs[1].data) == 3.0
    assert not exact_bool(y.is_leaf()) and exact_bool(x.is_leaf())


@given(small, small)
def test_arithmetic_matches_floats(a: float, b: float) -> None:
    x, y = Scalar(a), Scalar(b)
    assert exact_float((x + y).data) == pytest.approx(a + b)
    assert exact_float((x - y).data) == pytest.approx(a - b, abs=1e-12)
    assert exact_float((x * y).data) == pytest.approx(a * b)
    assert exact_float((x < y).data) == float(a < b)
    assert exact_float((x > y).data) == float(a > b)
    assert exact_float((x == y).data) == float(a == b)


@given(small, st.floats(min_value=0.1, max_value=20.0))
def test_division_matches_floats(a: float, b: float) -> None:
    assert exact_float((Scalar(a) / Scalar(b)).data) == pytest.approx(a / b)
    assert exact_float((Scalar(a) / Scalar(-b)).data) == pytest.approx(-a / b)


@given(small)
def test_unary_functions_match_math(a: float) -> None:
    x = Scalar(a)
    assert exact_float(x.exp().data) == pytest.approx(math.exp(a))
    assert exact_float(x.tanh().data) == pytest.approx(math.tanh(a))
    assert exact_float(x.relu().data) == pytest.approx(max(a, 0.0))
    assert exact_float(x.sigmoid().data) == pytest.approx(1.0 / (1.0 + math.exp(-a)))
    assert exact_float((-x).data) == -a


@given(positive, st.sampled_from([-2.0, -1.0, 0.5, 1.0, 2.0, 3.0]))
def test_log_and_pow_match_math(a: float, n: float) -> None:
    assert exact_float(Scalar(a).log().data) == pytest.approx(math.log(a))
    assert exact_float((Scalar(a) ** n).data) == pytest.approx(a**n)


def test_domain_edges_follow_ieee() -> None:
    assert exact_float(Scalar(0.0).log().data) == -math.inf
    assert math.isnan(exact_float(Scalar(-1.0).log().data))
    assert exact_float((1 / Scalar(0.0)).data) == math.inf
    assert math.isnan(exact_float((Scalar(-8.0) ** 0.5).data))
    assert exact_float((Scalar(-2.0) ** 3).data) == -8.0
    assert exact_float(Scalar(1000.0).exp().data) == math.inf
