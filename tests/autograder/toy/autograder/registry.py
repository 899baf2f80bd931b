"""The toy course's registry: three tasks in two stages, for the tooling's own tests.
A course's registry needs ``TASKS`` alone (``autograder.paths.course_tasks``).

``tests/autograder/toy.py`` builds the course: this tooling's files, with this registry
in place of the real one, and the stubs, tests and checks beside it.
"""

from __future__ import annotations

from autograder.task import Task

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
