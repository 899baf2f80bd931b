"""Does a kernel really run on several threads? A deterministic check, not a timing.

``assert_parallel(call, what)`` runs ``call()`` until the process has spent enough CPU
time, and reads every thread's own CPU clock from ``/proc/self/task`` before and after.
A kernel whose loop runs under ``prange`` spreads its work over Numba's threads, so the
threads other than the caller do a large share of it; a kernel that always takes a
serial path leaves them idle. CPU time counts work done, not waiting, so a busy
machine changes how long the check takes, not its verdict.

Where ``/proc/self/task`` does not exist (macOS, Windows) the check falls back to what
the compiler reports: the kernel's compiled overloads must contain a parallel loop
(a "parfor"), which catches a kernel written without ``prange`` but not one that only
takes its serial branch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import pytest

TASKS = Path("/proc/self/task")
MIN_TICKS = 40
"""CPU clock ticks (usually 10 ms each) the check collects before it judges."""
MIN_SHARE = 0.2
"""The share of CPU time the other threads must take: about 0.5 for a parallel loop
on two threads, near 0 for a serial one."""


def _thread_ticks() -> dict[int, int]:
    ticks = {}
    for entry in TASKS.iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # the thread ended
            continue
        fields = stat.rsplit(")", 1)[1].split()
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks


def _threads() -> int:
    wanted = min(2, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(wanted)
    try:  # the count stays as set: module2/threads.py adapts it only where asked to
        from module2 import threads

        threads.enabled = False
    except ImportError:  # stage 2 not reached (a handout through stage 1)
        pass
    return wanted


def assert_parallel(call: Callable[[], Any], what: str, kernel: Any = None) -> None:
    """Fail unless ``call()`` spreads its work over more than one thread.

    ``call`` should take at least a few milliseconds; it is repeated until
    ``MIN_TICKS`` ticks of CPU time have been spent (at most 30 s). ``kernel`` is the
    Numba dispatcher, used only where per-thread clocks cannot be read.
    """
    if _threads() < 2:
        pytest.fail("Numba has only one thread (NUMBA_NUM_THREADS=1): cannot check parallelism")
    call()  # compile outside the measurement
    if not TASKS.is_dir():
        if kernel is None:
            pytest.skip("per-thread CPU clocks need Linux's /proc")
        loops = sum(len(o.metadata.get("parfors", ()) or ()) for o in kernel.overloads.values())
        assert loops > 0, f"{what}: the compiled kernel has no parallel loop (use prange)"
        return
    me = threading.get_native_id()
    before = _thread_ticks()
    deadline = time.monotonic() + 30
    spent: dict[int, int] = {}
    while time.monotonic() < deadline:
        call()
        after = _thread_ticks()
        spent = {tid: n - before.get(tid, 0) for tid, n in after.items()}
        if sum(spent.values()) >= MIN_TICKS:
            break
    total = sum(spent.values())
    others = total - spent.get(me, 0)
    share = others / total if total else 0.0
    assert share >= MIN_SHARE, (
        f"{what} ran on one thread: the other Numba threads did {share:.0%} of its work "
        f"({others} of {total} CPU ticks; a parallel loop gives them about half). Is the "
        "loop over outputs a prange, and is it taken for large inputs?"
    )
