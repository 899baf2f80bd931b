"""Tasks 1.1's and 1.2's index functions compiled as stage 2 compiles them.

Stage 2 runs ``to_index``, ``index_to_position`` and ``broadcast_index`` inside
``numba.njit`` kernels, so an answer Numba cannot compile (``zip(..., strict=True)``, a
tuple built on the fly, a ``raise`` with a computed message) would pass every test of
stage 1 and then fail task 2.1. The tests and graded checks of tasks 1.1 and 1.2 compile
them here, for the argument types the kernels pass (int32 index arrays, an int ordinal),
so the mistake is reported where it is made.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

TASK_OF = {"index_to_position": "1.1", "to_index": "1.1", "broadcast_index": "1.2"}

_ARGUMENTS = {  # the argument types stage 2's kernels call them with
    "index_to_position": ("index", "index"),
    "to_index": ("ordinal", "index", "index"),
    "broadcast_index": ("index", "index", "index", "index"),
}


class NotCompilableError(TypeError):
    """An index function Numba cannot compile: the message names the task's rule and
    gives the start of Numba's own message."""


@functools.cache
def compiled(name: str) -> Any:
    """``module1.tensor_data.<name>`` compiled with ``numba.njit`` for stage 2's argument
    types; :class:`NotCompilableError` if Numba refuses it."""
    import numba

    from module1 import tensor_data

    types = {"index": numba.typeof(np.zeros(1, np.int32)), "ordinal": numba.int64}
    dispatcher = numba.njit(getattr(tensor_data, name))
    try:
        dispatcher.compile(tuple(types[kind] for kind in _ARGUMENTS[name]))
    except Exception as exc:  # Numba raises its own errors, and bare ones (AssertionError)
        said = [line for line in str(exc).splitlines() if line.strip()][:6]
        task = TASK_OF[name]
        raise NotCompilableError(
            f"{name} does not compile with numba.njit, as stage 2 will compile it "
            f"(module1/README.md, task {task}: plain loops and integer arithmetic, no "
            "tuples built on the fly, no zip(strict=...), no exceptions). Numba said: "
            + (" | ".join(said) or f"{type(exc).__name__} while compiling it")
        ) from None
    return dispatcher
