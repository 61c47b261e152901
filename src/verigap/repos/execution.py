"""One place where repo tasks run commands: through ``verigap.sandbox`` (bubblewrap).

Every pytest run that grades or validates goes through :func:`run`, which puts a scratch
directory as the only writable path and mounts the prepared environment, the harness and the
tree under test read-only at fixed neutral paths (:data:`ENV_MOUNT`, :data:`HARNESS_MOUNT`,
:data:`TREE_MOUNT`): the code under test sees no host path (cache or temporary directories,
user names) in its argv, ``sys.path``, environment or ``/proc``. ``backend="unsafe"`` (tests
only) runs without isolation and sees host paths as they are.

Sandboxes started ahead: a caller that gets its scratch directory from
:func:`scratch` (``pytest_run`` does, for every graded pytest run and comparison run) gets,
where its mount set recurs, the workspace of a bubblewrap sandbox already started with that
run's mounts and limits (``verigap.sandbox.SandboxPool``: a fresh sandbox per command, one
command each, torn down after it), and :func:`run` runs the command there. See
:class:`_Pools` for which mount sets get one and how they are kept apart.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import multiprocessing.util
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath

from verigap.errors import ConfigError, SandboxUnavailable
from verigap.sandbox import ExecResult, Limits, SandboxPool, make_sandbox
from verigap.sandbox._bwrap import BwrapSandbox
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
    spec = (
        "\n".join(lines)
        + "\n"
        + repr(sorted(links.items()))
        + str(base)
        + repr(sorted(scripts.items()))
    )
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
                    return (
                        str(PurePosixPath(dest) / h.relative_to(src).as_posix())
                        if h != src
                        else dest
                    )
        return str(host)


def default_backend() -> str:
    """``bwrap`` unless VERIGAP_SANDBOX says otherwise (the test suite may choose ``unsafe``)."""
    return os.environ.get("VERIGAP_SANDBOX", "bwrap")


POOL_AFTER = 3
"""A mount set (with limits) gets sandboxes started ahead from its third run in this process
on: a set used once or twice (a tree graded once: its pytest run and its comparison) never
costs a sandbox started for nothing."""
MAX_POOLS = 6
"""Mount sets with sandboxes started ahead at a time (least recently used closed first)."""
POOL_SIZE = 1
"""Sandboxes kept started per mount set (beside those handed out and not yet used)."""


def _key(binds: Mapping[Path, str], ro_binds: Sequence[Path], limits: Limits) -> tuple | None:
    """What a started sandbox must match to run a command: every mount's source by path and
    by (device, inode) now, the sandbox paths and the limits. None where a source is gone."""
    try:
        ids = []
        for src, dest in sorted(((Path(k), v) for k, v in binds.items()), key=str):
            st = os.stat(src)
            ids.append((str(src), dest, st.st_dev, st.st_ino))
        bound = []
        for p in sorted(Path(x).absolute() for x in ro_binds):
            st = os.stat(p)
            bound.append((str(p), st.st_dev, st.st_ino))
    except OSError:
        return None
    return (tuple(ids), tuple(bound), limits)


class _Pools:
    """``SandboxPool`` per mount set, for graded runs (``verigap.sandbox._prestart``).

    Keyed by every mount's host path, sandbox path and (device, inode) plus the limits
    (:func:`_key`): a run is only ever given a sandbox started with exactly its mounts and
    limits, and a source replaced since (a new directory at the same path) is another key;
    ``SandboxPool.take_ready`` checks the started sandbox's mounts once more through its
    ``/proc/PID/root`` before it hands it out. A key gets a pool at its :data:`POOL_AFTER`-th
    run, at most :data:`MAX_POOLS` pools live (least recently used closed first, those whose
    sources are gone before any other), and every pool is closed at interpreter exit (no
    bubblewrap process outlives it). A forked child starts with no pools: the parent's
    sandboxes stay the parent's.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pools: OrderedDict[tuple, SandboxPool] = OrderedDict()
        self.seen: OrderedDict[tuple, int] = OrderedDict()
        self.root: Path | None = None
        self.disabled = os.environ.get("VERIGAP_GRADING_POOL", "1") == "0"

    def take(
        self,
        key: tuple,
        binds: Mapping[Path, str],
        ro_binds: Sequence[Path],
        limits: Limits,
        dest: Path,
    ) -> BwrapSandbox | None:
        """A sandbox started ahead for ``key`` over ``dest`` (an empty directory), or None."""
        if self.disabled:
            return None
        with self.lock:
            pool = self.pools.get(key)
            if pool is None:
                n = self.seen.pop(key, 0) + 1
                self.seen[key] = n
                while len(self.seen) > 1024:
                    self.seen.popitem(last=False)
                if n < POOL_AFTER:
                    return None
                try:
                    self._open(key, binds, ro_binds, limits)
                except SandboxUnavailable:  # bubblewrap cannot start here: the run says why
                    self.disabled = True
                except (ConfigError, OSError):  # e.g. a source gone meanwhile: the run says
                    pass
                return None  # its first sandbox starts now, in the background
            self.pools.move_to_end(key)
        try:
            return pool.take_ready(dest)
        except ConfigError:  # closed meanwhile (interpreter exit): start one as usual
            return None

    def _open(
        self, key: tuple, binds: Mapping[Path, str], ro_binds: Sequence[Path], limits: Limits
    ) -> SandboxPool:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="vg-grading-pool-"))
            # also where a worker process ends without atexit (multiprocessing's os._exit);
            # never in another process than this one
            multiprocessing.util.Finalize(None, self.close, exitpriority=10)
        while len(self.pools) >= MAX_POOLS:
            gone = [
                k
                for k in self.pools
                if _key({Path(s): d for s, d, _, _ in k[0]}, [Path(p) for p, _, _ in k[1]], k[2])
                != k
            ]
            self.pools.pop(gone[0] if gone else next(iter(self.pools))).close()
        pool = SandboxPool(
            self.root / f"p{len(self.seen)}-{os.urandom(4).hex()}",
            size=POOL_SIZE,
            limits=limits,
            ro_binds=ro_binds,
            ro_mounts=binds,
            network=False,
        )
        self.pools[key] = pool
        return pool

    def close(self) -> None:
        with self.lock:
            pools, self.pools = list(self.pools.values()), OrderedDict()
            self.seen.clear()
            root, self.root = self.root, None
        for pool in pools:
            pool.close()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


_POOLS = _Pools()
_FORKED_AWAY: list[_Pools] = []  # a forked child keeps the parent's pools unused and alive
_RESERVED: dict[Path, tuple[tuple, BwrapSandbox]] = {}  # scratch dir -> its started sandbox
_RESERVED_LOCK = threading.Lock()


def _after_fork() -> None:
    global _POOLS, _RESERVED_LOCK
    _FORKED_AWAY.append(_POOLS)
    _POOLS = _Pools()
    _RESERVED_LOCK = threading.Lock()
    _RESERVED.clear()


os.register_at_fork(after_in_child=_after_fork)
atexit.register(lambda: _POOLS.close())


def close_pools() -> None:
    """Stop every sandbox started ahead for graded runs (also done at interpreter exit)."""
    _POOLS.close()


def _limits(timeout: float, memory_mb: int) -> Limits:
    return Limits(wall_s=timeout, memory_mb=memory_mb, output_bytes=200_000)


def _pool_key(
    mounts: Mounts | None, ro_binds: Sequence[Path], backend: str, timeout: float, memory_mb: int
) -> tuple | None:
    if backend != "bwrap" or (mounts is not None and not mounts.neutral):
        return None
    return _key(mounts.binds if mounts is not None else {}, ro_binds, _limits(timeout, memory_mb))


@contextlib.contextmanager
def scratch(
    mounts: Mounts | None = None,
    *,
    ro_binds: Sequence[Path] = (),
    timeout: float = 120.0,
    memory_mb: int = 4096,
    backend: str | None = None,
    prefix: str = "vg-",
) -> Iterator[Path]:
    """A new, empty scratch directory for one :func:`run` with these arguments, deleted
    afterwards. Where the mount set recurs (:class:`_Pools`) it is the workspace of a sandbox
    already started with those mounts and limits, and :func:`run` given the same arguments
    runs its command there; otherwise (and for any other arguments) :func:`run` starts one."""
    backend = backend or (mounts.backend if mounts is not None else default_backend())
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        path = Path(tmp)
        key = _pool_key(mounts, ro_binds, backend, timeout, memory_mb)
        box = None
        if key is not None:
            box = _POOLS.take(
                key, mounts.binds if mounts is not None else {}, ro_binds, key[2], path
            )
        if box is not None:
            with _RESERVED_LOCK:
                _RESERVED[path] = (key, box)
        try:
            yield path
        finally:
            with _RESERVED_LOCK:
                left = _RESERVED.pop(path, None)
            if left is not None:  # never used: stop it
                left[1].close()


def _reserved(scratch: Path, key: tuple | None) -> BwrapSandbox | None:
    """The sandbox started ahead over ``scratch`` for exactly ``key``, taken (at most once)."""
    with _RESERVED_LOCK:
        got = _RESERVED.pop(Path(scratch), None)
    if got is None:
        return None
    if got[0] != key:  # other mounts or limits than the ones it was started with
        got[1].close()
        return None
    return got[1]


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
    clean_env: bool = True,
) -> ExecResult:
    """Run ``cmd`` with ``scratch`` as the only writable directory and ``ro_binds`` and
    ``mounts`` read-only.

    The command starts in ``scratch`` (seen as ``/workspace`` under bubblewrap), so paths into
    it are given relative; ``ro_binds`` keep their host paths, ``mounts`` sit at their fixed
    paths (write ``cmd`` and ``env`` with ``mounts.inside``). ``clean_env=False``: ``env`` is
    added to the sandbox's own base environment only (what an agent's commands get), without
    :data:`CLEAN_ENV`'s fixed hash seed and plugin switch. A ``scratch`` made by
    :func:`scratch` with the same arguments runs in the sandbox started ahead over it.
    """
    scratch.mkdir(parents=True, exist_ok=True)
    scratch.chmod(0o755)  # the sandbox user (not root) must be able to enter it
    limits = _limits(timeout, memory_mb)
    backend = backend or (mounts.backend if mounts is not None else default_backend())
    if mounts is not None and mounts.backend != backend:
        raise ValueError(f"mounts were made for backend {mounts.backend!r}, not {backend!r}")
    box = None
    if Path(scratch) in _RESERVED:
        box = _reserved(scratch, _pool_key(mounts, ro_binds, backend, timeout, memory_mb))
    if box is None:
        box = make_sandbox(
            scratch,
            backend=backend,
            limits=limits,
            ro_binds=[Path(p) for p in ro_binds],
            network=False,
            ro_mounts=mounts.binds if mounts is not None and mounts.neutral else None,
        )
    base = CLEAN_ENV if clean_env else {}
    return box.exec(list(cmd), env=dict(base | dict(env or {})), timeout=timeout)
