"""Graded runs in sandboxes started ahead: ``execution.scratch`` hands a run the
workspace of a sandbox already started with exactly its mounts and limits, and v2's verdicts
do not depend on whether it did. Agent episodes take their workspace from a pool per task."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from verigap.repos import episode, execution
from verigap.repos.graders import v2
from verigap.repos.tasks import materialize_workspace
from verigap.sandbox import SandboxPool

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="sandboxes started ahead need bubblewrap"
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _started_pids(pools: execution._Pools) -> list[int]:
    """Host pids (bubblewrap's launcher, the sandbox's init) of every sandbox waiting."""
    out = []
    for pool in pools.pools.values():
        with pool._state.cv:
            boxes = list(pool._state.ready)
        for box in boxes:
            server = box._session._holder.get("server")
            if server is not None:
                out += [server.proc.pid, server.init_pid]
    return out


@pytest.fixture
def pools(monkeypatch):
    """A fresh registry that opens a pool at a mount set's first run (not its third)."""
    fresh = execution._Pools()
    monkeypatch.setattr(execution, "_POOLS", fresh)
    monkeypatch.setattr(execution, "POOL_AFTER", 1)
    yield fresh
    fresh.close()


def _cat(m: execution.Mounts, name: str = "f") -> tuple[str, bool]:
    """(what ``/verigap/ro/0/<name>`` holds inside, whether a sandbox started ahead ran it)."""
    with execution.scratch(m, timeout=30.0) as s:
        reserved = s in execution._RESERVED
        res = execution.run(["cat", f"/verigap/ro/0/{name}"], scratch=s, mounts=m, timeout=30.0)
    assert res.ok, res
    return res.stdout, reserved


def _settle(pools: execution._Pools) -> None:
    for pool in list(pools.pools.values()):
        assert pool.wait_ready(timeout=60)


def test_pools_keyed_by_different_mounts_never_mix_them(pools, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "f").write_text(d.name)
    ma = execution.Mounts({a: "/verigap/ro/0"}, "bwrap")
    mb = execution.Mounts({b: "/verigap/ro/0"}, "bwrap")
    seen = []
    for _ in range(3):  # interleaved: each run finds the other's pool just as ready
        for m, want in ((ma, "a"), (mb, "b")):
            got, reserved = _cat(m)
            assert got == want
            seen.append(reserved)
            _settle(pools)
    assert seen[:2] == [False, False] and all(seen[2:])  # the pools served every later run
    assert len(pools.pools) == 2
    # a new directory at a's path (what a tree deleted and made again looks like): the
    # sandbox started over the old one is never used for it
    shutil.rmtree(a)
    a.mkdir()
    (a / "f").write_text("a, again")
    assert _cat(ma) == ("a, again", False)  # another key: a pool of its own, opened now
    assert len(pools.pools) == 3
    _settle(pools)
    # a scratch made for one mount set and run with another: its sandbox is not used
    with execution.scratch(ma, timeout=30.0) as s:
        assert s in execution._RESERVED
        res = execution.run(["cat", "/verigap/ro/0/f"], scratch=s, mounts=mb, timeout=30.0)
        assert s not in execution._RESERVED
    assert res.stdout == "b"


def test_a_started_sandbox_whose_mount_source_was_replaced_is_not_handed_out(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("old")
    with SandboxPool(tmp_path / "pool", size=1, ro_mounts={src: "/verigap/x"}) as pool:
        assert pool.wait_ready(timeout=60)
        box = pool.take_ready(tmp_path / "w0")
        assert box is not None and box.mounts_as_bound()  # control: an intact one passes
        assert box.exec("cat /verigap/x/f").stdout == "old"
        assert pool.wait_ready(timeout=60)
        shutil.rmtree(src)
        src.mkdir()
        (src / "f").write_text("new")
        assert pool.take_ready(tmp_path / "w1") is None
        assert (tmp_path / "w1").is_dir()  # the caller's directory is still there
        assert pool.stats.stale_dropped == 1
        assert pool.wait_ready(timeout=60)
        box = pool.take_ready(tmp_path / "w2")
        assert box is not None and box.exec("cat /verigap/x/f").stdout == "new"


def _bwrap_children() -> set[int]:
    """This process's child processes running bubblewrap."""
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()
            comm = Path(f"/proc/{name}/comm").read_text().strip()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and stat[0] not in (b"Z", b"X") and comm == "bwrap":
            out.add(int(name))
    return out


def test_no_bubblewrap_process_survives_closing_the_pools(pools, tmp_path: Path) -> None:
    before = _bwrap_children()  # other tests' sandboxes, if any
    d = tmp_path / "d"
    d.mkdir()
    (d / "f").write_text("x")
    for i in range(3):  # three mount sets (other limits), each with a sandbox waiting
        m = execution.Mounts({d: "/verigap/ro/0"}, "bwrap")
        with execution.scratch(m, timeout=30.0 + i) as s:
            execution.run(["true"], scratch=s, mounts=m, timeout=30.0 + i)
    _settle(pools)
    pids = _started_pids(pools)
    assert len(pids) == 6 and all(_alive(p) for p in pids)
    assert set(pids) & _bwrap_children()  # control: the scan sees the pools' launchers
    root = pools.root
    execution._POOLS.close()
    assert not any(_alive(p) for p in pids)
    assert not pools.pools and root is not None and not root.exists()
    assert _bwrap_children() <= before


def test_grading_through_the_pool_gives_the_same_verdicts(
    pools, fixture_tasks, tmp_path: Path
) -> None:
    _, tasks, p = fixture_tasks
    t = tasks[0]
    wrong = materialize_workspace(p, t, tmp_path / "wrong")  # the mutant as it was handed out
    fixed = materialize_workspace(p, t, tmp_path / "fixed")
    for s in t.sites:
        (fixed / s.file).write_text((p.tree / s.file).read_text())

    def verdict(ws: Path) -> tuple:
        truth = v2.evaluate(t, ws, prepared=p, backend="bwrap")
        return (truth.correct, truth.status, sorted(truth.hacks), truth.outcomes, truth.checks)

    pools.disabled = True
    on_demand = {ws: verdict(ws) for ws in (wrong, fixed)}
    assert not pools.pools
    pools.disabled = False
    verdict(wrong)  # opens the pools
    _settle(pools)
    taken = sum(pool.stats.taken for pool in pools.pools.values())
    pooled = {}
    for ws in (wrong, fixed):
        pooled[ws] = verdict(ws)
        _settle(pools)
    assert sum(pool.stats.taken for pool in pools.pools.values()) > taken  # it was used
    assert pooled == on_demand
    assert on_demand[fixed][0] and not on_demand[wrong][0]  # the verdicts tell them apart


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(f.relative_to(root)): f.read_bytes()
        for f in sorted(root.rglob("*"))
        if f.is_file() and ".git" not in f.relative_to(root).parts
    }


def _head(ws: Path) -> str:
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", "rev-parse", "HEAD"],
        cwd=ws,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_agent_workspaces_come_from_a_task_pool_as_materialize_workspace_makes_them(
    fixture_tasks, tmp_path: Path, monkeypatch
) -> None:
    _, tasks, p = fixture_tasks
    t = tasks[1]
    fresh = episode._Workspaces()
    monkeypatch.setattr(episode, "_WORKSPACES", fresh)
    try:
        want = materialize_workspace(p, t, tmp_path / "want")
        first, _ = episode.agent_workspace(p, t, tmp_path / "one", backend="bwrap")
        (pool,) = fresh.pools.values()
        (first / t.sites[0].file).write_text("edited by the first agent\n")
        assert pool.wait_ready(timeout=60)
        second, uid = episode.agent_workspace(p, t, tmp_path / "two", backend="bwrap")
        assert pool.stats.taken == 2 and pool.stats.copied_on_the_spot == 1  # a ready copy
        assert _files(second) == _files(want) != _files(first)  # the edit never reached it
        assert _head(second) == _head(want)  # the same task commit
        if os.geteuid() == 0:
            assert uid is not None and os.lstat(second).st_uid == uid  # handed over already
    finally:
        fresh.close()
