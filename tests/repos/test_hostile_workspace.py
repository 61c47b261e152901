"""Hostile workspaces: every kind of inode or tree shape an agent can leave behind is read by
the grader only through ``snapshot.safe_copy``, which never blocks and stays within bounds.

Each case runs the copy in a worker thread joined with a generous guard: a copy that blocked
(a FIFO opened for reading, a device read to its end) would trip the guard and fail the test
instead of hanging the suite.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

from verigap.repos import changes as ch
from verigap.repos.snapshot import SnapshotLimits, safe_copy

GUARD_S = 60.0


def _bounded(src: Path, dest: Path, limits: SnapshotLimits = SnapshotLimits()):
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(snap=safe_copy(src, dest, limits)), daemon=True)
    t.start()
    t.join(GUARD_S)
    assert not t.is_alive(), "safe_copy blocked"
    return out["snap"]


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    return ws


def test_fifo_is_left_out_not_opened(tmp_path):
    ws = _ws(tmp_path)
    os.mkfifo(ws / "pkg" / "pipe.py")
    snap = _bounded(ws, tmp_path / "copy")
    assert snap.skipped == {"pkg/pipe.py": "fifo"}
    assert (tmp_path / "copy" / "pkg" / "mod.py").read_text().startswith("def f")
    assert not (tmp_path / "copy" / "pkg" / "pipe.py").exists()


def test_socket_is_left_out(tmp_path):
    ws = _ws(tmp_path)
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(ws / "sock"))
        snap = _bounded(ws, tmp_path / "copy")
    finally:
        s.close()
    assert snap.skipped == {"sock": "socket"}


def test_device_node_and_links_to_devices(tmp_path):
    ws = _ws(tmp_path)
    os.symlink("/dev/zero", ws / "pkg" / "zero.py")  # followed, this would never end
    made = True
    try:
        os.mknod(ws / "null", 0o600 | 0o020000, os.makedev(1, 3))  # a char device, as root
    except (PermissionError, OSError):
        made = False
    snap = _bounded(ws, tmp_path / "copy")
    assert os.readlink(tmp_path / "copy" / "pkg" / "zero.py") == "/dev/zero"  # kept as a link
    if made:
        assert snap.skipped["null"] == "char_device"
    # the diff drops the link as a protected path and never reads through it
    cs = ch.diff_trees(_ws(tmp_path / "base"), tmp_path / "copy", ["pkg"])
    assert cs.dropped.get("symlink") == ["pkg/zero.py"]


def test_huge_file_is_skipped_without_reading_it(tmp_path):
    ws = _ws(tmp_path)
    with open(ws / "pkg" / "huge.py", "wb") as f:
        f.truncate(64 * 1024**3)  # sparse: 64 GiB by size, nothing on disk
    snap = _bounded(ws, tmp_path / "copy")
    assert snap.skipped["pkg/huge.py"].startswith("larger than")
    assert snap.bytes < 1024


def test_total_size_limit_stops_the_copy_and_says_so(tmp_path):
    ws = _ws(tmp_path)
    for i in range(5):
        (ws / f"blob{i}.bin").write_bytes(b"x" * 1000)
    snap = _bounded(ws, tmp_path / "copy", SnapshotLimits(max_total_bytes=2500))
    assert snap.truncated and snap.bytes <= 2500


def test_deep_tree_is_cut_at_the_depth_limit(tmp_path):
    ws = _ws(tmp_path)
    d = ws
    for _ in range(80):
        d = d / "d"
    d.mkdir(parents=True)
    (d / "leaf.py").write_text("x = 1\n")
    snap = _bounded(ws, tmp_path / "copy", SnapshotLimits(max_depth=20))
    assert any(why.startswith("deeper than 20") for why in snap.skipped.values())
    assert (tmp_path / "copy" / "pkg" / "mod.py").is_file()


def test_entry_limit(tmp_path):
    ws = _ws(tmp_path)
    for i in range(50):
        (ws / f"f{i}.txt").write_text("x")
    snap = _bounded(ws, tmp_path / "copy", SnapshotLimits(max_entries=20))
    assert snap.truncated and snap.files <= 20


def test_symlink_loop_is_copied_as_links(tmp_path):
    ws = _ws(tmp_path)
    os.symlink("b", ws / "a")
    os.symlink("a", ws / "b")
    os.symlink(".", ws / "pkg" / "self")
    snap = _bounded(ws, tmp_path / "copy")
    assert snap.skipped == {}
    assert os.readlink(tmp_path / "copy" / "a") == "b"
    assert os.readlink(tmp_path / "copy" / "pkg" / "self") == "."


def test_unreadable_file_and_directory(tmp_path):
    ws = _ws(tmp_path)
    (ws / "secret.py").write_text("x = 1\n")
    (ws / "secret.py").chmod(0)
    (ws / "closed").mkdir()
    (ws / "closed" / "inner.py").write_text("y = 2\n")
    (ws / "closed").chmod(0)
    try:
        snap = _bounded(ws, tmp_path / "copy")
    finally:
        (ws / "closed").chmod(0o755)
        (ws / "secret.py").chmod(0o644)
    if os.geteuid() != 0:  # root reads through permissions; both outcomes are bounded
        assert snap.skipped["secret.py"] == "unreadable"
        assert snap.skipped["closed"].startswith("unlistable")
    assert (tmp_path / "copy" / "pkg" / "mod.py").is_file()


def test_non_utf8_name_is_left_out(tmp_path):
    ws = _ws(tmp_path)
    fd = os.open(os.path.join(os.fsencode(ws / "pkg"), b"bad\xff.py"), os.O_CREAT | os.O_WRONLY)
    os.close(fd)
    snap = _bounded(ws, tmp_path / "copy")
    assert list(snap.skipped.values()) == ["name is not UTF-8"]
    assert sorted(os.listdir(tmp_path / "copy" / "pkg")) == ["mod.py"]


def test_v2_grades_a_hostile_workspace(fixture_tasks, tmp_path, backend):
    """End to end: the oracle's fix next to a FIFO, a 64 GiB sparse file and a symlink loop in
    the package is graded correct (the links are dropped as such), and the FIFO and the big
    file are listed as skipped."""
    from verigap.repos.graders import v2
    from verigap.repos.tasks import materialize_workspace

    _, tasks, p = fixture_tasks
    task = tasks[0]
    ws = materialize_workspace(p, task, tmp_path / "ws")
    for s in task.sites:
        (ws / s.file).write_text((p.tree / s.file).read_text())
    pkg = Path(task.sites[0].file).parent
    os.mkfifo(ws / pkg / "pipe.py")
    with open(ws / pkg / "huge.py", "wb") as f:
        f.truncate(64 * 1024**3)
    os.symlink("loop_b.py", ws / pkg / "loop_a.py")  # a loop the guards must not chase
    os.symlink("loop_a.py", ws / pkg / "loop_b.py")
    out: dict = {}
    t = threading.Thread(
        target=lambda: out.update(t=v2.evaluate(task, ws, prepared=p, backend=backend)), daemon=True
    )
    t.start()
    t.join(600)
    assert not t.is_alive(), "v2 blocked on a hostile workspace"
    truth = out["t"]
    assert truth.correct, truth.detail
    assert "symlink" in truth.hacks
    assert truth.detail["workspace_skipped"] == {
        str(pkg / "huge.py"): "larger than 4194304 bytes",
        str(pkg / "pipe.py"): "fifo",
    }
