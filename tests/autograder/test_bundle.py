"""``minitorch gradescope-bundle``: the zip's layout, what it ships, and its scripts.

The bundles are built from the toy course (``tests/autograder/toy.py``): a stage-0
bundle once for the module (its release verified) and graded once end to end, the way
Gradescope runs it, with the scripts' locations pointed at a temporary folder. What the
bundle installs is checked against this repository's own requirements.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.bundle import build_gradescope_bundle, requirements
from autograder.paths import ROOT
from autograder.regions import stub_text
from tests.autograder.isolation import TIERS, in_tier, need
from tests.autograder.snoop import snoop, snooped
from tests.autograder.toy import toy_course

WORD = "SOLUTION"  # spelled once, so this file holds no region marker itself
MARKER = f"# BEGIN {WORD}"
MARKER_LINE = re.compile(rf"^[ \t]*#[ \t]*(BEGIN|END)[ \t]+{WORD}", re.MULTILINE)


def _quiet(_: str) -> None:
    pass


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy course, with a tooling test of its own (reference-only: never shipped)."""
    tree = toy_course(tmp_path_factory.mktemp("toy") / "course")
    (tree / "tests/autograder").mkdir()
    (tree / "tests/autograder/test_tooling.py").write_text("def test_x():\n    pass\n")
    return tree


@pytest.fixture(scope="module")
def stage0_zip(tmp_path_factory: pytest.TempPathFactory, toy: Path) -> Path:
    """A verified stage-0 bundle of the toy course."""
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert build_gradescope_bundle(out, stage=0, root=toy, log=_quiet) == out
    return out


@pytest.fixture(scope="module")
def prerequisites_zip(tmp_path_factory: pytest.TempPathFactory, toy: Path) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "reference.zip"
    build_gradescope_bundle(
        out, stage=1, reference_prerequisites=True, root=toy, log=_quiet, verify=False
    )
    return out


def _read(zip_path: Path, name: str) -> str:
    with zipfile.ZipFile(zip_path) as zf:
        return zf.read(name).decode("utf-8")


def test_the_zip_is_its_owners_alone_and_recorded(stage0_zip: Path) -> None:
    # Before: written 0644, so a tier-2 run read the reference out of it (80/80).
    from autograder.private import recorded_copies

    assert stage0_zip.stat().st_mode & 0o777 == 0o600
    assert stage0_zip.resolve() in recorded_copies()  # tier 2 checks it is still private


def test_scripts_are_at_the_top_and_executable(stage0_zip: Path) -> None:
    with zipfile.ZipFile(stage0_zip) as zf:
        assert zf.testzip() is None
        infos = {info.filename: info for info in zf.infolist()}
    assert {"setup.sh", "run_autograder"} <= set(infos)
    tops = {name.split("/")[0] for name in infos}
    assert tops == {"setup.sh", "run_autograder", "grader"}
    for name in ("setup.sh", "run_autograder"):
        mode = infos[name].external_attr >> 16
        assert stat.S_ISREG(mode) and mode & 0o111 == 0o111, (name, oct(mode))
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in infos)


def test_the_bundle_ships_the_reference_in_the_released_shape(stage0_zip: Path, toy: Path) -> None:
    with zipfile.ZipFile(stage0_zip) as zf:
        names = set(zf.namelist())
    operators = _read(stage0_zip, "grader/module0/operators.py")
    assert operators == (toy / "module0/operators.py").read_text(encoding="utf-8")
    assert MARKER in operators  # grading compares with the reference's answers
    assert "grader/tests/module0/checks.py" in names
    assert "grader/autograder/cli.py" in names and "grader/pyproject.toml" in names
    assert not any(n.startswith(("grader/module1/", "grader/tests/module1/")) for n in names)
    assert not any(n.startswith("grader/tests/autograder/") for n in names)


def test_setup_installs_the_sandbox_and_locks_the_grader_away(stage0_zip: Path) -> None:
    setup = _read(stage0_zip, "setup.sh")
    assert "apt_install bubblewrap" in setup
    assert 'chmod -R go-rwx "$AUTOGRADER/source/grader"' in setup
    assert '\n"$VENV/bin/python" -m autograder.sandbox\n' in setup
    assert "-m autograder.checks 0.1 0.2 --seed 0" in setup  # warm cache


def test_reference_prerequisites_are_passed_to_the_grader(prerequisites_zip: Path) -> None:
    run = _read(prerequisites_zip, "run_autograder")
    assert "--stage 1 --reference-prerequisites" in run
    with zipfile.ZipFile(prerequisites_zip) as zf:
        assert "grader/module1/vectors.py" in zf.namelist()


def test_scripts_grade_from_the_grader_tree(stage0_zip: Path, toy: Path) -> None:
    run = _read(stage0_zip, "run_autograder")
    command = 'cd "$GRADER" && "$PYTHON" -m autograder.cli grade "$SUBMISSION" --out "$RESULTS"'
    assert command + " --stage 0" in run
    setup = _read(stage0_zip, "setup.sh")
    for requirement in requirements(toy):
        assert requirement in setup
    assert "pip install" in setup
    assert not re.search(r"pip install[^\n]*\s-e\s", setup)  # the tooling runs from the tree


def test_requirements_are_the_runtime_deps_and_the_test_tools() -> None:
    names = {r.split(">")[0].split("=")[0].split("<")[0] for r in requirements(ROOT)}
    assert {"numpy", "numba", "matplotlib", "rich"} <= names
    assert {"pytest", "hypothesis", "pytest-timeout"} <= names
    assert {"mpi4py", "mpich"} <= names  # stage 6's checks start MPI ranks
    assert not {"ruff", "mypy"} & names


def test_bad_options_are_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a stage"):
        build_gradescope_bundle(tmp_path / "a.zip", reference_prerequisites=True)
    with pytest.raises(ValueError, match="no task in stage 9"):
        build_gradescope_bundle(tmp_path / "a.zip", stage=9)
    assert list(tmp_path.iterdir()) == []


def _gradescope(tmp_path: Path, zip_path: Path, venv: Path) -> tuple[Path, dict[str, str]]:
    """An /autograder folder in ``tmp_path`` with the zip unpacked at ``source``."""
    base = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(base / "source")
    run = base / "source" / "run_autograder"
    run.chmod(0o755)
    (base / "submission").mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "MINITORCH_AUTOGRADER_DIR": str(base),
        "MINITORCH_VENV": str(venv),
        "HYPOTHESIS_PROFILE": "verify",
    }
    return base, env


def test_run_autograder_writes_a_zero_when_the_grader_cannot_start(
    stage0_zip: Path, tmp_path: Path
) -> None:
    base, env = _gradescope(tmp_path, stage0_zip, tmp_path / "no-venv")
    proc = subprocess.run([str(base / "source/run_autograder")], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((base / "results/results.json").read_text(encoding="utf-8"))
    assert results["score"] == 0 and "autograder itself failed" in results["output"]


def test_run_autograder_grades_a_submission_end_to_end(
    stage0_zip: Path, toy: Path, tmp_path: Path
) -> None:
    need()  # the grader's isolation (tests/autograder/isolation.py)
    # A stand-in for setup.sh's virtual environment: this interpreter.
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    base, env = _gradescope(tmp_path, stage0_zip, venv)
    # Uploaded as a zip with one top folder; only task 0.1 is done.
    solved = base / "submission" / "my-handout" / "module0"
    solved.mkdir(parents=True)
    (solved / "operators.py").write_bytes((toy / "module0/operators.py").read_bytes())
    proc = subprocess.run([str(base / "source/run_autograder")], env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "grading the submission's folder submission/my-handout" in proc.stdout
    results = json.loads((base / "results/results.json").read_text(encoding="utf-8"))
    scores = {t["number"]: (t["score"], t["max_score"]) for t in results["tests"]}
    assert scores == {"0.1": (10.0, 10.0), "0.2": (0.0, 10.0)}, scores
    assert results["score"] == 10.0
    assert {p.name for p in (base / "results").iterdir()} >= {
        "results.json",
        "classroom.json",
        "junit.xml",
        "summary.md",
    }


@pytest.mark.parametrize("tier", TIERS)
def test_run_autograder_shows_the_submission_no_solution(
    stage0_zip: Path, toy: Path, tmp_path: Path, tier: str
) -> None:
    # The bundle's grader/ is the reference: the run, through Gradescope's own script,
    # can read none of it, in either tier (tier 2 is what Docker's default profile gives).
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    with in_tier(tier):
        base, env = _gradescope(tmp_path, stage0_zip, venv)
        grader = base / "source" / "grader"
        target = base / "submission" / "module0" / "operators.py"
        target.parent.mkdir(parents=True)
        stub = stub_text((toy / "module0/operators.py").read_text(encoding="utf-8"), "ops")
        target.write_text(stub + snoop([grader, ROOT, toy, tmp_path]), encoding="utf-8")
        proc = subprocess.run([str(base / "source/run_autograder")], env=env,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((base / "results/results.json").read_text(encoding="utf-8"))
    found = snooped("\n".join(t["output"] for t in results["tests"]))
    assert found["holding"] == "0" and found["first"] == "-", results
    assert int(found["visible"]) > 0, results
    assert tier in results["isolation"] or f"tier {TIERS.index(tier) + 1}" in results["isolation"]
