"""``minitorch gradescope-bundle``: build a Gradescope autograder zip.

Gradescope unpacks the zip at ``/autograder/source``, runs ``setup.sh`` once to build
the image, then ``run_autograder`` once per submission with the submission at
``/autograder/submission``; the score must land in ``/autograder/results/results.json``.
The zip holds, at its top level:

``setup.sh``
    installs bubblewrap (isolation tier 1) and a Python >= 3.11 (with apt, if the image has
    none), makes a virtual environment and installs the grader's *dependencies* into it
    (the runtime dependencies from ``pyproject.toml`` plus pytest, hypothesis and
    pytest-timeout), makes the grader's tree readable by root only, then runs
    ``minitorch doctor`` and an isolation check as smoke tests (tier 1 or tier 2 must
    work).
``run_autograder``
    runs ``python -m autograder.cli grade`` from ``/autograder/source/grader`` (with
    ``--stage`` / ``--reference-prerequisites`` baked in when given) and always leaves a
    ``results.json``: if the grader wrote none, the script writes a zero score that says
    the grader failed.
``grader/``
    the reference in the released shape (stages 0..``stage``, or all): grading compares
    the submission's answers with the reference's, so the grader needs the solutions.
    The submission's code never reads them: ``setup.sh`` makes ``grader/`` readable by
    root only; tier 1 (bubblewrap) binds only a workspace made of the submission's
    declared files and stubs, and tier 2 (a dedicated unprivileged user, where the
    container refuses namespaces) refuses to run while another user could read the
    tree (see ``autograder/sandbox.py``). The release is verified first (through
    ``stage``): the handout must score 0 and the shaped reference full marks. With
    ``reference_prerequisites`` the earlier stages' declared files in the workspace are
    the reference's, so those solutions *are* readable by the graded code.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import tempfile
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path

from autograder.paths import ROOT, available_tasks, repo_files
from autograder.private import record_copy
from autograder.release import release, shaped_reference

_GRADING_EXTRAS = ("pytest", "hypothesis", "pytest-timeout")
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed, so the same tree gives the same zip


def requirements(root: Path = ROOT) -> list[str]:
    """What the grader's environment installs: the runtime dependencies of
    ``pyproject.toml``, pytest, hypothesis and pytest-timeout (with the dev extra's
    version bounds where it gives them), and the ``dist`` extra where the course has one
    (stage 6's checks start MPI ranks in the sandbox: mpi4py and MPICH)."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = list(project.get("dependencies", []))
    extras = project.get("optional-dependencies", {})
    dev = extras.get("dev", [])
    for name in _GRADING_EXTRAS:
        pinned = [r for r in dev if _requirement_name(r) == name]
        found.append(pinned[0] if pinned else name)
    return found + list(extras.get("dist", []))


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9._-]+)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""


def setup_script(reqs: list[str], task_ids: list[str] | None = None) -> str:
    """The text of ``setup.sh`` (``task_ids``: the graded tasks, whose reference kernels
    it compiles once, so that grades find them cached)."""
    warm = " ".join(shlex.quote(t) for t in (task_ids or []))
    quoted = "\n".join(f"    {shlex.quote(r)}" for r in reqs)
    return f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, to build the autograder image (written by
# `minitorch gradescope-bundle`). It finds or installs a Python >= 3.11, makes a virtual
# environment and installs the grader's dependencies into it. Only the dependencies:
# the course tooling is not installed, because run_autograder runs it from
# /autograder/source/grader itself (an installed copy would take its repository root
# from site-packages instead of the grader's tree).
set -euo pipefail
AUTOGRADER=${{MINITORCH_AUTOGRADER_DIR:-/autograder}}
VENV=${{MINITORCH_VENV:-/opt/minitorch-venv}}
REQUIREMENTS=(
{quoted}
)

python_ok() {{
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1
}}
find_python() {{
    local candidate
    for candidate in python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 && python_ok "$candidate"; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}}
apt_install() {{
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
}}

if ! command -v bwrap >/dev/null 2>&1; then
    apt-get update
    apt_install bubblewrap
fi
if ! PYTHON=$(find_python); then
    apt-get update
    apt_install python3 python3-venv python3-pip || true
    if ! PYTHON=$(find_python); then
        apt_install python3.11 python3.11-venv  # Ubuntu 22.04, whose python3 is 3.10
        PYTHON=$(find_python)
    fi
fi
echo "setup.sh: using $PYTHON ($("$PYTHON" --version 2>&1))"

if ! "$PYTHON" -m venv "$VENV"; then
    # Debian and Ubuntu ship venv's pip bootstrap in a separate package.
    version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    apt-get update
    apt_install "python$version-venv" || apt_install python3-venv
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --no-cache-dir --upgrade pip
"$VENV/bin/python" -m pip install --no-cache-dir "${{REQUIREMENTS[@]}}"

chmod +x "$AUTOGRADER/source/run_autograder" 2>/dev/null || true
# The grader's tree holds the reference solutions: readable by root only. (The sandbox
# never binds it anyway; this also keeps it from anything else in the container.)
chown -R root:root "$AUTOGRADER/source/grader"
chmod -R go-rwx "$AUTOGRADER/source/grader"
# Smoke tests: the grader's tree loads, its environment is complete, and the submission
# can be isolated here: tier 1 (bubblewrap) or, where the container refuses namespaces,
# tier 2 (a dedicated unprivileged user; without either, minitorch grade refuses).
cd "$AUTOGRADER/source/grader"
"$VENV/bin/python" -m autograder.cli doctor
"$VENV/bin/python" -m autograder.sandbox
# Compile the reference's kernels and the timed checks' baselines once (Numba caches
# them beside the grader's sources).
NUMBA_ENABLE_CUDASIM=1 "$VENV/bin/python" -m autograder.checks {warm} --seed 0 \\
    --rounds 0 --fd 1 >/dev/null
"""


def run_script(stage: int | None, reference_prerequisites: bool) -> str:
    """The text of ``run_autograder``."""
    options = ""
    if stage is not None:
        options += f" --stage {int(stage)}"
    if reference_prerequisites:
        options += " --reference-prerequisites"
    return f"""#!/usr/bin/env bash
# Gradescope runs this once per submission (written by `minitorch gradescope-bundle`).
# It grades /autograder/submission with the tooling of the grader's own tree, run from
# that tree with `python -m` (so autograder.paths.ROOT is that tree, not site-packages),
# and always leaves /autograder/results/results.json behind.
set -uo pipefail
AUTOGRADER=${{MINITORCH_AUTOGRADER_DIR:-/autograder}}
PYTHON=${{MINITORCH_VENV:-/opt/minitorch-venv}}/bin/python
GRADER="$AUTOGRADER/source/grader"
RESULTS="$AUTOGRADER/results"
SUBMISSION="$AUTOGRADER/submission"
# Gradescope's machines have no GPU: stage 3 runs on Numba's CUDA simulator.
export NUMBA_ENABLE_CUDASIM=1

mkdir -p "$RESULTS"
rm -f "$RESULTS/results.json"

# A zip uploaded with one top folder (handout/module0/...) is graded from that folder.
if ! compgen -G "$SUBMISSION/module[0-9]" >/dev/null; then
    matches=()
    for dir in "$SUBMISSION"/*/; do
        dir=${{dir%/}}
        [ -L "$dir" ] && continue
        compgen -G "$dir/module[0-9]" >/dev/null && matches+=("$dir")
    done
    if [ "${{#matches[@]}}" -eq 1 ]; then
        SUBMISSION=${{matches[0]}}
        echo "run_autograder: grading the submission's folder ${{SUBMISSION#"$AUTOGRADER"/}}"
    fi
fi

# Only root may enter the submission and the folder that holds it: tier 2 (a graded run as
# another user) refuses to grade a submission that user could read beside the workspace.
chmod go-rwx "$SUBMISSION" "$(dirname "$SUBMISSION")" 2>/dev/null || true

status=0
cd "$GRADER" && "$PYTHON" -m autograder.cli grade "$SUBMISSION" --out "$RESULTS"{options} \\
    || status=$?

# The grader writes its results atomically, even when grading fails; this covers the
# grader not starting at all (a broken environment, a crash before it could write).
check='import json, sys; sys.exit(not isinstance(json.load(open(sys.argv[1])), dict))'
if ! "$PYTHON" -c "$check" "$RESULTS/results.json" >/dev/null 2>&1; then
    message="The autograder itself failed (exit code $status) before it wrote any results."
    message+=" This is not a verdict on your code: please tell your instructor."
    cat >"$RESULTS/results.json" <<EOF
{{"score": 0, "visibility": "visible", "stdout_visibility": "visible",
 "output": "$message"}}
EOF
fi
exit 0
"""


def _entry(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (stat.S_IFREG | (mode & 0o777)) << 16
    return info


def _write_zip(path: Path, scripts: dict[str, str], tree: Path, files: list[Path]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in scripts.items():
            zf.writestr(_entry(name, 0o755), text)
        for rel in files:
            source = tree / rel
            mode = 0o755 if source.stat().st_mode & 0o111 else 0o644
            zf.writestr(_entry(f"grader/{rel.as_posix()}", mode), source.read_bytes())


def build_gradescope_bundle(
    out_zip: Path,
    *,
    stage: int | None = None,
    reference_prerequisites: bool = False,
    root: Path = ROOT,
    log: Callable[[str], None] = print,
    verify: bool = True,
) -> Path:
    """Write the Gradescope autograder zip for the reference at ``root``; return its path.

    ``grader/`` is the reference in the released shape (through ``stage`` when one is
    given), after the release through that stage verified; a release that fails
    verification raises :class:`autograder.release.ReleaseError` and no zip is written.
    The zip is written to a temporary file beside ``out_zip`` and renamed into place.
    ``verify=False`` skips the release's verification (for trying the scripts only).
    """
    root = root.resolve()
    out_zip = Path(out_zip).resolve()
    if stage is not None and not any(t.stage == stage for t in available_tasks(root)):
        raise ValueError(f"the registry has no task in stage {stage} in {root}")
    if reference_prerequisites and stage is None:
        raise ValueError("reference_prerequisites needs a stage")
    scripts = {
        "setup.sh": setup_script(
            requirements(root),
            [t.id for t in available_tasks(root) if stage is None or t.stage <= stage],
        ),
        "run_autograder": run_script(stage, reference_prerequisites),
    }
    out_zip.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=out_zip.parent, prefix=f".{out_zip.name}.", suffix=".tmp")
    os.close(fd)
    tmp_zip = Path(tmp_name)
    try:
        with tempfile.TemporaryDirectory(prefix="minitorch-bundle-") as tmp:
            release(Path(tmp) / "handout", stage, root=root, log=log, check=verify)
        if reference_prerequisites:
            log("the earlier stages' solutions go into the grading workspace: readable "
                "by the graded code")  # fmt: skip
        shaped = shaped_reference(root, stage)
        _write_zip(tmp_zip, scripts, shaped, repo_files(shaped))
        os.chmod(tmp_zip, 0o600)  # the reference's solutions: its owner's alone
        os.replace(tmp_zip, out_zip)
        record_copy(out_zip)  # tier 2 refuses to grade while another user could read it
    except BaseException:
        tmp_zip.unlink(missing_ok=True)
        raise
    return out_zip
