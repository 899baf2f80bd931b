"""A student file that does not import (a syntax error, a bad import, a typo run at import
time), told in a few lines: file, line, the offending line and the error.

Python's own report of such an error starts mid-way through the import machinery
(``<frozen importlib._bootstrap>`` frames, pytest's collection) and repeats once per
test file; the student needs its last four lines. Used by ``minitorch test`` and
``minitorch status`` when the tests do not collect (``python -m autograder.broken_file``
imports the tree's stage packages in a fresh process and prints the first failure), and
by the project's scripts (``project/guard.py``) for an uncaught error at import.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

_STAGE = re.compile(r"^module\d+$")


def _relative(path: str | None, root: Path) -> str | None:
    if not path:
        return None
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except (ValueError, OSError):
        return None


def describe(exc: BaseException, root: Path) -> list[str] | None:
    """A few lines for an error raised while a file of ``root``'s stage packages was
    imported, or ``None`` when it is not one (the caller keeps its usual report)."""
    if isinstance(exc, SyntaxError):  # IndentationError and TabError too
        rel = _relative(exc.filename, root)
        if rel is None or not _STAGE.match(rel.split("/")[0]):
            return None
        lines = [f"{rel}, line {exc.lineno}: {type(exc).__name__}: {exc.msg}"]
        if exc.text:
            text = exc.text.rstrip("\n")
            lines.append("    " + text.strip())
            if exc.offset:
                column = exc.offset - (len(text) - len(text.lstrip())) - 1
                lines.append("    " + " " * max(column, 0) + "^")
        return lines
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if (rel := _relative(f.filename, root)) and _STAGE.match(
        rel.split("/")[0])]  # fmt: skip
    if not mine or mine[-1].name != "<module>":  # not raised by a file's top level
        return None
    where = mine[-1]
    rel = _relative(where.filename, root)
    lines = [f"{rel}, line {where.lineno}: {type(exc).__name__}: {exc}"]
    if where.line:
        lines.append("    " + where.line.strip())
    importers = [f for f in mine[:-1] if f.name == "<module>"]
    if importers:
        first = importers[0]
        lines.append(f"(imported from {_relative(first.filename, root)}, line {first.lineno})")
    return lines


def first_broken(root: Path, python: str = sys.executable) -> list[str] | None:
    """Import each stage package of ``root`` in a fresh process; the lines describing the
    first that fails, or ``None`` when all import."""
    proc = subprocess.run(
        [python, "-m", "autograder.broken_file", str(root)], cwd=root, capture_output=True,
        text=True, timeout=300, stdin=subprocess.DEVNULL,
        env={**_env(), "PYTHONPATH": str(root)},
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return lines or None


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if "NUMBA_ENABLE_CUDASIM" not in env:  # stage 3 imports without a GPU too
        from autograder.pytest_plugin import gpu_present

        env["NUMBA_ENABLE_CUDASIM"] = "0" if gpu_present() else "1"
    return env


def main(argv: list[str] | None = None) -> int:
    root = Path((argv or sys.argv[1:])[0]).resolve()
    sys.path.insert(0, str(root))
    for package in sorted(p.name for p in root.iterdir() if _STAGE.match(p.name) and p.is_dir()):
        try:
            importlib.import_module(package)
        except BaseException as exc:
            lines = describe(exc, root)
            if lines is None:
                lines = [f"importing {package} failed: {type(exc).__name__}: {exc}"]
            print("\n".join(lines))
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
