"""Stage 5's milestone: a character-level GPT trained on the bundled Shakespeare.

    python -m project.train_gpt                 # nanoGPT's CPU configuration, 2000 steps
    python -m project.train_gpt --iters 50 --layers 1 --width 32 --block 16   # a smoke run
    mpiexec -n 2 python -m project.train_gpt --ddp   # data-parallel on 2 ranks (stage 6)

Trains with AdamW (decay on the matrices only), warmup and a cosine schedule and
clipping by the global gradient norm, on windows of the training works; every
``--eval-interval`` steps it prints and logs (``log.csv``) the mean loss of
``--eval-iters`` fixed batches of the training and the validation works. It writes
``runs/gpt/``: ``log.csv``, ``model.npz``, ``curves.png`` (train and validation loss,
with the bigram model's validation loss as a line), ``attention.png`` (one trained
head's attention over a line of text) and ``samples.txt``.

**The gate**: the final validation loss must be at least ``--gate`` nats (0.5) below
the validation loss of the bigram model (each character's next-character frequencies
in the training works, add-one smoothed), computed here on the same split; exit 1
otherwise.

**``--ddp``** (stage 6; run under ``mpiexec -n K``): every rank draws the same batch of
``--batch`` windows and trains on its share (``--batch`` must divide by ``K``) with
``DistributedDataParallel``, so the run takes the steps of one process; the evaluations
are shared out the same way. Rank 0 alone prints, logs and writes; at the end every rank
reports its samples per second and the time it spent communicating.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from module0.autodiff import no_grad
from module0.module import Module
from module4.layers import save
from module5.functional import causal_mask, masked_softmax, split
from module5.gpt import GPT, GPTConfig
from module5.optim import AdamW, clip_grad_norm_, cosine_lr, decay_groups
from module5.text import get_batch
from project.amp import Precision, add_amp_args
from project.dist import add_ddp_args, ranks_from, report_ranks
from project.lm import CsvLog, Run, estimate, eval_batches, lm_loss, load_corpus
from project.lm import plot_curves as plot_lm_curves

ATTENTION_LINE = "To be, or not to be, that is the question:"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m project.train_gpt", description=__doc__.split("\n")[0]
    )
    p.add_argument("--iters", type=int, default=2000, help="training steps (2000)")
    p.add_argument("--batch", type=int, default=12, help="sequences per step (12)")
    p.add_argument("--block", type=int, default=64, help="context length (64)")
    p.add_argument("--layers", type=int, default=4, help="transformer blocks (4)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (4)")
    p.add_argument("--width", type=int, default=128, help="n_embd (128)")
    p.add_argument("--dropout", type=float, default=0.0, help="dropout (0)")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (1e-3)")
    p.add_argument("--min-lr", type=float, default=1e-4, help="final learning rate (1e-4)")
    p.add_argument("--warmup", type=int, default=100, help="warmup steps (100)")
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW decay (0.1)")
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clip (1.0)")
    p.add_argument("--eval-interval", type=int, default=250, help="steps between evaluations")
    p.add_argument("--eval-iters", type=int, default=20, help="batches per evaluation (20)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--gate", type=float, default=0.5, help="nats below the bigram model (0.5)")
    p.add_argument("--samples", type=int, default=3, help="samples to write (3)")
    p.add_argument("--sample-len", type=int, default=300, help="characters per sample (300)")
    p.add_argument("--out", type=Path, default=Path("runs"),
                   help="the runs folder: this run writes OUT/gpt/ (runs/gpt/)")  # fmt: skip
    add_ddp_args(p)
    add_amp_args(p)
    return p


def plot_curves(run: Run, path: Path) -> Path:
    return plot_lm_curves(run, path, "GPT on Shakespeare")


def attention_map(model: GPT, tokens: np.ndarray, layer: int, head: int) -> np.ndarray:
    """One head's attention weights ``(T, T)`` over ``tokens`` (the model's own forward
    up to that layer, then its queries and keys)."""
    with no_grad():
        t = len(tokens)
        idx = tokens[None, :]
        x = model.wte(idx) + model.wpe(np.arange(t)[None, :])
        for block in model.blocks[:layer]:
            x = block(x)
        attn = model.blocks[layer].attn
        h = model.blocks[layer].ln_1(x)
        c = model.config.n_embd
        qkv = attn.c_attn(h.contiguous().view(t, c))
        q, k, _ = (attn._heads(part.view(1, t, c), 1, t) for part in split(qkv, c, -1))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // model.config.n_head))
        weights = masked_softmax(scores, causal_mask(t))
        return weights.to_numpy()[0, head]


def plot_attention(weights: np.ndarray, text: str, path: Path, title: str) -> Path:
    fig = Figure(figsize=(7.5, 7.0))
    ax = fig.subplots()
    image = ax.imshow(weights, cmap="viridis", vmin=0.0)
    labels = [repr(c)[1:-1] for c in text]
    ax.set_xticks(range(len(text)), labels, fontsize=6)
    ax.set_yticks(range(len(text)), labels, fontsize=6)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (position)")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    ranks = ranks_from(args, args.batch)
    lead = ranks.lead  # the rank that prints, logs and writes
    console = Console(soft_wrap=True, quiet=not lead)
    out = args.out / "gpt"
    if lead:
        out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus()
    tok, train, val = corpus.tok, corpus.train, corpus.val
    config = GPTConfig(
        tok.vocab_size, args.block, args.layers, args.heads, args.width, args.dropout
    )
    precision = Precision(args.amp, args.dtype)  # --amp: autocast, loss scaling
    model = GPT(config, seed=args.seed)
    model.to(args.dtype)
    trained: Module = ranks.wrap(model)
    run = Run(bigram=corpus.bigram)
    console.print(
        f"[bold]gpt[/]: {len(train):,} training and {len(val):,} validation characters, "
        f"vocabulary {tok.vocab_size}, {model.num_parameters():,} parameters, "
        f"{args.iters} steps of {args.batch} x {args.block} ({args.dtype}"
        + (f", {args.amp} autocast)" if args.amp else ")")
        + (f", {ranks.size} ranks of {args.batch // ranks.size}" if ranks.comm else "")
    )
    console.print(f"bigram model: validation loss {run.bigram:.4f}")
    rng = np.random.default_rng(args.seed)
    evals = eval_batches(corpus, args.batch, args.block, args.eval_iters, args.seed + 1)
    optimizer = AdamW(decay_groups(model, args.weight_decay), lr=args.lr, betas=(0.9, 0.99))
    log_path = out / "log.csv"
    log = CsvLog(log_path, ["step", "train_loss", "val_loss", "lr", "seconds"], write=lead)
    start = time.perf_counter()
    training_seconds = 0.0

    def evaluate(step: int) -> None:
        run.steps.append(step)
        run.train_loss.append(estimate(trained, evals["train"], ranks, precision))
        run.val_loss.append(estimate(trained, evals["val"], ranks, precision))
        seconds = time.perf_counter() - start
        log.row([step, run.train_loss[-1], run.val_loss[-1], optimizer.lr, seconds])
        console.print(
            f"step {step:5d}  train loss {run.train_loss[-1]:.4f}  val loss "
            f"{run.val_loss[-1]:.4f}  lr {optimizer.lr:.2e}  {seconds:.1f}s"
        )

    last = ""
    with Progress(
        TextColumn("training"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[loss]}"), TimeRemainingColumn(),
        console=console, transient=True, disable=not (lead and console.is_terminal),
    ) as progress:  # fmt: skip
        task = progress.add_task("steps", total=args.iters, loss=last)
        for step in range(args.iters):
            optimizer.lr = cosine_lr(step, args.lr, args.warmup, args.iters, args.min_lr)
            if step % args.eval_interval == 0:
                evaluate(step)  # logs the rate this step takes
            began = time.perf_counter()
            x, y = get_batch(train, args.batch, args.block, rng)  # alike on every rank
            with precision.autocast():
                loss = lm_loss(trained, ranks.share(x), ranks.share(y))
            optimizer.zero_grad()
            precision.backward(loss)
            ranks.sync(trained)  # --ddp: the mean of the ranks' gradients
            precision.unscale(optimizer)  # float16: clip the true gradients
            clip_grad_norm_(model.parameters(), args.clip)
            precision.step(optimizer)
            training_seconds += time.perf_counter() - began
            last = f"loss {loss.item():.4f}"
            progress.update(task, advance=1, loss=last)
    evaluate(args.iters)
    run.seconds = time.perf_counter() - start
    report_ranks(console, ranks, trained, args.iters * args.batch // ranks.size, training_seconds)
    if precision.amp:
        console.print(precision.describe())
    ok = run.bigram - run.val_loss[-1] >= args.gate
    if not lead:
        return 0 if ok else 1
    files = [log_path, save(model, out / "model.npz"), plot_curves(run, out / "curves.png")]
    line = tok.encode(ATTENTION_LINE)[: args.block]
    layer, head = config.n_layer - 1, 0
    files.append(plot_attention(
        attention_map(model, line, layer, head), ATTENTION_LINE[: len(line)],
        out / "attention.png", f"layer {layer}, head {head}: attention after training",
    ))  # fmt: skip
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
    verdict = "[green]passed[/]" if ok else "[red]failed[/]"
    console.print(
        f"gate {verdict}: validation loss {final:.4f}, {below:.4f} nats below the bigram "
        f"model's {run.bigram:.4f} (needs at least {args.gate}); {run.seconds:.0f} s"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
