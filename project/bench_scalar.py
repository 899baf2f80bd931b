"""Time a training step of the stage-0 scalar engine against micrograd.

    python -m project.bench_scalar [--steps 30] [--warmup 3] [--rounds 3]

Both engines train the same 2-10-10-1 ReLU MLP (same initial weights) on the same 50
points with the same mean hinge loss and a plain SGD update, the network and loss of
micrograd's own demo. One step = forward over all points, backward, update. Each
(engine, garbage-collector policy) pair runs in a fresh child process, so one run's heap
does not slow another's collections. Policies:

* ``default``   Python's automatic collector, as a user's script runs;
* ``between``   automatic collector on, plus ``gc.collect()`` between steps (untimed);
* ``disabled``  collector off during the step, ``gc.collect()`` between steps (untimed);
* ``frozen``    automatic collector on, after ``gc.freeze()`` has moved the start-up heap
  (the setup's objects and those of every imported module) out of its reach, as
  ``project.train_scalar`` does.

It prints the median step time of each pair, the ratios ours / micrograd, and how many
objects the cyclic collector had to free after one step (0 means reference counting
freed the whole graph: no reference cycles). micrograd is an optional dependency:
``pip install -e ".[bench]"``; without it only this engine's figures are printed.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from module0.datasets import load_dataset
from module0.module import Module
from module0.optim import SGD
from module0.scalar import Scalar
from module0.scalar_nn import ScalarLinear
from project.bench_page import Report
from project.guard import require_stages

SIZES = (2, 10, 10, 1)
LR = 0.05
MODES = ("default", "between", "disabled", "frozen")


def problem(seed: int = 0) -> tuple[list[list[float]], list[int], list[list[list[float]]]]:
    """50 xor points in [-1, 1]^2 with labels +-1, and initial weights per layer
    (``weights[layer][neuron] = [w_0, ..., w_{n-1}, bias]``)."""
    data = load_dataset("xor", 50, seed)
    xs = [[2.0 * a - 1.0, 2.0 * b - 1.0] for a, b in data.X]
    ys = [1 if label else -1 for label in data.y]
    rng = random.Random(seed)
    weights = [
        [[rng.uniform(-1.0, 1.0) for _ in range(n_in + 1)] for _ in range(n_out)]
        for n_in, n_out in itertools.pairwise(SIZES)
    ]
    return xs, ys, weights


class OursMLP(Module):
    def __init__(self, weights: list[list[list[float]]]) -> None:
        super().__init__()
        self.layers = []
        for k, layer_w in enumerate(weights):
            layer = ScalarLinear(len(layer_w[0]) - 1, len(layer_w))
            for j, neuron in enumerate(layer_w):
                for i, w in enumerate(neuron[:-1]):
                    layer.weights[i][j].value.data = w
                layer.bias[j].value.data = neuron[-1]
            setattr(self, f"layer{k}", layer)
            self.layers.append(layer)

    def forward(self, x: Sequence[float]) -> Scalar:
        h: list[Any] = list(x)
        for k, layer in enumerate(self.layers):
            h = layer(h)
            if k < len(self.layers) - 1:
                h = [v.relu() for v in h]
        return h[0]


def ours_step_fn() -> Callable[[], float]:
    xs, ys, weights = problem()
    model = OursMLP(weights)
    opt = SGD(model.parameters(), lr=LR)

    def step() -> float:
        total: Scalar | float = 0.0
        for x, y in zip(xs, ys, strict=True):
            total = total + (1.0 + -y * model(x)).relu()
        loss = total * (1.0 / len(xs))
        assert isinstance(loss, Scalar)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.data

    return step


def micrograd_step_fn() -> Callable[[], float]:
    from micrograd.engine import Value
    from micrograd.nn import MLP

    xs, ys, weights = problem()
    model = MLP(SIZES[0], list(SIZES[1:]))
    for layer, layer_w in zip(model.layers, weights, strict=True):
        for neuron, neuron_w in zip(layer.neurons, layer_w, strict=True):
            for p, w in zip(neuron.w, neuron_w[:-1], strict=True):
                p.data = w
            neuron.b.data = neuron_w[-1]
    params = model.parameters()

    def step() -> float:
        total: Any = 0.0
        for x, y in zip(xs, ys, strict=True):
            total = total + (1.0 + -y * model([Value(v) for v in x])).relu()
        loss = total * (1.0 / len(xs))
        model.zero_grad()
        loss.backward()
        for p in params:
            p.data -= LR * p.grad
        return float(loss.data)

    return step


def worker(engine: str, mode: str, steps: int, warmup: int) -> dict[str, Any]:
    """Run in a child process: time ``steps`` steps under one GC policy."""
    step = ours_step_fn() if engine == "ours" else micrograd_step_fn()
    for _ in range(warmup):
        step()
    gc.collect()
    if mode == "frozen":
        gc.freeze()
    times: list[float] = []
    losses: list[float] = []
    for _ in range(steps):
        if mode in ("between", "disabled"):
            gc.collect()
        if mode == "disabled":
            gc.disable()
        start = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - start)
        gc.enable()
    gc.collect()
    gc.disable()
    step()
    freed = gc.collect()
    gc.enable()
    return {"median_ms": 1e3 * statistics.median(times), "freed": freed, "loss": losses[-1]}


def run_child(engine: str, mode: str, steps: int, warmup: int) -> dict[str, Any] | None:
    cmd = [sys.executable, "-m", "project.bench_scalar", "--worker", engine, mode]
    cmd += ["--steps", str(steps), "--warmup", str(warmup)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        if "No module named 'micrograd'" in proc.stderr:
            return None
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per run (median)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="child runs per pair (median)")
    ap.add_argument("--markdown", action="store_true",
                    help="also write the tables into docs/benchmarks.md (this script's "
                         "section, dated, with the machine)")  # fmt: skip
    ap.add_argument("--worker", nargs=2, metavar=("ENGINE", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    require_stages(0)
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.steps, args.warmup)))
        return 0

    console = Console()
    report = Report("bench_scalar", console, argv)
    console.print(
        f"one SGD step of a 2-10-10-1 MLP on 50 points: median over {args.rounds} rounds "
        f"of the median of {args.steps} steps after {args.warmup} warm-up; each engine and "
        "policy in its own process"
    )
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.rounds):  # interleaved rounds, so a slow spell hits both engines
        for mode in MODES:
            for engine in ("ours", "micrograd"):
                child = run_child(engine, mode, args.steps, args.warmup)
                if child is not None:
                    runs.setdefault((engine, mode), []).append(child)
    results: dict[tuple[str, str], dict[str, Any] | None] = {
        (engine, mode): None for mode in MODES for engine in ("ours", "micrograd")
    }
    for key, found in runs.items():
        results[key] = {
            "median_ms": statistics.median(r["median_ms"] for r in found),
            "freed": max(r["freed"] for r in found),
        }
    table = Table(title="scalar engine vs micrograd")
    for col in ("GC policy", "ours (ms)", "micrograd (ms)", "ours / micrograd", "freed by GC"):
        table.add_column(col, justify="right")
    for mode in MODES:
        ours, mg = results["ours", mode], results["micrograd", mode]
        assert ours is not None
        if mg is None:
            table.add_row(mode, f"{ours['median_ms']:.1f}", "-", "-", f"{ours['freed']} / -")
            continue
        table.add_row(
            mode,
            f"{ours['median_ms']:.1f}",
            f"{mg['median_ms']:.1f}",
            f"{ours['median_ms'] / mg['median_ms']:.2f}x",
            f"{ours['freed']} / {mg['freed']}",
        )
    report.show(table)
    mg_between = results["micrograd", "between"]
    if mg_between is None:
        report.note("micrograd is not installed: pip install -e '.[bench]' to compare")
        if args.markdown:
            report.write()
        return 0
    ours_default = results["ours", "default"]
    assert ours_default is not None
    for mode in ("between", "disabled"):
        mg = results["micrograd", mode]
        assert mg is not None
        report.note(
            f"ours (default GC) / micrograd ({mode}): "
            f"{ours_default['median_ms'] / mg['median_ms']:.2f}x"
        )
    if args.markdown:
        report.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
