"""Run pytest in a child process and read back what the course plugin reported.

For the student's own loop (``minitorch status`` / ``test``) and the release's
verification, on code that is not hostile: the child gets its own process group (killed
whole, whatever ends the wait), an optional memory limit (``RLIMIT_DATA``: the heap and
every private writable mapping, so NumPy's arrays count and a GPU driver's address-space
reservations do not), an optional per-test time limit (the course plugin's watchdog)
and an overall time limit. Grading does not run pytest; it compares graded checks' answers, with the
submission in a sandbox (``autograder/grade.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


@dataclass
class TestResult:
    """The verified outcome of one test."""

    __test__ = False  # not a pytest test class, despite the name

    nodeid: str
    outcome: str  # passed, failed, error or skipped
    duration: float = 0.0
    message: str = ""
    details: dict[str, Any] | None = None
    """For a failure: the exception's type, text, notes and where it was raised."""
    reached: list[str] = field(default_factory=list)
    """Registry functions the test called (with ``--minitorch-reach``)."""


@dataclass
class RunResult:
    """What one child pytest run verifiably reported."""

    tests: dict[str, TestResult] = field(default_factory=dict)
    collected: list[dict[str, Any]] | None = None
    collect_errors: list[str] = field(default_factory=list)
    finished: bool = False
    exitstatus: int | None = None
    returncode: int | None = None
    timed_out: bool = False
    foreign_modules: list[str] = field(default_factory=list)
    output: str = ""
    seconds: float = 0.0
    stuck: dict[str, Any] | None = None
    """The watchdog's record of a test it could not interrupt (the run ended there)."""
    hung: str = ""
    """The watchdog's message for a test it stopped (the run stopped after it)."""
    stalled: float | None = None
    """Seconds the child's report had not grown when it was killed (see ``_wait``)."""
    memory_mb: int | None = None

    def problem(self) -> str:
        """A one-line account of what went wrong with the run itself, or ``""``."""
        if self.foreign_modules:
            return "stage packages were not loaded from the graded tree: " + ", ".join(
                self.foreign_modules
            )
        if self.timed_out:
            return "the run exceeded its time limit and was killed"
        if self.stalled is not None:
            memory = (
                f" (the run may use {self.memory_mb} MB: --memory-mb)" if self.memory_mb else ""
            )
            return (f"the test process reported nothing for {self.stalled:.0f} s and was "
                    f"killed: out of memory{memory}, or stuck where its watchdog could not "
                    "act")  # fmt: skip
        if self.hung and self.stuck is None:
            return f"{self.hung}; the run stopped there, so the tests after it did not run"
        if self.stuck is not None:
            return (f"test {self.stuck.get('nodeid')} {self.stuck.get('message')}; it could "
                    "not be interrupted (no Python "
                    "line ran: a compiled kernel or one long NumPy call?), so the run "
                    "stopped there")  # fmt: skip
        if not self.finished:
            if self.memory_mb and self.returncode in (-signal.SIGKILL, -signal.SIGABRT):
                return (f"the test process was killed (signal {-self.returncode}): out of "
                        f"memory? The run may use {self.memory_mb} MB (--memory-mb)")  # fmt: skip
            code = self.returncode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            return f"the test process ended early ({how}) before pytest finished"
        if self.exitstatus not in (0, 1):
            return f"pytest ended with exit status {self.exitstatus}"
        return ""


def read_report(path: Path) -> RunResult:
    """Parse a report written by ``autograder.pytest_plugin`` (unparsable lines skipped)."""
    result = RunResult()
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return result
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        event = record.get("event")
        if event == "collected":
            result.collected = record.get("items", [])
            result.foreign_modules = record.get("foreign_modules", [])
        elif event == "collect_error":
            result.collect_errors.append(f"{record.get('nodeid')}: {record.get('message')}")
        elif event == "test":
            details = record.get("details")
            reached = record.get("reached")
            new = TestResult(
                record["nodeid"], record["outcome"], record.get("duration", 0.0),
                record.get("message", ""),
                details if isinstance(details, dict) else None,
                [str(r) for r in reached] if isinstance(reached, list) else [],
            )  # fmt: skip
            old = result.tests.get(new.nodeid)
            if old is None or _SEVERITY[new.outcome] > _SEVERITY[old.outcome]:
                if old is not None:
                    new.duration += old.duration
                    new.reached = sorted(set(new.reached) | set(old.reached))
                result.tests[new.nodeid] = new
            elif new.reached:
                old.reached = sorted(set(new.reached) | set(old.reached))
        elif event == "timeout" and not record.get("stopped"):
            result.hung = f"test {record.get('nodeid')} {record.get('message', '')}"
        elif event == "timeout":
            result.stuck = record
            nodeid = str(record.get("nodeid"))
            text = str(record.get("message", ""))
            details = {"type": "TestTimeout", "text": text, "notes": [], "stub": False,
                       "where": record.get("where"), "timeout": True}  # fmt: skip
            result.tests[nodeid] = TestResult(nodeid, "failed", float(record.get("seconds", 0)),
                                              text, details)  # fmt: skip
        elif event == "finish":
            result.finished = True
            result.exitstatus = record.get("exitstatus")
    return result


def merge_runs(runs: list[RunResult]) -> RunResult:
    """One result for several runs over disjoint tests (one suite split over processes):
    every test and collection record, finished only if all finished, the worst exit."""
    merged = RunResult(finished=all(r.finished for r in runs))
    merged.collected = None if any(r.collected is None for r in runs) else []
    for run in runs:
        merged.tests.update(run.tests)
        if merged.collected is not None and run.collected is not None:
            merged.collected += run.collected
        merged.collect_errors += run.collect_errors
        merged.foreign_modules += run.foreign_modules
        merged.timed_out = merged.timed_out or run.timed_out
        merged.output += run.output
        merged.seconds = max(merged.seconds, run.seconds)
        merged.stuck = merged.stuck or run.stuck
        merged.hung = merged.hung or run.hung
    for run in runs:  # the first run that went wrong speaks for all
        if run.problem() or run is runs[-1]:
            merged.exitstatus, merged.returncode = run.exitstatus, run.returncode
            break
    return merged


def _limits(memory_mb: int | None) -> Any:
    def apply() -> None:
        os.setsid()
        try:  # the child goes with this process, even if it is killed outright (Linux)
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if memory_mb:
                limit = memory_mb * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        except (ImportError, ValueError, OSError):
            pass

    return apply


class ReportTail:
    """Reads a growing JSON-lines report from where it was left: the new complete lines
    at each :meth:`poll`, parsed (a line that is not a JSON object is skipped)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""
        self.complete = 0
        self.seen = False

    @property
    def lines(self) -> int:
        """Lines so far (an unfinished last one counts); -1 while there is no report."""
        return self.complete + (1 if self.partial else 0) if self.seen else -1

    def poll(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.seen = True
        self.offset += len(data)
        *complete, self.partial = (self.partial + data).split(b"\n")
        self.complete += len(complete)
        records = []
        for line in complete:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records


def _wait(
    proc: subprocess.Popen[bytes],
    report: Path,
    timeout: float | None,
    on_progress: Callable[[int], None] | None,
    stall: float | None = None,
    on_records: Callable[[list[dict[str, Any]]], None] | None = None,
) -> str:
    """Wait for the child, polling its report for progress: ``""`` when it ended,
    ``"timeout"`` past ``timeout``, ``"stall"`` when its report did not grow for
    ``stall`` seconds (a child out of memory can hang where its own watchdog cannot
    run); the whole group is killed in the last two cases. ``on_progress`` gets the
    report's line count at every poll; ``on_records`` its new records (maybe none), at
    every poll and once more when the child has ended."""
    now = time.monotonic()
    deadline = None if timeout is None else now + timeout
    tail = ReportTail(report)
    size, changed = -1, now
    while True:
        try:
            proc.wait(timeout=0.25)
            if on_records is not None:
                on_records(tail.poll())
            return ""
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        records = tail.poll()
        if tail.offset != size:
            size, changed = tail.offset, now
        if on_progress is not None and tail.lines >= 0:
            on_progress(tail.lines)
        if on_records is not None:
            on_records(records)
        why = ("timeout" if deadline is not None and now > deadline
               else "stall" if stall is not None and now - changed > stall else "")  # fmt: skip
        if why:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            return why


def child_env(
    tree: Path,
    private: Path,
    extra: dict[str, str] | None = None,
    site_dirs: bool = False,
    inherit: bool = False,
) -> dict[str, str]:
    """A minimal environment: nothing of the caller's beyond PATH and the locale.

    ``site_dirs`` appends this interpreter's site-packages folders to PYTHONPATH, for a
    child started with ``-S``. ``inherit`` (a student's own run of their own code) keeps
    the caller's environment and Numba's usual kernel cache, so the run reuses what the
    student's earlier runs compiled.
    """
    if inherit:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
        env.setdefault("MPLBACKEND", "Agg")
        env.update(extra or {})
        return env
    path = [str(tree)]
    if site_dirs:
        import site

        path += [*site.getsitepackages(), site.getusersitepackages()]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "HOME": str(private),
        "TMPDIR": str(private),
        "PYTHONPATH": os.pathsep.join(path),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "MPLBACKEND": "Agg",
        "NUMBA_CACHE_DIR": str(private / "numba-cache"),
        # Hypothesis's example database, not ``.hypothesis/`` in the tree under test
        # (the release's run of its tests would leave one in the handout).
        "HYPOTHESIS_STORAGE_DIRECTORY": str(private / "hypothesis"),
        "CI": "true",
    }
    for name in ("NUMBA_ENABLE_CUDASIM", "CUDA_VISIBLE_DEVICES", "HYPOTHESIS_PROFILE"):
        if name in os.environ:
            env[name] = os.environ[name]
    env.update(extra or {})
    return env


def run_pytest(
    tree: Path,
    args: list[str],
    *,
    timeout: float | None = None,
    per_test_timeout: float | None = None,
    memory_mb: int | None = None,
    isolate_conftest: bool = False,
    no_site: bool = False,
    inherit_env: bool = False,
    env: dict[str, str] | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_records: Callable[[list[dict[str, Any]]], None] | None = None,
) -> RunResult:
    """Run ``python -m pytest <args>`` in ``tree`` and return its report.

    ``isolate_conftest`` loads no conftest.py and pins the configuration (no ini file
    from the tree is read); it implies ``no_site``: no site processing (``-S``), so no
    editable-install finder can import a package the tree lacks from another checkout.
    ``inherit_env`` keeps the caller's environment (see :func:`child_env`).
    ``on_progress`` and ``on_records`` follow the report as it grows (see :func:`_wait`).
    """
    no_site = no_site or isolate_conftest
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="minitorch-run-") as tmp:
        private = Path(tmp)
        report = private / "report.jsonl"
        # -S: no .pth file runs, so no editable-install finder can import a package the
        # tree lacks from another checkout; the site-packages folders go on PYTHONPATH.
        python = [sys.executable, "-S"] if no_site else [sys.executable]
        cmd = [*python, "-m", "pytest", "-p", "autograder.pytest_plugin",
               "--minitorch-report", str(report), "-p", "no:cacheprovider",
               f"--rootdir={tree}"]  # fmt: skip
        if isolate_conftest:
            ini = private / "pinned.ini"
            ini.write_text("[pytest]\naddopts =\n", encoding="utf-8")
            cmd += ["--noconftest", "-c", str(ini), "--strict-markers"]
        child = child_env(tree, private, env, no_site, inherit_env)
        if per_test_timeout:
            cmd += [f"--minitorch-test-seconds={per_test_timeout}"]
        cmd += args
        log_path = private / "output.log"
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                cmd, cwd=tree, env=child,
                stdin=subprocess.DEVNULL,
                stdout=log_file, stderr=subprocess.STDOUT, preexec_fn=_limits(memory_mb),
            )  # fmt: skip
            # With a per-test limit, a report that stops growing for far longer than
            # it (and than a cold compile) means a child that can no longer help itself.
            stall = max(300.0, 5 * per_test_timeout) if per_test_timeout else None
            try:
                ended = _wait(proc, report, timeout, on_progress, stall, on_records)
            finally:  # whatever ends the wait (Ctrl-C, SIGTERM, an error), the whole
                try:  # group goes, including anything the tests left running
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait()
        output = log_path.read_bytes()
        result = read_report(report)
        result.returncode = proc.returncode
        result.timed_out = ended == "timeout"
        result.stalled = stall if ended == "stall" else None
        result.memory_mb = memory_mb
        result.output = output.decode("utf-8", errors="replace")[-20000:]
        result.seconds = time.monotonic() - start
        return result
