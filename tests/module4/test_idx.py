"""project/idx.py: IDX reading, checked downloads (over file:// URLs) and MNIST loading.

Every file here is built by the test in ``tmp_path``; the one test that reads the real
MNIST test set is skipped where ``../shared/data/mnist`` (beside the repository) is absent.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from project import idx
from project.idx import DownloadError, IdxError, MnistMissingError, download, load_mnist, read_idx

SHARED_MNIST = Path(__file__).resolve().parents[3] / "shared/data/mnist"


def idx_bytes(array: np.ndarray, code: int = 0x08) -> bytes:
    """An IDX encoding written independently of the reader: header, sizes, big-endian values."""
    dtype = idx.IDX_DTYPES[code]
    header = bytes([0, 0, code, array.ndim]) + b"".join(struct.pack(">I", n) for n in array.shape)
    return header + np.ascontiguousarray(array, dtype=dtype).tobytes()


def write(path: Path, data: bytes, compress: bool = False) -> Path:
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_round_trip_ubyte(tmp_path: Path, compress: bool) -> None:
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4) * 7
    name = "a.idx.gz" if compress else "a.idx"
    out = read_idx(write(tmp_path / name, idx_bytes(array), compress))
    assert out.dtype == np.uint8 and out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out, array)


@pytest.mark.parametrize("code", [0x09, 0x0B, 0x0C, 0x0D, 0x0E])
def test_round_trip_other_types(tmp_path: Path, code: int) -> None:
    array = np.array([[-3, 0, 5], [100, -100, 7]], dtype=idx.IDX_DTYPES[code])
    out = read_idx(write(tmp_path / "t.idx", idx_bytes(array, code)))
    assert out.dtype.isnative and out.dtype.kind == array.dtype.kind
    np.testing.assert_array_equal(out, array)


def test_gzip_detected_by_content(tmp_path: Path) -> None:
    array = np.arange(10, dtype=np.uint8)
    np.testing.assert_array_equal(read_idx(write(tmp_path / "x", idx_bytes(array), True)), array)


GOOD = idx_bytes(np.arange(12, dtype=np.uint8).reshape(3, 4))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (GOOD[:-1], "truncated"),
        (GOOD[:-5], "needs 12 payload bytes, found 7"),
        (b"\x01" + GOOD[1:], "magic"),
        (GOOD[:2] + b"\x0a" + GOOD[3:], "type code 0x0A"),
        (bytes([0, 0, 8, 2, 0, 0, 0, 30, 0, 0, 0, 4]) + bytes(12), "needs 120 payload bytes"),
        (GOOD + b"\x00", "trailing bytes"),
        (bytes([0, 0, 8, 3, 0, 0, 0, 3]), "truncated header"),
        (bytes([0, 0, 8, 0]), "0 dimensions"),
        (b"", "0 bytes"),
        (b"\x00\x00", "2 bytes"),
    ],
    ids=[
        "short-1",
        "short-5",
        "magic",
        "type-code",
        "dims-too-big",
        "trailing",
        "short-header",
        "zero-dims",
        "empty",
        "two-bytes",
    ],
)
@pytest.mark.parametrize("compress", [False, True])
def test_corrupt_files_raise_idx_error(
    tmp_path: Path, data: bytes, message: str, compress: bool
) -> None:
    path = write(tmp_path / ("bad.gz" if compress else "bad.idx"), data, compress)
    with pytest.raises(IdxError, match=message) as info:
        read_idx(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "data",
    [gzip.compress(GOOD)[:-6], gzip.compress(GOOD)[:12], b"\x1f\x8b" + b"junk" * 5],
    ids=["cut-trailer", "cut-stream", "garbage"],
)
def test_broken_gzip(tmp_path: Path, data: bytes) -> None:
    path = write(tmp_path / "bad.gz", data)
    with pytest.raises(IdxError, match="gzip") as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_gz_name_without_gzip_content(tmp_path: Path) -> None:
    with pytest.raises(IdxError, match="gzip magic"):
        read_idx(write(tmp_path / "plain.gz", GOOD))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(IdxError, match="cannot read"):
        read_idx(tmp_path / "nope.idx")


# --- download ---------------------------------------------------------------------


def serve(tmp_path: Path, name: str, data: bytes) -> tuple[str, str]:
    """A file:// 'mirror' holding ``name``; return (mirror URL, md5 of data)."""
    mirror = tmp_path / "mirror"
    mirror.mkdir(exist_ok=True)
    (mirror / name).write_bytes(data)
    return mirror.as_uri() + "/", hashlib.md5(data).hexdigest()


def test_download_good_checksum(tmp_path: Path) -> None:
    data = gzip.compress(GOOD)
    url, md5 = serve(tmp_path, "f.gz", data)
    cache = tmp_path / "cache"
    path = download("f.gz", cache, mirrors=[url], md5=md5)
    assert path == cache / "f.gz" and path.read_bytes() == data
    assert sorted(p.name for p in cache.iterdir()) == ["f.gz"]


def test_download_bad_checksum_leaves_nothing(tmp_path: Path) -> None:
    url, md5 = serve(tmp_path, "f.gz", b"payload")
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError) as info:
        download("f.gz", cache, mirrors=[url], md5="0" * 32)
    message = str(info.value)
    assert "f.gz" in message and "0" * 32 in message and md5 in message and url in message
    assert list(cache.iterdir()) == []


def test_download_falls_back_to_next_mirror(tmp_path: Path) -> None:
    url, md5 = serve(tmp_path, "f.gz", b"payload")
    cache = tmp_path / "cache"
    missing = (tmp_path / "no-such-mirror").as_uri() + "/"
    assert download("f.gz", cache, mirrors=[missing, url], md5=md5).read_bytes() == b"payload"


def test_download_all_mirrors_fail(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    urls = [(tmp_path / d).as_uri() + "/" for d in ("m1", "m2")]
    with pytest.raises(DownloadError) as info:
        download("f.gz", cache, mirrors=urls, md5="a" * 32)
    assert all(u + "f.gz" in str(info.value) for u in urls)
    assert list(cache.iterdir()) == []


class _FailingResponse:
    """A response whose second read fails, as a dropped connection would."""

    def __init__(self, error: BaseException) -> None:
        self.reads = 0
        self.error = error

    def __enter__(self) -> _FailingResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        if self.reads > 1:
            raise self.error
        return b"x" * 1000


@pytest.mark.parametrize("error", [ConnectionResetError("peer reset"), KeyboardInterrupt()])
def test_download_interrupted_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: _FailingResponse(error))
    expected = DownloadError if isinstance(error, Exception) else KeyboardInterrupt
    with pytest.raises(expected):
        download("f.gz", cache, mirrors=["https://example.invalid/"], md5="a" * 32)
    assert list(cache.iterdir()) == []


def test_download_existing_file_replaced_only_when_good(tmp_path: Path) -> None:
    url, md5 = serve(tmp_path, "f.gz", b"new")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "f.gz").write_bytes(b"old")
    with pytest.raises(DownloadError):
        download("f.gz", cache, mirrors=[url], md5="b" * 32)
    assert (cache / "f.gz").read_bytes() == b"old"
    download("f.gz", cache, mirrors=[url], md5=md5)
    assert (cache / "f.gz").read_bytes() == b"new"


def test_download_unknown_file_needs_md5(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="md5"):
        download("mystery.gz", tmp_path)


def test_mnist_table() -> None:
    assert set(idx.MNIST_FILES) == {
        f"{stem}.gz" for pair in idx.MNIST_SPLITS.values() for stem in pair
    }
    assert all(len(m) == 32 for m in idx.MNIST_FILES.values())


# --- load_mnist ---------------------------------------------------------------------


def fake_split(directory: Path, prefix: str, n: int, n_labels: int | None = None) -> None:
    """Uncompressed MNIST-shaped files (no published md5 applies to these names)."""
    rng = np.random.default_rng(n)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n_labels if n_labels is not None else n, dtype=np.uint8)
    directory.mkdir(parents=True, exist_ok=True)
    write(directory / f"{prefix}-images-idx3-ubyte", idx_bytes(images))
    write(directory / f"{prefix}-labels-idx1-ubyte", idx_bytes(labels))


def test_load_mnist_test_only(tmp_path: Path) -> None:
    fake_split(tmp_path / "d", "t10k", 5)
    data = load_mnist(tmp_path / "d", cache_dir=tmp_path / "cache")
    assert list(data) == ["test"]
    images, labels = data["test"]
    assert images.shape == (5, 28, 28) and images.dtype == np.float64
    assert labels.shape == (5,) and labels.dtype == np.int64
    assert 0.0 <= images.min() and images.max() <= 1.0
    raw = read_idx(tmp_path / "d" / "t10k-images-idx3-ubyte")
    np.testing.assert_array_equal(images, raw / 255.0)


def test_load_mnist_both_splits_from_cache_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINITORCH_DATA", str(tmp_path / "root"))
    fake_split(tmp_path / "root" / "mnist", "train", 7)
    fake_split(tmp_path / "root" / "mnist", "t10k", 3)
    data = load_mnist()
    assert data["train"][0].shape == (7, 28, 28) and data["test"][1].shape == (3,)


def test_load_mnist_missing_names_files_and_flags(tmp_path: Path) -> None:
    with pytest.raises(MnistMissingError) as info:
        load_mnist(tmp_path / "empty", cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert all(name in message for name in idx.MNIST_FILES)
    assert "--data-dir" in message and "--download" in message
    assert str(tmp_path / "empty") in message and str(tmp_path / "cache") in message


def test_load_mnist_half_a_split_is_an_error(tmp_path: Path) -> None:
    fake_split(tmp_path / "d", "t10k", 3)
    (tmp_path / "d" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(MnistMissingError, match="t10k-labels-idx1-ubyte") as info:
        load_mnist(tmp_path / "d", cache_dir=tmp_path / "cache")
    assert "train-images" not in str(info.value)


def test_load_mnist_count_mismatch(tmp_path: Path) -> None:
    fake_split(tmp_path / "d", "t10k", 4, n_labels=3)
    with pytest.raises(IdxError) as info:
        load_mnist(tmp_path / "d", cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert "t10k-images-idx3-ubyte" in message and "t10k-labels-idx1-ubyte" in message
    assert "4 images" in message and "3 labels" in message


def test_load_mnist_rejects_gz_with_wrong_md5(tmp_path: Path) -> None:
    d = tmp_path / "d"
    fake_split(d, "t10k", 2)
    for stem in idx.MNIST_SPLITS["test"]:
        (d / (stem + ".gz")).write_bytes(gzip.compress((d / stem).read_bytes()))
        (d / stem).unlink()
    with pytest.raises(IdxError, match="published MNIST checksum"):
        load_mnist(d, cache_dir=tmp_path / "cache")
    assert load_mnist(d, cache_dir=tmp_path / "cache", check_md5=False)["test"][0].shape == (
        2,
        28,
        28,
    )


def test_load_mnist_download_fetches_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With download=True the missing files come from the mirrors (file:// here) into the
    cache, checked against the md5 table."""
    src = tmp_path / "src"
    fake_split(src, "train", 4)
    fake_split(src, "t10k", 2)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    table = {}
    for stems in idx.MNIST_SPLITS.values():
        for stem in stems:
            packed = gzip.compress((src / stem).read_bytes())
            (mirror / (stem + ".gz")).write_bytes(packed)
            table[stem + ".gz"] = hashlib.md5(packed).hexdigest()
    monkeypatch.setattr(idx, "MNIST_FILES", table)
    cache = tmp_path / "cache"
    data = load_mnist(cache_dir=cache, download=True, mirrors=[mirror.as_uri() + "/"])
    assert data["train"][0].shape == (4, 28, 28) and data["test"][0].shape == (2, 28, 28)
    assert sorted(p.name for p in cache.iterdir()) == sorted(table)


@pytest.mark.skipif(not SHARED_MNIST.is_dir(), reason="no ../shared/data/mnist beside the repo")
def test_real_mnist_t10k() -> None:
    data = load_mnist(SHARED_MNIST, cache_dir=SHARED_MNIST / "no-cache")
    images, labels = data["test"]
    assert images.shape == (10000, 28, 28) and images.dtype == np.float64
    assert labels.shape == (10000,) and labels.dtype == np.int64
    assert images.min() == 0.0 and images.max() == 1.0
    counts = np.bincount(labels, minlength=10)
    assert len(counts) == 10 and counts.sum() == 10000 and counts.min() > 800
