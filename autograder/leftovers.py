"""What a graded run leaves behind, found and removed whatever the run made of it.

Everything the grader removes after a run — its folders, what its user left in the
machine's shared scratch folders, its System V IPC objects, its processes — is removed
here, by code that nothing a run wrote can stop:

- :func:`remove_tree` walks a folder with one descriptor at a time (no recursion, no path
  longer than one name: a tree 100,000 folders deep is removed like a flat one), never
  follows a symbolic link, takes odd names (newlines, bytes that are not UTF-8) as they
  are, makes an unreadable folder readable where only its owner may, and clears the
  immutable and append-only attributes where the grader may (root). It goes on past what
  it cannot remove and returns what is left, with why; it never raises.
- :func:`clean_user` ends a tier-2 run's user: every process killed (and its zombies
  reaped: the grader is their subreaper), its IPC objects removed, its files in the
  shared scratch folders removed; again it returns what is left instead of raising.
- :func:`user_leftovers` says what of a user remains, so that a user id is never given
  to another run while anything of it does (:func:`autograder.sandbox.free_uid`).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import signal
import stat
import struct
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

SHARED_SCRATCH = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue")
"""Folders any user may write (``/dev/mqueue``: POSIX message queues, where mounted)."""
SCRATCH_DEPTH = 3
"""How deep the scratch folders' world-writable subfolders are searched for a user's files."""

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS = 0x80086601, 0x40086602
_IMMUTABLE = 0x10 | 0x20  # FS_IMMUTABLE_FL, FS_APPEND_FL
_BATCH = 4096


def _shown(path: str) -> str:
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace").replace("\n", "\\n")


def _clear_attributes(fd: int) -> bool:
    """Clear the immutable and append-only attributes of an open file; True if any was
    set and is now cleared."""
    try:
        buffer = bytearray(8)
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buffer)
        flags = struct.unpack_from("i", buffer)[0]
        if not flags & _IMMUTABLE:
            return False
        struct.pack_into("i", buffer, 0, flags & ~_IMMUTABLE)
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, buffer)
        return True
    except OSError:
        return False


def _clear_entry_attributes(dir_fd: int, name: str) -> bool:
    try:
        fd = os.open(name, _FLAGS | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        return _clear_attributes(fd)
    finally:
        os.close(fd)


def _unlink(dir_fd: int, name: str, is_dir: bool) -> OSError | None:
    """Remove one entry of ``dir_fd``; where the attributes forbid it (EPERM), clear those
    of the entry and of its folder and try once more."""
    for attempt in range(2):
        try:
            if is_dir:
                os.rmdir(name, dir_fd=dir_fd)
            else:
                os.unlink(name, dir_fd=dir_fd)
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            if attempt or exc.errno not in (errno.EPERM, errno.EACCES):
                return exc
            cleared = _clear_attributes(dir_fd) | _clear_entry_attributes(dir_fd, name)
            if not cleared and os.getuid() != 0 and exc.errno == errno.EACCES:
                try:  # our own folder made unwritable: give it back its write bit
                    os.fchmod(dir_fd, 0o700)
                except OSError:
                    return exc
            elif not cleared:
                return exc
    return None


def _open_folder(dir_fd: int, name: str) -> int:
    """A descriptor of the folder ``name`` in ``dir_fd``, never through a link; a folder
    of ours without read or search permission is given them first (not root: root needs
    none, and changes no mode through a name)."""
    flags = _FLAGS | os.O_DIRECTORY
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except PermissionError:
        if os.getuid() == 0:
            raise
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise
        os.chmod(name, 0o700, dir_fd=dir_fd)
        return os.open(name, flags, dir_fd=dir_fd)


def remove_tree(path: str | os.PathLike[str]) -> list[str]:
    """Remove ``path`` (a folder and all it holds, or a file); what could not be removed,
    each with why ("" for none is an empty list). Never raises, never recurses, never
    follows a symbolic link."""
    path = os.path.abspath(os.fspath(path))
    parent, name = os.path.split(path)
    problems: list[str] = []
    try:
        parent_fd = os.open(parent, _FLAGS | os.O_DIRECTORY)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [f"{_shown(path)}: {exc.strerror}"]
    try:
        _remove_in(parent_fd, name, path, problems)
    except Exception as exc:  # nothing a run wrote may stop the cleanup with an error
        problems.append(f"{_shown(path)}: {type(exc).__name__}: {exc}")
    finally:
        os.close(parent_fd)
    return problems


def _remove_in(parent_fd: int, name: str, shown: str, problems: list[str]) -> None:
    try:
        info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        if (exc := _unlink(parent_fd, name, False)) is not None:
            problems.append(f"{_shown(shown)}: {exc.strerror}")
        return
    try:
        fd = _open_folder(parent_fd, name)
    except OSError as exc:
        problems.append(f"{_shown(shown)}: {exc.strerror}")
        return
    # The way back up: each level's identity, its name in its parent, and the names in
    # it that could not be removed (so that they are not tried again and again).
    top = os.fstat(parent_fd)
    stack: list[tuple[tuple[int, int], str, set[str]]] = [((top.st_dev, top.st_ino), name, set())]
    depth_path = [shown]
    try:
        while True:
            kept = stack[-1][2]
            child = _clear_files(fd, kept, depth_path[-1], problems)
            if child is not None:  # go down into it
                try:
                    next_fd = _open_folder(fd, child)
                except OSError as exc:
                    kept.add(child)
                    problems.append(f"{_shown(depth_path[-1])}/{_shown(child)}: {exc.strerror}")
                    continue
                here = os.fstat(fd)
                stack.append(((here.st_dev, here.st_ino), child, set()))
                deep = f"{depth_path[0]}/[{len(stack) - 1} folders down]/{child}"
                depth_path.append(f"{depth_path[-1]}/{child}" if len(stack) < 64 else deep)
                os.close(fd)
                fd = next_fd
                continue
            # Everything removable here is gone: up one level, and remove this folder.
            identity, name_here, _ = stack.pop()
            up = os.open("..", _FLAGS | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = up
            up_info = os.fstat(fd)
            if (up_info.st_dev, up_info.st_ino) != identity:
                problems.append(f"{_shown(depth_path[-1])}: moved while it was being removed")
                return
            shown_here = depth_path.pop()
            if (error := _unlink(fd, name_here, True)) is not None:
                problems.append(f"{_shown(shown_here)}: {error.strerror}")
                if stack:
                    stack[-1][2].add(name_here)
            if not stack:
                return
    finally:
        os.close(fd)


def _clear_files(fd: int, kept: set[str], shown: str, problems: list[str]) -> str | None:
    """Remove the files of the open folder ``fd`` (a batch at a time, each batch up to the
    first folder met); that folder, to go down into, or None when only what cannot be
    removed is left."""
    while True:
        names: list[str] = []
        folder = None
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.name in kept:
                    continue
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if is_dir:
                    folder = entry.name
                    break
                names.append(entry.name)
                if len(names) >= _BATCH:
                    break
        for name in names:
            if (exc := _unlink(fd, name, False)) is not None:
                kept.add(name)
                problems.append(f"{_shown(shown)}/{_shown(name)}: {exc.strerror}")
        if folder is not None or not names:
            return folder


def folder_usage(path: str | os.PathLike[str], most_entries: int) -> tuple[int, int]:
    """Bytes and entries under ``path`` (links not followed), counting stops past
    ``most_entries`` entries, so that a folder of a million files costs no more to weigh
    than one just over the limit."""
    size = entries = 0
    queue = [os.fspath(path)]
    while queue and entries <= most_entries:
        try:
            with os.scandir(queue.pop()) as found:
                for entry in found:
                    entries += 1
                    if entries > most_entries:
                        break
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(info.st_mode):
                        queue.append(entry.path)
                    else:
                        size += info.st_blocks * 512
        except OSError:
            continue
    return size, entries


# -- a user's processes, IPC objects and files ------------------------------------------------


def process_uids(live_only: bool = True) -> dict[int, int]:
    """Real user id of each process (pid -> uid); ``live_only``: zombies left out (a dead
    process that nobody has reaped yet holds nothing but its pid)."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                uid, zombie = None, False
                for line in f:
                    if line.startswith(b"State:"):
                        zombie = line.split()[1:2] in ([b"Z"], [b"X"])
                    elif line.startswith(b"Uid:"):
                        uid = int(line.split()[1])
                        break
            if uid is not None and not (live_only and zombie):
                found[int(entry.name)] = uid
        except (OSError, ValueError, IndexError):
            pass
    return found


def become_subreaper() -> None:
    """Orphans of this process's children come to it, not to the machine's first process
    (which, in a container, may never reap them): :func:`kill_user` then reaps them."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _reap(uid: int) -> None:
    """Reap the zombies of ``uid`` that are this process's children."""
    for pid, owner in process_uids(live_only=False).items():
        if owner == uid:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def kill_user(uid: int, attempts: int = 100) -> str:
    """Kill every process of ``uid`` (``kill(-1, SIGKILL)`` sent as that user reaches
    exactly its processes) and reap its zombies (this process is their subreaper: see
    :func:`become_subreaper`); "" when nothing of it is left, else what is."""
    for attempt in range(attempts):
        _reap(uid)
        owned = [p for p, u in process_uids(live_only=False).items() if u == uid]
        if not owned:
            return ""
        if uid in process_uids().values():  # live ones: kill them (zombies: wait)
            pid = os.fork()
            if pid == 0:
                try:
                    os.setgroups([])
                    os.setgid(uid)
                    os.setuid(uid)
                    os.kill(-1, signal.SIGKILL)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
        time.sleep(0.002 if attempt < 10 else 0.02)
    live = sorted(p for p, u in process_uids().items() if u == uid)
    dead = sorted(p for p, u in process_uids(live_only=False).items() if u == uid and p not in live)
    if not live and not dead:
        return ""
    return (
        f"{len(live)} process(es) of user {uid} could not be killed {live[:10]}, and "
        f"{len(dead)} zombie(s) are not this grader's to reap {dead[:10]}"
    )


_IPC = {"shm": ("shmid", "shmctl"), "msg": ("msqid", "msgctl"), "sem": ("semid", "semctl")}


def ipc_objects(uid: int | None = None) -> list[tuple[str, int, int]]:
    """System V IPC objects (kind, id, owner) owned or made by ``uid`` (None: all)."""
    found = []
    for kind, (id_column, _) in _IPC.items():
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        header = lines[0].split()
        try:
            at_id, at_uid, at_cuid = (header.index(c) for c in (id_column, "uid", "cuid"))
        except ValueError:
            continue
        for line in lines[1:]:
            fields = line.split()
            try:
                owners = {int(fields[at_uid]), int(fields[at_cuid])}
                if uid is None or uid in owners:
                    found.append((kind, int(fields[at_id]), int(fields[at_uid])))
            except (IndexError, ValueError):
                continue
    return found


def remove_ipc(uid: int) -> list[str]:
    """Remove the System V shared memory, message queues and semaphores of ``uid``."""
    libc = ctypes.CDLL(None, use_errno=True)
    problems = []
    for kind, number, _ in ipc_objects(uid):
        call = getattr(libc, _IPC[kind][1])
        result = call(number, 0, 0) if kind == "sem" else call(number, 0, None)  # IPC_RMID
        if result != 0 and ctypes.get_errno() not in (errno.EINVAL, errno.EIDRM):
            problems.append(f"System V {kind} {number} of user {uid}: "
                            f"{os.strerror(ctypes.get_errno())}")  # fmt: skip
    return problems


def owned_in_scratch(uid: int, folders: Sequence[str] = SHARED_SCRATCH) -> list[str]:
    """Entries of ``uid`` in the shared scratch folders: at their top, and in their
    world-writable subfolders (``/tmp/.X11-unix``...), :data:`SCRATCH_DEPTH` deep."""
    found: list[str] = []
    queue = [(folder, 0) for folder in folders]
    while queue:
        folder, depth = queue.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_uid == uid:
                found.append(entry.path)
            elif (stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH
                  and depth + 1 < SCRATCH_DEPTH):  # fmt: skip
                queue.append((entry.path, depth + 1))
    return found


def has_keys(uid: int) -> bool:
    """Whether the kernel holds keys (``keyctl``) of ``uid`` (the runs may not make any:
    the launcher's seccomp filter refuses the calls; this is the check that it held)."""
    try:
        lines = Path("/proc/key-users").read_text().splitlines()
    except OSError:
        return False
    return any(line.split(":")[0].strip() == str(uid) for line in lines)


def clean_user(uid: int, folders: Sequence[str] = SHARED_SCRATCH) -> list[str]:
    """End everything of ``uid``: its processes, its System V IPC objects, its files in
    the shared scratch folders. Each step runs whatever the others met; what is left,
    with why."""
    problems: list[str] = []
    steps = (
        lambda: [p for p in [kill_user(uid)] if p],
        lambda: remove_ipc(uid),
        lambda: [p for path in owned_in_scratch(uid, folders) for p in remove_tree(path)],
    )
    for step in steps:
        try:
            problems += step()
        except Exception as exc:
            problems.append(f"cleaning up after user {uid}: {type(exc).__name__}: {exc}")
    return problems


def user_leftovers(uid: int, folders: Iterable[str] = SHARED_SCRATCH) -> list[str]:
    """What of ``uid`` remains on the machine (any process, zombies too; IPC objects;
    scratch files; keys): a user id with any is not given to a run."""
    left = []
    if uid in process_uids(live_only=False).values():
        left.append("processes")
    if ipc_objects(uid):
        left.append("System V IPC objects")
    if owned_in_scratch(uid, tuple(folders)):
        left.append("files in the shared scratch folders")
    if has_keys(uid):
        left.append("kernel keys")
    return left


def taken_uids(folders: Sequence[str] = SHARED_SCRATCH) -> set[int]:
    """Every user id that owns something now: a process (zombies too), an IPC object, an
    entry of the shared scratch folders (at their top, where a run's files are), kernel
    keys."""
    taken = set(process_uids(live_only=False).values())
    taken |= {owner for _, _, owner in ipc_objects()}
    for folder in folders:
        try:
            for entry in os.scandir(folder):
                try:
                    taken.add(entry.stat(follow_symlinks=False).st_uid)
                except OSError:
                    pass
        except OSError:
            pass
    try:
        for line in Path("/proc/key-users").read_text().splitlines():
            head = line.split(":")[0].strip()
            if head.isdigit():
                taken.add(int(head))
    except OSError:
        pass
    return taken
