"""A fork server for validation runs (runs inside the sandbox, started once per worker).

Usage: python -s -P -B warm_server.py CONFIG_JSON

Starting a fresh interpreter and importing pytest is about a third of a short validation run
(a mutation's reaching tests). This process pays it once: it imports pytest, the harness's
runner and the environment's declared plugins (never project code), then reads one request
per line on stdin and answers one line on stdout. Per request it forks a child that runs
``pytest_runner.run`` with the request's config (the same run ``pytest_runner.py`` makes in a
cold process), its stdout and stderr written to a file in the scratch directory and its stdin
closed, so the control channel is out of the child's reach. The caller changes the tree on
disk between requests; the tree is mounted read-only here, as for a cold run.

A child that runs past the request's ``timeout`` is killed with its process group; whatever it
started in that group goes with it, and the sandbox (bubblewrap, network unshared, no
privileges) ends with the caller. Requests hold no secret the child could misuse: each run's
nonce is only in its own config, as in a cold run.

CONFIG_JSON (deleted once read): ``preload`` (modules to import up front: pytest's plugins
named with ``-p``), ``harness`` (the directory of ``pytest_runner.py``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
import traceback


def _wait(pid: int, timeout: float) -> tuple[int | None, bool]:
    """(exit status or None, timed out): wait for ``pid``, kill its group past ``timeout``."""
    deadline = time.monotonic() + timeout
    fd = None
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pass
    try:
        while True:
            got, status = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                return status, False
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if fd is not None:
                select.select([fd], [], [], left)
            else:
                time.sleep(min(left, 0.005))
    finally:
        if fd is not None:
            os.close(fd)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    return None, True


def _child(req: dict, harness: str) -> None:
    """In the forked child: detach from the control channel, run, exit (never returns)."""
    code = 70
    try:
        os.setsid()  # its own group: killed whole on a timeout
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        import pytest_runner

        pytest_runner._PID = os.getpid()  # this child is the run's process
        if harness in sys.path:  # a cold run does not have the harness on its path
            sys.path.remove(harness)
        code = pytest_runner.run(req["cfg"])
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main() -> int:
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    os.unlink(sys.argv[1])
    harness = cfg["harness"]
    sys.dont_write_bytecode = True
    sys.path.insert(0, harness)
    import pytest  # noqa: F401  (the cost every cold run pays, paid once here)
    import pytest_runner  # noqa: F401

    for name in cfg.get("preload", []):
        try:
            __import__(name)
        except Exception:  # the run reports it when pytest loads the plugin itself
            pass
    control_in = os.fdopen(os.dup(0), "rb")
    control_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # only the dup'd ends talk to the caller
        os.dup2(null, fd)
    os.close(null)
    for line in control_in:
        req = json.loads(line)
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            control_in.close()
            control_out.close()
            _child(req, harness)
        status, timed_out = _wait(pid, float(req["timeout"]))
        code = None if status is None else os.waitstatus_to_exitcode(status)
        answer = {"id": req["id"], "rc": code, "timed_out": timed_out}
        answer["wall_s"] = round(time.monotonic() - t0, 4)
        control_out.write(json.dumps(answer).encode() + b"\n")
        control_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
