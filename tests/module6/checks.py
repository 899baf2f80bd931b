"""Graded checks of stage 6 (see ``autograder/checks.py``): each starts its ranks with
``mpiexec`` (inside the grader's sandbox: MPI over the sandbox's own shared memory, no
network), which run ``tests/module6/ranks.py`` on inputs drawn from ``rng``, and
returns what rank 0 gathered; the grader compares that with the reference's answer for
the same inputs, outside the student's processes.

Task 6.1's ring runs over a communicator that offers point-to-point messages only
(``ranks.PointToPoint``: a collective is an error) and counts the messages each rank
sends and receives, their bytes and their peers (:func:`ring_answer`): a ring of ``K``
ranks sends ``2 (K - 1)`` messages each way on every rank, to the right neighbour and
from the left, so a collective behind a counter bumped by hand answers otherwise (and
the grader's reading refuses it first: ``autograder/own_work.py``). Task 6.2's checks
average with MPI's own ``Allreduce``, so they grade 6.2's code alone; its sampler needs
no MPI.
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


def ring_answer(n: int, dtype: str, k: int, result: np.ndarray, same: bool,
                counts: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """What the check compares for one case: the sum, and how the ranks talked
    (``counts``: one :meth:`ranks.PointToPoint.counts` row per rank)."""
    sends, receives, sent, received, to_right, from_left = counts.T
    longest = -(-n // k) * np.dtype(dtype).itemsize
    steps = 2 * (k - 1)
    return {
        "sum": result,
        "dtype": str(result.dtype),
        "same on every rank": bool(same),
        "bytes sent in all": int(sent.sum()),
        "bytes received in all": int(received.sum()),
        "each rank within 2 (K - 1) chunks": bool((sent <= steps * longest).all()),
        # an empty buffer may be sent as empty messages or not at all
        "2 (K - 1) messages each way on every rank": bool(
            (sends == receives).all()
            and ((sends == steps).all() or (n == 0 and (sends == 0).all()))
        ),
        "to the right neighbour, from the left one": bool(to_right.all() and from_left.all()),
    }


def _ring(rng: np.random.Generator, k: int) -> Any:
    cases = [[n, "float64" if i % 2 else "float32"] for i, n in enumerate(RING_LENGTHS)]
    saved = _ranks(k, "ring_check", {"seed": int(rng.integers(2**31)), "cases": cases})
    answers: dict[str, Any] = {}
    for i, (n, dtype) in enumerate(cases):
        error = [str(e) for e in saved[f"error{i}"] if str(e)]
        if error:
            answers[f"length {n}"] = {"error": error[0]}
            continue
        answers[f"length {n}"] = ring_answer(
            n, dtype, k, saved[f"sum{i}"], bool(saved[f"same{i}"]), saved[f"counts{i}"]
        )
    return answers


@check("6.1", rtol=1e-6, atol=0.0)
def ring_on_2_ranks(rng: np.random.Generator) -> Any:
    """Sums on 2 ranks, float64 and float32, lengths 0 to 4099; the same bits on every
    rank; point-to-point messages only: on every rank ``2 (K - 1)`` messages each way (to
    the right neighbour, from the left one), no more than ``2 (K - 1)`` of the longest
    chunk; ``2 (K - 1)`` buffers' worth of bytes in all, each way."""
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


BUCKET_BYTES = 1 << 20
"""The default bucket size (``module6.ddp.BUCKET_BYTES``): every parameter in one bucket,
where a gradient missing in the middle shows whether the offsets still advance."""


def _ddp(rng: np.random.Generator, k: int, dtype: str, bucket_bytes: int) -> Any:
    args = {"seed": int(rng.integers(2**31)), "dtype": dtype, "bucket_bytes": bucket_bytes}
    saved = _ranks(k, "ddp_check", args)
    saved["same"] = saved["same"].tolist()
    saved["kinds"] = saved["kinds"].tolist()
    return saved


@check("6.2", rtol=1e-12, atol=1e-15)
def ddp_on_2_ranks(rng: np.random.Generator) -> Any:
    """On 2 ranks whose float64 parameters start from other values, buckets of the
    default size: rank
    0's values everywhere after the broadcast; gradients (one missing on a rank)
    averaged into every rank's, twice, each in its parameter's dtype and backend."""
    return _ddp(rng, 2, "float64", BUCKET_BYTES)


@check("6.2", rtol=1e-5, atol=1e-7)
def ddp_on_3_ranks(rng: np.random.Generator) -> Any:
    """The same on 3 ranks, in float32, with small buckets (a parameter or two each)."""
    return _ddp(rng, 3, "float32", int(rng.choice([8, 64, 256])))


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


# =========================================================================================
# Task 6.3: the bfloat16 codec
# =========================================================================================

_EDGE_BITS = (
    0x00000000, 0x80000000, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x7F7FFFFF,
    0x7F7F7FFF, 0x7F7F8000, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x00000001, 0x00008000,
    0x00018000, 0x807FFFFF, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF812345,
)  # fmt: skip


def _encoded(bits: np.ndarray) -> dict[str, Any]:
    """The codes of ``bits`` (float32 patterns): exact where the input is a number; for
    a NaN only that it stays a NaN, and its sign (any payload is right)."""
    from module6.half import bfloat16_encode

    out = np.full(len(bits), 0xDEAD, np.uint16)
    bfloat16_encode(np.ascontiguousarray(bits, np.uint32), out)
    nan = np.isnan(bits.view(np.float32))
    code = out.astype(np.int64)
    is_nan = (code & 0x7FFF) > 0x7F80
    return {
        "codes": np.where(nan, -1, code),
        "NaN stays NaN": is_nan[nan].tolist(),
        "NaN's sign": (code[nan] >> 15).tolist(),
    }


@check("6.3", rtol=0.0, atol=0.0)
def bfloat16_encode_edges(rng: np.random.Generator) -> Any:
    """Ties (to even), the largest values (some round to infinity), infinities,
    subnormals, signed zeros and NaNs, in a shuffled order."""
    bits = np.array(_EDGE_BITS, np.uint32)[rng.permutation(len(_EDGE_BITS))]
    return _encoded(bits)


@check("6.3", rtol=0.0, atol=0.0)
def bfloat16_encode_random(rng: np.random.Generator) -> Any:
    """100,000 random float32 patterns, and 1,000 values exactly halfway between two
    bfloat16s."""
    bits = rng.integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32)
    ties = (rng.integers(0, 2**16, 1_000, dtype=np.uint64) << 16 | 0x8000).astype(np.uint32)
    return _encoded(np.concatenate([bits, ties]))


@check("6.3", rtol=0.0, atol=0.0)
def bfloat16_decode_all(rng: np.random.Generator) -> Any:
    """All 65,536 codes in a shuffled order, widened to float32 patterns (exact)."""
    from module6.half import bfloat16_decode

    codes = rng.permutation(2**16).astype(np.uint16)
    out = np.full(len(codes), 0xDEADBEEF, np.uint32)
    bfloat16_decode(codes, out)
    return {"patterns": out.astype(np.int64)}


# =========================================================================================
# Task 6.4: dynamic loss scaling
# =========================================================================================


def _scaler_run(rng: np.random.Generator, steps: int, interval: int) -> dict[str, Any]:
    """A GradScaler over ``steps`` steps of SGD on SimpleBackend parameters whose scaled
    gradients are drawn (an inf or a NaN now and then): each step's scale, whether it
    stepped, and the parameters at the end."""
    from module0.module import Parameter
    from module0.optim import SGD
    from module1.creation import from_numpy
    from module6.scaler import GradScaler

    scaler = GradScaler(init_scale=float(2 ** rng.integers(4, 12)), growth_interval=interval,
                        backoff_factor=0.5, growth_factor=2.0)  # fmt: skip
    params = [Parameter(from_numpy(rng.standard_normal(n).astype(np.float32))) for n in (3, 5)]
    optimizer = SGD(params, lr=0.1)
    scales, took, found = [], [], []
    for _ in range(steps):
        for p in params:
            g = rng.standard_normal(p.value.size).astype(np.float32)
            if rng.random() < 0.15:
                g[rng.integers(g.size)] = rng.choice([np.inf, -np.inf, np.nan])
            p.value.grad = from_numpy(g * np.float32(scaler.get_scale()))
        if rng.random() < 0.5:
            scaler.unscale_(optimizer)  # as before clipping
            found.append(bool(scaler.found_inf))
        took.append(bool(scaler.step(optimizer)))
        scaler.update()
        scales.append(scaler.get_scale())
    return {"scales": scales, "stepped": took, "found": found, "skipped": scaler.skipped,
            "parameters": [p.value.to_numpy() for p in params]}  # fmt: skip


@check("6.4", rtol=1e-5, atol=1e-6)
def scaler_backs_off_and_grows(rng: np.random.Generator) -> Any:
    """30 steps, growth every 3 clean steps: the scale after each, the steps taken or
    skipped, and the parameters (every step taken on the true gradients)."""
    return _scaler_run(rng, 30, 3)


@check("6.4")
def scaler_unscale_and_misuse(rng: np.random.Generator) -> Any:
    """``unscale_`` on gradients with one missing: their values and what it found; then
    a second ``unscale_`` and a second ``step`` before ``update``, each an error."""
    from module0.module import Parameter
    from module0.optim import SGD
    from module1.creation import from_numpy
    from module6.scaler import GradScaler

    scale = float(2 ** rng.integers(1, 16))
    scaler = GradScaler(init_scale=scale)
    params = [Parameter(from_numpy(np.zeros(4, np.float32))) for _ in range(3)]
    grads = [rng.standard_normal(4).astype(np.float32) * np.float32(scale) for _ in range(2)]
    params[0].value.grad, params[2].value.grad = (from_numpy(g) for g in grads)
    optimizer = SGD(params, lr=1.0)
    scaler.unscale_(optimizer)
    answer: dict[str, Any] = {
        "unscaled": [p.value.grad.to_numpy() for p in (params[0], params[2])],
        "dtype": str(params[0].value.grad.dtype),
        "missing stays missing": params[1].value.grad is None,
        "found": bool(scaler.found_inf),
        "unscale twice": raised(lambda: scaler.unscale_(optimizer)),
    }
    scaler.step(optimizer)
    answer["step twice"] = raised(lambda: scaler.step(optimizer))
    return answer


@check("6.4", rtol=0.05, atol=1e-3)
def scaler_rescues_float16(rng: np.random.Generator) -> Any:
    """float16 autocast training of a tiny two-layer network whose loss is weighted by
    1e-7 (its gradients lie below float16's range): the parameters' change after 4 SGD
    steps with a GradScaler, relative to the largest (float32's, within float16's
    digits)."""
    from module0.module import Parameter
    from module0.optim import SGD
    from module1.creation import from_numpy
    from module6.amp import autocast
    from module6.scaler import GradScaler

    w = [rng.standard_normal(s).astype(np.float32) / 3 for s in ((6, 8), (8, 3))]
    x = from_numpy(rng.standard_normal((16, 6)).astype(np.float32))
    y = from_numpy(rng.standard_normal((16, 3)).astype(np.float32))
    params = [Parameter(from_numpy(a.copy())) for a in w]
    optimizer, scaler = SGD(params, lr=0.05 / 1e-7), GradScaler()
    for _ in range(4):
        with autocast("float16"):
            out = (x @ params[0].value).relu() @ params[1].value
            loss = ((out - y) ** 2).mean() * 1e-7
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    moved = [p.value.to_numpy() - a for p, a in zip(params, w, strict=False)]
    top = max(float(np.abs(m).max()) for m in moved) or 1.0
    return {"moved": [m / top for m in moved], "scale": scaler.get_scale()}
