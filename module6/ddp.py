"""Task 6.2: data-parallel training — one model per rank, the same model on all of them.

Every rank holds a whole copy of the model. The copies start equal (rank 0's values are
broadcast), each rank runs forward and backward on its own share of the batch, and
then every gradient is replaced by its average over the ranks, so that each optimizer
takes the same step from the same values and the copies stay equal. With equal shares
and a mean loss, the average of the ranks' gradients *is* the gradient of the whole
batch: ``K`` ranks with batch ``b`` each compute what one process computes with batch
``K b`` (``tests/module6/test_ddp.py`` checks it to 1e-6 over 20 steps).

Gradients travel in *buckets*: the gradients of several parameters packed into one
buffer and summed by one all-reduce, since each all-reduce pays a latency that a
message per parameter would pay dozens of times.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from module0.module import Module, Parameter
from module1.tensor import from_numpy
from module6.distributed import ALL_REDUCE, DistributedError, Timer, world

BUCKET_BYTES = 1 << 20
"""About how many bytes of gradients one all-reduce carries (PyTorch's default is 25 MB,
for models a thousand times larger than the course's)."""


def make_buckets(parameters: list[Parameter], bucket_bytes: int = BUCKET_BYTES) -> list[list[int]]:
    """Parameter indices grouped into buckets of about ``bucket_bytes`` each, in reverse
    order (the last layers' gradients are ready first in a backward, which is the order
    an implementation that overlaps communication with the backward would send them). A
    parameter larger than a bucket gets one of its own, and a bucket holds one dtype (a
    parameter of another dtype starts a new one)."""
    buckets: list[list[int]] = [[]]
    filled, kind = 0, None
    for i in reversed(range(len(parameters))):
        value = parameters[i].value
        nbytes = value._tensor._storage.itemsize * value.size
        if buckets[-1] and (filled + nbytes > bucket_bytes or value.dtype != kind):
            buckets.append([])
            filled = 0
        buckets[-1].append(i)
        filled, kind = filled + nbytes, value.dtype
    return [b for b in buckets if b]


def model_signature(module: Module) -> list[tuple[str, tuple[int, ...], str]]:
    """``(name, shape, dtype)`` of each parameter, in order: what must agree on every rank."""
    return [
        (name, tuple(p.value.shape), str(p.value.dtype)) for name, p in module.named_parameters()
    ]


def check_same_model(comm: Any, module: Module) -> None:
    """DistributedError naming the ranks and the first difference unless every rank's
    ``module`` has the same parameters (names, shapes, dtypes, in order)."""
    mine = model_signature(module)
    everyone = comm.allgather(mine)
    for rank, theirs in enumerate(everyone):
        if theirs == everyone[0]:
            continue
        if len(theirs) != len(everyone[0]):
            raise DistributedError(
                f"DistributedDataParallel: rank 0's model has {len(everyone[0])} parameters, "
                f"rank {rank}'s has {len(theirs)}"
            )
        for a, b in zip(everyone[0], theirs, strict=True):
            if a != b:
                raise DistributedError(
                    f"DistributedDataParallel: the models differ: rank 0 has {a[0]} {a[1]} "
                    f"{a[2]}, rank {rank} has {b[0]} {b[1]} {b[2]}"
                )


def broadcast_parameters(comm: Any, module: Module) -> None:
    """Give every rank rank 0's parameter values (``comm.Bcast`` of each, from root 0).
    Each parameter keeps its shape, dtype and backend; its value is replaced (see
    ``Parameter.update``), so make the optimizer after this."""
    # BEGIN SOLUTION 6.2
    for p in module.parameters():
        values = np.ascontiguousarray(p.value.to_numpy())
        comm.Bcast(values, root=0)
        p.update(from_numpy(values, p.value.backend, dtype=p.value.dtype, copy=False))
    # END SOLUTION


class DistributedDataParallel(Module):
    """``module``, trained on every rank of ``comm`` as one model.

    Making it checks that every rank has the same parameters
    (:func:`check_same_model`) and broadcasts rank 0's values
    (:func:`broadcast_parameters`). Calling it calls ``module``. After each
    ``loss.backward()``, call :meth:`sync_gradients` (then clip, then step): it averages
    the gradients over the ranks, bucket by bucket, with ``algorithm`` ("ring": task
    6.1's :func:`~module6.distributed.ring_all_reduce`; "mpi": MPI's ``Allreduce``).
    ``comm_seconds`` sums the time spent in those all-reduces."""

    def __init__(
        self,
        module: Module,
        comm: Any = None,
        bucket_bytes: int = BUCKET_BYTES,
        algorithm: str = "ring",
    ) -> None:
        super().__init__()
        if algorithm not in ALL_REDUCE:
            raise ValueError(
                f"DistributedDataParallel: algorithm {algorithm!r}, "
                f"want one of {sorted(ALL_REDUCE)}"
            )
        self.module = module
        self.comm = comm if comm is not None else world()
        self.algorithm = algorithm
        self.all_reduce = ALL_REDUCE[algorithm]
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        check_same_model(self.comm, module)
        broadcast_parameters(self.comm, module)
        self.buckets = make_buckets(list(module.parameters()), bucket_bytes)
        self.timer = Timer()

    @property
    def comm_seconds(self) -> float:
        return self.timer.seconds

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def sync_gradients(self) -> None:
        """Replace each parameter's gradient by its mean over the ranks: for each bucket
        (:attr:`buckets`, lists of indices into ``module.parameters()``), the gradients
        packed into one buffer of the parameters' dtype (zeros for a parameter with no
        gradient on this rank), one all-reduce (``self.all_reduce(comm, buffer)``, timed
        by ``self.timer``), divided by the number of ranks, unpacked into new gradient
        tensors of each parameter's shape, dtype and backend. Every parameter of a
        bucket has a gradient afterwards."""
        parameters = list(self.module.parameters())
        # BEGIN SOLUTION 6.2
        for bucket in self.buckets:
            values = [parameters[i].value for i in bucket]
            sizes = [v.size for v in values]
            buffer = np.zeros(sum(sizes), values[0].dtype)
            start = 0
            for v, n in zip(values, sizes, strict=True):
                if v.grad is not None:
                    buffer[start : start + n] = v.grad.to_numpy().reshape(-1)
                start += n
            with self.timer:
                self.all_reduce(self.comm, buffer)
            buffer /= self.size
            start = 0
            for v, n in zip(values, sizes, strict=True):
                part = buffer[start : start + n].reshape(v.shape)
                v.grad = from_numpy(part, v.backend, dtype=v.dtype)
                start += n
        # END SOLUTION


class DistributedSampler:
    """Which examples of a dataset of ``n`` this rank reads, epoch by epoch.

    Each epoch is a permutation of ``range(n)`` drawn from ``(seed, epoch)`` (the same
    on every rank; ``shuffle=False``: the identity), padded at its end with its own
    first entries to a multiple of ``size``, and dealt out like cards: rank ``r`` gets
    positions ``r, r + size, r + 2 size, ...``. So every rank gets ``ceil(n / size)``
    examples, and the ranks' batches ``i`` together are the one-process batch ``i`` of
    ``size`` times the size (``tests/module6/test_ddp.py``)."""

    def __init__(self, n: int, rank: int, size: int, seed: int = 0, shuffle: bool = True) -> None:
        if n < 1 or size < 1 or not 0 <= rank < size:
            raise ValueError(f"DistributedSampler: {n} examples, rank {rank} of {size}")
        self.n, self.rank, self.size, self.seed, self.shuffle = n, rank, size, seed, shuffle
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return -(-self.n // self.size)

    def indices(self) -> np.ndarray:
        """This rank's example indices for the current epoch (see the class)."""
        # BEGIN SOLUTION 6.2
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
        else:
            order = np.arange(self.n)
        return np.resize(order, len(self) * self.size)[self.rank :: self.size]  # wraps round
        # END SOLUTION

    def __iter__(self) -> Iterator[int]:
        return iter(int(i) for i in self.indices())


def shard(batch: np.ndarray, rank: int, size: int) -> np.ndarray:
    """Rows ``rank, rank + size, ...`` of a global batch that every rank drew alike (the
    same seed): this rank's share, dealt as :class:`DistributedSampler` deals."""
    if len(batch) % size:
        raise ValueError(f"shard: a batch of {len(batch)} rows does not split over {size} ranks")
    return batch[rank::size]
