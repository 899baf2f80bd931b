"""The ``minitorch`` command: ``status``, ``test`` and ``grade``.

Each command runs the way a student or an instructor runs it, in a subprocess
(``python -m autograder.cli`` with the tree as working folder and PYTHONPATH), on the
reference and on a handout written with ``write_handout`` (no verification: the release
tests do that). ``status`` is also checked through ``collect_status``.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from autograder.regions import fill_text, reference_bodies
from autograder.registry import TASKS, tasks_for_stage
from autograder.release import shaped_reference, write_handout
from autograder.status import collect_status, still_stubbed
from tests.autograder.isolation import need, processes_naming

ROOT = Path(__file__).resolve().parents[2]
TOTAL = sum(t.points for t in TASKS)
STAGE0 = tasks_for_stage(0)
FILES = sorted({path for task in STAGE0 for path in task.files})


@pytest.fixture(scope="module")
def quick_hypothesis() -> Iterator[None]:
    """Child test runs inherit HYPOTHESIS_PROFILE: few examples, no shrinking."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HYPOTHESIS_PROFILE", "verify")
        yield


@pytest.fixture(scope="module")
def handout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "handout"
    write_handout(ROOT, out)
    return out


def minitorch(tree: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``minitorch ARGS`` run from ``tree``, with that tree's tooling."""
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "autograder.cli", *args], cwd=tree, env=env,
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def table_rows(output: str) -> dict[str, list[str]]:
    """Task id -> the cells of its row in the status table."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line)[1:-1]]
        if len(cells) == 6 and re.fullmatch(r"\d+\.\d+", cells[1]):
            rows[cells[1]] = cells
    return rows


# -- status -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference0() -> Path:
    """The reference as a stage-0 release ships it: status runs the suite of the tree it
    is given, so a stage-0 tree keeps these tests to seconds (the suite itself checks the
    reference's other stages)."""
    return shaped_reference(ROOT, 0)


def test_status_of_the_reference(reference0: Path, quick_hypothesis: None) -> None:
    statuses, run = collect_status(reference0, console=Console(file=io.StringIO()))
    assert [s.task.id for s in statuses] == [t.id for t in STAGE0]
    for status in statuses:
        assert status.state == "passed", (status.task.id, status.passed, status.total)
        assert status.total >= 3 and not status.stubbed
    assert sum(s.points for s in statuses) == sum(t.points for t in STAGE0)
    assert run.collect_errors == []


def test_status_of_a_handout(handout: Path, quick_hypothesis: None) -> None:
    statuses, _ = collect_status(handout, console=Console(file=io.StringIO()))
    assert [s.task.id for s in statuses] == [t.id for t in TASKS]
    for status in statuses:
        assert status.state == "not started", status.task.id
        assert status.passed == 0 and status.total >= 3 and status.stubbed
    assert sum(s.points for s in statuses) == 0


def test_still_stubbed_sees_stubs_and_nothing_else(handout: Path) -> None:
    # "not started" rests on this: the reference has no stub left, the handout one per
    # task and file.
    for task in TASKS:
        assert not still_stubbed(task, ROOT), f"task {task.id}: the reference seen as stubbed"
        assert still_stubbed(task, handout), task.id


def test_status_command_on_the_reference(
    reference0: Path, quick_hypothesis: None, tmp_path: Path
) -> None:
    proc = minitorch(reference0, "status", "--out", str(tmp_path / "feedback"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = table_rows(proc.stdout)
    assert sorted(rows) == sorted(t.id for t in STAGE0), proc.stdout
    for task in STAGE0:
        tests, points, state = rows[task.id][3:]
        passed, total = tests.split("/")
        assert passed == total and state == "passed", rows[task.id]
        assert points == f"{task.points:.1f} / {task.points}"
    total = sum(t.points for t in STAGE0)
    assert f"{len(STAGE0)}/{len(STAGE0)} tasks passed" in proc.stdout
    assert f"{total:.1f} / {total}" in proc.stdout
    classroom = json.loads((tmp_path / "feedback" / "classroom.json").read_text())
    assert classroom["status"] == "pass" and classroom["max_score"] == total
    assert [t["score"] for t in classroom["tests"]] == [float(t.points) for t in STAGE0]


def test_status_command_on_a_handout(handout: Path, quick_hypothesis: None, tmp_path: Path) -> None:
    proc = minitorch(handout, "status", "--out", str(tmp_path / "feedback"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # What the GitHub Classroom job reports: every task, 0 points, labelled feedback.
    classroom = json.loads((tmp_path / "feedback" / "classroom.json").read_text())
    assert classroom["version"] == 1 and classroom["max_score"] == TOTAL
    assert [t["name"].split(":")[0] for t in classroom["tests"]] == [f"Task {t.id}" for t in TASKS]
    assert all(t["score"] == 0 and t["status"] == "fail" for t in classroom["tests"])
    summary = (tmp_path / "feedback" / "summary.md").read_text()
    assert summary.startswith(
        f"# Feedback: 0 / {TOTAL} (the tests of this repository; not a grade)"
    )
    assert proc.stdout.rstrip().endswith(
        'Next: task 0.1 (Operators): read module0/README.md, section "Task 0.1", then run: '
        "minitorch test 0.1"
    ), proc.stdout
    rows = table_rows(proc.stdout)
    assert sorted(rows) == sorted(t.id for t in TASKS), proc.stdout
    for task in TASKS:
        assert rows[task.id][5] == "not started", rows[task.id]
        assert rows[task.id][3].startswith("0/")
    assert f"0/{len(TASKS)} tasks passed" in proc.stdout
    assert f"0.0 / {TOTAL}" in proc.stdout


def test_status_and_test_refuse_to_report_on_another_tree(handout: Path) -> None:
    """The reference's ``minitorch``, run inside a handout, would grade the reference:
    it says so and exits 2 instead of showing the wrong tree's progress."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400", "NO_COLOR": "1"}
    for args in (["status"], ["test", "0.1"]):
        proc = subprocess.run(
            [sys.executable, "-m", "autograder.cli", *args], cwd=handout / "module0", env=env,
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"installed from {ROOT}" in proc.stdout, proc.stdout
        assert f"cd {handout} && python3 -m venv .venv" in proc.stdout, proc.stdout
        assert "tasks passed" not in proc.stdout


# -- test -------------------------------------------------------------------------------


def test_test_command_runs_one_task_and_says_what_passed(quick_hypothesis: None) -> None:
    proc = minitorch(ROOT, "test", "0.4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Task 0.4: Central differences and Scalar forward (15 points)" in out
    assert re.search(r"Task 0\.4: (\d+) of \1 tests pass \(15\.0 / 15 points\)", out), out
    assert "Task 0.4 is done." in out
    assert "Traceback" not in out and "Failing" not in out


def test_test_command_on_stubs_prints_one_line_per_function(
    handout: Path, quick_hypothesis: None
) -> None:
    proc = minitorch(handout, "test", "0.3")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    task = next(t for t in TASKS if t.id == "0.3")
    stub_rows = re.findall(r"^  module0/module\.py:(\d+) +(\S+)$", out, re.MULTILINE)
    assert sorted(name for _, name in stub_rows) == sorted(
        f.split(":")[1] for f in task.functions
    ), out
    lines = (handout / "module0/module.py").read_text().splitlines()
    for number, name in stub_rows:  # each line points at that function's stub
        assert f"Task 0.3: implement {name} in" in lines[int(number) - 1]
    assert "Traceback" not in out and "NotImplementedError" not in out
    assert re.search(r"Task 0\.3: 0 of \d+ tests pass \(0\.0 / 10 points\)", out)
    assert len(out.splitlines()) < 15, out


def test_test_command_shows_a_failure_and_only_the_functions_it_called(
    handout: Path, tmp_path: Path, quick_hypothesis: None
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(handout, tree)
    rel = "module0/operators.py"
    bodies = reference_bodies((ROOT / rel).read_text(encoding="utf-8"), rel, {"0.1"})
    text, used = fill_text((tree / rel).read_text(encoding="utf-8"), bodies)
    assert ("0.1", "mul") in used
    wrong = text.replace("    return x * y\n", "    return x + y\n", 1)
    assert wrong != text
    (tree / rel).write_text(wrong, encoding="utf-8")
    proc = minitorch(tree, "test", "0.1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Not written yet" not in out
    assert "Failing tests" in out and "assert 5.0 == 6.0" in out  # obtained vs expected
    looked = re.search(r"^  module0/operators\.py: (.*)$", out, re.MULTILINE)
    assert looked, out
    named = [cell.split(" (")[0] for cell in looked.group(1).split(", ")]
    assert named[0] == "mul" and "sigmoid" not in named and len(named) <= 3, out


def test_test_command_without_a_task_lists_the_tasks() -> None:
    proc = minitorch(ROOT, "test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for task in TASKS:
        assert re.search(rf"^\W*{re.escape(task.id)}\W", proc.stdout, re.MULTILINE), task.id
    assert "minitorch test <task>" in proc.stdout


def test_a_passing_task_names_the_next_one(
    handout: Path, tmp_path: Path, quick_hypothesis: None
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(handout, tree)
    rel = "module0/module.py"
    bodies = reference_bodies((ROOT / rel).read_text(encoding="utf-8"), rel, {"0.3"})
    (tree / rel).write_text(fill_text((tree / rel).read_text(encoding="utf-8"), bodies)[0])
    proc = minitorch(tree, "test", "0.3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Task 0.3 is done. Next: task 0.4" in proc.stdout.replace("\n", " ")
    assert "minitorch test 0.4" in proc.stdout


def test_test_command_rejects_an_unknown_task() -> None:
    proc = minitorch(ROOT, "test", "9.9")
    assert proc.returncode == 2
    assert "9.9" in proc.stdout
    assert ", ".join(t.id for t in TASKS) in proc.stdout


# -- grade ------------------------------------------------------------------------------


def reference_submission(dest: Path) -> Path:
    for rel in FILES:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def check_outputs(out: Path) -> dict[str, object]:
    assert sorted(p.name for p in out.iterdir()) == [
        "classroom.json", "junit.xml", "results.json", "summary.md",
    ]  # fmt: skip
    json.loads((out / "classroom.json").read_text(encoding="utf-8"))
    results: dict[str, object] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return results


def test_grade_command_writes_the_four_files(tmp_path: Path, quick_hypothesis: None) -> None:
    need()  # the grader's isolation (tests/autograder/isolation.py)
    # --reference-prerequisites with --stage 0 grades normally (there is no earlier
    # stage to take from the reference).
    submission = reference_submission(tmp_path / "sub")
    out = tmp_path / "out"
    proc = minitorch(
        ROOT, "grade", str(submission), "--out", str(out), "--stage", "0",
        "--reference-prerequisites", "--per-test-timeout", "60", "--task-timeout", "300",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = check_outputs(out)
    points = sum(t.points for t in STAGE0)
    assert results["score"] == points and results["max_score"] == points
    assert f"score {points} / {points}" in proc.stdout


def test_reference_prerequisites_needs_a_stage(tmp_path: Path) -> None:
    submission = reference_submission(tmp_path / "sub")
    out = tmp_path / "out"
    proc = minitorch(ROOT, "grade", str(submission), "--out", str(out),
                     "--reference-prerequisites")  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the grade itself failed
    results = check_outputs(out)
    assert results["score"] == 0
    assert "--reference-prerequisites needs --stage" in str(results["output"])
    tests = results["tests"]
    assert isinstance(tests, list) and len(tests) == len(TASKS)
    for test in tests:
        assert test["score"] == 0 and "needs --stage" in test["output"]
    assert "needs --stage" in (out / "summary.md").read_text(encoding="utf-8")


def test_ctrl_c_stops_a_runaway_test_run_and_every_process_it_started(
    reference0: Path, tmp_path: Path
) -> None:
    """Before: Ctrl-C skipped the kill, and the pytest child (its own session) ran on,
    an infinite loop at 95% of a core; each retry added another."""
    import signal
    import time

    tree = tmp_path / "course"
    shutil.copytree(reference0, tree, ignore=shutil.ignore_patterns("__pycache__"))
    autodiff = tree / "module0" / "autodiff.py"
    text = autodiff.read_text(encoding="utf-8")
    assert "stack.pop().history" in text
    autodiff.write_text(text.replace("stack.pop().history", "stack[-1].history"))  # a loop
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "200", "NO_COLOR": "1"}
    # A terminal's Ctrl-C: SIGINT at its default, whatever this run inherited (a shell
    # starts a background job with SIGINT ignored, and Python then keeps it ignored).
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder.cli", "test", "0.5"], cwd=tree, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    marker = f"--rootdir={tree}"
    try:
        deadline = time.monotonic() + 120
        while not processes_naming(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_naming(marker), "the test run did not start"
        time.sleep(3)  # in the loop by now
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        for pid in processes_naming(marker):
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130, out + err
    assert "interrupted: stopped, with every process it started" in err, err
    assert "Traceback" not in out + err
    time.sleep(0.5)
    assert processes_naming(marker) == []


MUL_REGION = "    # BEGIN " + "SOLUTION 0.1\n    return x * y"
"""The start of task 0.1's region of ``mul`` in the reference (spelled in two parts, so
this file holds no marker line of its own)."""


def _planted(reference0: Path, tmp_path: Path, rel: str, old: str, new: str) -> Path:
    """A copy of the stage-0 reference with ``old`` replaced by ``new`` in ``rel``."""
    tree = tmp_path / "course"
    shutil.copytree(reference0, tree, ignore=shutil.ignore_patterns("__pycache__"))
    path = tree / rel
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return tree


def test_a_test_that_never_ends_is_stopped_and_named_with_where_it_was(
    reference0: Path, tmp_path: Path
) -> None:
    """Before: the per-test limit was pytest-timeout's 600 s, and a hung Hypothesis test
    outlived it (Hypothesis caught the timeout's exception and went on with examples)."""
    import time

    tree = _planted(reference0, tmp_path, "module0/autodiff.py",
                    "stack.pop().history", "stack[-1].history")  # fmt: skip
    start = time.monotonic()
    proc = minitorch(tree, "test", "0.5", "--test-seconds", "4", timeout=300)
    seconds = time.monotonic() - start
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert re.search(r"did not finish in 4 s: an infinite loop\? last function entered: "
                     r"module0/autodiff\.py:\d+, in topological_sort", out), out  # fmt: skip
    assert "the run stopped there, so the tests after it did not run" in out, out
    assert "--test-seconds" in out and "Traceback" not in out
    assert seconds < 60, f"the run took {seconds:.0f} s: the first hang should end it"
    assert processes_naming(f"--rootdir={tree}") == []


def test_a_test_that_allocates_without_end_fails_with_the_memory_limit_named(
    reference0: Path, tmp_path: Path
) -> None:
    """The run's memory is limited (``--memory-mb``); the test that exhausts it fails
    with a MemoryError saying so, and the tests after it still run (the frames that
    held the allocation are cleared, so pytest itself has memory left to report)."""
    body = MUL_REGION
    tree = _planted(reference0, tmp_path, "module0/operators.py", body,
                    body.replace("    return", "    grown = []\n    while True:\n"
                                 "        grown.append(bytearray(10**7))\n    return"))  # fmt: skip
    proc = minitorch(tree, "test", "0.1", "--memory-mb", "1024", timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "the test used all the memory the run may use (1024 MB)" in out, out
    assert re.search(r"raised in module0/operators\.py:\d+, in mul", out), out
    assert "did not run" not in out and "Traceback" not in out, out
    passed = re.search(r"Task 0\.1: (\d+) of (\d+) tests pass", out)
    assert passed and 0 < int(passed[1]) < int(passed[2]), out  # the others still ran
    assert processes_naming(f"--rootdir={tree}") == []


def test_a_test_stuck_where_no_python_line_runs_ends_the_run_and_is_named(
    reference0: Path, tmp_path: Path
) -> None:
    """A hang inside one C call (here ``time.sleep``; in practice a compiled kernel)
    cannot take the watchdog's exception: after its grace period the test process
    exits, and the report still names the test, the limit and where it was."""
    body = MUL_REGION
    tree = _planted(reference0, tmp_path, "module0/operators.py", body,
                    body.replace("    return", "    __import__('time').sleep(10**6)\n"
                                 "    return"))  # fmt: skip
    os.environ["MINITORCH_WATCHDOG_GRACE"] = "2"  # the child inherits it; 10 s otherwise
    try:
        proc = minitorch(tree, "test", "0.1", "--test-seconds", "2", timeout=300)
    finally:
        del os.environ["MINITORCH_WATCHDOG_GRACE"]
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert re.search(
        r"did not finish in 2 s: an infinite loop\? last function entered: "
        r"module0/operators\.py:\d+, in mul; it could not be interrupted",
        out,
    ), out
    assert "Traceback" not in out, out
    assert processes_naming(f"--rootdir={tree}") == []


def test_a_syntax_error_is_told_in_a_few_lines_by_the_tests_and_the_main_job(
    reference0: Path, tmp_path: Path
) -> None:
    """Before: 79 lines of import machinery (``<frozen importlib._bootstrap>`` frames,
    once per test file) before the line that matters; ``python -m project`` announced
    the training it was about to fail to start."""
    tree = _planted(reference0, tmp_path, "module0/operators.py",
                    "    return x * y\n", "    return x * y)\n")  # fmt: skip
    proc = minitorch(tree, "test", "0.1", timeout=300)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 1
    assert re.fullmatch(r"module0/operators\.py, line \d+: SyntaxError: unmatched '\)'",
                        lines[3]), lines  # fmt: skip
    assert lines[4].strip() == "return x * y)" and lines[5].strip() == "^", lines
    assert len(lines) <= 8 and not any("importlib" in line for line in lines), lines
    env = {**os.environ, "PYTHONPATH": str(tree)}
    job = subprocess.run([sys.executable, "-m", "project"], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    said = (job.stdout + job.stderr).strip().splitlines()
    assert job.returncode == 1, said
    assert re.fullmatch(r"module0/operators\.py, line \d+: SyntaxError: unmatched '\)'",
                        said[0]), said  # fmt: skip
    assert len(said) <= 5 and "Training" not in job.stdout, said


def test_summary_names_the_problem_of_every_task_that_scored_zero() -> None:
    """Before: the problem column was blank for a task whose checks failed (only a run
    that ended early had a problem); the reasons were only in results.json."""
    from autograder.grade import GradeReport, TaskScore, summary_markdown

    failing = TaskScore(task=STAGE0[0], total=3, passed=0,
                        failures=[("mul_values", "out[2]: expected 6.0, got 5.0"),
                                  ("add_values", "out[0]: expected 1.0, got 0.0")])  # fmt: skip
    crashed = TaskScore(task=STAGE0[1], total=2, problem="the check process was killed | x")
    passed = TaskScore(task=STAGE0[2], score=float(STAGE0[2].points), total=1, passed=1)
    rows = {line.split("|")[1].strip(): line for line in summary_markdown(
        GradeReport(scores=[failing, crashed, passed], seconds=1.0)).splitlines()
        if line.startswith("| 0.")}  # fmt: skip
    cells = {task: line.rstrip(" |").split(" | ")[-1] for task, line in rows.items()}
    assert cells[STAGE0[0].id] == ("mul_values: out[2]: expected 6.0, got 5.0 "
                                   "(and 1 more failing)")  # fmt: skip
    assert cells[STAGE0[1].id] == "the check process was killed / x"
    assert rows[STAGE0[2].id].endswith("| 1/1 |  |")


def test_case_ids_of_task_1_2_name_their_shapes() -> None:
    """Before: ``test_shape_broadcast_keeps_empty_dimensions[a0-b0]``, which says nothing
    about the failing case; now the shapes themselves, ``[(2,0)-(1,)]``."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/module1", "-m", "task1_2", "--collect-only",
         "-q", "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    ids = [line for line in proc.stdout.splitlines() if "keeps_empty_dimensions" in line]
    assert ids and all(re.search(r"\[\([\d,]*\)-\([\d,]*\)\]$", i) for i in ids), proc.stdout
    assert any(i.endswith("[(2,0)-(1,)]") for i in ids) and not any("a0" in i for i in ids)


def test_a_child_whose_report_stops_growing_is_killed_as_stalled(tmp_path: Path) -> None:
    """A child out of memory can hang where its own watchdog cannot act (seen with
    ``--memory-mb 512``: no line for minutes); the parent kills the whole group once its
    report has not grown for the stall period, and says why."""
    import time

    from autograder.runner import RunResult, _wait

    report = tmp_path / "report.jsonl"
    report.write_text('{"event": "start"}\n')
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    start = time.monotonic()
    assert _wait(proc, report, timeout=None, on_progress=None, stall=1.0) == "stall"
    assert time.monotonic() - start < 10 and proc.returncode == -9
    problem = RunResult(stalled=1.0, memory_mb=512).problem()
    assert "reported nothing for 1 s and was killed: out of memory" in problem
    assert "--memory-mb" in problem
