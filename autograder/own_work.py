"""Library work is not credited: a static check of the kernel tasks' code.

Some tasks exist to have the student write a computation: the parallel map, zip and
reduce kernels and the matmul of stage 2, the CUDA kernels of stage 3, the convolutions
of stage 4 (tasks whose registry entry sets ``own_work``). NumPy's (or any library's)
linear algebra or ufunc loops give the same values, faster than a bar a student's loop
must meet, and a grader of data cannot tell the difference. So, before crediting such a
task, the trusted grader reads the submitted source (it never runs it: ``ast`` only) and
refuses the task when the code the task's functions reach does library work:

- NumPy beyond allocation and types: ``np.matmul``, ``np.exp``, ``np.add.reduce``,
  ``np.einsum``, ``np.linalg``..., or such a name imported from NumPy
  (:data:`NUMPY_ALLOWED` lists what is allowed: ``np.empty``, ``np.zeros``, dtypes...);
- the matrix-multiply operator ``@`` (on arrays, a library's matmul) and array methods
  that compute (``.dot()``, ``.sum()``, ``.max()``...: :data:`COMPUTE_METHODS`);
- another numerical library (SciPy, PyTorch, JAX, ...), or a way around the names above:
  ``getattr``, ``__import__``, ``eval``/``exec``, ``globals()``/``vars()``, a dunder
  attribute (``np.__dict__``), ``importlib``, ``operator``, ``ctypes``, ``sys``;
- in a CUDA kernel (stage 3), a call to a module-level function that is not a device
  function: code that would run on the host (only Numba's CUDA simulator allows it).

"The code the task's functions reach" is each function the registry lists for the task,
with every function of the same file it calls (transitively) that is not the handout's
own, unchanged given code. What this does not see: work hidden in another file the
task does not declare (the workspace's other files are the grader's), or library calls
built in ways no reading of the source reveals; the threat model in
``autograder/README.md`` says so.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

NUMPY_ALLOWED = frozenset({
    "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
    "full_like", "array", "asarray", "ascontiguousarray", "ndarray", "dtype",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "intp",
    "uintp", "float16", "float32", "float64", "bool_", "integer", "floating", "number",
    "generic", "newaxis", "inf", "nan", "pi", "e", "finfo", "iinfo", "errstate",
})  # fmt: skip
"""NumPy names a kernel task may use: allocation, dtypes and constants."""

COMPUTE_METHODS = frozenset({
    "dot", "matmul", "vdot", "inner", "outer", "tensordot", "einsum", "sum", "prod",
    "mean", "max", "min", "cumsum", "cumprod", "reduce", "accumulate", "reduceat",
    "argmax", "argmin", "all", "any", "std", "var", "exp", "log", "clip", "sort",
    "trace", "conj", "round", "ptp", "nansum", "convolve", "correlate",
})  # fmt: skip
"""Array methods (and ufunc methods) that compute with a library's loops."""

SCALAR_MODULES = frozenset({"math", "cmath"})
"""Modules whose functions work on one number (``math.exp``): a kernel may call them."""

DENIED_MODULES = frozenset({
    "scipy", "torch", "jax", "jaxlib", "tensorflow", "cupy", "numexpr", "sklearn", "ml_dtypes",
    "pandas", "mkl", "blis", "threadpoolctl", "ctypes", "cffi", "operator", "importlib",
    "sys", "builtins", "subprocess", "os", "multiprocessing", "pickle", "marshal",
})  # fmt: skip
"""Modules whose use in a kernel task's code is library work or a way around the rules."""

DYNAMIC_CALLS = frozenset({
    "getattr", "setattr", "delattr", "__import__", "eval", "exec", "compile", "globals",
    "vars", "locals", "open",
})  # fmt: skip


@dataclass(frozen=True)
class Finding:
    """One use of library work in a kernel task's code."""

    line: int
    function: str
    what: str

    def message(self, path: str) -> str:
        return f"{path}:{self.line} in {self.function}: {self.what}"


@dataclass
class _Module:
    """What a file's top level binds."""

    numpy: set[str]
    """Names bound to NumPy or one of its submodules."""
    numpy_names: dict[str, str]
    """Names imported from NumPy (local name -> NumPy's)."""
    denied: dict[str, str]
    """Names bound to a denied module or imported from one (local name -> module)."""
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    """Module-level functions and methods (``Class.method``)."""
    device: set[str]
    """Module-level functions that are CUDA device functions or kernels."""
    scalar: set[str] = field(default_factory=set)
    """Names bound to ``math`` or ``cmath``: their functions take one number
    (``math.exp(x[i])`` is a kernel's own work, where ``x.exp()`` is a library's loop)."""


def _root(name: str) -> str:
    return name.split(".")[0]


def _read_module(tree: ast.Module) -> _Module:
    info = _Module(set(), {}, {}, {}, set())
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if _root(alias.name) == "numpy":
                    info.numpy.add(bound)
                elif alias.name in SCALAR_MODULES:
                    info.scalar.add(bound)
                elif _root(alias.name) in DENIED_MODULES:
                    info.denied[bound] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                bound = alias.asname or alias.name
                if _root(node.module) == "numpy":
                    if alias.name in NUMPY_ALLOWED:
                        continue
                    info.numpy_names[bound] = f"{node.module}.{alias.name}"
                elif _root(node.module) in DENIED_MODULES:
                    info.denied[bound] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                used = _numpy_use(node.value, info)
                if isinstance(node.value, ast.Name) and node.value.id in info.numpy:
                    info.numpy.add(target.id)
                elif used:
                    info.numpy_names[target.id] = used
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            info.defs[node.name] = node
            if any("cuda" in ast.unparse(d) for d in node.decorator_list):
                info.device.add(node.name)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    info.defs[f"{node.name}.{item.name}"] = item
    return info


def _dotted(node: ast.expr) -> str | None:
    """``np.linalg.norm`` for an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _numpy_use(node: ast.expr, info: _Module) -> str:
    """The NumPy routine an expression names (``np.matmul``), or ""."""
    dotted = _dotted(node)
    if dotted is None or _root(dotted) not in info.numpy or "." not in dotted:
        return ""
    first = dotted.split(".")[1]
    return "" if first in NUMPY_ALLOWED else dotted


def _scope(
    info: _Module, functions: Iterable[str], handout: _Module | None
) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The task's functions and every function of the file they reach that is not the
    handout's unchanged given code."""
    queue = [name for name in functions if name in info.defs]
    seen: set[str] = set()
    found = []
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        node = info.defs[name]
        found.append((name, node))
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in info.defs and sub.id not in seen:
                given = handout.defs.get(sub.id) if handout is not None else None
                if given is None or ast.dump(given) != ast.dump(info.defs[sub.id]):
                    queue.append(sub.id)
    return found


def _kernels(node: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """CUDA kernels within ``node``: functions decorated with ``cuda.jit`` (not device
    functions) and nested functions passed to ``cuda.jit(...)``."""
    launched = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and "cuda.jit" in ast.unparse(sub.func):
            launched |= {a.id for a in sub.args if isinstance(a, ast.Name)}
    for sub in ast.walk(node):
        if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
            marks = [ast.unparse(d) for d in sub.decorator_list]
            kernel = any("cuda.jit" in m and "device=True" not in m for m in marks)
            if kernel or sub.name in launched:
                yield sub


def _findings_in(name: str, node: ast.AST, info: _Module, cuda: bool) -> Iterator[Finding]:
    for sub in ast.walk(node):
        line = getattr(sub, "lineno", 0)
        if isinstance(sub, ast.BinOp | ast.AugAssign) and isinstance(sub.op, ast.MatMult):
            yield Finding(line, name, "the operator @ (a library's matrix multiply)")
        elif isinstance(sub, ast.Attribute):
            if sub.attr.startswith("__") and sub.attr.endswith("__"):
                yield Finding(line, name, f"the attribute .{sub.attr} (a way around the rule)")
            elif used := _numpy_use(sub, info):
                if not isinstance(getattr(sub, "parent", None), ast.Attribute):
                    yield Finding(line, name, f"NumPy's {used}")
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            if sub.id in info.numpy_names:
                yield Finding(line, name, f"NumPy's {info.numpy_names[sub.id]}")
            elif sub.id in info.denied:
                yield Finding(line, name, f"the module {info.denied[sub.id]}")
        if isinstance(sub, ast.Call):
            func = sub.func
            if isinstance(func, ast.Name) and func.id in DYNAMIC_CALLS:
                yield Finding(line, name, f"{func.id}() (a way around the rule)")
            elif isinstance(func, ast.Attribute) and func.attr in COMPUTE_METHODS:
                scalar = isinstance(func.value, ast.Name) and func.value.id in info.scalar
                if not scalar and not _numpy_use(func, info):  # (NumPy's: reported)
                    yield Finding(line, name, f"the method .{func.attr}() (a library's loop)")
        if isinstance(sub, ast.Import | ast.ImportFrom):
            modules = ([a.name for a in sub.names] if isinstance(sub, ast.Import)
                       else [sub.module or ""])  # fmt: skip
            for module in modules:
                if _root(module) == "numpy" or _root(module) in DENIED_MODULES:
                    yield Finding(line, name, f"an import of {module}")
    if cuda:
        for kernel in _kernels(node):
            for sub in ast.walk(kernel):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                    callee = sub.func.id
                    if callee in info.defs and callee not in info.device:
                        yield Finding(
                            sub.lineno, name,
                            f"a call from the CUDA kernel {kernel.name} to {callee}, a host "
                            "function (only the CUDA simulator runs it)",
                        )  # fmt: skip


def library_work(
    source: str, functions: Iterable[str], handout: str | None = None, cuda: bool = False
) -> list[Finding]:
    """Library work in the code that ``functions`` (names in the file: ``gemm``,
    ``Max.forward``) reach in ``source``; ``handout`` is the same file as the handout
    gives it (its unchanged functions are not read); ``cuda``: also refuse host calls
    from CUDA kernels. A file that does not parse has no findings (it cannot run)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child.parent = parent  # type: ignore[attr-defined]
    info = _read_module(tree)
    given = None
    if handout is not None:
        try:
            given = _read_module(ast.parse(handout))
        except SyntaxError:
            given = None
    found: dict[tuple[int, str], Finding] = {}
    for name, node in _scope(info, functions, given):
        for finding in _findings_in(name, node, info, cuda):
            found.setdefault((finding.line, finding.what), finding)
    return sorted(found.values(), key=lambda f: (f.line, f.what))
