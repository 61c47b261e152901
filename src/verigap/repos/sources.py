"""Where a project comes from: a local directory, a git repository, or a PyPI sdist.

A source is named by one string (what the user types): ``name==version`` fetches that source
distribution with pip; a path to a directory is copied; ``git+URL`` (or a path holding ``.git``)
is cloned at its current commit. What comes out is a plain tree with no VCS data, no bytecode
and no caches, plus a content hash so a prepared environment is reused only for the same tree.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verigap.errors import ConfigError

_PYPI = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")
#: Never part of a project tree we build tasks from.
JUNK_DIRS = {
    ".git",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    "build",
    "dist",
    ".eggs",
    ".hypothesis",
    ".ruff_cache",
}
JUNK_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd")


@dataclass(frozen=True)
class Source:
    """A parsed source string."""

    spec: str
    kind: str  # "pypi" | "dir" | "git"
    location: str

    @property
    def name(self) -> str:
        if self.kind == "pypi":
            return self.location.split("==")[0]
        return Path(self.location.rstrip("/")).name.removesuffix(".git")


def parse_source(spec: str) -> Source:
    """Interpret what the user typed; the error says which forms are accepted."""
    s = spec.strip()
    if s.startswith("git+"):
        return Source(s, "git", s[4:])
    p = Path(s).expanduser()
    if p.is_dir():
        kind = "git" if (p / ".git").exists() else "dir"
        return Source(s, kind, str(p.resolve()))
    if _PYPI.match(s):
        return Source(s, "pypi", s)
    raise ConfigError(
        f"source {spec!r}: not an existing directory and not a pinned PyPI requirement; "
        "use a path, 'git+URL', or 'name==version' (e.g. 'inflection==0.5.1')"
    )


def project_name(spec: str) -> str:
    """The project's name as ``spec`` gives it. A preparation found in the cache keeps the spec
    it was first made with, whose directory may have moved or gone since: then the name is read
    from the text alone rather than refused."""
    try:
        return parse_source(spec).name
    except ConfigError:
        s = spec.strip().removeprefix("git+")
        return Path(s.rstrip("/")).name.removesuffix(".git")


def _ignore(_dir: str, names: list[str]) -> list[str]:
    return [n for n in names if n in JUNK_DIRS or n.endswith(JUNK_SUFFIXES)]


def fetch(source: Source, dest: Path) -> Path:
    """Materialize the source as a clean tree at ``dest`` (which must not exist)."""
    if source.kind == "dir":
        shutil.copytree(source.location, dest, ignore=_ignore)
    elif source.kind == "git":
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                ["git", "clone", "--depth", "1", "-q", source.location, tmp + "/r"],
                check=True,
                capture_output=True,
            )
            shutil.copytree(tmp + "/r", dest, ignore=_ignore)
    else:
        _fetch_sdist(source.location, dest)
    clean_tree(dest)
    return dest


def _fetch_sdist(requirement: str, dest: Path) -> None:
    """Download the sdist with pip. Pip checks it by building its metadata, in an isolated
    build environment holding the backend the sdist declares (setuptools_scm, flit_core,
    hatchling, ...), which pip installs from wheels; only the project itself must be an sdist.
    The archive is kept under the cache (a pinned release's files never change on PyPI), so
    preparing again, making tasks and grading do not download and build it again."""
    from verigap.repos.pytest_run import cache_root

    kept = cache_root() / "sdists" / requirement
    archives = (
        sorted(a for a in kept.iterdir() if not a.name.endswith(".part")) if kept.is_dir() else []
    )
    if archives:
        _extract(archives[0], dest)
        return
    name = requirement.split("==")[0]
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-binary",
                name,
                requirement,
                "-d",
                tmp,
            ],
            capture_output=True,
            text=True,
        )
        files = [f for f in Path(tmp).iterdir() if f.name.endswith((".tar.gz", ".zip", ".tgz"))]
        if proc.returncode != 0 or not files:
            said = "\n".join(x.strip() for x in (proc.stdout, proc.stderr) if x.strip())
            why = (
                "pip's build of its metadata failed (the build backend said the above)"
                if "metadata" in said or "Traceback" in said or "backend" in said
                else "check the name and version on PyPI (it must have an sdist)"
            )
            raise ConfigError(
                f"could not download the sdist of {requirement!r} with pip "
                f"(exit {proc.returncode}); pip said:\n{said}\n{why}, or pass a "
                "local directory instead"
            )
        _extract(files[0], dest)
        kept.mkdir(parents=True, exist_ok=True)
        part = kept / (files[0].name + ".part")
        shutil.copyfile(files[0], part)
        part.replace(kept / files[0].name)  # whole or absent, never half-written


def _extract(archive: Path, dest: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "x"
        if archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                z.extractall(out)
        else:
            with tarfile.open(archive) as t:
                t.extractall(out, filter="data")
        (top,) = list(out.iterdir())
        shutil.copytree(top, dest, ignore=_ignore)


def clean_tree(root: Path) -> None:
    """Remove bytecode, caches and VCS data in place."""
    for p in sorted(root.rglob("*"), reverse=True):
        if p.is_dir() and p.name in JUNK_DIRS:
            shutil.rmtree(p, ignore_errors=True)
        elif p.is_file() and p.name.endswith(JUNK_SUFFIXES):
            p.unlink()


def tree_files(root: Path) -> list[str]:
    """Relative paths of every file in the tree, sorted, junk excluded."""
    out = []
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if any(part in JUNK_DIRS for part in rel.parts) or not p.is_file():
            continue
        if p.name.endswith(JUNK_SUFFIXES):
            continue
        out.append(rel.as_posix())
    return sorted(out)


def tree_hash(root: Path, replace: Mapping[str, bytes] | None = None) -> str:
    """sha256 over every file's path and bytes: the identity of a tree (``replace``: relative
    paths whose bytes to take from there instead, to hash a tree derived from this one)."""
    h = hashlib.sha256()
    replace = replace or {}
    for rel in tree_files(root):
        h.update(rel.encode() + b"\0")
        data = replace[rel] if rel in replace else (root / rel).read_bytes()
        h.update(hashlib.sha256(data).digest())
    return h.hexdigest()
