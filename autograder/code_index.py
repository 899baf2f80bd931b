"""An index of a course tree's code, for reading it without running it (``ast`` only).

:mod:`autograder.own_work` follows every name a task's functions can reach, across the
course's files; this module holds what that walk looks up.

* A :class:`Tree`: the stage packages' sources (``moduleN/**.py``) by path, and which
  of them a submission writes (the files the registry declares).
* For each file a :class:`Module`: its top-level code cut into :class:`Node` s, each
  read as a whole: a ``def``; a class's header (decorators, bases) and each statement
  of its body; an import; an assignment; a call run at import time; the header of a
  top-level ``if``/``for``/``with``/``try``/``match`` (their bodies are cut the same
  way). And each name's **bindings**: *every* node that may give the name its value
  at run time, in whatever order they run — a ``def gemm`` and a later ``gemm = ...``;
  ``for``/``with``/``except`` targets; ``X[k] = ...``, ``X.a = ...`` and
  ``X.update(...)``, which change what ``X`` holds; a function that rebinds ``X``
  through ``global X`` or changes it in place — and the file's star imports.
* :meth:`Tree.resolve` and :meth:`Tree.attribute`: what a global name, or
  ``module.attr``, may be: nodes of the course's code (to read), a module of the
  course (:class:`Mod`), a name outside the course (:class:`Ext`: ``numpy.matmul``,
  ``math``), a builtin, or nothing the reading sees (:class:`Unbound`). Imports are
  followed from file to file, and simple aliases (``xp = np``, ``t =
  module1.tensor_ops``) to what they name.
* :class:`Scoped`: one node's names resolved in their scopes (a function's parameters
  and locals are its own; a local import is followed like a global one).
* **Patches** (:meth:`Tree.patches_of`): code of the declared files that changes a
  module's names from outside it — ``fm.gemm = ...``, ``setattr(np, "zeros", ...)``,
  ``X[k] = ...`` on a name imported from a course module, a module passed around as a
  value or a course object's dunder attribute (any of its names), ``globals()`` (any
  name of its file), ``sys.modules``, ``importlib``, ``gc``, ``inspect``, ``ctypes``,
  ``__import__``, a function's ``__globals__`` or ``__code__``,
  ``exec``/``eval``/``compile`` (any name of any module). A name of that module
  resolves to the patch as well as to its own bindings.
* **Overloads** (:meth:`Tree.overloads_of`): Numba's ``@overload(f)`` registrations,
  which compiled code runs where it calls ``f``.

A node's :attr:`Node.key` names its code (its file, what it binds, its source text), so
that the same code in two trees (the reference and a submission) is known as the same.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

COURSE = re.compile(r"module\d+$")
"""The course's own packages (``module0`` ... ``module6``)."""

BUILTINS = frozenset(dir(builtins))

MODULE_GLOBALS = frozenset({
    "__name__", "__file__", "__doc__", "__package__", "__spec__", "__loader__", "__path__",
    "__annotations__", "__debug__", "__class__",
})  # fmt: skip
"""Names every module (or method) has without binding them."""

MUTATORS = frozenset({"update", "setdefault", "append", "extend", "insert", "add", "__setitem__"})
"""Methods that change the container they are called on: ``X.update(...)`` changes
what ``X`` holds, as ``X[k] = ...`` does."""

STAR = "*"
"""In a patch's key: every name of a module, or every module."""

NUMPY_SHADOWS = frozenset({"sum", "max", "min", "abs", "round", "all", "any", "pow"})
"""Builtins that ``from numpy import *`` replaces by NumPy's."""


def is_course(dotted: str) -> bool:
    """Whether a dotted module name is one of the course's (``module2.fast_ops``)."""
    return bool(COURSE.match(dotted.split(".")[0]))


def module_of(path: str) -> str:
    """``module2/fast_ops.py`` -> ``module2.fast_ops``; a package's ``__init__.py`` is
    the package."""
    return path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


@dataclass(frozen=True)
class Mod:
    """A module of the course (its code is in the tree)."""

    name: str


@dataclass(frozen=True)
class Ext:
    """A name outside the course's code, dotted: a module (``numpy``) or a name in one
    (``numpy.matmul``, ``math.exp``). ``module``: bound by an ``import`` statement, so
    a module itself."""

    dotted: str
    module: bool = False

    @property
    def root(self) -> str:
        return self.dotted.split(".")[0]


@dataclass(frozen=True)
class Builtin:
    """A builtin (``range``, ``getattr``)."""

    name: str


@dataclass(frozen=True)
class Unbound:
    """A name that no code the reading sees binds."""

    name: str


Value = object
"""What a name may be: a :class:`Node`, :class:`Mod`, :class:`Ext`, :class:`Builtin` or
:class:`Unbound`."""


@dataclass(eq=False)
class Node:
    """One piece of a module's top-level code, read as a whole."""

    module: Module
    stmt: ast.AST
    """The statement: a ``def``, a class (for its header), one statement of a class's
    body, an assignment...; for a compound statement's header, the compound statement."""
    roots: list[ast.AST]
    """The code to read: the statement, or a header's expressions (not its body)."""
    label: str
    """How a message names it: ``gemm``, ``Conv1dFun.forward``, ``<module>``."""
    qualname: str
    """What it binds, to match it across trees: ``gemm``, ``Conv1dFun.forward``,
    ``a,b``, ``<module>``."""
    text: str
    """Its source, as written."""
    in_class: str = ""
    """The class whose body holds it, if any."""

    @property
    def path(self) -> str:
        return self.module.path

    @property
    def line(self) -> int:
        return int(getattr(self.stmt, "lineno", 0))

    @property
    def is_class(self) -> bool:
        """The header of a top-level class."""
        return isinstance(self.stmt, ast.ClassDef) and not self.in_class

    @cached_property
    def key(self) -> str:
        """Its file, what it binds and its source: two trees' nodes have one key only
        when their code is the same."""
        digest = hashlib.sha256(f"{self.path}\0{self.qualname}\0{self.text}".encode())
        return f"{self.path}:{self.qualname}:{digest.hexdigest()[:20]}"

    def __repr__(self) -> str:
        return f"<Node {self.path}:{self.line} {self.label}>"


def stored_names(target: ast.AST) -> Iterator[str]:
    """Names a target binds (``a``; ``a, (b, *c)``)."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from stored_names(element)
    elif isinstance(target, ast.Starred):
        yield from stored_names(target.value)


def root_name(expr: ast.AST) -> str | None:
    """The name an expression starts from (``X`` of ``X``, ``X.a``, ``X[k].a``,
    ``X.f(...)``), or None."""
    while True:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, ast.Attribute | ast.Subscript | ast.Starred):
            expr = expr.value
        elif isinstance(expr, ast.Call):
            expr = expr.func
        else:
            return None


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
SCOPES = (*FUNCTIONS, ast.ClassDef)


def is_chain(expr: ast.AST) -> bool:
    """A name, or attributes of one (``np``, ``module1.tensor_ops.helper``)."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def walk_here(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that yields a nested function, lambda or class but does not enter
    it (its names are its own)."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        if current is not node and isinstance(current, SCOPES):
            continue
        todo.extend(ast.iter_child_nodes(current))


def bound_names(stmt: ast.AST) -> list[str]:
    """Names a statement binds in its own scope: its targets, not the variables of a
    comprehension in it (theirs), nor a nested function's."""
    inner: set[int] = set()
    for sub in walk_here(stmt):
        if isinstance(sub, COMPREHENSIONS):
            for generator in sub.generators:
                inner |= {id(n) for n in ast.walk(generator.target)}
    return [s.id for s in walk_here(stmt) if isinstance(s, ast.Name)
            and isinstance(s.ctx, ast.Store | ast.Del) and id(s) not in inner]  # fmt: skip


def changed_roots(stmt: ast.AST, modules: frozenset[str] = frozenset()) -> Iterator[str]:
    """Names whose object ``stmt`` changes in place (not looking into nested
    functions): ``X[k] = ...``, ``X.a = ...``, ``del X[k]``, ``X.update(...)`` — the last
    not for ``modules``, names an import binds (``np.add(...)`` is NumPy's ``add``)."""
    for sub in walk_here(stmt):
        if isinstance(sub, ast.Attribute | ast.Subscript) and isinstance(
            sub.ctx, ast.Store | ast.Del
        ):
            if (name := root_name(sub)) is not None:
                yield name
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in MUTATORS
            and (name := root_name(sub.func.value)) is not None
            and name not in modules
        ):
            yield name


@dataclass
class Scope:
    """The names one function (lambda, comprehension, class body) binds itself."""

    kind: str
    """``function`` or ``class`` (a comprehension counts as a function)."""
    names: set[str]
    imports: dict[str, list[ast.Import | ast.ImportFrom]] = field(default_factory=dict)
    declared_global: set[str] = field(default_factory=set)
    aliases: dict[str, list[ast.expr]] = field(default_factory=dict)
    """Locals only ever bound to a name or chain (``xp = np``, ``t = module1.tensor_ops``):
    they are what that names."""


def function_scope(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> Scope:
    """A function's parameters and the names its own body binds (not a nested
    function's), its local imports, and the names it declares ``global``."""
    args = fn.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    params += [a for a in (args.vararg, args.kwarg) if a is not None]
    scope = Scope("function", {a.arg for a in params})
    body: list[ast.AST] = list(fn.body) if isinstance(fn.body, list) else [fn.body]
    nonlocal_: set[str] = set()
    aliases: dict[str, list[ast.expr]] = {}
    for stmt in body:
        _bind_block(stmt, scope, nonlocal_)
        for name, values in scope.aliases.items():
            aliases.setdefault(name, []).extend(values)
        scope.aliases = {}
    stores = {n.id for stmt in body for n in walk_here(stmt)
              if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del)}  # fmt: skip
    counts = {name: sum(1 for stmt in body for n in walk_here(stmt) if isinstance(n, ast.Name)
                        and isinstance(n.ctx, ast.Store | ast.Del) and n.id == name)
              for name in aliases}  # fmt: skip
    scope.aliases = {name: values for name, values in aliases.items()
                     if name in stores and counts[name] == len(values)
                     and not {a.arg for a in params} & {name}}  # fmt: skip
    scope.names -= scope.declared_global
    return scope


def _bind_block(stmt: ast.AST, scope: Scope, nonlocal_: set[str]) -> None:
    stores: dict[str, int] = {}
    for sub in walk_here(stmt):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
            stores[sub.id] = stores.get(sub.id, 0) + 1
        if (
            isinstance(sub, ast.Assign)
            and len(sub.targets) == 1
            and isinstance(sub.targets[0], ast.Name)
            and is_chain(sub.value)
        ):
            scope.aliases.setdefault(sub.targets[0].id, []).append(sub.value)
    for sub in walk_here(stmt):
        if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            scope.names.add(sub.name)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
            scope.names.add(sub.id)
        elif isinstance(sub, ast.Import | ast.ImportFrom):
            for alias in sub.names:
                if alias.name != "*":
                    name = alias.asname or alias.name.split(".")[0]
                    scope.names.add(name)
                    scope.imports.setdefault(name, []).append(sub)
        elif isinstance(sub, ast.ExceptHandler) and sub.name:
            scope.names.add(sub.name)
        elif isinstance(sub, ast.MatchAs | ast.MatchStar) and sub.name:
            scope.names.add(sub.name)
        elif isinstance(sub, ast.MatchMapping) and sub.rest:
            scope.names.add(sub.rest)
        elif isinstance(sub, ast.Global):
            scope.declared_global.update(sub.names)
        elif isinstance(sub, ast.Nonlocal):
            nonlocal_.update(sub.names)
    scope.names -= nonlocal_
    for name in list(scope.aliases):  # bound some other way too: not an alias
        if stores.get(name, 0) != len(scope.aliases[name]) or name in scope.imports:
            del scope.aliases[name]


def class_scope(body: Iterable[ast.stmt]) -> Scope:
    """The names a class's body binds (its statements see them; its methods do not)."""
    scope = Scope("class", set())
    for stmt in body:
        _bind_block(stmt, scope, set())
    return scope


def _global_writes(top: ast.AST, modules: frozenset[str] = frozenset()) -> set[str]:
    """Module-level names that the functions in ``top`` (``top`` too, at any depth)
    rebind through ``global``, or change in place (``X[k] = ...``) with no ``X`` of
    their own or of an enclosing function (``modules``: see :func:`changed_roots`)."""
    written: set[str] = set()

    def function(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, outer: set[str]) -> None:
        scope = function_scope(fn)
        body: list[ast.AST] = list(fn.body) if isinstance(fn.body, list) else [fn.body]
        for stmt in body:
            for sub in walk_here(stmt):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
                    if sub.id in scope.declared_global:
                        written.add(sub.id)
            for name in changed_roots(stmt, modules):
                if name in scope.declared_global or (name not in scope.names and name not in outer):
                    written.add(name)
        inside(fn, outer | scope.names)

    def inside(node: ast.AST, outer: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, FUNCTIONS):
                function(child, outer)
            else:
                inside(child, outer)

    if isinstance(top, FUNCTIONS):
        function(top, set())
    else:
        inside(top, set())
    return written


UNREADABLE = ast.Module(body=[], type_ignores=[])
"""What :func:`parse` gives for code Python may compile but the reading cannot hold
(nested past the recursion limit)."""


@lru_cache(maxsize=512)
def parse(source: str) -> ast.Module | None:
    """The module's code; None where it does not parse (it cannot be imported either),
    :data:`UNREADABLE` where it is too deep for ``ast``."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError):
        return UNREADABLE


@dataclass(eq=False)
class Module:
    """One file's top-level code: its nodes and what binds each name."""

    tree: Tree
    path: str
    source: str
    parsed: ast.Module | None
    """None when the file does not parse (it cannot be imported: nothing of it runs)."""
    nodes: list[Node] = field(default_factory=list)
    bindings: dict[str, list[Node]] = field(default_factory=dict)
    stars: list[tuple[Node, ast.ImportFrom]] = field(default_factory=list)
    """Its ``from X import *`` statements."""
    init: list[Node] = field(default_factory=list)
    """What runs at import time besides bindings: calls, compound headers."""
    classes: dict[str, list[Node]] = field(default_factory=dict)
    """The header and body statements of each top-level class, by the class's name."""
    future_annotations: bool = False
    """``from __future__ import annotations``: no annotation is evaluated."""
    scopes: dict[int, Scope] = field(default_factory=dict)
    """The scopes of its functions and classes, by their code's ``id`` (made once)."""
    unreadable: bool = False
    """It may compile, but is nested too deeply for the reading (``parsed`` is None)."""

    def scope(self, node: ast.AST) -> Scope:
        """The names a function, lambda or class body of this file binds itself."""
        if id(node) not in self.scopes:
            if isinstance(node, ast.ClassDef):
                self.scopes[id(node)] = class_scope(node.body)
            else:
                self.scopes[id(node)] = function_scope(node)  # type: ignore[arg-type]
        return self.scopes[id(node)]

    @property
    def name(self) -> str:
        return module_of(self.path)

    def bind(self, name: str, node: Node) -> None:
        found = self.bindings.setdefault(name, [])
        if node not in found:
            found.append(node)

    def exports(self, name: str) -> bool:
        """Whether ``from <this module> import *`` may bind ``name``: its ``__all__``
        when that is a list of strings, else every name not starting with ``_``."""
        listed: set[str] = set()
        for node in self.bindings.get("__all__", []):
            value = getattr(node.stmt, "value", None)
            if not isinstance(node.stmt, ast.Assign) or not isinstance(value, ast.List | ast.Tuple):
                return True  # built some other way: it may hold anything
            listed |= {str(e.value) for e in value.elts if isinstance(e, ast.Constant)}
        if "__all__" in self.bindings:
            return name in listed
        return not name.startswith("_")

    def absolute(self, stmt: ast.ImportFrom) -> str:
        """The module an ``ImportFrom`` names, a relative one made absolute."""
        if not stmt.level:
            return stmt.module or ""
        parts = self.name.split(".")
        base = parts if self.path.endswith("__init__.py") else parts[:-1]
        base = base[: max(0, len(base) - (stmt.level - 1))]
        return ".".join([*base, *([stmt.module] if stmt.module else [])])


class _Indexer:
    """Cuts one parsed module into nodes and records its bindings."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.lines = module.source.splitlines()
        assert module.parsed is not None
        self.imported = frozenset(
            alias.asname or alias.name.split(".")[0]
            for stmt in ast.walk(module.parsed)
            if isinstance(stmt, ast.Import | ast.ImportFrom)
            for alias in stmt.names
        )
        """Names the file's imports bind (anywhere): ``np.add(...)`` changes no ``np``."""

    def text(self, *parts: ast.AST) -> str:
        chunks = []
        for part in parts:
            start, end = getattr(part, "lineno", 0), getattr(part, "end_lineno", 0)
            if not start or not end:
                chunks.append(ast.dump(part))
                continue
            chunks.append("\n".join(line.rstrip() for line in self.lines[start - 1 : end]))
        return "\n".join(chunks)

    def add(self, stmt: ast.AST, roots: list[ast.AST], label: str, qualname: str, text: str,
            in_class: str = "") -> Node:  # fmt: skip
        node = Node(self.module, stmt, roots, label, qualname, text, in_class)
        self.module.nodes.append(node)
        return node

    def run(self) -> None:
        assert self.module.parsed is not None
        self.block(self.module.parsed.body)

    def block(self, body: list[ast.stmt]) -> None:
        module = self.module
        for stmt in body:
            if isinstance(stmt, ast.If | ast.While):
                self.header(stmt, [stmt.test])
                self.block(stmt.body)
                self.block(stmt.orelse)
            elif isinstance(stmt, ast.For | ast.AsyncFor):
                node = self.header(stmt, [stmt.target, stmt.iter])
                for name in stored_names(stmt.target):
                    module.bind(name, node)
                self.block(stmt.body)
                self.block(stmt.orelse)
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                node = self.header(stmt, list(stmt.items))
                for item in stmt.items:
                    if item.optional_vars is not None:
                        for name in stored_names(item.optional_vars):
                            module.bind(name, node)
                self.block(stmt.body)
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                self.block(stmt.body)  # type: ignore[attr-defined]
                for handler in stmt.handlers:  # type: ignore[attr-defined]
                    node = self.header(handler, [handler.type] if handler.type else [])
                    if handler.name:
                        module.bind(handler.name, node)
                    self.block(handler.body)
                self.block(stmt.orelse)  # type: ignore[attr-defined]
                self.block(stmt.finalbody)  # type: ignore[attr-defined]
            elif isinstance(stmt, ast.Match):
                node = self.header(stmt, [stmt.subject])
                for case in stmt.cases:
                    for sub in ast.walk(case.pattern):
                        bound = getattr(sub, "name", None) or getattr(sub, "rest", None)
                        if isinstance(bound, str):
                            module.bind(bound, node)
                    self.block(case.body)
            else:
                self.simple(stmt)

    def header(self, stmt: ast.AST, parts: list[ast.AST]) -> Node:
        shown = [p.context_expr if isinstance(p, ast.withitem) else p for p in parts]
        text = type(stmt).__name__ + "\n" + self.text(*shown)
        node = self.add(stmt, parts, "<module>", "<module>", text)
        self.module.init.append(node)
        return node

    def simple(self, stmt: ast.stmt) -> None:
        module = self.module
        if isinstance(stmt, ast.ClassDef):
            head: list[ast.AST] = [*stmt.decorator_list, *stmt.bases, *stmt.keywords]
            header = self.add(stmt, head, stmt.name, stmt.name,
                              f"class {stmt.name}\n" + self.text(*head))  # fmt: skip
            members = [header] + [self.item(item, stmt.name) for item in stmt.body]
            module.classes.setdefault(stmt.name, []).extend(members)
            module.bind(stmt.name, header)
            return
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            node = self.add(stmt, [stmt], stmt.name, stmt.name,
                            self.text(*stmt.decorator_list, stmt))  # fmt: skip
            module.bind(stmt.name, node)
            for name in _global_writes(stmt, self.imported):
                module.bind(name, node)
            return
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            bound = [a.asname or a.name.split(".")[0] for a in stmt.names if a.name != "*"]
            node = self.add(stmt, [stmt], ",".join(bound) or "<module>",
                            ",".join(sorted(bound)) or "<module>", self.text(stmt))  # fmt: skip
            if isinstance(stmt, ast.ImportFrom):
                if stmt.module == "__future__" and any(a.name == "annotations" for a in stmt.names):
                    module.future_annotations = True
                if any(a.name == "*" for a in stmt.names):
                    module.stars.append((node, stmt))
            for name in bound:
                module.bind(name, node)
            return
        names = list(dict.fromkeys([*bound_names(stmt), *changed_roots(stmt, self.imported)]))
        names += [n for n in _global_writes(stmt, self.imported) if n not in names]  # lambdas
        label = ",".join(names) if names and not isinstance(stmt, ast.Expr) else "<module>"
        qualname = ",".join(sorted(names)) if names else "<module>"
        node = self.add(stmt, [stmt], label, qualname, self.text(stmt))
        for name in names:
            module.bind(name, node)
        if isinstance(stmt, ast.Expr) or not names:
            module.init.append(node)

    def item(self, item: ast.stmt, cls: str) -> Node:
        """One statement of a class's body, as a node of its own."""
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            label = f"{cls}.{item.name}"
            node = self.add(item, [item], label, label,
                            self.text(*item.decorator_list, item), cls)  # fmt: skip
            for name in _global_writes(item, self.imported):
                self.module.bind(name, node)
            return node
        bound = ",".join(dict.fromkeys(bound_names(item))) or "<body>"
        return self.add(item, [item], f"{cls}.{bound}", f"{cls}.{bound}", self.text(item), cls)


def _bound_by(item: Node) -> list[str]:
    """The names a class's statement binds (``forward``; ``a,b``)."""
    return item.qualname.split(".", 1)[1].split(",")


@dataclass
class _Template:
    """What indexing one file gives, kept by its path and source: another tree with the
    same file makes its nodes from it instead of indexing again."""

    nodes: list[tuple[ast.AST, list[ast.AST], str, str, str, str, str]]
    bindings: dict[str, list[int]]
    stars: list[tuple[int, ast.ImportFrom]]
    init: list[int]
    classes: dict[str, list[int]]
    future: bool
    scopes: dict[int, Scope]

    @staticmethod
    def of(path: str, source: str, module: Module) -> _Template:
        key = (path, source)
        if key not in _TEMPLATES:
            while len(_TEMPLATES) >= 512:
                del _TEMPLATES[next(iter(_TEMPLATES))]
            _Indexer(module).run()
            index = {id(n): i for i, n in enumerate(module.nodes)}
            _TEMPLATES[key] = _Template(
                [(n.stmt, n.roots, n.label, n.qualname, n.text, n.in_class, n.key)
                 for n in module.nodes],
                {k: [index[id(n)] for n in v] for k, v in module.bindings.items()},
                [(index[id(n)], stmt) for n, stmt in module.stars],
                [index[id(n)] for n in module.init],
                {k: [index[id(n)] for n in v] for k, v in module.classes.items()},
                module.future_annotations,
                module.scopes,
            )  # fmt: skip
            module.nodes.clear()
        return _TEMPLATES[key]

    def build(self, module: Module) -> None:
        nodes = []
        for stmt, roots, label, qualname, text, in_class, key in self.nodes:
            node = Node(module, stmt, roots, label, qualname, text, in_class)
            node.__dict__["key"] = key  # (a cached property)
            nodes.append(node)
        module.nodes = nodes
        module.bindings = {k: [nodes[i] for i in v] for k, v in self.bindings.items()}
        module.stars = [(nodes[i], stmt) for i, stmt in self.stars]
        module.init = [nodes[i] for i in self.init]
        module.classes = {k: [nodes[i] for i in v] for k, v in self.classes.items()}
        module.future_annotations = self.future
        module.scopes = self.scopes


_TEMPLATES: dict[tuple[str, str], _Template] = {}


class Tree:
    """A course tree's stage packages: their sources by path (``module2/fast_ops.py``),
    and the files a submission writes (``declared``)."""

    def __init__(self, files: Mapping[str, str], declared: Iterable[str] = ()) -> None:
        self.files = dict(files)
        self.declared = frozenset(declared)
        self._modules: dict[str, Module] = {}
        self._patches: dict[tuple[str, str], list[Node]] | None = None
        self._overloads: dict[int, list[Node]] = {}
        self._ext_overloads: dict[str, list[Node]] = {}
        self._overloads_found = False
        self._memo: dict[tuple[str, str, bool], list[Value]] = {}
        self.memo: dict[object, object] = {}
        """For its readers' own results about it (:func:`autograder.own_work.trusted_code`)."""

    # -- modules -------------------------------------------------------------------

    def path_of(self, name: str) -> str | None:
        """The file of a course module (a package's ``__init__.py``), if the tree has it."""
        base = name.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if path in self.files:
                return path
        return None

    def module(self, path: str) -> Module:
        """The indexed module of one file of the tree."""
        if path not in self._modules:
            source = self.files[path]
            parsed = parse(source)
            module = Module(self, path, source, None if parsed is UNREADABLE else parsed)
            module.unreadable = parsed is UNREADABLE
            self._modules[path] = module
            if module.parsed is not None:
                _Template.of(path, source, module).build(module)
        return self._modules[path]

    def scoped(self, node: Node) -> Scoped:
        """:class:`Scoped` of ``node``, made once."""
        key = ("scoped", id(node))
        if key not in self.memo:
            self.memo[key] = Scoped(self, node)
        return self.memo[key]  # type: ignore[return-value]

    def named(self, name: str) -> Module | None:
        """The module of a dotted course name, if the tree has its file."""
        path = self.path_of(name)
        return self.module(path) if path is not None else None

    def modules(self) -> Iterator[Module]:
        for path in sorted(self.files):
            yield self.module(path)

    def packages(self, module: Module) -> list[Module]:
        """The packages a module's import runs first (``module2`` for
        ``module2.fast_ops``)."""
        parts = module.name.split(".")
        found = []
        for end in range(1, len(parts)):
            package = self.named(".".join(parts[:end]))
            if package is not None and package is not module:
                found.append(package)
        return found

    # -- resolution ----------------------------------------------------------------

    def module_value(self, dotted: str) -> Value:
        """A module by name: the course's (:class:`Mod`) where the tree has its file."""
        if is_course(dotted) and self.path_of(dotted) is not None:
            return Mod(dotted)
        return Ext(dotted, module=True)

    def imported(self, module: Module, stmt: ast.Import | ast.ImportFrom, name: str,
                 seen: frozenset[tuple[str, str]] = frozenset()) -> list[Value]:  # fmt: skip
        """What ``name``, bound by the import ``stmt`` in ``module``, is."""
        found: list[Value] = []
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname == name:
                    found.append(self.module_value(alias.name))
                elif alias.asname is None and alias.name.split(".")[0] == name:
                    found.append(self.module_value(name))
            return found
        base = module.absolute(stmt)
        for alias in stmt.names:
            if alias.name == "*" or (alias.asname or alias.name) != name:
                continue
            if is_course(base) and self.path_of(base) is not None:
                found += self.attribute(Mod(base), alias.name, seen)
            else:
                found += [Ext(f"{base}.{alias.name}"), *self.patches_of(base, alias.name)]
        return found

    def resolve(self, module: Module, name: str, seen: frozenset[tuple[str, str]] = frozenset(),
                builtin: bool = True) -> list[Value]:  # fmt: skip
        """Everything the global ``name`` of ``module`` may be at run time: each of its
        binding nodes and, through imports and aliases, the modules and outside names
        they give it; what a star import may bring; patches from elsewhere; else (with
        ``builtin``) a builtin, or :class:`Unbound`."""
        if module.parsed is None or (module.path, name) in seen:
            return []
        memo = (module.path, name, builtin)
        if not seen and memo in self._memo:
            return self._memo[memo]
        inner = seen | {(module.path, name)}
        found: list[Value] = []
        for node in module.bindings.get(name, []):
            found.append(node)
            found += self.values(node, name, inner)
        for node, stmt in module.stars:
            base = module.absolute(stmt)
            if is_course(base):
                other = self.named(base)
                if other is None or not other.exports(name):
                    continue
                more = self.resolve(other, name, inner, builtin=False)
                if [m for m in more if not isinstance(m, Unbound)]:
                    found += [node, *more]
            elif name not in module.bindings and not name.startswith("_"):
                if name in BUILTINS and not (base == "numpy" and name in NUMPY_SHADOWS):
                    continue
                found += [node, Ext(f"{base}.{name}")]
        if not found and builtin:
            if name in BUILTINS:
                found = [Builtin(name), *self.patches_of("builtins", name)]
            elif name in MODULE_GLOBALS:
                found = []
            else:
                found = [Unbound(name)]
        found += self.patches_of(module.name, name)
        if not seen:
            self._memo[memo] = found
        return found

    def values(self, node: Node, name: str,
               seen: frozenset[tuple[str, str]] = frozenset()) -> list[Value]:  # fmt: skip
        """What a binding node gives ``name`` besides itself: an import's module or
        names; an alias's value (``xp = np``, ``t = module1.tensor_ops``)."""
        stmt = node.stmt
        if node.in_class:
            return []
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            return self.imported(node.module, stmt, name, seen)
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return [v for v in self.chain(node.module, stmt.value, seen)
                        if isinstance(v, Mod | Ext)]  # fmt: skip
        return []

    def chain(self, module: Module, expr: ast.AST,
              seen: frozenset[tuple[str, str]] = frozenset()) -> list[Value]:  # fmt: skip
        """What a global chain ``a.b.c`` of ``module`` may be ([] for anything else)."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return []
        values = self.resolve(module, expr.id, seen)
        for attr in reversed(parts):
            values = [w for v in values for w in self.attribute(v, attr, seen)]
        return values

    def attribute(self, value: Value, attr: str,
                  seen: frozenset[tuple[str, str]] = frozenset()) -> list[Value]:  # fmt: skip
        """What ``value.attr`` may be: for a module of the course, its bindings of
        ``attr`` or its submodule; for an outside name, the longer name; for a class,
        its body's ``attr``; [] for anything else (an object the reading cannot see)."""
        if isinstance(value, Mod):
            module = self.named(value.name)
            found: list[Value] = []
            if module is not None:
                found += self.resolve(module, attr, seen, builtin=False)
            sub = f"{value.name}.{attr}"
            if self.path_of(sub) is not None:
                found.append(Mod(sub))
            if not found and attr not in MODULE_GLOBALS:
                found.append(Unbound(sub))
            return found
        if isinstance(value, Ext):
            return [Ext(f"{value.dotted}.{attr}"), *self.patches_of(value.dotted, attr)]
        if isinstance(value, Node) and value.is_class:
            return list(self.members(value, attr))
        return []

    def members(self, header: Node, attr: str) -> list[Node]:
        """The statements of a class's body that bind ``attr`` (``header``: the class)."""
        if not header.is_class:
            return []
        name = header.stmt.name  # type: ignore[attr-defined]
        return [n for n in header.module.classes.get(name, [])
                if n.in_class == name and attr in _bound_by(n)]  # fmt: skip

    def class_of(self, header: Node) -> list[Node]:
        """Every statement of a class's body (``header``: the class)."""
        if not header.is_class:
            return []
        name = header.stmt.name  # type: ignore[attr-defined]
        return [n for n in header.module.classes.get(name, []) if n.in_class == name]

    def methods_named(self, name: str) -> list[Node]:
        """The statements named ``name`` of the classes of the declared files: what
        ``obj.name(...)`` may run when ``obj`` is one of the student's objects."""
        found = []
        for path in sorted(self.declared & self.files.keys()):
            for members in self.module(path).classes.values():
                found += [n for n in members if n.in_class and name in _bound_by(n)]
        return found

    # -- patches and overloads -----------------------------------------------------

    def patches_of(self, module: str, name: str) -> list[Node]:
        """Code of the declared files that may change ``module.name`` from outside it
        (those that may change any module are :meth:`everywhere`)."""
        if self._patches is None:
            self._patches = {}  # while they are found, no name has patches
            self._patches = _find_patches(self)
            self._memo.clear()  # what was resolved meanwhile lacks them
            self.memo = {k: v for k, v in self.memo.items()
                         if not (isinstance(k, tuple) and k[0] == "scoped")}  # fmt: skip
        return [*self._patches.get((module, name), []), *self._patches.get((module, STAR), [])]

    def everywhere(self) -> list[Node]:
        """Patches that may change any name of any module (``sys.modules``, ``exec``)."""
        self.patches_of("", "")
        assert self._patches is not None
        return list(self._patches.get((STAR, STAR), []))

    def overloads_of(self, target: Value) -> list[Node]:
        """Numba ``overload`` (and the like) registrations whose target is ``target``:
        compiled code runs them where it calls the target."""
        if not self._overloads_found:
            self._overloads_found = True
            _find_overloads(self)
        if isinstance(target, Node):
            return list(self._overloads.get(id(target), []))
        if isinstance(target, Ext):
            return list(self._ext_overloads.get(target.dotted, []))
        return []


OVERLOADERS = frozenset({
    f"numba{core}.extending.{name}" for core in ("", ".core")
    for name in ("overload", "overload_method", "overload_attribute", "overload_classmethod")
})  # fmt: skip
"""Numba's ways to give compiled code an implementation of a name."""


def _find_overloads(tree: Tree) -> None:
    """Every ``@overload(target)`` (or ``overload(target)(impl)``) of the tree, by what
    it overloads: a node of the course, or an outside name."""
    tree.patches_of("", "")
    patching = {id(n) for found in (tree._patches or {}).values() for n in found}
    for module in tree.modules():
        for node in module.nodes:
            if isinstance(node.stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                calls = [d for d in node.stmt.decorator_list if isinstance(d, ast.Call)]
            else:
                calls = [s.func for r in node.roots for s in ast.walk(r)
                         if isinstance(s, ast.Call) and isinstance(s.func, ast.Call)]  # fmt: skip
            for call in calls:
                assert isinstance(call, ast.Call)
                makers = tree.chain(module, call.func)
                if not call.args or not any(
                    isinstance(m, Ext) and m.dotted in OVERLOADERS for m in makers
                ):
                    continue
                target = call.args[0]
                last = target.attr if isinstance(target, ast.Attribute) else root_name(target)
                for value in tree.chain(module, target):
                    if isinstance(value, Ext):
                        tree._ext_overloads.setdefault(value.dotted, []).append(node)
                    elif isinstance(value, Node) and (
                        id(value) not in patching or last in value.qualname.split(",")
                    ):  # a patch that may change the name is not what is overloaded
                        tree._overloads.setdefault(id(value), []).append(node)


class Scoped:
    """One node's names, each resolved in its scope: None for a local (a parameter, a
    local variable), else what :meth:`Tree.resolve` says (a local import is followed
    like a global one). Annotations are skipped where they are never evaluated."""

    def __init__(self, tree: Tree, node: Node) -> None:
        self.tree, self.node, self.module = tree, node, node.module
        self.names: dict[int, list[Value] | None] = {}
        self.skipped: set[int] = set()
        self._aliasing: set[tuple[int, str]] = set()
        stack: list[Scope] = []
        if node.in_class:
            body = next((n.stmt for n in node.module.classes.get(node.in_class, [])
                         if n.is_class), None)  # fmt: skip
            stack = [self.module.scope(body) if body is not None else Scope("class", set())]
        for root in node.roots:
            self._visit(root, stack)

    def of(self, name: ast.Name) -> list[Value] | None:
        return self.names.get(id(name))

    def chain(self, expr: ast.AST) -> list[Value] | None:
        """What an attribute chain may be: None when it starts from a local."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        values = self.of(expr)
        if values is None:
            return None
        for attr in reversed(parts):
            values = [w for v in values for w in self.tree.attribute(v, attr)]
        return values

    def _lookup(self, name: str, stack: list[Scope]) -> list[Value] | None:
        for depth in range(len(stack) - 1, -1, -1):
            scope = stack[depth]
            if scope.kind == "class" and depth != len(stack) - 1:
                continue
            if name in scope.declared_global:
                break
            if name in scope.names:
                if name in scope.imports:
                    return [v for stmt in scope.imports[name]
                            for v in self.tree.imported(self.module, stmt, name)]  # fmt: skip
                if name in scope.aliases and (id(scope), name) not in self._aliasing:
                    self._aliasing.add((id(scope), name))
                    try:
                        values = [self._alias_value(e, stack[: depth + 1])
                                  for e in scope.aliases[name]]  # fmt: skip
                    finally:
                        self._aliasing.discard((id(scope), name))
                    if all(v is not None for v in values):
                        return [w for v in values for w in v or []]
                return None
        return self.tree.resolve(self.module, name)

    def _alias_value(self, expr: ast.expr, stack: list[Scope]) -> list[Value] | None:
        """What a local alias's value (a name or chain) is, in its own scope."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        assert isinstance(expr, ast.Name)
        values = self._lookup(expr.id, stack)
        for attr in reversed(parts):
            if values is None:
                return None
            values = [w for v in values for w in self.tree.attribute(v, attr)]
        return values

    def _skip(self, annotation: ast.AST | None, stack: list[Scope]) -> None:
        if annotation is None:
            return
        if self.module.future_annotations:
            self.skipped.update(id(s) for s in ast.walk(annotation))
        else:
            self._visit(annotation, stack)

    def _arguments(self, args: ast.arguments, stack: list[Scope]) -> None:
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None:
                self._visit(default, stack)
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        for param in params:
            if param is not None:
                self._skip(param.annotation, stack)

    def _visit(self, node: ast.AST, stack: list[Scope]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                self._visit(decorator, stack)
            self._arguments(node.args, stack)
            self._skip(node.returns, stack)
            inner = [*stack, self.module.scope(node)]
            for stmt in node.body:
                self._visit(stmt, inner)
        elif isinstance(node, ast.Lambda):
            self._arguments(node.args, stack)
            self._visit(node.body, [*stack, self.module.scope(node)])
        elif isinstance(node, ast.ClassDef):
            for part in [*node.decorator_list, *node.bases, *node.keywords]:
                self._visit(part, stack)
            inner = [*stack, self.module.scope(node)]
            for stmt in node.body:
                self._visit(stmt, inner)
        elif isinstance(node, COMPREHENSIONS):
            scope = Scope("function", set())
            for generator in node.generators:
                scope.names.update(stored_names(generator.target))
            inner = [*stack, scope]
            for child in ast.iter_child_nodes(node):
                self._visit(child, inner)
        elif isinstance(node, ast.AnnAssign):
            self._visit(node.target, stack)
            self._skip(node.annotation, stack)
            if node.value is not None:
                self._visit(node.value, stack)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.names[id(node)] = self._lookup(node.id, stack)
        else:
            for child in ast.iter_child_nodes(node):
                self._visit(child, stack)


RUNTIME_MODULES = ("sys.modules", "importlib", "builtins", "gc", "inspect", "ctypes")
"""Outside names through which code finds (and changes) any module at run time."""
RUNTIME_BUILTINS = frozenset({"__import__", "exec", "eval", "compile"})
FUNCTION_INSIDES = frozenset({"__globals__", "__code__", "__builtins__", "__closure__"})
"""A function's insides: through them code reaches (and changes) any module's names."""


def _find_patches(tree: Tree) -> dict[tuple[str, str], list[Node]]:
    """Every statement of the declared files that changes a module's names from
    outside it, by (module, name) — ``STAR`` for every name, or every module."""
    patches: dict[tuple[str, str], list[Node]] = {}

    def record(key: tuple[str, str], node: Node) -> None:
        found = patches.setdefault(key, [])
        if node not in found:
            found.append(node)

    for path in sorted(tree.declared & tree.files.keys()):
        module = tree.module(path)
        for node in module.nodes:
            for key in patch_keys(tree, node):
                record(key, node)
    return patches


def _key_of(value: Value, attr: str) -> tuple[str, str] | None:
    if isinstance(value, Mod):
        return (value.name, attr)
    if isinstance(value, Ext):
        return (value.dotted, attr)
    return None


def patch_keys(tree: Tree, node: Node) -> set[tuple[str, str]]:
    """What names of which modules ``node`` may change from outside them."""
    scoped = tree.scoped(node)
    keys: set[tuple[str, str]] = set()
    parents: dict[int, ast.AST] = {}
    for root in node.roots:
        for outer in ast.walk(root):
            for child in ast.iter_child_nodes(outer):
                parents[id(child)] = outer

    def own(values: list[Value] | None, attr: str) -> None:
        for value in values or []:
            if (key := _key_of(value, attr)) is not None:
                keys.add(key)

    def imported_from(name: ast.Name) -> None:
        """``X[k] = ...`` on ``X`` imported from a course module changes it there."""
        if not any(isinstance(v, Node) and v.module is not node.module
                   for v in scoped.of(name) or []):  # fmt: skip
            return
        for bound in node.module.bindings.get(name.id, []):
            if isinstance(bound.stmt, ast.ImportFrom):
                base = node.module.absolute(bound.stmt)
                for alias in bound.stmt.names:
                    if (alias.asname or alias.name) == name.id and is_course(base):
                        keys.add((base, alias.name))

    for root in node.roots:
        for sub in ast.walk(root):
            parent = parents.get(id(sub))
            if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store | ast.Del):
                own(scoped.chain(sub.value), sub.attr)
            if isinstance(sub, ast.Attribute | ast.Subscript) and isinstance(
                sub.ctx, ast.Store | ast.Del
            ):
                base = sub.value
                while isinstance(base, ast.Attribute | ast.Subscript):
                    base = base.value
                if isinstance(base, ast.Name):
                    imported_from(base)
                if isinstance(sub.value, ast.Attribute):
                    own(scoped.chain(sub.value.value), sub.value.attr)
            elif isinstance(sub, ast.Call):
                func = sub.func
                if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
                    base = func.value
                    if isinstance(base, ast.Name):
                        imported_from(base)
                    elif isinstance(base, ast.Attribute):
                        own(scoped.chain(base.value), base.attr)
                if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and sub.args:
                    target = scoped.chain(sub.args[0])
                    name = sub.args[1] if len(sub.args) > 1 else None
                    attr = name.value if isinstance(name, ast.Constant) else STAR
                    own(target, str(attr))
                    if isinstance(sub.args[0], ast.Name):
                        imported_from(sub.args[0])
                if isinstance(func, ast.Name) and func.id in ("globals", "vars"):
                    if func.id == "globals" or not sub.args:
                        keys.add((node.module.name, STAR))
            if isinstance(sub, ast.Name | ast.Attribute) and isinstance(sub.ctx, ast.Load):
                if isinstance(parent, ast.Attribute) and parent.value is sub:
                    if parent.attr in FUNCTION_INSIDES:  # f.__globals__["gemm"] = ...
                        keys.add((STAR, STAR))
                    elif parent.attr.startswith("__"):  # M.__dict__, M.__setattr__
                        own(scoped.chain(sub), STAR)
                        for value in (scoped.of(sub) if isinstance(sub, ast.Name) else
                                      scoped.chain(sub)) or []:  # fmt: skip
                            if isinstance(value, Node):  # a course object's insides
                                keys.add((value.module.name, STAR))
                    continue
                values = scoped.of(sub) if isinstance(sub, ast.Name) else scoped.chain(sub)
                for value in values or []:
                    if isinstance(value, Builtin) and value.name in RUNTIME_BUILTINS:
                        keys.add((STAR, STAR))
                    elif isinstance(value, Ext) and value.dotted.startswith(RUNTIME_MODULES):
                        keys.add((STAR, STAR))
                    elif isinstance(value, Mod) or (isinstance(value, Ext) and value.module):
                        if not _alias(node, sub, parent):
                            own([value], STAR)  # a module as a value: any of its names
            if isinstance(sub, ast.Name) and sub.id == "__builtins__":
                keys.add((STAR, STAR))
    return keys


def _alias(node: Node, expr: ast.AST, parent: ast.AST | None) -> bool:
    """Whether ``expr`` is the whole value of an alias (``xp = np``, at the top level or
    in a function), which the resolution follows by itself."""
    return (
        isinstance(parent, ast.Assign)
        and parent.value is expr
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ) or isinstance(parent, ast.alias)


def walk_roots(node: Node, skipped: set[int]) -> Iterator[tuple[ast.AST, ast.AST | None]]:
    """Every piece of a node's code with its parent, annotations that are never
    evaluated left out."""
    todo: list[tuple[ast.AST, ast.AST | None]] = [(root, None) for root in node.roots]
    while todo:
        current, parent = todo.pop()
        if id(current) in skipped:
            continue
        yield current, parent
        todo.extend((child, current) for child in ast.iter_child_nodes(current))
