"""What a graded run leaves behind (issue 37, round 4 of hostile submissions): nothing of
it outlives the grade, nothing it plants runs later, and tier 2 refuses to grade where the
reference or other submissions are readable.

Each attack of that round has a test here, run in both isolation tiers where both apply
(the ``tier`` fixture of ``test_hostile.py``), on the toy course; the cleanup's own
pieces (:mod:`autograder.leftovers`) are tested directly too.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from autograder import leftovers, private, sandbox
from autograder.grade import Limits
from tests.autograder.isolation import TIERS, in_tier, need
from tests.autograder.test_hostile import (
    REPORT,
    findings,
    grade_case,
    stub_files,
)
from tests.autograder.toy import toy_course

LIMITS = Limits(per_test_seconds=20, per_task_seconds=90, memory_mb=1000)


def _root_only() -> None:
    if os.getuid() != 0:
        pytest.skip("needs root: another user must make or own what is planted")


@pytest.fixture(scope="module")
def grader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy course's reference: the grader's tree."""
    return toy_course(tmp_path_factory.mktemp("grader") / "reference")


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest) -> Iterator[str]:
    with in_tier(request.param):
        yield request.param


@pytest.fixture
def grader_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The grader's temporary folder for one test (its grade and run folders land here,
    so what a grade leaves is seen): in /tmp, traversable, as the machine's own."""
    folder = Path(tempfile.mkdtemp(prefix="minitorch-grader-tmp-", dir="/tmp"))
    os.chmod(folder, 0o711)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    leftovers.remove_tree(folder)


def _uid(graded_isolation: str) -> int | None:
    """The run's user id in tier 2 (from the isolation label), None in tier 1."""
    if "uid " not in graded_isolation:
        return None
    return int(graded_isolation.split("uid ", 1)[1].split(")", 1)[0])


# -- 1. leftovers that stop the cleanup, and kernel objects ---------------------------------

LITTER = '''

def _litter():
    """Leave everything behind that might outlive the run: a tree 1,500 folders deep (it
    stopped Python 3.11's shutil.rmtree with RecursionError, and with it the rest of the
    cleanup), odd names, folders without permissions, a 64 MiB file in /dev/shm, files in
    /tmp, System V shared memory, a message queue and semaphores, zombies, and kernel
    keys and a POSIX message queue (which no file removes)."""
    import ctypes, os, time

    found = []
    token = {token!r}
    for base in {{os.environ.get("NUMBA_CACHE_DIR"), os.environ.get("TMPDIR"),
                 os.environ.get("HOME"), "/tmp"}}:
        if not base:
            continue
        try:
            os.makedirs(base, exist_ok=True)
            top = os.path.join(base, token + "-deep")
            os.mkdir(top)
            fd = os.open(top, os.O_RDONLY)
            for _ in range(1500):
                os.mkdir("d", dir_fd=fd)
                down = os.open("d", os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = down
            with open("/proc/self/fd/%d/odd\\nname" % fd, "w") as f:
                f.write("x")
            os.close(fd)
            odd = os.path.join(base.encode(), token.encode() + b"-\\xff\\xfe")
            os.mkdir(odd)
            os.mkdir(os.path.join(odd, b"locked"))
            open(os.path.join(odd, b"locked", b"f"), "w").close()
            os.chmod(os.path.join(odd, b"locked"), 0)
            os.chmod(odd, 0)
            found.append("litter-" + base.strip("/").replace("/", "-")[:20] + "=DONE")
        except OSError as exc:
            found.append("litter=blocked:" + type(exc).__name__)
    with open("/dev/shm/" + token, "wb") as f:
        f.write(b"x" * (64 << 20))
    libc = ctypes.CDLL(None, use_errno=True)
    made = [libc.shmget(0, 1 << 20, 0o1600), libc.msgget(0, 0o1600), libc.semget(0, 3, 0o1600)]
    found.append("sysv-ipc=%d" % sum(1 for m in made if m >= 0))
    key = libc.syscall(248, b"user", token.encode(), b"secret", 6, -4)  # add_key, @u
    found.append("kernel-key=" + ("DONE" if key >= 0 else "blocked"))
    queue = libc.syscall(240, b"q" + token.encode()[:40], 0o100 | 2, 0o600, None)  # mq_open
    found.append("posix-queue=" + ("DONE" if queue >= 0 else "blocked"))
    if os.fork() == 0:  # a parent that never reaps its ten dead children
        for _ in range(10):
            if os.fork() == 0:
                os._exit(0)
        time.sleep(300)
        os._exit(0)
    time.sleep(0.5)
    _report(found)


_litter()
'''


def test_nothing_a_run_leaves_outlives_the_grade(
    tmp_path: Path,
    grader: Path,
    tier: str,
    grader_tmp: Path,
) -> None:
    # Before (tier 2): the deep tree stopped the cleanup with RecursionError, which left
    # the 64 MiB /dev/shm file, the grade folders, the run's files in /tmp, two control
    # groups and the IPC objects (which the next grade, as another user, read); ten
    # zombies of the uid stayed, counted as live.
    token = f"minitorch-litter-{secrets.token_hex(6)}"
    files = stub_files()
    files["module0/operators.py"] += REPORT + LITTER.format(token=token)
    ipc_before = {(k, n) for k, n, _ in leftovers.ipc_objects()}
    try:
        graded = grade_case(tmp_path, files, grader, limits=LIMITS, task_ids=["0.1"])
        found = findings(graded)
        uid = _uid(graded.report.isolation)
        assert found.get("sysv-ipc") == "3", found
        assert found.get("kernel-key") == "blocked" and found.get("posix-queue") == "blocked"
        assert graded.report.leftovers == [], graded.report.leftovers
        assert "CLEANUP FAILED" not in graded.summary()
        assert list(grader_tmp.iterdir()) == []  # the grade's folders, the run's, gone
        assert not Path("/dev/shm", token).exists()
        assert not [p for p in os.listdir("/tmp") if p.startswith(token)]
        ipc_after = {(k, n) for k, n, _ in leftovers.ipc_objects()}
        if uid is not None:
            assert leftovers.user_leftovers(uid) == [], leftovers.user_leftovers(uid)
            assert not [o for o in leftovers.ipc_objects() if o[2] == uid]
            assert uid not in sandbox._RESERVED
        else:
            assert ipc_after <= ipc_before  # tier 1: an IPC namespace of its own
        mine = f"minitorch-{os.getpid()}-"
        for controller in ("memory", "pids"):
            base = sandbox._own_cgroup(controller)
            if base is not None:
                assert not [p for p in os.listdir(base) if p.startswith(mine)], controller
    finally:
        Path("/dev/shm", token).unlink(missing_ok=True)
        for name in os.listdir("/tmp"):
            if name.startswith(token):
                leftovers.remove_tree(Path("/tmp", name))


def test_remove_tree_cannot_be_stopped_by_what_it_removes(tmp_path: Path) -> None:
    top = tmp_path / "litter"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for _ in range(3000):  # deeper than any recursion limit, longer than PATH_MAX
        os.mkdir("folder-with-a-long-name", dir_fd=fd)
        down = os.open("folder-with-a-long-name", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = down
    os.close(fd)
    wide = top / "wide"
    wide.mkdir()
    for n in range(5000):
        (wide / str(n)).write_bytes(b"")
    for n in range(50):
        (wide / f"d{n}").mkdir()
    odd = os.path.join(bytes(top), b"odd\xff\nname")
    os.mkdir(odd)
    os.mkfifo(os.path.join(odd, b"fifo"))
    os.symlink("/etc/passwd", os.path.join(odd, b"link"))
    (top / "locked").mkdir()
    (top / "locked" / "f").write_text("x")
    os.chmod(top / "locked", 0)
    assert leftovers.remove_tree(top) == []
    assert not top.exists() and Path("/etc/passwd").exists()


def test_remove_tree_clears_the_immutable_attribute(tmp_path: Path) -> None:
    _root_only()
    folder = tmp_path / "attributes"
    folder.mkdir()
    (folder / "immutable").write_text("x")
    (folder / "append-only").write_text("x")
    try:
        for flag, name in (("+i", "immutable"), ("+a", "append-only")):
            subprocess.run(["chattr", flag, str(folder / name)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"chattr cannot set attributes here ({exc}): install e2fsprogs, on a file "
                    "system with attributes (ext4, xfs)")  # fmt: skip
    assert leftovers.remove_tree(folder) == []
    assert not folder.exists()


def test_what_cannot_be_removed_is_reported_not_raised(tmp_path: Path) -> None:
    if os.getuid() == 0:  # root removes anything; a folder root cannot write is needed
        proc = Path("/proc/self/fd")
        assert leftovers.remove_tree(proc)  # a folder whose entries cannot be removed
        return
    locked = tmp_path / "theirs"
    locked.mkdir()
    (locked / "f").write_text("x")
    os.chmod(locked, 0o500)
    try:
        assert leftovers.remove_tree(locked)
    finally:
        os.chmod(locked, 0o700)


def test_a_user_id_is_never_shared_nor_given_while_anything_of_it_remains(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: a uid was chosen among those without a live process only: two grades at
    # once could take the same one, and a uid whose files, IPC objects or zombies
    # remained was given to the next run, which read them.
    _root_only()
    base = 64990
    monkeypatch.setattr(sandbox, "USER_UIDS", range(base, base + 3))
    litter = Path("/tmp", f"minitorch-owned-by-{base}-{secrets.token_hex(4)}")
    litter.write_text("left behind")
    os.chown(litter, base, base)
    try:
        first = sandbox.reserve_uid()
        assert first != base
        child = subprocess.run(  # another grader process, at the same time
            [sys.executable, "-c", "from autograder import sandbox; "
             f"sandbox.USER_UIDS = range({base}, {base + 3}); print(sandbox.reserve_uid())"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert child.returncode == 0, child.stderr
        assert int(child.stdout) not in (base, first)
        sandbox.release_uid(first)
        assert sandbox.reserve_uid() in (base + 1, base + 2)
    finally:
        litter.unlink()
        for uid in list(sandbox._RESERVED):
            sandbox.release_uid(uid)
    assert leftovers.owned_in_scratch(base) == []


# -- 2. the kernel cache: private and capped ------------------------------------------------

FILL_CACHE = """

def _fill():
    import os, time
    cache = os.environ["NUMBA_CACHE_DIR"]
    for n in range(6):
        with open(os.path.join(cache, "big-%d" % n), "wb") as f:
            f.write(b"x" * (20 << 20))
    time.sleep(5)


_fill()
"""


def test_a_run_cannot_fill_the_kernel_cache(
    tmp_path: Path,
    grader: Path,
    tier: str,
    grader_tmp: Path,
) -> None:
    # Before: one run wrote 1 GiB into the grade's kernel cache on the host's disk (only
    # each file was capped, at 256 MiB).
    files = stub_files()
    files["module0/operators.py"] += FILL_CACHE
    limits = Limits(per_test_seconds=20, per_task_seconds=60, memory_mb=1000, cache_mb=64)
    graded = grade_case(tmp_path, files, grader, limits=limits, task_ids=["0.1"])
    problem = graded.task("0.1").problem
    assert "wrote more than 64 MiB or 20000 files into its kernel cache" in problem, problem
    assert graded.report.leftovers == []


# -- 3. copies of the reference: private, never reused, refused where readable -------------


def test_the_releases_copy_of_the_reference_is_private_and_never_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the release kept the reference in the released shape at
    # /tmp/minitorch-shaped-<uid>-<crc32 of the tree's path>-<stages>, reused whoever had
    # made it: a graded run (tier 2) made it first, planted bytecode, and the next
    # gradescope-bundle imported it as root.
    _root_only()
    from autograder import release

    monkeypatch.delenv("MINITORCH_PRIVATE_DIR", raising=False)
    tree = toy_course(tmp_path / "reference")
    key = zlib.crc32(str(tree.resolve()).encode())
    planted = Path(tempfile.gettempdir(), f"minitorch-shaped-{os.getuid()}-{key:08x}-0")
    planted.mkdir(exist_ok=True)
    os.chown(planted, 62999, 62999)
    try:
        shaped = release.shaped_reference(tree, 0)
        assert shaped != planted and not shaped.is_relative_to(Path(tempfile.gettempdir()))
        base = private.private_folder()
        assert shaped.is_relative_to(base)
        for folder in (shaped, *shaped.parents[: len(shaped.relative_to(base).parts)]):
            info = folder.stat()
            assert info.st_uid == os.getuid() and info.st_mode & 0o077 == 0, folder
    finally:
        leftovers.remove_tree(planted)
    # A private folder someone else made first, or left open, or a link: refused.
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 62999, 62999)
    opened = tmp_path / "open"
    opened.mkdir()
    os.chmod(opened, 0o755)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    for folder, why in ((theirs, "belongs to user 62999"), (opened, "is open to other users"),
                        (link, "is not a folder")):  # fmt: skip
        monkeypatch.setenv("MINITORCH_PRIVATE_DIR", str(folder))
        with pytest.raises(private.PrivateFolderError, match=why):
            release.shaped_reference(tree, 0)


def test_the_releases_runs_read_no_bytecode_from_the_tree(tmp_path: Path) -> None:
    from autograder.private import bytecode_env

    tree = tmp_path / "tree"
    (tree / "__pycache__").mkdir(parents=True)
    (tree / "victim.py").write_text("VALUE = 'source'\n")
    planted = tmp_path / "planted.py"
    planted.write_text("VALUE = 'planted'\n")
    import py_compile

    tag = sys.implementation.cache_tag
    py_compile.compile(str(planted), str(tree / "__pycache__" / f"victim.{tag}.pyc"),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)  # fmt: skip
    run = [sys.executable, "-c", "import victim; print(victim.VALUE)"]
    plain = subprocess.run(run, cwd=tree, capture_output=True, text=True, check=True)
    assert plain.stdout.strip() == "planted"  # what a planted, unchecked .pyc does
    env = {**os.environ, **bytecode_env(), "PYTHONPATH": str(tree)}
    guarded = subprocess.run(run, cwd=tree, capture_output=True, text=True, env=env, check=True)
    assert guarded.stdout.strip() == "source"


def test_tier_2_refuses_what_it_cannot_protect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: tier 2 gave full marks to a submission that read the reference from the
    # checkout an editable install names (world-readable), from the bundle zip (0644),
    # or from another student's submission waiting beside it.
    need(sandbox.USER)
    from tests.autograder.isolation import docker_like

    with docker_like():
        folder = Path(tempfile.mkdtemp(prefix="minitorch-site-", dir="/tmp"))
        try:
            os.chmod(folder, 0o755)
            site = folder / "site-packages"
            site.mkdir()
            checkout = folder / "checkout"
            toy_course(checkout)
            for path in [checkout, *checkout.rglob("*")]:
                os.chmod(path, 0o755 if path.is_dir() else 0o644)
            (site / "__editable___toy_0_1_finder.py").write_text(
                f"MAPPING: dict[str, str] = {{'module0': '{checkout}/module0'}}\n"
            )
            monkeypatch.setattr(sandbox, "site_dirs", lambda: [str(site)])
            problem = sandbox.user_tier_problem([])
            assert f"the course tree {checkout}, which an editable install names" in problem
            assert f"chmod -R go-rwx {checkout}" in problem
            (site / "__editable___toy_0_1_finder.py").unlink()
            assert sandbox.user_tier_problem([]) == ""

            bundle = folder / "autograder.zip"
            bundle.write_bytes(b"PK")
            monkeypatch.setenv("MINITORCH_PRIVATE_DIR", str(tmp_path / "private"))
            private.record_copy(bundle)
            os.chmod(bundle, 0o644)
            problem = sandbox.user_tier_problem([])
            assert str(bundle) in problem and "bundle" in problem, problem
            os.chmod(bundle, 0o600)
            assert sandbox.user_tier_problem([]) == ""

            batch = folder / "submissions"
            for name in ("alice", "bob"):
                (batch / name / "module0").mkdir(parents=True)
            os.chmod(batch, 0o755)
            problem = sandbox.user_tier_problem([], submission=batch / "alice")
            assert "the submissions beside it" in problem and f"chmod 700 {batch}" in problem
            os.chmod(batch, 0o700)
            assert sandbox.user_tier_problem([], submission=batch / "alice") == ""
        finally:
            leftovers.remove_tree(folder)
