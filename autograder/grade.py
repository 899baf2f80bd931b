"""``minitorch grade``: score an untrusted submission, per task, in several formats.

How a submission is graded (the threat model is in ``autograder/README.md``):

1. A private workspace is built from an allow-list of the grader's own copy of the
   repository (the reference): the stage packages, the check runner and the checks.
   From the submission only the files the registry declares are taken, by content,
   and only when each is a regular file with one link (no symlink, no hard link, not
   the grader's own file) of at most 1 MiB; a missing or refused file gets its handout
   stub. With ``reference_prerequisites`` the declared files of stages below the graded
   one come from the reference instead.
2. Before anything runs, a task whose checks need a tool that is missing where the
   grader runs (``Task.needs``: MPI for 6.1 and 6.2, the ``dist`` extra) is set aside:
   it is reported as *not graded* (score 0, every format saying so, with the command
   that installs the tool), never as failed, and runs no check, not even the
   reference's; every other task is graded as below.
   A seed is drawn for this grade, and the isolation tier probed
   (:mod:`autograder.sandbox`: a bubblewrap sandbox, or a dedicated unprivileged user
   where namespaces are refused). A task that asks for the student's own loops and
   whose code does library work is not credited (:mod:`autograder.own_work`); every
   other task's checks (``tests/moduleN/checks.py``) run on the workspace in
   isolation: no reference, limits, an unprivileged user. What comes back is data
   only: each check's answer, as JSON lines on a pipe, read by one parser with limits
   (:mod:`autograder.channel`).
3. The same checks run on the reference, in a process that never sees the submission.
   A timed check (task 2.3's speed) also runs rounds: the reference's process answers
   each round and times the trusted baseline on it; the grader sends each round's seed
   to the sandbox only when it is ready and times the answer itself (:class:`RoundClock`).
4. The grader compares the two answers of every check (:mod:`autograder.checks`), and a
   timed check's fastest right round with its bar. A task
   scores ``points x matching checks / checks``. An answer that is missing, malformed or
   different earns nothing (fail closed); nothing the sandboxed code does can change how
   the answers are compared.
5. ``results.json`` (Gradescope), ``classroom.json`` (GitHub Classroom), ``junit.xml``
   and ``summary.md`` are always written, even when the submission hangs, crashes or
   does not import, or the grader itself fails.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import stat
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder import paths, sandbox
from autograder.channel import (
    REFERENCE_LIMITS,
    AnswerChannel,
    RawAnswers,
    RoundClock,
    answer_budgets,
    round_key,
    submission_limits,
)
from autograder.checks import Check, judge_answer, load_checks
from autograder.leftovers import remove_tree
from autograder.own_work import library_work
from autograder.paths import ROOT, available_tasks, course_tasks, repo_files
from autograder.private import bytecode_env
from autograder.regions import find_regions, stub_text
from autograder.task import MissingTool, Task, missing_tools

MAX_FILE_BYTES = 1 << 20


@dataclass
class Limits:
    """Resource limits of one task's sandboxed run."""

    per_test_seconds: float = 60.0
    """Per check (inside the run; a check that takes longer answers nothing)."""
    per_task_seconds: float = 600.0
    """Wall clock for the task's whole sandboxed run, enforced from outside."""
    memory_mb: int | None = 4096
    """Address space per process in the sandbox."""
    cache_mb: int = 512
    """The grade's kernel cache, all its files together (a run that passes it is stopped
    and the cache emptied)."""


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
    output: str = ""
    """The end of what the task's sandboxed run printed, when it ended early."""
    timings: list[tuple[str, str]] = field(default_factory=list)
    """Timed checks whose answers were right: check id -> their times and bar."""
    not_graded: str = ""
    """Why the task was not graded here, and how to have it graded ("" when it was): a
    tool its checks need is missing where the grader runs. It scores 0 with no check
    run, which says nothing about the submission."""
    skipped_ids: list[str] = field(default_factory=list)
    """The checks not run because the task was not graded here."""

    @property
    def max_score(self) -> float:
        return float(self.task.points)

    @property
    def status(self) -> str:
        """``passed``, ``failed``, or ``not graded``."""
        if self.not_graded:
            return "not graded"
        return "passed" if self.total and self.passed == self.total else "failed"

    def report(self) -> str:
        if self.not_graded:
            return (f"NOT GRADED here: {self.not_graded}. No check of this task ran: its 0 "
                    "says nothing about the submission.")  # fmt: skip
        lines = [f"{self.passed}/{self.total} checks passed."]
        if self.problem:
            lines.append(f"Problem: {self.problem}")
        for check_id, message in self.failures[:20]:
            lines.append(f"FAILED {check_id}: {message[:400]}")
        if len(self.failures) > 20:
            lines.append(f"... and {len(self.failures) - 20} more failing checks")
        for check_id, times in self.timings:
            lines.append(f"TIMED {check_id}: {times}")
        shown = submission_output(self.output)
        if shown:
            lines.append(_OUTPUT_LABEL)
            lines += shown
        return "\n".join(lines)


_OUTPUT_LABEL = (
    "What the submission's code printed last (its own words, not the grader's; shortened, "
    "control characters and markup removed):"
)
_MARKUP: dict[str, str | int | None] = {"<": "‹", ">": "›", "&": "+", "`": "'"}
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\\\)?|.)")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e]")


def submission_output(text: str, lines: int = 15, width: int = 160) -> list[str]:
    """The last ``lines`` lines the submission printed, safe to show: terminal escape
    sequences and control characters removed, markup characters replaced, each line cut
    at ``width`` and marked with ``| `` as the submission's, not the grader's."""
    text = _CONTROL.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))
    text = text.translate(str.maketrans(_MARKUP))
    kept = [line.rstrip() for line in text.strip().splitlines()][-lines:]
    return [f"  | {line[:width]}" + (" [...]" if len(line) > width else "") for line in kept]


@dataclass
class GradeReport:
    scores: list[TaskScore]
    seconds: float
    notes: list[str] = field(default_factory=list)
    grader_error: str = ""
    """Set when grading itself failed (every task then scores zero)."""
    isolation: str = ""
    """How the submission's code was isolated (:attr:`sandbox.Isolation.label`)."""
    leftovers: list[str] = field(default_factory=list)
    """What the cleanup after the grade's runs could not remove (empty: nothing)."""
    missing: list[MissingTool] = field(default_factory=list)
    """Tools that tasks' checks need and this grader lacks: those tasks were not graded."""
    root: Path = ROOT
    """The grader's tree (where a missing tool is installed from)."""

    @property
    def score(self) -> float:
        return round(sum(s.score for s in self.scores), 2)

    @property
    def max_score(self) -> float:
        return float(sum(s.max_score for s in self.scores))

    @property
    def not_graded(self) -> list[TaskScore]:
        """The tasks that were not graded here (:attr:`TaskScore.not_graded`)."""
        return [s for s in self.scores if s.not_graded]

    def not_graded_lines(self) -> list[str]:
        """What the report says first when tasks were not graded: which, why, and how to
        have them graded (none when every task was graded)."""
        skipped = self.not_graded
        if not skipped:
            return []
        points = sum(s.max_score for s in skipped)
        ids = ", ".join(s.task.id for s in skipped)
        lines = [f"NOT GRADED here: task{'s' if len(skipped) > 1 else ''} {ids} "
                 f"({points:g} of {self.max_score:g} points). They show 0 because they were "
                 "not graded, not because of the submission."]  # fmt: skip
        for gap in self.missing:
            them = "it" if len(gap.tasks) == 1 else "them"
            lines.append(
                f"{gap.task_ids.capitalize()} need{'s' if len(gap.tasks) == 1 else ''} "
                f"{gap.tool.name}, which the grader's Python ({sys.executable}) lacks: "
                f"{gap.why}. To grade {them}, install it ({gap.tool.install}) into that "
                f"Python and grade again: {install_command(gap, self.root)} "
                f"({' '.join(f'--task {t.id}' for t in gap.tasks)} grades only {them})."
            )
        return lines


def install_command(gap: MissingTool, root: Path) -> str:
    """The command that installs a missing tool into the grader's Python, from its tree."""
    install = gap.tool.install
    if install.startswith("pip "):  # this Python's pip, whatever ``pip`` is on the PATH
        install = f"{shlex.quote(sys.executable)} -m {install}"
    return f"cd {shlex.quote(str(root))} && {install}"


def not_graded_why(gap: MissingTool) -> str:
    """A task's :attr:`TaskScore.not_graded`: the tool, what of it is missing, the install."""
    return f"needs {gap.tool.name} ({gap.why}): {gap.tool.install} in the grader's environment"


def not_graded(task: Task, checks: Sequence[Check], gap: MissingTool) -> TaskScore:
    """The score of a task whose checks need a tool this grader lacks: none run."""
    return TaskScore(task=task, total=len(checks), not_graded=not_graded_why(gap),
                     skipped_ids=[c.id for c in checks])  # fmt: skip


CHECK_RUNTIME = ("autograder/__init__.py", "autograder/checks.py", "tests/__init__.py")
"""What a check run needs of the tooling, besides the stage packages and the checks."""


def workspace_files(root: Path) -> list[Path]:
    """What a check run sees of the grader's tree, by an allow-list: the stage packages
    (their declared files come from the submission or are stubs), the check runner, and
    of ``tests/`` only the checks and the helpers they import (``tests/*.py`` and
    ``tests/moduleN/*.py`` that are not test files). Nothing else: not the tooling's own
    tests (``tests/autograder/``, with its plain solutions), not ``project/``, not git."""
    stages = {f"module{t.stage}" for t in available_tasks(root)}
    keep = []
    for rel in repo_files(root):
        parts = rel.parts
        if parts[0] in stages or rel.as_posix() in CHECK_RUNTIME:
            keep.append(rel)
        elif (
            parts[0] == "tests" and rel.suffix == ".py" and not rel.name.startswith("test_")
            and rel.name != "conftest.py"
            and (len(parts) == 2 or (len(parts) == 3 and parts[1] in stages))
        ):  # fmt: skip
            keep.append(rel)
    return keep


def _tree_identities(root: Path) -> set[tuple[int, int]]:
    """(device, inode) of every file of the grader's tree."""
    found = set()
    for rel in repo_files(root):
        try:
            info = os.stat(root / rel)
        except OSError:
            continue
        found.add((info.st_dev, info.st_ino))
    return found


def _safe_submission_file(
    submission: Path, rel: str, forbidden: set[tuple[int, int]] | None = None
) -> tuple[bytes | None, str]:
    """The bytes of ``submission/rel``, and "" when taken, else why not: it must be a
    regular file of at most 1 MiB, reached through no symbolic link, with one link only
    (no hard link to a file elsewhere) and not the very file of one in the grader's
    tree (``forbidden``: their device and inode). Opened component by component without
    following links, and read by content from the descriptor checked."""
    parts = Path(rel).parts
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(submission, flags | os.O_DIRECTORY)
    except OSError:
        return None, "the submission folder cannot be read"
    try:
        for part in parts[:-1]:
            try:
                next_fd = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            except OSError:
                return None, "missing, or reached through a symbolic link"
            os.close(fd)
            fd = next_fd
        try:
            file_fd = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            return None, "missing, or a symbolic link"
        with os.fdopen(file_fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None, "not a regular file"
            if info.st_nlink != 1:
                return None, f"a hard link ({info.st_nlink} names for one file)"
            if forbidden is not None and (info.st_dev, info.st_ino) in forbidden:
                return None, "the grader's own copy of the file"
            if info.st_size > MAX_FILE_BYTES:
                return None, "larger than 1 MiB"
            data = f.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                return None, "larger than 1 MiB"
            return data, ""
    finally:
        os.close(fd)


def build_workspace(
    submission: Path,
    root: Path,
    workspace: Path,
    graded_stage: int | None,
    reference_prerequisites: bool,
) -> list[str]:
    """Fill ``workspace`` with :func:`workspace_files`; return notes about declared files
    that were missing or refused. The result is readable by everyone (the sandbox user)
    and writable by no one else."""
    notes: list[str] = []
    declared = {path: task.stage for task in course_tasks(root) for path in task.files}
    own_tree = submission.resolve() == root.resolve()  # the grader grading its own tree
    forbidden = None if own_tree else _tree_identities(root)
    files = workspace_files(root)
    for rel in files:
        path = rel.as_posix()
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if path not in declared:
            shutil.copyfile(root / rel, target)
            continue
        stage = declared[path]
        if reference_prerequisites and graded_stage is not None and stage < graded_stage:
            shutil.copyfile(root / rel, target)
            continue
        data: bytes | None
        if own_tree:
            data, why = (root / rel).read_bytes(), ""
        else:
            data, why = _safe_submission_file(submission, path, forbidden)
        if data is None:
            if graded_stage is None or stage <= graded_stage:  # later stages: not graded
                notes.append(f"{path}: {why}; the handout's stub was used instead")
            reference = (root / rel).read_text(encoding="utf-8")
            target.write_text(stub_text(reference, path), encoding="utf-8")
        else:
            target.write_bytes(data)
    for rel in files:  # the tree's times: a kernel cache kept for a trusted tree
        stamp = (root / rel).stat().st_mtime_ns  # (release) stays valid
        os.utime(workspace / rel, ns=(stamp, stamp))
    for folder, _, names in os.walk(workspace):
        os.chmod(folder, 0o755)
        for name in names:
            os.chmod(os.path.join(folder, name), 0o644)
    return notes


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


def require_reference(root: Path, tasks: Sequence[Task]) -> None:
    """Grading compares with the reference's answers: refuse a tree without solutions."""
    for task in tasks:
        for path in task.files:
            text = (root / path).read_text(encoding="utf-8")
            if not any(r.task_id == task.id for r in find_regions(text, path)):
                raise ValueError(
                    f"{root} is not the reference: {path} has no solution of task {task.id}. "
                    "minitorch grade compares a submission's answers with the reference's, "
                    "so it runs from the reference (see autograder/README.md)"
                )


CHECK_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The PATH of a check run (the reference's and the submission's): a program a task's
checks start (``mpiexec``) is found beside the grader's Python or there."""


def _check_env(tree: str, cache: str, seconds: float) -> dict[str, str]:
    env = {
        "PATH": CHECK_PATH,
        "LANG": "C.UTF-8",
        "HOME": "/tmp/home",
        "TMPDIR": "/tmp",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "MPLBACKEND": "Agg",
        "PYTHONPATH": os.pathsep.join([tree, *sandbox.site_dirs()]),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "NUMBA_CACHE_DIR": cache,
        "OMP_WAIT_POLICY": "PASSIVE",
        "OPENBLAS_NUM_THREADS": "1",  # NumPy's own threads: the checks' arrays are small
        "MINITORCH_CHECK_SECONDS": str(seconds),
    }
    for name in ("NUMBA_ENABLE_CUDASIM", "CUDA_VISIBLE_DEVICES", "NUMBA_NUM_THREADS"):
        if name in os.environ:
            env[name] = os.environ[name]
    if "NUMBA_ENABLE_CUDASIM" not in env and not Path("/dev/nvidia0").exists():
        env["NUMBA_ENABLE_CUDASIM"] = "1"  # stage 3 on Numba's CUDA simulator, as the tests
    return env


@dataclass(frozen=True)
class Verdict:
    """What is kept of a submitted answer once judged: why it is wrong (None: right)."""

    problem: str | None


@dataclass
class Answers:
    """What one run of checks gave back."""

    answers: Mapping[str, Any]
    """Check id (or :func:`round_key`) -> the answer, or its :class:`Verdict`."""
    run: sandbox.SandboxResult
    seconds: dict[str, float] = field(default_factory=dict)
    """Timed rounds (:func:`round_key`) -> seconds: the grader's clock (submission) or
    the baseline's time (reference)."""
    ignored: str = ""
    """The lines of the answer pipe that did not count, if any (``AnswerChannel.ignored``)."""


def round_seeds(checks: Sequence[Check]) -> list[int]:
    """Fresh seeds for the timed rounds of this grade (none without timed checks)."""
    most = max((c.timed.rounds for c in checks if c.timed is not None), default=0)
    return [secrets.randbits(62) for _ in range(most)]


def reference_answers(
    root: Path,
    tasks: Sequence[Task],
    checks: dict[str, list[Check]],
    seed: int,
    limits: Limits,
    rounds: Sequence[int] = (),
    kernel_cache: Path | None = None,
) -> Answers:
    """The reference's answers: the grader's own tree, in a child that sees no submission
    (with ``rounds``, also each timed round's answer and the baseline's time).
    ``kernel_cache``: where its kernels are cached, if not where Numba keeps them for
    that tree (the release shares one with its run of the reference's tests)."""
    with tempfile.TemporaryDirectory(prefix="minitorch-reference-") as tmp:
        env = _check_env(str(root), str(Path(tmp) / "numba"), limits.per_test_seconds)
        env.update(HOME=tmp, TMPDIR=tmp, MPLCONFIGDIR=tmp, **bytecode_env())
        # The reference's kernels are cached where Numba keeps them for that tree (beside
        # its sources, or NUMBA_CACHE_DIR): compiled once, reused by every later grade.
        env.pop("NUMBA_CACHE_DIR")
        if kernel_cache is not None:
            env["NUMBA_CACHE_DIR"] = str(kernel_cache)
        elif "NUMBA_CACHE_DIR" in os.environ:
            env["NUMBA_CACHE_DIR"] = os.environ["NUMBA_CACHE_DIR"]
        argv = [sys.executable, "-m", "autograder.checks", *(t.id for t in tasks),
                "--seed", str(seed)]  # fmt: skip
        if rounds:
            # Through the environment, not the command line: a process's command line is
            # readable by every user (another grade's tier-2 run on the same machine).
            env["MINITORCH_ROUNDS"] = ",".join(map(str, rounds))
        channel = AnswerChannel(REFERENCE_LIMITS, raw=True)
        run = sandbox.run_unsandboxed(
            argv, cwd=root, env=env, channel=channel,
            limits=sandbox.SandboxLimits(wall_seconds=limits.per_task_seconds * len(tasks)),
        )  # fmt: skip
    answers, baselines = RawAnswers(channel.lines), channel.baselines
    for task in tasks:
        for entry in checks.get(task.id, []):
            keys = [entry.id]
            if entry.timed is not None:
                keys += [round_key(entry.id, n) for n in range(entry.timed.rounds)]
            for key in keys:  # (an error's record holds a message: only those are read)
                detail = None
                if key not in answers:
                    detail = run.output[-1500:]
                elif b'"message": ' in answers.line(key):
                    answer = answers[key]
                    if isinstance(answer, dict) and "message" in answer:
                        detail = answer["message"]
                if detail is not None:
                    raise RuntimeError(
                        f"the reference does not answer check {key} ({run.how_it_ended()}): "
                        f"{detail}"
                    )
                if key != entry.id and key not in baselines:
                    raise RuntimeError(f"the reference did not time the baseline of {key}")
    return Answers(answers, run, baselines)


def submission_answers(
    workspace: Path,
    cache: Path,
    task: Task,
    checks: Sequence[Check],
    seed: int,
    limits: Limits,
    isolation: sandbox.Isolation,
    clock: RoundClock | None = None,
    reference: Answers | None = None,
) -> Answers:
    """The submission's answers to one task's checks, from a fresh isolated run
    (``clock`` runs and times the task's timed rounds). With the ``reference``'s answers,
    each line is held to a few times the length of the reference's answer to its check,
    and each answer is judged as it arrives: only its :class:`Verdict` is kept."""
    box = sandbox.SandboxLimits(
        wall_seconds=limits.per_task_seconds, memory_mb=limits.memory_mb or 0,
        cache_mb=limits.cache_mb,
    )  # fmt: skip
    argv = [sys.executable, "-S", "-m", "autograder.checks", task.id, "--seed", str(seed)]
    work, cache_path = isolation.paths(workspace, cache)
    env = _check_env(work, cache_path, limits.per_test_seconds)
    if isolation.tier == sandbox.NONE:
        env.update(HOME=str(cache), TMPDIR=str(cache), MPLCONFIGDIR=str(cache))
    rounds = sum(c.timed.rounds for c in checks if c.timed is not None)
    ids = frozenset(c.id for c in checks)
    budgets = verdict = None
    if reference is not None and isinstance(reference.answers, RawAnswers):
        known = reference.answers
        budgets = answer_budgets({key: known.line(key) for key in known
                                  if key.split("#", 1)[0] in ids})  # fmt: skip
        by_id = {c.id: c for c in checks}

        def verdict(key: str, answer: Any) -> Verdict:
            return Verdict(judge_answer(by_id[key.split("#", 1)[0]], known[key], answer))

    channel = AnswerChannel(submission_limits(len(checks), rounds, budgets), ids, clock,
                            verdict=verdict)  # fmt: skip
    run = sandbox.run_isolated(
        isolation, argv, work=workspace, env=env, limits=box, channel=channel, cache_dir=cache
    )  # fmt: skip
    if run.stopped.endswith("kernel cache"):  # emptied: the next task starts with none
        run.leftovers += remove_tree(cache)
        cache.mkdir(exist_ok=True)
        if os.getuid() == 0 and isolation.tier != sandbox.NONE:
            os.chown(cache, isolation.uid, isolation.uid)
    return Answers(channel.answers, run, clock.seconds if clock else {}, channel.ignored())


def _judged(entry: Check, reference: Any, answer: Any) -> str | None:
    """Why an answer (or its :class:`Verdict`, judged when it arrived) is wrong, or None."""
    if isinstance(answer, Verdict):
        return answer.problem
    return judge_answer(entry, reference, answer)


def judge_timed(entry: Check, reference: Answers, mine: Answers) -> tuple[str | None, str]:
    """A timed check's rounds: every round's answer right, and the fastest round within
    the bar (``within`` x the baseline's fastest round). The reason (or None), and the
    times, for the report."""
    timed = entry.timed
    assert timed is not None
    best = baseline = float("inf")
    for number in range(timed.rounds):
        key = round_key(entry.id, number)
        answer = mine.answers.get(key)
        if answer is None:
            return f"round {number + 1} of {timed.rounds}: no answer", ""
        if (problem := _judged(entry, reference.answers.get(key), answer)) is not None:
            return f"round {number + 1} of {timed.rounds}: {problem}", ""
        best = min(best, mine.seconds.get(key, float("inf")))
        baseline = min(baseline, reference.seconds[key])
    bar = timed.within * baseline
    times = (
        f"the fastest of {timed.rounds} rounds took {best * 1e3:.1f} ms (timed by the "
        f"grader), the bar is {bar * 1e3:.1f} ms: {timed.within:.3g} x {timed.what} "
        f"({baseline * 1e3:.1f} ms on the same inputs)"
    )
    return (None if best <= bar else f"too slow: {times}"), times


def library_work_of(task: Task, workspace: Path, root: Path) -> list[str]:
    """Why a task with an own-work rule (``Task.own_work``) is not credited: each use of
    what its rule refuses in the code its functions reach in the workspace, across its
    files (read, never run: :mod:`autograder.own_work`), outside the code that the
    reference's walk of the same task reaches in ``root`` unchanged (given code, or the
    reference's own). Empty when there is none."""
    if not task.own_work:
        return []
    from autograder.own_work import READING, read_tree, trusted_code

    declared = {path for t in course_tasks(root) for path in t.files}
    with READING:
        trust = trusted_code(read_tree(root, declared), task)
        uses = library_work(read_tree(workspace, declared), task, trust)
        return [use.message() for use in uses]


_ASKS = {
    "kernel": ("your own loops", "library work",
               "Work done by NumPy's (or any library's) routines earns nothing here"),
    "codec": ("your own bit arithmetic", "library work",
              "A dtype conversion (NumPy's, ml_dtypes') doing the codec's work earns nothing"),
    "messages": ("your own point-to-point messages", "what stands in for them",
                 "An MPI collective (or a way around the communicator) earns nothing here"),
}  # fmt: skip
"""Per own-work rule: what the task asks for, what its code was found to use, the rule."""


def not_credited(task: Task, checks: list[Check], uses: list[str]) -> TaskScore:
    """The score of a task whose code breaks its own-work rule: nothing, and why (its
    checks are not run)."""
    asks, found, rule = _ASKS.get(task.own_work, _ASKS["kernel"])
    shown = "; ".join(uses[:5]) + (f"; and {len(uses) - 5} more" if len(uses) > 5 else "")
    why = (f"not credited: task {task.id} asks for {asks}, and its code uses {found} "
           f"({shown}). {rule}: see 'Library work' in autograder/README.md")  # fmt: skip
    reason = f"not credited: {found} in the task's code (see the problem above)"
    return TaskScore(task=task, total=len(checks), problem=why,
                     failures=[(c.id, reason) for c in checks])  # fmt: skip


def score_task(task: Task, checks: list[Check], reference: Answers, mine: Answers) -> TaskScore:
    """Score one task by comparing answers (trusted code only; fail closed)."""
    result = TaskScore(task=task, total=len(checks), seconds=mine.run.seconds)
    missing = 0
    for entry in checks:
        answer = mine.answers.get(entry.id)
        if answer is None:
            missing += 1
            result.failures.append((entry.id, "no answer"))
            continue
        problem = _judged(entry, reference.answers.get(entry.id), answer)
        if problem is None and entry.timed is not None:
            problem, times = judge_timed(entry, reference, mine)
            if times:
                result.timings.append((entry.id, times))
        if problem is None:
            result.passed += 1
            result.passed_ids.append(entry.id)
        else:
            result.failures.append((entry.id, problem))
    run = mine.run
    if missing:
        how = run.how_it_ended()
        if run.timed_out:
            how = f"reached the task's time limit ({run.seconds:.0f} s)"
        result.problem = (
            f"the check process {how} before {missing} of {len(checks)} checks answered"
        )
        result.output = run.output[-3000:]
    elif run.stopped:
        result.problem = f"the check process {run.how_it_ended()}"
    elif run.returncode not in (0, None) and not run.timed_out:
        result.problem = f"the check process {run.how_it_ended()} after answering"
    if mine.ignored:
        result.problem = f"{result.problem}; {mine.ignored}" if result.problem else mine.ignored
    if result.total:
        result.score = round(task.points * result.passed / result.total, 2)
    return result


@dataclass(frozen=True)
class Prepared:
    """What one grade needs of the reference: the seed, the timed rounds' seeds and the
    reference's answers, for ``task_ids``."""

    task_ids: tuple[str, ...]
    seed: int
    rounds: list[int]
    answers: Answers


def prepare(
    root: Path,
    tasks: Sequence[Task],
    checks: dict[str, list[Check]] | None = None,
    limits: Limits | None = None,
    seed: int | None = None,
    kernel_cache: Path | None = None,
) -> Prepared:
    """The reference's answers (in a child that sees no submission) for a fresh seed."""
    checks = checks if checks is not None else load_checks({t.stage for t in tasks}, root)
    seed = secrets.randbits(31) if seed is None else seed
    rounds = round_seeds([c for t in tasks for c in checks[t.id]])
    answers = reference_answers(root, tasks, checks, seed, limits or Limits(), rounds,
                                kernel_cache)  # fmt: skip
    return Prepared(tuple(t.id for t in tasks), seed, rounds, answers)


def grade(
    submission: Path,
    *,
    root: Path = ROOT,
    stage: int | None = None,
    reference_prerequisites: bool = False,
    limits: Limits | None = None,
    log: Callable[[str], object] | None = None,
    task_ids: Sequence[str] | None = None,
    unsafe_no_sandbox: bool = False,
    seed: int | None = None,
    kernel_cache: Path | None = None,
    prepared: Prepared | None = None,
) -> GradeReport:
    """Grade ``submission`` against the reference tree ``root`` (only the tasks
    ``task_ids``, when given). ``kernel_cache``: a Numba cache folder kept between
    grades, for trusted submissions only (the release's own checks); otherwise each
    grade starts with an empty one, so no submission's run can plant kernels for
    another's. ``prepared``: the reference's answers from :func:`prepare` for the same
    tasks, shared by several grades (the release grades the handout and the reference
    with one set)."""
    limits = limits or Limits()
    start = time.monotonic()
    if not submission.is_dir():
        raise ValueError(f"the submission {submission} is not a folder")
    tasks = selected_tasks(root, stage, task_ids)
    if reference_prerequisites and stage is None:
        raise ValueError("--reference-prerequisites needs --stage N")
    require_reference(root, tasks)
    if reference_prerequisites:
        require_reference(root, [t for t in available_tasks(root) if t.stage < (stage or 0)])
    # Before anything runs: a task whose checks need a tool that is missing here (MPI)
    # is not graded, and said so; every other task is graded as usual.
    missing = missing_tools(tasks, CHECK_PATH)
    if log is not None:
        for gap in missing:
            log(f"not graded here: {gap.task_ids}: {not_graded_why(gap)}")
    notes: list[str] = []
    if unsafe_no_sandbox:
        isolation = sandbox.Isolation(sandbox.NONE)
        notes.append("graded WITHOUT a sandbox (--unsafe-no-sandbox): the score is not "
                     "protected against a hostile submission")  # fmt: skip
    else:
        try:
            own = submission.resolve() == root.resolve()  # the grader's tree, as in a release
            isolation = sandbox.probe(sorted({root.resolve(), paths.ROOT}),
                                      None if own else submission)  # fmt: skip
        except sandbox.SandboxUnavailable as exc:
            raise sandbox.SandboxUnavailable(
                f"{exc}. Grading runs the submission's code only in isolation; pass "
                "--unsafe-no-sandbox to grade without it (only for code you trust)"
            ) from None
    if log is not None:
        log(f"isolation: {isolation.label}")
    checks = load_checks({t.stage for t in tasks}, root)
    empty = [t.id for t in tasks if not checks.get(t.id)]
    if empty:
        raise RuntimeError(f"tasks without graded checks: {', '.join(empty)}")
    if prepared is not None and prepared.task_ids != tuple(t.id for t in tasks):
        raise ValueError("prepared answers are for other tasks")
    scores: dict[str, TaskScore] = {}
    leftovers: list[str] = []
    tmp = tempfile.mkdtemp(prefix="minitorch-grade-")  # fresh, unpredictable, mode 0700
    try:
        workspace, cache = Path(tmp) / "work", kernel_cache or Path(tmp) / "cache"
        workspace.mkdir()
        cache.mkdir(parents=True, exist_ok=True)
        # Only this grade may enter its folder: a grade at the same time (another user,
        # or a tier-1 sandbox's user) must read nothing of this submission. Tier 1 binds
        # the workspace into its sandbox, so its user never walks this path.
        if isolation.tier == sandbox.USER:
            os.chown(tmp, 0, isolation.uid)
            os.chmod(tmp, 0o750)
        if os.getuid() == 0 and isolation.tier != sandbox.NONE:
            os.chown(cache, isolation.uid, isolation.uid)
        # Notes on missing files: of the graded stages only (--task 1.1: stages 0-1).
        upto = stage if stage is not None else max(t.stage for t in tasks)
        notes += build_workspace(submission, root, workspace, upto, reference_prerequisites)
        for gap in missing:
            for task in gap.tasks:
                scores.setdefault(task.id, not_graded(task, checks[task.id], gap))
        for task in tasks:  # library work scores 0 without running a check
            if task.id not in scores and (uses := library_work_of(task, workspace, root)):
                if log is not None:
                    log(f"task {task.id}: not credited (library work: {uses[0]})")
                scores[task.id] = not_credited(task, checks[task.id], uses)
        graded = [t for t in tasks if t.id not in scores]
        if prepared is None and graded:  # the reference's answers for those graded only
            seed = secrets.randbits(31) if seed is None else seed
            if log is not None:
                log(f"computing the reference's answers (seed {seed})")
            prepared = prepare(root, graded, checks, limits, seed)
        for task in graded:
            assert prepared is not None
            if log is not None:
                log(f"grading task {task.id} ({len(checks[task.id])} checks)")
            timed = {c.id: c.timed.rounds for c in checks[task.id] if c.timed is not None}
            mine = submission_answers(
                workspace, cache, task, checks[task.id], prepared.seed, limits, isolation,
                RoundClock(timed, prepared.rounds), prepared.answers,
            )  # fmt: skip
            leftovers += mine.run.leftovers
            scores[task.id] = score_task(task, checks[task.id], prepared.answers, mine)
    finally:
        leftovers += remove_tree(tmp)
        sandbox.release(isolation)
    if leftovers:
        notes.append(cleanup_note(leftovers))
    ordered = [scores[t.id] for t in tasks]
    return GradeReport(
        scores=ordered, seconds=time.monotonic() - start, notes=notes,
        isolation=isolation.label, leftovers=leftovers, missing=missing, root=root,
    )  # fmt: skip


def cleanup_note(leftovers: Sequence[str]) -> str:
    """The results' note on a grade whose cleanup could not remove everything."""
    shown = "; ".join(leftovers[:5]) + (f"; and {len(leftovers) - 5} more" if len(leftovers) > 5
                                       else "")  # fmt: skip
    return (
        f"CLEANUP FAILED: the grade's cleanup could not remove everything its runs "
        f"left ({shown}); look at the grading machine before it grades again"
    )


# -- writing the results ------------------------------------------------------------------


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _gradescope_test(s: TaskScore) -> dict[str, object]:
    test: dict[str, object] = {
        "name": f"Task {s.task.id}: {s.task.title}",
        "number": s.task.id,
        "score": s.score,
        "max_score": s.max_score,
        "status": s.status,
        "output": s.report(),
        "output_format": "text",
        "visibility": "visible",
    }
    if s.not_graded:  # Gradescope knows "passed" and "failed" only: neither is true
        test["name"] = f"{test['name']} (NOT GRADED here)"
        del test["status"]
        test["extra_data"] = {"not_graded": s.not_graded}
    return test


def gradescope_json(report: GradeReport) -> dict[str, object]:
    """Gradescope's ``results.json``; tasks not graded here (:attr:`TaskScore.not_graded`)
    are named so, carry no status, and are listed under ``not_graded``."""
    return {
        "score": report.score,
        "max_score": report.max_score,
        "execution_time": round(report.seconds, 2),
        "output": summary_markdown(report),
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "isolation": report.isolation,
        "cleanup": "FAILED: " + "; ".join(report.leftovers[:20])
        if report.leftovers
        else "complete",
        "not_graded": [{"task": s.task.id, "why": s.not_graded} for s in report.not_graded],
        "tests": [_gradescope_test(s) for s in report.scores],
    }


def classroom_json(report: GradeReport) -> dict[str, object]:
    """The shape GitHub Classroom's autograding reporter reads (version 1): a task not
    graded here is an ``error`` (the grader's), not a ``fail``."""
    return {
        "version": 1,
        "status": "pass" if report.score == report.max_score else "fail",
        "max_score": report.max_score,
        "tests": [
            {
                "name": f"Task {s.task.id}: {s.task.title}",
                "status": {"passed": "pass", "not graded": "error"}.get(s.status, "fail"),
                "score": s.score,
                "message": s.report(),
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
        if s.not_graded:  # every check skipped, with the reason
            suite = ET.SubElement(
                suites, "testsuite", name=f"Task {s.task.id}: {s.task.title}",
                tests=str(s.total), failures="0", skipped=str(s.total), time="0.000",
            )  # fmt: skip
            for nodeid in s.skipped_ids:
                case = ET.SubElement(suite, "testcase", classname=s.task.marker, name=nodeid)
                ET.SubElement(case, "skipped", message=f"not graded here: {s.not_graded}")
            continue
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


def _problem_cell(score: TaskScore, width: int = 200) -> str:
    """What went wrong with a task, for one table cell: the run's problem, else its first
    failing check (and how many more), so no failed task has a blank cell."""
    if score.not_graded:
        return f"NOT GRADED here: {score.not_graded}".replace("|", "/")
    text = score.problem
    if not text and score.failures:
        check_id, message = score.failures[0]
        more = len(score.failures) - 1
        text = f"{check_id}: {message}" + (f" (and {more} more failing)" if more else "")
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= width else text[: width - 3] + "..."


def summary_markdown(report: GradeReport) -> str:
    lines = [f"# Grade: {report.score:g} / {report.max_score:g}", ""]
    if report.not_graded:
        lines += [f"**{line}**" if i == 0 else line
                  for i, line in enumerate(report.not_graded_lines())] + [""]  # fmt: skip
    lines += ["| task | title | score | checks passed | problem |", "|---|---|---:|---:|---|"]
    for s in report.scores:
        score = "not graded" if s.not_graded else f"{s.score:g} / {s.max_score:g}"
        passed = "-" if s.not_graded else f"{s.passed}/{s.total}"
        lines.append(f"| {s.task.id} | {s.task.title} | {score} | {passed} | {_problem_cell(s)} |")
    timed = [f"- {check}: {times}" for s in report.scores for check, times in s.timings]
    if timed:
        lines += ["", "Timed checks:", *timed]
    if report.isolation:
        lines += ["", f"Isolation: {report.isolation}"]
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
    unsafe_no_sandbox: bool = False,
    seed: int | None = None,
) -> GradeReport:
    """Grade and write the results; on any grader error write zero results instead."""
    start = time.monotonic()
    try:
        report = grade(
            submission, root=root, stage=stage, reference_prerequisites=reference_prerequisites,
            limits=limits, log=log, task_ids=task_ids, unsafe_no_sandbox=unsafe_no_sandbox,
            seed=seed,
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
