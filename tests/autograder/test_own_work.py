"""Own work is judged by what runs (``autograder/own_work.py``): the static reading finds
each form of what a task's rule refuses wherever the task's functions can reach it, finds
none in the reference or the plain solutions or in honest code across files, trusts the
given code only where the reference's own functions reach it, gives the same answer in
the student's local test as in the grade, and a grade gives the task it sits in nothing,
with the reason, and every other task what it earned.

Before (issue 37, item 3): the reading looked only inside the task's listed functions and
the same-file functions they called by name, so each attack of :data:`ATTACKS` took full
marks: the task function rebound at module level, a module-level lambda, a helper in
another declared file (imported three ways, or patched in from there), 5.5's kernels in
NumPy rebound, 6.3's codec as one dtype cast each way, 6.1's ring as an MPI collective
with the check's byte counter bumped by hand (6.1 was read by no rule at all).
"""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from autograder.code_index import Tree
from autograder.grade import Limits, grade
from autograder.own_work import (
    Trust,
    given_source,
    handout_tree,
    library_work,
    local_trust,
    read_tree,
    trusted_code,
    walk,
)
from autograder.paths import ROOT
from autograder.regions import fill_text, find_regions, stub_text
from autograder.registry import TASKS, get_task
from autograder.release import REFERENCE_CODE
from autograder.task import Task
from tests.autograder.isolation import need
from tests.autograder.plain import stage2, stage4, stage5, stage6
from tests.autograder.test_plain_solutions import plain_submission

# =========================================================================================
# A small course: each form of what the rules refuse, and what is trusted
# =========================================================================================

TOY = Task(id="9.1", title="toy kernel", points=1, files=("module9/kern.py",),
           functions=("module9.kern:kernel",), own_work="kernel")  # fmt: skip

HELPERS = """
import numpy as np


def size_of(shape):
    return int(np.prod(shape))


def blas(a, b):
    return a @ b
"""
"""A given (grader's) file: ``size_of`` the reference uses; ``blas`` it never reaches."""

WORD = "SOLUTION"  # spelled apart, so this file holds no marker line itself

KERNEL = f"""
import numpy as np
from numba import prange

from module9.helpers import size_of


def norm(shape):
    return int(np.prod(shape))


def kernel(out, a, b):
    # BEGIN {WORD} 9.1
    for i in prange(len(out)):
        out[i] = a[i] * b[i] + size_of(a.shape) + norm(a.shape)
    # END {WORD}
"""
"""The toy reference: its kernel calls given code of the grader's file and of its own."""


@cache
def toy_trust() -> Trust:
    files = {"module9/__init__.py": "", "module9/helpers.py": HELPERS, "module9/kern.py": KERNEL}
    return trusted_code(Tree(files, TOY.files), TOY)


def toy(body: str, extra: str = "", given: str = "", helpers: str = HELPERS) -> list[str]:
    """What the reading finds in the toy submission: the handout's kernel filled with
    ``body``, ``extra`` appended to its file, ``given`` in place of its given ``norm``."""
    handout = stub_text(KERNEL, "module9/kern.py")
    if given:
        handout = handout.replace("int(np.prod(shape))", given)
    source, used = fill_text(handout, {("9.1", "kernel"): body})
    assert used
    files = {"module9/__init__.py": "", "module9/helpers.py": helpers,
             "module9/kern.py": source + extra}  # fmt: skip
    return [f.message() for f in library_work(Tree(files, TOY.files), TOY, toy_trust())]


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
        ("f = getattr\nout[:] = f(np, 'dot')(a, b)", "", "getattr()"),
        ("out[:] = np.__dict__['matmul'](a, b)", "", "the attribute .__dict__"),
        ("out[:] = einsum('ij,jk', a, b)", "\nfrom numpy import einsum\n", "NumPy's numpy.einsum"),
        ("out[:] = xp.dot(a, b)", "\nxp = np\n", "NumPy's xp.dot"),
        ("out[:] = xp.zeros(3)", "\nxp = np\n", "NumPy itself, as a value"),
        ("xp = np\nout[:] = xp.dot(a, b)", "", "NumPy's xp.dot"),
        ("out[:] = mm(a, b)", "\nmm = np.matmul\n", "NumPy's np.matmul"),
        ("out[:] = la.inv(a)", "\nimport scipy.linalg as la\n", "the module scipy"),
        ("import torch\nout[:] = 0", "", "an import of torch"),
        ("out[:] = helper(a, b)", "\ndef helper(a, b):\n    return a @ b\n", "the operator @"),
        ("out[:] = __import__('numpy').dot(a, b)", "", "__import__()"),
        ("out[:] = operator.matmul(a, b)", "\nimport operator\n", "the module operator"),
        ("out[:] = sum(a)", "\nfrom numpy import *\n", "NumPy's numpy.sum"),
        ("out[:] = mystery(a, b)", "", "mystery, bound nowhere the reading sees"),
        ("out[:] = call(np, a)", "\ndef call(m, a):\n    return a\n", "NumPy itself, as a value"),
        ("out[:] = 0", "\nfrom module9.helpers import blas\nkernel = lambda o, a, b: blas(a, b)\n",
         "the operator @"),
        ("out[:] = 0", "\nfrom module9.helpers import blas as kernel\n", "the operator @"),
        ("out[:] = 0", "\nfrom numba.extending import intrinsic\nkernel = intrinsic(norm)\n",
         "a part of Numba that emits code of its own"),
        ("out[:] = 0", "\ndef _patch():\n    global kernel\n    kernel = np.dot\n",
         "NumPy's np.dot"),
        ("out[:] = twice(a)", "\nfrom module9.helpers import *\ntwice = blas\n",
         "the operator @"),
        ("out[:] = np.random.rand(3)", "", "NumPy's np.random.rand"),
        ("out[:] = np.ndarray.dot(a, b)", "", "NumPy's np.ndarray.dot"),
        ("out[:] = zeros(3)", "\nfrom numpy import zeros\n\n\ndef _p():\n    np.zeros = np.dot\n",
         "NumPy's np.dot"),
    ],
)  # fmt: skip
def test_each_form_of_what_the_kernel_rule_refuses_is_found(body: str, extra: str,
                                                            what: str) -> None:  # fmt: skip
    uses = toy(body, extra)
    assert any(what in u for u in uses), uses


def test_own_loops_and_given_code_the_reference_reaches_are_not_library_work() -> None:
    loops = """
for i in prange(len(out)):
    total = 0.0
    for k in range(a.shape[0]):
        total += a[k] * b[k]
    out[i] = total + size_of(a.shape) + norm(a.shape)  # given code: np.prod, not the task's
tmp = np.empty(3, np.int32)
"""
    assert toy(loops) == []
    scalar = "for i in range(len(out)):\n    out[i] = math.exp(a[i]) + m.log(a[i]) + m.tanh(a[i])"
    assert toy(scalar, "\nimport math\nimport math as m\n") == []
    assert toy("out[:] = a.exp()", "\nimport math\n") == [
        "module9/kern.py:14 in kernel: the method .exp() (a library's loop)"
    ]


def test_given_code_is_trusted_only_unchanged_and_where_the_reference_reaches_it() -> None:
    # changed given code of the task's own file is the student's: read
    assert toy("out[0] = norm(a.shape)", given="int(np.dot(shape, shape))") == [
        "module9/kern.py:9 in norm (reached from kernel): NumPy's np.dot"
    ]
    # given code of the grader's file that only the submission reaches: read
    assert toy("out[:] = blas(a, b)", "\nfrom module9.helpers import blas\n") == [
        "module9/helpers.py:10 in blas (reached from kernel): the operator @ (a library's "
        "matrix multiply)"
    ]
    # a name another given file imports is that file's binding, and read where reached
    assert toy("out[:] = helpers.np.matmul(a, b)", "\nfrom module9 import helpers\n") == [
        "module9/kern.py:14 in kernel: NumPy's helpers.np.matmul"
    ]


def test_code_is_read_as_python_reads_it_and_what_cannot_be_read_is_not_credited(
    tmp_path: Path,
) -> None:
    """A coding line is honoured (in UTF-7, ``+AAo-`` is a new line: what reads as a
    comment in UTF-8 is code), and code nested past what ``ast`` holds, which Python may
    still compile, is a finding (fail closed)."""
    source, _ = fill_text(stub_text(KERNEL, "module9/kern.py"), {("9.1", "kernel"): "out[:] = 0"})
    folder = tmp_path / "module9"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "helpers.py").write_text(HELPERS)
    hidden = "# coding: utf-7\n" + source + "\n# +AAo-kernel = np.matmul\n"
    (folder / "kern.py").write_bytes(hidden.encode("ascii"))
    uses = library_work(read_tree(tmp_path, TOY.files), TOY, toy_trust())
    assert [u.what for u in uses] == ["NumPy's np.matmul"], uses
    deep = source.replace("out[:] = 0", "out[0] = " + " + ".join(["a[0]"] * 30_000))
    (folder / "kern.py").write_text(deep)
    uses = library_work(read_tree(tmp_path, TOY.files), TOY, toy_trust())
    assert [u.message() for u in uses] == [
        "module9/kern.py:1 in <module>: code nested too deeply to be read (what cannot be "
        "read is not credited)"
    ]


def test_a_cuda_kernel_that_calls_back_to_the_host_is_found() -> None:
    body = "from numba import cuda\n\n@cuda.jit\ndef k(out, a):\n    host(out, a)\n\nk(out, a)"
    uses = toy(body, "\n\ndef host(out, a):\n    out[:] = a\n")
    assert any("a call from the CUDA kernel k to host, a host function" in u for u in uses), uses
    device = body.replace("def k(out, a):\n    host", "def k(out, a):\n    dev")
    extra = "\n\nfrom numba import cuda\n\n\n@cuda.jit(device=True)\ndef dev(out, a):\n    pass\n"
    assert toy(device, extra) == []


# =========================================================================================
# The course itself: the six attacks, honest code, the reference and the plain solutions
# =========================================================================================

DECLARED = frozenset(path for task in TASKS for path in task.files)
PLAIN = {**stage2.BODIES, **stage4.BODIES, **stage5.BODIES, **stage6.BODIES}
OWN = [t for t in TASKS if t.own_work]


@cache
def reference() -> Tree:
    return read_tree(ROOT, DECLARED)


@cache
def trust(task_id: str) -> Trust:
    return trusted_code(reference(), get_task(task_id))


def course(extra: dict[str, str] | None = None,
           bodies: dict[tuple[str, str], str] | None = None) -> Tree:  # fmt: skip
    """A submission as the grader's workspace holds it: the handout with the plain
    solutions (``bodies`` over them) in every declared file, ``extra`` appended to its
    file, the grader's own copy of every other file."""
    filled = {**PLAIN, **(bodies or {})}
    files = {}
    for path, text in reference().files.items():
        if path in DECLARED:
            text, _ = fill_text(stub_text(text, path), filled)
        files[path] = text + (extra or {}).get(path, "")
    return Tree(files, DECLARED)


def findings(tree: Tree, task_id: str) -> list[str]:
    return [f.message() for f in library_work(tree, get_task(task_id), trust(task_id))]


BLAS = """

def blas_product(a, b):
    return np.dot(a, b)
"""

NUMPY_SOFTMAX = """

def _np_softmax_rows(x, out, period, shift):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    out[:] = e / e.sum(axis=-1, keepdims=True)


softmax_rows = _np_softmax_rows
gelu_forward = lambda x, out: np.copyto(out, 0.5 * x * (1 + np.tanh(0.8 * x)))  # noqa: E731
"""

ENCODE_CAST = "out[:] = x.view(np.float32).astype(bfloat16).view(np.uint16)"
DECODE_CAST = "out[:] = bits.view(bfloat16).astype(np.float32).view(np.uint32)"

ATTACKS: dict[str, tuple[str, dict[str, str], dict[tuple[str, str], str], str]] = {
    "1. gemm rebound to a BLAS wrapper after its def": ("2.3", {"module2/fast_matmul.py": """

def _blas(out, o_base, o_row, o_col, a, a_base, a_row, a_col, b, b_base, b_row, b_col, m, n, k):
    size = out.itemsize
    A = as_strided(a[a_base:], (m, k), (a_row * size, a_col * size))
    B = as_strided(b[b_base:], (k, n), (b_row * size, b_col * size))
    O = as_strided(out[o_base:], (m, n), (o_row * size, o_col * size))
    O += A.dot(B)


from numpy.lib.stride_tricks import as_strided  # noqa: E402

gemm = _blas
"""}, {}, "in _blas (reached from gemm): the method .dot()"),
    "1. gemm = np.matmul": ("2.3", {"module2/fast_matmul.py": "\ngemm = np.matmul\n"}, {},
                            "in gemm: NumPy's np.matmul"),
    "2. a lambda bound to the task's function": ("2.3", {"module2/fast_matmul.py": """
_mm = lambda a, b: a @ b  # noqa: E731
gemm = lambda out, ob, orow, ocol, a, ab, ar, ac, b, bb, br, bc, m, n, k: _mm(a, b)  # noqa: E731
"""}, {}, "in _mm (reached from gemm): the operator @"),
    "2. a lambda bound to a helper it calls": (
        "2.3", {"module2/fast_matmul.py": "\nhelper = lambda a, b: a @ b  # noqa: E731\n"},
        {("2.3", "gemm"): "helper(a, b)"}, "in helper (reached from gemm): the operator @"),
    "3. from module1.tensor_ops import helper": ("2.3", {
        "module1/tensor_ops.py": BLAS,
        "module2/fast_matmul.py": "\nfrom module1.tensor_ops import blas_product  # noqa\n",
    }, {("2.3", "gemm"): "blas_product(a, b)"},
        "in blas_product (reached from gemm): NumPy's np.dot"),
    "3. import module1.tensor_ops as t; t.helper(...)": ("2.3", {
        "module1/tensor_ops.py": BLAS,
        "module2/fast_matmul.py": "\nimport module1.tensor_ops as t  # noqa\n",
    }, {("2.3", "gemm"): "t.blas_product(a, b)"}, "in blas_product (reached from gemm)"),
    "3. from module1.tensor_ops import *": ("2.3", {
        "module1/tensor_ops.py": BLAS,
        "module2/fast_matmul.py": "\nfrom module1.tensor_ops import *  # noqa\n",
    }, {("2.3", "gemm"): "blas_product(a, b)"}, "in blas_product (reached from gemm)"),
    "3. an import inside gemm": ("2.3", {"module1/tensor_ops.py": BLAS}, {
        ("2.3", "gemm"): "from module1.tensor_ops import blas_product\nblas_product(a, b)",
    }, "in blas_product (reached from gemm)"),
    "3. gemm patched in from another declared file": ("2.3", {"module1/tensor_ops.py": BLAS + """

def _patch():
    import module2.fast_matmul as fm

    fm.gemm = blas_product
"""}, {}, "in blas_product (reached from _patch)"),
    "3. gemm patched in through a local alias": ("2.3", {"module1/tensor_ops.py": BLAS + """

def _patch():
    import module2

    m = module2.fast_matmul
    m.gemm = blas_product
"""}, {}, "in blas_product (reached from _patch)"),
    "3. gemm patched in by setattr": ("2.3", {"module1/tensor_ops.py": BLAS + """
import module2.fast_matmul  # noqa: E402

setattr(module2.fast_matmul, "gemm", blas_product)
"""}, {}, "in blas_product (reached from <module>)"),
    "3. gemm patched in through sys.modules": ("2.3", {"module1/tensor_ops.py": BLAS + """
import sys  # noqa: E402

sys.modules["module2.fast_matmul"].gemm = blas_product
"""}, {}, "the module sys (sys.modules)"),
    "4. 5.5's kernels in NumPy, rebound": ("5.5", {"module5/fused.py": NUMPY_SOFTMAX}, {},
                                          "in _np_softmax_rows (reached from softmax_rows)"),
    "4. 5.5's kernel as a lambda": ("5.5", {"module5/fused.py": NUMPY_SOFTMAX}, {},
                                   "in gelu_forward: NumPy's np.tanh"),
    "5. 6.3's codec as one cast each way": ("6.3", {}, {
        ("6.3", "bfloat16_encode"): ENCODE_CAST, ("6.3", "bfloat16_decode"): DECODE_CAST,
    }, "in bfloat16_encode: the conversion .astype(bfloat16)"),
    "5. 6.3's codec by np.asarray(..., dtype=bfloat16)": ("6.3", {}, {
        ("6.3", "bfloat16_encode"):
            "out[:] = np.asarray(x.view(np.float32), dtype=bfloat16).view(np.uint16)",
    }, "in bfloat16 (reached from bfloat16_encode): the module ml_dtypes"),
    "5. 6.3's codec by a dtype's name": ("6.3", {}, {
        ("6.3", "bfloat16_encode"): ENCODE_CAST.replace("(bfloat16)", "('bfloat16')"),
    }, "the conversion .astype('bfloat16')"),
    "6. 6.1's ring as Allreduce, the check's counter bumped": ("6.1", {}, {
        ("6.1", "ring_all_reduce"): (
            "comm._comm.Allreduce(mpi().IN_PLACE, buffer)\n"
            "comm.sent += 2 * (comm.Get_size() - 1) * buffer.nbytes // comm.Get_size()\n"
            "return buffer"),
    }, "in ring_all_reduce: the collective .Allreduce()"),
    "6. 6.1's ring as the given mpi_all_reduce": ("6.1", {}, {
        ("6.1", "ring_all_reduce"): "return mpi_all_reduce(comm.world, buffer)",
    }, "in mpi_all_reduce (reached from ring_all_reduce): the collective .Allreduce()"),
    "6. 6.1's ring through mpi4py's world": ("6.1", {}, {
        ("6.1", "ring_all_reduce"):
            "from mpi4py import MPI\nMPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, buffer)\nreturn buffer",
    }, "in ring_all_reduce: an import of mpi4py.MPI"),
    "6. 6.1's ring as a lower-case collective": ("6.1", {}, {
        ("6.1", "ring_all_reduce"): "buffer[:] = sum(comm.allgather(buffer))\nreturn buffer",
    }, "in ring_all_reduce: the collective .allgather()"),
}  # fmt: skip
"""Each attack: its task, text appended to files, bodies over the plain solution's, and
a finding it must give (``path:line`` may be left out)."""


@pytest.mark.parametrize("name", list(ATTACKS))
def test_each_attack_is_found_where_it_runs(name: str) -> None:
    task_id, extra, bodies, what = ATTACKS[name]
    tree = course(extra, bodies)
    uses = findings(tree, task_id)
    assert any(what in u for u in uses), uses
    local = library_work(tree, get_task(task_id), local_trust(tree, get_task(task_id)))
    assert [f.message() for f in local] == uses  # the student's test says the same


def test_the_6_1_rule_is_the_messages_rule_not_the_kernels() -> None:
    """NumPy adds the ring's chunks: fine for 6.1; a collective is not."""
    ring = stage6.RING.replace("buffer[c:d] = buffer[c:d] + got", "np.add(buffer[c:d], got, "
                               "out=buffer[c:d])")  # fmt: skip
    assert findings(course(bodies={("6.1", "ring_all_reduce"): ring}), "6.1") == []


HONEST_HELPER = '''

def dot_into(out, base, a, a_base, a_step, b, b_base, b_step, k):
    """One dot product, added to ``out[base]``: a loop."""
    total = out[base]
    for p in range(k):
        total += a[a_base + p * a_step] * b[b_base + p * b_step]
    out[base] = total


def summary(x):
    """Stage 1's work may use NumPy: no kernel reaches this."""
    return np.sum(x) + np.linalg.norm(x) + (x @ x)
'''

CALLS_HELPER = """
for i in prange(m):
    for j in range(n):
        dot_into(out, o_base + i * o_row + j * o_col, a, a_base + i * a_row, a_col,
                 b, b_base + j * b_col, b_row, k)
"""

SAME_FILE = '''

@njit(inline="always")
def _row(out, o, a, ai, ac, b, bj, br, k):
    """One dot product in the task's own file."""
    total = 0.0
    for p in range(k):
        total += a[ai + p * ac] * b[bj + p * br]
    out[o] += total
'''


@pytest.mark.parametrize(
    ("extra", "gemm"),
    [
        ({"module1/tensor_ops.py": HONEST_HELPER,
          "module2/fast_matmul.py": "\nfrom module1.tensor_ops import dot_into  # noqa\n"},
         CALLS_HELPER),
        ({"module1/tensor_ops.py": HONEST_HELPER,
          "module2/fast_matmul.py": "\nimport module1.tensor_ops as t  # noqa\n"},
         CALLS_HELPER.replace("dot_into(", "t.dot_into(")),
        ({"module2/fast_matmul.py": SAME_FILE},
         "for i in prange(m):\n    for j in range(n):\n        _row(out, o_base + i * o_row + "
         "j * o_col, a, a_base + i * a_row, a_col, b, b_base + j * b_col, b_row, k)"),
        ({"module1/tensor_ops.py": HONEST_HELPER}, stage2.BODIES[("2.3", "gemm")]),
    ],
    ids=["helper imported from module1", "helper as module1.attr", "helper in the same file",
         "NumPy in module1 that no kernel reaches"],
)  # fmt: skip
def test_honest_code_across_files_is_not_library_work(extra: dict[str, str], gemm: str) -> None:
    tree = course(extra, {("2.3", "gemm"): gemm})
    assert findings(tree, "2.3") == []
    assert library_work(tree, get_task("2.3"), local_trust(tree, get_task("2.3"))) == []


@pytest.mark.parametrize("task", OWN, ids=[t.id for t in OWN])
def test_the_reference_and_the_plain_solutions_keep_their_rules(task: Task) -> None:
    """With the grader's trust, and with the student's (the shipped list of given code)."""
    assert findings(reference(), task.id) == []
    assert library_work(reference(), task, local_trust(reference(), task)) == []
    if any(task_id == task.id for task_id, _ in PLAIN):
        plain = course()
        assert findings(plain, task.id) == []
        assert library_work(plain, task, local_trust(plain, task)) == []


def test_the_reference_is_trusted_as_the_reference_only_for_its_own_generated_kernel() -> None:
    """Read as a student's (trusting only the handout's given code and the grader's own
    files), the reference breaks the kernel rule in one place only: task 2.3's
    register-tile generator (``exec`` of the kernel's source, an LLVM prefetch
    intrinsic), in an ``omit`` region of module2/fast_matmul.py. It is credited because
    that is the reference's own code, unchanged, where the reference runs it."""
    path = "module2/fast_matmul.py"
    text = reference().files[path]
    generator = text[: text.index("def rank1_kernel_source")].count("\n") + 1
    (omitted,) = [r for r in find_regions(text, path) if r.omit and r.begin < generator < r.end]
    handout = handout_tree(reference())
    for task in OWN:
        reach = walk(reference(), task)
        own = {n.key for n in reach.nodes if any(n.path == p for p in REFERENCE_CODE)}
        given = {n.key for m in handout.modules() for n in m.nodes}
        uses = library_work(reference(), task, Trust(frozenset(own | given),
                                                      frozenset(own | given)))  # fmt: skip
        assert uses, task.id
        for use in uses:
            assert use.path == path and omitted.begin < use.line < omitted.end, use.message()


def test_the_shipped_given_code_is_the_references() -> None:
    """``autograder/own_work_given.py`` is what the reference gives (else, after a change
    to given code a reference reaches: ``python -m autograder.own_work``)."""
    shipped = (ROOT / "autograder" / "own_work_given.py").read_text(encoding="utf-8")
    assert shipped == given_source(ROOT), "run: python -m autograder.own_work"


def test_a_collective_behind_a_bumped_byte_counter_answers_otherwise_in_the_check() -> None:
    """The 6.1 check counts messages, their bytes both ways and their peers: an all-reduce
    done by a collective, with the byte counter bumped by hand, answers otherwise than the
    ring (here on thread ranks, whose ``allgather`` stands in for MPI's collective)."""
    from module6.distributed import ring_all_reduce
    from tests.module6 import threads
    from tests.module6.checks import ring_answer
    from tests.module6.ranks import PointToPoint

    n, k = 1001, 3
    sent = [0] * k  # what each rank of the ring sent: the cheat bumps its counter to it

    def run(cheat: bool) -> dict[str, object]:
        def rank(comm: threads.ThreadComm) -> tuple[np.ndarray, np.ndarray]:
            counted = PointToPoint(comm)
            x = np.random.default_rng([n, comm.Get_rank()]).normal(size=n)
            if cheat:
                threads.thread_sum(counted._comm, x)
                counted.sent += sent[comm.Get_rank()]
            else:
                ring_all_reduce(counted, x)
                sent[comm.Get_rank()] = counted.sent
            return x, counted.counts()

        out = threads.run_ranks(k, rank)
        same = all(np.array_equal(r, out[0][0]) for r, _ in out)
        return ring_answer(n, "float64", k, out[0][0], same, np.stack([c for _, c in out]))

    ring, cheat = run(False), run(True)
    assert ring["bytes sent in all"] == cheat["bytes sent in all"]  # the counter, bumped
    assert ring["2 (K - 1) messages each way on every rank"] is True
    assert cheat["2 (K - 1) messages each way on every rank"] is False
    assert ring["bytes received in all"] != cheat["bytes received in all"]


# =========================================================================================
# The grade
# =========================================================================================

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
        ("6.3", "bfloat16_encode"): ENCODE_CAST,
        ("6.3", "bfloat16_decode"): stage6.DECODE,
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
        report = grade(sub, root=ROOT, task_ids=["2.1", "2.2", "2.3", "3.1", "6.3"],
                       limits=Limits(per_task_seconds=600))  # fmt: skip
    scores = {s.task.id: s for s in report.scores}
    assert scores["2.2"].score == scores["2.2"].task.points, scores["2.2"].report()
    expected = [("2.1", "NumPy's np.exp"), ("2.1", "NumPy's np.add.reduce"),
                ("2.3", "the operator @"), ("2.3", "an import of numpy.lib.stride_tricks"),
                ("3.1", "a call from the CUDA kernel"),
                ("6.3", "the conversion .astype(bfloat16)")]  # fmt: skip
    for task_id, what in expected:
        score = scores[task_id]
        assert score.score == 0 and score.passed == 0, score.report()
        assert score.problem.startswith(f"not credited: task {task_id} asks for your own")
        assert what in score.problem, score.problem
        assert all(why.startswith("not credited") for _, why in score.failures)


def test_the_students_report_gives_library_work_nothing_as_the_grader_does() -> None:
    from autograder.status import OWN_WORK_TEST, TaskStatus, library_work_failed

    own = f"tests/module2/{OWN_WORK_TEST}[2.3]"
    outcomes = {own: "failed", "tests/module2/test_fast_matmul.py::test_x": "passed"}
    assert library_work_failed(outcomes, outcomes.get)
    assert not library_work_failed({own: "passed"}, {own: "passed"}.get)
    task = get_task("2.3")
    assert TaskStatus(task, 13, 14, False).points == pytest.approx(task.points * 13 / 14)
    assert TaskStatus(task, 13, 14, False, not_credited=True).points == 0.0


def test_two_readings_at_once_read_each_tree_as_alone(tmp_path: Path) -> None:
    # Before: the release grades the handout and the reference in two threads; read at
    # once, the reference's reading saw the handout's (task 2.1 not credited to the
    # reference, "an import of types" that it reached through the other tree's index).
    from concurrent.futures import ThreadPoolExecutor

    from autograder.grade import build_workspace, library_work_of
    from autograder.paths import available_tasks
    from autograder.release import write_handout

    handout = tmp_path / "handout"
    write_handout(ROOT, handout)
    spaces = {}
    for name, tree in (("reference", ROOT), ("handout", handout)):
        spaces[name] = tmp_path / f"work-{name}"
        spaces[name].mkdir()
        build_workspace(tree, ROOT, spaces[name], None, False)
    tasks = [t for t in available_tasks(ROOT) if t.own_work]

    def read(workspace: Path) -> dict[str, list[str]]:
        return {t.id: library_work_of(t, workspace, ROOT) for t in tasks}

    with ThreadPoolExecutor(2) as pool:
        for _ in range(2):
            at_once = [pool.submit(read, spaces[n]) for n in ("handout", "reference")]
            assert at_once[1].result() == {t.id: [] for t in tasks}
            assert at_once[0].result() == read(spaces["handout"])
