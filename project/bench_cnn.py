"""Benchmark one CNN training epoch: this framework against the same model in PyTorch.

    python -m project.bench_cnn --data-dir ../shared/data/mnist [--repeats 3] [--dtype float32]

The model is the MNIST milestone's :class:`~module4.models.DigitCNN` (``size=28``:
conv 1→8 and 8→16, 3×3 with padding 1, each with ReLU and 2×2 max pooling, dropout
0.25, Linear 784→64, ReLU, Linear 64→10), trained for one epoch of 8,000 images in
batches of 32 with Adam on cross-entropy. PyTorch runs the same layers, batch order and
optimizer, in float32 (its default) and in float64 (this framework's default), on the
CPU with as many threads as there are cores; this framework runs in ``--dtype``
(float64 unless told float32). The images are the first 8,000 of the
IDX files in ``--data-dir`` (the t10k set is enough); without ``--data-dir``, random
images of the same shape (the time of an epoch does not depend on the pixel values).

Each figure is the median of ``--repeats`` epochs after one untimed warm-up epoch
(which, for this framework, also loads the compiled kernels: ``cold`` reports it), and
each library runs in its own child process so thread pools never compete. Prints the
seconds per epoch and the ratio to each PyTorch figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from project.guard import require_stages

IMAGES = 8000
BATCH = 32
CHANNELS = (8, 16)
HIDDEN = 64


def load_images(data_dir: Path | None) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The first 8,000 MNIST images of ``data_dir`` (train set if present, else t10k),
    or random ones when no folder is given."""
    if data_dir is None:
        rng = np.random.default_rng(0)
        return rng.random((IMAGES, 28, 28)), rng.integers(0, 10, IMAGES)
    from project.idx import load_mnist

    sets = load_mnist(data_dir)
    x, y = sets.get("train", sets["test"])
    return x[:IMAGES], y[:IMAGES]


def timed_epochs(epoch: Callable[[], None], repeats: int) -> dict[str, Any]:
    start = time.perf_counter()
    epoch()
    cold = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        epoch()
        times.append(time.perf_counter() - start)
    return {"cold": cold, "median": statistics.median(times), "all": times}


def minitorch_worker(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.int64], repeats: int, dtype: str
) -> Any:
    from module1.tensor import from_numpy
    from module2.fast_ops import FastTensorBackend
    from module2.fast_optim import FastAdam
    from module4.losses import cross_entropy
    from module4.models import DigitCNN

    model = DigitCNN(size=28, channels=CHANNELS, hidden=HIDDEN, seed=0).to(dtype)
    images = np.ascontiguousarray(x[:, None], dtype=dtype)

    def images_to_input(idx: npt.NDArray[np.int64]) -> Any:
        return from_numpy(images[idx], FastTensorBackend)

    optimizer = FastAdam(model.parameters(), lr=2e-3)
    order = np.random.default_rng(0).permutation(len(y))

    def epoch() -> None:
        model.train()
        for start in range(0, len(y), BATCH):
            idx = order[start : start + BATCH]
            loss = cross_entropy(model(images_to_input(idx)), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    return timed_epochs(epoch, repeats)


def torch_worker(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.int64], repeats: int, dtype: str
) -> Any:
    import torch
    from torch import nn

    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    kind = getattr(torch, dtype)
    c1, c2 = CHANNELS
    model = nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(0.25),
        nn.Linear(c2 * 49, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, 10),
    ).to(kind)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    images = torch.tensor(x[:, None], dtype=kind)
    labels = torch.tensor(y, dtype=torch.long)
    order = torch.tensor(np.random.default_rng(0).permutation(len(y)))
    loss_fn = nn.CrossEntropyLoss()

    def epoch() -> None:
        model.train()
        for start in range(0, len(y), BATCH):
            idx = order[start : start + BATCH]
            loss = loss_fn(model(images[idx]), labels[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    return {**timed_epochs(epoch, repeats), "threads": torch.get_num_threads()}


def run_worker(args: list[str]) -> Any:
    from project.bench_page import run_worker as run

    return run("project.bench_cnn", args)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m project.bench_cnn",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--data-dir", type=Path, help="folder with MNIST IDX files (else random)")
    ap.add_argument("--repeats", type=int, default=3, help="timed epochs per library (3)")
    ap.add_argument(
        "--dtype", choices=("float64", "float32"), default="float64",
        help="this framework's dtype (float64)",
    )  # fmt: skip
    ap.add_argument("--markdown", action="store_true",
                    help="also write the table into docs/benchmarks.md (this script's "
                         "section, dated, with the machine)")  # fmt: skip
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    require_stages(0, 1, 2, 4)
    x, y = load_images(ns.data_dir)
    if ns.worker:
        kind = ns.worker
        result = (
            minitorch_worker(x, y, ns.repeats, ns.dtype)
            if kind == "minitorch"
            else torch_worker(x, y, ns.repeats, kind)
        )
        print("RESULT=" + json.dumps(result))
        return 0
    from rich.console import Console
    from rich.table import Table

    from project.bench_page import Report

    console = Console()
    report = Report("bench_cnn", console, argv)
    source = f"the first {len(y)} images of {ns.data_dir}" if ns.data_dir else "random images"
    console.print(
        f"[bold]bench_cnn[/]: one epoch of DigitCNN(size=28, channels={CHANNELS}) on {source}, "
        f"batch {BATCH}, Adam; median of {ns.repeats} epochs after a warm-up; "
        f"{os.cpu_count()} CPUs"
    )
    extra = ["--repeats", str(ns.repeats)] + (
        ["--data-dir", str(ns.data_dir)] if ns.data_dir else []
    )
    ours = run_worker(["minitorch", "--dtype", ns.dtype, *extra])
    have_torch = (
        subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
    )
    theirs = {d: run_worker([d, *extra]) for d in ("float32", "float64")} if have_torch else {}
    table = Table("library", "dtype", "s / epoch", "cold (1st epoch)", "ours ÷ this")
    if ours:
        table.add_row("minitorch (fast backend)", ns.dtype, f"{ours['median']:.2f}",
                      f"{ours['cold']:.2f}", "1.00")  # fmt: skip
    for dtype, res in theirs.items():
        if res:
            ratio = f"{ours['median'] / res['median']:.2f}x" if ours else "-"
            table.add_row(f"PyTorch ({res['threads']} threads)", dtype, f"{res['median']:.2f}",
                          f"{res['cold']:.2f}", ratio)  # fmt: skip
    report.show(table)
    if not have_torch:
        report.note("PyTorch is not installed: `pip install torch==2.13.0` for the comparison.")
    if ns.markdown and ours:
        report.write()
    return 0 if ours else 1


if __name__ == "__main__":
    raise SystemExit(main())
