"""Task 0.2: the curried higher-order functions and the list helpers built on them.

``map``/``zipWith``/``reduce`` are exercised with plain lambdas, so these tests depend
on task 0.2 code only; ``negList``/``addLists``/``sum``/``prod`` use the operators, as
their docstrings ask. Expected values come from literals, :mod:`math` and
:mod:`functools`. Every result goes through ``exact_list``/``exact_float``
(``tests/strict.py``) before it is compared: only a real ``list`` of real ``float``s, or
a real ``float``, can pass.
"""

from __future__ import annotations

import functools
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from module0 import operators
from tests.strict import exact_float, exact_list

pytestmark = pytest.mark.task0_2

small = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)
small_lists = st.lists(small, max_size=20)
equal_length_pairs = st.integers(min_value=0, max_value=20).flatmap(
    lambda n: st.tuples(
        st.lists(small, min_size=n, max_size=n), st.lists(small, min_size=n, max_size=n)
    )
)


# -- map --------------------------------------------------------------------------------


def test_map_applies_fn_to_each_element() -> None:
    assert exact_list(operators.map(lambda x: 2.0 * x)([1.0, 2.0, 3.0])) == [2.0, 4.0, 6.0]
    assert exact_list(operators.map(lambda x: x * x - 1.0)([-2.0, 0.0, 0.5])) == [3.0, -1.0, -0.75]


def test_map_of_empty_list_is_empty_list() -> None:
    calls: list[float] = []

    def record(x: float) -> float:
        calls.append(x)
        return x

    result = exact_list(operators.map(record)([]))
    assert result == []
    assert isinstance(result, list)
    assert calls == []


def test_map_accepts_any_iterable_and_keeps_order() -> None:
    result = exact_list(operators.map(lambda x: x + 0.5)(float(i) for i in range(5)))
    assert result == [0.5, 1.5, 2.5, 3.5, 4.5]
    assert isinstance(result, list)
    assert exact_list(operators.map(lambda x: -x)((3.0, 1.0, 2.0))) == [-3.0, -1.0, -2.0]


def test_map_is_curried_and_reusable() -> None:
    square = operators.map(lambda x: x * x)
    assert callable(square)
    assert exact_list(square([3.0])) == [9.0]
    assert exact_list(square([1.0, -4.0])) == [1.0, 16.0]


@given(small_lists)
def test_map_identity_is_identity(xs: list[float]) -> None:
    result = exact_list(operators.map(lambda x: x)(xs))
    assert result == xs
    assert isinstance(result, list)


@given(small_lists)
def test_map_matches_comprehension(xs: list[float]) -> None:
    assert exact_list(operators.map(lambda x: 3.0 * x - 1.0)(xs)) == [3.0 * x - 1.0 for x in xs]


# -- zipWith ----------------------------------------------------------------------------


def test_zipwith_combines_pairs_in_argument_order() -> None:
    diff = operators.zipWith(lambda x, y: x - y)
    assert exact_list(diff([10.0, 20.0, 30.0], [1.0, 2.0, 3.0])) == [9.0, 18.0, 27.0]
    assert exact_list(diff([1.0, 2.0], [10.0, 20.0])) == [-9.0, -18.0]


def test_zipwith_of_empty_lists_is_empty_list() -> None:
    result = exact_list(operators.zipWith(lambda x, y: x * y)([], []))
    assert result == []
    assert isinstance(result, list)


def test_zipwith_accepts_iterables() -> None:
    result = operators.zipWith(lambda x, y: x * y)((1.0, 2.0, 3.0), iter([4.0, 5.0, 6.0]))
    assert exact_list(result) == [4.0, 10.0, 18.0]


@pytest.mark.parametrize(("n", "m"), [(3, 5), (5, 3), (0, 4), (7, 0)])
def test_zipwith_unequal_lengths_raise_value_error_naming_both(n: int, m: int) -> None:
    with pytest.raises(ValueError) as excinfo:
        operators.zipWith(lambda x, y: x + y)([1.0] * n, [2.0] * m)
    message = str(excinfo.value)
    assert re.search(rf"\b{n}\b", message), message
    assert re.search(rf"\b{m}\b", message), message


@given(equal_length_pairs)
def test_zipwith_matches_comprehension(pair: tuple[list[float], list[float]]) -> None:
    xs, ys = pair
    expected = [2.0 * x - y for x, y in zip(xs, ys, strict=True)]
    assert exact_list(operators.zipWith(lambda x, y: 2.0 * x - y)(xs, ys)) == expected


# -- reduce -----------------------------------------------------------------------------


def test_reduce_folds_from_the_left() -> None:
    # ((10 - 1) - 2) - 3 == 4; a right fold would give a different number.
    assert exact_float(operators.reduce(lambda acc, x: acc - x, 10.0)([1.0, 2.0, 3.0])) == 4.0
    # Digits accumulate left to right: 1, 12, 123.
    digits = operators.reduce(lambda acc, x: 10.0 * acc + x, 0.0)([1.0, 2.0, 3.0])
    assert exact_float(digits) == 123.0


def test_reduce_passes_accumulator_first() -> None:
    seen: list[tuple[float, float]] = []

    def record(acc: float, x: float) -> float:
        seen.append((acc, x))
        return acc + x

    assert exact_float(operators.reduce(record, 100.0)([1.0, 2.0, 3.0])) == 106.0
    # reduce chose what record received: check those values too.
    checked = [(exact_float(acc), exact_float(x)) for acc, x in seen]
    assert checked == [(100.0, 1.0), (101.0, 2.0), (103.0, 3.0)]


def test_reduce_of_empty_list_is_start() -> None:
    assert exact_float(operators.reduce(lambda acc, x: acc * x, 7.5)([])) == 7.5
    assert exact_float(operators.reduce(lambda acc, x: acc - x, -2.0)([])) == -2.0


def test_reduce_single_element_and_iterable() -> None:
    assert exact_float(operators.reduce(lambda acc, x: acc - x, 1.0)([5.0])) == -4.0
    product = operators.reduce(lambda acc, x: acc * x, 1.0)(float(i) for i in range(1, 6))
    assert exact_float(product) == 120.0


@given(small_lists, small)
def test_reduce_matches_functools(xs: list[float], start: float) -> None:
    def fn(acc: float, x: float) -> float:
        return 0.5 * acc - x

    assert exact_float(operators.reduce(fn, start)(xs)) == functools.reduce(fn, xs, start)


# -- negList ----------------------------------------------------------------------------


def test_neglist_values() -> None:
    assert exact_list(operators.negList([1.0, -2.0, 3.5])) == [-1.0, 2.0, -3.5]
    assert exact_list(operators.negList([])) == []
    assert exact_list(operators.negList((0.25,))) == [-0.25]


@given(small_lists)
def test_neglist_is_an_involution(xs: list[float]) -> None:
    negated = exact_list(operators.negList(xs))
    assert negated == [-x for x in xs]
    assert exact_list(operators.negList(negated)) == xs


@given(small_lists)
def test_sum_of_neglist_is_negated_sum(xs: list[float]) -> None:
    total = exact_float(operators.sum(operators.negList(xs)))
    assert total == pytest.approx(-math.fsum(xs), abs=1e-9)


# -- addLists ---------------------------------------------------------------------------


def test_addlists_values() -> None:
    added = operators.addLists([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])
    assert exact_list(added) == [11.0, 22.0, 33.0]
    assert exact_list(operators.addLists([], [])) == []
    assert exact_list(operators.addLists([-1.5], [1.5])) == [0.0]


def test_addlists_unequal_lengths_raise_value_error() -> None:
    with pytest.raises(ValueError) as excinfo:
        operators.addLists([1.0, 2.0, 3.0], [1.0])
    assert re.search(r"\b3\b", str(excinfo.value))
    assert re.search(r"\b1\b", str(excinfo.value))


@given(equal_length_pairs)
def test_addlists_elementwise_and_sum_is_additive(pair: tuple[list[float], list[float]]) -> None:
    xs, ys = pair
    added = exact_list(operators.addLists(xs, ys))
    assert added == [x + y for x, y in zip(xs, ys, strict=True)]
    expected = math.fsum(xs) + math.fsum(ys)
    assert exact_float(operators.sum(added)) == pytest.approx(expected, abs=1e-9)
    separately = exact_float(operators.sum(xs)) + exact_float(operators.sum(ys))
    assert exact_float(operators.sum(added)) == pytest.approx(separately, abs=1e-9)


# -- sum and prod -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("xs", "expected"),
    [([1.0, 2.0, 3.0], 6.0), ([-1.5, 1.5], 0.0), ([42.0], 42.0), ([0.5] * 8, 4.0)],
)
def test_sum_values(xs: list[float], expected: float) -> None:
    assert exact_float(operators.sum(xs)) == expected


def test_sum_of_empty_is_zero() -> None:
    result = exact_float(operators.sum([]))
    assert result == 0.0
    assert isinstance(result, float)


@pytest.mark.parametrize(
    ("xs", "expected"),
    [([2.0, 3.0, 4.0], 24.0), ([-1.0, 2.0, -3.0], 6.0), ([5.0, 0.0, 7.0], 0.0), ([0.5], 0.5)],
)
def test_prod_values(xs: list[float], expected: float) -> None:
    assert exact_float(operators.prod(xs)) == expected


def test_prod_of_empty_is_one() -> None:
    result = exact_float(operators.prod([]))
    assert result == 1.0
    assert isinstance(result, float)


def test_sum_and_prod_accept_iterables() -> None:
    assert exact_float(operators.sum(float(i) for i in range(1, 5))) == 10.0
    assert exact_float(operators.prod(float(i) for i in range(1, 5))) == 24.0


@given(small_lists)
def test_sum_matches_fsum(xs: list[float]) -> None:
    assert exact_float(operators.sum(xs)) == pytest.approx(math.fsum(xs), rel=1e-12, abs=1e-9)


@given(st.lists(st.floats(min_value=-10.0, max_value=10.0), max_size=15))
def test_prod_matches_math_prod(xs: list[float]) -> None:
    assert exact_float(operators.prod(xs)) == pytest.approx(math.prod(xs), rel=1e-12, abs=1e-300)
