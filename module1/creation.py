"""Making tensors: ``tensor``, ``zeros``, ``ones``, ``rand`` and ``from_numpy`` (given
code). Also importable from ``module1.tensor``, and from ``module1`` as ``mt.tensor``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from module1.tensor import Tensor, _ints
from module1.tensor_data import ShapeError, TensorData, as_dtype, float32, float64
from module1.tensor_ops import SimpleBackend, TensorBackend

_generator = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Restart the generator :func:`rand` draws from (it starts at seed 0)."""
    global _generator
    _generator = np.random.default_rng(seed)


def default_generator() -> np.random.Generator:
    """The generator :func:`rand` draws from without a seed (stage 4's dropout too):
    read it at each use, since :func:`manual_seed` replaces it."""
    return _generator


def _shape_of(shape: tuple[Any, ...]) -> tuple[int, ...]:
    out = _ints(shape)
    if any(s < 0 for s in out):
        raise ShapeError(f"a shape cannot have a negative size: {out}")
    return out


def from_numpy(
    array: npt.ArrayLike,
    backend: TensorBackend = SimpleBackend,
    requires_grad: bool = False,
    dtype: Any = None,
    copy: bool = True,
) -> Tensor:
    """A tensor with a copy of ``array``'s values and its shape. Its dtype is ``dtype``,
    else the array's when that is float32 or float64, else float64. With ``copy=False``
    a writeable C-contiguous array of that dtype becomes the tensor's storage itself
    (for an array an operation has just made and hands over: no second copy)."""
    if dtype is None:
        kept = isinstance(array, np.ndarray) and array.dtype in (float32, float64)
        dtype = array.dtype if kept else float64  # type: ignore[union-attr]
    values = np.array(array, dtype=as_dtype(dtype), copy=True if copy else None)
    if not values.flags.writeable:  # a read-only view (``Tensor.numpy()``) is copied
        values = values.copy()
    return Tensor(
        TensorData(values.reshape(-1), values.shape), backend=backend, requires_grad=requires_grad
    )


def tensor(
    data: Any,
    backend: TensorBackend = SimpleBackend,
    requires_grad: bool = False,
    dtype: Any = None,
) -> Tensor:
    """A tensor from a number or (nested) lists of numbers: ``tensor([[1, 2], [3, 4]])``
    (float64 unless ``dtype`` says float32)."""
    kind = as_dtype(float64 if dtype is None else dtype)
    try:
        values = np.array(data, dtype=kind)
    except (ValueError, TypeError) as err:
        raise ShapeError(f"tensor() needs a number or rectangular nested lists: {err}") from None
    return from_numpy(values, backend, requires_grad)


def zeros(
    *shape: int | Sequence[int],
    backend: TensorBackend = SimpleBackend,
    requires_grad: bool = False,
    dtype: Any = None,
) -> Tensor:
    """A tensor of zeros: ``zeros(2, 3)`` or ``zeros((2, 3))``."""
    kind = as_dtype(float64 if dtype is None else dtype)
    return from_numpy(np.zeros(_shape_of(shape), kind), backend, requires_grad)


def ones(
    *shape: int | Sequence[int],
    backend: TensorBackend = SimpleBackend,
    requires_grad: bool = False,
    dtype: Any = None,
) -> Tensor:
    """A tensor of ones: ``ones(2, 3)`` or ``ones((2, 3))``."""
    kind = as_dtype(float64 if dtype is None else dtype)
    return from_numpy(np.ones(_shape_of(shape), kind), backend, requires_grad)


def rand(
    *shape: int | Sequence[int],
    backend: TensorBackend = SimpleBackend,
    requires_grad: bool = False,
    seed: int | None = None,
    dtype: Any = None,
) -> Tensor:
    """Uniform values in [0, 1). With ``seed`` the values depend on it alone; without,
    they come from the generator :func:`manual_seed` restarts (seed 0 at import). The
    values are drawn in float64 and then rounded to ``dtype``, so a float32 tensor has
    the same values as a float64 one of the same seed, to float32 precision."""
    generator = _generator if seed is None else np.random.default_rng(seed)
    values = generator.random(_shape_of(shape))
    if dtype is not None and as_dtype(dtype) == float32:
        values = np.minimum(values, 1.0 - 2.0**-24)  # rounds below 1.0, not to it
    return from_numpy(values, backend, requires_grad, dtype)
