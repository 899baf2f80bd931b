"""The main jobs on two ranks. ``mpiexec -n 2 python -m project.train_gpt --ddp``: a
smoke configuration takes the steps of one process (the same logged losses, float64),
rank 0 alone writes, and every rank reports its throughput and communication time; the
digits CNN (``project.train_digits --ddp``) trains and reports the same way."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from project import train_gpt
from tests.module6.mpi import failure, launch

SMOKE = ["--iters", "12", "--layers", "1", "--width", "16", "--heads", "2", "--block", "8",
         "--batch", "4", "--eval-interval", "6", "--eval-iters", "2", "--samples", "1",
         "--sample-len", "10", "--dtype", "float64", "--gate", "-99"]  # fmt: skip


def _log(folder: Path) -> np.ndarray:
    with (folder / "gpt" / "log.csv").open() as f:
        rows = list(csv.DictReader(f))
    return np.array([[float(r["train_loss"]), float(r["val_loss"])] for r in rows])


def test_two_ranks_train_as_one_process_and_report_their_share(tmp_path: Path) -> None:
    assert train_gpt.main([*SMOKE, "--out", str(tmp_path / "one")]) == 0
    proc = launch(2, ["-m", "project.train_gpt", *SMOKE, "--ddp", "--out", str(tmp_path / "two")])
    assert proc.returncode == 0, failure(proc)
    np.testing.assert_allclose(_log(tmp_path / "two"), _log(tmp_path / "one"), rtol=1e-9)
    assert proc.stdout.count("gate passed") == 1  # rank 0 alone prints
    for rank in (0, 1):
        assert f"rank {rank}: " in proc.stdout and "in all-reduce" in proc.stdout
    assert "all 2 ranks: " in proc.stdout
    assert "2 ranks: rank 0 = PID " in proc.stdout and ", rank 1 = PID " in proc.stdout
    written = sorted(p.name for p in (tmp_path / "two" / "gpt").iterdir())
    assert written == ["attention.png", "curves.png", "log.csv", "model.npz", "samples.txt"]


def test_a_batch_that_does_not_split_is_refused_on_every_rank(tmp_path: Path) -> None:
    argv = ["-m", "project.train_gpt", *SMOKE, "--batch", "5", "--ddp", "--out", str(tmp_path)]
    proc = launch(2, argv, timeout=120)
    assert proc.returncode != 0
    assert "--batch 5 does not split over 2 ranks" in proc.stdout, proc.stdout


def test_the_digits_cnn_trains_on_two_ranks(tmp_path: Path) -> None:
    argv = ["-m", "project.train_digits", "--ddp", "--epochs", "2", "--no-figures",
            "--gate", "0.5", "--out", str(tmp_path)]  # fmt: skip
    proc = launch(2, argv)
    assert proc.returncode == 0, failure(proc)
    assert proc.stdout.count("gate PASSED") == 1 and "all 2 ranks: " in proc.stdout
    with (tmp_path / "digits" / "log.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and float(rows[-1]["test_acc"]) > 0.5


def test_bench_dist_times_both_all_reduces() -> None:
    from project import bench_dist
    from tests.module6.mpi import need_mpi

    need_mpi()
    result = bench_dist.launch(2, ["allreduce", "1", "2"])
    assert result is not None and set(result) == {"ring 1", "mpi 1"}
    assert all(0 < t < 5 for t in result.values()), result
