"""The course's pytest plugin: task markers, Hypothesis profiles, and a signed report.

``tests/conftest.py`` uses :func:`register_markers` and :func:`load_hypothesis_profile`;
the tooling loads this module with ``-p autograder.pytest_plugin`` (and, when grading,
``--noconftest``, so a submission can bring no conftest of its own).

With ``--minitorch-report PATH`` it appends one JSON line per finished test (outcome,
duration, task markers, a short failure message), one per collection error, and a last
``finish`` line. With ``--minitorch-key-fd FD`` it reads a per-run secret from that
file descriptor (and closes it) before any test module is imported, and signs every
line with an HMAC, so the grading parent can reject lines it did not get from here.

At the end of collection it reports a fingerprint of the code of every imported test
module, which the grader compares with its own, so a test file rewritten at run time is
caught. It also records, before collection imports a submission's code, the identity of the
pytest internals and helpers that decide an outcome (``call_and_report``,
``TestReport.from_item_and_call``, ``pytest.approx``, ``math.isclose``, the report hook
implementations, the registered plugins, this reporter's own ``write``...), and then
the function each collected test runs. Every line carries whether any of that has
changed; the grader scores a run with any change as zero.

The signature proves a line came from a process holding the secret; it cannot prove
that code inside that process (the submission runs there too) did not misuse it.

For every run (the student's ``pytest`` too, through ``tests/conftest.py``): a test that
reaches a handout stub (``NotImplementedError("Task 0.4: implement ...")``) ends there.
Hypothesis would otherwise go on generating and shrinking examples against a function
that raises at once (seconds per test); the stub's error is reported as it is.
With ``--minitorch-reach`` each test's record also lists the registry functions it
called (for ``minitorch test``'s "where to look").
"""

from __future__ import annotations

import builtins
import ctypes
import functools
import hashlib
import hmac
import json
import math
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from autograder.regions import STUB_MESSAGE
from autograder.registry import TASKS, Task

TASK_MARKERS = {t.marker: t.id for t in TASKS}
_GUARDED_HOOKS = (
    "pytest_runtest_protocol",
    "pytest_runtest_makereport",
    "pytest_runtest_call",
    "pytest_pyfunc_call",
    "pytest_runtest_logreport",
    "pytest_report_teststatus",
)


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
    """Register the ``ci``, ``dev`` and ``verify`` profiles and load one.

    ``HYPOTHESIS_PROFILE`` picks; otherwise ``ci`` when ``CI`` is set, else ``dev``.
    ``verify`` (few examples, no shrinking) is for runs that only need pass or fail.
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """End a Hypothesis test at the first stub it reaches, or the first kernel Numba
    cannot compile (no more examples, no shrinking). Idempotent: both the conftest and
    ``-p`` may load this hook."""
    handle: Any = getattr(getattr(item, "obj", None), "hypothesis", None)
    inner = getattr(handle, "inner_test", None)
    if inner is None or getattr(inner, "_minitorch_fast_fail", False):
        outcome = yield
        return

    @functools.wraps(inner)  # Hypothesis names the test by its inner function
    def fast_fail(*args: Any, **kwargs: Any) -> Any:
        try:
            return inner(*args, **kwargs)
        except Exception as exc:
            if is_stub_error(exc) or is_compile_error(exc):
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


def _failure_details(
    item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]
) -> dict[str, Any]:
    """What a student needs from a failure: the exception's type and message (with
    Hypothesis's notes, such as the failing example), and the innermost line of the
    stage packages it passed through."""
    exc = excinfo.value
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
    Python source names (``gemm`` -> ``micro_kernel``)."""
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
        sys.setprofile(self._profile)
        threading_setprofile = getattr(__import__("threading"), "setprofile", None)
        if threading_setprofile is not None:
            threading_setprofile(self._profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            if threading_setprofile is not None:
                threading_setprofile(None)
        item.stash[REACHED] = sorted(self.current)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """``--minitorch-not-started``: the tests of untouched tasks are skipped unrun
    (``minitorch status`` counts them as not passed; they fail on the handout)."""
    wanted = item.config.getoption("--minitorch-not-started", "") or ""
    if wanted:
        ids = set(wanted.split(","))
        if any(TASK_MARKERS.get(m.name) in ids for m in item.iter_markers()):
            pytest.skip("task not started: its stubs are untouched")


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


def _fingerprint_code(code: types.CodeType, digest: Any) -> None:
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _fingerprint_code(const, digest)
        else:
            digest.update(repr(const).encode())


def module_fingerprint(module: types.ModuleType) -> str:
    """A hash of the code of every function and method a module defines (a Hypothesis
    test counts by its inner test), to prove test modules were not rewritten."""
    digest = hashlib.sha256()
    for name in sorted(vars(module)):
        obj = vars(module)[name]
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        members = [obj] if not isinstance(obj, type) else list(vars(obj).values())
        for member in members:
            member = getattr(getattr(member, "hypothesis", None), "inner_test", member)
            code = getattr(member, "__code__", None)
            if isinstance(code, types.CodeType):
                digest.update(name.encode())
                _fingerprint_code(code, digest)
    return digest.hexdigest()


def _guarded_objects() -> dict[str, Any]:
    import _pytest.python
    import _pytest.reports
    import _pytest.runner

    objects = {
        "call_and_report": _pytest.runner.call_and_report,
        "runtestprotocol": _pytest.runner.runtestprotocol,
        "CallInfo.from_call": _pytest.runner.CallInfo.from_call,
        "TestReport.from_item_and_call": _pytest.reports.TestReport.from_item_and_call,
        "Function.runtest": _pytest.python.Function.runtest,
        "pytest.approx": pytest.approx,
        "pytest.raises": pytest.raises,
        "math.isclose": math.isclose,
        "math.isnan": math.isnan,
        "math.isinf": math.isinf,
        "math.isfinite": math.isfinite,
        "math.copysign": math.copysign,
        "math.fsum": math.fsum,
        "builtins.isinstance": builtins.isinstance,
        "builtins.float": builtins.float,
        "builtins.type": builtins.type,
        "Reporter.write": Reporter.write,
        "hmac.new": hmac.new,
        "hmac.HMAC.hexdigest": hmac.HMAC.hexdigest,
        "json.dumps": json.dumps,
        "hashlib.sha256": hashlib.sha256,
    }
    try:  # the suite's exact-type assertion helpers, when the tree has them
        import tests.strict as strict

        objects.update(
            {f"tests.strict.{name}": getattr(strict, name) for name in dir(strict)
             if name.startswith("exact_")}
        )  # fmt: skip
    except ImportError:
        pass
    # A classmethod gives a new bound method on each access: compare the function.
    return {name: getattr(obj, "__func__", obj) for name, obj in objects.items()}


class TamperGuard:
    """Remembers what decides an outcome; :meth:`changes` lists what differs now.

    Taken when collection starts, before any test module (and so any submission code)
    is imported: the guarded objects, the hook implementations, the registered plugins.
    Later, the functions collected for each test are remembered too, and a test whose
    item no longer runs that function is reported.
    """

    def __init__(self, config: pytest.Config, reporter: Reporter) -> None:
        self.config = config
        self.reporter = reporter
        self.objects = _guarded_objects()
        self.hooks = self._hooks()
        self.plugins = list(config.pluginmanager.get_plugins())
        self.functions: dict[str, Any] = {}
        self.swapped: list[str] = []

    def _hooks(self) -> dict[str, list[Any]]:
        hook = self.config.pluginmanager.hook
        return {
            name: [impl.function for impl in getattr(hook, name).get_hookimpls()]
            for name in _GUARDED_HOOKS
        }

    def changes(self) -> list[str]:
        now = _guarded_objects()
        found = [name for name, obj in self.objects.items() if now[name] is not obj]
        hooks = self._hooks()
        found += [f"hook {name}" for name in _GUARDED_HOOKS if hooks[name] != self.hooks[name]]
        manager = self.config.pluginmanager
        found += [
            f"plugin {manager.get_name(plugin)} registered during the run"
            for plugin in manager.get_plugins()
            if not any(plugin is known for known in self.plugins)
        ]
        if "write" in vars(self.reporter) or type(self.reporter) is not Reporter:
            found.append("the reporter was replaced")
        found += self.swapped
        return found

    def check_item(self, item: pytest.Item) -> None:
        """Note a test whose item no longer runs the function collected for it."""
        expected = self.functions.get(item.nodeid)
        if expected is not None and getattr(item, "obj", None) is not expected:
            self.swapped.append(f"test function of {item.nodeid} swapped")


class Reporter:
    """Writes the signed JSON-lines report."""

    def __init__(self, config: pytest.Config, path: str, key: bytes) -> None:
        self.config = config
        self.key = key
        self.seq = 0
        self.file = open(path, "a", buffering=1, encoding="utf-8")
        self.guard: TamperGuard | None = None
        self.rootdir = Path(str(config.rootpath)).resolve()

    def write(self, record: dict[str, Any]) -> None:
        record["seq"] = self.seq
        record["tampered"] = self.guard.changes() if self.guard else []
        self.seq += 1
        payload = json.dumps(record, sort_keys=True)
        mac = hmac.new(self.key, payload.encode(), hashlib.sha256).hexdigest() if self.key else ""
        self.file.write(json.dumps({"record": payload, "mac": mac}) + "\n")
        self.file.flush()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        self.guard = TamperGuard(self.config, self)
        self.write({"event": "start", "python": sys.version.split()[0]})

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        if self.guard is not None:
            self.guard.check_item(item)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.write(
                {"event": "collect_error", "nodeid": report.nodeid,
                 "message": str(report.longrepr)[-2000:]}
            )  # fmt: skip

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.guard is not None:
            self.guard.functions = {
                item.nodeid: getattr(item, "obj", None) for item in session.items
            }
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
        fingerprints = {
            name: module_fingerprint(module)
            for name, module in sorted(sys.modules.items())
            if name == "tests" or name.startswith("tests.")
        }
        self.write(
            {"event": "collected", "items": items, "foreign_modules": foreign,
             "fingerprints": fingerprints}
        )  # fmt: skip

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
        "--minitorch-key-fd", type=int, default=None, help="read the report's HMAC key here"
    )
    group.addoption(
        "--minitorch-not-started", default="", metavar="IDS",
        help="skip, without running them, the tests of these tasks (comma-separated)",
    )  # fmt: skip
    group.addoption(
        "--minitorch-reach", action="store_true",
        help="record which registry functions each test calls",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    register_markers(config)
    load_hypothesis_profile()
    path = config.getoption("--minitorch-report")
    if path:
        key = b""
        fd = config.getoption("--minitorch-key-fd")
        if fd is not None:
            chunks = []
            while chunk := os.read(fd, 4096):
                chunks.append(chunk)
            os.close(fd)
            key = b"".join(chunks)
        config.pluginmanager.register(Reporter(config, path, key), "minitorch-reporter")
    if config.getoption("--minitorch-reach", False):
        config.pluginmanager.register(ReachTracker(config), "minitorch-reach")
