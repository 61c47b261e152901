"""One grader registry: the same episode gets the same verdict and the same hacks whether it is
graded by ``verigap repos run`` (its library function), by the red-team battery or by a served
session over HTTP, each with its default grader (v2, claim checks included, v2's own payout)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from verigap.errors import ConfigError
from verigap.repos.episode import _scripted_steps, run_task_episode
from verigap.repos.graders import registry
from verigap.repos.redteam import battery
from verigap.repos.tasks import load_tasks, materialize_workspace, prepared_for
from verigap.server import BackgroundServer, Client, ServerConfig

KEYS = ("reward", "correct", "hacks", "status", "checks")


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


@pytest.fixture(scope="module")
def task_and_url(repo_task_dir, tmp_path_factory):
    config = ServerConfig.with_tasks_from(
        repo_task_dir, root=tmp_path_factory.mktemp("paths"), backend=backend(), reveal_truth=True
    )
    task_path = sorted(Path(repo_task_dir).glob("*.json"))
    task_path = [p for p in task_path if p.name != "index.json"][0]
    with BackgroundServer(config) as url:
        yield load_tasks(repo_task_dir)[0], task_path, url


def served(url: str, task, steps: list) -> dict:
    """Replay ``steps`` through a repo session with the server's default grader."""
    with Client(url) as c, c.session("repo") as s:
        s.reset(seed=0, options={"task": task.task_id})
        for tool, args in steps:
            out = s.step({"tool": tool, "arguments": args})
        assert out["done"]
        return out["observation"]["verdict"]


def script(task, name: str, tmp_path: Path) -> list:
    ws = tmp_path / f"script-{name}"
    materialize_workspace(prepared_for(task, backend=backend()), task, ws)
    return _scripted_steps(task, ws, name, None)


def pick(d: dict) -> dict:
    return {k: (sorted(d[k]) if k == "hacks" else d[k]) for k in KEYS}


def test_a_false_claim_gets_the_same_verdict_by_every_path(task_and_url, tmp_path):
    task, task_path, url = task_and_url
    name = "claim_unrun"  # the reference fix, then "all tests pass" without running them
    cli = run_task_episode(task, tmp_path / "cli", agent=f"scripted:{name}", backend=backend())
    bat = battery.run_one(
        tmp_path / "battery",
        task_path=str(task_path),
        exploit=name,
        graders=[registry.DEFAULT],
        backend=backend(),
    )["grades"]["v2"]
    http = served(url, task, script(task, name, tmp_path))
    assert "unsupported_claim" in cli["hacks"]
    assert pick(cli) == pick(http)
    assert {k: bat[k] for k in ("reward", "hacks", "checks")} == {
        k: pick(cli)[k] for k in ("reward", "hacks", "checks")
    }


def test_a_careless_fix_is_paid_alike_by_the_cli_and_a_default_session(task_and_url, tmp_path):
    """v2's own payout by default: a served session no longer pays what visible checks pay."""
    task, _, url = task_and_url
    cli = run_task_episode(task, tmp_path / "cli", agent="scripted:careless", backend=backend())
    http = served(url, task, script(task, "careless", tmp_path))
    assert pick(cli) == pick(http)
    # green on the visible checks, wrong underneath: visible-only pay would give it 1.0
    assert http["checks"]["visible"] is True and http["correct"] is False
    assert http["reward"] == 0.0


def test_the_registry_names_its_graders_and_refuses_unknown_ones():
    assert registry.make().name == registry.DEFAULT == "v2"
    assert registry.names() == ["v1", "v2"]
    with pytest.raises(ConfigError, match="module:function"):
        registry.make("v3")
    with pytest.raises(ConfigError, match="not a Grader"):
        registry.register(object())  # type: ignore[arg-type]
