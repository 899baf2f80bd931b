"""One graded unit of work, as a course's registry (``autograder/registry.py``) lists it."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Tool:
    """Something beyond the base install that a task's checks and tests need (stage 6's
    MPI: mpi4py and ``mpiexec``, the ``dist`` extra). Where it is missing, ``minitorch
    grade`` reports the task as not graded (not as failed) and grades the others, and
    ``minitorch release`` refuses before it starts; both name :attr:`install`."""

    name: str
    """What it is called in messages: ``"MPI"``."""
    install: str
    """The command that installs it: ``pip install -e ".[dist]"``."""
    modules: tuple[str, ...] = ()
    """Modules this Python must be able to import."""
    programs: tuple[str, ...] = ()
    """Programs found beside this Python (a virtual environment's ``bin/``) or on the
    PATH, as the course's code looks for them."""

    def missing(self, path: str | None = None) -> str:
        """What of the tool is absent here, in words ("" when nothing is): its modules
        for this Python, its programs beside this Python or on ``path`` (the PATH the
        processes that need them get; this process's PATH by default)."""
        found = []
        absent = [name for name in self.modules if not _importable(name)]
        if absent:
            found.append(f"{', '.join(absent)} {'is' if len(absent) == 1 else 'are'} "
                         "not installed")  # fmt: skip
        here = str(Path(sys.executable).parent)
        path = os.environ.get("PATH", os.defpath) if path is None else path
        gone = [p for p in self.programs
                if not (shutil.which(p, path=here) or shutil.which(p, path=path))]  # fmt: skip
        if gone:
            found.append(f"no {', '.join(gone)} beside this Python or on the PATH")
        return "; ".join(found)


def _importable(module: str) -> bool:
    """Whether this Python finds ``module`` (without importing it, apart from the
    packages above it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class Task:
    """One graded unit of work."""

    id: str
    """Dotted id, ``"<stage>.<n>"``."""
    title: str
    points: int
    files: tuple[str, ...]
    """Repository-relative files that hold the task's solution regions."""
    functions: tuple[str, ...]
    """Qualified names (``module:Class.method``) the student writes."""
    optional: bool = False
    """Graded, but the framework works without it (it falls back to given code), so
    scripts and the main job do not wait for it."""
    own_work: str = ""
    """The rule by which the code the task's functions reach is read before the task is
    credited (``autograder/own_work.py``), or ``""`` for none: ``"kernel"`` (the task
    is writing a computation: no library work — NumPy's routines, ``@``, another
    library), ``"codec"`` (the kernel rule, and no dtype conversion doing the codec's
    work) or ``"messages"`` (a communication algorithm: point-to-point messages only,
    no collective standing in for it)."""
    needs: tuple[Tool, ...] = ()
    """What its checks and tests need beyond the base install (:class:`Tool`)."""

    @property
    def stage(self) -> int:
        """The stage (``moduleN``) the task belongs to."""
        return int(self.id.split(".")[0])

    @property
    def marker(self) -> str:
        """The pytest marker that selects the task's tests."""
        return "task" + self.id.replace(".", "_")


def find_task(tasks: Iterable[Task], task_id: str) -> Task:
    """The task of ``tasks`` with this id, or KeyError listing the known ids."""
    tasks = tuple(tasks)
    for task in tasks:
        if task.id == task_id:
            return task
    known = ", ".join(t.id for t in tasks)
    raise KeyError(f"unknown task {task_id!r}; the registry has: {known}")


@dataclass(frozen=True)
class MissingTool:
    """A tool some tasks need that is missing here."""

    tool: Tool
    why: str
    """What of it is absent (:meth:`Tool.missing`)."""
    tasks: tuple[Task, ...]
    """The tasks that need it."""

    @property
    def task_ids(self) -> str:
        """``task 6.1`` / ``tasks 6.1, 6.2``."""
        ids = [t.id for t in self.tasks]
        return f"task{'s' if len(ids) > 1 else ''} {', '.join(ids)}"


def missing_tools(tasks: Iterable[Task], path: str | None = None) -> list[MissingTool]:
    """The tools ``tasks`` need that are missing here (each looked for once), with the
    tasks that need each; ``path``: see :meth:`Tool.missing`."""
    tasks = tuple(tasks)
    found = []
    for tool in dict.fromkeys(tool for task in tasks for tool in task.needs):
        if why := tool.missing(path):
            found.append(MissingTool(tool, why, tuple(t for t in tasks if tool in t.needs)))
    return found
