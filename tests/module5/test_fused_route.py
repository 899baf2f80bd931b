"""The route to task 5.5's fused kernels (``module5/fused_route.py``, given code): which
calls it takes, and what the handout's stub error does. Not a task's tests: they hold
on the handout too, where the kernels are stubs.
"""

from __future__ import annotations

import numpy as np
import pytest

from module1.tensor import from_numpy
from module1.tensor_ops import SimpleBackend
from module2.fast_ops import FastTensorBackend as FAST
from module5 import functional, fused, fused_route


def t(values: np.ndarray) -> object:
    return from_numpy(values, FAST)


def test_other_masks_and_backends_take_the_plain_route() -> None:
    x = t(np.random.default_rng(7).normal(size=(4, 4)))
    odd = np.eye(4, dtype=bool)
    assert fused_route.causal_period(odd, (4, 4)) is None
    assert fused_route.causal_period(None, (4, 4)) == (1, 3)
    assert fused_route.causal_period(functional.causal_mask(2, 4), (3, 2, 4)) == (2, 2)
    assert fused_route.softmax(x, odd) is None
    assert fused_route.gelu(from_numpy(np.zeros(3), SimpleBackend)) is None
    with fused_route.plain_route():
        assert fused_route.gelu(x) is None


def test_the_stub_error_turns_the_route_off_and_others_propagate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = t(np.random.default_rng(8).normal(size=(3, 4))).requires_grad_()

    def stub(*args: object) -> None:
        raise NotImplementedError("Task 5.5: not yet")

    def broken(*args: object) -> None:
        raise NotImplementedError("something else")

    monkeypatch.setattr(fused_route, "use_fused", True)  # (a stub may have turned it off)
    monkeypatch.setattr(fused, "gelu_forward", broken)
    with pytest.raises(NotImplementedError, match="something else"):
        functional.gelu(x)
    assert fused_route.use_fused
    monkeypatch.setattr(fused, "gelu_forward", stub)
    monkeypatch.setattr(fused_route, "use_fused", True)
    y = functional.gelu(x)  # the plain GELU answers
    assert not fused_route.use_fused
    assert y.history is not None and y.history.last_fn is functional.GELUFun
    with fused_route.plain_route():
        np.testing.assert_allclose(y.to_numpy(), functional.gelu(x).to_numpy())


def test_a_stubbed_kernel_says_nothing_and_a_written_one_keeps_its_warnings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Compiling the handout's stub of a ``parallel=True`` kernel makes Numba warn that
    nothing ran in parallel: about code the student never touched, before task 5.5 is
    begun. The route drops that warning when the stub raises, and shows a written
    kernel's warnings."""
    import warnings

    from numba import njit

    @njit(parallel=True, cache=False)
    def stub(x: np.ndarray, out: np.ndarray) -> None:
        raise NotImplementedError("Task 5.5: gelu_forward")

    @njit(parallel=True, cache=False)
    def serial(x: np.ndarray, out: np.ndarray) -> None:  # no prange: Numba warns
        for i in range(x.size):
            out[i] = x[i]

    monkeypatch.setattr(fused_route, "use_fused", True)
    monkeypatch.setattr(fused_route, "_proven", set())
    monkeypatch.setattr(fused_route.kernels, "gelu_forward", stub)
    x = t(np.linspace(-1.0, 1.0, 6))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert fused_route.gelu(x) is None
    assert not fused_route.use_fused and seen == [], [str(w.message)[:80] for w in seen]
    monkeypatch.setattr(fused_route, "use_fused", True)
    monkeypatch.setattr(fused_route.kernels, "gelu_forward", serial)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        y = fused_route.gelu(x)
    assert y is not None and np.array_equal(y.to_numpy(), x.to_numpy())
    assert any("parallel=True" in str(w.message) for w in seen), seen
