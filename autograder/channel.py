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
:attr:`ChannelLimits.depth` levels deep, an array's data exactly as long as its shape
says). A line counts only if it is exactly what the check runner writes of it
(``json.dumps`` of the record: ASCII, its spacing, no key twice, numbers as Python spells
them), so no byte order mark, other encoding, repeated key or other spelling can make
one line mean two things. Anything else is dropped and counted.

The channel is fed while the run is going, chunk by chunk, and enforces its limits as it
reads — bytes per line, bytes in all, lines, nesting depth — so the grader's memory and
CPU stay bounded whatever the sandboxed code writes: a line over its limit is skipped
without being kept, and a run past the total or the line count is stopped at once
(:attr:`AnswerChannel.stop`), scoring what it answered before. A submission's line may be
at most a few times as long as the reference's answer to the same check
(:func:`answer_budgets`; the check's id comes first in every record, so the limit is
known before the line is kept), and each answer is judged as it arrives and only the
verdict kept (``verdict``): the grader holds one submitted answer at a time. The
reference's answers are kept as their lines and read when judged (:class:`RawAnswers`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
    trusted: bool = False
    """The reference's own run: its answers are not checked again (they are the oracle)."""
    check_bytes: Mapping[str, tuple[int, int]] | None = None
    """Per check id, the longest line that may name it and the most commas it may hold
    (None: ``line_bytes`` for all, commas not counted). Commas bound what parsing the line
    makes: a list of a million ``0.0`` is 4 MB of text and 32 MB of Python objects."""


ANSWER_SLACK = 4096
"""Bytes a submitted line may have beyond :data:`ANSWER_FACTOR` times the reference's
(an error's message, a short answer spelled longer)."""
ANSWER_FACTOR = 5
"""How many times as long as the reference's line a submitted one may be: a right float
may be spelled ``0.49999999999999994`` where the reference's is ``0.5``."""
COMMA_SLACK = 512
"""Commas a submitted line may have beyond the reference's: a right answer has the same
shape, so the same commas, but for those of its strings (an error's message)."""
READY_BYTES = 256


def answer_budgets(lines: Mapping[str, bytes]) -> dict[str, tuple[int, int]]:
    """Per check id, the longest line a submission may write for it and the most commas
    in it: from the reference's lines (answers and timed rounds, by :func:`round_key`)."""
    budgets: dict[str, tuple[int, int]] = {}
    for key, line in lines.items():
        check = key.split("#", 1)[0]
        size, commas = budgets.get(check, (READY_BYTES, 0))
        budgets[check] = (max(size, ANSWER_FACTOR * len(line) + ANSWER_SLACK),
                          max(commas, line.count(b",") + COMMA_SLACK))  # fmt: skip
    return budgets


def submission_limits(
    checks: int, rounds: int, budgets: Mapping[str, tuple[int, int]] | None = None
) -> ChannelLimits:
    """A submission's run: a few lines more than its checks can need (each check one
    answer, each timed round a readiness and an answer); with ``budgets``
    (:func:`answer_budgets`), each line held to its check's and the whole to their sum."""
    lines = 4 * (checks + 2 * rounds) + 16
    if budgets is None:
        return ChannelLimits(lines=lines)
    total = 2 * sum(b for b, _ in budgets.values()) * (1 + rounds) + lines * READY_BYTES
    return ChannelLimits(line_bytes=max((b for b, _ in budgets.values()), default=READY_BYTES),
                         total_bytes=total, lines=lines, check_bytes=dict(budgets))  # fmt: skip


REFERENCE_LIMITS = ChannelLimits(line_bytes=64 << 20, total_bytes=1 << 30, lines=1 << 20,
                                 trusted=True)  # fmt: skip
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


_NON_FINITE = frozenset({"nan", "inf", "-inf"})
"""How ``checks.encode`` writes a float that JSON cannot hold (``repr``)."""


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
        elif keys == {"float"}:
            if value["float"] not in _NON_FINITE:
                return False
        elif keys == {"object"}:
            if type(value["object"]) is not str:
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
            if len(flat) != math.prod(shape):
                return False  # the data must fill the shape exactly
            for x in flat:  # encode writes floats, and repr() of the non-finite ones
                if type(x) is float:
                    if x != x or x in (math.inf, -math.inf):
                        return False
                elif type(x) is not str or x not in _NON_FINITE:
                    return False
        else:
            return False
    return True


def parse_record(
    line: bytes, checks: frozenset[str] | None, depth: int, trusted: bool = False
) -> Record | None:
    """The record a line holds, or None when it is not exactly one valid record, written
    exactly as the check runner writes it (``json.dumps``: ASCII only, its separators, no
    repeated key, Python's spelling of every number). ``trusted`` (the reference's own
    run): the record's shape is read, its answer not checked again."""
    if not line.isascii():
        return None
    text = line.decode("ascii")
    try:
        data = json.loads(text)
        if not trusted and json.dumps(data) != text:
            return None
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
    if "answer" not in keys or not (trusted or valid_answer(data["answer"], depth)):
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
    verdict: Callable[[str, Any], Any] | None = None
    """What to keep of each first answer instead of the answer (the grader's verdict on
    it, so that no submitted answer is held longer than it takes to judge it)."""
    raw: bool = False
    """Keep each answer as its line (:class:`RawAnswers`), to be read when judged."""
    answers: dict[str, Any] = field(default_factory=dict)
    lines: dict[str, bytes] = field(default_factory=dict)
    """With ``raw``: the line of each first answer (by :func:`round_key`)."""
    baselines: dict[str, float] = field(default_factory=dict)
    dropped: int = 0
    """Lines that were not one valid record (malformed, unknown, over the line limit)."""
    oversized: int = 0
    """Of those, lines over the line limit (skipped without being kept)."""
    stop: str = ""
    _line: bytearray = field(default_factory=bytearray)
    _skipping: bool = False
    _cap: int = -1
    """The current line's limit (-1: not known yet: its check's id is not read yet)."""
    _commas: int = 0
    """Commas left to the current line (once its check is known)."""
    _bytes: int = 0
    _lines: int = 0

    def _line_cap(self) -> int:
        """The current line's limit: its check's, once the line shows which check it
        names (``{"check": "ID", ...``: the runner writes the id first), a short one
        before (a line that does not start so is no record)."""
        budgets = self.limits.check_bytes
        if budgets is None or self._cap >= 0:
            return self.limits.line_bytes if budgets is None else self._cap
        head = bytes(self._line[: len(_PREFIX) + 256])
        if not head.startswith(_PREFIX[: len(head)]):
            self._cap = 0
        elif (end := head.find(b'"', len(_PREFIX))) >= 0:
            check = head[len(_PREFIX) : end].decode("ascii", "replace")
            self._cap, self._commas = budgets.get(check, (0, 0))
            self._commas -= self._line.count(b",")
        elif len(head) > len(_PREFIX) + 255:
            self._cap = 0
        return self._cap if self._cap >= 0 else len(_PREFIX) + 256

    def feed(self, chunk: bytes, now: float | None = None) -> bytes:
        if self.stop:
            return b""
        now = time.monotonic() if now is None else now
        self._bytes += len(chunk)
        if self._bytes > self.limits.total_bytes:
            self.stop = f"wrote more than {_amount(self.limits.total_bytes)} of answers"
            return b""
        replies = bytearray()
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start : len(chunk) if end < 0 else end]
            start = len(chunk) if end < 0 else end + 1
            while not self._skipping and piece:  # (at most three rounds: the head first)
                cap = self._line_cap()
                room = cap - len(self._line)
                waiting = self.limits.check_bytes is not None and self._cap < 0
                if waiting and len(piece) > room:  # the check's id first, then its limit
                    self._line += piece[:room]
                    piece = piece[room:]
                    continue
                if not waiting and self.limits.check_bytes is not None:
                    self._commas -= piece.count(b",")
                if len(piece) > room or self._commas < 0:
                    self._skipping, self._line = True, bytearray()
                else:
                    self._line += piece
                piece = b""
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
        self._line, self._skipping, self._cap = bytearray(), False, -1

    def _end_line(self, now: float) -> bytes | None:
        line, skipped = bytes(self._line), self._skipping
        self._line, self._skipping, self._cap = bytearray(), False, -1
        self._lines += 1
        if self._lines > self.limits.lines:
            self.stop = f"wrote more than {self.limits.lines} lines of answers"
            return None
        record = None if skipped else parse_record(line, self.checks, self.limits.depth,
                                                   self.limits.trusted)  # fmt: skip
        if record is None:
            self.dropped += 1
            self.oversized += skipped
            return None
        if record.kind != "ready":
            key = record.check
            if record.kind == "round":
                key = round_key(record.check, record.number)
            if key not in self.answers and key not in self.lines:
                if self.raw:
                    self.lines[key] = line
                else:
                    kept = record.answer
                    self.answers[key] = kept if self.verdict is None else self.verdict(key, kept)
            if record.baseline is not None:
                self.baselines.setdefault(key, record.baseline)
        return self.listener(record, now) if self.listener is not None else None

    def ignored(self) -> str:
        """The lines that did not count, for the report ("" when every line counted)."""
        if not self.dropped:
            return ""
        limit = (f"{self.limits.line_bytes >> 20} MiB limit of a line"
                 if self.limits.check_bytes is None else "limit of a line (a few times the "
                 "length of the reference's answer, and as many values)")  # fmt: skip
        big = f", {self.oversized} of them over the {limit}" if self.oversized else ""
        return (f"{self.dropped} line(s) of its answer pipe were not valid answers to its "
                f"checks and were ignored{big}")  # fmt: skip


_PREFIX = b'{"check": "'


def _amount(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


class RawAnswers(Mapping[str, Any]):
    """Answers kept as their lines (the reference's: a whole course's are several MiB as
    text, several times that as Python objects), each read when it is asked for."""

    def __init__(self, lines: Mapping[str, bytes]) -> None:
        self._lines = dict(lines)

    def __getitem__(self, key: str) -> Any:
        return json.loads(self._lines[key])["answer"]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    def line(self, key: str) -> bytes:
        """The line that holds the answer to ``key``."""
        return self._lines[key]


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
