"""One graded unit of work, as a course's registry (``autograder/registry.py``) lists it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


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
