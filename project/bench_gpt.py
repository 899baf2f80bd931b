"""Benchmark stage 5's GPT against the same model in PyTorch.

    python -m project.bench_gpt [--quick] [--rounds 3] [--markdown]   # steps, generation
    python -m project.bench_gpt --contended [--quick] [--rounds 3]  # beside a busy process
    python -m project.bench_gpt --train [--iters 2000]      # both train; validation losses

The model is the milestone's (``project/train_gpt.py``): character-level on the bundled
Shakespeare, pre-LayerNorm blocks, GELU (tanh form), a head tied to the token table,
AdamW (decay 0.1 on the linear layers' matrices, betas 0.9 / 0.99), clipping at 1.0.
PyTorch runs the same architecture written with ``torch.nn`` (attention by
``F.scaled_dot_product_attention``, as a PyTorch user writes it), on the CPU with as many
threads as there are cores. Each library runs in its own child process.

* **Steps**: the median time of one training step (forward, backward, clipping, AdamW)
  over ``--steps`` steps after two untimed ones, in float32 and float64, for the
  milestone configuration (4 layers, 4 heads, width 128, context 64, batch 12) and,
  without ``--quick``, a larger one (6 layers, 6 heads, width 384, context 256, batch 16).
  With ``--rounds R`` each figure is taken R times, the libraries taking turns, and the
  table gives the medians and the range of the per-round ratios: this machine's speed
  drifts 10-20% between minutes, which one round puts on one library only.
* **Generation**: tokens per second for 500 new tokens from a one-character prompt:
  ours with its KV cache; PyTorch with a KV cache written here by the same policy (a
  fair peer) and its cache-free loop (the whole context each step).
* **Where ours spends a step**: milliseconds per kernel family (products, attention,
  LayerNorm / GELU / softmax, elementwise, reductions, the optimizer) and the Python
  around them (``project/kernel_profile.py``).
* ``--contended``: the step and generation figures taken quiet and again while one
  other process spins on a core (``python -c "while True: pass"``, started for both
  libraries alike), and how much slower each library gets.
* **Fused kernels** (task 5.5): softmax, LayerNorm and GELU, forward and backward, on
  a ``(4096, 1024)`` tensor, by the fused kernels and by the unfused route
  (``fused_route.plain_route()``), and the bandwidth that implies against a NumPy copy.
* **Attention memory**: the growth of a fresh process's peak resident memory over one
  causal attention forward at T = 1024 and 2048 (inputs requiring gradients): ours
  fused, ours unfused, PyTorch's unfused ``q @ k^T`` / softmax / ``@ v``.
* ``--train``: both libraries train the milestone configuration for ``--iters`` steps
  with the same schedule and the same batches (``get_batch`` with one seed), and report
  the final validation loss on the same fixed batches: the milestone asks for ours
  within 0.05 nats of PyTorch's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np

MILESTONE = {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64, "batch": 12}
LARGE = {"n_layer": 6, "n_head": 6, "n_embd": 384, "block_size": 256, "batch": 16}
NEW_TOKENS = 500
SEED = 1337


def _data() -> tuple[Any, np.ndarray, np.ndarray]:
    from module5.text import CharTokenizer
    from project.shakespeare_data import load_works, shakespeare_split

    tok = CharTokenizer("".join(load_works().values()))
    train, val = shakespeare_split()
    return tok, tok.encode(train), tok.encode(val)


# -- this framework -----------------------------------------------------------------------


class Ours:
    def __init__(self, config: dict[str, Any], vocab: int, dtype: str) -> None:
        from module5.gpt import GPT, GPTConfig
        from module5.optim import AdamW, decay_groups

        c = {k: v for k, v in config.items() if k != "batch"}
        self.model = GPT(GPTConfig(vocab_size=vocab, **c), seed=SEED)
        self.model.to(dtype)
        self.opt = AdamW(decay_groups(self.model, 0.1), lr=1e-3, betas=(0.9, 0.99))

    def loss(self, x: np.ndarray, y: np.ndarray) -> Any:
        from module5.losses import lm_cross_entropy

        logits = self.model(x)
        b, t, v = logits.shape
        return lm_cross_entropy(logits.contiguous().view(b * t, v), y.reshape(-1))

    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> float:
        from module5.optim import clip_grad_norm_

        self.opt.lr = lr
        loss = self.loss(x, y)
        self.opt.zero_grad()
        loss.backward()
        clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        return float(loss.item())

    def evaluate(self, batches: list[tuple[np.ndarray, np.ndarray]]) -> float:
        from module0.autodiff import no_grad

        self.model.eval()
        with no_grad():
            value = float(np.mean([self.loss(x, y).item() for x, y in batches]))
        self.model.train()
        return value

    def generate(self, n: int) -> None:
        self.model.generate(np.zeros((1, 1), np.int64), n, seed=0)


# -- PyTorch -------------------------------------------------------------------------------


class Theirs:
    def __init__(self, config: dict[str, Any], vocab: int, dtype: str) -> None:
        import torch
        from torch import nn
        from torch.nn import functional as F

        torch.set_num_threads(os.cpu_count() or 1)
        torch.manual_seed(SEED)
        self.torch, self.F = torch, F
        c, h, size = config["n_embd"], config["n_head"], config["block_size"]
        layers = config["n_layer"]

        class Block(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
                self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
                self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

            def cached(self, x: Any, cache: list[Any]) -> Any:
                """``forward`` for new positions after those in ``cache`` (``[k, v]``,
                or empty), whose keys and values it appends: the KV cache a PyTorch
                user writes for generation."""
                b, t, _ = x.shape
                q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
                q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
                if cache:
                    k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
                cache[:] = [k, v]
                causal = t > 1  # several new positions only when the cache was empty
                y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
                return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

            def forward(self, x: Any) -> Any:
                b, t, _ = x.shape
                q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
                q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
                return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

        class Model(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(size, c)
                self.blocks = nn.ModuleList(Block() for _ in range(layers))
                self.ln_f = nn.LayerNorm(c)
                for name, p in self.named_parameters():
                    if name.endswith("weight") and p.dim() == 2:
                        std = 0.02 / math.sqrt(2 * layers) if "proj" in name else 0.02
                        nn.init.normal_(p, 0.0, std)
                    elif name.endswith("bias"):
                        nn.init.zeros_(p)

            def forward(self, idx: Any) -> Any:
                t = idx.shape[1]
                x = self.wte(idx) + self.wpe(torch.arange(t))
                for block in self.blocks:
                    x = block(x)
                return self.ln_f(x) @ self.wte.weight.T

            def cached(self, idx: Any, caches: list[list[Any]], start: int) -> Any:
                t = idx.shape[1]
                x = self.wte(idx) + self.wpe(torch.arange(start, start + t))
                for block, cache in zip(self.blocks, caches, strict=True):
                    x = cast(Any, block).cached(x, cache)  # torch types blocks as Module
                return self.ln_f(x) @ self.wte.weight.T

        self.model = Model().to(getattr(torch, dtype))
        decay = [p for n, p in self.model.named_parameters()
                 if p.dim() == 2 and not n.startswith(("wte", "wpe"))]  # fmt: skip
        keep = [p for n, p in self.model.named_parameters()
                if not (p.dim() == 2 and not n.startswith(("wte", "wpe")))]  # fmt: skip
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": 0.1}, {"params": keep, "weight_decay": 0.0}],
            lr=1e-3, betas=(0.9, 0.99),
        )  # fmt: skip
        self.size = size

    def loss(self, x: np.ndarray, y: np.ndarray) -> Any:
        logits = self.model(self.torch.from_numpy(x))
        return self.F.cross_entropy(
            logits.view(-1, logits.shape[-1]), self.torch.from_numpy(y).view(-1)
        )

    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> float:
        for group in self.opt.param_groups:
            group["lr"] = lr
        loss = self.loss(x, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        return float(loss.item())

    def evaluate(self, batches: list[tuple[np.ndarray, np.ndarray]]) -> float:
        self.model.eval()
        with self.torch.no_grad():
            value = float(np.mean([self.loss(x, y).item() for x, y in batches]))
        self.model.train()
        return value

    def generate(self, n: int) -> None:
        torch = self.torch
        idx = torch.zeros((1, 1), dtype=torch.long)
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for _ in range(n):
                logits = self.model(idx[:, -self.size :])[:, -1, :]
                nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
                idx = torch.cat([idx, nxt], dim=1)

    def generate_cached(self, n: int) -> None:
        """``generate`` with a KV cache, by the policy of ours (``GPT.generate``): one
        new position per step against the cached keys and values; when the cache holds
        ``block_size`` positions, rebuilt from the last ``block_size // 2`` tokens."""
        torch = self.torch
        idx = torch.zeros((1, 1), dtype=torch.long)
        gen = torch.Generator().manual_seed(0)
        caches: list[list[Any]] | None = None
        length = 0
        with torch.no_grad():
            for _ in range(n):
                if caches is not None and length < self.size:
                    logits = self.model.cached(idx[:, -1:], caches, length)[:, -1, :]
                    length += 1
                else:
                    keep = self.size if caches is None else max(1, self.size // 2)
                    context = idx[:, -keep:]
                    caches = [[] for _ in self.model.blocks]
                    logits = self.model.cached(context, caches, 0)[:, -1, :]
                    length = context.shape[1]
                nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
                idx = torch.cat([idx, nxt], dim=1)


# -- workers --------------------------------------------------------------------------------


KERNEL_ROWS, KERNEL_N = 4096, 1024
"""The fused kernels' benchmark: rows of 4096 x 1024 (the issue's size)."""


def kernels(dtype: str, steps: int) -> dict[str, dict[str, float]]:
    """Forward + backward of softmax, LayerNorm and GELU on a ``(4096, 1024)`` tensor,
    by task 5.5's fused kernels and by the plain route (tasks 5.1 and 5.2's composition
    of tensor operations): median seconds of each, and a NumPy copy of the same array
    (seconds for 2 x its bytes). The fused kernels move at least 5 x the array's bytes
    (forward: read x, write y; backward: read two, write one)."""
    from module1.tensor import from_numpy
    from module2.fast_ops import FastTensorBackend
    from module5 import functional, fused_route

    rng = np.random.default_rng(0)
    shape = (KERNEL_ROWS, KERNEL_N)
    x_np = rng.normal(size=shape).astype(dtype)
    g = from_numpy(rng.normal(size=shape).astype(dtype), FastTensorBackend)
    w = from_numpy(np.ones(KERNEL_N, dtype), FastTensorBackend)
    b = from_numpy(np.zeros(KERNEL_N, dtype), FastTensorBackend)
    ops = {
        "softmax": functional.masked_softmax,
        "layer_norm": lambda x: functional.layer_norm(x, w, b),
        "gelu": functional.gelu,
    }

    def timed(fn: Any) -> float:
        times = []
        for i in range(steps + 2):
            x = from_numpy(x_np, FastTensorBackend).requires_grad_()
            start = time.perf_counter()
            fn(x).backward(g)
            if i >= 2:
                times.append(time.perf_counter() - start)
        return statistics.median(times)

    out: dict[str, dict[str, float]] = {}
    for name, fn in ops.items():
        fast = timed(fn)
        with fused_route.plain_route():
            plain = timed(fn)
        out[name] = {"fused": fast, "plain": plain, "fused_used": float(fused_route.use_fused)}
    dst = np.empty_like(x_np)
    copies = []
    for _ in range(steps + 2):
        start = time.perf_counter()
        np.copyto(dst, x_np)
        copies.append(time.perf_counter() - start)
    out["copy"] = {"seconds": statistics.median(copies[2:]), "bytes": float(x_np.nbytes)}
    return out


MEMORY_HEADS, MEMORY_WIDTH = 4, 32
"""Attention's memory benchmark: one sequence, 4 heads of 32 channels, float32."""


def attention_memory(library: str, t: int) -> dict[str, float]:
    """The growth of this process's peak resident memory (bytes) over one causal
    attention forward of ``(1, 4, t, 32)`` float32 inputs that require gradients (what
    a training step keeps for its backward): ``minitorch`` by task 5.5's kernel,
    ``minitorch-unfused`` by task 5.2's composition, ``torch`` by ``q @ k^T``, a masked
    softmax and ``@ v`` (PyTorch's unfused attention). Compilation and a small warm-up
    come first, so the peak they set is below what is measured."""
    import resource

    def peak() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux

    rng = np.random.default_rng(0)

    def inputs(n: int) -> list[np.ndarray]:
        shape = (1, MEMORY_HEADS, n, MEMORY_WIDTH)
        return [rng.normal(size=shape).astype(np.float32) for _ in range(3)]

    if library == "torch":
        import torch

        def forward(arrays: list[np.ndarray]) -> Any:
            q, k, v = (torch.tensor(a, requires_grad=True) for a in arrays)
            n = q.shape[-2]
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            mask = torch.ones(n, n, dtype=torch.bool).tril()
            return torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ v
    else:
        from module1.tensor import from_numpy
        from module2.fast_ops import FastTensorBackend
        from module5 import functional, fused_route

        def forward(arrays: list[np.ndarray]) -> Any:
            q, k, v = (from_numpy(a, FastTensorBackend).requires_grad_() for a in arrays)
            if library == "minitorch-unfused":
                with fused_route.plain_route():
                    return functional.scaled_dot_product_attention(q, k, v, causal=True)
            return functional.scaled_dot_product_attention(q, k, v, causal=True)

    kept = forward(inputs(16))  # compile and warm up, at a small size
    del kept
    arrays = inputs(t)
    before = peak()
    kept = forward(arrays)  # (held: what a training step keeps counts)
    grown = peak() - before
    del kept
    return {"bytes": float(grown)}


def worker(library: str, mode: str, config_name: str, dtype: str, steps: int, iters: int) -> Any:
    from module5.optim import cosine_lr
    from module5.text import get_batch

    if mode == "kernels":
        return kernels(dtype, steps)
    if mode == "memory":
        return attention_memory(library, int(config_name))
    config = MILESTONE if config_name == "milestone" else LARGE
    tok, train, val = _data()
    lib = (Ours if library == "minitorch" else Theirs)(config, tok.vocab_size, dtype)
    rng = np.random.default_rng(SEED)
    size, batch = config["block_size"], config["batch"]
    if mode == "step":
        times = []
        for i in range(steps + 2):
            x, y = get_batch(train, batch, size, rng)
            start = time.perf_counter()
            lib.step(x, y, 1e-3)
            if i >= 2:
                times.append(time.perf_counter() - start)
        return {"median": statistics.median(times)}
    if mode == "breakdown":  # ours: the step's time by kernel family
        from project.kernel_profile import breakdown, kernel_profile

        for _ in range(2):
            lib.step(*get_batch(train, batch, size, rng), 1e-3)
        total = 0.0
        with kernel_profile() as families:
            for _ in range(steps):
                x, y = get_batch(train, batch, size, rng)
                start = time.perf_counter()
                lib.step(x, y, 1e-3)
                total += time.perf_counter() - start
        return {"ms": breakdown(families, total, steps)}
    if mode == "generate":
        rates = {}
        ways = [("tokens_per_s", lib.generate)]
        if isinstance(lib, Theirs):  # a fair peer: PyTorch with a KV cache too
            ways.append(("cached_tokens_per_s", lib.generate_cached))
        for key, generate in ways:
            generate(5)
            start = time.perf_counter()
            generate(NEW_TOKENS)
            rates[key] = NEW_TOKENS / (time.perf_counter() - start)
        return rates
    fixed = np.random.default_rng(SEED + 1)
    evals = [get_batch(val, batch, size, fixed) for _ in range(20)]
    start = time.perf_counter()
    for step in range(iters):
        x, y = get_batch(train, batch, size, rng)
        lib.step(x, y, cosine_lr(step, 1e-3, 100, iters, 1e-4))
    return {"val_loss": lib.evaluate(evals), "seconds": time.perf_counter() - start}


def run_worker(args: list[str]) -> Any:
    from project.bench_page import run_worker as run

    return run("project.bench_gpt", args)


def in_rounds(
    libraries: list[str], args: list[str], key: str, rounds: int
) -> dict[str, list[float]]:
    """``key`` of each library's worker for ``args``, ``rounds`` times, the libraries
    taking turns (ours, PyTorch, ours, ...) so that a change in the machine's speed
    between minutes falls on both; a failed worker leaves its figure out."""
    got: dict[str, list[float]] = {library: [] for library in libraries}
    for _ in range(rounds):
        for library in libraries:
            res = run_worker([library, *args])
            if res:
                got[library].append(res[key])
    return got


@contextlib.contextmanager
def busy_process(on: bool) -> Iterator[None]:
    """With ``on``, one other process spinning on a core while the block runs (what a
    student's laptop always has: a browser, an editor, a build), for both libraries
    alike; nothing otherwise."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def _ratio(ratios: list[float]) -> str:
    """The median ratio, with its range when there are several."""
    if not ratios:
        return "-"
    middle = f"{statistics.median(ratios):.2f}x"
    return middle if len(ratios) == 1 else f"{middle} ({min(ratios):.2f}-{max(ratios):.2f})"


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.1f}" if values else "-"


def step_table(
    report: Any, libraries: list[str], configs: list[str], steps: list[str], rounds: int
) -> None:
    """The median step of each library, each configuration and dtype."""
    from rich.table import Table

    spread = " (range over rounds)" if rounds > 1 else ""
    table = Table("configuration", "dtype", "ours ms / step", "PyTorch ms / step",
                  f"ours ÷ PyTorch{spread}")  # fmt: skip
    for config in configs:
        for dtype in ("float32", "float64"):
            times = in_rounds(libraries, ["step", config, dtype, *steps], "median", rounds)
            ours, theirs = times.get("minitorch", []), times.get("torch", [])
            ratios = [a / b for a, b in zip(ours, theirs, strict=False)]
            table.add_row(config, dtype, _ms(ours), _ms(theirs), _ratio(ratios))
    report.show(table)


GENERATION_ROWS = [
    ("minitorch", "tokens_per_s", "KV cache"),
    ("torch", "cached_tokens_per_s", "KV cache (written in this benchmark)"),
    ("torch", "tokens_per_s", "no cache (whole context each step)"),
]


def generation_rates(
    libraries: list[str], steps: list[str], rounds: int
) -> dict[tuple[str, str], list[float]]:
    """Tokens per second of each way of generating, ``rounds`` times, the libraries
    taking turns as in :func:`in_rounds`."""
    rates: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for library in libraries:
            res = run_worker([library, "generate", "milestone", "float32", *steps])
            for key, value in (res or {}).items():
                rates.setdefault((library, key), []).append(value)
    return rates


def generation_table(report: Any, libraries: list[str], steps: list[str], rounds: int) -> None:
    from rich.table import Table

    gen = Table("library", f"tokens / s ({NEW_TOKENS} new tokens)", "how")
    rates = generation_rates(libraries, steps, rounds)
    for library, key, how in GENERATION_ROWS:
        if library in libraries:
            got = rates.get((library, key), [])
            gen.add_row(library, f"{statistics.median(got):.0f}" if got else "-", how)
    report.show(gen)


def breakdown_table(report: Any, configs: list[str], steps: list[str]) -> None:
    """Ours: milliseconds of a step by kernel family (``project/kernel_profile.py``)."""
    from rich.table import Table

    columns: dict[str, dict[str, float]] = {}
    for config in configs:
        for dtype in ("float32", "float64"):
            res = run_worker(["minitorch", "breakdown", config, dtype, *steps])
            if res:
                columns[f"{config} {dtype}"] = res["ms"]
    if not columns:
        return
    families = list(dict.fromkeys(f for column in columns.values() for f in column))
    title = "ours: one training step by kernel family, ms (mean of the timed steps)"
    table = Table("kernel family", *columns, title=title)
    for family in families:
        table.add_row(family, *(f"{column.get(family, 0.0):.1f}" for column in columns.values()))
    table.add_row("total", *(f"{sum(column.values()):.1f}" for column in columns.values()))
    report.show(table)


def contended_tables(
    report: Any, libraries: list[str], configs: list[str], steps: list[str], rounds: int
) -> None:
    """Each library quiet and beside one busy process (:func:`busy_process`), in turns:
    the step and generation, and how much slower each gets."""
    from rich.table import Table

    table = Table("configuration", "dtype", "library", "quiet ms / step", "contended ms / step",
                  "contended ÷ quiet",
                  title="one training step, quiet and beside one busy process")  # fmt: skip
    for config in configs:
        for dtype in ("float32", "float64"):
            times: dict[tuple[str, bool], list[float]] = {}
            for _ in range(rounds):
                for busy in (False, True):
                    with busy_process(busy):
                        got = in_rounds(libraries, ["step", config, dtype, *steps], "median", 1)
                    for library, values in got.items():
                        times.setdefault((library, busy), []).extend(values)
            for library in libraries:
                quiet, busy_times = times.get((library, False), []), times.get((library, True), [])
                slow = (f"{statistics.median(busy_times) / statistics.median(quiet):.1f}x"
                        if quiet and busy_times else "-")  # fmt: skip
                table.add_row(config, dtype, library, _ms(quiet), _ms(busy_times), slow)
    report.show(table)
    title = f"generation of {NEW_TOKENS} tokens, quiet and beside one busy process"
    gen = Table("library", "how", "quiet tokens / s", "contended tokens / s",
                "quiet ÷ contended", title=title)  # fmt: skip
    both: dict[bool, dict[tuple[str, str], list[float]]] = {False: {}, True: {}}
    for _ in range(rounds):
        for busy in (False, True):
            with busy_process(busy):
                for way, values in generation_rates(libraries, steps, 1).items():
                    both[busy].setdefault(way, []).extend(values)
    for library, key, how in GENERATION_ROWS:
        if library in libraries:
            calm, loaded = both[False].get((library, key)), both[True].get((library, key))
            if calm and loaded:
                q, b = statistics.median(calm), statistics.median(loaded)
                gen.add_row(library, how, f"{q:.0f}", f"{b:.0f}", f"{q / b:.1f}x")
    report.show(gen)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m project.bench_gpt", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="the milestone configuration only")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per figure (10)")
    ap.add_argument("--train", action="store_true", help="train both; compare validation loss")
    ap.add_argument("--iters", type=int, default=2000, help="training steps of --train (2000)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of the step and generation figures, the libraries taking "
                    "turns; medians, and the ratios' range (1)")  # fmt: skip
    ap.add_argument("--contended", action="store_true",
                    help="steps and generation quiet and beside one busy process, for both "
                    "libraries alike; the slowdown of each")  # fmt: skip
    ap.add_argument("--markdown", action="store_true",
                    help="also write the tables into docs/benchmarks.md")  # fmt: skip
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.worker:
        library, mode, config_name, dtype = ns.worker
        result = worker(library, mode, config_name, dtype, ns.steps, ns.iters)
        print("RESULT=" + json.dumps(result))
        return 0
    from rich.console import Console
    from rich.table import Table

    from project.bench_page import Report

    console = Console()
    report = Report("bench_gpt", console, argv)
    have_torch = (
        subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
    )
    libraries = ["minitorch", *(["torch"] if have_torch else [])]
    steps = ["--steps", str(ns.steps), "--iters", str(ns.iters)]
    if ns.train:
        table = Table("library", "steps", "validation loss", "seconds")
        losses = {}
        for library in libraries:
            res = run_worker([library, "train", "milestone", "float32", *steps])
            if res:
                losses[library] = res["val_loss"]
                table.add_row(library, str(ns.iters), f"{res['val_loss']:.4f}",
                              f"{res['seconds']:.0f}")  # fmt: skip
        report.show(table)
        if len(losses) == 2:
            report.note(f"ours - PyTorch: {losses['minitorch'] - losses['torch']:+.4f} nats "
                        "(the goal: within 0.05)")  # fmt: skip
    elif ns.contended:
        configs = ["milestone"] if ns.quick else ["milestone", "large"]
        contended_tables(report, libraries, configs, steps, ns.rounds)
    else:
        configs = ["milestone"] if ns.quick else ["milestone", "large"]
        step_table(report, libraries, configs, steps, ns.rounds)
        generation_table(report, libraries, steps, ns.rounds)
        breakdown_table(report, configs, steps)
        fused_table = Table("operation", "dtype", "fused ms", "unfused ms", "unfused ÷ fused",
                            "fused GB/s", "NumPy copy GB/s")  # fmt: skip
        for dtype in ("float32", "float64"):
            res = run_worker(["minitorch", "kernels", "-", dtype, *steps])
            if not res:
                continue
            copy = res.pop("copy")
            copy_rate = 2 * copy["bytes"] / copy["seconds"] / 1e9
            for name, r in res.items():
                if not r["fused_used"]:
                    report.note("Task 5.5's kernels are stubs here: no fused figures.")
                    break
                fused_table.add_row(
                    name, dtype, f"{r['fused'] * 1e3:.1f}", f"{r['plain'] * 1e3:.1f}",
                    f"{r['plain'] / r['fused']:.1f}x",
                    f"{5 * copy['bytes'] / r['fused'] / 1e9:.1f}", f"{copy_rate:.1f}",
                )  # fmt: skip
        fused_table.title = (f"forward + backward on {KERNEL_ROWS} x {KERNEL_N} (GB/s: 5 x the "
                             "array's bytes, the least a fused kernel moves)")  # fmt: skip
        report.show(fused_table)
        memory = Table("T", "ours, fused (task 5.5)", "ours, unfused (task 5.2)",
                       "PyTorch, unfused", "one T x T float32 score matrix per head",
                       title=f"peak memory of one causal attention forward, 1 x "
                       f"{MEMORY_HEADS} heads x T x {MEMORY_WIDTH}, float32, MiB")  # fmt: skip
        for t in (1024, 2048):
            row = [str(t)]
            for library in ("minitorch", "minitorch-unfused", "torch"):
                res = run_worker([library, "memory", str(t), "float32", *steps])
                if library == "torch" and not have_torch:
                    res = None
                row.append(f"{res['bytes'] / 2**20:.1f}" if res else "-")
            row.append(f"{MEMORY_HEADS * t * t * 4 / 2**20:.0f}")
            memory.add_row(*row)
        report.show(memory)
    if not have_torch:
        report.note("PyTorch is not installed: `pip install torch==2.13.0` for the comparison.")
    if ns.markdown:
        report.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
