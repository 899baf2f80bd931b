"""The milestone scripts' handling of missing or bad data (ungraded: no model runs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from project import train_mnist, train_sentiment
from tests.module4.test_idx import idx_bytes, write


def test_mnist_without_files_names_them_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MINITORCH_DATA", str(tmp_path / "cache"))
    assert train_mnist.main(["--data-dir", str(tmp_path), "--out", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "t10k-images-idx3-ubyte" in out and "--download" in out
    assert not (tmp_path / "mnist").exists()  # nothing trained, nothing written


def test_mnist_with_a_truncated_file_names_it_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MINITORCH_DATA", str(tmp_path / "cache"))
    images = idx_bytes(np.zeros((10, 28, 28), dtype=np.uint8))
    write(tmp_path / "t10k-images-idx3-ubyte", images[:-100])
    write(tmp_path / "t10k-labels-idx1-ubyte", idx_bytes(np.zeros(10, dtype=np.uint8)))
    assert train_mnist.main(["--data-dir", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "t10k-images-idx3-ubyte" in capsys.readouterr().out


def test_sentiment_without_sst_files_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert train_sentiment.main(["--sst-dir", str(tmp_path), "--out", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "train.tsv" in out and "SST-2.zip" in out


def test_glove_needs_sst(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        train_sentiment.main(["--glove", str(tmp_path / "g.txt")])
    assert exit_info.value.code == 2


def test_compare_runs_draws_the_logs_and_names_a_missing_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from project import compare_runs

    for name, accs in (("a", (0.5, 0.8)), ("b", (0.7, 0.9))):
        (tmp_path / name).mkdir()
        rows = ["epoch,train_loss,train_acc,test_loss,test_acc,seconds"]
        rows += [f"{e},{1 / e},{acc},{1.2 / e},{acc},0.1" for e, acc in enumerate(accs, 1)]
        (tmp_path / name / "log.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "both.png"
    assert compare_runs.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert compare_runs.read_log(tmp_path / "b")["test_acc"] == [0.7, 0.9]
    assert compare_runs.main([str(tmp_path / "c"), "--out", str(out)]) == 2
    assert "c/log.csv does not exist" in capsys.readouterr().out
