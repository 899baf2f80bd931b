"""What stage 5's character language models share (``train_gpt``, ``train_lstm``,
``compare_lm``): the bundled Shakespeare as tokens with the bigram baseline, the loss
of a batch and its evaluation on fixed batches, a run's record and its curves.

A model here maps token indices ``(B, T)`` to logits ``(B, T, V)`` when called.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from module0.autodiff import no_grad
from module0.module import Module
from module1.tensor import Tensor
from module5.losses import lm_cross_entropy
from module5.text import CharTokenizer, get_batch
from project.amp import Precision
from project.dist import Ranks
from project.shakespeare_data import load_works, shakespeare_split

Batch = tuple[np.ndarray, np.ndarray]


@dataclass
class Corpus:
    """The tokenizer (every character of the 42 works), the training and validation
    works as tokens, and the bigram model's validation loss on them."""

    tok: CharTokenizer
    train: np.ndarray
    val: np.ndarray
    bigram: float


def load_corpus() -> Corpus:
    tok = CharTokenizer("".join(load_works().values()))
    train_text, val_text = shakespeare_split()
    train, val = tok.encode(train_text), tok.encode(val_text)
    return Corpus(tok, train, val, bigram_loss(train, val, tok.vocab_size))


def bigram_loss(train: np.ndarray, val: np.ndarray, vocab: int) -> float:
    """Validation cross-entropy (nats) of next-character frequencies counted on the
    training tokens, add-one smoothed."""
    counts = np.ones((vocab, vocab))
    np.add.at(counts, (train[:-1], train[1:]), 1.0)
    log_p = np.log(counts / counts.sum(1, keepdims=True))
    return float(-log_p[val[:-1], val[1:]].mean())


def eval_batches(
    corpus: Corpus, batch: int, block: int, iters: int, seed: int
) -> dict[str, list[Batch]]:
    """``iters`` fixed windows of each split, drawn from ``seed`` (every model of a
    comparison is measured on the same ones)."""
    fixed = np.random.default_rng(seed)
    return {
        "train": [get_batch(corpus.train, batch, block, fixed) for _ in range(iters)],
        "val": [get_batch(corpus.val, batch, block, fixed) for _ in range(iters)],
    }


def logits_loss(logits: Tensor, y: np.ndarray) -> Tensor:
    """The mean cross-entropy of logits ``(B, T, V)`` against targets ``(B, T)``."""
    b, t, v = logits.shape
    return lm_cross_entropy(logits.contiguous().view(b * t, v), y.reshape(-1))


def lm_loss(model: Module, x: np.ndarray, y: np.ndarray) -> Tensor:
    """The mean next-token cross-entropy of ``model`` on inputs ``x`` and targets ``y``."""
    return logits_loss(model(x), y)


def estimate(
    model: Module,
    batches: list[Batch],
    ranks: Ranks | None = None,
    precision: Precision | None = None,
) -> float:
    """The mean loss over fixed batches, in eval mode, without a graph, in the
    training's ``precision`` (with ``ranks``, each rank takes its share of every batch,
    and the mean is over the ranks)."""
    ranks = ranks or Ranks()
    was = model.training
    model.eval()
    try:
        with no_grad(), (precision or Precision()).autocast():
            mine = [lm_loss(model, ranks.share(x), ranks.share(y)).item() for x, y in batches]
            return ranks.mean(float(np.mean(mine)))
    finally:
        model.train(was)


@dataclass
class Run:
    """What a training run measured."""

    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    bigram: float = math.nan
    seconds: float = 0.0


class CsvLog:
    """``log.csv``: a header, then a row per evaluation (appended as the run goes)."""

    def __init__(self, path: Path, header: list[str], write: bool = True) -> None:
        self.path, self.write = path, write
        if write:
            with path.open("w", newline="") as f:
                csv.writer(f).writerow(header)

    def row(self, values: list[object]) -> None:
        if self.write:
            with self.path.open("a", newline="") as f:
                csv.writer(f).writerow(values)


def plot_curves(run: Run, path: Path, title: str, xlabel: str = "step") -> Path:
    """Training and validation loss against steps, the bigram model's as a line."""
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.subplots()
    ax.plot(run.steps, run.train_loss, label="train")
    ax.plot(run.steps, run.val_loss, label="validation")
    ax.axhline(run.bigram, color="grey", linestyle="--", label="bigram (validation)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cross-entropy (nats per character)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path
