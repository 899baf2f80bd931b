"""Task 6.1: several processes, one sum — MPI and the ring all-reduce.

Data-parallel training runs one copy of the model per process (a *rank*), each on its
own share of every batch, and after each backward replaces every rank's gradients by
their average over the ranks: an *all-reduce*. This module reaches MPI through
``mpi4py`` (the ``dist`` extra: ``pip install -e ".[dist]"``, which brings MPICH too),
and holds the task: :func:`ring_all_reduce`, the all-reduce that NCCL and Horovod made
the standard, written with nothing but point-to-point messages.

A communicator here is anything with mpi4py's ``Get_rank()``, ``Get_size()`` and
``Sendrecv(sendbuf, dest, recvbuf=..., source=...)``: ``MPI.COMM_WORLD`` (see
:func:`world`) when a program is started by ``mpiexec -n K python ...``.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

INSTALL = 'pip install -e ".[dist]"'
"""What installs MPI for stage 6: ``mpi4py`` and MPICH, both from the package registry."""


class DistributedError(RuntimeError):
    """The ranks disagree (model shapes, buffer sizes), or a rank is gone: the message
    names the ranks."""


def mpi() -> Any:
    """mpi4py's ``MPI`` module; ModuleNotFoundError naming the install command where it is
    absent (the rest of the framework never needs it)."""
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise ModuleNotFoundError(
            f"stage 6's distributed training needs MPI (mpi4py and an MPI library): {INSTALL}"
        ) from error
    return MPI


def mpiexec() -> str | None:
    """The ``mpiexec`` beside this Python (the one the MPICH wheel puts in the
    environment's ``bin/``, matching its mpi4py), else one on the PATH, else None."""
    here = shutil.which("mpiexec", path=str(Path(sys.executable).parent))
    return here or shutil.which("mpiexec")


def world() -> Any:
    """``MPI.COMM_WORLD``: every rank ``mpiexec`` started. From then on an exception that
    reaches the top of this rank ends every rank (:func:`abort_on_error`)."""
    comm = mpi().COMM_WORLD
    abort_on_error(comm)
    return comm


ABORT_DELAY = 0.5
"""Seconds between a failed rank's message and its ``Abort``: aborting at once, the
message was lost about one time in ten (``mpiexec`` ended the ranks first)."""


def abort_on_error(comm: Any) -> None:
    """Make an uncaught exception on this rank print ``rank R of K failed`` and its
    traceback, then end every rank of ``comm`` (``Abort``): the others would otherwise
    wait for its messages for ever. A rank that dies without an exception (killed, or
    ``os._exit``) is seen by ``mpiexec``, which ends the others by itself."""
    if getattr(sys.excepthook, "comm", None) is comm:
        return
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, trace: Any) -> None:
        rank, size = comm.Get_rank(), comm.Get_size()
        print(f"rank {rank} of {size} failed:", file=sys.stderr, flush=True)
        previous(kind, error, trace)
        sys.stderr.flush()
        if size > 1:
            time.sleep(ABORT_DELAY)  # for mpiexec to pass the message on before it kills
            comm.Abort(1)

    hook.comm = comm  # type: ignore[attr-defined]
    sys.excepthook = hook


def share_cores(comm: Any) -> int:
    """Give this rank its share of the machine: Numba's threads divided among the ranks
    of ``comm`` on this host (at least one each), so that two ranks on two cores do not
    run four threads. A collective: every rank calls it. Returns this rank's count."""
    import numba

    from module2 import threads as thread_count

    local = comm.Split_type(mpi().COMM_TYPE_SHARED).Get_size()
    threads = max(1, numba.config.NUMBA_NUM_THREADS // local)  # type: ignore[attr-defined]
    thread_count.set_cap(threads)  # the most module2/threads.py may choose under load
    return threads


def chunk_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` consecutive ``(start, stop)`` ranges covering ``range(n)``, as equal as
    they can be: the first ``n % parts`` are one longer (some are empty when ``n <
    parts``). The ring's chunks: chunk ``c`` is ``buffer[start:stop]`` of
    ``chunk_bounds(len(buffer), size)[c]``."""
    if parts < 1 or n < 0:
        raise ValueError(f"chunk_bounds: {n} entries in {parts} parts")
    base, extra = divmod(n, parts)
    bounds, start = [], 0
    for c in range(parts):
        stop = start + base + (1 if c < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _check_buffer(buffer: Any) -> None:
    if not isinstance(buffer, np.ndarray) or buffer.ndim != 1 or not buffer.flags.c_contiguous:
        raise TypeError(
            f"ring_all_reduce: want a 1-D contiguous NumPy array, got "
            f"{type(buffer).__name__} {getattr(buffer, 'shape', '')}"
        )
    if not buffer.flags.writeable:
        raise ValueError("ring_all_reduce: the buffer is read-only (the sum is written in it)")


def ring_all_reduce(comm: Any, buffer: np.ndarray) -> np.ndarray:
    """Sum ``buffer`` over the ranks of ``comm``, in place, and return it: afterwards every
    rank's ``buffer`` holds the entry-by-entry sum of all the ranks' buffers (the same
    values, bit for bit, on every rank).

    ``buffer``: a 1-D contiguous float32 or float64 array, the same length and dtype on
    every rank. Any length (0 too, and fewer entries than ranks) and any number of ranks
    (1: nothing to do).

    The ring, with ``K`` ranks and the buffer cut into ``K`` chunks
    (:func:`chunk_bounds`); rank ``r`` sends to ``(r + 1) % K`` and receives from ``(r -
    1) % K``, one ``comm.Sendrecv`` per step:

    * reduce-scatter, ``K - 1`` steps: at step ``s`` rank ``r`` sends chunk ``(r - s) %
      K`` and adds the chunk it receives, ``(r - s - 1) % K``, into its own. Afterwards
      rank ``r`` holds the whole sum of chunk ``(r + 1) % K``;
    * all-gather, ``K - 1`` steps: at step ``s`` rank ``r`` sends chunk ``(r + 1 - s) %
      K`` and stores the chunk it receives, ``(r - s) % K``.

    Each rank sends ``2 (K - 1) / K`` buffers in all, whatever ``K``: the bandwidth-
    optimal all-reduce."""
    _check_buffer(buffer)
    # BEGIN SOLUTION 6.1
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1 or buffer.size == 0:
        return buffer
    bounds = chunk_bounds(buffer.size, size)
    right, left = (rank + 1) % size, (rank - 1) % size
    incoming = np.empty(bounds[0][1] - bounds[0][0], buffer.dtype)  # the longest chunk
    for step in range(size - 1):  # reduce-scatter
        send_start, send_stop = bounds[(rank - step) % size]
        recv_start, recv_stop = bounds[(rank - step - 1) % size]
        part = incoming[: recv_stop - recv_start]
        comm.Sendrecv(buffer[send_start:send_stop], dest=right, recvbuf=part, source=left)
        buffer[recv_start:recv_stop] += part
    for step in range(size - 1):  # all-gather
        send_start, send_stop = bounds[(rank + 1 - step) % size]
        recv_start, recv_stop = bounds[(rank - step) % size]
        comm.Sendrecv(
            buffer[send_start:send_stop], dest=right,
            recvbuf=buffer[recv_start:recv_stop], source=left,
        )  # fmt: skip
    return buffer
    # END SOLUTION


def mpi_all_reduce(comm: Any, buffer: np.ndarray) -> np.ndarray:
    """The same sum by MPI's own ``Allreduce`` (in place): the yardstick for
    :func:`ring_all_reduce`, and the other ``algorithm`` of DistributedDataParallel."""
    _check_buffer(buffer)
    if comm.Get_size() > 1 and buffer.size:
        comm.Allreduce(mpi().IN_PLACE, buffer)
    return buffer


ALL_REDUCE = {"ring": ring_all_reduce, "mpi": mpi_all_reduce}
"""The all-reduce algorithms by name."""


def bus_bandwidth(nbytes: int, seconds: float, ranks: int) -> float:
    """An all-reduce's *bus bandwidth* in bytes per second (NCCL's measure): the buffer's
    bytes over the time, times ``2 (K - 1) / K``, the share of it each rank's link
    carries in a ring. It does not depend on ``K`` for an optimal algorithm, so runs
    with different numbers of ranks compare."""
    if ranks < 2 or seconds <= 0:
        return 0.0
    return nbytes / seconds * 2 * (ranks - 1) / ranks


class Timer:
    """Seconds spent inside ``with timer:`` blocks, summed (the time a training step
    spends communicating)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Timer:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.perf_counter() - self._start
