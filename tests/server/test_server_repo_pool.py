"""A served repo session takes each episode's workspace from the task's WorkspacePool: a fresh
private copy of the task's workspace every reset (nothing of the last episode in it), already
owned by the episode's sandbox uid."""

from __future__ import annotations

import os
import subprocess

from verigap.repos.tasks import load_tasks
from verigap.server import ServerConfig
from verigap.server._envs import Limits, RepoServed
from verigap.server._models import ToolAction

from .conftest import backend


def _files(root) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def test_each_reset_gets_a_fresh_copy_from_the_pool(repo_task_dir, tmp_path):
    task = load_tasks(repo_task_dir)[0]
    tasks = ServerConfig.with_tasks_from(repo_task_dir, root=tmp_path / "root").tasks
    served = RepoServed(
        workdir=tmp_path / "session", limits=Limits(50, 600.0), tasks=dict(tasks), backend=backend()
    )
    try:
        served.reset(0, {"task": task.task_id})
        first = served._ws
        pristine = _files(first)
        served.step(
            ToolAction(
                tool="write_file", arguments={"path": "LEFT_BEHIND.txt", "content": "episode 1"}
            )
        )
        served.step(ToolAction(tool="run", arguments={"command": "echo more >> LEFT_BEHIND.txt"}))
        assert (first / "LEFT_BEHIND.txt").read_text() == "episode 1more\n"
        pool = served._pools[task.task_id]
        assert pool.wait_ready(timeout=120)  # the next copy, made in the background

        served.reset(1, {"task": task.task_id})
        second = served._ws
        assert second != first and pool.stats.taken == 2
        assert pool.stats.copied_on_the_spot == 1  # only the first reset copied while waiting
        assert _files(second) == pristine  # nothing of episode 1
        log = subprocess.run(
            ["git", "-c", "safe.directory=*", "log", "--format=%H %s"],
            cwd=second,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")[0]
        assert log.endswith(" task")  # the task's one commit, as a fresh workspace has
        out = served.step(
            ToolAction(
                tool="run",
                arguments={"command": "ls LEFT_BEHIND.txt; touch made_here; git status --short"},
            )
        )
        assert "No such file" in out.text and "made_here" in out.text
        if backend() == "bwrap" and os.geteuid() == 0:
            uid = served._box.uid
            assert {os.lstat(p).st_uid for p in [second, *second.rglob("*")]} == {uid}
            assert uid != 0
    finally:
        served.close()
    assert not (tmp_path / "session").exists()
