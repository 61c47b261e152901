"""The fast paths keep every limit and isolation property of the slow ones.

Launchers: util-linux ``setpriv``/``prlimit`` (the default where installed) and the Python
wrapper (the fallback); modes: a bubblewrap sandbox per command and a persistent one.
Each test reads what the kernel applied (``/proc/self/limits``, ``/proc/self/status``)
or does the forbidden thing, so a launcher that silently skipped a step would fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from verigap.sandbox import Limits, _limits, make_sandbox, materialize, self_check
from verigap.sandbox._bwrap import _SYSTEM_DIRS

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
LIMITS = dict(memory_mb=300, processes=40, file_size_mb=3, cpu_s=7)


@pytest.fixture(params=["native", "python-wrapper"])
def launcher(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test with the setpriv/prlimit launcher, then with the Python wrapper."""
    if request.param == "native":
        if _limits.native_launcher(_SYSTEM_DIRS) is None:
            pytest.skip("util-linux prlimit/setpriv not installed")
        yield request.param
    else:
        with mock.patch.object(_limits, "native_launcher", lambda visible=None: None):
            yield request.param


def _limits_of(text: str) -> dict[str, tuple[str, str]]:
    """``/proc/self/limits`` as {name: (soft, hard)}."""
    rows = {}
    for line in text.splitlines()[1:]:
        name = line[:26].strip()
        soft, hard = line[26:].split()[:2]
        rows[name] = (soft, hard)
    return rows


def _status(text: str) -> dict[str, str]:
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def test_native_argv_sets_every_rlimit_and_drops_the_uid() -> None:
    if _limits.native_launcher() is None:
        pytest.skip("util-linux prlimit/setpriv not installed")
    argv = _limits.native_argv(["echo", "-n"], Limits(**LIMITS), uid=2_500_000)
    assert argv is not None and argv[-3:] == ["--", "echo", "-n"]
    assert argv[0].endswith("setpriv") and "--reuid=2500000" in argv and "--clear-groups" in argv
    assert f"--as={300 << 20}:{300 << 20}" in argv and "--nproc=40:40" in argv
    assert f"--fsize={3 << 20}:{3 << 20}" in argv and "--core=0:0" in argv
    assert "--cpu=7:8" in argv and "--default-signal" in argv
    # env --default-signal only where a child would start with a signal ignored
    assert "--default-signal" not in _limits.native_argv(["true"], Limits(), reset_signals=False)


_RESET_PROBE = """
import signal, sys
from verigap.sandbox import _limits
print(int(_limits.inherited_ignored_signals()))
signal.signal(signal.SIGQUIT, signal.SIG_IGN)
print(int(_limits.inherited_ignored_signals()))
argv = _limits.launcher_argv("py", ["true"], _limits.Limits(), {}, visible=None)
print(int(_limits.native_launcher() is None or "--default-signal" in argv))
"""


def _all_signals_default() -> None:  # in the child, before exec
    for s in signal.valid_signals():
        if s not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(s, signal.SIG_DFL)
            except (OSError, ValueError):
                pass


def test_the_signal_reset_is_skipped_only_when_nothing_would_be_inherited_ignored(make_box) -> None:
    # a fresh interpreter with every signal at its default: this test process may carry
    # signals ignored by whatever an earlier test loaded (C code can do it behind Python's
    # back), and that is exactly what the function is meant to report
    r = subprocess.run(
        [sys.executable, "-c", _RESET_PROBE],
        capture_output=True,
        text=True,
        preexec_fn=_all_signals_default,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    nothing_ignored, quit_ignored, env_in_chain = r.stdout.split()
    assert nothing_ignored == "0"  # Python's own SIGPIPE/SIGXFSZ do not count
    assert quit_ignored == "1" and env_in_chain == "1"
    if shutil.which("bwrap") is not None:  # the shorter chain still starts from defaults
        saved = {
            s: signal.signal(s, signal.SIG_DFL)
            for s in signal.valid_signals()
            if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ)
            and _kernel_ignores(s)
        }
        try:
            if not _limits.inherited_ignored_signals():
                r2 = make_box("bwrap").exec("grep SigIgn /proc/self/status")
                assert r2.ok and int(r2.stdout.split()[1], 16) & 0x7FFFFFFF == 0, r2.stdout
        finally:
            for s, h in saved.items():  # None: set outside Python, and it was ignored
                signal.signal(s, signal.SIG_IGN if h is None else h)


def _kernel_ignores(sig: int) -> bool:
    with open("/proc/self/status") as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))
    return bool(mask & (1 << (sig - 1)))


def test_native_launcher_is_only_used_where_visible() -> None:
    # not visible inside the sandbox -> no native launcher, the wrapper is used instead
    assert _limits.native_launcher(("/nowhere",)) is None
    wrapped = _limits.launcher_argv("py", ["true"], Limits(), {}, visible=("/nowhere",))
    assert wrapped[:4] == ["py", "-I", "-S", "-c"]


@pytest.mark.parametrize("kind", ["bwrap", "bwrap-persistent", "unsafe"])
def test_the_kernel_applies_each_limit(make_box, kind: str, launcher: str) -> None:
    if kind.startswith("bwrap") and shutil.which("bwrap") is None:
        pytest.skip("needs bubblewrap")
    # a host started in the background ignores SIGINT; the command must not inherit that
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        box = make_box(kind, **LIMITS)
        r = box.exec("cat /proc/self/limits; echo ===; cat /proc/self/status")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert r.ok, r.stderr
    lim_text, status_text = r.stdout.split("===\n")
    lim, status = _limits_of(lim_text), _status(status_text)
    assert lim["Max address space"] == (str(300 << 20),) * 2
    assert lim["Max processes"] == ("40", "40")
    assert lim["Max file size"] == (str(3 << 20),) * 2
    assert lim["Max core file size"] == ("0", "0")
    assert lim["Max cpu time"] == ("7", "8")
    # signals 1-31 (SIGINT, SIGPIPE, SIGXFSZ...) back to default before exec; glibc's reserved
    # real-time signals (32, 33) cannot be reset from user code and are not checked
    assert int(status["SigIgn"], 16) & 0x7FFFFFFF == 0
    if kind.startswith("bwrap"):
        assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
        uid = status["Uid"].split()
        assert len(set(uid)) == 1 and uid[0] != "0"
        assert box.exec("id -G").stdout.split() == [uid[0]]  # no supplementary groups


@needs_bwrap
def test_persistent_sandbox_passes_the_whole_self_check() -> None:
    rows = self_check("bwrap", persistent=True)
    failed = [(c.name, c.detail) for c in rows if not c.passed]
    assert failed == [] and len(rows) == 9


@needs_bwrap
def test_persistent_commands_are_self_contained(make_box) -> None:
    box = make_box("bwrap-persistent")
    tag = uuid.uuid4().hex
    r = box.exec(f"echo x > /tmp/{tag}; sleep 300 & echo $!; ls /proc/self/fd")
    assert r.ok, r.stderr
    pid, *fds = r.stdout.split()
    # the command holds stdin/out/err and ls's directory fd: never the server's socket
    assert set(fds) <= {"0", "1", "2", "3"}
    r = box.exec(f"ls /tmp; kill -0 {pid} 2>/dev/null && echo alive || echo gone")
    assert r.stdout == "gone\n"  # /tmp emptied, the background sleep killed
    if box.uid is not None:  # root: nothing runs under the sandbox uid between commands
        left = [p for p in os.listdir("/proc") if p.isdigit() and _owner(p) == box.uid]
        assert left == []


@needs_bwrap
def test_persistent_sandbox_restarts_after_a_timeout_and_after_close(make_box) -> None:
    box = make_box("bwrap-persistent")
    first = box.exec("echo $PPID").stdout
    r = box.exec("sleep 300 & sleep 300", timeout=0.5)
    assert r.timed_out and r.returncode is None
    assert box.exec("echo ok").stdout == "ok\n"  # a fresh sandbox took over
    box.close()
    assert box.exec("echo again").stdout == "again\n"
    assert first.strip().isdigit()


@needs_bwrap
def test_persistent_sandbox_keeps_the_network_off_and_the_host_read_only(
    src_tree: Path, tmp_path: Path
) -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    box = make_sandbox(materialize(src_tree, tmp_path / "ws"), persistent=True)
    try:
        code = (
            "import socket\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')\n"
            "except OSError as e:\n    print('REFUSED')\n"
        )
        assert box.exec(["python", "-c", code]).stdout == "REFUSED\n"
        outside = tmp_path / f"outside-{uuid.uuid4().hex}"
        r = box.exec(f"echo x > {outside}")
        assert r.returncode != 0 and not outside.exists()
        assert box.exec("echo y > inside.txt").ok and (box.root / "inside.txt").exists()
    finally:
        box.close()
        srv.close()


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except FileNotFoundError:
        return None


def test_materialize_keeps_modes_times_links_but_never_links_to_the_source(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "run.sh").write_text("#!/bin/sh\n")
    (src / "d" / "run.sh").chmod(0o755)
    os.utime(src / "d" / "run.sh", ns=(1_600_000_000_000_000_000,) * 2)
    os.link(src / "d" / "run.sh", src / "twin.sh")
    (src / "ln").symlink_to("d/run.sh")
    ws = materialize(src, tmp_path / "ws")
    copy = ws / "d" / "run.sh"
    assert stat.S_IMODE(copy.stat().st_mode) == 0o755
    assert copy.stat().st_mtime_ns == 1_600_000_000_000_000_000
    assert (ws / "ln").is_symlink() and os.readlink(ws / "ln") == "d/run.sh"
    assert copy.stat().st_ino != (src / "d" / "run.sh").stat().st_ino
    with open(copy, "r+") as fh:  # an in-place write stays in the workspace
        fh.write("#!/bin/bash")
    assert (src / "d" / "run.sh").read_text() == "#!/bin/sh\n"


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="the workspace is handed over only as root")
def test_make_sandbox_hands_over_the_tree_without_following_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host file")
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "f.py").write_text("x = 1\n")
    (src / "a" / "out").symlink_to(outside)
    box = make_sandbox(materialize(src, tmp_path / "ws"))
    for p in [box.root, box.root / "a", box.root / "a" / "b", box.root / "a" / "b" / "f.py"]:
        assert p.stat().st_uid == box.uid, p
    assert os.lstat(box.root / "a" / "out").st_uid == box.uid
    assert outside.stat().st_uid == 0  # the link's target was not chowned
