"""Running stage 6's tests on several ranks: ``mpiexec -n K`` started from the test,
bounded by a timeout, its process group killed if it outlives it.

Where MPI is absent (mpi4py or ``mpiexec`` missing: the ``dist`` extra), a test that
needs it is skipped with the install command; where ``MINITORCH_REQUIRE_MPI`` is set
(``.ci/run`` sets it) that skip is a failure instead, so CI runs every such test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from module6.distributed import INSTALL, mpiexec

ROOT = Path(__file__).resolve().parents[2]


@cache
def problem() -> str:
    """Why ranks cannot be started here ("" when they can)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return f"mpi4py is not installed ({INSTALL})"
    if mpiexec() is None:
        return f"no mpiexec beside this Python or on the PATH ({INSTALL})"
    return ""


def need_mpi() -> None:
    """Skip the calling test where MPI is absent; fail instead under MINITORCH_REQUIRE_MPI."""
    why = problem()
    if not why:
        return
    if os.environ.get("MINITORCH_REQUIRE_MPI", "").strip().lower() not in ("", "0", "no", "false"):
        pytest.fail(
            f"no MPI here: {why}, and MINITORCH_REQUIRE_MPI forbids skipping", pytrace=False
        )
    pytest.skip(f"no MPI here: {why}")


def failure(proc: subprocess.CompletedProcess[str]) -> str:
    """What a failed launch says, short: its exit status, the last error line of any
    rank (where a traceback ends), then the last lines of the output."""
    lines = proc.stdout.splitlines()
    errors = [line.strip() for line in lines if re.match(r"\s*\w+(Error|Exception)\b.*:", line)]
    last = f"; the last error: {errors[-1]}" if errors else ""
    return f"the ranks exited with status {proc.returncode}{last}\n" + "\n".join(lines[-15:])


def launch(n: int, argv: list[str], timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    """``mpiexec -n n`` ranks of ``python argv...`` from the repository root (output and
    errors together), each on one Numba thread, killed past ``timeout``."""
    need_mpi()
    command = [mpiexec() or "mpiexec", "-n", str(n), sys.executable, *argv]
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{n} ranks of {argv} ran past {timeout} s:\n{output}", pytrace=False)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, proc.returncode, output, "")


def run_ranks(
    n: int, case: str, args: dict[str, Any], tmp: Path, timeout: float = 180.0
) -> tuple[subprocess.CompletedProcess[str], dict[str, np.ndarray]]:
    """``mpiexec -n n`` ranks running ``tests.module6.ranks`` ``case`` with ``args``: the
    finished process (its output) and what rank 0 saved. Each rank runs one Numba thread
    (up to four ranks share this machine's cores)."""
    out = tmp / f"{case}-{n}-{len(list(tmp.iterdir()))}.npz"
    done = launch(n, ["-m", "tests.module6.ranks", case, str(out), json.dumps(args)], timeout)
    saved = dict(np.load(out)) if out.exists() else {}
    return done, saved
