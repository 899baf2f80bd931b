"""``minitorch doctor``: one table row per check, and exit 1 on any FAIL."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from autograder import doctor


def _console() -> Console:
    return Console(record=True, width=240, color_system=None)


def test_doctor_prints_a_row_per_check_and_passes_here() -> None:
    console = _console()
    code = doctor.run_doctor(console)
    text = console.export_text()
    for name in ("Python", "numpy", "numba", "CUDA", "matplotlib", "pytest", "repository"):
        assert any(line.strip("│ ").startswith(name) for line in text.splitlines()), name
    assert "FAIL" not in text
    assert code == 0


def test_a_failing_check_makes_the_doctor_return_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "MIN_PYTHON", (99, 0))
    console = _console()
    code = doctor.run_doctor(console, checks=[doctor.check_python, doctor.check_rich])
    text = console.export_text()
    assert code == 1
    assert "FAIL" in text and "Python 99.0 or newer" in text


def test_a_check_that_raises_is_a_fail_row() -> None:
    def check_broken() -> doctor.Check:
        raise OSError("disk on fire")

    console = _console()
    assert doctor.run_doctor(console, checks=[check_broken]) == 1
    assert "disk on fire" in console.export_text()


def test_cuda_simulator_is_reported_without_probing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    monkeypatch.setattr(doctor, "_child", pytest.fail)  # must not start a child process
    row = doctor.check_cuda()
    assert (row.status, row.detail.split(";")[0]) == ("OK", "simulator (NUMBA_ENABLE_CUDASIM=1)")


def test_no_gpu_is_a_warning_that_names_the_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setattr(doctor, "_child", lambda *a, **k: {"available": False, "name": ""})
    row = doctor.check_cuda()
    assert row.status == "WARN"
    assert "NUMBA_ENABLE_CUDASIM=1" in row.fix and ".[cuda]" in row.fix


def test_a_hanging_child_is_cut_off() -> None:
    with pytest.raises(RuntimeError, match="timed out"):
        doctor._child("import time; time.sleep(30)", timeout=0.5)


def test_missing_dev_tools_are_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "_version", lambda dist: None)
    row = doctor.check_hypothesis()
    assert row.status == "WARN" and row.fix == 'pip install -e ".[dev]"'


def test_a_tree_without_stage_packages_fails(tmp_path: Path) -> None:
    assert doctor.check_layout(tmp_path).status == "FAIL"
    (tmp_path / "module0").mkdir()
    assert doctor.check_layout(tmp_path).status == "WARN"  # no tests/
    (tmp_path / "tests").mkdir()
    row = doctor.check_layout(tmp_path)
    assert row.status == "OK" and row.detail.startswith("module0 (")


def test_the_sandbox_row_names_the_tier_or_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder import sandbox

    monkeypatch.setattr(sandbox, "bubblewrap_problem", lambda: "")
    row = doctor.check_sandbox()
    assert (row.status, row.detail.split(":")[0]) == ("OK", "tier 1")
    monkeypatch.setattr(sandbox, "bubblewrap_problem", lambda: "bwrap is not installed")
    monkeypatch.setattr(sandbox, "user_tier_problem", lambda trees, uid=None: "")
    row = doctor.check_sandbox()
    assert row.status == "OK" and row.detail.startswith("tier 2: a dedicated unprivileged user")
    assert "bwrap is not installed" in row.detail
    monkeypatch.setattr(sandbox, "user_tier_problem", lambda trees, uid=None: "it needs root")
    row = doctor.check_sandbox()
    assert row.status == "WARN" and "it needs root" in row.detail
    assert "apt-get install bubblewrap" in row.fix


def test_doctor_for_an_instructor_fails_without_a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """A student can work without the grader's sandbox (WARN); an instructor who is about
    to grade cannot, so ``doctor --instructor`` FAILs and exits 1."""
    from autograder import sandbox

    monkeypatch.setattr(sandbox, "bubblewrap_problem", lambda: "bwrap is not installed")
    monkeypatch.setattr(sandbox, "user_tier_problem", lambda trees, uid=None: "it needs root")
    assert doctor.check_sandbox().status == "WARN"
    assert doctor.check_sandbox(instructor=True).status == "FAIL"
    quiet = Console(file=io.StringIO(), width=200)
    only = [doctor.check_sandbox]
    assert doctor.run_doctor(quiet, only) == 0
    assert doctor.run_doctor(quiet, instructor=True) == 1
    rows = doctor.run_checks(doctor.instructor_checks())
    assert [r.name for r in rows if r.status == "FAIL"] == ["sandbox"]


def test_mpi_is_reported_with_its_library_and_launcher() -> None:
    from tests.module6.mpi import need_mpi

    need_mpi()
    row = doctor.check_mpi()
    assert row.status == "OK" and "mpi4py" in row.detail and "mpiexec" in row.detail, row


def test_no_mpi_is_a_warning_that_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "_version", lambda dist: None)
    row = doctor.check_mpi()
    assert row.status == "WARN" and row.fix == 'pip install -e ".[dist]"'
    assert "skip" in row.detail
