"""Task 3.4: training on the CUDA backend — a fused optimizer step on the GPU.

Stage 0's :class:`~module0.optim.Adam` runs on any backend, but on tensors each of its
18 ``+ - * / **`` per parameter is a kernel launch, a new device array, and (for each
Python number in the formula) a copy of that number to the device. :func:`adam_kernel`
does the whole step of one parameter in **one** launch, a thread per entry, updating
``m``, ``v`` and the parameter in place in GPU memory; :func:`sgd_kernel` does the same
for SGD with momentum. :class:`CudaAdam` and :class:`CudaSGD` are stage 0's optimizers
(the same arguments, the same values to rounding) with ``step()`` built on them, as
stage 2's :class:`~module2.fast_optim.FastAdam` is on the CPU.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from numba import cuda

from module0.module import Parameter
from module0.optim import SGD, Adam
from module1.tensor import Tensor
from module1.tensor_data import ShapeError, TensorData, is_device_array
from module2.fast_optim import _describe, _tensor_value
from module3.cuda_ops import THREADS_PER_BLOCK, require_cuda, to_device

# ## Task 3.4: the fused update kernels


@cuda.jit
def adam_kernel(
    param: Any, grad: Any, m: Any, v: Any,
    lr: float, beta1: float, beta2: float, eps: float, bias1: float, bias2: float,
) -> None:  # fmt: skip
    """Thread ``i`` does Adam's step for entry ``i`` of one parameter, in place:
    ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g g``,
    ``param -= lr (m / bias1) / (sqrt(v / bias2) + eps)``, where ``bias1 = 1 - beta1 ** t``
    and ``bias2 = 1 - beta2 ** t`` for step ``t`` (computed once, on the host). All four
    arrays are flat device arrays of one length; threads past it do nothing."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    # BEGIN SOLUTION 3.4 nowrite
    if i < param.size:
        g = grad[i]
        m_i = beta1 * m[i] + (1.0 - beta1) * g
        v_i = beta2 * v[i] + (1.0 - beta2) * (g * g)
        m[i] = m_i
        v[i] = v_i
        param[i] -= lr * (m_i / bias1) / (math.sqrt(v_i / bias2) + eps)
    # END SOLUTION


@cuda.jit
def sgd_kernel(
    param: Any, grad: Any, velocity: Any, lr: float, momentum: float, has_velocity: bool
) -> None:
    """Thread ``i`` does one SGD step for entry ``i``, in place, PyTorch's form: without
    momentum (``momentum == 0``) ``param -= lr g`` and ``velocity`` is not touched;
    with momentum ``velocity = momentum velocity + g`` (``velocity = g`` on the first
    step, when ``has_velocity`` is False) and ``param -= lr velocity``."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    # BEGIN SOLUTION 3.4 nowrite
    if i < param.size:
        g = grad[i]
        if momentum != 0.0:
            if has_velocity:
                g = momentum * velocity[i] + g
            velocity[i] = g
        param[i] -= lr * g
    # END SOLUTION


# ## The optimizers


def _launch(size: int) -> tuple[int, int]:
    threads = max(1, min(THREADS_PER_BLOCK, size))
    return -(-size // threads), threads


def _shared(values: list[Tensor]) -> list[bool]:
    """For each parameter's tensor, whether another parameter of the optimizer uses its
    storage too (the same tensor twice, or two tensors on one storage)."""
    users = Counter(id(value._tensor._storage) for value in values)
    return [users[id(value._tensor._storage)] > 1 for value in values]


def _device_parameter(value: Tensor, shared: bool) -> Any:
    """The parameter's storage, made safe to update in place on the device: its own
    contiguous device array of exactly ``size`` entries. A parameter on the host, a
    view (a transpose, a broadcast, part of a larger storage), or one on a storage
    another parameter uses (``shared``) first gets one, a copy of its values: what
    stage 0's optimizers do on every step."""
    data = value._tensor
    storage = data._storage
    owned = is_device_array(storage) and data.is_contiguous() and len(storage) == data.size
    if shared or not owned:
        value._tensor = TensorData(cuda.to_device(value.to_numpy().reshape(-1)), value.shape)
    return value._tensor._storage


def _device_grad(index: int, parameter: Parameter, value: Tensor) -> Any:
    """The gradient as a flat device array in the parameter's index order."""
    grad = value.grad
    if not isinstance(grad, Tensor) or grad.shape != value.shape:
        got = grad.shape if isinstance(grad, Tensor) else type(grad).__name__
        raise ShapeError(
            f"{_describe(index, parameter)} of shape {value.shape} has a gradient {got}"
        )
    data = grad._tensor
    if data.is_contiguous() and len(data._storage) == data.size:
        return to_device(data._storage)
    return cuda.to_device(grad.to_numpy().reshape(-1))


def _state(states: list[Any], index: int, parameter: Parameter, size: int, what: str) -> Any:
    """``states[index]``, one optimizer state array (on the device) of a parameter of
    ``size`` entries, made (zeros) at its first step."""
    state = states[index]
    if state is None:
        states[index] = state = cuda.to_device(np.zeros(size))
    elif len(state) != size:
        raise ShapeError(
            f"{_describe(index, parameter)} now has {size} entries, its {what} {len(state)}: "
            "make a new optimizer after replacing a parameter"
        )
    return state


def _prepare(parameters: list[Parameter]) -> Iterator[tuple[int, Parameter, int, Any, Any]]:
    """``(index, parameter, size, storage, gradient)`` for each parameter that has a
    gradient and entries: its storage a device array safe to update in place, its
    gradient a flat device array (see :func:`_device_parameter`, :func:`_device_grad`).

    A generator, so each parameter is prepared after the previous one's update: a
    tensor that two parameters hold is then updated twice, as stage 0's optimizers do."""
    values = [_tensor_value(i, p) for i, p in enumerate(parameters)]
    shared = _shared(values)
    for i, (p, value) in enumerate(zip(parameters, values, strict=True)):
        if value.grad is None or value.size == 0:
            continue
        grad = _device_grad(i, p, value)
        yield i, p, value.size, _device_parameter(value, shared[i]), grad


class CudaAdam(Adam):
    """Stage 0's :class:`~module0.optim.Adam` with a fused step: one
    :func:`adam_kernel` launch per parameter. Same arguments and the same values as
    ``Adam`` (to rounding). The moments live on the device. The parameter's storage is
    updated **in place** (a parameter on the host moves to the device at its first
    step), as :class:`~module2.fast_optim.FastAdam` does on the CPU."""

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

    def step(self) -> None:
        """Update every parameter that has a gradient: one kernel launch each."""
        require_cuda()
        beta1, beta2 = self.betas
        for i, p, size, param, grad in _prepare(self.parameters):
            m = _state(self.first_moment, i, p, size, "first moment")
            v = _state(self.second_moment, i, p, size, "second moment")
            self.steps[i] += 1
            t = float(self.steps[i])
            adam_kernel[_launch(size)](
                param, grad, m, v, self.lr, beta1, beta2, self.eps,
                1.0 - beta1**t, 1.0 - beta2**t,
            )  # fmt: skip


class CudaSGD(SGD):
    """Stage 0's :class:`~module0.optim.SGD` (with or without momentum) with a fused
    step: one :func:`sgd_kernel` launch per parameter; velocities on the device."""

    def __init__(self, parameters: Iterable[Parameter], lr: float = 1.0, momentum: float = 0.0):
        super().__init__(parameters, lr, momentum)
        for i, p in enumerate(self.parameters):
            _tensor_value(i, p)

    def step(self) -> None:
        """Move every parameter that has a gradient: one kernel launch each."""
        require_cuda()
        for i, p, size, param, grad in _prepare(self.parameters):
            velocity, has_velocity = grad, False  # not touched without momentum
            if self.momentum:
                has_velocity = self.velocity[i] is not None
                velocity = _state(self.velocity, i, p, size, "velocity")
            sgd_kernel[_launch(size)](param, grad, velocity, self.lr, self.momentum, has_velocity)
