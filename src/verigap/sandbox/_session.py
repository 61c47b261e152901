"""A persistent bubblewrap sandbox: one set of namespaces per sandbox, one process per command.

Starting bubblewrap (namespaces, mounts, pivot, teardown) is most of what a sandboxed
command costs, and on a busy machine it grows to tens of milliseconds. With
``make_sandbox(..., persistent=True)`` the sandbox starts once, with the very same mounts,
namespaces, capabilities and identity as a per-command one, and runs a small command server
(the sandbox's own Python, stdlib only) as its only process. Each ``exec`` then costs a
fork inside it: the forked server child drops to the sandbox uid and sets the rlimits
with the same calls as the limits wrapper (``_limits.WRAPPER``), then execs the command.

What keeps each command as self-contained as a fresh sandbox:

- the command's stdout/stderr are pipes the host made for that command alone (passed in
  over a socket); stdin is /dev/null; its environment and directory come with the request;
- the same rlimits and uid as the per-command path, set in the command's own process;
- when it exits, the server kills every other process in the sandbox's PID namespace
  (dropping to the sandbox uid first when it runs as root, so it can) and empties
  ``/tmp``, before it reports the exit status; when it cannot (a process that will not
  die, a file it cannot remove) the host discards the whole sandbox;
- on the wall-clock limit the host kills the sandbox's init, which makes the kernel kill
  every process in it, exactly as for a per-command sandbox; the next ``exec`` starts a
  fresh sandbox.

What a session shares between its commands, unlike per-command sandboxes: System V IPC
objects a command created (the IPC namespace is the sandbox's, never the host's or another
sandbox's). What a command can see of the session: process ids keep counting from the
earlier commands, the server itself runs as pid 2 (its source on its command line), and
the init's start time and CPU counters in ``/proc/1`` date from the session's start. The
workspace is shared in both modes by design; everything else a command can write is
``/tmp`` (emptied) since the sandbox's root and ``/dev`` are remounted read-only
(``_bwrap._SEAL``).
"""

from __future__ import annotations

import json
import os
import select
import selectors
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from verigap.errors import SandboxUnavailable
from verigap.sandbox._exec import _Capture, _kill_group

_START_TIMEOUT_S = 30.0
_DRAIN_GRACE_S = 0.5
_KILL_WAIT_S = 5.0

# Runs as `python -I -S -c SERVER SOCKET_FD UID` inside the sandbox, as its only process.
SERVER = r"""
import json, os, resource, shutil, signal, socket, subprocess, sys, time
fd = int(sys.argv[1])
# Nothing of the server may reach a command: above all not this socket, through which a
# request sets the limits.
os.closerange(3, fd)
os.closerange(fd + 1, 65536)
os.set_inheritable(fd, False)
# Not dumpable: where commands share the server's uid (no root), they still cannot ptrace
# it, read its memory or change what it does for the next command.
import ctypes
if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    sys.exit("verigap sandbox: prctl(PR_SET_DUMPABLE) failed")
sock = socket.socket(fileno=fd)
# A signal the host ignored (SIGINT and SIGQUIT when started in the background) reaches the
# server ignored and would survive into every command: back to the default, here, once, so
# the launcher needs no `env --default-signal`. SIGPIPE and SIGXFSZ stay as Python set them
# (subprocess resets those in each child) so that the server survives its host going away.
for s in signal.valid_signals():
    if s in (signal.SIGPIPE, signal.SIGXFSZ):
        continue
    try:
        if signal.getsignal(s) == signal.SIG_IGN:
            signal.signal(s, signal.SIG_DFL)
    except (OSError, ValueError):
        pass
uid = int(sys.argv[2]) if sys.argv[2] else None
server = os.getpid()

def become_uid():
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)

def others(me):
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, server, me):
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            out.append(int(name))
    return out

def sweep():
    # Usually nothing is left: then there is nothing to do.
    if not others(server) and not os.listdir("/tmp"):
        return True
    # A child does the killing: as root the server cannot signal the sandbox uid's
    # processes (no CAP_KILL), so the child becomes that uid first.
    pid = os.fork()
    if pid == 0:
        ok = 1
        try:
            become_uid()
            me = os.getpid()
            give_up = time.monotonic() + 5.0
            while True:
                left = others(me)
                if not left:
                    break
                if time.monotonic() > give_up:
                    ok = 0
                    break
                for p in left:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.0005)
            for entry in os.scandir("/tmp"):
                try:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path)
                    else:
                        os.unlink(entry.path)
                except OSError:
                    ok = 0
        except BaseException:
            ok = 0
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return status == 0 and not others(server)

def spawn(req, fds):
    # subprocess uses vfork here (no preexec_fn, no user/group): much cheaper than fork on
    # a busy machine; the launcher argv (setpriv/prlimit) does what the fork path below
    # does in Python. (os.posix_spawn would leave glibc's internal signals ignored.)
    try:
        return subprocess.Popen(
            req["launcher"], stdin=subprocess.DEVNULL, stdout=fds[0], stderr=fds[1],
            env=req["env"], cwd=req["cwd"], start_new_session=True,
        )
    except OSError as exc:
        os.write(fds[1], ("verigap sandbox: cannot execute %r: %s\n"
                          % (req["launcher"][0], exc.strerror)).encode())
        return None

def run(req, fds):
    if req.get("launcher"):
        proc = spawn(req, fds)
        for fd in fds:
            os.close(fd)
        return 127 if proc is None else proc.wait()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            # an ignored signal survives exec (Python ignores SIGPIPE and SIGXFSZ; a host
            # started in the background ignores SIGINT and SIGQUIT): all back to default
            for s in signal.valid_signals():
                try:
                    if signal.getsignal(s) == signal.SIG_IGN:
                        signal.signal(s, signal.SIG_DFL)
                except (OSError, ValueError):
                    pass
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
            os.closerange(3, 65536)
            os.chdir(req["cwd"])
            # the same steps, in the same order, as the limits wrapper (_limits.WRAPPER)
            become_uid()
            for name, value in req["rlimits"].items():
                hard = value + 1 if name == "RLIMIT_CPU" else value
                resource.setrlimit(getattr(resource, name), (value, hard))
            os.execvpe(req["argv"][0], req["argv"], req["env"])
        except OSError as exc:
            os.write(2, ("verigap sandbox: cannot execute %r: %s\n"
                         % (req["argv"][0], exc.strerror)).encode())
        os._exit(127)
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)

sock.send(b"ready")
while True:
    try:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
    except OSError:
        break
    if not msg:
        break
    code = run(json.loads(msg), fds)
    sock.send(json.dumps({"returncode": code, "clean": sweep()}).encode())
"""


Launch = Callable[[int, list[str]], tuple[subprocess.Popen, int]]
"""``launch(socket_fd, server_argv)`` starts bwrap running ``server_argv`` with ``socket_fd``
passed in; returns the Popen and the read end of bwrap's ``--info-fd`` pipe."""


def _init_pid(info_fd: int) -> int | None:
    """The sandbox init's host pid from bwrap's --info-fd JSON (written before the server runs)."""
    try:
        ready, _, _ = select.select([info_fd], [], [], 5.0)
        data = json.loads(os.read(info_fd, 65536).decode() or "{}") if ready else {}
    except (OSError, ValueError):
        return None
    finally:
        os.close(info_fd)
    pid = data.get("child-pid")
    return pid if isinstance(pid, int) and pid > 1 else None


@dataclass
class _Server:
    proc: subprocess.Popen
    sock: socket.socket
    init_pid: int | None  # the sandbox's init on the host (bwrap --info-fd)
    key: tuple

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """Kill every process in the sandbox (its init first) and reap the launcher."""
        # The kernel kills and reaps the whole PID namespace before the init's exit is
        # reported, and bwrap's launcher exits only then: so wait for the launcher, and
        # kill it directly only where the init is unknown or it does not exit.
        if self.proc.poll() is not None:  # already gone (and its init with it)
            pass
        elif self.init_pid is not None:
            try:
                os.kill(self.init_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            _kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=_KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc.pid)
            self.proc.wait()
        self.sock.close()
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def stderr_after_kill(self) -> str:
        err = self.proc.stderr.read() if self.proc.stderr is not None else b""
        self.kill()
        return err.decode(errors="replace").strip()[:500]


def _shutdown(holder: dict) -> None:
    server = holder.pop("server", None)
    if server is not None:
        server.kill()


class Session:
    """The host side of one persistent sandbox: starts it lazily, runs commands through it.

    ``start`` is given (key, launch) where ``launch(extra_fds, server_argv)`` returns the
    bwrap Popen and the sandbox init's pid; a change of key (new limits, binds) restarts.
    """

    def __init__(self) -> None:
        self._holder: dict = {}
        self._finalizer = weakref.finalize(self, _shutdown, self._holder)
        # one command at a time: the server runs them in turn, and the sweep after each
        # would kill a concurrent one
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            _shutdown(self._holder)

    def running(self) -> bool:
        """Whether the sandbox is started and still alive."""
        server = self._holder.get("server")
        return server is not None and server.alive()

    def start(self, key: tuple, launch: Launch, python: str, uid: int | None) -> None:
        """Start the sandbox now (``run`` would start it on its first command)."""
        with self._lock:
            self._server(key, launch, python, uid)

    def _server(self, key: tuple, launch: Launch, python: str, uid: int | None) -> _Server:
        server: _Server | None = self._holder.get("server")
        if server is not None and server.key == key and server.alive():
            return server
        self.close()
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            who = "" if uid is None else str(uid)
            argv = [python, "-I", "-S", "-c", SERVER, str(child.fileno()), who]
            proc, info_fd = launch(child.fileno(), argv)
        finally:
            child.close()
        host.settimeout(_START_TIMEOUT_S)
        try:
            ready = host.recv(16)
        except OSError:
            ready = b""
        # bwrap writes --info-fd before it runs the server, so after "ready" it is there
        server = _Server(proc, host, _init_pid(info_fd), key)
        if ready != b"ready":
            err = server.stderr_after_kill()
            raise SandboxUnavailable(
                f"the persistent bubblewrap sandbox did not start (exit {proc.returncode}): {err}"
            )
        host.settimeout(None)
        self._holder["server"] = server
        return server

    def run(
        self,
        key: tuple,
        launch: Launch,
        python: str,
        uid: int | None,
        request: dict,
        *,
        timeout: float,
        output_bytes: int,
    ) -> tuple[int | None, _Capture, _Capture, bool, float]:
        """Run one command; the same return value as ``run_capped``."""
        with self._lock:
            return self._run(
                key, launch, python, uid, request, timeout=timeout, output_bytes=output_bytes
            )

    def _run(
        self,
        key: tuple,
        launch: Launch,
        python: str,
        uid: int | None,
        request: dict,
        *,
        timeout: float,
        output_bytes: int,
        retry: bool = True,
    ) -> tuple[int | None, _Capture, _Capture, bool, float]:
        start = time.monotonic()
        deadline = start + timeout
        server = self._server(key, launch, python, uid)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            socket.send_fds(server.sock, [json.dumps(request).encode()], [out_w, err_w])
        except OSError as exc:  # the server died since the last command: start a fresh one once
            for fd in (out_r, err_r, out_w, err_w):
                os.close(fd)
            self.close()
            if not retry:
                raise SandboxUnavailable(f"the persistent sandbox died at once: {exc}") from exc
            return self._run(
                key,
                launch,
                python,
                uid,
                request,
                timeout=timeout,
                output_bytes=output_bytes,
                retry=False,
            )
        os.close(out_w)
        os.close(err_w)
        captures = {out_r: _Capture(output_bytes), err_r: _Capture(output_bytes)}
        reply: dict | None = None
        timed_out = False
        done_at: float | None = None
        open_streams = 2
        with selectors.DefaultSelector() as sel:
            for fd in captures:
                sel.register(fd, selectors.EVENT_READ)
            sel.register(server.sock, selectors.EVENT_READ)
            while open_streams or reply is None:
                now = time.monotonic()
                if now >= deadline:
                    timed_out = reply is None
                    break
                if done_at is not None and now - done_at > _DRAIN_GRACE_S:
                    break
                for key_, _ in sel.select(timeout=min(0.05, deadline - now)):
                    if key_.fileobj is server.sock:
                        sel.unregister(server.sock)
                        data = server.sock.recv(4096)
                        reply = json.loads(data) if data else {"returncode": None, "dead": True}
                        done_at = time.monotonic()
                        continue
                    chunk = os.read(key_.fd, 65536)
                    if chunk:
                        captures[key_.fd].add(chunk)
                    else:
                        sel.unregister(key_.fd)
                        open_streams -= 1
        for fd in captures:
            os.close(fd)
        if timed_out or reply is None or reply.get("dead") or not reply.get("clean", False):
            # The command ran out of time, or the server could not make the sandbox clean
            # again (or died): discard the whole sandbox, as a per-command run would.
            self.close()
        returncode = None if timed_out else (reply or {}).get("returncode")
        if reply is not None and reply.get("dead") and not timed_out:
            captures[err_r].add(b"verigap sandbox: the sandbox's command server died\n")
            returncode = -signal.SIGKILL
        return (
            returncode,
            captures[out_r],
            captures[err_r],
            timed_out,
            time.monotonic() - start,
        )
