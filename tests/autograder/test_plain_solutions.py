"""Tasks are graded by their contract: a straightforward answer earns full marks.

``tests/autograder/plain/`` holds plain, MiniTorch-sized solutions of the tasks whose
reference is deliberately elaborate (2.1, 2.2: chunked fast paths; 2.3: packing and a
register-blocked micro-kernel; 4.1, 4.2: unfolding and register-blocked taps): a
``prange`` over outputs, loop nests; and of stage 5's tasks, written from
``module5/README.md`` alone (``plain/stage5.py``), and of stage 6's, from
``module6/README.md`` (``plain/stage6.py``). They are filled into
a fresh handout between the tasks' begin and end lines, exactly as a student would
write them; every other task's file comes from the reference; and the grader must give
those tasks full marks (2.3's speed included). The textbook triple loop as 2.3's
``gemm`` gives right values but loses the speed check, and only that.

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
from tests.autograder.isolation import need
from tests.autograder.plain import stage2, stage4, stage5, stage6

ROOT = Path(__file__).resolve().parents[2]
PLAIN = {**stage2.BODIES, **stage4.BODIES, **stage5.BODIES, **stage6.BODIES}
TASK_IDS = (
    "2.1",
    "2.2",
    "2.3",
    "4.1",
    "4.2",
    "4.6",
    "5.1",
    "5.2",
    "5.3",
    "5.4",
    "5.5",
    "5.6",
    "6.1",
    "6.2",
    "6.3",
    "6.4",
)


def test_the_plain_solutions_write_exactly_the_stubs_of_their_tasks() -> None:
    for task_id in TASK_IDS:
        written = {name for tid, name in PLAIN if tid == task_id}
        listed = {spec.split(":", 1)[1] for spec in get_task(task_id).functions}
        assert written == listed, task_id


def plain_submission(sub: Path, bodies: dict[tuple[str, str], str]) -> Path:
    """A fresh handout in ``sub`` with ``bodies`` filled into the stubs of their tasks
    and the reference for every other task's files."""
    task_ids = {task_id for task_id, _ in bodies}
    write_handout(ROOT, sub)
    plain_files = {path for task_id in task_ids for path in get_task(task_id).files}
    for task in TASKS:
        for rel in task.files:
            if rel not in plain_files:
                shutil.copy2(ROOT / rel, sub / rel)
    for rel in sorted(plain_files):
        text, used = fill_text((sub / rel).read_text(encoding="utf-8"), bodies)
        assert not any(stub_pattern(t).search(text) for t in task_ids), rel
        assert used, rel
        (sub / rel).write_text(text, encoding="utf-8")
    return sub


@pytest.fixture(scope="module")
def submission(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plain solutions of 2.1, 2.2, 2.3, 4.1, 4.2; the reference elsewhere."""
    return plain_submission(tmp_path_factory.mktemp("plain") / "submission", PLAIN)


def test_plain_solutions_get_full_marks_from_the_grader(submission: Path) -> None:
    need()  # the grader's isolation (tests/autograder/isolation.py)
    report = grade(submission, root=ROOT, task_ids=TASK_IDS, limits=Limits(per_task_seconds=900))
    summary = {
        s.task.id: (s.score, s.passed, s.total, s.problem, s.failures[:2]) for s in report.scores
    }
    assert [s.task.id for s in report.scores] == list(TASK_IDS)
    for score in report.scores:
        assert score.total >= 3, summary
        assert score.score == score.task.points, summary


def test_the_naive_triple_loop_loses_the_speed_check_of_2_3_only(tmp_path: Path) -> None:
    need()  # the grader's isolation (tests/autograder/isolation.py)
    sub = plain_submission(tmp_path / "naive", {("2.3", "gemm"): stage2.NAIVE_GEMM})
    (score,) = grade(sub, root=ROOT, task_ids=["2.3"]).scores
    assert [check for check, _ in score.failures] == ["2.3:gemm_speed"], score.report()
    assert score.failures[0][1].startswith("too slow: the fastest of 5 rounds"), score.report()
    assert score.passed == score.total - 1 and not score.problem, score.report()
