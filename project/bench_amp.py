"""Stage 6's mixed-precision benchmark: what ``autocast`` saves and what it costs on a CPU.

    python -m project.bench_amp [--quick] [--rounds N] [--markdown]

For stage 5's milestone GPT (4 x 128, context 64, batch 12) and the digits CNN (batch
32), in float32, under ``autocast(bfloat16)`` and under ``autocast(float16)`` with a
``GradScaler``:

* **activation memory**: the bytes one training step's graph keeps for its backward
  (:func:`module6.amp.saved_bytes`: every saved array once, the parameters and the
  input batch left out), and its share of float32's;
* **step time**: the median over ``--rounds`` rounds (the precisions taking turns) of
  the mean time of a training step (forward, backward, AdamW), and its ratio to
  float32's in the same run.

This CPU has no half-precision arithmetic in this framework (Numba compiles none),
so a half-precision product rounds its operands, computes in float32 and rounds the
result: the same arithmetic plus conversion passes. Expect memory to fall and time to
rise; the gain of half precision in time needs hardware that multiplies in it (a GPU's
tensor cores, AVX-512 BF16 / AMX).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from project.bench_page import Report

PRECISIONS = ("float32", "bfloat16", "float16")


def _gpt() -> tuple[Any, Callable[[], Any], list[Any]]:
    from module5.gpt import GPT, GPTConfig
    from module5.losses import lm_cross_entropy

    model = GPT(GPTConfig(vocab_size=65), seed=0)
    model.to("float32")
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 65, (12, 64)), rng.integers(0, 65, (12, 64))

    def loss() -> Any:
        return lm_cross_entropy(model(x).contiguous().view(12 * 64, 65), y.reshape(-1))

    return model, loss, []


def _cnn() -> tuple[Any, Callable[[], Any], list[Any]]:
    from module1.creation import from_numpy
    from module2.fast_ops import FastTensorBackend
    from module4.losses import cross_entropy
    from module4.models import DigitCNN

    model = DigitCNN(size=8, seed=0)
    model.to("float32")
    rng = np.random.default_rng(0)
    x = from_numpy(rng.random((32, 1, 8, 8), dtype=np.float32), FastTensorBackend)
    y = rng.integers(0, 10, 32)

    def loss() -> Any:
        return cross_entropy(model(x), y)

    return model, loss, [x]


MODELS = {"GPT 4 x 128, batch 12 x 64": _gpt, "digits CNN, batch 32": _cnn}


def measure(make: Callable[[], tuple[Any, Callable[[], Any], list[Any]]], precision: str,
            steps: int) -> tuple[int, float]:  # fmt: skip
    """(activation bytes of one step, mean seconds per training step) in ``precision``."""
    from module5.optim import AdamW
    from module6.amp import autocast, saved_bytes
    from module6.scaler import GradScaler

    model, loss_fn, inputs = make()
    optimizer = AdamW(model.parameters(), lr=1e-3)
    scaler = GradScaler(enabled=precision == "float16")
    amp = precision if precision != "float32" else "bfloat16"

    def step() -> Any:
        with autocast(amp, enabled=precision != "float32"):
            loss = loss_fn()
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    step()  # compiles what is new
    with autocast(amp, enabled=precision != "float32"):
        held = saved_bytes(loss_fn(), [*model.parameters(), *inputs])
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return held, (time.perf_counter() - start) / steps


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m project.bench_amp",
                                 description=__doc__.split("\n")[0])  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="fewer steps")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of every precision, in turns; medians (3)")  # fmt: skip
    ap.add_argument("--markdown", action="store_true",
                    help="also write the tables to docs/benchmarks.md")  # fmt: skip
    args = ap.parse_args(args_list)
    console = Console()
    report = Report("bench_amp", console, args_list)
    steps = 3 if args.quick else 10
    for title, make in MODELS.items():
        table = Table(title=f"{title}: one training step")
        for column in ("precision", "activations MB", "vs float32", "ms per step",
                       "time vs float32"):  # fmt: skip
            table.add_column(column, justify="right")
        held: dict[str, int] = {}
        times: dict[str, list[float]] = {p: [] for p in PRECISIONS}
        for _ in range(args.rounds):  # the precisions take turns: the machine drifts
            for precision in PRECISIONS:
                held[precision], seconds = measure(make, precision, steps)
                times[precision].append(seconds)
        base_bytes, base_time = held["float32"], float(np.median(times["float32"]))
        for precision in PRECISIONS:
            t = float(np.median(times[precision]))
            table.add_row(precision, f"{held[precision] / 2**20:.2f}",
                          f"{held[precision] / base_bytes:.2f}x", f"{t * 1e3:.1f}",
                          f"{t / base_time:.2f}x")  # fmt: skip
        report.show(table)
    report.note(
        "bfloat16 and float16 are autocast (products, convolutions, attention, ReLU and "
        "GELU in half precision, float32 master weights); float16 adds a GradScaler. What "
        "stays float32 in memory: LayerNorm's inputs (the GPT's residual stream) and the "
        "CNN's max-pool indices (int64). This CPU computes half precision in float32 "
        "between conversions, so the time ratio is a cost, not a gain."
    )
    if args.markdown:
        report.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
