"""Task 4.5: the milestone networks — forward against NumPy, short training runs, and
the milestone scripts' gates, logs and figures.

The training tests are short versions of the milestones (a few epochs on the bundled
digits and on the stand-in sentences) with lower thresholds; the full gates are what
``python -m project.train_digits`` and friends check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from module1.tensor import from_numpy
from module2.fast_ops import FastTensorBackend
from module4.models import DigitCNN, SentenceCNN
from project import train_digits, train_mnist, train_sentiment
from project.cnn_train import FitConfig, Split, fit
from project.digits_data import digits_split
from project.sentences import Vocab, standin_sst
from tests.layouts import check
from tests.module4.reference import np_conv, np_maxpool
from tests.module4.test_idx import idx_bytes, write

pytestmark = pytest.mark.task4_5


def params(model: object) -> dict[str, np.ndarray]:
    return {n: p.value.to_numpy() for n, p in model.named_parameters()}  # type: ignore[attr-defined]


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def digit_reference(model: DigitCNN, x: np.ndarray) -> np.ndarray:
    """DigitCNN's forward in eval mode (dropout off), in NumPy."""
    p = params(model)
    h = np_maxpool(relu(np_conv(x, p["conv1.weight"], padding=1) + p["conv1.bias"][:, None, None]))
    h = np_maxpool(relu(np_conv(h, p["conv2.weight"], padding=1) + p["conv2.bias"][:, None, None]))
    h = relu(h.reshape(len(x), -1) @ p["hidden.weight"] + p["hidden.bias"])
    return h @ p["out.weight"] + p["out.bias"]


@pytest.mark.parametrize("size", [8, 12])
def test_digit_cnn_forward_matches_numpy(size: int) -> None:
    model = DigitCNN(size=size, channels=(3, 4), hidden=5, seed=1).eval()
    x = np.random.default_rng(2).random((3, 1, size, size))
    check(model(from_numpy(x, FastTensorBackend)), digit_reference(model, x), "DigitCNN")


def test_sentence_cnn_forward_matches_numpy() -> None:
    model = SentenceCNN(20, dim=4, widths=(2, 3), filters=3, seed=3).eval()
    tokens = np.random.default_rng(4).integers(0, 20, (5, 7))
    p = params(model)
    x = p["embedding.weight"][tokens].transpose(0, 2, 1)  # (batch, dim, length)
    want = np.zeros((5, 2))
    for w in (2, 3):
        pooled = relu(np_conv(x, p[f"conv{w}.weight"]) + p[f"conv{w}.bias"][:, None]).max(axis=2)
        want += pooled @ p[f"head{w}.weight"] + p[f"head{w}.bias"]
    check(model(tokens), want, "SentenceCNN")


def test_dropout_is_active_only_in_training() -> None:
    model = DigitCNN(size=8, channels=(2, 4), hidden=4, dropout=0.5, seed=0)
    x = from_numpy(np.random.default_rng(0).random((4, 1, 8, 8)), FastTensorBackend)
    a, b = model(x).to_numpy(), model(x).to_numpy()
    assert not np.allclose(a, b)  # two different masks
    model.eval()
    np.testing.assert_array_equal(model(x).to_numpy(), model(x).to_numpy())


def test_short_digits_run_learns_and_moves_the_first_layer(tmp_path: Path) -> None:
    x_train, y_train, x_test, y_test = digits_split()
    model = DigitCNN(size=8, seed=0)
    config = FitConfig("digits", epochs=4, lr=3e-3, out=tmp_path, figures=False)
    result = fit(
        model,
        model.conv1.weight,
        Split(x_train, y_train),
        Split(x_test, y_test),
        config,
        train_digits.images_to_input,
    )
    assert result.test_acc[-1] >= 0.85, result.test_acc
    assert result.train_loss[-1] < result.train_loss[0] / 2
    assert result.moved >= 0.05
    assert result.gate(0.85)[0]


def test_short_sentence_run_learns_word_order(tmp_path: Path) -> None:
    train, test = standin_sst(n_train=2000, n_test=300, seed=1)
    vocab = Vocab.build([t for t, _ in train])
    model = SentenceCNN(len(vocab), 32, filters=32, seed=0)
    config = FitConfig("sentences", epochs=4, lr=1e-2, out=tmp_path, figures=False)
    result = fit(
        model,
        model.convs[0].weight,
        train_sentiment.to_split(train, vocab, 24),
        train_sentiment.to_split(test, vocab, 24),
        config,
        train_sentiment.identity,
    )
    assert result.test_acc[-1] >= 0.9, result.test_acc
    assert result.moved >= 0.05


def test_digits_script_writes_log_model_and_figures(tmp_path: Path) -> None:
    code = train_digits.main(["--epochs", "2", "--gate", "0.5", "--out", str(tmp_path)])
    assert code == 0
    run = tmp_path / "digits"
    names = {"log.csv", "model.npz", "curves.png", "confusion.png", "filters.png"}
    assert names | {"misclassified.png"} == {p.name for p in run.iterdir()}
    rows = (run / "log.csv").read_text().splitlines()
    assert rows[0].startswith("epoch,train_loss") and len(rows) == 3
    assert float(rows[-1].split(",")[4]) >= 0.5  # test accuracy after two epochs


def test_digits_script_fails_its_gate_when_accuracy_is_short(tmp_path: Path) -> None:
    code = train_digits.main(
        ["--epochs", "1", "--gate", "1.01", "--out", str(tmp_path), "--no-figures"]
    )
    assert code == 1


def test_gate_needs_the_first_layer_to_move(tmp_path: Path) -> None:
    """A model that trains only its head can score well; the gate still refuses it."""
    x_train, y_train, x_test, y_test = digits_split()
    model = DigitCNN(size=8, seed=0)
    frozen = model.conv1.weight
    model.conv1._parameters.pop("weight")  # no optimizer sees it now
    model.conv1.__dict__["weight"] = frozen
    result = fit(
        model,
        frozen,
        Split(x_train, y_train),
        Split(x_test, y_test),
        FitConfig("frozen", epochs=1, out=tmp_path, figures=False),
        train_digits.images_to_input,
    )
    assert result.moved == 0.0
    passed, message = result.gate(0.0)
    assert not passed and "NOT moved" in message


def test_mnist_script_trains_on_tiny_t10k_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only t10k files (as in ../shared/data/mnist): the script splits them 80/20 here."""
    monkeypatch.setenv("MINITORCH_DATA", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    labels = np.arange(100, dtype=np.uint8) % 2
    images = np.zeros((100, 28, 28), dtype=np.uint8)
    images[labels == 1, 4:24, 12:16] = 200  # a bar: class 1, blank: class 0
    images += rng.integers(0, 40, images.shape, dtype=np.uint8)
    write(tmp_path / "t10k-images-idx3-ubyte", idx_bytes(images))
    write(tmp_path / "t10k-labels-idx1-ubyte", idx_bytes(labels))
    args = ["--data-dir", str(tmp_path), "--out", str(tmp_path), "--epochs", "4", "--gate", "0.9"]
    more = ["--batch-size", "8", "--lr", "0.01", "--channels", "2", "4", "--no-figures"]
    assert train_mnist.main([*args, *more]) == 0
    rows = (tmp_path / "mnist" / "log.csv").read_text().splitlines()
    assert len(rows) == 5 and float(rows[-1].split(",")[4]) >= 0.9
