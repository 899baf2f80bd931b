"""Shared test configuration: the task markers and the Hypothesis profiles.

Both come from ``autograder/pytest_plugin.py``, which the course tooling also loads on
its own when it grades with ``--noconftest``, as does the hook that ends a test at the
first handout stub it reaches (no Hypothesis examples or shrinking against a stub).
Profiles: ``ci`` (25 examples, no deadline; chosen automatically when the ``CI``
environment variable is set), ``dev`` (150 examples) and ``verify`` (10, no shrinking);
pick one with ``HYPOTHESIS_PROFILE=dev``.

Every task in ``autograder/registry.py`` registers its marker (``task0_4``), so a test
file marks its tests with ``pytestmark = pytest.mark.task0_4`` and ``pytest -m task0_4``
runs one task's tests. ``--strict-markers`` (in pyproject.toml) rejects unknown markers.
"""

from __future__ import annotations

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
