"""``minitorch status`` and ``minitorch test``: the student's view of their progress."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

from autograder.paths import ROOT, available_tasks
from autograder.regions import stub_pattern
from autograder.registry import Task, get_task
from autograder.runner import RunResult, run_pytest


@dataclass
class TaskStatus:
    task: Task
    passed: int
    total: int
    stubbed: bool

    @property
    def state(self) -> str:
        if self.total and self.passed == self.total:
            return "passed"
        if self.passed == 0 and self.stubbed:
            return "not started"
        return "failed"

    @property
    def points(self) -> float:
        return self.task.points * self.passed / self.total if self.total else 0.0


def still_stubbed(task: Task, root: Path = ROOT) -> bool:
    """Whether any of the task's handout stubs is still in its files."""
    pattern = stub_pattern(task.id)
    for rel in task.files:
        try:
            if pattern.search((root / rel).read_text(encoding="utf-8")):
                return True
        except OSError:
            return True
    return False


def collect_status(
    root: Path = ROOT, console: Console | None = None
) -> tuple[list[TaskStatus], RunResult]:
    """Run every graded test once and summarise per task."""
    console = console or Console()
    tasks = available_tasks(root)
    expression = " or ".join(t.marker for t in tasks)
    with Progress(
        SpinnerColumn(), TextColumn("running the tests"), BarColumn(), MofNCompleteColumn(),
        console=console, transient=True,
    ) as progress:  # fmt: skip
        bar = progress.add_task("tests", total=None)

        def advance(lines: int) -> None:
            progress.update(bar, completed=max(lines - 2, 0))

        run = run_pytest(root, ["tests", "-m", expression, "-q"], on_progress=advance)
    by_task: dict[str, list[str]] = {t.id: [] for t in tasks}
    for item in run.collected or []:
        for task_id in item["tasks"]:
            by_task.setdefault(task_id, []).append(item["nodeid"])
    statuses = []
    for task in tasks:
        ids = by_task.get(task.id, [])
        passed = sum(1 for n in ids if n in run.tests and run.tests[n].outcome == "passed")
        statuses.append(TaskStatus(task, passed, len(ids), still_stubbed(task, root)))
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
        table.add_row(
            str(s.task.stage), s.task.id, s.task.title, f"{s.passed}/{s.total}",
            f"{s.points:.1f} / {s.task.points}", f"[{style[s.state]}]{s.state}[/]",
        )  # fmt: skip
    earned = sum(s.points for s in statuses)
    total = sum(s.task.points for s in statuses)
    done = sum(1 for s in statuses if s.state == "passed")
    table.add_section()
    table.add_row("", "total", f"{done}/{len(statuses)} tasks passed", "",
                  f"{earned:.1f} / {total}", "")  # fmt: skip
    return table


def run_status(root: Path = ROOT, console: Console | None = None) -> int:
    console = console or Console()
    statuses, run = collect_status(root, console)
    if run.collected is None:
        console.print("[red]The tests did not even collect:[/]")
        console.print(run.output[-3000:])
        return 1
    console.print(status_table(statuses))
    for error in run.collect_errors[:3]:
        console.print(f"[red]collection error[/] {error.strip().splitlines()[0]}")
    return 0


def where_to_look(task: Task) -> str:
    """The task's files and functions, one file per line."""
    lines = []
    for rel in task.files:
        module = rel.removesuffix(".py").replace("/", ".")
        names = [f.split(":", 1)[1] for f in task.functions if f.split(":", 1)[0] == module]
        lines.append(f"  {rel}: {', '.join(names)}")
    return "\n".join(lines)


def run_task_tests(
    task_id: str, extra: list[str], root: Path = ROOT, console: Console | None = None
) -> int:
    """Run one task's tests in the foreground with short tracebacks."""
    console = console or Console()
    try:
        task = get_task(task_id)
    except KeyError as exc:
        console.print(f"[red]{exc.args[0]}[/]")
        return 2
    if task not in available_tasks(root):
        console.print(f"[red]task {task.id}'s stage (module{task.stage}) is not in this tree[/]")
        return 2
    console.print(f"[bold]Task {task.id}: {task.title}[/] ({task.points} points)")
    cmd = [sys.executable, "-m", "pytest", "tests", "-m", task.marker, "--tb=short", "-q",
           "-p", "no:cacheprovider", *extra]  # fmt: skip
    code = subprocess.call(cmd, cwd=root)
    verdict = "[green]all tests pass[/]" if code == 0 else "[red]some tests fail[/]"
    console.print(f"\nTask {task.id}: {verdict}. Where to look:\n{where_to_look(task)}")
    console.print(f"Assignment text: module{task.stage}/README.md, section 'Task {task.id}'.")
    return code
