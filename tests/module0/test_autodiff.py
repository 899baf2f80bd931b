"""Task 0.5: the autodiff engine (chain rule, topological sort, backpropagation) and
every ScalarFunction's backward, checked against central differences.

Derivatives, ids and lists read back from the engine go through the ``exact_*`` helpers
of ``tests/strict.py`` before they are compared. The central differences are computed by
this file (``numeric_grads``), not by task 0.4's ``central_difference``, so a bug there
costs points in 0.4 alone. The ordering checks of the topological
sort use the edges the test itself built, not ones reported by the code under test.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from module0.autodiff import backpropagate, topological_sort
from module0.errors import GraphReleasedError
from module0.graph import draw_graph
from module0.scalar import Scalar, ScalarFunction, derivative_check
from tests.strict import exact_float, exact_int, exact_list, exact_tuple

pytestmark = pytest.mark.task0_5

small = st.floats(min_value=-5.0, max_value=5.0, allow_nan=False)
positive = st.floats(min_value=0.1, max_value=10.0, allow_nan=False)
away_from_zero = small.filter(lambda v: abs(v) > 0.05)


EPS = 1e-6


def numeric_grads(f: Callable[..., Scalar], *values: float) -> list[float]:
    """Central differences of f's value with respect to each argument, written out here:
    the oracle of this task never runs task 0.4's ``central_difference``."""

    def as_float(*xs: float) -> float:
        return exact_float(f(*(Scalar(x) for x in xs)).data)

    grads = []
    for i in range(len(values)):
        plus, minus = list(values), list(values)
        plus[i] += EPS
        minus[i] -= EPS
        grads.append((as_float(*plus) - as_float(*minus)) / (plus[i] - minus[i]))
    return grads


def derivative_of(s: Scalar) -> float:
    """A leaf's derivative as a checked float (0.0 when backward never reached it)."""
    d = s.derivative
    return 0.0 if d is None else exact_float(d)


def backprop_grads(f: Callable[..., Scalar], *values: float) -> list[float]:
    leaves = [Scalar(v) for v in values]
    f(*leaves).backward()
    return [derivative_of(s) for s in leaves]


def uid(v: Scalar) -> int:
    """A Variable's ``unique_id``, checked to be a real int."""
    return exact_int(v.unique_id)


def assert_matches_central_difference(f: Callable[..., Scalar], *values: float) -> None:
    for got, want in zip(backprop_grads(f, *values), numeric_grads(f, *values), strict=True):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-4)


# -- every ScalarFunction's backward against central differences ----------------------

UNARY: dict[str, tuple[Callable[[Scalar], Scalar], st.SearchStrategy[float]]] = {
    "neg": (lambda x: -x, small),
    "log": (lambda x: x.log(), positive),
    "exp": (lambda x: x.exp(), small),
    "inv": (lambda x: 1.0 / x, away_from_zero),
    "sigmoid": (lambda x: x.sigmoid(), small),
    "relu": (lambda x: x.relu(), away_from_zero),
    "tanh": (lambda x: x.tanh(), small),
    "pow3": (lambda x: x**3, small),
    "pow-half": (lambda x: x**-0.5, positive),
    "add-const": (lambda x: 2.5 + x, small),
    "mul-const": (lambda x: x * -3.0, small),
}

BINARY: dict[str, Callable[[Scalar, Scalar], Scalar]] = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / (y * y + 1.0),
    "lt": lambda x, y: x < y,
    "gt": lambda x, y: x > y,
    "eq": lambda x, y: x == y,
    "composite": lambda x, y: (x * y + x.exp()).sigmoid() * (y - x).tanh(),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary_backward_matches_central_difference(name: str, data: st.DataObject) -> None:
    f, values = UNARY[name]
    assert_matches_central_difference(f, data.draw(values))


@pytest.mark.parametrize("name", sorted(BINARY))
@given(a=small, b=small)
def test_binary_backward_matches_central_difference(name: str, a: float, b: float) -> None:
    if name in {"lt", "gt", "eq"}:
        b = a + 1.0  # keep away from the discontinuity
    assert_matches_central_difference(BINARY[name], a, b)


def test_known_derivatives() -> None:
    x, y = Scalar(2.0), Scalar(-3.0)
    (x * y + x.exp()).backward()
    assert exact_float(x.derivative) == pytest.approx(-3.0 + math.exp(2.0))
    assert exact_float(y.derivative) == pytest.approx(2.0)
    z = Scalar(0.0)
    z.sigmoid().backward()
    assert exact_float(z.derivative) == pytest.approx(0.25)
    w = Scalar(0.5)
    w.tanh().backward()
    assert exact_float(w.derivative) == pytest.approx(1.0 - math.tanh(0.5) ** 2)


# -- chain_rule ---------------------------------------------------------------------------


def test_chain_rule_gives_each_input_its_derivative() -> None:
    x, y = Scalar(3.0), Scalar(4.0)
    z = x * y
    pairs = exact_list(z.chain_rule(2.0), item=exact_tuple)
    assert len(pairs) == 2
    assert pairs[0][0] is x and pairs[1][0] is y
    assert exact_float(pairs[0][1]) == 8.0
    assert exact_float(pairs[1][1]) == 6.0


def test_chain_rule_leaves_out_constants() -> None:
    x = Scalar(3.0)
    z = x * 5.0
    pairs = exact_list(z.chain_rule(1.0), item=exact_tuple)
    assert len(pairs) == 1
    assert pairs[0][0] is x
    assert exact_float(pairs[0][1]) == 5.0


def test_chain_rule_of_a_unary_function() -> None:
    x = Scalar(2.0)
    pairs = exact_list(x.log().chain_rule(3.0), item=exact_tuple)
    assert len(pairs) == 1
    assert pairs[0][0] is x
    assert exact_float(pairs[0][1]) == pytest.approx(1.5)


# -- topological sort -----------------------------------------------------------------


def test_topological_sort_of_a_diamond() -> None:
    x = Scalar(1.0)
    a = x * 2.0
    b = x.exp()
    out = a + b
    order = exact_list(topological_sort(out), item=None)
    ids = [uid(v) for v in order]
    assert order[0] is out
    assert sorted(ids) == sorted({uid(out), uid(a), uid(b), uid(x)})
    position = {uid(v): i for i, v in enumerate(order)}
    # Every non-constant input of out, a and b, as built above.
    for var, parent in [(out, a), (out, b), (a, x), (b, x)]:
        assert position[uid(var)] < position[uid(parent)]


@given(st.lists(st.integers(min_value=0, max_value=10), min_size=1, max_size=30))
def test_topological_sort_puts_every_node_before_its_inputs(picks: list[int]) -> None:
    """A random DAG: each new node combines two earlier ones."""
    nodes = [Scalar(1.0), Scalar(2.0)]
    edges: list[tuple[Scalar, Scalar]] = []  # (result, non-constant input), as built here
    for k in picks:
        left, right = nodes[k % len(nodes)], nodes[(k * 7 + 1) % len(nodes)]
        half = left * 0.5
        node = half + right
        edges += [(half, left), (node, half), (node, right)]
        nodes.append(node)
    order = exact_list(topological_sort(nodes[-1]), item=None)
    position = {uid(v): i for i, v in enumerate(order)}
    assert len(position) == len(order)
    assert order[0] is nodes[-1]
    for var, parent in edges:
        if uid(var) in position:  # (a node the last one does not depend on is not sorted)
            assert position[uid(var)] < position[uid(parent)]


def test_topological_sort_skips_constants() -> None:
    x = Scalar(2.0)
    c = Scalar(5.0, requires_grad=False)
    out = x * c
    order = exact_list(topological_sort(out), item=None)
    assert uid(c) not in {uid(v) for v in order}
    assert {uid(v) for v in order} == {uid(out), uid(x)}


# -- backpropagation ------------------------------------------------------------------


def test_a_value_used_many_times_collects_every_use() -> None:
    x = Scalar(3.0)
    (x * x * x).backward()
    assert exact_float(x.derivative) == pytest.approx(27.0)
    y = Scalar(2.0)
    total = y
    for _ in range(9):
        total = total + y
    total.backward()
    assert exact_float(y.derivative) == pytest.approx(10.0)


def test_derivatives_accumulate_over_backward_calls() -> None:
    x = Scalar(2.0)
    (x * 4.0).backward()
    (x * x).backward()
    assert exact_float(x.derivative) == pytest.approx(8.0)


def test_constants_get_no_derivative() -> None:
    x = Scalar(2.0)
    c = Scalar(7.0, requires_grad=False)
    (x * c + c).backward()
    assert c.derivative is None
    assert exact_float(x.derivative) == pytest.approx(7.0)


def test_backpropagate_scales_by_the_output_derivative() -> None:
    x = Scalar(3.0)
    y = x * x
    backpropagate(y, 0.5)
    assert exact_float(x.derivative) == pytest.approx(3.0)
    z = Scalar(1.0)
    (z * 2.0).backward(d_output=-4.0)
    assert exact_float(z.derivative) == pytest.approx(-8.0)


def test_a_long_chain_backpropagates_without_recursion() -> None:
    x = Scalar(1.0)
    y = x
    for _ in range(100_000):
        y = y + 1e-5
    y.backward()
    assert exact_float(x.derivative) == 1.0
    assert exact_float(y.data) == pytest.approx(2.0)


def test_backward_twice_raises_unless_the_graph_is_retained() -> None:
    x = Scalar(2.0)
    y = x.exp() * x
    y.backward()
    with pytest.raises(GraphReleasedError, match="retain_graph"):
        y.backward()
    z = x.exp() * x
    x.derivative = None
    z.backward(retain_graph=True)
    z.backward()
    assert exact_float(x.derivative) == pytest.approx(2 * 3 * math.exp(2.0))


def test_a_training_step_leaves_no_reference_cycles() -> None:
    """Graphs are freed by reference counting: the cyclic collector finds nothing."""
    gc.collect()
    gc.disable()
    try:
        w = [Scalar(0.1 * i) for i in range(5)]
        for _ in range(3):
            total = Scalar(0.0)
            for i, v in enumerate(w):
                total = total + (v * float(i) - 1.0).relu() ** 2 + v.sigmoid().log()
            total.backward()
            for v in w:
                assert v.derivative is not None
                v.data -= 0.01 * v.derivative
                v.derivative = None
            del total
        assert gc.collect() == 0
    finally:
        gc.enable()


# -- learner tools built on the engine ----------------------------------------------------


def test_derivative_check_passes_correct_functions_and_catches_a_wrong_backward() -> None:
    """One test, so a derivative_check that never raises cannot pass it."""
    derivative_check(lambda x, y: (x * y).sigmoid() + y.exp(), Scalar(0.3), Scalar(-1.2))
    derivative_check(lambda x: x.log() * x, Scalar(2.0))

    class WrongSquare(ScalarFunction):
        @staticmethod
        def forward(ctx, a):  # type: ignore[no-untyped-def, override]
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, d):  # type: ignore[no-untyped-def, override]
            (a,) = ctx.saved_values
            return a * d  # should be 2 * a * d

    with pytest.raises(AssertionError, match="argument 0"):
        derivative_check(lambda x: WrongSquare.apply(x), Scalar(3.0))


def test_derivative_check_is_exact_per_argument_and_catches_a_small_error() -> None:
    """Each argument gets a step of its own size and a tolerance for the rounding of f's
    value, so a large term does not fail a small argument's right derivative; a backward
    off by 1% next to that term, or by 0.1% alone, still fails (one test, so a check that
    never raises cannot pass it)."""
    derivative_check(lambda a, b: a * a * a + b * b * b, Scalar(81.0), Scalar(0.25))
    derivative_check(lambda a, b: a.exp() * b, Scalar(30.0), Scalar(1e-3))
    derivative_check(lambda a: a * a, Scalar(1e9))

    class AlmostSquare(ScalarFunction):
        @staticmethod
        def forward(ctx, a):  # type: ignore[no-untyped-def, override]
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, d):  # type: ignore[no-untyped-def, override]
            (a,) = ctx.saved_values
            return 2.02 * a * d

    class NearlySquare(AlmostSquare):
        @staticmethod
        def backward(ctx, d):  # type: ignore[no-untyped-def, override]
            (a,) = ctx.saved_values
            return 2.002 * a * d

    with pytest.raises(AssertionError, match="argument 1"):
        derivative_check(lambda x, y: x * x * x + AlmostSquare.apply(y), Scalar(81.0), Scalar(0.25))
    with pytest.raises(AssertionError, match="argument 0"):
        derivative_check(lambda x: NearlySquare.apply(x), Scalar(3.0))


def test_draw_graph_writes_a_png(tmp_path: Path) -> None:
    x, y = Scalar(2.0, name="x"), Scalar(-1.0, name="y")
    z = (x * y + x.exp()).relu()
    z.backward()
    out = draw_graph(z, tmp_path / "graph.png", title="z")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5_000
    assert exact_float(x.derivative) == pytest.approx(-1.0 + math.exp(2.0))


def test_draw_graph_refuses_graphs_too_big_to_read(tmp_path: Path) -> None:
    x = Scalar(1.0)
    y = x
    for _ in range(200):
        y = y * 1.01
    with pytest.raises(ValueError, match="nodes"):
        draw_graph(y, tmp_path / "big.png")
    assert not (tmp_path / "big.png").exists()
    y.backward()
    assert exact_float(x.derivative) == pytest.approx(1.01**200)
