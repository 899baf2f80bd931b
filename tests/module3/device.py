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
"""

from __future__ import annotations

import os
from collections.abc import Iterator
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


@pytest.fixture(autouse=True)
def uninitialised_memory_is_nan(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``cuda.device_array`` gives nan-filled arrays: what an unwritten entry holds."""
    original = cuda.device_array

    def device_array(shape: Any, dtype: Any = np.float64, *args: Any, **kwargs: Any) -> Any:
        array = original(shape, dtype, *args, **kwargs)
        if np.dtype(dtype).kind == "f":
            array.copy_to_device(np.full(array.shape, np.nan, dtype=dtype))
        return array

    monkeypatch.setattr(cuda, "device_array", device_array)
    yield


def device_copy(storage: np.ndarray) -> Any:
    """``storage`` copied to a new device array."""
    return cuda.to_device(np.ascontiguousarray(storage))


def host(array: Any, size: int) -> np.ndarray:
    """A host copy of a 1-D device array of ``size`` float64 entries, read as
    ``exact_tensor`` reads a device storage (with Numba's own ``copy_to_host``)."""
    return exact_tensor(Tensor(TensorData(array, (size,))), "device array")
