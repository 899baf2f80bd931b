"""Graded checks of stage 6 (see ``autograder/checks.py``): each starts its ranks with
``mpiexec`` (inside the grader's sandbox: MPI over the sandbox's own shared memory, no
network), which run ``tests/module6/ranks.py`` on inputs drawn from ``rng``, and
returns what rank 0 gathered; the grader compares that with the reference's answer for
the same inputs, outside the student's processes.

Task 6.1's ring runs over a communicator that offers point-to-point messages only
(``ranks.PointToPoint``: a collective is an error) and counts the bytes each rank
sends. Task 6.2's checks average with MPI's own ``Allreduce``, so they grade 6.2's code
alone; its sampler needs no MPI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from autograder.checks import check, raised

RANK_SECONDS = 120.0


def _ranks(n: int, case: str, args: dict[str, Any]) -> dict[str, Any]:
    """What rank 0 of ``n`` ranks running ``case`` saved; RuntimeError with their output
    when they fail."""
    from module6.distributed import mpiexec

    launcher = mpiexec()
    if launcher is None:
        raise RuntimeError("no mpiexec: stage 6 is graded where the dist extra is installed")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.npz")
        python = [sys.executable, *(["-S"] if sys.flags.no_site else [])]  # as this process
        command = [launcher, "-n", str(n), *python, "-m", "tests.module6.ranks",
                   case, out, json.dumps(args)]  # fmt: skip
        env = {**os.environ, "NUMBA_NUM_THREADS": "1"}
        if sys.flags.no_site and "MPI4PY_LIBMPI" not in env:
            # Without site (the grader's -S), mpi4py does not look in the environment's
            # lib/ for the MPI library the mpich wheel put there: name it.
            found = sorted(Path(sys.executable).parent.parent.glob("lib/libmpi.so.*"))
            if found:
                env["MPI4PY_LIBMPI"] = str(found[0])
        proc = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=RANK_SECONDS, check=False)  # fmt: skip
        if proc.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"{n} ranks of {case}: exit {proc.returncode}: "
                               f"{(proc.stdout + proc.stderr)[-800:]}")  # fmt: skip
        with np.load(out) as saved:
            return {key: saved[key] for key in saved.files}


# =========================================================================================
# Task 6.1: the ring all-reduce
# =========================================================================================

RING_LENGTHS = (0, 1, 2, 5, 7, 1001, 4099)


def _ring(rng: np.random.Generator, k: int) -> Any:
    cases = [[n, "float64" if i % 2 else "float32"] for i, n in enumerate(RING_LENGTHS)]
    saved = _ranks(k, "ring_check", {"seed": int(rng.integers(2**31)), "cases": cases})
    answers: dict[str, Any] = {}
    for i, (n, dtype) in enumerate(cases):
        error = [str(e) for e in saved[f"error{i}"] if str(e)]
        if error:
            answers[f"length {n}"] = {"error": error[0]}
            continue
        sent = saved[f"sent{i}"]
        longest = -(-n // k) * np.dtype(dtype).itemsize
        answers[f"length {n}"] = {
            "sum": saved[f"sum{i}"],
            "dtype": str(saved[f"sum{i}"].dtype),
            "same on every rank": bool(saved[f"same{i}"]),
            "bytes sent in all": int(sent.sum()),
            "each rank within 2 (K - 1) chunks": bool((sent <= 2 * (k - 1) * longest).all()),
        }
    return answers


@check("6.1", rtol=1e-6, atol=0.0)
def ring_on_2_ranks(rng: np.random.Generator) -> Any:
    """Sums on 2 ranks, float64 and float32, lengths 0 to 4099; the same bits on every
    rank; point-to-point messages only, ``2 (K - 1)`` buffers' worth of bytes in all and,
    on each rank, no more than ``2 (K - 1)`` of the longest chunk."""
    return _ring(rng, 2)


@check("6.1", rtol=1e-6, atol=0.0)
def ring_on_3_ranks(rng: np.random.Generator) -> Any:
    """The same on 3 ranks: chunks of unequal length, and empty ones."""
    return _ring(rng, 3)


@check("6.1", rtol=1e-6, atol=0.0)
def ring_on_4_ranks(rng: np.random.Generator) -> Any:
    """The same on 4 ranks (two per core here: they take turns)."""
    return _ring(rng, 4)


# =========================================================================================
# Task 6.2: data-parallel training
# =========================================================================================


def _ddp(rng: np.random.Generator, k: int, dtype: str) -> Any:
    args = {"seed": int(rng.integers(2**31)), "dtype": dtype,
            "bucket_bytes": int(rng.choice([8, 64, 256]))}  # fmt: skip
    saved = _ranks(k, "ddp_check", args)
    saved["same"] = saved["same"].tolist()
    saved["kinds"] = saved["kinds"].tolist()
    return saved


@check("6.2", rtol=1e-12, atol=1e-15)
def ddp_on_2_ranks(rng: np.random.Generator) -> Any:
    """On 2 ranks whose float64 parameters start from other values, small buckets: rank
    0's values everywhere after the broadcast; gradients (one missing on a rank)
    averaged into every rank's, twice, each in its parameter's dtype and backend."""
    return _ddp(rng, 2, "float64")


@check("6.2", rtol=1e-5, atol=1e-7)
def ddp_on_3_ranks(rng: np.random.Generator) -> Any:
    """The same on 3 ranks, in float32."""
    return _ddp(rng, 3, "float32")


@check("6.2")
def distributed_sampler(rng: np.random.Generator) -> Any:
    """Each rank's indices for epochs 0 and 1, shuffled or not, ``n`` below, at and
    above multiples of the rank count; a bad rank is a ValueError."""
    from module6.ddp import DistributedSampler

    answers = []
    for _ in range(8):
        n, size = int(rng.integers(1, 30)), int(rng.integers(1, 5))
        seed, shuffle = int(rng.integers(1000)), bool(rng.integers(2))
        case = []
        for rank in range(size):
            sampler = DistributedSampler(n, rank, size, seed=seed, shuffle=shuffle)
            first = sampler.indices()
            sampler.set_epoch(1)
            case.append([np.asarray(first, np.int64), np.asarray(sampler.indices(), np.int64)])
        answers.append({"n": n, "size": size, "indices": case})
    answers.append(raised(lambda: DistributedSampler(5, 3, 3)))
    return answers
