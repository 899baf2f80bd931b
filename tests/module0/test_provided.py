"""Provided (ungraded) parts of stage 0: typed errors, no_grad, Context release."""

from __future__ import annotations

import numpy as np
import pytest

from module0.autodiff import Context, grad_mode, no_grad
from module0.errors import ForwardTypeError, GraphReleasedError, MiniTorchError
from module0.optim import SGD, Adam
from module0.scalar import Scalar, ScalarFunction


class ReturnsInt(ScalarFunction):
    @staticmethod
    def forward(ctx: Context, a: float) -> float:
        return int(a)  # type: ignore[return-value]


class ReturnsTuple(ScalarFunction):
    @staticmethod
    def forward(ctx: Context, a: float, b: float) -> float:
        return (a, b)  # type: ignore[return-value]


def test_forward_returning_a_non_float_is_a_typed_error() -> None:
    with pytest.raises(ForwardTypeError, match=r"ReturnsInt\.forward must return a float.*int"):
        ReturnsInt.apply(Scalar(2.5))
    with pytest.raises(ForwardTypeError, match="tuple"):
        ReturnsTuple.apply(Scalar(1.0), 2.0)
    with pytest.raises(ForwardTypeError):  # also when no gradient is needed
        ReturnsInt.apply(Scalar(2.5, requires_grad=False))
    assert issubclass(ForwardTypeError, TypeError)
    assert issubclass(ForwardTypeError, MiniTorchError)


def test_operations_reject_non_numbers() -> None:
    with pytest.raises(TypeError, match="str"):
        ReturnsInt.apply("3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="constant number"):
        Scalar(2.0) ** Scalar(2.0)  # type: ignore[operator]


def test_reading_released_saved_values_is_a_typed_error() -> None:
    ctx = Context(ReturnsInt, ())
    ctx.save_for_backward(1.0, 2.0)
    assert ctx.saved_values == (1.0, 2.0)
    assert not ctx.released
    ctx.release()
    assert ctx.released
    with pytest.raises(GraphReleasedError, match="retain_graph=True"):
        _a, _b = ctx.saved_values
    with pytest.raises(GraphReleasedError):
        _ = ctx.saved_values[0]


def test_backward_on_a_constant_explains_itself() -> None:
    with pytest.raises(RuntimeError, match="requires no gradient"):
        Scalar(1.0, requires_grad=False).backward()


def test_optimizers_validate_their_arguments() -> None:
    from module0.module import Parameter

    p = [Parameter(Scalar(1.0))]
    with pytest.raises(ValueError, match="empty parameter list"):
        SGD([])
    with pytest.raises(ValueError, match="momentum"):
        SGD(p, momentum=1.5)
    with pytest.raises(ValueError, match="lr"):
        Adam(p, lr=-1.0)


def test_no_grad_records_no_history_and_restores_the_mode() -> None:
    w = Scalar(0.5)
    with no_grad():
        y = ReturnsFloat.apply(w, 3.0)
        assert not grad_mode.enabled
    assert y.data == 1.5
    assert y.history is None and not y.requires_grad
    assert grad_mode.enabled
    with pytest.raises(ZeroDivisionError), no_grad():
        _ = 1 / 0
    assert grad_mode.enabled
    z = ReturnsFloat.apply(w, 3.0)
    assert z.history is not None and z.history.inputs[0] is w


class ReturnsFloat(ScalarFunction):
    @staticmethod
    def forward(ctx: Context, a: float, b: float) -> float:
        ctx.save_for_backward(a, b)
        return a * b


class Affine3(ScalarFunction):
    """``a * b + c``: three inputs, so ``apply`` takes its general path."""

    @staticmethod
    def forward(ctx: Context, a: float, b: float, c: float) -> float:
        ctx.save_for_backward(a, b)
        return a * b + c


class ReturnsNumpyFloat(ScalarFunction):
    @staticmethod
    def forward(ctx: Context, a: float) -> float:
        return np.float64(2.0 * a)  # type: ignore[return-value]


def test_apply_records_what_the_constructors_would() -> None:
    """``apply`` builds a recorded result without ``__init__``: every slot is set."""
    w = Scalar(0.5, name="w")
    for y, inputs in (
        (ReturnsFloat.apply(w, 3.0), 2),
        (ReturnsFloat.apply(2.0, w), 2),
        (Affine3.apply(w, 3.0, Scalar(1.0, requires_grad=False)), 3),
    ):
        ctx = y.history
        assert isinstance(ctx, Context) and type(y) is Scalar
        assert len(ctx.inputs) == inputs and all(type(v) is Scalar for v in ctx.inputs)
        assert any(v is w for v in ctx.inputs)
        assert [v.requires_grad for v in ctx.inputs].count(True) == 1
        assert y.requires_grad and y.derivative is None and y.name is None
        assert y.unique_id > w.unique_id and not ctx.released
        assert y.is_leaf() is False and y.parents == ctx.inputs
    assert Affine3.apply(w, 3.0, 1.0).data == 2.5
    assert Affine3.apply(w, 3.0, 1.0).history.saved_values == (0.5, 3.0)  # type: ignore[union-attr]
    assert type(ReturnsNumpyFloat.apply(w).data) is float  # a float, not np.float64
    assert ReturnsNumpyFloat.apply(w).data == 1.0
    constant = Affine3.apply(1.0, 2.0, 3.0)
    assert constant.data == 5.0 and constant.history is None and not constant.requires_grad
    with pytest.raises(TypeError, match="Affine3 takes Scalars or numbers, got str"):
        Affine3.apply(w, "2", 1.0)  # type: ignore[arg-type]
