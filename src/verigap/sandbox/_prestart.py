"""Single-use sandboxes started ahead of time: a fresh sandbox per command, without the wait.

Starting bubblewrap (namespaces, mounts, pivot) is most of what a fresh sandbox per command
costs. ``SandboxPool(root, limits=..., ro_binds=..., ro_mounts=..., network=..., size=2)``
keeps ``size`` of them already running, each made by a background thread:

- each over its own new, empty workspace directory under ``root`` (bind mounted at
  ``/workspace`` when it starts), with the mounts, namespaces, uid and limits of any other
  bubblewrap sandbox made with the same arguments;
- each running nothing but the command server of ``_session``, waiting for one command.

At most ``size`` sandboxes are started and not yet used at a time, those handed out
included: the next one is started once a handed-out one has run its command (or was dropped
unused), so starting it never competes with a command for a CPU.

``take(dest)`` renames one's workspace directory to ``dest`` (the bind mount follows the
directory, not its name) and hands it out as a sandbox. The caller fills ``dest`` (e.g.
``materialize(source, dest)``, which fills an empty directory in place) and calls ``exec``
once. That command runs as the sandbox's first and only one; then the whole sandbox is torn
down (by the pool's thread, after the result is returned: the server has already killed
every process the command left, as after every persistent-sandbox command). A second
``exec`` raises ``ConfigError``. So isolation per command is that of a fresh sandbox, with
the differences a persistent sandbox's first command shows (``_session``): the server is
visible as pid 2, and ``/proc/1``'s start time is when the sandbox started, not when the
command did.

A sandbox is only used for the directories it was started over: ``exec`` compares the
workspace directory's device and inode with the ones the sandbox bound, and where they differ
(``dest`` deleted and made again) starts a new sandbox for the command instead; ``take``
compares every read-only mount's source the same way (through the sandbox init's
``/proc/PID/root``) and closes a sandbox whose source was replaced since it started. Where no
sandbox is ready, or ``dest`` lies on another filesystem than ``root``, ``take`` returns one
that starts at its ``exec``, as a fresh sandbox would; ``take_ready`` returns None instead
(``repos.execution`` then starts its sandbox the usual way).

``close()`` (also at garbage collection and at interpreter exit) stops the thread and every
sandbox it started that was not handed out; bubblewrap's ``--die-with-parent`` ends the ones
handed out and never used when the thread that started them ends.
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from verigap.errors import ConfigError
from verigap.sandbox._bwrap import BwrapSandbox
from verigap.sandbox._limits import Limits
from verigap.sandbox._pool import discard
from verigap.sandbox._session import Session


@dataclass
class SandboxPoolStats:
    """How ``take`` was served: a sandbox already running, or one started at its command."""

    taken: int = 0
    started_on_the_spot: int = 0
    start_failures: int = 0
    stale_dropped: int = 0  # started over a mount source replaced since: closed, not used


class _State:
    """Everything the background thread touches (no reference to the pool object, so that
    the pool can be collected and its finalizer stop the thread)."""

    def __init__(self, root: Path, size: int, opts: dict) -> None:
        self.root = root
        self.size = size
        self.opts = opts
        self.cv = threading.Condition()
        self.ready: list[BwrapSandbox] = []
        # handed out, command not yet run: counted against ``size`` (so a refill never
        # competes with the command for a CPU); a box dropped unused leaves the set
        self.busy: weakref.WeakSet[BwrapSandbox] = weakref.WeakSet()
        self.retired: list[Session] = []
        self.tearing = 0  # retired sessions being torn down right now
        self.closed = False
        self.failed = False  # the last start failed: wait for the next take before retrying
        self.stats = SandboxPoolStats()
        self.thread = threading.Thread(target=self.fill, name="verigap-sandbox-pool", daemon=True)

    def new_box(self, workspace: Path) -> BwrapSandbox:
        box = BwrapSandbox(workspace, single_use=True, **self.opts)
        box._retire = functools.partial(self.retire, weakref.ref(box))
        return box

    def start_one(self) -> BwrapSandbox:
        slot = self.root / f"slot-{uuid.uuid4().hex[:12]}"
        slot.mkdir(mode=0o755)
        try:
            box = self.new_box(slot)
            box.prestart()
        except BaseException:
            discard(slot)
            raise
        return box

    def fill(self) -> None:
        while True:
            with self.cv:
                while not self.closed and not self.retired and not self.wanted():
                    self.cv.wait()
                if self.closed:
                    break
                retired, self.retired = self.retired, []
                self.tearing += len(retired)
                need = self.wanted()
            for session in retired:
                session.close()
            with self.cv:
                self.tearing -= len(retired)
                self.cv.notify_all()
            if not need:
                continue
            try:
                box: BwrapSandbox | None = self.start_one()
            except Exception:  # noqa: BLE001 - take() then starts one itself, and says why
                box = None
            with self.cv:
                if box is None:
                    self.failed = True
                    self.stats.start_failures += 1
                elif not self.closed:
                    self.ready.append(box)
                    self.cv.notify_all()
                    box = None
            if box is not None:  # closed while starting
                box.close()
                discard(box.root)
        # closed: this thread started every waiting sandbox, so it stops them
        with self.cv:
            left, self.ready = self.ready, []
            retired, self.retired = self.retired, []
        for box in left:
            box.close()
            discard(box.root)
        for session in retired:
            session.close()

    def wanted(self) -> bool:
        """Whether to start another sandbox now (call with the lock held)."""
        return not self.failed and len(self.ready) + len(self.busy) < self.size

    def settled(self) -> bool:
        return not self.wanted() and not self.retired and not self.tearing

    def retire(self, box: weakref.ref, session: Session) -> None:
        """Tear a used sandbox down behind the caller (at once if the pool is closed)."""
        with self.cv:
            used = box()
            if used is not None:
                self.busy.discard(used)
            if not self.closed:
                self.retired.append(session)
                self.cv.notify_all()
                return
        session.close()

    def close(self) -> None:
        with self.cv:
            self.closed = True
            self.cv.notify_all()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join()


class SandboxPool:
    """Bubblewrap sandboxes started ahead, each for exactly one command (see module doc).

    The arguments are those of ``make_sandbox`` (bubblewrap only); ``root`` holds the
    waiting sandboxes' workspace directories: put it on the filesystem where ``take``'s
    destinations go, and outside every mounted path.
    """

    def __init__(
        self,
        root: Path,
        *,
        size: int = 2,
        limits: Limits = Limits(),
        ro_binds: Sequence[Path] = (),
        ro_mounts: Mapping[Path, str] | None = None,
        network: bool = False,
    ) -> None:
        if size < 1:
            raise ConfigError(f"SandboxPool: size must be at least 1, got {size}")
        root = Path(root).absolute()
        root.mkdir(parents=True, exist_ok=True)
        opts = {
            "limits": limits,
            "ro_binds": tuple(ro_binds),
            "ro_mounts": dict(ro_mounts or {}),
            "network": network,
        }
        self._state = _State(root, size, opts)
        # the first sandbox is made here, in the caller's thread, so that a host where
        # bubblewrap cannot start fails at once (SandboxUnavailable), not at every take
        probe = root / f"probe-{uuid.uuid4().hex[:12]}"
        probe.mkdir(mode=0o755)
        try:
            self._state.new_box(probe).close()
        finally:
            discard(probe)
        self._state.thread.start()
        self._finalizer = weakref.finalize(self, self._state.close)

    @property
    def root(self) -> Path:
        return self._state.root

    @property
    def stats(self) -> SandboxPoolStats:
        return self._state.stats

    def take(self, dest: Path) -> BwrapSandbox:
        """A sandbox for one command, whose workspace is the new empty directory ``dest``."""
        box = self._take(dest, on_the_spot=True)
        assert box is not None
        return box

    def take_ready(self, dest: Path) -> BwrapSandbox | None:
        """As :meth:`take`, but only a sandbox already started: None where none is ready (the
        caller then runs its command as it would without a pool)."""
        return self._take(dest, on_the_spot=False)

    def _take(self, dest: Path, *, on_the_spot: bool) -> BwrapSandbox | None:
        s = self._state
        dest = Path(dest).absolute()
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            raise ConfigError(
                f"SandboxPool.take: destination {dest} already exists and is "
                "not an empty directory; pass a fresh path"
            )
        with s.cv:
            if s.closed:
                raise ConfigError("SandboxPool.take: the pool is closed")
            box = s.ready.pop(0) if s.ready else None
            if box is not None:
                s.busy.add(box)
            s.failed = False
            s.cv.notify_all()  # a start that failed is retried; one dropped unused is refilled
            if box is None and not on_the_spot:
                return None
            s.stats.taken += 1
        if box is not None and not box.mounts_as_bound():
            # a mounted source was replaced (or the sandbox died) since it started: never
            # hand it out
            with s.cv:
                s.stats.stale_dropped += 1
                s.busy.discard(box)
                s.cv.notify_all()
            box.close()
            discard(box.root)
            box = None
        dest.parent.mkdir(parents=True, exist_ok=True)
        if box is not None:
            if dest.exists():
                dest.rmdir()
            try:
                os.rename(box.root, dest)
            except OSError:  # e.g. another filesystem: start one at its command instead
                with s.cv:
                    s.busy.discard(box)
                    s.cv.notify_all()
                box.close()
                discard(box.root)
            else:
                try:
                    box._moved_to(dest)
                except ConfigError:
                    box.close()
                    raise
                return box
        dest.mkdir(mode=0o755, exist_ok=True)
        if not on_the_spot:
            with s.cv:
                s.stats.taken -= 1
            return None
        box = s.new_box(dest)
        with s.cv:
            s.stats.started_on_the_spot += 1
            s.busy.add(box)
        return box

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the pool is idle: as many sandboxes waiting as ``size`` allows beside
        those handed out and not yet used, and every used one torn down (tests, benchmarks;
        a caller that can wait up front). False on the timeout, or when a start failed."""
        s = self._state
        with s.cv:
            s.cv.wait_for(lambda: s.closed or s.failed or s.settled(), timeout=timeout)
            return not s.closed and not s.failed and s.settled()

    def close(self) -> None:
        """Stop the background thread and every waiting sandbox, and delete their directories."""
        self._finalizer()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
