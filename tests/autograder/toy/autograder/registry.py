"""The toy course's registry: three tasks in two stages, for the tooling's own tests.

``tests/autograder/toy.py`` builds the course: this tooling's files, with this registry
in place of the real one, and the stubs, tests and checks beside it.
"""

from __future__ import annotations

from autograder.task import Task, find_task

TASKS: tuple[Task, ...] = (
    Task(
        id="0.1",
        title="Operators",
        points=10,
        files=("module0/operators.py",),
        functions=("module0.operators:mul", "module0.operators:add", "module0.operators:neg"),
    ),
    Task(
        id="0.2",
        title="Sums",
        points=10,
        files=("module0/sums.py",),
        functions=("module0.sums:total",),
    ),
    Task(
        id="1.1",
        title="Dot product",
        points=10,
        files=("module1/vectors.py",),
        functions=("module1.vectors:dot",),
    ),
)


def get_task(task_id: str) -> Task:
    """Return the task with this id, or raise KeyError listing the known ids."""
    return find_task(TASKS, task_id)


def tasks_for_stage(stage: int) -> tuple[Task, ...]:
    """The tasks of one stage, in registry order."""
    return tuple(t for t in TASKS if t.stage == stage)
