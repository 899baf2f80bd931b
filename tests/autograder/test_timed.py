"""Timed checks (``autograder.checks.Timed``): the grader's clock runs one round at a
time, from the moment it sends a round's seed to the moment that round's answer
arrives, and nothing the sandbox writes can start, stop or skip it out of turn."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.checks import Check, Timed, round_key
from autograder.grade import Answers, Limits, RoundClock, grade, judge_timed
from autograder.paths import ROOT
from tests.autograder.plain import stage2
from tests.autograder.test_plain_solutions import plain_submission

CHECK = Check("9.9", "speed", lambda rng: 0.0, timed=Timed(lambda rng: 0.0, within=0.5))
OTHER = Check("9.9", "values", lambda rng: 0.0)


def line(**record: object) -> bytes:
    return json.dumps({"check": CHECK.id, **record}).encode()


def test_the_clock_sends_each_round_once_in_order_after_the_last_answer() -> None:
    clock = RoundClock([CHECK, OTHER], [11, 22, 33])
    assert clock(line(round=0, answer=1.0)) is None  # an answer before its round: ignored
    assert clock(line(ready=1)) is None  # out of turn
    assert clock(b'{"check": "9.9:values", "ready": 0}') is None  # not a timed check
    assert clock(b"not json") is None and clock(b"[1, 2]") is None
    assert clock(line(ready=True)) is None  # a bool is not a round number
    assert clock(line(ready=0)) == b"11\n"
    assert clock(line(ready=0)) is None  # each round once
    assert clock(line(ready=1)) is None  # round 0 has not answered
    assert clock(line(round=0, answer=1.0)) is None
    assert clock(line(ready=1)) == b"22\n"
    assert clock(line(round=1, answer=1.0)) is None
    assert clock(line(ready=2)) == b"33\n"
    assert clock(line(round=2, answer=1.0)) is None
    assert clock(line(ready=3)) is None  # only the check's rounds
    assert sorted(clock.seconds) == [round_key(CHECK.id, n) for n in range(3)]
    assert all(0 <= s < 1 for s in clock.seconds.values())


def run_result() -> sandbox.SandboxResult:
    return sandbox.SandboxResult(returncode=0, output="", data=b"", data_truncated=False,
                                 timed_out=False, seconds=0.0)  # fmt: skip


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
    """Hostile: answer gemm_speed's rounds before their seeds, and claim readiness for
    every round at once."""
    import json, os
    out = os.fdopen(3, "w", closefd=False)
    for n in range(3):
        out.write(json.dumps({"check": "2.3:gemm_speed", "round": n,
                              "answer": {"float": "0.0"}}) + "\\n")
        out.write(json.dumps({"check": "2.3:gemm_speed", "ready": n}) + "\\n")
    out.flush()


_forge()
'''


@pytest.mark.skipif(bool(sandbox.unavailable_reason()), reason="no sandbox here")
def test_a_slow_gemm_cannot_talk_its_way_past_the_clock() -> None:
    """The textbook loop as ``gemm``, with forged rounds and out-of-turn readiness
    written at import: right values, but the speed check is lost."""
    with tempfile.TemporaryDirectory() as tmp:
        sub = plain_submission(Path(tmp) / "sub", {("2.3", "gemm"): stage2.NAIVE_GEMM})
        path = sub / "module2" / "fast_matmul.py"
        path.write_text(path.read_text(encoding="utf-8") + FORGE, encoding="utf-8")
        limits = Limits(per_test_seconds=10, per_task_seconds=120)
        (score,) = grade(sub, root=ROOT, task_ids=["2.3"], limits=limits).scores
    failures = dict(score.failures)
    assert list(failures) == ["2.3:gemm_speed"], score.report()
    assert failures["2.3:gemm_speed"].startswith("round 1 of 3: "), score.report()
    assert score.passed == score.total - 1 and not score.problem, score.report()
    assert score.score == round(score.task.points * score.passed / score.total, 2)
