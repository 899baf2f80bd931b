"""Indexing's given code (``module1/indexing.py``): keys checked before any task's code
runs, with errors that name the dimension, the index and the size; assignment refused
where PyTorch refuses it. Not a task's tests: these hold on the handout too (task 1.6's
are in ``test_indexing.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from module0.autodiff import no_grad
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import IndexingError
from module1.tensor_ops import SimpleBackend


def t(values: Any, grad: bool = False) -> Tensor:
    out = from_numpy(np.array(values, dtype=np.float64), SimpleBackend)
    return out.requires_grad_() if grad else out


def test_bad_keys_name_the_dimension_the_index_and_the_size() -> None:
    x = t(np.zeros((2, 3, 4)))
    cases: list[tuple[Any, str]] = [
        ((0, 3), "index 3 is out of range for dimension 1 of size 3"),
        ((slice(None), slice(None), -5), "index -5 is out of range for dimension 2 of size 4"),
        ((0, 0, 0, 0), "too many indices for a tensor of shape (2, 3, 4): 4 given"),
        ((slice(None, None, -1),), "steps must be positive"),
        ((Ellipsis, 0, Ellipsis), "one ellipsis"),
        (("a",), "cannot index with str"),
        (([0, 5],), "index 5 is out of bounds for dimension 0 with size 2"),
    ]
    for key, message in cases:
        with pytest.raises(IndexingError) as error:
            x[key]
        assert message in str(error.value), (key, str(error.value))
    with pytest.raises(IndexError):  # IndexingError is an IndexError, as Python expects
        x[5]
    with pytest.raises(IndexingError, match="whole numbers"):
        x[t([0.5])]


def test_assignment_is_refused_on_a_leaf_that_needs_its_gradient() -> None:
    w = t([1.0, 2.0], grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w[0] = 5.0
    with no_grad():  # as an optimizer does
        w[0] = 5.0
    assert w.tolist() == [5.0, 2.0]
    y = w * 2.0
    with pytest.raises(RuntimeError, match="view"):
        y.view(2)[0] = 1.0
