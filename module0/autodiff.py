"""The autodiff engine shared by every stage: scalars now, tensors from stage 1 on.

A value the engine differentiates is a :class:`Variable`. An operation's result keeps,
as its ``history``, the operation's :class:`Context`: the function that ran, its inputs,
and what the function saved for its backward pass. Inputs never point at their results,
so a graph holds no reference cycles and is freed by reference counting as soon as the
last result goes out of scope.

:func:`backpropagate` walks the graph in topological order with an explicit stack and
loop (never recursion), so a chain of any length backpropagates.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from module0.errors import GraphReleasedError

next_unique_id: Callable[[], int] = itertools.count(1).__next__
"""Return a fresh id for a new Variable (cheap, thread-safe under the GIL)."""


class _GradMode:
    """Whether operations record history (process-wide, like a single-threaded PyTorch)."""

    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = True


grad_mode = _GradMode()


@contextmanager
def no_grad() -> Iterator[None]:
    """Within this block operations record no history: results are constants.

    For evaluation (plotting, accuracy) where no backward will follow; it saves the time
    and memory of building a graph.
    """
    previous = grad_mode.enabled
    grad_mode.enabled = False
    try:
        yield
    finally:
        grad_mode.enabled = previous


# ## Task 0.4: central differences


def central_difference(
    f: Callable[..., float], *vals: float, arg: int = 0, epsilon: float = 1e-6
) -> float:
    r"""Estimate :math:`\partial f / \partial x_{arg}` at ``vals`` numerically.

    Uses the symmetric difference :math:`(f(x + \epsilon) - f(x - \epsilon)) / 2\epsilon`,
    whose error shrinks like :math:`\epsilon^2`.
    """
    # BEGIN SOLUTION 0.4
    plus = list(vals)
    minus = list(vals)
    plus[arg] = plus[arg] + epsilon
    minus[arg] = minus[arg] - epsilon
    return (f(*plus) - f(*minus)) / (2.0 * epsilon)
    # END SOLUTION


# ## The graph's records


class _Released:
    """Stands in for the saved values of every released Context: any use raises."""

    __slots__ = ()

    def _fail(self, *args: Any) -> Any:
        raise GraphReleasedError(
            "backward reached an operation a second time, but the values its forward saved "
            "were freed after the first backward; pass retain_graph=True to the first "
            "backward() to keep them"
        )

    __iter__ = __getitem__ = __len__ = _fail

    def __repr__(self) -> str:
        return "<released>"


_RELEASED: Any = _Released()


class Context:
    """The record of one operation: the function that ran (``last_fn``, a Function class
    with ``backward(ctx, d_output)`` giving one derivative per input, or a lone value for
    one input), its ``inputs``, and what its forward saved for its backward.

    It is the ``ctx`` a Function's forward and backward receive (as in PyTorch) and the
    ``history`` of the Variable the operation made (as in MiniTorch): one object per
    graph node. It points only at inputs, never at its result, so graphs have no cycles.

    After :func:`backpropagate` has used a Context it is *released*: its saved values are
    dropped to free memory (unless the caller passed ``retain_graph=True``), and using
    them again raises :class:`GraphReleasedError`.
    """

    __slots__ = ("inputs", "last_fn", "saved_values")

    def __init__(self, last_fn: Any, inputs: tuple[Variable, ...] = ()) -> None:
        self.last_fn = last_fn
        self.inputs = inputs
        self.saved_values: tuple[Any, ...] = ()

    def save_for_backward(self, *values: Any) -> None:
        """Keep ``values`` for the backward pass; they come back as ``saved_values``."""
        self.saved_values = values

    def release(self) -> None:
        """Drop the saved values; using them afterwards raises GraphReleasedError."""
        self.saved_values = _RELEASED

    @property
    def released(self) -> bool:
        """Whether :meth:`release` has run."""
        return isinstance(self.saved_values, _Released)

    def __repr__(self) -> str:
        return f"Context({self.last_fn.__name__}, inputs={len(self.inputs)})"


# ## The Variable protocol


class Variable:
    """Base class of everything the engine differentiates (Scalar; Tensor from stage 1).

    A Variable has a ``unique_id`` (increasing in creation order), a ``history`` (the
    :class:`Context` of the operation that made it; None for leaves and constants) and a
    ``requires_grad`` flag. It is

    * a **leaf** when it has no history and requires a gradient (a parameter or input the
      user made): backpropagation stops there and accumulates the derivative;
    * a **constant** when it requires no gradient: it gets none, and the engine skips it;
    * otherwise an intermediate result, whose derivative flows on to its inputs through
      :meth:`chain_rule`.

    Subclasses define the storage (``__slots__``) and :meth:`accumulate_derivative`.
    """

    __slots__ = ()
    history: Context | None
    requires_grad: bool
    unique_id: int

    def is_leaf(self) -> bool:
        """True for a Variable the user made that wants a gradient."""
        return self.history is None and self.requires_grad

    def is_constant(self) -> bool:
        """True when no gradient flows to or through this Variable."""
        return not self.requires_grad

    @property
    def parents(self) -> tuple[Variable, ...]:
        """The inputs of the operation that made this Variable (empty for a leaf)."""
        history = self.history
        return () if history is None else history.inputs

    def accumulate_derivative(self, d: Any) -> None:
        """Add ``d`` to this leaf's stored derivative."""
        raise NotImplementedError(f"{type(self).__name__} must define accumulate_derivative")

    def fit_derivative(self, d: Any) -> Any:
        """``d``, a derivative with respect to this Variable as an operation's backward
        returned it, in this Variable's own form: a number as it is. Tensor overrides it
        (a gradient can come back in the broadcast shape of the operation's result)."""
        return d

    def fitted_chain_rule(self, d_output: Any) -> list[tuple[Variable, Any]]:
        """:meth:`chain_rule`, each derivative then passed through its input's
        :meth:`fit_derivative`. A subclass whose derivatives need fitting (Tensor) makes
        this its ``chain_rule``; ``backpropagate`` may then run the same steps inline."""
        return [(inp, inp.fit_derivative(d)) for inp, d in Variable.chain_rule(self, d_output)]

    def chain_rule(self, d_output: Any) -> list[tuple[Variable, Any]]:
        """Apply the chain rule one step back.

        Given the derivative of the final output with respect to this Variable, return
        ``(input, derivative of the output with respect to input)`` for every input of
        the operation that made it, leaving out constants.
        """
        # BEGIN SOLUTION 0.5
        history = self.history
        if history is None:
            raise ValueError("chain_rule needs a Variable made by an operation, not a leaf")
        grads = history.last_fn.backward(history, d_output)
        if type(grads) is not tuple:
            grads = (grads,)
        return [
            (inp, grad)
            for inp, grad in zip(history.inputs, grads, strict=True)
            if inp.requires_grad
        ]
        # END SOLUTION


# ## Task 0.5: topological sort and backpropagation


def topological_sort(variable: Variable) -> list[Variable]:
    """Every non-constant Variable ``variable`` depends on, ``variable`` first.

    Each Variable comes before all of its inputs, so when backpropagation reaches a
    Variable every use of it has already contributed to its derivative. Write it
    without recursion (a depth-first search with a stack, say), so any depth is fine.
    """
    # BEGIN SOLUTION 0.5
    # Gather what ``variable`` depends on (a depth-first walk with a stack), keyed by
    # unique_id, then order it by unique_id, newest first: an operation's result is always
    # made after its inputs, so it has the larger id, and sorting the ids (plain ints, in
    # C) is a valid order without the bookkeeping of a post-order walk.
    if not variable.requires_grad:
        return []
    found: dict[int, Variable] = {variable.unique_id: variable}
    stack = [variable]
    while stack:
        history = stack.pop().history
        if history is None:
            continue
        for parent in history.inputs:
            if parent.requires_grad:
                key = parent.unique_id
                if key not in found:
                    found[key] = parent
                    stack.append(parent)
    return [found[key] for key in sorted(found, reverse=True)]
    # END SOLUTION


def backpropagate(variable: Variable, deriv: Any, retain_graph: bool = False) -> None:
    """Send ``deriv`` (d output / d ``variable``) back to every leaf ``variable`` uses.

    Each leaf's derivative is *accumulated* (added to what it had), so a value used
    many times gets the sum of its uses and repeated backward calls add up. Unless
    ``retain_graph`` is set, each Context is released once used: its saved values are
    freed, and a second backward that needs them raises GraphReleasedError (as in
    PyTorch, a part of the graph that saved nothing, such as an addition, can be
    backpropagated again).
    """
    # BEGIN SOLUTION 0.5
    derivs: dict[int, Any] = {variable.unique_id: deriv}
    plain, fitted = Variable.chain_rule, Variable.fitted_chain_rule
    for var in topological_sort(variable):
        d = derivs.pop(var.unique_id)
        history = var.history
        if history is None:
            var.accumulate_derivative(d)
            continue
        chain = type(var).chain_rule
        fit = chain is fitted
        if fit or chain is plain:  # chain_rule's steps inline: the hot path
            inputs = history.inputs
            grads = history.last_fn.backward(history, d)
            if type(grads) is not tuple:
                grads = (grads,)
            if len(grads) != len(inputs):
                raise ValueError(
                    f"{history.last_fn.__name__}.backward returned {len(grads)} "
                    f"derivatives for {len(inputs)} inputs"
                )
        else:
            steps = var.chain_rule(d)
            inputs = tuple(parent for parent, _ in steps)
            grads = tuple(grad for _, grad in steps)
            fit = False  # chain_rule fitted them
        i = 0
        for parent in inputs:
            if parent.requires_grad:
                grad = parent.fit_derivative(grads[i]) if fit else grads[i]
                key = parent.unique_id
                if key in derivs:
                    derivs[key] = derivs[key] + grad
                else:
                    derivs[key] = grad
            i += 1
        if not retain_graph:
            history.saved_values = _RELEASED  # Context.release, inline
    # END SOLUTION
