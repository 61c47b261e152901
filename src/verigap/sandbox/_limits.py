"""Resource limits: one frozen config, the in-sandbox launcher that applies them, and the
classification that turns a dead process into a one-line reason.

Limits are applied *inside* the sandbox, just before the command is ``exec``ed, by a
launcher: util-linux ``setpriv`` (drop to the sandbox uid, when started as root) and
``prlimit`` (set the rlimits), two small C programs that cost about a millisecond each.
Where they are missing, a Python wrapper does the same (``python -I -S -c WRAPPER``,
~20-35 ms of interpreter start). Applying the limits there, after bubblewrap has set up
namespaces, means the process limit counts only the sandbox's own processes and never the
caller's.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
from dataclasses import dataclass

from verigap.errors import ConfigError

_MB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Every limit a sandboxed command runs under (per command, not per episode)."""

    wall_s: float = 60.0
    """Wall-clock seconds before the whole process tree is killed (``exec(timeout=)`` overrides)."""
    cpu_s: float | None = None
    """CPU seconds per process (RLIMIT_CPU); None leaves it to the wall-clock limit."""
    memory_mb: int = 2048
    """Address space per process in MiB (RLIMIT_AS); also the size of the private /tmp."""
    processes: int = 256
    """Processes/threads the sandbox user may have at once (RLIMIT_NPROC)."""
    file_size_mb: int = 256
    """Largest file a process may write, in MiB (RLIMIT_FSIZE)."""
    output_bytes: int = 64_000
    """Bytes kept from each of stdout and stderr; the middle of longer output is dropped."""

    def __post_init__(self) -> None:
        checks = {
            "wall_s": self.wall_s > 0,
            "cpu_s": self.cpu_s is None or self.cpu_s > 0,
            "memory_mb": self.memory_mb >= 16,
            "processes": self.processes >= 1,
            "file_size_mb": self.file_size_mb >= 1,
            "output_bytes": self.output_bytes >= 64,
        }
        for name, ok in checks.items():
            if not ok:
                raise ConfigError(
                    f"Limits.{name}={getattr(self, name)!r} is out of range; "
                    "use a positive value (memory_mb >= 16, output_bytes >= 64)"
                )

    def rlimits(self) -> dict[str, int]:
        """The rlimits the wrapper sets, by ``resource`` constant name (soft=hard except CPU)."""
        out = {
            "RLIMIT_AS": self.memory_mb * _MB,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_FSIZE": self.file_size_mb * _MB,
            "RLIMIT_CORE": 0,
        }
        if self.cpu_s is not None:
            out["RLIMIT_CPU"] = max(1, int(round(self.cpu_s)))
        return out


# Runs as `python -I -S -c WRAPPER CONFIG_JSON -- argv...`. Kept dependency-free: only the
# sandbox's own interpreter and stdlib modules that need no site-packages.
WRAPPER = r"""
import json, os, resource, signal, sys
# An ignored signal survives exec: Python ignores SIGPIPE and SIGXFSZ, and a host started in
# the background ignores SIGINT and SIGQUIT. The command starts with every one at its default.
for s in signal.valid_signals():
    try:
        if signal.getsignal(s) == signal.SIG_IGN:
            signal.signal(s, signal.SIG_DFL)
    except (OSError, ValueError):
        pass
cfg = json.loads(sys.argv[1])
argv = sys.argv[3:]
uid = cfg.get("uid")
if uid is not None and os.getuid() == 0:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
for name, value in cfg["rlimits"].items():
    which = getattr(resource, name)
    hard = value + 1 if name == "RLIMIT_CPU" else value
    resource.setrlimit(which, (value, hard))
try:
    os.execvpe(argv[0], argv, cfg["env"])
except OSError as exc:
    sys.stderr.write("verigap sandbox: cannot execute %r: %s\n" % (argv[0], exc.strerror))
    os._exit(127)
"""


def wrapper_argv(
    python: str,
    cmd: list[str],
    limits: Limits,
    env: dict[str, str],
    *,
    uid: int | None = None,
) -> list[str]:
    """The argv that applies ``limits`` (and drops to ``uid`` when started as root), then execs."""
    cfg = {"rlimits": limits.rlimits(), "env": env, "uid": uid}
    return [python, "-I", "-S", "-c", WRAPPER, json.dumps(cfg), "--", *cmd]


# prlimit's option for each rlimit the launcher sets (see Limits.rlimits).
_PRLIMIT_OPTS = {
    "RLIMIT_AS": "--as",
    "RLIMIT_NPROC": "--nproc",
    "RLIMIT_FSIZE": "--fsize",
    "RLIMIT_CORE": "--core",
    "RLIMIT_CPU": "--cpu",
}


@functools.cache
def native_launcher(visible: tuple[str, ...] | None = None) -> tuple[str, str, str] | None:
    """The paths of util-linux ``prlimit`` and ``setpriv`` and coreutils ``env``, or None if
    any is missing.

    ``visible``: directories a command can see (under bubblewrap, the read-only system
    dirs); a binary elsewhere is not reachable inside, so the Python wrapper is used.
    """
    found = shutil.which("prlimit"), shutil.which("setpriv"), shutil.which("env")
    if None in found:
        return None
    paths = tuple(str(p) for p in found)

    def reachable(path: str) -> bool:
        return visible is None or any(path.startswith(d.rstrip("/") + "/") for d in visible)

    if not all(reachable(p) and reachable(os.path.realpath(p)) for p in paths):
        return None
    return paths  # type: ignore[return-value]


# Signals subprocess.Popen itself resets to the default in the child (restore_signals=True):
# Python ignores them, so every Popen child would otherwise start with them ignored.
_POPEN_RESTORES = frozenset({signal.SIGPIPE, signal.SIGXFSZ})


def inherited_ignored_signals() -> bool:
    """Whether a child started now by ``subprocess.Popen`` would start with some signal
    ignored (the host ignores a signal other than those Popen restores, e.g. SIGINT and
    SIGQUIT when it was started in the background). Read from the kernel, so a handler
    set outside Python counts too; True when that cannot be read."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigIgn:"):
                    mask = int(line.split()[1], 16)
                    break
            else:
                return True
    except (OSError, ValueError):
        return True
    # only signals a reset can change count: Popen restores two itself, and glibc's own
    # (32, 33: not in valid_signals) cannot be set from user code, by env or by anyone else
    return any(mask >> (s - 1) & 1 for s in signal.valid_signals() if s not in _POPEN_RESTORES)


def native_argv(
    cmd: list[str],
    limits: Limits,
    *,
    uid: int | None = None,
    visible: tuple[str, ...] | None = None,
    reset_signals: bool = True,
) -> list[str] | None:
    """``setpriv``/``prlimit`` argv that applies ``limits`` (and drops to ``uid``), then
    execs ``cmd``; None when those tools are not installed (or not visible inside).

    ``reset_signals``: put coreutils ``env --default-signal`` in the chain, for a caller
    whose children would inherit an ignored signal (``inherited_ignored_signals``); each
    program in the chain is one more exec (~1 ms of CPU; benchmarks/sandbox.py).
    """
    native = native_launcher(visible)
    if native is None:
        return None
    prlimit, setpriv, env = native
    # env --default-signal: an ignored signal survives exec (a host started in the background
    # ignores SIGINT and SIGQUIT); the command gets defaults
    argv: list[str] = []
    if uid is not None:
        # Drops to uid/gid with no supplementary groups; a root -> non-root uid change
        # clears the capabilities bwrap kept for it (CAP_SETUID/CAP_SETGID).
        argv += [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    if reset_signals:
        argv += [env, "--default-signal"]
    argv += [prlimit]
    for name, value in limits.rlimits().items():
        hard = value + 1 if name == "RLIMIT_CPU" else value
        argv.append(f"{_PRLIMIT_OPTS[name]}={value}:{hard}")
    return [*argv, "--", *cmd]


def launcher_argv(
    python: str,
    cmd: list[str],
    limits: Limits,
    env: dict[str, str],
    *,
    uid: int | None = None,
    visible: tuple[str, ...] | None = None,
) -> list[str]:
    """The argv that applies ``limits`` (and drops to ``uid``), then execs ``cmd``.

    The same effect as ``wrapper_argv``, but through ``setpriv``/``prlimit`` when they are
    installed (and visible to the command), so no interpreter starts before the command.
    The command inherits the launcher's environment, so the caller must start the
    launcher with ``env`` (as both backends do).
    """
    native = native_argv(
        cmd, limits, uid=uid, visible=visible, reset_signals=inherited_ignored_signals()
    )
    return native if native is not None else wrapper_argv(python, cmd, limits, env, uid=uid)


_SIGNAL_REASONS = {
    signal.SIGXCPU: "CPU time limit of {cpu}s exceeded (SIGXCPU)",
    signal.SIGXFSZ: "file size limit of {fsize} MB exceeded (SIGXFSZ)",
    signal.SIGKILL: "killed by SIGKILL (CPU hard limit or the kernel's out-of-memory killer)",
    signal.SIGSEGV: "crashed with SIGSEGV (can be a failed allocation under the memory limit)",
}

_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_FORK_MARKERS = ("Resource temporarily unavailable", "can't fork", "Cannot fork", "fork: retry")


def terminating_signal(returncode: int | None) -> int | None:
    """The signal that ended the command: ``-N`` from Popen, ``128+N`` from a shell or bwrap."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if 128 < returncode < 128 + 65:
        return returncode - 128
    return None


def classify(
    returncode: int | None,
    stderr: str,
    limits: Limits,
    *,
    timed_out: bool,
    timeout: float,
    truncated: bool,
) -> str | None:
    """Why a command was killed or limited, in one line; None for an ordinary exit."""
    parts: list[str] = []
    if timed_out:
        parts.append(
            f"wall-clock limit of {timeout:g}s exceeded; the whole process tree was killed"
        )
    else:
        sig = terminating_signal(returncode)
        if sig in _SIGNAL_REASONS:
            parts.append(
                _SIGNAL_REASONS[signal.Signals(sig)].format(
                    cpu=limits.cpu_s, fsize=limits.file_size_mb
                )
            )
        elif returncode not in (0, None) and any(m in stderr for m in _MEMORY_MARKERS):
            parts.append(
                f"memory limit of {limits.memory_mb} MB likely exceeded (an allocation failed)"
            )
    if not timed_out and "File too large" in stderr and terminating_signal(returncode) is None:
        parts.append(f"file size limit of {limits.file_size_mb} MB likely reached (a write failed)")
    # A fork bomb's first process often exits 0 while its children fail to fork.
    if any(m in stderr for m in _FORK_MARKERS):
        parts.append(f"process limit of {limits.processes} likely reached (a fork failed)")
    if truncated:
        parts.append(f"output truncated to {limits.output_bytes} bytes per stream")
    return "; ".join(parts) or None
