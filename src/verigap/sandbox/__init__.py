"""Sandboxed workspaces: copy a source tree, run commands in it under limits.

>>> ws = materialize(Path("task/src"), Path("/tmp/ep-17"))
>>> box = make_sandbox(ws, limits=Limits(wall_s=30))
>>> box.exec("python -m pytest -q").ok

``WorkspacePool`` hands out ready-made copies by rename (``for_sandbox=True``: already
owned by a sandbox uid, ``take_sandbox``), and ``discard`` deletes a tree in the background
(``_pool``): both take the copying and deleting off the waiting path. ``SandboxPool``
(``_prestart``) keeps bubblewrap sandboxes started ahead, each for exactly one command.

Backends: ``"bwrap"`` (default, isolated; see ``_bwrap``) and ``"unsafe"`` (no isolation,
tests only, warns). A missing or broken backend raises ``SandboxUnavailable``; a command
that fails or hits a limit is an ``ExecResult`` with a ``reason``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from verigap.errors import ConfigError, SandboxUnavailable
from verigap.sandbox._base import Sandbox
from verigap.sandbox._bwrap import INSTALL_HINT, WORKSPACE_MOUNT, BwrapSandbox
from verigap.sandbox._check import Check, self_check
from verigap.sandbox._exec import ExecResult
from verigap.sandbox._limits import Limits
from verigap.sandbox._local import UnsafeLocalSandbox, UnsafeSandboxWarning
from verigap.sandbox._pool import WorkspacePool, discard, wait_discarded
from verigap.sandbox._prestart import SandboxPool
from verigap.sandbox._workspace import PathOutsideWorkspace, materialize

BACKENDS = ("bwrap", "unsafe")


def make_sandbox(
    workspace: Path,
    *,
    backend: str = "bwrap",
    limits: Limits = Limits(),
    ro_binds: Sequence[Path] = (),
    network: bool = False,
    persistent: bool = False,
    ro_mounts: Mapping[Path, str] | None = None,
    uid: int | None = None,
) -> Sandbox:
    """A sandbox over an existing workspace directory (usually one ``materialize`` made).

    ``ro_binds`` are extra host paths (e.g. a prepared virtualenv) mounted read-only at
    their own path; ``ro_mounts`` ({host path: sandbox path}, bwrap only) mount read-only at
    a fixed path instead (``/verigap/env``), so no host path shows inside. Never bind a
    directory that holds hidden tests or references.
    ``persistent`` (bwrap only): keep one sandbox alive across ``exec`` calls and run each
    command in it, with the same mounts, namespaces and limits, every leftover process
    killed and ``/tmp`` emptied after each command (see ``_session``); it saves the
    bubblewrap start per command. ``box.close()`` stops it (so does garbage collection).
    """
    workspace = Path(workspace)
    if not workspace.is_dir():
        raise ConfigError(
            f"make_sandbox: workspace {workspace} is not a directory; materialize one first"
        )
    if backend == "bwrap":
        return BwrapSandbox(
            workspace,
            limits,
            ro_binds=ro_binds,
            network=network,
            persistent=persistent,
            ro_mounts=ro_mounts,
            uid=uid,
        )
    if uid is not None:
        raise ConfigError(
            "make_sandbox: uid (a workspace already owned by a sandbox uid) "
            "needs backend='bwrap'; the unsafe backend runs as the caller"
        )
    if ro_mounts:
        raise ConfigError(
            "make_sandbox: ro_mounts (mounting at another path) needs "
            "backend='bwrap'; the unsafe backend sees every host path as it is"
        )
    if backend == "unsafe":
        return UnsafeLocalSandbox(workspace, limits)
    raise ConfigError(f"make_sandbox: unknown backend {backend!r}; choose one of {BACKENDS}")


__all__ = [
    "BACKENDS",
    "INSTALL_HINT",
    "WORKSPACE_MOUNT",
    "BwrapSandbox",
    "Check",
    "ExecResult",
    "Limits",
    "PathOutsideWorkspace",
    "Sandbox",
    "SandboxPool",
    "SandboxUnavailable",
    "UnsafeLocalSandbox",
    "UnsafeSandboxWarning",
    "WorkspacePool",
    "discard",
    "make_sandbox",
    "self_check",
    "materialize",
    "wait_discarded",
]
