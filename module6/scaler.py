"""Task 6.4: dynamic loss scaling.

float16's smallest positive number is about 6e-8 (2**-24). Under ``autocast(float16)``
the gradients of the half-precision operations are float16 too, and a gradient
smaller than that is flushed to zero: the layers it belongs to stop learning.
:class:`GradScaler` multiplies the loss by a large ``scale`` before ``backward`` (so
every gradient is ``scale`` times bigger and clear of the bottom of the range), divides
the gradients by it again before the optimizer sees them, and adapts ``scale``: a step
whose gradients hold an inf or a NaN (the scale was too big: something overflowed) is
skipped and the scale halved; after ``growth_interval`` clean steps in a row it is
doubled, to stay as high as the gradients allow. bfloat16 has float32's range and
needs no scaler (``enabled=False`` keeps one code path for both).

The loop, as PyTorch's ``torch.amp.GradScaler``::

    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)   # optional: before clipping the true gradients
    scaler.step(optimizer)       # skipped when a gradient is not finite
    scaler.update()
"""

from __future__ import annotations

import numpy as np

from module0.errors import MiniTorchError
from module0.optim import Optimizer
from module1.creation import from_numpy
from module1.tensor import Tensor


class ScalerError(MiniTorchError, RuntimeError):
    """A :class:`GradScaler` used out of order (stepped twice, unscaled twice)."""


class GradScaler:
    """Dynamic loss scaling: see the module's docstring. ``found_inf`` says whether the
    last unscaled gradients held an inf or a NaN; ``skipped`` counts skipped steps."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        if not init_scale > 0 or not growth_factor > 1 or not 0 < backoff_factor < 1:
            raise ValueError(
                "GradScaler needs init_scale > 0, growth_factor > 1 and 0 < backoff_factor"
                f" < 1; got {init_scale}, {growth_factor}, {backoff_factor}"
            )
        if growth_interval < 1:
            raise ValueError(f"GradScaler: growth_interval must be >= 1, got {growth_interval}")
        self.scale_value = float(init_scale)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.enabled = enabled
        self.clean_steps = 0  # steps in a row without an inf or a NaN
        self.found_inf = False
        self.skipped = 0
        self.unscaled = False  # unscale_ has run since the last update
        self.stepped = False  # step has run since the last update

    def get_scale(self) -> float:
        """The scale the next loss is multiplied by (1.0 when disabled)."""
        return self.scale_value if self.enabled else 1.0

    def scale(self, loss: Tensor) -> Tensor:
        """``loss`` times the scale (``loss`` itself when disabled)."""
        return loss * self.scale_value if self.enabled else loss

    def _check_order(self, name: str) -> None:
        if self.stepped:
            raise ScalerError(
                f"GradScaler.{name} after step() and before update(): one step() per "
                "backward, then update() (a scaler stepped twice would divide the "
                "gradients twice or step on stale ones)"
            )

    def unscale_(self, optimizer: Optimizer) -> None:
        """Divide every gradient of ``optimizer``'s parameters by the scale, in place
        (float32 gradients stay float32), and set :attr:`found_inf` to whether any of
        them holds an inf or a NaN. Once per step: ScalerError when called again before
        :meth:`update`."""
        if not self.enabled:
            return
        self._check_order("unscale_")
        if self.unscaled:
            raise ScalerError(
                "GradScaler.unscale_ called twice since the last update(): the gradients "
                "are already divided by the scale"
            )
        # BEGIN SOLUTION 6.4
        inverse = 1.0 / self.scale_value
        found = False
        for p in optimizer.parameters:
            g = p.value.grad
            if g is None:
                continue
            values = g.to_numpy() * np.asarray(inverse, g.dtype)
            found = found or not bool(np.isfinite(values).all())
            p.value.grad = from_numpy(values, g.backend, dtype=g.dtype)
        self.found_inf = found
        # END SOLUTION
        self.unscaled = True

    def step(self, optimizer: Optimizer) -> bool:
        """Unscale the gradients (unless :meth:`unscale_` already did this step), then
        take ``optimizer.step()`` unless they hold an inf or a NaN (count it in
        :attr:`skipped` instead); return whether it stepped. ScalerError when called
        twice before :meth:`update`."""
        if not self.enabled:
            optimizer.step()
            return True
        self._check_order("step")
        if not self.unscaled:
            self.unscale_(optimizer)
        self.stepped = True
        # BEGIN SOLUTION 6.4
        if self.found_inf:
            self.skipped += 1
            return False
        optimizer.step()
        return True
        # END SOLUTION

    def update(self) -> None:
        """Adapt the scale after a step: times ``backoff_factor`` (and the run of clean
        steps starts again) when the step's gradients held an inf or a NaN (``found``);
        else one more clean step in :attr:`clean_steps`, and when that makes
        ``growth_interval`` in a row, times ``growth_factor`` (and the run starts
        again)."""
        if not self.enabled:
            return
        found = self.found_inf  # the step's verdict; the next step starts afresh
        self.found_inf = self.unscaled = self.stepped = False
        # BEGIN SOLUTION 6.4
        if found:
            self.scale_value *= self.backoff_factor
            self.clean_steps = 0
        else:
            self.clean_steps += 1
            if self.clean_steps == self.growth_interval:
                self.scale_value *= self.growth_factor
                self.clean_steps = 0
        # END SOLUTION
