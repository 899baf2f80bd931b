"""Hostile submissions, graded end to end with ``grade_to`` (stage 0): one test per class
of attack, each scoring what the submission's real work deserves.

The attacks are written against the grader as it was before the graded checks and the
sandbox too (pytest in the student's process, a tamper guard, signed reports, same user),
so the same submission can be graded by both: ``ATTACKS`` is what the closing note of
issue 15 measured with the old grader (on the real course's stage 0). Every case grades
a stub submission (which deserves 0) or the reference's files (which deserve full
marks) with hostile code added at import. The course graded is the toy course
(``tests/autograder/toy.py``: stage 0 is ``module0/operators.py``, task 0.1, and
``module0/sums.py``, task 0.2), so each grade takes seconds; the grader's tree is a
fresh copy of it (``grader`` fixture): an attack that could write to the grader's files
must not damage the checkout that runs the tests.

Every test runs in both isolation tiers (``tier``): tier 1, the bubblewrap sandbox, and
tier 2, a dedicated unprivileged user, with bubblewrap made to fail as it fails in
Docker (``tests/autograder/isolation.py``). A tier that cannot run here is skipped with
the reason, except where ``MINITORCH_REQUIRE_SANDBOX`` is set (CI), where that fails.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import site
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.grade import (
    GradeReport,
    Limits,
    TaskScore,
    _safe_submission_file,
    grade_to,
    workspace_files,
)
from autograder.paths import ROOT
from autograder.regions import find_regions, stub_text
from tests.autograder.isolation import TIERS, in_tier, processes_naming
from tests.autograder.snoop import snoop, snooped_in
from tests.autograder.toy import TOY, toy_course, toy_tasks

STAGE0 = toy_tasks(TOY, 0)
FILES = sorted({path for task in STAGE0 for path in task.files})
FULL = {task.id: float(task.points) for task in STAGE0}
ZERO = {task.id: 0.0 for task in STAGE0}
LIMITS = Limits(per_test_seconds=20, per_task_seconds=60, memory_mb=1000)
PERFECT = json.dumps({"score": 20.0, "max_score": 20.0, "output": "FORGED", "tests": []})


@pytest.fixture(autouse=True, params=TIERS)
def tier(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test once per isolation tier."""
    with in_tier(request.param):
        yield request.param


# -- submissions and the grader's tree ------------------------------------------------------


def reference_files() -> dict[str, str]:
    return {path: (TOY / path).read_text(encoding="utf-8") for path in FILES}


def stub_files() -> dict[str, str]:
    return {path: stub_text(text, path) for path, text in reference_files().items()}


def with_region(text: str, path: str, function: str, body: str) -> str:
    """``text`` with the solution region inside ``function`` replaced by ``body``."""
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


@pytest.fixture(scope="module")
def grader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy course's reference: the grader's tree."""
    return toy_course(tmp_path_factory.mktemp("grader") / "reference")


def fingerprint(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}  # fmt: skip


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

    def text(self) -> str:
        """Everything the results say, for searching."""
        return "\n".join(p.read_text(encoding="utf-8") for p in sorted(self.out.iterdir()))


def grade_case(
    case: Path, files: Mapping[str, str], grader: Path, limits: Limits = LIMITS, **kw: object
) -> Graded:
    submission = write_tree(case / "sub", files)
    out = case / "out"
    report = grade_to(submission, out, root=grader, stage=0, limits=limits, **kw)  # type: ignore[arg-type]
    return Graded(case, out, report)


def written_scores(out: Path) -> dict[str, float]:
    """Check the four result files; the per-task scores of results.json."""
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["max_score"] == sum(FULL.values())
    assert [t["number"] for t in results["tests"]] == [task.id for task in STAGE0]
    for test, task in zip(results["tests"], STAGE0, strict=True):
        assert test["max_score"] == task.points
        assert (test["status"] == "passed") == (test["score"] == task.points)
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))
    classroom = json.loads((out / "classroom.json").read_text(encoding="utf-8"))
    assert [t["score"] for t in classroom["tests"]] == [t["score"] for t in results["tests"]]
    assert len(ET.fromstring((out / "junit.xml").read_text()).findall("testsuite")) == len(STAGE0)
    assert (out / "summary.md").read_text().startswith(f"# Grade: {results['score']:g} / ")
    return {t["number"]: float(t["score"]) for t in results["tests"]}


def assert_scores(graded: Graded, expected: Mapping[str, float]) -> None:
    assert graded.scores() == expected, graded.summary()
    assert written_scores(graded.out) == expected, graded.summary()


def findings(graded: Graded) -> dict[str, str]:
    """What an attack reported of itself (``HOSTILE-RESULT name=outcome`` lines on
    stderr, shown in a task's report because the attack then ends its run)."""
    text = "\n".join(s.report() for s in graded.report.scores)
    return dict(re.findall(r"HOSTILE-RESULT ([\w-]+)=(\S+)", text))


# -- the attacks ----------------------------------------------------------------------------

FORGERY = '''

def _forge():
    """Decide the verdict from inside: make every pytest test pass without running it
    (the old grader), or answer every check with a forged "pass" (the new one)."""
    import json, os, sys

    python = sys.modules.get("_pytest.python")
    if python is not None:
        def passing(pyfuncitem):
            return True
        python.pytest_pyfunc_call.__code__ = passing.__code__
    checks = sys.modules.get("autograder.checks")
    if checks is not None:
        checks.compare = lambda *args, **kwargs: None
        checks.judge_answer = lambda *args, **kwargs: None
        lines = [json.dumps({"check": c.id, "answer": {"verdict": "pass"}})
                 for task in checks.CHECKS.values() for c in task]
        os.write(3, ("\\n".join(lines) + "\\n").encode())
        os._exit(0)


_forge()
'''

REACH = '''

def _reach(rel):
    """Find the reference's copy of this file and run it here instead of the stubs."""
    import glob, os, re, sys

    roots = [{grader!r}]
    for folder in sys.path:
        for finder in glob.glob(os.path.join(folder, "__editable__*finder.py")):
            try:
                text = open(finder).read()
            except OSError:
                continue
            roots += [os.path.dirname(p) for p in re.findall(r"'module0': '([^']+)'", text)]
    for root in roots:
        try:
            source = open(os.path.join(root, rel)).read()
        except OSError:
            continue
        if "BEGIN " + "SOLUTION" in source:  # (spelled apart: no marker here)
            exec(compile(source, rel, "exec"), globals())
            return


_reach({rel!r})
'''

REPORT = '''

def _report(found):
    """Say what the attack achieved (stderr, which the report shows because the run then
    ends; and a file where /tmp is the machine's, for the record), then end the run."""
    import os, sys

    for item in found:  # a line each: the report shows the run's last lines, cut short
        sys.stderr.write("HOSTILE-RESULT " + item + "\\n")
    sys.stderr.flush()
    try:
        with open("/tmp/minitorch-hostile-findings", "a") as f:
            f.write(" ".join(found) + "\\n")
    except OSError:
        pass
    os._exit(1)
'''

ESCAPE = '''

def _escape():
    """Change the grader, plant code where it will run later, reach the grader's process."""
    import ctypes, os, site, socket, sys

    found = []

    def attempt(name, action):
        try:
            action()
            found.append(name + "=DONE")
        except BaseException as exc:
            found.append(name + "=blocked:" + type(exc).__name__)

    def append(path, text):
        with open(path, "a") as f:
            f.write(text)

    grader = {grader!r}
    target = {pid} or os.getppid()  # the grader: given, or (old grader) the parent
    attempt("write-grader", lambda: append(os.path.join(grader, "autograder", "grade.py"), "#"))
    attempt("new-file-in-grader", lambda: append(os.path.join(grader, "HOSTILE-MARK"), "x"))
    folders = site.getsitepackages() + [p for p in sys.path if "site-packages" in p]
    attempt("plant-pth", lambda: [append(os.path.join(f, "zz_minitorch_hostile.pth"),
                                         "import os\\n") for f in folders[:1]])
    attempt("signal-grader", lambda: os.kill(target, 0))

    def environ():
        if {secret!r}.encode() not in open("/proc/%d/environ" % target, "rb").read():
            raise LookupError("no secret")

    attempt("read-grader-environ", environ)
    libc = ctypes.CDLL(None, use_errno=True)

    def ptrace():  # attach (the grader stops), then let it go again
        if libc.ptrace(16, target, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "ptrace")
        os.waitpid(target, 0x40000000)  # __WALL
        libc.ptrace(17, target, 0, 0)

    attempt("ptrace-grader", ptrace)
    attempt("network", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2).close())

    def user_namespace():  # a namespace of its own: root inside, the kernel's surface
        if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
            raise OSError(ctypes.get_errno(), "unshare")

    attempt("user-namespace", user_namespace)

    def descriptors():  # anything open but its own pipes (0-3) was inherited
        for fd in range(4, 1024):
            try:
                os.fstat(fd)
            except OSError:
                continue
            raise LookupError("descriptor %d is open" % fd)

    def inherited():
        try:
            descriptors()
        except LookupError:
            return
        raise PermissionError("nothing inherited")

    attempt("inherited-descriptor", inherited)
    _report(found)


_escape()
'''

ABUSE = '''

def _abuse():
    """Memory across processes, many processes, a huge file, a file in /dev/shm and a
    detached process that should outlive the grade."""
    import os, sys, time

    found = []
    children = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            try:
                block = bytearray(600 * 1024 * 1024)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                time.sleep(1)
                os._exit(0)
            except MemoryError:
                os._exit(2)
        children.append(pid)
    held = len([pid for pid in children if os.waitpid(pid, 0)[1] == 0])
    found.append("children-holding-600MB=%d" % held)
    sleepers = []
    try:
        for _ in range({forks}):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            sleepers.append(pid)
    except OSError:
        pass
    found.append("sleeping-processes=%d" % len(sleepers))
    for pid in sleepers:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    try:
        with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "huge"), "wb") as f:
            for _ in range(3 * 1024):
                f.write(b"x" * (1 << 20))
        found.append("3GB-file=DONE")
    except OSError as exc:
        found.append("3GB-file=blocked:" + type(exc).__name__)
    finally:
        try:
            os.remove(os.path.join(os.environ.get("TMPDIR", "/tmp"), "huge"))
        except OSError:
            pass
    for folder in ("/dev/shm", "/tmp"):
        with open(folder + "/{token}", "w") as f:
            f.write("left behind")
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)",
                                      "{token}"])
        os._exit(0)
    _report(found)


_abuse()
'''

HANG = """

import signal as _signal

for _number in (_signal.SIGALRM, _signal.SIGTERM, _signal.SIGINT, _signal.SIGVTALRM):
    _signal.signal(_number, _signal.SIG_IGN)
_signal.setitimer = lambda *args, **kwargs: (0.0, 0.0)
while True:
    pass
"""

FLOOD = """

import os as _os

for _ in range(1024):
    _os.write(1, b"flood " * 174763)
_os._exit(1)
"""

ALWAYS_EQUAL = """

class _Result(float):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = float.__hash__
"""

ATTACKS = {
    "forgery": "stub + FORGERY in module0/operators.py",
    "reach": "stub + REACH in every declared file",
    "escape": "stub + ESCAPE in module0/operators.py",
    "abuse": "stub + ABUSE in module0/operators.py",
}


def forgery_submission() -> dict[str, str]:
    files = stub_files()
    files["module0/operators.py"] += FORGERY
    return files


def reach_submission(grader: Path) -> dict[str, str]:
    return {path: text + REACH.format(grader=str(grader), rel=path)
            for path, text in stub_files().items()}  # fmt: skip


def escape_submission(grader: Path, pid: int, secret: str) -> dict[str, str]:
    files = stub_files()
    files["module0/operators.py"] += REPORT + ESCAPE.format(
        grader=str(grader), pid=pid, secret=secret
    )
    return files


def abuse_submission(token: str, forks: int = 1000) -> dict[str, str]:
    files = stub_files()
    files["module0/operators.py"] += REPORT + ABUSE.format(token=token, forks=forks)
    return files


# -- 1. in-process forgery ----------------------------------------------------------------


def test_forging_the_verdict_inside_the_sandbox_earns_nothing(tmp_path: Path, grader: Path) -> None:
    # Before: the stub submission took 80/80 of the real stage 0 (every pytest test
    # "passed").
    graded = grade_case(tmp_path, forgery_submission(), grader)
    assert_scores(graded, ZERO)
    report = graded.task("0.1").report()
    assert "no answer" in report and "were not valid answers" in report, report


# -- 2. the reference within reach --------------------------------------------------------


def test_the_reference_is_out_of_reach(tmp_path: Path, grader: Path) -> None:
    # Before: the stubs ran the reference's own code (read from the grader's tree, or
    # through the editable install's finder) and took 80/80 of the real stage 0.
    graded = grade_case(tmp_path, reach_submission(grader), grader)
    assert_scores(graded, ZERO)


def test_an_installed_copy_of_the_course_is_hidden_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tier: str
) -> None:
    # ``pip install .`` (not editable) would put the reference into site-packages, which
    # the sandbox binds: each course package found there is covered by an empty folder
    # (tier 1); tier 2 cannot hide it, so it refuses while another user can read it.
    import tempfile

    with tempfile.TemporaryDirectory(prefix="minitorch-site-") as folder:
        site = Path(folder) / "site-packages"
        (site / "module0").mkdir(parents=True)
        os.chmod(folder, 0o755)
        monkeypatch.setattr(sandbox, "site_dirs", lambda: [str(site)])
        if tier == sandbox.BUBBLEWRAP:
            args = sandbox._binds(None, None, sandbox.SandboxLimits())
            tmpfs = [args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"]
            assert str(site / "module0") in tmpfs
        else:
            problem = sandbox.user_tier_problem([])
            assert "a copy of the course (an installed package" in problem, problem
            assert str(site / "module0") in problem
            os.chmod(folder, 0o700)
            assert sandbox.user_tier_problem([]) == ""


# -- 3. a writable grader -------------------------------------------------------------------


def test_the_grader_and_its_environment_are_out_of_reach(
    tmp_path: Path, grader: Path, monkeypatch: pytest.MonkeyPatch, tier: str
) -> None:
    # Before: every attempt below succeeded, the grader's grade.py was changed for the
    # next submission and a .pth was planted in its environment.
    secret = secrets.token_hex(8)
    monkeypatch.setenv("MINITORCH_TEST_SECRET", secret)
    before = fingerprint(grader)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = Path(sys.base_prefix) / "lib" / version / "site-packages"
    folders = {*sandbox.site_dirs(), *site.getsitepackages(), str(base)}
    planted = [Path(p) / "zz_minitorch_hostile.pth" for p in folders]
    graded = grade_case(tmp_path, escape_submission(grader, os.getpid(), secret), grader)
    try:
        assert not any(p.exists() for p in planted)
    finally:
        for p in planted:
            p.unlink(missing_ok=True)
    assert fingerprint(grader) == before
    assert_scores(graded, ZERO)
    found = findings(graded)
    assert set(found) == {"write-grader", "new-file-in-grader", "plant-pth", "signal-grader",
                          "read-grader-environ", "ptrace-grader", "network", "user-namespace",
                          "inherited-descriptor"}, found  # fmt: skip
    if tier == sandbox.USER:  # tier 2 does not cut the network (autograder/README.md)
        del found["network"]
    assert all(outcome.startswith("blocked") for outcome in found.values()), found
    assert secret not in graded.text()
    # The grader is as it was: the reference still gets full marks from it.
    honest = grade_case(tmp_path / "honest", reference_files(), grader)
    assert_scores(honest, FULL)


# -- 4. limits on the whole sandbox ------------------------------------------------------------


def test_limits_hold_for_the_whole_sandbox_and_nothing_outlives_it(
    tmp_path: Path, grader: Path
) -> None:
    # Before: 3 children held 600 MB each under a 1000 MB limit, 1000 processes slept,
    # a 3 GB file was written, and the /dev/shm file and the detached process stayed.
    token = f"minitorch-hostile-{secrets.token_hex(6)}"
    start = time.monotonic()
    graded = grade_case(tmp_path, abuse_submission(token), grader, task_ids=["0.1"])
    seconds = time.monotonic() - start
    try:
        assert processes_naming(token) == []
        assert not Path("/dev/shm", token).exists()
        assert not Path("/tmp", token).exists()
    finally:
        for pid in processes_naming(token):
            os.kill(pid, 9)
        Path("/dev/shm", token).unlink(missing_ok=True)
        Path("/tmp", token).unlink(missing_ok=True)
    found = findings(graded)
    assert graded.task("0.1").score == 0.0
    limits = sandbox.SandboxLimits()
    assert int(found["sleeping-processes"]) < limits.user_processes, found
    assert found["3GB-file"].startswith("blocked"), found
    groups = sandbox.ControlGroups(1 << 30, 10)
    groups.remove()
    if groups.applied:  # whole-sandbox limits where control groups can be made
        assert int(found["children-holding-600MB"]) <= 1, found
        assert int(found["sleeping-processes"]) < limits.processes, found
    assert seconds < 60


def test_a_hang_that_ignores_every_signal_ends_at_the_time_limit(
    tmp_path: Path, grader: Path
) -> None:
    files = reference_files()
    files["module0/operators.py"] += HANG  # task 0.1's file: imported by its check run
    limits = Limits(per_test_seconds=1, per_task_seconds=3, memory_mb=1000)
    start = time.monotonic()
    graded = grade_case(tmp_path, files, grader, limits, task_ids=["0.1"])
    assert time.monotonic() - start < 20
    problem = graded.task("0.1").problem
    assert "reached the task's time limit (3 s)" in problem, problem
    assert graded.scores() == {"0.1": 0.0}


def test_an_output_flood_is_read_with_a_cap(tmp_path: Path, grader: Path) -> None:
    # Before: the grader read the whole log into memory (2 GB for a 1 GiB flood).
    files = stub_files()
    files["module0/operators.py"] += FLOOD
    write_tree(tmp_path / "sub", files)
    command = [sys.executable, "-m", "autograder.cli", "grade", str(tmp_path / "sub"),
               "--out", str(tmp_path / "out"), "--stage", "0", "--task", "0.1"]  # fmt: skip
    measure = (  # the grader's peak memory, and its children's: read by a parent of its own
        "import resource, subprocess, sys; "
        f"code = subprocess.run({command!r}, capture_output=True).returncode; "
        "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    run = subprocess.run([sys.executable, "-c", measure], cwd=grader, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    code, peak_kb = run.stdout.split()
    assert code == "0", run.stderr[-2000:]
    assert int(peak_kb) / 1024 < 400, peak_kb
    report = json.loads((tmp_path / "out" / "results.json").read_text())["tests"][0]["output"]
    assert "exited with status 1" in report
    assert len(report) < 20_000


HUGE_ANSWER = """

import json as _json, os as _os

_line = _json.dumps({"check": "0.1:mul", "answer": "x" * (30 << 20)}) + "\\n"
_os.write(3, _line.encode())
"""

LINE_FLOOD = """

import json as _json, os as _os

_line = (_json.dumps({"check": "0.1:mul", "answer": 1.0}) + "\\n").encode() * 2000
for _ in range(10_000):  # 20 million well-formed lines
    _os.write(3, _line)
"""

MEASURE_GRADER = """
import sys, time
from pathlib import Path
from autograder.grade import Limits, grade_to

start = time.process_time()
report = grade_to(Path(sys.argv[1]), Path(sys.argv[2]), root=Path(sys.argv[3]), stage=0,
                  task_ids=["0.1"], limits=Limits(per_task_seconds=60))
# The high-water mark of this process's own memory (ru_maxrss would carry over the
# peak of the process that started it: Linux keeps it across exec).
peak = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(peak, time.process_time() - start)
"""


def _grader_cost(case: Path, files: Mapping[str, str], grader: Path) -> tuple[float, float, str]:
    """The grader process's own peak memory (MB) and CPU seconds for one grade (its
    children, the sandbox and the reference's run, are not counted), and the report."""
    write_tree(case / "sub", files)
    run = subprocess.run(
        [sys.executable, "-c", MEASURE_GRADER, str(case / "sub"), str(case / "out"),
         str(grader)], capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    peak_kb, cpu = run.stdout.split()[-2:]
    report = json.loads((case / "out" / "results.json").read_text())["tests"][0]["output"]
    return int(peak_kb) / 1024, float(cpu), report


EACH_CHECK_8_MIB = """

import json as _json, os as _os

for _check in ("0.1:mul", "0.1:add", "0.1:neg"):  # the first answer of each: judged
    _line = _json.dumps({"check": _check, "answer": [0.0] * ((8 << 20) // 5 - 20)}) + "\\n"
    _os.write(3, _line.encode())
"""

AT_THE_LIMITS = """

import json as _json, os as _os

for _size in range(4, 23):  # lists of 2**4 ... 2**22 zeros, for each check in turn
    for _check in ("0.1:mul", "0.1:add", "0.1:neg"):
        _line = _json.dumps({"check": _check, "answer": [0.0] * (1 << _size)}) + "\\n"
        _os.write(3, _line.encode())
"""

OVER_ITS_LINE = """

import json as _json, os as _os

_os.write(3, (_json.dumps({"check": "0.1:mul", "answer": [0.0] * 5000}) + "\\n").encode())
"""


def test_the_answer_pipe_cannot_load_the_grader(tmp_path: Path, grader: Path) -> None:
    # Before: a 30 MiB answer line drove the grader from 36 MB to 848 MB, and a flood of
    # small well-formed lines kept it parsing at 100% of a core to the task's time limit.
    # Then (round 4): the first answer of each check at just under the 8 MiB line limit
    # raised the grader to 1.6 GB and 19 s of CPU (seven checks). Now each line may be a
    # few times the reference's answer to its check, with as many values, and is judged
    # as it arrives: the grader's own peak stays under 100 MB and 2 s of CPU.
    costs = {}
    for name, attack in (("stubs", ""), ("30 MiB line", HUGE_ANSWER), ("flood", LINE_FLOOD),
                         ("8 MiB per check", EACH_CHECK_8_MIB), ("at the limits", AT_THE_LIMITS),
                         ("over its line", OVER_ITS_LINE)):  # fmt: skip
        files = stub_files()
        files["module0/operators.py"] += attack
        costs[name] = _grader_cost(tmp_path / name.replace(" ", "-"), files, grader)
    print("grader:", ", ".join(f"{n} {mb:.0f} MB {cpu:.2f} s" for n, (mb, cpu, _) in costs.items()))
    for name, (mb, cpu, report) in costs.items():
        assert mb < 100 and cpu < 2, (name, mb, cpu, report)
    assert "was stopped: it wrote more than" in costs["30 MiB line"][2], costs["30 MiB line"]
    assert "was stopped: it wrote more than" in costs["flood"][2], costs["flood"]
    assert "was stopped: it wrote more than" in costs["8 MiB per check"][2]
    over = costs["over its line"][2]
    assert "1 of them over the limit of a line (a few times the length of the reference's" in over


# -- 5. reports that say why ---------------------------------------------------------------


FAKE_VERDICT = """

import os as _os, sys as _sys

_sys.stdout.write("\\x1b[2J\\x1b[32mGrade: 80 / 80\\x1b[0m\\r\\n<b>All tests passed</b>\\u2028")
_sys.stdout.write("`# Grade: 80 / 80` " + "x" * 500 + "\\n")
_sys.stdout.flush()
_os._exit(1)
"""


def test_the_submissions_output_is_labelled_and_defanged(tmp_path: Path, grader: Path) -> None:
    # Before: the run's last output was copied verbatim into results.json and
    # classroom.json under "The run's last output": a fake "Grade: 80 / 80", HTML or
    # terminal escapes showed to the student as if the grader wrote them.
    files = stub_files()
    files["module0/operators.py"] += FAKE_VERDICT
    graded = grade_case(tmp_path, files, grader, task_ids=["0.1"])
    report = graded.task("0.1").report()
    label = "What the submission's code printed last (its own words, not the grader's"
    assert label in report, report
    shown = report.split(label, 1)[1].splitlines()[1:]
    assert shown and all(line.startswith("  | ") for line in shown), shown
    assert shown[0] == "  | Grade: 80 / 80", shown  # under the label: the submission's
    assert shown[1].startswith("  | ‹b›All tests passed‹/b›'# Grade"), shown
    assert all(len(line) <= 4 + 160 + 6 for line in shown), shown
    results = (graded.out / "results.json").read_text(encoding="utf-8")
    for forbidden in ("\\u001b", "<b>", "\\u2028", "\\r"):
        assert forbidden not in results, forbidden
    assert json.loads(results)["tests"][0]["output_format"] == "text"


def test_reports_give_the_values_the_exit_status_and_the_inputs(
    tmp_path: Path, grader: Path
) -> None:
    files = reference_files()
    path = "module0/operators.py"
    files[path] = with_region(files[path], path, "mul", "return x * y + 0.5")
    files["module0/sums.py"] += "\nimport os, sys\nif '0.2' in sys.argv:\n    os._exit(3)\n"
    graded = grade_case(tmp_path, files, grader, task_ids=["0.1", "0.2"])
    mul = dict(graded.task("0.1").failures)["0.1:mul"]
    assert "expected" in mul and "got" in mul and "(inputs: (" in mul, mul
    assert graded.task("0.1").passed == graded.task("0.1").total - 1
    problem = graded.task("0.2").problem
    assert "the check process exited with status 3 before 1 of 1 checks answered" in problem
    assert "0.1:mul" in graded.summary() or "0.1:mul" in graded.text()


# -- controls and the classic tricks ----------------------------------------------------------


def test_controls_the_stubs_score_zero_and_the_reference_full_marks(
    tmp_path: Path, grader: Path
) -> None:
    assert_scores(grade_case(tmp_path / "stub", stub_files(), grader), ZERO)
    assert_scores(grade_case(tmp_path / "ref", reference_files(), grader), FULL)


SURROUNDINGS = {
    "conftest.py": "import pytest\n",
    "sitecustomize.py": "import os\nos._exit(0)\n",
    "tests/module0/checks.py": "from autograder.checks import check\n",
    "autograder/checks.py": "CHECKS = {}\n",
    "results.json": PERFECT,
}


def test_only_declared_files_are_taken_and_links_are_refused(tmp_path: Path, grader: Path) -> None:
    files = {**stub_files(), **SURROUNDINGS}
    files["module0/sums.py"] += (
        f"\nfor _f in ('results.json', 'summary.md'):\n"
        f"    try:\n        open({str(tmp_path / 'out')!r} + '/' + _f, 'w').write({PERFECT!r})\n"
        f"    except OSError:\n        pass\n"
    )
    del files["module0/operators.py"]
    link = tmp_path / "sub" / "module0" / "operators.py"
    link.parent.mkdir(parents=True)
    link.symlink_to(TOY / "module0" / "operators.py")
    graded = grade_case(tmp_path, files, grader)
    assert_scores(graded, ZERO)
    assert any(n.startswith("module0/operators.py:") for n in graded.report.notes)
    assert "FORGED" not in graded.text()


def test_always_equal_results_earn_nothing(tmp_path: Path, grader: Path) -> None:
    files = reference_files()
    path = "module0/operators.py"
    files[path] = with_region(files[path], path, "mul", "return _Result(x * y)") + ALWAYS_EQUAL
    graded = grade_case(tmp_path, files, grader, task_ids=["0.1"])
    assert "0.1:mul" in dict(graded.task("0.1").failures)
    assert graded.task("0.1").passed == graded.task("0.1").total - 1


def test_grading_leaves_the_submission_untouched(tmp_path: Path, grader: Path) -> None:
    files = reference_files()
    files["module0/sums.py"] += (
        "\ntry:\n    open(__file__, 'a').write('# rewritten')\nexcept OSError:\n    pass\n"
    )
    graded = grade_case(tmp_path, files, grader, task_ids=["0.2"])
    for path, text in files.items():
        assert (tmp_path / "sub" / path).read_text(encoding="utf-8") == text
    assert graded.task("0.2").score == FULL["0.2"]  # the failed write is not its problem


def test_without_a_sandbox_no_grade_is_issued(
    tmp_path: Path, grader: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "bubblewrap_problem", lambda: "bwrap is not installed")
    monkeypatch.setattr(
        sandbox, "user_tier_problem", lambda trees, uid=None, submission=None: "it needs root"
    )
    graded = grade_case(tmp_path, reference_files(), grader, task_ids=["0.1"])
    error = graded.report.grader_error
    assert "no isolation tier works here" in error and "bwrap is not installed" in error, error
    assert "it needs root" in error and "--unsafe-no-sandbox" in error, error
    assert graded.scores() == {"0.1": 0.0}
    unsafe = grade_case(
        tmp_path / "unsafe", reference_files(), grader, task_ids=["0.1"], unsafe_no_sandbox=True
    )
    assert unsafe.scores() == {"0.1": 10.0}
    assert any("WITHOUT a sandbox" in note for note in unsafe.report.notes)


# -- what the run can see, and files that are not what they seem ---------------------------


def test_nothing_that_solves_a_task_is_visible_to_the_run(tmp_path: Path, grader: Path) -> None:
    # The workspace is an allow-list: the stage packages (stubs where the submission has
    # nothing), the check runner and the checks. The grader's trees, wherever they are,
    # cannot be read.
    files = stub_files()
    files["module0/operators.py"] += snoop([grader, ROOT, tmp_path])
    graded = grade_case(tmp_path, files, grader, task_ids=["0.1"])
    found = snooped_in(graded.report)
    assert found == {"visible": str(len(workspace_files(grader))), "holding": "0",
                     "first": "-"}, graded.task("0.1").report()  # fmt: skip


def test_a_hard_link_to_the_graders_file_is_refused(tmp_path: Path, grader: Path) -> None:
    # Before: a declared file hard-linked to the reference's own passed as a regular file
    # (80 of 80 of the real stage 0, with the submission on the grading machine).
    files = stub_files()
    del files["module0/operators.py"]
    write_tree(tmp_path / "sub", files)
    os.link(grader / "module0" / "operators.py", tmp_path / "sub" / "module0" / "operators.py")
    graded = grade_case(tmp_path, files, grader)
    assert_scores(graded, ZERO)
    hard = "module0/operators.py: a hard link ("  # (the grader's file has 2 names or more)
    assert any(n.startswith(hard) and n.endswith("stub was used instead")
               for n in graded.report.notes), graded.report.notes  # fmt: skip


def test_declared_files_are_taken_by_content_from_a_checked_descriptor(tmp_path: Path) -> None:
    sub = write_tree(tmp_path / "sub", {"module0/operators.py": "x = 1\n"})
    target = sub / "module0" / "operators.py"
    assert _safe_submission_file(sub, "module0/operators.py") == (b"x = 1\n", "")
    info = target.stat()
    same = {(info.st_dev, info.st_ino)}  # a bind mount of the grader's file looks like this
    assert _safe_submission_file(sub, "module0/operators.py", same) == (
        None, "the grader's own copy of the file",
    )  # fmt: skip
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "operators.py").write_text("y = 2\n")
    target.unlink()
    (sub / "module0").rmdir()
    (sub / "module0").symlink_to(tmp_path / "elsewhere")
    assert _safe_submission_file(sub, "module0/operators.py")[0] is None
    (sub / "module0").unlink()
    (sub / "module0").mkdir()
    os.mkfifo(sub / "module0" / "operators.py")  # would block a plain open()
    assert _safe_submission_file(sub, "module0/operators.py") == (None, "not a regular file")
