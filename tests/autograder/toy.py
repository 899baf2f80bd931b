"""The toy course: a small course tree for the tooling's own tests.

``toy/`` holds a course of two stages and three tasks (its registry, reference
solutions with their regions, tests and graded checks); :func:`toy_course` puts it
together with this repository's tooling (``autograder/`` less its registry, and the
shared ``tests/conftest.py``), as a reference tree the tooling can release, grade and
bundle in seconds. The tooling then reads the toy's registry (``course_tasks``), both
in this process and in the processes it starts inside the tree.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from autograder.paths import course_tasks, repo_files

ROOT = Path(__file__).resolve().parents[2]
TOY = Path(__file__).resolve().parent / "toy"


def toy_course(dest: Path) -> Path:
    """Write the toy course's reference tree to ``dest`` (not a git checkout)."""
    tooling = [rel for rel in repo_files(ROOT) if rel.parts[0] == "autograder"]
    for rel in [*tooling, Path("tests/__init__.py"), Path("tests/conftest.py")]:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    shutil.copytree(TOY, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def toy_tasks(tree: Path, stage: int | None = None) -> tuple:
    """The toy's tasks (of one stage)."""
    return tuple(t for t in course_tasks(tree) if stage is None or t.stage == stage)
