"""Helpers for the CUDA backend's tests: device arrays in and out, nan for memory that
no kernel wrote, and Hypothesis settings for the simulator.

An unimplemented kernel writes nothing, and the backend's outputs are uninitialised
device arrays (``cuda.device_array``): memory that may still hold the right values from
an earlier computation (on the simulator, a NumPy buffer just freed by the test itself).
The fixture :func:`uninitialised_memory_is_nan`, imported into a test module, makes every
new float device array of that module's tests nan-filled instead, so a kernel that
skips an entry is always caught, on a GPU and on the simulator alike.

On the simulator every CUDA thread is a Python thread, and an example costs 10 ms to
a few seconds, so :func:`examples` runs few of them there and does not shrink a failing
one (shrinking runs the test hundreds of times more: 18 minutes for this stage's tests
on the handout). The examples are tiny anyway; on a GPU failures shrink as usual.

:func:`shared_memory_log` and :meth:`SharedLog.assert_blocks_cooperate` check *how* a
kernel computes, which values alone cannot: that the threads of a block combine their
work through shared memory behind a barrier, rather than one thread doing it all. On the
simulator the log records, during a launch, every shared array the kernel allocates,
which threads write into one, and the barriers; on a GPU the compiled kernel's PTX must
store to shared memory and hold a barrier.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import Phase, settings
from numba import cuda

from module1.tensor import Tensor
from module1.tensor_data import TensorData
from tests.strict import exact_tensor

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
"""Whether the kernels run on Numba's CUDA simulator (read by Numba at its import)."""


def examples(n: int) -> settings:
    """At most ``n`` examples, the profile's other settings, and no shrinking on the
    simulator."""
    phases = tuple(p for p in settings().phases if not (SIMULATOR and p is Phase.shrink))
    return settings(max_examples=n, phases=phases)


@contextmanager
def nan_device_arrays() -> Iterator[None]:
    """Inside, ``cuda.device_array`` gives nan-filled float arrays: what an entry no
    kernel wrote then holds (uninitialised memory may hold an earlier right answer)."""
    original = cuda.device_array

    def device_array(shape: Any, dtype: Any = np.float64, *args: Any, **kwargs: Any) -> Any:
        array = original(shape, dtype, *args, **kwargs)
        if np.dtype(dtype).kind == "f":
            array.copy_to_device(np.full(array.shape, np.nan, dtype=dtype))
        return array

    cuda.device_array = device_array
    try:
        yield
    finally:
        cuda.device_array = original


@pytest.fixture(autouse=True)
def uninitialised_memory_is_nan() -> Iterator[None]:
    """``cuda.device_array`` gives nan-filled arrays: what an unwritten entry holds."""
    with nan_device_arrays():
        yield


def device_copy(storage: np.ndarray) -> Any:
    """``storage`` copied to a new device array."""
    return cuda.to_device(np.ascontiguousarray(storage))


def host(array: Any, size: int) -> np.ndarray:
    """A host copy of a 1-D device array of ``size`` float64 entries, read as
    ``exact_tensor`` reads a device storage (with Numba's own ``copy_to_host``). The
    strides are given, so no task's code (``strides_from_shape``) runs to read it."""
    return exact_tensor(Tensor(TensorData(array, (size,), (1,))), "device array")


Thread = tuple[tuple[int, int, int], tuple[int, int, int]]
"""A simulated CUDA thread: ``(blockIdx, threadIdx)``."""


@dataclass
class SharedLog:
    """What the launches inside :func:`shared_memory_log` did with shared memory (on the
    simulator; empty on a GPU, where the PTX is checked instead)."""

    sites: set[tuple[str, int]] = field(default_factory=set)
    """Where the kernel allocated shared arrays (file, line)."""
    writers: set[Thread] = field(default_factory=set)
    """Every thread that wrote into a shared array."""
    barriers: set[Thread] = field(default_factory=set)
    """Every thread that called ``cuda.syncthreads()``."""

    def assert_blocks_cooperate(self, kernel: Any, blocks: int, threads: int) -> None:
        """In each of ``blocks`` blocks of ``threads`` threads, at least half the threads
        wrote into a shared array and the threads met at a barrier. On a GPU: the PTX
        of ``kernel`` (every signature compiled so far) stores to shared memory and
        holds a barrier."""
        if not SIMULATOR:
            ptx = "\n".join(kernel.inspect_asm().values())
            assert re.search(r"\bst\.shared\.", ptx), "the kernel never stores to shared memory"
            assert re.search(r"\bbar(rier)?(\.cta)?\.sync\b", ptx), "the kernel has no barrier"
            return
        assert self.sites, "the kernel allocates no shared memory (cuda.shared.array)"
        for block in ((b, 0, 0) for b in range(blocks)):
            wrote = {t for b, t in self.writers if b == block}
            assert len(wrote) >= threads // 2, (
                f"block {block}: {len(wrote)} of its {threads} threads wrote into shared "
                "memory; the block's threads should each fold a part and combine the parts there"
            )
            assert any(b == block for b, _ in self.barriers), (
                f"block {block}: no thread called cuda.syncthreads()"
            )


@contextmanager
def shared_memory_log() -> Iterator[SharedLog]:
    """Record shared-memory use of the simulator's launches inside the block (nothing is
    recorded on a GPU). Shared arrays start nan-filled, so a read of an entry no thread
    wrote shows in the result."""
    log = SharedLog()
    if not SIMULATOR:
        yield log
        return
    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    lock = threading.Lock()

    def thread() -> Thread:
        current: Any = threading.current_thread()
        return tuple(current.blockIdx), tuple(current.threadIdx)

    class Recorded(np.ndarray):
        def __setitem__(self, key: Any, value: Any) -> None:
            log.writers.add(thread())
            super().__setitem__(key, value)

    original_array = kernelapi.FakeCUDAShared.array
    original_sync = kernelapi.FakeCUDAModule.syncthreads

    def array(shared: Any, shape: Any, dtype: Any) -> Any:
        if shape == 0:  # dynamic shared memory: one buffer, whoever asks
            return original_array(shared, shape, dtype).view(Recorded)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        caller = sys._getframe(1)
        site = (caller.f_code.co_filename, caller.f_lineno)
        with lock:  # one array per allocating line per launch, as the simulator does
            buffer = shared._allocations.get(site)
            if buffer is None:
                fill = np.nan if np.dtype(dtype).kind == "f" else 0
                buffer = shared._allocations[site] = np.full(shape, fill, dtype)
                log.sites.add(site)
        return buffer.view(Recorded)

    def syncthreads(module: Any) -> None:
        log.barriers.add(thread())
        original_sync(module)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernelapi.FakeCUDAShared, "array", array)
        patch.setattr(kernelapi.FakeCUDAModule, "syncthreads", syncthreads)
        yield log
