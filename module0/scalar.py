"""Task 0.4 and 0.5: Scalar, a float that records how it was computed, and the
ScalarFunctions that make new Scalars (forward) and send derivatives back (backward).

>>> x = Scalar(2.0)
>>> y = x * x + 3 * x
>>> y.backward()
>>> x.derivative
7.0
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from numbers import Real
from typing import ClassVar, Union

from module0 import operators
from module0.autodiff import (
    Context,
    Variable,
    backpropagate,
    grad_mode,
    next_unique_id,
)
from module0.errors import ForwardTypeError

ScalarLike = Union[float, int, "Scalar"]

_new = object.__new__


class Scalar(Variable):
    """A float in a computation graph.

    ``Scalar(v)`` is a leaf that receives a derivative when something computed from it
    calls :meth:`backward`; ``Scalar(v, requires_grad=False)`` is a constant. Plain numbers
    mixed into arithmetic (``2 * x``) become constants.
    """

    __slots__ = ("data", "derivative", "history", "name", "requires_grad", "unique_id")

    def __init__(
        self,
        v: float,
        history: Context | None = None,
        name: str | None = None,
        requires_grad: bool = True,
    ) -> None:
        self.data: float = float(v)
        self.history = history
        self.requires_grad = requires_grad or history is not None
        self.derivative: float | None = None
        self.name = name
        self.unique_id = next_unique_id()

    def __repr__(self) -> str:
        label = f", name={self.name!r}" if self.name else ""
        return f"Scalar({self.data!r}{label})"

    def __hash__(self) -> int:
        return self.unique_id

    # -- the engine's hooks -------------------------------------------------------

    def accumulate_derivative(self, d: float) -> None:
        """Add ``d`` to this leaf's derivative (which starts as None)."""
        if not self.is_leaf():
            raise ValueError("only leaf Scalars accumulate derivatives")
        self.derivative = d if self.derivative is None else self.derivative + d

    @property
    def grad(self) -> float | None:
        """PyTorch's name for :attr:`derivative`."""
        return self.derivative

    @grad.setter
    def grad(self, value: float | None) -> None:
        self.derivative = value

    def backward(self, d_output: float | None = None, retain_graph: bool = False) -> None:
        """Backpropagate from this Scalar (``d_output`` defaults to 1.0).

        Each leaf's ``derivative`` is increased by d self / d leaf (times ``d_output``).
        The graph's saved values are freed afterwards unless ``retain_graph`` is set.
        """
        if not self.requires_grad:
            raise RuntimeError(
                f"backward() on {self!r}, which requires no gradient: no leaf it depends "
                "on wants a derivative"
            )
        backpropagate(self, 1.0 if d_output is None else float(d_output), retain_graph)

    def detach(self) -> Scalar:
        """The same value as a constant, cut off from the graph."""
        return Scalar(self.data, requires_grad=False)

    # -- arithmetic -----------------------------------------------------------------

    def __add__(self, b: ScalarLike) -> Scalar:
        return Add.apply(self, b)

    def __radd__(self, b: ScalarLike) -> Scalar:
        return Add.apply(b, self)

    def __sub__(self, b: ScalarLike) -> Scalar:
        return Add.apply(self, Neg.apply(b))

    def __rsub__(self, b: ScalarLike) -> Scalar:
        return Add.apply(b, Neg.apply(self))

    def __mul__(self, b: ScalarLike) -> Scalar:
        return Mul.apply(self, b)

    def __rmul__(self, b: ScalarLike) -> Scalar:
        return Mul.apply(b, self)

    def __truediv__(self, b: ScalarLike) -> Scalar:
        return Mul.apply(self, Inv.apply(b))

    def __rtruediv__(self, b: ScalarLike) -> Scalar:
        return Mul.apply(b, Inv.apply(self))

    def __neg__(self) -> Scalar:
        return Neg.apply(self)

    def __pow__(self, n: float) -> Scalar:
        if isinstance(n, Scalar) or not isinstance(n, Real):
            raise TypeError(
                f"Scalar ** n needs a constant number n, got {type(n).__name__}; "
                "for a variable exponent write (n * x.log()).exp()"
            )
        return Pow.apply(self, n)

    def __lt__(self, b: ScalarLike) -> Scalar:
        return LT.apply(self, b)

    def __gt__(self, b: ScalarLike) -> Scalar:
        return LT.apply(b, self)

    def __eq__(self, b: ScalarLike) -> Scalar:  # type: ignore[override]
        return EQ.apply(self, b)

    def __bool__(self) -> bool:
        return bool(self.data)

    def __float__(self) -> float:
        return self.data

    def log(self) -> Scalar:
        """Natural log (see :func:`module0.operators.log` for 0 and below)."""
        return Log.apply(self)

    def exp(self) -> Scalar:
        return Exp.apply(self)

    def sigmoid(self) -> Scalar:
        return Sigmoid.apply(self)

    def relu(self) -> Scalar:
        return ReLU.apply(self)

    def tanh(self) -> Scalar:
        return Tanh.apply(self)


class ScalarFunction:
    """A differentiable operation on floats.

    Subclasses define ``forward(ctx, *floats) -> float`` and
    ``backward(ctx, d_output) -> float | tuple[float, ...]`` (one derivative per input);
    :meth:`apply` runs forward on Scalars and records the Context backward needs.
    """

    forward: ClassVar[Callable[..., float]]
    backward: ClassVar[Callable[..., float | tuple[float, ...]]]

    @classmethod
    def apply(cls, *vals: ScalarLike) -> Scalar:
        """Run ``forward`` on the values of ``vals`` and wrap the result in a Scalar.

        The engine's hot path, one call per operation. It is written out for one and
        two inputs (every function here); numbers become constants (:meth:`_scalar`).
        A recorded operation's Context and result are built with ``object.__new__``
        and direct slot stores, which skips two ``__init__`` calls per operation (about
        100 ns of each operation's 800 in Python 3.11): they end up exactly as
        ``Context(cls, inputs)`` and ``Scalar(out, ctx)`` would make them."""
        record = grad_mode.enabled
        ctx: Context | None = None
        if len(vals) == 2:
            a, b = vals
            if type(a) is not Scalar:
                a = cls._scalar(a)
            if type(b) is not Scalar:
                b = cls._scalar(b)
            if record and (a.requires_grad or b.requires_grad):
                ctx = _new(Context)
                ctx.last_fn, ctx.inputs, ctx.saved_values = cls, (a, b), ()
                out = cls.forward(ctx, a.data, b.data)
            else:
                out = cls.forward(Context(cls), a.data, b.data)
        elif len(vals) == 1:
            (a,) = vals
            if type(a) is not Scalar:
                a = cls._scalar(a)
            if record and a.requires_grad:
                ctx = _new(Context)
                ctx.last_fn, ctx.inputs, ctx.saved_values = cls, (a,), ()
                out = cls.forward(ctx, a.data)
            else:
                out = cls.forward(Context(cls), a.data)
        else:
            inputs = tuple(map(cls._scalar, vals))
            raw = [v.data for v in inputs]
            if record and any(v.requires_grad for v in inputs):
                ctx = Context(cls, inputs)
                out = cls.forward(ctx, *raw)
            else:
                out = cls.forward(Context(cls), *raw)
        if not isinstance(out, float):
            raise ForwardTypeError(
                f"{cls.__name__}.forward must return a float, but returned "
                f"{type(out).__name__} {out!r}"
            )
        if ctx is None:
            return Scalar(out, requires_grad=False)
        result: Scalar = _new(Scalar)
        result.data = out if type(out) is float else float(out)  # a NumPy float: a float
        result.history, result.requires_grad = ctx, True
        result.derivative = result.name = None
        result.unique_id = next_unique_id()
        return result

    @classmethod
    def _scalar(cls, v: ScalarLike) -> Scalar:
        """``v`` as a Scalar: a number becomes a constant; a TypeError names anything else."""
        if isinstance(v, Scalar):
            return v
        if isinstance(v, Real):
            return Scalar(v, requires_grad=False)
        raise TypeError(f"{cls.__name__} takes Scalars or numbers, got {type(v).__name__}: {v!r}")


class Add(ScalarFunction):
    """``a + b``."""

    @staticmethod
    def forward(ctx: Context, a: float, b: float) -> float:
        # BEGIN SOLUTION 0.4
        return a + b
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> tuple[float, float]:
        # BEGIN SOLUTION 0.5
        return d_output, d_output
        # END SOLUTION


class Log(ScalarFunction):
    """``log(a)``."""

    @staticmethod
    def forward(ctx: Context, a: float) -> float:
        # BEGIN SOLUTION 0.4
        ctx.save_for_backward(a)
        return operators.log(a)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> float:
        # BEGIN SOLUTION 0.5
        (a,) = ctx.saved_values
        return operators.log_back(a, d_output)
        # END SOLUTION


class Mul(ScalarFunction):
    """``a * b``."""

    @staticmethod
    def forward(ctx: Context, a: float, b: float) -> float:
        # BEGIN SOLUTION 0.4
        ctx.save_for_backward(a, b)
        return a * b
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> tuple[float, float]:
        # BEGIN SOLUTION 0.5
        a, b = ctx.saved_values
        return b * d_output, a * d_output
        # END SOLUTION


class Inv(ScalarFunction):
    """``1 / a``."""

    @staticmethod
    def forward(ctx: Context, a: float) -> float:
        # BEGIN SOLUTION 0.4
        ctx.save_for_backward(a)
        return operators.inv(a)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> float:
        # BEGIN SOLUTION 0.5
        (a,) = ctx.saved_values
        return operators.inv_back(a, d_output)
        # END SOLUTION


class Neg(ScalarFunction):
    """``-a``."""

    @staticmethod
    def forward(ctx: Context, a: float) -> float:
        # BEGIN SOLUTION 0.4
        return operators.neg(a)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> float:
        # BEGIN SOLUTION 0.5
        return operators.neg(d_output)
        # END SOLUTION


class Sigmoid(ScalarFunction):
    """``sigmoid(a)``."""

    @staticmethod
    def forward(ctx: Context, a: float) -> float:
        # BEGIN SOLUTION 0.4
        s = operators.sigmoid(a)
        ctx.save_for_backward(s)
        return s
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> float:
        # BEGIN SOLUTION 0.5
        (s,) = ctx.saved_values
        return d_output * s * (1.0 - s)
        # END SOLUTION


class ReLU(ScalarFunction):
    """``max(a, 0)``."""

    @staticmethod
    def forward(ctx: Context, a: float) -> float:
        # BEGIN SOLUTION 0.4
        ctx.save_for_backward(a)
        return operators.relu(a)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> float:
        # BEGIN SOLUTION 0.5
        (a,) = ctx.saved_values
        return operators.relu_back(a, d_output)
        # END SOLUTION


class Tanh(ScalarFunction):
    """``tanh(a)``."""

    @staticmethod
    def forward(ctx: Context, a: float) -> float:
        # BEGIN SOLUTION 0.4
        t = operators.tanh(a)
        ctx.save_for_backward(t)
        return t
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> float:
        # BEGIN SOLUTION 0.5
        (t,) = ctx.saved_values
        return d_output * (1.0 - t * t)
        # END SOLUTION


class Exp(ScalarFunction):
    """``e ** a``."""

    @staticmethod
    def forward(ctx: Context, a: float) -> float:
        # BEGIN SOLUTION 0.4
        e = operators.exp(a)
        ctx.save_for_backward(e)
        return e
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> float:
        # BEGIN SOLUTION 0.5
        (e,) = ctx.saved_values
        return d_output * e
        # END SOLUTION


class Pow(ScalarFunction):
    """``a ** n`` for a constant exponent ``n`` (no derivative flows to ``n``)."""

    @staticmethod
    def forward(ctx: Context, a: float, n: float) -> float:
        # BEGIN SOLUTION 0.4
        ctx.save_for_backward(a, n)
        return operators.power(a, n)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> tuple[float, float]:
        # BEGIN SOLUTION 0.5
        a, n = ctx.saved_values
        return d_output * n * operators.power(a, n - 1.0), 0.0
        # END SOLUTION


class LT(ScalarFunction):
    """``1.0 if a < b else 0.0`` (``a > b`` is ``LT(b, a)``)."""

    @staticmethod
    def forward(ctx: Context, a: float, b: float) -> float:
        # BEGIN SOLUTION 0.4
        return operators.lt(a, b)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> tuple[float, float]:
        # BEGIN SOLUTION 0.5
        return 0.0, 0.0
        # END SOLUTION


class EQ(ScalarFunction):
    """``1.0 if a == b else 0.0``."""

    @staticmethod
    def forward(ctx: Context, a: float, b: float) -> float:
        # BEGIN SOLUTION 0.4
        return operators.eq(a, b)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d_output: float) -> tuple[float, float]:
        # BEGIN SOLUTION 0.5
        return 0.0, 0.0
        # END SOLUTION


_ROUNDING = 4 * sys.float_info.epsilon
"""Relative rounding error allowed in each value of ``f`` the numerical check reads (a
few roundings of a short chain of operations)."""


def _difference_quotient(
    f: Callable[..., float], values: list[float], arg: int, epsilon: float
) -> tuple[float, float]:
    """Central difference of ``f`` in argument ``arg``, and the error its rounding may
    add: the step is ``epsilon * max(1, |x|)`` (relative for large ``x``, so that
    ``x + step`` differs from ``x``), and the two values of ``f`` are trusted to
    ``_ROUNDING`` of their size. Given code, so the check does not depend on task 0.4."""
    x = values[arg]
    step = epsilon * max(1.0, abs(x))
    plus, minus = list(values), list(values)
    plus[arg], minus[arg] = x + step, x - step
    width = plus[arg] - minus[arg]  # the step as represented, not as asked for
    f_plus, f_minus = f(*plus), f(*minus)
    noise = _ROUNDING * (abs(f_plus) + abs(f_minus)) / width
    return (f_plus - f_minus) / width, noise


def derivative_check(
    f: Callable[..., Scalar],
    *scalars: Scalar,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    epsilon: float = 1e-6,
) -> None:
    """Check backprop against central differences for ``f`` at ``scalars``.

    Runs ``f`` on fresh copies of ``scalars`` (the caller's Scalars stay untouched),
    backpropagates, and compares each argument's derivative ``b`` with the numerical
    estimate ``n``: they must satisfy ``|b - n| <= atol + rtol * |n| + r``, where ``r``
    bounds the rounding error of the estimate (``4 * machine epsilon`` of each value of
    ``f`` it subtracts, divided by the step). The step is ``epsilon * max(1, |x|)``.
    Raises AssertionError naming the argument and both values when they disagree. A
    learner's first tool when a backward looks wrong.
    """
    fresh = [Scalar(s.data, name=s.name) for s in scalars]
    out = f(*fresh)
    if not isinstance(out, Scalar):
        raise TypeError(f"derivative_check: f must return a Scalar, got {type(out).__name__}")
    out.backward()
    values = [s.data for s in scalars]

    def as_float(*xs: float) -> float:
        return f(*(Scalar(x) for x in xs)).data

    name = getattr(f, "__name__", repr(f))
    for i, s in enumerate(fresh):
        numeric, noise = _difference_quotient(as_float, values, i, epsilon)
        backprop = 0.0 if s.derivative is None else s.derivative
        if not abs(backprop - numeric) <= atol + rtol * abs(numeric) + noise:
            raise AssertionError(
                f"derivative_check({name}) at {values}: argument {i} has backprop derivative "
                f"{backprop!r} but central difference {numeric!r}"
            )
