"""Task generation that is stopped keeps what it made and leaves nothing running.

A time limit ends make-tasks with the tasks written so far and says where it stopped; a
validation timeout is remembered per prepared tree (a looping mutation is not waited for again);
SIGTERM of ``verigap repos make-tasks`` kills its warm sandboxes and deletes their trees. The
signal test needs bubblewrap itself (the warm runners exist only under it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verigap.errors import ConfigError
from verigap.repos import validate as validate_mod
from verigap.repos.prepare import prepare
from verigap.repos.tasks import make_tasks
from verigap.repos.validate import NOT_RUN, candidates

from .conftest import FIXTURE_LIB


def test_a_time_limit_stops_make_tasks_and_says_where(repo_cache, tmp_path, backend):
    seen: list[str] = []
    stats = make_tasks(
        str(FIXTURE_LIB),
        tmp_path / "out",
        k=2,
        n=3,
        max_candidates=6,
        env="current",
        backend=backend,
        time_limit_s=1e-6,
        on_stage=seen.append,
        log=lambda s: None,
    )
    assert seen[:2] == ["prepare", "validation"]
    assert stats.stopped.startswith("time limit 1e-06 s reached in validation")
    assert stats.rejected == {NOT_RUN: stats.candidates} and stats.tasks == 0
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert index["stopped"] == stats.stopped
    with pytest.raises(ConfigError, match="positive number of seconds"):
        make_tasks(str(FIXTURE_LIB), tmp_path / "o2", env="current", time_limit_s=0)


def test_make_tasks_that_ran_to_its_end_says_it_was_not_stopped(fixture_tasks):
    stats, _, _ = fixture_tasks
    assert stats.stopped == "" and stats.tasks > 0


def test_a_timeout_is_remembered_per_tree_under_the_same_limit(repo_cache, monkeypatch):
    p = prepare(str(FIXTURE_LIB), env="current")
    m = candidates(p, max_candidates=1, seed=3)[0]
    calls: list[str] = []

    def loops(p_, m_, backend=None, warm=None):
        calls.append(m_.id)
        return None, "timeout"

    monkeypatch.setattr(validate_mod, "validate_one", loops)
    path = validate_mod.cache_path(p, m)
    path.unlink(missing_ok=True)
    assert validate_mod._cached_validate(p, m, None) == (None, "timeout")
    assert validate_mod._cached_validate(p, m, None) == (None, "timeout")
    assert len(calls) == 1  # the second run did not wait for it again
    # a timeout under a smaller limit than today's is run again
    d = json.loads(path.read_text())
    assert d["timeout_s"] == validate_mod.validation_timeout(p)
    path.write_text(json.dumps({**d, "timeout_s": validate_mod.validation_timeout(p) - 1}))
    validate_mod._cached_validate(p, m, None)
    assert len(calls) == 2


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (host pids, sandboxed ones included)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = set(), [pid]
    while todo:
        cur = todo.pop()
        for child, ppid in parent.items():
            if ppid == cur and child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not shutil.which("bwrap"), reason="needs bubblewrap")
def test_sigterm_of_make_tasks_kills_its_sandboxes_and_removes_their_trees(repo_cache, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(tmp),
        "VERIGAP_CACHE": str(tmp_path / "cache"),  # nothing validated yet: the runners work
        "VERIGAP_SANDBOX": "bwrap",
    }
    cmd = [sys.executable, "-m", "verigap", "repos", "make-tasks", str(FIXTURE_LIB)]
    cmd += ["--env", "current", "--n", "2", "--k", "2", "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        sandboxed: set[int] = set()
        end = time.monotonic() + 240
        while time.monotonic() < end and proc.poll() is None:
            warm = [d for d in tmp.glob("vg-warm-*") if any(d.glob("scratch*"))]
            kids = _descendants(proc.pid)
            if warm and len(kids) >= 2:  # a fork server is up inside its sandbox
                sandboxed = kids
                break
            time.sleep(0.05)
        assert sandboxed, f"no warm runner started: {proc.stderr.read().decode()[-2000:]}"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == -signal.SIGTERM
    assert list(tmp.glob("vg-warm-*")) == []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in sandboxed):
        time.sleep(0.1)
    assert not any(_alive(p) for p in sandboxed)
