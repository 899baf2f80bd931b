"""Benchmark the stage-2 fast backend against NumPy (and PyTorch on the CPU).

    python -m project.bench_fast [--repeats 5] [--rounds 1] [--quick] [--only matmul,...]
                                 [--dtype float32] [--isa avx2]

Every figure is the median of ``--repeats`` timed runs after untimed warm-up calls,
and each library runs in its own child process, so thread pools never compete (NumPy's
OpenBLAS and PyTorch's pools slow each other down badly when called alternately in one
process). Every library computes in ``--dtype`` (float64 unless told float32).

``--rounds N`` runs a section's workers in turn N times (ours, NumPy, ours, NumPy, ...)
and prints the median of the N figures, and as each ratio the median of the N ratios
of figures measured in the same round. On a shared virtual machine whose speed drifts
over seconds, a slow spell then lands in one round of both sides instead of on one
side's only run.

``--isa avx2`` measures, on an AVX-512 machine, what an AVX2 machine runs: every worker
compiles its kernels for Haswell without AVX-512 (``NUMBA_CPU_NAME`` and
``NUMBA_CPU_FEATURES``, so task 2.3 picks its AVX2 tile), NumPy uses OpenBLAS's Haswell
kernels (``OPENBLAS_CORETYPE=Haswell``) and PyTorch its AVX2 ones
(``ATEN_CPU_CAPABILITY=avx2``). Sections:

* ``matmul``  square products at 128, 256, 512, 1024: two plain Numba loops on
  2-D arrays that differ only in loop order (textbook i-j-k, and i-k-j), task 2.2's
  kernel, task 2.3's packed kernel, NumPy as installed, and NumPy with
  ``OPENBLAS_CORETYPE=SkylakeX`` (OpenBLAS's AVX-512 kernels, which it does not pick by
  itself on some AVX-512 CPUs; the practical ceiling; left out, with a note, on a CPU
  without AVX-512). GFLOP/s and ratios.
* ``elementwise``  map (relu, exp, log, sigmoid, tanh), zip (mul) and reduce (sum over
  each dim) on contiguous tensors of 10**6 and 10**7 entries, against the NumPy
  equivalent (for sigmoid ``1 / (1 + np.exp(-x))``: NumPy has none of its own).
* ``train``  one epoch of the split classifier with hidden 100 (``project.train``'s
  defaults) on the fast and the simple backend, and the same model, data and Adam in
  PyTorch when it is installed; each epoch also reads back the loss and the accuracy,
  as ``project.train``'s epoch does.
* ``startup``  import plus the first call of each kind of op in a fresh process, with an
  empty kernel cache (cold: Numba compiles) and again with the cache it left (warm).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from project.guard import require_stages

SECTIONS = ("matmul", "elementwise", "train", "startup")
DTYPE = "float64"
"""The dtype of every worker's arrays (``--dtype``; set in the worker process)."""
MATMUL_SIZES = (128, 256, 512, 1024)
ELEMENT_SIZES = (10**6, 10**7)


WARMUP_CALLS, WARMUP_SECONDS = 3, 0.5
"""Untimed calls before the timed ones: at least 3, for at least half a second. The
first calls of a kernel on a new, large size are slow for reasons that are not its
speed: loading it from the kernel cache, and on a virtual machine the first touches of
fresh memory (a relu map of 10^7 float64 entries on 2 threads measured 241, 91, 93, 88,
27, then 8-9 ms per call; with one warm-up call its median was 87 ms)."""


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    """Median seconds of ``repeats`` calls of ``fn`` after the warm-up calls
    (:data:`WARMUP_CALLS`, :data:`WARMUP_SECONDS`)."""
    start, calls = time.perf_counter(), 0
    while calls < WARMUP_CALLS or time.perf_counter() - start < WARMUP_SECONDS:
        fn()
        calls += 1
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ## Workers (each runs in its own process)


def _fast_tensor(array: Any) -> Any:
    from module1.tensor import from_numpy
    from module2.fast_ops import FastTensorBackend

    return from_numpy(array, FastTensorBackend)


def _loop_order_kernels() -> dict[str, Any]:
    """The same parallel product in two loop orders (plain Numba on 2-D arrays)."""
    from numba import njit, prange

    @njit(parallel=True, cache=True)
    def ijk(a: Any, b: Any, out: Any) -> None:
        for i in prange(a.shape[0]):
            for j in range(b.shape[1]):
                acc = 0.0
                for k in range(a.shape[1]):  # walks a column of b: stride n
                    acc += a[i, k] * b[k, j]
                out[i, j] = acc

    @njit(parallel=True, cache=True)
    def ikj(a: Any, b: Any, out: Any) -> None:
        for i in prange(a.shape[0]):
            for j in range(b.shape[1]):
                out[i, j] = 0.0
            for k in range(a.shape[1]):
                aik = a[i, k]
                for j in range(b.shape[1]):  # walks rows of b and out: stride 1
                    out[i, j] += aik * b[k, j]

    return {"i-j-k": ijk, "i-k-j": ikj}


def work_matmul(kind: str, sizes: Sequence[int], repeats: int) -> dict[str, float]:
    import numpy as np

    rng = np.random.default_rng(0)
    out: dict[str, float] = {}
    for n in sizes:
        a, b = rng.random((n, n)).astype(DTYPE), rng.random((n, n)).astype(DTYPE)
        rtol, atol = (1e-4, 1e-3) if DTYPE == "float32" else (1e-5, 1e-8)
        if kind == "numpy":
            seconds = median_time(lambda: a @ b, repeats)  # noqa: B023
        elif kind in ("i-j-k", "i-k-j"):
            loop, result2 = _loop_order_kernels()[kind], np.empty((n, n), DTYPE)
            seconds = median_time(lambda: loop(a, b, result2), repeats)  # noqa: B023
            if not np.allclose(result2, a @ b, rtol, atol):
                raise AssertionError(f"matmul {kind} at {n} disagrees with NumPy")
        else:
            from module2.fast_matmul import tensor_matrix_multiply_packed
            from module2.fast_ops import tensor_matrix_multiply_kernel

            kernel = (
                tensor_matrix_multiply_packed if kind == "2.3" else tensor_matrix_multiply_kernel
            )
            ta, tb = _fast_tensor(a), _fast_tensor(b)
            result = ta.zeros((n, n))
            args = (*result.tuple_arrays(), *ta.tuple_arrays(), *tb.tuple_arrays())
            seconds = median_time(lambda: kernel(*args), repeats)  # noqa: B023
            if not np.allclose(result.to_numpy(), a @ b, rtol, atol):
                raise AssertionError(f"matmul {kind} at {n} disagrees with NumPy")
        out[str(n)] = 2.0 * n**3 / seconds / 1e9
    return out


def _element_cases(size: int) -> list[tuple[str, tuple[int, ...], str, Any]]:
    """(name, shape, op, dim) per elementwise case."""
    side = round(size**0.5)
    return [
        ("map relu", (size,), "relu", None),
        ("map exp", (size,), "exp", None),
        ("map log", (size,), "log", None),
        ("map sigmoid", (size,), "sigmoid", None),
        ("map tanh", (size,), "tanh", None),
        ("zip mul", (size,), "mul", None),
        ("sum dim 0", (side, size // side), "sum", 0),
        ("sum dim 1", (side, size // side), "sum", 1),
        ("sum all", (size,), "sum", 0),
    ]


def work_elementwise(kind: str, sizes: Sequence[int], repeats: int) -> dict[str, float]:
    import numpy as np

    rng = np.random.default_rng(0)
    out: dict[str, float] = {}
    for size in sizes:
        for name, shape, op, dim in _element_cases(size):
            x = (rng.random(shape) - 0.5).astype(DTYPE)
            y = rng.random(shape).astype(DTYPE)  # positive: log's input
            z = (x * 8).astype(DTYPE)  # [-4, 4): sigmoid's and tanh's
            if kind == "numpy":
                fns: dict[str, Callable[[], Any]] = {
                    "relu": lambda: np.maximum(x, 0.0),  # noqa: B023
                    "exp": lambda: np.exp(x),  # noqa: B023
                    "log": lambda: np.log(y),  # noqa: B023
                    "sigmoid": lambda: 1.0 / (1.0 + np.exp(-z)),  # noqa: B023
                    "tanh": lambda: np.tanh(z),  # noqa: B023
                    "mul": lambda: x * y,  # noqa: B023
                    "sum": lambda: x.sum(axis=dim),  # noqa: B023
                }
            else:
                from module2.fast_ops import FastTensorBackend as F

                tx, ty, tz = _fast_tensor(x), _fast_tensor(y), _fast_tensor(z)
                fns = {
                    "relu": lambda: F.relu_map(tx),  # noqa: B023
                    "exp": lambda: F.exp_map(tx),  # noqa: B023
                    "log": lambda: F.log_map(ty),  # noqa: B023
                    "sigmoid": lambda: F.sigmoid_map(tz),  # noqa: B023
                    "tanh": lambda: F.tanh_map(tz),  # noqa: B023
                    "mul": lambda: F.mul_zip(tx, ty),  # noqa: B023
                    "sum": lambda: F.add_reduce(tx, dim),  # noqa: B023
                }
            out[f"{name} {size:.0e}"] = median_time(fns[op], repeats)
    return out


def work_train(kind: str, repeats: int, points: int = 50, hidden: int = 100) -> dict[str, float]:
    """One epoch of the split classifier (2-hidden-hidden-1, ``points`` points, Adam)."""
    import numpy as np

    from module0.datasets import load_dataset

    data = load_dataset("split", points, 0)
    X = np.array(data.X, dtype=DTYPE)
    y = np.array(data.y, dtype=DTYPE).reshape(-1, 1)
    if kind == "torch":
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        model = torch.nn.Sequential(
            torch.nn.Linear(2, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, 1),
        ).to(getattr(torch, DTYPE))  # fmt: skip
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        tX, ty = torch.from_numpy(X), torch.from_numpy(y)
        loss_fn = torch.nn.BCEWithLogitsLoss()

        def step() -> None:  # what tensor_epoch does, the loss and accuracy included
            logits = model(tX)
            loss = loss_fn(logits, ty)
            opt.zero_grad()
            loss.backward()
            opt.step()
            predictions = logits.detach().numpy() > 0.0
            float(np.mean(predictions == (ty.numpy() > 0.5)))
            loss.item()

    else:
        from project.train import TENSOR_BACKENDS, Config, TensorTrainer, make_optimizer

        config = Config(backend=kind, dataset="split", points=points, hidden=hidden, dtype=DTYPE)
        trainer = TensorTrainer(config, data, TENSOR_BACKENDS[kind])
        optimizer = make_optimizer(config, trainer.model)

        def step() -> None:
            trainer.epoch(optimizer)

    return {"epoch": median_time(step, repeats if kind != "simple" else 2)}


STARTUP_SCRIPT = """
import time
start = time.perf_counter()
import numpy as np
import module2 as mt
x = mt.rand(64, 64, backend=mt.FastTensorBackend, dtype=DTYPE)
times = {"import": time.perf_counter() - start}
for name, fn in [("map", lambda: x.relu()), ("zip", lambda: x * x),
                 ("reduce", lambda: x.sum(0)), ("matmul", lambda: x @ x)]:
    t = time.perf_counter(); fn(); times[name] = time.perf_counter() - t
times["total"] = time.perf_counter() - start
print("RESULT=" + __import__("json").dumps(times))
"""


def work_startup() -> dict[str, dict[str, float]]:
    """Cold and warm start-up, each in a fresh interpreter with its own cache folder."""
    out = {}
    folder = tempfile.mkdtemp(prefix="bench_fast_cache_")
    try:
        env = {**os.environ, "NUMBA_CACHE_DIR": folder}
        for label in ("cold", "warm"):
            script = f"DTYPE = {DTYPE!r}\n" + STARTUP_SCRIPT
            proc = subprocess.run(
                [sys.executable, "-c", script], env=env, capture_output=True, text=True
            )
            line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT="))
            out[label] = json.loads(line.removeprefix("RESULT="))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


# ## The parent: run each worker in its own process, then print tables


def run_worker(args: list[str], env: dict[str, str] | None = None) -> Any:
    cmd = [sys.executable, "-m", "project.bench_fast", "--dtype", DTYPE, "--worker", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT="):
            return json.loads(line.removeprefix("RESULT="))
    sys.stderr.write(f"worker {' '.join(args)} failed:\n{proc.stderr[-2000:]}\n")
    return None


def run_rounds(
    workers: dict[str, tuple[list[str], dict[str, str] | None]], rounds: int
) -> dict[str, list[Any]]:
    """Each worker's results over ``rounds`` rounds, the workers run in turn in each
    round; None for a run that failed, so index ``r`` is round ``r`` for every worker."""
    runs: dict[str, list[Any]] = {name: [] for name in workers}
    for _ in range(rounds):
        for name, (args, env) in workers.items():
            runs[name].append(run_worker(args, env))
    return runs


def median_of(results: list[dict[str, float] | None]) -> dict[str, float] | None:
    """Key by key, the median over the rounds' results; None when every run failed."""
    done = [r for r in results if r is not None]
    if not done:
        return None
    return {key: statistics.median(r[key] for r in done) for key in done[0]}


def median_ratio(
    ours: list[dict[str, float] | None],
    theirs: list[dict[str, float] | None],
    key: str,
    invert: bool = False,
) -> float | None:
    """The median over rounds of ``ours[key] / theirs[key]`` (``theirs / ours`` with
    ``invert``), each ratio taken within one round; None without a round of both."""
    pairs = [(o, t) for o, t in zip(ours, theirs, strict=True) if o is not None and t is not None]
    if not pairs:
        return None
    return statistics.median((t[key] / o[key]) if invert else (o[key] / t[key]) for o, t in pairs)


def avx2_environment() -> dict[str, str]:
    """The environment in which Numba, OpenBLAS and PyTorch run AVX2 code only."""
    from module2.tuning import avx2_environment as numba_settings

    return {
        **numba_settings(),
        "OPENBLAS_CORETYPE": "Haswell",
        "ATEN_CPU_CAPABILITY": "avx2",
    }


def avx2_tile() -> str:
    """Task 2.3's tile in this environment, as a child process finds it ("3 x 16
    float64, 3 x 32 float32")."""
    code = ("from module2 import fast_matmul as f; "
            "print(f'{f.TILE_ROWS} x {f.TILE_BYTES // 8} float64, "
            "{f.TILE_ROWS} x {f.TILE_BYTES // 4} float32')")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def torch_available() -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    return subprocess.run([sys.executable, "-c", probe]).returncode == 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run each section's workers in turn this many times (1)")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="only the smaller sizes")
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                    help="every library's dtype (float64)")  # fmt: skip
    ap.add_argument("--isa", choices=("host", "avx2"), default="host",
                    help="the instructions every library uses: this machine's own, or AVX2 "
                         "(from an AVX-512 machine)")  # fmt: skip
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--markdown", action="store_true",
                    help="also write these tables into docs/benchmarks.md (this script's "
                         "section, dated, with the machine)")  # fmt: skip
    ns = ap.parse_args(argv)
    require_stages(0, 1, 2)
    global DTYPE
    DTYPE = ns.dtype
    if ns.worker:
        return worker_main(ns.worker, ns.repeats)
    from rich.console import Console
    from rich.table import Table

    from project.bench_page import Report, has_avx512

    console = Console()
    report = Report("bench_fast", console, argv)
    sections = [s.strip() for s in ns.only.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    rep = str(ns.repeats)
    m_sizes = MATMUL_SIZES[:3] if ns.quick else MATMUL_SIZES
    e_sizes = ELEMENT_SIZES[:1] if ns.quick else ELEMENT_SIZES
    rounds = max(1, ns.rounds)
    if ns.isa == "avx2":
        if not has_avx512():
            ap.error("--isa avx2 is for a machine with AVX-512: this one runs AVX2 code itself")
        os.environ.update(avx2_environment())  # every worker inherits it
    console.print(f"[bold]bench_fast[/]: median of {rep} runs after warm-up calls, {DTYPE}, "
                  f"{os.cpu_count()} CPUs; each library in its own process"
                  + (f"; median of {rounds} rounds" if rounds > 1 else "")
                  + ("; AVX2 code only (--isa avx2)" if ns.isa == "avx2" else ""))  # fmt: skip

    if "matmul" in sections:
        sizes = ",".join(map(str, m_sizes))
        # The Numba workers check each answer with NumPy's `@`; with OpenBLAS's threads
        # on, those threads spin for a while after it and take a core from the next
        # size's timing (measured: 2.3 at 512 halved, 33 against 77 GFLOP/s).
        one = {"OPENBLAS_NUM_THREADS": "1"}
        workers = {
            "i-j-k": (["matmul", "i-j-k", sizes, rep], one),
            "i-k-j": (["matmul", "i-k-j", sizes, rep], one),
            "2.2": (["matmul", "2.2", sizes, rep], one),
            "2.3": (["matmul", "2.3", sizes, rep], one),
            "numpy": (["matmul", "numpy", sizes, rep], None),
        }  # fmt: skip
        # OpenBLAS's SkylakeX kernels use AVX-512: on a CPU without it the worker dies
        # of an illegal instruction, so the column is left out, with a note.
        refs = ["numpy"]
        if has_avx512() is not False and ns.isa == "host":
            workers["numpy SkylakeX"] = (
                ["matmul", "numpy", sizes, rep], {"OPENBLAS_CORETYPE": "SkylakeX"}
            )  # fmt: skip
            refs.append("numpy SkylakeX")
        runs = run_rounds(workers, rounds)
        res = {name: median_of(r) for name, r in runs.items()}
        table = Table(title="matmul, GFLOP/s (2 n^3 / time)")
        for col in ("n", *res, *(f"2.3 / {r.removeprefix('numpy ') or 'numpy'}" for r in refs)):
            table.add_column(col, justify="right")
        for n in map(str, m_sizes):
            row = [n] + [f"{r[n]:.1f}" if r else "-" for r in res.values()]
            for ref in refs:
                ratio = median_ratio(runs["2.3"], runs[ref], n)
                row.append(f"{ratio:.2f}x" if ratio is not None else "-")
            table.add_row(*row)
        report.show(table)
        if ns.isa == "avx2":
            report.note("AVX2 code only: task 2.3's tile for AVX2 "
                        f"({avx2_tile()}), NumPy on OpenBLAS's Haswell kernels.")  # fmt: skip
        elif "numpy SkylakeX" not in refs:
            report.note("No SkylakeX column: this CPU has no AVX-512, which OpenBLAS's "
                        "SkylakeX kernels need.")  # fmt: skip

    if "elementwise" in sections:
        sizes = ",".join(map(str, e_sizes))
        runs = run_rounds({
            "fast": (["elementwise", "fast", sizes, rep], None),
            "numpy": (["elementwise", "numpy", sizes, rep], None),
        }, rounds)  # fmt: skip
        fast, numpy = median_of(runs["fast"]) or {}, median_of(runs["numpy"]) or {}
        table = Table(title="map / zip / reduce, milliseconds (ratio > 1: fast backend wins)")
        for col in ("case", "fast", "numpy", "numpy / fast"):
            table.add_column(col, justify="right")
        for key, ours in fast.items():
            theirs = numpy.get(key)
            ratio = median_ratio(runs["fast"], runs["numpy"], key, invert=True)
            table.add_row(key, f"{ours * 1e3:.2f}", f"{theirs * 1e3:.2f}" if theirs else "-",
                          f"{ratio:.2f}x" if ratio is not None else "-")  # fmt: skip
        report.show(table)

    if "train" in sections:
        kinds = ("fast", "simple", "torch") if torch_available() else ("fast", "simple")
        runs = run_rounds({kind: (["train", kind, rep], None) for kind in kinds}, rounds)
        table = Table(title="one epoch: split, 2-100-100-1 MLP, 50 points, Adam")
        for col in ("backend", "ms per epoch", "vs fast"):
            table.add_column(col, justify="right")
        for kind, results in runs.items():
            r = median_of(results)
            if r is None:
                continue
            ratio = median_ratio(results, runs["fast"], "epoch")
            table.add_row(kind, f"{r['epoch'] * 1e3:.2f}",
                          f"{ratio:.2f}x" if ratio is not None else "-")  # fmt: skip
        report.show(table)
        if "torch" not in runs:
            report.note("PyTorch is not installed: no PyTorch comparison.")

    if "startup" in sections:
        res = run_worker(["startup"])
        if res:
            table = Table(title="import + first op in a fresh process, seconds")
            for col in ("cache", *res["cold"]):
                table.add_column(col, justify="right")
            for label, r in res.items():
                table.add_row(label, *(f"{v:.2f}" for v in r.values()))
            report.show(table)
    if ns.markdown:
        report.write()
    return 0


def worker_main(args: list[str], repeats: int) -> int:
    kind = args[0]
    if kind == "matmul":
        result: Any = work_matmul(args[1], [int(s) for s in args[2].split(",")], int(args[3]))
    elif kind == "elementwise":
        result = work_elementwise(args[1], [int(s) for s in args[2].split(",")], int(args[3]))
    elif kind == "train":
        result = work_train(args[1], *map(int, args[2:5]))  # kind, repeats[, points, hidden]
    elif kind == "startup":
        result = work_startup()
    else:
        raise SystemExit(f"unknown worker {kind}")
    print("RESULT=" + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
