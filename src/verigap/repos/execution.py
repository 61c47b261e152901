"""One place where repo tasks run commands: through ``verigap.sandbox`` (bubblewrap).

Every pytest run that grades or validates goes through :func:`run`, which puts a scratch
directory as the only writable path and mounts the prepared environment, the harness and the
tree under test read-only at fixed neutral paths (:data:`ENV_MOUNT`, :data:`HARNESS_MOUNT`,
:data:`TREE_MOUNT`): the code under test sees no host path (cache or temporary directories,
user names) in its argv, ``sys.path``, environment or ``/proc``. ``backend="unsafe"`` (tests
only) runs without isolation and sees host paths as they are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

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


ENV_MOUNT = "/verigap/env"
"""Where the prepared environment (a virtualenv) sits inside every graded or agent sandbox."""
HARNESS_MOUNT = "/verigap/harness"
"""Where the harness scripts sit inside graded sandboxes."""
TREE_MOUNT = "/verigap/tree"
"""Where the tree under test sits inside graded sandboxes."""


class Mounts:
    """Read-only mounts of one sandboxed run and how their host paths read inside it.

    ``Mounts({env_prefix: ENV_MOUNT, tree: TREE_MOUNT}, backend)``: under bubblewrap each host
    path is mounted at its fixed path and :meth:`inside` rewrites host paths to it; the unsafe
    backend cannot remap, so there :meth:`inside` returns host paths unchanged.
    """

    def __init__(self, mounts: Mapping[Path, str], backend: str | None = None) -> None:
        self.backend = backend or default_backend()
        self.mounts = {Path(k).absolute(): v for k, v in mounts.items()}
        self.neutral = self.backend == "bwrap"

    def inside(self, host: Path | str) -> str:
        """How ``host`` (a path under one of the mounts, or any other path) reads inside."""
        h = Path(host).absolute()
        if self.neutral:
            for src, dest in self.mounts.items():
                if h == src or h.is_relative_to(src):
                    return str(PurePosixPath(dest) / h.relative_to(src).as_posix()) \
                        if h != src else dest
        return str(host)


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
    mounts: Mounts | None = None,
) -> ExecResult:
    """Run ``cmd`` with ``scratch`` as the only writable directory and ``ro_binds`` and
    ``mounts`` read-only.

    The command starts in ``scratch`` (seen as ``/workspace`` under bubblewrap), so paths into
    it are given relative; ``ro_binds`` keep their host paths, ``mounts`` sit at their fixed
    paths (write ``cmd`` and ``env`` with ``mounts.inside``).
    """
    scratch.mkdir(parents=True, exist_ok=True)
    scratch.chmod(0o755)  # the sandbox user (not root) must be able to enter it
    limits = Limits(wall_s=timeout, memory_mb=memory_mb, output_bytes=200_000)
    backend = backend or (mounts.backend if mounts is not None else default_backend())
    if mounts is not None and mounts.backend != backend:
        raise ValueError(f"mounts were made for backend {mounts.backend!r}, not {backend!r}")
    box = make_sandbox(scratch, backend=backend, limits=limits,
                       ro_binds=[Path(p) for p in ro_binds], network=False,
                       ro_mounts=mounts.mounts if mounts is not None and mounts.neutral else None)
    return box.exec(list(cmd), env=dict(CLEAN_ENV | dict(env or {})), timeout=timeout)
