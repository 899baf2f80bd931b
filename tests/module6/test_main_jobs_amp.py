"""The main jobs in mixed precision: ``project.train_gpt --amp bfloat16`` logs the
losses float32 logs, to within bfloat16's rounding, and says so; ``project.train_digits
--amp float16`` trains with the loss scaler; ``--amp`` on a float64 model is refused
with the fix; ``bench_amp`` measures less activation memory in half precision."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from project import bench_amp, train_digits, train_gpt

SMOKE = ["--iters", "12", "--layers", "1", "--width", "16", "--heads", "2", "--block", "8",
         "--batch", "4", "--eval-interval", "6", "--eval-iters", "2", "--samples", "1",
         "--sample-len", "10", "--gate", "-99"]  # fmt: skip


def _log(folder: Path) -> np.ndarray:
    with (folder / "gpt" / "log.csv").open() as f:
        rows = list(csv.DictReader(f))
    return np.array([[float(r["train_loss"]), float(r["val_loss"])] for r in rows])


@pytest.mark.task6_3
def test_the_gpt_trains_under_bfloat16_autocast_as_in_float32(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert train_gpt.main([*SMOKE, "--out", str(tmp_path / "full")]) == 0
    assert train_gpt.main([*SMOKE, "--amp", "bfloat16", "--out", str(tmp_path / "half")]) == 0
    out = capsys.readouterr().out
    assert "bfloat16 autocast)" in out and "mixed precision: bfloat16 autocast" in out
    full, half = _log(tmp_path / "full"), _log(tmp_path / "half")
    assert full.shape == half.shape == (3, 2)
    np.testing.assert_allclose(half, full, atol=0.05)
    assert not np.array_equal(half, full)  # it did run in bfloat16


@pytest.mark.task6_4
def test_the_digits_cnn_trains_under_float16_with_the_scaler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--epochs", "2", "--no-figures", "--gate", "0.5", "--dtype", "float32",
            "--amp", "float16", "--out", str(tmp_path)]  # fmt: skip
    assert train_digits.main(argv) == 0
    out = capsys.readouterr().out
    assert "gate PASSED" in out and "mixed precision: float16 autocast, loss scale now" in out


def test_amp_on_a_float64_model_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="the model is float64: add --dtype float32"):
        train_digits.main(["--epochs", "1", "--amp", "bfloat16", "--out", str(tmp_path)])


@pytest.mark.task6_3
def test_bench_amp_measures_less_activation_memory_in_half_precision() -> None:
    full, _ = bench_amp.measure(bench_amp._cnn, "float32", 1)
    half, seconds = bench_amp.measure(bench_amp._cnn, "bfloat16", 1)
    assert 0 < half < full and seconds > 0
