"""The tooling's private folder: what only the user running it may read or write.

The release keeps the reference in the released shape between releases (with its
kernel caches and the bytecode of its runs), and the tooling records where it wrote a
copy of the reference (a Gradescope bundle). None of it may lie under a name anyone can
predict in a folder anyone can write: a graded run (tier 2, another user on the same
machine) could make that folder first, fill it with bytecode, and have the next release
run it as root. So it all lives in one folder, ``$MINITORCH_PRIVATE_DIR``, else
``$XDG_CACHE_HOME/minitorch``, else ``~/.cache/minitorch``, which is made mode 0700 and,
before every use, checked to be a real folder of this user that no one else may enter,
in a folder no one else may write (or a sticky one). Anything else is refused, naming
the path, and never reused.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class PrivateFolderError(RuntimeError):
    """The private folder is not private (the message says which path and what to do)."""


def _base() -> Path:
    if os.environ.get("MINITORCH_PRIVATE_DIR"):
        return Path(os.environ["MINITORCH_PRIVATE_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "minitorch"


def checked(folder: Path) -> Path:
    """``folder`` (made mode 0700 if missing, with its parents), once it is a real folder
    of this user that no other user may enter or write, inside a folder no other user
    may write (or a sticky one); PrivateFolderError otherwise."""
    folder = Path(os.path.abspath(folder))
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    me = os.getuid()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        why = "is not a folder (a symbolic link, or a file)"
    elif info.st_uid != me:
        why = f"belongs to user {info.st_uid}, not to this user ({me})"
    elif info.st_mode & 0o077:
        why = f"is open to other users (mode {stat.S_IMODE(info.st_mode):04o})"
    else:
        up = os.stat(folder.parent)
        others_write = up.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if others_write and not up.st_mode & stat.S_ISVTX:
            why = f"is in {folder.parent}, which other users may write"
        else:
            return folder
    raise PrivateFolderError(
        f"{folder} {why}: the tooling keeps copies of the reference there, so it must be "
        f"this user's alone. Remove it (rm -rf {folder}); it is made again, mode 0700"
    )


def private_folder(*parts: str) -> Path:
    """The private folder, or a folder inside it (each level checked: :func:`checked`)."""
    folder = checked(_base())
    for part in parts:
        folder = checked(folder / part)
    return folder


_COPIES = "copies-written.txt"


def record_copy(path: Path) -> None:
    """Remember that the tooling wrote a copy of the reference at ``path`` (a bundle), so
    that tier 2 can refuse to grade while another user could read it."""
    record = private_folder() / _COPIES
    known = [p for p in recorded_copies() if p != Path(path).resolve()]  # (those still there)
    text = "".join(f"{p}\n" for p in [*known, Path(path).resolve()])
    temporary = record.with_name(record.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, record)


def recorded_copies() -> list[Path]:
    """The copies of the reference the tooling wrote that still exist."""
    try:
        lines = (private_folder() / _COPIES).read_text(encoding="utf-8").splitlines()
    except (OSError, PrivateFolderError):
        return []
    return [Path(line) for line in dict.fromkeys(lines) if line and Path(line).exists()]


def bytecode_env() -> dict[str, str]:
    """What the tooling's own runs of a tree (the release's, the reference's answers) add
    to their environment: bytecode read and written only in the private folder
    (``PYTHONPYCACHEPREFIX``), never from a ``__pycache__`` something else could write."""
    return {"PYTHONPYCACHEPREFIX": str(private_folder("pycache")), "PYTHONDONTWRITEBYTECODE": ""}
