"""``minitorch grade``: score an untrusted submission, per task, in several formats.

How a submission is graded (see also ``autograder/README.md``):

1. A private workspace is built from the grader's own copy of the repository. From the
   submission only the files the registry declares are taken, and only when each is a
   regular file (no symlink) of at most 1 MiB; a missing or refused file gets the
   handout's stubbed version. Tests, conftest, pytest and project configuration all come
   from the grader. With ``reference_prerequisites`` the declared files of stages below
   the graded one come from the reference instead.
2. The expected test ids of each task (the manifest) are collected from the grader's
   own tree, before any submission code runs.
3. Each task's tests run in a fresh child process: ``--noconftest`` and a pinned config,
   no plugin autoload, a scrubbed environment, its own process group, a per-test and a
   per-task time limit and a memory limit. The child signs every result line with a
   per-run secret it receives through a pipe.
4. The parent counts a test as passed only when a verified line says so for an id in
   the manifest; it scores a task zero when the run shows signs of tampering or loaded
   the stage packages from elsewhere. Anything unverifiable scores zero (fail closed).
5. ``results.json`` (Gradescope), ``classroom.json`` (GitHub Classroom), ``junit.xml``
   and ``summary.md`` are always written, even when the submission hangs, crashes or
   does not import, or the grader itself fails.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autograder.paths import ROOT, available_tasks, repo_files, test_dirs
from autograder.regions import find_regions, stub_text
from autograder.registry import TASKS, Task
from autograder.runner import RunResult, run_pytest

MAX_FILE_BYTES = 1 << 20


@dataclass
class Limits:
    """Resource limits for one task's child run."""

    per_test_seconds: float = 60.0
    per_task_seconds: float = 600.0
    memory_mb: int | None = 4096


@dataclass
class TaskScore:
    task: Task
    score: float = 0.0
    passed: int = 0
    total: int = 0
    seconds: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)
    passed_ids: list[str] = field(default_factory=list)
    problem: str = ""

    @property
    def max_score(self) -> float:
        return float(self.task.points)

    @property
    def status(self) -> str:
        return "passed" if self.total and self.passed == self.total else "failed"

    def output(self) -> str:
        lines = [f"{self.passed}/{self.total} tests passed."]
        if self.problem:
            lines.append(f"Problem: {self.problem}")
        for nodeid, message in self.failures[:20]:
            last = message.strip().splitlines()[-1] if message.strip() else ""
            lines.append(f"FAILED {nodeid}" + (f": {last[:300]}" if last else ""))
        if len(self.failures) > 20:
            lines.append(f"... and {len(self.failures) - 20} more failing tests")
        return "\n".join(lines)


@dataclass
class GradeReport:
    scores: list[TaskScore]
    seconds: float
    notes: list[str] = field(default_factory=list)
    grader_error: str = ""
    """Set when grading itself failed (every task then scores zero)."""

    @property
    def score(self) -> float:
        return round(sum(s.score for s in self.scores), 2)

    @property
    def max_score(self) -> float:
        return float(sum(s.max_score for s in self.scores))


def _safe_submission_file(submission: Path, rel: str) -> bytes | None:
    """The bytes of ``submission/rel`` if it is a plain file inside the submission."""
    current = submission
    for part in Path(rel).parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            return None
    if not stat.S_ISREG(mode):
        return None
    if os.lstat(current).st_size > MAX_FILE_BYTES:
        return None
    try:
        return current.read_bytes()
    except OSError:
        return None


def build_workspace(
    submission: Path,
    root: Path,
    workspace: Path,
    graded_stage: int | None,
    reference_prerequisites: bool,
) -> list[str]:
    """Fill ``workspace``; return notes about files that were missing or refused."""
    notes: list[str] = []
    declared = {path: task.stage for task in TASKS for path in task.files}
    for rel in repo_files(root):
        path = rel.as_posix()
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if path not in declared:
            shutil.copy2(root / rel, target)
            continue
        stage = declared[path]
        if reference_prerequisites and graded_stage is not None and stage < graded_stage:
            shutil.copy2(root / rel, target)
            continue
        data = _safe_submission_file(submission, path)
        if data is None:
            if graded_stage is None or stage <= graded_stage:  # later stages: not graded
                notes.append(f"{path}: missing or not a plain file of at most 1 MiB; stub used")
            reference = (root / rel).read_text(encoding="utf-8")
            target.write_text(stub_text(reference, path), encoding="utf-8")
        else:
            target.write_bytes(data)
    return notes


@dataclass
class Manifest:
    """What the grader's own tree collects: test ids per task, test-module fingerprints."""

    tests: dict[str, list[str]]
    fingerprints: dict[str, str]


def collect_manifest(root: Path, tasks: tuple[Task, ...], limits: Limits) -> Manifest:
    """Collect the grader's own tests (no submission code runs), in a copy of the files
    a workspace is made of, so both see exactly the same tests."""
    expression = " or ".join(t.marker for t in tasks)
    with tempfile.TemporaryDirectory(prefix="minitorch-manifest-") as tmp:
        pristine = Path(tmp)
        for rel in repo_files(root):
            (pristine / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, pristine / rel)
        result = run_pytest(
            pristine, [*test_dirs(tasks), "--collect-only", "-q", "-m", expression],
            timeout=limits.per_task_seconds, isolate_conftest=True,
        )  # fmt: skip
    if result.collected is None or result.collect_errors:
        detail = "\n".join(result.collect_errors) or result.output[-2000:]
        raise RuntimeError(f"the grader's own tests do not collect:\n{detail}")
    tests: dict[str, list[str]] = {t.id: [] for t in tasks}
    for item in result.collected:
        for task_id in item["tasks"]:
            if task_id in tests:
                tests[task_id].append(item["nodeid"])
    return Manifest(tests, result.fingerprints)


def rewritten_tests(run: RunResult, manifest: Manifest) -> list[str]:
    """Test modules whose code differs from the grader's (or that the run did not report)."""
    if run.collected is None:
        return []
    return sorted(
        name for name, digest in manifest.fingerprints.items()
        if run.fingerprints.get(name, digest) != digest
    ) + sorted(set(run.fingerprints) - set(manifest.fingerprints))  # fmt: skip


def score_task(task: Task, expected: list[str], run: RunResult, rewritten: list[str]) -> TaskScore:
    """Score one task from its verified run (fail closed)."""
    result = TaskScore(task=task, total=len(expected), seconds=run.seconds)
    problem = run.problem()
    if rewritten:
        problem = "test code was changed while the tests ran: " + ", ".join(rewritten)
    if rewritten or not run.trustworthy:
        result.problem = problem + "; the task scores zero"
        result.failures = [(n, "not counted") for n in expected]
        return result
    for nodeid in expected:
        test = run.tests.get(nodeid)
        if test is not None and test.outcome == "passed":
            result.passed += 1
            result.passed_ids.append(nodeid)
        else:
            message = (
                test.message if test is not None else f"did not run ({problem or 'no result'})"
            )
            result.failures.append((nodeid, message))
    if run.collect_errors:
        problem = (
            (problem + "; " if problem else "")
            + "collection failed: "
            + (
                run.collect_errors[0].strip().splitlines()[-1]
                if run.collect_errors[0].strip()
                else ""
            )
        )
    result.problem = problem
    if result.total:
        result.score = round(task.points * result.passed / result.total, 2)
    return result


def selected_tasks(
    root: Path, stage: int | None, task_ids: Sequence[str] | None = None
) -> tuple[Task, ...]:
    """The tasks of ``root`` to grade: all, one stage's, or the ids given."""
    tasks = available_tasks(root)
    if stage is not None:
        tasks = tuple(t for t in tasks if t.stage == stage)
        if not tasks:
            raise ValueError(f"the registry has no task in stage {stage} in {root}")
    if task_ids:
        unknown = sorted(set(task_ids) - {t.id for t in tasks})
        if unknown:
            raise ValueError(f"no task {', '.join(unknown)} to grade in {root}"
                             + (f" (stage {stage})" if stage is not None else ""))  # fmt: skip
        tasks = tuple(t for t in tasks if t.id in task_ids)
    return tasks


def grade(
    submission: Path,
    *,
    root: Path = ROOT,
    stage: int | None = None,
    reference_prerequisites: bool = False,
    limits: Limits | None = None,
    log: Callable[[str], object] | None = None,
    task_ids: Sequence[str] | None = None,
) -> GradeReport:
    """Grade ``submission`` against the grader's tree ``root`` (only the tasks
    ``task_ids``, when given)."""
    limits = limits or Limits()
    start = time.monotonic()
    if not submission.is_dir():
        raise ValueError(f"the submission {submission} is not a folder")
    tasks = selected_tasks(root, stage, task_ids)
    if reference_prerequisites:
        if stage is None:
            raise ValueError("--reference-prerequisites needs --stage N")
        for task in TASKS:
            if task.stage < stage:
                for path in task.files:
                    text = (root / path).read_text(encoding="utf-8")
                    if not find_regions(text, path):
                        raise ValueError(f"{root} is not the reference: {path} has no solution")
    manifest = collect_manifest(root, tasks, limits)
    scores: list[TaskScore] = []
    notes: list[str] = []
    for task in tasks:
        if log is not None:
            log(f"grading task {task.id} ({len(manifest.tests[task.id])} tests)")
        # A fresh workspace for every task: whatever one run writes cannot reach the next.
        with tempfile.TemporaryDirectory(prefix="minitorch-grade-") as tmp:
            workspace = Path(tmp) / "work"
            workspace.mkdir()
            notes = build_workspace(submission, root, workspace, stage, reference_prerequisites)
            run = run_pytest(
                workspace, [*test_dirs((task,)), "-m", task.marker, "-q"],
                timeout=limits.per_task_seconds, per_test_timeout=limits.per_test_seconds,
                memory_mb=limits.memory_mb, signed=True, isolate_conftest=True,
            )  # fmt: skip
        scores.append(
            score_task(task, manifest.tests[task.id], run, rewritten_tests(run, manifest))
        )
    return GradeReport(scores=scores, seconds=time.monotonic() - start, notes=notes)


# -- writing the results ------------------------------------------------------------------


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def gradescope_json(report: GradeReport) -> dict[str, object]:
    return {
        "score": report.score,
        "max_score": report.max_score,
        "execution_time": round(report.seconds, 2),
        "output": summary_markdown(report),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [
            {
                "name": f"Task {s.task.id}: {s.task.title}",
                "number": s.task.id,
                "score": s.score,
                "max_score": s.max_score,
                "status": s.status,
                "output": s.output(),
                "visibility": "visible",
            }
            for s in report.scores
        ],
    }


def classroom_json(report: GradeReport) -> dict[str, object]:
    """The shape GitHub Classroom's autograding reporter reads (version 1)."""
    return {
        "version": 1,
        "status": "pass" if report.score == report.max_score else "fail",
        "max_score": report.max_score,
        "tests": [
            {
                "name": f"Task {s.task.id}: {s.task.title}",
                "status": "pass" if s.status == "passed" else "fail",
                "score": s.score,
                "message": s.output(),
                "test_code": f"minitorch test {s.task.id}",
                "filename": ", ".join(s.task.files),
                "line_no": 0,
                "duration": int(s.seconds * 1000),
            }
            for s in report.scores
        ],
    }


def junit_xml(report: GradeReport) -> str:
    total = sum(s.total for s in report.scores)
    suites = ET.Element("testsuites", name="minitorch", tests=str(total))
    for s in report.scores:
        suite = ET.SubElement(
            suites, "testsuite", name=f"Task {s.task.id}: {s.task.title}", tests=str(s.total),
            failures=str(s.total - s.passed), time=f"{s.seconds:.3f}",
        )  # fmt: skip
        for nodeid in s.passed_ids:
            ET.SubElement(suite, "testcase", classname=s.task.marker, name=nodeid)
        for nodeid, message in s.failures:
            case = ET.SubElement(suite, "testcase", classname=s.task.marker, name=nodeid)
            last = message.strip().splitlines()[-1] if message.strip() else "failed"
            ET.SubElement(case, "failure", message=last[:300]).text = message[-3000:]
        if s.problem:
            ET.SubElement(suite, "system-out").text = s.problem
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def summary_markdown(report: GradeReport) -> str:
    lines = [
        f"# Grade: {report.score:g} / {report.max_score:g}",
        "",
        "| task | title | score | tests passed | problem |",
        "|---|---|---:|---:|---|",
    ]
    for s in report.scores:
        lines.append(
            f"| {s.task.id} | {s.task.title} | {s.score:g} / {s.max_score:g} | "
            f"{s.passed}/{s.total} | {s.problem.replace('|', '/')} |"
        )
    if report.notes:
        lines += ["", "Notes:"] + [f"- {note}" for note in report.notes]
    return "\n".join(lines) + "\n"


def write_results(report: GradeReport, out: Path) -> None:
    """Write every format into ``out`` (each file atomically)."""
    _atomic_write(out / "results.json", json.dumps(gradescope_json(report), indent=2))
    _atomic_write(out / "classroom.json", json.dumps(classroom_json(report), indent=2))
    _atomic_write(out / "junit.xml", junit_xml(report))
    _atomic_write(out / "summary.md", summary_markdown(report))


def failed_report(tasks: tuple[Task, ...], reason: str, seconds: float) -> GradeReport:
    """Zero for every task, with the reason: what is written when grading itself fails."""
    scores = [TaskScore(task=t, problem=f"grading failed: {reason}") for t in tasks]
    return GradeReport(scores=scores, seconds=seconds, notes=[reason], grader_error=reason)


def grade_to(
    submission: Path,
    out: Path,
    *,
    root: Path = ROOT,
    stage: int | None = None,
    reference_prerequisites: bool = False,
    limits: Limits | None = None,
    log: Callable[[str], object] | None = None,
    task_ids: Sequence[str] | None = None,
) -> GradeReport:
    """Grade and write the results; on any grader error write zero results instead."""
    start = time.monotonic()
    try:
        report = grade(
            submission, root=root, stage=stage, reference_prerequisites=reference_prerequisites,
            limits=limits, log=log, task_ids=task_ids,
        )  # fmt: skip
    except Exception as exc:  # the results files must exist whatever happens
        try:
            tasks = selected_tasks(root, stage, task_ids)
        except ValueError:
            tasks = tuple(t for t in available_tasks(root) if stage is None or t.stage == stage)
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        report = failed_report(tasks, detail, time.monotonic() - start)
    write_results(report, out)
    return report
