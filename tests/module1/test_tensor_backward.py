"""Task 1.4: every tensor Function's backward and ``unbroadcast``, against NumPy.

The oracles are computed here with NumPy alone, never by the framework under test:

* **central differences** of a NumPy forward (``np.tanh``, ``np.matmul``, ...): the
  framework's gradient of ``(f(x) * w).sum()``, with ``w`` a random constant so every
  output entry gets a different upstream gradient, must match
  ``sum((f(x + eps e_i) - f(x - eps e_i)) * w) / 2 eps`` at every entry ``i`` of every
  leaf;
* **closed forms** where they are short: matrix-product gradients ``w @ b^T`` and
  ``a^T @ w`` summed over broadcast batch dimensions, un-broadcasting as ``np.sum`` over
  the broadcast dimensions, and hand-written values for ties of ``max``.

Hypothesis draws shapes of 1 to 4 dimensions of sizes 1 to 4, permuted (non-contiguous)
views of the leaves, and broadcasting pairs where either side is smaller. Input values
are distinct points of a grid (a shuffled ``np.linspace``), so ``relu``, ``max`` and the
comparisons sit far from their kinks, ties and jumps; ``log``, ``1/x`` and ``x ** 0.5``
get positive inputs. Gradients are read with ``tests/strict.py``'s ``exact_tensor``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module0.autodiff import no_grad
from module0.errors import GraphReleasedError
from module1.tensor import Tensor, from_numpy, tensor
from module1.tensor_functions import unbroadcast
from tests.strict import exact_tensor

pytestmark = pytest.mark.task1_4

Shape = tuple[int, ...]
Array = np.ndarray

EPS = 1e-6
ANY = (-2.0, 2.0)
POSITIVE = (0.5, 2.0)

shapes = st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=4).map(tuple)
seeds = st.integers(min_value=0, max_value=2**32 - 1)


def broadcast_pairs(max_dims: int) -> st.SearchStrategy[tuple[Shape, Shape]]:
    """Two shapes that broadcast together: a common list of sizes, each side with some
    sizes replaced by 1 and some leading dimensions dropped (either side may be the
    smaller, or 0-d)."""
    return st.lists(
        st.tuples(st.integers(1, 4), st.booleans(), st.booleans()), min_size=1, max_size=max_dims
    ).flatmap(
        lambda dims: st.tuples(st.integers(0, len(dims)), st.integers(0, len(dims))).map(
            lambda cut: (
                tuple(1 if one_a else n for n, one_a, _ in dims)[cut[0] :],
                tuple(1 if one_b else n for n, _, one_b in dims)[cut[1] :],
            )
        )
    )


# -- operands: a leaf, seen by the operation through a permuted (non-contiguous) view ---


@dataclass(frozen=True)
class Operand:
    """The operation sees ``leaf.permute(*order)``, of shape ``shape``."""

    shape: Shape
    order: tuple[int, ...]

    @property
    def leaf_shape(self) -> Shape:
        leaf = [0] * len(self.shape)
        for d, o in enumerate(self.order):
            leaf[o] = self.shape[d]
        return tuple(leaf)

    def view_np(self, leaf: Array) -> Array:
        return np.transpose(leaf, self.order)

    def view_mt(self, leaf: Tensor) -> Tensor:
        return leaf.permute(*self.order) if self.order else leaf


def operand_of(shape: Shape) -> st.SearchStrategy[Operand]:
    return st.permutations(range(len(shape))).map(lambda order: Operand(shape, tuple(order)))


operands = shapes.flatmap(operand_of)
operand_pairs = broadcast_pairs(4).flatmap(
    lambda pair: st.tuples(operand_of(pair[0]), operand_of(pair[1]))
)


def distinct(rng: np.random.Generator, shape: Shape, domain: tuple[float, float]) -> Array:
    """Distinct values of ``domain`` in random order: a shuffled ``linspace`` with an even
    number of points, so a symmetric domain never yields exactly 0."""
    n = int(np.prod(shape, dtype=np.int64))
    pool = np.linspace(domain[0], domain[1], 2 * n)
    return rng.permutation(pool)[:n].reshape(shape)


def weights(rng: np.random.Generator, shape: Shape) -> Array:
    return np.asarray(rng.normal(size=shape), dtype=np.float64).reshape(shape)


def central_differences(
    f: Callable[..., Array], arrays: Sequence[Array], arg: int, w: Array
) -> Array:
    """d sum(f(*arrays) * w) / d arrays[arg], entry by entry, by central differences.

    The two forwards are subtracted before weighting and summing, so outputs that one
    entry does not touch cancel exactly and add no rounding error.
    """
    x = arrays[arg]
    grad = np.zeros(x.shape)
    for index in np.ndindex(*x.shape):
        plus = [a.copy() for a in arrays]
        minus = [a.copy() for a in arrays]
        plus[arg][index] += EPS
        minus[arg][index] -= EPS
        grad[index] = np.sum((f(*plus) - f(*minus)) * w) / (2.0 * EPS)
    return grad


def sum_to(grad: Array, shape: Shape) -> Array:
    """NumPy's un-broadcast: ``grad`` summed over the dimensions ``shape`` broadcast."""
    extra = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(extra))) if extra else grad
    ones = tuple(d for d, s in enumerate(shape) if s == 1 and grad.shape[d] != 1)
    return grad.sum(axis=ones, keepdims=True) if ones else grad


def read_grad(leaf: Tensor, what: str) -> Array:
    return exact_tensor(leaf.grad, what=f"{what}.grad")


def assert_grad(leaf: Tensor, want: Array, what: str = "x", rtol: float = 1e-5) -> None:
    got = read_grad(leaf, what)
    assert got.shape == want.shape, f"{what}.grad has shape {got.shape}, expected {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6, err_msg=f"{what}.grad")


def check_backward(
    f_mt: Callable[..., Tensor],
    f_np: Callable[..., Array],
    ops: Sequence[Operand],
    arrays: Sequence[Array],
    rng: np.random.Generator,
) -> None:
    """Backward of ``(f_mt(*views) * w).sum()`` vs central differences of ``f_np``."""

    def forward_np(*leaves: Array) -> Array:
        views = [op.view_np(leaf) for op, leaf in zip(ops, leaves, strict=True)]
        return np.asarray(f_np(*views), dtype=np.float64)

    w = weights(rng, forward_np(*arrays).shape)
    leaves = [from_numpy(a, requires_grad=True) for a in arrays]
    out = f_mt(*(op.view_mt(leaf) for op, leaf in zip(ops, leaves, strict=True)))
    (out * from_numpy(w)).sum().backward()
    for i, leaf in enumerate(leaves):
        assert_grad(leaf, central_differences(forward_np, arrays, i, w), what=f"input {i}")


# -- unary functions -----------------------------------------------------------------------

UnaryCase = tuple[Callable[[Tensor], Tensor], Callable[[Array], Array], tuple[float, float]]

UNARY: dict[str, UnaryCase] = {
    "neg": (lambda x: -x, lambda x: -x, ANY),
    "inv": (lambda x: 1.0 / x, lambda x: 1.0 / x, POSITIVE),
    "sub-from-const": (lambda x: 1.5 - x, lambda x: 1.5 - x, ANY),
    "mul-add-const": (lambda x: x * -3.0 + 2.0, lambda x: x * -3.0 + 2.0, ANY),
    "div-const": (lambda x: x / 4.0, lambda x: x / 4.0, ANY),
    "sigmoid": (lambda x: x.sigmoid(), lambda x: 1.0 / (1.0 + np.exp(-x)), ANY),
    "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0.0), ANY),
    "tanh": (lambda x: x.tanh(), np.tanh, ANY),
    "log": (lambda x: x.log(), np.log, POSITIVE),
    "exp": (lambda x: x.exp(), np.exp, ANY),
    "pow2-int": (lambda x: x**2, lambda x: x**2.0, ANY),
    "pow3": (lambda x: x**3.0, lambda x: x**3.0, ANY),
    "pow-half": (lambda x: x**0.5, np.sqrt, POSITIVE),
    "pow-negative": (lambda x: x**-1.5, lambda x: x**-1.5, POSITIVE),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(op=operands, seed=seeds)
def test_unary_backward_matches_central_differences(name: str, op: Operand, seed: int) -> None:
    f_mt, f_np, domain = UNARY[name]
    rng = np.random.default_rng(seed)
    check_backward(f_mt, f_np, [op], [distinct(rng, op.leaf_shape, domain)], rng)


def test_unary_known_gradients() -> None:
    x = tensor([0.0, 1.0, -2.0], requires_grad=True)
    (x.sigmoid() + x.tanh() + x.exp()).sum().backward()
    v = np.array([0.0, 1.0, -2.0])
    s = 1.0 / (1.0 + np.exp(-v))
    assert_grad(x, s * (1.0 - s) + 1.0 - np.tanh(v) ** 2 + np.exp(v), rtol=1e-12)
    y = tensor([[0.5, 4.0]], requires_grad=True)
    (y.log() + y**3 + 1.0 / y - y.relu()).sum().backward()
    u = np.array([[0.5, 4.0]])
    assert_grad(y, 1.0 / u + 3.0 * u**2 - 1.0 / u**2 - 1.0, what="y", rtol=1e-12)
    z = tensor([-1.0, 2.0], requires_grad=True)
    (-z).relu().sum().backward()
    assert_grad(z, np.array([-1.0, 0.0]), what="z", rtol=0.0)


# -- binary functions over broadcasting pairs -----------------------------------------------

BinaryCase = tuple[
    Callable[[Tensor, Tensor], Tensor], Callable[[Array, Array], Array], tuple[float, float]
]

BINARY: dict[str, BinaryCase] = {
    "add": (lambda x, y: x + y, lambda x, y: x + y, ANY),
    "sub": (lambda x, y: x - y, lambda x, y: x - y, ANY),
    "mul": (lambda x, y: x * y, lambda x, y: x * y, ANY),
    "div": (lambda x, y: x / y, lambda x, y: x / y, POSITIVE),
    "composite": (
        lambda x, y: (x * y).sigmoid() + (x - y).exp() * y,
        lambda x, y: 1.0 / (1.0 + np.exp(-x * y)) + np.exp(x - y) * y,
        ANY,
    ),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(pair=operand_pairs, seed=seeds, data=st.data())
def test_binary_backward_through_broadcasting_matches_central_differences(
    name: str, pair: tuple[Operand, Operand], seed: int, data: st.DataObject
) -> None:
    f_mt, f_np, y_domain = BINARY[name]
    a, b = pair
    out_dims = len(np.broadcast_shapes(a.shape, b.shape))
    out_order = tuple(data.draw(st.permutations(range(out_dims)), label="output order"))
    rng = np.random.default_rng(seed)
    arrays = [distinct(rng, a.leaf_shape, ANY), distinct(rng, b.leaf_shape, y_domain)]

    def f_mt_permuted(x: Tensor, y: Tensor) -> Tensor:
        out = f_mt(x, y)  # the output permuted too: un-broadcast of a non-contiguous grad
        return out.permute(*out_order) if out_order else out

    def f_np_permuted(x: Array, y: Array) -> Array:
        return np.transpose(f_np(x, y), out_order)

    check_backward(f_mt_permuted, f_np_permuted, [a, b], arrays, rng)


@given(pair=operand_pairs, seed=seeds)
def test_comparisons_pass_zero_gradients_back_in_each_input_shape(
    pair: tuple[Operand, Operand], seed: int
) -> None:
    a, b = pair
    rng = np.random.default_rng(seed)
    n_a = int(np.prod(a.leaf_shape, dtype=np.int64))
    # Distinct multiples of 0.05 shared by both inputs: no ties, and every difference is
    # far from is_close's 1e-2 threshold, so the comparisons are locally constant.
    pool = rng.permutation(0.05 * (np.arange(n_a + int(np.prod(b.leaf_shape))) - 7.3))
    arrays = [pool[:n_a].reshape(a.leaf_shape), pool[n_a:].reshape(b.leaf_shape)]

    def f_mt(x: Tensor, y: Tensor) -> Tensor:
        return (x < y) + (x > y) * 2.0 + (x == y) * 3.0 + x.is_close(y) * 4.0 + x * y

    def f_np(x: Array, y: Array) -> Array:
        close = np.abs(x - y) < 1e-2
        return (x < y) + (x > y) * 2.0 + (x == y) * 3.0 + close * 4.0 + x * y

    check_backward(f_mt, f_np, [a, b], arrays, rng)

    x = from_numpy(arrays[0], requires_grad=True)
    y = from_numpy(arrays[1], requires_grad=True)
    out = (a.view_mt(x) < b.view_mt(y)) + (a.view_mt(x) == b.view_mt(y))
    out = out + a.view_mt(x).is_close(b.view_mt(y))
    (out * from_numpy(weights(rng, np.broadcast_shapes(a.shape, b.shape)))).sum().backward()
    assert_grad(x, np.zeros(a.leaf_shape), rtol=0.0)
    assert_grad(y, np.zeros(b.leaf_shape), what="y", rtol=0.0)


# -- reductions ------------------------------------------------------------------------------

REDUCTIONS: dict[str, Callable[..., Array]] = {"sum": np.sum, "mean": np.mean, "max": np.max}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@given(op=operands, seed=seeds, data=st.data())
def test_reduction_backward_matches_central_differences(
    name: str, op: Operand, seed: int, data: st.DataObject
) -> None:
    n = len(op.shape)
    dim = data.draw(st.none() | st.integers(-n, n - 1), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim") if dim is not None else False
    rng = np.random.default_rng(seed)

    def f_mt(x: Tensor) -> Tensor:
        return getattr(x, name)(dim, keepdim)

    def f_np(x: Array) -> Array:
        return REDUCTIONS[name](x, axis=dim, keepdims=keepdim)

    check_backward(f_mt, f_np, [op], [distinct(rng, op.leaf_shape, ANY)], rng)


def test_max_splits_the_gradient_evenly_between_ties() -> None:
    x = tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    assert_grad(x, np.array([0.0, 0.5, 0.5]), rtol=0.0)

    y = tensor([[2.0, 2.0, 1.0], [0.0, 5.0, 5.0], [4.0, 4.0, 4.0]], requires_grad=True)
    (y.max(dim=1) * tensor([1.0, 2.0, 3.0])).sum().backward()
    want = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    assert_grad(y, want, what="y", rtol=1e-12)

    z = tensor([[1.0, 3.0], [1.0, 2.0], [0.0, 3.0]], requires_grad=True)
    (z.max(dim=0, keepdim=True) * tensor([[2.0, 6.0]])).sum().backward()
    assert_grad(z, np.array([[1.0, 3.0], [1.0, 0.0], [0.0, 3.0]]), what="z", rtol=1e-12)

    t = tensor([[1.0, 7.0], [7.0, 7.0]], requires_grad=True)
    (t.permute(1, 0).max() * 8.0).backward()
    assert_grad(t, np.array([[0.0, 8.0 / 3.0], [8.0 / 3.0, 8.0 / 3.0]]), what="t", rtol=1e-12)


def test_sum_and_mean_known_gradients() -> None:
    x = tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    (x.sum(dim=0) * tensor([1.0, 10.0, 100.0])).sum().backward()
    assert_grad(x, np.array([[1.0, 10.0, 100.0], [1.0, 10.0, 100.0]]), rtol=0.0)
    y = tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    (y.mean(dim=1, keepdim=True) * tensor([[3.0], [6.0]])).sum().backward()
    assert_grad(y, np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]), what="y", rtol=1e-12)
    z = tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (z.sum() * 5.0).backward()
    assert_grad(z, np.full((2, 2), 5.0), what="z", rtol=0.0)


# -- layout: permute, transpose, view, contiguous copies, reshape -----------------------------

LAYOUTS = [
    "flat",
    "reversed",
    "row",
    "trailing-one",
    "transpose",
    "permute-reversed",
    "view-then-permute",
]


def layout_case(kind: str, shape: Shape) -> tuple[Callable[[Tensor], Tensor], Callable[..., Array]]:
    n = len(shape)
    backwards = tuple(reversed(shape))
    reverse_order = tuple(reversed(range(n)))
    if kind == "flat":
        return lambda x: x.contiguous().view(-1), lambda x: x.reshape(-1)
    if kind == "reversed":
        return lambda x: x.contiguous().view(*backwards), lambda x: x.reshape(backwards)
    if kind == "row":
        return lambda x: x.reshape(1, -1), lambda x: x.reshape(1, -1)
    if kind == "trailing-one":
        return lambda x: x.contiguous().view(*shape, 1), lambda x: x.reshape((*shape, 1))
    if kind == "transpose":
        return lambda x: x.transpose(0, -1), lambda x: np.swapaxes(x, 0, -1)
    if kind == "permute-reversed":
        return lambda x: x.permute(*reverse_order), lambda x: np.transpose(x, reverse_order)
    # The permute's backward hands the view's backward a non-contiguous gradient.
    return (
        lambda x: x.contiguous().view(*backwards).permute(*reverse_order),
        lambda x: np.transpose(x.reshape(backwards), reverse_order),
    )


@pytest.mark.parametrize("kind", LAYOUTS)
@given(op=operands, seed=seeds)
def test_layout_backward_matches_central_differences(kind: str, op: Operand, seed: int) -> None:
    f_mt, f_np = layout_case(kind, op.shape)
    rng = np.random.default_rng(seed)
    check_backward(f_mt, f_np, [op], [distinct(rng, op.leaf_shape, ANY)], rng)


def test_permute_of_three_dimensions_routes_the_gradient_back() -> None:
    # The inverse of (1, 2, 0) is (2, 0, 1): a backward that reuses the order is caught.
    x = from_numpy(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
    w = np.arange(24.0).reshape(3, 4, 2) + 1.0
    (x.permute(1, 2, 0) * from_numpy(w)).sum().backward()
    assert_grad(x, np.transpose(w, (2, 0, 1)), rtol=0.0)
    y = from_numpy(np.arange(6.0).reshape(2, 3), requires_grad=True)
    v = from_numpy(np.arange(6.0).reshape(3, 2) * 10.0)
    (y.permute(1, 0).contiguous().view(6) * v.view(6)).sum().backward()
    assert_grad(y, np.arange(6.0).reshape(3, 2).T * 10.0, what="y", rtol=0.0)


# -- matrix product --------------------------------------------------------------------------


@st.composite
def matmul_pairs(draw: st.DrawFn) -> tuple[Operand, Operand]:
    batch_a, batch_b = draw(st.just(((), ())) | broadcast_pairs(2))
    n, m, k = (draw(st.integers(1, 4)) for _ in range(3))
    a = draw(operand_of((*batch_a, n, m)))
    b = draw(operand_of((*batch_b, m, k)))
    return a, b


def swap_last(x: Array) -> Array:
    return np.swapaxes(x, -1, -2)


@given(pair=matmul_pairs(), seed=seeds)
def test_matmul_backward_with_broadcast_batch_dims(
    pair: tuple[Operand, Operand], seed: int
) -> None:
    a, b = pair
    rng = np.random.default_rng(seed)
    arrays = [distinct(rng, a.leaf_shape, ANY), distinct(rng, b.leaf_shape, ANY)]
    check_backward(lambda x, y: x @ y, np.matmul, [a, b], arrays, rng)

    # Closed form: dA = W @ B^T and dB = A^T @ W, summed back to each operand's shape.
    x = from_numpy(arrays[0], requires_grad=True)
    y = from_numpy(arrays[1], requires_grad=True)
    va, vb = a.view_np(arrays[0]), b.view_np(arrays[1])
    w = weights(rng, np.matmul(va, vb).shape)
    ((a.view_mt(x) @ b.view_mt(y)) * from_numpy(w)).sum().backward()
    inverse_a, inverse_b = np.argsort(a.order), np.argsort(b.order)
    want_a = np.transpose(sum_to(w @ swap_last(vb), a.shape), inverse_a)
    want_b = np.transpose(sum_to(swap_last(va) @ w, b.shape), inverse_b)
    assert_grad(x, want_a, what="a", rtol=1e-10)
    assert_grad(y, want_b, what="b", rtol=1e-10)


def test_matmul_batch_broadcast_grads_are_summed_to_the_operand_shapes() -> None:
    rng = np.random.default_rng(5)
    av, bv = rng.normal(size=(2, 1, 3, 4)), rng.normal(size=(5, 4, 2))
    w = rng.normal(size=(2, 5, 3, 2))
    a = from_numpy(av, requires_grad=True)
    b = from_numpy(bv, requires_grad=True)
    ((a @ b) * from_numpy(w)).sum().backward()
    assert_grad(a, (w @ swap_last(bv)).sum(axis=1, keepdims=True), what="a", rtol=1e-10)
    assert_grad(b, (swap_last(av) @ w).sum(axis=0), what="b", rtol=1e-10)


@pytest.mark.parametrize(
    ("shape_a", "shape_b"),
    [((3,), (3, 4)), ((2, 3), (3,)), ((4,), (4,)), ((2, 2, 3), (3,)), ((3,), (2, 3, 4))],
)
def test_matmul_backward_with_vector_operands(shape_a: Shape, shape_b: Shape) -> None:
    rng = np.random.default_rng(11)
    ops = [
        Operand(shape_a, tuple(range(len(shape_a)))),
        Operand(shape_b, tuple(range(len(shape_b)))),
    ]
    arrays = [distinct(rng, shape_a, ANY), distinct(rng, shape_b, ANY)]
    check_backward(lambda x, y: x @ y, np.matmul, ops, arrays, rng)


# -- unbroadcast -----------------------------------------------------------------------------


@st.composite
def unbroadcast_cases(draw: st.DrawFn) -> tuple[Shape, Shape]:
    """(broadcast shape, a strictly smaller input shape that broadcasts to it)."""
    big = draw(shapes)
    cut = draw(st.integers(0, len(big)))
    ones = draw(st.lists(st.booleans(), min_size=len(big) - cut, max_size=len(big) - cut))
    small = tuple(1 if one else s for s, one in zip(big[cut:], ones, strict=True))
    if small == big:  # make it strictly smaller: drop the leading dimension
        small = small[1:]
    return big, small


@given(case=unbroadcast_cases(), seed=seeds, data=st.data())
def test_unbroadcast_sums_back_to_the_input_shape(
    case: tuple[Shape, Shape], seed: int, data: st.DataObject
) -> None:
    big, small = case
    rng = np.random.default_rng(seed)
    order = tuple(data.draw(st.permutations(range(len(big))), label="grad layout"))
    op = Operand(big, order)
    leaf = weights(rng, op.leaf_shape)
    grad = op.view_mt(from_numpy(leaf))  # possibly a non-contiguous gradient
    got = exact_tensor(unbroadcast(grad, small), what="unbroadcast(...)")
    want = sum_to(op.view_np(leaf), small)
    assert got.shape == small
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_unbroadcast_values() -> None:
    g = from_numpy(np.arange(6.0).reshape(2, 3))
    got = exact_tensor(unbroadcast(g, (1,)))
    assert got.shape == (1,)
    np.testing.assert_allclose(got, [15.0])
    got = exact_tensor(unbroadcast(g, ()))
    assert got.shape == ()
    np.testing.assert_allclose(got, 15.0)
    got = exact_tensor(unbroadcast(g, (2, 1)))
    np.testing.assert_allclose(got, [[3.0], [12.0]])
    got = exact_tensor(unbroadcast(g, (3,)))
    np.testing.assert_allclose(got, [3.0, 5.0, 7.0])
    # A non-contiguous gradient that loses only a leading dimension of size 1.
    p = from_numpy(np.arange(6.0).reshape(1, 3, 2)).permute(0, 2, 1)
    got = exact_tensor(unbroadcast(p, (2, 3)))
    np.testing.assert_allclose(got, np.arange(6.0).reshape(3, 2).T)
    h = from_numpy(np.arange(24.0).reshape(2, 3, 4))
    got = exact_tensor(unbroadcast(h, (3, 1)))
    np.testing.assert_allclose(got, np.arange(24.0).reshape(2, 3, 4).sum(axis=(0, 2))[:, None])


def test_broadcast_grads_through_the_tensor_api() -> None:
    a = from_numpy(np.arange(3.0).reshape(3, 1), requires_grad=True)
    b = from_numpy(np.arange(4.0), requires_grad=True)
    (a + b).sum().backward()
    assert_grad(a, np.full((3, 1), 4.0), what="a", rtol=0.0)
    assert_grad(b, np.full((4,), 3.0), what="b", rtol=0.0)

    c = from_numpy(np.array([[1.0], [2.0], [3.0]]), requires_grad=True)
    d = from_numpy(np.array([[10.0, 20.0, 30.0, 40.0]]), requires_grad=True)
    (c * d).sum().backward()
    assert_grad(c, np.full((3, 1), 100.0), what="c", rtol=0.0)
    assert_grad(d, np.full((1, 4), 6.0), what="d", rtol=0.0)

    e = tensor([2.0], requires_grad=True)
    m = from_numpy(np.arange(6.0).reshape(2, 3))
    (e * m).sum().backward()
    assert_grad(e, np.array([15.0]), what="e", rtol=0.0)

    s = tensor(3.0, requires_grad=True)  # a 0-d leaf
    x = from_numpy(np.arange(6.0).reshape(2, 3), requires_grad=True)
    (x * s).sum().backward()
    assert_grad(s, np.array(15.0), what="s", rtol=0.0)
    assert_grad(x, np.full((2, 3), 3.0), rtol=0.0)

    y = from_numpy(np.arange(6.0).reshape(2, 3), requires_grad=True)
    (y * 2.0 - 1.0).sum().backward()  # numbers become 0-d constants
    assert_grad(y, np.full((2, 3), 2.0), what="y", rtol=0.0)


# -- identity-like operations and chain_rule on broadcast products ---------------------------


IDENTITY_LIKE = {
    "view of the same shape": lambda t: t.view(*t.shape),
    "reshape to the same shape": lambda t: t.reshape(*t.shape),
    "the identity permute": lambda t: t.permute(0, 1),
    "transpose twice": lambda t: t.transpose().transpose(),
    "contiguous copy of a transposed view": lambda t: t.transpose().contiguous(),
}


@pytest.mark.parametrize("name", list(IDENTITY_LIKE))
def test_identity_like_operations_are_new_tensors_with_their_own_history(name: str) -> None:
    """Each operation that may give back its input's values unchanged makes a new tensor
    with a history of its own (the input stays a leaf), and the gradient of
    ``(f(x) * w).sum()`` is ``w`` (transposed back for the copy). Planted bug caught:
    Tensor.view returning the tensor itself when the shape is unchanged (no View in the
    graph)."""
    v = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [3.0, -2.5, 1.25]])
    w = np.arange(1.0, 10.0).reshape(3, 3)
    x = from_numpy(v, requires_grad=True)
    y = IDENTITY_LIKE[name](x)
    assert y is not x, f"{name} gave back the input itself"
    assert x.history is None and x.is_leaf(), f"{name}: the input lost its leafness"
    assert y.history is not None and y.requires_grad is True, f"{name}: no history"
    transposed = name.startswith("contiguous")
    np.testing.assert_array_equal(exact_tensor(y), v.T if transposed else v)
    (y * from_numpy(w)).sum().backward()
    assert_grad(x, w.T if transposed else w, what=name, rtol=0.0)


CHAIN_CASES = [  # (x shape, y shape): the product broadcasts both
    ((3, 1), (1, 4)),
    ((4,), (2, 3, 1)),
    ((), (2, 3)),
    ((2, 1, 3), (4, 1)),
    ((2, 3), (2, 3)),
]


@pytest.mark.parametrize(("x_shape", "y_shape"), CHAIN_CASES, ids=str)
def test_chain_rule_of_a_broadcast_product_gives_each_input_its_own_shape(
    x_shape: Shape, y_shape: Shape
) -> None:
    """``chain_rule`` called directly (not through ``backward``) on ``x * y`` and
    ``x + y`` whose shapes broadcast: each pair is ``(input, gradient)`` with the
    gradient summed back to that input's shape (``d * y`` and ``d`` summed over the
    broadcast dimensions), and a constant input is left out. Planted bug caught:
    Variable.fitted_chain_rule returning the gradients as backward gave them (in the
    broadcast shape), which backward() never showed because it fits them inline."""
    rng = np.random.default_rng(len(x_shape) * 10 + len(y_shape))
    xv, yv = rng.normal(size=x_shape), rng.normal(size=y_shape)
    dv = rng.normal(size=np.broadcast_shapes(x_shape, y_shape))
    x = from_numpy(xv, requires_grad=True)
    y = from_numpy(yv, requires_grad=True)
    d = from_numpy(dv)
    for op, dx, dy in (("mul", dv * yv, dv * xv), ("add", dv, dv)):
        z = x * y if op == "mul" else x + y
        pairs = z.chain_rule(d)
        assert len(pairs) == 2 and pairs[0][0] is x and pairs[1][0] is y, op
        for (leaf, grad), want, shape in ((pairs[0], dx, x_shape), (pairs[1], dy, y_shape)):
            got = exact_tensor(grad, f"{op}: d/d{'x' if leaf is x else 'y'}")
            assert got.shape == shape, f"{op}: gradient of shape {got.shape} for {shape}"
            np.testing.assert_allclose(got, sum_to(want, shape), rtol=1e-12, atol=1e-12)
        constant = from_numpy(yv)
        pairs = (x * constant).chain_rule(d)
        assert len(pairs) == 1 and pairs[0][0] is x
        got = exact_tensor(pairs[0][1], "d/dx with a constant factor")
        np.testing.assert_allclose(got, sum_to(dv * yv, x_shape), rtol=1e-12, atol=1e-12)


# -- the graph: accumulation, reuse, retain_graph, constants -----------------------------------


def test_gradients_accumulate_over_backward_calls() -> None:
    v = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    x = from_numpy(v, requires_grad=True)
    (x * x).sum().backward()
    assert_grad(x, 2.0 * v, rtol=1e-12)
    (x * 3.0).exp().sum().backward()
    assert_grad(x, 2.0 * v + 3.0 * np.exp(3.0 * v), rtol=1e-12)
    x.zero_grad_()
    x.tanh().sum().backward()
    assert_grad(x, 1.0 - np.tanh(v) ** 2, rtol=1e-12)


@given(op=operands, seed=seeds)
def test_a_tensor_used_twice_collects_both_uses(op: Operand, seed: int) -> None:
    rng = np.random.default_rng(seed)

    def f_mt(x: Tensor) -> Tensor:
        t = x.tanh()
        return x * x + x.exp() * x + t * t + t

    def f_np(x: Array) -> Array:
        t = np.tanh(x)
        return x * x + np.exp(x) * x + t * t + t

    check_backward(f_mt, f_np, [op], [distinct(rng, op.leaf_shape, ANY)], rng)


def test_retain_graph_allows_a_second_backward() -> None:
    v = np.array([0.5, 1.0, 2.0])
    x = from_numpy(v, requires_grad=True)
    y = (x.log() * x.exp()).sum()
    once = 1.0 / v * np.exp(v) + np.log(v) * np.exp(v)
    y.backward(retain_graph=True)
    assert_grad(x, once, rtol=1e-12)
    y.backward(retain_graph=True)
    assert_grad(x, 2.0 * once, rtol=1e-12)
    y.backward()  # still there; this one frees the saved values
    assert_grad(x, 3.0 * once, rtol=1e-12)
    with pytest.raises(GraphReleasedError, match="retain_graph"):
        y.backward()


def test_backward_frees_saved_values_by_default() -> None:
    x = tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = (x.sigmoid() * x).sum()
    y.backward()
    first = read_grad(x, "x")
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    s = 1.0 / (1.0 + np.exp(-v))
    np.testing.assert_allclose(first, s * (1.0 - s) * v + s, rtol=1e-12)
    with pytest.raises(GraphReleasedError):
        y.backward()


def test_constants_get_no_gradient() -> None:
    v = np.array([[1.0, -2.0], [0.5, 3.0]])
    x = from_numpy(v, requires_grad=True)
    c = from_numpy(np.array([[2.0, 3.0], [4.0, 5.0]]))
    ((x * c + c).exp() * c).sum().backward()
    assert c.grad is None
    cv = np.array([[2.0, 3.0], [4.0, 5.0]])
    assert_grad(x, np.exp(v * cv + cv) * cv * cv, rtol=1e-12)


def test_values_made_under_no_grad_are_constants() -> None:
    v = np.array([1.0, 2.0, 3.0])
    x = from_numpy(v, requires_grad=True)
    with no_grad():
        c = x * 3.0
    assert c.requires_grad is False
    (x * c).sum().backward()  # d/dx of x * c with c held constant is c = 3x, not 6x
    assert_grad(x, 3.0 * v, rtol=0.0)


def test_backward_with_an_explicit_gradient() -> None:
    v = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    w = np.array([[1.0, -1.0, 0.5], [2.0, 0.0, -3.0]])
    x = from_numpy(v, requires_grad=True)
    (x * x).backward(from_numpy(w))
    assert_grad(x, 2.0 * v * w, rtol=0.0)
    b = from_numpy(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    (x + b).backward(from_numpy(w))
    assert_grad(b, w.sum(axis=0), what="b", rtol=0.0)
