"""What a student meets first: the handout's README, stub tests that end at once, and
scripts that say which task is missing instead of printing a traceback.

Every handout here is written with ``write_handout`` through stage 0 (a fraction of a
second); scripts run in a child ``python -S`` with the handout first on the path, so
the reference's editable install cannot stand in for the handout's code.
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.regions import fill_text, reference_bodies
from autograder.registry import TASKS, tasks_for_stage
from autograder.release import write_handout
from project.guard import EXIT_NOT_DONE

ROOT = Path(__file__).resolve().parents[2]


def run_in(tree: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -S ARGS`` in ``tree``: the tree's own packages, no .pth files."""
    path = [str(tree), *site.getsitepackages(), site.getusersitepackages()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "MPLBACKEND": "Agg",
           "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-S", *args], cwd=tree, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


@pytest.fixture(scope="module")
def stage0(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("student") / "handout"
    write_handout(ROOT, out, through=0)
    return out


def fill_from_reference(tree: Path, task_ids: set[str]) -> None:
    """Write the reference's solutions of ``task_ids`` between the handout's task lines."""
    for rel in sorted({f for t in TASKS if t.id in task_ids for f in t.files}):
        bodies = reference_bodies((ROOT / rel).read_text(encoding="utf-8"), rel, task_ids)
        text, used = fill_text((tree / rel).read_text(encoding="utf-8"), bodies)
        assert used == set(bodies), rel
        (tree / rel).write_text(text, encoding="utf-8")


# -- the handout's README ----------------------------------------------------------------


def test_the_handout_readme_is_for_students_and_names_only_released_stages(
    stage0: Path, tmp_path: Path
) -> None:
    readme = (stage0 / "README.md").read_text(encoding="utf-8")
    assert readme != (ROOT / "README.md").read_text(encoding="utf-8")
    assert "reference solution" not in readme.lower()
    assert 'pip install -q -e ".[dev]"' in readme and ".venv/bin/minitorch status" in readme
    assert "Read [`module0/README.md`](module0/README.md), then run `minitorch test 0.1`" in (
        readme.replace("\n", " ")
    )
    assert "module1" not in readme and "train_digits" not in readme
    assert "task 0.1 is not done yet: minitorch test 0.1" in readme
    full = tmp_path / "full"
    write_handout(ROOT, full)
    text = (full / "README.md").read_text(encoding="utf-8")
    for stage in sorted({t.stage for t in TASKS}):  # every stage of the registry
        assert f"[`module{stage}/README.md`](module{stage}/README.md)" in text, stage
    for handout in (stage0, full):  # no dead links
        for target in re.findall(r"\]\(([^)#]+)\)", (handout / "README.md").read_text()):
            assert (handout / target).exists(), (handout, target)


# -- stub tests end at once --------------------------------------------------------------

STUB_TEST = """
from hypothesis import given, settings, strategies as st

CALLS = []


def stub(x):
    raise NotImplementedError("Task 0.1: implement mul in module0/operators.py (see x)")


@settings(max_examples=200, database=None)
@given(st.floats(allow_nan=False), st.lists(st.integers()))
def test_stub(x, xs):
    CALLS.append(x)
    stub(x)


def test_calls():
    assert CALLS == [CALLS[0]], len(CALLS)
"""


def test_a_hypothesis_test_ends_at_the_first_stub_it_reaches(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "from autograder.pytest_plugin import pytest_runtest_call  # noqa: F401\n"
    )
    (tmp_path / "test_stub.py").write_text(STUB_TEST)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = proc.stdout
    assert "1 failed, 1 passed" in out, out  # one example, no shrinking
    assert "NotImplementedError: Task 0.1: implement mul" in out


# -- scripts on unfinished tasks ---------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("project", "task 0.1 is not done yet: minitorch test 0.1"),
        ("project.train", "task 0.1 is not done yet: minitorch test 0.1"),
        ("project.train_digits", "stage 1 (module1) is not in this handout"),
        ("project.bench_scalar", "task 0.1 is not done yet: minitorch test 0.1"),
    ],
)
def test_a_script_names_the_missing_task_in_one_line(
    stage0: Path, module: str, message: str
) -> None:
    proc = run_in(stage0, "-m", module)
    assert proc.returncode == EXIT_NOT_DONE, proc.stdout + proc.stderr
    assert proc.stderr.strip().startswith(message), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_only_the_option_that_needs_an_optional_task_waits_for_it(tmp_path: Path) -> None:
    """Stages 0 to 4 done but the optional 4.6 (batch normalization): the scripts that
    need stage 4 do not wait for it, and the digits script's ``--batchnorm`` names it
    before any work."""
    tree = tmp_path / "tree"
    write_handout(ROOT, tree, through=4)
    done = {t.id for t in TASKS if t.stage in (0, 1, 2, 4) and t.id != "4.6"}
    fill_from_reference(tree, done)
    proc = run_in(tree, "-m", "project.train_digits", "--batchnorm")
    assert proc.returncode == EXIT_NOT_DONE, proc.stdout + proc.stderr
    assert proc.stderr.strip() == "task 4.6 is not done yet: minitorch test 4.6"
    code = "from project.guard import first_unfinished; print(first_unfinished((0, 1, 2, 4)))"
    proc = run_in(tree, "-c", code)
    assert proc.stdout.strip() == "None", proc.stdout + proc.stderr


def test_a_stub_reached_at_run_time_gives_the_same_line(stage0: Path) -> None:
    code = "import project, module0.operators as o; o.mul(1.0, 2.0)"
    proc = run_in(stage0, "-c", code)
    assert proc.returncode == EXIT_NOT_DONE, proc.stderr
    assert proc.stderr.strip() == "task 0.1 is not done yet: minitorch test 0.1"


WITHOUT_DEV = """
import sys
for name in ("pytest", "_pytest", "hypothesis"):  # the dev extras: absent after `pip install .`
    sys.modules[name] = None
"""
IMPORT_ALL = """
import importlib, pkgutil, project
for info in pkgutil.iter_modules(project.__path__):
    importlib.import_module("project." + info.name)
"""
MAIN_JOB = """
import runpy
sys.argv = ["project", *sys.argv[1:]]
runpy.run_module("project", run_name="__main__", alter_sys=True)
"""


def test_the_scripts_need_only_the_runtime_dependencies(stage0: Path) -> None:
    """Quickstart command 1 installs without the dev extras (no pytest, no Hypothesis):
    every module of ``project`` imports and the main job starts in the reference, and
    a handout's main job still names the first task to do."""
    proc = run_in(ROOT, "-c", WITHOUT_DEV + IMPORT_ALL + MAIN_JOB, "--help")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "usage:" in proc.stdout
    proc = run_in(stage0, "-c", WITHOUT_DEV + MAIN_JOB)
    assert proc.returncode == EXIT_NOT_DONE, proc.stdout + proc.stderr
    assert proc.stderr.strip() == "task 0.1 is not done yet: minitorch test 0.1"


def test_the_main_job_trains_the_latest_stage_that_is_done(stage0: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    write_handout(ROOT, tree, through=0)
    fill_from_reference(tree, {t.id for t in tasks_for_stage(0)})
    proc = run_in(tree, "-m", "project", "--epochs", "5", "--no-figure", "--log-every", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Training the xor classifier with the scalar engine (stage 0)" in proc.stdout
    assert "scalar 2-10-10-1 on 'xor'" in proc.stdout
    # One task of stage 0 undone again: the main job says which, nothing trains.
    fill = (tree / "module0/optim.py").read_text(encoding="utf-8")
    (tree / "module0/optim.py").write_text(
        (stage0 / "module0/optim.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    proc = run_in(tree, "-m", "project")
    assert proc.returncode == EXIT_NOT_DONE
    assert proc.stderr.strip() == "task 0.6 is not done yet: minitorch test 0.6"
    assert fill != (tree / "module0/optim.py").read_text(encoding="utf-8")
