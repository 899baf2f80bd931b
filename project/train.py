"""Train a 2-D classifier with the scalar engine (stage 0) or with tensors (stage 1 on).

    python -m project.train --dataset split

Backends: ``fast`` (the default; stage 2: tensors on the Numba backend, updated by the
fused FastAdam / FastSGD of task 2.4; the first run compiles the kernels), ``cuda``
(stage 3: the tensors in GPU memory, CUDA kernels, the fused CudaAdam / CudaSGD of task
3.4; needs an NVIDIA GPU, or NUMBA_ENABLE_CUDASIM=1 for Numba's slow CUDA simulator),
``simple`` (stage 1: the same tensors on SimpleBackend, pure Python) and ``scalar``
(stage 0: every weight a Scalar, one example at a time). ``--no-fused`` makes the fast
and cuda backends use stage 0's Adam / SGD instead (an Adam step is then 18 tensor
operations per parameter).
Defaults: 50 points (seed 0), hidden size 10 (2-10-10-1: ReLU, ReLU, sigmoid), Adam with
lr 0.1, 250 full-batch epochs, binary cross-entropy. Prints the time per epoch and writes
``runs/<backend>_<dataset>/log.csv`` (loss and accuracy per epoch) and ``figure.png``
(decision boundary and learning curves). Accuracy is a fraction of 1 (0.9 means 90%), in
``log.csv`` and on the terminal alike.
"""

from __future__ import annotations

import argparse
import csv
import gc
import importlib.util
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from module0.autodiff import no_grad
from module0.datasets import DATASETS, Graph, load_dataset
from module0.module import Module
from module0.optim import SGD, Adam, Optimizer
from module0.scalar_nn import ScalarNetwork
from project import train_scalar
from project.guard import require_stages
from project.plots import plot_classifier

HAVE_STAGE2 = importlib.util.find_spec("module2") is not None
"""False in a handout released ``--through 1``: no fast backend, simple is the default."""

HAVE_STAGE1 = importlib.util.find_spec("module1") is not None
"""False in a handout released ``--through 0``: the scalar engine only."""
if TYPE_CHECKING or HAVE_STAGE1:
    from module1.tensor import Tensor, from_numpy
    from module1.tensor_nn import MLP, binary_cross_entropy_with_logits
    from module1.tensor_ops import SimpleBackend, TensorBackend

TENSOR_BACKENDS: dict[str, TensorBackend] = {"simple": SimpleBackend} if HAVE_STAGE1 else {}
"""Tensor backends by command-line name (later stages add theirs)."""
FUSED: dict[str, tuple[type[Adam], type[SGD]]] = {}
"""The fused (Adam, SGD) of a tensor backend that has them, by command-line name."""
if HAVE_STAGE2:
    from module2.fast_ops import FastTensorBackend
    from module2.fast_optim import FastAdam, FastSGD

    TENSOR_BACKENDS["fast"] = FastTensorBackend
    FUSED["fast"] = (FastAdam, FastSGD)
HAVE_STAGE3 = importlib.util.find_spec("module3") is not None
if HAVE_STAGE3:
    from module3.cuda_ops import CudaTensorBackend, CudaUnavailableError, require_cuda, to_cuda
    from module3.cuda_optim import CudaAdam, CudaSGD

    TENSOR_BACKENDS["cuda"] = CudaTensorBackend
    FUSED["cuda"] = (CudaAdam, CudaSGD)
BACKENDS = ("scalar", *TENSOR_BACKENDS)
STAGES_OF_BACKEND = {"scalar": (0,), "simple": (0, 1), "fast": (0, 1, 2), "cuda": (0, 1, 3)}
"""The stages whose tasks a backend runs on (checked before training starts)."""


@dataclass
class Config:
    """Everything a run depends on; the defaults are the documented ones."""

    backend: str = "fast" if HAVE_STAGE2 else "simple" if HAVE_STAGE1 else "scalar"
    dataset: str = "xor"
    points: int = 50
    hidden: int = 10
    epochs: int = 250
    optimizer: str = "adam"
    lr: float = 0.1
    momentum: float = 0.9
    seed: int = 0
    out: Path = Path("runs")
    log_every: int = 25
    figure: bool = True
    fused: bool = True
    """On the fast / cuda backend: the fused optimizers (tasks 2.4, 3.4), else stage 0's
    Adam / SGD."""
    dtype: str = "float64"
    """The tensors' dtype (float64 or float32; the scalar engine has float64 only)."""


@dataclass
class Result:
    """What a run produced."""

    losses: list[float] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)
    seconds_per_epoch: float = 0.0
    log_path: Path | None = None
    figure_path: Path | None = None

    @property
    def final_accuracy(self) -> float:
        return self.accuracies[-1] if self.accuracies else 0.0


Predict = Callable[[Sequence[tuple[float, float]]], Sequence[float]]


class Trainer(Protocol):
    """One model on one dataset: a full-batch step and a predictor for the figure."""

    @property
    def model(self) -> Module: ...

    def epoch(self, optimizer: Optimizer) -> tuple[float, float]: ...

    def predict(self, points: Sequence[tuple[float, float]]) -> Sequence[float]: ...


class ScalarTrainer:
    """Stage 0's ScalarNetwork, trained by ``train_scalar.epoch``."""

    def __init__(self, config: Config, data: Graph) -> None:
        self.model = ScalarNetwork(config.hidden, seed=config.seed)
        self.data = data

    def epoch(self, optimizer: Optimizer) -> tuple[float, float]:
        return train_scalar.epoch(self.model, self.data, optimizer)

    def predict(self, points: Sequence[tuple[float, float]]) -> Sequence[float]:
        return train_scalar.predictor(self.model)(points)


def tensor_epoch(model: MLP, X: Tensor, y: Tensor, optimizer: Optimizer) -> tuple[float, float]:
    """One full-batch step of a tensor classifier; return (mean loss, accuracy)."""
    logits = model(X)
    loss = binary_cross_entropy_with_logits(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    predictions = logits.to_numpy() > 0.0
    accuracy = float(np.mean(predictions == (y.to_numpy() > 0.5)))
    return loss.item(), accuracy


class TensorTrainer:
    """A 2-hidden-hidden-1 MLP on tensors of one backend, the whole dataset per step."""

    def __init__(self, config: Config, data: Graph, backend: TensorBackend) -> None:
        self.model = MLP((2, config.hidden, config.hidden, 1), seed=config.seed, backend=backend)
        self.model.to(config.dtype)
        self.backend, self.dtype = backend, config.dtype
        self.X = from_numpy(np.array(data.X, dtype=config.dtype), backend)
        self.y = from_numpy(np.array(data.y, dtype=config.dtype).reshape(-1, 1), backend)
        if backend.cuda:  # the data to GPU memory once, not at every step
            self.X, self.y = to_cuda(self.X), to_cuda(self.y)

    def epoch(self, optimizer: Optimizer) -> tuple[float, float]:
        return tensor_epoch(self.model, self.X, self.y, optimizer)

    def predict(self, points: Sequence[tuple[float, float]]) -> Sequence[float]:
        with no_grad():
            batch = from_numpy(np.array(points, dtype=self.dtype), self.backend)
            return [float(p) for p in self.model(batch).sigmoid().to_numpy()[:, 0]]


def make_trainer(config: Config, data: Graph) -> Trainer:
    if config.backend == "scalar":
        return ScalarTrainer(config, data)
    if config.backend in TENSOR_BACKENDS:
        return TensorTrainer(config, data, TENSOR_BACKENDS[config.backend])
    raise ValueError(f"unknown backend {config.backend!r}; choose one of {', '.join(BACKENDS)}")


def make_optimizer(config: Config, model: Module) -> Optimizer:
    """Adam or SGD; on the fast and cuda backends (unless ``fused`` is off) the fused
    versions of tasks 2.4 and 3.4, one kernel call per parameter per step."""
    adam, sgd = FUSED.get(config.backend, (Adam, SGD)) if config.fused else (Adam, SGD)
    if config.optimizer == "adam":
        return adam(model.parameters(), lr=config.lr)
    if config.optimizer == "sgd":
        return sgd(model.parameters(), lr=config.lr, momentum=config.momentum)
    raise ValueError(f"unknown optimizer {config.optimizer!r}; choose adam or sgd")


def train(config: Config, console: Console | None = None) -> Result:
    """Train as ``config`` says, logging per epoch; return the curves and output paths."""
    console = console or Console()
    data = load_dataset(config.dataset, config.points, config.seed)
    trainer = make_trainer(config, data)
    optimizer = make_optimizer(config, trainer.model)
    run_dir = config.out / f"{config.backend}_{config.dataset}"
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / "log.csv"
    result = Result(log_path=log_path)
    console.print(
        f"[bold]{config.backend}[/] 2-{config.hidden}-{config.hidden}-1 on {config.dataset!r} "
        f"({data.N} points), {type(optimizer).__name__} lr={config.lr}, {config.epochs} epochs, "
        f"{trainer.model.num_parameters()} parameters"
    )
    start = time.perf_counter()
    with (
        open(log_path, "w", newline="") as log_file,
        Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress,
    ):
        writer = csv.writer(log_file)
        writer.writerow(["epoch", "loss", "accuracy", "seconds"])
        bar = progress.add_task("training", total=config.epochs, stats="")  # none before 1
        for e in range(1, config.epochs + 1):
            tick = time.perf_counter()
            loss, acc = trainer.epoch(optimizer)
            seconds = time.perf_counter() - tick
            result.losses.append(loss)
            result.accuracies.append(acc)
            writer.writerow([e, f"{loss:.6f}", f"{acc:.4f}", f"{seconds:.4f}"])
            progress.update(bar, advance=1, stats=f"loss {loss:.4f}  acc {acc:.4f}")
            if e % config.log_every == 0 or e == config.epochs:
                progress.console.print(
                    f"epoch {e:4d}  loss {loss:.4f}  accuracy {acc:.4f}  "
                    f"{seconds * 1000:.1f} ms/epoch"
                )
    result.seconds_per_epoch = (time.perf_counter() - start) / config.epochs
    console.print(
        f"final train accuracy {result.final_accuracy:.4f}, "
        f"{result.seconds_per_epoch * 1000:.1f} ms per epoch on average; log: {result.log_path}"
    )
    if config.figure:
        result.figure_path = plot_classifier(
            data,
            trainer.predict,
            result.losses,
            result.accuracies,
            run_dir / "figure.png",
            title=f"{config.backend} backend on {config.dataset} "
            f"(final accuracy {result.final_accuracy:.0%})",
        )
        console.print(f"figure: {result.figure_path}")
    return result


def parse_args(argv: Sequence[str] | None = None, backend: str | None = None) -> Config:
    d = Config(backend=backend or Config.backend)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", default=d.backend, choices=BACKENDS)
    ap.add_argument("--dataset", default=d.dataset, choices=sorted(DATASETS))
    ap.add_argument("--points", type=int, default=d.points)
    ap.add_argument("--hidden", type=int, default=d.hidden)
    ap.add_argument("--epochs", type=int, default=d.epochs)
    ap.add_argument("--optimizer", default=d.optimizer, choices=["adam", "sgd"])
    ap.add_argument("--lr", type=float, default=d.lr)
    ap.add_argument("--momentum", type=float, default=d.momentum, help="SGD only")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument(
        "--out",
        type=Path,
        default=d.out,
        help="the runs folder: a run writes OUT/BACKEND_DATASET/ (default: runs)",
    )
    ap.add_argument("--log-every", type=int, default=d.log_every, help="print every N epochs")
    ap.add_argument("--no-figure", dest="figure", action="store_false")
    ap.add_argument(
        "--no-fused",
        dest="fused",
        action="store_false",
        help="fast / cuda backend: stage 0's Adam/SGD instead of the fused ones "
        "(FastAdam/FastSGD, task 2.4; CudaAdam/CudaSGD, task 3.4)",
    )
    ap.add_argument("--dtype", default=d.dtype, choices=["float64", "float32"],
                    help="the tensors' dtype (tensor backends only)")  # fmt: skip
    ns = ap.parse_args(argv)
    if ns.epochs < 1 or ns.points < 1 or ns.hidden < 1 or ns.log_every < 1:
        ap.error("--epochs, --points, --hidden and --log-every must be positive")
    if ns.backend == "scalar" and ns.dtype != "float64":
        ap.error("--dtype float32 needs a tensor backend: the scalar engine computes in float64")
    return Config(**vars(ns))


def main(argv: Sequence[str] | None = None, backend: str | None = None) -> int:
    config = parse_args(argv, backend)
    require_stages(*STAGES_OF_BACKEND[config.backend])
    if config.backend == "cuda":
        try:
            require_cuda()
        except CudaUnavailableError as err:
            Console(stderr=True).print(f"error: {err}", markup=False, highlight=False)
            return 2
    # The engine's graphs hold no reference cycles (reference counting frees them), so
    # the cyclic collector finds nothing in them; freezing the start-up heap stops its
    # periodic full collections from rescanning every imported module's objects.
    gc.collect()
    gc.freeze()
    train(config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
