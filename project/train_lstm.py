"""Stage 5's recurrent milestone: a character-level LSTM on the bundled Shakespeare.

    python -m project.train_lstm                  # 600 steps, 96k parameters: a few minutes
    python -m project.train_lstm --iters 20 --hidden 32 --block 16   # a smoke run

The model: an embedding, an LSTM (task 5.6) and a Linear head on every step's output.
It trains with **truncated backpropagation through time** over ``--batch`` contiguous
streams: the training works are cut into ``--batch`` equal rows, each step takes the
next ``--block`` characters of every row, and the LSTM starts from the state the
previous step ended in, detached (``detach_state``), so it reads an unbounded past but
learns from ``--block`` steps back. AdamW, warmup and a cosine schedule and clipping by
the global gradient norm (task 5.4), float32 on the fast backend.

Every ``--eval-interval`` steps it prints and logs (``log.csv``) the mean loss of
``--eval-iters`` fixed windows of the training and the validation works, each read from
a zero state, as ``train_gpt`` measures the GPT (the same windows for the same seed and
sizes). It writes ``runs/lstm/``: ``log.csv``, ``model.npz``, ``curves.png`` and
``samples.txt``.

**The gate**: the final validation loss must be at least ``--gate`` nats (0.25) below the
bigram model's (``train_gpt``'s baseline, on the same split); exit 1 otherwise.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from module0.autodiff import no_grad
from module0.module import Module
from module1.tensor import Tensor
from module1.tensor_ops import TensorBackend
from module2.fast_ops import FastTensorBackend
from module4.layers import Embedding, Linear, save
from module5.gpt import _sample
from module5.optim import AdamW, clip_grad_norm_, cosine_lr, decay_groups
from module5.rnn import LSTM, detach_state
from project.lm import CsvLog, Run, estimate, eval_batches, load_corpus, logits_loss, plot_curves

LSTMState = tuple[Tensor, Tensor]


class CharLSTM(Module):
    """Token embedding ``(V, E)``, an LSTM of ``layers`` layers of width ``H``, and a
    Linear head ``H -> V`` on every step. Called on ``(B, T)`` tokens it reads them
    from a zero state and returns logits ``(B, T, V)``; :meth:`step` carries a state."""

    def __init__(
        self, vocab_size: int, embd: int = 32, hidden: int = 128, layers: int = 1,
        seed: int = 0, backend: TensorBackend = FastTensorBackend,
    ) -> None:  # fmt: skip
        super().__init__()
        rng = np.random.default_rng(seed)
        self.wte = Embedding(vocab_size, embd, rng=rng, backend=backend)
        self.lstm = LSTM(embd, hidden, layers, batch_first=True, rng=rng, backend=backend)
        self.head = Linear(hidden, vocab_size, init="xavier", rng=rng, backend=backend)
        self.vocab_size, self.hidden = vocab_size, hidden

    def step(self, idx: npt.ArrayLike, state: LSTMState | None = None) -> tuple[Tensor, LSTMState]:
        """Logits ``(B, T, V)`` for ``idx`` ``(B, T)`` read from ``state`` (zeros when
        None), and the state after the last token."""
        tokens = np.asarray(idx)
        b, t = tokens.shape
        out, (h, c) = self.lstm(self.wte(tokens), state)
        logits = self.head(out.contiguous().view(b * t, self.hidden))
        return logits.view(b, t, self.vocab_size), (h, c)

    def forward(self, idx: npt.ArrayLike) -> Tensor:
        return self.step(idx)[0]

    def generate(
        self, context: npt.ArrayLike, n: int, temperature: float = 1.0,
        top_k: int | None = None, seed: int = 0,
    ) -> npt.NDArray[np.int64]:  # fmt: skip
        """``context`` ``(B, T0)`` followed by ``n`` sampled tokens: the context read
        once, then one step per token with the state carried (O(1) work per token)."""
        tokens = np.atleast_2d(np.asarray(context, dtype=np.int64))
        rng = np.random.default_rng(seed)
        was = self.training
        self.eval()
        try:
            with no_grad():
                logits, state = self.step(tokens)
                for _ in range(n):
                    last = logits.to_numpy()[:, -1, :].astype(np.float64) / temperature
                    new = _sample(last, top_k, rng)[:, None]
                    tokens = np.concatenate([tokens, new], axis=1)
                    logits, state = self.step(new, state)
        finally:
            self.train(was)
        return tokens


class Streams:
    """Truncated BPTT's batches: ``data`` cut into ``batch`` contiguous rows; each
    :meth:`next` gives the next ``block`` tokens of every row and their targets (the
    tokens one further), and whether the rows started over (then the state is reset)."""

    def __init__(self, data: np.ndarray, batch: int, block: int) -> None:
        length = (len(data) - 1) // batch
        if length <= block:
            raise ValueError(f"Streams: {len(data)} tokens make rows of {length}, "
                             f"not more than a block of {block}")  # fmt: skip
        starts = np.arange(batch) * length
        self.rows = data[starts[:, None] + np.arange(length + 1)]
        self.block, self.pos = block, 0

    def next(self) -> tuple[np.ndarray, np.ndarray, bool]:
        restart = self.pos + self.block + 1 > self.rows.shape[1]
        if restart:
            self.pos = 0
        a, b = self.pos, self.pos + self.block
        self.pos = b
        return self.rows[:, a:b], self.rows[:, a + 1 : b + 1], restart or a == 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m project.train_lstm", description=__doc__.split("\n")[0]
    )
    p.add_argument("--iters", type=int, default=600, help="training steps (600)")
    p.add_argument("--batch", type=int, default=32, help="streams (32)")
    p.add_argument("--block", type=int, default=32, help="BPTT steps per chunk (32)")
    p.add_argument("--embd", type=int, default=32, help="embedding width (32)")
    p.add_argument("--hidden", type=int, default=128, help="LSTM width (128)")
    p.add_argument("--layers", type=int, default=1, help="LSTM layers (1)")
    p.add_argument("--lr", type=float, default=5e-3, help="peak learning rate (5e-3)")
    p.add_argument("--min-lr", type=float, default=5e-4, help="final learning rate (5e-4)")
    p.add_argument("--warmup", type=int, default=20, help="warmup steps (20)")
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW decay (0.1)")
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clip (1.0)")
    p.add_argument("--eval-interval", type=int, default=100, help="steps between evaluations")
    p.add_argument("--eval-iters", type=int, default=10, help="windows per evaluation (10)")
    p.add_argument("--eval-batch", type=int, default=12, help="sequences per window (12)")
    p.add_argument("--eval-block", type=int, default=64, help="window length (64)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--gate", type=float, default=0.25, help="nats below the bigram model (0.25)")
    p.add_argument("--samples", type=int, default=2, help="samples to write (2)")
    p.add_argument("--sample-len", type=int, default=300, help="characters per sample (300)")
    p.add_argument("--out", type=Path, default=Path("runs"),
                   help="the runs folder: this run writes OUT/lstm/ (runs/lstm/)")  # fmt: skip
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    console = Console(soft_wrap=True)
    out = args.out / "lstm"
    out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus()
    tok = corpus.tok
    model = CharLSTM(tok.vocab_size, args.embd, args.hidden, args.layers, seed=args.seed)
    model.to("float32")
    run = Run(bigram=corpus.bigram)
    console.print(
        f"[bold]lstm[/]: {len(corpus.train):,} training and {len(corpus.val):,} validation "
        f"characters, vocabulary {tok.vocab_size}, {model.num_parameters():,} parameters, "
        f"{args.iters} steps of {args.batch} streams x {args.block} (truncated BPTT, float32)"
    )
    console.print(f"bigram model: validation loss {run.bigram:.4f}")
    evals = eval_batches(corpus, args.eval_batch, args.eval_block, args.eval_iters, args.seed + 1)
    streams = Streams(corpus.train, args.batch, args.block)
    optimizer = AdamW(decay_groups(model, args.weight_decay), lr=args.lr, betas=(0.9, 0.99))
    log = CsvLog(out / "log.csv", ["step", "train_loss", "val_loss", "lr", "seconds"])
    start = time.perf_counter()

    def evaluate(step: int) -> None:
        run.steps.append(step)
        run.train_loss.append(estimate(model, evals["train"]))
        run.val_loss.append(estimate(model, evals["val"]))
        seconds = time.perf_counter() - start
        log.row([step, run.train_loss[-1], run.val_loss[-1], optimizer.lr, seconds])
        console.print(
            f"step {step:5d}  train loss {run.train_loss[-1]:.4f}  val loss "
            f"{run.val_loss[-1]:.4f}  lr {optimizer.lr:.2e}  {seconds:.1f}s"
        )

    state: LSTMState | None = None
    training_seconds = 0.0
    with Progress(
        TextColumn("training"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[loss]}"), TimeRemainingColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    ) as progress:  # fmt: skip
        task = progress.add_task("steps", total=args.iters, loss="")
        for step in range(args.iters):
            optimizer.lr = cosine_lr(step, args.lr, args.warmup, args.iters, args.min_lr)
            if step % args.eval_interval == 0:
                evaluate(step)
            began = time.perf_counter()
            x, y, restart = streams.next()
            logits, new_state = model.step(x, None if restart else state)
            loss = logits_loss(logits, y)
            optimizer.zero_grad()
            loss.backward()
            clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            state = detach_state(new_state)  # type: ignore[assignment]
            training_seconds += time.perf_counter() - began
            progress.update(task, advance=1, loss=f"loss {loss.item():.4f}")
    evaluate(args.iters)
    run.seconds = time.perf_counter() - start
    rate = args.iters * args.batch * args.block / max(training_seconds, 1e-9)
    console.print(f"training: {training_seconds:.1f} s, {rate:,.0f} tokens per second")
    files = [out / "log.csv", save(model, out / "model.npz")]
    files.append(plot_curves(run, out / "curves.png", "LSTM on Shakespeare"))
    prompts = ["ROMEO:\n", "First Citizen:\n", "To be"]
    samples = []
    for i in range(args.samples):
        prompt = prompts[i % len(prompts)]
        tokens = model.generate(tok.encode(prompt)[None, :], args.sample_len, temperature=0.8,
                                top_k=20, seed=args.seed + i)  # fmt: skip
        samples.append(tok.decode(tokens[0]))
    (out / "samples.txt").write_text("\n\n-----\n\n".join(samples) + "\n", encoding="utf-8")
    files.append(out / "samples.txt")
    console.print(f"[bold]sample[/]:\n{samples[0]}" if samples else "")
    console.print("wrote " + ", ".join(str(p) for p in files))
    final, below = run.val_loss[-1], run.bigram - run.val_loss[-1]
    ok = below >= args.gate
    verdict = "[green]passed[/]" if ok else "[red]failed[/]"
    console.print(
        f"gate {verdict}: validation loss {final:.4f}, {below:.4f} nats below the bigram "
        f"model's {run.bigram:.4f} (needs at least {args.gate}); {run.seconds:.0f} s"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
