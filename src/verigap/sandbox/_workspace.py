"""Workspaces: fresh copies of a source tree, and paths that may not leave them.

``materialize`` uses GNU ``cp -R -T`` with ``--reflink=auto`` (one process; a copy-on-write
clone where the filesystem supports it, a full copy elsewhere) and falls back to
``shutil.copytree`` where that fails. It keeps modes, timestamps and symlinks but not
ownership, extended attributes or ACLs (``cp -a`` would: as root a chown per file that
``make_sandbox`` redoes anyway, and xattrs such as file capabilities that a workspace
should not carry). Hard links are never used: an in-place write through a hard link would
reach the source. ``benchmarks/sandbox_copy.py`` measures the alternatives.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from verigap.errors import ConfigError, VerigapError

# -R -P: recurse, copy symlinks as links; mode and timestamps as in the source; files
# hard-linked to each other in the source stay linked to each other (never to the source).
_CP_FLAGS = ("-R", "-P", "--preserve=mode,timestamps,links", "--reflink=auto")


class PathOutsideWorkspace(VerigapError, ValueError):
    """A path given to a workspace operation resolves outside the workspace."""


def materialize(source: Path, dest: Path) -> Path:
    """Copy ``source`` into a new directory ``dest``; edits in ``dest`` never reach ``source``.

    Symlinks are copied as links (not followed), so a link cannot pull an outside file in.
    ``dest`` must not exist yet, or be an empty directory.
    """
    source, dest = Path(source), Path(dest)
    if not source.is_dir():
        raise ConfigError(f"materialize: source {source} is not a directory; pass a source tree")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ConfigError(
            f"materialize: destination {dest} already exists and is not an empty directory; "
            "pass a fresh path"
        )
    src_abs, dest_abs = source.resolve(), dest.resolve()
    if dest_abs == src_abs or dest_abs.is_relative_to(src_abs):
        raise ConfigError(f"materialize: destination {dest} lies inside the source {source}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # an empty ``dest`` is filled in place (-T), not replaced: it may be bind mounted in a
    # sandbox started ahead of its command (``SandboxPool``)
    existed = dest.exists()
    cp = shutil.which("cp")
    if cp is not None:
        done = subprocess.run(
            [cp, *_CP_FLAGS, "-T", "--", str(source), str(dest)],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            return dest
        _empty(dest, keep=existed)  # e.g. a non-GNU cp without --reflink or -T
    shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=existed)
    return dest


def _empty(path: Path, *, keep: bool) -> None:
    """Remove what a failed copy left in ``path`` (and ``path`` itself unless ``keep``)."""
    if not keep:
        shutil.rmtree(path, ignore_errors=True)
        return
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            os.unlink(entry.path)


def resolve_inside(root: Path, rel: str, *, aliases: tuple[str, ...] = ()) -> Path:
    """Resolve ``rel`` against the workspace ``root``; refuse anything that leaves it.

    Absolute paths are accepted only under ``root`` or one of ``aliases`` (the path at which
    commands see the workspace, e.g. ``/workspace``). Symlinks are resolved before the
    check, so a link pointing outside is refused too.
    """
    if not isinstance(rel, str) or rel == "" or "\x00" in rel:
        raise PathOutsideWorkspace(f"invalid path {rel!r}: give a path relative to the workspace")
    root = root.resolve()
    pure = PurePosixPath(rel)
    if pure.is_absolute():
        for base in (str(root), *aliases):
            base_p = PurePosixPath(base)
            if pure == base_p or pure.is_relative_to(base_p):
                pure = pure.relative_to(base_p)
                break
        else:
            raise PathOutsideWorkspace(
                f"path {rel!r} is outside the workspace; use a path relative to the workspace"
            )
    candidate = Path(os.path.realpath(root / pure))
    if candidate != root and not candidate.is_relative_to(root):
        raise PathOutsideWorkspace(
            f"path {rel!r} leaves the workspace; use a path relative to the workspace"
        )
    return candidate
