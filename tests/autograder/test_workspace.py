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
from autograder.leftovers import process_uids
from autograder.paths import ROOT
from autograder.regions import find_regions, stub_text
from autograder.registry import TASKS
from tests.autograder.isolation import TIERS, in_tier, need
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


@pytest.mark.parametrize("first", TIERS)
def test_a_grade_reads_nothing_of_another_grade_running_at_the_same_time(
    tmp_path: Path, first: str
) -> None:
    """A grade's folder (the workspace: the submission's files) is that grade's only: a
    second grade at the same time, in tier 2 (a user of its own), reads none of it,
    whether the first runs in tier 2 too (another user) or in tier 1. (The folder was
    open to all: found when the suite first ran in two workers, a snoop reading another
    test's submission in ``/tmp``.)"""
    need(sandbox.USER)
    token = secrets.token_hex(8)
    holder = tmp_path / "first" / "module0"
    holder.mkdir(parents=True)
    hold = (  # the first grade's run waits (at most 60 s) for the test's word in its workspace
        "\nimport os, time\n_top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
        f"_go = os.path.join(_top, {token!r})\n"
        "for _ in range(600):\n    if os.path.exists(_go):\n        break\n    time.sleep(0.1)\n"
    )
    reference = (ROOT / "module0/operators.py").read_text(encoding="utf-8")
    (holder / "operators.py").write_text(reference + hold, encoding="utf-8")  # holds regions
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

    runs_as = {sandbox.SANDBOX_UID, *sandbox.USER_UIDS}
    with ThreadPoolExecutor(1) as pool:
        try:
            with in_tier(first):
                holding = pool.submit(
                    grade, tmp_path / "first", root=ROOT, task_ids=["0.1"], limits=limits, log=log
                )
                assert started.wait(60), "the first grade never reached its run"
                for _ in range(100):  # its run's process, as its own user, is up
                    if runs_as & set(process_uids().values()):
                        break
                    time.sleep(0.1)
            with in_tier(sandbox.USER):
                report = grade(tmp_path / "second", root=ROOT, task_ids=["0.1"], limits=limits)
        finally:  # the word, in the first grade's workspace (found by its own file)
            for work in Path(tempfile.gettempdir()).glob("minitorch-grade-*/work"):
                mine = work / "module0" / "operators.py"
                if mine.is_file() and token in mine.read_text(encoding="utf-8"):
                    (work / token).touch()
        holding.result()
    found = snooped_in(report)
    assert (found["holding"], found["first"]) == ("0", "-"), report.scores[0].report()
