"""Task 0.6: optimizers that update Parameters from their gradients.

They work on any parameter value with a settable ``data`` and a ``grad`` (None until a
backward reaches it): Scalars now, Tensors from stage 1. The update arithmetic uses only
``+ - * /`` and ``** 0.5``, so the same code serves floats and tensors.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from module0.module import Parameter


class Optimizer:
    """Holds the parameters to update; subclasses define :meth:`step`."""

    def __init__(self, parameters: Iterable[Parameter]) -> None:
        self.parameters: list[Parameter] = list(parameters)
        if not self.parameters:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")

    def zero_grad(self) -> None:
        """Forget every parameter's gradient before the next backward."""
        for p in self.parameters:
            p.value.grad = None

    def step(self) -> None:
        raise NotImplementedError


def _check_range(name: str, value: float, low: float, high: float) -> None:
    if not low <= value < high:
        raise ValueError(f"{name} must be in [{low}, {high}), got {value}")


class SGD(Optimizer):
    r"""Stochastic gradient descent, optionally with momentum (PyTorch's form).

    Without momentum: :math:`p \leftarrow p - lr \cdot g`. With momentum :math:`\mu`, a
    velocity :math:`v \leftarrow \mu v + g` (starting at :math:`v = g`) replaces
    :math:`g`.
    """

    def __init__(self, parameters: Iterable[Parameter], lr: float = 1.0, momentum: float = 0.0):
        super().__init__(parameters)
        _check_range("lr", lr, 0.0, float("inf"))
        _check_range("momentum", momentum, 0.0, 1.0)
        self.lr = lr
        self.momentum = momentum
        self.velocity: list[Any] = [None] * len(self.parameters)

    def step(self) -> None:
        """Move every parameter that has a gradient one step downhill."""
        # BEGIN SOLUTION 0.6
        lr, momentum = self.lr, self.momentum
        for i, p in enumerate(self.parameters):
            value = p.value
            g = value.grad
            if g is None:
                continue
            if momentum:
                v = self.velocity[i]
                g = g if v is None else momentum * v + g
                self.velocity[i] = g
            value.data = value.data - lr * g
        # END SOLUTION


class Adam(Optimizer):
    r"""Adam (Kingma & Ba, 2015): per-parameter steps from running moments of the
    gradient, with bias correction.

    :math:`m \leftarrow \beta_1 m + (1-\beta_1) g`,
    :math:`v \leftarrow \beta_2 v + (1-\beta_2) g^2`,
    :math:`p \leftarrow p - lr\, \hat m / (\sqrt{\hat v} + \epsilon)` with
    :math:`\hat m = m / (1-\beta_1^t)`, :math:`\hat v = v / (1-\beta_2^t)`.
    """

    def __init__(
        self,
        parameters: Iterable[Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        super().__init__(parameters)
        _check_range("lr", lr, 0.0, float("inf"))
        _check_range("betas[0]", betas[0], 0.0, 1.0)
        _check_range("betas[1]", betas[1], 0.0, 1.0)
        self.lr = lr
        self.betas = betas
        self.eps = eps
        n = len(self.parameters)
        self.steps: list[int] = [0] * n
        self.first_moment: list[Any] = [0.0] * n
        self.second_moment: list[Any] = [0.0] * n

    def step(self) -> None:
        """Update every parameter that has a gradient."""
        # BEGIN SOLUTION 0.6
        beta1, beta2 = self.betas
        for i, p in enumerate(self.parameters):
            value = p.value
            g = value.grad
            if g is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            m = beta1 * self.first_moment[i] + (1.0 - beta1) * g
            v = beta2 * self.second_moment[i] + (1.0 - beta2) * (g * g)
            self.first_moment[i] = m
            self.second_moment[i] = v
            m_hat = m / (1.0 - beta1**t)
            v_hat = v / (1.0 - beta2**t)
            value.data = value.data - self.lr * m_hat / (v_hat**0.5 + self.eps)
        # END SOLUTION
