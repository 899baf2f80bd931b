"""The toy course (``toy/``) is a course tree of its own, not part of this suite: its
tests run only inside the trees that ``tests/autograder/toy.py`` builds.

``minitorch status`` keeps its results in a folder of this session's own
(``MINITORCH_STATUS_CACHE``), not in the user's cache folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

collect_ignore = ["toy"]


@pytest.fixture(scope="session", autouse=True)
def status_cache_of_this_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINITORCH_STATUS_CACHE", str(tmp_path_factory.mktemp("status-cache")))
        yield
