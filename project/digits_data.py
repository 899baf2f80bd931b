"""The bundled 8x8 handwritten digits: the offline image set of the course.

1797 images of the UCI "Optical Recognition of Handwritten Digits" test part (Alpaydin and
Kaynak, 1998, CC BY 4.0; see ``project/data/README.md``), stored in
``project/data/digits.npz`` and checked against :data:`DIGITS_SHA256` on every load.

    images, labels = load_digits()                  # (1797, 8, 8) in [0, 1], (1797,)
    x_train, y_train, x_test, y_test = digits_split()
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np

DIGITS_PATH = Path(__file__).resolve().parent / "data" / "digits.npz"
"""The bundled file (package data, so a non-editable install has it too)."""
DIGITS_SHA256 = "56691635b5c95f315ed55907c4fe83309809b3b822ee0b8d68e84bba3ffd4ca3"
"""sha256 of ``digits.npz`` as made by ``project/data/make_digits.py``."""
DIGITS_COUNT = 1797
PIXEL_MAX = 16
"""Each pixel counts the set bits of a 4x4 block of a 32x32 bitmap: 0..16."""


class DigitsDataError(ValueError):
    """The bundled digits file is missing, altered or unreadable."""


def load_digits(path: Path = DIGITS_PATH) -> tuple[np.ndarray, np.ndarray]:
    """Return (images float64 (N, 8, 8) scaled to [0, 1], labels int64 (N,)).

    The file's sha256 must be :data:`DIGITS_SHA256`; anything else raises
    :class:`DigitsDataError` naming the file.
    """
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DigitsDataError(
            f"cannot read the bundled digits file {path}: {err}; reinstall the project "
            "or restore project/data/digits.npz from git"
        ) from err
    digest = hashlib.sha256(raw).hexdigest()
    if digest != DIGITS_SHA256:
        raise DigitsDataError(
            f"{path} is corrupt or altered: sha256 {digest}, expected {DIGITS_SHA256}; "
            "restore it from git (or rebuild it with project/data/make_digits.py)"
        )
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as archive:
            images, labels = archive["images"], archive["labels"]
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as err:
        raise DigitsDataError(f"cannot read {path}: {err}") from err
    return images.astype(np.float64) / PIXEL_MAX, labels.astype(np.int64)


def digits_split(
    test_fraction: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split the digits, stratified: (train images, train labels, test images, test labels).

    Deterministic: for each class, in label order, a ``np.random.default_rng(seed)``
    permutation of that class's images puts ``round(test_fraction * class size)`` of them
    in the test set, so every class is in both sets in its overall proportion. Both sets
    keep the file's order (shuffle per epoch when training). 0.2 gives 1438 / 359.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    images, labels = load_digits()
    rng = np.random.default_rng(seed)
    is_test = np.zeros(len(labels), dtype=bool)
    for digit in range(10):
        members = np.flatnonzero(labels == digit)
        count = round(test_fraction * len(members))
        is_test[rng.permutation(members)[:count]] = True
    return images[~is_test], labels[~is_test], images[is_test], labels[is_test]
