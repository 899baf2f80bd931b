"""Library work is not credited (``autograder/own_work.py``): the static reading finds
each form of it, finds none in the reference or the plain solutions, and a grade gives
the task it sits in nothing, with the reason, and every other task what it earned.

Before: ``gemm`` written as ``O += A @ B`` on strided views took full marks for 2.3, its
speed check included (NumPy's BLAS beats the bar).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from autograder.grade import Limits, grade
from autograder.own_work import library_work
from autograder.paths import ROOT
from autograder.regions import fill_text, stub_text
from autograder.registry import TASKS
from tests.autograder.isolation import need
from tests.autograder.plain import stage2, stage4
from tests.autograder.test_plain_solutions import plain_submission

GIVEN = """
import numpy as np
from numba import prange


def size_of(shape):
    return int(np.prod(shape))


def kernel(out, a, b):
    # ---- Task 9.1: your code starts here ----
    raise NotImplementedError("Task 9.1: implement kernel in x.py (see README)")
    # ---- Task 9.1: your code ends here ----
"""


def _uses(body: str, extra: str = "", cuda: bool = False) -> list[str]:
    source, _ = fill_text(GIVEN, {("9.1", "kernel"): body})
    return [f.what for f in library_work(source + extra, ["kernel"], GIVEN, cuda=cuda)]


@pytest.mark.parametrize(
    ("body", "extra", "what"),
    [
        ("out[:] += a @ b", "", "the operator @"),
        ("out @= b", "", "the operator @"),
        ("out[:] = np.matmul(a, b)", "", "NumPy's np.matmul"),
        ("out[:] = np.exp(a)", "", "NumPy's np.exp"),
        ("out[0] = np.add.reduce(a)", "", "NumPy's np.add.reduce"),
        ("out[:] = np.linalg.solve(a, b)", "", "NumPy's np.linalg.solve"),
        ("out[:] = a.dot(b)", "", "the method .dot()"),
        ("out[0] = a.sum()", "", "the method .sum()"),
        ("out[:] = getattr(np, 'mat' + 'mul')(a, b)", "", "getattr()"),
        ("out[:] = np.__dict__['matmul'](a, b)", "", "the attribute .__dict__"),
        ("out[:] = einsum('ij,jk', a, b)", "\nfrom numpy import einsum\n", "NumPy's numpy.einsum"),
        ("out[:] = xp.dot(a, b)", "\nxp = np\n", "NumPy's xp.dot"),
        ("out[:] = mm(a, b)", "\nmm = np.matmul\n", "NumPy's np.matmul"),
        ("out[:] = la.inv(a)", "\nimport scipy.linalg as la\n", "the module scipy.linalg"),
        ("import torch\nout[:] = 0", "", "an import of torch"),
        ("out[:] = helper(a, b)", "\ndef helper(a, b):\n    return a @ b\n", "the operator @"),
        ("out[:] = __import__('numpy').dot(a, b)", "", "__import__()"),
        ("out[:] = operator.matmul(a, b)", "\nimport operator\n", "the module operator"),
        ("out[:] = math.exp(a)", "\nfrom module0 import operators as math\n", "the method .exp()"),
    ],
)
def test_each_form_of_library_work_is_found(body: str, extra: str, what: str) -> None:
    uses = _uses(body, extra)
    assert any(u.startswith(what) for u in uses), uses


def test_own_loops_and_unchanged_given_code_are_not_library_work() -> None:
    body = """
for i in prange(len(out)):
    total = 0.0
    for k in range(a.shape[1]):
        total += a[i, k] * b[k, i]
    out[i] = total + size_of(a.shape)  # given code: np.prod, not the task's
tmp = np.empty(3, np.int32)
"""
    assert _uses(body) == []
    scalar = (
        "for i in range(len(out)):\n    out[i] = math.exp(a[i]) + m.log(a[i]) + math.tanh(a[i])"
    )
    assert _uses(scalar, "\nimport math\nimport math as m\n") == []
    assert _uses("out[:] = a.exp()", "\nimport math\n") == ["the method .exp() (a library's loop)"]
    changed = GIVEN.replace("int(np.prod(shape))", "int(np.dot(shape, shape))")
    source, _ = fill_text(changed, {("9.1", "kernel"): "out[0] = size_of(a.shape)"})
    uses = library_work(source, ["kernel"], GIVEN)
    assert [u.what for u in uses] == ["NumPy's np.dot"] and uses[0].function == "size_of"


def test_a_cuda_kernel_that_calls_back_to_the_host_is_found() -> None:
    given = """
from numba import cuda


def host(out, a):
    out[:] = a


def tensor_map(fn):
    def _map(out, a):
        # ---- Task 9.1: your code starts here ----
        pass  # Task 9.1: implement tensor_map in x.py (see README)
        # ---- Task 9.1: your code ends here ----

    return cuda.jit(_map)
"""
    source, used = fill_text(given, {("9.1", "tensor_map"): "host(out, a)"})
    assert used
    uses = library_work(source, ["tensor_map"], given, cuda=True)
    assert [u.what.split(",")[0] for u in uses] == ["a call from the CUDA kernel _map to host"], (
        uses
    )
    assert library_work(source, ["tensor_map"], given, cuda=False) == []


OWN = [t for t in TASKS if t.own_work]


@pytest.mark.parametrize("task", OWN, ids=[t.id for t in OWN])
def test_the_reference_and_the_plain_solutions_do_no_library_work(task: object) -> None:
    for path in task.files:  # type: ignore[attr-defined]
        module = path.removesuffix(".py").replace("/", ".")
        names = [f.split(":", 1)[1] for f in task.functions if f.startswith(module + ":")]  # type: ignore[attr-defined]
        reference = (ROOT / path).read_text(encoding="utf-8")
        handout = stub_text(reference, path)
        cuda = task.stage == 3  # type: ignore[attr-defined]
        assert library_work(reference, names, handout, cuda) == [], path
        plain, used = fill_text(handout, {**stage2.BODIES, **stage4.BODIES})
        if used:
            assert library_work(plain, names, handout, cuda) == [], path


BLAS_GEMM = """
from numpy.lib.stride_tricks import as_strided

size = out.itemsize
O = as_strided(out[o_base:], (m, n), (o_row * size, o_col * size))
A = as_strided(a[a_base:], (m, k), (a_row * size, a_col * size))
B = as_strided(b[b_base:], (k, n), (b_row * size, b_col * size))
O += A @ B
"""
"""The issue's attack on 2.3: ``gemm`` (its ``njit`` taken off) as NumPy's BLAS on
strided views; before, it took full marks, speed check included."""

HOST_MAP = '''


def _host_map(out, in_storage):
    """Hostile: the map done on the host (only the CUDA simulator runs it)."""
    for i in range(len(out)):
        out[i] = in_storage[i]
'''


def test_library_work_loses_exactly_the_task_it_sits_in() -> None:
    need()
    bodies = {
        **stage2.BODIES,
        ("2.1", "tensor_map_kernel"): stage2.TENSOR_MAP.replace(
            "unary(op, value)", "np.exp(in_storage)[0]"
        ),
        ("2.1", "tensor_reduce_kernel"): "out[0] = np.add.reduce(a_storage)",
        ("2.3", "gemm"): BLAS_GEMM,
        ("3.1", "tensor_map._map"): "_host_map(out, in_storage)",
        ("3.1", "tensor_zip._zip"): "pass",
    }
    with tempfile.TemporaryDirectory() as tmp:
        sub = plain_submission(Path(tmp) / "sub", bodies)
        matmul = sub / "module2" / "fast_matmul.py"
        text = matmul.read_text(encoding="utf-8")
        jitted = "@njit(parallel=True, cache=True, fastmath=FASTMATH)\ndef gemm("
        assert jitted in text
        matmul.write_text(text.replace(jitted, "def gemm("), encoding="utf-8")
        cuda = sub / "module3" / "cuda_ops.py"
        cuda.write_text(cuda.read_text(encoding="utf-8") + HOST_MAP, encoding="utf-8")
        report = grade(sub, root=ROOT, task_ids=["2.1", "2.2", "2.3", "3.1"],
                       limits=Limits(per_task_seconds=600))  # fmt: skip
    scores = {s.task.id: s for s in report.scores}
    assert scores["2.2"].score == scores["2.2"].task.points, scores["2.2"].report()
    expected = [("2.1", "NumPy's np.exp"), ("2.1", "NumPy's np.add.reduce"),
                ("2.3", "the operator @"), ("2.3", "an import of numpy.lib.stride_tricks"),
                ("3.1", "a call from the CUDA kernel")]  # fmt: skip
    for task_id, what in expected:
        score = scores[task_id]
        assert score.score == 0 and score.passed == 0, score.report()
        assert score.problem.startswith(f"not credited: task {task_id} asks for your own loops")
        assert what in score.problem, score.problem
        assert all(why.startswith("not credited") for _, why in score.failures)


def test_the_students_report_gives_library_work_nothing_as_the_grader_does() -> None:
    from autograder.registry import get_task
    from autograder.status import OWN_WORK_TEST, TaskStatus, library_work_failed

    own = f"tests/module2/{OWN_WORK_TEST}[2.3]"
    outcomes = {own: "failed", "tests/module2/test_fast_matmul.py::test_x": "passed"}
    assert library_work_failed(outcomes, outcomes.get)
    assert not library_work_failed({own: "passed"}, {own: "passed"}.get)
    task = get_task("2.3")
    assert TaskStatus(task, 13, 14, False).points == pytest.approx(task.points * 13 / 14)
    assert TaskStatus(task, 13, 14, False, not_credited=True).points == 0.0
