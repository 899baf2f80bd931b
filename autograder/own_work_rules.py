"""The own-work rules: what the code of each kind of own-work task may not use.

The registry names a task's rule (``Task.own_work``); :mod:`autograder.own_work` reads
the code the task's functions reach and asks the rule about each thing it meets: a name
outside the course's code (``numpy.matmul``, ``math.exp``, ``mpi4py.MPI``), a method of
an object it cannot see (``x.sum()``, ``comm.Allreduce``), a call (a dtype conversion), the
operator ``@``, a write to an attribute.

* :class:`Kernel` (``"kernel"``): the student writes the computation; no library does it.
* :class:`Codec` (``"codec"``): the kernel rule, and no dtype conversion does the codec.
* :class:`Messages` (``"messages"``): point-to-point messages only; no collective.

What every rule refuses (dynamic calls, dunder attributes, names bound nowhere) the
reader finds itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from autograder.code_index import Builtin, Ext, Scoped, Value
from autograder.task import Task

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
    "trace", "conj", "round", "ptp", "nansum", "convolve", "correlate", "argsort",
    "partition", "argpartition", "searchsorted",
})  # fmt: skip
"""Array methods (and ufunc methods) that compute with a library's loops."""

SCALAR_MODULES = frozenset({"math", "cmath"})
"""Modules whose functions work on one number (``math.exp(x[i])``): a kernel's own work."""

HARMLESS = frozenset({
    "__future__", "typing", "typing_extensions", "dataclasses", "abc", "enum",
    "collections", "functools", "itertools", "numbers", "warnings", "contextlib",
})  # fmt: skip
"""Modules of Python's that compute nothing a task asks for (``typing.Any``)."""

NUMERICAL = frozenset({
    "scipy", "torch", "jax", "jaxlib", "tensorflow", "cupy", "numexpr", "sklearn",
    "ml_dtypes", "pandas", "mkl", "blis", "threadpoolctl", "numpy", "mpi4py", "cython",
    "pythran", "tvm", "triton", "llvmlite",
})  # fmt: skip
"""Libraries that compute: in a kernel task's code, another library's work."""

ESCAPES = frozenset({
    "ctypes", "cffi", "operator", "importlib", "sys", "builtins", "subprocess", "os",
    "multiprocessing", "pickle", "marshal", "types", "inspect", "gc", "runpy", "code",
    "codeop", "threading", "concurrent", "socket", "shutil", "pathlib", "io", "tempfile",
})  # fmt: skip
"""Modules that are ways around the reading (finding or making code at run time)."""

NUMBA_DENIED = (
    "numba.core", "numba.np", "numba.cpython", "numba.misc", "numba.parfors",
    "numba.extending", "numba.cuda.cudadrv", "numba.cuda.declare_device", "numba.cuda.compile",
)  # fmt: skip
"""Parts of Numba that emit code of their own (LLVM IR, a foreign function, a library's
implementation), which the reading cannot see."""

NUMBA_ALLOWED = frozenset({
    "numba.core.types", "numba.core.errors", "numba.extending.overload",
    "numba.extending.register_jitable",
})  # fmt: skip
"""Parts of the denied ones that are fine: types, errors, ``overload`` (its code is read
with what it overloads) and ``register_jitable``."""

DYNAMIC_CALLS = frozenset({
    "getattr", "setattr", "delattr", "__import__", "eval", "exec", "compile", "globals",
    "vars", "locals", "open", "breakpoint",
})  # fmt: skip
"""Builtins that find or make code at run time: a way around reading it."""

COLLECTIVE = re.compile(
    r"^[ip]?(?:all_?reduce|reduce(?:_scatter(?:_block)?)?|reduce_local|all_?gather[vw]?|"
    r"gather[vw]?|scatter[vw]?|b(?:road)?cast|all_?to_?all[vw]?|(?:ex)?scan|"
    r"neighbor_\w+)(?:_init)?$",
    re.IGNORECASE,
)
"""MPI's (and the like's) collective operations, by method name: ``Allreduce``,
``allreduce``, ``Reduce_scatter``, ``Iallgather``, ``Bcast``, ``all_reduce``..."""

OBJECT_METHODS = frozenset({
    "all", "any", "argmax", "argmin", "argpartition", "argsort", "astype", "base", "byteswap",
    "choose", "clip", "compress", "conj", "conjugate", "copy", "ctypes", "cumprod", "cumsum",
    "data", "device", "diagonal", "dot", "dtype", "dump", "dumps", "fill", "flags", "flat",
    "flatten", "getfield", "imag", "item", "itemset", "itemsize", "max", "mean", "min",
    "nbytes", "ndim", "newbyteorder", "nonzero", "partition", "prod", "ptp", "put", "ravel",
    "real", "repeat", "reshape", "resize", "round", "searchsorted", "setfield", "setflags",
    "shape", "size", "sort", "squeeze", "std", "strides", "sum", "swapaxes", "T", "mT", "take",
    "to_device", "tobytes", "tofile", "tolist", "tostring", "trace", "transpose", "var", "view",
    "copy_to_host", "copy_to_device", "is_c_contiguous", "is_f_contiguous", "split",
    "append", "extend", "insert", "pop", "remove", "index", "count", "clear", "reverse",
    "get", "items", "keys", "values", "update", "setdefault", "add", "discard", "join",
    "format", "startswith", "endswith", "strip", "encode", "decode", "bit_length", "is_integer",
    "Get_rank", "Get_size", "Sendrecv", "Send", "Recv", "Isend", "Irecv", "Wait", "Waitall",
})  # fmt: skip
"""Methods of the arrays, numbers, containers and communicators a task's functions are
given: ``obj.reshape(...)`` on an argument is the array's, not a class of the student's
that happens to have a ``reshape``. Any other ``obj.m(...)`` on an object the reading
cannot see reaches every ``m`` of the declared files' classes."""

HALF_NAMES = frozenset({"float16", "half", "bfloat16", "e", "f2", "<f2", ">f2", "=f2"})
INTEGER_DTYPE = re.compile(
    r"^[<>=|]?(?:u?int(?:8|16|32|64|p|c)?|[uUiI][1248]?|[bBhHlLqQ]|uintp|intp)$"
)
FLOAT_DTYPE = re.compile(r"^[<>=|]?(?:float(?:32|64)|f[48]|d|f|double|single)$")


class Rule:
    """What one kind of task may not use. A method returns the finding's text, or None."""

    name = ""
    host_calls = False
    """Refuse a call from a CUDA kernel to a host function."""

    def outside(self, value: Ext, shown: str, as_value: bool) -> str | None:
        """``shown`` (in the source: ``np.matmul``) is ``value``, a name outside the
        course's code; ``as_value``: passed around rather than called or looked into."""
        return None

    def method(self, attr: str, called: bool) -> str | None:
        """``obj.attr`` on an object the reading cannot see (a local, an argument)."""
        return None

    def call(self, call: ast.Call, func: list[Value] | None, scoped: Scoped) -> Iterator[str]:
        """A call, with what its function may be (None: a local)."""
        return iter(())

    def matmul(self) -> str | None:
        return None

    def store(self, attr: str) -> str | None:
        """A write to ``obj.attr`` (not ``self``'s)."""
        return None


def _module_text(dotted: str, shown: str) -> str:
    return shown if shown == dotted or not shown else f"{shown}, that is {dotted}"


class Kernel(Rule):
    """The student writes the computation: no library does it."""

    name = "kernel"
    host_calls = True

    def outside(self, value: Ext, shown: str, as_value: bool) -> str | None:
        dotted, root = value.dotted, value.root
        parts = dotted.split(".")
        if root == "numpy":
            if len(parts) == 1:
                return "NumPy itself, as a value (a way around the rule)" if as_value else None
            if parts[1] in NUMPY_ALLOWED and not COMPUTE_METHODS & set(parts[2:]):
                return None  # (np.ndarray.dot(a, b) is no allocation)
            chain = "." in shown and shown.split(".")[-1] == parts[-1]
            return f"NumPy's {shown if chain else dotted}"
        if root in SCALAR_MODULES or root in HARMLESS or dotted.startswith("collections.abc"):
            return None
        if root == "numba":
            if dotted in NUMBA_ALLOWED or any(
                dotted == a or dotted.startswith(a + ".") for a in NUMBA_ALLOWED
            ):
                return None
            if dotted.startswith(NUMBA_DENIED) or dotted in {d.rstrip(".") for d in NUMBA_DENIED}:
                return (f"{_module_text(dotted, shown)}: a part of Numba that emits code "
                        "of its own, which the reading cannot see")  # fmt: skip
            return None
        what = f"the module {root} ({_module_text(dotted, shown)})"
        if root in NUMERICAL:
            return f"{what}: another library's work"
        if root in ESCAPES:
            return f"{what}: a way around the rule"
        return f"{what}: not one a kernel task may use (Numba, math, NumPy's allocation and dtypes)"

    def method(self, attr: str, called: bool) -> str | None:
        if attr in COMPUTE_METHODS:
            return f"the method .{attr}{'()' if called else ''} (a library's loop)"
        return None

    def matmul(self) -> str | None:
        return "the operator @ (a library's matrix multiply)"


def _dtype_kind(expr: ast.AST | None, scoped: Scoped) -> str:
    """``integer``, ``float`` (32 or 64 bits), ``half``, or ``unknown`` for a dtype
    written in the source (``np.uint32``, ``"uint16"``, ``np.dtype("<u4")``, ``int``)."""
    if expr is None:
        return "unknown"
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        text = expr.value.strip()
        if text in HALF_NAMES:
            return "half"
        if INTEGER_DTYPE.match(text):
            return "integer"
        if FLOAT_DTYPE.match(text):
            return "float"
        return "unknown"
    if isinstance(expr, ast.Call) and len(expr.args) == 1 and not expr.keywords:
        values = scoped.chain(expr.func)
        if values and all(isinstance(v, Ext) and v.dotted == "numpy.dtype" for v in values):
            return _dtype_kind(expr.args[0], scoped)
        return "unknown"
    if isinstance(expr, ast.Name | ast.Attribute):
        values = scoped.chain(expr)
        kinds = set()
        for value in values or [None]:
            if isinstance(value, Builtin) and value.name in ("int", "bool"):
                kinds.add("integer")
            elif isinstance(value, Builtin) and value.name == "float":
                kinds.add("float")
            elif isinstance(value, Ext) and value.root == "numpy" and value.dotted.count(".") == 1:
                last = value.dotted.split(".")[1]
                if last in HALF_NAMES:
                    kinds.add("half")
                elif INTEGER_DTYPE.match(last) or last in ("bool_", "integer"):
                    kinds.add("integer")
                elif last in ("float32", "float64", "double", "single"):
                    kinds.add("float")
                else:
                    kinds.add("unknown")
            else:
                kinds.add("unknown")
        for kind in ("unknown", "half", "float"):
            if kind in kinds:
                return kind
        return "integer"
    return "unknown"


CONVERTERS = {"array": 1, "asarray": 1, "ascontiguousarray": 1, "asanyarray": 1, "full": 2}
"""NumPy's functions that make an array from data, and where their dtype goes."""


class Codec(Kernel):
    """A codec (6.3): the kernel rule, and no dtype conversion does the codec's work."""

    name = "codec"

    def call(self, call: ast.Call, func: list[Value] | None, scoped: Scoped) -> Iterator[str]:
        keyword = next((k.value for k in call.keywords if k.arg == "dtype"), None)
        shown = ast.unparse(call.func)
        if isinstance(call.func, ast.Attribute) and (func is None or func == []):
            attr = call.func.attr if isinstance(call.func, ast.Attribute) else ""
            if attr == "astype":
                target = call.args[0] if call.args else keyword
                kind = _dtype_kind(target, scoped)
                if kind != "integer":
                    yield (f"the conversion .astype({_shown(target)}) (a dtype cast by NumPy "
                           "does the codec's work)")  # fmt: skip
            elif attr == "view" and (call.args or keyword is not None):
                target = call.args[0] if call.args else keyword
                if _dtype_kind(target, scoped) not in ("integer", "float"):
                    yield (f"the view .view({_shown(target)}) (the bits read as a half type: "
                           "NumPy's conversion does the codec's work)")  # fmt: skip
            return
        for value in func or []:
            if not isinstance(value, Ext) or value.root != "numpy" or value.dotted.count(".") != 1:
                continue
            name = value.dotted.split(".")[1]
            target = keyword
            if name in CONVERTERS and len(call.args) > CONVERTERS[name]:
                target = call.args[CONVERTERS[name]]
            elif name == "dtype" and call.args:
                target = call.args[0]
            elif name == "ndarray" and len(call.args) > 1:
                target = call.args[1]
            elif name in HALF_NAMES and call.args:
                yield f"the conversion {shown}(...) (a cast by NumPy does the codec's work)"
                continue
            if target is None or name not in (*CONVERTERS, "dtype", "ndarray"):
                continue
            if _dtype_kind(target, scoped) not in ("integer", "float"):
                yield (f"the conversion {shown}(..., {_shown(target)}) (NumPy's cast does the "
                       "codec's work)")  # fmt: skip
            return


def _shown(expr: ast.AST | None) -> str:
    return "" if expr is None else ast.unparse(expr)


class Messages(Rule):
    """A communication algorithm (6.1): point-to-point messages only, no collective."""

    name = "messages"

    def outside(self, value: Ext, shown: str, as_value: bool) -> str | None:
        root = value.root
        if root in ("numpy", "numba") or root in SCALAR_MODULES or root in HARMLESS:
            return None
        what = f"the module {root} ({_module_text(value.dotted, shown)})"
        if root == "mpi4py":
            return (f"{what}: the ring talks through the communicator it is given, with "
                    "point-to-point messages only")  # fmt: skip
        if root in ESCAPES:
            return f"{what}: a way around the rule"
        return f"{what}: not one the ring needs (NumPy, math)"

    def method(self, attr: str, called: bool) -> str | None:
        if COLLECTIVE.match(attr):
            return f"the collective .{attr}{'()' if called else ''} (MPI's work, not the ring's)"
        if attr.startswith("_") and not attr.startswith("__"):
            return (f"the private attribute .{attr} (the ring talks through the "
                    "communicator's own methods)")  # fmt: skip
        return None

    def store(self, attr: str) -> str | None:
        return (f"a write to .{attr} of an object it was given (what the communicator "
                "counts is the check's)")  # fmt: skip


TOO_DEEP = "code nested too deeply to be read (what cannot be read is not credited)"

RULES: dict[str, Rule] = {"kernel": Kernel(), "codec": Codec(), "messages": Messages()}
"""The rules by the registry's ``own_work``."""


def rule_of(task: Task) -> Rule:
    """The rule a task's code is read by; KeyError for a task that has none."""
    return RULES[task.own_work]
