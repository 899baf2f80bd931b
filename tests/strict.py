"""Exact-type checks for the values a test gets back from the code it grades.

``assert operators.add(1.0, 2.0) == 3.0`` trusts the object ``add`` returned: ``==``
runs *that object's* ``__eq__``. An object whose ``__eq__`` always answers True (or a
``float`` subclass that does) would pass without computing anything, and so would
``pytest.approx(...)``, ``math.isclose``, ``math.isnan``, ``not x`` and ``x < y``, which
all call back into the object (``__eq__``, ``__float__``, ``__bool__``, ``__lt__``...).

So a graded test passes every value it gets from the code under test through one of
these helpers before comparing it. Each helper checks ``type(value) is <builtin type>``
(a subclass is refused too: it could override the comparisons) and returns the value
unchanged, so the assertion still reads naturally::

    assert exact_float(operators.mul(2.0, 3.0)) == 6.0
    assert exact_float(x.derivative) == pytest.approx(27.0)
    assert exact_list(operators.negList([1.0, -2.0])) == [-1.0, 2.0]

A value of the wrong type fails the test with an AssertionError that names the type
that came back (``expected exactly float, got int 1``); the traceback shows the call.

Identity checks need no helper: ``result is True`` or ``pairs[0][0] is x`` (with ``x``
made by the test) cannot be faked by the object's methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Check = Callable[..., Any]
"""One of the ``exact_*`` helpers below (called as ``check(value, what=...)``)."""

# Builtin types whose repr is safe to show: it runs no code from the submission.
_SAFE_REPR = (bool, int, float, str, type(None))


def _describe(value: object) -> str:
    kind = type(value)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    if kind in _SAFE_REPR:
        return f"{name} {value!r}"
    return name


def _exact(value: Any, kind: type, what: str) -> Any:
    if type(value) is not kind:
        raise AssertionError(f"{what}: expected exactly {kind.__name__}, got {_describe(value)}")
    return value


def exact_float(value: Any, what: str = "value") -> float:
    """``value`` if its type is exactly ``float`` (not int, bool or a subclass)."""
    return _exact(value, float, what)


def exact_int(value: Any, what: str = "value") -> int:
    """``value`` if its type is exactly ``int`` (not bool or a subclass)."""
    return _exact(value, int, what)


def exact_bool(value: Any, what: str = "value") -> bool:
    """``value`` if it is ``True`` or ``False`` (not 1, 1.0 or a truthy object)."""
    return _exact(value, bool, what)


def exact_str(value: Any, what: str = "value") -> str:
    """``value`` if its type is exactly ``str`` (not a subclass)."""
    return _exact(value, str, what)


def exact_list(value: Any, item: Check | None = exact_float, what: str = "value") -> list[Any]:
    """``value`` if its type is exactly ``list`` and ``item`` accepts each element.

    ``item=None`` checks no element: use it for lists of objects that the test then
    compares by identity (``children[0] is root.mid``) or checks one by one.
    """
    _exact(value, list, what)
    if item is not None:
        for i, element in enumerate(value):
            item(element, what=f"{what}[{i}]")
    return value


def exact_tuple(value: Any, item: Check | None = None, what: str = "value") -> tuple[Any, ...]:
    """``value`` if its type is exactly ``tuple`` and ``item`` (if given) accepts each
    element. Elements are not checked by default: tuples usually mix types."""
    _exact(value, tuple, what)
    if item is not None:
        for i, element in enumerate(value):
            item(element, what=f"{what}[{i}]")
    return value


# Numba's device array classes (stage 3): a storage of exactly one of these types is read
# with that class's own ``copy_to_host``. Module and class names, so that Numba is
# imported only when such a storage turns up (it then already is).
_DEVICE_ARRAYS = (
    ("numba.cuda.cudadrv.devicearray", "DeviceNDArray"),  # on a GPU
    ("numba.cuda.simulator.cudadrv.devicearray", "FakeCUDAArray"),  # on the simulator
)
_COPY_TO_HOST: dict[type, Callable[..., Any]] = {}
"""Each device array class's ``copy_to_host``, as found on the class at its first use."""


def _device_copy(storage: Any, what: str) -> Any:
    """A host copy of ``storage`` if its type is exactly one of Numba's device array
    classes, made by that class's ``copy_to_host`` (taken from the class, and only if
    Numba's module defines it: never a method looked up on the instance), else None."""
    import importlib

    import numpy as np

    kind = type(storage)
    for module_name, class_name in _DEVICE_ARRAYS:
        if kind.__module__ != module_name or kind.__qualname__ != class_name:
            continue
        if kind is not getattr(importlib.import_module(module_name), class_name, None):
            return None
        copy = _COPY_TO_HOST.get(kind)
        if copy is None:
            copy = kind.copy_to_host
            if getattr(copy, "__module__", None) != module_name:
                raise AssertionError(
                    f"{what}: {class_name}.copy_to_host is not Numba's (it comes from "
                    f"{getattr(copy, '__module__', None)!r})"
                )
            _COPY_TO_HOST[kind] = copy
        host = copy(storage)
        if type(host) is not np.ndarray:
            raise AssertionError(f"{what}: the device storage copied to {_describe(host)}")
        return host
    return None


def exact_tensor(value: Any, what: str = "tensor", dtype: Any = None) -> Any:
    """The values of ``value`` as a fresh NumPy array, if ``value`` is exactly a stage-1
    ``Tensor`` over exactly a ``TensorData`` whose storage is a 1-D array of ``dtype``
    (float64 unless told float32) —
    exactly a ``numpy.ndarray``, or exactly one of Numba's CUDA device array classes
    (``DeviceNDArray``; ``FakeCUDAArray`` on the simulator) — and whose shape and
    strides are tuples of exact ints.

    The array is read with NumPy alone (``as_strided`` over the storage, then copied),
    so no method of the object under test runs; a device storage is first copied to a
    fresh host array by its class's own ``copy_to_host``, taken from Numba's class, not
    from the object. Compare the result with ``numpy.testing``.
    """
    import numpy as np

    from module1.tensor import Tensor
    from module1.tensor_data import TensorData

    kind = np.dtype(np.float64 if dtype is None else dtype)
    _exact(value, Tensor, what)
    data = _exact(value._tensor, TensorData, f"{what}._tensor")
    storage = data._storage
    if type(storage) is not np.ndarray:
        host = _device_copy(storage, what)
        if host is None:
            raise AssertionError(
                f"{what}: storage is {_describe(storage)}, not a numpy.ndarray or a Numba "
                "device array"
            )
        if host.dtype != kind or host.ndim != 1:
            raise AssertionError(f"{what}: storage is not a 1-D {kind} device array")
        storage = np.array(host, dtype=kind, copy=True)
    if type(storage) is not np.ndarray or storage.dtype != kind or storage.ndim != 1:
        raise AssertionError(f"{what}: storage is not a 1-D {kind} numpy.ndarray")
    shape = exact_tuple(data.shape, exact_int, f"{what}.shape")
    strides = exact_tuple(data.strides, exact_int, f"{what}.strides")
    if len(shape) != len(strides) or any(s < 0 for s in shape + strides):
        raise AssertionError(f"{what}: shape {shape} and strides {strides} do not fit")
    if all(s > 0 for s in shape):
        last = sum((s - 1) * st for s, st in zip(shape, strides, strict=True))
        if last >= storage.size:
            raise AssertionError(f"{what}: shape {shape}, strides {strides} leave the storage")
    view = np.lib.stride_tricks.as_strided(
        storage, shape, tuple(s * kind.itemsize for s in strides)
    )
    return np.array(view, dtype=kind, copy=True)
