"""Your own loops: the tasks that ask you to write a computation (stage 2's kernels and
matmul, stage 3's CUDA kernels, stage 4's convolutions) earn nothing when their code
does library work instead: NumPy's routines beyond allocation and dtypes (``np.matmul``,
``np.exp``, ``np.add.reduce``...), the ``@`` operator, array methods such as ``.dot()``
or ``.sum()``, another numerical library, ``getattr`` and similar ways around these, or
(stage 3) a CUDA kernel calling a host function. The grader reads your code the same
way (``autograder/own_work.py``; the rule is in each stage's README).

Each such stage's ``test_own_work.py`` runs :func:`assert_own_loops` for its tasks.
"""

from __future__ import annotations

from typing import Any

import pytest

from autograder.own_work import library_work
from autograder.paths import ROOT, available_tasks
from autograder.regions import stub_pattern
from autograder.task import Task


def own_work_tasks(stage: int) -> list[Any]:
    """The stage's tasks that ask for your own loops, as parameters with their markers."""
    return [
        pytest.param(t, marks=getattr(pytest.mark, t.marker), id=t.id)
        for t in available_tasks(ROOT)
        if t.own_work and t.stage == stage
    ]


def assert_own_loops(task: Task) -> None:
    """The task is done, and the code its functions reach does no library work."""
    for path in task.files:
        text = (ROOT / path).read_text(encoding="utf-8")
        assert not stub_pattern(task.id).search(text), (
            f"task {task.id} is not done yet: {path} still has its stub"
        )
        module = path.removesuffix(".py").replace("/", ".")
        names = [f.split(":", 1)[1] for f in task.functions if f.startswith(module + ":")]
        uses = [u.message(path) for u in library_work(text, names, cuda=task.stage == 3)]
        assert not uses, (
            f"task {task.id} asks for your own loops, and this is library work, which "
            "earns nothing: " + "; ".join(uses)
        )
