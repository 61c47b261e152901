"""A self-check of the sandbox on this host: does each promise hold here, right now?

Environment builders run it (``verigap sandbox check``) before trusting a machine with
agent episodes; the tests run it too. Each check does the thing it guards against and
looks at what happened, so a kernel or bubblewrap that quietly ignores a flag shows up.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from verigap.sandbox._base import Sandbox
from verigap.sandbox._limits import Limits

_CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2).close()\n"
    "    print('CONNECTED')\n"
    "except OSError as e:\n"
    "    print('REFUSED', type(e).__name__)\n"
)


@dataclass(frozen=True)
class Check:
    """One promise, whether it held, and what was seen."""

    name: str
    passed: bool
    detail: str


def _loopback_server() -> tuple[socket.socket, threading.Thread]:
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)

    def serve() -> None:
        while srv.fileno() != -1:
            try:
                srv.accept()[0].close()
            except OSError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv, t


def self_check(backend: str = "bwrap", *, persistent: bool = False) -> list[Check]:
    """Run every check against ``backend`` in a throwaway workspace.

    ``persistent``: check bubblewrap's persistent mode (one sandbox for all commands).
    Raises SandboxUnavailable when the backend cannot run at all.
    """
    from verigap.sandbox import make_sandbox

    made: list[Sandbox] = []

    def box_with(ws: Path, **limits: object) -> Sandbox:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            box = make_sandbox(
                ws,
                backend=backend,
                limits=Limits(**limits),
                persistent=persistent,  # type: ignore[arg-type]
            )
        made.append(box)
        return box

    try:
        return _checks(backend, box_with)
    finally:
        for box in made:
            box.close()


def _checks(backend: str, box_with: Callable[..., Sandbox]) -> list[Check]:
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="verigap-check-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        secret = Path(tmp) / f"secret-{uuid.uuid4().hex}"
        secret.write_text("hidden")
        box = box_with(ws, wall_s=10)

        srv, thread = _loopback_server()
        try:
            box.write_file("connect.py", _CONNECT)
            r = box.exec(["python", "connect.py", str(srv.getsockname()[1])])
        finally:
            srv.close()
            thread.join()
        checks.append(
            Check(
                "network: host loopback unreachable",
                r.stdout.startswith("REFUSED"),
                r.stdout.strip(),
            )
        )
        r = box.exec(["cat", str(secret)])
        checks.append(
            Check(
                "files outside the workspace invisible",
                r.returncode != 0 and "hidden" not in r.stdout,
                (r.stderr or r.stdout).strip()[:120],
            )
        )
        # A path next to the workspace: harmless to create if the backend does not isolate.
        outside = Path(tmp) / f"outside-{uuid.uuid4().hex}"
        r = box.exec(["/bin/sh", "-c", f"echo x > {outside}"])
        checks.append(
            Check(
                "writes outside the workspace fail",
                r.returncode != 0 and not outside.exists(),
                (r.stderr or "written").strip()[:120],
            )
        )
        r = box.exec(["id", "-u"])
        checks.append(
            Check(
                "commands run unprivileged",
                r.stdout.strip() not in ("", "0"),
                f"uid {r.stdout.strip()}",
            )
        )
        r = box.exec("echo hi", env={"VERIGAP_CHECK": "1"})
        checks.append(
            Check("workspace commands run", r.ok and r.stdout == "hi\n", f"exit {r.returncode}")
        )

        r = box.exec("sleep 30", timeout=0.5)
        checks.append(
            Check("wall-clock limit kills", r.timed_out and r.wall_s < 5, r.reason or "not killed")
        )
        if backend != "bwrap" and os.geteuid() == 0:
            # The kernel does not apply the process limit to root: a real fork bomb.
            checks.append(
                Check("process limit holds a fork bomb", False, "not run: root outside bwrap")
            )
        else:
            r = box_with(ws, processes=16, wall_s=5).exec("bomb() { bomb | bomb & }; bomb; sleep 1")
            checks.append(
                Check(
                    "process limit holds a fork bomb",
                    "process limit" in (r.reason or ""),
                    r.reason or "no limit seen",
                )
            )
        r = box_with(ws, memory_mb=128).exec(["python", "-c", "bytearray(1 << 30)"])
        checks.append(
            Check(
                "memory limit refuses 1 GB",
                not r.ok and "memory" in (r.reason or ""),
                r.reason or "allocated",
            )
        )
        r = box_with(ws, output_bytes=1000).exec(["python", "-c", "print('x' * 1_000_000)"])
        checks.append(
            Check(
                "output capped with a marker",
                r.truncated and "omitted" in r.stdout and len(r.stdout) < 1200,
                f"{len(r.stdout)} characters kept",
            )
        )
    return checks
