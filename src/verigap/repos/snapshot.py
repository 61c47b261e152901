"""A bounded, safe copy of an agent's workspace: the only form in which a grader reads it.

An agent controls every byte and every inode kind in its workspace. Reading it naively can
block forever (a FIFO, a socket, a device node, a symlink to one), run out of memory (a huge
file, ``/dev/zero`` behind a link), loop (a symlink cycle), or crash on a name that is not
UTF-8. :func:`safe_copy` walks the workspace without following any link, opens each file with
``O_NOFOLLOW | O_NONBLOCK`` and copies it only when ``fstat`` says it is a regular file within
the size limit; symlinks are recreated as links (never followed); everything else is left out
and listed with the reason. The walk has limits on depth, entry count, total bytes and time,
so grading a hostile workspace always finishes, and later steps read only the copy.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class SnapshotLimits:
    max_file_bytes: int = 4 * 1024 * 1024
    max_total_bytes: int = 256 * 1024 * 1024
    max_entries: int = 50_000
    max_depth: int = 48
    max_seconds: float = 60.0


@dataclass
class Snapshot:
    """What was left out of the copy (relative path or description -> reason)."""

    skipped: dict[str, str] = field(default_factory=dict)
    files: int = 0
    bytes: int = 0
    truncated: bool = False  # a global limit (entries, bytes, time) stopped the walk

    def note(self, rel: str, why: str) -> None:
        if len(self.skipped) < 200:
            self.skipped[rel] = why


def _printable(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "char_device"),
        (stat.S_ISBLK, "block_device"),
    ):
        if test(mode):
            return name
    return "special"


def _copy_file(src: str, dest: str, size_limit: int) -> tuple[int | None, str]:
    """Copy one regular file; (bytes copied, "") or (None, reason)."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return None, "unreadable" if e.errno in (
            errno.EACCES,
            errno.EPERM,
        ) else f"open failed ({errno.errorcode.get(e.errno or 0, e.errno)})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, _kind(st.st_mode)
        if st.st_size > size_limit:
            return None, f"larger than {size_limit} bytes"
        chunks, n = [], 0
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            n += len(b)
            if n > size_limit:  # grew while being read
                return None, f"larger than {size_limit} bytes"
            chunks.append(b)
    except OSError as e:
        return None, f"read failed ({errno.errorcode.get(e.errno or 0, e.errno)})"
    finally:
        os.close(fd)
    with open(dest, "wb") as f:
        f.write(b"".join(chunks))
    os.chmod(dest, 0o755 if st.st_mode & 0o111 else 0o644)
    return n, ""


def read_bounded(root: Path, rel: str, limit: int = 1024 * 1024) -> bytes | None:
    """The bytes of the regular file ``root/rel``, or None: a grader's only way to read a file
    an agent could have placed. No component of ``rel`` is followed when it is a link (each
    directory is opened with ``O_NOFOLLOW`` relative to the last), the file must be a regular
    file by ``fstat`` (a FIFO, socket or device is never read) and at most ``limit`` bytes, so
    a link to ``/dev/zero`` or ``/proc/self/fd/0`` returns None at once."""
    parts = [x for x in rel.split("/") if x not in ("", ".")]
    if not parts or ".." in parts:
        return None
    flags_dir = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        fd = os.open(root, flags_dir)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            nxt = os.open(part, flags_dir, dir_fd=fd)
            os.close(fd)
            fd = nxt
        leaf = os.open(
            parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd
        )
    except OSError:  # a link (ELOOP), a missing path, a non-directory component
        os.close(fd)
        return None
    os.close(fd)
    try:
        st = os.fstat(leaf)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = os.read(leaf, limit + 1)
        chunks = [data]
        n = len(data)
        while data and n <= limit:
            data = os.read(leaf, limit + 1 - n)
            chunks.append(data)
            n += len(data)
        return None if n > limit else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(leaf)


def link_leaves(root: Path, rel: str) -> bool:
    """Whether the symlink ``root/rel`` points outside ``root``, judged from its text alone
    (``readlink``, never followed): an absolute target, or one that climbs above ``root``."""
    try:
        target = os.readlink(os.path.join(root, rel))
    except OSError:
        return False
    if os.path.isabs(target):
        return True
    depth = len([x for x in rel.split("/")[:-1] if x not in ("", ".")])
    for part in target.split("/"):
        depth += -1 if part == ".." else 0 if part in ("", ".") else 1
        if depth < 0:
            return True
    return False


def safe_copy(
    src: Path,
    dest: Path,
    limits: SnapshotLimits = SnapshotLimits(),
    *,
    skip_top: tuple[str, ...] = (".git",),
) -> Snapshot:
    """Copy the regular files, directories and (unfollowed) symlinks of ``src`` into ``dest``
    (top-level names in ``skip_top`` are not copied: no grading step reads them)."""
    snap = Snapshot()
    deadline = time.monotonic() + limits.max_seconds
    dest.mkdir(parents=True, exist_ok=True)
    entries = 0
    stack: list[tuple[str, int]] = [("", 0)]  # iterative: a deep tree cannot overflow a stack
    while stack:
        rel_dir, depth = stack.pop()
        try:
            it = list(os.scandir(os.path.join(src, rel_dir)))
        except OSError as e:
            snap.note(rel_dir or ".", f"unlistable ({errno.errorcode.get(e.errno or 0, e.errno)})")
            continue
        for entry in sorted(it, key=lambda e: e.name):
            entries += 1
            if entries > limits.max_entries or time.monotonic() > deadline:
                snap.truncated = True
                snap.note("<walk>", "entry or time limit reached")
                return snap
            if not rel_dir and entry.name in skip_top:
                continue
            rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
            if not _printable(entry.name):
                snap.note(ascii(rel), "name is not UTF-8")
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                snap.note(rel, "unstatable")
                continue
            target = dest / rel
            if stat.S_ISLNK(st.st_mode):
                try:
                    os.symlink(os.readlink(entry.path), target)
                except OSError:
                    snap.note(rel, "unreadable link")
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 > limits.max_depth:
                    snap.note(rel, f"deeper than {limits.max_depth} levels")
                    continue
                target.mkdir(exist_ok=True)
                stack.append((rel, depth + 1))
                continue
            if not stat.S_ISREG(st.st_mode):
                snap.note(rel, _kind(st.st_mode))
                continue
            if st.st_size > limits.max_file_bytes:
                snap.note(rel, f"larger than {limits.max_file_bytes} bytes")
                continue
            if snap.bytes + st.st_size > limits.max_total_bytes:
                snap.truncated = True
                snap.note(rel, "workspace size limit reached")
                continue
            n, why = _copy_file(entry.path, str(target), limits.max_file_bytes)
            if n is None:
                snap.note(rel, why)
                continue
            snap.files += 1
            snap.bytes += n
    return snap
