"""Tasks of stage 6 with an own-work rule: the ring all-reduce (6.1) sends point-to-point
messages only, no collective stands in for it; the bfloat16 codec (6.3) is your own
bit arithmetic, no dtype conversion of NumPy's (see ``tests/own_work.py`` and
module6/README.md)."""

from __future__ import annotations

import pytest

from autograder.task import Task
from tests.own_work import assert_own_loops, own_work_tasks


@pytest.mark.parametrize("task", own_work_tasks(6))
def test_the_tasks_code_is_your_own_loops(task: Task) -> None:
    assert_own_loops(task)
