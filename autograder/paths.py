"""Where the course's files are, and which tasks a tree actually contains."""

from __future__ import annotations

import importlib.util
import subprocess
import zlib
from pathlib import Path

from autograder import registry
from autograder.task import Task, find_task

ROOT = Path(__file__).resolve().parents[1]
"""The repository this tooling was loaded from (the reference, or a student's handout)."""

# Never copied into a handout or a grading workspace.
EXCLUDED_DIRS = {
    ".git", ".venv", "venv", "runs", "__pycache__", ".pytest_cache", ".hypothesis",
    ".mypy_cache", ".ruff_cache", "build", "dist", "handout",
}  # fmt: skip


def repo_files(root: Path = ROOT) -> list[Path]:
    """Repository-relative paths of the tree's files: git's tracked files in a
    checkout, otherwise every file outside the excluded folders."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, timeout=60
        ).stdout
        files = [Path(p) for p in out.decode().split("\0") if p]
        if files:
            return sorted(p for p in files if (root / p).is_file())
    except (OSError, subprocess.SubprocessError):
        pass
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.is_file() and not path.is_symlink() and not EXCLUDED_DIRS & set(rel.parts):
            if not rel.name.endswith((".pyc", ".egg-info")) and ".egg-info" not in str(rel):
                found.append(rel)
    return sorted(found)


def enclosing_tree(path: Path) -> Path | None:
    """The course tree (a folder with ``autograder/registry.py``) that holds ``path``,
    if any: where a student runs ``minitorch``."""
    for folder in (path.resolve(), *path.resolve().parents):
        if (folder / "autograder" / "registry.py").is_file():
            return folder
    return None


def other_tree_message(cwd: Path) -> str | None:
    """Why ``minitorch status``/``test`` run in ``cwd`` would report on the wrong tree:
    the command is installed from ``ROOT`` but ``cwd`` is inside another course tree
    (for example a new handout next to the environment of an earlier one)."""
    here = enclosing_tree(cwd)
    if here is None or here == ROOT:
        return None
    return (
        f"this minitorch is installed from {ROOT}, so it would test that tree, not "
        f"{here} where you are. Use {here}'s own environment: cd {here} && python3 -m "
        f'venv .venv && .venv/bin/pip install -q -e ".[dev]" && .venv/bin/minitorch status'
    )


_loaded: dict[tuple[str, int], tuple[Task, ...]] = {}


def course_tasks(root: Path = ROOT) -> tuple[Task, ...]:
    """The tasks of the course tree ``root``: its own ``autograder/registry.py`` (this
    tooling's registry when ``root`` is ``ROOT`` or has no registry of its own). Only
    trusted trees are read this way (the reference, a release's output, a student's own
    handout), never a submission."""
    path = (root / "autograder" / "registry.py").resolve()
    if path == (ROOT / "autograder" / "registry.py").resolve() or not path.is_file():
        return registry.TASKS
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _loaded:
        name = f"_course_registry_{zlib.crc32(str(path).encode()):08x}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _loaded[key] = tuple(module.TASKS)
    return _loaded[key]


def course_task(task_id: str, root: Path = ROOT) -> Task:
    """The task of ``root``'s registry with this id (KeyError naming the known ids)."""
    return find_task(course_tasks(root), task_id)


def available_tasks(root: Path = ROOT) -> tuple[Task, ...]:
    """The registry's tasks whose stage package is present in ``root`` (a handout
    released ``--through N`` has no later stages)."""
    return tuple(t for t in course_tasks(root) if (root / f"module{t.stage}").is_dir())


def test_dirs(tasks: tuple[Task, ...]) -> list[str]:
    """Where graded tests live: ``tests/moduleN`` for each stage of ``tasks``."""
    return [f"tests/module{stage}" for stage in sorted({t.stage for t in tasks})]


def graded_test_files(root: Path, tasks: tuple[Task, ...]) -> dict[str, int]:
    """The test files of the stages of ``tasks`` in ``root`` (pytest's default names,
    ``test_*.py`` and ``*_test.py``, at any depth of ``tests/moduleN``), as
    repository-relative paths in pytest's node-id spelling, with their stage."""
    found = {}
    for stage in sorted({t.stage for t in tasks}):
        base = root / "tests" / f"module{stage}"
        for path in base.rglob("*.py"):
            rel = path.relative_to(root)
            if EXCLUDED_DIRS & set(rel.parts):
                continue
            if path.name.startswith("test_") or path.name.endswith("_test.py"):
                found[rel.as_posix()] = stage
    return dict(sorted(found.items()))
