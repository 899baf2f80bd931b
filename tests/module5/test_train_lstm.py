"""``python -m project.train_lstm`` (the recurrent milestone) and
``python -m project.compare_lm`` in smoke configurations, and their pieces: the
truncated-BPTT streams (contiguous, targets one further), the model's carried state
(reading in two pieces is reading at once) and sampling."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from project import compare_lm, train_lstm
from project.train_lstm import CharLSTM, Streams

SMOKE = ["--iters", "4", "--batch", "2", "--block", "8", "--embd", "4", "--hidden", "8",
         "--eval-interval", "2", "--eval-iters", "1", "--eval-batch", "2", "--eval-block", "8",
         "--samples", "2", "--sample-len", "12", "--warmup", "1"]  # fmt: skip


def test_a_smoke_run_writes_every_file_and_the_gate_decides_the_exit(tmp_path: Path) -> None:
    assert train_lstm.main([*SMOKE, "--out", str(tmp_path), "--gate", "-100"]) == 0
    out = tmp_path / "lstm"
    assert {p.name for p in out.iterdir()} == {"log.csv", "model.npz", "curves.png",
                                               "samples.txt"}  # fmt: skip
    rows = (out / "log.csv").read_text().splitlines()
    assert rows[0] == "step,train_loss,val_loss,lr,seconds"
    assert [r.split(",")[0] for r in rows[1:]] == ["0", "2", "4"]
    assert abs(float(rows[1].split(",")[2]) - math.log(84)) < 0.3  # about uniform at first
    samples = (out / "samples.txt").read_text().split("\n\n-----\n\n")
    assert len(samples) == 2 and samples[0].startswith("ROMEO:\n")
    assert len(samples[0]) == len("ROMEO:\n") + 12
    assert train_lstm.main([*SMOKE, "--out", str(tmp_path), "--gate", "100"]) == 1


def test_streams_are_contiguous_rows_and_start_over_at_the_end() -> None:
    data = np.arange(23)
    streams = Streams(data, batch=2, block=4)  # rows of 11: 0..11 and 11..22
    x, y, restart = streams.next()
    assert restart
    np.testing.assert_array_equal(x, [[0, 1, 2, 3], [11, 12, 13, 14]])
    np.testing.assert_array_equal(y, x + 1)
    x, y, restart = streams.next()
    assert not restart
    np.testing.assert_array_equal(x, [[4, 5, 6, 7], [15, 16, 17, 18]])
    x, y, restart = streams.next()  # 8..12 would pass the row's end: start over
    assert restart
    np.testing.assert_array_equal(x, [[0, 1, 2, 3], [11, 12, 13, 14]])


def test_the_carried_state_reads_a_text_in_pieces_as_at_once() -> None:
    model = CharLSTM(11, embd=4, hidden=6, seed=2)
    tokens = np.random.default_rng(0).integers(0, 11, (3, 9))
    whole = model(tokens).to_numpy()
    first, state = model.step(tokens[:, :4])
    second, _ = model.step(tokens[:, 4:], state)
    got = np.concatenate([first.to_numpy(), second.to_numpy()], axis=1)
    np.testing.assert_allclose(got, whole, rtol=1e-10, atol=1e-12)


def test_greedy_generation_follows_the_largest_logit() -> None:
    model = CharLSTM(7, embd=3, hidden=5, seed=1)
    out = model.generate(np.array([[1, 2]]), 4, top_k=1, seed=0)
    assert out.shape == (1, 6)
    for i in range(2, 6):
        assert out[0, i] == model(out[:, :i]).to_numpy()[0, -1].argmax()


def test_the_comparison_prints_a_row_per_model_and_draws_the_curves(tmp_path: Path) -> None:
    argv = ["--seconds", "0.3", "--eval-every", "0.2", "--eval-iters", "1", "--lstm-hidden",
            "8", "--lstm-block", "4", "--gpt-layers", "1", "--gpt-width", "8", "--gpt-heads",
            "2", "--gpt-block", "8", "--eval-block", "8", "--out", str(tmp_path)]  # fmt: skip
    assert compare_lm.main(argv) == 0
    table = (tmp_path / "compare" / "table.md").read_text().splitlines()
    assert [row.split("|")[1].strip() for row in table[2:5]] == ["bigram", "lstm", "gpt"]
    assert (tmp_path / "compare" / "curves.png").stat().st_size > 0
