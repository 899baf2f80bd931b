"""project/digits_data.py and project/sentences.py: the bundled digits, the SST-2 stand-in,
the SST-2 and GloVe readers, Vocab and encode. Ungraded (no task marks)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from project import sentences
from project.digits_data import DIGITS_PATH, DigitsDataError, digits_split, load_digits
from project.sentences import (
    PAD,
    UNK,
    Vocab,
    encode,
    read_glove,
    read_sst2,
    standin_sst,
    standin_vocabulary,
    tokenize,
)

# --- digits -------------------------------------------------------------------------


def test_load_digits() -> None:
    images, labels = load_digits()
    assert images.shape == (1797, 8, 8) and images.dtype == np.float64
    assert labels.shape == (1797,) and labels.dtype == np.int64
    assert images.min() == 0.0 and images.max() == 1.0
    assert np.array_equal(np.unique(images * 16), np.arange(17))
    counts = np.bincount(labels, minlength=10)
    assert len(counts) == 10 and counts.min() >= 170 and counts.max() <= 190


def test_digits_file_is_package_data() -> None:
    assert DIGITS_PATH.parent.name == "data" and DIGITS_PATH.parent.parent.name == "project"
    assert DIGITS_PATH.stat().st_size < 100_000


def rows(images: np.ndarray, labels: np.ndarray) -> list[bytes]:
    """Each (image, label) as bytes, sorted: equal lists mean equal multisets of examples."""
    pairs = zip(images, labels, strict=True)
    return sorted(image.tobytes() + bytes([int(label)]) for image, label in pairs)


def test_digits_split_partitions_and_stratifies() -> None:
    x_train, y_train, x_test, y_test = digits_split()
    assert len(y_test) == 359 and len(y_train) == 1438
    assert x_train.shape[1:] == (8, 8) and x_test.shape[1:] == (8, 8)
    images, labels = load_digits()
    # train and test together are exactly the whole set: disjoint and complete
    assert rows(np.concatenate([x_train, x_test]), np.concatenate([y_train, y_test])) == rows(
        images, labels
    )
    test_counts = np.bincount(y_test, minlength=10)
    assert test_counts.min() >= 34 and test_counts.max() <= 38
    assert set(y_train.tolist()) == set(range(10))


def test_digits_split_deterministic_and_seeded() -> None:
    a, b = digits_split(), digits_split()
    for left, right in zip(a, b, strict=True):
        np.testing.assert_array_equal(left, right)
    other = digits_split(seed=1)
    assert not np.array_equal(a[3], other[3]) or not np.array_equal(a[2], other[2])
    small = digits_split(test_fraction=0.1)
    assert len(small[3]) == sum(round(0.1 * c) for c in np.bincount(load_digits()[1]))


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.5, 2.0])
def test_digits_split_bad_fraction(fraction: float) -> None:
    with pytest.raises(ValueError, match="test_fraction"):
        digits_split(test_fraction=fraction)


def test_digits_missing_or_corrupt_file(tmp_path: Path) -> None:
    missing = tmp_path / "digits.npz"
    with pytest.raises(DigitsDataError, match=str(missing)):
        load_digits(missing)
    corrupt = tmp_path / "corrupt.npz"
    data = bytearray(DIGITS_PATH.read_bytes())
    data[len(data) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    with pytest.raises(DigitsDataError, match="corrupt") as info:
        load_digits(corrupt)
    assert str(corrupt) in str(info.value) and isinstance(info.value, ValueError)


# --- the SST-2 stand-in -------------------------------------------------------------


def rule_label(tokens: list[str]) -> int:
    """The label by the documented grammar, computed independently of the generator: the
    clause after the last "but" decides; its adjective's polarity, flipped by a negator."""
    clause = tokens[len(tokens) - tokens[::-1].index("but") :] if "but" in tokens else tokens
    if "and" in clause and "but" not in tokens:
        # two agreeing clauses: the last one carries the label as well
        clause = clause[len(clause) - clause[::-1].index("and") :]
    adjectives = [t for t in clause if t in sentences.POSITIVE or t in sentences.NEGATIVE]
    assert len(adjectives) == 1, tokens
    negated = any(t in sentences.NEGATORS for t in clause)
    return int((adjectives[0] in sentences.POSITIVE) != negated)


def test_standin_labels_follow_the_grammar() -> None:
    train, test = standin_sst(600, 200, seed=3)
    for tokens, label in train + test:
        assert rule_label(tokens) == label, " ".join(tokens)
        assert tokens[-1] == "."


def test_standin_examples() -> None:
    assert rule_label("the plot was dull but the acting was wonderful .".split()) == 1
    assert rule_label("the film was not good .".split()) == 0
    assert rule_label("the film was never boring .".split()) == 1


def test_standin_deterministic_balanced_disjoint() -> None:
    train, test = standin_sst(seed=0)
    assert (train, test) == standin_sst(seed=0)
    assert train != standin_sst(seed=1)[0]
    assert len(train) == 2000 and len(test) == 500
    assert sum(label for _, label in train) == 1000 and sum(label for _, label in test) == 250
    assert not {" ".join(t) for t, _ in test} & {" ".join(t) for t, _ in train}
    odd_train, odd_test = standin_sst(7, 3, seed=0)
    assert [len(odd_train), len(odd_test)] == [7, 3]
    assert sum(label for _, label in odd_train) == 3


def test_standin_vocabulary_and_structure() -> None:
    vocabulary = set(standin_vocabulary())
    assert 120 <= len(vocabulary) <= 200
    train, _ = standin_sst(seed=0)
    used = {t for tokens, _ in train for t in tokens}
    assert used <= vocabulary and len(used) >= 0.9 * len(vocabulary)
    # every adjective occurs under both labels, so single words cannot give the label
    labels_of: dict[str, set[int]] = {}
    for tokens, label in train:
        for t in tokens:
            labels_of.setdefault(t, set()).add(label)
    assert all(labels_of[a] == {0, 1} for a in sentences.POSITIVE + sentences.NEGATIVE)
    negated = [any(n in t for n in sentences.NEGATORS) for t, _ in train]
    contrast = ["but" in t for t, _ in train]
    assert 0.25 < np.mean(negated) < 0.75 and 0.25 < np.mean(contrast) < 0.5
    assert Counter(zip(negated, contrast, strict=True))[(True, True)] > 100


# --- tokenize, Vocab, encode ----------------------------------------------------------


def test_tokenize() -> None:
    assert tokenize("It's a DULL, well-made film -- isn't it?") == [
        "it's", "a", "dull", ",", "well", "-", "made", "film", "-", "-", "isn't", "it", "?",
    ]  # fmt: skip
    assert tokenize("it 's not n't") == ["it", "'s", "not", "n't"]


def test_vocab_build_and_lookup() -> None:
    vocab = Vocab.build([["b", "a", "b"], ["c", "b", "a"], ["d"]], min_count=2)
    assert vocab.tokens == [PAD, UNK, "b", "a"]
    assert len(vocab) == 4 and vocab["b"] == 2 and vocab["zzz"] == 1 and vocab[PAD] == 0
    assert "a" in vocab and "d" not in vocab
    assert Vocab.build([["x", "y", "z"]], max_size=3).tokens == [PAD, UNK, "x"]
    with pytest.raises(ValueError):
        Vocab(["a", "b"])


def test_encode_pads_and_truncates() -> None:
    vocab = Vocab.build([["a", "b", "c"]])
    out = encode([["a", "b"], ["c", "a", "b", "q"], []], vocab, 3)
    assert out.dtype == np.int64 and out.shape == (3, 3)
    a, b, c = vocab["a"], vocab["b"], vocab["c"]
    np.testing.assert_array_equal(out, [[a, b, 0], [c, a, b], [0, 0, 0]])
    assert encode([["q"]], vocab, 2).tolist() == [[1, 0]]
    with pytest.raises(ValueError):
        encode([["a"]], vocab, 0)


# --- read_sst2 ------------------------------------------------------------------------


def write_sst(directory: Path, train: str, dev: str = "sentence\tlabel\nfine .\t1\n") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "train.tsv").write_text(train, encoding="utf-8")
    (directory / "dev.tsv").write_text(dev, encoding="utf-8")
    return directory


def test_read_sst2(tmp_path: Path) -> None:
    d = write_sst(
        tmp_path / "SST-2",
        "sentence\tlabel\nA Charming, funny film \t1\nit 's not good \t0\n\n",
        "sentence\tlabel\nDull.\t0\n",
    )
    train, test = read_sst2(d)
    assert train == [(["a", "charming", ",", "funny", "film"], 1), (["it", "'s", "not", "good"], 0)]
    assert test == [(["dull", "."], 0)]


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ("text\tlabel\nok\t1\n", r"train.tsv:1: expected the header"),
        ("", r"train.tsv:1: .*empty file"),
        ("sentence\tlabel\nok\t1\nno label here\n", r"train.tsv:3: expected 2 tab-separated"),
        ("sentence\tlabel\nok\t1\nbad\t2\n", r"train.tsv:3: label must be 0 or 1"),
        ("sentence\tlabel\na\tb\t1\n", r"train.tsv:2: expected 2 tab-separated fields, found 3"),
        ("sentence\tlabel\n ...\t1\n\t0\n", r"train.tsv:3: empty sentence"),
    ],
    ids=["header", "empty", "no-tab", "label", "extra-field", "empty-sentence"],
)
def test_read_sst2_malformed(tmp_path: Path, train: str, message: str) -> None:
    d = write_sst(tmp_path / "SST-2", train)
    with pytest.raises(ValueError, match=message) as info:
        read_sst2(d)
    assert str(d / "train.tsv") in str(info.value)


def test_read_sst2_missing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"train\.tsv, dev\.tsv.*SST-2\.zip"):
        read_sst2(tmp_path)


# --- read_glove -----------------------------------------------------------------------


def test_read_glove(tmp_path: Path) -> None:
    vocab = Vocab.build([["good", "film", "zebra"]])
    path = tmp_path / "glove.txt"
    path.write_text("good 0.5 -1 2\nthe 9 9 9\nfilm 1e-1 0 3.25\n", encoding="utf-8")
    matrix = read_glove(path, vocab, 3)
    assert matrix.shape == (len(vocab), 3) and matrix.dtype == np.float64
    np.testing.assert_array_equal(matrix[0], 0.0)
    np.testing.assert_array_equal(matrix[vocab["good"]], [0.5, -1.0, 2.0])
    np.testing.assert_array_equal(matrix[vocab["film"]], [0.1, 0.0, 3.25])
    zebra = matrix[vocab["zebra"]]
    assert np.all(zebra != 0) and np.all(np.abs(zebra) < 1.0)
    np.testing.assert_array_equal(read_glove(path, vocab, 3), matrix)  # seeded
    assert not np.array_equal(read_glove(path, vocab, 3, seed=1)[vocab["zebra"]], zebra)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("good 1 2 3\nfilm 1 2\n", r"glove.txt:2: expected a word and 3 values, found 2"),
        ("good 1 2 3 4\n", r"glove.txt:1: expected a word and 3 values, found 4"),
        ("good 1 x 3\n", r"glove.txt:1: "),
    ],
    ids=["short-row", "long-row", "not-a-number"],
)
def test_read_glove_malformed(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "glove.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        read_glove(path, Vocab.build([["good"]]), 3)
    assert str(path) in str(info.value)


def test_read_glove_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        read_glove(tmp_path / "nope.txt", Vocab.build([["a"]]), 3)
