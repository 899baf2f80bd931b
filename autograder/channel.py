"""The answer pipe: the one parser of what a check run writes back.

A check run (``python -m autograder.checks``) writes one JSON object per line on its
result pipe. Everything that reads that pipe — the store of answers, the reference's
baseline times and the timed checks' round clock — reads it through one
:class:`AnswerChannel`, so no two readers can disagree on what a line says: lines end at
``\\n`` and nowhere else, and a line counts only if it is one complete, valid record:

- an answer: ``{"check": ID, "answer": A}`` (optionally ``"seconds": S``);
- a timed round's answer: ``{"check": ID, "round": N, "answer": A}`` (the reference's
  run adds ``"baseline": S``, which only the reference's channel reads);
- readiness for a round: ``{"check": ID, "ready": N}``.

``ID`` must be one of the checks the run was asked for, ``N`` a plain int, and ``A`` an
answer in the encoding of :func:`autograder.checks.encode` (no other shape, at most
:attr:`ChannelLimits.depth` levels deep). Anything else is dropped and counted.

The channel is fed while the run is going, chunk by chunk, and enforces its limits as it
reads — bytes per line, bytes in all, lines, nesting depth — so the grader's memory and
CPU stay bounded whatever the sandboxed code writes: a line over its limit is skipped
without being kept, and a run past the total or the line count is stopped at once
(:attr:`AnswerChannel.stop`), scoring what it answered before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

ANSWER_KINDS = {"tuple", "dict", "float", "raised", "array", "object"}
"""The keys that mark an encoded value that is not plain JSON (see ``checks.encode``)."""


@dataclass(frozen=True)
class ChannelLimits:
    """What one run may write on its answer pipe."""

    line_bytes: int = 8 << 20
    """One record (the largest reference answer of the course is about 0.6 MiB)."""
    total_bytes: int = 64 << 20
    """Everything the run writes."""
    lines: int = 10_000
    """Records of any kind, valid or not."""
    depth: int = 48
    """Nesting of an answer (the course's answers nest at most about 8 deep)."""


def submission_limits(checks: int, rounds: int) -> ChannelLimits:
    """A submission's run: a few lines more than its checks can need (each check one
    answer, each timed round a readiness and an answer)."""
    return ChannelLimits(lines=4 * (checks + 2 * rounds) + 16)


REFERENCE_LIMITS = ChannelLimits(line_bytes=64 << 20, total_bytes=1 << 30, lines=1 << 20)
"""The reference's run (trusted; the limits only guard against a broken reference)."""


@dataclass(frozen=True)
class Record:
    """One valid line of the pipe."""

    check: str
    kind: str
    """``"answer"``, ``"round"`` (a timed round's answer) or ``"ready"``."""
    number: int = -1
    """The round (``"round"`` and ``"ready"``)."""
    answer: Any = None
    baseline: float | None = None


def round_key(check_id: str, number: int) -> str:
    """Where a channel keeps the answer to round ``number`` of a timed check."""
    return f"{check_id}#{number}"


def _plain_int(value: Any) -> bool:
    return type(value) is int and 0 <= value < 1 << 31


def valid_answer(data: Any, depth: int) -> bool:
    """``data`` is an encoded answer (``checks.encode``'s shapes only), ``depth`` levels
    deep at most. Iterative: a deep value costs no recursion."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, level = stack.pop()
        if level > depth:
            return False
        kind = type(value)
        if value is None or kind in (bool, int, str):
            continue
        if kind is float:
            if value != value or value in (float("inf"), float("-inf")):
                return False  # non-finite floats travel as {"float": "nan"}
            continue
        if kind is list:
            stack.extend((v, level + 1) for v in value)
            continue
        if kind is not dict or len(value) == 0:
            return False
        keys = set(value)
        if keys == {"tuple"} and type(value["tuple"]) is list:
            stack.extend((v, level + 1) for v in value["tuple"])
        elif keys == {"dict"} and type(value["dict"]) is dict:
            stack.extend((v, level + 1) for v in value["dict"].values())
        elif keys == {"float"} or keys == {"object"}:
            if type(next(iter(value.values()))) is not str:
                return False
        elif keys in ({"raised"}, {"raised", "message"}):
            if not all(type(v) is str for v in value.values()):
                return False
        elif keys == {"array", "dtype", "data"}:
            shape, dtype, flat = value["array"], value["dtype"], value["data"]
            if type(shape) is not list or not all(_plain_int(n) for n in shape):
                return False
            if type(dtype) is not str or type(flat) is not list:
                return False
            if not all(type(x) in (int, float, str) for x in flat):
                return False
        else:
            return False
    return True


def parse_record(line: bytes, checks: frozenset[str] | None, depth: int) -> Record | None:
    """The record a line holds, or None when it is not exactly one valid record."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if type(data) is not dict or type(data.get("check")) is not str:
        return None
    check = data["check"]
    if checks is not None and check not in checks:
        return None
    keys = set(data) - {"check", "seconds", "baseline"}
    seconds, baseline = data.get("seconds", 0.0), data.get("baseline")
    if type(seconds) not in (int, float) or (baseline is not None and type(baseline) is not float):
        return None
    if keys == {"ready"} and _plain_int(data["ready"]) and baseline is None:
        return Record(check, "ready", data["ready"])
    if "answer" not in keys or not valid_answer(data["answer"], depth):
        return None
    if keys == {"answer"} and baseline is None:
        return Record(check, "answer", answer=data["answer"])
    if keys == {"answer", "round"} and _plain_int(data["round"]):
        return Record(check, "round", data["round"], data["answer"], baseline)
    return None


class Listener(Protocol):
    def __call__(self, record: Record, now: float) -> bytes | None: ...


@dataclass
class AnswerChannel:
    """Reads one run's answer pipe (see the module's docstring).

    ``feed`` takes each chunk as it arrives and returns the bytes to send back to the
    run (the round clock's seeds); ``stop`` is set, with the reason, once a limit is
    passed (the caller then ends the run). ``answers`` holds the first answer of each
    check and round (:func:`round_key`), ``baselines`` the reference's baseline times.
    """

    limits: ChannelLimits = field(default_factory=ChannelLimits)
    checks: frozenset[str] | None = None
    """The check ids the run was asked for (None: any id)."""
    listener: Listener | None = None
    answers: dict[str, Any] = field(default_factory=dict)
    baselines: dict[str, float] = field(default_factory=dict)
    dropped: int = 0
    """Lines that were not one valid record (malformed, unknown, over the line limit)."""
    oversized: int = 0
    """Of those, lines over the line limit (skipped without being kept)."""
    stop: str = ""
    _line: bytearray = field(default_factory=bytearray)
    _skipping: bool = False
    _bytes: int = 0
    _lines: int = 0

    def feed(self, chunk: bytes, now: float | None = None) -> bytes:
        if self.stop:
            return b""
        now = time.monotonic() if now is None else now
        self._bytes += len(chunk)
        if self._bytes > self.limits.total_bytes:
            self.stop = f"wrote more than {self.limits.total_bytes >> 20} MiB of answers"
            return b""
        replies = bytearray()
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start : len(chunk) if end < 0 else end]
            start = len(chunk) if end < 0 else end + 1
            if not self._skipping:
                if len(self._line) + len(piece) > self.limits.line_bytes:
                    self._skipping, self._line = True, bytearray()
                else:
                    self._line += piece
            if end < 0:
                break
            reply = self._end_line(now)
            if reply:
                replies += reply
            if self.stop:
                break
        return bytes(replies)

    def close(self) -> None:
        """The pipe ended: an unfinished last line is not a record."""
        if self._line or self._skipping:
            self.dropped += 1
            self.oversized += self._skipping
        self._line, self._skipping = bytearray(), False

    def _end_line(self, now: float) -> bytes | None:
        line, skipped = bytes(self._line), self._skipping
        self._line, self._skipping = bytearray(), False
        self._lines += 1
        if self._lines > self.limits.lines:
            self.stop = f"wrote more than {self.limits.lines} lines of answers"
            return None
        record = None if skipped else parse_record(line, self.checks, self.limits.depth)
        if record is None:
            self.dropped += 1
            self.oversized += skipped
            return None
        if record.kind != "ready":
            key = record.check
            if record.kind == "round":
                key = round_key(record.check, record.number)
            self.answers.setdefault(key, record.answer)
            if record.baseline is not None:
                self.baselines.setdefault(key, record.baseline)
        return self.listener(record, now) if self.listener is not None else None

    def ignored(self) -> str:
        """The lines that did not count, for the report ("" when every line counted)."""
        if not self.dropped:
            return ""
        big = (f", {self.oversized} of them over the {self.limits.line_bytes >> 20} MiB "
               "limit of a line") if self.oversized else ""  # fmt: skip
        return (f"{self.dropped} line(s) of its answer pipe were not valid answers to its "
                f"checks and were ignored{big}")  # fmt: skip


def read_records(data: bytes, checks: Iterable[str] | None = None) -> AnswerChannel:
    """A channel fed with all of ``data`` (trusted data, or tests)."""
    channel = AnswerChannel(REFERENCE_LIMITS, None if checks is None else frozenset(checks))
    channel.feed(data)
    channel.close()
    return channel


class RoundClock:
    """Runs the timed checks' rounds of one sandboxed run from outside: when the run says
    it is ready for a round, sends that round's seed and starts the clock; stops it when
    a valid answer to that round arrives. One round at a time, in order, each once.

    It listens to the run's :class:`AnswerChannel`, so it sees exactly the records the
    store of answers sees."""

    def __init__(self, timed: dict[str, int], seeds: Sequence[int]) -> None:
        self.rounds = dict(timed)
        """Timed check id -> its number of rounds."""
        self.seeds = list(seeds)
        self.next: dict[str, int] = {}
        self.started: dict[str, float] = {}
        self.seconds: dict[str, float] = {}

    def __call__(self, record: Record, now: float) -> bytes | None:
        if record.check not in self.rounds or record.kind == "answer":
            return None
        key = round_key(record.check, record.number)
        if record.kind == "round":  # a valid answer: the clock of its round stops
            if key in self.started and key not in self.seconds:
                self.seconds[key] = now - self.started[key]
            return None
        number = record.number
        expected = self.next.get(record.check, 0)
        if number != expected or number >= min(self.rounds[record.check], len(self.seeds)):
            return None
        if number and round_key(record.check, number - 1) not in self.seconds:
            return None  # the previous round has not answered
        self.next[record.check] = number + 1
        self.started[key] = time.monotonic()
        return f"{self.seeds[number]}\n".encode()
