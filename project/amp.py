"""``--amp`` for the training scripts (stage 6): the forward under ``autocast`` in
bfloat16 or float16, and for float16 the loss scaled by a ``GradScaler``. Without
``--amp`` everything is the script's dtype and nothing here imports stage 6."""

from __future__ import annotations

import argparse
from contextlib import AbstractContextManager, nullcontext
from typing import Any


def add_amp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--amp", choices=("bfloat16", "float16"), default=None,
        help="mixed precision (stage 6): products in this type under autocast, float32 "
        "everywhere else; float16 adds dynamic loss scaling. Needs --dtype float32",
    )  # fmt: skip


class Precision:
    """The training loop's precision: plain (``amp`` None), or autocast in ``amp``."""

    def __init__(self, amp: str | None = None, dtype: str = "float32") -> None:
        if amp is not None and dtype != "float32":
            raise SystemExit(
                f"--amp {amp} computes float32 work in half precision; the model is "
                f"{dtype}: add --dtype float32"
            )
        self.amp = amp
        self.scaler: Any = None
        if amp is not None:
            from module6.scaler import GradScaler

            self.scaler = GradScaler(enabled=amp == "float16")

    def autocast(self) -> AbstractContextManager[Any]:
        """The context the forward (and the loss) runs in."""
        if self.amp is None:
            return nullcontext()
        from module6.amp import autocast

        return autocast(self.amp)

    def backward(self, loss: Any) -> None:
        """``loss.backward()``, of the scaled loss under float16."""
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def unscale(self, optimizer: Any) -> None:
        """The true gradients back before clipping (float16)."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: Any) -> None:
        """The optimizer's step (skipped on an inf or NaN gradient), then the scale's
        update."""
        if self.scaler is None:
            optimizer.step()
        else:
            self.scaler.step(optimizer)
            self.scaler.update()

    def describe(self) -> str:
        """A line for the end of the run."""
        if self.amp is None:
            return ""
        if not self.scaler.enabled:
            return f"mixed precision: {self.amp} autocast"
        return (
            f"mixed precision: {self.amp} autocast, loss scale now "
            f"{self.scaler.get_scale():g}, {self.scaler.skipped} steps skipped "
            "(gradients not finite)"
        )
