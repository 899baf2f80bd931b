"""Task 6.2: data-parallel training, and the given code around it. Two ranks with batch
``b`` each take the steps one process takes with batch ``2 b`` (to 1e-6 in float64 over
20 steps, a CNN and a GPT); the ranks start from other values and end with rank 0's;
bad input is refused on every rank; a rank that dies ends the job. The sampler needs
no MPI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from module6.ddp import BUCKET_BYTES, DistributedSampler, make_buckets, shard
from tests.module6 import threads
from tests.module6.mpi import failure, run_ranks


def _train(ranks: int, tmp: Path, **args: object) -> dict[str, np.ndarray]:
    proc, saved = run_ranks(ranks, "train", {"steps": 20, "seed": 3, **args}, tmp)
    assert proc.returncode == 0, failure(proc)
    return saved


@pytest.mark.task6_2
@pytest.mark.parametrize(("model", "batch"), [("cnn", 8), ("gpt", 4)])
def test_two_ranks_take_the_steps_of_one_with_the_whole_batch(
    model: str, batch: int, tmp_path: Path
) -> None:
    one = _train(1, tmp_path, model=model, batch=batch)
    two = _train(2, tmp_path, model=model, batch=batch)
    assert one.keys() == two.keys() and len(one["losses"]) == 20
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-6, atol=1e-9)
    assert one["losses"][-1] < one["losses"][0]  # it trained
    for key in one:
        np.testing.assert_allclose(two[key], one[key], rtol=1e-6, atol=1e-6, err_msg=key)


def _bag(rank: int, dtype: type) -> object:
    """Parameters of stage 1's SimpleBackend (nothing to compile), other values per rank."""
    from module0.module import Module, Parameter
    from module1.tensor import from_numpy
    from module1.tensor_ops import SimpleBackend

    rng = np.random.default_rng(rank)
    bag = Module()
    for i, shape in enumerate([(3, 4), (4,), (2, 2, 2), (1,)]):
        bag.__setattr__(f"p{i}", Parameter(from_numpy(rng.normal(size=shape).astype(dtype),
                                                      SimpleBackend)))  # fmt: skip
    return bag


@pytest.mark.task6_2
@pytest.mark.parametrize("ranks", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bucket_bytes", [40, BUCKET_BYTES], ids=["small buckets", "default"])
def test_broadcast_and_sync_on_thread_ranks_without_mpi(
    ranks: int, dtype: type, bucket_bytes: int
) -> None:
    """In this process, ranks as threads: rank 0's values everywhere, and each gradient
    (one missing on rank 1) replaced by the mean over the ranks, in its own dtype. With
    the default bucket size every parameter shares one bucket, so the missing gradient
    sits in its middle: the later ones must keep their offsets."""
    from module1.tensor import from_numpy
    from module6.ddp import DistributedDataParallel

    def rank_body(comm: threads.ThreadComm) -> tuple[list[np.ndarray], list[np.ndarray]]:
        ddp = DistributedDataParallel(_bag(comm.Get_rank(), dtype), comm, bucket_bytes)
        ddp.all_reduce = threads.thread_sum  # MPI's role, so task 6.1 is not needed
        params = list(ddp.parameters())
        for i, p in enumerate(params):
            g = np.full(p.value.shape, 10.0 * comm.Get_rank() + i, dtype)
            missing = i == 1 and comm.Get_rank() == 1
            p.value.grad = None if missing else from_numpy(g, p.value.backend)
        ddp.sync_gradients()
        return [p.value.to_numpy() for p in params], [p.value.grad.to_numpy() for p in params]

    out = threads.run_ranks(ranks, rank_body)
    first = [p.value.to_numpy() for p in _bag(0, dtype).parameters()]
    for values, grads in out:
        for v, want in zip(values, first, strict=True):
            np.testing.assert_array_equal(v, want)
        for i, g in enumerate(grads):
            parts = [0.0 if (i == 1 and r == 1) else 10.0 * r + i for r in range(ranks)]
            assert g.dtype == dtype and g.shape == first[i].shape
            np.testing.assert_allclose(g, np.mean(parts), rtol=1e-6)


def test_three_ranks_on_the_ring_of_task_6_1_agree_too(tmp_path: Path) -> None:
    one = _train(1, tmp_path, model="cnn", batch=6)
    three = _train(3, tmp_path, model="cnn", batch=6, algorithm="ring", bucket_bytes=1 << 20)
    for key in one:
        np.testing.assert_allclose(three[key], one[key], rtol=1e-6, atol=1e-6, err_msg=key)


def test_models_that_differ_are_refused_on_every_rank(tmp_path: Path) -> None:
    proc, saved = run_ranks(3, "mismatch", {}, tmp_path)
    assert proc.returncode == 0 and len(saved["messages"]) == 3, failure(proc)
    for line in saved["messages"]:
        assert "rank 0 has weight (3, 4)" in line and "rank 1 has weight (3, 5)" in line, line


@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_rank_that_dies_ends_every_rank(how: str, tmp_path: Path) -> None:
    proc, _ = run_ranks(3, "die", {"how": how}, tmp_path, timeout=60)
    assert proc.returncode != 0, proc.stdout
    if how == "raise":
        assert "rank 1 of 3 failed" in proc.stdout and "rank 1 gives up" in proc.stdout


@pytest.mark.task6_2
@pytest.mark.parametrize("n", [1, 5, 12, 13])
@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_sampler_deals_one_epoch_out_and_batches_add_up(n: int, size: int) -> None:
    shares = [DistributedSampler(n, r, size, seed=7).indices() for r in range(size)]
    assert all(len(s) == -(-n // size) for s in shares)
    dealt = np.stack(shares, 1).reshape(-1)  # card by card: the one-process order
    one = DistributedSampler(n, 0, 1, seed=7).indices()
    np.testing.assert_array_equal(dealt[:n], one)
    assert sorted(dealt[:n]) == list(range(n))
    np.testing.assert_array_equal(dealt, np.resize(one, len(dealt)))  # padded by wrapping round


@pytest.mark.task6_2
def test_sampler_draws_a_new_order_each_epoch_and_the_same_on_every_run() -> None:
    a, b = DistributedSampler(50, 1, 2, seed=1), DistributedSampler(50, 1, 2, seed=1)
    first = a.indices()
    a.set_epoch(1)
    assert not np.array_equal(first, a.indices())
    np.testing.assert_array_equal(first, b.indices())
    np.testing.assert_array_equal(DistributedSampler(6, 1, 2, shuffle=False).indices(), [1, 3, 5])
    with pytest.raises(ValueError, match="rank 2 of 2"):
        DistributedSampler(4, 2, 2)


def test_shard_deals_rows_and_refuses_an_uneven_batch() -> None:
    batch = np.arange(12).reshape(6, 2)
    np.testing.assert_array_equal(shard(batch, 1, 3), batch[[1, 4]])
    with pytest.raises(ValueError, match="7 rows does not split over 2"):
        shard(np.zeros((7, 1)), 0, 2)


def test_buckets_hold_every_parameter_once_last_layers_first() -> None:
    from module4.layers import Linear
    from module4.models import DigitCNN

    params = list(DigitCNN(channels=(4, 8), hidden=16).parameters())
    buckets = make_buckets(params, bucket_bytes=4096)
    flat = [i for b in buckets for i in b]
    assert flat == list(reversed(range(len(params))))
    sizes = [sum(params[i].value.size * 8 for i in b) for b in buckets]
    assert all(s <= 4096 or len(b) == 1 for s, b in zip(sizes, buckets, strict=True))
    assert len(make_buckets(list(Linear(3, 2).parameters()), bucket_bytes=1)) == 2
    mixed = Linear(3, 2)
    mixed.bias.update(mixed.bias.value.to("float32"))
    kinds = [[str(list(mixed.parameters())[i].value.dtype) for i in b]
             for b in make_buckets(list(mixed.parameters()))]  # fmt: skip
    assert kinds == [["float32"], ["float64"]]  # one dtype a bucket
