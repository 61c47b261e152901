"""What only the bubblewrap backend guarantees: no network, no host files, no escape."""

import os
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from verigap.errors import ConfigError, SandboxUnavailable
from verigap.sandbox import INSTALL_HINT, Limits, _bwrap, make_sandbox, materialize

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed"
)

CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2)\n"
    "    print('CONNECTED', s.recv(10).decode())\n"
    "except OSError as e:\n"
    "    print('REFUSED', type(e).__name__)\n"
)


@pytest.fixture
def loopback_port() -> Iterator[int]:
    """A TCP server on the host's 127.0.0.1 that greets every client with 'hi'."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.sendall(b"hi")
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    srv.close()


@needs_bwrap
def test_loopback_server_outside_is_unreachable_inside(
    make_box, bwrap_kind: str, loopback_port: int
) -> None:
    with socket.create_connection(("127.0.0.1", loopback_port), timeout=2) as s:
        assert s.recv(10) == b"hi"  # control: the server works from the host
    box = make_box(bwrap_kind)
    box.write_file("connect.py", CONNECT)
    r = box.exec(["python", "connect.py", str(loopback_port)])
    assert r.stdout.startswith("REFUSED"), r.stdout + r.stderr


@needs_bwrap
def test_network_true_shares_the_host_network(
    src_tree: Path, tmp_path: Path, loopback_port: int
) -> None:
    box = make_sandbox(materialize(src_tree, tmp_path / "ws"), network=True)
    box.write_file("connect.py", CONNECT)
    r = box.exec(["python", "connect.py", str(loopback_port)])
    assert r.stdout == "CONNECTED hi\n", r.stderr


@needs_bwrap
def test_writes_outside_the_workspace_fail_and_tmp_is_private(make_box, bwrap_kind: str) -> None:
    box = make_box(bwrap_kind)
    tag = uuid.uuid4().hex
    # /, /run and /dev (with /dev/shm) are bubblewrap's own tmpfs: read-only too, or a file
    # left there would outlive the command in a persistent sandbox (without root, the
    # command's uid owns them)
    for target in [
        "/usr/x",
        "/etc/x",
        "/x",
        "/run/x",
        "/dev/x",
        "/dev/shm/x",
        f"/root/{tag}",
        str(box.root.parent / tag),
    ]:
        r = box.exec(["/bin/sh", "-c", f"echo pwned > {target}"])
        assert r.returncode != 0, target
        assert not Path(target).exists()
    r = box.exec(f"echo private > /tmp/{tag} && cat /tmp/{tag}")
    assert r.stdout == "private\n"
    assert not Path(f"/tmp/{tag}").exists()


@needs_bwrap
def test_unmounted_host_files_cannot_be_read(make_box, bwrap_kind: str) -> None:
    tag = uuid.uuid4().hex
    here = Path(__file__).resolve().parent / f".secret-{tag}"
    home = Path.home() / f".verigap-secret-{tag}"
    here.write_text("hidden test answer")
    home.write_text("api key")
    try:
        box = make_box(bwrap_kind)
        for secret in (here, home, Path(__file__).resolve()):
            r = box.exec(["cat", str(secret)])
            assert r.returncode != 0 and r.stdout == "", secret
            assert "No such file" in r.stderr or "Permission denied" in r.stderr
        listing = box.exec("ls /").stdout.split()
        assert "work" not in listing and "home" not in listing and "var" not in listing
    finally:
        here.unlink()
        home.unlink()


@needs_bwrap
def test_pid_namespace_and_unprivileged_user(make_box, bwrap_kind: str) -> None:
    box = make_box(bwrap_kind)
    r = box.exec("echo $$; id -u; ls /proc | grep -c '^[0-9]'")
    pid, uid, nprocs = r.stdout.split()
    assert int(pid) < 10  # numbered inside a fresh PID namespace
    assert int(uid) != 0
    assert int(nprocs) < 10  # the host's processes are invisible


@needs_bwrap
def test_fork_bomb_is_contained_and_the_host_survives(make_box, bwrap_kind: str) -> None:
    box = make_box(bwrap_kind, processes=32, wall_s=5)
    r = box.exec("bomb() { bomb | bomb & }; bomb; sleep 2")
    assert "process limit of 32" in (r.reason or ""), (r.reason, r.stderr[:300])
    assert subprocess.run(["true"]).returncode == 0  # the test process can still fork
    if getattr(box, "uid", None) is not None:  # root: nothing may be left under the sandbox uid
        left = [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == box.uid]
        assert left == []


def _uid_of(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except FileNotFoundError:
        return None


@needs_bwrap
def test_ro_binds_are_readable_but_not_writable(src_tree: Path, tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "helper.txt").write_text("shared")
    box = make_sandbox(materialize(src_tree, tmp_path / "ws"), ro_binds=[tools])
    assert box.exec(["cat", str(tools / "helper.txt")]).stdout == "shared"
    assert box.exec(["/bin/sh", "-c", f"echo x > {tools}/helper.txt"]).returncode != 0
    assert (tools / "helper.txt").read_text() == "shared"
    with pytest.raises(ConfigError, match="does not exist"):
        make_sandbox(box.root, ro_binds=[tmp_path / "missing"])
    with pytest.raises(ConfigError, match="overlaps the workspace"):
        make_sandbox(box.root, ro_binds=[tmp_path])


def test_missing_bwrap_is_unavailable_not_a_failed_command(
    src_tree: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(_bwrap.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        make_sandbox(materialize(src_tree, tmp_path / "ws"))
    assert "backend='unsafe'" in INSTALL_HINT


def test_a_bwrap_that_cannot_start_is_unavailable(
    src_tree: Path, tmp_path: Path, monkeypatch
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(_bwrap, "_bwrap_path", lambda: str(fake))
    with pytest.raises(SandboxUnavailable, match="could not start a sandbox.*No permissions"):
        make_sandbox(materialize(src_tree, tmp_path / "ws"))


def test_unknown_backend_and_missing_workspace_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown backend"):
        make_sandbox(tmp_path, backend="docker")
    with pytest.raises(ConfigError, match="not a directory"):
        make_sandbox(tmp_path / "nope", limits=Limits())


def test_unsafe_backend_warns_loudly(tmp_path: Path) -> None:
    from verigap.sandbox import UnsafeSandboxWarning

    with pytest.warns(UnsafeSandboxWarning, match="UNSANDBOXED"):
        make_sandbox(tmp_path, backend="unsafe")


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="identifies sandbox processes by their uid (root)")
def test_nothing_runs_once_a_timed_out_exec_returns(make_box, bwrap_kind: str) -> None:
    box = make_box(bwrap_kind)
    for _ in range(3):
        r = box.exec("for i in 1 2 3 4; do (while :; do :; done) & done; sleep 60", timeout=0.5)
        assert r.timed_out
        # Checked at once, without a grace period: the namespace was reaped before return.
        left = [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == box.uid]
        assert left == []


@needs_bwrap
@pytest.mark.parametrize("persistent", [False, True])
def test_pid1_cmdline_shows_no_host_mount_paths(tmp_path, persistent: bool):
    """The sandbox's pid 1 is a copy of bwrap: its command line must not carry the mount
    options, so the host paths of the workspace and of read-only binds stay hidden."""
    ws = tmp_path / "ws-host-marker"
    ws.mkdir()
    ws.chmod(0o755)
    ro = tmp_path / "ro-host-marker"
    ro.mkdir()
    box = make_sandbox(ws, backend="bwrap", ro_binds=[ro], persistent=persistent)
    r = box.exec(["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline; echo; pwd"])
    box.close()
    assert r.returncode == 0, r.stderr
    assert "bwrap" in r.stdout  # the control: we did read pid 1's command line
    assert "ws-host-marker" not in r.stdout and str(tmp_path) not in r.stdout
    assert "--ro-bind" not in r.stdout
