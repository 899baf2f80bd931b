"""Tasks are graded by their contract: a straightforward answer earns full marks.

``tests/autograder/plain/`` holds plain, MiniTorch-sized solutions of the tasks whose
reference is deliberately elaborate (2.1, 2.2: chunked fast paths; 4.1, 4.2: unfolding
and register-blocked taps): a ``prange`` over outputs, loop nests. They are filled into
a fresh handout between the tasks' begin and end lines, exactly as a student would
write them; every other task's file comes from the reference; and the grader must give
the four tasks full marks.

These files are solutions: they live in ``tests/autograder/``, which no handout ships.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.grade import Limits, grade
from autograder.regions import fill_text, stub_pattern
from autograder.registry import TASKS, get_task
from autograder.release import write_handout
from tests.autograder.plain import stage2, stage4

ROOT = Path(__file__).resolve().parents[2]
PLAIN = {**stage2.BODIES, **stage4.BODIES}
TASK_IDS = ("2.1", "2.2", "4.1", "4.2")


def test_the_plain_solutions_write_exactly_the_stubs_of_their_tasks() -> None:
    for task_id in TASK_IDS:
        written = {name for tid, name in PLAIN if tid == task_id}
        listed = {spec.split(":", 1)[1] for spec in get_task(task_id).functions}
        assert written == listed, task_id


@pytest.fixture(scope="module")
def submission(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh handout with the plain solutions of 2.1, 2.2, 4.1, 4.2 and the reference
    for every other task's files."""
    sub = tmp_path_factory.mktemp("plain") / "submission"
    write_handout(ROOT, sub)
    plain_files = {path for task_id in TASK_IDS for path in get_task(task_id).files}
    for task in TASKS:
        for rel in task.files:
            if rel not in plain_files:
                shutil.copy2(ROOT / rel, sub / rel)
    for rel in sorted(plain_files):
        text, used = fill_text((sub / rel).read_text(encoding="utf-8"), PLAIN)
        assert not any(stub_pattern(t).search(text) for t in TASK_IDS), rel
        assert used, rel
        (sub / rel).write_text(text, encoding="utf-8")
    return sub


def test_plain_solutions_get_full_marks_from_the_grader(submission: Path) -> None:
    report = grade(submission, root=ROOT, task_ids=TASK_IDS, limits=Limits(per_task_seconds=900))
    summary = {
        s.task.id: (s.score, s.passed, s.total, s.problem, s.failures[:2]) for s in report.scores
    }
    assert [s.task.id for s in report.scores] == list(TASK_IDS)
    for score in report.scores:
        assert score.total >= 3, summary
        assert score.score == score.task.points, summary
