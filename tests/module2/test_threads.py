"""The fast backend's thread count under load (``module2/threads.py``, given code).

Oracle: hand-computed loads. A fake ``/proc/stat`` and fake clocks play a machine where
this process, and other processes, use known CPU seconds; :func:`follow` must choose
the free cores, rounded, between 1 and the cap, sampling once per interval.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from module2 import threads


@pytest.mark.parametrize(
    ("others", "cores", "cap", "want"),
    [
        (0.0, 2, 2, 2), (0.4, 2, 2, 2), (0.6, 2, 2, 1), (1.0, 2, 2, 1), (3.0, 2, 2, 1),
        (-0.2, 2, 2, 2), (0.0, 8, 2, 2), (5.2, 8, 8, 3), (1.0, 4, 4, 3),
    ],
)  # fmt: skip
def test_threads_for_the_free_cores(others: float, cores: int, cap: int, want: int) -> None:
    assert threads.threads_for(others, cores, cap) == want


def test_busy_seconds_are_everything_but_idle_and_io_wait(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    #                user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 7 50 1000 20 3 2 30 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert threads.machine_busy_seconds(stat) == pytest.approx(192 / threads._ticks)
    assert threads.machine_busy_seconds(tmp_path / "absent") is None  # not Linux
    stat.write_text("intr 1 2 3\n")
    assert threads.machine_busy_seconds(stat) is None


class Machine:
    """Fake clocks: wall time, the machine's busy CPU seconds and this process's."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cores: int = 2) -> None:
        self.wall, self.busy, self.own, self.reads, self.count = 100.0, 0.0, 0.0, 0, cores
        monkeypatch.setattr(threads.time, "monotonic", lambda: self.wall)
        monkeypatch.setattr(threads.time, "process_time", lambda: self.own)
        monkeypatch.setattr(threads, "machine_busy_seconds", self.read)
        monkeypatch.setattr(threads, "cores", lambda: cores)
        monkeypatch.setattr(threads.numba, "set_num_threads", self.set)
        monkeypatch.setattr(threads.numba, "get_num_threads", lambda: self.threads)
        monkeypatch.setattr(threads, "enabled", True)
        monkeypatch.setattr(threads, "_cap", cores)
        monkeypatch.setattr(threads, "_next", 0.0)
        monkeypatch.setattr(threads, "_last", None)
        self.threads, self.sets = cores, []

    def read(self) -> float:
        self.reads += 1
        return self.busy

    def set(self, n: int) -> None:
        self.threads = n
        self.sets.append(n)

    def run(self, seconds: float, ours: float, others: float) -> None:
        """``seconds`` pass; this process keeps ``ours`` cores busy, others ``others``."""
        self.wall += seconds
        self.own += ours * seconds
        self.busy += (ours + others) * seconds


def test_follow_drops_a_thread_beside_a_busy_process_and_takes_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = Machine(monkeypatch)
    threads.follow()  # the first sample: nothing to compare with yet
    assert (m.reads, m.sets) == (1, [])
    m.run(0.3, ours=2.0, others=0.0)  # quiet: both cores ours (spinning threads count)
    threads.follow()
    assert m.threads == 2 and m.sets == []
    m.run(0.3, ours=1.0, others=1.0)  # a busy process holds a core
    threads.follow()
    assert m.sets == [1]
    m.run(0.3, ours=1.0, others=1.0)  # still there: one thread, nothing set again
    threads.follow()
    assert m.sets == [1]
    m.run(0.3, ours=1.0, others=0.0)  # it ended: the core is free again
    threads.follow()
    assert m.sets == [1, 2]


def test_follow_samples_once_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    m = Machine(monkeypatch)
    threads.follow()
    for _ in range(50):  # calls within the interval read nothing
        m.run(threads.INTERVAL / 100, ours=1.0, others=1.0)
        threads.follow()
    assert m.reads == 1
    m.run(threads.INTERVAL * 0.6, ours=1.0, others=1.0)
    threads.follow()
    assert m.reads == 2 and m.sets == [1]


def test_the_cap_bounds_the_count_and_pinned_holds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    m = Machine(monkeypatch, cores=8)
    threads.set_cap(3)  # a rank's share of the cores
    assert m.sets == [3]
    threads.follow()
    m.run(0.3, ours=3.0, others=0.0)
    threads.follow()
    assert m.threads == 3  # 8 cores free, but at most the cap
    with threads.pinned(1):
        m.run(0.3, ours=1.0, others=0.0)
        threads.follow()
        assert m.threads == 1  # pinned: no change for the load
    assert m.threads == 3 and threads.enabled
    m.run(0.3, ours=1.0, others=0.0)
    threads.follow()  # after a pinned block, a fresh first sample
    assert m.threads == 3
    m.run(0.3, ours=1.0, others=6.6)
    threads.follow()
    assert m.threads == 1  # 1.4 cores free
