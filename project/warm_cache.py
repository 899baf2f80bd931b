"""Compile a CNN training step's kernels in a second process while the job starts.

    python -m project.warm_cache [--dtype float32]

With an empty kernel cache a CNN training job (the main job, ``train_mnist``) spends
most of its first minute compiling Numba kernels, one after another on one core: Numba
compiles one function at a time per process, and each kernel compiles when the job
first calls it. :func:`start` runs this module in a child process that compiles the
same kernels, with the same argument types, in the *reverse* of the order in which a
training step first meets them (the optimizer's first, the forward convolution's
last), into the same on-disk cache (``cache=True``). The job compiles from the front,
the child from the back; a kernel the child has saved is loaded when the job reaches
it, so the two cores share the work and they meet about halfway.

Only a speed-up: the child's output is discarded, a step that fails is skipped, the
job never waits for it, and it is ended when the job ends (:func:`warming`). No child
starts when every kernel is in the cache already, under pytest, or with
``MINITORCH_WARM_CACHE=0``. Each step calls the kernel on tiny arrays through the same
Python code the layers use, so its argument types are the job's (``NUMBA_DEBUG_CACHE=1``
on the job shows the kernels as loaded).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np


def steps(dtype: str) -> list[tuple[str, Callable[[], Any], Any]]:
    """``(name, compile, dispatcher)`` for each kernel of a CNN training step, last met
    first. ``compile`` calls the kernel once on tiny inputs of ``dtype``."""
    from module0 import operators
    from module1.tensor import from_numpy
    from module2 import fast_matmul
    from module2.fast_ops import (
        FastOps,
        FastTensorBackend,
        tensor_map_kernel,
        tensor_matrix_multiply_kernel,
        tensor_reduce_kernel,
        tensor_zip_kernel,
    )
    from module2.fast_optim import adam_update
    from module4 import fast_conv, nn

    rng = np.random.default_rng(0)

    def array(*shape: int) -> np.ndarray:
        return rng.random(shape).astype(dtype)

    def tensor(*shape: int) -> Any:
        return from_numpy(array(*shape), FastTensorBackend)

    x, w, y = array(2, 2, 6, 6), array(3, 2, 3, 3), array(2, 3, 6, 6)
    where = np.zeros((2, 2, 3, 3), np.int64)
    flat = array(5)
    return [
        ("adam", lambda: adam_update(flat, flat, array(5), array(5), 1e-3, 0.9, 0.999, 1e-8, 1),
         adam_update),
        ("conv2d backward weight",
         lambda: fast_conv.conv2d_backward_weight(np.empty_like(w), x, y, 1, 1, 1, 1),
         fast_conv.conv2d_backward_weight),
        ("conv2d backward input",
         lambda: fast_conv.conv2d_backward_input(np.empty_like(x), y, w, 1, 1, 1, 1),
         fast_conv.conv2d_backward_input),
        ("maxpool2d backward",
         lambda: nn.maxpool2d_backward(np.empty_like(x), array(2, 2, 3, 3), where, 2, 2),
         nn.maxpool2d_backward),
        ("reduce", lambda: FastOps.reduce(operators.add, 0.0)(tensor(2, 3), 0),
         tensor_reduce_kernel),
        ("task 2.3 matmul", lambda: FastOps.matrix_multiply(tensor(48, 48), tensor(48, 48)),
         getattr(fast_matmul, "gemm_into", fast_matmul.gemm)),  # the reference's driver: gemm_into
        ("task 2.2 matmul", lambda: FastOps.matrix_multiply(tensor(2, 3), tensor(3, 4)),
         tensor_matrix_multiply_kernel),
        ("maxpool2d forward",
         lambda: nn.maxpool2d_forward(array(2, 2, 3, 3), where, x, 2, 2), nn.maxpool2d_forward),
        ("map", lambda: FastOps.map(operators.relu)(tensor(2, 3)), tensor_map_kernel),
        ("zip", lambda: FastOps.zip(operators.add)(tensor(2, 3), tensor(2, 3)), tensor_zip_kernel),
        ("conv2d forward",
         lambda: fast_conv.conv2d_forward(np.empty_like(y), x, w, 1, 1, 1, 1),
         fast_conv.conv2d_forward),
    ]  # fmt: skip


def warm(dtype: str) -> list[str]:
    """Run :func:`steps` in order; the names of the kernels compiled (not loaded).
    Stops at the first step if that kernel came from the cache."""
    compiled = []
    for i, (name, run, dispatcher) in enumerate(steps(dtype)):
        try:
            run()
        except Exception:  # a speed-up only: the job itself reports real errors
            continue
        stats = getattr(dispatcher, "stats", None)
        if stats is not None and stats.cache_misses:
            compiled.append(name)
        elif i == 0:
            break
    return compiled


def cached(dispatcher: Any, dtype: str) -> bool:
    """Whether Numba's cache holds a current entry of ``dispatcher`` for arrays of
    ``dtype``. Reads the cache index with Numba's own (private) reader, which returns
    nothing for an index older than its source; False where that fails."""
    try:
        index = dispatcher._cache._cache_file._load_index()
        return any(f"Array({dtype}," in str(key[0]) for key in index)
    except Exception:  # a Numba without this reader: assume a cold cache
        return False


def on_disk(dispatcher: Any) -> bool:
    """Whether ``dispatcher`` keeps what it compiles in Numba's disk cache
    (``cache=True``): compiling one without it in another process saves the job nothing."""
    cache = getattr(dispatcher, "_cache", None)
    return cache is not None and type(cache).__name__ != "NullCache"


def start(dtype: str = "float64") -> subprocess.Popen[bytes] | None:
    """Start ``python -m project.warm_cache --dtype dtype`` in the background (output
    discarded). None, starting nothing, where every kernel is cached already (a process
    that only loaded them cost a warm run about a second) or not cacheable, where it
    cannot start, with ``MINITORCH_WARM_CACHE=0``, or under pytest (tests call the
    scripts in-process, and a suite's workers have the cores already)."""
    if os.environ.get("MINITORCH_WARM_CACHE") == "0" or "PYTEST_CURRENT_TEST" in os.environ:
        return None
    try:
        kernels = [dispatcher for _, _, dispatcher in steps(dtype)]
    except Exception:  # e.g. a stage not importable: the job reports it
        return None
    if all(cached(kernel, dtype) or not on_disk(kernel) for kernel in kernels):
        return None
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "project.warm_cache", "--dtype", dtype],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    except OSError:
        return None


def stop(process: subprocess.Popen[bytes] | None) -> None:
    """End a :func:`start`-ed process if it still runs (a kernel it was compiling is
    simply not saved)."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()


@contextmanager
def warming(dtype: str = "float64") -> Iterator[subprocess.Popen[bytes] | None]:
    """:func:`start` on entry, :func:`stop` on exit: a job's ``with`` block."""
    process = start(dtype)
    try:
        yield process
    finally:
        stop(process)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m project.warm_cache",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    ns = ap.parse_args(argv)
    compiled = warm(ns.dtype)
    print("compiled: " + (", ".join(compiled) if compiled else "nothing (cache warm)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
