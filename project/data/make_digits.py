"""Rebuild ``digits.npz`` from ``digits.csv.gz`` as shipped in scikit-learn's wheel.

    pip download scikit-learn --no-deps -d /tmp/skl
    unzip -j /tmp/skl/scikit_learn-*.whl sklearn/datasets/data/digits.csv.gz -d /tmp/skl
    python project/data/make_digits.py /tmp/skl/digits.csv.gz project/data/digits.npz

Each CSV row is 64 pixel counts (0..16, row-major 8x8) and then the label. The archive
is written with fixed timestamps so the same CSV gives the same bytes, hence the same
sha256 as ``project.digits_data.DIGITS_SHA256``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import sys
import zipfile
from pathlib import Path

import numpy as np


def convert(csv_gz: Path, out: Path) -> str:
    """Write ``out`` (images uint8 (N,8,8), labels uint8 (N,)); return its sha256."""
    rows = np.loadtxt(io.StringIO(gzip.decompress(csv_gz.read_bytes()).decode()), delimiter=",")
    if rows.ndim != 2 or rows.shape[1] != 65:
        raise ValueError(f"{csv_gz}: expected rows of 65 values, got shape {rows.shape}")
    if rows.min() < 0 or rows[:, :64].max() > 16 or rows[:, 64].max() > 9:
        raise ValueError(f"{csv_gz}: values outside 0..16 or labels outside 0..9")
    arrays = {
        "images": rows[:, :64].astype(np.uint8).reshape(-1, 8, 8),
        "labels": rows[:, 64].astype(np.uint8),
    }
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1998, 7, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, buffer.getvalue(), compresslevel=9)
    return hashlib.sha256(out.read_bytes()).hexdigest()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python project/data/make_digits.py DIGITS_CSV_GZ OUT_NPZ")
    print(convert(Path(sys.argv[1]), Path(sys.argv[2])))
