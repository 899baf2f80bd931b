"""Task 2.4: training on the fast backend — a fused optimizer step.

Stage 0's :class:`~module0.optim.Adam` serves floats and tensors alike because it updates
a parameter with ``+ - * / **``. On tensors each of those is a backend operation: on the
fast backend a Numba kernel launch, a new output tensor and several microseconds of
Python around it. One Adam step is 18 such operations per parameter (14 ``zip``, 4
``map``): for the 2-100-100-1 classifier, 108 of the 169 kernel launches of an epoch,
where the forward and backward passes take 61.

:func:`adam_update` does the whole step of one parameter in **one** compiled loop over
its flat storage, updating ``m``, ``v`` and the parameter in place: one kernel call per
parameter per step, no temporaries. :func:`sgd_update` does the same for SGD with
momentum. :class:`FastAdam` and :class:`FastSGD` are stage 0's optimizers (the same
arguments, the same values to rounding) with ``step()`` built on them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np
from numba import njit, prange

from module0.module import Parameter
from module0.optim import SGD, Adam
from module1.tensor import Tensor
from module1.tensor_data import ShapeError, Storage, TensorData

PARALLEL_MIN = 512
"""The reference updates parameters with fewer entries by a plain loop, larger ones by
``prange`` (optional: a ``prange`` for every size is correct, only slower on tiny ones).

Measured (numba 0.68.1, Adam, median of 7; 2-core Xeon): a plain loop takes 0.6 us for
1 entry, 1.3 us for 100, 3.9 us for 500, 7 us for 1000; a ``prange`` loop costs about
2.5 us to start its threads whatever the size (2.8 us for 1 entry, 3.5 us for 500,
4.1 us for 1000) and then runs 3.5x faster than the plain loop (19 us against 66 us for
10,000 entries: both cores, and the parallel loop's body is vectorized, packed
``vsqrtpd``/``vdivpd`` in its assembly, where the plain loop's is not). They cross at
400-500 entries."""


# BEGIN SOLUTION 2.4 omit
@njit(inline="always")
def adam_entry(
    param: Storage, grad: Storage, m: Storage, v: Storage, i: int,
    lr: float, beta1: float, beta2: float, eps: float, bias1: float, bias2: float,
) -> None:  # fmt: skip
    """Adam's step for entry ``i``, given the bias corrections ``1 - beta ** t``: the
    reference's :func:`adam_update` and its AdamW (``module5/fast_optim.py``) share it."""
    g = grad[i]
    m_i = beta1 * m[i] + (1.0 - beta1) * g
    v_i = beta2 * v[i] + (1.0 - beta2) * (g * g)
    m[i] = m_i
    v[i] = v_i
    param[i] -= lr * (m_i / bias1) / (math.sqrt(v_i / bias2) + eps)


# END SOLUTION


# ## Task 2.4: the fused update kernels


@njit(parallel=True, cache=True, fastmath=False)
def adam_update(
    param: Storage, grad: Storage, m: Storage, v: Storage,
    lr: float, beta1: float, beta2: float, eps: float, t: int,
) -> None:  # fmt: skip
    """Adam's step ``t`` (1 for the first) for one parameter, in place, entry by entry:
    ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g g``,
    ``param -= lr m_hat / (sqrt(v_hat) + eps)`` with ``m_hat = m / (1 - beta1 ** t)``
    and ``v_hat = v / (1 - beta2 ** t)``. All four arrays are flat, of one length.
    In parallel over the entries (the reference runs a plain loop below
    :data:`PARALLEL_MIN` entries, where starting the threads costs more)."""
    n = len(param)
    if len(grad) != n or len(m) != n or len(v) != n:
        raise ValueError("adam_update: param, grad, m and v must have the same length")
    # BEGIN SOLUTION 2.4
    # A float exponent: C's pow, like Python's beta1 ** t (Numba computes a float to an
    # int power by repeated multiplication, which can differ in the last bit).
    bias1 = 1.0 - beta1 ** float(t)
    bias2 = 1.0 - beta2 ** float(t)

    if n < PARALLEL_MIN:
        for i in range(n):
            adam_entry(param, grad, m, v, i, lr, beta1, beta2, eps, bias1, bias2)
    else:
        for i in prange(n):
            adam_entry(param, grad, m, v, i, lr, beta1, beta2, eps, bias1, bias2)
    # END SOLUTION


@njit(parallel=True, cache=True, fastmath=False)
def sgd_update(
    param: Storage, grad: Storage, velocity: Storage,
    lr: float, momentum: float, has_velocity: bool,
) -> None:  # fmt: skip
    """One SGD step for one parameter, in place, PyTorch's form: without momentum
    (``momentum == 0``) ``param -= lr g`` and ``velocity`` is not touched (it may be
    empty); with momentum ``velocity = momentum velocity + g`` (``velocity = g`` when
    ``has_velocity`` is False: the first step) and ``param -= lr velocity``. In
    parallel over the entries, as :func:`adam_update`."""
    n = len(param)
    if len(grad) != n or (momentum != 0.0 and len(velocity) != n):
        raise ValueError("sgd_update: param, grad and velocity must have the same length")
    # BEGIN SOLUTION 2.4
    with_momentum = momentum != 0.0

    def update(i: int) -> None:
        g = grad[i]
        if with_momentum:
            if has_velocity:
                g = momentum * velocity[i] + g
            velocity[i] = g
        param[i] -= lr * g

    if n < PARALLEL_MIN:
        for i in range(n):
            update(i)
    else:
        for i in prange(n):
            update(i)
    # END SOLUTION


# ## The optimizers

_NO_VELOCITY = np.empty(0)


def _describe(index: int, parameter: Parameter) -> str:
    name = f" {parameter.name!r}" if parameter.name is not None else ""
    return f"parameter {index}{name}"


def _root(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s memory (``array`` itself if it is no view)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _tensor_value(index: int, parameter: Parameter) -> Tensor:
    value = parameter.value
    if not isinstance(value, Tensor):
        raise TypeError(
            f"{_describe(index, parameter)} holds a {type(value).__name__}; the fused "
            "optimizers update Tensors only (use module0.optim's SGD or Adam for Scalars)"
        )
    return value


def _grad_storage(index: int, parameter: Parameter, value: Tensor) -> Storage:
    """The gradient's values as a flat array in the parameter's index order (its own
    storage when it is contiguous, else a NumPy copy: no backend operation)."""
    grad = value.grad
    if not isinstance(grad, Tensor) or grad.shape != value.shape:
        got = grad.shape if isinstance(grad, Tensor) else type(grad).__name__
        raise ShapeError(
            f"{_describe(index, parameter)} of shape {value.shape} has a gradient {got}"
        )
    data = grad._tensor
    if data.is_contiguous() and data._storage.size == data.size:
        return data._storage
    return grad.to_numpy().reshape(-1)


def _prepare(
    parameters: list[Parameter], checked: list[Any]
) -> list[tuple[int, Parameter, Storage, Storage]]:
    """``(index, parameter, storage, gradient)`` for each parameter that has a gradient,
    its storage safe to update in place: ``size`` values in index order that no other
    parameter's storage overlaps.

    A parameter that is a view (a transpose, a broadcast, part of a larger storage, or on
    a storage another parameter of the optimizer uses) first gets a fresh contiguous
    copy of its values, once: what stage 0's optimizers do on every step. So the values
    are stage 0's even then.

    ``checked`` (the optimizer's, initially empty) holds each parameter's TensorData
    and storage as this found them safe: while they are the same objects, the next
    step skips those checks and checks only the gradients."""
    values = [_tensor_value(i, p) for i, p in enumerate(parameters)]
    known = len(checked) == len(values) and all(
        v._tensor is data and v._tensor._storage is storage
        for v, (data, storage) in zip(values, checked, strict=True)
    )
    if not known:
        roots = [_root(v._tensor._storage) for v in values]  # alive: their ids stay unique
        users = Counter(id(root) for root in roots)
    work = []
    for i, (p, value) in enumerate(zip(parameters, values, strict=True)):
        if value.grad is None:
            continue
        data = value._tensor
        storage = data._storage
        if not known and (
            not (data.is_contiguous() and storage.size == data.size)
            or users[id(_root(storage))] > 1
        ):
            value._tensor = TensorData(value.to_numpy().reshape(-1), value.shape)
        work.append((i, p, value._tensor._storage, _grad_storage(i, p, value)))
    if not known:  # remembered only when every parameter was checked (had a gradient)
        safe = len(work) == len(values)
        checked[:] = [(v._tensor, v._tensor._storage) for v in values] if safe else []
    return work


def _state(
    states: list[Any], index: int, parameter: Parameter, size: int, what: str
) -> tuple[np.ndarray, bool]:
    """``states[index]``, one optimizer state array of a parameter of ``size`` entries,
    made (zeros) at its first step; and whether it existed before this step."""
    state = states[index]
    if state is None:
        states[index] = state = np.zeros(size, parameter.value.dtype)
        return state, False
    if state.size != size:
        raise ShapeError(
            f"{_describe(index, parameter)} now has {size} entries, its {what} {state.size}: "
            "make a new optimizer after replacing a parameter"
        )
    return state, True


class FastAdam(Adam):
    """Stage 0's :class:`~module0.optim.Adam` with a fused step: one
    :func:`adam_update` call per parameter.

    Same arguments and the same values as ``Adam`` (to rounding: ``Adam`` divides on
    tensors by multiplying by an inverse). It takes parameters whose values are stage-1
    Tensors on any backend (every storage is a NumPy array); other values raise a
    TypeError naming the parameter. The moments are NumPy arrays, one per parameter,
    made at its first step. Unlike ``Adam``, which makes each parameter a new tensor
    every step, it updates the parameter's storage **in place**, as PyTorch does: a
    tensor that shares it (``p.value.detach()``, or a graph saved before the step) sees
    the new values.
    """

    def __init__(
        self,
        parameters: Iterable[Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        super().__init__(parameters, lr, betas, eps)
        for i, p in enumerate(self.parameters):
            _tensor_value(i, p)
        self.first_moment: list[Any] = [None] * len(self.parameters)
        self.second_moment: list[Any] = [None] * len(self.parameters)
        self._checked: list[Any] = []

    def step(self) -> None:
        """Update every parameter that has a gradient: one kernel call each."""
        beta1, beta2 = self.betas
        for i, p, param, grad in _prepare(self.parameters, self._checked):
            m, _ = _state(self.first_moment, i, p, param.size, "first moment")
            v, _ = _state(self.second_moment, i, p, param.size, "second moment")
            self.steps[i] += 1
            adam_update(param, grad, m, v, self.lr, beta1, beta2, self.eps, self.steps[i])


class FastSGD(SGD):
    """Stage 0's :class:`~module0.optim.SGD` (with or without momentum) with a fused
    step: one :func:`sgd_update` call per parameter.

    The same values as ``SGD``; the velocities are NumPy arrays. Parameters and in-place
    updates as in :class:`FastAdam`.
    """

    def __init__(self, parameters: Iterable[Parameter], lr: float = 1.0, momentum: float = 0.0):
        super().__init__(parameters, lr, momentum)
        for i, p in enumerate(self.parameters):
            _tensor_value(i, p)
        self._checked: list[Any] = []

    def step(self) -> None:
        """Move every parameter that has a gradient: one kernel call each."""
        for i, p, param, grad in _prepare(self.parameters, self._checked):
            velocity, has_velocity = _NO_VELOCITY, False
            if self.momentum:
                velocity, has_velocity = _state(self.velocity, i, p, param.size, "velocity")
            sgd_update(param, grad, velocity, self.lr, self.momentum, has_velocity)
