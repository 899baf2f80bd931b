"""Milestone 4.5b: a CNN on MNIST, read from the standard IDX files.

    python -m project.train_mnist --data-dir DIR     # a folder holding the IDX files
    python -m project.train_mnist --download         # fetch them once into the cache

The files are the four standard ones (``train-images-idx3-ubyte.gz``... , gzip or
not). ``--download`` fetches the missing ones into ``~/.cache/minitorch/mnist`` (or
``$MINITORCH_DATA/mnist``), checking each against its published MD5 before it is
kept; nothing is downloaded unless asked. With the training files present the CNN
trains on the first ``--train-size`` training images and is tested on the 10,000 test
images; with only the t10k files (as in ``../shared/data/mnist``) it trains on the first
8,000 test-set images and is tested on the last 2,000.

The model is :class:`~module4.models.DigitCNN` with ``size=28`` (3×3 convolutions of 8
and 16 channels, pooled 28 → 14 → 7, a hidden layer of 64). Exits 1 unless test
accuracy >= 95% and the first-layer weights moved. Writes ``runs/mnist/...`` like the
digits milestone.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from module4.models import DigitCNN
from project import warm_cache
from project.cnn_train import Split, add_run_args, config_from, run_gated
from project.guard import require_stages
from project.idx import IdxError, MnistMissingError, load_mnist
from project.train_digits import images_to_input

T10K_TRAIN = 8000
"""With only the t10k files: train on the first 8,000 images, test on the rest (on a
t10k set of 8,000 images or fewer, such as a test's tiny one: the first 80%)."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m project.train_mnist", description=__doc__.split("\n")[0]
    )
    p.add_argument("--data-dir", type=Path, help="folder with the MNIST IDX files")
    p.add_argument("--download", action="store_true", help="download missing files to the cache")
    p.add_argument("--train-size", type=int, default=8000, help="training images used (8000)")
    p.add_argument("--channels", type=int, nargs=2, default=(8, 16), help="conv channels (8 16)")
    add_run_args(p, epochs=6, lr=2e-3)
    p.add_argument("--gate", type=float, default=0.95, help="test accuracy to reach (0.95)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    require_stages(0, 1, 2, 4)
    with warm_cache.warming(args.dtype):  # compiles the kernels from the other end
        console = Console(soft_wrap=True)
        try:
            sets = load_mnist(args.data_dir, download=args.download)
        except (MnistMissingError, IdxError, OSError) as error:
            console.print(f"[red]error:[/] {error}")
            return 2
        if "train" in sets:
            (x_train, y_train), (x_test, y_test) = sets["train"], sets["test"]
            x_train, y_train = x_train[: args.train_size], y_train[: args.train_size]
            console.print(f"MNIST: first {len(y_train)} training images, {len(y_test)} test images")
        else:
            x, y = sets["test"]
            cut = T10K_TRAIN if len(y) > T10K_TRAIN else len(y) * 4 // 5
            x_train, y_train, x_test, y_test = x[:cut], y[:cut], x[cut:], y[cut:]
            console.print(
                f"MNIST: only the t10k files were found; training on its first {len(y_train)} "
                f"images, testing on the last {len(y_test)}"
            )
        model = DigitCNN(size=28, channels=tuple(args.channels), seed=args.seed)
        return run_gated(
            model,
            model.conv1.weight,
            Split(x_train, y_train),
            Split(x_test, y_test),
            config_from(args, "mnist", args.gate),
            images_to_input,
            console,
        )


if __name__ == "__main__":
    raise SystemExit(main())
