"""A warm sandboxed interpreter per validation worker: pytest imported once, a fork per run.

Validating a mutation runs only the tests that reach it, often well under a second of pytest,
and a cold run pays a bubblewrap start, an interpreter start and pytest's import on top
(benchmarks/repos_generality.py records where the time goes). :class:`WarmRunner` starts one
sandbox per worker with the same mounts, namespaces (network unshared) and limits as a cold
run, over a private copy of the pristine tree mounted read-only at the same path
(``/verigap/tree``). Per mutation it writes the mutated files into that copy, asks the fork
server inside (``harness/warm_server.py``) for one run of the given tests, and restores the
files. The child runs the very ``pytest_runner`` a cold run does, so outcomes, the report and
its nonce are the same; ``tests/repos/test_warm_runner.py`` compares the verdicts with the
cold path's.

What differs from a cold run: pytest and the declared plugins are imported before the tree is
read (they hold no project code), and processes a test leaves running that escape its process
group live until the worker's sandbox ends, not the run's.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import tempfile
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from verigap.errors import SandboxUnavailable
from verigap.repos import execution
from verigap.repos.harness import WARM
from verigap.repos.prepare import Prepared
from verigap.repos.pytest_run import (
    PY_FLAGS,
    PytestRun,
    _mounts,
    _root,
    env_plugins,
    harness_dir,
    pytest_args,
)
from verigap.sandbox import Limits
from verigap.sandbox._bwrap import BwrapSandbox

#: Seconds the fork server may take to answer beyond the run's own timeout before it is
#: presumed stuck, stopped and started again.
GRACE_S = 30.0

#: every runner not yet closed, so a signal can stop them all (:func:`stop_all`)
_LIVE: weakref.WeakSet[WarmRunner] = weakref.WeakSet()
#: set by :func:`stop_all`: no runner starts or restarts a sandbox after it (the process ends)
_STOPPING = threading.Event()


class WarmRunner:
    """One fork server over a private copy of ``p``'s tree (bubblewrap only)."""

    def __init__(self, p: Prepared, *, memory_mb: int = 4096) -> None:
        if _STOPPING.is_set():
            raise SandboxUnavailable("the process is stopping: no new warm runner")
        self.p = p
        self.memory_mb = memory_mb
        self.proc = None
        self.box: BwrapSandbox | None = None
        self.runs = 0
        self._lock = threading.Lock()
        self.dir = Path(tempfile.mkdtemp(prefix="vg-warm-"))
        _LIVE.add(self)  # from the moment its tree exists, stop_all deletes it
        self.tree = self.dir / "tree"
        shutil.copytree(p.tree, self.tree, symlinks=True)

    def _start(self) -> None:
        scratch = self.dir / f"scratch{self.runs}"
        scratch.mkdir()
        self.mounts = _mounts(self.tree, Path(self.p.env_prefix), "bwrap")
        hdir = harness_dir()
        (scratch / "server.json").write_text(
            json.dumps(
                {
                    "harness": self.mounts.inside(hdir),
                    "preload": env_plugins(Path(self.p.env_prefix)),
                }
            )
        )
        self.scratch = scratch
        self.box = BwrapSandbox(
            scratch,
            Limits(wall_s=3600, memory_mb=self.memory_mb, output_bytes=200_000),
            ro_mounts=self.mounts.binds,
            network=False,
        )
        root = _root(self.tree, self.p.import_root, self.mounts.inside)
        self.proc = self.box.start(
            [
                self.mounts.inside(self.p.python),
                *PY_FLAGS,
                self.mounts.inside(hdir / WARM.name),
                "server.json",
            ],
            {**execution.CLEAN_ENV, "PYTHONPATH": root},
        )

    def _stop(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            self.proc.kill()
            self.proc.wait()
            self.proc.stdout.close()
            self.proc = None
        if self.box is not None:
            self.box.close()
            self.box = None

    def close(self) -> None:
        """Stop the server and delete the private tree."""
        with self._lock:
            self._stop()
            shutil.rmtree(self.dir, ignore_errors=True)
        _LIVE.discard(self)

    def kill(self) -> None:
        """Kill the sandbox and delete the private tree now, without waiting for a run in
        flight (it then ends as a timed-out run): for a process that is being stopped. The
        whole process group goes: bubblewrap, and with its PID namespace every process in it."""
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # started in a session of its own
        # a run in flight now sees the server gone, restores its files and lets go of the
        # lock: the tree is deleted after that, so nothing writes into it again
        locked = self._lock.acquire(timeout=GRACE_S)
        try:
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.wait(timeout=10)
            shutil.rmtree(self.dir, ignore_errors=True)
        finally:
            if locked:
                self._lock.release()
        _LIVE.discard(self)

    def run(self, files: Mapping[str, str], tests: Sequence[str], timeout: float) -> PytestRun:
        """The tests ``tests`` (node ids or files) on the tree with ``files`` ({path: text})
        written over it; the tree is pristine again when this returns."""
        with self._lock:
            saved = {f: (self.tree / f).read_bytes() for f in files if (self.tree / f).exists()}
            try:
                for f, text in files.items():
                    (self.tree / f).write_text(text)
                return self._run(tests, timeout)
            finally:
                for f in files:
                    if f in saved:
                        (self.tree / f).write_bytes(saved[f])
                    else:
                        (self.tree / f).unlink(missing_ok=True)

    def _run(self, tests: Sequence[str], timeout: float) -> PytestRun:
        if self.proc is None or self.proc.poll() is not None:
            self._stop()
            if _STOPPING.is_set():
                raise SandboxUnavailable("the process is stopping: no warm run")
            self._start()
        self.runs += 1
        n = self.runs
        nonce = secrets.token_hex(16)
        m = self.mounts
        cfg = {
            "nonce": nonce,
            "import_root": _root(self.tree, self.p.import_root, m.inside),
            "out": f"/workspace/report{n}.json",
            "cwd": m.inside(self.tree),
            "pytest_args": pytest_args(
                self.tree, tests, self.p.config_file, Path(self.p.env_prefix), mounts=m
            ),
        }
        log = f"/workspace/out{n}.txt"
        req = {"id": n, "cfg": cfg, "log": log, "timeout": timeout}
        answer = None
        try:
            self.proc.stdin.write(json.dumps(req).encode() + b"\n")
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout + GRACE_S)
            if ready:
                line = self.proc.stdout.readline()
                answer = json.loads(line) if line else None
        except (OSError, ValueError):
            answer = None
        if answer is None or answer.get("id") != n:  # stuck or gone: start afresh next time
            self._stop()
            answer = {"rc": None, "timed_out": True, "wall_s": timeout}
        report_file = self.scratch / f"report{n}.json"
        out_file = self.scratch / f"out{n}.txt"
        report: dict = {}
        try:
            report = json.loads(report_file.read_text())
        except (OSError, json.JSONDecodeError):
            report = {}
        try:
            output = out_file.read_bytes()[-200_000:].decode("utf-8", "replace")
        except OSError:
            output = ""
        for f in (report_file, out_file, Path(str(report_file) + ".tmp")):
            f.unlink(missing_ok=True)
        forged = bool(report) and report.get("nonce") != nonce
        if forged:
            report = {}
        return PytestRun(
            forged=forged,
            exit_code=None if answer["timed_out"] else answer["rc"],
            outcomes=dict(report.get("outcomes", {})),
            report_found=bool(report),
            wall_s=float(answer["wall_s"]),
            timed_out=bool(answer["timed_out"]),
            stdout=output,
            stderr="",
            extra={k: v for k, v in report.items() if k not in ("outcomes", "nonce")},
        )


class WarmRunners:
    """A :class:`WarmRunner` per thread, made on first use; :meth:`close` stops them all.
    None where warm runs cannot be had (another backend than bubblewrap, or it cannot
    start): the caller runs cold."""

    def __init__(self, p: Prepared, backend: str | None) -> None:
        self.p = p
        self.enabled = (backend or execution.default_backend()) == "bwrap" and os.environ.get(
            "VERIGAP_WARM_VALIDATION", "1"
        ) != "0"
        self.local = threading.local()
        self.all: list[WarmRunner] = []
        self.lock = threading.Lock()

    def get(self) -> WarmRunner | None:
        if not self.enabled:
            return None
        r = getattr(self.local, "runner", None)
        if r is None:
            try:
                r = WarmRunner(self.p)
            except (SandboxUnavailable, OSError):
                self.enabled = False
                return None
            self.local.runner = r
            with self.lock:
                self.all.append(r)
        return r

    def close(self) -> None:
        with self.lock:
            runners, self.all = self.all, []
        for r in runners:
            r.close()


def stop_all() -> int:
    """Kill every live warm runner's sandbox and delete its tree; how many there were. For a
    process that is ending: no runner starts a sandbox after this."""
    _STOPPING.set()
    runners = list(_LIVE)
    for r in runners:
        r.kill()
    return len(runners)


@contextlib.contextmanager
def stopped_cleanly() -> Iterator[None]:
    """While inside, SIGTERM and SIGINT first kill every warm runner (:func:`stop_all`: no
    sandboxed child is left running, no ``vg-warm-*`` tree left behind), then end the process
    as the signal's previous handling would. Only the main thread can install handlers;
    elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGTERM, signal.SIGINT)
    old = {s: signal.getsignal(s) for s in signals}

    def handler(signum: int, frame) -> None:
        stop_all()
        prev = old[signum]
        if callable(prev):
            prev(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL if prev is None else prev)
        os.kill(os.getpid(), signum)

    for s in signals:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


__all__ = ["WarmRunner", "WarmRunners", "stop_all", "stopped_cleanly"]
