"""``--ddp`` for the training scripts (stage 6): where this process stands among the
ranks ``mpiexec`` started, its share of each batch, and the closing report of every
rank's throughput and communication time. Without ``--ddp`` it is one rank of one, and
nothing here imports MPI."""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.console import Console


def add_ddp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ddp",
        action="store_true",
        help="data-parallel over the ranks of mpiexec (stage 6's dist extra)",
    )
    p.add_argument("--all-reduce", choices=("ring", "mpi"), default="ring",
                   help="with --ddp: task 6.1's ring (default) or MPI's Allreduce")  # fmt: skip


@dataclass
class Ranks:
    """This process among the ranks (one rank, rank 0, without ``--ddp``)."""

    comm: Any = None
    rank: int = 0
    size: int = 1
    algorithm: str = "ring"

    @property
    def lead(self) -> bool:
        """Whether this rank prints, logs and writes (rank 0)."""
        return self.rank == 0

    def share(self, rows: np.ndarray) -> np.ndarray:
        """This rank's rows of a batch that every rank drew alike: rows ``rank, rank +
        size, ...`` (``module6.ddp.shard``; the last batch of an epoch may split
        unevenly)."""
        return rows if self.comm is None else rows[self.rank :: self.size]

    def total(self, value: float) -> float:
        """The sum of ``value`` over the ranks."""
        return value if self.comm is None else float(self.comm.allreduce(value))

    def mean(self, value: float) -> float:
        """The mean of ``value`` over the ranks."""
        return self.total(value) / self.size

    def sync(self, trained: Any) -> None:
        """After a backward: the mean of the ranks' gradients (nothing on one rank)."""
        if self.comm is not None:
            trained.sync_gradients()

    def wrap(self, model: Any) -> Any:
        """``model`` in stage 6's DistributedDataParallel (rank 0's values broadcast),
        or ``model`` itself on one rank."""
        if self.comm is None:
            return model
        from module6.ddp import DistributedDataParallel

        return DistributedDataParallel(model, self.comm, algorithm=self.algorithm)


def ranks_from(args: argparse.Namespace, batch: int | None = None) -> Ranks:
    """The ranks of ``--ddp`` (MPI's world, each rank given its share of the cores), or
    one rank. ``batch``: a global batch that must split evenly over the ranks."""
    if not getattr(args, "ddp", False):
        return Ranks()
    from module6.distributed import share_cores, world

    comm = world()
    ranks = Ranks(comm, comm.Get_rank(), comm.Get_size(), args.all_reduce)
    if batch is not None and batch % ranks.size:
        raise SystemExit(f"--ddp: --batch {batch} does not split over {ranks.size} ranks")
    share_cores(comm)
    pids = comm.gather((os.getpid(), socket.gethostname()), root=0)
    if ranks.lead:  # mpiexec names a rank that dies without a Python error by its PID
        where = ", ".join(f"rank {r} = PID {pid} on {host}" for r, (pid, host) in enumerate(pids))
        print(f"{ranks.size} ranks: {where}", flush=True)
    return ranks


def report_ranks(
    console: Console, ranks: Ranks, trained: Any, samples: int, seconds: float
) -> None:
    """Each rank's training samples per second and time in the all-reduce (printed by
    rank 0), or one process's samples per second."""
    if ranks.comm is None:
        if seconds:
            console.print(f"training: {samples / seconds:.1f} samples/s")
        return
    talk = float(getattr(trained, "comm_seconds", 0.0))
    rows = ranks.comm.gather((samples / seconds if seconds else 0.0, talk, seconds), root=0)
    if not ranks.lead:
        return
    for rank, (rate, spent_talking, spent) in enumerate(rows):
        console.print(
            f"rank {rank}: {rate:.1f} samples/s, {spent_talking:.1f} s of {spent:.1f} s "
            f"training in all-reduce ({100 * spent_talking / spent if spent else 0:.1f}%)"
        )
    console.print(f"all {ranks.size} ranks: {sum(r[0] for r in rows):.1f} samples/s")
