"""The bubblewrap backend: the default, and the only one that isolates.

What a command sees (everything else on the host does not exist for it):

- ``/usr`` and the ``/bin``, ``/sbin``, ``/lib*`` links or directories, read-only;
- a short allowlist of ``/etc`` entries (dynamic loader, certificates, alternatives,
  timezone) read-only, and a generated ``/etc/passwd`` / ``/etc/group``;
- the running Python's ``sys.base_prefix`` read-only at :data:`PYTHON_DIR` (``python`` on
  PATH is that interpreter; see ``_python``), plus any ``ro_binds``, each at its own path,
  and any ``ro_mounts``, each at the fixed path it names (so the host's layout does not show
  inside). The install shows at its own path too only where it cannot be hidden: it is part
  of the OS (under ``/usr``), its interpreter cannot be relocated, or a virtualenv of it is
  bound at its host path (its ``python`` links there);
- the workspace, read-write, at ``/workspace`` (the current directory);
- a private tmpfs ``/tmp`` (sized like the memory limit), a fresh ``/proc`` and a minimal
  ``/dev``.

Namespaces: network (unless ``network=True``), PID, IPC, UTS and cgroup. The sandbox dies
with its parent and runs in a new session (no terminal injection). When the caller is
root, commands drop to an unprivileged uid that is random per sandbox, so the kernel
enforces the process limit and sandboxes running side by side do not share it.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from verigap.errors import ConfigError, SandboxUnavailable
from verigap.sandbox._base import DEFAULT_PATH, Sandbox, base_python
from verigap.sandbox._exec import _kill_group, run_capped
from verigap.sandbox._limits import Limits, launcher_argv, native_argv
from verigap.sandbox._python import install_binds, venv_base
from verigap.sandbox._session import Session

WORKSPACE_MOUNT = "/workspace"
"""Where commands see the workspace under bubblewrap."""
SHIM_DIR = "/run/verigap/bin"
"""First on PATH inside: ``python`` and ``python3`` links to the sandbox's interpreter."""
PYTHON_DIR = "/run/verigap/python"
"""Where the sandbox shows the Python install it runs (the host's ``sys.base_prefix``)."""

INSTALL_HINT = (
    "bubblewrap (`bwrap`) is required for sandboxed commands. Install it with "
    "`sudo apt-get install -y bubblewrap` (Debian/Ubuntu) or `sudo dnf install bubblewrap` "
    "(Fedora), or pass backend='unsafe' for tests only (no isolation)."
)

_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_ALLOWLIST = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/mime.types",
)
# After every mount is made: the sandbox's own root and /dev turn read-only. As root the
# sandbox uid cannot write them anyway; without root (--unshare-user) the command's uid owns
# bwrap's tmpfs root, and a file it left in /, /run or /dev/shm would outlive the command in
# a persistent sandbox. So /workspace and /tmp stay the only writable places, in both modes.
_SEAL = ("--remount-ro", "/", "--remount-ro", "/dev")
_UID_RANGE = (2_000_000, 3_000_000)
_PROBED_OK: set[str] = set()  # bwrap binaries that have started a sandbox in this process


def new_sandbox_uid() -> int:
    """A random unprivileged uid for one sandbox (used when verigap runs as root)."""
    return _UID_RANGE[0] + secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0])


def _bwrap_path() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(INSTALL_HINT)
    return found


@functools.cache
def _supports_tmpfs_size(bwrap: str) -> bool:
    done = subprocess.run([bwrap, "--help"], capture_output=True, text=True)
    return "--size" in done.stdout + done.stderr


def _chown_tree(root: Path, uid: int) -> None:
    """``lchown`` ``root`` and everything under it to ``uid``, never following a symlink."""
    os.lchown(root, uid, uid)
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                os.lchown(entry.path, uid, uid)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)


def _child_pid(info_fd: int) -> int | None:
    """The sandbox init's host pid from bwrap's --info-fd JSON (waits up to 1 s for it)."""
    ready, _, _ = select.select([info_fd], [], [], 1.0)
    if not ready:
        return None
    try:
        data = json.loads(os.read(info_fd, 65536).decode() or "{}")
    except (OSError, ValueError):
        return None
    pid = data.get("child-pid")
    return pid if isinstance(pid, int) and pid > 1 else None


def _check_mounts(mounts: Mapping[Path, str], root: Path) -> tuple[tuple[Path, str], ...]:
    """``ro_mounts`` as (host path, sandbox path) pairs, each checked."""
    out = []
    for src, dest in mounts.items():
        src = Path(src).absolute()
        d = PurePosixPath(dest)
        if not src.exists():
            raise ConfigError(f"ro_mounts: {src} does not exist; pass existing host paths")
        if src == root or src.is_relative_to(root) or root.is_relative_to(src):
            raise ConfigError(
                f"ro_mounts: {src} overlaps the workspace {root}; mount paths outside it"
            )
        if (
            not d.is_absolute()
            or ".." in d.parts
            or str(d) == "/"
            or any(
                d == PurePosixPath(x) or d.is_relative_to(x) or PurePosixPath(x).is_relative_to(d)
                for x in ("/proc", "/dev", "/tmp", WORKSPACE_MOUNT, *_SYSTEM_DIRS, "/etc")
            )
        ):
            raise ConfigError(
                f"ro_mounts: {dest!r} must be an absolute path of its own "
                "(not /, /proc, /dev, /tmp, /etc, /workspace or a system dir), "
                "e.g. /verigap/env"
            )
        out.append((src, str(d)))
    return tuple(out)


@functools.cache
def _base_install() -> tuple[Path, Path]:
    """(the running Python's base install, its interpreter), resolved."""
    return Path(sys.base_prefix).resolve(), Path(base_python()).resolve()


def _python_layout(ro_paths: Sequence[Path]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(the sandbox's interpreter as seen inside, the read-only binds that show its install),
    given the host paths ``ro_paths`` the sandbox also mounts (see the module docstring)."""
    base, exe = _base_install()
    if any(base == Path(d) or base.is_relative_to(d) for d in _SYSTEM_DIRS):
        return str(exe), ()  # part of the OS, visible as it is through /usr
    binds = install_binds(base, PYTHON_DIR) if exe.is_relative_to(base) else None
    if binds is None:
        return str(exe), ((str(base), str(base)),)
    out = tuple((str(src), dest) for src, dest in binds.items())
    if any(venv_base(p) == base for p in ro_paths):
        out += ((str(base), str(base)),)
    return f"{PYTHON_DIR}/{exe.relative_to(base).as_posix()}", out


class _MountPlan:
    """Builds bwrap mount arguments; creates world-readable parents for nested binds."""

    def __init__(self) -> None:
        self.args: list[str] = []
        self.mounted: list[PurePosixPath] = []
        self.made: set[PurePosixPath] = set()

    def _covered(self, path: PurePosixPath) -> bool:
        return any(path == m or path.is_relative_to(m) for m in self.mounted)

    def _parents(self, dest: PurePosixPath) -> None:
        for parent in reversed(dest.parents):
            if str(parent) == "/" or parent in self.made or self._covered(parent):
                continue
            self.args += ["--perms", "0755", "--dir", str(parent)]
            self.made.add(parent)

    def bind(self, src: str, dest: str, *, writable: bool = False) -> None:
        dest_p = PurePosixPath(dest)
        if not writable and src == dest and self._covered(dest_p):
            return  # already visible through a parent mount
        self._parents(dest_p)
        self.args += ["--bind" if writable else "--ro-bind", src, dest]
        self.mounted.append(dest_p)

    def symlink(self, target: str, dest: str) -> None:
        self.args += ["--symlink", target, dest]
        self.mounted.append(PurePosixPath(dest))

    def special(self, *args: str, dest: str) -> None:
        """A tmpfs, /proc or /dev: writable by bwrap, so parents below it are still made."""
        self.args += [*args, dest]


class BwrapSandbox(Sandbox):
    """Commands run under bubblewrap with the mounts and namespaces described above."""

    def __init__(
        self,
        root: Path,
        limits: Limits = Limits(),
        *,
        ro_binds: Sequence[Path] = (),
        network: bool = False,
        persistent: bool = False,
        ro_mounts: Mapping[Path, str] | None = None,
        uid: int | None = None,
        single_use: bool = False,
    ) -> None:
        super().__init__(root, limits)
        self.workdir = WORKSPACE_MOUNT
        self.network = network
        self.persistent = persistent
        # single_use (``_prestart``): one command in a sandbox that may have been started
        # before it, through the persistent server; torn down after that command
        self.single_use = single_use
        self._used = False
        self._bound: tuple[int, int] | None = None  # (st_dev, st_ino) the running sandbox binds
        self.ran_prestarted = False  # single_use: its command ran in the sandbox started ahead
        self._retire: Callable[[Session], None] = Session.close
        self._session = Session() if persistent or single_use else None
        self._bwrap = _bwrap_path()
        self.ro_binds = tuple(Path(p).absolute() for p in ro_binds)
        for p in self.ro_binds:
            if not p.exists():
                raise ConfigError(f"ro_binds: {p} does not exist; pass existing host paths")
            if p == self.root or p.is_relative_to(self.root) or self.root.is_relative_to(p):
                raise ConfigError(
                    f"ro_binds: {p} overlaps the workspace {self.root}; bind paths outside it"
                )
        self.ro_mounts = _check_mounts(ro_mounts or {}, self.root)
        self._python, self._python_binds = _python_layout(
            [*self.ro_binds, *(src for src, _ in self.ro_mounts)]
        )
        # _bwrap_args costs ~1 ms of path checks and gives the same answer every exec
        self._args_cache: dict[tuple, list[str]] = {}
        self.uid: int | None = None
        if os.geteuid() == 0:
            if uid is not None:
                # the caller (a WorkspacePool made for sandboxes) already handed the whole
                # tree to ``uid``; the top directory is checked, the walk is not redone
                if not _UID_RANGE[0] <= uid < _UID_RANGE[1] or os.lstat(self.root).st_uid != uid:
                    raise ConfigError(
                        f"make_sandbox: uid={uid} is not a sandbox uid that owns "
                        f"{self.root}; take the workspace from a WorkspacePool "
                        "made with for_sandbox=True, or pass no uid"
                    )
                self.uid = uid
            else:
                self.uid = new_sandbox_uid()
                _chown_tree(self.root, self.uid)
        self._probe()

    def _adopt(self, paths: list[Path]) -> None:
        if self.uid is None:
            return
        for p in paths:
            os.chown(p, self.uid, self.uid, follow_symlinks=False)

    def _default_path(self) -> str:
        # ``python``/``python3`` come from the shim; the base install's own bin directory is
        # not listed, so the environment names no host path
        return f"{SHIM_DIR}:{DEFAULT_PATH}"

    def _bwrap_args(self, rel_cwd: str) -> list[str]:
        plan = _MountPlan()
        tmpfs = ["--perms", "1777"]
        if _supports_tmpfs_size(self._bwrap):
            tmpfs += ["--size", str(self.limits.memory_mb * 1024 * 1024)]
        plan.special(*tmpfs, "--tmpfs", dest="/tmp")
        plan.special("--proc", dest="/proc")
        plan.special("--dev", dest="/dev")
        for d in _SYSTEM_DIRS:
            if os.path.islink(d):
                plan.symlink(os.readlink(d), d)
            elif os.path.isdir(d):
                plan.bind(d, d)
        etc = list(_ETC_ALLOWLIST)
        if self.network:
            etc += ["/etc/resolv.conf", "/etc/hosts"]
        for e in etc:
            if os.path.exists(e):
                plan.bind(os.path.realpath(e), e)
        for src, dest in self._python_binds:
            plan.bind(src, dest)
        plan.special("--perms", "0755", "--dir", dest=SHIM_DIR)
        for name in ("python", "python3"):
            plan.special("--symlink", self._python, dest=f"{SHIM_DIR}/{name}")
        for p in self.ro_binds:
            plan.bind(str(p), str(p))
        for src, dest in self.ro_mounts:
            plan.bind(str(src), dest)
        plan.bind(str(self.root), WORKSPACE_MOUNT, writable=True)
        ns = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.network:
            ns.append("--unshare-net")
        if self.uid is None:
            ns.append("--unshare-user")
            caps = ["--cap-drop", "ALL"]
        else:  # root: keep only what the wrapper needs to drop to self.uid, then exec
            caps = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        chdir = str(PurePosixPath(WORKSPACE_MOUNT) / rel_cwd)
        return [
            self._bwrap,
            *plan.args,
            *ns,
            *caps,
            "--die-with-parent",
            "--new-session",
            "--chdir",
            chdir,
        ]

    def _identity_files(self) -> tuple[list[str], list[int]]:
        """A generated /etc/passwd and /etc/group naming the sandbox user ``agent``."""
        uid = self.uid if self.uid is not None else os.getuid()
        gid = self.uid if self.uid is not None else os.getgid()
        files = {
            "/etc/passwd": f"root:x:0:0:root:/root:/bin/sh\nagent:x:{uid}:{gid}:agent:/tmp:/bin/sh\n",
            "/etc/group": f"root:x:0:\nagent:x:{gid}:\n",
        }
        args: list[str] = []
        fds: list[int] = []
        for dest, text in files.items():
            r, w = os.pipe()
            os.write(w, text.encode())
            os.close(w)
            fds.append(r)
            args += ["--perms", "0644", "--ro-bind-data", str(r), dest]
        return args, fds

    def close(self) -> None:
        """Stop the persistent sandbox, if any (also done when the object is collected)."""
        if self._session is not None:
            self._session.close()

    def _cached_args(self, rel_cwd: str) -> list[str]:
        key = (rel_cwd, self.limits, self.network, self.ro_binds)
        if key not in self._args_cache:
            self._args_cache[key] = self._bwrap_args(rel_cwd)
        return self._args_cache[key]

    def _launch_server(self, sock_fd: int, server_argv: list[str]) -> tuple:
        """Start bwrap running the session's command server (see ``_session``)."""
        ident_args, fds = self._identity_files()
        info_r, info_w = os.pipe()
        bwrap, *opts = self._cached_args(".")
        opts += [*ident_args, *_SEAL, "--info-fd", str(info_w)]
        blob = b"".join(a.encode() + b"\0" for a in opts)
        if len(blob) > 60_000:  # would not fit the pipe before bwrap reads it
            raise ConfigError("persistent sandbox: too many mounts; use persistent=False")
        args_r, args_w = os.pipe()
        os.write(args_w, blob)
        os.close(args_w)
        try:
            proc = subprocess.Popen(
                [bwrap, "--args", str(args_r), "--", *server_argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={"PATH": DEFAULT_PATH},
                start_new_session=True,
                pass_fds=(*fds, info_w, args_r, sock_fd),
            )
        except BaseException:
            os.close(info_r)
            raise
        finally:
            for fd in (*fds, info_w, args_r):
                os.close(fd)
        return proc, info_r

    def _session_key(self) -> tuple:
        return (self.limits, self.network, self.ro_binds)

    def prestart(self) -> None:
        """Start a single-use sandbox now, so that its command does not wait for bubblewrap."""
        if not self.single_use or self._used:
            raise ConfigError("prestart: only an unused single_use sandbox can be started ahead")
        st = os.stat(self.root)
        self._session.start(self._session_key(), self._launch_server, self._python, self.uid)
        self._bound = (st.st_dev, st.st_ino)

    def mounts_as_bound(self) -> bool:
        """Whether a started sandbox's read-only mounts show the very directories and files
        their host paths name now (device and inode, looked up through the sandbox init's
        root): False where a source was replaced since the sandbox started, or cannot be
        checked. A sandbox not started has nothing bound yet (True)."""
        server = self._session._holder.get("server") if self._session is not None else None
        if server is None:
            return True
        if server.init_pid is None or not server.alive():
            return False
        inside = f"/proc/{server.init_pid}/root"
        try:
            for src, dest in (*((p, str(p)) for p in self.ro_binds), *self.ro_mounts):
                a, b = os.stat(src), os.stat(inside + dest)
                if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
                    return False
        except OSError:
            return False
        return True

    def _moved_to(self, dest: Path) -> None:
        """The workspace directory was renamed to ``dest`` (the mount follows the directory)."""
        dest = Path(dest).resolve()
        for p in (*self.ro_binds, *(src for src, _ in self.ro_mounts)):
            if p == dest or p.is_relative_to(dest) or dest.is_relative_to(p):
                raise ConfigError(f"sandbox workspace {dest} overlaps the read-only mount {p}")
        self.root = dest
        self._args_cache.clear()

    def _run_once(
        self, argv: list[str], env: dict[str, str], rel_cwd: str, timeout: float
    ) -> tuple:
        """A single-use sandbox's one command: in the sandbox started for it if that one binds
        this very workspace directory, else in one started now; torn down afterwards."""
        if self._used:
            raise ConfigError(
                "this sandbox was started for one command and has run it; "
                "take a new one for the next command"
            )
        self._used = True
        st = os.stat(self.root)
        self.ran_prestarted = self._bound == (st.st_dev, st.st_ino) and self._session.running()
        if not self.ran_prestarted:
            # never started, or the workspace directory was replaced since (e.g. deleted and
            # made again): a sandbox bound to another directory is never used
            self._session.close()
            self._args_cache.clear()
        if self.uid is not None:  # what the caller put in the workspace since the start
            _chown_tree(self.root, self.uid)
        try:
            return self._session_run(argv, env, rel_cwd, timeout)
        finally:
            self._retire(self._session)

    def _session_run(
        self, argv: list[str], env: dict[str, str], rel_cwd: str, timeout: float
    ) -> tuple:
        request = {
            # the server starts every command with default signals (see SERVER)
            "launcher": native_argv(
                argv, self.limits, uid=self.uid, visible=_SYSTEM_DIRS, reset_signals=False
            ),
            "argv": argv,
            "rlimits": self.limits.rlimits(),
            "env": env,
            "cwd": str(PurePosixPath(WORKSPACE_MOUNT) / rel_cwd),
        }
        return self._session.run(
            self._session_key(),
            self._launch_server,
            self._python,
            self.uid,
            request,
            timeout=timeout,
            output_bytes=self.limits.output_bytes,
        )

    def _run(self, argv: list[str], env: dict[str, str], rel_cwd: str, timeout: float) -> tuple:
        if self.single_use:
            return self._run_once(argv, env, rel_cwd, timeout)
        if self._session is not None:
            return self._session_run(argv, env, rel_cwd, timeout)
        return self._run_fresh(argv, env, rel_cwd, timeout)

    def _run_fresh(
        self, argv: list[str], env: dict[str, str], rel_cwd: str, timeout: float
    ) -> tuple:
        """A sandbox started for this command alone, torn down before this returns."""
        ident_args, fds = self._identity_files()
        # bwrap reports the host pid of the sandbox's init on --info-fd. Killing that init
        # (not the launcher) on a timeout makes the kernel kill and reap the whole PID
        # namespace before the launcher exits, so no process outlives exec().
        info_r, info_w = os.pipe()
        open_fds = [*fds, info_r, info_w]

        def close_child_ends() -> None:
            for fd in (*fds, info_w):
                os.close(fd)
                open_fds.remove(fd)

        def kill_tree(pid: int) -> None:
            child = _child_pid(info_r)
            if child is None:
                _kill_group(pid)
                return
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                _kill_group(pid)

        try:
            bwrap, *opts = self._cached_args(rel_cwd)
            opts += [*ident_args, *_SEAL, "--info-fd", str(info_w)]
            launcher = launcher_argv(
                self._python, argv, self.limits, env, uid=self.uid, visible=_SYSTEM_DIRS
            )
            command = ["--", *launcher]
            # the options travel through a pipe (--args), not the command line: the sandbox's
            # pid 1 is a copy of bwrap, and its /proc/1/cmdline would otherwise show the host
            # path of every mount to the code inside (bwrap wants the command itself on the line)
            args_r, args_w = os.pipe()
            blob = b"".join(a.encode() + b"\0" for a in opts)
            if len(blob) > 60_000:  # over a pipe buffer: fall back to the plain command line
                os.close(args_r)
                os.close(args_w)
                full = [bwrap, *opts, *command]
            else:
                os.write(args_w, blob)
                os.close(args_w)
                fds.append(args_r)
                open_fds.append(args_r)
                full = [bwrap, "--args", str(args_r), *command]
            return run_capped(
                full,
                timeout=timeout,
                output_bytes=self.limits.output_bytes,
                env=env,
                pass_fds=(*fds, info_w),
                after_start=close_child_ends,
                kill_tree=kill_tree,
            )
        finally:
            for fd in open_fds:
                os.close(fd)

    def start(self, argv: list[str], env: Mapping[str, str]) -> subprocess.Popen:
        """Start ``argv`` in a fresh sandbox (these mounts, namespaces and rlimits; the
        workspace as cwd) and return at once, its stdin and stdout piped to the caller: a
        long-lived helper the caller talks to, such as a fork server. ``env`` is added to
        :meth:`base_env`. No wall-clock limit applies: the caller ends it by closing stdin or
        killing the returned process (bubblewrap); ``--die-with-parent`` and the PID
        namespace take every process inside with it."""
        full_env = {**self.base_env(), **env}
        ident_args, fds = self._identity_files()
        bwrap, *opts = self._cached_args(".")
        opts += [*ident_args, *_SEAL]
        launcher = launcher_argv(
            self._python, list(argv), self.limits, full_env, uid=self.uid, visible=_SYSTEM_DIRS
        )
        args_r, args_w = os.pipe()
        os.write(args_w, b"".join(a.encode() + b"\0" for a in opts))
        os.close(args_w)
        try:
            return subprocess.Popen(
                [bwrap, "--args", str(args_r), "--", *launcher],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=full_env,
                start_new_session=True,
                pass_fds=(*fds, args_r),
            )
        finally:
            for fd in (*fds, args_r):
                os.close(fd)

    def _probe(self) -> None:
        """Fail early, as SandboxUnavailable, if bubblewrap cannot start here at all.

        Whether it can is a property of the host (namespaces allowed, binary working), so a
        success is remembered for the rest of the process.
        """
        if self._bwrap in _PROBED_OK:
            return
        rc, _, err, timed_out, _ = self._run_fresh(["/bin/true"], {"PATH": DEFAULT_PATH}, ".", 30.0)
        if rc == 0 and not timed_out:
            _PROBED_OK.add(self._bwrap)
        else:
            raise SandboxUnavailable(
                "bubblewrap is installed but could not start a sandbox here "
                f"(exit {rc}): {err.text('stderr').strip()[:500]}. Unprivileged user "
                "namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1 or "
                "user.max_user_namespaces>0), or run as root."
            )
