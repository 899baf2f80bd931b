"""``minitorch status`` and ``minitorch test``: the student's view of their progress.

Both run the graded tests in a child pytest with the course plugin, which reports each
test's outcome and, for a failure, the exception's message (and Hypothesis's failing
example); the student sees a summary built from that, not pages of tracebacks.

``status`` shows every task of the tree. A task whose every stub is still exactly as the
handout wrote it is "not started" without running its tests (the release proved that
each of them fails on the handout), so a fresh handout's status takes seconds. It ends
with the next step. ``test X.Y`` runs one task's tests and prints one line per function
that is still a stub, then each failing test's message, then the functions the failing
tests called ("where to look"), then the next step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

from autograder.broken_file import first_broken
from autograder.paths import ROOT, available_tasks, course_task, test_dirs
from autograder.regions import STUB_MESSAGE, STUDENT_BEGIN, STUDENT_END, stub_pattern
from autograder.runner import RunResult, TestResult, run_pytest
from autograder.task import Task

FAILURES_SHOWN = 8
"""``minitorch test`` shows the messages of this many failing tests (``--full``: all)."""
MESSAGE_LINES = 12
"""...and at most this many lines of each message."""


@dataclass
class TaskStatus:
    task: Task
    passed: int
    total: int
    stubbed: bool
    untouched: bool = False
    """Every stub still as the handout wrote it: the tests were not run."""
    not_credited: bool = False
    """The task asks for the student's own loops and its code does library work: the
    grader gives it nothing, and so does this report (``tests/own_work.py``)."""

    @property
    def state(self) -> str:
        if self.total and self.passed == self.total:
            return "passed"
        if self.passed == 0 and self.stubbed:
            return "not started"
        return "failed"

    @property
    def points(self) -> float:
        if self.not_credited or not self.total:
            return 0.0
        return self.task.points * self.passed / self.total


OWN_WORK_TEST = "test_own_work.py::test_the_tasks_code_is_your_own_loops"
"""The test that reads a task's code for library work (``tests/moduleN/test_own_work.py``)."""


def library_work_failed(nodeids: Iterable[str], outcomes: Callable[[str], str | None]) -> bool:
    """Whether a task's own-work test ran and failed (``outcomes``: nodeid -> outcome)."""
    return any(OWN_WORK_TEST in n and outcomes(n) == "failed" for n in nodeids)


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def still_stubbed(task: Task, root: Path = ROOT) -> bool:
    """Whether any of the task's handout stubs is still in its files."""
    pattern = stub_pattern(task.id)
    for rel in task.files:
        text = _read(root, rel)
        if text is None or pattern.search(text):
            return True
    return False


@dataclass(frozen=True)
class Stub:
    """One handout stub still in a student's file."""

    task_id: str
    function: str
    file: str
    line: int
    pristine: bool
    """Nothing but the stub between its task's begin and end lines."""


def find_stubs(task: Task, root: Path = ROOT) -> list[Stub]:
    """The task's stubs still in its files, with their line numbers."""
    found = []
    pattern = stub_pattern(task.id)
    for rel in task.files:
        text = _read(root, rel)
        if text is None:
            continue
        lines = text.splitlines()
        for index, line in enumerate(lines):
            if not pattern.search(line):
                continue
            match = re.search(r"implement (.+?) in ", line)
            function = match.group(1) if match else "?"
            before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
            after = next((lines[i] for i in range(index + 1, len(lines)) if lines[i].strip()), "")
            begin, end = STUDENT_BEGIN.match(before), STUDENT_END.match(after)
            pristine = bool(begin and end and begin["task"] == end["task"] == task.id)
            found.append(Stub(task.id, function, rel, index + 1, pristine))
    return found


def untouched(task: Task, root: Path = ROOT) -> bool:
    """Whether every function of the task is still the handout's stub, untouched: one
    pristine stub per function the registry lists for it."""
    stubs = find_stubs(task, root)
    names = {s.function for s in stubs if s.pristine}
    wanted = {spec.split(":", 1)[1] for spec in task.functions}
    # A stub in a kernel nested in a listed function (``tensor_map._map``) is that
    # function's.
    covered = {w for w in wanted if any(n == w or n.startswith(w + ".") for n in names)}
    return bool(stubs) and all(s.pristine for s in stubs) and covered == wanted


@dataclass(frozen=True)
class RunLimits:
    """Limits on a student's own test run (``--test-seconds``, ``--memory-mb``; 0: none)."""

    test_seconds: float = 60.0
    memory_mb: int = 4096


def _run(
    root: Path,
    args: list[str],
    console: Console,
    label: str,
    limits: RunLimits,
    total: int | None = None,
) -> RunResult:
    with Progress(
        SpinnerColumn(), TextColumn(label), BarColumn(), MofNCompleteColumn(),
        console=console, transient=True,
    ) as progress:  # fmt: skip
        bar = progress.add_task("tests", total=total)

        def advance(lines: int) -> None:
            progress.update(bar, completed=max(lines - 2, 0))

        return run_pytest(
            root, args, on_progress=advance, inherit_env=True,
            per_test_timeout=limits.test_seconds or None, memory_mb=limits.memory_mb or None,
        )  # fmt: skip


def collect_status(
    root: Path = ROOT, console: Console | None = None, limits: RunLimits = RunLimits()
) -> tuple[list[TaskStatus], RunResult]:
    """Run the graded tests of every started task once and summarise per task."""
    console = console or Console()
    tasks = available_tasks(root)
    fresh = [t for t in tasks if untouched(t, root)]
    expression = " or ".join(t.marker for t in tasks)
    args = [*test_dirs(tasks), "-m", expression, "-q"]
    if fresh:
        args += ["--minitorch-not-started", ",".join(t.id for t in fresh)]
    run = _run(root, args, console, "running the tests", limits)
    by_task: dict[str, list[str]] = {t.id: [] for t in tasks}
    for item in run.collected or []:
        for task_id in item["tasks"]:
            by_task.setdefault(task_id, []).append(item["nodeid"])
    statuses = []
    for task in tasks:
        ids = by_task.get(task.id, [])
        passed = sum(1 for n in ids if n in run.tests and run.tests[n].outcome == "passed")
        stubbed = still_stubbed(task, root)
        library = not stubbed and library_work_failed(
            ids, lambda n: run.tests[n].outcome if n in run.tests else None
        )
        statuses.append(TaskStatus(task, passed, len(ids), stubbed, task in fresh, library))
    return statuses, run


def status_table(statuses: list[TaskStatus]) -> Table:
    table = Table(title="MiniTorch progress")
    for name, justify in (
        ("stage", "right"),
        ("task", "left"),
        ("title", "left"),
        ("tests", "right"),
        ("points", "right"),
        ("status", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    style = {"passed": "green", "failed": "red", "not started": "dim"}
    for s in statuses:
        title = s.task.title + (" (optional)" if s.task.optional else "")
        table.add_row(
            str(s.task.stage), s.task.id, title, f"{s.passed}/{s.total}",
            f"{s.points:.1f} / {s.task.points}", f"[{style[s.state]}]{s.state}[/]",
        )  # fmt: skip
    earned = sum(s.points for s in statuses)
    total = sum(s.task.points for s in statuses)
    done = sum(1 for s in statuses if s.state == "passed")
    table.add_section()
    table.add_row("", "total", f"{done}/{len(statuses)} tasks passed", "",
                  f"{earned:.1f} / {total}", "")  # fmt: skip
    return table


def next_step(task: Task | None) -> str:
    """The line that tells the student what to do next."""
    if task is None:
        return "Every task passes. Well done!"
    return (
        f"Next: task {task.id} ({task.title}): read module{task.stage}/README.md, "
        f'section "Task {task.id}", then run: minitorch test {task.id}'
    )


def write_feedback(statuses: list[TaskStatus], out: Path, problem: str = "") -> None:
    """``classroom.json`` (GitHub Classroom's reporter, version 1) and ``summary.md`` from
    a status run: the student's own tests, so feedback, not a grade."""
    tests = [
        {"name": f"Task {s.task.id}: {s.task.title}",
         "status": "pass" if s.state == "passed" else "fail",
         "score": round(s.points, 2),
         "message": problem or f"{s.passed}/{s.total} tests pass ({s.state})",
         "test_code": f"minitorch test {s.task.id}", "filename": ", ".join(s.task.files),
         "line_no": 0, "duration": 0}
        for s in statuses
    ]  # fmt: skip
    total = sum(s.task.points for s in statuses)
    score = round(sum(t["score"] for t in tests), 2)  # type: ignore[misc]
    lines = [f"# Feedback: {score:g} / {total:g} (the tests of this repository; not a grade)",
             "", "| task | title | tests passed | points |", "|---|---|---:|---:|"]  # fmt: skip
    lines += [f"| {s.task.id} | {s.task.title} | {s.passed}/{s.total} | {s.points:.2f} |"
              for s in statuses]  # fmt: skip
    if problem:
        lines += ["", f"Problem: {problem}"]
    out.mkdir(parents=True, exist_ok=True)
    status = "pass" if statuses and score == total else "fail"
    (out / "classroom.json").write_text(
        json.dumps({"version": 1, "status": status, "max_score": total, "tests": tests},
                   indent=2), encoding="utf-8",
    )  # fmt: skip
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_status(
    root: Path = ROOT,
    console: Console | None = None,
    out: Path | None = None,
    limits: RunLimits = RunLimits(),
) -> int:
    console = console or Console()
    statuses, run = collect_status(root, console, limits)
    if run.collected is None or run.collect_errors:
        console.print("[red]The tests did not collect, so no task can be scored:[/]")
        _why_not_collected(root, run, console)
        if out is not None:
            empty = [TaskStatus(t, 0, 0, True) for t in available_tasks(root)]
            write_feedback(empty, out, "the tests did not collect")
        return 1
    if out is not None:
        write_feedback(statuses, out, run.problem())
    console.print(status_table(statuses))
    if run.problem():
        console.print(f"[red]The test run itself failed:[/] {escape(run.problem())}")
    pending = next((s.task for s in statuses if s.state != "passed"), None)
    console.print(next_step(pending))
    return 0


_MACHINERY = re.compile(r"<frozen importlib|^\s*\?\?\?$|site-packages/|/lib/python3\.\d+/")


def _why_not_collected(root: Path, run: RunResult, console: Console) -> None:
    """The few lines that say why the tests did not collect: a stage file that does not
    import, told by :mod:`autograder.broken_file` (file, line, the line, the error);
    else pytest's report without the import machinery's frames."""
    lines = first_broken(root)
    if lines is not None:
        for line in lines:
            console.print(escape(line), highlight=False)
        console.print("Fix that file and run the command again: no test can run until it "
                      "imports.")  # fmt: skip
        return
    detail = "\n".join(run.collect_errors) or run.output
    kept = [line for line in detail.splitlines() if not _MACHINERY.search(line)]
    console.print(escape("\n".join(kept)[-3000:]), highlight=False)


def list_tasks(root: Path = ROOT, console: Console | None = None) -> int:
    """``minitorch test`` with no task: the tasks of this tree and how to run one."""
    console = console or Console()
    table = Table(title="Tasks (run one with: minitorch test <task>)")
    for name in ("task", "title", "points", "assignment"):
        table.add_column(name)
    for task in available_tasks(root):
        title = task.title + (" (optional)" if task.optional else "")
        table.add_row(task.id, title, str(task.points), f"module{task.stage}/README.md")
    console.print(table)
    return 0


def _short(nodeid: str) -> str:
    return nodeid.removeprefix("tests/")


def _message(result: TestResult, limits: RunLimits = RunLimits()) -> list[str]:
    """The lines that explain a failure: the exception and Hypothesis's example."""
    details = result.details
    if details and details.get("timeout"):
        return [str(details.get("text", "")),
                "(a slow but correct answer? allow more: --test-seconds S)"]  # fmt: skip
    if details and details.get("type") == "MemoryError":
        where = details.get("where")
        return [f"MemoryError: the test used all the memory the run may use "
                f"({limits.memory_mb} MB): an unbounded loop that allocates?",
                *([f"(raised in {where['file']}:{where['line']}, in {where['function']})"]
                  if where else []),
                "(a correct answer that needs more? allow more: --memory-mb MB)"]  # fmt: skip
    if details:
        text = f"{details.get('type', 'Error')}: {details.get('text', '')}".rstrip()
        notes = details.get("notes", [])
        lines = text.splitlines() + [n for note in notes for n in note.splitlines()]
        if details.get("where"):
            where = details["where"]
            lines.append(f"(raised in {where['file']}:{where['line']}, in {where['function']})")
    else:  # no details (a crash in setup, an older plugin): the end of pytest's text
        lines = [line for line in result.message.strip().splitlines() if line.strip()][-6:]
    # Noise: function reprs, and the suite's exact-type wrappers (``5.0 = exact_float(5.0)``).
    lines = [
        line for line in lines
        if " at 0x" not in line and not re.search(r"where (.+) = exact_\w+\(\1\)$", line)
    ]  # fmt: skip
    if len(lines) > MESSAGE_LINES:
        lines = [*lines[: MESSAGE_LINES - 1], "..."]
    return lines


def _functions_named(task: Task) -> dict[str, str]:
    """Registry spec -> short name (``module0.scalar:Mul.forward`` -> ``Mul.forward``)."""
    return {spec: spec.split(":", 1)[1] for spec in task.functions}


def _file_of(spec: str) -> str:
    return spec.split(":", 1)[0].replace(".", "/") + ".py"


def _where_to_look(task: Task, failing: list[TestResult]) -> tuple[list[str], bool]:
    """The task's functions that the failing tests called (or raised in), one line per
    file, those called by the most failing tests first; the flag says whether that
    could be told (else every function of the task is listed)."""
    names = _functions_named(task)
    count: dict[str, int] = {}
    for result in failing:
        wanted = {spec for spec in result.reached if spec in names}
        where = (result.details or {}).get("where")
        if where:
            for spec, short in names.items():
                if _file_of(spec) == where["file"] and short.split(".")[-1] == where["function"]:
                    wanted.add(spec)
        for spec in wanted:
            count[spec] = count.get(spec, 0) + 1
    if not count:
        rows = []
        for rel in task.files:
            chosen = [names[s] for s in task.functions if _file_of(s) == rel]
            if chosen:
                rows.append(f"  {rel}: {', '.join(chosen)}")
        return rows, False
    order = {spec: i for i, spec in enumerate(task.functions)}
    rows = []
    for rel in task.files:
        mine = [s for s in count if _file_of(s) == rel]
        chosen = sorted(mine, key=lambda s: (-count[s], order[s]))
        if chosen:
            cells = [f"{names[s]} ({count[s]} of {len(failing)})" for s in chosen]
            rows.append(f"  {rel}: {', '.join(cells)}")
    return rows, True


def _next_task(after: Task, root: Path) -> Task | None:
    """The first task after ``after`` (registry order, this tree) with stubs left."""
    tasks = available_tasks(root)
    later = tasks[tasks.index(after) + 1 :] + tasks[: tasks.index(after)]
    return next((t for t in later if still_stubbed(t, root)), None)


def run_task_tests(
    task_id: str | None,
    extra: list[str],
    root: Path = ROOT,
    console: Console | None = None,
    full: bool = False,
    limits: RunLimits = RunLimits(),
) -> int:
    """Run one task's tests and summarise them (see the module docstring)."""
    console = console or Console()
    if task_id is None:
        return list_tasks(root, console)
    try:
        task = course_task(task_id, root)
    except KeyError as exc:
        console.print(f"[red]{escape(exc.args[0])}[/]")
        return 2
    if task not in available_tasks(root):
        console.print(f"[red]task {task.id}'s stage (module{task.stage}) is not in this tree[/]")
        return 2
    console.print(f"[bold]Task {task.id}: {escape(task.title)}[/] ({task.points} points)")
    args = [*test_dirs((task,)), "-m", task.marker, "-q", "--tb=short", "--minitorch-reach",
            *extra]  # fmt: skip
    run = _run(root, args, console, f"running task {task.id}'s tests", limits)
    if full:
        console.print(escape(run.output), highlight=False)
    if run.collected is None or run.collect_errors:
        console.print("[red]The tests did not collect:[/]")
        _why_not_collected(root, run, console)
        return 1
    ids = [item["nodeid"] for item in run.collected if task.id in item["tasks"]]
    if not ids:
        console.print(f"[red]No test of task {task.id} was selected.[/]")
        return 1
    results = [run.tests.get(n, TestResult(n, "error", message="did not run")) for n in ids]
    passed = [r for r in results if r.outcome == "passed"]
    failed = [r for r in results if r.outcome != "passed"]
    stubs = {(s.file, s.function): s for s in find_stubs(task, root)}
    not_run = [r for r in failed if r.nodeid not in run.tests]
    stub_failures = [r for r in failed if (r.details or {}).get("stub")]
    other_failures = [r for r in failed if r.nodeid in run.tests and
                      not (r.details or {}).get("stub")]  # fmt: skip

    # One line per function that is still a stub (this task's, then others' it needs).
    reached: dict[tuple[str, str, str], int] = {}
    for result in stub_failures:
        match = STUB_MESSAGE.match((result.details or {}).get("text", ""))
        if match:
            what = match["what"]
            function, _, file = what.partition(" in ")
            key = (match["task"], function, file)
            reached[key] = reached.get(key, 0) + 1
    own = sorted(
        (k for k in reached if k[0] == task.id),
        key=lambda k: (k[2], stubs[(k[2], k[1])].line if (k[2], k[1]) in stubs else 0),
    )
    if own:
        console.print(f"Not written yet ({len(own)}): replace the stub between the "
                      f"'Task {task.id}' lines")  # fmt: skip
        for _, function, file in own:
            stub = stubs.get((file, function))
            at = f"{file}:{stub.line}" if stub else file
            console.print(f"  {at:<28} {function}")
    foreign = sorted(k for k in reached if k[0] != task.id)
    if foreign:
        console.print("Needs other tasks first:")
        for other, function, file in foreign:
            console.print(f"  task {other}: {function} in {file}  (minitorch test {other})")

    if other_failures:
        console.print(f"[red]Failing tests ({len(other_failures)}):[/]")
        shown = other_failures if full else other_failures[:FAILURES_SHOWN]
        for result in shown:
            console.print(f"  [bold]{escape(_short(result.nodeid))}[/]")
            for line in _message(result, limits):
                console.print(f"    {escape(line)}", highlight=False)
        if len(shown) < len(other_failures):
            console.print(f"  ... and {len(other_failures) - len(shown)} more "
                          f"(all of them: minitorch test {task.id} --full)")  # fmt: skip
        rows, known = _where_to_look(task, other_failures)
        heading = (
            "Where to look (the task's functions the failing tests called, and by how many):"
            if known else "Where to look (the task's functions):"
        )  # fmt: skip
        console.print(heading)
        for row in rows:
            console.print(row)
    if not_run:
        console.print(f"[red]{len(not_run)} of the task's tests did not run[/] (the run "
                      "stopped early: see below).")  # fmt: skip
    if run.problem():
        console.print(f"[red]The test run itself failed:[/] {escape(run.problem())}")

    points = task.points * len(passed) / len(results)
    outcome = {r.nodeid: r.outcome for r in results}
    if not still_stubbed(task, root) and library_work_failed(outcome, outcome.get):
        points = 0.0
        console.print("[red]Library work is not credited:[/] the task scores 0 until its "
                      "code is your own loops (the grader reads it the same way).")  # fmt: skip
    console.print(f"Task {task.id}: {len(passed)} of {len(results)} tests pass "
                  f"({points:.1f} / {task.points} points).")  # fmt: skip
    if not failed:
        console.print(f"[green]Task {task.id} is done.[/] " + next_step(_next_task(task, root)))
        return 0
    console.print(f'Assignment text: module{task.stage}/README.md, section "Task {task.id}".')
    return 1
