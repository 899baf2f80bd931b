"""``minitorch doctor``: check the installation and say what to fix.

Each check is a small function returning a :class:`Check` row (OK, WARN or FAIL, a
detail and how to fix it). Checks that import something which can hang or crash the
interpreter on a broken install (numba's compiler, the CUDA driver, matplotlib's font
cache) run in a child process with a time limit, so the doctor itself always finishes.
The command exits 1 when any check FAILs, else 0.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from autograder.paths import ROOT, available_tasks

OK, WARN, FAIL = "OK", "WARN", "FAIL"
_STYLE = {OK: "green", WARN: "yellow", FAIL: "bold red"}
_INSTALL = "pip install -e ."
_INSTALL_DEV = 'pip install -e ".[dev]"'
MIN_PYTHON = (3, 11)
_CUDA_TIMEOUT = 20.0
_CHILD_TIMEOUT = 30.0


@dataclass(frozen=True)
class Check:
    """One row of the doctor's table."""

    name: str
    status: str
    detail: str
    fix: str = ""


def _version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _child(code: str, timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; return the JSON object it prints last.

    Raises RuntimeError with a one-line reason when the child times out, crashes or
    prints no JSON.
    """
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
            env=env, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"timed out after {timeout:g} s") from exc
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines:
        try:
            result = json.loads(lines[-1])
        except ValueError:
            pass
        else:
            if isinstance(result, dict):
                return result
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
    raise RuntimeError(f"child process failed ({how}): {tail[:300]}")


# -- the checks -------------------------------------------------------------------------


def check_python() -> Check:
    """Python 3.11 (``MIN_PYTHON``) or newer."""
    version = ".".join(map(str, sys.version_info[:3]))
    detail = f"{version} at {sys.executable}"
    if sys.version_info < MIN_PYTHON:
        wanted = ".".join(map(str, MIN_PYTHON))
        return Check("Python", FAIL, detail, f"install Python {wanted} or newer, recreate .venv")
    return Check("Python", OK, detail)


def check_numpy() -> Check:
    """numpy imports."""
    try:
        import numpy
    except Exception as exc:
        return Check("numpy", FAIL, f"cannot import: {exc}", _INSTALL)
    return Check("numpy", OK, numpy.__version__)


_NUMBA_PROBE = """
import json, numba
from numba import njit

@njit(cache=False)
def _probe(x):
    return x * 2 + 1

assert _probe(20) == 41
layers = []
for name, module in (("tbb", "tbbpool"), ("omp", "omppool"), ("workqueue", "workqueue")):
    try:
        __import__("numba.np.ufunc." + module)
        layers.append(name)
    except Exception:
        pass
print(json.dumps({"version": numba.__version__, "layers": layers,
                  "requested": str(numba.config.THREADING_LAYER)}))
"""


def check_numba() -> Check:
    """numba imports, compiles and runs a trivial ``njit`` function (in a child)."""
    version = _version("numba")
    if version is None:
        return Check("numba", FAIL, "not installed", _INSTALL)
    try:
        info = _child(_NUMBA_PROBE, _CHILD_TIMEOUT)
    except RuntimeError as exc:
        return Check(
            "numba", FAIL, f"{version}: an njit function does not compile and run: {exc}",
            "reinstall numba and llvmlite: pip install --force-reinstall numba",
        )  # fmt: skip
    layers = ", ".join(info["layers"]) or "none"
    detail = (
        f"{info['version']}; njit compiles and runs; threading layers available: {layers} "
        f"(requested: {info['requested']})"
    )
    return Check("numba", OK, detail)


_CUDA_PROBE = """
import json
from numba import cuda
found = bool(cuda.is_available())
name = ""
if found:
    name = cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else str(name)
print(json.dumps({"available": found, "name": name}))
"""


def check_cuda() -> Check:
    """The route stage 3 takes: a GPU, or Numba's CUDA simulator."""
    extra = _version("numba-cuda")
    installed = f"numba-cuda {extra} installed" if extra else "numba-cuda not installed"
    no_gpu_fix = (
        "nothing to do: stage 3 tests use the CUDA simulator automatically "
        "(set NUMBA_ENABLE_CUDASIM=1 to use it yourself); for a GPU install the extra: "
        "pip install -e '.[cuda]'"
    )
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return Check("CUDA", OK, f"simulator (NUMBA_ENABLE_CUDASIM=1); {installed}")
    if _version("numba") is None:
        return Check("CUDA", WARN, f"numba is not installed; {installed}", _INSTALL)
    try:
        info = _child(_CUDA_PROBE, _CUDA_TIMEOUT)
    except RuntimeError as exc:
        return Check("CUDA", WARN, f"no GPU (checking for one failed: {exc}); {installed}",
                     no_gpu_fix)  # fmt: skip
    if info.get("available"):
        fix = "" if extra else "for the maintained CUDA target: pip install -e '.[cuda]'"
        return Check("CUDA", OK, f"GPU: {info.get('name') or 'unknown'}; {installed}", fix)
    return Check("CUDA", WARN, f"no GPU; {installed}", no_gpu_fix)


_MATPLOTLIB_PROBE = """
import json, os, sys, tempfile
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "probe.png")
    fig = plt.figure(figsize=(1, 1), dpi=20)
    fig.gca().plot([0, 1], [0, 1])
    fig.savefig(path)
    with open(path, "rb") as f:
        ok = f.read(8) == b"\\x89PNG\\r\\n\\x1a\\n"
print(json.dumps({"version": matplotlib.__version__, "png": ok}))
"""


_MPI_PROBE = """
import json
from mpi4py import MPI
print(json.dumps({"library": " ".join(MPI.Get_library_version().splitlines()[0].split())}))
"""


def check_mpi() -> Check:
    """MPI for stage 6 (the dist extra): mpi4py loads an MPI library, and ``mpiexec`` is
    beside this Python or on the PATH. Optional: without it stage 6's MPI tests skip."""
    fix = 'pip install -e ".[dist]"'
    version = _version("mpi4py")
    if version is None:
        return Check("MPI", WARN, "mpi4py not installed (stage 6 trains on several "
                     "processes with it; its tests skip without it)", fix)  # fmt: skip
    launcher = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which(
        "mpiexec"
    )
    try:
        info = _child(_MPI_PROBE, _CHILD_TIMEOUT)
    except RuntimeError as exc:
        return Check("MPI", WARN, f"mpi4py {version} finds no MPI library: {exc}", fix)
    if launcher is None:
        return Check("MPI", WARN, f"mpi4py {version}, {info['library']}; no mpiexec", fix)
    return Check("MPI", OK, f"mpi4py {version}, {info['library']}; {launcher}")


def check_matplotlib() -> Check:
    """matplotlib imports and its Agg backend writes a PNG (in a child)."""
    version = _version("matplotlib")
    if version is None:
        return Check("matplotlib", FAIL, "not installed", _INSTALL)
    try:
        info = _child(_MATPLOTLIB_PROBE, _CHILD_TIMEOUT, env={**os.environ, "MPLBACKEND": "Agg"})
    except RuntimeError as exc:
        return Check("matplotlib", FAIL, f"{version}: cannot save a PNG: {exc}",
                     "pip install --force-reinstall matplotlib")  # fmt: skip
    if not info.get("png"):
        return Check("matplotlib", FAIL, f"{version}: the saved file is not a PNG",
                     "pip install --force-reinstall matplotlib")  # fmt: skip
    return Check("matplotlib", OK, f"{info['version']}; the Agg backend saves PNG files")


def check_rich() -> Check:
    """rich (the terminal library the tooling uses)."""
    version = _version("rich")
    if version is None:  # imported from somewhere without metadata
        return Check("rich", WARN, "imports, but has no installed metadata", _INSTALL)
    return Check("rich", OK, version)


def _dev_check(name: str, dist: str, module: str, why: str) -> Check:
    version = _version(dist)
    if version is None or importlib.util.find_spec(module) is None:
        return Check(name, WARN, f"not installed ({why})", _INSTALL_DEV)
    return Check(name, OK, version)


def check_pytest() -> Check:
    """pytest, from the dev extra."""
    return _dev_check("pytest", "pytest", "pytest", "needed to run the tests")


def check_hypothesis() -> Check:
    """Hypothesis, from the dev extra."""
    return _dev_check("hypothesis", "hypothesis", "hypothesis", "the tests use it")


def check_pytest_timeout() -> Check:
    """pytest-timeout, from the dev extra (``minitorch grade`` needs it)."""
    return _dev_check("pytest-timeout", "pytest-timeout", "pytest_timeout",
                      "minitorch grade needs it")  # fmt: skip


def check_pytest_xdist() -> Check:
    """pytest-xdist, from the dev extra (the README's test command, ``pytest -n auto``)."""
    return _dev_check("pytest-xdist", "pytest-xdist", "xdist",
                      "the whole suite's command, pytest -n auto, needs it")  # fmt: skip


def check_layout(root: Path = ROOT) -> Check:
    """The stage packages present in the tree the tooling was loaded from."""
    tasks = available_tasks(root)
    stages = sorted({t.stage for t in tasks})
    if not stages:
        return Check("repository", FAIL, f"no stage package (module0, ...) in {root}",
                     "run the tooling from the course repository: pip install -e .")  # fmt: skip
    packages = ", ".join(f"module{s}" for s in stages)
    detail = f"{packages} ({len(tasks)} tasks) in {root}"
    if not (root / "tests").is_dir():
        return Check("repository", WARN, detail + "; tests/ is missing",
                     "restore tests/ from the handout")  # fmt: skip
    return Check("repository", OK, detail)


def check_sandbox(root: Path = ROOT, instructor: bool = False) -> Check:
    """The isolation ``minitorch grade`` would use here (tier 1, tier 2, or none): only
    an instructor grading untrusted code needs one, so its absence is a warning, and a
    failure for ``minitorch doctor --instructor``."""
    from autograder import sandbox

    first = sandbox.bubblewrap_problem()
    if not first:
        return Check("sandbox", OK, sandbox.Isolation(sandbox.BUBBLEWRAP).label)
    second = sandbox.user_tier_problem([root])
    if not second:
        label = sandbox.Isolation(sandbox.USER, sandbox.free_uid(), f"bubblewrap: {first}")
        return Check("sandbox", OK, label.label)
    return Check(
        "sandbox", FAIL if instructor else WARN,
        f"none: minitorch grade refuses here. Tier 1: {first}. Tier 2: {second}",
        f"only to grade submissions: {sandbox.INSTALL_BWRAP} (see autograder/README.md)",
    )  # fmt: skip


CHECKS: tuple[Callable[[], Check], ...] = (
    check_python,
    check_numpy,
    check_numba,
    check_cuda,
    check_mpi,
    check_matplotlib,
    check_rich,
    check_pytest,
    check_hypothesis,
    check_pytest_timeout,
    check_pytest_xdist,
    check_sandbox,
    check_layout,
)
"""The checks, in the order the table shows them."""


def run_checks(checks: Sequence[Callable[[], Check]] | None = None) -> list[Check]:
    """Run every check; a check that raises becomes a FAIL row naming the exception."""
    rows = []
    for check in CHECKS if checks is None else checks:
        try:
            rows.append(check())
        except Exception as exc:
            target = getattr(check, "func", check)  # a functools.partial
            name = getattr(target, "__name__", "check").removeprefix("check_")
            rows.append(Check(name, FAIL, f"the check itself failed: {exc!r}"))
    return rows


def doctor_table(rows: Sequence[Check]) -> Table:
    """The rows as a rich table."""
    table = Table(title="minitorch doctor")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    table.add_column("how to fix", overflow="fold")
    for row in rows:
        # Text, not markup: details and fixes hold brackets such as ".[dev]".
        status = Text(row.status, style=_STYLE.get(row.status, ""))
        table.add_row(Text(row.name), status, Text(row.detail), Text(row.fix))
    return table


def instructor_checks() -> tuple[Callable[[], Check], ...]:
    """The checks of ``doctor --instructor``: the same, with the sandbox required."""
    return tuple(
        functools.partial(check_sandbox, instructor=True) if c is check_sandbox else c
        for c in CHECKS
    )


def run_doctor(
    console: Console,
    checks: Sequence[Callable[[], Check]] | None = None,
    instructor: bool = False,
) -> int:
    """Print the table; return 1 if any check FAILed, else 0. ``instructor``: the
    sandbox that grading needs is a FAIL when missing, not a WARN."""
    if checks is None and instructor:
        checks = instructor_checks()
    rows = run_checks(checks)
    console.print(doctor_table(rows))
    failed = [r.name for r in rows if r.status == FAIL]
    warned = [r.name for r in rows if r.status == WARN]
    if failed:
        console.print(f"[bold red]{len(failed)} check(s) failed:[/] {escape(', '.join(failed))}")
        return 1
    if warned:
        console.print(f"[yellow]ready, with warnings:[/] {escape(', '.join(warned))}")
    else:
        console.print("[green]everything is ready[/]")
    return 0
