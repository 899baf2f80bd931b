"""Task 6.1: the ring all-reduce, on 1 to 4 real MPI ranks (``mpiexec``, oversubscribed
on two cores), against the float64 sum of the inputs and MPI's own ``Allreduce``; and
its pieces that need no MPI."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from module6.distributed import bus_bandwidth, chunk_bounds, ring_all_reduce
from tests.module6 import threads
from tests.module6.mpi import failure, run_ranks
from tests.module6.ranks import PointToPoint

LENGTHS = (0, 1, 2, 3, 5, 7, 1000, 65_537)
"""Around every rank count: empty, fewer entries than ranks, chunks of unequal length."""


def _cases() -> list[list[object]]:
    return [[n, dtype, 10 * i + j] for i, n in enumerate(LENGTHS)
            for j, dtype in enumerate(("float64", "float32"))]  # fmt: skip


@pytest.mark.task6_1
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_ring_all_reduce_sums_over_every_rank(ranks: int, tmp_path: Path) -> None:
    cases = _cases()
    proc, saved = run_ranks(ranks, "ring", {"cases": cases}, tmp_path)
    assert proc.returncode == 0, failure(proc)
    for i, (n, dtype, _) in enumerate(cases):
        inputs, ring, mpi = saved[f"inputs{i}"], saved[f"ring{i}"], saved[f"mpi{i}"]
        assert ring.shape == (ranks, n) and ring.dtype == np.dtype(dtype), (n, dtype)
        # the same bits on every rank: the all-gather copies, it does not add again
        assert (ring == ring[0]).all(), f"ranks disagree at length {n}, {dtype}"
        exact = inputs.astype(np.float64).sum(0)
        eps = np.finfo(dtype).eps
        bound = 2 * ranks * eps * np.abs(inputs).astype(np.float64).sum(0) + 1e-300
        assert (np.abs(ring[0] - exact) <= bound).all(), (n, dtype)
        assert np.allclose(ring[0], mpi, rtol=10 * eps, atol=10 * ranks * eps), (n, dtype)


@pytest.mark.task6_1
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ring_sums_on_thread_ranks_without_mpi(ranks: int, dtype: type) -> None:
    """The same contract in this process: ranks as threads (tests/module6/threads.py)."""
    for n in (0, 1, 3, 5, 101):
        inputs = [np.random.default_rng([n, r]).normal(size=n).astype(dtype) for r in range(ranks)]
        out = threads.run_ranks(
            ranks, lambda c, xs=inputs: ring_all_reduce(c, xs[c.Get_rank()].copy())
        )
        exact = np.sum(np.stack(inputs).astype(np.float64), 0) if n else np.zeros(0)
        eps = np.finfo(dtype).eps
        bound = 2 * ranks * eps * np.abs(np.stack(inputs)).astype(np.float64).sum(0)
        for result in out:
            assert result.dtype == dtype and np.array_equal(result, out[0]), (ranks, n)
        assert (np.abs(out[0] - exact) <= bound + 1e-300).all(), (ranks, n)


@pytest.mark.task6_1
@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_the_ring_sends_point_to_point_messages_round_the_ring(ranks: int) -> None:
    """The graded check's contract on thread ranks: over a communicator with point-to-point
    messages only (``tests/module6/ranks.py``'s ``PointToPoint``, which counts them),
    every rank sends ``2 (K - 1)`` messages to its right neighbour and receives as many
    from its left one (an empty buffer may send none), no more than ``2 (K - 1)`` of the
    longest chunk in all, and the bytes sent are the bytes received."""
    for n in (0, 1, 2, 5, 7, 1001):
        inputs = [np.random.default_rng([n, r]).normal(size=n) for r in range(ranks)]

        def ring(comm: threads.ThreadComm, xs: list[np.ndarray] = inputs) -> np.ndarray:
            counted = PointToPoint(comm)
            ring_all_reduce(counted, xs[comm.Get_rank()].copy())
            return counted.counts()

        counts = np.stack(threads.run_ranks(ranks, ring))
        sends, receives, sent, received, to_right, from_left = counts.T
        steps, longest = 2 * (ranks - 1), -(-n // ranks) * 8
        each_way = (sends == receives).all() and (sends == steps).all()
        where = f"{ranks} ranks, a buffer of {n}"
        assert each_way or (n == 0 and not sends.any()), (
            f"{where}: ranks sent {sends.tolist()} and received {receives.tolist()} "
            f"messages; a ring sends 2 (K - 1) = {steps} each way (K - 1 steps to "
            "reduce-scatter, K - 1 to all-gather)"
        )
        assert to_right.all() and from_left.all(), (
            f"{where}: each rank sends to its right neighbour only, receives from its left"
        )
        assert (sent <= steps * longest).all() and sent.sum() == received.sum(), (
            f"{where}: bytes sent {sent.tolist()}, at most {steps} chunks of {longest} each"
        )


def test_ring_on_one_rank_leaves_the_buffer_as_it_is() -> None:
    x = np.arange(5.0)
    assert ring_all_reduce(threads.ThreadWorld(1).comm(0), x) is x
    np.testing.assert_array_equal(x, np.arange(5.0))


def test_ring_refuses_what_it_cannot_sum_in_place() -> None:
    comm = threads.ThreadWorld(2).comm(0)  # refused before any message
    with pytest.raises(TypeError, match="1-D contiguous"):
        ring_all_reduce(comm, np.zeros((2, 3)))
    with pytest.raises(TypeError, match="1-D contiguous"):
        ring_all_reduce(comm, np.zeros(6)[::2])
    x = np.zeros(4)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ring_all_reduce(comm, x)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 17])
@pytest.mark.parametrize("parts", [1, 2, 3, 4])
def test_chunks_cover_the_buffer_in_order_the_first_ones_longer(n: int, parts: int) -> None:
    bounds = chunk_bounds(n, parts)
    assert len(bounds) == parts and bounds[0][0] == 0 and bounds[-1][1] == n
    lengths = [stop - start for start, stop in bounds]
    assert all(b[1] == c[0] for b, c in itertools.pairwise(bounds))
    assert max(lengths) - min(lengths) <= 1 and lengths == sorted(lengths, reverse=True)


def test_bus_bandwidth_is_what_each_link_carries() -> None:
    # 4 ranks, 1 MB in 1 ms: each link carries 2 * 3/4 MB in that time
    assert bus_bandwidth(10**6, 1e-3, 4) == pytest.approx(1.5e9)
    assert bus_bandwidth(10**6, 1e-3, 1) == 0.0
