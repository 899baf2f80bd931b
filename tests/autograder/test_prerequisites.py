"""What a grade and a release do where a tool some tasks need is missing (issue 38), and
that what the ``minitorch`` command prints is printed as it is.

Stage 6's tasks 6.1 and 6.2 start MPI ranks (mpi4py and ``mpiexec``: the ``dist`` extra).
Before: a self-learner's ``minitorch grade ../my-course --out results
--unsafe-no-sandbox`` without the extra gave 0 / 405, every task "grading failed: the
reference does not answer check 6.1 ... no mpiexec"; ``minitorch release`` failed after
minutes with a page of skipped tests whose install command had lost its ``[dist]`` to
the console's markup. Now the registry says what a task needs (``Task.needs``), a grade
reports those tasks as not graded (not as failed) before anything runs and grades every
other one, and a release refuses at once, naming ``pip install -e ".[dist]"``.

MPI is made missing here by a tool that is absent for real (a toy task that needs a
module no environment has, with a check that imports it, as 6.1's checks need
``mpiexec``), or, for the real course's stage 6, by the lookup of the grader's probe
(``autograder.task._importable``) saying that mpi4py is not installed.
"""

from __future__ import annotations

import json
import signal
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autograder import cli, task
from autograder.grade import GradeReport, Limits, TaskScore, grade, grade_to
from autograder.registry import MPI, TASKS
from autograder.release import ReleaseError, check_prerequisites, release
from autograder.task import Tool, missing_tools
from tests.autograder.toy import toy_course, toy_tasks

ROOT = Path(__file__).resolve().parents[2]
INSTALL = 'pip install -e ".[dist]"'
ABSENT = "mpi4py_absent_in_every_environment"
LIMITS = Limits(per_test_seconds=30, per_task_seconds=120, memory_mb=None)


def toy_needing_a_missing_tool(dest: Path) -> Path:
    """The toy course with task 1.1 needing "MPI", here a module no environment has; its
    checks gain one that imports it, so the reference cannot answer it (as 6.1's checks
    cannot without ``mpiexec``)."""
    tree = toy_course(dest)
    registry = tree / "autograder" / "registry.py"
    text = registry.read_text(encoding="utf-8")
    text = text.replace(
        "from autograder.task import Task\n",
        "from autograder.task import Task, Tool\n\n"
        f"MPI = Tool('MPI', install={INSTALL!r}, modules=({ABSENT!r},))\n",
    )
    text = text.replace(
        'functions=("module1.vectors:dot",),',
        'functions=("module1.vectors:dot",),\n        needs=(MPI,),',
    )
    assert text.count("needs=(MPI,)") == 1
    registry.write_text(text, encoding="utf-8")
    checks = tree / "tests" / "module1" / "checks.py"
    checks.write_text(
        checks.read_text(encoding="utf-8")
        + f'\n\n@check("1.1")\ndef ranks(rng: np.random.Generator) -> Any:\n'
        f"    import {ABSENT}  # noqa: F401\n\n    return 1\n",
        encoding="utf-8",
    )
    return tree


@pytest.fixture
def no_mpi4py(monkeypatch: pytest.MonkeyPatch) -> None:
    """This Python's probe finds no mpi4py, as where the dist extra is not installed."""
    found = task._importable
    monkeypatch.setattr(task, "_importable", lambda name: name != "mpi4py" and found(name))


def test_a_tool_says_what_of_it_is_missing() -> None:
    here = Tool("here", install="nothing", modules=("json",), programs=("sh",))
    assert here.missing() == ""
    gone = Tool("gone", install="x", modules=("json", ABSENT), programs=("sh", "no-such-tool-38"))
    assert gone.missing() == (
        f"{ABSENT} is not installed; no no-such-tool-38 beside this Python or on the PATH"
    )
    assert Tool("p", install="x", programs=("sh",)).missing(path="/nonexistent") in (
        "",  # a sh beside this Python
        "no sh beside this Python or on the PATH",
    )


def test_stage_6s_ranks_need_mpi_from_the_dist_extra(no_mpi4py: None) -> None:
    assert [t.id for t in TASKS if MPI in t.needs] == ["6.1", "6.2"]
    assert MPI.install == INSTALL and MPI.modules == ("mpi4py",)
    (gap,) = missing_tools(TASKS)
    assert (gap.tool, gap.why, gap.task_ids) == (MPI, "mpi4py is not installed", "tasks 6.1, 6.2")


def test_a_grade_without_a_tool_grades_every_other_task(tmp_path: Path) -> None:
    """The toy's 1.1 needs a missing tool: 0.1 and 0.2 are graded (full marks for the
    reference), 1.1 is "not graded", in every format, with the install command; no
    check of 1.1 ran (before: the reference's run of its checks failed the whole grade,
    every task "grading failed")."""
    tree = toy_needing_a_missing_tool(tmp_path / "toy")
    lines: list[str] = []
    report = grade_to(tree, tmp_path / "out", root=tree, limits=LIMITS, log=lines.append,
                      unsafe_no_sandbox=True)  # fmt: skip
    assert not report.grader_error, report.grader_error
    scores = {s.task.id: s for s in report.scores}
    assert {i: s.score for i, s in scores.items()} == {"0.1": 10, "0.2": 10, "1.1": 0}
    assert [s.task.id for s in report.not_graded] == ["1.1"]
    skipped = scores["1.1"]
    assert skipped.status == "not graded" and not skipped.failures and not skipped.problem
    assert skipped.not_graded == (
        f"needs MPI ({ABSENT} is not installed): {INSTALL} in the grader's environment"
    )
    assert skipped.skipped_ids == ["1.1:dot", "1.1:dot_lengths", "1.1:ranks"]
    assert lines[0] == f"not graded here: task 1.1: {skipped.not_graded}", lines
    assert not [line for line in lines if "1.1" in line and "grading task" in line]

    first, how = report.not_graded_lines()
    assert first.startswith("NOT GRADED here: task 1.1 (10 of 30 points)")
    assert "not because of the submission" in first
    assert f"-m {INSTALL}" in how and "--task 1.1 grades only it" in how, how

    summary = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("# Grade: 20 / 30\n\n**NOT GRADED here: task 1.1"), summary
    row = [line for line in summary.splitlines() if line.startswith("| 1.1 |")]
    assert row == [f"| 1.1 | Dot product | not graded | - | NOT GRADED here: "
                   f"{skipped.not_graded} |"], row  # fmt: skip

    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert results["score"] == 20 and results["not_graded"] == [
        {"task": "1.1", "why": skipped.not_graded}
    ]
    test = results["tests"][2]
    assert test["name"] == "Task 1.1: Dot product (NOT GRADED here)" and "status" not in test
    assert test["output"].startswith(f"NOT GRADED here: {skipped.not_graded}")
    assert [t["status"] for t in results["tests"][:2]] == ["passed", "passed"]

    classroom = json.loads((tmp_path / "out" / "classroom.json").read_text(encoding="utf-8"))
    assert [t["status"] for t in classroom["tests"]] == ["pass", "pass", "error"]
    suite = ET.parse(tmp_path / "out" / "junit.xml").getroot()[2]
    assert (suite.get("skipped"), suite.get("failures")) == ("3", "0")
    assert [c[0].tag for c in suite] == ["skipped"] * 3


def test_the_real_course_names_6_1_and_6_2_before_running_anything(
    tmp_path: Path, no_mpi4py: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without mpi4py, a grade of stage 6's MPI tasks runs no check at all (not even the
    reference's): both are reported not graded, naming the dist extra, in seconds."""

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the reference's answers were computed")

    monkeypatch.setattr("autograder.grade.reference_answers", never)
    start = time.monotonic()
    report = grade(ROOT, root=ROOT, task_ids=["6.1", "6.2"], unsafe_no_sandbox=True)
    assert time.monotonic() - start < 60
    assert [(s.task.id, s.not_graded) for s in report.scores] == [
        (i, f"needs MPI (mpi4py is not installed): {INSTALL} in the grader's environment")
        for i in ("6.1", "6.2")
    ]
    assert report.score == 0 and report.max_score == 30


def test_a_release_refuses_at_once_without_a_tool_and_names_it(tmp_path: Path) -> None:
    """Before: the verification ran for minutes, then failed on the skipped tests."""
    tree = toy_needing_a_missing_tool(tmp_path / "toy")
    out = tmp_path / "handout"
    start = time.monotonic()
    with pytest.raises(ReleaseError) as refused:
        release(out, root=tree)
    assert time.monotonic() - start < 10
    message = str(refused.value)
    assert message.startswith(
        f"the verification cannot run here: MPI is missing ({ABSENT} is not installed), "
        "and the tests and graded checks of task 1.1 need it. Install it "
        f"({INSTALL}) into this Python and release again: cd {tree} && "
    ), message
    assert message.endswith(
        f"-m {INSTALL}; or release only the stages before 1: --through 0; or write a copy "
        "for yourself, not verified and never for handing out: --no-verify"
    ), message
    assert not out.exists()
    check_prerequisites(toy_tasks(tree, 0), tree)  # stage 0 alone needs nothing missing
    release(out, root=tree, check=False)  # nor does an unverified copy
    assert (out / "module1" / "vectors.py").is_file()


def test_a_release_needs_the_dev_extra_to_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    found = task._importable
    monkeypatch.setattr(task, "_importable", lambda name: name != "hypothesis" and found(name))
    with pytest.raises(ReleaseError, match=r"the dev extra \(pytest, Hypothesis\) is missing "
                       r"\(hypothesis is not installed\)"):  # fmt: skip
        check_prerequisites((), ROOT)


# -- the console prints what it is given ----------------------------------------------------


@pytest.fixture(autouse=True)
def sigterm_kept() -> Iterator[None]:
    """``cli.main`` sets its own SIGTERM handler: this process's is put back."""
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


LITERAL = 'pip install -e ".[dist]" [red]not red[/red] :warning: C:\\dir\\'


def test_the_release_refusal_prints_the_install_command_whole(
    tmp_path: Path, no_mpi4py: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``minitorch release`` of the real course without mpi4py: refused before anything
    is written, and ``[dist]`` printed (before: ``pip install -e "."``)."""
    assert cli.main(["release", str(tmp_path / "handout")]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith("release refused: the verification cannot run here: MPI is "
                              "missing (mpi4py is not installed)"), printed  # fmt: skip
    assert f"Install it ({INSTALL})" in printed and f"-m {INSTALL};" in printed, printed
    assert "--through 5" in printed and not (tmp_path / "handout").exists()


def test_every_line_the_command_prints_is_printed_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Log lines, refusals, summaries and problems hold test output, paths and messages:
    none is markup (``[dist]`` kept, ``[red]`` not a colour, ``:warning:`` not an emoji,
    a trailing backslash not doubled)."""

    def release(*args: object, log: Callable[[str], None], **kwargs: object) -> None:
        log(f"log line: {LITERAL}")
        raise ReleaseError(f"refusal: {LITERAL}")

    monkeypatch.setattr("autograder.release.release", release)
    assert cli.main(["release", str(tmp_path / "handout")]) == 1
    assert capsys.readouterr().out == f"log line: {LITERAL}\nrelease refused: refusal: {LITERAL}\n"

    def grade_to(
        submission: Path, out: Path, *, log: Callable[[str], None], **kwargs: object
    ) -> GradeReport:
        log(f"graded: {LITERAL}")
        (tmp_path / "out").mkdir(exist_ok=True)
        (out / "summary.md").write_text(f"# summary: {LITERAL}\n", encoding="utf-8")
        (toy,) = [t for t in TASKS if t.id == "0.1"]
        return GradeReport([TaskScore(toy)], 1.0, grader_error=f"RuntimeError: {LITERAL}")

    monkeypatch.setattr("autograder.grade.grade_to", grade_to)
    assert cli.main(["grade", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().out == (
        f"graded: {LITERAL}\n# summary: {LITERAL}\n\nscore 0 / 10; results in {tmp_path / 'out'}\n"
    )

    def bundle(*args: object, **kwargs: object) -> None:
        raise ValueError(LITERAL)

    monkeypatch.setattr("autograder.bundle.build_gradescope_bundle", bundle)
    assert cli.main(["gradescope-bundle", str(tmp_path / "a.zip")]) == 1
    assert capsys.readouterr().out == f"bundle not built: {LITERAL}\n"


def test_status_says_not_checked_where_grade_says_not_graded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``minitorch status`` and ``minitorch grade`` agree where a tool is missing: the
    task is "not checked" (0 points, not "failed"), with the install command, and the
    next step is not that task."""
    import io

    from rich.console import Console

    from autograder import status

    monkeypatch.setenv(status.CACHE_VARIABLE, str(tmp_path / "cache"))
    tree = toy_needing_a_missing_tool(tmp_path / "toy")
    statuses, _ = status.collect_status(tree, console=Console(file=io.StringIO()))
    by_id = {s.task.id: s for s in statuses}
    assert by_id["1.1"].state == "not checked" and by_id["1.1"].points == 0.0
    assert ABSENT in by_id["1.1"].missing and INSTALL in by_id["1.1"].missing
    assert all(s.state == "passed" for s in statuses if s.task.id != "1.1")
    out = io.StringIO()
    assert status.run_status(tree, console=Console(file=out, width=300)) == 0
    said = out.getvalue()
    assert "Not checked here: task(s) 1.1: their tests need MPI" in said, said
    assert INSTALL in said and "Every task passes" in said, said


def test_status_shows_a_message_as_written_without_pytests_own_hints() -> None:
    """A failing test's message goes to the student as it is (a ``[dist]`` is no markup,
    ``:warning:`` no emoji), without pytest's hints for its own command line (``Use -v
    to get more diff``: ``minitorch test`` takes no ``-v``)."""
    import io

    from rich.console import Console

    from autograder import status
    from autograder.runner import TestResult

    text = 'pip install -e ".[dist]" [red]not red[/red] :warning:\nUse -v to get more diff'
    result = TestResult("tests/module6/test_half.py::t", "failed",
                        details={"type": "AssertionError", "text": text})  # fmt: skip
    lines = status._message(result)
    assert lines == ['AssertionError: pip install -e ".[dist]" [red]not red[/red] :warning:']
    out = io.StringIO()
    Console(file=out, width=200).print(status.literal_line(f"    {lines[0]}"))
    assert out.getvalue().strip() == lines[0]
