"""Stage 0's operators and stage 1's index functions compiled with Numba, and the op codes
the fast kernels switch on: the given base of stage 2's kernels (``module2/fast_ops.py``,
``module2/fast_matmul.py``), and, through :func:`jit_functions`, of stage 3's.

Compiled, not rewritten: :func:`jit_functions` builds each from its own source, and the
kernel cache is keyed on those files too (:mod:`module2.cache`), so an edit to
``module0/operators.py`` or ``module1/tensor_data.py`` recompiles the kernels.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from typing import Any

from numba import njit

from module0 import operators
from module1 import tensor_data
from module1.tensor_data import Shape
from module1.tensor_ops import is_close_float
from module2 import cache

# Before any cached kernel of stage 2 is decorated (fast_paths.py's among them, which
# fast_ops.py imports): Numba picks a function's cache locator when it is decorated.
cache.install()


def jit_functions(
    module: types.ModuleType,
    names: Iterable[str],
    decorator: Callable[[Callable[..., Any]], Any] | None = None,
) -> dict[str, Any]:
    """Compile the functions ``names`` of ``module`` with ``decorator``, by default
    ``njit(inline="always")`` (stage 3 passes ``cuda.jit(device=True)``).

    They may call each other (``log_back`` calls ``inv``): each is rebuilt from its own
    code object over a shared namespace in which every listed name is its compiled
    version, so Numba resolves those calls to compiled code."""
    jit = decorator if decorator is not None else njit(inline="always")
    namespace: dict[str, Any] = dict(vars(module))
    compiled: dict[str, Any] = {}
    for name in names:
        fn = getattr(module, name)
        clone = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__)
        compiled[name] = jit(clone)
    namespace.update(compiled)
    return compiled


_index = jit_functions(tensor_data, ("to_index", "index_to_position", "broadcast_index"))
to_index = _index["to_index"]
index_to_position = _index["index_to_position"]
broadcast_index = _index["broadcast_index"]

UNARY_NAMES = ("neg", "sigmoid", "relu", "log", "exp", "id", "inv", "tanh")
BINARY_NAMES = (
    "add", "mul", "lt", "eq", "max", "power", "relu_back", "log_back", "inv_back", "is_close",
)  # fmt: skip
_ops = jit_functions(operators, UNARY_NAMES + BINARY_NAMES)
_neg, _sigmoid, _relu, _log, _exp, _id, _inv, _tanh = (_ops[n] for n in UNARY_NAMES)
_add, _mul, _lt, _eq, _max, _power, _relu_back, _log_back, _inv_back, _is_close = (
    _ops[n] for n in BINARY_NAMES
)

# Op codes: the float function each kernel applies.
OP_NEG, OP_SIGMOID, OP_RELU, OP_LOG, OP_EXP, OP_ID, OP_INV, OP_TANH = range(8)
(
    OP_ADD, OP_MUL, OP_LT, OP_EQ, OP_MAX, OP_POW, OP_RELU_BACK, OP_LOG_BACK, OP_INV_BACK,
    OP_IS_CLOSE,
) = range(10)  # fmt: skip

UNARY_OPS: dict[Callable[..., Any], int] = {
    getattr(operators, name): code for code, name in enumerate(UNARY_NAMES)
}
BINARY_OPS: dict[Callable[..., Any], int] = {
    getattr(operators, name): code for code, name in enumerate(BINARY_NAMES)
}
BINARY_OPS[is_close_float] = OP_IS_CLOSE


@njit(inline="always")
def unary(op: int, x: float) -> float:
    """The unary float function with op code ``op``."""
    if op == OP_NEG:
        return _neg(x)
    if op == OP_SIGMOID:
        return _sigmoid(x)
    if op == OP_RELU:
        return _relu(x)
    if op == OP_LOG:
        return _log(x)
    if op == OP_EXP:
        return _exp(x)
    if op == OP_INV:
        return _inv(x)
    if op == OP_TANH:
        return _tanh(x)
    return _id(x)


@njit(inline="always")
def binary(op: int, x: float, y: float) -> float:
    """The binary float function with op code ``op``."""
    if op == OP_ADD:
        return _add(x, y)
    if op == OP_MUL:
        return _mul(x, y)
    if op == OP_LT:
        return _lt(x, y)
    if op == OP_EQ:
        return _eq(x, y)
    if op == OP_MAX:
        return _max(x, y)
    if op == OP_POW:
        return _power(x, y)
    if op == OP_RELU_BACK:
        return _relu_back(x, y)
    if op == OP_LOG_BACK:
        return _log_back(x, y)
    if op == OP_INV_BACK:
        return _inv_back(x, y)
    return 1.0 if _is_close(x, y) else 0.0


PARALLEL_MIN = 1 << 15
"""The reference's cut-off: kernels with fewer outputs (or multiply-adds) than this run
on the calling thread, where waking the thread pool costs more than the loop. Optional:
a kernel that always runs its ``prange`` loop is correct too, only slower on small
tensors."""


@njit(inline="always")
def size_of(shape: Shape) -> int:
    """The number of entries of ``shape``."""
    size = 1
    for dim in range(len(shape)):
        size *= shape[dim]
    return size
