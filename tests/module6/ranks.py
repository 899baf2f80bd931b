"""What each rank runs in stage 6's tests: ``mpiexec -n K python -m tests.module6.ranks
CASE OUT ARGS_JSON``. Rank 0 writes the case's results to ``OUT`` (an ``.npz``); the
test (one process, :func:`tests.module6.mpi.run_ranks`) reads and judges them.

Cases:

* ``ring``: for each ``(length, dtype, seed)`` every rank draws its buffer from ``[seed,
  rank]``, sums it by ``ring_all_reduce`` and by MPI's ``Allreduce``; rank 0 saves
  every rank's inputs and ring result, and MPI's result.
* ``train``: ``steps`` data-parallel steps of a small model (``"cnn"``: stage 4's
  DigitCNN without dropout; ``"gpt"``: a two-layer GPT) in float64, on a global batch
  of ``batch`` rows drawn alike on every rank and dealt by ``shard`` (``algorithm``:
  "mpi", or task 6.1's "ring"); rank 0 saves the
  mean loss of each step over the whole batch and the final parameters.
* ``mismatch``: rank 1's model is wider than the others'; rank 0 saves each rank's
  DistributedError message.
* ``die``: rank 1 exits (``how``: "exit") or raises ("raise") while the others
  wait in an all-reduce.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np


def ring(comm: Any, args: dict[str, Any]) -> dict[str, np.ndarray]:
    from module6.distributed import mpi_all_reduce, ring_all_reduce

    rank, out = comm.Get_rank(), {}
    for i, (length, dtype, seed) in enumerate(args["cases"]):
        x = np.random.default_rng([seed, rank]).normal(size=length).astype(dtype)
        mine = ring_all_reduce(comm, x.copy())
        theirs = mpi_all_reduce(comm, x.copy())
        inputs, results = comm.gather(x, root=0), comm.gather(mine, root=0)
        if rank == 0:
            out[f"inputs{i}"], out[f"ring{i}"] = np.stack(inputs), np.stack(results)
            out[f"mpi{i}"] = theirs
    return out


def _model(name: str, seed: int) -> Any:
    if name == "cnn":
        from module4.models import DigitCNN

        return DigitCNN(size=8, channels=(4, 8), hidden=16, dropout=0.0, seed=seed)
    from module5.gpt import GPT, GPTConfig

    return GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16), seed=seed)


def _loss(name: str, model: Any, x: np.ndarray, y: np.ndarray) -> Any:
    from module1.tensor import from_numpy
    from module2.fast_ops import FastTensorBackend
    from module4.losses import cross_entropy
    from module5.losses import lm_cross_entropy

    if name == "cnn":
        return cross_entropy(model(from_numpy(x, FastTensorBackend)), y)
    logits = model(x)
    b, t, v = logits.shape
    return lm_cross_entropy(logits.contiguous().view(b * t, v), y.reshape(-1))


def _batch(name: str, rng: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
    if name == "cnn":
        return rng.normal(size=(rows, 1, 8, 8)), rng.integers(0, 10, rows)
    tokens = (rng.integers(0, 11, size=(rows, 1)) + np.arange(9)) % 11  # counting: learnable
    return tokens[:, :-1], tokens[:, 1:]


def train(comm: Any, args: dict[str, Any]) -> dict[str, np.ndarray]:
    from module5.optim import AdamW
    from module6.ddp import DistributedDataParallel, shard

    rank, size = comm.Get_rank(), comm.Get_size()
    name = args["model"]
    # Every rank starts from other values: the broadcast must make them rank 0's.
    model = DistributedDataParallel(
        _model(name, seed=rank), comm, bucket_bytes=args.get("bucket_bytes", 4096),
        algorithm=args.get("algorithm", "mpi"),
    )  # fmt: skip
    opt = AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    rng = np.random.default_rng(args["seed"])  # the same draws on every rank
    losses = []
    for _ in range(args["steps"]):
        x, y = _batch(name, rng, args["batch"])
        loss = _loss(name, model, shard(x, rank, size), shard(y, rank, size))
        opt.zero_grad()
        loss.backward()
        model.sync_gradients()
        opt.step()
        losses.append(comm.allreduce(float(loss.item())) / size)
    params = {f"p{i}": p.value.to_numpy() for i, p in enumerate(model.parameters())}
    return {"losses": np.array(losses), **params} if rank == 0 else {}


def mismatch(comm: Any, args: dict[str, Any]) -> dict[str, np.ndarray]:
    from module4.layers import Linear
    from module6.ddp import DistributedDataParallel
    from module6.distributed import DistributedError

    width = 5 if comm.Get_rank() == 1 else 4
    try:
        DistributedDataParallel(Linear(3, width), comm)
        message = "no error"
    except DistributedError as error:
        message = str(error)
    messages = comm.gather(message, root=0)
    return {"messages": np.array(messages)} if comm.Get_rank() == 0 else {}


def die(comm: Any, args: dict[str, Any]) -> dict[str, np.ndarray]:
    import os

    from module6.distributed import mpi_all_reduce

    if comm.Get_rank() == 1:
        if args["how"] == "exit":
            os._exit(3)
        raise ValueError("rank 1 gives up")
    mpi_all_reduce(comm, np.ones(1000))
    return {}


_GIVEN: Any = object()
"""An argument the caller left out (so the communicator's own default applies)."""


class PointToPoint:
    """A communicator that offers only point-to-point messages, and counts what this rank
    sends and receives: what task 6.1's ring may use. A collective is an AttributeError.

    ``sends`` / ``receives``: messages (a ``Sendrecv`` is one of each); ``sent`` /
    ``received``: their bytes; ``peers``: the ranks it sent to and received from. The
    ring's, for ``K`` ranks: ``2 (K - 1)`` messages each way, all to the right neighbour
    and all from the left one, ``2 (K - 1) / K`` of the buffer's bytes each way."""

    def __init__(self, comm: Any) -> None:
        self._comm = comm
        self.sent = self.received = self.sends = self.receives = 0
        self.to: set[int] = set()
        self.came_from: set[int] = set()

    def Get_rank(self) -> int:
        return int(self._comm.Get_rank())

    def Get_size(self) -> int:
        return int(self._comm.Get_size())

    def _out(self, buf: Any, dest: Any) -> None:
        self.sends += 1
        self.sent += np.asarray(buf).nbytes
        self.to.add(int(dest))

    def _in(self, buf: Any, source: Any) -> None:
        self.receives += 1
        self.received += np.asarray(buf).nbytes if buf is not None else 0
        self.came_from.add(-1 if source is _GIVEN else int(source))

    def Sendrecv(
        self, sendbuf: Any, dest: int, sendtag: Any = _GIVEN, recvbuf: Any = None,
        source: Any = _GIVEN, recvtag: Any = _GIVEN, status: Any = _GIVEN,
    ) -> Any:  # fmt: skip
        self._out(sendbuf, dest)
        self._in(recvbuf, source)
        given = {"sendtag": sendtag, "source": source, "recvtag": recvtag, "status": status}
        kwargs = {k: v for k, v in given.items() if v is not _GIVEN}
        return self._comm.Sendrecv(sendbuf, dest, recvbuf=recvbuf, **kwargs)

    def Send(self, buf: Any, dest: int, tag: int = 0) -> Any:
        self._out(buf, dest)
        return self._comm.Send(buf, dest, tag)

    def Recv(self, buf: Any, source: Any = _GIVEN, tag: Any = _GIVEN, status: Any = None) -> Any:
        self._in(buf, source)
        given = {"source": source, "tag": tag}
        return self._comm.Recv(buf, **{k: v for k, v in given.items() if v is not _GIVEN},
                               status=status)  # fmt: skip

    def counts(self) -> np.ndarray:
        """``[sends, receives, sent, received, to_right, from_left]`` of this rank (the
        last two 1 when every message went to the right neighbour / came from the left)."""
        rank, size = self.Get_rank(), self.Get_size()
        right, left = (rank + 1) % size, (rank - 1) % size
        return np.array([
            self.sends, self.receives, self.sent, self.received,
            int(self.to <= {right}), int(self.came_from <= {left}),
        ], np.int64)  # fmt: skip


def ring_check(comm: Any, args: dict[str, Any]) -> dict[str, np.ndarray]:
    """Graded (tests/module6/checks.py): task 6.1 over :class:`PointToPoint`; rank 0 saves
    each case's sum, whether every rank got the same, and every rank's counts."""
    from module6.distributed import ring_all_reduce

    rank, out = comm.Get_rank(), {}
    for i, (length, dtype) in enumerate(args["cases"]):
        x = np.random.default_rng([args["seed"], rank, i]).uniform(0.5, 1.5, length)
        p2p = PointToPoint(comm)
        try:
            result = np.array(ring_all_reduce(p2p, x.astype(dtype)), copy=True)
            error = ""
        except Exception as exc:
            result, error = np.zeros(0), type(exc).__name__
        results, counts, errors = (comm.gather(v, root=0) for v in (result, p2p.counts(), error))
        if rank == 0:
            out[f"sum{i}"], out[f"error{i}"] = results[0], np.array(errors)
            out[f"same{i}"] = np.array(all(np.array_equal(r, results[0]) for r in results))
            out[f"counts{i}"] = np.stack(counts)
    return out


def ddp_check(comm: Any, args: dict[str, Any]) -> dict[str, np.ndarray]:
    """Graded: task 6.2's broadcast and gradient sync (with MPI's all-reduce, so not task
    6.1's code), on parameters of stage 1's SimpleBackend (nothing to compile) that
    start from other values on every rank."""
    from module0.module import Module, Parameter
    from module1.tensor import from_numpy
    from module1.tensor_ops import SimpleBackend
    from module6.ddp import DistributedDataParallel

    rank, dtype = comm.Get_rank(), args["dtype"]
    shapes = np.random.default_rng(args["seed"]).integers(1, 6, size=(5, 2))
    mine = np.random.default_rng([args["seed"], rank])  # other values on every rank
    bag = Module()
    for i, shape in enumerate(shapes):
        value = from_numpy(mine.normal(size=tuple(shape)).astype(dtype), SimpleBackend)
        setattr(bag, f"p{i}", Parameter(value))
    ddp = DistributedDataParallel(bag, comm, bucket_bytes=args["bucket_bytes"], algorithm="mpi")
    params = list(ddp.parameters())
    seen: list[list[np.ndarray]] = [[p.value.to_numpy() for p in params]]
    for missing in (1, 3):  # two rounds; parameter `missing` has no gradient on rank 1
        for i, p in enumerate(params):
            g = from_numpy(mine.normal(size=p.value.shape).astype(dtype), SimpleBackend)
            p.value.grad = None if (i == missing and rank == 1) else g
        ddp.sync_gradients()
        seen.append([p.value.grad.to_numpy() for p in params])
    kinds = [f"{p.value.grad.dtype}, its own backend: {p.value.grad.backend is p.value.backend}"
             for p in params]  # fmt: skip
    everyone = comm.gather(seen, root=0)
    if rank != 0:
        return {}
    same = [all(np.array_equal(a, b) for a, b in zip(theirs[k], seen[k], strict=True))
            for theirs in everyone for k in range(len(seen))]  # fmt: skip
    out = {"same": np.array(same), "kinds": np.array(kinds)}
    for k, arrays in enumerate(seen):
        for i, a in enumerate(arrays):
            out[f"{('start', 'grads', 'grads again')[k]} {i}"] = a
    return out


CASES = {"ring": ring, "train": train, "mismatch": mismatch, "die": die,
         "ring_check": ring_check, "ddp_check": ddp_check}  # fmt: skip


def main() -> None:
    from module6.distributed import world

    case, out, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    comm = world()
    results = CASES[case](comm, args)
    if comm.Get_rank() == 0 and results:
        np.savez(out, **results)


if __name__ == "__main__":
    main()
