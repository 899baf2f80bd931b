"""Tasks 1.3 and 1.4: the differentiable tensor operations.

Each operation is a :class:`Function` with a ``forward`` (task 1.3) that computes its
result with the backend's kernels, and a ``backward`` (task 1.4) that turns the
gradient of the result into one gradient per tensor input. ``Function.apply`` runs
forward and records a :class:`~module0.autodiff.Context`, the same record stage 0's
Scalars use, so stage 0's ``backpropagate`` differentiates tensors unchanged.

Gradients may come back in the *broadcast* shape of the operation's result; the engine
sums them back to each input's shape with :func:`unbroadcast` (``Tensor.fit_derivative``,
called from ``Tensor.chain_rule``).
"""

from __future__ import annotations

from collections.abc import Callable
from sys import getrefcount
from typing import TYPE_CHECKING, Any, ClassVar

from module0.autodiff import Context, Variable, grad_mode
from module0.errors import ForwardTypeError, MiniTorchError
from module1.tensor_data import DTYPES, ShapeError, TensorData, is_device_array, storage_only
from module1.tensor_ops import matmul_shape

if TYPE_CHECKING:
    from module1.tensor import Tensor


class BackendError(MiniTorchError, TypeError):
    """Tensors of different backends met in one operation."""


class DtypeError(MiniTorchError, TypeError):
    """Tensors of different dtypes met in one operation."""


def _same_dtype(name: str, inputs: tuple[Variable, ...]) -> None:
    """DtypeError naming the operation and both dtypes unless every tensor input has
    one dtype: there is no silent promotion (a float32 model fed float64 data would
    quietly run at float64 speed), so convert with ``.to``, ``.float()``, ``.double()``."""
    first = inputs[0]._tensor._storage.dtype  # type: ignore[attr-defined]
    for i in range(1, len(inputs)):
        dtype = inputs[i]._tensor._storage.dtype  # type: ignore[attr-defined]
        if dtype is not first and dtype != first:
            advice = storage_only.get(first) or storage_only.get(dtype)
            raise DtypeError(
                f"{name}: input 0 is {first} and input {i} is {dtype}; "
                + (advice or "convert one with .to(dtype), .float() or .double()")
            )


def _computable(name: str, first: Variable) -> None:
    """DtypeError naming the operation when its first input is in a storage-only dtype
    (stage 6's float16 and bfloat16): no kernel computes in it."""
    dtype = first._tensor._storage.dtype  # type: ignore[attr-defined]
    if dtype in storage_only:
        raise DtypeError(
            f"{name}: the input is {dtype}, a storage-only dtype; {storage_only[dtype]}"
        )


def _same_backend(name: str, inputs: tuple[Variable, ...]) -> None:
    """BackendError naming the operation and both backends unless every tensor input
    is on one backend: a GPU kernel cannot read host memory, nor a CPU kernel device
    memory, and a silent copy would hide where the time goes."""
    backends = [getattr(t, "backend", None) for t in inputs]
    for i in range(1, len(backends)):
        backend = backends[i]
        if backend is not backends[0]:
            raise BackendError(
                f"{name}: input 0 is on {backends[0]!r} and input {i} on {backend!r}; "
                "make both tensors with the same backend= (tensor(..., backend=...))"
            )


def _references_alone() -> int:
    """What ``getrefcount`` says of an object that one local variable alone refers to
    (2 on CPython 3.11: the variable and the call's argument; newer interpreters may
    borrow the argument's reference)."""
    new = object()
    return getrefcount(new)


_ALONE = _references_alone()


def _wanted(ctx: Context) -> list[bool]:
    """Whether each input of the operation wants a gradient (as PyTorch's
    ``needs_input_grad``); all True for a Context made without inputs (a backward
    called directly)."""
    return [t.requires_grad for t in ctx.inputs] or [True] * 2


dispatch: Callable[[type[Function], tuple[Any, ...]], Tensor | None] | None = None
"""A routing rule a later stage may install: ``Function.apply`` asks it first, and runs
the operation itself where it answers None. Stage 6's ``autocast`` runs matrix products
in half precision this way (as PyTorch's dispatcher does for its autocast)."""


class Function:
    """A differentiable tensor operation.

    Subclasses define ``forward(ctx, *args) -> Tensor`` and ``backward(ctx, d_output)``,
    which returns one gradient per *tensor* argument (a lone Tensor for one; None for an
    input that requires no gradient, which ``chain_rule`` leaves out anyway). Arguments
    that are not tensors (a dimension, a shape, an exponent) are passed to ``forward``
    as they are and get no gradient.
    """

    forward: ClassVar[Callable[..., Tensor]]
    backward: ClassVar[Callable[..., Any]]

    @classmethod
    def apply(cls, *vals: Any) -> Tensor:
        """Run ``forward`` on the tensor arguments detached (same storage, no history;
        a constant is passed as it is) and, when one of them requires a gradient (and
        grad mode is on), attach the operation's Context to the result. A routing rule
        (:data:`dispatch`), when one is installed, answers first."""
        if dispatch is not None:
            routed = dispatch(cls, vals)
            if routed is not None:
                return routed
        # One plain loop, no generators: this runs once per operation.
        inputs: list[Variable] = []
        args = list(vals)
        need_grad = False
        for i, v in enumerate(vals):
            if isinstance(v, Variable):
                if inputs:  # each later input against the first: the same backend, dtype
                    first: Any = inputs[0]
                    if getattr(v, "backend", None) is not first.backend:
                        _same_backend(cls.__name__, (*inputs, v))
                    kind, first_kind = v._tensor._storage.dtype, first._tensor._storage.dtype  # type: ignore[attr-defined]
                    if kind is not first_kind and kind != first_kind:
                        _same_dtype(cls.__name__, (*inputs, v))
                inputs.append(v)
                if v.requires_grad:  # a constant is passed as it is: it has no history
                    need_grad = True
                    args[i] = v.detach()  # type: ignore[attr-defined]
        if storage_only and inputs and cls is not Cast:
            if inputs[0]._tensor._storage.dtype not in DTYPES:  # type: ignore[attr-defined]
                _computable(cls.__name__, inputs[0])
        need_grad = need_grad and grad_mode.enabled
        ctx = Context(cls, tuple(inputs) if need_grad else ())
        out = cls.forward(ctx, *args)
        if not (isinstance(out, Variable) and hasattr(out, "_tensor")):
            raise ForwardTypeError(
                f"{cls.__name__}.forward must return a Tensor, but returned "
                f"{type(out).__name__} {out!r}"
            )
        if not need_grad:
            return out
        if getrefcount(out) == _ALONE:  # nothing but `out` refers to it:
            out.history, out.requires_grad = ctx, True  # a new tensor; attach in place
            return out
        return out._attach(ctx)  # something else holds it (an input returned as it is)


# ## Unary operations


class Neg(Function):
    """``-a``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        return a.backend.neg_map(a)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.4
        return d.backend.neg_map(d)
        # END SOLUTION


class Inv(Function):
    """``1 / a``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        ctx.save_for_backward(a)
        return a.backend.inv_map(a)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.4
        (a,) = ctx.saved_values
        return d.backend.inv_back_zip(a, d)
        # END SOLUTION


class Sigmoid(Function):
    """``sigmoid(a)``, entry by entry."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        s = a.backend.sigmoid_map(a)
        ctx.save_for_backward(s)
        return s
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.4
        (s,) = ctx.saved_values
        f = d.backend
        ds = f.mul_zip(d, s)  # d * s * (1 - s) = d*s - d*s*s
        return f.add_zip(ds, f.neg_map(f.mul_zip(ds, s)))
        # END SOLUTION


class ReLU(Function):
    """``max(a, 0)``, entry by entry."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        ctx.save_for_backward(a)
        return a.backend.relu_map(a)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.4
        (a,) = ctx.saved_values
        return d.backend.relu_back_zip(a, d)
        # END SOLUTION


class Tanh(Function):
    """``tanh(a)``, entry by entry."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        t = a.backend.tanh_map(a)
        ctx.save_for_backward(t)
        return t
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.4
        (t,) = ctx.saved_values
        f = d.backend
        return f.add_zip(d, f.neg_map(f.mul_zip(d, f.mul_zip(t, t))))  # d * (1 - t^2)
        # END SOLUTION


class Log(Function):
    """Natural log, entry by entry."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        ctx.save_for_backward(a)
        return a.backend.log_map(a)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.4
        (a,) = ctx.saved_values
        return d.backend.log_back_zip(a, d)
        # END SOLUTION


class Exp(Function):
    """``e ** a``, entry by entry."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        e = a.backend.exp_map(a)
        ctx.save_for_backward(e)
        return e
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.4
        (e,) = ctx.saved_values
        return d.backend.mul_zip(d, e)
        # END SOLUTION


class Pow(Function):
    """``a ** n`` for a constant float exponent ``n`` (no gradient flows to ``n``)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, n: float) -> Tensor:
        # BEGIN SOLUTION 1.3
        ctx.save_for_backward(a, n)
        return a.backend.pow_zip(a, a.full((), n))
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.4
        a, n = ctx.saved_values
        f = d.backend
        slope = f.pow_zip(a, a.full((), n - 1.0))
        return f.mul_zip(d, f.mul_zip(slope, a.full((), n)))
        # END SOLUTION


# ## Binary operations (inputs broadcast)


class Add(Function):
    """``a + b``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        return a.backend.add_zip(a, b)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor]:
        # BEGIN SOLUTION 1.4
        return d, d
        # END SOLUTION


class Mul(Function):
    """``a * b``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        ctx.save_for_backward(a, b)
        return a.backend.mul_zip(a, b)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor | None, Tensor | None]:
        # BEGIN SOLUTION 1.4
        a, b = ctx.saved_values
        # Only the products whose gradient is wanted (a constant factor gets none).
        want_a, want_b = _wanted(ctx)
        f = d.backend
        return f.mul_zip(d, b) if want_a else None, f.mul_zip(d, a) if want_b else None
        # END SOLUTION


class LT(Function):
    """``a < b`` as 1.0 / 0.0 (its gradient is zero almost everywhere)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        return a.backend.lt_zip(a, b)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor]:
        # BEGIN SOLUTION 1.4
        zero = d.zeros(d.shape)
        return zero, zero
        # END SOLUTION


class EQ(Function):
    """``a == b`` as 1.0 / 0.0 (its gradient is zero almost everywhere)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        return a.backend.eq_zip(a, b)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor]:
        # BEGIN SOLUTION 1.4
        zero = d.zeros(d.shape)
        return zero, zero
        # END SOLUTION


class IsClose(Function):
    """1.0 where ``a`` and ``b`` are close (``operators.is_close``), else 0.0."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        return a.backend.is_close_zip(a, b)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor]:
        # BEGIN SOLUTION 1.4
        zero = d.zeros(d.shape)
        return zero, zero
        # END SOLUTION


# ## Reductions (``dim=None`` reduces over every entry to a 0-d tensor)


def _flat(a: Tensor) -> Tensor:
    """``a``'s entries as a contiguous 1-D tensor (no graph; copies only if needed)."""
    c = a if a._tensor.is_contiguous() else a.backend.id_map(a)
    return c._reshaped((a.size,))


class Sum(Function):
    """Sum over dimension ``dim`` (kept, with size 1), or over everything (0-d result)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int | None) -> Tensor:
        ctx.save_for_backward(a.shape)
        # BEGIN SOLUTION 1.3
        if dim is None:
            return a.backend.add_reduce(_flat(a), 0)._reshaped(())
        return a.backend.add_reduce(a, dim)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (shape,) = ctx.saved_values
        # BEGIN SOLUTION 1.4
        # Every entry of the input contributed once: spread d back over the summed dim.
        return d.backend.id_map(d, d.empty(shape))  # the map writes every entry
        # END SOLUTION


class Max(Function):
    """Maximum over dimension ``dim`` (kept, with size 1), or over everything (0-d)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int | None) -> Tensor:
        # BEGIN SOLUTION 1.3
        f = a.backend
        m = f.max_reduce(_flat(a), 0)._reshaped(()) if dim is None else f.max_reduce(a, dim)
        ctx.save_for_backward(a, m, dim)
        return m
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.4
        # The gradient goes to the entries equal to the maximum, shared evenly on ties.
        a, m, dim = ctx.saved_values
        f = d.backend
        mask = f.eq_zip(a, m)
        count = f.add_reduce(_flat(mask), 0) if dim is None else f.add_reduce(mask, dim)
        return f.mul_zip(mask, f.mul_zip(d, f.inv_map(count)))
        # END SOLUTION


# ## Layout: views, copies, matrix product


class Permute(Function):
    """A view with the dimensions reordered (``order[d]`` becomes dimension ``d``)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, order: tuple[int, ...]) -> Tensor:
        ctx.save_for_backward(order)
        # BEGIN SOLUTION 1.3
        return a._new(a._tensor.permute(*order))
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (order,) = ctx.saved_values
        # BEGIN SOLUTION 1.4
        inverse = [0] * len(order)
        for position, dim in enumerate(order):
            inverse[dim] = position
        return d._new(d._tensor.permute(*inverse))
        # END SOLUTION


class View(Function):
    """The same storage under a new shape with as many entries; the input must be
    contiguous (call ``contiguous()`` first otherwise)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, shape: tuple[int, ...]) -> Tensor:
        if not a._tensor.is_contiguous():
            raise ShapeError(
                f"view{shape} of a non-contiguous tensor (shape {a.shape}, strides "
                f"{a._tensor.strides}); call .contiguous() first"
            )
        ctx.save_for_backward(a.shape)
        # BEGIN SOLUTION 1.3
        return a._reshaped(shape)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (shape,) = ctx.saved_values
        # BEGIN SOLUTION 1.4
        return _flat(d)._reshaped(shape)
        # END SOLUTION


class Copy(Function):
    """A contiguous copy (what ``contiguous()`` uses when a tensor is not)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.3
        return a.backend.id_map(a)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        # BEGIN SOLUTION 1.4
        return d
        # END SOLUTION


class Cast(Function):
    """A copy in another dtype (``Tensor.to``); the gradient goes back in the input's."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, dtype: Any) -> Tensor:
        ctx.save_for_backward(a.dtype)
        return _converted(a, dtype)

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> Tensor:
        (dtype,) = ctx.saved_values
        return _converted(d, dtype)


def _converted(a: Tensor, dtype: Any) -> Tensor:
    """A contiguous copy of ``a`` in ``dtype``: NumPy's cast for storage in host memory
    (a compiled backend would otherwise compile its identity map once more for each
    pair of dtypes: 6 s, in a float32 run that converts its float64 parameters once),
    the backend's identity map for GPU memory."""
    if is_device_array(a._tensor._storage):
        return a.backend.id_map(a, a.empty(a.shape, dtype))
    return a._new(TensorData.contiguous(a.to_numpy(dtype).reshape(-1), a.shape))


def _swap_last(t: Tensor) -> Tensor:
    """A view of ``t`` with its last two dimensions swapped (no graph): ``permute``'s
    result, made without its checks (two per product in every backward)."""
    data = t._tensor
    (*batch, rows, cols), (*steps, row, col) = data.shape, data.strides
    return t._new(TensorData.view(data._storage, (*batch, cols, rows), (*steps, col, row)))


class MatMul(Function):
    """Batched matrix product ``a @ b`` of tensors with at least two dimensions."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        matmul_shape(a.shape, b.shape)  # ShapeError naming both shapes
        # BEGIN SOLUTION 1.3
        ctx.save_for_backward(a, b)
        return a.backend.matrix_multiply(a, b)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor | None, Tensor | None]:
        # BEGIN SOLUTION 1.4
        a, b = ctx.saved_values
        f = d.backend
        # Only the products whose gradient is wanted (as PyTorch's needs_input_grad):
        # chain_rule leaves constants out, and an MLP's first layer multiplies its data.
        want_a, want_b = _wanted(ctx)
        return (
            f.matrix_multiply(d, _swap_last(b)) if want_a else None,
            f.matrix_multiply(_swap_last(a), d) if want_b else None,
        )
        # END SOLUTION


# ## Task 1.4: gradients back through broadcasting


def unbroadcast(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum ``grad`` (a gradient in a broadcast shape) back to ``shape``, the shape of the
    input that was broadcast: an input entry read by many outputs gets the sum of their
    gradients. Leading dimensions ``shape`` lacks are summed away, and so are the
    dimensions where ``shape`` has size 1 and ``grad`` does not."""
    if grad.shape == shape:
        return grad
    # BEGIN SOLUTION 1.4
    extra = grad.dims - len(shape)
    for dim in range(grad.dims):
        if grad.shape[dim] != 1 and (dim < extra or shape[dim - extra] == 1):
            grad = grad.backend.add_reduce(grad, dim)
    return _flat(grad)._reshaped(shape)
    # END SOLUTION
