"""Provided (ungraded) autodiff plumbing of stage 1: ``grad_check``'s own behaviour,
``requires_grad_`` / ``zero_grad_`` / ``detach`` / ``data``, ``no_grad``, the argument
checks of ``backward``, and released graphs.

Where it can, a test differentiates a Function defined here whose forward and backward
compute with NumPy (``NumpySquare``), so it exercises the provided engine rather than the
graded backward functions. ``grad_check`` backpropagates a weight tensor straight into
``f``'s result, so its tests run no graded Function either.
"""

from __future__ import annotations

import numpy as np
import pytest

from module0.autodiff import Context, grad_mode, no_grad
from module0.errors import ForwardTypeError, GraphReleasedError
from module1.grad_check import grad_check
from module1.tensor import Tensor, from_numpy, ones, tensor, zeros
from module1.tensor_data import ShapeError
from module1.tensor_functions import Function
from tests.strict import exact_tensor


class NumpySquare(Function):
    """``a * a`` computed with NumPy, with the right backward ``2 a d``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        ctx.save_for_backward(a)
        return from_numpy(a.to_numpy() ** 2)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (a,) = ctx.saved_values
        return from_numpy(2.0 * a.to_numpy() * d.to_numpy())


class WrongSquare(NumpySquare):
    """``a * a`` with a wrong backward (``3 a d``)."""

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (a,) = ctx.saved_values
        return from_numpy(3.0 * a.to_numpy() * d.to_numpy())


class SlightlyWrongSquare(NumpySquare):
    """``a * a`` with a backward off by 0.1%."""

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (a,) = ctx.saved_values
        return from_numpy(2.002 * a.to_numpy() * d.to_numpy())


class ReturnsFloat(Function):
    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        return 1.0  # type: ignore[return-value]


VALUES = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


# -- backward's arguments ----------------------------------------------------------------------


def test_backward_on_a_non_scalar_without_a_gradient_names_the_shape() -> None:
    x = zeros(2, 3, requires_grad=True)
    with pytest.raises(ShapeError, match=r"shape \(2, 3\)"):
        x.backward()
    y = NumpySquare.apply(from_numpy(VALUES, requires_grad=True))
    with pytest.raises(ShapeError, match=r"\(2, 3\).*gradient argument"):
        y.backward()
    with pytest.raises(ValueError):  # ShapeError is a ValueError
        y.backward()


def test_backward_rejects_a_gradient_of_another_shape_or_type() -> None:
    x = zeros(2, 3, requires_grad=True)
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(3, 2\)"):
        x.backward(ones(3, 2))
    with pytest.raises(ShapeError, match="float"):
        x.backward(1.0)  # type: ignore[arg-type]
    assert x.grad is None


def test_backward_on_a_constant_explains_itself() -> None:
    with pytest.raises(RuntimeError, match="requires no gradient"):
        tensor([1.0]).backward()


def test_one_entry_tensors_get_the_default_gradient_one() -> None:
    x = tensor([[3.0]], requires_grad=True)
    x.backward()
    np.testing.assert_array_equal(exact_tensor(x.grad), [[1.0]])
    s = tensor(2.0, requires_grad=True)
    NumpySquare.apply(s).backward()
    got = exact_tensor(s.grad)
    assert got.shape == ()
    np.testing.assert_allclose(got, 4.0)


def test_backward_through_a_user_function_with_an_explicit_gradient() -> None:
    x = from_numpy(VALUES, requires_grad=True)
    w = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]])
    y = NumpySquare.apply(x)
    assert y.requires_grad is True
    assert y.is_leaf() is False
    y.backward(from_numpy(w))
    np.testing.assert_allclose(exact_tensor(x.grad), 2.0 * VALUES * w)


# -- released graphs ---------------------------------------------------------------------------


def test_a_second_backward_through_a_released_graph_raises() -> None:
    x = from_numpy(VALUES, requires_grad=True)
    w = from_numpy(np.ones((2, 3)))
    y = NumpySquare.apply(x)
    y.backward(w, retain_graph=True)
    y.backward(w)
    np.testing.assert_allclose(exact_tensor(x.grad), 4.0 * VALUES)
    with pytest.raises(GraphReleasedError, match="retain_graph=True"):
        y.backward(w)
    assert issubclass(GraphReleasedError, RuntimeError)


# -- requires_grad_, zero_grad_, detach, data -----------------------------------------------------


def test_requires_grad_marks_a_leaf_in_place() -> None:
    x = zeros(2)
    assert x.requires_grad is False
    assert x.is_constant() is True
    assert x.requires_grad_() is x
    assert x.requires_grad is True
    assert x.is_leaf() is True
    assert x.requires_grad_(False) is x
    assert x.requires_grad is False
    assert ones(2, requires_grad=True).is_leaf() is True


def test_results_of_operations_cannot_stop_requiring_grad() -> None:
    y = NumpySquare.apply(ones(2, requires_grad=True))
    with pytest.raises(RuntimeError, match="detach"):
        y.requires_grad_(False)
    assert y.requires_grad is True
    assert y.requires_grad_(True) is y


def test_zero_grad_forgets_the_gradient() -> None:
    x = ones(2, 2, requires_grad=True)
    x.zero_grad_()
    assert x.grad is None
    x.backward(from_numpy(np.full((2, 2), 5.0)))
    np.testing.assert_array_equal(exact_tensor(x.grad), np.full((2, 2), 5.0))
    x.zero_grad_()
    assert x.grad is None


def test_detach_shares_values_but_not_the_graph() -> None:
    x = from_numpy(VALUES, requires_grad=True)
    d = x.detach()
    assert d is not x
    assert d.requires_grad is False
    assert d.history is None
    np.testing.assert_array_equal(exact_tensor(d), VALUES)
    d.fill_(7.0)  # the storage is shared: x sees the write
    np.testing.assert_array_equal(exact_tensor(x), np.full((2, 3), 7.0))

    y = NumpySquare.apply(from_numpy(VALUES, requires_grad=True))
    e = y.detach()
    assert y.history is not None
    assert e.history is None
    assert e.requires_grad is False
    np.testing.assert_allclose(exact_tensor(e), VALUES**2)


def test_data_reads_values_and_replaces_them() -> None:
    x = from_numpy(VALUES, requires_grad=True)
    assert x.data.requires_grad is False
    np.testing.assert_array_equal(exact_tensor(x.data), VALUES)
    x.data = from_numpy(np.zeros((2, 3)))
    np.testing.assert_array_equal(exact_tensor(x), np.zeros((2, 3)))
    assert x.requires_grad is True
    with pytest.raises(ShapeError, match=r"\(3, 2\).*\(2, 3\)"):
        x.data = zeros(3, 2)
    with pytest.raises(TypeError, match="Tensor"):
        x.data = VALUES  # type: ignore[assignment]


def test_accumulate_derivative_checks_shape_and_leafness() -> None:
    x = ones(2, requires_grad=True)
    with pytest.raises(ShapeError, match=r"\(3,\).*\(2,\)"):
        x.accumulate_derivative(ones(3))
    y = NumpySquare.apply(x)
    with pytest.raises(ValueError, match="leaf"):
        y.accumulate_derivative(ones(2))


# -- no_grad and Function.apply ----------------------------------------------------------------


def test_no_grad_makes_results_constants_and_restores_the_mode() -> None:
    x = from_numpy(VALUES, requires_grad=True)
    assert grad_mode.enabled is True
    with no_grad():
        assert grad_mode.enabled is False
        y = NumpySquare.apply(x)
        with no_grad():
            pass
        assert grad_mode.enabled is False  # still off after an inner block
    assert grad_mode.enabled is True
    assert y.requires_grad is False
    assert y.history is None
    np.testing.assert_allclose(exact_tensor(y), VALUES**2)
    with pytest.raises(RuntimeError, match="requires no gradient"):
        y.backward(from_numpy(np.ones((2, 3))))


def test_no_grad_restores_the_mode_after_an_exception() -> None:
    with pytest.raises(KeyError), no_grad():
        raise KeyError("boom")
    assert grad_mode.enabled is True


def test_functions_of_constants_record_no_history() -> None:
    y = NumpySquare.apply(from_numpy(VALUES))
    assert y.requires_grad is False
    assert y.history is None
    z = NumpySquare.apply(from_numpy(VALUES, requires_grad=True))
    assert z.history is not None
    assert z.parents[0].requires_grad is True


def test_forward_returning_a_non_tensor_is_a_typed_error() -> None:
    with pytest.raises(ForwardTypeError, match=r"ReturnsFloat\.forward must return a Tensor"):
        ReturnsFloat.apply(ones(2))
    with pytest.raises(TypeError):
        ReturnsFloat.apply(ones(2, requires_grad=True))


def test_tensor_exponents_are_refused() -> None:
    x = ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="constant number"):
        x ** ones(2)  # type: ignore[operator]


# -- a forward that returns one of its inputs unchanged -----------------------------------------


class ReturnsInput(Function):
    """The identity, its forward returning its input itself (the detached tensor
    ``apply`` passes it), as a Function may; backward ``d``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        return a

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        return d


class ReturnsFirst(Function):
    """``a``, returned as it came (a constant is passed as it is); zero gradients."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        return a

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor]:
        return d, from_numpy(np.zeros(d.shape))


class ReturnsSaved(Function):
    """``tanh(a)`` computed with NumPy; forward returns the very tensor it saves for
    backward (as Sigmoid and Tanh do), backward ``(1 - t²) d``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        t = from_numpy(np.tanh(a.to_numpy()))
        ctx.save_for_backward(t)
        return t

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (t,) = ctx.saved_values
        return from_numpy((1.0 - t.to_numpy() ** 2) * d.to_numpy())


def test_a_forward_that_returns_its_input_still_records_the_operation() -> None:
    """The result of a Function whose forward returns its input gets a history of its
    own (the input stays a leaf), and gradients flow through it: ``d``, twice through
    two of them, and under ``NumpySquare`` the known ``2 x w`` and central differences.
    Planted bug caught: Function.apply returning forward's result without a history when
    it is one of the (detached) inputs."""
    x = from_numpy(VALUES, requires_grad=True)
    y = ReturnsInput.apply(x)
    assert y is not x, "the result is the input itself"
    assert x.history is None and x.is_leaf(), "the input lost its leafness"
    assert y.history is not None, "the result has no history"
    assert y.requires_grad is True
    assert y.history.last_fn is ReturnsInput and y.parents[0] is x
    np.testing.assert_array_equal(exact_tensor(y), VALUES)
    w = from_numpy(np.arange(1.0, 7.0).reshape(2, 3))
    y.backward(w)
    np.testing.assert_array_equal(exact_tensor(x.grad), w.to_numpy())
    x.zero_grad_()
    z = ReturnsInput.apply(ReturnsInput.apply(x))
    assert z.parents[0].parents[0] is x
    z.backward(w)
    np.testing.assert_array_equal(exact_tensor(x.grad), w.to_numpy())
    x.zero_grad_()
    NumpySquare.apply(ReturnsInput.apply(x)).backward(w)
    np.testing.assert_allclose(exact_tensor(x.grad), 2.0 * VALUES * w.to_numpy(), rtol=1e-15)
    grad_check(lambda t: NumpySquare.apply(ReturnsInput.apply(t)), from_numpy(VALUES))
    with no_grad():
        c = ReturnsInput.apply(x)
    assert c is not x and c.history is None and c.requires_grad is False, "under no_grad"


def test_a_forward_that_returns_a_constant_input_leaves_it_a_constant() -> None:
    """A constant input is passed to forward as it is; when forward returns it, the
    result is a new tensor with the history, and the constant stays a constant (no
    history, no gradient, requires no gradient). Planted bug caught: Function.apply
    attaching the history to forward's result in place whatever else refers to it."""
    c = from_numpy(VALUES)
    x = from_numpy(-VALUES, requires_grad=True)
    y = ReturnsFirst.apply(c, x)
    assert c.history is None, "the constant input got the operation's history"
    assert c.requires_grad is False, "the constant input now requires a gradient"
    assert y is not c, "the result is the constant input itself"
    assert y.history is not None and y.requires_grad is True, "the result has no history"
    assert y.parents[0] is c and y.parents[1] is x
    np.testing.assert_array_equal(exact_tensor(y), VALUES)
    y.backward(from_numpy(np.ones((2, 3))))
    assert c.grad is None
    np.testing.assert_array_equal(exact_tensor(x.grad), np.zeros((2, 3)))


def test_a_forward_that_returns_what_it_saved_makes_no_cycle() -> None:
    """The tensor a forward saves and returns: the saved one stays a constant (so the
    graph holds no cycle from it back to its own Context), the result is the one with
    the history, and the gradient is ``(1 - tanh²) w``. Planted bug caught: Function.apply
    attaching the history to forward's result in place whatever else refers to it."""
    x = from_numpy(VALUES, requires_grad=True)
    y = ReturnsSaved.apply(x)
    (saved,) = y.history.saved_values
    assert saved is not y, "the result is the saved tensor: its Context refers to it"
    assert saved.history is None and saved.requires_grad is False
    w = from_numpy(np.linspace(-1.0, 1.0, 6).reshape(2, 3))
    y.backward(w)
    want = (1.0 - np.tanh(VALUES) ** 2) * w.to_numpy()
    np.testing.assert_allclose(exact_tensor(x.grad), want, rtol=1e-15)
    grad_check(ReturnsSaved.apply, from_numpy(VALUES))


# -- grad_check -----------------------------------------------------------------------------


class NumpyCube(Function):
    """``a ** 3`` computed with NumPy, with a backward ``3 a² d`` scaled by ``FACTOR``."""

    FACTOR = 1.0

    @classmethod
    def cube(cls, a: Tensor) -> Tensor:
        return cls.apply(a)

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        ctx.save_for_backward(a)
        return from_numpy(a.to_numpy() ** 3)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (a,) = ctx.saved_values
        x = a.to_numpy()
        scale = np.where(np.abs(x) < 1.0, NumpyCube.FACTOR, 1.0)  # only small entries
        return from_numpy(3.0 * x**2 * d.to_numpy() * scale)


class IgnoresGradient(NumpySquare):
    """``a * a`` whose backward forgets to multiply by ``d`` (right for ``d = 1`` only)."""

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (a,) = ctx.saved_values
        return from_numpy(2.0 * a.to_numpy())


def test_grad_check_accepts_a_correct_backward_and_leaves_its_inputs_alone() -> None:
    x = from_numpy(VALUES)  # no requires_grad: grad_check marks its own copies
    grad_check(NumpySquare.apply, x)
    assert x.requires_grad is False and x.grad is None
    np.testing.assert_array_equal(exact_tensor(x), VALUES)
    y = from_numpy(VALUES, requires_grad=True)
    grad_check(lambda a, b: NumpySquare.apply(a) * b, y, from_numpy(VALUES + 1.0))
    assert y.grad is None


def test_grad_check_catches_a_wrong_backward_and_names_input_and_entry() -> None:
    x = from_numpy(VALUES)
    with pytest.raises(AssertionError, match=r"gradient of input 0 \(shape \(2, 3\)\) at \("):
        grad_check(WrongSquare.apply, x)
    y = from_numpy(VALUES + 3.0)
    with pytest.raises(AssertionError, match=r"input 1 .*backward gave .*central difference"):
        grad_check(lambda a, b: NumpySquare.apply(a) + SlightlyWrongSquare.apply(b), x, y)


def test_grad_check_catches_a_backward_that_ignores_the_upstream_gradient() -> None:
    """The output is weighted at random, so ``d`` is not all ones."""
    with pytest.raises(AssertionError, match="gradient of input 0"):
        grad_check(IgnoresGradient.apply, from_numpy(VALUES))


def test_grad_check_is_exact_per_entry_next_to_a_large_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """81³ is half a million: differencing the whole output's sum would bury the small
    entry's derivative (0.1875) in rounding; per-entry differences do not."""
    x = tensor([81.0, 0.25])
    grad_check(NumpyCube.cube, x)
    grad_check(lambda a, b: NumpyCube.cube(a) * b, x, tensor([1.0, 1e-3]))
    monkeypatch.setattr(NumpyCube, "FACTOR", 1.001)  # 0.1% off at the small entry only
    with pytest.raises(AssertionError, match=r"input 0 \(shape \(2,\)\) at \(1,\): backward gave"):
        grad_check(NumpyCube.cube, x)


def test_grad_check_reports_an_input_without_gradient() -> None:
    x = from_numpy(VALUES)
    unused = ones(4)
    with pytest.raises(AssertionError, match=r"input 1 \(shape \(4,\)\) got no gradient"):
        grad_check(lambda a, b: NumpySquare.apply(a), x, unused)
    with pytest.raises(AssertionError, match="does not depend"):
        grad_check(lambda a: from_numpy(VALUES), x)


def test_grad_check_checks_only_the_inputs_in_wrt() -> None:
    x, c = from_numpy(VALUES), from_numpy(VALUES + 1.0)
    grad_check(lambda a, b: NumpySquare.apply(a) + WrongSquare.apply(b), x, c, wrt=[0])
    with pytest.raises(AssertionError, match="input 1"):
        grad_check(lambda a, b: NumpySquare.apply(a) + WrongSquare.apply(b), x, c)


def test_grad_check_keeps_the_layout_and_samples_entries_with_checks() -> None:
    """The copies keep the inputs' strides (a permuted view stays permuted), and with
    ``checks=k`` each input costs 2 k more forward passes (every entry without it)."""
    seen: list[tuple[int, ...]] = []

    def f(a: Tensor) -> Tensor:
        seen.append(a._tensor.strides)
        return NumpySquare.apply(a)

    x = from_numpy(VALUES).permute(1, 0)
    grad_check(f, x)
    assert set(seen) == {(1, 3)} and len(seen) == 1 + 2 * 6
    seen.clear()
    grad_check(f, x, checks=2)
    assert len(seen) == 1 + 2 * 2
