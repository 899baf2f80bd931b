"""The course's pytest plugin: task markers, Hypothesis profiles, and a report.

``tests/conftest.py`` uses :func:`register_markers` and :func:`load_hypothesis_profile`;
the tooling loads this module with ``-p autograder.pytest_plugin`` (and, when grading,
``--noconftest``, so a submission can bring no conftest of its own).

With ``--minitorch-report PATH`` it appends one JSON line per finished test (outcome,
duration, task markers, a short failure message), one per collection error, and a last
``finish`` line: what ``minitorch status``, ``minitorch test`` and ``minitorch release``
read. It is the student's feedback, not a grade: ``minitorch grade`` decides scores from
graded checks, outside the student's process (``autograder/checks.py``).

Tests run with a fixed thread count (``MINITORCH_ADAPTIVE_THREADS=0`` unless set).
For every run (the student's ``pytest`` too, through ``tests/conftest.py``): a test that
reaches a handout stub (``NotImplementedError("Task 0.4: implement ...")``) ends there.
Hypothesis would otherwise go on generating and shrinking examples against a function
that raises at once (seconds per test); the stub's error is reported as it is.
With ``--minitorch-reach`` each test's record also lists the registry functions it
called (for ``minitorch test``'s "where to look"); with ``--minitorch-only PATH`` only the
tests that file names run (``minitorch status``: those whose results it does not keep).
"""

from __future__ import annotations

import ctypes
import functools
import gc
import json
import os
import sys
import threading
import time
import traceback
import types
from pathlib import Path
from typing import Any

import pytest

from autograder.regions import STUB_MESSAGE
from autograder.registry import TASKS, Task

os.environ.setdefault("MINITORCH_ADAPTIVE_THREADS", "0")
"""Tests run with the thread count they set (``module2/threads.py`` adapts it to the
machine's load elsewhere): two test workers on two cores would otherwise each drop to
one thread, and a test that checks parallelism or bits could see a count change."""

TASK_MARKERS = {t.marker: t.id for t in TASKS}


def gpu_present() -> bool:
    """True when the NVIDIA driver reports a GPU. Asked of the driver library through
    ctypes, so Numba is not imported (it must not be before the switch below)."""
    try:
        driver = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
        count = ctypes.c_int(0)
        return bool(
            driver.cuInit(0) == 0
            and driver.cuDeviceGetCount(ctypes.byref(count)) == 0
            and count.value > 0
        )
    except (OSError, AttributeError):
        return False


def use_cuda_simulator_without_gpu() -> None:
    """Run stage 3's CUDA kernels on Numba's simulator where no GPU is present: set
    ``NUMBA_ENABLE_CUDASIM=1`` unless the variable is already set (either way) or a GPU
    is found. Numba reads it once, when imported, so this runs when this module is
    imported: by ``tests/conftest.py`` and by the grader, before any test module."""
    if "NUMBA_ENABLE_CUDASIM" not in os.environ:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0" if gpu_present() else "1"


use_cuda_simulator_without_gpu()


def quiet_idle_threads() -> None:
    """Settings Numba reads when it starts its thread pool, so made at import, before
    any kernel runs (an environment that already chose keeps its choice).

    ``OMP_WAIT_POLICY=PASSIVE``: idle OpenMP threads sleep instead of spinning between
    parallel loops. A spinning thread's CPU time would count as work in the suite's
    parallelism check (``tests/parallel.py``: a kernel with one trivial ``prange`` and
    serial work would pass), and on a machine busier than its cores a spinning pool
    slowed stage 4's training tests 10-30 times (measured: a serial ``gemm`` whose
    buffers were zeroed by a parallel ``np.zeros`` looked 49% parallel with spinning
    threads, 0-19% without). ``NUMBA_NUM_THREADS=2`` on a one-core
    machine, so the parallel kernels still have two threads to spread over."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("KMP_BLOCKTIME", "0")  # the same for Intel's OpenMP runtime
    if (os.cpu_count() or 1) < 2:
        os.environ.setdefault("NUMBA_NUM_THREADS", "2")


quiet_idle_threads()


def register_markers(config: pytest.Config) -> None:
    """Register one marker per registry task (``task0_4: Task 0.4 (...)``)."""
    for task in TASKS:
        config.addinivalue_line(
            "markers", f"{task.marker}: Task {task.id} ({task.title}, {task.points} points)"
        )


def load_hypothesis_profile() -> None:
    """Register the ``ci``, ``dev``, ``verify`` and ``status`` profiles and load one.

    ``HYPOTHESIS_PROFILE`` picks; otherwise ``ci`` when ``CI`` is set, else ``dev``.
    ``verify`` (few examples, no shrinking) is for runs that only need pass or fail.
    ``status`` is ``minitorch status``'s: ``ci``'s examples (the same ones every run, so
    a result kept from an earlier run is the one a new run would give), and no
    shrinking, since status shows no failing example.
    """
    from hypothesis import HealthCheck, Phase, settings

    settings.register_profile(
        "ci",
        max_examples=25,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.register_profile("dev", max_examples=150, deadline=None)
    settings.register_profile(
        "verify",
        max_examples=10,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    settings.register_profile(  # verify's, with CI's example count and health checks
        "status",
        parent=settings.get_profile("verify"),
        max_examples=25,
        suppress_health_check=[HealthCheck.too_slow],
    )
    default = "ci" if os.environ.get("CI") else "dev"
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", default))


class _StubReached(BaseException):
    """Carries a stub's NotImplementedError out of a Hypothesis test at once.

    Hypothesis catches ``Exception`` to shrink; a ``BaseException`` that is not one
    passes straight through, and :func:`pytest_runtest_call` puts the original error
    back for the report."""


def is_stub_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a handout stub's NotImplementedError."""
    return isinstance(exc, NotImplementedError) and bool(STUB_MESSAGE.match(str(exc)))


def is_compile_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` is Numba refusing to compile a kernel (a typing or lowering
    error): every further example would recompile the kernel and fail the same way,
    1-2 s each, and shrinking would repeat that."""
    return any(
        cls.__name__ == "NumbaError" and cls.__module__.startswith("numba")
        for cls in type(exc).__mro__
    )


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """A shape in a test's id as itself, ``(2,0)``, where pytest would write ``a0``: a
    failing case then says which shapes it was (``[(2,0)-(1,)]``)."""
    if isinstance(val, tuple) and len(val) <= 6 and all(type(v) is int for v in val):
        return "(" + ",".join(map(str, val)) + ("," if len(val) == 1 else "") + ")"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """End a Hypothesis test at the first stub it reaches, or the first kernel Numba
    cannot compile (no more examples, no shrinking). Idempotent: both the conftest and
    ``-p`` may load this hook."""
    handle: Any = getattr(getattr(item, "obj", None), "hypothesis", None)
    inner = getattr(handle, "inner_test", None)
    if inner is None or getattr(inner, "_minitorch_fast_fail", False):
        outcome = yield
        _release_memory(outcome.exception)
        return

    @functools.wraps(inner)  # Hypothesis names the test by its inner function
    def fast_fail(*args: Any, **kwargs: Any) -> Any:
        try:
            return inner(*args, **kwargs)
        except Exception as exc:
            # A MemoryError too: each further example would fill memory again.
            if is_stub_error(exc) or is_compile_error(exc) or isinstance(exc, MemoryError):
                raise _StubReached(exc) from None
            raise

    fast_fail._minitorch_fast_fail = True  # type: ignore[attr-defined]
    handle.inner_test = fast_fail
    try:
        outcome = yield
    finally:
        handle.inner_test = inner
    if isinstance(outcome.exception, _StubReached):
        outcome.force_exception(outcome.exception.args[0])
    _release_memory(outcome.exception)


def _release_memory(exc: BaseException | None) -> None:
    """After a MemoryError, drop the locals of the frames it went through: what the
    test allocated stays alive in them otherwise, and pytest itself then runs out of
    memory while it writes the report."""
    if isinstance(exc, MemoryError):
        traceback.clear_frames(exc.__traceback__)
        gc.collect()


def _failure_details(
    item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]
) -> dict[str, Any]:
    """What a student needs from a failure: the exception's type and message (with
    Hypothesis's notes, such as the failing example), and the innermost line of the
    stage packages it passed through."""
    exc = excinfo.value
    if isinstance(exc, TestTimeout):
        return {"type": "TestTimeout", "text": str(exc), "notes": [], "stub": False,
                "where": exc.where, "timeout": True}  # fmt: skip
    notes = [str(n) for n in getattr(exc, "__notes__", []) or []]
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # Hypothesis: several bugs
        first = exc.exceptions[0]
        notes = [
            f"{len(exc.exceptions)} different failures; the first:",
            f"{type(first).__name__}: {first}",
            *[str(n) for n in getattr(first, "__notes__", []) or []],
        ]
    where = None
    root = Path(str(item.config.rootpath)).resolve()
    for entry in excinfo.traceback:
        path = Path(str(entry.path))
        try:
            rel = path.resolve().relative_to(root)
        except ValueError:
            continue
        if rel.parts and rel.parts[0].startswith("module"):
            where = {"file": rel.as_posix(), "line": entry.lineno + 1, "function": entry.name}
    return {
        "type": type(exc).__name__,
        "text": str(exc)[:2000],
        "notes": [n[:1000] for n in notes[:5]],
        "stub": is_stub_error(exc),
        "where": where,
    }


def _code_tree(code: types.CodeType) -> list[types.CodeType]:
    """``code`` and the code objects nested in it (inner functions, comprehensions)."""
    found = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _code_tree(const)
    return found


def _reach_targets(tasks: tuple[Task, ...]) -> dict[types.CodeType, set[str]]:
    """Map code objects to the registry functions (``module:qualname``) a call of them
    reaches.

    A plain Python function reaches itself. A Numba dispatcher runs no Python frame, so
    it counts as reached when a Python function of its stage whose code names it runs
    (the given wrapper that launches the kernel), and a dispatcher reaches those its own
    Python source names (``gemm`` -> ``pack_a``)."""
    import importlib

    codes: dict[types.CodeType, set[str]] = {}
    dispatchers: dict[str, tuple[str, Any]] = {}  # global name -> (spec, dispatcher)
    stages = set()
    for task in tasks:
        for spec in task.functions:
            module_name, _, qual = spec.partition(":")
            try:
                obj: Any = importlib.import_module(module_name)
                for part in qual.split("."):
                    obj = getattr(obj, part)
            except Exception:  # a stage the tree lacks, a name that moved
                continue
            stages.add(module_name.split(".")[0])
            obj = getattr(obj, "__func__", obj)
            if hasattr(obj, "py_func"):
                dispatchers[qual.split(".")[-1]] = (spec, obj)
            elif isinstance(getattr(obj, "__code__", None), types.CodeType):
                codes.setdefault(obj.__code__, set()).add(spec)
    if not dispatchers:
        return codes
    scanned = [
        module for name, module in list(sys.modules.items())
        if module is not None and (name.split(".")[0] in stages or name.split(".")[0] == "tests")
    ]  # fmt: skip
    # Every kernel of those modules, so a path through a kernel that is no task's
    # (a given driver such as ``tensor_matrix_multiply_packed``) is followed too.
    kernels: dict[str, Any] = {}
    for module in scanned:
        for name, value in list(vars(module).items()):
            if hasattr(value, "py_func") and isinstance(
                getattr(value.py_func, "__code__", None), types.CodeType
            ):
                kernels.setdefault(name, value)
    for name, (_, dispatcher) in dispatchers.items():
        kernels[name] = dispatcher
    specs = {name: spec for name, (spec, _) in dispatchers.items()}

    def reached_from(names: tuple[str, ...]) -> set[str]:
        reached: set[str] = set()
        seen: set[str] = set()
        todo = [n for n in names if n in kernels]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in specs:
                reached.add(specs[name])
            for code in _code_tree(kernels[name].py_func.__code__):
                todo += [n for n in code.co_names if n in kernels]
        return reached

    for module in scanned:
        for value in list(vars(module).values()):
            members = list(vars(value).values()) if isinstance(value, type) else [value]
            for member in members:
                member = getattr(member, "__func__", member)
                code = getattr(member, "__code__", None)
                if not isinstance(code, types.CodeType) or hasattr(member, "py_func"):
                    continue
                for inner in _code_tree(code):
                    if reached := reached_from(inner.co_names):
                        codes.setdefault(inner, set()).update(reached)
    return codes


class ReachTracker:
    """Records, per test, which registry functions its calls reached (a profile hook
    on Python calls; see :func:`_reach_targets` for Numba kernels)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.codes: dict[Any, set[str]] | None = None
        self.current: set[str] = set()

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call" and self.codes is not None:
            found = self.codes.get(frame.f_code)
            if found:
                self.current |= found

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        if self.codes is None:
            wanted = {TASK_MARKERS[m.name] for it in item.session.items
                      for m in it.iter_markers() if m.name in TASK_MARKERS}  # fmt: skip
            self.codes = _reach_targets(tuple(t for t in TASKS if t.id in wanted))
        self.current = set()
        # The calling thread only: a kernel counts through the given wrapper that launches
        # it (see _reach_targets), so the CUDA simulator's thread per GPU thread, which
        # the hook would slow many times over, need not be watched.
        sys.setprofile(self._profile)
        try:
            yield
        finally:
            sys.setprofile(None)
        item.stash[REACHED] = sorted(self.current)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--minitorch-only PATH``: keep only the tests PATH names, one a line: a test's
    node id, or a test file's path for all of its tests (``minitorch status`` runs only
    the tests whose results it does not keep from an earlier run)."""
    path = config.getoption("--minitorch-only", None)
    if not path:
        return
    wanted = set(Path(path).read_text(encoding="utf-8").splitlines())
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        named = item.nodeid in wanted or item.nodeid.split("::")[0] in wanted
        (kept if named else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """``--minitorch-not-started``: the tests of untouched tasks are skipped unrun
    (``minitorch status`` counts them as not passed; they fail on the handout)."""
    wanted = item.config.getoption("--minitorch-not-started", "") or ""
    if wanted:
        ids = set(wanted.split(","))
        if any(TASK_MARKERS.get(m.name) in ids for m in item.iter_markers()):
            pytest.skip("task not started: its stubs are untouched")


class TestTimeout(BaseException):
    """Raised in a test that runs past ``--minitorch-test-seconds``. A BaseException,
    so neither Hypothesis (which would try more examples) nor the student's own
    ``except Exception`` catches it."""

    __test__ = False
    message = ""
    where: dict[str, Any] | None = None

    def __str__(self) -> str:
        return self.message

    @classmethod
    def about(cls, message: str, where: dict[str, Any] | None) -> type[TestTimeout]:
        """A subclass carrying the message: an asynchronous exception is raised from
        its class (CPython instantiates it with no arguments)."""
        return type(cls.__name__, (cls,), {"message": message, "where": where})


def innermost_course_frame(frame: types.FrameType | None, root: Path) -> dict[str, Any] | None:
    """The innermost frame of ``frame``'s stack in a stage package under ``root`` (else
    in the tree's tests): where a test that hangs is stuck."""
    fallback = None
    while frame is not None:
        try:
            rel = Path(frame.f_code.co_filename).resolve().relative_to(root)
        except ValueError:
            rel = None
        if rel is not None and rel.parts:
            where = {"file": rel.as_posix(), "line": frame.f_lineno,
                     "function": frame.f_code.co_name}  # fmt: skip
            if rel.parts[0].startswith("module"):
                return where
            fallback = fallback or where
        frame = frame.f_back
    return fallback


class CompileClock:
    """Seconds spent compiling Numba kernels in this process (``numba:compile`` events,
    outermost ones only): a test's time limit does not count them, so a cold kernel
    cache (a minute of compiling for stage 2's float32 tests on 2 cores) is no hang."""

    def __init__(self) -> None:
        self.total = 0.0
        self.depth = 0
        self.since = 0.0
        self.installed = False

    def install(self) -> None:
        """Listen to Numba's compile events, once Numba is imported (never imports it)."""
        if self.installed or "numba" not in sys.modules:
            return
        from numba.core import event

        clock = self

        class Listener(event.Listener):
            def on_start(self, ev: Any) -> None:
                if clock.depth == 0:
                    clock.since = time.monotonic()
                clock.depth += 1

            def on_end(self, ev: Any) -> None:
                clock.depth -= 1
                if clock.depth == 0:
                    clock.total += time.monotonic() - clock.since

        event.register("numba:compile", Listener())
        self.installed = True

    def seconds(self) -> float:
        return self.total + (time.monotonic() - self.since if self.depth > 0 else 0.0)


class Watchdog:
    """``--minitorch-test-seconds S``: a test still running after S seconds (not counting
    Numba's compiling, :class:`CompileClock`) gets a :class:`TestTimeout` raised in it,
    naming the innermost course function it is in, and the run stops there: when one
    test hangs, the tests after it that reach the same code would each hang for S
    seconds too. One stuck where no Python line runs (inside a compiled kernel, a long
    NumPy call) cannot be interrupted: after a grace period the process exits, its
    report saying which test and where."""

    GRACE = float(os.environ.get("MINITORCH_WATCHDOG_GRACE", "10"))
    """Seconds between the exception and the exit, for a test that did not take it (the
    environment variable is for the tooling's own tests)."""
    POLL = 0.2

    def __init__(self, config: pytest.Config, seconds: float) -> None:
        self.config = config
        self.seconds = seconds
        self.root = Path(str(config.rootpath)).resolve()
        self.lock = threading.Lock()
        self.running: object | None = None
        self.clock = CompileClock()

    def _message(self, where: dict[str, Any] | None) -> str:
        place = (f"{where['file']}:{where['line']}, in {where['function']}" if where
                 else "no course function")  # fmt: skip
        return (f"did not finish in {self.seconds:g} s: an infinite loop? "
                f"last function entered: {place}")  # fmt: skip

    def _report(self, record: dict[str, Any]) -> None:
        reporter = self.config.pluginmanager.get_plugin("minitorch-reporter")
        if reporter is not None:
            reporter.write(record)

    def _fire(self, item: pytest.Item, main: int, token: object, stop: bool) -> None:
        nodeid = item.nodeid
        with self.lock:
            if self.running is not token:
                return
            where = innermost_course_frame(sys._current_frames().get(main), self.root)
            message = self._message(where)
            self._report({"event": "timeout", "nodeid": nodeid, "seconds": self.seconds,
                          "where": where, "message": message, "stopped": stop})  # fmt: skip
            if stop:  # the exception was not raised: no Python line ran since
                sys.stderr.write(f"\n{nodeid} {message}; it could not be interrupted, so the "
                                 "run ends here\n")  # fmt: skip
                sys.stderr.flush()
                os._exit(3)
            item.session.shouldstop = message
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(main), ctypes.py_object(TestTimeout.about(message, where))
            )

    def _watch(self, item: pytest.Item, main: int, token: object) -> None:
        start, compiled = time.monotonic(), self.clock.seconds()
        fired = 0.0
        while True:
            time.sleep(self.POLL)
            with self.lock:
                if self.running is not token:
                    return
            now = time.monotonic()
            if not fired:
                if now - start - (self.clock.seconds() - compiled) >= self.seconds:
                    self._fire(item, main, token, stop=False)
                    fired = now
            elif now - fired >= self.GRACE:
                self._fire(item, main, token, stop=True)
                return

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.clock.install()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        self.clock.install()
        token = object()
        with self.lock:
            self.running = token
        watcher = threading.Thread(
            target=self._watch, args=(item, threading.get_ident(), token), daemon=True
        )
        watcher.start()
        try:
            yield
        finally:
            with self.lock:
                self.running = None


REACHED = pytest.StashKey[list[str]]()
DETAILS = pytest.StashKey[dict[str, Any]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep the failure's details for the report (see :func:`_failure_details`)."""
    outcome = yield
    if call.excinfo is not None and call.when in ("setup", "call"):
        try:
            details = _failure_details(item, call.excinfo)
        except Exception:  # never let the reporting break a run
            return
        report = outcome.get_result()
        report.minitorch_details = details
    if call.when == "call" and REACHED in item.stash:
        outcome.get_result().minitorch_reached = item.stash[REACHED]


class Reporter:
    """Writes the JSON-lines report."""

    def __init__(self, config: pytest.Config, path: str) -> None:
        self.config = config
        self.file = open(path, "a", buffering=1, encoding="utf-8")
        self.rootdir = Path(str(config.rootpath)).resolve()

    def write(self, record: dict[str, Any]) -> None:
        self.file.write(json.dumps(record, sort_keys=True) + "\n")
        self.file.flush()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        self.write({"event": "start", "python": sys.version.split()[0]})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.write(
                {"event": "collect_error", "nodeid": report.nodeid,
                 "message": str(report.longrepr)[-2000:]}
            )  # fmt: skip

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Stage packages must come from the tree under test, not an installed copy.
        foreign = []
        for name, module in list(sys.modules.items()):
            if name.startswith("module") and name[6:].isdigit():
                file = getattr(module, "__file__", None) or ""
                if not Path(file).resolve().is_relative_to(self.rootdir):
                    foreign.append(f"{name} from {file}")
        items = [
            {"nodeid": item.nodeid,
             "tasks": sorted(TASK_MARKERS[m.name] for m in item.iter_markers()
                             if m.name in TASK_MARKERS)}
            for item in session.items
        ]  # fmt: skip
        self.write({"event": "collected", "items": items, "foreign_modules": foreign})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            outcome: str = report.outcome
            if report.when != "call" and outcome == "failed":
                outcome = "error"
            message = ""
            if report.failed:
                message = (report.longreprtext or "")[-3000:]
            elif report.skipped and isinstance(report.longrepr, tuple):
                message = str(report.longrepr[2])
            record = {"event": "test", "nodeid": report.nodeid, "when": report.when,
                      "outcome": outcome, "duration": round(report.duration, 6),
                      "message": message}  # fmt: skip
            details = getattr(report, "minitorch_details", None)
            if report.failed and details is not None:
                record["details"] = details
            reached = getattr(report, "minitorch_reached", None)
            if reached is not None:
                record["reached"] = reached
            self.write(record)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write({"event": "finish", "exitstatus": int(exitstatus)})
        self.file.close()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minitorch", "course tooling")
    group.addoption("--minitorch-report", default=None, help="append a JSON-lines report here")
    group.addoption(
        "--minitorch-not-started", default="", metavar="IDS",
        help="skip, without running them, the tests of these tasks (comma-separated)",
    )  # fmt: skip
    group.addoption(
        "--minitorch-only", default=None, metavar="PATH",
        help="run only the tests this file names (node ids, or test files), one a line",
    )  # fmt: skip
    group.addoption(
        "--minitorch-reach", action="store_true",
        help="record which registry functions each test calls",
    )  # fmt: skip
    group.addoption(
        "--minitorch-test-seconds", type=float, default=0.0, metavar="S",
        help="stop a test still running after S seconds, naming where it is (0: never)",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    register_markers(config)
    load_hypothesis_profile()
    path = config.getoption("--minitorch-report")
    if path:
        config.pluginmanager.register(Reporter(config, path), "minitorch-reporter")
    seconds = config.getoption("--minitorch-test-seconds", 0.0)
    if seconds and seconds > 0:
        config.pluginmanager.register(Watchdog(config, seconds), "minitorch-watchdog")
    if config.getoption("--minitorch-reach", False):
        config.pluginmanager.register(ReachTracker(config), "minitorch-reach")
