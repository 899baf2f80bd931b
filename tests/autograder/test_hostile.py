"""Hostile submissions: each one is graded end to end with ``grade_to`` (stage 0) and
must score, task by task, exactly what its real work deserves.

Submissions are built from the reference's declared files (full marks) and their
handout stubs (zero), with hostile edits. What a hostile edit deserves is pinned down by
a *twin*: the same submission with each hostile spot replaced by an honest failure
(``raise RuntimeError("HOSTILE-SITE ...")``, or an honest non-float). The hostile
submission must pass exactly the tests its twin passes, except that a crash (segfault,
a hang that ignores the per-test alarm) also loses the tests that come after it in the
task's run.

To keep the file fast (grading stage 0 runs seven child pytest runs), variants whose
effects stay in different tasks share one submission (the tampering variants, and the
exit at import, switch on the task of the run they are in), and the attacks that only
make sense on an all-stub or all-reference submission share one each. Hypothesis runs
its ``verify`` profile (pass or fail is all that matters here).
"""

from __future__ import annotations

import json
import os
import signal
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.grade import GradeReport, Limits, TaskScore, collect_manifest, grade_to
from autograder.regions import find_regions, stub_text
from autograder.registry import tasks_for_stage

ROOT = Path(__file__).resolve().parents[2]
STAGE0 = tasks_for_stage(0)
FILES = sorted({path for task in STAGE0 for path in task.files})
FULL = {task.id: float(task.points) for task in STAGE0}
ZERO = {task.id: 0.0 for task in STAGE0}

LIMITS = Limits(per_test_seconds=30, per_task_seconds=120, memory_mb=1500)
"""Generous time limits, and the memory limit every case runs under (1500 MB of address
space: a correct submission needs about 400 MB, see ``test_full_submission_...``)."""
HANG_LIMITS = Limits(per_test_seconds=3, per_task_seconds=20, memory_mb=1500)

PERFECT = json.dumps(
    {"score": 80.0, "max_score": 80.0, "output": "FORGED", "tests": [],
     "version": 1, "status": "pass"}
)  # fmt: skip


# -- building submissions ---------------------------------------------------------------


@dataclass(frozen=True)
class Sources:
    """The declared files of stage 0: the reference text and the handout stub of each."""

    reference: dict[str, str]
    stub: dict[str, str]


@pytest.fixture(scope="module")
def sources() -> Sources:
    reference = {path: (ROOT / path).read_text(encoding="utf-8") for path in FILES}
    stub = {path: stub_text(text, path) for path, text in reference.items()}
    return Sources(reference, stub)


@pytest.fixture(scope="module")
def quick_hypothesis() -> Iterator[None]:
    """The graded children inherit HYPOTHESIS_PROFILE: few examples, no shrinking."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HYPOTHESIS_PROFILE", "verify")
        yield


def with_region(text: str, path: str, function: str, body: str) -> str:
    """``text`` with the solution region inside ``function`` replaced by ``body``
    (indented like the region)."""
    lines = text.splitlines(keepends=True)
    (region,) = [r for r in find_regions(text, path) if r.function == function]
    new = [f"{region.indent}{line}\n" for line in body.splitlines()]
    return "".join(lines[: region.begin - 1] + new + lines[region.end :])


def write_tree(dest: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return dest


@dataclass
class Graded:
    case: Path
    out: Path
    report: GradeReport

    def scores(self) -> dict[str, float]:
        return {s.task.id: s.score for s in self.report.scores}

    def task(self, task_id: str) -> TaskScore:
        return next(s for s in self.report.scores if s.task.id == task_id)

    def summary(self) -> str:
        return (self.out / "summary.md").read_text(encoding="utf-8")


def grade_case(case: Path, files: Mapping[str, str], limits: Limits = LIMITS) -> Graded:
    """Grade the submission ``case/sub`` (written from ``files``) into ``case/out``."""
    submission = case / "sub"
    write_tree(submission, files)
    out = case / "out"
    report = grade_to(submission, out, root=ROOT, stage=0, limits=limits)
    return Graded(case, out, report)


# -- checking what was written ----------------------------------------------------------


def written_scores(out: Path) -> dict[str, float]:
    """Check the four result files and return the per-task scores of results.json."""
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert isinstance(results["score"], (int, float))
    assert isinstance(results["execution_time"], (int, float))
    assert results["max_score"] == sum(FULL.values())
    assert [t["number"] for t in results["tests"]] == [task.id for task in STAGE0]
    for test, task in zip(results["tests"], STAGE0, strict=True):
        assert set(test) >= {"name", "number", "score", "max_score", "status", "output",
                             "visibility"}  # fmt: skip
        assert isinstance(test["name"], str) and task.id in test["name"]
        assert isinstance(test["score"], (int, float))
        assert test["max_score"] == task.points
        assert test["status"] in ("passed", "failed")
        assert (test["status"] == "passed") == (test["score"] == task.points)
        assert isinstance(test["output"], str)
        assert test["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))

    classroom = json.loads((out / "classroom.json").read_text(encoding="utf-8"))
    assert classroom["version"] == 1
    assert [t["score"] for t in classroom["tests"]] == [t["score"] for t in results["tests"]]

    suites = ET.fromstring((out / "junit.xml").read_text(encoding="utf-8"))
    assert suites.tag == "testsuites"
    assert len(suites.findall("testsuite")) == len(STAGE0)

    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith(f"# Grade: {results['score']:g} / ")
    return {t["number"]: float(t["score"]) for t in results["tests"]}


def assert_scores(graded: Graded, expected: Mapping[str, float]) -> None:
    """The report and the written results both give exactly ``expected``."""
    assert graded.scores() == expected, graded.summary()
    assert written_scores(graded.out) == expected, graded.summary()


@pytest.fixture(scope="module")
def manifest(quick_hypothesis: None) -> dict[str, list[str]]:
    """The grader's own test ids per task, in run order."""
    return collect_manifest(ROOT, STAGE0, LIMITS).tests


def expected_passes(
    twin: Graded, manifest: Mapping[str, list[str]], task_id: str, crash: str | None = None
) -> list[str]:
    """The tests the twin passes, cut at the first test that reaches the ``crash`` site
    (the hostile run dies there, so nothing after it runs)."""
    passed = set(twin.task(task_id).passed_ids)
    failures = dict(twin.task(task_id).failures)
    result = []
    for nodeid in manifest[task_id]:
        if crash is not None and f"HOSTILE-SITE {crash}" in failures.get(nodeid, ""):
            break
        if nodeid in passed:
            result.append(nodeid)
    return result


# -- 1 and 10. os._exit at import, a syntax error, and a process left behind ----------

LINGER = """
def _linger():
    import os, time

    case = {case!r}
    out = os.path.join(case, "out")
    try:  # one lingering process for the whole grade
        os.close(os.open(os.path.join(case, "started"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except OSError:
        return
    if os.fork() == 0:
        os.setsid()  # out of the test run's process group
        if os.fork() == 0:
            with open(os.path.join(case, "daemon.pid"), "w") as f:
                f.write(str(os.getpid()))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if os.path.exists(os.path.join(out, "summary.md")) and os.path.exists(
                    os.path.join(case, "go")
                ):
                    for name in ("results.json", "classroom.json"):
                        with open(os.path.join(out, name), "w") as f:
                            f.write({perfect!r})
                    open(os.path.join(case, "forged"), "w").close()
                    break
                time.sleep(0.05)
        os._exit(0)


_linger()
import os as _os
import sys as _sys

if any(marker in _sys.argv for marker in ("task0_1", "task0_2", "task0_3")):
    _os._exit(0)
"""
EXITING = ("0.1", "0.2", "0.3")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture(scope="module")
def broken_imports(
    tmp_path_factory: pytest.TempPathFactory, sources: Sources, quick_hypothesis: None
) -> Iterator[Graded]:
    """Correct code, except that at import operators.py starts a detached process (which
    waits for the grade to finish, then for a go from
    ``test_no_process_outlives_the_grade``, then overwrites the results) and, in the runs
    of tasks 0.1-0.3, calls ``os._exit(0)``; and optim.py has a syntax error, which the
    runs of tasks 0.4-0.6 reach (module0/__init__.py imports operators.py first, then
    every other file)."""
    case = tmp_path_factory.mktemp("imports")
    files = dict(sources.reference)
    files["module0/operators.py"] += LINGER.format(case=str(case), perfect=PERFECT)
    files["module0/optim.py"] += "\ndef broken(:\n    pass\n"
    graded = grade_case(case, files)
    yield graded
    pid_file = case / "daemon.pid"
    if pid_file.exists() and _alive(pid := int(pid_file.read_text())):
        os.kill(pid, signal.SIGKILL)  # the process this test's submission started


def test_exit_at_import_scores_zero_and_writes_results(broken_imports: Graded) -> None:
    assert_scores(broken_imports, ZERO)
    for task_id in EXITING:
        problem = broken_imports.task(task_id).problem
        assert "ended early (exit code 0)" in problem, problem


def test_syntax_error_in_one_file_scores_zero_everywhere(broken_imports: Graded) -> None:
    # A syntax error in optim.py (task 0.6's file) zeroes 0.4 and 0.5 too: module0 as a
    # whole cannot be imported.
    assert_scores(broken_imports, ZERO)
    for score in broken_imports.report.scores:
        if score.task.id not in EXITING:
            assert "SyntaxError" in score.problem, score.problem
            assert score.total > 0 and score.passed == 0


def test_no_process_outlives_the_grade(broken_imports: Graded) -> None:
    case = broken_imports.case
    pid_file = case / "daemon.pid"
    survived = pid_file.exists() and _alive(int(pid_file.read_text()))
    (case / "go").touch()
    deadline = time.monotonic() + 10
    while survived and not (case / "forged").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    forged = "FORGED" in (case / "out" / "results.json").read_text(encoding="utf-8")
    assert not survived, "a process the submission detached (setsid) survived the grade" + (
        " and replaced results.json with a perfect score" if forged else ""
    )
    assert written_scores(broken_imports.out) == ZERO


# -- 2, 3, 4, 6, 11 and the symlink: files around the declared ones ----------------------

FLIP_CONFTEST = """import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.outcome = "passed"
    report.longrepr = None
    return report


def pytest_collection_modifyitems(items):
    for item in items:
        item.obj = lambda *args, **kwargs: None
"""
SITECUSTOMIZE = """import _pytest.outcomes
import pytest

_pytest.outcomes.fail = pytest.fail = lambda *args, **kwargs: None
_pytest.outcomes.skip.Exception = AssertionError
"""
EDITED_TEST = """import pytest

pytestmark = pytest.mark.task0_1


def test_everything():
    assert True
"""
SURROUNDINGS = {
    "conftest.py": FLIP_CONFTEST,
    "tests/conftest.py": FLIP_CONFTEST,
    "flip.py": FLIP_CONFTEST,
    "pytest.ini": '[pytest]\naddopts = -m "not task0_1" -p flip -p no:autograder\n'
    "python_files = nothing_*.py\npythonpath = .\n",
    "pyproject.toml": "[tool.pytest.ini_options]\naddopts = \"-m 'not task0_2' -p flip\"\n",
    "setup.cfg": '[tool:pytest]\naddopts = -m "not task0_3"\n',
    "tox.ini": '[pytest]\naddopts = -m "not task0_4"\n',
    "sitecustomize.py": SITECUSTOMIZE,
    "module0/sitecustomize.py": SITECUSTOMIZE,
    "usercustomize.py": SITECUSTOMIZE,
    # The submission's own tests: one file edited to pass, the others deleted.
    "tests/__init__.py": "",
    "tests/module0/__init__.py": "",
    "tests/module0/test_operators.py": EDITED_TEST,
    "tests/module0/test_scalar.py": EDITED_TEST.replace("task0_1", "task0_4"),
    "tests/strict.py": "def exact_float(value, what=''):\n    return value\n",
    # A results file of its own.
    "results.json": PERFECT,
    "classroom.json": PERFECT,
}


@pytest.fixture(scope="module")
def reference_with_surroundings(
    tmp_path_factory: pytest.TempPathFactory, sources: Sources, quick_hypothesis: None
) -> Graded:
    files = {**sources.reference, **SURROUNDINGS}
    return grade_case(tmp_path_factory.mktemp("ref-around"), files)


FORGE = """

def _forge():
    import os

    out = {out!r}
    for folder in {{os.getcwd(), os.environ.get("HOME", "."), os.environ.get("TMPDIR", "."),
                    out, os.path.dirname(out)}}:
        try:
            os.makedirs(folder, exist_ok=True)
            for name in ("results.json", "classroom.json", "summary.md"):
                with open(os.path.join(folder, name), "w") as f:
                    f.write({perfect!r})
        except OSError:
            pass


_forge()
"""


@pytest.fixture(scope="module")
def stub_with_surroundings(
    tmp_path_factory: pytest.TempPathFactory, sources: Sources, quick_hypothesis: None
) -> Graded:
    """A stub submission with every hostile file around it, a declared file that writes
    perfect results files wherever it can at import, and operators.py a symlink to the
    reference's file."""
    case = tmp_path_factory.mktemp("stub-around")
    files = {**sources.stub, **SURROUNDINGS}
    files["module0/scalar_nn.py"] += FORGE.format(out=str(case / "out"), perfect=PERFECT)
    del files["module0/operators.py"]
    link = case / "sub" / "module0" / "operators.py"
    link.parent.mkdir(parents=True)
    link.symlink_to(ROOT / "module0" / "operators.py")
    return grade_case(case, files)


def test_full_submission_keeps_full_marks_whatever_surrounds_it(
    reference_with_surroundings: Graded,
) -> None:
    # Conftests, ini files, sitecustomize, edited tests and a results.json in the
    # submission neither help nor hurt; the memory limit (1500 MB) fits a correct run.
    assert_scores(reference_with_surroundings, FULL)
    assert reference_with_surroundings.report.notes == []
    assert "FORGED" not in (reference_with_surroundings.out / "results.json").read_text()


def test_stub_submission_scores_zero_whatever_surrounds_it(
    stub_with_surroundings: Graded,
) -> None:
    # A forcing conftest, deselecting ini files, sitecustomize and edited or deleted
    # tests are never taken: the grader's pristine tests fail on the stubs.
    assert_scores(stub_with_surroundings, ZERO)
    for score in stub_with_surroundings.report.scores:
        assert score.passed == 0 and score.total > 0
        assert score.problem == "", score.problem


def test_results_forged_by_the_submission_are_overwritten(
    stub_with_surroundings: Graded,
) -> None:
    case = stub_with_surroundings.case
    # The forging code did run (it reached the folder around the results)...
    assert (case / "results.json").read_text() == PERFECT
    # ...but what is in the results folder is the grader's.
    for name in ("results.json", "classroom.json", "summary.md"):
        assert "FORGED" not in (case / "out" / name).read_text(), name
    assert written_scores(case / "out") == ZERO


def test_symlinked_declared_file_is_refused(stub_with_surroundings: Graded) -> None:
    notes = stub_with_surroundings.report.notes
    assert any(note.startswith("module0/operators.py:") for note in notes), notes
    assert "module0/operators.py" in stub_with_surroundings.summary()
    # Followed, the link would have given the reference's operators: 0.1 full marks.
    assert stub_with_surroundings.task("0.1").score == 0.0


# -- 7, 8, 9. hang, memory bomb and segfault, each in its own task ----------------------

HOSTILE_SITES = {
    # task 0.2: only test_functional calls prod; the run dies at the first such test
    ("module0/operators.py", "prod"): ("crash", "import ctypes\nctypes.string_at(0)"),
    # task 0.3: an infinite loop the per-test alarm interrupts...
    ("module0/module.py", "Module.modules"): ("soft", "while True:\n    pass"),
    # ...and one that ignores it: only the per-task limit ends the run
    ("module0/module.py", "Module.train"): (
        "crash",
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass",
    ),
    # task 0.6: grows past the address-space limit
    ("module0/optim.py", "SGD.step"): (
        "soft",
        "hog = []\nfor _ in range(48):\n    hog.append(bytearray(256 << 20))\n"
        'raise RuntimeError("allocated 12 GiB")',
    ),
}


def _sites(sources: Sources, hostile: bool) -> dict[str, str]:
    files = dict(sources.reference)
    for (path, function), (kind, body) in HOSTILE_SITES.items():
        if not hostile:
            body = f'raise RuntimeError("HOSTILE-SITE {kind} {function}")'
        files[path] = with_region(files[path], path, function, body)
    return files


@pytest.fixture(scope="module")
def resource_abuse(
    tmp_path_factory: pytest.TempPathFactory, sources: Sources, quick_hypothesis: None
) -> Graded:
    return grade_case(tmp_path_factory.mktemp("abuse"), _sites(sources, True), HANG_LIMITS)


@pytest.fixture(scope="module")
def resource_abuse_twin(
    tmp_path_factory: pytest.TempPathFactory, sources: Sources, quick_hypothesis: None
) -> Graded:
    return grade_case(tmp_path_factory.mktemp("twin"), _sites(sources, False), HANG_LIMITS)


def test_untouched_tasks_keep_full_marks_next_to_hangs_bombs_and_crashes(
    resource_abuse: Graded,
) -> None:
    scores = resource_abuse.scores()
    assert {t: scores[t] for t in ("0.1", "0.4", "0.5")} == {
        t: FULL[t] for t in ("0.1", "0.4", "0.5")
    }, resource_abuse.summary()
    written_scores(resource_abuse.out)
    for task_id in ("0.2", "0.3", "0.6"):
        assert scores[task_id] < FULL[task_id], resource_abuse.summary()


def test_infinite_loops_lose_exactly_their_tests(
    resource_abuse: Graded, resource_abuse_twin: Graded, manifest: dict[str, list[str]]
) -> None:
    hostile = resource_abuse.task("0.3")
    assert hostile.passed_ids == expected_passes(
        resource_abuse_twin, manifest, "0.3", crash="crash Module.train"
    ), resource_abuse.summary()
    assert "exceeded its time limit" in hostile.problem
    timed_out = [n for n, message in hostile.failures if "Timeout" in message]
    assert len(timed_out) >= 1, hostile.output()  # the alarm stopped Module.modules


def test_memory_bomb_loses_exactly_its_tests(
    resource_abuse: Graded, resource_abuse_twin: Graded, manifest: dict[str, list[str]]
) -> None:
    hostile = resource_abuse.task("0.6")
    assert hostile.passed_ids == expected_passes(resource_abuse_twin, manifest, "0.6")
    assert hostile.problem == ""  # the run itself survived
    assert any("MemoryError" in message for _, message in hostile.failures), hostile.output()


def test_segfault_keeps_the_tests_before_it(
    resource_abuse: Graded, resource_abuse_twin: Graded, manifest: dict[str, list[str]]
) -> None:
    hostile = resource_abuse.task("0.2")
    expected = expected_passes(resource_abuse_twin, manifest, "0.2", crash="crash prod")
    assert 0 < len(expected) < hostile.total
    assert hostile.passed_ids == expected, resource_abuse.summary()
    assert "signal 11" in hostile.problem, hostile.problem


# -- 5. an operator result whose __eq__ always answers True -----------------------------

LIAR = """

class _Result(float):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = float.__hash__
"""
HONEST = """

class _Result(float):
    pass
"""


def _mul_returns(sources: Sources, result_class: str) -> dict[str, str]:
    files = dict(sources.reference)
    path = "module0/operators.py"
    files[path] = with_region(files[path], path, "mul", "return _Result(0.0)") + result_class
    return files


def test_always_equal_results_earn_nothing(
    tmp_path_factory: pytest.TempPathFactory, sources: Sources, quick_hypothesis: None
) -> None:
    # mul returns a float subclass worth 0.0 whose __eq__ always answers True. It earns
    # what the same wrong value with an honest __eq__ earns, task by task: 0.2's prod
    # and the Scalar multiplications of 0.4-0.6 get mul's value, so they lose the tests
    # that check it, exactly as with an honest wrong mul.
    liar = grade_case(tmp_path_factory.mktemp("liar"), _mul_returns(sources, LIAR))
    honest = grade_case(tmp_path_factory.mktemp("honest"), _mul_returns(sources, HONEST))
    written_scores(liar.out)
    assert liar.scores()["0.1"] < FULL["0.1"], liar.summary()
    for task in STAGE0:
        assert liar.task(task.id).passed_ids == honest.task(task.id).passed_ids, task.id
    assert liar.scores() == honest.scores()


# -- 12. tampering with the test machinery from a declared file -------------------------

TAMPER = """

def _tamper():
    import gc
    import sys

    import _pytest.config
    import _pytest.runner
    import pytest

    run = " ".join(sys.argv)

    def register(plugin):
        for config in [o for o in gc.get_objects() if isinstance(o, _pytest.config.Config)]:
            config.pluginmanager.register(plugin, "not-the-grader")

    if "task0_1" in run:
        original = _pytest.runner.call_and_report

        def call_and_report(item, when, log=True, **kwargs):
            report = original(item, when, log=False, **kwargs)
            report.outcome, report.longrepr = "passed", None
            if log:
                item.ihook.pytest_runtest_logreport(report=report)
            return report

        _pytest.runner.call_and_report = call_and_report
    elif "task0_2" in run:

        class Approx:
            def __init__(self, *args, **kwargs):
                pass

            def __eq__(self, other):
                return True

        pytest.approx = Approx
    elif "task0_3" in run:

        class MakeReport:
            @pytest.hookimpl(wrapper=True)
            def pytest_runtest_makereport(self, item, call):
                report = yield
                report.outcome, report.longrepr = "passed", None
                return report

        register(MakeReport())
    elif "task0_4" in run:

        class LogReport:
            @pytest.hookimpl(tryfirst=True)
            def pytest_runtest_logreport(self, report):
                report.outcome, report.longrepr = "passed", None

        register(LogReport())
    elif "task0_5" in run:

        class Setup:  # an unguarded hook that swaps each test for a no-op
            def pytest_runtest_setup(self, item):
                item.obj = lambda *args, **kwargs: None

        register(Setup())
    elif "task0_6" in run:
        for reporter in [o for o in gc.get_objects() if type(o).__name__ == "Reporter"]:
            write = reporter.write  # the course plugin's signed writer, key and all

            def forged(record, write=write):
                if record.get("event") == "test":
                    record["outcome"], record["message"] = "passed", ""
                return write(record)

            reporter.write = forged


_tamper()
"""
TAMPERING = {
    "0.1": ("patched _pytest.runner.call_and_report", "call_and_report"),
    "0.2": ("replaced pytest.approx", "pytest.approx"),
    "0.3": ("plugin with a makereport hookwrapper", "hook pytest_runtest_makereport"),
    "0.4": ("plugin with a logreport hook", "hook pytest_runtest_logreport"),
    "0.5": ("plugin whose runtest_setup swaps the test function", None),
    "0.6": ("wrapped the course reporter's signed write", None),
}


@pytest.fixture(scope="module")
def tampering(
    tmp_path_factory: pytest.TempPathFactory, sources: Sources, quick_hypothesis: None
) -> Graded:
    """Correct code; operators.py (imported by every run) tampers at import, a different
    way in each task's run."""
    files = dict(sources.reference)
    files["module0/operators.py"] += TAMPER
    return grade_case(tmp_path_factory.mktemp("tamper"), files)


@pytest.mark.parametrize("task_id", list(TAMPERING), ids=[v[0] for v in TAMPERING.values()])
def test_tampering_scores_zero_even_with_correct_code(tampering: Graded, task_id: str) -> None:
    score = tampering.task(task_id)
    how, detected_as = TAMPERING[task_id]
    assert score.score == 0.0, (
        f"task {task_id}: the run {how} and still scored {score.score}/{score.max_score} "
        f"({score.passed}/{score.total} tests); the tampering went unnoticed"
    )
    assert "changed the test machinery" in score.problem, score.problem
    if detected_as is not None:
        assert detected_as in score.problem, score.problem
    assert written_scores(tampering.out)[task_id] == 0.0


# -- 11 (the stub half is above): the grader's tests are used ----------------------------


def test_submission_tests_are_never_run(reference_with_surroundings: Graded) -> None:
    # The pristine suite ran: task 0.1 counts the grader's many tests, not the single
    # `assert True` of the submission's edited copy.
    score = reference_with_surroundings.task("0.1")
    assert score.total > 10 and score.passed == score.total
    assert not any("test_everything" in nodeid for nodeid in score.passed_ids)


def test_grading_leaves_the_submission_untouched(
    reference_with_surroundings: Graded, sources: Sources
) -> None:
    submission = reference_with_surroundings.case / "sub"
    for path, text in sources.reference.items():
        assert (submission / path).read_text(encoding="utf-8") == text
    assert sorted(p.name for p in submission.iterdir() if p.is_file()) == sorted(
        name for name in SURROUNDINGS if "/" not in name
    )
    assert not (submission / "__pycache__").exists()
