"""Run untrusted code inside a bubblewrap (``bwrap``) sandbox.

What the sandboxed command sees and may do (see the threat model in
``autograder/README.md``):

- **Files.** Only what is bound: the system's programs and libraries (``/usr``, ``/bin``,
  ``/lib*``, a few files of ``/etc``), the Python installation and the site-packages the
  grader's interpreter uses (course packages installed there are hidden under an empty
  folder), and one work folder, all read-only. Writable: a private ``/tmp`` and
  ``/dev/shm`` (size-limited memory file systems that vanish with the sandbox) and, when
  given, one shared cache folder. Nothing else of the machine exists inside: not the
  grader's tree, not the reference, not the results folder, not ``/root``.
- **Identity.** Where the grader runs as root, the command runs as the unprivileged user
  ``nobody`` (uid 65534) with no capabilities; otherwise as the grader's own user inside
  an unprivileged user namespace (which still sees only the binds above).
- **Namespaces.** Its own PID namespace (it cannot see, signal or ptrace any process
  outside; every process in it dies when its first process ends or the grader dies),
  network namespace (no network), IPC, UTS and mount namespaces; a new session (no
  terminal).
- **Limits.** On the whole sandbox, where the grader may make a control group (cgroup
  v1 or v2, as root): memory (resident memory and the private ``/tmp``/``/dev/shm``
  together) and number of processes and threads (512). Per process, always: address space, file
  size, CPU time, open files, no core files; for the sandbox's user: 1024 processes and
  threads. A wall-clock limit is enforced from outside by killing the sandbox. Output is
  read through pipes and kept only up to a cap (the rest is read and dropped).

The command's results come back on a pipe (file descriptor ``DATA_FD`` inside), not
through a file: nothing the command leaves behind survives it.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SANDBOX_UID = 65534
"""``nobody``: the user sandboxed code runs as when the grader is root."""
WORK = "/grade/work"
"""Where the work folder appears inside the sandbox (read-only)."""
CACHE = "/grade/cache"
"""Where the optional shared cache folder appears (writable)."""
DATA_FD = 3
"""The command's result pipe, inside the sandbox."""
Responder = Callable[[bytes], bytes | None]
"""Called with each line of the result pipe; bytes it returns go to standard input."""
COURSE_PACKAGES = ("module0", "module1", "module2", "module3", "module4", "project",
                   "autograder", "tests")  # fmt: skip
"""Top-level names hidden if found in a bound site-packages folder: an installed copy
of the course (``pip install .``) would otherwise be readable, solutions and all."""

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
    """Processes and threads of the sandbox's user (RLIMIT_NPROC, always; threads count,
    and so do other sandboxes running at the same time as the same user)."""
    file_mb: int = 256
    """Largest file a process may write (RLIMIT_FSIZE)."""
    scratch_mb: int = 1024
    """Size of each of the private /tmp and /dev/shm."""
    open_files: int = 256
    output_bytes: int = 256 * 1024
    """stdout and stderr kept (the start and the end of it)."""
    data_bytes: int = 32 * 1024 * 1024
    """Result pipe kept; a run that writes more is marked truncated."""


@dataclass
class SandboxResult:
    returncode: int | None
    output: str
    data: bytes
    data_truncated: bool
    timed_out: bool
    seconds: float
    whole_limits: str = ""
    """The limits applied to the sandbox as a whole (``""``: per-process limits only)."""
    memory_exhausted: bool = False
    """The whole-sandbox memory limit was reached (a process was likely killed for it)."""

    def how_it_ended(self) -> str:
        """``"exited with status 1"``, ``"was killed by signal 9"``, ``"..."``."""
        if self.timed_out:
            return "was stopped at its time limit"
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


@cache
def unavailable_reason() -> str:
    """Why no sandbox can be made here, or ``""`` when one can (tried once per process)."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (bubblewrap); this is {sys.platform}"
    if shutil.which("bwrap") is None:
        return (
            "bubblewrap (bwrap) is not installed: install it (Debian/Ubuntu: "
            "apt-get install bubblewrap)"
        )
    try:
        result = run_sandboxed(
            [sys.executable, "-S", "-c", "import os; os.write(3, b'ok')"],
            work=None, env={}, limits=SandboxLimits(wall_seconds=60),
        )  # fmt: skip
    except OSError as exc:
        return f"bwrap could not start: {exc}"
    if result.data != b"ok":
        detail = result.output.strip().splitlines()[-1:] or [result.how_it_ended()]
        return (
            f"bwrap is installed but could not make a sandbox here ({detail[0]}); "
            "unprivileged user namespaces may be disabled (sysctl "
            "kernel.unprivileged_userns_clone=1), or run the grader as root"
        )
    return ""


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


# Runs first inside the sandbox (trusted, before any submitted code): set the limits,
# drop root for nobody, then become the command.
_LAUNCHER = """
import os, resource, sys
nproc, mem, fsize, cpu, nofile, uid, data = (int(v) for v in sys.argv[1:8])
if data != 3:
    os.dup2(data, 3)
    os.close(data)
for name in ("HOME", "TMPDIR", "MPLCONFIGDIR"):
    if os.environ.get(name):
        os.makedirs(os.environ[name], exist_ok=True)
if os.getuid() == 0:
    for name in ("HOME", "TMPDIR", "MPLCONFIGDIR"):
        if os.environ.get(name):
            os.chown(os.environ[name], uid, uid)
    os.chmod("/tmp", 0o1777)
    os.chmod("/dev/shm", 0o1777)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
limits = [(resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_FSIZE, fsize),
          (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_NOFILE, nofile),
          (resource.RLIMIT_CORE, 0)]
if mem:
    limits.append((resource.RLIMIT_AS, mem))
for which, value in limits:
    resource.setrlimit(which, (value, value))
os.execv(sys.argv[8], sys.argv[8:])
"""


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
    else:
        cmd += ["--disable-userns"]
    for name, value in sorted(env.items()):
        cmd += ["--setenv", name, value]
    cmd += _binds(work, cache_dir, limits)
    mb = 1024 * 1024
    cmd += ["--", sys.executable, "-S", "-c", _LAUNCHER, str(limits.user_processes),
            str(limits.memory_mb * mb), str(limits.file_mb * mb), str(limits.cpu_seconds),
            str(limits.open_files), str(SANDBOX_UID), str(data_fd), *argv]  # fmt: skip
    return cmd


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

    def remove(self) -> None:
        for path in self.paths:
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)


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
    cache_dir: Path | None = None,
    respond: Responder | None = None,
) -> SandboxResult:
    """Run ``argv`` in a fresh sandbox and wait for it (at most ``limits.wall_seconds``).

    ``work`` appears read-only at ``WORK`` (the working folder), ``cache_dir`` writable at
    ``CACHE``. The result pipe is file descriptor ``DATA_FD`` inside. ``respond`` sees
    each line of the result pipe as it arrives; what it returns is written to the
    command's standard input. On return, every process of the sandbox is gone.
    """
    groups = ControlGroups(limits.memory_mb * 1024 * 1024, limits.processes)
    try:
        result = _run(
            lambda fd: sandbox_command(
                argv, work=work, env=env, limits=limits, cache_dir=cache_dir, data_fd=fd
            ),
            cwd=None, env=None, limits=limits, setup=groups.join, respond=respond,
        )  # fmt: skip
        result.whole_limits = ", ".join(groups.applied)
        result.memory_exhausted = groups.exhausted()
        return result
    finally:
        groups.remove()


def run_unsandboxed(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    limits: SandboxLimits,
    respond: Responder | None = None,
) -> SandboxResult:
    """Run ``argv`` as a plain child (trusted code, or ``--unsafe-no-sandbox``), with the
    same result pipe (its number in ``MINITORCH_DATA_FD``), time limit and output cap."""

    def command(fd: int) -> list[str]:
        env["MINITORCH_DATA_FD"] = str(fd)
        return list(argv)

    return _run(command, cwd=cwd, env=env, limits=limits, respond=respond)


def _run(
    command: Callable[[int], list[str]],
    *,
    cwd: Path | None,
    env: dict[str, str] | None,
    limits: SandboxLimits,
    setup: Callable[[], None] | None = None,
    respond: Responder | None = None,
) -> SandboxResult:
    start = time.monotonic()
    data_read, data_write = os.pipe()
    out_read, out_write = os.pipe()
    in_read, in_write = os.pipe() if respond else (None, None)
    if in_write is not None:
        os.set_blocking(in_write, False)
    cmd = command(data_write)
    try:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdin=in_read if respond else subprocess.DEVNULL,
            stdout=out_write, stderr=out_write, pass_fds=(data_write,),
            start_new_session=True, preexec_fn=setup,
        )  # fmt: skip
    finally:
        os.close(data_write)
        os.close(out_write)
        if in_read is not None:
            os.close(in_read)
    line = bytearray()  # the result pipe's unfinished line, for ``respond``
    output, data = bytearray(), bytearray()
    tail = bytearray()
    truncated = False
    selector = selectors.DefaultSelector()
    selector.register(out_read, selectors.EVENT_READ, "out")
    selector.register(data_read, selectors.EVENT_READ, "data")
    deadline = start + limits.wall_seconds
    timed_out = False
    open_pipes = 2
    while open_pipes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in selector.select(timeout=min(remaining, 1.0)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                selector.unregister(key.fd)
                open_pipes -= 1
            elif key.data == "data":
                truncated |= not _keep(data, chunk, limits.data_bytes)
                if respond is not None and in_write is not None:
                    line += chunk
                    *complete, rest = bytes(line).split(b"\n")
                    line = bytearray(rest[:65536])
                    for text in complete:
                        _send(in_write, respond(text))
            elif not _keep(output, chunk, limits.output_bytes // 2):
                tail = (tail + chunk)[-limits.output_bytes // 2 :]
    try:  # the sandbox's first process; its PID namespace dies with it
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()
    selector.close()
    os.close(out_read)
    os.close(data_read)
    if in_write is not None:
        os.close(in_write)
    shown = output.decode("utf-8", errors="replace")
    if tail:
        shown += "\n[... output cut ...]\n" + tail.decode("utf-8", errors="replace")
    return SandboxResult(
        returncode=proc.returncode, output=shown, data=bytes(data), data_truncated=truncated,
        timed_out=timed_out, seconds=time.monotonic() - start,
    )  # fmt: skip


def _send(fd: int, reply: bytes | None) -> None:
    """Write a reply to the command's standard input; a command that does not read it
    (a full pipe, a closed one) loses the reply, nothing more."""
    if reply:
        try:
            os.write(fd, reply)
        except OSError:
            pass


if __name__ == "__main__":  # python -m autograder.sandbox: can a sandbox be made here?
    problem = unavailable_reason()
    print(f"sandbox: {problem or 'OK (bubblewrap)'}")
    raise SystemExit(1 if problem else 0)
