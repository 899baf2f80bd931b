"""Milestone 4.5c: a Kim-style conv1d sentence classifier.

    python -m project.train_sentiment                               # offline stand-in
    python -m project.train_sentiment --sst-dir SST-2 --glove glove.6B.50d.txt

Trains :class:`~module4.models.SentenceCNN` (word vectors, conv1d windows of 3, 4 and 5
words with 32 filters each, ReLU, max over time, dropout 0.5, Linear to 2 classes).

* **Offline (default):** on the generated stand-in corpus of ``project/sentences.py``
  (2,000 training and 500 test sentences whose labels depend on word order: negation and
  "but" clauses), with word vectors of 32 learned from scratch. Gate: >= 95% test
  accuracy and first-layer (convolution) weights moved.
* **SST-2 with GloVe:** the user supplies the files, nothing is downloaded. ``--sst-dir``
  is GLUE's SST-2 folder (``train.tsv``, ``dev.tsv``; from
  https://dl.fbaipublicfiles.com/glue/data/SST-2.zip), tested on dev; ``--glove`` a
  GloVe text file (``glove.6B.50d.txt`` from https://nlp.stanford.edu/projects/glove/),
  frozen as in Kim's CNN-static. Gate: ``--gate`` (default 0.75; Kim reports about 87%
  with 300-d word2vec vectors and 100 filters per width).

Exits 1 unless the gate holds. Writes ``runs/sentiment/...`` (log, parameters, learning
curves, confusion matrix, filters as heat maps, misclassified sentences).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from rich.console import Console

from module4.models import SentenceCNN
from project.cnn_train import Split, add_run_args, config_from, run_gated
from project.guard import require_stages
from project.sentences import Example, Vocab, encode, read_glove, read_sst2, standin_sst


def to_split(examples: list[Example], vocab: Vocab, length: int) -> Split:
    tokens = [t for t, _ in examples]
    return Split(
        encode(tokens, vocab, length),
        np.array([label for _, label in examples], dtype=np.int64),
        [" ".join(t) for t in tokens],
    )


def identity(x: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    return x


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m project.train_sentiment", description=__doc__.split("\n")[0]
    )
    p.add_argument("--sst-dir", type=Path, help="GLUE SST-2 folder (train.tsv, dev.tsv)")
    p.add_argument("--glove", type=Path, help="GloVe text file (needs --sst-dir)")
    p.add_argument("--dim", type=int, help="word-vector size (32; the GloVe file's with --glove)")
    p.add_argument("--length", type=int, default=32, help="tokens per sentence (32)")
    p.add_argument("--filters", type=int, default=32, help="filters per window width (32)")
    add_run_args(p, epochs=10, lr=1e-2)
    p.add_argument("--gate", type=float, help="test accuracy to reach (0.95; 0.75 on SST-2)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    require_stages(0, 1, 2, 4)
    console = Console(soft_wrap=True)
    if args.glove and not args.sst_dir:
        ap.error("--glove needs --sst-dir (the stand-in corpus learns its word vectors)")
    if args.sst_dir:
        try:
            train, test = read_sst2(args.sst_dir)
        except (OSError, ValueError) as error:
            console.print(f"[red]error:[/] {error}")
            return 2
        source, gate = f"SST-2 from {args.sst_dir} (dev as the test set)", args.gate or 0.75
    else:
        train, test = standin_sst(seed=args.seed)
        source, gate = "the offline stand-in corpus (project/sentences.py)", args.gate or 0.95
    vocab = Vocab.build([t for t, _ in train])
    embeddings, dim = None, args.dim or 32
    if args.glove:
        try:
            dim = args.dim or _glove_dim(args.glove)
            embeddings = read_glove(args.glove, vocab, dim, seed=args.seed)
        except (OSError, ValueError) as error:
            console.print(f"[red]error:[/] {error}")
            return 2
    console.print(f"{source}: vocabulary of {len(vocab)} words, vectors of {dim}")
    model = SentenceCNN(
        len(vocab),
        dim,
        filters=args.filters,
        embeddings=embeddings,
        freeze=embeddings is not None,
        seed=args.seed,
    )
    config = config_from(args, "sentiment", gate, class_names=("negative", "positive"))
    return run_gated(
        model,
        model.convs[0].weight,
        to_split(train, vocab, args.length),
        to_split(test, vocab, args.length),
        config,
        identity,
        console,
    )


def _glove_dim(path: Path) -> int:
    """The vector size of a GloVe file: the number of values on its first line."""
    with path.open(encoding="utf-8") as f:
        return len(f.readline().rstrip().split(" ")) - 1


if __name__ == "__main__":
    raise SystemExit(main())
