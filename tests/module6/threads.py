"""A communicator of threads in one process: ranks as threads, messages as queues.

It offers the part of mpi4py's communicator that stage 6's code uses (``Get_rank``,
``Get_size``, ``Sendrecv``, ``Send``, ``Recv``, ``Bcast``, ``allgather``), so the tasks'
functions run, and are tested, in the test's own process (where the tooling sees
which functions a test reaches) and without MPI installed. :func:`run_ranks` runs rank
0 on the calling thread. Messages between two ranks arrive in the order they were sent;
a send never waits, so a ring cannot deadlock here where it could under MPI."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

WAIT_SECONDS = 30.0


class ThreadWorld:
    """The shared mailboxes of ``size`` thread ranks."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.boxes = {(s, d): queue.Queue[Any]() for s in range(size) for d in range(size)}

    def comm(self, rank: int) -> ThreadComm:
        return ThreadComm(self, rank)


class ThreadComm:
    """Rank ``rank``'s view of a :class:`ThreadWorld`."""

    def __init__(self, world: ThreadWorld, rank: int) -> None:
        self.world, self.rank = world, rank

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.world.size

    def _put(self, dest: int, value: Any) -> None:
        self.world.boxes[(self.rank, dest)].put(value)

    def _get(self, source: int) -> Any:
        try:
            return self.world.boxes[(source, self.rank)].get(timeout=WAIT_SECONDS)
        except queue.Empty:
            raise TimeoutError(
                f"rank {self.rank} waited {WAIT_SECONDS} s for a message from rank {source}"
            ) from None

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        self._put(dest, np.array(buf, copy=True))

    def Recv(self, buf: Any, source: int, tag: int = 0, status: Any = None) -> None:
        data = self._get(source)
        if np.shape(data) != np.shape(buf):
            raise ValueError(f"rank {self.rank}: received {np.shape(data)} into {np.shape(buf)}")
        buf[...] = data

    def Sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any = None, source: int = 0,
                 **_: Any) -> None:  # fmt: skip
        self.Send(sendbuf, dest)
        self.Recv(recvbuf, source)

    def Bcast(self, buf: Any, root: int = 0) -> None:
        if self.rank == root:
            for dest in range(self.world.size):
                if dest != root:
                    self.Send(buf, dest)
        else:
            self.Recv(buf, root)

    def allgather(self, value: Any) -> list[Any]:
        for dest in range(self.world.size):
            if dest != self.rank:
                self._put(dest, value)
        return [value if s == self.rank else self._get(s) for s in range(self.world.size)]


def thread_sum(comm: ThreadComm, buffer: np.ndarray) -> np.ndarray:
    """An all-reduce for thread ranks (every rank adds every buffer, in rank order): what
    the tests of task 6.2 average with, so they need no task 6.1."""
    parts = comm.allgather(buffer.copy())
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    buffer[...] = total
    return buffer


def run_ranks(size: int, fn: Callable[[ThreadComm], Any]) -> list[Any]:
    """``fn(comm)`` on ``size`` thread ranks (rank 0 on this thread); each rank's result.
    An exception on any rank is raised here."""
    world = ThreadWorld(size)
    results: list[Any] = [None] * size
    errors: list[BaseException] = []

    def body(rank: int) -> None:
        try:
            results[rank] = fn(world.comm(rank))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(1, size)]
    for thread in threads:
        thread.start()
    body(0)
    for thread in threads:
        thread.join(WAIT_SECONDS * 2)
    if errors:
        raise errors[0]
    return results
