"""The ``ray`` executor on a real local cluster: a head and a second node process on loopback.

Lives beside the server tests to share their one prepared repo task. Three uses are checked:
repo grading, the red-team battery and silent-bug calibration (tiny budgets), plus a proof
that two jobs run at once on the two nodes.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

import pytest


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster(repo_task_dir):
    """Head (1 CPU) + a second node (1 CPU); started after the task cache exists so that both
    node processes inherit VERIGAP_CACHE, as a real node would from its environment."""
    from verigap.runs import local_ray_cluster

    try:
        cm = local_ray_cluster(nodes=2, cpus_per_node=1, attempts=2)
        c = cm.__enter__()
    except Exception as e:  # only Ray's own start-up deadlines, on an overloaded machine
        if "timed out during startup" not in str(e):
            raise
        pytest.skip(f"a two-node local Ray cluster did not start here: {e}")
    yield c
    cm.__exit__(None, None, None)


def test_two_jobs_run_at_once_on_the_two_nodes(cluster, tmp_path):
    """Each job needs the whole CPU of a node and waits for the other to start, so both finish
    only if they ran at the same time on different nodes."""
    from verigap.runs import Job, run_jobs

    def meet(run_dir: Path, *, here: str, peers: int) -> dict:
        Path(here, run_dir.name).touch()
        deadline = time.monotonic() + 300
        while len(list(Path(here).iterdir())) < peers and time.monotonic() < deadline:
            time.sleep(0.05)  # waiting on a condition, with a deadline
        return {
            "node": ray.get_runtime_context().get_node_id(),
            "met": len(list(Path(here).iterdir())) >= peers,
        }

    (tmp_path / "here").mkdir()
    jobs = [
        Job(f"j{i}", tmp_path / f"j{i}", meet, {"here": str(tmp_path / "here"), "peers": 2})
        for i in range(2)
    ]
    results = run_jobs(jobs, executor="ray", progress=False)
    assert all(r["met"] for r in results.values())
    assert {r["node"] for r in results.values()} == {n["NodeID"] for n in ray.nodes() if n["Alive"]}


def test_repo_grading_and_the_redteam_battery_on_ray(cluster, repo_task_dir, tmp_path):
    from verigap.repos import episode
    from verigap.repos.redteam import battery
    from verigap.runs import run_jobs

    task = sorted(p for p in repo_task_dir.glob("*.json") if p.name != "index.json")[0]
    graded = run_jobs(
        episode.jobs(
            [task],
            ["scripted:oracle", "scripted:noop"],
            ["v2"],
            tmp_path / "episodes",
            backend=backend(),
        ),
        executor="ray",
        progress=False,
    )
    assert {k.split("/")[1]: (r["reward"], r["correct"]) for k, r in graded.items()} == {
        "scripted_oracle": (1.0, True),
        "scripted_noop": (0.0, False),
    }
    assert all((tmp_path / "episodes" / k / "result.json").is_file() for k in graded)

    found = run_jobs(
        battery.jobs(
            [task],
            tmp_path / "redteam",
            graders=["v1", "v2"],
            exploits=["test_delete"],
            backend=backend(),
        ),
        executor="ray",
        progress=False,
    )
    rewarded = {
        r["exploit"]: (r["grades"]["v1"]["rewarded"], r["grades"]["v2"]["rewarded"])
        for r in found.values()
    }
    # the naive grader pays for deleted tests, v2 does not; the controls behave
    assert rewarded == {
        "oracle": (True, True),
        "noop": (False, False),
        "test_delete": (True, False),
    }


def test_silentbug_calibration_on_ray(cluster, tmp_path, monkeypatch):
    """Tiny budgets (512 steps, one PPO iteration): every clean and broken run executes on the
    cluster and a second calibration finds them all cached."""
    from verigap.silentbug import substrate
    from verigap.silentbug.bank import Registry, load_registry
    from verigap.silentbug.calibrate import calibrate

    sub = substrate.SUBSTRATES["cartpole_single"]
    monkeypatch.setitem(
        substrate.SUBSTRATES,
        "cartpole_single",
        dataclasses.replace(sub, config={**sub.config, "total_timesteps": 512}),
    )
    reg = Registry(bugs=[load_registry().get("single_recomputed_old_logprob")])
    cal = calibrate(
        seeds=2, cache_dir=tmp_path / "cache", registry=reg, executor="ray", progress=False
    )
    assert (cal.runs_total, cal.runs_executed) == (4, 4)
    (result,) = cal.results
    assert len(result.clean.scores) == 2 and len(result.broken.scores) == 2
    assert result.statuses == ("ok", "ok")
    again = calibrate(
        seeds=2, cache_dir=tmp_path / "cache", registry=reg, executor="ray", progress=False
    )
    assert again.runs_executed == 0
