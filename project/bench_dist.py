"""Stage 6's benchmark: task 6.1's ring all-reduce against MPI's own, and data-parallel
training throughput.

    python -m project.bench_dist [--quick] [--markdown]

Needs the dist extra (``pip install -e ".[dist]"``). Each measurement runs its own
``mpiexec -n K`` (the ranks share this machine's cores: :func:`module6.distributed.
share_cores` gives each rank its share of Numba's threads):

* **all-reduce**: float32 buffers of 1, 16 and 256 MB on 1, 2 and 4 ranks, the median
  of several runs of ``ring_all_reduce`` and of MPI's ``Allreduce``, as time and as bus
  bandwidth (``2 (K - 1) / K`` of the buffer over the time: what each rank's link
  carries; see ``module6.distributed.bus_bandwidth``);
* **training**: steps of stage 5's milestone GPT (4 x 128, context 64, a global batch
  of 12) on 1 process with one thread, on 1 process with all the cores' threads, and on
  2 ranks of 6 with a core each, in samples per second, with the share of a step each
  rank spends in the all-reduce (medians of ``--rounds`` runs, the configurations
  taking turns).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from project.bench_page import Report

MB = 1 << 20


def launch(ranks: int, worker: list[str]) -> Any:
    """Rank 0's ``RESULT=`` JSON from ``mpiexec -n ranks python -m project.bench_dist
    --worker ...``; None (and the output on stderr) when it gave none."""
    from module6.distributed import INSTALL, mpiexec

    launcher = mpiexec()
    if launcher is None:
        raise SystemExit(f"bench_dist needs MPI: {INSTALL}")
    command = [launcher, "-n", str(ranks), sys.executable, "-m", "project.bench_dist",
               "--worker", *worker]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT="):
            return json.loads(line.removeprefix("RESULT="))
    sys.stderr.write(f"{ranks} ranks of {worker} failed:\n{(proc.stdout + proc.stderr)[-2000:]}\n")
    return None


# -- workers (one per mpiexec) -------------------------------------------------------------


def worker_all_reduce(sizes_mb: list[int], reps: int) -> dict[str, Any]:
    from module6.distributed import ALL_REDUCE, world

    comm = world()
    out: dict[str, Any] = {}
    for mb in sizes_mb:
        n = mb * MB // 4
        x = np.random.default_rng(comm.Get_rank()).random(n, dtype=np.float32)
        for name, fn in ALL_REDUCE.items():
            times = []
            for _ in range(reps + 1):  # the first is a warm-up
                buffer = x.copy()
                comm.Barrier()
                start = time.perf_counter()
                fn(comm, buffer)
                comm.Barrier()
                times.append(time.perf_counter() - start)
            out[f"{name} {mb}"] = float(np.median(times[1:]))
    return out


def worker_train(steps: int, algorithm: str, threads: int) -> dict[str, Any]:
    from module5.gpt import GPT, GPTConfig
    from module5.losses import lm_cross_entropy
    from module5.optim import AdamW, clip_grad_norm_, decay_groups
    from module5.text import CharTokenizer, get_batch
    from module6.ddp import DistributedDataParallel, shard
    from module6.distributed import share_cores, world
    from project.shakespeare_data import load_works, shakespeare_split

    comm = world()
    rank, size = comm.Get_rank(), comm.Get_size()
    if threads:  # a fixed count (1: the per-core baseline), else this rank's share
        import numba

        numba.set_num_threads(threads)
    else:
        threads = share_cores(comm)
    tok = CharTokenizer("".join(load_works().values()))
    data = tok.encode(shakespeare_split()[0])
    model = GPT(GPTConfig(vocab_size=tok.vocab_size), seed=0)
    model.to("float32")
    ddp = DistributedDataParallel(model, comm, algorithm=algorithm)
    opt = AdamW(decay_groups(model, 0.1), lr=1e-3, betas=(0.9, 0.99))
    rng = np.random.default_rng(0)
    batch = 12

    def step() -> None:
        x, y = get_batch(data, batch, 64, rng)
        logits = ddp(shard(x, rank, size))
        b, t, v = logits.shape
        loss = lm_cross_entropy(
            logits.contiguous().view(b * t, v), shard(y, rank, size).reshape(-1)
        )
        opt.zero_grad()
        loss.backward()
        ddp.sync_gradients()
        clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(3):  # compile and warm up
        step()
    comm.Barrier()
    ddp.timer.seconds = 0.0
    start = time.perf_counter()
    for _ in range(steps):
        step()
    comm.Barrier()
    seconds = time.perf_counter() - start
    comm_share = comm.gather(ddp.comm_seconds / seconds, root=0)
    return {"samples_per_s": steps * batch / seconds, "threads": threads,
            "comm_share": comm_share}  # fmt: skip


def worker(argv: list[str]) -> None:
    from module6.distributed import world

    kind = argv[0]
    if kind == "allreduce":
        result = worker_all_reduce([int(s) for s in argv[1].split(",")], int(argv[2]))
    else:
        result = worker_train(int(argv[1]), argv[2], int(argv[3]))
    if world().Get_rank() == 0:
        print("RESULT=" + json.dumps(result), flush=True)


# -- the tables ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["--worker"]:
        worker(args_list[1:])
        return 0
    ap = argparse.ArgumentParser(prog="python -m project.bench_dist",
                                 description=__doc__.split("\n")[0])  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="1 and 16 MB, fewer steps")
    ap.add_argument("--rounds", type=int, default=3,
                    help="training runs of each configuration, in turns; medians (3)")  # fmt: skip
    ap.add_argument("--markdown", action="store_true",
                    help="also write the tables to docs/benchmarks.md")  # fmt: skip
    args = ap.parse_args(args_list)
    console = Console()
    report = Report("bench_dist", console, args_list)
    sizes = [1, 16] if args.quick else [1, 16, 256]
    rank_counts = [1, 2] if args.quick else [1, 2, 4]
    reps = 3 if args.quick else 5
    table = Table(title="all-reduce of float32 buffers: median ms, bus bandwidth GB/s")
    for column in (
        "ranks",
        "MB",
        "ring ms",
        "MPI ms",
        "ring GB/s",
        "MPI GB/s",
        "ring time / MPI's",
    ):
        table.add_column(column, justify="right")
    from module6.distributed import bus_bandwidth

    for k in rank_counts:
        result = launch(k, ["allreduce", ",".join(map(str, sizes)), str(reps)])
        if result is None:
            continue
        for mb in sizes:
            ring, mpi = result[f"ring {mb}"], result[f"mpi {mb}"]
            bw = [bus_bandwidth(mb * MB, t, k) / 1e9 for t in (ring, mpi)]
            table.add_row(str(k), str(mb), f"{ring * 1e3:.2f}", f"{mpi * 1e3:.2f}",
                          f"{bw[0]:.2f}" if k > 1 else "-", f"{bw[1]:.2f}" if k > 1 else "-",
                          f"{ring / mpi:.2f}x" if mpi else "-")  # fmt: skip
    report.show(table)
    steps = 10 if args.quick else 40
    train = Table(title="training: stage 5's milestone GPT, float32, global batch 12 x 64")
    for column in ("ranks", "threads per rank", "samples/s", "vs 1 process, 1 thread",
                   "vs 1 process, all cores", "all-reduce share"):  # fmt: skip
        train.add_column(column, justify="right")
    configs = ((1, 1), (1, 0), (2, 0))
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {c: [] for c in configs}
    for _ in range(args.rounds):  # the configurations take turns: the machine drifts
        for k, threads in configs:
            result = launch(k, ["train", str(steps), "ring", str(threads)])
            if result is not None:
                runs[(k, threads)].append(result)
    rate = {c: float(np.median([r["samples_per_s"] for r in rs])) for c, rs in runs.items() if rs}
    one, every = rate.get((1, 1)), rate.get((1, 0))
    for c, rs in runs.items():
        if not rs:
            continue
        shares = np.median([r["comm_share"] for r in rs], axis=0)
        train.add_row(str(c[0]), str(rs[0]["threads"]), f"{rate[c]:.1f}",
                      f"{rate[c] / one:.2f}x" if one else "-",
                      f"{rate[c] / every:.2f}x" if every else "-",
                      ", ".join(f"{100 * s:.0f}%" for s in shares))  # fmt: skip
    report.show(train)
    report.note(
        f'{os.cpu_count()} cores here. "vs 1 process, 1 thread" is the scaling of '
        'data parallelism (the goal: 1.6x at 2 ranks); "vs 1 process, all cores" '
        "compares it with the threads of task 2.1-2.3's kernels on the same cores."
    )
    if args.markdown:
        report.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
