"""The reference's answers are the grader's oracle: a check the reference does not
answer (an error it did not expect, or a check that runs past its time) stops the grade
and names the check, rather than becoming the answer every submission is held to.

Before: a timeout's record had no message, so the reference's "timeout after 60 s" was
taken as its answer. A release on a slow 2-core machine then failed with "1 line of its
answer pipe were not valid answers": the reference, graded against its own timeout,
answered at length (task 5.5's ``causal_attention``, whose kernels took 64 s to compile).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.grade import Limits, prepare, selected_tasks
from tests.autograder.toy import toy_course

SLOW_CHECK = """

@check("1.1")
def slow(rng: np.random.Generator) -> Any:
    import time

    time.sleep(30)
    return 1.0
"""


def test_a_reference_check_that_runs_past_its_time_stops_the_grade(tmp_path: Path) -> None:
    tree = toy_course(tmp_path / "course")
    checks = tree / "tests" / "module1" / "checks.py"
    checks.write_text(checks.read_text(encoding="utf-8") + SLOW_CHECK, encoding="utf-8")
    limits = Limits(per_test_seconds=1, per_task_seconds=120, memory_mb=None)
    with pytest.raises(RuntimeError) as caught:
        prepare(tree, selected_tasks(tree, None, ["1.1"]), limits=limits, seed=1)
    message = str(caught.value)
    assert "the reference does not answer check 1.1:slow" in message
    assert "more than 1 s" in message
