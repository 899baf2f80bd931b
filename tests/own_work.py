"""Your own work: the tasks that ask you to write a computation earn nothing when the
code they run does it some other way. The grader reads your code (it never guesses from
speed) by each task's rule (``autograder/own_work.py``; each stage's README says it):

* the kernels (stage 2's map, zip, reduce and matmuls, stage 3's CUDA kernels, stage 4's
  convolutions, 5.5's fused kernels): no NumPy beyond allocation and dtypes (no
  ``np.matmul``, ``np.exp``, ``np.add.reduce``...), no ``@``, no array method that
  computes (``.dot()``, ``.sum()``), no other library; a CUDA kernel calls no host
  function;
* the bfloat16 codec (6.3): the same, and no dtype conversion by NumPy doing the codec
  (``.astype(bfloat16)``);
* the ring all-reduce (6.1): point-to-point messages only, no MPI collective.

And for every one of them: no ``getattr``, ``exec`` and the like, nothing bound where
the reading cannot see it. What is read is everything the task's functions can run:
a helper of yours in the same file or another one, whatever a name is rebound to
(``gemm = ...`` after the ``def``), code that changes the task's module from outside.

The test reads your tree as the grader reads your submission: the given code it trusts
is the handout's that the reference's own functions of the task reach, unchanged
(``autograder/own_work_given.py`` lists it); so a task that passes here loses nothing to
this reading in the grade, and the other way round. In the reference's own tree, the
reference's walk is the trust. Each stage's ``test_own_work.py`` runs
:func:`assert_own_loops` for its tasks.
"""

from __future__ import annotations

from typing import Any

import pytest

from autograder.own_work import library_work, local_trust, read_tree
from autograder.paths import ROOT, available_tasks, course_tasks
from autograder.regions import stub_pattern
from autograder.task import Task


def own_work_tasks(stage: int) -> list[Any]:
    """The stage's tasks with an own-work rule, as parameters with their markers."""
    return [
        pytest.param(t, marks=getattr(pytest.mark, t.marker), id=t.id)
        for t in available_tasks(ROOT)
        if t.own_work and t.stage == stage
    ]


def assert_own_loops(task: Task) -> None:
    """The task is done, and the code its functions reach keeps the task's rule."""
    for path in task.files:
        text = (ROOT / path).read_text(encoding="utf-8")
        assert not stub_pattern(task.id).search(text), (
            f"task {task.id} is not done yet: {path} still has its stub"
        )
    tree = read_tree(ROOT, {p for t in course_tasks(ROOT) for p in t.files})
    uses = [u.message() for u in library_work(tree, task, local_trust(tree, task))]
    assert not uses, (
        f"task {task.id} asks for your own work, and this is not (it earns nothing): "
        + "; ".join(uses)
    )
