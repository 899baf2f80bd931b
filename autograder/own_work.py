"""Own work is judged by what runs: a static reading of the code a task's functions reach.

Some tasks exist to have the student write a computation (the registry's ``own_work``):
the kernels of stages 2-4, the fused kernels of 5.5, the bfloat16 codec of 6.3, the
ring all-reduce of 6.1. A library gives the same values (NumPy's BLAS beats every speed
bar a student's loop must meet; one dtype cast does the codec; MPI's ``Allreduce`` is
the ring's sum), and a grader of data cannot tell the difference. So, before crediting
such a task, the trusted grader reads the submitted source (``ast`` only: it never runs
it) and refuses the task when code its functions can run breaks the task's rule.

**What is read: everything the task's functions can reach.** The walk starts from the
functions the registry lists and follows every name they load to *all* its bindings
(:mod:`autograder.code_index`): a later ``gemm = np.matmul`` or ``helper = lambda a, b:
a @ b`` counts as much as the ``def``; imports are followed into the course's other
files (``from module1.tensor_ops import helper``, ``import module1.tensor_ops as t;
t.helper``, star imports), declared or given; a class reached is read whole; a method
call on an object the reading cannot see (``obj.m(...)``) reaches every ``m`` of the
classes of the declared files; Numba ``overload`` registrations are read with what they
overload; decorators, default values, lambdas and the arguments of ``njit(...)(f)`` are
code like any other; a module reached has its import-time code read too; and code of
the declared files that changes another module's names from outside (``fm.gemm =
...``, ``setattr(np, "zeros", ...)``, ``sys.modules``, ``exec``...) is read wherever the
names it may change are. A name bound nowhere the reading sees is a finding (set at run
time?), and so is every module outside the rule's list (fail closed).

**The rules** (:mod:`autograder.own_work_rules`: ``Kernel``, ``Codec``, ``Messages``),
by the registry's ``own_work``:

* ``kernel`` (2.1-2.3, 3.1-3.4, 4.1, 4.2, 5.5): NumPy beyond allocation, dtypes and
  constants (``NUMPY_ALLOWED``; NumPy itself passed around as a value), the
  operator ``@``, array methods that compute (``COMPUTE_METHODS``), any module but
  Numba (without the parts that emit code of their own: ``intrinsic``, ``numba.core``,
  llvmlite), ``math``/``cmath`` (one number at a time) and a few harmless ones
  (``HARMLESS``); in a CUDA kernel, a call of a host function (which only the
  simulator runs);
* ``codec`` (6.3): the kernel rule, and a dtype conversion that does the codec's work
  — ``.astype`` to anything but an integer type, ``.view``, ``np.asarray``/``np.array``/
  ``np.dtype``... to a half (or unknown) type, anything of ``ml_dtypes``;
* ``messages`` (6.1): no MPI collective may stand in for the ring (a method named like
  one, ``COLLECTIVE``, ``mpi4py`` itself, a private attribute of the communicator,
  a write to an attribute of another object — the check's counters); NumPy is fine
  here (the ring adds chunks with it).

Every rule also refuses the ways around reading: ``getattr``/``setattr``/``exec``/
``eval``/``compile``/``__import__``/``globals()``/``vars()``/``open`` (``DYNAMIC_CALLS``),
a dunder attribute (``np.__dict__``), ``__builtins__``. Files are decoded as Python
decodes them (their coding line: in UTF-7 a "comment" may hold code), and a declared file
nested too deeply for ``ast`` to hold, which Python may still compile, is a finding
(``TOO_DEEP``): what cannot be read is not credited.

**Trust: the reference decides.** The walk runs on the grader's reference too; what it
reaches is the trusted code of the task (:func:`trusted_code`): each node's key names
its file, what it binds and its source, so a submission's node is trusted only when it
is that very code — the handout's given code unchanged (the handout's version of a node
the reference reaches counts), or the reference's own — and only where the reference's
functions of the same task reach it. And trust is all or nothing along the walk: a node
is trusted only when everything it reaches is trusted too, so a trusted ``exec`` or
``getattr`` fed by changed code is read like the student's. Every other node reached is
read: the student's code always, and given code that only the submission reaches (a
given helper that uses NumPy's routines, ``mpi_all_reduce``, the handout's
``bfloat16`` dtype).

**The student's local test** (``tests/own_work.py``) runs the same reading on the
student's own tree. The reference is not there, so the trusted keys come from
:mod:`autograder.own_work_given`: the handout's nodes that the reference reaches, per
task, generated from the reference (``python -m autograder.own_work``; a test of the
tooling keeps it equal to what the reference gives). A tree with solution regions is the
reference itself, and is trusted by its own walk. The two rules are the same rule: a
submission whose local test passes loses no task to this reading in the grade, and the
other way round, as long as the handout's given files are the grader's (the grader uses
its own copy of every file the registry does not declare).

**What it cannot see** (said in ``autograder/README.md``'s threat model too): a patch
made at run time, in a function of a declared file that nothing of the task reaches,
through an object the reading cannot trace to a module or to a name imported from one
(a parameter, what a call returns, an element of a container); a method of a class of
a *given* file called on an object (only the declared files' classes are followed by a
method's name, and not for the names of arrays', containers' and communicators'
methods, ``OBJECT_METHODS``); what given code that the reference runs does by its
own dynamic means (``jit_functions`` compiles stage 0's operators by name: they stay
the student's, scalars in and out); NumPy's arithmetic operators on whole arrays
(``a + b``), which no rule names; work done outside the task's functions' reach
altogether (given code of the task's file, changed to compute with a library instead
of calling the task's function, serves only a check that goes through it).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from autograder.code_index import (
    COURSE,
    Builtin,
    Ext,
    Node,
    Scoped,
    Tree,
    Unbound,
    Value,
    walk_roots,
)
from autograder.own_work_rules import (
    DYNAMIC_CALLS,
    OBJECT_METHODS,
    TOO_DEEP,
    Rule,
    rule_of,
)
from autograder.task import Task


@dataclass(frozen=True)
class Finding:
    """One use of what a task's rule refuses, where and how the walk reached it."""

    path: str
    line: int
    function: str
    """The node it is in: ``gemm``, ``Conv1dFun.forward``, ``<module>``."""
    what: str
    via: str = ""
    """How it was reached (``reached from gemm -> _blas``), empty in a task's function."""

    def message(self) -> str:
        reached = f" ({self.via})" if self.via else ""
        return f"{self.path}:{self.line} in {self.function}{reached}: {self.what}"


# =========================================================================================
# Reading one node
# =========================================================================================


@dataclass
class _Read:
    """What reading one node found: its findings and the nodes it reaches."""

    findings: list[tuple[int, str]] = field(default_factory=list)
    reaches: list[Node] = field(default_factory=list)

    def find(self, line: int, what: str | None) -> None:
        if what is not None:
            self.findings.append((line, what))

    def reach(self, nodes: Iterable[Node]) -> None:
        for node in nodes:
            if node not in self.reaches:
                self.reaches.append(node)


def _is_cuda_jit(decorator: ast.AST) -> bool:
    text = ast.unparse(decorator)
    return "cuda.jit" in text and "device=True" not in text


def _kernels(roots: list[ast.AST]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """CUDA kernels in some code: functions decorated with ``cuda.jit`` (not device
    functions) and functions passed to ``cuda.jit(...)``."""
    launched: set[str] = set()
    for root in roots:
        for sub in ast.walk(root):
            if isinstance(sub, ast.Call) and "cuda.jit" in ast.unparse(sub.func):
                launched |= {a.id for a in sub.args if isinstance(a, ast.Name)}
    for root in roots:
        for sub in ast.walk(root):
            if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                if any(_is_cuda_jit(d) for d in sub.decorator_list) or sub.name in launched:
                    yield sub


def _host_function(node: Node) -> bool:
    """A module-level function that is not a CUDA device function (or a lambda)."""
    stmt = node.stmt
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and not node.in_class:
        return not any("cuda" in ast.unparse(d) for d in stmt.decorator_list)
    return isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Lambda)


def read_node(tree: Tree, node: Node, rule: Rule) -> _Read:
    """Read one node: what ``rule`` refuses in it, and the nodes its names reach."""
    out = _Read()
    if node.module.parsed is None:
        return out
    scoped = tree.scoped(node)
    for sub, parent in walk_roots(node, scoped.skipped):
        line = int(getattr(sub, "lineno", node.line) or node.line)
        if isinstance(sub, ast.BinOp | ast.AugAssign) and isinstance(sub.op, ast.MatMult):
            out.find(line, rule.matmul())
        if isinstance(sub, ast.Attribute):
            if sub.attr.startswith("__") and sub.attr.endswith("__"):
                out.find(line, f"the attribute .{sub.attr} (a way around the rule)")
            if isinstance(sub.ctx, ast.Store | ast.Del) and not (
                isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls")
            ):
                out.find(line, rule.store(sub.attr))
            if not (isinstance(parent, ast.Attribute) and parent.value is sub):
                _chain(tree, scoped, sub, parent, line, rule, out)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            if sub.id == "__builtins__":
                out.find(line, "the name __builtins__ (a way around the rule)")
            if not (isinstance(parent, ast.Attribute) and parent.value is sub):
                values = scoped.of(sub)
                called = isinstance(parent, ast.Call) and parent.func is sub
                if values is not None:
                    _values(tree, values, sub.id, not called, line, rule, out)
        elif isinstance(sub, ast.Import | ast.ImportFrom):
            _imports(tree, node, sub, line, rule, out)
        if isinstance(sub, ast.Call):
            func = sub.func
            values = (scoped.chain(func) if isinstance(func, ast.Name | ast.Attribute)
                      else None)  # fmt: skip
            for what in rule.call(sub, values, scoped):
                out.find(line, what)
    if rule.host_calls:
        for kernel in _kernels(node.roots):
            for sub in ast.walk(kernel):
                if not isinstance(sub, ast.Call):
                    continue
                callee = sub.func
                values = (scoped.chain(callee) if isinstance(callee, ast.Name | ast.Attribute)
                          else None)  # fmt: skip
                for value in values or []:
                    if isinstance(value, Node) and _host_function(value):
                        out.find(sub.lineno, (
                            f"a call from the CUDA kernel {kernel.name} to "
                            f"{ast.unparse(callee)}, a host function (only the CUDA simulator "
                            "runs it)"))  # fmt: skip
                        break
    if node.in_class:  # a class's statement: its header (decorators, bases) runs too
        out.reach(n for n in node.module.classes.get(node.in_class, []) if n.is_class)
    return out


def _values(tree: Tree, values: list[Value], shown: str, as_value: bool, line: int, rule: Rule,
            out: _Read) -> None:  # fmt: skip
    """What a name (or chain) may be: nodes to reach, outside names to judge."""
    for value in values:
        if isinstance(value, Node):
            out.reach([value, *tree.overloads_of(value)])
            if value.is_class:
                out.reach(tree.class_of(value))
        elif isinstance(value, Ext):
            out.find(line, rule.outside(value, shown, as_value))
            out.reach(tree.overloads_of(value))
        elif isinstance(value, Builtin):
            if value.name in DYNAMIC_CALLS:
                out.find(line, f"{value.name}() (a way around the rule)")
        elif isinstance(value, Unbound):
            out.find(line, f"{value.name}, bound nowhere the reading sees (set at run time?)")


def _chain(tree: Tree, scoped: Scoped, expr: ast.Attribute, parent: ast.AST | None, line: int,
           rule: Rule, out: _Read) -> None:  # fmt: skip
    """A whole chain ``a.b.c``: followed through modules and classes as far as it goes;
    an attribute of an object the reading cannot see is judged by its name, and a call
    of it reaches the declared files' methods of that name."""
    parts: list[ast.Attribute] = []
    base: ast.AST = expr
    while isinstance(base, ast.Attribute):
        parts.append(base)
        base = base.value
    parts.reverse()
    values: list[Value] | None = scoped.of(base) if isinstance(base, ast.Name) else None
    if isinstance(base, ast.Name) and values is not None:
        for value in values:  # the root itself: reached, judged (not as a value)
            if isinstance(value, Node):
                out.reach([value])
            elif isinstance(value, Unbound | Builtin):
                _values(tree, [value], base.id, False, line, rule, out)
    called = isinstance(parent, ast.Call) and parent.func is expr
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if values is None or (values == [] and index > 0):
            out.find(line, rule.method(part.attr, called and last))
            if last and called and part.attr not in OBJECT_METHODS:
                out.reach(tree.methods_named(part.attr))
            values = None
            continue
        opaque = [v for v in values if isinstance(v, Node) and not v.is_class
                  and not _alias(v)]  # fmt: skip
        if opaque:  # an object (a node's value): its attribute, by name
            out.find(line, rule.method(part.attr, called and last))
            if last and called and part.attr not in OBJECT_METHODS:
                out.reach(tree.methods_named(part.attr))
        values = [w for v in values for w in tree.attribute(v, part.attr)]
        shown = ast.unparse(part)
        if last:
            _values(tree, values, shown, not called, line, rule, out)
        else:
            for value in values:
                if isinstance(value, Node):
                    out.reach([value])
                elif isinstance(value, Unbound):
                    _values(tree, [value], shown, False, line, rule, out)


def _alias(node: Node) -> bool:
    """An import, or an assignment of a name or chain: the name's value is what it
    names (followed by itself), not an object of the node's making."""
    stmt = node.stmt
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return True
    value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
    while isinstance(value, ast.Attribute):
        value = value.value
    return isinstance(value, ast.Name)


def _imports(tree: Tree, node: Node, stmt: ast.Import | ast.ImportFrom, line: int, rule: Rule,
             out: _Read) -> None:  # fmt: skip
    """An import statement reached: each module it names must be one the rule allows."""
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            value = tree.module_value(alias.name)
            if isinstance(value, Ext) and rule.outside(value, alias.name, False) is not None:
                out.find(line, f"an import of {alias.name}")
        return
    base = node.module.absolute(stmt)
    if COURSE.match(base.split(".")[0]):
        return
    for alias in stmt.names:
        dotted = base if alias.name == "*" else f"{base}.{alias.name}"
        if rule.outside(Ext(dotted, module=alias.name == "*"), dotted, False) is not None:
            out.find(line, f"an import of {dotted}")


# =========================================================================================
# The walk
# =========================================================================================


@dataclass
class Reach:
    """What a task's functions reach in a tree, and what each node read found."""

    nodes: list[Node] = field(default_factory=list)
    edges: dict[int, list[Node]] = field(default_factory=dict)
    parent: dict[int, Node | None] = field(default_factory=dict)
    findings: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    origin: dict[int, str] = field(default_factory=dict)
    """Why a node with no parent is read: ``""`` (a task's function), or a note."""
    from_functions: set[int] = field(default_factory=set)
    """The nodes the task's functions reach (the others only import-time code reaches:
    a module's top level, a patch that may change any module)."""

    def functions_keys(self) -> set[str]:
        return {n.key for n in self.nodes if id(n) in self.from_functions}


def entries(tree: Tree, task: Task) -> list[Node]:
    """The nodes of the functions a task lists (``module2.fast_matmul:gemm``,
    ``module4.fast_conv:Conv1dFun.forward``), every binding of each."""
    found: list[Node] = []
    for spec in task.functions:
        module_name, _, qual = spec.partition(":")
        module = tree.named(module_name)
        if module is None:
            continue
        first, *rest = qual.split(".")
        values = tree.resolve(module, first, builtin=False)
        for attr in rest:
            values = [w for v in values for w in tree.attribute(v, attr)]
        found += [v for v in values if isinstance(v, Node) and v not in found]
    return found


def walk(tree: Tree, task: Task, rule: Rule | None = None) -> Reach:
    """Every node ``task``'s functions can reach in ``tree``, each read by its rule."""
    rule = rule or rule_of(task)
    tree.patches_of("", "")  # found first: every name resolved from here on sees them
    reach = Reach()
    seen: set[int] = set()
    queue: list[Node] = []
    entered: set[str] = set()

    def add(node: Node, parent: Node | None, origin: str = "") -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        reach.nodes.append(node)
        reach.parent[id(node)] = parent
        if parent is None:
            reach.origin[id(node)] = origin
        queue.append(node)

    for node in entries(tree, task):
        add(node, None)
    for node in tree.everywhere():
        add(node, None, "it may change any module")
    while queue:
        node = queue.pop(0)
        for module in [*tree.packages(node.module), node.module]:
            if module.path not in entered:  # its import runs its top-level code
                entered.add(module.path)
                for init in module.init:
                    add(init, None, f"run when {module.name} is imported")
        read = read_node(tree, node, rule)
        reach.findings[id(node)] = read.findings
        reach.edges[id(node)] = read.reaches
        for successor in read.reaches:
            add(successor, node)
    todo = [n for n in reach.nodes if reach.parent[id(n)] is None and not reach.origin[id(n)]]
    reach.from_functions = {id(n) for n in todo}
    while todo:
        for successor in reach.edges.get(id(todo.pop()), []):
            if id(successor) not in reach.from_functions:
                reach.from_functions.add(id(successor))
                todo.append(successor)
    return reach


def _via(reach: Reach, node: Node) -> str:
    """How the walk came to ``node``: ``reached from gemm -> _blas``, or why it is read
    at all (``run when module2 is imported``); empty for a task's function."""
    chain: list[str] = []
    current = reach.parent.get(id(node))
    root = node
    while current is not None:
        chain.append(current.label)
        root = current
        current = reach.parent.get(id(current))
    chain.reverse()
    if len(chain) > 3:
        chain = [chain[0], "...", *chain[-2:]]
    origin = reach.origin.get(id(root), "")
    parts = [f"reached from {' -> '.join(chain)}"] if chain else []
    return "; ".join(parts + ([origin] if origin else []))


@dataclass(frozen=True)
class Trust:
    """The code a submission's task may run unread: keys of the nodes the reference's
    walk of the task reaches (:attr:`Node.key`), and of the handout's versions of them.
    ``functions``: those the task's functions reach; ``anywhere``: those too, and what
    only import-time code reaches. A node the submission's task functions reach is
    trusted when it is in ``functions``; one that only import-time code reaches, when
    it is in ``anywhere``."""

    functions: frozenset[str] = frozenset()
    anywhere: frozenset[str] = frozenset()

    def trusts(self, node: Node, from_functions: bool) -> bool:
        return node.key in (self.functions if from_functions else self.anywhere)


def untrusted(reach: Reach, trust: Trust) -> set[int]:
    """The nodes whose findings count: those that are not trusted code, and those that
    reach any of them (trust is all or nothing along the walk)."""
    bad = {id(n) for n in reach.nodes if not trust.trusts(n, id(n) in reach.from_functions)}
    callers: dict[int, list[int]] = {}
    for source, targets in reach.edges.items():
        for target in targets:
            callers.setdefault(id(target), []).append(source)
    todo = list(bad)
    while todo:
        current = todo.pop()
        for caller in callers.get(current, []):
            if caller not in bad:
                bad.add(caller)
                todo.append(caller)
    return bad


def library_work(tree: Tree, task: Task, trust: Trust | None = None) -> list[Finding]:
    """What ``task``'s rule refuses in the code its functions reach in ``tree``, outside
    the trusted code (:func:`trusted_code`; none by default). First the findings in
    code that is not trusted itself (the student's), then those in trusted code that
    reaches it. A task file that does not parse has no findings (it cannot run)."""
    deep = [p for p in sorted(tree.declared & tree.files.keys()) if tree.module(p).unreadable]
    if deep:  # fail closed: Python may run what the reading cannot hold
        return [Finding(p, 1, "<module>", TOO_DEEP) for p in deep]
    if any(tree.module(p).parsed is None for p in task.files if p in tree.files):
        return []
    trust = trust or Trust()
    try:
        reach = walk(tree, task)
    except RecursionError:
        return [Finding(task.files[0], 1, "<module>", TOO_DEEP)]
    counted = untrusted(reach, trust)
    found: dict[tuple[str, int, str], tuple[bool, Finding]] = {}
    for node in reach.nodes:
        if id(node) not in counted:
            continue
        own = not trust.trusts(node, id(node) in reach.from_functions)
        via = _via(reach, node)
        for line, what in reach.findings.get(id(node), []):
            finding = Finding(node.path, line, node.label, what, via)
            found.setdefault((node.path, line, what), (own, finding))
    files = set(task.files)

    def order(item: tuple[bool, Finding]) -> tuple[bool, bool, str, int]:
        own, finding = item
        return (not own, finding.path not in files, finding.path, finding.line)

    return [finding for _, finding in sorted(found.values(), key=order)]


# =========================================================================================
# Trees and trust
# =========================================================================================


READING = threading.Lock()
"""One reading at a time in a process: the parsed files, indexed modules and trees are
kept between readings and shared by them (the release grades the handout and the
reference in two threads at once; read together, one tree's reading saw the other's)."""

_TREES: dict[tuple[str, frozenset[str], int], Tree] = {}
"""Trees read lately, by folder, declared files and content (a grade reads the same
workspace and reference once per task)."""


def read_tree(root: Path, declared: Iterable[str]) -> Tree:
    """The stage packages of the tree at ``root`` (``moduleN/**.py``)."""
    files: dict[str, str] = {}
    for path in sorted(root.glob("module*/**/*.py")):
        rel = path.relative_to(root)
        if not COURSE.match(rel.parts[0]) or "__pycache__" in rel.parts:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        try:  # as the interpreter decodes it: its coding line (utf-7 hides lines) and all
            files[rel.as_posix()] = importlib.util.decode_source(data)
        except (SyntaxError, UnicodeDecodeError, LookupError):  # it cannot be imported
            files[rel.as_posix()] = data.decode("utf-8", errors="replace")
    key = (str(root), frozenset(declared), hash(tuple(sorted(files.items()))))
    if key not in _TREES:
        while len(_TREES) >= 4:
            del _TREES[next(iter(_TREES))]
        _TREES[key] = Tree(files, declared)
    return _TREES[key]


def handout_tree(reference: Tree, leave_out: Iterable[str] = ()) -> Tree:
    """The handout of a reference tree: its declared files stubbed
    (:func:`autograder.regions.stub_text`), the files in ``leave_out`` left out."""
    from autograder.regions import stub_text

    skip = tuple(leave_out)
    files = {}
    for path, text in reference.files.items():
        if any(path == s or (s.endswith("/") and path.startswith(s)) for s in skip):
            continue
        files[path] = stub_text(text, path) if path in reference.declared else text
    return Tree(files, reference.declared)


def trusted_code(reference: Tree, task: Task, handout: Tree | None = None) -> Trust:
    """The code ``task``'s functions reach in the reference, and the handout's versions
    of it (the same file, the same name): code a submission may run unread, unchanged."""
    memo = ("trust", task.id, task.functions, task.own_work)
    if memo in reference.memo:
        return reference.memo[memo]  # type: ignore[return-value]
    reach = walk(reference, task)
    handout = handout or handout_tree(reference)
    functions = [n for n in reach.nodes if id(n) in reach.from_functions]
    trust = Trust(
        frozenset({n.key for n in functions} | given_code(functions, handout)),
        frozenset({n.key for n in reach.nodes} | given_code(reach.nodes, handout)),
    )
    reference.memo[memo] = trust
    return trust


def given_code(nodes: Iterable[Node], handout: Tree) -> set[str]:
    """The keys of the handout's nodes that match (file and name) one of ``nodes``."""
    names = {(n.path, n.qualname) for n in nodes}
    keys = set()
    for path in sorted({p for p, _ in names}):
        if path in handout.files:
            keys |= {n.key for n in handout.module(path).nodes if (path, n.qualname) in names}
    return keys


def is_reference(tree: Tree, task: Task) -> bool:
    """Whether ``tree`` holds the task's solution regions (it is the reference)."""
    from autograder.regions import RegionError, find_regions

    for path in task.files:
        try:
            if any(r.task_id == task.id for r in find_regions(tree.files.get(path, ""), path)):
                return True
        except RegionError:
            return False
    return False


def local_trust(tree: Tree, task: Task) -> Trust:
    """The trusted code for the student's own tree: its own walk where it is the
    reference, else the handout's given code that the reference reaches, as shipped
    (:mod:`autograder.own_work_given`)."""
    if is_reference(tree, task):
        return trusted_code(tree, task)
    from autograder.own_work_given import GIVEN, KEYS

    functions, anywhere = (
        [KEYS[int(i)] for i in part.split()] for part in GIVEN.get(task.id, ("", ""))
    )
    return Trust(frozenset(functions), frozenset(functions + anywhere))


def shipped_given(reference: Tree, tasks: Iterable[Task]) -> dict[str, tuple[list[str], list[str]]]:
    """What :mod:`autograder.own_work_given` holds: per own-work task, the keys of the
    handout's nodes (its files only) that the reference's walk reaches from the task's
    functions, and those that only import-time code reaches."""
    from autograder.release import REFERENCE_CODE

    handout = handout_tree(reference, REFERENCE_CODE)
    given: dict[str, tuple[list[str], list[str]]] = {}
    for task in tasks:
        if not task.own_work:
            continue
        reach = walk(reference, task)
        functions = given_code([n for n in reach.nodes if id(n) in reach.from_functions], handout)
        anywhere = given_code(reach.nodes, handout) - functions
        given[task.id] = (sorted(functions), sorted(anywhere))
    return given


def given_source(root: Path) -> str:
    """The text of :mod:`autograder.own_work_given` for the reference at ``root``."""
    from autograder.paths import course_tasks

    tasks = course_tasks(root)
    declared = {p for t in tasks for p in t.files}
    given = shipped_given(read_tree(root, declared), tasks)
    keys = sorted({k for pair in given.values() for part in pair for k in part})
    index = {key: i for i, key in enumerate(keys)}
    lines = [
        '"""Generated from the reference by ``python -m autograder.own_work``: do not edit.',
        "",
        "The handout's given code that the reference's walk of each own-work task reaches",
        "(:mod:`autograder.own_work`): what the student's local test (``tests/own_work.py``)",
        "trusts, as the grader does from the reference itself. :data:`KEYS` names each node",
        "(file, what it binds, a digest of its source); :data:`GIVEN` gives, per task, the",
        "indices of those the task's functions reach and of those only import-time code",
        "reaches. ``tests/autograder/test_own_work.py`` keeps it equal to the reference's.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "KEYS: tuple[str, ...] = (",
        *(f'    "{key}",' for key in keys),
        ")",
        "",
        "GIVEN: dict[str, tuple[str, str]] = {",
    ]
    for task_id, (functions, anywhere) in given.items():
        lines.append(f'    "{task_id}": (')
        for part in (functions, anywhere):
            rows = [""]  # rows of at most 80 characters, or one row (as ruff formats it)
            for number in (str(index[k]) for k in part):
                if rows[-1] and len(rows[-1]) + len(number) > 80:
                    rows.append("")
                rows[-1] += f"{number} "
            text = "".join(rows).strip()
            if len(text) <= 89:
                rows = [text]
            lines += [f'        "{row if i < len(rows) - 1 else row.strip()}"'
                      for i, row in enumerate(rows)]  # fmt: skip
            lines[-1] += ","
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    """``python -m autograder.own_work``: write ``autograder/own_work_given.py`` from this
    tree's reference (run it after changing given code a task's reference reaches)."""
    from autograder.paths import ROOT

    out = ROOT / "autograder" / "own_work_given.py"
    out.write_text(given_source(ROOT), encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
