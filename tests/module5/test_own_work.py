"""Tasks of stage 5 that ask for your own loops: library work in their code earns
nothing (see ``tests/own_work.py`` and module5/README.md, "Task 5.5")."""

from __future__ import annotations

import pytest

from autograder.task import Task
from tests.own_work import assert_own_loops, own_work_tasks


@pytest.mark.parametrize("task", own_work_tasks(5))
def test_the_tasks_code_is_your_own_loops(task: Task) -> None:
    assert_own_loops(task)
