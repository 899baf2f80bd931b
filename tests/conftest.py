"""Shared test configuration: Hypothesis profiles and the task markers.

Profiles: ``ci`` (few examples, no deadline; chosen automatically when the ``CI``
environment variable is set) and ``dev`` (more examples). Pick one explicitly with
``HYPOTHESIS_PROFILE=dev pytest``.

Every task in ``autograder/registry.py`` registers its marker (``task0_4``), so a test
file marks its tests with ``pytestmark = pytest.mark.task0_4`` and ``pytest -m task0_4``
runs one task's tests. ``--strict-markers`` (in pyproject.toml) rejects unknown markers.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from autograder.registry import TASKS

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=150, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_configure(config: pytest.Config) -> None:
    for task in TASKS:
        config.addinivalue_line(
            "markers", f"{task.marker}: Task {task.id} ({task.title}, {task.points} points)"
        )
