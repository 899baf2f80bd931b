"""``minitorch status`` and ``minitorch test``: the student's view of their progress.

Both run the graded tests in a child pytest with the course plugin, which reports each
test's outcome and, for a failure, the exception's message (and Hypothesis's failing
example); the student sees a summary built from that, not pages of tracebacks.

``status`` shows every task of the tree. A task whose every stub is still exactly as the
handout wrote it is "not started" without running its tests (the release proved that
each of them fails on the handout), so a fresh handout's status takes seconds. Results
are kept between runs, per test file, under a key of the content of every file its
tests may read (:func:`file_keys`), so only the tests whose files changed, and those
that failed, run again. It tells its progress as it goes (plain lines when the output
is not a terminal) and ends with the next step.

``test X.Y`` runs one task's tests and prints one line per function that is still a
stub, then each failing test's message, then the functions the failing tests called
("where to look"), then the next step.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from autograder.broken_file import first_broken
from autograder.paths import (
    EXCLUDED_DIRS,
    ROOT,
    available_tasks,
    course_task,
    graded_test_files,
    test_dirs,
)
from autograder.regions import STUB_MESSAGE, STUDENT_BEGIN, STUDENT_END, stub_pattern
from autograder.runner import RunResult, TestResult, run_pytest
from autograder.task import Task


def literal_line(*parts: str | tuple[str, str]) -> Text:
    """A line printed exactly as written: each part a string, or ``(text, style)``. Test
    output, messages, paths and titles are never read as the console's markup (a
    ``[dist]`` stays, ``:warning:`` is no emoji)."""
    line = Text()
    for part in parts:
        text, style = part if isinstance(part, tuple) else (part, "")
        line.append(text, style=style)
    return line


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
    missing: str = ""
    """What the task's tests need that is missing here (``Task.needs``: MPI, the
    ``dist`` extra), in words: its tests skip, so the task is "not checked", as
    ``minitorch grade`` reports it "not graded"."""

    @property
    def state(self) -> str:
        if self.missing and not (self.passed == 0 and self.stubbed):
            return "not checked"
        if self.total and self.passed == self.total:
            return "passed"
        if self.passed == 0 and self.stubbed:
            return "not started"
        return "failed"

    @property
    def points(self) -> float:
        if self.not_credited or self.missing or not self.total:
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


# -- results kept between status runs ------------------------------------------------------

CACHE_VARIABLE = "MINITORCH_STATUS_CACHE"
"""Where ``status`` keeps its results: a folder, or ``off`` for none (default: the user's
cache folder, ``$XDG_CACHE_HOME/minitorch/status`` or ``~/.cache/minitorch/status``)."""
CACHE_FORMAT = 1
"""The kept results' format; raised when what they mean changes."""
STATUS_PROFILE = "status"
"""The Hypothesis profile of a status run (``HYPOTHESIS_PROFILE`` set by the user wins):
the same examples every run, so a kept result is the one a new run would give."""
RUN_AGAIN = frozenset({"failed", "error"})
"""Outcomes never kept: such a test runs again at every status (a time limit reached on
a busy machine must not stay a failure until a file changes)."""
READS_EVERY_STAGE = frozenset({"test_own_work.py"})
"""Test files that read the code of every stage, not only of theirs and earlier ones
(the own-work reading parses every ``module*/**.py``)."""
_SHARED = ("autograder", "project")
"""Folders that every test may read: the tooling (the pytest plugin, the registry, the
own-work rules) and the project (the tests run its scripts, read its data)."""
_OWN_FOLDER = re.compile(r"module\d+|autograder|" + "|".join(map(re.escape, EXCLUDED_DIRS)))
"""Folders of ``tests/`` that are not shared: a stage's own, the tooling's own tests."""
_ROOT_SUFFIXES = (".py", ".toml", ".cfg", ".ini")
"""Files at the top of the tree that may configure pytest or be imported."""
_NOT_CONTENT = (".pyc", ".pyo", ".nbi", ".nbc", ".tmp")
"""Caches and bytecode, never part of a key."""


def status_cache_file(root: Path = ROOT) -> Path | None:
    """The file that holds ``root``'s kept results (one per tree, named by its path), or
    None when keeping is off (``MINITORCH_STATUS_CACHE=off``) or there is no home."""
    setting = os.environ.get(CACHE_VARIABLE, "").strip()
    if setting.lower() in ("off", "0", "no", "false"):
        return None
    if setting:
        folder = Path(setting).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        try:
            base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
        except RuntimeError:  # no home folder
            return None
        folder = base / "minitorch" / "status"
    tree = root.resolve()
    digest = hashlib.sha256(str(tree).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return folder / f"{tree.name or 'tree'}-{digest}.json"


def _files_under(root: Path, rel: str) -> list[str]:
    """The files under ``root/rel``, repository-relative, caches and bytecode left out."""
    found = []
    for folder, dirs, files in os.walk(root / rel):
        dirs[:] = [d for d in dirs if d not in EXCLUDED_DIRS and not d.endswith(".egg-info")]
        for name in files:
            if not name.endswith(_NOT_CONTENT):
                found.append((Path(folder) / name).relative_to(root).as_posix())
    return sorted(found)


def _digest(root: Path, rels: Iterable[str], salt: str = "") -> str:
    """One digest of the names and contents of these files."""
    h = hashlib.sha256(salt.encode())
    for rel in rels:
        try:
            content = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        except OSError:
            content = "unreadable"
        h.update(f"{rel}\0{content}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _environment(limits: RunLimits, profile: str, tasks: tuple[Task, ...]) -> str:
    """What besides the tree's files decides a test's outcome: the interpreter and the
    installed packages, the settings the tests read from the environment, the GPU or
    the CUDA simulator, MPI, the cores, the run's limits and Hypothesis profile."""
    import importlib.metadata
    import shutil

    if "NUMBA_ENABLE_CUDASIM" in os.environ:
        cuda = os.environ["NUMBA_ENABLE_CUDASIM"]
    else:
        try:
            from autograder.pytest_plugin import gpu_present

            cuda = "0" if gpu_present() else "1"
        except ImportError:  # no pytest: the run will say so
            cuda = "?"
    packages = sorted({f"{d.metadata['Name']}=={d.version}"
                       for d in importlib.metadata.distributions()})  # fmt: skip
    prefixes = ("NUMBA_", "HYPOTHESIS_", "OMP_", "KMP_", "MKL_", "OPENBLAS_", "CUDA_",
                "MINITORCH_", "MPLBACKEND", "PYTHONPATH", "PYTHONHASHSEED", "CI")  # fmt: skip
    variables = sorted((k, v) for k, v in os.environ.items()
                       if k.startswith(prefixes) and k != CACHE_VARIABLE)  # fmt: skip
    affinity = getattr(os, "sched_getaffinity", None)
    cores = [os.cpu_count(), len(affinity(0)) if affinity is not None else None]
    mpi = [shutil.which(name) for name in ("mpiexec", "mpirun")]
    return json.dumps([CACHE_FORMAT, sys.version, sys.executable, packages, variables,
                       cuda, cores, mpi, limits.test_seconds, limits.memory_mb, profile,
                       [t.id for t in tasks]])  # fmt: skip


def file_keys(root: Path, tasks: tuple[Task, ...], environment: str) -> dict[str, str]:
    """Each test file of ``tasks``' stages -> the key its kept results must match: a
    digest of ``environment`` and of the content of every file its tests may read.

    That is: the tooling (``autograder/``) and the project (``project/``); the top of
    ``tests/`` (conftest, shared helpers; not the stage folders nor the tooling's own
    tests) and the tree's top-level ``.py``/``.toml``/``.cfg``/``.ini`` files (pytest's
    configuration); and for a file of ``tests/moduleN/``, every file of ``module0`` ..
    ``moduleN`` (a stage imports the earlier ones, so a test reaches them all) and of
    ``tests/module0`` .. ``tests/moduleN`` (itself, its stage's checks and helpers, the
    earlier stages' helpers it may import). A file of :data:`READS_EVERY_STAGE` gets
    every stage's code. Too wide a key costs a re-run; too narrow a wrong status.
    """
    stages = sorted({t.stage for t in tasks})
    top = [p for p in root.iterdir() if p.is_file() and p.name.endswith(_ROOT_SUFFIXES)]
    shared = [p.name for p in top] + [f for rel in _SHARED for f in _files_under(root, rel)]
    tests = root / "tests"
    for path in tests.iterdir() if tests.is_dir() else ():
        if path.is_file() and not path.name.endswith(_NOT_CONTENT):
            shared.append(f"tests/{path.name}")
        elif path.is_dir() and not _OWN_FOLDER.fullmatch(path.name):
            shared += _files_under(root, f"tests/{path.name}")
    base = _digest(root, sorted(shared), environment)
    code = {k: _digest(root, _files_under(root, f"module{k}")) for k in stages}
    suite = {k: _digest(root, _files_under(root, f"tests/module{k}")) for k in stages}
    keys = {}
    for rel, stage in graded_test_files(root, tasks).items():
        reads = stages if Path(rel).name in READS_EVERY_STAGE else [k for k in stages if k <= stage]
        parts = [base, rel, *(f"code{k}:{code[k]}" for k in reads),
                 *(f"tests{k}:{suite[k]}" for k in stages if k <= stage)]  # fmt: skip
        keys[rel] = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    return keys


@dataclass(frozen=True)
class KeptFile:
    """One test file's results from an earlier run, and the key they were kept under."""

    key: str
    tests: tuple[tuple[str, str, tuple[str, ...]], ...]
    """(node id, outcome, task ids) of each of its graded tests, in the run's order."""


_OUTCOMES = frozenset({"passed", "failed", "error", "skipped"})


def load_kept(path: Path) -> dict[str, KeptFile]:
    """The kept results in ``path``; nothing at all when it is missing, unreadable or
    not exactly what :func:`save_kept` writes (a corrupt file is ignored, then
    replaced)."""

    def check(condition: bool) -> None:
        if not condition:
            raise ValueError("not a status cache")

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        check(isinstance(data, dict) and data.get("format") == CACHE_FORMAT)
        kept = {}
        for rel, entry in data["files"].items():
            key, tests = entry["key"], entry["tests"]
            check(isinstance(rel, str) and isinstance(key, str) and isinstance(tests, list))
            rows = []
            for nodeid, outcome, task_ids in tests:
                check(isinstance(nodeid, str) and nodeid.startswith(rel + "::"))
                check(outcome in _OUTCOMES and isinstance(task_ids, list))
                check(all(isinstance(t, str) for t in task_ids))
                rows.append((nodeid, outcome, tuple(task_ids)))
            kept[rel] = KeptFile(key, tuple(rows))
        return kept
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def save_kept(path: Path, root: Path, kept: dict[str, KeptFile]) -> None:
    """Write ``kept`` to ``path`` whole or not at all (a temporary file renamed into
    place); a folder that cannot be written only means nothing is kept."""
    data = {"format": CACHE_FORMAT, "tree": str(root.resolve()),
            "note": "minitorch status's results, kept to skip tests whose files did not "
                    "change. Delete this file to run them all again. Grading never reads it.",
            "files": {rel: {"key": k.key, "tests": [[n, o, list(t)] for n, o, t in k.tests]}
                      for rel, k in sorted(kept.items())}}  # fmt: skip
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


KEPT_MESSAGE = "kept from an earlier run: nothing it reads has changed"


def _merge_kept(kept: dict[str, KeptFile], again: set[str], run: RunResult) -> RunResult:
    """``run`` with the kept results added: what a run of every test would report."""
    seen: set[str] = set()
    items: list[dict[str, Any]] = []
    for rel in sorted(kept):
        for nodeid, outcome, task_ids in kept[rel].tests:
            items.append({"nodeid": nodeid, "tasks": list(task_ids)})
            seen.add(nodeid)
            if nodeid not in again:
                run.tests.setdefault(nodeid, TestResult(nodeid, outcome, message=KEPT_MESSAGE))
    if run.collected is not None:
        run.collected = items + [i for i in run.collected if i["nodeid"] not in seen]
    return run


def _to_keep(
    keys: dict[str, str], kept: dict[str, KeptFile], again: set[str], run: RunResult
) -> dict[str, KeptFile]:
    """What to keep after a run: each test file whose tests all have a result, under its
    current key (a file that the run did not finish is run again next time)."""
    result = {rel: k for rel, k in kept.items() if not any(n in again for n, _, _ in k.tests)}
    if run.collected is None or run.collect_errors or run.foreign_modules:
        return dict(kept)  # the kept ones are still right; nothing new is
    by_file: dict[str, list[dict[str, Any]]] = {}
    for item in run.collected:
        by_file.setdefault(item["nodeid"].split("::")[0], []).append(item)
    for rel, key in keys.items():
        if rel in result:
            continue
        if rel in kept:  # only its failed tests ran again
            old = kept[rel].tests
            if all(n in run.tests for n, _, _ in old if n in again):
                result[rel] = KeptFile(key, tuple(
                    (n, run.tests[n].outcome if n in again else o, t) for n, o, t in old
                ))  # fmt: skip
            else:  # still right: its failed tests run again next time
                result[rel] = kept[rel]
            continue
        items = by_file.get(rel, [])
        if all(i["nodeid"] in run.tests for i in items):
            result[rel] = KeptFile(key, tuple(
                (i["nodeid"], run.tests[i["nodeid"]].outcome, tuple(i["tasks"])) for i in items
            ))  # fmt: skip
    return result


class StatusProgress:
    """Says what a status run is doing while it runs: on a terminal, a bar naming the
    test file and its tasks; otherwise (a log, CI, a pipe) plain lines: one as each test
    file begins (tests done so far, the file, its tasks) and one every
    :attr:`HEARTBEAT` seconds that a file takes."""

    HEARTBEAT = 60.0

    def __init__(self, console: Console, progress: Progress | None) -> None:
        self.console = console
        self.progress = progress
        self.bar = progress.add_task("collecting the tests", total=None) if progress else None
        self.items: list[tuple[str, list[str]]] = []
        self.index: dict[str, int] = {}
        self.done: set[str] = set()
        self.next = 0
        self.file = ""
        self.file_since = self.said = self.start = time.monotonic()

    def _say(self, text: str) -> None:
        if self.progress is None:
            self.console.print(literal_line(text), highlight=False)
            self.said = time.monotonic()

    def __call__(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            if record.get("event") == "collected" and isinstance(record.get("items"), list):
                self.items = [(str(i.get("nodeid")), [str(t) for t in i.get("tasks") or []])
                              for i in record["items"] if isinstance(i, dict)]  # fmt: skip
                self.index = {n: k for k, (n, _) in enumerate(self.items)}
                self._say(f"{_tests(len(self.items))} to run.")
                self._advance()
            elif record.get("event") == "test" and record.get("nodeid") in self.index:
                self.done.add(record["nodeid"])
                self.next = max(self.next, self.index[record["nodeid"]] + 1)
                self._advance()
        now = time.monotonic()
        if self.next < len(self.items) and now - self.said >= self.HEARTBEAT:
            self._say(f"  {len(self.done)}/{len(self.items)} tests done; still in "
                      f"{self.file} ({now - self.file_since:.0f} s in it)")  # fmt: skip
        if self.progress is not None and self.bar is not None and self.items:
            self.progress.update(self.bar, completed=len(self.done), total=len(self.items))

    def _advance(self) -> None:
        """Tell when the next test to run is in another file than the last one."""
        if self.next >= len(self.items):
            return
        file = self.items[self.next][0].split("::")[0]
        if file == self.file:
            return
        self.file, self.file_since = file, time.monotonic()
        tasks = sorted({t for n, ts in self.items if n.startswith(file + "::") for t in ts},
                       key=_task_order)  # fmt: skip
        what = f" (task {', '.join(tasks)})" if tasks else ""
        self._say(f"  {len(self.done)}/{len(self.items)} tests done; now {file}{what}")
        if self.progress is not None and self.bar is not None:
            label = f"task {', '.join(tasks)}: {file}" if tasks else file
            self.progress.update(self.bar, description=escape(label))

    def finish(self) -> None:
        self._say(f"Ran {_tests(len(self.done))} in {time.monotonic() - self.start:.0f} s.")


def _tests(count: int) -> str:
    return f"{count} test" + ("" if count == 1 else "s")


def _task_order(task_id: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in task_id.split("."))
    except ValueError:
        return (1 << 30,)


def _run_status_tests(
    root: Path, args: list[str], console: Console, limits: RunLimits, profile: str
) -> RunResult:
    """Run the status's tests, telling how far it is (:class:`StatusProgress`)."""
    kwargs: dict[str, Any] = dict(
        inherit_env=True, env={"HYPOTHESIS_PROFILE": profile},
        per_test_timeout=limits.test_seconds or None, memory_mb=limits.memory_mb or None,
    )  # fmt: skip
    if not console.is_terminal:
        tell = StatusProgress(console, None)
        run = run_pytest(root, args, on_records=tell, **kwargs)
        tell.finish()
        return run
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=console, transient=True,
    ) as progress:  # fmt: skip
        return run_pytest(root, args, on_records=StatusProgress(console, progress), **kwargs)


def collect_status(
    root: Path = ROOT, console: Console | None = None, limits: RunLimits = RunLimits()
) -> tuple[list[TaskStatus], RunResult]:
    """Summarise every task of ``root`` from its graded tests: those whose results are
    kept from an earlier run (:func:`file_keys`: nothing they read has changed, and
    they did not fail) are not run again; the others run in one child pytest."""
    console = console or Console()
    tasks = available_tasks(root)
    fresh = [t for t in tasks if untouched(t, root)]
    profile = os.environ.get("HYPOTHESIS_PROFILE") or STATUS_PROFILE
    keys = file_keys(root, tasks, _environment(limits, profile, tasks))
    where = status_cache_file(root)
    kept = {rel: k for rel, k in (load_kept(where) if where else {}).items()
            if keys.get(rel) == k.key}  # fmt: skip
    again = {n for k in kept.values() for n, outcome, _ in k.tests if outcome in RUN_AGAIN}
    wanted = [rel for rel in keys if rel not in kept] + sorted(again)
    kept_results = sum(len(k.tests) for k in kept.values()) - len(again)
    run = RunResult(collected=[], finished=True, exitstatus=0)
    if wanted:
        files = sorted({w.split("::")[0] for w in wanted})
        console.print(
            f"Running the tests of {len(files)} of {len(keys)} test files "
            + (f"({kept_results} results kept from an earlier run: nothing they read has "
               "changed)." if kept_results else "(no results kept from an earlier run)."),
            highlight=False,
        )  # fmt: skip
        expression = " or ".join(t.marker for t in tasks)
        with tempfile.TemporaryDirectory(prefix="minitorch-status-") as tmp:
            only = Path(tmp) / "only.txt"
            only.write_text("\n".join(wanted) + "\n", encoding="utf-8")
            args = [*files, "-m", expression, "-q", "--minitorch-only", str(only)]
            if fresh:
                args += ["--minitorch-not-started", ",".join(t.id for t in fresh)]
            run = _run_status_tests(root, args, console, limits, profile)
        if run.exitstatus == 5 and run.collected == []:  # only files without graded tests
            run.exitstatus = 0
    else:
        console.print(f"Every test result ({kept_results}) is kept from an earlier run: "
                      "nothing the tests read has changed.", highlight=False)  # fmt: skip
    if where is not None:
        save_kept(where, root, _to_keep(keys, kept, again, run))
    run = _merge_kept(kept, again, run)
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
        missing = "; ".join(
            f"{tool.name} ({why}): {tool.install}" for tool in task.needs if (why := tool.missing())
        )
        statuses.append(
            TaskStatus(task, passed, len(ids), stubbed, task in fresh, library, missing)
        )
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
    style = {"passed": "green", "failed": "red", "not started": "dim", "not checked": "yellow"}
    for s in statuses:
        title = s.task.title + (" (optional)" if s.task.optional else "")
        table.add_row(
            str(s.task.stage), s.task.id, Text(title), f"{s.passed}/{s.total}",
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
    unchecked = [s for s in statuses if s.state == "not checked"]
    for why in dict.fromkeys(s.missing for s in unchecked):
        ids = ", ".join(s.task.id for s in unchecked if s.missing == why)
        console.print(literal_line((f"Not checked here: task(s) {ids}", "yellow"),
                           f": their tests need {why}"))  # fmt: skip
    if run.problem():
        console.print(literal_line(("The test run itself failed: ", "red"), run.problem()))
    pending = next((s.task for s in statuses if s.state not in ("passed", "not checked")), None)
    console.print(literal_line(next_step(pending)))
    return 0


_MACHINERY = re.compile(r"<frozen importlib|^\s*\?\?\?$|site-packages/|/lib/python3\.\d+/")


def _why_not_collected(root: Path, run: RunResult, console: Console) -> None:
    """The few lines that say why the tests did not collect: a stage file that does not
    import, told by :mod:`autograder.broken_file` (file, line, the line, the error);
    else pytest's report without the import machinery's frames."""
    lines = first_broken(root)
    if lines is not None:
        for line in lines:
            console.print(literal_line(line), highlight=False)
        console.print("Fix that file and run the command again: no test can run until it "
                      "imports.")  # fmt: skip
        return
    detail = "\n".join(run.collect_errors) or run.output
    kept = [line for line in detail.splitlines() if not _MACHINERY.search(line)]
    console.print(literal_line("\n".join(kept)[-3000:]), highlight=False)


def list_tasks(root: Path = ROOT, console: Console | None = None) -> int:
    """``minitorch test`` with no task: the tasks of this tree and how to run one."""
    console = console or Console()
    table = Table(title="Tasks (run one with: minitorch test <task>)")
    for name in ("task", "title", "points", "assignment"):
        table.add_column(name)
    for task in available_tasks(root):
        title = task.title + (" (optional)" if task.optional else "")
        table.add_row(task.id, Text(title), str(task.points), f"module{task.stage}/README.md")
    console.print(table)
    return 0


def _short(nodeid: str) -> str:
    return nodeid.removeprefix("tests/")


_PYTEST_HINT = re.compile(
    r"\s*(Use -v+ to get (more|the full) diff|Full diff:|Omitting \d+ identical)"
)
"""pytest's hints for its own command line, which ``minitorch test`` does not take."""


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
        and not _PYTEST_HINT.match(line)
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
        console.print(literal_line((exc.args[0], "red")))
        return 2
    if task not in available_tasks(root):
        console.print(f"[red]task {task.id}'s stage (module{task.stage}) is not in this tree[/]")
        return 2
    console.print(
        literal_line((f"Task {task.id}: {task.title}", "bold"), f" ({task.points} points)")
    )
    args = [*test_dirs((task,)), "-m", task.marker, "-q", "--tb=short", "--minitorch-reach",
            *extra]  # fmt: skip
    run = _run(root, args, console, f"running task {task.id}'s tests", limits)
    if full:
        console.print(literal_line(run.output), highlight=False)
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
            console.print(literal_line(f"  {at:<28} {function}"))
    foreign = sorted(k for k in reached if k[0] != task.id)
    if foreign:
        console.print("Needs other tasks first:")
        for other, function, file in foreign:
            console.print(
                literal_line(f"  task {other}: {function} in {file}  (minitorch test {other})")
            )

    if other_failures:
        # The tests of the task's own files first (6.3's codec before autocast's use of it).
        own_files = {"test_" + Path(f).name for f in task.files}
        other_failures.sort(key=lambda r: Path(r.nodeid.split("::")[0]).name not in own_files)
        console.print(f"[red]Failing tests ({len(other_failures)}):[/]")
        shown = other_failures if full else other_failures[:FAILURES_SHOWN]
        for result in shown:
            console.print(literal_line("  ", (_short(result.nodeid), "bold")))
            for line in _message(result, limits):
                console.print(literal_line(f"    {line}"), highlight=False)
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
            console.print(literal_line(row))
    if not_run:
        console.print(f"[red]{len(not_run)} of the task's tests did not run[/] (the run "
                      "stopped early: see below).")  # fmt: skip
    if run.problem():
        console.print(literal_line(("The test run itself failed: ", "red"), run.problem()))

    points = task.points * len(passed) / len(results)
    outcome = {r.nodeid: r.outcome for r in results}
    if not still_stubbed(task, root) and library_work_failed(outcome, outcome.get):
        points = 0.0
        console.print("[red]Library work is not credited:[/] the task scores 0 until its "
                      "code is your own loops (the grader reads it the same way).")  # fmt: skip
    console.print(f"Task {task.id}: {len(passed)} of {len(results)} tests pass "
                  f"({points:.1f} / {task.points} points).")  # fmt: skip
    if not failed:
        console.print(
            literal_line((f"Task {task.id} is done. ", "green"), next_step(_next_task(task, root)))
        )
        return 0
    console.print(f'Assignment text: module{task.stage}/README.md, section "Task {task.id}".')
    return 1
