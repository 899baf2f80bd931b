"""Shared test configuration: the task markers and the Hypothesis profiles.

Both come from ``autograder/pytest_plugin.py``, which the course tooling also loads on
its own when it grades with ``--noconftest``, as does the hook that ends a test at the
first handout stub it reaches (no Hypothesis examples or shrinking against a stub).
Profiles: ``ci`` (25 examples, no deadline; chosen automatically when the ``CI``
environment variable is set), ``dev`` (150 examples) and ``verify`` (10, no shrinking);
pick one with ``HYPOTHESIS_PROFILE=dev``. The README's test command runs the suite in
workers, a file to a worker (``-n auto``: pytest-xdist; the two hooks at the end).

Every task in ``autograder/registry.py`` registers its marker (``task0_4``), so a test
file marks its tests with ``pytestmark = pytest.mark.task0_4`` and ``pytest -m task0_4``
runs one task's tests. ``--strict-markers`` (in pyproject.toml) rejects unknown markers.
"""

from __future__ import annotations

import os

import pytest

from autograder.pytest_plugin import (
    load_hypothesis_profile,
    pytest_make_parametrize_id,  # noqa: F401  (a hook: pytest finds it here by name)
    pytest_runtest_call,  # noqa: F401  (a hook: pytest finds it here by name)
    register_markers,
)

load_hypothesis_profile()


def pytest_configure(config: pytest.Config) -> None:
    register_markers(config)


MAX_WORKERS = 4
"""``-n auto``'s cap on pytest-xdist workers (the README's test command). Each worker
compiles the kernels its test files need (with a cold cache, several compile the same
ones) and holds its own Numba and LLVM: past a few workers that costs more memory than
it saves time."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many workers ``-n auto`` starts: one per core, at most :data:`MAX_WORKERS`."""
    affinity = getattr(os, "sched_getaffinity", None)  # Linux: the cores this may use
    cores = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_WORKERS))


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """With workers (``-n``) and no ``--dist``, distribute whole files (``loadfile``):
    a module's tests share fixtures (a handout made once, a compiled model) that one
    worker then makes once. Not an ``addopts`` entry, so that a run without pytest-xdist
    (the grader's bundle installs none) reads the same ``pyproject.toml``."""
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "loadfile"
