"""The training loop, logs, figures and gate shared by the stage-4 milestone scripts.

:func:`fit` trains a classifier with mini-batches and FastAdam (task 2.4) on
cross-entropy (task 4.4), shows a progress bar per epoch (with the loss of the last
batch done, blank before the first), prints and logs one line per epoch (``log.csv``),
lowers the learning rate on a cosine (:func:`cosine_lr`), saves the trained parameters
(``model.npz``) and four figures:

* ``curves.png`` — loss and accuracy per epoch, train and test;
* ``confusion.png`` — the test confusion matrix;
* ``filters.png`` — the first layer's weights (each 2-D filter as a small image, each
  1-D filter as a ``dim × width`` heat map), all on one diverging colour scale with a
  colour bar: red positive, blue negative, white zero;
* ``misclassified.png`` — test examples the model gets wrong, with truth and guess.

Accuracy is a fraction of 1 everywhere: in ``log.csv`` (columns ``train_acc`` and
``test_acc``), on the terminal, in the gate's message and in ``--gate`` (0.95 means 95%).

A milestone passes its **gate** when the final test accuracy reaches the threshold AND
the first layer's weights moved from their initial values (relative change at least
``MIN_MOVE``): accuracy alone could come from a model whose convolutions never learned
(a frozen first layer with a trained head still scores well on easy data).
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.figure import Figure
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from module0.autodiff import no_grad
from module0.module import Module, Parameter
from module1.tensor import Tensor, from_numpy
from module2.fast_optim import FastAdam
from module4.layers import save
from module4.losses import cross_entropy
from project.amp import Precision, add_amp_args
from project.dist import Ranks, report_ranks

MIN_MOVE = 0.01
"""The smallest relative change ``|W - W0| / |W0|`` of the first layer that counts as
"the weights moved" for a gate."""


@dataclass
class Split:
    """A labelled data set: inputs (images ``(n, h, w)`` or token ids ``(n, length)``)
    and integer labels; ``texts`` holds the sentences of a text set, for the figures."""

    x: npt.NDArray[Any]
    y: npt.NDArray[np.int64]
    texts: list[str] | None = None

    def __len__(self) -> int:
        return len(self.y)


@dataclass
class FitConfig:
    name: str
    epochs: int
    batch_size: int = 32
    lr: float = 2e-3
    seed: int = 0
    gate: float = 0.95
    out: Path = Path("runs")
    figures: bool = True
    class_names: Sequence[str] = tuple(str(i) for i in range(10))
    dtype: str = "float64"
    """The parameters' and inputs' dtype: ``float64`` or ``float32``."""
    amp: str | None = None
    """Mixed precision (stage 6): ``bfloat16`` or ``float16`` autocast, or None."""


@dataclass
class FitResult:
    train_loss: list[float] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    test_loss: list[float] = field(default_factory=list)
    test_acc: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    moved: float = 0.0
    confusion: npt.NDArray[np.int64] | None = None
    out_dir: Path = Path()
    files: list[Path] = field(default_factory=list)

    def gate(self, threshold: float) -> tuple[bool, str]:
        """(passed, a sentence saying why)."""
        acc = self.test_acc[-1] if self.test_acc else 0.0
        ok_acc, ok_move = acc >= threshold, self.moved >= MIN_MOVE
        verdict = "PASSED" if ok_acc and ok_move else "FAILED"
        return ok_acc and ok_move, (
            f"gate {verdict}: test accuracy {acc:.4f} (needs >= {threshold:g}) "
            f"{'ok' if ok_acc else 'NOT reached'}; first-layer weights moved "
            f"{self.moved:.3f} relative (needs >= {MIN_MOVE}) {'ok' if ok_move else 'NOT moved'}"
        )


def cosine_lr(lr: float, epoch: int, epochs: int) -> float:
    """The learning rate of ``epoch`` (1-based) on a cosine from ``lr`` down to
    ``lr / 20``: big steps early, small ones to settle at the end."""
    floor = lr / 20
    return floor + (lr - floor) * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / max(epochs, 1)))


def _log_softmax(logits: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _in_dtype(
    to_input: Callable[[npt.NDArray[Any]], Any], dtype: str
) -> Callable[[npt.NDArray[Any]], Any]:
    """``to_input`` whose tensors are converted to ``dtype`` (token ids stay arrays), in
    NumPy: inputs need no graph, and a cast kernel from float64 would be one more kernel
    to compile (6 s) in a float32 run."""

    def convert(batch: npt.NDArray[Any]) -> Any:
        x = to_input(batch)
        if not isinstance(x, Tensor) or x.dtype == np.dtype(dtype):
            return x
        return from_numpy(x.to_numpy(dtype), x.backend)

    return convert


def evaluate(
    model: Module,
    data: Split,
    to_input: Callable[[npt.NDArray[Any]], Any],
    batch: int = 500,
    precision: Precision | None = None,
) -> tuple[float, npt.NDArray[np.int64]]:
    """(mean cross-entropy, predicted classes) on ``data``, in eval mode, no graph, in
    the training's ``precision``."""
    was_training = model.training
    model.eval()
    losses, predictions = [], []
    with no_grad(), (precision or Precision()).autocast():
        for start in range(0, len(data), batch):
            logits = model(to_input(data.x[start : start + batch])).to_numpy()
            y = data.y[start : start + batch]
            losses.append(-_log_softmax(logits)[np.arange(len(y)), y].sum())
            predictions.append(logits.argmax(axis=1))
    model.train(was_training)
    return float(np.sum(losses) / len(data)), np.concatenate(predictions)


def fit(
    model: Module,
    first_layer: Parameter,
    train: Split,
    test: Split,
    config: FitConfig,
    to_input: Callable[[npt.NDArray[Any]], Any],
    console: Console | None = None,
    ranks: Ranks | None = None,
) -> FitResult:
    """Train ``model`` and write the log, the parameters and the figures under
    ``config.out / config.name``; return the per-epoch figures and the gate inputs.

    ``ranks`` (``--ddp``, stage 6): every rank draws the same batch order and trains on
    its share of each batch in ``DistributedDataParallel``; rank 0 alone prints and
    writes, and every rank reports its samples per second at the end."""
    console = console or Console()
    ranks = ranks or Ranks()
    out = config.out / config.name
    if ranks.lead:
        out.mkdir(parents=True, exist_ok=True)
    result = FitResult(out_dir=out)
    precision = Precision(config.amp, config.dtype)  # --amp: autocast, loss scaling
    model.to(config.dtype)
    trained = ranks.wrap(model)  # rank 0's values on every rank
    to_input = _in_dtype(to_input, config.dtype)
    w0 = first_layer.value.to_numpy().copy()
    optimizer = FastAdam(model.parameters(), lr=config.lr)
    rng = np.random.default_rng(config.seed)
    batches = math.ceil(len(train) / config.batch_size)
    log_path = out / "log.csv"
    if ranks.lead:
        with log_path.open("w", newline="") as f:
            csv.writer(f).writerow(
                ["epoch", "train_loss", "train_acc", "test_loss", "test_acc", "seconds"]
            )
    console.print(
        f"[bold]{config.name}[/]: {len(train)} training and {len(test)} test examples, "
        f"{model.num_parameters():,} parameters, {config.epochs} epochs of {batches} batches"
    )
    last = ""  # the progress bar's loss: the last batch's, blank before the first
    training_seconds, samples = 0.0, 0
    for epoch in range(1, config.epochs + 1):
        start = time.perf_counter()
        optimizer.lr = cosine_lr(config.lr, epoch, config.epochs)
        model.train()
        order = rng.permutation(len(train))
        total_loss, correct = 0.0, 0
        with Progress(
            TextColumn(f"epoch {epoch}/{config.epochs}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[loss]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=not (ranks.lead and console.is_terminal),
        ) as progress:
            task = progress.add_task("batches", total=batches, loss=last)
            for b in range(batches):
                began = time.perf_counter()
                idx = ranks.share(order[b * config.batch_size : (b + 1) * config.batch_size])
                with precision.autocast():
                    logits = trained(to_input(train.x[idx]))
                    loss = cross_entropy(logits, train.y[idx])
                optimizer.zero_grad()
                precision.backward(loss)
                ranks.sync(trained)  # --ddp: the mean of the ranks' gradients
                precision.step(optimizer)
                training_seconds += time.perf_counter() - began
                samples += len(idx)
                value = loss.item()
                total_loss += value * len(idx)
                correct += int((logits.to_numpy().argmax(axis=1) == train.y[idx]).sum())
                last = f"loss {value:.4f}"
                progress.update(task, advance=1, loss=last)
        total_loss, correct = ranks.total(total_loss), int(ranks.total(correct))
        test_loss, predicted = evaluate(model, test, to_input, precision=precision)
        seconds = time.perf_counter() - start
        result.train_loss.append(total_loss / len(train))
        result.train_acc.append(correct / len(train))
        result.test_loss.append(test_loss)
        result.test_acc.append(float((predicted == test.y).mean()))
        result.seconds.append(seconds)
        row = [epoch, *(x[-1] for x in (result.train_loss, result.train_acc)), test_loss]
        if ranks.lead:
            with log_path.open("a", newline="") as f:
                csv.writer(f).writerow([*row, result.test_acc[-1], seconds])
        console.print(
            f"epoch {epoch:3d}  train loss {result.train_loss[-1]:.4f}  acc "
            f"{result.train_acc[-1]:.4f}  |  test loss {test_loss:.4f}  acc "
            f"{result.test_acc[-1]:.4f}  |  {seconds:.1f}s"
        )
    w = first_layer.value.to_numpy()
    result.moved = float(np.linalg.norm(w - w0)) / max(float(np.linalg.norm(w0)), 1e-12)
    _, predicted = evaluate(model, test, to_input)
    k = len(config.class_names)
    result.confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(result.confusion, (test.y, predicted), 1)
    report_ranks(console, ranks, trained, samples, training_seconds)
    if precision.amp:
        console.print(precision.describe())
    if not ranks.lead:
        return result
    result.files = [log_path, save(model, out / "model.npz")]
    if config.figures:
        result.files += [
            plot_curves(result, out / "curves.png", config.name),
            plot_confusion(result.confusion, config.class_names, out / "confusion.png"),
            plot_filters(w, out / "filters.png"),
            plot_misclassified(test, predicted, config.class_names, out / "misclassified.png"),
        ]
    console.print("wrote " + ", ".join(str(p) for p in result.files))
    return result


def add_run_args(p: argparse.ArgumentParser, epochs: int, lr: float) -> None:
    """The options every milestone script shares (``--epochs``, ``--batch-size``,
    ``--lr``, ``--seed``, ``--out``, ``--no-figures``, ``--dtype``), with its own
    defaults."""
    p.add_argument(
        "--epochs", type=int, default=epochs, help=f"passes over the training set ({epochs})"
    )
    p.add_argument("--batch-size", type=int, default=32, help="examples per step (32)")
    p.add_argument(
        "--lr", type=float, default=lr, help=f"Adam learning rate, start of the cosine ({lr})"
    )
    p.add_argument("--seed", type=int, default=0, help="weights, dropout and batch order (0)")
    p.add_argument("--out", type=Path, default=Path("runs"),
                   help="the runs folder: a run writes OUT/NAME/ (runs/digits/, ...)")  # fmt: skip
    p.add_argument("--no-figures", action="store_true", help="skip the four figures")
    p.add_argument(
        "--dtype", choices=("float64", "float32"), default="float64",
        help="the parameters' and inputs' dtype (float64)",
    )  # fmt: skip
    add_amp_args(p)


def config_from(args: argparse.Namespace, name: str, gate: float, **extra: Any) -> FitConfig:
    """A FitConfig from the options of :func:`add_run_args`."""
    return FitConfig(
        name=name,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        gate=gate,
        out=args.out,
        figures=not args.no_figures,
        dtype=args.dtype,
        amp=args.amp,
        **extra,
    )


def run_gated(
    model: Module,
    first_layer: Parameter,
    train: Split,
    test: Split,
    config: FitConfig,
    to_input: Callable[[npt.NDArray[Any]], Any],
    console: Console,
    ranks: Ranks | None = None,
) -> int:
    """:func:`fit`, then print the gate's verdict; the exit status (0 passed, 1 not).
    ``ranks``: as :func:`fit`'s (every rank returns the same status)."""
    result = fit(model, first_layer, train, test, config, to_input, console, ranks)
    passed, message = result.gate(config.gate)
    console.print(message)
    return 0 if passed else 1


# ## Figures


def plot_curves(result: FitResult, path: Path, title: str) -> Path:
    """Loss and accuracy per epoch, train and test."""
    fig = Figure(figsize=(10, 4))
    ax_loss, ax_acc = fig.subplots(1, 2)
    epochs = range(1, len(result.train_loss) + 1)
    for ax, (train, test), label in (
        (ax_loss, (result.train_loss, result.test_loss), "cross-entropy"),
        (ax_acc, (result.train_acc, result.test_acc), "accuracy"),
    ):
        ax.plot(epochs, train, marker=".", label="train")
        ax.plot(epochs, test, marker=".", label="test")
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"{title}: learning curves")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def plot_confusion(confusion: npt.NDArray[np.int64], names: Sequence[str], path: Path) -> Path:
    """The confusion matrix (rows: true class, columns: predicted), counts written in."""
    k = len(names)
    fig = Figure(figsize=(1.0 + 0.55 * k, 0.8 + 0.5 * k))
    ax = fig.subplots()
    ax.imshow(confusion, cmap="Blues")
    ax.set_xticks(range(k), names, rotation=45 if max(map(len, names)) > 2 else 0)
    ax.set_yticks(range(k), names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    top = confusion.max() if confusion.size else 0
    for i in range(k):
        for j in range(k):
            color = "white" if confusion[i, j] > top / 2 else "black"
            ax.text(j, i, str(confusion[i, j]), ha="center", va="center", color=color, fontsize=8)
    acc = np.trace(confusion) / max(confusion.sum(), 1)
    ax.set_title(f"test confusion matrix (accuracy {acc:.2%})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def plot_filters(weight: npt.NDArray[np.float64], path: Path, most: int = 32) -> Path:
    """The first layer's filters: ``(out, 1, kh, kw)`` as images, ``(out, dim, width)``
    as heat maps (at most ``most`` of them; several input channels are averaged). All
    share one colour scale, symmetric about 0 so that white is a zero weight, red a
    positive one and blue a negative one, shown by a colour bar: a filter's pattern
    and its strength compare across filters."""
    filters = weight[:most]
    n = len(filters)
    cols = min(8, n)
    rows = math.ceil(n / cols)
    height = (1.6 if weight.ndim == 4 else 2.2) * rows + 0.9
    fig = Figure(figsize=(max(1.4 * cols + 1.4, 6.0), height), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols)).reshape(-1)
    images = []
    for i in range(n):
        image = filters[i, 0] if weight.ndim == 4 and weight.shape[1] == 1 else filters[i]
        images.append(image.mean(axis=0) if image.ndim == 3 else image)
    bound = max((float(np.max(np.abs(im))) for im in images), default=0.0) or 1.0
    shown = None
    for i, ax in enumerate(axes):
        ax.set_axis_off()
        if i >= n:
            continue
        shown = ax.imshow(images[i], cmap="RdBu_r", vmin=-bound, vmax=bound, aspect="auto")
        ax.set_title(str(i), fontsize=7)
    if shown is not None:
        fig.colorbar(shown, ax=list(axes), shrink=0.8, label="weight")
    layout = "" if weight.ndim == 4 else "; rows: embedding dimensions, columns: window"
    fig.suptitle(
        f"first-layer filters {tuple(weight.shape)}\nred = positive weight, blue = "
        f"negative, white = 0 (one scale for all{layout})",
        fontsize=9,
    )
    fig.savefig(path, dpi=110)
    return path


def plot_misclassified(
    data: Split,
    predicted: npt.NDArray[np.int64],
    names: Sequence[str],
    path: Path,
    most: int = 32,
) -> Path:
    """Up to ``most`` test examples the model gets wrong: images in a grid, or
    sentences in a list, each with its true and predicted class."""
    wrong = np.flatnonzero(predicted != data.y)[:most]
    if data.texts is not None:
        fig = Figure(figsize=(11, 0.8 + 0.28 * max(len(wrong), 1)))
        ax = fig.subplots()
        ax.set_axis_off()
        lines = [
            f"true {names[data.y[i]]:>8} | said {names[predicted[i]]:>8} | {data.texts[i][:90]}"
            for i in wrong
        ] or ["(no test sentence misclassified)"]
        ax.text(0, 1, "\n".join(lines), va="top", family="monospace", fontsize=8)
        ax.set_title(f"misclassified test sentences ({len(np.flatnonzero(predicted != data.y))})")
    else:
        cols = 8
        rows = max(1, math.ceil(len(wrong) / cols))
        fig = Figure(figsize=(1.4 * cols, 1.6 * rows + 0.4))
        axes = np.atleast_1d(fig.subplots(rows, cols)).reshape(-1)
        for ax in axes:
            ax.set_axis_off()
        for ax, i in zip(axes, wrong, strict=False):
            ax.imshow(data.x[i], cmap="gray_r")
            ax.set_title(f"{names[data.y[i]]}→{names[predicted[i]]}", fontsize=8, color="red")
        total = len(np.flatnonzero(predicted != data.y))
        fig.suptitle(f"misclassified test images ({total}); title: true→predicted")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
