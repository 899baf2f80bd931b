"""The grading workspace of the real course: an allow-list that holds no solution, and a
run from the reference repository that can read none (``tests/autograder/snoop.py``).

Before: the workspace was every file git tracks, so a submission that left its stubs
alone and executed ``tests/autograder/plain/`` into its own modules took 40 of 40 points
of stage 2 (and the same for 4.1 and 4.2) when graded from the reference repository.
"""

from __future__ import annotations

import secrets
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.grade import Limits, grade, workspace_files
from autograder.paths import ROOT
from autograder.regions import find_regions, stub_text
from autograder.registry import TASKS
from tests.autograder.isolation import TIERS, in_tier
from tests.autograder.snoop import snoop, snooped_in


def test_the_workspace_is_the_stage_packages_and_the_checks_only() -> None:
    files = {rel.as_posix() for rel in workspace_files(ROOT)}
    declared = {path for task in TASKS for path in task.files}
    assert declared <= files
    assert {f"tests/module{t.stage}/checks.py" for t in TASKS} <= files
    assert {"autograder/checks.py", "tests/__init__.py", "tests/strict.py"} <= files
    tops = {path.split("/")[0] for path in files}
    assert tops == {"autograder", "tests"} | {f"module{t.stage}" for t in TASKS}, tops
    assert not [p for p in files if p.startswith("tests/autograder/")]
    assert not [p for p in files if Path(p).name.startswith("test_")]
    assert not [p for p in files if p.startswith("autograder/") and p not in (
        "autograder/__init__.py", "autograder/checks.py")]  # fmt: skip
    for path in sorted(files - declared):  # given code holds no solution region
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        if path.endswith(".py"):
            assert not find_regions(text, path), path


@pytest.mark.parametrize("tier", TIERS)
def test_a_run_from_the_reference_repository_reads_no_solution(tmp_path: Path, tier: str) -> None:
    sub = tmp_path / "sub" / "module0"
    sub.mkdir(parents=True)
    stub = stub_text((ROOT / "module0/operators.py").read_text(encoding="utf-8"), "operators")
    (sub / "operators.py").write_text(stub + snoop([ROOT, tmp_path]), encoding="utf-8")
    with in_tier(tier):
        report = grade(tmp_path / "sub", root=ROOT, task_ids=["0.1"],
                       limits=Limits(per_task_seconds=120))  # fmt: skip
    found = snooped_in(report)
    assert found == {"visible": str(len(workspace_files(ROOT))), "holding": "0",
                     "first": "-"}, report.scores[0].report()  # fmt: skip


def test_a_grade_reads_nothing_of_another_grade_running_at_the_same_time(tmp_path: Path) -> None:
    """Tier 2 runs each grade as a user of its own, and a grade's folder (the workspace:
    the submission's files) is that user's only: a second grade at the same time, another
    user, can read none of it. (The folder was open to all: found when the suite first
    ran in two workers, a snoop reading another test's submission in ``/tmp``.)"""
    flag = Path(tempfile.gettempdir()) / f"minitorch-test-{secrets.token_hex(8)}"
    first = tmp_path / "first" / "module0"
    first.mkdir(parents=True)
    hold = (  # the first grade's run waits (at most 60 s) until the second has snooped
        f"\nimport os, time\nfor _ in range(600):\n    if os.path.exists({str(flag)!r}):\n"
        "        break\n    time.sleep(0.1)\n"
    )
    reference = (ROOT / "module0/operators.py").read_text(encoding="utf-8")
    (first / "operators.py").write_text(reference + hold, encoding="utf-8")  # holds regions
    second = tmp_path / "second" / "module0"
    second.mkdir(parents=True)
    (second / "operators.py").write_text(
        stub_text(reference, "operators") + snoop([tmp_path]), encoding="utf-8"
    )
    limits = Limits(per_task_seconds=120)
    started = threading.Event()

    def log(line: str) -> None:
        if line.startswith("grading task"):
            started.set()

    with in_tier(sandbox.USER), ThreadPoolExecutor(1) as pool:
        try:
            holding = pool.submit(
                grade, tmp_path / "first", root=ROOT, task_ids=["0.1"], limits=limits, log=log
            )
            assert started.wait(60), "the first grade never reached its run"
            for _ in range(100):  # its run's process, as its own user, is up
                if any(u in sandbox.USER_UIDS for u in sandbox._process_uids().values()):
                    break
                time.sleep(0.1)
            report = grade(tmp_path / "second", root=ROOT, task_ids=["0.1"], limits=limits)
        finally:
            flag.touch()
        holding.result()
        flag.unlink()
    found = snooped_in(report)
    assert (found["holding"], found["first"]) == ("0", "-"), report.scores[0].report()
