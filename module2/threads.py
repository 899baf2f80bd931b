"""How many threads the fast kernels use: Numba's threads, less the cores that other
processes keep busy.

A parallel loop ends when its slowest thread does. On a quiet machine every core runs
one of ours; beside a busy process (a student's laptop always has one: a browser, an
editor, a build) one of our threads shares a core with it, and every parallel loop
waits for the scheduler to give that thread its turn, hundreds of times a step. Both
this framework and PyTorch spin their threads between loops, so each also takes CPU
from its own main thread. Measured on a 2-core AMD EPYC, a GPT step (the milestone's,
float32): quiet 45 ms on two threads, 83 ms on one; beside one busy process 95 ms on
two threads, 77 ms on one. On a 2-core Intel Xeon the two-thread step collapsed to
1,558 ms (PyTorch's to 1,384).

So :func:`follow`, called by the backend before its kernels, samples every
:data:`INTERVAL` seconds how much CPU the rest of the machine used (``/proc/stat``'s busy
time, less this process's own) and sets Numba's thread count to the cores left free,
rounded, at least one and at most the count it started with (:func:`set_cap`). One
read of ``/proc/stat`` per interval; between samples a call costs a clock read. Where
``/proc/stat`` does not exist (macOS, Windows) it changes nothing.

``MINITORCH_ADAPTIVE_THREADS=0`` switches it off, as does :func:`pinned` for a block (the
tests that count threads pin them).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numba

INTERVAL = 0.25
"""Seconds between samples of the machine's load."""
STAT = Path("/proc/stat")

enabled = os.environ.get("MINITORCH_ADAPTIVE_THREADS", "1") != "0"
_cap = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
_next = 0.0
_last: tuple[float, float, float] | None = None  # (wall, machine busy, own CPU) seconds
_ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def machine_busy_seconds(stat: Path = STAT) -> float | None:
    """CPU seconds the whole machine has spent busy since boot, over every core (the
    first line of ``/proc/stat``: everything but idle and I/O wait, steal included: a
    hypervisor's other guests hold the core as surely as a local process); None where
    it cannot be read."""
    try:
        with stat.open() as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return (sum(values) - values[3] - values[4]) / _ticks


def threads_for(others: float, cores: int, cap: int) -> int:
    """Threads to run with when other processes keep ``others`` cores busy: the free
    cores, rounded, between 1 and ``cap``."""
    return max(1, min(cap, round(cores - others)))


def set_cap(threads: int) -> None:
    """The most threads :func:`follow` may choose (e.g. a rank's share of the cores),
    and the count now."""
    global _cap
    _cap = max(1, threads)
    numba.set_num_threads(_cap)


def follow() -> None:
    """Every :data:`INTERVAL` seconds, set Numba's thread count for the load that other
    processes put on the machine (see the module's docstring)."""
    global _next, _last
    now = time.monotonic()
    if now < _next or not enabled:
        return
    _next = now + INTERVAL
    busy = machine_busy_seconds()
    if busy is None:
        return
    own = time.process_time()
    if _last is not None and now > _last[0]:
        others = ((busy - _last[1]) - (own - _last[2])) / (now - _last[0])
        wanted = threads_for(others, cores(), _cap)
        if wanted != numba.get_num_threads():
            numba.set_num_threads(wanted)
    _last = (now, busy, own)


@contextlib.contextmanager
def pinned(threads: int) -> Iterator[None]:
    """Exactly ``threads`` threads for the block, whatever the load; adapting again after."""
    global enabled, _last
    was, before = enabled, numba.get_num_threads()
    enabled = False
    numba.set_num_threads(threads)
    try:
        yield
    finally:
        numba.set_num_threads(before)
        enabled, _last = was, None  # the next sample starts afresh
