"""The grader's isolation tiers in the tooling's tests: which can run here, and a way to
make tier 1 fail as it fails in Docker, so that tier 2 is tested on any machine.

A test that needs a tier calls :func:`need` (or uses the ``tier`` fixture of
``test_hostile.py``): where the tier cannot work it is skipped, with the reason and what
to install or change. Where ``MINITORCH_REQUIRE_SANDBOX`` is set (``.ci/run`` and the
GitHub workflow set it), such a skip is a failure instead, so CI tests what it claims to:
``1`` or ``all`` requires both tiers, ``bubblewrap`` or ``user`` only that one (a
comma-separated list works too).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.paths import ROOT

TIERS = (sandbox.BUBBLEWRAP, sandbox.USER)
DOCKER_BWRAP = """#!/bin/sh
# Stands in for bubblewrap where namespaces are refused (Docker's default seccomp profile).
echo "bwrap: Creating new namespace failed: Operation not permitted" >&2
exit 1
"""


def required() -> set[str]:
    """The tiers whose tests may not be skipped here (``MINITORCH_REQUIRE_SANDBOX``)."""
    value = os.environ.get("MINITORCH_REQUIRE_SANDBOX", "").strip().lower()
    if value in ("", "0", "no", "false"):
        return set()
    if value in ("1", "yes", "true", "all"):
        return set(TIERS)
    return {v.strip() for v in value.split(",") if v.strip()}


@cache
def problem(tier: str) -> str:
    """Why ``tier`` cannot run here ("" when it can), with what to do about it."""
    if tier == sandbox.BUBBLEWRAP:
        return sandbox.bubblewrap_problem()
    with docker_like():
        return sandbox.user_tier_problem([ROOT])


def need(tier: str | None = None) -> None:
    """Skip the calling test unless ``tier`` (None: either) can run here; fail instead of
    skipping where CI requires it."""
    tiers = TIERS if tier is None else (tier,)
    reasons = {t: problem(t) for t in tiers}
    if not all(reasons.values()):
        return
    why = "; ".join(f"{t}: {r}" for t, r in reasons.items())
    message = f"no grading isolation here ({why})"
    if required() & set(tiers):
        pytest.fail(f"{message}, and MINITORCH_REQUIRE_SANDBOX forbids skipping", pytrace=False)
    pytest.skip(message)


@contextmanager
def docker_like() -> Iterator[None]:
    """Within it, ``bwrap`` on the PATH fails as it does where namespaces are refused, so
    the grader falls back to tier 2."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="minitorch-docker-like-") as tmp:
        fake = Path(tmp) / "bwrap"
        fake.write_text(DOCKER_BWRAP, encoding="utf-8")
        fake.chmod(0o755)
        before = os.environ.get("PATH", "")
        os.environ["PATH"] = f"{tmp}{os.pathsep}{before}"
        try:
            yield
        finally:
            os.environ["PATH"] = before


@contextmanager
def in_tier(tier: str) -> Iterator[None]:
    """Grades run inside this use ``tier`` (tier 2: bubblewrap made to fail)."""
    need(tier)
    if tier == sandbox.USER:
        with docker_like():
            yield
    else:
        yield


def processes_naming(marker: str) -> list[int]:
    """Processes (other than this one) whose command line holds ``marker``: what a run
    that should have been cleaned up left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found
