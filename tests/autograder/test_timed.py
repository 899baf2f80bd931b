"""Timed checks (``autograder.checks.Timed``): the grader's clock runs one round at a
time, from the moment it sends a round's seed to the moment that round's answer
arrives, and nothing the sandbox writes can start, stop or skip it out of turn."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from autograder import grade as grade_module
from autograder import sandbox
from autograder.channel import (
    AnswerChannel,
    ChannelLimits,
    RoundClock,
    parse_record,
    round_key,
    submission_limits,
)
from autograder.checks import Check, Timed
from autograder.grade import Answers, Limits, grade, judge_timed
from autograder.paths import ROOT
from tests.autograder.isolation import need
from tests.autograder.plain import stage2
from tests.autograder.test_plain_solutions import plain_submission

CHECK = Check("9.9", "speed", lambda rng: 0.0, timed=Timed(lambda rng: 0.0, within=0.5))
OTHER = Check("9.9", "values", lambda rng: 0.0)


def line(**record: object) -> bytes:
    return json.dumps({"check": CHECK.id, **record}).encode() + b"\n"


def clocked(seeds: list[int]) -> tuple[RoundClock, AnswerChannel]:
    """A round clock listening to an answer channel, as ``submission_answers`` sets up."""
    clock = RoundClock({CHECK.id: CHECK.timed.rounds}, seeds)  # type: ignore[union-attr]
    return clock, AnswerChannel(submission_limits(2, 3), frozenset({CHECK.id, OTHER.id}), clock)


def test_the_clock_sends_each_round_once_in_order_after_the_last_answer() -> None:
    clock, channel = clocked([11, 22, 33])
    assert channel.feed(line(round=0, answer=1.0)) == b""  # an answer before its round
    assert channel.feed(line(ready=1)) == b""  # out of turn
    assert channel.feed(b'{"check": "9.9:values", "ready": 0}\n') == b""  # not timed
    assert channel.feed(b"not json\n[1, 2]\n") == b""
    assert channel.feed(line(ready=True)) == b""  # a bool is not a round number
    assert channel.feed(line(ready=0)) == b"11\n"
    assert channel.feed(line(ready=0)) == b""  # each round once
    assert channel.feed(line(ready=1)) == b""  # round 0 has not answered
    assert channel.feed(line(round=0, answer=1.0)) == b""
    assert channel.feed(line(ready=1)) == b"22\n"
    assert channel.feed(line(round=1, answer=1.0) + line(ready=2)) == b"33\n"
    assert channel.feed(line(round=2, answer=1.0)) == b""
    assert channel.feed(line(ready=3)) == b""  # only the check's rounds
    assert sorted(clock.seconds) == [round_key(CHECK.id, n) for n in range(3)]
    assert all(0 <= s < 1 for s in clock.seconds.values())


def test_only_a_complete_valid_answer_stops_a_rounds_clock() -> None:
    # Before: a line with "check" and "round" but no "answer" stopped the clock (and the
    # reader dropped it), and the reader split lines at \r and U+2028 where the clock
    # did not: a triple-loop gemm passed 2.3's speed check at a recorded 0.8 ms.
    clock, channel = clocked([11, 22, 33])
    assert channel.feed(line(ready=0)) == b"11\n"
    key = round_key(CHECK.id, 0)
    forged = [
        line(round=0),  # no answer
        line(round=0, answer={"verdict": "pass"}),  # not an encoded answer
        line(round=0, answer=1.0, extra=1),  # a key no record has
        line(round="0", answer=1.0),  # the round as a string
        json.dumps({"check": CHECK.id, "round": 0, "answer": 1.0}).encode(),  # unfinished
    ]
    for forged_line in forged:
        channel.feed(forged_line[:-1] + b"\r" if forged_line.endswith(b"\n") else forged_line)
    assert key not in clock.seconds and key not in channel.answers
    channel.feed(b"\n")  # one line, ending here: every piece above is part of it
    assert key not in clock.seconds and key not in channel.answers
    raw = json.dumps({"check": CHECK.id, "round": 0, "answer": "two\u2028lines"},
                     ensure_ascii=False).encode()  # fmt: skip
    channel.feed(raw[:-1])
    assert key not in clock.seconds  # not a line yet: U+2028 ends no line
    channel.feed(raw[-1:] + b"\n")  # one line, but not as the runner writes it (ASCII)
    assert key not in clock.seconds and channel.dropped == 2
    channel.feed(json.dumps({"check": CHECK.id, "round": 0, "answer": "two\u2028lines"}).encode()
                 + b"\n")  # fmt: skip
    assert key in clock.seconds and channel.answers[key] == "two\u2028lines"
    assert channel.dropped == 2


def test_the_channel_bounds_what_it_keeps_and_stops_a_flood() -> None:
    limits = ChannelLimits(line_bytes=1000, total_bytes=10_000, lines=20, depth=5)
    channel = AnswerChannel(limits, frozenset({OTHER.id}))
    huge = b'{"check": "9.9:values", "answer": "' + b"x" * 5000 + b'"}\n'
    channel.feed(huge[:2000])
    assert len(channel._line) == 0  # past the line limit: nothing kept
    channel.feed(huge[2000:])
    assert channel.dropped == 1 and not channel.answers and not channel.stop
    deep = {"check": OTHER.id, "answer": [[[[[[1.0]]]]]]}
    channel.feed(json.dumps(deep).encode() + b"\n")
    assert channel.dropped == 2
    channel.feed(json.dumps({"check": OTHER.id, "answer": [[1.0]]}).encode() + b"\n")
    assert channel.answers == {OTHER.id: [[1.0]]}
    channel.feed(b"{}\n" * 30)
    assert channel.stop.startswith("wrote more than 20 lines")
    flood = AnswerChannel(limits, frozenset({OTHER.id}))
    flood.feed(b"x" * 10_001)
    assert flood.stop.startswith("wrote more than 9 KiB")


def run_result() -> sandbox.SandboxResult:
    return sandbox.SandboxResult(returncode=0, output="", timed_out=False, seconds=0.0)


def answers(values: list[float], seconds: list[float]) -> Answers:
    keys = [round_key(CHECK.id, n) for n in range(len(values))]
    return Answers({k: {"float": str(v)} for k, v in zip(keys, values, strict=True)},
                   run_result(), dict(zip(keys, seconds, strict=True)))  # fmt: skip


def test_the_fastest_right_round_is_held_to_the_fastest_baseline() -> None:
    reference = answers([1.0, 2.0, 3.0], [0.040, 0.030, 0.050])  # bar: 0.5 x 30 ms
    assert judge_timed(CHECK, reference, answers([1.0, 2.0, 3.0], [0.02, 0.015, 0.02]))[0] is None
    slow, _ = judge_timed(CHECK, reference, answers([1.0, 2.0, 3.0], [0.02, 0.016, 0.02]))
    assert slow and slow.startswith("too slow") and "15.0 ms" in slow and "16.0 ms" in slow
    wrong, _ = judge_timed(CHECK, reference, answers([1.0, 2.5, 3.0], [0.001] * 3))
    assert wrong and wrong.startswith("round 2 of 3: ")
    unanswered = Answers(answers([1.0], [0.001]).answers, run_result(), {})
    assert judge_timed(CHECK, reference, unanswered)[0] == "round 2 of 3: no answer"
    untimed = Answers(answers([1.0, 2.0, 3.0], [0.0] * 3).answers, run_result(), {})
    assert judge_timed(CHECK, reference, untimed)[0].startswith("too slow")  # type: ignore[union-attr]


FORGE = '''

def _forge() -> None:
    """Hostile: claim readiness for every round at once."""
    import json, os
    out = os.fdopen(3, "w", closefd=False)
    for n in range(3):
        out.write(json.dumps({"check": "2.3:gemm_speed", "ready": n}) + "\\n")
    out.flush()


def _stop_the_clock() -> None:
    """Hostile: as soon as a round's seed arrives, send a line that names the round but
    holds no answer (an old clock stopped on it), then compute the real answer."""
    import json, os, sys
    checks = sys.modules.get("autograder.checks")
    if checks is None:
        return
    read, rounds = checks._read_seed, iter(range(100))

    def read_and_stop(seeds_in):
        line = read(seeds_in)
        record = {"check": "2.3:gemm_speed", "round": next(rounds, 0)}
        os.write(3, (json.dumps(record) + "\\n").encode())
        return line

    checks._read_seed = read_and_stop


_forge()
_stop_the_clock()
'''


def test_a_slow_gemm_cannot_talk_its_way_past_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The textbook loop as ``gemm``, claiming readiness for every round at once and
    naming each round the moment its seed arrives, in a line without an answer (which
    stopped the old clock: 0.8 ms recorded for a 222 ms loop): right values, but the
    speed check is lost."""
    need()
    # The own-work reading would refuse the task before it runs (the attack imports json
    # and os at module level); the clock is what is tested here.
    monkeypatch.setattr(grade_module, "library_work_of", lambda task, workspace, root: [])
    with tempfile.TemporaryDirectory() as tmp:
        sub = plain_submission(Path(tmp) / "sub", {("2.3", "gemm"): stage2.NAIVE_GEMM})
        path = sub / "module2" / "fast_matmul.py"
        path.write_text(path.read_text(encoding="utf-8") + FORGE, encoding="utf-8")
        limits = Limits(per_test_seconds=10, per_task_seconds=120)
        (score,) = grade(sub, root=ROOT, task_ids=["2.3"], limits=limits).scores
    failures = dict(score.failures)
    assert list(failures) == ["2.3:gemm_speed"], score.report()
    assert failures["2.3:gemm_speed"].startswith("too slow: "), score.report()
    assert score.passed == score.total - 1, score.report()
    assert (
        score.problem == "5 line(s) of its answer pipe were not valid answers to its checks "
        "and were ignored"
    ), score.report()
    assert score.score == round(score.task.points * score.passed / score.total, 2)


def test_only_what_the_check_runner_writes_is_an_answer() -> None:
    # Before: the parser took a byte order mark, UTF-16, a repeated key (the last one
    # won) and an array whose data did not fill its shape.
    ids = frozenset({OTHER.id})
    good = {"check": OTHER.id, "answer": {"array": [2, 2], "dtype": "float64",
                                          "data": [1.0, 2.0, "nan", -0.0]}}  # fmt: skip
    line = json.dumps(good).encode()
    assert parse_record(line, ids, 48) is not None
    bad = [
        b"\xef\xbb\xbf" + line,  # a byte order mark
        json.dumps(good).encode("utf-16"),
        line[:-1] + b', "answer": 1.0}',  # the key twice
        line.replace(b'"nan", -0.0', b'"nan"'),  # 3 values for a 2 x 2 array
        line.replace(b'"nan"', b'"NaN "'),  # not how a non-finite value is written
        line.replace(b"2.0", b"2.00"),  # not Python's spelling of the number
        line.replace(b", ", b","),  # not the runner's spacing
        json.dumps(good, ensure_ascii=False).replace("1.0", '"\u00e9"').encode(),
    ]
    for record in bad:
        assert parse_record(record, ids, 48) is None, record
