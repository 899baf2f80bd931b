"""``minitorch release`` and the solution regions it stubs.

The handout of the whole course is written once for the module (no verification) and
its files are checked. The verification runs on the toy course (``tests/autograder/
toy.py``: two stages, three tasks; whole and ``--through 0``, seconds) and on the real
stage 0 (``--through 0``), every check included; the full course's verification is its
own step in CI (``.ci/run``), where it takes minutes. Refusals are tested on small fake
trees with ``check_regions`` and ``write_handout`` directly, and, for the checks that
need test or check runs, with releases of a modified toy course.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.paths import repo_files
from autograder.regions import (
    RegionError,
    begin_line,
    end_line,
    fill_text,
    find_regions,
    omitted_names,
    reference_bodies,
    stub_block,
    stub_line,
    stub_text,
)
from autograder.registry import TASKS
from autograder.release import (
    REFERENCE_CODE,
    REFERENCE_ONLY,
    ReleaseError,
    ReleaseReport,
    _check_no_solution_left,
    check_reached,
    check_regions,
    release,
    shaped_reference,
    verify_grading,
    write_handout,
    write_reference,
)
from autograder.runner import RunResult, TestResult
from tests.autograder.toy import toy_course, toy_tasks

ROOT = Path(__file__).resolve().parents[2]
WORD = "SOLUTION"  # spelled once, so this file holds no region marker itself
BEGIN = f"# BEGIN {WORD}"
END = f"# END {WORD}"
MARKER_LINE = re.compile(rf"^[ \t]*#[ \t]*(BEGIN|END)[ \t]+{WORD}", re.MULTILINE)
DECLARED = {path for task in TASKS for path in task.files}
ALL_CHECKS = [
    "regions and registry agree",
    "no solution text or marker left",
    "handout imports and its tests collect",
    "every graded test fails on the handout",
    "every graded test passes on the reference",
    "every listed function is called by its task's tests",
    "minitorch grade: handout 0, reference full marks",
]


def _quiet(_: str) -> None:
    pass


def _reference_only(rel: str) -> bool:
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in REFERENCE_ONLY)


CACHES = ("__pycache__", ".hypothesis")
"""What a run of the tests may leave in a tree (the handout's .gitignore keeps them out of
a student's repository; the verification itself leaves no ``.hypothesis``)."""


def files_under(root: Path) -> set[str]:
    """Every file under ``root``, less the caches of the verification runs."""
    return {
        p.relative_to(root).as_posix() for p in root.rglob("*")
        if p.is_file() and not set(p.relative_to(root).parts) & set(CACHES)
    }  # fmt: skip


# -- the real release of this repository ------------------------------------------------


@pytest.fixture(scope="module")
def handout(tmp_path_factory: pytest.TempPathFactory) -> tuple[ReleaseReport, list[str]]:
    """The whole course's handout, written (verified only through stage 0, below)."""
    out = tmp_path_factory.mktemp("release") / "handout"
    return release(out, root=ROOT, check=False, log=_quiet), []


def test_release_through_stage_0_passes_all_checks(tmp_path: Path) -> None:
    lines: list[str] = []
    report = release(tmp_path / "handout", through=0, root=ROOT, log=lines.append)
    assert report.checks == ALL_CHECKS
    assert [t.id for t in report.tasks] == [t.id for t in TASKS if t.stage == 0]
    assert any(line.startswith("checked: all ") and "pass on the reference (released shape)"
               in line for line in lines), lines  # fmt: skip
    assert any("minitorch grade" in line and "the reference 80 / 80" in line
               for line in lines), lines  # fmt: skip
    # Hypothesis's database of the verification's runs stays out of the handout.
    assert not list((tmp_path / "handout").rglob(".hypothesis"))


def test_a_release_of_the_toy_course_passes_all_checks_in_each_shape(tmp_path: Path) -> None:
    toy = toy_course(tmp_path / "toy")
    lines: list[str] = []
    report = release(tmp_path / "all", root=toy, log=lines.append)
    assert report.checks == ALL_CHECKS
    assert [t.id for t in report.tasks] == ["0.1", "0.2", "1.1"]
    assert report.files_stubbed == ["module0/operators.py", "module0/sums.py", "module1/vectors.py"]
    assert any("the reference 30 / 30" in line for line in lines), lines
    lines.clear()
    report = release(tmp_path / "through0", through=0, root=toy, log=lines.append)
    assert report.checks == ALL_CHECKS
    assert [t.id for t in report.tasks] == ["0.1", "0.2"]
    assert not (tmp_path / "through0" / "module1").exists()
    assert not (tmp_path / "through0" / "tests" / "module1").exists()
    assert any("the reference 20 / 20" in line for line in lines), lines
    assert "_fold" not in (tmp_path / "through0" / "module0" / "sums.py").read_text()


def test_shaped_copies_of_trees_that_are_gone_are_removed(tmp_path: Path) -> None:
    first = toy_course(tmp_path / "first")
    shaped = shaped_reference(first, 0)
    kernels = shaped.with_name(shaped.name + "-kernels")
    kernels.mkdir(exist_ok=True)
    assert (shaped / "module0/operators.py").is_file()
    shaped_reference(first, 0)  # the tree still exists: its copy is kept
    assert (shaped / "module0/operators.py").is_file()
    shutil.rmtree(first)
    other = shaped_reference(toy_course(tmp_path / "second"), 0)
    assert not shaped.exists() and not kernels.exists()
    assert not shaped.with_name(shaped.name + ".root").exists()
    assert (other / "module0/operators.py").is_file()


def test_the_whole_handout_stubs_every_declared_file(
    handout: tuple[ReleaseReport, list[str]],
) -> None:
    report, _ = handout
    assert [t.id for t in report.tasks] == [t.id for t in TASKS]
    assert sorted(report.files_stubbed) == sorted(DECLARED)


def test_handout_has_no_marker_left(handout: tuple[ReleaseReport, list[str]]) -> None:
    report, _ = handout
    for rel in files_under(report.out_dir):
        if rel.endswith(".py"):
            text = (report.out_dir / rel).read_text(encoding="utf-8")
            assert not MARKER_LINE.search(text), rel


def test_declared_files_raise_naming_task_function_and_file(
    handout: tuple[ReleaseReport, list[str]],
) -> None:
    report, _ = handout
    for path in sorted(DECLARED):
        handout_text = (report.out_dir / path).read_text(encoding="utf-8")
        regions = find_regions((ROOT / path).read_text(encoding="utf-8"), path)
        assert regions, path
        for region in regions:
            message = (
                f"Task {region.task_id}: implement {region.function} in {path} "
                f"(see module{region.task_id.split('.')[0]}/README.md)"
            )
            if region.omit:  # the reference's own helpers: not in the handout at all
                body = "".join(region.body((ROOT / path).read_text().splitlines(True)))
                assert body not in handout_text, (path, region.begin)
                continue
            assert region.function, f"{path}:{region.begin} is in no function"
            # Inside a CUDA kernel (a ``nowrite`` region) the stub writes nothing.
            line = (
                f"pass  # {message}"
                if region.nowrite
                else f'raise NotImplementedError("{message}")'
            )
            # Between two lines that name the task: where the student's code goes.
            block = (
                f"{region.indent}{begin_line(region.task_id)}\n{region.indent}{line}\n"
                f"{region.indent}{end_line(region.task_id)}\n"
            )
            assert block in handout_text, (path, region.function)
        stubs = re.findall(
            r'raise NotImplementedError\("Task (\d+\.\d+): |pass  # Task (\d+\.\d+): ', handout_text
        )
        found = sorted(raised or passed for raised, passed in stubs)
        assert found == sorted(r.task_id for r in regions if not r.omit), path


def test_every_other_file_is_byte_identical(handout: tuple[ReleaseReport, list[str]]) -> None:
    report, _ = handout
    tracked = {rel.as_posix() for rel in repo_files(ROOT)}
    expected = {rel for rel in tracked if not _reference_only(rel)}
    assert files_under(report.out_dir) == expected
    assert any(_reference_only(rel) for rel in tracked)  # the reference CI is left out
    for rel in expected - DECLARED - {"README.md"}:  # the handout has its own README
        assert (report.out_dir / rel).read_bytes() == (ROOT / rel).read_bytes(), rel


def test_verification_caches_are_ignored_by_the_handouts_gitignore(
    handout: tuple[ReleaseReport, list[str]],
) -> None:
    report, _ = handout
    ignored = (report.out_dir / ".gitignore").read_text(encoding="utf-8").split()
    left = {part for p in report.out_dir.rglob("*") for part in p.relative_to(report.out_dir).parts}
    for cache in set(CACHES) & left:
        assert f"{cache}/" in ignored, cache


def test_through_0_releases_stage_0_only(
    handout: tuple[ReleaseReport, list[str]], tmp_path: Path
) -> None:
    report, _ = handout
    partial = write_handout(ROOT, tmp_path / "through0", through=0)
    assert [t.id for t in partial.tasks] == [t.id for t in report.tasks if t.stage == 0]
    later = {rel for rel in files_under(report.out_dir) if _later(rel)}
    assert files_under(tmp_path / "through0") == files_under(report.out_dir) - later
    for rel in files_under(tmp_path / "through0") - {"README.md"}:
        assert (tmp_path / "through0" / rel).read_bytes() == (report.out_dir / rel).read_bytes(), (
            rel
        )


def _later(rel: object) -> bool:
    """Whether a handout path belongs to a stage after 0 (``moduleK/`` or ``tests/moduleK/``)."""
    parts = Path(str(rel)).parts
    names = [parts[0]] + ([parts[1]] if len(parts) > 1 and parts[0] == "tests" else [])
    return any(n.startswith("module") and n[6:].isdigit() and int(n[6:]) > 0 for n in names)


def test_release_refuses_an_occupied_folder_and_the_reference(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    with pytest.raises(ReleaseError, match="not empty"):
        release(tmp_path / "busy", root=ROOT, check=False, log=_quiet)
    assert (tmp_path / "busy" / "keep.txt").read_text() == "mine"
    with pytest.raises(ReleaseError, match="contains the reference"):
        release(ROOT, root=ROOT, check=False, log=_quiet)
    with pytest.raises(ReleaseError, match="contains the reference"):
        release(ROOT.parent, root=ROOT, check=False, log=_quiet)


def test_later_stages_are_left_out(tmp_path: Path) -> None:
    fake = toy_course(tmp_path / "fake")
    (fake / "module9").mkdir()
    (fake / "module9" / "__init__.py").write_text('"""A later stage."""\n')
    (fake / "tests" / "module9").mkdir()
    (fake / "tests" / "module9" / "test_x.py").write_text("def test_x():\n    pass\n")
    (fake / "tests" / "module9_notes.txt").write_text("not a stage folder\n")

    report = write_handout(fake, tmp_path / "through0", through=0)
    written = files_under(tmp_path / "through0")
    assert not any(rel.startswith(("module9/", "tests/module9/")) for rel in written)
    assert "tests/module9_notes.txt" in written
    assert "module0/operators.py" in report.files_stubbed

    write_handout(fake, tmp_path / "all")
    written = files_under(tmp_path / "all")
    assert {"module9/__init__.py", "tests/module9/test_x.py"} <= written


# -- check_regions on small fake trees --------------------------------------------------


def region_tree(tmp_path: Path, edits: dict[str, str] | None = None) -> Path:
    """The reference's stage packages (module0/, module1/, ...) with ``edits`` applied."""
    for rel in repo_files(ROOT):
        if rel.parts[0].startswith("module"):
            target = tmp_path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, target)
    for name, text in (edits or {}).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_check_regions_accepts_the_reference(tmp_path: Path) -> None:
    check_regions(region_tree(tmp_path), TASKS)
    check_regions(ROOT, TASKS)


def test_region_of_an_unknown_task_is_refused(tmp_path: Path) -> None:
    text = (ROOT / "module0/operators.py").read_text(encoding="utf-8")
    text += f"\n\ndef extra() -> None:\n    {BEGIN} 9.9\n    pass\n    {END}\n"
    tree = region_tree(tmp_path, {"module0/operators.py": text})
    with pytest.raises(ReleaseError, match=r"module0/operators\.py:\d+: region of task 9\.9"):
        check_regions(tree, TASKS)


def test_region_in_a_file_its_task_does_not_list_is_refused(tmp_path: Path) -> None:
    text = (ROOT / "module0/optim.py").read_text(encoding="utf-8")
    text += f"\n\ndef extra() -> None:\n    {BEGIN} 0.1\n    pass\n    {END}\n"
    tree = region_tree(tmp_path, {"module0/optim.py": text})
    with pytest.raises(ReleaseError, match=r"module0/optim\.py:\d+: region of task 0\.1"):
        check_regions(tree, TASKS)


def test_task_without_a_region_in_a_listed_file_is_refused(tmp_path: Path) -> None:
    path = "module0/module.py"
    stubbed = stub_text((ROOT / path).read_text(encoding="utf-8"), path)
    tree = region_tree(tmp_path, {path: stubbed})
    with pytest.raises(ReleaseError, match=r"task 0\.3 lists module0/module\.py but has no"):
        check_regions(tree, TASKS)


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (f"    {BEGIN} 0.1\n    return x\n", r"operators\.py:\d+: region of task 0\.1 is never"),
        (f"    {END}\n", r"operators\.py:\d+: END marker without a BEGIN"),
        (f"    #BEGIN  {WORD} 0.1\n", r"operators\.py:\d+: malformed solution marker"),
        (f"    {BEGIN} 0.1 nowrite please\n", r"operators\.py:\d+: malformed solution marker"),
    ],
    ids=["unclosed", "stray-end", "misspelt", "bad-kind"],
)
def test_malformed_markers_are_refused(tmp_path: Path, marker: str, message: str) -> None:
    text = (ROOT / "module0/operators.py").read_text(encoding="utf-8")
    text += f"\n\ndef extra(x: float) -> float:\n{marker}"
    tree = region_tree(tmp_path, {"module0/operators.py": text})
    with pytest.raises(ReleaseError, match=message):
        check_regions(tree, TASKS)


def test_release_refuses_a_malformed_marker_in_a_declared_file(tmp_path: Path) -> None:
    # The same refusal through release() itself (as `minitorch release` runs it), where
    # the declared file is stubbed before any check runs.
    fake = toy_course(tmp_path / "fake")
    path = fake / "module0/operators.py"
    path.write_text(
        path.read_text(encoding="utf-8")
        + f"\n\ndef extra(x: float) -> float:\n    {BEGIN} 0.1\n    return x\n",
        encoding="utf-8",
    )
    with pytest.raises(ReleaseError, match=r"module0/operators\.py:\d+: region of task 0\.1"):
        release(tmp_path / "handout", root=fake, log=_quiet)


# -- full releases of modified copies: checks 4 and 5 -----------------------------------

FAKE_TEST = """import pytest

pytestmark = [{markers}]


def test_trivial():
    assert {condition}
"""


def fake_stage_0(tmp_path: Path, condition: str) -> Path:
    """The toy course, with stage-0 tests that are one trivial test of every stage-0
    task."""
    fake = toy_course(tmp_path / "fake")
    for path in (fake / "tests/module0").glob("test_*.py"):
        path.unlink()
    markers = ", ".join(f"pytest.mark.{t.marker}" for t in toy_tasks(fake, 0))
    (fake / "tests/module0/test_fake.py").write_text(
        FAKE_TEST.format(markers=markers, condition=condition)
    )
    return fake


def test_release_refuses_a_graded_test_that_passes_on_the_handout(tmp_path: Path) -> None:
    fake = fake_stage_0(tmp_path, "1 + 1 == 2")
    with pytest.raises(ReleaseError) as excinfo:
        release(tmp_path / "handout", through=0, root=fake, log=_quiet)
    message = str(excinfo.value)
    assert "pass on the handout" in message
    assert "task 0.1, 0.2: tests/module0/test_fake.py::test_trivial" in message
    assert message.count("::") == 1, message  # nothing else is blamed


CONSTANT_CHECK = """

@check("0.1")
def constant(rng):
    return 1.0
"""

LATER_STAGE_CHECK = """

@check("0.1")
def needs_stage_1(rng):
    import module1

    return 1.0
"""


def _check7(tmp_path: Path, extra: str) -> None:
    """Check 7 alone (the test runs of checks 3-6 are covered above) on the toy course
    whose stage-0 checks end with ``extra``, released through stage 0."""
    fake = toy_course(tmp_path / "fake")
    with open(fake / "tests/module0/checks.py", "a", encoding="utf-8") as f:
        f.write(extra)
    report = write_handout(fake, tmp_path / "handout", through=0)
    shaped = tmp_path / "shaped"
    write_reference(fake, shaped, through=0)
    verify_grading(shaped, report.out_dir, report.tasks, report, _quiet)


def test_release_refuses_a_graded_check_that_passes_on_the_handout(tmp_path: Path) -> None:
    with pytest.raises(ReleaseError, match=r"graded checks pass on the handout.*0\.1:constant"):
        _check7(tmp_path, CONSTANT_CHECK)


def test_release_checks_the_grade_in_the_released_shape(tmp_path: Path) -> None:
    # The check passes next to stage 1 (in the repository) but fails in the tree a
    # stage-0 release ships, where module1 does not exist.
    with pytest.raises(ReleaseError, match="released shape"):
        _check7(tmp_path, LATER_STAGE_CHECK)


def test_release_refuses_a_graded_test_that_fails_on_the_reference(tmp_path: Path) -> None:
    fake = fake_stage_0(tmp_path, "1 + 1 == 3")
    with pytest.raises(ReleaseError) as excinfo:
        release(tmp_path / "handout", through=0, root=fake, log=_quiet)
    message = str(excinfo.value)
    assert "fail on the reference" in message
    assert "task 0.1, 0.2: tests/module0/test_fake.py::test_trivial" in message
    assert message.count("::") == 1, message


def test_check_reached_names_a_listed_function_no_test_calls() -> None:
    task = next(t for t in TASKS if t.id == "0.3")
    ids = {"tests/a.py::t1": ["0.3"], "tests/a.py::t2": ["0.3"]}
    run = RunResult()
    run.tests["tests/a.py::t1"] = TestResult(
        "tests/a.py::t1", "passed", reached=list(task.functions[:2])
    )
    run.tests["tests/a.py::t2"] = TestResult(
        "tests/a.py::t2", "passed", reached=list(task.functions[2:])
    )
    check_reached([task], ids, run)
    run.tests["tests/a.py::t2"].reached = list(task.functions[2:-1])
    with pytest.raises(ReleaseError, match=rf"task 0\.3 .*: {re.escape(task.functions[-1])};"):
        check_reached([task], ids, run)


# -- regions: finding and stubbing ------------------------------------------------------


def test_regions_know_their_task_and_enclosing_function() -> None:
    path = "module0/scalar.py"
    regions = find_regions((ROOT / path).read_text(encoding="utf-8"), path)
    found = {(r.task_id, r.function) for r in regions}
    assert ("0.4", "Mul.forward") in found
    assert ("0.5", "Mul.backward") in found
    region = next(r for r in regions if r.function == "Mul.forward")
    assert region.path == path and not region.nowrite
    assert region.end > region.begin and region.indent == " " * 8


def sample(newline: str = "\n") -> str:
    lines = [
        '"""A module."""',
        "",
        "",
        "class Box:",
        "    def size(self) -> int:",
        '        """Docs stay."""',
        f"        {BEGIN} 3.1",
        "        return 1",
        f"        {END}",
        "",
        "    @staticmethod",
        "    def kernel(out: list[float]) -> None:",
        f"        {BEGIN} 3.2 nowrite",
        "        out[0] = 1.0",
        f"        {END}",
        "",
        "",
        "def top() -> int:  # trailing",
        f"    {BEGIN} 3.1",
        "    x = 2",
        "    return x",
        f"    {END}",
        "",
    ]
    return newline.join(lines)


def test_find_regions_of_a_sample() -> None:
    text = sample()
    regions = find_regions(text, "module3/box.py")
    assert [(r.task_id, r.function, r.begin, r.end, r.nowrite) for r in regions] == [
        ("3.1", "Box.size", 7, 9, False),
        ("3.2", "Box.kernel", 13, 15, True),
        ("3.1", "top", 19, 22, False),
    ]
    lines = text.splitlines(keepends=True)
    assert regions[2].body(lines) == ["    x = 2\n", "    return x\n"]


def test_stub_text_replaces_each_region_by_a_stub_between_two_task_lines() -> None:
    stubbed = stub_text(sample(), "module3/box.py")
    assert stubbed.splitlines()[6:10] == [
        "        # ---- Task 3.1: your code starts here ----",
        '        raise NotImplementedError("Task 3.1: implement Box.size in module3/box.py '
        '(see module3/README.md)")',
        "        # ---- Task 3.1: your code ends here ----",
        "",
    ]
    assert (
        "        pass  # Task 3.2: implement Box.kernel in module3/box.py "
        "(see module3/README.md)\n" in stubbed
    )
    assert '    raise NotImplementedError("Task 3.1: implement top in module3/box.py' in stubbed
    assert WORD not in stubbed
    assert "return 1" not in stubbed and "out[0] = 1.0" not in stubbed


def test_stub_text_keeps_every_byte_outside_the_regions() -> None:
    text = sample()
    regions = find_regions(text, "module3/box.py")
    lines = text.splitlines(keepends=True)
    outside = [
        line for number, line in enumerate(lines, start=1)
        if not any(r.begin <= number <= r.end for r in regions)
    ]  # fmt: skip
    stubbed = stub_text(text, "module3/box.py").splitlines(keepends=True)
    stub_lines = {line.rstrip("\n") for r in regions for line in stub_block(r)}
    assert [line for line in stubbed if line.rstrip("\n") not in stub_lines] == outside
    assert len(stubbed) == len(outside) + 3 * len(regions)
    assert all(stub_line(r) in stub_block(r) for r in regions)


def test_stub_text_keeps_crlf_line_endings() -> None:
    text = sample("\r\n")
    stubbed = stub_text(text, "module3/box.py")
    assert "\n" not in stubbed.replace("\r\n", "")
    assert stubbed == stub_text(sample(), "module3/box.py").replace("\n", "\r\n")
    regions = find_regions(text, "module3/box.py")
    assert [r.function for r in regions] == ["Box.size", "Box.kernel", "top"]


def test_stub_text_can_stub_only_some_tasks() -> None:
    stubbed = stub_text(sample(), "module3/box.py", task_ids={"3.2"})
    assert "return 1" in stubbed and "return x" in stubbed
    assert "out[0] = 1.0" not in stubbed
    assert stub_text(sample(), "module3/box.py", task_ids=set()) == sample()


def omit_sample() -> str:
    return "\n".join([
        '"""A module."""',
        "",
        "",
        f"{BEGIN} 3.1 omit",
        "def helper(x: int) -> int:",
        "    return x + 1",
        END,
        "",
        "",
        "def top(x: int) -> int:",
        f"    {BEGIN} 3.1",
        "    return helper(x)",
        f"    {END}",
        "",
    ])  # fmt: skip


def test_an_omit_region_leaves_nothing_and_keeps_the_spacing() -> None:
    stubbed = stub_text(omit_sample(), "module3/box.py")
    assert "helper" not in stubbed
    assert stubbed.startswith('"""A module."""\n\n\ndef top(x: int) -> int:\n')
    assert 'raise NotImplementedError("Task 3.1: implement top in' in stubbed
    assert set(omitted_names(omit_sample(), "module3/box.py")) == {"helper"}
    assert omitted_names(omit_sample(), "module3/box.py", {"3.2"}) == {}


def test_fill_text_puts_code_between_the_task_lines() -> None:
    stubbed = stub_text(sample(), "module3/box.py")
    filled, used = fill_text(stubbed, {("3.1", "top"): "y = 3\nreturn y\n"})
    assert used == {("3.1", "top")}
    assert "    # ---- Task 3.1: your code starts here ----\n    y = 3\n    return y\n" in filled
    assert "implement Box.size" in filled  # the others stay stubs
    bodies = reference_bodies(sample(), "module3/box.py")
    assert bodies[("3.1", "top")] == "x = 2\nreturn x\n"
    filled, used = fill_text(stubbed, bodies)
    assert len(used) == 3 and "NotImplementedError" not in filled and "pass  #" not in filled


def test_release_refuses_given_code_that_uses_an_omitted_helper(tmp_path: Path) -> None:
    fake = toy_course(tmp_path / "fake")
    path = fake / "module0/operators.py"
    path.write_text(
        path.read_text(encoding="utf-8")
        + f"\n\n{BEGIN} 0.1 omit\ndef secret_helper() -> int:\n    return 1\n{END}\n\n\n"
        "def given() -> int:\n    return secret_helper()\n",
        encoding="utf-8",
    )
    report = write_handout(fake, tmp_path / "handout", through=0)
    with pytest.raises(ReleaseError, match=r"operators\.py:\d+ uses secret_helper, which"):
        _check_no_solution_left(fake, report)


def test_text_without_regions_is_unchanged() -> None:
    text = "def f() -> int:\n    return 1\n"
    assert find_regions(text, "x.py") == []
    assert stub_text(text, "x.py") == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{BEGIN} 1.1\n{BEGIN} 1.2\n{END}\n", r"x\.py:2: region opened inside"),
        (f"{END}\n", r"x\.py:1: END marker without a BEGIN"),
        (f"def f():\n    {BEGIN} 1.1\n    pass\n", r"x\.py:2: region of task 1\.1 is never closed"),
        (f"#  BEGIN {WORD} 1.1\n{END}\n", r"x\.py:1: malformed solution marker"),
    ],
    ids=["nested", "stray-end", "unclosed", "misspelt"],
)
def test_find_regions_rejects_malformed_markers(text: str, message: str) -> None:
    with pytest.raises(RegionError, match=message):
        find_regions(text, "x.py")


def test_the_shaped_reference_keeps_the_fast_paths_its_solutions_use(tmp_path: Path) -> None:
    """The reference's fast paths are left out of a handout but not out of the reference
    in the released shape, whose solutions import them. Bug caught: the release copied
    neither, so the shaped reference's ``module2/fast_ops.py`` did not import and the
    verification failed with "pytest ended with exit status 2"."""
    handout, reference = tmp_path / "handout", tmp_path / "reference"
    write_handout(ROOT, handout)
    write_reference(ROOT, reference)
    for rel in REFERENCE_CODE:
        assert (reference / rel).is_file() and not (handout / rel).exists(), rel
    assert not (reference / "tests" / "autograder").exists()
    proc = subprocess.run(
        [sys.executable, "-S", "-c", "import module2.fast_ops, module4.fast_conv"],
        cwd=reference, capture_output=True, text=True, timeout=600,
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "NUMBA_ENABLE_CUDASIM": "1",
             "PYTHONPATH": os.pathsep.join([str(reference), *site.getsitepackages()])},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_runs_of_one_suite_split_over_processes_merge_into_one_result() -> None:
    """The release runs the reference's tests in two processes (stages 0-2, 3-4)."""
    from autograder.runner import merge_runs

    first = RunResult(finished=True, exitstatus=0, returncode=0,
                      collected=[{"nodeid": "a", "tasks": ["0.1"]}],
                      tests={"a": TestResult("a", "passed", reached=["m:f"])})  # fmt: skip
    second = RunResult(finished=True, exitstatus=1, returncode=1,
                       collected=[{"nodeid": "b", "tasks": ["3.1"]}],
                       tests={"b": TestResult("b", "failed")})  # fmt: skip
    merged = merge_runs([first, second])
    assert [c["nodeid"] for c in merged.collected or []] == ["a", "b"]
    assert {n: t.outcome for n, t in merged.tests.items()} == {"a": "passed", "b": "failed"}
    assert merged.tests["a"].reached == ["m:f"] and merged.problem() == ""
    broken = RunResult(finished=False, returncode=-9)
    merged = merge_runs([first, broken])
    assert "signal 9" in merged.problem() and merged.collected is None
