"""Run one process with a wall-clock deadline and bounded output capture.

Output is read incrementally from both pipes, so a command that prints 100 MB costs
``2 * output_bytes`` of memory, not 100 MB. The head and the tail of each stream are kept
(the tail is where test runners print their summary) with a visible marker in between.
On the deadline the backend's ``kill_tree`` runs (the process group by default; the
sandbox's init under bubblewrap) and the launcher is waited for, so nothing the command
started is still running when ``run_capped`` returns.
"""

from __future__ import annotations

import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# After the main process has exited, stragglers that still hold the pipes get this long.
_DRAIN_GRACE_S = 0.5
# After kill_tree, how long the launcher may take to exit before its group is killed too.
_KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class ExecResult:
    """What one command did. ``reason`` says why it was killed or limited, if it was."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    wall_s: float
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """The command ran to completion and exited 0 (truncated output is still ok)."""
        return self.returncode == 0 and not self.timed_out


@dataclass
class _Capture:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest."""

    limit: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            keep = self.limit - self.limit // 2
            if len(self.tail) > 2 * keep:  # trim in batches, not on every read
                del self.tail[: len(self.tail) - keep]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self, stream: str) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        keep = self.limit - self.limit // 2
        tail = bytes(self.tail[-keep:])
        omitted = self.total - len(self.head) - len(tail)
        marker = f"\n[... verigap: {omitted} bytes of {stream} omitted ...]\n"
        return (
            self.head.decode("utf-8", errors="replace")
            + marker
            + tail.decode("utf-8", errors="replace")
        )


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(pid: int) -> bool:
    """Whether ``pid`` has exited, without reaping it (so its pid/pgid cannot be reused yet)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _pidfd_open(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def run_capped(
    argv: list[str],
    *,
    timeout: float,
    output_bytes: int,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    pass_fds: tuple[int, ...] = (),
    after_start: Callable[[], None] | None = None,
    kill_tree: Callable[[int], None] | None = None,
) -> tuple[int | None, _Capture, _Capture, bool, float]:
    """Run ``argv`` in a new session; return (returncode, stdout, stderr, timed_out, wall_s).

    On the deadline ``kill_tree(pid)`` (default: SIGKILL the process group) is called and
    the process is waited for, so that nothing of the command runs once this returns.
    ``after_start`` runs right after the launch (e.g. to close fds the child inherited).
    """
    start = time.monotonic()
    deadline = start + timeout
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
        pass_fds=pass_fds,
    )
    if after_start is not None:
        after_start()
    kill = kill_tree or _kill_group
    captures = {proc.stdout: _Capture(output_bytes), proc.stderr: _Capture(output_bytes)}
    # A pidfd turns readable when the process exits, so the loop wakes at once instead of
    # noticing on its next poll (None where the kernel or Python has no pidfd_open).
    pidfd = _pidfd_open(proc.pid)
    timed_out = False
    main_done_at: float | None = None
    open_streams = len(captures)
    try:
        with selectors.DefaultSelector() as sel:
            for stream in captures:
                sel.register(stream, selectors.EVENT_READ)
            if pidfd is not None:
                sel.register(pidfd, selectors.EVENT_READ)
            while open_streams:
                now = time.monotonic()
                if main_done_at is None and _exited(proc.pid):
                    # Background children may hold the pipes open: kill them, drain briefly.
                    main_done_at = now
                    _kill_group(proc.pid)
                if main_done_at is not None and now - main_done_at > _DRAIN_GRACE_S:
                    break
                if now >= deadline:
                    timed_out = True
                    break
                for key, _ in sel.select(timeout=min(0.05, deadline - now)):
                    if key.fileobj == pidfd:
                        sel.unregister(pidfd)  # exited: seen by _exited on the next turn
                        continue
                    data = os.read(key.fd, 65536)
                    if data:
                        captures[key.fileobj].add(data)
                    else:
                        sel.unregister(key.fileobj)
                        open_streams -= 1
        returncode: int | None = None
        if not timed_out:  # the pipes are closed; wait for the main process without reaping it
            while not _exited(proc.pid):
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                if pidfd is not None:
                    select.select([pidfd], [], [], left)
                else:
                    time.sleep(min(0.005, left))
    finally:
        if pidfd is not None:
            os.close(pidfd)
    if timed_out:
        kill(proc.pid)
        try:
            proc.wait(timeout=_KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()
    else:
        # The leader is exited but not reaped, so its group id cannot have been reused:
        # kill whatever it left behind, then reap it.
        _kill_group(proc.pid)
        returncode = proc.wait()
    for stream in captures:
        stream.close()
    wall = time.monotonic() - start
    return returncode, captures[proc.stdout], captures[proc.stderr], timed_out, wall
