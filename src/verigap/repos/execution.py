"""One place where repo tasks run commands: through ``verigap.sandbox`` (bubblewrap).

Every pytest run that grades or validates goes through :func:`run`, which puts a scratch
directory as the only writable path and mounts the prepared environment, the harness and the
trees under test read-only. ``backend="unsafe"`` (tests only) runs without isolation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from verigap.sandbox import ExecResult, Limits, make_sandbox

#: The only environment a graded process sees: nothing inherited from the caller or the agent.
CLEAN_ENV: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
}


def default_backend() -> str:
    """``bwrap`` unless VERIGAP_SANDBOX says otherwise (the test suite may choose ``unsafe``)."""
    return os.environ.get("VERIGAP_SANDBOX", "bwrap")


def run(
    cmd: Sequence[str],
    *,
    scratch: Path,
    ro_binds: Sequence[Path] = (),
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
    backend: str | None = None,
    memory_mb: int = 4096,
) -> ExecResult:
    """Run ``cmd`` with ``scratch`` as the only writable directory and ``ro_binds`` read-only.

    The command starts in ``scratch`` (seen as ``/workspace`` under bubblewrap), so paths into
    it are given relative; ``ro_binds`` keep their host paths.
    """
    scratch.mkdir(parents=True, exist_ok=True)
    scratch.chmod(0o755)  # the sandbox user (not root) must be able to enter it
    limits = Limits(wall_s=timeout, memory_mb=memory_mb, output_bytes=200_000)
    box = make_sandbox(scratch, backend=backend or default_backend(), limits=limits,
                       ro_binds=[Path(p) for p in ro_binds], network=False)
    return box.exec(list(cmd), env=dict(CLEAN_ENV | dict(env or {})), timeout=timeout)
