"""Milestone 4.5a: a CNN on the bundled 8×8 handwritten digits, fully offline.

    python -m project.train_digits

Trains :class:`~module4.models.DigitCNN` (3×3 convolutions of 16 and 32 channels,
2×2 max pooling, dropout 0.25, a hidden layer of 64) with FastAdam on the UCI digits
that ship with the project (``project/data/``; attribution in its README), and exits
with status 1 unless the gate holds: test accuracy >= 95% and first-layer weights
moved. Writes ``runs/digits/{log.csv, model.npz, curves.png, confusion.png,
filters.png, misclassified.png}``. This is the README's main job (``python -m project``).

``--batchnorm`` (task 4.6) puts BatchNorm2d after each convolution and has its own
gate: test accuracy >= 95% in 8 epochs (the default with it); it writes
``runs/digits-bn/``.

``mpiexec -n 2 python -m project.train_digits --ddp`` (stage 6's dist extra) trains the
same model data-parallel: each rank takes its share of every batch, rank 0 writes.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from contextlib import nullcontext

import numpy as np
import numpy.typing as npt
from rich.console import Console

from module1.tensor import Tensor, from_numpy
from module2.fast_ops import FastTensorBackend
from module4.layers import Flatten, MaxPool2d, ReLU, Sequential
from module4.models import DigitCNN
from project import warm_cache
from project.cnn_train import Split, add_run_args, config_from, run_gated
from project.digits_data import digits_split
from project.dist import add_ddp_args, ranks_from
from project.guard import require_stages, require_tasks

GATE = 0.95
"""The test accuracy the plain run must reach in its 20 epochs."""
BN_GATE, BN_EPOCHS = 0.95, 8
"""The ``--batchnorm`` run's gate: the same accuracy in 8 epochs. Measured on seeds 0
to 2: it ends at 96.4% to 97.2% and passes 95% at the 3rd epoch; the plain model's
8-epoch runs end at 94.7% to 96.9%."""


def images_to_input(x: npt.NDArray[np.float64]) -> Tensor:
    """A batch of images ``(n, h, w)`` as a ``(n, 1, h, w)`` tensor on the fast backend."""
    return from_numpy(np.ascontiguousarray(x[:, None], dtype=np.float64), FastTensorBackend)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m project.train_digits", description=__doc__.split("\n")[0]
    )
    add_run_args(p, epochs=20, lr=3e-3)
    add_ddp_args(p)
    p.add_argument(
        "--gate", type=float, default=None,
        help=f"test accuracy to reach ({GATE}; {BN_GATE} in {BN_EPOCHS} epochs with --batchnorm)",
    )  # fmt: skip
    p.add_argument(
        "--batchnorm", action="store_true",
        help="BatchNorm2d after each convolution (task 4.6); writes OUT/digits-bn/",
    )  # fmt: skip
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.batchnorm:  # its own default length, unless --epochs says otherwise
        p.set_defaults(epochs=BN_EPOCHS)
        args = p.parse_args(argv)
    require_stages(0, 1, 2, 4)
    if args.batchnorm:
        require_tasks("4.6")
    gate = args.gate if args.gate is not None else (BN_GATE if args.batchnorm else GATE)
    ranks = ranks_from(args)  # --ddp: this rank among mpiexec's
    # One process compiles the kernels from the other end; ranks compile side by side.
    warming = warm_cache.warming(args.dtype) if ranks.comm is None else nullcontext()
    with warming:
        console = Console(soft_wrap=True, quiet=not ranks.lead)
        x_train, y_train, x_test, y_test = digits_split()
        model = DigitCNN(size=8, seed=args.seed, batchnorm=args.batchnorm)
        model.to(args.dtype)  # the summary runs in it
        console.print(model_summary(model))
        return run_gated(
            model,
            model.conv1.weight,
            Split(x_train, y_train),
            Split(x_test, y_test),
            config_from(args, "digits-bn" if args.batchnorm else "digits", gate),
            images_to_input,
            console,
            ranks,
        )


def model_summary(model: DigitCNN) -> str:
    """The DigitCNN's layers, in the order its forward runs them, as a Sequential
    summary for one ``size × size`` image (the layers are shared, not copied)."""
    view = Sequential(
        model.conv1,
        ReLU(),
        MaxPool2d(2),
        model.conv2,
        ReLU(),
        MaxPool2d(2),
        Flatten(),
        model.dropout,
        model.hidden,
        ReLU(),
        model.out,
    )
    return view.summary((1, 1, model.size, model.size))


if __name__ == "__main__":
    raise SystemExit(main())
