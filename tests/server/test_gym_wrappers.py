"""The Gymnasium wrappers over HTTP pass Gymnasium's own ``check_env``, and the remote Patch
World draws the local env's program for the same seed."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from verigap.patchworld.env import PatchWorldEnv
from verigap.server import (
    BackgroundServer,
    Client,
    RemotePatchWorldEnv,
    RemoteToolEnv,
    ServerConfig,
)


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


@pytest.fixture(scope="module")
def url(repo_task_dir, tmp_path_factory):
    config = ServerConfig.with_tasks_from(
        repo_task_dir, root=tmp_path_factory.mktemp("gym"), backend=backend()
    )
    srv = BackgroundServer(config)
    srv.tasks = sorted(config.tasks)
    yield srv.start(), srv.tasks[0]
    srv.stop()


def test_remote_patchworld_passes_check_env(url):
    with Client(url[0]) as c:
        env = RemotePatchWorldEnv(c, k=3)
        check_env(env, skip_render_check=True)
        env.close()
        env.close()  # twice is allowed


def test_remote_tool_env_passes_check_env(url):
    with Client(url[0]) as c:
        env = RemoteToolEnv(c, "repo", options={"task": url[1]})
        assert env.action_space.contains({"tool": "submit", "arguments": {}})
        assert not env.action_space.contains({"tool": "rm_rf", "arguments": {}})
        check_env(env, skip_render_check=True)
        env.close()
        env.close()


def test_remote_patchworld_draws_the_local_program_for_each_seed(url):
    with Client(url[0]) as c:
        remote = RemotePatchWorldEnv(c, k=4)
        local = PatchWorldEnv(k=4)
        for seed in range(50):
            a, _ = local.reset(seed=seed)
            b, _ = remote.reset(seed=seed)
            assert all(np.array_equal(a[k], b[k]) for k in a), seed
        a, _ = local.reset()  # and the unseeded draws after the last seed
        b, _ = remote.reset()
        assert all(np.array_equal(a[k], b[k]) for k in a)
        remote.close()
