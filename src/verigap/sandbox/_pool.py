"""Workspaces off the waiting path: copies made ahead of time, trees deleted behind it.

Copying a 1,000-file tree costs ~80 ms on this machine's disk, and deleting one is slower
still where the filesystem is mounted with ``discard``. Neither has to be waited for:

- ``WorkspacePool(source, root)`` keeps ``size`` finished copies of ``source`` under
  ``root`` (each a full private copy made by ``materialize``, never hard links), made by one
  background thread. ``take(dest)`` renames one to ``dest`` (a rename within one
  filesystem: microseconds) and wakes the thread to make the next. Where no copy is ready,
  or ``root`` and ``dest`` lie on different filesystems, ``take`` copies there and then,
  as ``materialize`` would.
- ``discard(path)`` renames a tree into a trash directory next to it and deletes it on a
  background thread.

``WorkspacePool(..., for_sandbox=True)``: when verigap runs as root, each copy is also
handed to a new random sandbox uid in the background (the ~1 000 ``lchown`` calls
``make_sandbox`` would otherwise make while someone waits), and ``take_sandbox(dest, ...)``
returns ``make_sandbox(dest, uid=that uid, ...)``. Each copy gets its own uid, as each
sandbox made the usual way does.

A pooled copy is only handed out if ``source`` looks exactly as it did while the copy was
made: ``take`` compares a fingerprint of the source tree (every entry's path, mode, size
and modification time, ~1 000 ``lstat`` calls, a few milliseconds) with the one taken before
and after the copy, and a copy of an older source is thrown away, not used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from verigap.errors import ConfigError
from verigap.sandbox._base import Sandbox
from verigap.sandbox._bwrap import _chown_tree, new_sandbox_uid
from verigap.sandbox._workspace import materialize

TRASH = ".verigap-trash"
"""The directory ``discard`` renames trees into, next to the tree."""


def fingerprint(root: Path) -> bytes:
    """A digest of every entry under ``root``: relative path, mode, size, mtime (ns)."""
    h = hashlib.blake2b(digest_size=16)
    stack = [(str(root), "")]
    while stack:
        d, rel = stack.pop()
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            st = e.stat(follow_symlinks=False)
            name = rel + e.name
            h.update(f"{name}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            if e.is_dir(follow_symlinks=False):
                stack.append((e.path, name + "/"))
    return h.digest()


# ---- deletion behind the waiting path -------------------------------------------------------

_reaper_cv = threading.Condition()
_doomed: list[Path] = []
_pending = 0  # queued or being deleted
_reaper: threading.Thread | None = None


def _reap() -> None:
    global _pending
    while True:
        with _reaper_cv:
            while not _doomed:
                _reaper_cv.wait()
            path = _doomed.pop(0)
        shutil.rmtree(path, ignore_errors=True)
        try:
            path.parent.rmdir()  # the trash directory, once it is empty
        except OSError:
            pass
        with _reaper_cv:
            _queued.discard(path)
            _pending -= 1
            _reaper_cv.notify_all()


def discard(path: Path) -> None:
    """Remove the tree at ``path`` without waiting for the deletion.

    ``path`` is renamed at once into ``.verigap-trash/`` beside it (so the name is free
    again and nothing can use the old tree by its path) and deleted by a background thread.
    A tree whose trash cannot be made beside it is deleted on the spot. Trees still in the
    trash when the process ends stay there until a later ``discard`` in the same directory.
    """
    global _reaper, _pending
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
        return
    if not path.exists():
        return
    trash = path.parent / TRASH
    doomed = trash / f"{path.name}-{uuid.uuid4().hex[:12]}"
    try:
        trash.mkdir(exist_ok=True)
        os.rename(path, doomed)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        new = [doomed, *(p for p in trash.iterdir() if p != doomed)]  # and any left behind
    except OSError:
        new = [doomed]
    with _reaper_cv:
        new = [p for p in new if p not in _doomed and p not in _queued]
        _queued.update(new)
        _doomed.extend(new)
        _pending += len(new)
        if _reaper is None or not _reaper.is_alive():
            _reaper = threading.Thread(target=_reap, name="verigap-discard", daemon=True)
            _reaper.start()
        _reaper_cv.notify_all()


_queued: set[Path] = set()  # queued and not yet deleted: a leftover is queued once


def wait_discarded(timeout: float | None = None) -> bool:
    """Block until every discarded tree is deleted (tests; a caller about to exit)."""
    with _reaper_cv:
        return _reaper_cv.wait_for(lambda: _pending == 0, timeout=timeout)


# ---- the pool -------------------------------------------------------------------------------


@dataclass
class PoolStats:
    """How ``take`` was served: from a ready copy, or copied on the spot (and why)."""

    taken: int = 0
    copied_on_the_spot: int = 0
    stale_dropped: int = 0


class WorkspacePool:
    """Ready-made private copies of ``source``, handed out by rename (see module doc).

    ``root`` holds the copies; put it on the filesystem where workspaces go, outside
    ``source``, and outside every workspace. ``close()`` stops the background thread and
    discards the copies left. ``for_sandbox``: copies made for ``take_sandbox``, each
    already owned by its own sandbox uid (as root; elsewhere there is nothing to hand over).
    """

    def __init__(
        self, source: Path, root: Path, size: int = 2, *, for_sandbox: bool = False
    ) -> None:
        self.source = Path(source).resolve()
        self.root = Path(root).absolute()
        if not self.source.is_dir():
            raise ConfigError(f"WorkspacePool: source {source} is not a directory")
        if size < 1:
            raise ConfigError(f"WorkspacePool: size must be at least 1, got {size}")
        if self.root.resolve().is_relative_to(self.source):
            raise ConfigError(f"WorkspacePool: root {root} lies inside the source {source}")
        self.size = size
        self.for_sandbox = for_sandbox
        self.stats = PoolStats()
        self.root.mkdir(parents=True, exist_ok=True)
        self._cv = threading.Condition()
        self._ready: list[tuple[Path, bytes, int | None]] = []
        self._closed = False
        self._thread = threading.Thread(target=self._fill, name="verigap-pool", daemon=True)
        self._thread.start()

    # -- background
    def _fill(self) -> None:
        while True:
            with self._cv:
                while not self._closed and len(self._ready) >= self.size:
                    self._cv.wait()
                if self._closed:
                    return
            try:
                made = self._make_one()
            except Exception:  # noqa: BLE001 - a failed copy leaves take() to copy itself
                made = None
            with self._cv:
                if made is not None and not self._closed:
                    self._ready.append(made)
                    made = None
                    self._cv.notify_all()  # wait_ready
                elif made is None and not self._closed:
                    # the source changed while copying, or the copy failed: try again only
                    # after the next take (which copies on the spot meanwhile)
                    self._cv.wait()
            if made is not None:  # closed while copying
                discard(made[0])

    def _make_one(self) -> tuple[Path, bytes, int | None] | None:
        name = uuid.uuid4().hex[:12]
        part = self.root / f"part-{name}"
        before = fingerprint(self.source)
        materialize(self.source, part)
        if fingerprint(self.source) != before:  # changed while copying: not a copy of either
            discard(part)
            return None
        uid = None
        if self.for_sandbox and os.geteuid() == 0:
            uid = new_sandbox_uid()
            _chown_tree(part, uid)
        ready = self.root / f"ready-{name}"
        os.rename(part, ready)
        return ready, before, uid

    # -- foreground
    def take(self, dest: Path) -> Path:
        """A private copy of ``source`` at ``dest`` (which must not exist, or be empty)."""
        return self._take(dest)[0]

    def take_owned(self, dest: Path) -> tuple[Path, int | None]:
        """(``self.take(dest)``, the sandbox uid that already owns it, or None): pass the uid
        to ``make_sandbox(uid=)`` where the sandbox is made later (``take_sandbox`` does both)."""
        return self._take(dest)

    def take_sandbox(self, dest: Path, **sandbox_args: object) -> Sandbox:
        """``make_sandbox(self.take(dest), **sandbox_args)``, without handing the files to the
        sandbox uid again where a ``for_sandbox`` pool has already done so."""
        from verigap.sandbox import make_sandbox

        path, uid = self._take(dest)
        if uid is not None and sandbox_args.get("backend", "bwrap") == "bwrap":
            return make_sandbox(path, uid=uid, **sandbox_args)  # type: ignore[arg-type]
        return make_sandbox(path, **sandbox_args)  # type: ignore[arg-type]

    def _take(self, dest: Path) -> tuple[Path, int | None]:
        dest = Path(dest)
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            raise ConfigError(
                f"WorkspacePool.take: destination {dest} already exists and is not an empty "
                "directory; pass a fresh path"
            )
        now = fingerprint(self.source)
        with self._cv:
            if self._closed:
                raise ConfigError("WorkspacePool.take: the pool is closed")
            stale = [c for c in self._ready if c[1] != now]
            self._ready = [c for c in self._ready if c[1] == now]
            got = self._ready.pop(0) if self._ready else None
            self.stats.taken += 1
            self.stats.stale_dropped += len(stale)
            self._cv.notify_all()
        for path, _, _ in stale:
            discard(path)
        if got is not None:
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.exists():
                dest.rmdir()
            try:
                os.rename(got[0], dest)
                return dest, got[2]
            except OSError:  # e.g. another filesystem: copy as if nothing was ready
                discard(got[0])
        with self._cv:
            self.stats.copied_on_the_spot += 1
        return materialize(self.source, dest), None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until ``size`` copies are ready (tests; a caller that can wait up front)."""
        with self._cv:
            return self._cv.wait_for(
                lambda: self._closed or len(self._ready) >= self.size, timeout=timeout
            )

    def close(self) -> None:
        with self._cv:
            self._closed = True
            left, self._ready = self._ready, []
            self._cv.notify_all()
        self._thread.join()
        for path, _, _ in left:
            discard(path)
        for p in self.root.glob("part-*"):
            discard(p)

    def __enter__(self) -> WorkspacePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
