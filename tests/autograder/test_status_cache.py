"""``minitorch status`` keeps its results between runs, on the toy course.

A test file's results are kept under a key: a digest of every file its tests may read
(``status.file_keys``) and of the environment. A second status with nothing changed runs
no test; a change to a task's file, to a test file or to a file the tests import runs the
tests that read it again, and only those; a failed test always runs again; a cache that
is not exactly what status writes is ignored. Which tests a status runs is seen through
the list it hands pytest (``--minitorch-only``). Progress is told in plain lines, while
the tests run, when the output is not a terminal.
"""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from autograder import status
from autograder.runner import RunResult
from autograder.status import (
    CACHE_VARIABLE,
    RunLimits,
    StatusProgress,
    collect_status,
    file_keys,
    load_kept,
    status_cache_file,
)
from tests.autograder.toy import toy_course, toy_tasks

OPERATORS = "tests/module0/test_operators.py"
TOTAL = "tests/module0/test_total.py"
VECTORS = "tests/module1/test_vectors.py"
EVERY_FILE = [OPERATORS, TOTAL, VECTORS]
ALL_PASS = {"0.1": (3, 3, "passed"), "0.2": (2, 2, "passed"), "1.1": (2, 2, "passed")}


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The toy reference (every task solved), with a cache folder of its own."""
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    return toy_course(tmp_path / "toy")


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """What each status run asked pytest to run (test files, or single tests), in order."""
    asked: list[list[str]] = []
    real = status.run_pytest

    def spy(tree: Path, args: list[str], **kwargs: Any) -> RunResult:
        only = Path(args[args.index("--minitorch-only") + 1])
        asked.append(sorted(only.read_text(encoding="utf-8").split()))
        return real(tree, args, **kwargs)

    monkeypatch.setattr(status, "run_pytest", spy)
    return asked


def status_of(tree: Path, limits: RunLimits | None = None) -> dict[str, tuple[int, int, str]]:
    """Task id -> (tests passed, tests, state), as ``minitorch status`` shows them."""
    console = Console(file=io.StringIO())
    statuses, run = collect_status(tree, console=console, limits=limits or RunLimits())
    assert not run.problem() and not run.collect_errors, (run.problem(), run.output)
    return {s.task.id: (s.passed, s.total, s.state) for s in statuses}


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_a_second_status_with_nothing_changed_runs_no_test(
    toy: Path, runs: list[list[str]]
) -> None:
    assert status_of(toy) == ALL_PASS
    assert runs == [EVERY_FILE]
    assert status_of(toy) == ALL_PASS
    assert runs == [EVERY_FILE], "the second status ran tests again"


def test_a_change_to_a_tasks_file_runs_again_the_tests_that_read_it(
    toy: Path, runs: list[list[str]]
) -> None:
    status_of(toy)
    edit(toy / "module1/vectors.py", "return sums.total(", "return 1.0 + sums.total(")
    assert status_of(toy) == {**ALL_PASS, "1.1": (1, 2, "failed")}
    assert runs[-1] == [VECTORS], "stage 0's tests read nothing of stage 1"


def test_a_change_to_a_course_file_the_tests_import_runs_them_again(
    toy: Path, runs: list[list[str]]
) -> None:
    """Task 1.1's tests reach stage 0's ``mul`` through ``module1/vectors.py``."""
    status_of(toy)
    edit(toy / "module0/operators.py", "return x * y", "return x * y + 1.0")
    after = status_of(toy)
    assert after["0.1"][2] == after["1.1"][2] == "failed", after
    assert after["1.1"] == (1, 2, "failed") and after["0.2"] == ALL_PASS["0.2"]
    assert runs[-1] == EVERY_FILE


def test_a_change_to_a_test_file_or_a_helper_it_imports_runs_it_again(
    toy: Path, runs: list[list[str]]
) -> None:
    """The test file itself, a helper of its stage's test folder, and a helper at the
    top of ``tests/`` shared by every stage."""
    (toy / "tests/module0/expected.py").write_text("SUM = 6.5\n", encoding="utf-8")
    (toy / "tests/numbers.py").write_text("FIRST = [1.0, 2.0]\n", encoding="utf-8")
    edit(toy / TOTAL, "from module0.sums import total",
         "from module0.sums import total\nfrom tests.module0 import expected")  # fmt: skip
    edit(toy / TOTAL, "== 6.5", "== expected.SUM")
    edit(toy / VECTORS, "from module1.vectors import dot",
         "from module1.vectors import dot\nfrom tests.numbers import FIRST")  # fmt: skip
    edit(toy / VECTORS, "dot([1.0, 2.0], [3.0, -4.0])", "dot(FIRST, [3.0, -4.0])")
    assert status_of(toy) == ALL_PASS

    with open(toy / TOTAL, "a", encoding="utf-8") as f:  # the test file: a failing test
        f.write("\n\ndef test_total_of_one() -> None:\n    assert total([2.0]) == 3.0\n")
    assert status_of(toy)["0.2"] == (2, 3, "failed")
    # A test file may import another (``from tests.module1.test_tensor_dtype import``),
    # and a later stage's an earlier one's: all of them run again.
    assert runs[-1] == EVERY_FILE

    (toy / "tests/module0/expected.py").write_text("SUM = 7.0\n", encoding="utf-8")
    assert status_of(toy)["0.2"] == (1, 3, "failed")

    (toy / "tests/numbers.py").write_text("FIRST = [1.0, 3.0]\n", encoding="utf-8")
    assert status_of(toy)["1.1"] == (1, 2, "failed")
    assert runs[-1] == EVERY_FILE


def test_failed_tests_run_again_and_passed_ones_are_kept(toy: Path, runs: list[list[str]]) -> None:
    """A failure may come from the machine (a time limit on a busy one): it is never
    kept; the passes beside it are."""
    edit(toy / "module1/vectors.py", "return sums.total(", "return 1.0 + sums.total(")
    assert status_of(toy)["1.1"] == (1, 2, "failed")
    assert status_of(toy)["1.1"] == (1, 2, "failed")
    assert runs == [EVERY_FILE, [f"{VECTORS}::test_dot"]]
    edit(toy / "module1/vectors.py", "return 1.0 + sums.total(", "return sums.total(")
    assert status_of(toy) == ALL_PASS
    assert status_of(toy) == ALL_PASS
    assert len(runs) == 3


def test_the_run_itself_is_part_of_the_key(
    toy: Path, runs: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A time limit decides outcomes too; so do the environment's settings."""
    status_of(toy)
    status_of(toy, RunLimits(test_seconds=30))
    assert runs == [EVERY_FILE, EVERY_FILE]
    monkeypatch.setenv("NUMBA_NUM_THREADS", "3")
    status_of(toy, RunLimits(test_seconds=30))
    assert len(runs) == 3


def _swap_outcome(data: dict[str, Any]) -> None:  # a record of another file's test
    files = data["files"]
    files[OPERATORS]["tests"].append(files[TOTAL]["tests"][0])


def _bad_outcome(data: dict[str, Any]) -> None:
    data["files"][OPERATORS]["tests"][0][1] = "great"


def _no_key(data: dict[str, Any]) -> None:
    del data["files"][TOTAL]["key"]


def _other_format(data: dict[str, Any]) -> None:
    data["format"] = 0


@pytest.mark.parametrize(
    "spoil",
    ["", "{not json", "[]", "null", '{"format": 1, "files": []}', _swap_outcome, _bad_outcome,
     _no_key, _other_format, "\udcff"],
    ids=["empty", "not-json", "list", "null", "files-list", "other-files-test", "bad-outcome",
         "no-key", "other-format", "not-utf8"],
)  # fmt: skip
def test_a_corrupt_cache_is_ignored_and_replaced(
    toy: Path, runs: list[list[str]], spoil: str | Callable[[dict[str, Any]], None]
) -> None:
    status_of(toy)
    path = status_cache_file(toy)
    assert path is not None and load_kept(path)
    if callable(spoil):
        data = json.loads(path.read_text(encoding="utf-8"))
        spoil(data)
        path.write_text(json.dumps(data), encoding="utf-8")
    else:
        path.write_bytes(spoil.encode("utf-8", "surrogateescape"))
    assert load_kept(path) == {}
    assert status_of(toy) == ALL_PASS
    assert runs == [EVERY_FILE, EVERY_FILE]
    assert set(load_kept(path)) == set(EVERY_FILE)
    assert status_of(toy) == ALL_PASS and len(runs) == 2


def test_keeping_can_be_turned_off(
    toy: Path, runs: list[list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert status_cache_file(toy) is None
    status_of(toy)
    status_of(toy)
    assert runs == [EVERY_FILE, EVERY_FILE]
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()
    monkeypatch.delenv(CACHE_VARIABLE)  # by default, in the user's cache folder
    path = status_cache_file(toy)
    assert path is not None and path.parent == tmp_path / "xdg" / "minitorch" / "status"


def test_a_file_that_reads_every_stage_has_every_stage_in_its_key(toy: Path) -> None:
    """The own-work test reads the code of every stage (``READS_EVERY_STAGE``); another
    stage-0 test file reads none of stage 1."""
    (toy / "tests/module0/test_own_work.py").write_text(
        "import pytest\n\npytestmark = pytest.mark.task0_1\n\n\ndef test_x() -> None:\n"
        "    pass\n", encoding="utf-8",
    )  # fmt: skip
    tasks = toy_tasks(toy)
    before = file_keys(toy, tasks, "env")
    edit(toy / "module1/vectors.py", "return sums.total(", "return 1.0 + sums.total(")
    after = file_keys(toy, tasks, "env")
    changed = sorted(rel for rel in before if before[rel] != after[rel])
    assert changed == ["tests/module0/test_own_work.py", VECTORS]
    assert file_keys(toy, tasks, "other env") != after
    (toy / "module1" / "__pycache__").mkdir(exist_ok=True)  # caches are not content
    (toy / "module1" / "__pycache__" / "vectors.cpython-311.pyc").write_bytes(b"x")
    (toy / "module1" / "kernel.nbi").write_bytes(b"x")
    assert file_keys(toy, tasks, "env") == after


def test_progress_is_told_in_plain_lines_while_the_tests_run(toy: Path) -> None:
    """Output to a pipe (a log, CI): one line per test file as it begins, naming its
    tasks, seen while the run is still going; then the table. A test of task 1.1 here
    waits until the line naming its file has been read from the pipe."""
    go = toy / "go"
    (toy / "tests/module1/test_wait.py").write_text(
        "import time\nfrom pathlib import Path\n\nimport pytest\n\n"
        "pytestmark = pytest.mark.task1_1\n\n\ndef test_waits_for_the_progress_line() -> None:\n"
        f"    deadline = time.monotonic() + 60\n    while not Path({str(go)!r}).exists():\n"
        "        assert time.monotonic() < deadline, 'the progress line was not seen'\n"
        "        time.sleep(0.05)\n", encoding="utf-8",
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(toy), "COLUMNS": "200", "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder.cli", "status"], cwd=toy, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()])
    reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + 50
    try:
        while not any("now tests/module1/test_wait.py (task 1.1)" in x for x in seen):
            assert time.monotonic() < deadline, "no progress line while the tests ran:\n" + (
                "".join(seen)
            )
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                pass
        go.touch()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        reader.join()
    while not lines.empty():
        seen.append(lines.get())
    out = "".join(seen)
    assert "Running the tests of 4 of 4 test files (no results kept" in out, out
    assert "8 tests to run." in out
    assert f"0/8 tests done; now {OPERATORS} (task 0.1)" in out
    assert f"3/8 tests done; now {TOTAL} (task 0.2)" in out
    assert f"5/8 tests done; now {VECTORS} (task 1.1)" in out
    assert out.index("Ran 8 tests in") < out.index("MiniTorch progress")
    again = subprocess.run(
        [sys.executable, "-m", "autograder.cli", "status"], cwd=toy, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Every test result (8) is kept from an earlier run" in again.stdout, again.stdout
    assert "tests to run" not in again.stdout and "3/3 tasks passed" in again.stdout


def test_a_long_test_file_is_told_again_every_so_often() -> None:
    out = io.StringIO()
    tell = StatusProgress(Console(file=out, width=200), None)
    tell.HEARTBEAT = 0.0
    items = [{"nodeid": f"tests/module0/test_a.py::test_{i}", "tasks": ["0.1"]} for i in (1, 2)]
    tell([{"event": "collected", "items": items}])
    tell([{"event": "test", "nodeid": items[0]["nodeid"], "outcome": "passed"}])
    tell([])
    text = out.getvalue()
    assert "0/2 tests done; now tests/module0/test_a.py (task 0.1)" in text, text
    assert "1/2 tests done; still in tests/module0/test_a.py (" in text, text
