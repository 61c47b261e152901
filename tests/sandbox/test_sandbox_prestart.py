"""SandboxPool: bubblewrap sandboxes started ahead, each for exactly one command, and
WorkspacePool(for_sandbox=True): copies already owned by their sandbox uid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from verigap.errors import ConfigError
from verigap.sandbox import Limits, SandboxPool, WorkspacePool, make_sandbox, materialize

from .conftest import HAVE_BWRAP

pytestmark = pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap (bwrap) is not installed")

ROOT = os.geteuid() == 0


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has exited; only its parent has not reaped it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _pids(box) -> list[int]:
    """Host pids of a started sandbox: bubblewrap's launcher and the sandbox's init."""
    server = box._session._holder.get("server")
    return [] if server is None else [server.proc.pid, server.init_pid]


def test_each_sandbox_runs_one_command_in_a_sandbox_of_its_own(
    src_tree: Path, tmp_path: Path
) -> None:
    with SandboxPool(tmp_path / "pool", size=2) as pool:
        assert pool.wait_ready(timeout=60)
        first = pool.take(tmp_path / "a")
        assert first.root == (tmp_path / "a").resolve()
        started = _pids(first)
        assert len(started) == 2 and all(_alive(p) for p in started)  # running before its command
        materialize(src_tree, first.root)  # filled in place: the running sandbox sees it
        res = first.exec("cat pkg/calc.py; id -u; echo left > /tmp/mark; sleep 300 & echo $!")
        assert res.ok, res
        assert first.ran_prestarted
        assert "a - b" in res.stdout
        if ROOT:
            assert int(res.stdout.split()[-2]) == first.uid != 0
        # exactly one command: a second one is refused, and the sandbox is torn down
        with pytest.raises(ConfigError, match="one command"):
            first.exec("true")
        assert pool.wait_ready(timeout=60)
        assert not any(_alive(p) for p in started)
        # the next sandbox is another one: nothing of the first command is in it
        second = pool.take(tmp_path / "b")
        res = second.exec(
            "ls -A /tmp; ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '; ls -A"
        )
        assert res.ok and second.ran_prestarted, res
        lines = res.stdout.splitlines()
        assert "mark" not in res.stdout  # /tmp is its own
        pids = [int(p) for p in lines[0].split()]
        assert pids[:2] == [1, 2] and max(pids) < 20  # init, the server, this command only
        assert lines[1:] == []  # and its workspace is its own, empty directory
        assert second.uid != first.uid or not ROOT
        assert pool.stats.taken == 2 and pool.stats.started_on_the_spot == 0


def test_limits_apply_to_a_prestarted_sandbox(tmp_path: Path) -> None:
    limits = Limits(wall_s=30, memory_mb=300, processes=40, output_bytes=2_000)
    with SandboxPool(tmp_path / "pool", size=1, limits=limits) as pool:
        assert pool.wait_ready(timeout=60)
        box = pool.take(tmp_path / "lim")
        res = box.exec("cat /proc/self/limits")
        assert res.ok and box.ran_prestarted
        rows = {line[:26].strip(): line[26:].split() for line in res.stdout.splitlines()[1:]}
        assert rows["Max address space"][:2] == [str(300 << 20)] * 2
        assert rows["Max processes"][:2] == ["40", "40"]
        # the wall-clock limit: the whole sandbox is killed
        assert pool.wait_ready(timeout=60)
        box = pool.take(tmp_path / "slow")
        res = box.exec("sleep 60", timeout=1)
        assert res.timed_out and not res.ok and "wall-clock" in (res.reason or "")
        # output is capped as anywhere else
        assert pool.wait_ready(timeout=60)
        box = pool.take(tmp_path / "loud")
        res = box.exec("head -c 50000 /dev/zero | tr '\\0' x")
        assert res.ok and res.truncated and len(res.stdout) < 3_000


def test_a_sandbox_bound_to_another_directory_is_never_used(src_tree: Path, tmp_path: Path) -> None:
    with SandboxPool(tmp_path / "pool", size=1) as pool:
        assert pool.wait_ready(timeout=60)
        box = pool.take(tmp_path / "ws")
        started = _pids(box)
        box.root.rmdir()  # the directory the sandbox binds is gone; a new one takes its name
        materialize(src_tree, box.root)
        res = box.exec("cat README.txt")
        assert res.ok and res.stdout == "hello\n"  # ran in a sandbox over the new directory
        assert not box.ran_prestarted
        assert not any(_alive(p) for p in started)
        # a destination that is not empty is refused, not merged
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "x").write_text("x")
        with pytest.raises(ConfigError, match="not an empty directory"):
            pool.take(tmp_path / "full")


def test_no_sandbox_outlives_the_pool(tmp_path: Path) -> None:
    """close() stops every waiting sandbox; a process that exits without closing leaves none."""
    pool = SandboxPool(tmp_path / "pool", size=2)
    assert pool.wait_ready(timeout=60)
    waiting = [p for box in pool._state.ready for p in _pids(box)]
    assert len(waiting) == 4 and all(_alive(p) for p in waiting)
    pool.close()
    assert not any(_alive(p) for p in waiting)
    assert not list((tmp_path / "pool").glob("slot-*"))
    with pytest.raises(ConfigError, match="closed"):
        pool.take(tmp_path / "late")

    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from verigap.sandbox import SandboxPool
        pool = SandboxPool(Path({str(tmp_path / "pool2")!r}), size=2)
        assert pool.wait_ready(timeout=60)
        used = pool.take(Path({str(tmp_path / "used")!r}))
        pids = [used._session._holder["server"].proc.pid]
        assert used.exec("true").ok
        assert pool.wait_ready(timeout=60)
        unused = pool.take(Path({str(tmp_path / "unused")!r}))  # handed out, never run
        pids += [p for box in [unused, *pool._state.ready]
                 for p in (box._session._holder["server"].proc.pid,
                           box._session._holder["server"].init_pid)]
        print(json.dumps(pids))
        # exits without close()
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    pids = json.loads(done.stdout)
    assert len(pids) == 5
    assert [p for p in pids if _alive(p)] == []


@pytest.mark.skipif(not ROOT, reason="handing files to a sandbox uid needs root")
def test_a_for_sandbox_pool_hands_out_trees_its_sandbox_owns(
    src_tree: Path, tmp_path: Path
) -> None:
    with WorkspacePool(src_tree, tmp_path / "wpool", size=2, for_sandbox=True) as pool:
        assert pool.wait_ready(timeout=60)
        boxes = [pool.take_sandbox(tmp_path / f"ws{i}") for i in range(2)]
        assert pool.stats.copied_on_the_spot == 0
        for box in boxes:
            owners = {os.lstat(p).st_uid for p in [box.root, *box.root.rglob("*")]}
            assert owners == {box.uid} and box.uid != 0
            res = box.exec("id -u; echo new >> README.txt && mkdir -p made && cat README.txt")
            assert res.ok and res.stdout.split() == [str(box.uid), "hello", "new"]
        assert boxes[0].uid != boxes[1].uid  # a uid per copy, as per sandbox
        # a uid that does not own the tree is refused
        other = materialize(src_tree, tmp_path / "plain")
        with pytest.raises(ConfigError, match="uid"):
            make_sandbox(other, uid=boxes[0].uid)
        # a plain take of such a pool still works with make_sandbox's own hand-over
        ws = pool.take(tmp_path / "again")
        box = make_sandbox(ws)
        assert box.exec("touch x").ok and os.lstat(ws / "x").st_uid == box.uid
