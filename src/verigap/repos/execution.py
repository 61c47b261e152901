"""One place where repo tasks run commands: through ``verigap.sandbox`` (bubblewrap).

Every pytest run that grades or validates goes through :func:`run`, which puts a scratch
directory as the only writable path and mounts the prepared environment, the harness and the
tree under test read-only at fixed neutral paths (:data:`ENV_MOUNT`, :data:`HARNESS_MOUNT`,
:data:`TREE_MOUNT`): the code under test sees no host path (cache or temporary directories,
user names) in its argv, ``sys.path``, environment or ``/proc``. ``backend="unsafe"`` (tests
only) runs without isolation and sees host paths as they are.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from verigap.sandbox import ExecResult, Limits, make_sandbox
from verigap.sandbox._python import install_binds, venv_base

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


PYTHON_MOUNT = "/verigap/python"
"""Where the environment's base interpreter install sits (what ``sys.base_prefix`` shows)."""


def _cache() -> Path:
    return Path(os.environ.get("VERIGAP_CACHE", Path.home() / ".cache" / "verigap")) / "repos"


def _script(f: Path, env: Path) -> bytes | None:
    """A console script of ``env`` (a ``#!`` text file) with the environment's host path
    replaced by :data:`ENV_MOUNT`; None for anything else (binaries, activate scripts)."""
    data = f.read_bytes()
    if not data.startswith(b"#!") or b"\0" in data:
        return None
    for host in sorted({str(env), str(env.resolve())}, key=len, reverse=True):
        data = data.replace(host.encode(), ENV_MOUNT.encode())
    return data


def neutral_env(env: Path) -> tuple[Path, dict[Path, str]] | None:
    """(shadow, base binds) for a virtualenv ``env``: ``shadow`` is what the sandbox shows at
    :data:`ENV_MOUNT` (a ``pyvenv.cfg`` whose ``home`` is :data:`PYTHON_MOUNT`, ``bin`` links
    into it and the console scripts with ``#!/verigap/env/bin/python``, an empty ``lib`` that
    the environment's own ``lib`` is mounted over), ``base binds`` the mounts that show its
    base install at :data:`PYTHON_MOUNT` (``verigap.sandbox._python.install_binds``). Inside,
    ``sys.prefix`` is ``/verigap/env`` and ``sys.base_prefix`` ``/verigap/python``, and
    ``sys.path`` names only those. None when ``env`` is not a virtualenv (then it is its own
    base, and mounted at ENV_MOUNT it shows no host path) or its base cannot be shown
    elsewhere. Built once per environment, in the cache."""
    env = Path(env).absolute()
    base = venv_base(env)
    if base is None or not (env / "lib").is_dir():
        return None
    base_binds = install_binds(base, PYTHON_MOUNT)
    if base_binds is None:
        return None
    lines = []
    for line in (env / "pyvenv.cfg").read_text().splitlines():
        k = line.partition("=")[0].strip()
        if k == "home":
            line = f"home = {PYTHON_MOUNT}/bin"
        elif k in ("executable", "command", "base-executable", "base-prefix", "prompt"):
            continue  # host paths (and a prompt naming the host directory)
        lines.append(line)
    links, scripts = {}, {}
    for f in sorted((env / "bin").iterdir()) if (env / "bin").is_dir() else []:
        if not f.is_symlink() and f.is_file():
            st = f.stat()
            if st.st_size < 1 << 20:
                scripts[f.name] = (st.st_size, st.st_mtime_ns)
        elif f.is_symlink():
            target = os.readlink(f)
            t = Path(target)
            if t.is_absolute():  # into the base install: the same file at PYTHON_MOUNT
                rt = t.resolve()
                if not rt.is_relative_to(base):
                    continue
                target = f"{PYTHON_MOUNT}/{rt.relative_to(base).as_posix()}"
            links[f.name] = target
    if "python" not in links:  # a venv of copies, not links: shown as it is
        return None
    spec = "\n".join(lines) + "\n" + repr(sorted(links.items())) + str(base) \
        + repr(sorted(scripts.items()))
    key = hashlib.sha256(f"{env}\0{spec}".encode()).hexdigest()[:24]
    dest = _cache() / "envs" / key
    if not dest.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="build-", dir=dest.parent))
        tmp.chmod(0o755)
        (tmp / "pyvenv.cfg").write_text("\n".join(lines) + "\n")
        (tmp / "bin").mkdir(mode=0o755)
        for name, target in links.items():
            (tmp / "bin" / name).symlink_to(target)
        for name in scripts:
            text = _script(env / "bin" / name, env)
            if text is not None:
                (tmp / "bin" / name).write_bytes(text)
                (tmp / "bin" / name).chmod(0o755)
        (tmp / "lib").mkdir(mode=0o755)
        if (env / "lib64").is_symlink():
            (tmp / "lib64").symlink_to("lib")
        try:
            tmp.rename(dest)
        except OSError:  # another run made it first
            shutil.rmtree(tmp, ignore_errors=True)
    return dest, base_binds


class Mounts:
    """Read-only mounts of one sandboxed run and how their host paths read inside it.

    ``Mounts({env_prefix: ENV_MOUNT, tree: TREE_MOUNT}, backend)``: under bubblewrap each host
    path is mounted at its fixed path and :meth:`inside` rewrites host paths to it; the unsafe
    backend cannot remap, so there :meth:`inside` returns host paths unchanged. A virtualenv
    mounted at :data:`ENV_MOUNT` is shown through :func:`neutral_env`, with its base install at
    :data:`PYTHON_MOUNT` (:attr:`binds` is what the sandbox mounts).
    """

    def __init__(self, mounts: Mapping[Path, str], backend: str | None = None) -> None:
        self.backend = backend or default_backend()
        self.mounts = {Path(k).absolute(): v for k, v in mounts.items()}
        self.neutral = self.backend == "bwrap"
        self.binds: dict[Path, str] = {}
        for src, dest in self.mounts.items():
            shadow = neutral_env(src) if self.neutral and dest == ENV_MOUNT else None
            if shadow is None:
                self.binds[src] = dest
                continue
            self.binds[shadow[0]] = dest
            self.binds[src / "lib"] = f"{dest}/lib"
            self.binds.update(shadow[1])

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
                       ro_mounts=mounts.binds if mounts is not None and mounts.neutral else None)
    return box.exec(list(cmd), env=dict(CLEAN_ENV | dict(env or {})), timeout=timeout)
