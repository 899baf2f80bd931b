"""Benchmark the stage-3 CUDA backend on a GPU against cuBLAS, a device copy and stage 2.

    python -m project.bench_cuda [--repeats 10] [--quick] [--only matmul,elementwise,train]
                                 [--dtype float64|float32]
    NUMBA_ENABLE_CUDASIM=1 python -m project.bench_cuda --simulator-smoke

Every figure is the median of ``--repeats`` timed calls after warm-up calls (the first
one compiles the kernel). A kernel launch returns before the kernel has run, so each
timed call ends with a synchronize (``cuda.synchronize()``; ``torch.cuda.synchronize()``
for PyTorch) before the timer stops. Every input is already in GPU memory: no copy
between host and device is timed. Sections:

Every tensor of ours is float64 unless ``--dtype float32`` (which a laptop's or a hosted
notebook's GPU runs 32-64 times as fast as float64). Sections:

* ``matmul``  square products at 256, 512, 1024 and 2048 by task 3.3's kernel,
  called through ``CudaOps.matrix_multiply`` (the backend's own launch: blocks of
  (32, 8) threads, the output allocated per call), in GFLOP/s (``2 n^3 / time``),
  against PyTorch's ``torch.matmul`` on the same GPU (cuBLAS) in float32 and float64,
  measured in the same run. The goal: at least 0.25x cuBLAS float64 at 2048 (in
  float64). Without
  PyTorch, or with a PyTorch that sees no GPU, the cuBLAS columns are left out.
* ``elementwise``  task 3.1's relu (a map) and mul (a zip) on 10**6 and 10**7 entries,
  in GB/s (bytes read plus bytes written, per second, at the dtype's size), against a
  device-to-device copy of as many entries (``cuda.device_array`` +
  ``copy_to_device``): the rate at which the GPU's memory streams data, which a kernel
  that reads and writes each entry once cannot beat.
* ``train``  one epoch of the split classifier, 2-100-100-1, 50 points, Adam (the model
  of ``python -m project.train --dataset split --hidden 100``): the cuda backend with
  task 3.4's CudaAdam against the fast CPU backend with FastAdam, the latter timed by
  ``project.bench_fast``'s worker in its own process, as that benchmark does.

Without a GPU it says so and exits with status 2, and so it does on Numba's CUDA
simulator, whose timings measure Python threads. ``--simulator-smoke`` runs every
section once at tiny sizes on the simulator (switched on here when Numba is not yet
imported) to show that the code paths work: its output is not a measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from project import bench_fast
from project.bench_fast import median_time, run_worker
from project.guard import require_stages

if TYPE_CHECKING:
    from module1.tensor import Tensor

SECTIONS = ("matmul", "elementwise", "train")
MATMUL_GOAL = 0.25
"""Task 3.3's kernel should reach this fraction of cuBLAS float64 at the largest size."""


@dataclass(frozen=True)
class Plan:
    """What one run measures, and how many times."""

    matmul_sizes: tuple[int, ...] = (256, 512, 1024, 2048)
    element_sizes: tuple[int, ...] = (10**6, 10**7)
    points: int = 50
    hidden: int = 100
    repeats: int = 10
    warmup: int = 3
    smoke: bool = False
    dtype: str = "float64"


SMOKE = Plan(
    matmul_sizes=(8, 40),
    element_sizes=(100,),
    points=10,
    hidden=4,
    repeats=1,
    warmup=1,
    smoke=True,
)
"""``--simulator-smoke``: one tile and a product with ragged edges over two tile steps;
at most 100 threads per map, since every simulated thread costs about half a millisecond."""

NO_GPU = 2
"""The exit status without a GPU (or on the simulator, without ``--simulator-smoke``)."""


def simulator_on() -> bool:
    """True when Numba runs CUDA kernels on its simulator (``NUMBA_ENABLE_CUDASIM=1``
    when it was imported)."""
    import numba

    return bool(getattr(numba.config, "ENABLE_CUDASIM", False))


def gpu_problem() -> str | None:
    """None when Numba runs CUDA kernels on a real GPU here; else what is in the way."""
    from numba import cuda

    if simulator_on():
        return (
            "NUMBA_ENABLE_CUDASIM=1: the kernels would run on Numba's CUDA simulator, one "
            "Python thread per GPU thread, so the timings would measure the simulator, not a "
            "GPU. Unset it on a GPU machine, or add --simulator-smoke to check that every "
            "section runs."
        )
    if not cuda.is_available():
        return (
            "no CUDA GPU found (numba.cuda.is_available() is False), and this benchmark "
            "measures one. On a machine with an NVIDIA GPU and its driver, install the CUDA "
            "extra (pip install -e '.[cuda]') and run it there; here, "
            "python -m project.bench_cuda --simulator-smoke checks that every section runs."
        )
    return None


def device_name() -> str:
    from numba import cuda

    if simulator_on():
        return "Numba's CUDA simulator (on the CPU)"
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def synced(fn: Callable[[], Any], sync: Callable[[], Any] | None = None) -> Callable[[], None]:
    """``fn`` followed by a wait for the GPU (Numba's ``cuda.synchronize`` by default)."""
    if sync is None:
        from numba import cuda

        sync = cuda.synchronize

    def call() -> None:
        fn()
        sync()

    return call


def gpu_time(fn: Callable[[], Any], plan: Plan, sync: Callable[[], Any] | None = None) -> float:
    """Median seconds of ``plan.repeats`` synchronized calls of ``fn``, after
    ``plan.warmup`` untimed ones (the last of those inside ``median_time``)."""
    call = synced(fn, sync)
    for _ in range(plan.warmup - 1):
        call()
    return median_time(call, plan.repeats)


def device_tensor(array: Any, dtype: str = "float64") -> Tensor:
    """A tensor on the cuda backend, in ``dtype``, whose storage is already a device
    array."""
    from numba import cuda

    from module1.tensor import Tensor
    from module1.tensor_data import TensorData
    from module3.cuda_ops import CudaTensorBackend

    values = np.ascontiguousarray(array, dtype=dtype)
    storage = cuda.to_device(values.reshape(-1))
    return Tensor(TensorData(storage, values.shape), backend=CudaTensorBackend)


def find_torch_cuda() -> tuple[Any, str]:
    """(the torch module, "") when PyTorch can use the GPU here; else (None, why not)."""
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed: no cuBLAS columns."
    if not torch.cuda.is_available():
        return None, f"PyTorch {torch.__version__} sees no CUDA GPU: no cuBLAS columns."
    return torch, ""


# ## Sections: each returns table rows, then notes


Rows = list[list[str]]


def rate(value: float) -> str:
    """A GFLOP/s or GB/s figure: one decimal, or 3 significant digits below 10."""
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def bench_matmul(plan: Plan) -> tuple[list[str], Rows, list[str]]:
    from module3.cuda_ops import CudaOps

    torch, why_not = find_torch_cuda()
    columns = ["n", "task 3.3"]
    notes = [why_not] if why_not else []
    if torch is not None:
        columns += ["cuBLAS f32", "cuBLAS f64", "3.3 / f32", "3.3 / f64"]
        notes.append(
            f"PyTorch {torch.__version__}; float32 matmul precision "
            f"{torch.get_float32_matmul_precision()!r} ('highest': no TF32)"
        )
    rng = np.random.default_rng(0)
    rows: Rows = []
    for n in plan.matmul_sizes:
        a, b = rng.random((n, n)).astype(plan.dtype), rng.random((n, n)).astype(plan.dtype)
        ta, tb = device_tensor(a, plan.dtype), device_tensor(b, plan.dtype)
        rtol, atol = (1e-4, 1e-4 * n) if plan.dtype == "float32" else (1e-5, 1e-8)
        product = CudaOps.matrix_multiply(ta, tb)
        if product.dtype != np.dtype(plan.dtype):
            raise AssertionError(f"task 3.3's matmul gave {product.dtype} for {plan.dtype}")
        if not np.allclose(product.to_numpy(), a @ b, rtol, atol):
            raise AssertionError(f"task 3.3's matmul at n = {n} disagrees with NumPy")
        flop = 2.0 * n**3
        ours = flop / gpu_time(lambda: CudaOps.matrix_multiply(ta, tb), plan) / 1e9  # noqa: B023
        row = [str(n), rate(ours)]
        if torch is not None:
            rates = []
            for dtype in (torch.float32, torch.float64):
                x = torch.from_numpy(a).to(device="cuda", dtype=dtype)
                y = torch.from_numpy(b).to(device="cuda", dtype=dtype)
                seconds = gpu_time(
                    lambda: torch.matmul(x, y),  # noqa: B023
                    plan,
                    torch.cuda.synchronize,
                )
                rates.append(flop / seconds / 1e9)
            row += [rate(r) for r in rates] + [f"{ours / r:.3f}x" for r in rates]
        rows.append(row)
    largest = plan.matmul_sizes[-1]
    notes.append(f"goal: task 3.3 at least {MATMUL_GOAL}x cuBLAS f64 at n = {largest}")
    return columns, rows, notes


def bench_elementwise(plan: Plan) -> tuple[list[str], Rows, list[str]]:
    from numba import cuda

    from module3.cuda_ops import CudaTensorBackend as backend

    columns = ["case", "entries", "ms", "GB/s", "copy GB/s", "/ copy"]
    rng = np.random.default_rng(0)
    rows: Rows = []
    for size in plan.element_sizes:
        x_host = (rng.random(size) - 0.5).astype(plan.dtype)
        y_host = rng.random(size).astype(plan.dtype)
        x, y = device_tensor(x_host, plan.dtype), device_tensor(y_host, plan.dtype)
        if not np.array_equal(backend.relu_map(x).to_numpy(), np.maximum(x_host, 0.0)):
            raise AssertionError(f"relu of {size} entries disagrees with NumPy")
        if not np.array_equal(backend.mul_zip(x, y).to_numpy(), x_host * y_host):
            raise AssertionError(f"mul of {size} entries disagrees with NumPy")
        source = x._tensor._storage
        copy = gpu_time(
            lambda: cuda.device_array(size, dtype=plan.dtype).copy_to_device(source),  # noqa: B023
            plan,
        )
        item = np.dtype(plan.dtype).itemsize
        copy_rate = 2 * item * size / copy / 1e9  # one read and one write per entry
        cases: list[tuple[str, Callable[[], Any], int]] = [
            ("map relu", lambda: backend.relu_map(x), 2 * item),  # noqa: B023
            ("zip mul", lambda: backend.mul_zip(x, y), 3 * item),  # noqa: B023
        ]
        for name, fn, bytes_per_entry in cases:
            seconds = gpu_time(fn, plan)
            speed = bytes_per_entry * size / seconds / 1e9
            rows.append(
                [
                    name,
                    f"{size:.0e}",
                    f"{seconds * 1e3:.3f}",
                    rate(speed),
                    rate(copy_rate),
                    f"{speed / copy_rate:.2f}x",
                ]
            )
    item = np.dtype(plan.dtype).itemsize
    notes = [
        f"{plan.dtype}; bytes per entry: relu {2 * item} (read {item}, write {item}), "
        f"mul {3 * item}, the copy {2 * item}"
    ]
    return columns, rows, notes


def cuda_epoch(plan: Plan) -> float:
    """Seconds per epoch of the split classifier on the cuda backend with CudaAdam."""
    from module0.datasets import load_dataset
    from project.train import TENSOR_BACKENDS, Config, TensorTrainer, make_optimizer

    config = Config(
        backend="cuda", dataset="split", points=plan.points, hidden=plan.hidden, dtype=plan.dtype
    )
    data = load_dataset(config.dataset, config.points, config.seed)
    trainer = TensorTrainer(config, data, TENSOR_BACKENDS["cuda"])
    optimizer = make_optimizer(config, trainer.model)
    return gpu_time(lambda: trainer.epoch(optimizer), plan)


def bench_train(plan: Plan) -> tuple[list[str], Rows, list[str]]:
    columns = ["backend", "optimizer", "ms per epoch", "vs fast"]
    cuda_ms = cuda_epoch(plan) * 1e3
    args = ["train", "fast", str(plan.repeats), str(plan.points), str(plan.hidden)]
    bench_fast.DTYPE = plan.dtype  # the worker's --dtype
    fast = run_worker(args)
    fast_ms = fast["epoch"] * 1e3 if fast else None
    rows = [["cuda", "CudaAdam", f"{cuda_ms:.2f}", f"{cuda_ms / fast_ms:.2f}x" if fast_ms else "-"]]
    if fast_ms is not None:
        rows.append(["fast (CPU)", "FastAdam", f"{fast_ms:.2f}", "1.00x"])
    notes = [
        f"split, 2-{plan.hidden}-{plan.hidden}-1, {plan.points} points, Adam, "
        f"{plan.dtype}; the fast backend in its own process on {os.cpu_count()} CPUs; "
        "above 1x: the GPU is slower"
    ]
    return columns, rows, notes


BENCHES: dict[str, tuple[str, Callable[[Plan], tuple[list[str], Rows, list[str]]]]] = {
    "matmul": ("matmul, GFLOP/s (2 n^3 / time); cuBLAS in the dtype marked", bench_matmul),
    "elementwise": ("map / zip on device-resident tensors, GB/s", bench_elementwise),
    "train": ("one training epoch", bench_train),
}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=Plan.repeats, help="timed calls per figure")
    ap.add_argument("--quick", action="store_true", help="only the smaller sizes")
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    ap.add_argument(
        "--simulator-smoke",
        action="store_true",
        help="run every section once, tiny, on the CUDA simulator (no timings)",
    )
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                    help="our tensors' dtype (float64)")  # fmt: skip
    ap.add_argument("--markdown", action="store_true",
                    help="also write the tables into docs/benchmarks.md (this script's "
                         "section, dated, with the machine)")  # fmt: skip
    ns = ap.parse_args(argv)
    require_stages(0, 1, 2, 3)
    sections = [s.strip() for s in ns.only.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    if ns.repeats < 1:
        ap.error("--repeats must be at least 1")
    if "numba" not in sys.modules:  # Numba reads these once, when it is imported
        if ns.simulator_smoke:
            os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        # A training step's tensors are small grids, for which Numba warns of low occupancy.
        os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    warnings.filterwarnings("ignore", message=r"Grid size \d+ will likely result in GPU under")
    from rich.console import Console
    from rich.table import Table

    from project.bench_page import Report

    console = Console()
    report = Report("bench_cuda", console, argv)
    if ns.simulator_smoke:
        if not simulator_on():
            console.print(
                "--simulator-smoke: Numba was imported before the simulator could "
                "be switched on; set NUMBA_ENABLE_CUDASIM=1",
                markup=False,
            )
            return NO_GPU
        plan = dataclasses.replace(SMOKE, dtype=ns.dtype)
    else:
        problem = gpu_problem()
        if problem is not None:
            Console(stderr=True).print(f"bench_cuda: {problem}", markup=False, highlight=False)
            return NO_GPU
        plan = Plan(repeats=ns.repeats, dtype=ns.dtype)
        if ns.quick:
            plan = dataclasses.replace(
                plan, matmul_sizes=plan.matmul_sizes[:3], element_sizes=plan.element_sizes[:1]
            )
    smoke_label = "SIMULATOR SMOKE RUN: not a measurement"
    if plan.smoke:
        console.print(
            f"[bold red]{smoke_label}[/]: every section once at tiny sizes, to show "
            "the code paths work; the times below are of Python threads on the CPU"
        )
    calls = "call" if plan.repeats == 1 else "calls"
    console.print(
        f"[bold]bench_cuda[/] on {device_name()}: median of {plan.repeats} timed "
        f"{calls} after {plan.warmup} untimed, each synchronized; inputs in GPU memory; "
        f"{plan.dtype}"
    )
    for section in sections:
        title, bench = BENCHES[section]
        columns, rows, notes = bench(plan)
        if plan.smoke:
            console.print(f"\n[red]{smoke_label}[/]")
        table = Table(title=title)
        for column in columns:
            table.add_column(column, justify="right")
        for row in rows:
            table.add_row(*row)
        report.show(table)
        for note in notes:
            report.note(note)
    if plan.smoke:
        console.print(f"[bold red]{smoke_label}[/]: every section ran.")
    elif ns.markdown:  # a simulator run measures nothing: never written to the page
        report.blocks.insert(0, f"GPU: {device_name()}; {plan.dtype}; median of "
                                f"{plan.repeats} timed {calls}.")  # fmt: skip
        report.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
