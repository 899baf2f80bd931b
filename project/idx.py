"""MNIST from the standard IDX files: read, verify, and (only when asked) download.

IDX layout: two zero bytes, a type code, the number of dimensions ``d``, then ``d``
big-endian uint32 sizes and the values, row-major and big-endian. :func:`read_idx`
reads raw or gzip files and refuses anything that does not fit that layout exactly.

:func:`load_mnist` looks for the four standard files (``.gz`` or uncompressed) in the
directory the user names, then in the cache (``$MINITORCH_DATA/mnist`` or
``~/.cache/minitorch/mnist``). It never downloads unless called with ``download=True``
(the scripts' ``--download``); :func:`download` writes to a temporary file in the cache,
checks the published MD5 and only then moves the file into place.

Checksums: a ``.gz`` file with a standard name must have its published MD5 (MNIST's
were published for the compressed files only). An uncompressed file has no published
checksum, so it is checked by structure instead: IDX layout, 28x28 images, labels 0..9,
as many labels as images.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import tempfile
import urllib.request
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
"""The IDX type codes and the big-endian dtypes of their values."""

MNIST_FILES: dict[str, str] = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
"""The four standard MNIST files and their published MD5 checksums."""

MNIST_MIRRORS: tuple[str, ...] = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
"""Where :func:`download` looks, in order (the original site now refuses scripts)."""

MNIST_SPLITS: dict[str, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
"""Split name -> (images, labels) file stems, without the ``.gz``."""

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 16


class IdxError(ValueError):
    """A file that is not a complete, well-formed IDX file (or gzip of one)."""


class DownloadError(OSError):
    """No mirror gave a complete file with the expected checksum."""


class MnistMissingError(FileNotFoundError):
    """The MNIST files are not where we looked and no download was asked for."""


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file (raw, or gzip when it starts with the gzip magic) into an array.

    The result has the file's shape and a native-endian dtype. Raises :class:`IdxError`
    naming the file for a bad gzip stream, a bad magic or type code, a short header, or a
    payload that is not exactly the product of the sizes times the value size.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise IdxError(f"{path}: cannot read: {err}") from err
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:
            raise IdxError(f"{path}: broken gzip stream: {err}") from err
    elif path.suffix == ".gz":
        raise IdxError(f"{path}: named .gz but does not start with the gzip magic 1f 8b")
    return _parse_idx(data, path)


def _parse_idx(data: bytes, path: Path) -> np.ndarray:
    if len(data) < 4:
        raise IdxError(
            f"{path}: {len(data)} bytes, too short for the 4-byte IDX magic "
            "(an empty or truncated file)"
        )
    if data[0] != 0 or data[1] != 0:
        raise IdxError(f"{path}: not an IDX file: magic starts {data[:2].hex(' ')}, expected 00 00")
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        known = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise IdxError(f"{path}: unknown IDX type code 0x{code:02X} (known: {known})")
    if ndim == 0:
        raise IdxError(f"{path}: IDX header declares 0 dimensions")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IdxError(
            f"{path}: truncated header: {ndim} dimensions need {header} header bytes, "
            f"found {len(data)}"
        )
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[code]
    expected = math.prod(shape) * dtype.itemsize
    found = len(data) - header
    if found != expected:
        what = "truncated" if found < expected else "trailing bytes after the values"
        raise IdxError(
            f"{path}: {what}: shape {shape} of {dtype.name} needs {expected} payload bytes, "
            f"found {found}"
        )
    values = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


def md5_of(path: Path) -> str:
    """Hex MD5 of a file, read in chunks."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def default_cache_dir() -> Path:
    """``$MINITORCH_DATA/mnist`` when the variable is set, else ``~/.cache/minitorch/mnist``."""
    root = os.environ.get("MINITORCH_DATA")
    if root:
        return Path(root).expanduser() / "mnist"
    return Path.home() / ".cache" / "minitorch" / "mnist"


def download(
    filename: str,
    cache_dir: str | os.PathLike[str],
    mirrors: Sequence[str] = MNIST_MIRRORS,
    md5: str | None = None,
    timeout: float = 60.0,
) -> Path:
    """Fetch ``filename`` into ``cache_dir`` from the first mirror that serves it intact.

    ``md5`` defaults to the published checksum of a standard MNIST file (another file
    needs one given). Each attempt streams into a temporary file beside the target,
    hashing as it goes; only a file with the expected MD5 is moved (``os.replace``) to
    its final name, and the temporary file is removed on any failure, interruption
    included. Raises :class:`DownloadError` listing every URL tried and why it failed.
    """
    expected = md5 if md5 is not None else MNIST_FILES.get(filename)
    if expected is None:
        raise ValueError(f"no known MD5 for {filename!r}: pass md5=...")
    if not mirrors:
        raise ValueError("download needs at least one mirror URL")
    target_dir = Path(cache_dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / filename
    failures: list[str] = []
    for mirror in mirrors:
        url = mirror if mirror.endswith(filename) else mirror.rstrip("/") + "/" + filename
        handle, temp_name = tempfile.mkstemp(prefix=f".{filename}.", suffix=".part", dir=target_dir)
        temp = Path(temp_name)
        try:
            digest = hashlib.md5(usedforsecurity=False)
            with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as r:
                while chunk := r.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
            got = digest.hexdigest()
            if got != expected.lower():
                failures.append(f"{url}: checksum mismatch: expected md5 {expected}, got {got}")
                temp.unlink(missing_ok=True)
                continue
            os.replace(temp, target)
            return target
        except Exception as err:  # a network or disk failure: try the next mirror
            temp.unlink(missing_ok=True)
            failures.append(f"{url}: {type(err).__name__}: {err}")
        except BaseException:  # KeyboardInterrupt and the like: clean up, then stop
            temp.unlink(missing_ok=True)
            raise
    raise DownloadError(
        f"could not download {filename} into {target_dir} (expected md5 {expected}):\n  "
        + "\n  ".join(failures)
    )


def _find(stem: str, directories: Sequence[Path]) -> Path | None:
    for directory in directories:
        for name in (stem + ".gz", stem):
            if (directory / name).is_file():
                return directory / name
    return None


def _read_checked(path: Path, check_md5: bool) -> np.ndarray:
    published = MNIST_FILES.get(path.name)
    if check_md5 and published is not None:
        got = md5_of(path)
        if got != published:
            raise IdxError(
                f"{path}: md5 {got} is not the published MNIST checksum {published}; "
                "delete the file and download it again (or pass check_md5=False for "
                "another dataset in MNIST's format)"
            )
    return read_idx(path)


_fetch = download
""":func:`download` under a name that ``load_mnist``'s ``download`` flag does not shadow."""


def load_mnist(
    data_dir: str | os.PathLike[str] | None = None,
    download: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    check_md5: bool = True,
    mirrors: Sequence[str] = MNIST_MIRRORS,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Load the MNIST splits found; return {"train"/"test": (images, labels)}.

    Images are float64 (N, 28, 28) in [0, 1], labels int64 (N,). Files are looked for in
    ``data_dir`` (if given), then in ``cache_dir`` (default :func:`default_cache_dir`),
    each as ``name.gz`` or the uncompressed ``name``. A split is returned when both its
    files are there: with only the t10k files (the MNIST test set) the result has just
    "test". ``download=True`` fetches every missing file into the cache first; otherwise
    missing files raise :class:`MnistMissingError` naming them and the places searched.
    ``check_md5=False`` skips the published-checksum check (another dataset in MNIST's
    format and file names, e.g. Fashion-MNIST).
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    places = [Path(data_dir), cache] if data_dir is not None else [cache]
    found: dict[str, list[Path | None]] = {
        split: [_find(stem, places) for stem in stems] for split, stems in MNIST_SPLITS.items()
    }
    if download:
        for split, stems in MNIST_SPLITS.items():
            found[split] = [
                path if path is not None else _fetch(stem + ".gz", cache, mirrors)
                for path, stem in zip(found[split], stems, strict=True)
            ]
    complete = [split for split, paths in found.items() if None not in paths]
    partial = [split for split, paths in found.items() if paths.count(None) == 1]
    if partial or not complete:
        missing = [
            stem + ".gz"
            for split in (partial or MNIST_SPLITS)
            for stem, path in zip(MNIST_SPLITS[split], found[split], strict=True)
            if path is None
        ]
        raise MnistMissingError(
            f"MNIST files missing: {', '.join(missing)} (or the same names without .gz) "
            f"not found in {' nor in '.join(str(p) for p in places)}; pass --data-dir DIR "
            "naming a folder that holds them, or --download to fetch them into the cache"
        )
    result: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for split in complete:
        images_path, labels_path = (p for p in found[split] if p is not None)
        result[split] = _check_pair(
            _read_checked(images_path, check_md5),
            _read_checked(labels_path, check_md5),
            images_path,
            labels_path,
        )
    return result


def _check_pair(
    images: np.ndarray, labels: np.ndarray, images_path: Path, labels_path: Path
) -> tuple[np.ndarray, np.ndarray]:
    if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
        raise IdxError(
            f"{images_path}: expected uint8 images of shape (N, 28, 28), "
            f"found {images.dtype} {images.shape}"
        )
    if labels.ndim != 1 or labels.dtype != np.uint8:
        raise IdxError(
            f"{labels_path}: expected uint8 labels of shape (N,), found {labels.dtype} "
            f"{labels.shape}"
        )
    if len(images) != len(labels):
        raise IdxError(
            f"{images_path} holds {len(images)} images but {labels_path} holds {len(labels)} labels"
        )
    if len(labels) and labels.max() > 9:
        raise IdxError(f"{labels_path}: label {int(labels.max())} outside 0..9")
    return images.astype(np.float64) / 255.0, labels.astype(np.int64)
