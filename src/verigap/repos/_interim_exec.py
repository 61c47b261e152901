"""Stand-in for ``verigap.sandbox`` while P3 is being built: same names, NO isolation.

It exists only so repo tasks can be developed before the sandbox lands; it is deleted when the
p3-sandbox branch is merged. It refuses the ``bwrap`` backend rather than pretend to isolate.
"""

from __future__ import annotations

import subprocess
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Limits:
    wall_s: float = 60.0
    cpu_s: float | None = None
    memory_mb: int = 2048
    processes: int = 256
    file_size_mb: int = 256
    output_bytes: int = 64_000


@dataclass(frozen=True)
class ExecResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    wall_s: float
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class _Local:
    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = root
        self.limits = limits

    def exec(self, cmd, *, timeout=None, env=None, cwd="."):
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, cwd=self.root / cwd, env=env, capture_output=True, text=True,
                               timeout=timeout or self.limits.wall_s, shell=isinstance(cmd, str))
        except subprocess.TimeoutExpired as e:
            return ExecResult(-9, str(e.stdout or ""), str(e.stderr or ""), True, False,
                              time.perf_counter() - t0, "timeout")
        n = self.limits.output_bytes
        return ExecResult(p.returncode, p.stdout[-n:], p.stderr[-n:], False,
                          len(p.stdout) > n or len(p.stderr) > n, time.perf_counter() - t0, "")


def make_sandbox(workspace: Path, *, backend: str = "bwrap", limits: Limits = Limits(),
                 ro_binds: Sequence[Path] = (), network: bool = False) -> _Local:
    warnings.warn("verigap.sandbox is not merged yet: running WITHOUT isolation", stacklevel=2)
    return _Local(workspace, limits)
