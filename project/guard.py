"""What a script does when the framework it needs is not finished yet.

In a student's handout the scripts of ``project/`` run on the student's own code. When
one reaches a task that is still a stub, or needs a stage the handout does not have, it
prints one line, naming the task and the command to work on it, and exits with
:data:`EXIT_NOT_DONE` (3), never with a traceback from a stub::

    task 1.1 is not done yet: minitorch test 1.1

Two mechanisms give that line:

* :func:`install` (run when ``project`` is imported, so by every ``python -m project...``)
  puts a hook on uncaught exceptions: a stub's ``NotImplementedError("Task 1.1: ...")``
  or the import of a stage package the handout lacks ends the script with that line;
  a stage file that does not import (a syntax error) ends it with file, line and error
  (:mod:`autograder.broken_file`). Any other error keeps its traceback.
* :func:`require_stages` checks, before any work starts, that no task of the stages a
  script needs still holds a stub (a CUDA kernel's stub cannot raise, and a long
  compile should not come before the message).

Exit statuses of the project's scripts: 0 done; 1 a training gate failed; 2 bad
arguments or input; 3 a task or stage this script needs is not done or not present.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from autograder.regions import STUB_MESSAGE

EXIT_NOT_DONE = 3
"""Exit status of a script that needs a task that is not done (or a missing stage)."""

ROOT = Path(__file__).resolve().parents[1]
_STAGE = re.compile(r"^module(?P<stage>\d+)$")


def not_done_message(task_id: str) -> str:
    return f"task {task_id} is not done yet: minitorch test {task_id}"


def missing_stage_message(stage: int) -> str:
    return (
        f"stage {stage} (module{stage}) is not in this handout, and this script needs it; "
        "your instructor releases it later"
    )


def stage_present(stage: int, root: Path = ROOT) -> bool:
    return (root / f"module{stage}").is_dir()


def first_unfinished(stages: Iterable[int], root: Path = ROOT) -> str | None:
    """The one-line message for the first thing the given stages lack, or None.

    In registry order: a stage package that is missing, else the first task of those
    stages (optional tasks aside: the framework works without them) that still holds
    one of the handout's stubs."""
    from autograder.registry import TASKS
    from autograder.status import still_stubbed

    wanted = sorted(set(stages))
    for stage in wanted:
        if not stage_present(stage, root):
            return missing_stage_message(stage)
    for task in TASKS:
        if task.stage in wanted and not task.optional and still_stubbed(task, root):
            return not_done_message(task.id)
    return None


def stages_done(stages: Iterable[int], root: Path = ROOT) -> bool:
    return first_unfinished(stages, root) is None


def require_stages(*stages: int) -> None:
    """Exit with the one-line message unless every task of these stages is done."""
    message = first_unfinished(stages)
    if message is not None:
        _leave(message)


def require_tasks(*task_ids: str) -> None:
    """Exit with the one-line message unless each of these tasks is done (for an
    optional task a script's option needs: ``train_digits --batchnorm`` and 4.6)."""
    from autograder.registry import get_task
    from autograder.status import still_stubbed

    for task_id in task_ids:
        if still_stubbed(get_task(task_id), ROOT):
            _leave(not_done_message(task_id))


def _leave(message: str) -> None:
    sys.stdout.flush()
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(EXIT_NOT_DONE)


def explain(exc: BaseException) -> str | None:
    """The one-line message for a stub's error or a missing stage, else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, NotImplementedError):
            if m := STUB_MESSAGE.match(str(current)):
                return not_done_message(m["task"])
        if isinstance(current, ModuleNotFoundError) and current.name:
            if m := _STAGE.match(current.name.split(".")[0]):
                stage = int(m["stage"])
                if not stage_present(stage):
                    return missing_stage_message(stage)
        current = current.__cause__ or current.__context__
    return None


def _hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    message = explain(exc)
    if message is None:
        from autograder.broken_file import describe

        lines = describe(exc, ROOT)  # a stage file that does not import: its few lines
        if lines is None:
            _previous(kind, exc, tb)
            return
        sys.stdout.flush()
        print("\n".join([*lines, "Fix that file and run again."]), file=sys.stderr, flush=True)
        os._exit(1)
    try:
        sys.stdout.flush()
        print(message, file=sys.stderr, flush=True)
    finally:
        os._exit(EXIT_NOT_DONE)  # an excepthook cannot choose the exit status otherwise


_previous = sys.excepthook


def install() -> None:
    """Route uncaught stub errors and missing stages to the one-line message."""
    global _previous
    if sys.excepthook is not _hook:
        _previous = sys.excepthook
        sys.excepthook = _hook
