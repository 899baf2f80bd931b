"""Task 4.6: batch normalization, BatchNorm1d and BatchNorm2d (Ioffe and Szegedy, 2015).

In training, each channel of a batch is normalised by the mean and variance of that
channel over the batch (and over the positions of a sequence or an image), then scaled
and shifted by the learned ``weight`` and ``bias``:

    y = (x - mean) / sqrt(var + eps) * weight + bias

Each layer keeps *running* estimates of the mean and variance, updated at every
training step, and evaluation mode normalises with them instead, so a prediction does
not depend on the other examples of its batch. PyTorch's conventions throughout:
``momentum`` 0.1 (``momentum=None``: the plain average of every batch so far), the
running variance updated with the *unbiased* batch variance (``m / (m - 1)`` times the
biased one, ``m`` values per channel) while the normalisation uses the biased one,
``eps`` 1e-5, and ``track_running_stats=False`` for batch statistics in both modes.

Every layer works on the input viewed as ``(N, C, S)``: a ``(N, C)`` batch is
``(N, C, 1)``, a ``(N, C, L)`` sequence is itself, an image ``(N, C, H, W)`` is
``(N, C, H * W)``. The statistics of a channel are over dimensions 0 and 2.
"""

from __future__ import annotations

import numpy as np

from module0.autodiff import Context, no_grad
from module0.module import Module, Parameter
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module1.tensor_functions import Function
from module1.tensor_ops import TensorBackend
from module2.fast_ops import FastTensorBackend


def channel_stats(x: Tensor) -> tuple[Tensor, Tensor]:
    """The mean and the biased variance (divided by ``m = N * S``) of each channel of
    ``x`` ``(N, C, S)`` over dimensions 0 and 2, each of shape ``(1, C, 1)``. The
    variance is the mean of the squared *centred* values (``E[x^2] - E[x]^2`` cancels
    catastrophically for a channel with a large mean)."""
    # BEGIN SOLUTION 4.6
    m = x.shape[0] * x.shape[2]
    mean = x.sum(0, keepdim=True).sum(2, keepdim=True) * (1.0 / m)
    centred = x - mean
    var = (centred * centred).sum(0, keepdim=True).sum(2, keepdim=True) * (1.0 / m)
    return mean, var
    # END SOLUTION


class BatchNormFun(Function):
    r"""Training-mode batch normalization of ``x`` ``(N, C, S)`` with ``weight`` and
    ``bias`` of shape ``(1, C, 1)``.

    ``mean`` and ``var`` (``(1, C, 1)``) are :func:`channel_stats` of ``x`` itself,
    computed once by the layer, which also needs them for its running estimates; they
    are constants to autograd, and the backward accounts for their dependence on ``x``.
    With :math:`\hat x = (x - \mu)\, r`, :math:`r = 1/\sqrt{\sigma^2 + \epsilon}`,
    :math:`g = d \cdot w` and sums over the ``m = N S`` values of a channel:

    :math:`dx = \tfrac{r}{m} (m g - \sum g - \hat x \sum g \hat x)`,
    :math:`dw = \sum d \hat x`, :math:`db = \sum d`.
    """

    @staticmethod
    def forward(
        ctx: Context, x: Tensor, weight: Tensor, bias: Tensor, mean: Tensor, var: Tensor,
        eps: float,
    ) -> Tensor:  # fmt: skip
        # BEGIN SOLUTION 4.6
        inv_std = (var + eps) ** -0.5
        xhat = (x - mean) * inv_std
        ctx.save_for_backward(xhat, inv_std, weight)
        return xhat * weight + bias
        # END SOLUTION

    @staticmethod
    def backward(ctx: Context, d: Tensor) -> tuple[Tensor, Tensor, Tensor, None, None]:
        # BEGIN SOLUTION 4.6
        xhat, inv_std, weight = ctx.saved_values
        m = d.shape[0] * d.shape[2]
        g = d * weight
        sum_g = g.sum(0, keepdim=True).sum(2, keepdim=True)
        sum_gx = (g * xhat).sum(0, keepdim=True).sum(2, keepdim=True)
        dx = (g * float(m) - sum_g - xhat * sum_gx) * (inv_std * (1.0 / m))
        dweight = (d * xhat).sum(0, keepdim=True).sum(2, keepdim=True)
        dbias = d.sum(0, keepdim=True).sum(2, keepdim=True)
        return dx, dweight, dbias, None, None
        # END SOLUTION


def update_running_stats(
    running_mean: Tensor, running_var: Tensor, mean: Tensor, var: Tensor, count: int,
    factor: float,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The new running mean and variance (all four tensors ``(C,)``) after a batch whose
    channels have ``mean`` and biased variance ``var`` over ``count`` values each:
    ``(1 - factor) * running + factor * batch``, where the batch's variance is the
    unbiased one, ``var * count / (count - 1)`` (``count > 1``: the layer checks)."""
    # BEGIN SOLUTION 4.6
    unbiased = var * (count / (count - 1))
    new_mean = running_mean * (1.0 - factor) + mean * factor
    new_var = running_var * (1.0 - factor) + unbiased * factor
    return new_mean, new_var
    # END SOLUTION


class _BatchNorm(Module):
    """What BatchNorm1d and BatchNorm2d share: parameters, buffers and the forward on
    the ``(N, C, S)`` view; a subclass says which input shapes it takes.

    ``weight`` (ones) and ``bias`` (zeros) are Parameters of shape ``(C,)`` when
    ``affine``. With ``track_running_stats`` the layer holds the buffers
    ``running_mean`` (zeros), ``running_var`` (ones) and ``num_batches_tracked`` (0, a
    count of training batches), which a state dict saves (``buffer_names``,
    :func:`module4.layers.state_dict`); without, they are None and every forward uses
    the batch's own statistics.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if not isinstance(num_features, int) or num_features < 1:
            raise ValueError(f"{name}: num_features must be a positive int, got {num_features!r}")
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{name}: momentum must be in [0, 1] or None, got {momentum}")
        if eps < 0:
            raise ValueError(f"{name}: eps must not be negative, got {eps}")
        self.num_features, self.eps, self.momentum = num_features, float(eps), momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(from_numpy(np.ones(num_features), backend), "weight")
            self.bias = Parameter(from_numpy(np.zeros(num_features), backend), "bias")
        self.running_mean: Tensor | None = None
        self.running_var: Tensor | None = None
        self.num_batches_tracked: int | None = None
        self.buffer_names: tuple[str, ...] = ()
        if track_running_stats:
            self.running_mean = from_numpy(np.zeros(num_features), backend)
            self.running_var = from_numpy(np.ones(num_features), backend)
            self.num_batches_tracked = 0
            self.buffer_names = ("running_mean", "running_var", "num_batches_tracked")

    def _as_3d(self, x: Tensor) -> tuple[int, int, int]:
        """``(N, C, S)`` of the input; ShapeError naming the layer and the shape."""
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"{type(self).__name__} needs a Tensor, got {type(x).__name__}")
        n, c, s = self._as_3d(x)
        if self.training and n * s <= 1:
            raise ValueError(
                f"{type(self).__name__}: training needs more than one value per channel, "
                f"got input of shape {x.shape}"
            )
        x3 = x.contiguous().view(n, c, s)
        if self.affine:
            weight = self.weight.value.view(1, c, 1)
            bias = self.bias.value.view(1, c, 1)
        else:
            weight, bias = x3.full((1, c, 1), 1.0), x3.zeros((1, c, 1))
        if self.running_mean is None or self.running_var is None or self.training:
            with no_grad():
                mean, var = channel_stats(x3.detach())
            y = BatchNormFun.apply(x3, weight, bias, mean, var, self.eps)
            if self.training and self.running_mean is not None:
                self._track(mean.view(c), var.view(c), n * s)
        else:
            running_mean = self.running_mean.view(1, c, 1)
            inv_std = (self.running_var.view(1, c, 1) + self.eps) ** -0.5
            y = (x3 - running_mean) * inv_std * weight + bias
        return y.view(*x.shape)

    def _track(self, mean: Tensor, var: Tensor, count: int) -> None:
        """One training batch into the running estimates: the factor is ``momentum``,
        or ``1 / batches so far`` (a plain average) when ``momentum`` is None."""
        assert self.running_mean is not None and self.running_var is not None
        self.num_batches_tracked = (self.num_batches_tracked or 0) + 1
        factor = 1.0 / self.num_batches_tracked if self.momentum is None else self.momentum
        with no_grad():
            self.running_mean, self.running_var = update_running_stats(
                self.running_mean, self.running_var, mean, var, count, factor
            )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.num_features}, eps={self.eps:g}, momentum="
            f"{self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats})"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization of ``(N, C)`` features or ``(N, C, L)`` sequences, per
    channel ``C`` (over ``N``, and ``L``)."""

    def _as_3d(self, x: Tensor) -> tuple[int, int, int]:
        c = self.num_features
        if x.dims not in (2, 3) or x.shape[1] != c:
            raise ShapeError(
                f"BatchNorm1d({c}): expected input of shape (N, {c}) or (N, {c}, L), got {x.shape}"
            )
        return x.shape[0], c, x.shape[2] if x.dims == 3 else 1


class BatchNorm2d(_BatchNorm):
    """Batch normalization of images ``(N, C, H, W)``, per channel ``C`` (over ``N``,
    ``H`` and ``W``): after a convolution, before its activation."""

    def _as_3d(self, x: Tensor) -> tuple[int, int, int]:
        c = self.num_features
        if x.dims != 4 or x.shape[1] != c:
            raise ShapeError(
                f"BatchNorm2d({c}): expected input of shape (N, {c}, H, W), got {x.shape}"
            )
        return x.shape[0], c, x.shape[2] * x.shape[3]
