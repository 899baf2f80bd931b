"""The exact-type helpers of ``tests/strict.py`` refuse look-alikes and accept real values.

Not graded (no task marker): this checks the test suite itself.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.strict import (
    exact_bool,
    exact_float,
    exact_int,
    exact_list,
    exact_str,
    exact_tensor,
    exact_tuple,
)


class YesMan:
    """Agrees with every comparison and converts to whatever is asked."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return True

    def __lt__(self, other: object) -> bool:
        return True

    __le__ = __gt__ = __ge__ = __lt__
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        return True

    def __float__(self) -> float:
        return 3.0

    def __abs__(self) -> float:
        return 0.0

    def __sub__(self, other: object) -> float:
        return 0.0

    __rsub__ = __sub__


class LyingFloat(float):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = float.__hash__


class LyingStr(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class LyingList(list):  # type: ignore[type-arg]
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


class LyingTuple(tuple):  # type: ignore[type-arg]
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = tuple.__hash__


def type_name(value: object) -> str:
    return type(value).__name__


def test_the_look_alikes_do_fool_plain_comparisons() -> None:
    """Why the helpers exist: without them these would all pass."""
    assert YesMan() == 3.0
    assert pytest.approx(3.0) == YesMan()
    assert math.isclose(YesMan(), 3.0)
    assert LyingFloat(0.0) == 3.0
    assert LyingStr("wrong") == "right"
    assert LyingList() == [1.0, 2.0]


@pytest.mark.parametrize(
    "value", [YesMan(), LyingFloat(3.0), True, 1, "3.0", None, [3.0]], ids=type_name
)
def test_exact_float_refuses_look_alikes(value: Any) -> None:
    with pytest.raises(AssertionError, match="expected exactly float"):
        exact_float(value)


@pytest.mark.parametrize("value", [YesMan(), True, 1.0, LyingFloat(1.0), "1", None], ids=type_name)
def test_exact_int_refuses_look_alikes(value: Any) -> None:
    with pytest.raises(AssertionError, match="expected exactly int"):
        exact_int(value)


@pytest.mark.parametrize("value", [YesMan(), 1, 0, 1.0, "True", None], ids=type_name)
def test_exact_bool_refuses_look_alikes(value: Any) -> None:
    with pytest.raises(AssertionError, match="expected exactly bool"):
        exact_bool(value)


@pytest.mark.parametrize("value", [YesMan(), LyingStr("right"), b"right", None], ids=type_name)
def test_exact_str_refuses_look_alikes(value: Any) -> None:
    with pytest.raises(AssertionError, match="expected exactly str"):
        exact_str(value)


@pytest.mark.parametrize("value", [YesMan(), LyingList([1.0]), (1.0,), iter([1.0])], ids=type_name)
def test_exact_list_refuses_look_alikes(value: Any) -> None:
    with pytest.raises(AssertionError, match="expected exactly list"):
        exact_list(value)


@pytest.mark.parametrize("value", [YesMan(), LyingTuple((1.0,)), [1.0]], ids=type_name)
def test_exact_tuple_refuses_look_alikes(value: Any) -> None:
    with pytest.raises(AssertionError, match="expected exactly tuple"):
        exact_tuple(value)


def test_containers_check_their_elements() -> None:
    with pytest.raises(AssertionError, match=r"value\[1\]: expected exactly float.*YesMan"):
        exact_list([1.0, YesMan()])
    with pytest.raises(AssertionError, match=r"value\[0\]: expected exactly float, got bool"):
        exact_list([True])
    with pytest.raises(AssertionError, match=r"value\[2\]: expected exactly str"):
        exact_list(["a", "b", LyingStr("c")], item=exact_str)
    with pytest.raises(AssertionError, match=r"pairs\[0\]: expected exactly tuple"):
        exact_list([LyingTuple((1, 2))], item=exact_tuple, what="pairs")
    with pytest.raises(AssertionError, match=r"value\[1\]: expected exactly int"):
        exact_tuple((1, 2.0), item=exact_int)


def test_messages_name_the_type_that_came_back() -> None:
    with pytest.raises(AssertionError, match=r"^lt: expected exactly float, got int 1$"):
        exact_float(1, what="lt")
    with pytest.raises(AssertionError, match=r"got [\w.]*\.LyingFloat$"):
        exact_float(LyingFloat(2.0))


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, -1e300, math.inf, -math.inf, math.nan])
def test_exact_float_returns_real_floats_unchanged(value: float) -> None:
    assert exact_float(value) is value


def test_real_values_are_returned_unchanged() -> None:
    assert exact_int(3) == 3 and exact_int(-7) == -7
    assert exact_bool(True) is True and exact_bool(False) is False
    assert exact_str("weight_0_1") == "weight_0_1" and exact_str("") == ""
    xs = [1.0, -2.5]
    assert exact_list(xs) is xs
    assert exact_list([]) == []
    modules = [object(), object()]
    assert exact_list(modules, item=None) is modules
    assert exact_list(["a", "b"], item=exact_str) == ["a", "b"]
    pair = (object(), 2.0)
    assert exact_tuple(pair) is pair
    assert exact_list([pair], item=exact_tuple)[0] is pair
    assert exact_tuple((1, 2), item=exact_int) == (1, 2)


# -- exact_tensor: NumPy storages and Numba device arrays ---------------------------------


def test_exact_tensor_reads_numpy_storage_through_its_strides() -> None:
    import numpy as np

    from module1.tensor import Tensor
    from module1.tensor_data import TensorData

    storage = np.arange(12.0)
    t = Tensor(TensorData(storage, (3, 2), (1, 3)))  # a transposed view of a 2x3
    got = exact_tensor(t)
    assert type(got) is np.ndarray and got is not storage
    np.testing.assert_array_equal(got, np.arange(6.0).reshape(2, 3).T)
    t._tensor._storage = np.arange(12)  # ints
    with pytest.raises(AssertionError, match=r"not a 1-D float64 numpy\.ndarray"):
        exact_tensor(t)
    with pytest.raises(AssertionError, match="expected exactly Tensor"):
        exact_tensor(YesMan())


def test_exact_tensor_reads_a_numba_device_storage_with_numbas_copy() -> None:
    """A storage of exactly Numba's device array class (the simulator's without a GPU)
    is copied to the host by the class's own ``copy_to_host``; look-alikes, subclasses,
    other dtypes and a ``copy_to_host`` replaced on the class are refused."""
    import numpy as np
    from numba import cuda

    from module1.tensor import Tensor
    from module1.tensor_data import TensorData

    device = cuda.to_device(np.arange(6.0))
    kind = type(device)
    t = Tensor(TensorData(device, (2, 3), (1, 2)))
    got = exact_tensor(t)
    assert type(got) is np.ndarray and got.dtype == np.float64
    np.testing.assert_array_equal(got, np.arange(6.0).reshape(3, 2).T)
    got[:] = -1.0  # a fresh copy: the device array is not changed
    np.testing.assert_array_equal(exact_tensor(t), np.arange(6.0).reshape(3, 2).T)

    class LookAlike:
        ndim = 1
        dtype = np.float64

        def copy_to_host(self) -> np.ndarray:
            return np.zeros(6)

    class Sub(kind):  # type: ignore[misc, valid-type]
        def copy_to_host(self, *args: Any, **kwargs: Any) -> np.ndarray:
            return np.zeros(6)

    for fake, name in [(LookAlike(), "LookAlike"), (Sub.__new__(Sub), "Sub")]:
        t._tensor._storage = fake
        with pytest.raises(AssertionError, match=f"storage is .*{name}, not a numpy.ndarray"):
            exact_tensor(t)
    t._tensor._storage = cuda.to_device(np.arange(6))  # int64
    with pytest.raises(AssertionError, match="not a 1-D float64 device array"):
        exact_tensor(t)
    t._tensor._storage = cuda.to_device(np.arange(6.0).reshape(2, 3))
    with pytest.raises(AssertionError, match="not a 1-D float64 device array"):
        exact_tensor(t)
    t._tensor._storage = cuda.to_device(np.arange(4.0))  # too short for the strides
    with pytest.raises(AssertionError, match="leave the storage"):
        exact_tensor(t)


def test_exact_tensor_refuses_a_copy_to_host_replaced_on_numbas_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import numpy as np
    from numba import cuda

    import tests.strict as strict
    from module1.tensor import Tensor
    from module1.tensor_data import TensorData

    device = cuda.to_device(np.arange(3.0))
    t = Tensor(TensorData(device, (3,)))
    # Found on the class at its first use, then kept: replacing it later changes nothing.
    np.testing.assert_array_equal(exact_tensor(t), np.arange(3.0))
    monkeypatch.setattr(type(device), "copy_to_host", lambda self, *a, **k: np.zeros(3))
    np.testing.assert_array_equal(exact_tensor(t), np.arange(3.0))
    # Replaced before its first use: refused, as it is not Numba's own function.
    monkeypatch.setattr(strict, "_COPY_TO_HOST", {})
    with pytest.raises(AssertionError, match=r"copy_to_host is not Numba's .*test_strict"):
        exact_tensor(t)
