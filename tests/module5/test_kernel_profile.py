"""``project/kernel_profile.py``: the benchmark's step breakdown by kernel family.

A handout has the files of the reference's fast paths that hold a task (``fast_ops.py``,
``fast_matmul.py``) without the fast paths themselves, so the profile must pass over a
name a module lacks, as it passes over a module that is not there.
"""

from __future__ import annotations

import sys
import types

import pytest

from project import kernel_profile


def test_profile_times_what_is_there_and_passes_over_what_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One kernel of a toy module is timed in its family and restored after; a missing
    attribute, a missing class and a missing module are skipped. Planted bug caught:
    the attribute looked up without a guard (the handout's AttributeError)."""
    toy = types.ModuleType("toy_kernels")

    def kernel(x: int) -> int:
        return x + 1

    toy.kernel = kernel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toy_kernels", toy)
    monkeypatch.setattr(kernel_profile, "KERNELS", {
        "toy": [("toy_kernels", "kernel"), ("toy_kernels", "reference_only"),
                ("toy_kernels", "Missing.forward"), ("no_such_module_here", "kernel")],
    })  # fmt: skip
    with kernel_profile.kernel_profile() as times:
        assert toy.kernel is not kernel
        assert toy.kernel(1) == 2
    assert toy.kernel is kernel
    assert set(times) == {"toy"} and times["toy"] >= 0.0
