"""Where a step's time goes: the fast backend's kernels timed by family.

``with kernel_profile() as times: ...`` replaces each compiled kernel that Python code
calls (the module attributes listed in :data:`KERNELS`) by a wrapper that adds its
wall time to ``times[family]``; on exit the originals are back. A kernel called from
inside another timed one is counted once, in the outer one's family. What is left of a
step's time after the families is Python: building and walking the graph, allocating
outputs, dispatching to the kernels (:func:`breakdown`).

The benchmark (``project/bench_gpt.py``) prints this per configuration, so a change
that claims to save a pass over memory shows up in its family.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable, Iterator
from typing import Any

KERNELS: dict[str, list[tuple[str, str]]] = {
    "matmul": [
        ("module2.fast_ops", "matmul_small"),
        ("module2.fast_ops", "tensor_matrix_multiply_kernel"),
        ("module2.fast_matmul", "gemm"),
        ("module2.fast_matmul", "gemm_into"),
        ("module2.fast_matmul", "zero_fill"),
        ("module2.fast_matmul", "batch_bases"),
        ("module4.fast_linear", "fill_rows"),
    ],
    "attention": [
        ("module5.fused", "causal_attention"),
        ("module5.fused", "causal_attention_backward"),
        ("module5.fast_block", "move_heads"),
    ],
    "layer norm, GELU, softmax": [
        ("module5.fused", "layer_norm_rows"),
        ("module5.fused", "layer_norm_rows_backward"),
        ("module5.fused", "gelu_forward"),
        ("module5.fused", "gelu_backward"),
        ("module5.fused", "softmax_rows"),
        ("module5.fused", "softmax_rows_backward"),
    ],
    "map, zip": [
        ("module2.fast_ops", "tensor_map_kernel"),
        ("module2.fast_ops", "tensor_zip_kernel"),
        ("module2.fast_ops", "vector_math_map"),
    ],
    "reduce": [("module2.fast_ops", "tensor_reduce_kernel")],
    "gather, scatter": [
        ("module2.fast_index", "gather"),
        ("module2.fast_index", "scatter_add"),
    ],
    "split (copies, zeros)": [
        ("module1.shape_ops", "_Narrow.forward"),
        ("module1.shape_ops", "_Narrow.backward"),
    ],
    "clip, optimizer": [
        ("module5.optim", "clip_grad_norm_"),
        ("module5.optim", "adam_update"),
        ("module5.fast_optim", "adamw_update"),
    ],
}
"""Each family's kernels, as (module, attribute) pairs that callers look up at call time
(``Class.method`` for a Function's static forward or backward). A module or an
attribute that is not there (a handout has none of the reference's fast paths, some of
which live in files a handout has) is passed over."""

PYTHON = "Python (graph, dispatch, allocation)"


def _timed(fn: Callable[..., Any], family: str, times: dict[str, float], depth: list[int]) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        depth[0] += 1
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                times[family] = times.get(family, 0.0) + time.perf_counter() - start

    return wrapper


@contextlib.contextmanager
def kernel_profile() -> Iterator[dict[str, float]]:
    """Time every kernel of :data:`KERNELS` by family while the block runs (seconds)."""
    times: dict[str, float] = {}
    depth = [0]
    saved: list[tuple[Any, str, Any]] = []
    try:
        for family, names in KERNELS.items():
            for module_name, path in names:
                try:
                    owner: Any = importlib.import_module(module_name)
                except ModuleNotFoundError:
                    continue
                *outer, attribute = path.split(".")
                try:
                    for name in outer:  # a class: its static method
                        owner = getattr(owner, name)
                    raw = owner.__dict__[attribute] if outer else getattr(owner, attribute)
                except (AttributeError, KeyError):  # a handout: no reference fast path
                    continue
                original = raw.__func__ if isinstance(raw, staticmethod) else raw
                timed = _timed(original, family, times, depth)
                saved.append((owner, attribute, raw))
                setattr(owner, attribute, staticmethod(timed) if outer else timed)
        yield times
    finally:
        for module, attribute, original in reversed(saved):
            setattr(module, attribute, original)


def breakdown(times: dict[str, float], total: float, steps: int) -> dict[str, float]:
    """Milliseconds per step by family, largest first, with :data:`PYTHON` (the rest of
    ``total`` seconds over ``steps`` steps) last."""
    per_step = {family: 1e3 * seconds / steps for family, seconds in times.items()}
    ordered = dict(sorted(per_step.items(), key=lambda item: -item[1]))
    ordered[PYTHON] = 1e3 * total / steps - sum(per_step.values())
    return ordered
