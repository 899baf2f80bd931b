"""The grader's comparer states the contracts the local tests state: the sign of zero
where a task fixes it, nan, infinities, the exact dtype and the shape.

Before: ``neg(0.0)`` returning ``+0.0`` and ``relu(-0.0)`` returning ``-0.0`` took 10 of
10 points of task 0.1, while ``test_neg_of_zero_is_negative_zero`` fails on them; and
array answers were compared by dtype kind only (float32 for float64 passed).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from autograder.checks import compare, encode
from autograder.grade import grade
from autograder.paths import ROOT
from autograder.regions import find_regions
from tests.autograder.isolation import need


def test_zeros_of_the_wrong_sign_fail_only_where_the_contract_fixes_the_sign() -> None:
    assert compare(-0.0, 0.0, 1e-6, 1e-9, signed=True) == "the answer: expected -0.0, got 0.0"
    assert compare(0.0, -0.0, 1e-6, 1e-9, signed=True) is not None
    assert compare(-0.0, -0.0, 1e-6, 1e-9, signed=True) is None
    assert compare(-0.0, 0.0, 1e-6, 1e-9) is None  # a sum's zero may come either way
    want, got = encode(np.array([1.0, -0.0])), encode(np.array([1.0, 0.0]))
    assert compare(want, got, 1e-6, 1e-9, signed=True) == "the answer[1]: expected -0.0, got 0.0"
    assert compare(want, got, 1e-6, 1e-9) is None


def test_nan_infinities_dtype_and_shape_are_compared_exactly() -> None:
    nan, inf = encode(float("nan")), encode(float("inf"))
    assert compare(nan, nan, 1e-6, 1e-9) is None
    assert compare(nan, 0.0, 1e-6, 1e-9) is not None
    assert compare(inf, encode(-float("inf")), 1e-6, 1e-9) is not None
    assert compare(inf, 1e308, 1e-6, 1e-9) is not None
    f64 = encode(np.zeros((2, 3)))
    assert compare(f64, encode(np.zeros((2, 3), dtype=np.float32)), 1e-6, 1e-9) == (
        "the answer: expected dtype 'float64', got 'float32'"
    )
    assert compare(f64, encode(np.zeros((3, 2))), 1e-6, 1e-9) is not None
    assert compare(encode(np.zeros(2, np.int32)), encode(np.zeros(2, np.int64)), 0, 0) is not None


def _with(text: str, function: str, body: str) -> str:
    lines = text.splitlines(keepends=True)
    (region,) = [r for r in find_regions(text, "module0/operators.py") if r.function == function]
    new = [f"{region.indent}{line}\n" for line in body.splitlines()]
    return "".join(lines[: region.begin - 1] + new + lines[region.end :])


def test_the_grader_holds_task_0_1_to_the_sign_of_zero() -> None:
    need()
    text = (ROOT / "module0/operators.py").read_text(encoding="utf-8")
    text = _with(text, "neg", "return -x if x != 0.0 else 0.0")
    text = _with(text, "relu", "return max(x, 0.0)")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "module0").mkdir()
        (Path(tmp) / "module0" / "operators.py").write_text(text, encoding="utf-8")
        (score,) = grade(Path(tmp), root=ROOT, task_ids=["0.1"]).scores
    failures = dict(score.failures)
    assert sorted(failures) == ["0.1:neg", "0.1:relu"], score.report()
    assert failures["0.1:neg"].startswith("out[0]: expected -0.0, got 0.0"), failures
    assert "expected 0.0, got -0.0 (inputs: -0.0)" in failures["0.1:relu"], failures
