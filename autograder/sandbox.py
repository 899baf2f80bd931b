"""Run untrusted code isolated from the grader, in one of two tiers.

**Tier 1: a bubblewrap (``bwrap``) sandbox**, where the kernel lets bubblewrap make
namespaces (see the threat model in ``autograder/README.md``):

- **Files.** Only what is bound: the system's programs and libraries (``/usr``, ``/bin``,
  ``/lib*``, a few files of ``/etc``), the Python installation and the site-packages the
  grader's interpreter uses (course packages installed there are hidden under an empty
  folder), and one work folder, all read-only. Writable: a private ``/tmp`` and
  ``/dev/shm`` (size-limited memory file systems that vanish with the sandbox) and, when
  given, one shared cache folder. Nothing else of the machine exists inside.
- **Identity.** Where the grader runs as root, the command runs as the unprivileged user
  ``nobody`` (uid 65534) with no capabilities; otherwise as the grader's own user inside
  an unprivileged user namespace (which still sees only the binds above).
- **Namespaces.** Its own PID, network (no network), IPC, UTS and mount namespaces; a
  new session. It may not make user namespaces of its own (``--disable-userns`` where
  bwrap has it, and always the seccomp filter below).

**Tier 2: a dedicated unprivileged user**, where namespaces are refused (Docker's default
seccomp profile refuses them to a process without ``CAP_SYS_ADMIN``) and the grader is
root. The command runs as a user id no one else uses (chosen per grade, no supplementary
groups), from a read-only workspace, with a private ``HOME`` and ``TMPDIR`` of its own, no
inherited descriptor but its pipes, and the same limits. Nothing of the grader may be
readable by it: before choosing this tier the grader checks, as that user, that it can
read no file of the grader's trees nor an installed copy of the course, and that it can
run the grader's Python; otherwise the tier is refused, with what to change. At the end
every process of that user is killed and every file it left in the machine's shared
scratch folders is removed. It does not stop network access.

**Both tiers.** Limits on the whole run where the grader may make a control group
(memory, processes); per process always: address space, file size, CPU time, open files,
no core files, processes of the user. A trusted launcher, run before any submitted code,
sets them, drops root, sets ``no_new_privs`` and installs a seccomp filter that refuses
new user namespaces (``unshare``/``clone`` with ``CLONE_NEWUSER``; ``clone3`` answers
"not implemented", so the C library falls back to ``clone``). A wall-clock limit is
enforced from outside. Output is read through a pipe and kept only up to a cap.

Without either tier (no working bubblewrap, and not root) nothing is run: the caller
gets :class:`SandboxUnavailable` with what to install or change.

The command's results come back on a pipe (file descriptor ``DATA_FD`` inside), read by
a :class:`Channel` as they arrive: nothing the command leaves behind survives it.
"""

from __future__ import annotations

import fcntl
import os
import random
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Protocol

from autograder.leftovers import (
    become_subreaper,
    clean_user,
    folder_usage,
    remove_tree,
    taken_uids,
    user_leftovers,
)

SANDBOX_UID = 65534
"""``nobody``: the user sandboxed code runs as in tier 1 when the grader is root."""
WORK = "/grade/work"
"""Where the work folder appears inside a tier-1 sandbox (read-only)."""
CACHE = "/grade/cache"
"""Where the optional shared cache folder appears in tier 1 (writable)."""
DATA_FD = 3
"""The command's result pipe, inside the sandbox."""
COURSE_PACKAGES = ("module0", "module1", "module2", "module3", "module4", "project",
                   "autograder", "tests")  # fmt: skip
"""Top-level names hidden if found in a bound site-packages folder: an installed copy
of the course (``pip install .``) would otherwise be readable, solutions and all."""

BUBBLEWRAP, USER, NONE = "bubblewrap", "user", "none"
"""The isolation tiers (``NONE``: ``--unsafe-no-sandbox``, trusted code only)."""
USER_UIDS = range(62000, 65000)
"""Where tier 2 picks its user id (free ids below 65536, which every container maps)."""
INSTALL_BWRAP = "apt-get install bubblewrap"

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf",
        "localtime", "alternatives")  # fmt: skip


@dataclass
class SandboxLimits:
    """Resource limits of one sandboxed run."""

    wall_seconds: float = 600.0
    cpu_seconds: int = 1200
    """Per process (RLIMIT_CPU)."""
    memory_mb: int = 4096
    """Address space per process (RLIMIT_AS); 0 for none."""
    processes: int = 512
    """Processes and threads of the whole sandbox (a pids control group, where one can be
    made; the CUDA simulator runs a thread per GPU thread of a block: 256 for a matmul)."""
    user_processes: int = 1024
    """Processes and threads of the sandbox's user (RLIMIT_NPROC, always; threads count.
    In tier 2 the user is the run's own, so this bounds the whole run)."""
    file_mb: int = 256
    """Largest file a process may write (RLIMIT_FSIZE)."""
    scratch_mb: int = 1024
    """Size of each of the private /tmp and /dev/shm (tier 1)."""
    open_files: int = 256
    output_bytes: int = 256 * 1024
    """stdout and stderr kept (the start and the end of it)."""
    cache_mb: int = 512
    """The writable kernel cache folder, all its files together (watched from outside,
    about once a second: a run that passes it is stopped, and the folder emptied)."""
    cache_entries: int = 20_000
    """Files and folders of the kernel cache folder (the same watch)."""


class Channel(Protocol):
    """Reads the result pipe as it arrives (``autograder.channel.AnswerChannel``)."""

    stop: str
    """Set when the command wrote past a limit: the run is ended at once."""

    def feed(self, chunk: bytes, now: float | None = None) -> bytes:
        """Take a chunk; return the bytes to write to the command's standard input."""
        ...

    def close(self) -> None: ...


@dataclass
class RawChannel:
    """Keeps the first ``cap`` bytes of the pipe (the sandbox's own probes)."""

    cap: int = 1 << 16
    data: bytearray = field(default_factory=bytearray)
    stop: str = ""

    def feed(self, chunk: bytes, now: float | None = None) -> bytes:
        self.data += chunk[: max(self.cap - len(self.data), 0)]
        return b""

    def close(self) -> None:
        pass


@dataclass
class SandboxResult:
    returncode: int | None
    output: str
    timed_out: bool
    seconds: float
    whole_limits: str = ""
    """The limits applied to the sandbox as a whole (``""``: per-process limits only)."""
    memory_exhausted: bool = False
    """The whole-sandbox memory limit was reached (a process was likely killed for it)."""
    stopped: str = ""
    """Why the run was ended early by its channel (a limit on what it wrote)."""
    leftovers: list[str] = field(default_factory=list)
    """What the cleanup after the run could not remove (empty: nothing is left)."""

    def how_it_ended(self) -> str:
        """``"exited with status 1"``, ``"was killed by signal 9"``, ``"..."``."""
        if self.timed_out:
            return "was stopped at its time limit"
        if self.stopped:
            return f"was stopped: it {self.stopped}"
        code = self.returncode
        if code is None:
            return "did not start"
        signal_number = -code if code < 0 else code - 128 if 128 < code < 193 else 0
        if signal_number:  # bwrap reports a child killed by signal N as status 128 + N
            why = " (the memory limit was reached)" if self.memory_exhausted else ""
            return f"was killed by signal {signal_number} ({_signal_name(signal_number)}){why}"
        return f"exited with status {code}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made on this machine (the message says why and what to do)."""


# -- the tiers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Isolation:
    """How one grade isolates the submission's runs (chosen by :func:`probe`)."""

    tier: str
    uid: int = SANDBOX_UID
    """The user the runs are (tier 2: the grade's own user id)."""
    passed_over: str = ""
    """Why a stronger tier was not used ("" when none was passed over)."""

    @property
    def label(self) -> str:
        if self.tier == BUBBLEWRAP:
            return "tier 1: a bubblewrap sandbox (namespaces, read-only binds)"
        if self.tier == USER:
            return (f"tier 2: a dedicated unprivileged user (uid {self.uid}), no namespaces: "
                    f"{self.passed_over}")  # fmt: skip
        return "none: graded WITHOUT isolation (--unsafe-no-sandbox, trusted code only)"

    def paths(self, work: Path, cache: Path) -> tuple[str, str]:
        """Where the run sees the work folder and the cache."""
        if self.tier == BUBBLEWRAP:
            return WORK, CACHE
        return str(work), str(cache)


def _says_hello(
    start: Callable[[list[str], SandboxLimits, RawChannel], SandboxResult],
) -> str:
    """ "" when a trivial Python run started by ``start`` answers on its pipe, else the
    last line it printed (or how it ended)."""
    channel = RawChannel()
    argv = [sys.executable, "-S", "-c", "import os; os.write(3, b'ok')"]
    result = start(argv, SandboxLimits(wall_seconds=60), channel)
    if bytes(channel.data) == b"ok":
        return ""
    return (result.output.strip().splitlines()[-1:] or [result.how_it_ended()])[0][:300]


def bubblewrap_problem() -> str:
    """Why tier 1 cannot be used here, or ``""`` when it can (a sandbox is started)."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (bubblewrap); this is {sys.platform}"
    if shutil.which("bwrap") is None:
        return f"bubblewrap (bwrap) is not installed: install it ({INSTALL_BWRAP})"
    try:
        detail = _says_hello(lambda argv, limits, channel: run_sandboxed(
            argv, work=None, env={}, limits=limits, channel=channel))  # fmt: skip
    except OSError as exc:
        return f"bwrap could not start: {exc}"
    if detail:
        return (
            f"bwrap is installed but could not make a sandbox here ({detail}): "
            "namespaces are refused (a container's seccomp profile, or unprivileged user "
            "namespaces disabled: sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
            "24.04 kernel.apparmor_restrict_unprivileged_userns=0)"
        )
    return ""


def user_tier_problem(
    trees: Sequence[Path] = (), uid: int | None = None, submission: Path | None = None
) -> str:
    """Why tier 2 cannot be used here, or ``""`` when it can: the grader must be root, its
    Python runnable by another user (``uid``: the one to try as), and nothing of the
    grader readable by that user: not ``trees`` (the grader's trees), nor a tree an
    editable install points at, nor an installed copy of the course, nor a copy of the
    reference the tooling wrote; and not ``submission`` (the one graded) nor the folder
    that holds it (other submissions waiting beside it)."""
    if not sys.platform.startswith("linux"):
        return f"it needs Linux; this is {sys.platform}"
    if os.getuid() != 0:
        return "it needs the grader to run as root (to run the submission as another user)"
    uid = free_uid() if uid is None else uid
    readable = _readable_by(uid, _secret_paths(trees))
    if readable:
        tree = next((t for t in trees if Path(readable[0]).is_relative_to(t)), None)
        editable = next((t for t in editable_trees() if Path(readable[0]).is_relative_to(t)),
                        None)  # fmt: skip
        if tree:
            where = f"the grader's tree {tree}"
        elif editable:
            where, tree = f"the course tree {editable}, which an editable install names", editable
        else:
            where = ("a copy of the course (an installed package, a release's copy, or a "
                     "bundle written by minitorch gradescope-bundle)")  # fmt: skip
        target = tree or readable[0]
        return (
            f"{where} is readable by other users ({readable[0]}): make it readable by "
            f"root only (chmod -R go-rwx {target}); a Python environment inside it must "
            f"stay reachable (chmod o+x {target}, then chmod -R o+rX on the environment, "
            "as .ci/run does), or live outside it (the Gradescope bundle's "
            "/opt/minitorch-venv)"
        )
    if submission is not None:
        submission = submission.resolve()
        reached = _readable_by(uid, [str(submission)], [str(submission), str(submission.parent)])
        if reached:
            return (
                f"the submission's folder {submission} or the folder holding it "
                f"({submission.parent}) can be entered by other users ({reached[0]}): the "
                "graded run could read this submission's other files, or the submissions "
                "beside it. Grade each submission from a folder only root can enter "
                f"(chmod 700 {submission.parent})"
            )
    detail = _says_hello(lambda argv, limits, channel: run_as_user(
        argv, uid=uid, work=Path("/"), env={}, limits=limits, channel=channel))  # fmt: skip
    if detail:
        return (
            f"another user cannot run the grader's Python {sys.executable} ({detail}):"
            " its installation and environment must be readable and traversable by other "
            "users (for example chmod o+x on the folders above it)"
        )
    return ""


def probe(trees: Sequence[Path] = (), submission: Path | None = None) -> Isolation:
    """The strongest tier that works here, tried now (once per grade); raises
    :class:`SandboxUnavailable` naming what each tier lacks. Tier 2's user id is held for
    the grade (:func:`reserve_uid`) until :func:`release`."""
    first = bubblewrap_problem()
    if not first:
        return Isolation(BUBBLEWRAP)
    uid = reserve_uid() if os.getuid() == 0 else SANDBOX_UID
    second = user_tier_problem(trees, uid, submission)
    if not second:
        return Isolation(USER, uid=uid, passed_over=f"bubblewrap: {first}")
    release_uid(uid)
    raise SandboxUnavailable(
        f"no isolation tier works here. Tier 1 (bubblewrap): {first}. Tier 2 (a dedicated "
        f"user): {second}"
    )


def _accounts() -> set[int]:
    """User ids that an account of ``/etc/passwd`` has."""
    taken = set()
    try:
        for line in Path("/etc/passwd").read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split(":")
            if len(parts) > 2 and parts[2].isdigit():
                taken.add(int(parts[2]))
    except OSError:
        pass
    return taken


def free_uid() -> int:
    """A user id in ``USER_UIDS`` that no account has, that owns nothing on the machine
    (no process, zombies included; no IPC object; no file in the shared scratch folders;
    no kernel key) and that no grade of this process holds (:func:`reserve_uid`)."""
    taken = _accounts() | taken_uids() | set(_RESERVED)
    return random.choice([uid for uid in USER_UIDS if uid not in taken])


_RESERVED: dict[int, int] = {}
"""User ids this process holds for its grades (uid -> the descriptor of its lock)."""


def _lock_folder() -> Path:
    """A folder only the grader (root) may write, for the user ids' locks."""
    for base in (Path("/run"), Path(tempfile.gettempdir())):
        folder = base / "minitorch-uids"
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError:
            continue
        info = os.lstat(folder)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077:
            return folder
    raise SandboxUnavailable(
        "no folder for the user ids' locks that only the grader can write (/run/minitorch-uids "
        "or $TMPDIR/minitorch-uids exists and is not the grader's with mode 0700: remove it)"
    )


def reserve_uid(attempts: int = 50) -> int:
    """A :func:`free_uid` held until :func:`release_uid` (or this process's end): a lock
    (``flock``) in a folder only root writes, so two grades at once, in any processes,
    never share a user id; the id is checked once more under the lock."""
    folder = _lock_folder()
    for _ in range(attempts):
        uid = free_uid()
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(folder / str(uid), flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if user_leftovers(uid):
            os.close(fd)
            continue
        _RESERVED[uid] = fd
        return uid
    raise SandboxUnavailable(f"no free user id in {USER_UIDS.start}-{USER_UIDS.stop - 1}")


def release_uid(uid: int) -> None:
    """Give back a user id held by :func:`reserve_uid` (nothing if it is not held)."""
    fd = _RESERVED.pop(uid, None)
    if fd is not None:
        os.close(fd)


def release(isolation: Isolation) -> None:
    """The end of a grade: its tier-2 user id goes back to the pool."""
    if isolation.tier == USER:
        release_uid(isolation.uid)


def editable_trees() -> list[Path]:
    """Source trees of the course that an editable install points at: the folders an
    ``__editable__*finder.py`` maps a course package to, and the paths of ``.pth`` files
    that hold a course package (the run's Python reads both, so it can find them)."""
    import ast

    found: set[Path] = set()
    for folder in site_dirs():
        for finder in Path(folder).glob("__editable__*finder.py"):
            try:
                tree = ast.parse(finder.read_text(encoding="utf-8", errors="replace"))
            except (OSError, SyntaxError, ValueError):
                continue
            for node in tree.body:
                if isinstance(node, ast.Assign | ast.AnnAssign) and "MAPPING" in ast.unparse(
                    node.targets[0] if isinstance(node, ast.Assign) else node.target
                ):
                    try:
                        mapping = ast.literal_eval(node.value) if node.value else {}
                    except ValueError:
                        continue
                    found |= {Path(p).parent for n, p in mapping.items() if n in COURSE_PACKAGES}
        for pth in Path(folder).glob("*.pth"):
            try:
                lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                entry = Path(folder, line.strip())
                if (
                    line.strip()
                    and not line.startswith(("#", "import"))
                    and any((entry / name).is_dir() for name in COURSE_PACKAGES[:-2])
                ):
                    found.add(entry.resolve())
    return sorted(found)


def _secret_paths(trees: Sequence[Path]) -> list[str]:
    """What tier 2's user must not read: each tree (its listing, its files, its git
    data), each source tree an editable install points at, any course package installed
    in a site-packages folder, the tooling's private folder (the release's copies of the
    reference), and the copies of the reference it wrote elsewhere (bundles)."""
    from autograder.paths import repo_files
    from autograder.private import PrivateFolderError, private_folder, recorded_copies

    paths: list[str] = []
    for tree in dict.fromkeys([*trees, *editable_trees()]):
        paths += [str(tree), *(str(tree / rel) for rel in repo_files(tree))]
        if (tree / ".git").exists():
            paths.append(str(tree / ".git"))
    for folder in site_dirs():
        paths += [str(Path(folder) / n) for n in COURSE_PACKAGES if (Path(folder) / n).exists()]
    try:
        paths.append(str(private_folder()))
    except (OSError, PrivateFolderError):
        pass
    paths += [str(p) for p in recorded_copies()]
    # The release's shaped copies of earlier versions (in the temporary folder)
    paths += [str(p) for p in Path(tempfile.gettempdir()).glob("minitorch-shaped-*") if p.is_dir()]
    return paths


def _readable_by(uid: int, paths: Sequence[str], enter: Sequence[str] = ()) -> list[str]:
    """Those of ``paths`` that user ``uid`` can open or list, and of the folders ``enter``
    those it can enter (tried as that user, in a forked child of this trusted process)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no Python-level cleanup, just the answer
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            found = ["\1"]  # the user was taken: without it, nothing is known
            for path in paths:
                try:
                    if os.path.isdir(path):
                        os.listdir(path)
                    else:
                        with open(path, "rb") as f:
                            f.read(1)
                    found.append(path)
                except OSError:
                    pass
            found += [folder for folder in enter if os.access(folder, os.X_OK)]
            os.write(write, "\0".join(found).encode())
        finally:
            os._exit(0)
    os.close(write)
    data = bytearray()
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    found = data.decode().split("\0")
    if found[0] != "\1":
        return [f"(could not take user id {uid} to check)"]
    return [p for p in found[1:] if p]


def _python_paths() -> list[Path]:
    """What the interpreter needs: its installation, its environment, its site-packages."""
    import site

    paths = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).parent,
             Path(os.path.realpath(sys.executable)).parent.parent}  # fmt: skip
    for folder in [*site.getsitepackages(), site.getusersitepackages()]:
        if Path(folder).is_dir():
            paths.add(Path(folder))
    return sorted(p for p in paths if p.exists())


def site_dirs() -> list[str]:
    """The site-packages folders a ``-S`` child puts on its path."""
    import site

    return [d for d in [*site.getsitepackages(), site.getusersitepackages()] if Path(d).is_dir()]


def _binds(work: Path | None, cache_dir: Path | None, limits: SandboxLimits) -> list[str]:
    # The private file systems first: a bind below /tmp (a virtual environment in a
    # checkout under /tmp) must go on top of the private /tmp, not under it.
    size = str(limits.scratch_mb * 1024 * 1024)
    args = ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm",
            "--size", size, "--tmpfs", "/tmp"]  # fmt: skip
    for top in _SYSTEM:
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    for name in _ETC:
        if (Path("/etc") / name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    python = _python_paths()
    made: set[Path] = {Path("/tmp")}
    for path in python:
        if not any(other != path and other in path.parents for other in python):
            if not any(str(path).startswith(top + "/") for top in _SYSTEM):
                args += [*_parents(path, made), "--ro-bind", str(path), str(path)]
    for folder in site_dirs():  # hide an installed copy of the course
        for name in COURSE_PACKAGES:
            if (Path(folder) / name).exists():
                args += ["--tmpfs", str(Path(folder) / name)]
    if work is not None:
        args += [*_parents(Path(WORK), made), "--ro-bind", str(work), WORK, "--chdir", WORK]
    else:
        args += ["--chdir", "/tmp"]
    if cache_dir is not None:
        args += [*_parents(Path(CACHE), made), "--bind", str(cache_dir), CACHE]
    return args


def _parents(path: Path, made: set[Path]) -> list[str]:
    """Make ``path``'s parent folders traversable (bwrap would make them mode 0700, which
    the unprivileged user could not pass through)."""
    args: list[str] = []
    for parent in reversed(path.parents):
        if parent != Path("/") and parent not in made:
            made.add(parent)
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


# Runs first, before any submitted code (inside the bwrap sandbox in tier 1, as a root
# child of the grader in tier 2; ``python -I -S``, so nothing on the run's PYTHONPATH is
# imported here): make the writable folders, drop root for the run's user, set the
# limits, refuse new user namespaces, then become the command.
_LAUNCHER = """
import ctypes, os, resource, struct, sys
nproc, mem, fsize, cpu, nofile, uid, data = (int(v) for v in sys.argv[1:8])
tier = sys.argv[8]
if data != 3:
    os.dup2(data, 3)
    os.close(data)
for name in ("HOME", "TMPDIR", "MPLCONFIGDIR"):
    if os.environ.get(name):
        os.makedirs(os.environ[name], mode=0o700, exist_ok=True)
if os.getuid() == 0:
    for name in ("HOME", "TMPDIR", "MPLCONFIGDIR"):
        if os.environ.get(name):
            os.chown(os.environ[name], uid, uid)
    if tier == "bubblewrap":  # the sandbox's own private file systems
        os.chmod("/tmp", 0o1777)
        os.chmod("/dev/shm", 0o1777)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgroups():
        sys.exit("launcher: could not drop root")
limits = [(resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_FSIZE, fsize),
          (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_NOFILE, nofile),
          (resource.RLIMIT_CORE, 0)]
if mem:
    limits.append((resource.RLIMIT_AS, mem))
for which, value in limits:
    resource.setrlimit(which, (value, value))
# seccomp: unshare / clone with CLONE_NEWUSER refused (EPERM), clone3 "not implemented"
# (ENOSYS: the C library then uses clone), any other system call ABI refused; and the
# kernel objects that would outlive the run's processes without a file to remove: keys
# (add_key, request_key, keyctl) and POSIX message queues (mq_open) are refused (EPERM).
abi = {"x86_64": (0xC000003E, 272, 56, 248, 249, 250, 240),
       "aarch64": (0xC00000B7, 97, 220, 217, 218, 219, 180)}
machine = os.uname().machine
if machine in abi:
    audit, unshare, clone, add_key, request_key, keyctl, mq_open = abi[machine]
    allow, eperm, enosys = 0x7FFF0000, 0x00050001, 0x00050026
    program = [(0x20, 0, 0, 4), (0x15, 1, 0, audit), (0x06, 0, 0, eperm),
               (0x20, 0, 0, 0), (0x35, 0, 1, 0x40000000), (0x06, 0, 0, eperm),
               (0x15, 0, 1, 435), (0x06, 0, 0, enosys),
               (0x15, 3, 0, add_key), (0x15, 2, 0, request_key), (0x15, 1, 0, keyctl),
               (0x15, 0, 1, mq_open), (0x06, 0, 0, eperm),
               (0x15, 1, 0, unshare), (0x15, 0, 3, clone),
               (0x20, 0, 0, 16), (0x45, 0, 1, 0x10000000), (0x06, 0, 0, eperm),
               (0x06, 0, 0, allow)]
    code = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *i) for i in program))
    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    prog = Program(len(program), ctypes.addressof(code))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(prog), 0, 0):
        sys.exit("launcher: could not install the seccomp filter (errno %d)" % ctypes.get_errno())
os.execv(sys.argv[9], sys.argv[9:])
"""


def _launcher(argv: Sequence[str], limits: SandboxLimits, uid: int, data_fd: int,
              tier: str) -> list[str]:  # fmt: skip
    mb = 1024 * 1024
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(limits.user_processes),
            str(limits.memory_mb * mb), str(limits.file_mb * mb), str(limits.cpu_seconds),
            str(limits.open_files), str(uid), str(data_fd), tier, *argv]  # fmt: skip


@cache
def _bwrap_has(option: str) -> bool:
    """Whether the installed bwrap knows ``option`` (``--disable-userns`` came in 0.8)."""
    try:
        text = subprocess.run(["bwrap", "--help"], capture_output=True, text=True,
                              timeout=30).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    return option in text


def sandbox_command(
    argv: Sequence[str],
    *,
    work: Path | None,
    env: dict[str, str],
    limits: SandboxLimits,
    cache_dir: Path | None = None,
    data_fd: int = DATA_FD,
) -> list[str]:
    """The ``bwrap`` command line that runs ``argv`` sandboxed (the result pipe is
    ``data_fd`` outside, ``DATA_FD`` inside)."""
    root = os.getuid() == 0
    # Every namespace but the user one (--unshare-all would add it): a privileged bwrap
    # keeps real uids, so the launcher can become nobody; an unprivileged one makes a
    # user namespace by itself.
    cmd = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
           "--unshare-cgroup-try", "--die-with-parent", "--new-session",
           "--hostname", "sandbox", "--clearenv"]  # fmt: skip
    if root:  # privileged bwrap: keep only what the launcher needs to become nobody
        cmd += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                "--cap-add", "CAP_CHOWN", "--cap-add", "CAP_FOWNER"]  # fmt: skip
    elif _bwrap_has("--disable-userns"):
        # (As root, --disable-userns would need --unshare-user, which maps the real root
        # into the sandbox; the launcher's seccomp filter refuses user namespaces there.)
        cmd += ["--disable-userns"]
    for name, value in sorted(env.items()):
        cmd += ["--setenv", name, value]
    cmd += _binds(work, cache_dir, limits)
    uid = SANDBOX_UID if root else os.getuid()
    return [*cmd, "--", *_launcher(argv, limits, uid, data_fd, BUBBLEWRAP)]


def _keep(buffer: bytearray, chunk: bytes, cap: int) -> bool:
    """Append ``chunk`` while under ``cap``; False when some of it was dropped."""
    room = cap - len(buffer)
    buffer += chunk[: max(room, 0)]
    return len(chunk) <= room


class ControlGroups:
    """Best-effort whole-sandbox limits: a fresh memory and a pids control group (v1 or
    v2) under the grader's own, which the sandbox's first process joins before it starts.
    Where none can be made (not root, a read-only ``/sys/fs/cgroup``) it does nothing."""

    def __init__(self, memory_bytes: int, processes: int) -> None:
        self.paths: list[Path] = []
        self.applied: list[str] = []
        self.memory: Path | None = None
        name = f"minitorch-{os.getpid()}-{time.monotonic_ns()}"
        for controller, settings in (
            ("memory", {"memory.limit_in_bytes": memory_bytes,
                        "memory.memsw.limit_in_bytes": memory_bytes,
                        "memory.max": memory_bytes, "memory.swap.max": 0}),
            ("pids", {"pids.max": processes}),
        ):  # fmt: skip
            base = _own_cgroup(controller)
            if base is None or (controller == "memory" and not memory_bytes):
                continue
            path = base / name
            try:
                path.mkdir()
            except OSError:
                continue
            wrote = False
            for file, value in settings.items():
                try:
                    (path / file).write_text(str(value))
                    wrote = wrote or file in ("memory.limit_in_bytes", "memory.max", "pids.max")
                except OSError:
                    pass
            if not wrote:
                path.rmdir()
                continue
            self.paths.append(path)
            if controller == "memory":
                self.memory = path
                self.applied.append(f"memory {memory_bytes // (1024 * 1024)} MB")
            else:
                self.applied.append(f"{processes} processes")

    def join(self) -> None:
        """Move the calling process into the groups (called in the child, before exec)."""
        for path in self.paths:
            (path / "cgroup.procs").write_text(str(os.getpid()))

    def exhausted(self) -> bool:
        if self.memory is None:
            return False
        for file in ("memory.failcnt", "memory.events"):
            try:
                text = (self.memory / file).read_text()
            except OSError:
                continue
            if file == "memory.failcnt":
                return int(text.strip() or 0) > 0
            return any(line.split()[0] in ("max", "oom_kill") and line.split()[1] != "0"
                       for line in text.splitlines() if len(line.split()) == 2)  # fmt: skip
        return False

    def remove(self) -> list[str]:
        """Remove the groups (their processes are gone); those that could not be, with why."""
        problems = []
        for path in self.paths:
            for attempt in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if attempt == 49:
                        problems.append(f"control group {path}: {exc.strerror}")
                    time.sleep(0.02)
        return problems


def _own_cgroup(controller: str) -> Path | None:
    """The folder of this process's control group for ``controller``, if writable."""
    if os.getuid() != 0:
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            folder = Path("/sys/fs/cgroup") / controller / path.lstrip("/")
        elif number == "0" and controllers == "":
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            enabled = folder / "cgroup.controllers"
            if not enabled.exists() or controller not in enabled.read_text().split():
                continue
        else:
            continue
        if folder.is_dir() and os.access(folder, os.W_OK):
            return folder
    return None


def run_sandboxed(
    argv: Sequence[str],
    *,
    work: Path | None,
    env: dict[str, str],
    limits: SandboxLimits,
    channel: Channel,
    cache_dir: Path | None = None,
) -> SandboxResult:
    """Run ``argv`` in a fresh bubblewrap sandbox (tier 1) and wait for it (at most
    ``limits.wall_seconds``).

    ``work`` appears read-only at ``WORK`` (the working folder), ``cache_dir`` writable at
    ``CACHE``. The result pipe is file descriptor ``DATA_FD`` inside; ``channel`` reads
    it as it arrives and answers on the command's standard input. On return, every
    process of the sandbox is gone.
    """
    return _run_limited(
        lambda fd: sandbox_command(
            argv, work=work, env=env, limits=limits, cache_dir=cache_dir, data_fd=fd
        ),
        cwd=None, env=None, limits=limits, channel=channel, watch=_cache_watch(cache_dir, limits),
    )  # fmt: skip


def _cache_watch(cache_dir: Path | None, limits: SandboxLimits) -> Callable[[], str] | None:
    """What stops a run that fills its writable cache folder past the limits."""
    if cache_dir is None:
        return None

    def watch() -> str:
        size, entries = folder_usage(cache_dir, limits.cache_entries)
        if size > limits.cache_mb << 20 or entries > limits.cache_entries:
            return (f"wrote more than {limits.cache_mb} MiB or {limits.cache_entries} files "
                    "into its kernel cache")  # fmt: skip
        return ""

    return watch


def _run_limited(
    command: Callable[[int], list[str]],
    *,
    cwd: Path | None,
    env: dict[str, str] | None,
    limits: SandboxLimits,
    channel: Channel,
    cleanup: Callable[[], list[str]] | None = None,
    watch: Callable[[], str] | None = None,
) -> SandboxResult:
    """:func:`_run` inside fresh control groups (where they can be made), which are
    removed after ``cleanup`` (the run's leftovers) has run, whatever it met; what either
    could not remove is in the result's ``leftovers``."""
    groups = ControlGroups(limits.memory_mb * 1024 * 1024, limits.processes)
    result: SandboxResult | None = None
    try:
        result = _run(command, cwd=cwd, env=env, limits=limits, channel=channel,
                      setup=groups.join, watch=watch)  # fmt: skip
        result.whole_limits = ", ".join(groups.applied)
        result.memory_exhausted = groups.exhausted()
        return result
    finally:
        left: list[str] = []
        if cleanup is not None:
            try:
                left += cleanup()
            except Exception as exc:  # (cleanup reports what it met; this is a last guard)
                left.append(f"cleanup: {type(exc).__name__}: {exc}")
        left += groups.remove()
        if result is not None:
            result.leftovers = left


def run_as_user(
    argv: Sequence[str],
    *,
    uid: int,
    work: Path,
    env: dict[str, str],
    limits: SandboxLimits,
    channel: Channel,
    cache_dir: Path | None = None,
) -> SandboxResult:
    """Run ``argv`` as the unprivileged user ``uid`` (tier 2; the grader is root), in
    ``work`` (read-only to it), with a private ``HOME``/``TMPDIR`` and ``cache_dir``
    writable. On return every process of ``uid`` is gone (its zombies reaped), and so are
    its System V IPC objects, what it left in the shared scratch folders and its private
    folder; what could not be removed is in the result's ``leftovers``."""
    if os.getuid() != 0:
        raise SandboxUnavailable("tier 2 needs the grader to run as root")
    become_subreaper()
    if cache_dir is not None:
        os.chown(cache_dir, uid, uid)
    private = Path(tempfile.mkdtemp(prefix="minitorch-run-"))
    os.chown(private, uid, uid)
    env = {**env, "HOME": str(private / "home"), "TMPDIR": str(private / "tmp"),
           "MPLCONFIGDIR": str(private / "matplotlib")}  # fmt: skip

    def cleanup() -> list[str]:
        return [*clean_user(uid), *remove_tree(private)]

    return _run_limited(
        lambda fd: _launcher(argv, limits, uid, fd, USER),
        cwd=work, env=env, limits=limits, channel=channel, cleanup=cleanup,
        watch=_cache_watch(cache_dir, limits),
    )  # fmt: skip


def run_isolated(
    isolation: Isolation,
    argv: Sequence[str],
    *,
    work: Path,
    env: dict[str, str],
    limits: SandboxLimits,
    channel: Channel,
    cache_dir: Path | None = None,
) -> SandboxResult:
    """Run ``argv`` in the tier ``isolation`` names (``env`` already uses the paths of
    :meth:`Isolation.paths`)."""
    if isolation.tier == BUBBLEWRAP:
        return run_sandboxed(argv, work=work, env=env, limits=limits, channel=channel,
                             cache_dir=cache_dir)  # fmt: skip
    if isolation.tier == USER:
        return run_as_user(argv, uid=isolation.uid, work=work, env=env, limits=limits,
                           channel=channel, cache_dir=cache_dir)  # fmt: skip
    return run_unsandboxed(argv, cwd=work, env=env, limits=limits, channel=channel)


def run_unsandboxed(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    limits: SandboxLimits,
    channel: Channel,
) -> SandboxResult:
    """Run ``argv`` as a plain child (trusted code, or ``--unsafe-no-sandbox``), with the
    same result pipe (its number in ``MINITORCH_DATA_FD``), time limit and output cap."""

    def command(fd: int) -> list[str]:
        env["MINITORCH_DATA_FD"] = str(fd)
        return list(argv)

    return _run(command, cwd=cwd, env=env, limits=limits, channel=channel)


_GRACE = 2.0
"""Seconds the pipes are still read after the run's first process has ended."""


def _run(
    command: Callable[[int], list[str]],
    *,
    cwd: Path | None,
    env: dict[str, str] | None,
    limits: SandboxLimits,
    channel: Channel,
    setup: Callable[[], None] | None = None,
    watch: Callable[[], str] | None = None,
) -> SandboxResult:
    """Start ``command`` and read its pipes until it ends, its time is up, its channel
    stops it, or ``watch`` (asked about once a second) returns why it must stop."""
    start = time.monotonic()
    data_read, data_write = os.pipe()
    out_read, out_write = os.pipe()
    in_read, in_write = os.pipe()
    os.set_blocking(in_write, False)
    cmd = command(data_write)
    try:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdin=in_read, stdout=out_write, stderr=out_write,
            pass_fds=(data_write,), start_new_session=True, preexec_fn=setup,
        )  # fmt: skip
    finally:
        os.close(data_write)
        os.close(out_write)
        os.close(in_read)
    output = bytearray()
    tail = bytearray()
    selector = selectors.DefaultSelector()
    selector.register(out_read, selectors.EVENT_READ, "out")
    selector.register(data_read, selectors.EVENT_READ, "data")
    deadline = start + limits.wall_seconds
    timed_out = ended_first = False
    open_pipes = 2
    watched, next_watch = "", start + 1.0
    while open_pipes and not channel.stop and not watched:
        now = time.monotonic()
        if watch is not None and now >= next_watch:
            watched, next_watch = watch(), now + 1.0
            if watched:
                break
        if proc.poll() is not None and deadline > now + _GRACE:
            # The first process ended; what it left running (tier 2, or a plain child:
            # no PID namespace dies with it) may hold the pipes, but not for long.
            deadline, timed_out = now + _GRACE, False
            ended_first = True
        remaining = deadline - now
        if remaining <= 0:
            timed_out = not ended_first
            break
        for key, _ in selector.select(timeout=min(remaining, 1.0)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                selector.unregister(key.fd)
                open_pipes -= 1
            elif key.data == "data":
                _send(in_write, channel.feed(chunk, time.monotonic()))
                if channel.stop:
                    break
            elif not _keep(output, chunk, limits.output_bytes // 2):
                tail = (tail + chunk)[-limits.output_bytes // 2 :]
    try:  # the sandbox's first process; its PID namespace dies with it
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()
    channel.close()
    selector.close()
    os.close(out_read)
    os.close(data_read)
    os.close(in_write)
    shown = output.decode("utf-8", errors="replace")
    if tail:
        shown += "\n[... output cut ...]\n" + tail.decode("utf-8", errors="replace")
    return SandboxResult(
        returncode=proc.returncode, output=shown, timed_out=timed_out,
        seconds=time.monotonic() - start, stopped=channel.stop or watched,
    )  # fmt: skip


def _send(fd: int, reply: bytes | None) -> None:
    """Write a reply to the command's standard input; a command that does not read it
    (a full pipe, a closed one) loses the reply, nothing more."""
    if reply:
        try:
            os.write(fd, reply)
        except OSError:
            pass


if __name__ == "__main__":  # python -m autograder.sandbox: which tier works here?
    from autograder.paths import ROOT

    try:
        chosen = probe([ROOT])
    except SandboxUnavailable as exc:
        print(f"sandbox: none ({exc})")
        raise SystemExit(1) from None
    print(f"sandbox: OK, {chosen.label}")
    raise SystemExit(0)
