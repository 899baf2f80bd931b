"""``python -m project.train_gpt`` (stage 5's main job) in a smoke configuration, and
its pieces: the bigram baseline against a count by hand, the attention map against the
model's own attention."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from module5.gpt import GPT, GPTConfig
from project import lm, train_gpt

SMOKE = ["--iters", "6", "--batch", "2", "--block", "16", "--layers", "1", "--heads", "2",
         "--width", "16", "--eval-interval", "3", "--eval-iters", "1", "--samples", "2",
         "--sample-len", "20", "--warmup", "2"]  # fmt: skip


def test_a_smoke_run_writes_every_file_and_the_gate_decides_the_exit(tmp_path: Path) -> None:
    code = train_gpt.main([*SMOKE, "--out", str(tmp_path), "--gate", "-100"])
    out = tmp_path / "gpt"
    assert code == 0
    names = {p.name for p in out.iterdir()}
    assert names == {"log.csv", "model.npz", "curves.png", "attention.png", "samples.txt"}
    rows = (out / "log.csv").read_text().splitlines()
    assert rows[0] == "step,train_loss,val_loss,lr,seconds"
    assert [r.split(",")[0] for r in rows[1:]] == ["0", "3", "6"]
    first = float(rows[1].split(",")[2])
    assert abs(first - math.log(84)) < 0.3  # an untrained model guesses about uniformly
    samples = (out / "samples.txt").read_text().split("\n\n-----\n\n")
    assert len(samples) == 2 and samples[0].startswith("ROMEO:\n")
    assert len(samples[0]) == len("ROMEO:\n") + 20
    assert train_gpt.main([*SMOKE, "--out", str(tmp_path), "--gate", "100"]) == 1


def test_the_bigram_loss_is_the_mean_of_smoothed_counts() -> None:
    train, val = np.array([0, 1, 0, 1, 2]), np.array([0, 1, 2])
    counts = np.ones((3, 3))
    for a, b in [(0, 1), (1, 0), (0, 1), (1, 2)]:
        counts[a, b] += 1
    p = counts / counts.sum(1, keepdims=True)
    want = -(math.log(p[0, 1]) + math.log(p[1, 2])) / 2
    assert lm.bigram_loss(train, val, 3) == pytest.approx(want, rel=1e-12)


def test_the_attention_map_is_causal_rows_of_probabilities() -> None:
    model = GPT(GPTConfig(vocab_size=9, block_size=8, n_layer=2, n_head=2, n_embd=8), seed=3)
    weights = train_gpt.attention_map(model, np.array([1, 4, 2, 8, 0]), 1, 1)
    assert weights.shape == (5, 5)
    np.testing.assert_allclose(weights.sum(1), 1.0, rtol=1e-12)
    assert (weights[np.triu_indices(5, 1)] == 0.0).all()


def test_the_main_job_trains_the_gpt_once_stage_5_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m project`` takes the latest stage whose required tasks are done: here
    (the reference) stage 5's GPT, with the arguments it was given."""
    import project.__main__ as main_job

    called: list[list[str]] = []
    monkeypatch.setattr(train_gpt, "main", lambda argv: called.append(list(argv)) or 0)
    assert main_job.main(["--iters", "3"]) == 0
    assert called == [["--iters", "3"]]
    assert main_job.JOBS[0][2] == "project.train_gpt" and 5 in main_job.JOBS[0][0]
