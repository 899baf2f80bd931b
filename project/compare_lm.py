"""Bigram, LSTM and GPT on the bundled Shakespeare, each trained for the same wall-clock
budget, measured on the same validation windows: why attention won, measured.

    python -m project.compare_lm --seconds 120      # two minutes of training each

The LSTM (``project/train_lstm.py``: embedding, one LSTM layer, a Linear head) and the
GPT (``module5/gpt.py``) are sized to about the same parameter count (``--lstm-hidden``,
``--gpt-layers``, ``--gpt-width``); the bigram model is a trained ``(V, V)`` table of
next-character logits, as small as a bigram model is. Each trains with AdamW and
clipping; its learning rate warms up over the first 5% of the budget and decays along
a cosine to a tenth over the rest, so every model gets a whole schedule in its time.
The GPT and the bigram train on random windows (``get_batch``), the LSTM with truncated
BPTT over contiguous streams. Only training steps count against the budget; every
``--eval-every`` seconds of it the clock stops and the model's mean loss over fixed
validation windows (the same ones for every model, read from a zero state) is logged.

It prints a Markdown table (parameters, steps, tokens per second of training, final
validation loss) and writes ``runs/compare/``: ``table.md``, ``log.csv`` and
``curves.png`` (validation loss against training seconds, and against characters
trained on), or the figure where ``--figure`` says.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from module0.module import Module
from module1.tensor import Tensor
from module4.layers import Embedding
from module5.gpt import GPT, GPTConfig
from module5.optim import AdamW, clip_grad_norm_, cosine_lr, decay_groups
from module5.rnn import detach_state
from module5.text import get_batch
from project.lm import Corpus, CsvLog, estimate, eval_batches, lm_loss, load_corpus, logits_loss
from project.train_lstm import CharLSTM, LSTMState, Streams


class Bigram(Module):
    """Next-character logits looked up by the current character: a ``(V, V)`` table."""

    def __init__(self, vocab_size: int, seed: int = 0) -> None:
        super().__init__()
        self.table = Embedding(vocab_size, vocab_size, rng=np.random.default_rng(seed))

    def forward(self, idx: np.ndarray) -> Tensor:
        return self.table(idx)


@dataclass
class Result:
    """One model's run: its evaluations against training seconds and tokens."""

    name: str
    parameters: int
    seconds: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    steps: int = 0
    trained_tokens: int = 0
    training_seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.trained_tokens / max(self.training_seconds, 1e-9)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m project.compare_lm", description=__doc__.split("\n")[0]
    )
    p.add_argument("--seconds", type=float, default=120.0, help="training seconds each (120)")
    p.add_argument("--eval-every", type=float, default=15.0, help="seconds between evaluations")
    p.add_argument("--eval-iters", type=int, default=4, help="validation windows (4 of 12 x 64)")
    p.add_argument("--eval-block", type=int, default=64, help="window length (64)")
    p.add_argument("--models", default="bigram,lstm,gpt", help="which, in order")
    p.add_argument("--lstm-hidden", type=int, default=144, help="LSTM width (144)")
    p.add_argument("--lstm-embd", type=int, default=32, help="LSTM embedding width (32)")
    p.add_argument("--lstm-batch", type=int, default=32, help="LSTM streams (32)")
    p.add_argument("--lstm-block", type=int, default=32, help="LSTM BPTT steps (32)")
    p.add_argument("--gpt-layers", type=int, default=2, help="GPT blocks (2)")
    p.add_argument("--gpt-width", type=int, default=64, help="GPT n_embd (64)")
    p.add_argument("--gpt-heads", type=int, default=4, help="GPT heads (4)")
    p.add_argument("--gpt-batch", type=int, default=12, help="GPT sequences per step (12)")
    p.add_argument("--gpt-block", type=int, default=64, help="GPT context (64)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--out", type=Path, default=Path("runs"),
                   help="the runs folder: this run writes OUT/compare/")  # fmt: skip
    p.add_argument("--figure", type=Path, default=None, help="the figure's path")
    return p


Step = Callable[[], tuple[Tensor, int]]
"""One training step's loss (with its graph) and the number of tokens it trained on."""


def _setup(name: str, args: argparse.Namespace, corpus: Corpus) -> tuple[Module, Step, float]:
    """The model, its step and its peak learning rate."""
    v = corpus.tok.vocab_size
    rng = np.random.default_rng(args.seed)
    model: Module
    if name == "bigram":
        model = Bigram(v, seed=args.seed).to("float32")
        batch, block = args.gpt_batch, args.gpt_block

        def bigram_step() -> tuple[Tensor, int]:
            x, y = get_batch(corpus.train, batch, block, rng)
            return lm_loss(model, x, y), batch * block

        return model, bigram_step, 3e-2
    if name == "lstm":
        lstm = CharLSTM(v, args.lstm_embd, args.lstm_hidden, 1, seed=args.seed).to("float32")
        streams = Streams(corpus.train, args.lstm_batch, args.lstm_block)
        carried: list[LSTMState | None] = [None]

        def lstm_step() -> tuple[Tensor, int]:
            x, y, restart = streams.next()
            logits, state = lstm.step(x, None if restart else carried[0])
            h, c = detach_state(state)  # type: ignore[misc]
            carried[0] = (h, c)
            return logits_loss(logits, y), x.size

        return lstm, lstm_step, 5e-3
    if name == "gpt":
        config = GPTConfig(v, args.gpt_block, args.gpt_layers, args.gpt_heads, args.gpt_width)
        gpt = GPT(config, seed=args.seed).to("float32")

        def gpt_step() -> tuple[Tensor, int]:
            x, y = get_batch(corpus.train, args.gpt_batch, args.gpt_block, rng)
            return lm_loss(gpt, x, y), x.size

        return gpt, gpt_step, 2e-3
    raise SystemExit(f"compare_lm: unknown model {name!r} (bigram, lstm, gpt)")


def train_for(name: str, args: argparse.Namespace, corpus: Corpus, evals: list) -> Result:
    """Train one model for ``args.seconds`` of training steps, evaluating as it goes."""
    model, step, lr = _setup(name, args, corpus)
    result = Result(name, model.num_parameters())
    optimizer = AdamW(decay_groups(model, 0.1), lr=lr, betas=(0.9, 0.99))
    budget, grid = args.seconds, 1000

    def evaluate() -> None:
        result.seconds.append(result.training_seconds)
        result.tokens.append(result.trained_tokens)
        result.val_loss.append(estimate(model, evals))
        print(f"{name:>6}: {result.training_seconds:6.1f} s  step {result.steps:5d}  "
              f"val loss {result.val_loss[-1]:.4f}", flush=True)  # fmt: skip

    evaluate()
    next_eval = args.eval_every
    while result.training_seconds < budget:
        fraction = int(grid * result.training_seconds / budget)
        optimizer.lr = cosine_lr(fraction, lr, grid // 20, grid, lr / 10)
        began = time.perf_counter()
        loss, tokens = step()
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        result.training_seconds += time.perf_counter() - began
        result.steps += 1
        result.trained_tokens += tokens
        if result.training_seconds >= next_eval and result.training_seconds < budget:
            evaluate()
            next_eval += args.eval_every
    evaluate()
    return result


def table(results: Sequence[Result], bigram: float) -> str:
    rows = [
        "| model | parameters | steps | tokens / s (training) | validation loss |",
        "|---|---:|---:|---:|---:|",
    ]
    rows += [f"| {r.name} | {r.parameters:,} | {r.steps:,} | {r.rate:,.0f} | "
             f"{r.val_loss[-1]:.3f} |" for r in results]  # fmt: skip
    rows.append(f"| bigram counts (the gate's baseline) | — | — | — | {bigram:.3f} |")
    return "\n".join(rows)


def plot(results: Sequence[Result], bigram: float, seconds: float, path: Path) -> Path:
    fig = Figure(figsize=(10.5, 4.0))
    by_time, by_tokens = fig.subplots(1, 2, sharey=True)
    for r in results:
        by_time.plot(r.seconds, r.val_loss, marker=".", label=f"{r.name} ({r.parameters:,})")
        by_tokens.plot(np.array(r.tokens) / 1e6, r.val_loss, marker=".", label=r.name)
    for ax in (by_time, by_tokens):
        ax.axhline(bigram, color="grey", linestyle="--", label="bigram counts")
        ax.grid(alpha=0.3)
    low = min(min(r.val_loss) for r in results)
    by_time.set_ylim(low - 0.05, bigram + 0.35)  # the untrained start (ln V) is above
    by_time.set(xlabel="training seconds", ylabel="validation loss (nats per character)",
                title=f"the same {seconds:.0f} s of training each")  # fmt: skip
    learned = [r.tokens[-1] for r in results if r.name != "bigram"] or [results[0].tokens[-1]]
    by_tokens.set_xlim(0, 1.05 * max(learned) / 1e6)
    by_tokens.set(xlabel="characters trained on (millions)", title="the same runs, per character")
    by_time.legend(loc="center right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.eval_block > args.gpt_block:
        parser().error(f"--eval-block {args.eval_block} is longer than the GPT's context "
                       f"--gpt-block {args.gpt_block}")  # fmt: skip
    out = args.out / "compare"
    out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus()
    evals = eval_batches(corpus, 12, args.eval_block, args.eval_iters, args.seed + 1)["val"]
    results = [train_for(name.strip(), args, corpus, evals) for name in args.models.split(",")]
    log = CsvLog(out / "log.csv", ["model", "seconds", "tokens", "val_loss"])
    for r in results:
        for s, t, loss in zip(r.seconds, r.tokens, r.val_loss, strict=True):
            log.row([r.name, s, t, loss])
    text = table(results, corpus.bigram)
    (out / "table.md").write_text(text + "\n", encoding="utf-8")
    figure = plot(results, corpus.bigram, args.seconds, args.figure or out / "curves.png")
    print(text)
    print(f"wrote {out / 'table.md'}, {out / 'log.csv'}, {figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
