"""The narrow sandbox interface every backend implements: exec, read_file, write_file."""

from __future__ import annotations

import os
import sys
from abc import ABC, abstractmethod
from pathlib import Path

from verigap.sandbox._exec import ExecResult
from verigap.sandbox._limits import Limits, classify
from verigap.sandbox._workspace import resolve_inside

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def base_python() -> str:
    """The interpreter under ``sys.base_prefix`` (a venv's python is a link into it).

    It runs the limits wrapper, and ``python``/``python3`` in a command resolve to it, so
    commands get the same Python as verigap whatever the system calls its interpreter.
    """
    real = os.path.realpath(sys.executable)
    if Path(real).is_relative_to(Path(sys.base_prefix).resolve()):
        return real
    major, minor = sys.version_info[:2]
    return str(Path(sys.base_prefix) / "bin" / f"python{major}.{minor}")


def _refuse_special(path: Path, rel: str) -> None:
    """A FIFO or device planted in the workspace would block or misbehave on open."""
    if path.exists() and not (path.is_file() or path.is_dir()):
        raise ValueError(f"{rel!r} is not a regular file (a FIFO, socket or device)")


class Sandbox(ABC):
    """A workspace plus a way to run commands in it.

    ``root`` is the workspace on the host and the only path a command may write.
    ``workdir`` is where commands see it (``/workspace`` under bubblewrap).
    """

    root: Path
    workdir: str
    limits: Limits

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = Path(root).resolve()
        self.limits = limits

    # ---- files (host side, path-checked) -------------------------------------------------

    def path(self, rel: str) -> Path:
        """The host path of ``rel``; raises PathOutsideWorkspace if it leaves the workspace."""
        return resolve_inside(self.root, rel, aliases=(self.workdir,))

    def read_file(self, rel: str) -> str:
        """Read a workspace file as text (undecodable bytes are replaced, not fatal)."""
        target = self.path(rel)
        _refuse_special(target, rel)
        return target.read_bytes().decode("utf-8", errors="replace")

    def write_file(self, rel: str, text: str) -> None:
        """Write a workspace file, creating parent directories inside the workspace."""
        target = self.path(rel)
        _refuse_special(target, rel)
        created = [p for p in reversed(target.parents) if p.is_relative_to(self.root)]
        created = [p for p in created if not p.exists()]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        self._adopt([*created, target])

    def close(self) -> None:
        """Release what the sandbox keeps between commands (a persistent bwrap sandbox)."""
        return None

    @abstractmethod
    def _adopt(self, paths: list[Path]) -> None:
        """Make host-created paths usable by the user commands run as (see BwrapSandbox)."""

    # ---- commands ------------------------------------------------------------------------

    def base_env(self) -> dict[str, str]:
        """The environment every command starts from (``exec``'s ``env`` is added to it)."""
        return {
            "PATH": self._default_path(),
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "USER": "agent",
            "LOGNAME": "agent",
            "PYTHONUNBUFFERED": "1",
            # An edit that keeps a file's size within the same second would otherwise run
            # stale bytecode (pyc checks mtime in whole seconds + size); no pyc also keeps
            # __pycache__ out of the agent's diff.
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str = ".",
    ) -> ExecResult:
        """Run ``cmd`` (a string goes through ``/bin/sh -c``) inside the workspace.

        ``env`` is added to a minimal environment; nothing leaks from the caller's. ``cwd``
        is relative to the workspace. A limit being hit is a result (``reason``), not an
        exception; only a backend that cannot run at all raises (SandboxUnavailable).
        """
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if not argv:
            raise ValueError("exec: empty command")
        wall = self.limits.wall_s if timeout is None else float(timeout)
        if wall <= 0:
            raise ValueError(f"exec: timeout must be positive, got {timeout!r}")
        host_cwd = self.path(cwd)
        if not host_cwd.is_dir():
            raise ValueError(f"exec: cwd {cwd!r} is not a directory in the workspace")
        rel_cwd = host_cwd.relative_to(self.root).as_posix()
        full_env = self.base_env()
        full_env.update(env or {})
        returncode, out, err, timed_out, wall_s = self._run(argv, full_env, rel_cwd, wall)
        truncated = out.truncated or err.truncated
        stderr = err.text("stderr")
        reason = classify(
            returncode, stderr, self.limits, timed_out=timed_out, timeout=wall, truncated=truncated
        )
        return ExecResult(
            returncode=returncode,
            stdout=out.text("stdout"),
            stderr=stderr,
            timed_out=timed_out,
            truncated=truncated,
            wall_s=wall_s,
            reason=reason,
        )

    def _default_path(self) -> str:
        return DEFAULT_PATH

    @abstractmethod
    def _run(self, argv: list[str], env: dict[str, str], rel_cwd: str, timeout: float) -> tuple:
        """Backend-specific launch; returns what ``run_capped`` returns."""
