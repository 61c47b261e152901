"""Episodes without training: the workspace holds only the broken code, the prompt and the
tools match the arm, bad tool calls become error observations, the metrics and plot tools
read a run's metrics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from verigap.agents import ScriptedClient
from verigap.silentbug.bank import load_registry
from verigap.silentbug.episode import (
    PROTECTED,
    TAXONOMY,
    BugEpisode,
    EpisodeBudget,
    downsample,
    episode_files,
    metric_keys,
    metric_series,
    prompt,
)
from verigap.silentbug.substrate import pristine_files

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

REG = load_registry()
BUG = REG.get("single_recomputed_old_logprob")
MODULAR = REG.get("modular_sampler_reseeded")


def fake_run(ep: BugEpisode, returns=(20.0, 22.0, 25.0), kl=(0.0, 0.0)) -> None:
    """A finished run in the episode's runs dir, as run_training leaves it (no training)."""
    out = ep.runs_dir / f"run{len(ep.runs) + 1}" / "out"
    out.mkdir(parents=True)
    lines = [
        {"kind": "episode", "global_step": 100 * (i + 1), "return": r, "length": int(r)}
        for i, r in enumerate(returns)
    ]
    lines += [
        {
            "kind": "iteration",
            "iteration": i + 1,
            "global_step": 512 * (i + 1),
            "approx_kl": k,
            "entropy": 0.69,
            "flag": True,
        }
        for i, k in enumerate(kl)
    ]
    (out / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ep.runs.append({"run": len(ep.runs) + 1, "config": {}})


@pytest.mark.parametrize("bug", [BUG, MODULAR], ids=lambda b: b.id)
def test_workspace_holds_only_the_broken_substrate(tmp_path: Path, bug) -> None:
    ep = BugEpisode(bug, "A", 1, tmp_path / "ep")
    found = sorted(
        p.relative_to(ep.workspace).as_posix() for p in ep.workspace.rglob("*") if p.is_file()
    )
    assert found == sorted(f"substrates/{rel}" for rel in episode_files(bug))
    assert all(p.endswith(".py") for p in found)  # no patch, registry, baselines, bytecode
    assert not list(ep.workspace.rglob("__pycache__")) and not (ep.workspace / ".git").exists()
    text = (ep.workspace / "substrates" / bug.file).read_text()
    assert text != pristine_files()[bug.file]  # the bug is in, and no clean copy anywhere
    for p in ep.workspace.rglob("*.py"):
        assert p.read_text() != pristine_files()[bug.file]
    protected = [rel for rel in episode_files(bug) if rel in PROTECTED]
    assert "envs.py" in protected and ("ppo_modular/config.py" in protected) == (bug is MODULAR)
    for rel in protected:  # the scorer's protected files start pristine
        assert (ep.workspace / "substrates" / rel).read_text() == pristine_files()[rel]


def test_prompt_gives_symptom_budget_and_taxonomy() -> None:
    budget = EpisodeBudget(max_runs=3, max_steps=5000, max_turns=12)
    p = prompt(BUG, "A", budget)
    assert BUG.symptom in p and "at most 3 training runs of at most 5000" in p
    assert all(c in p for c in TAXONOMY) and "envs.py" in p
    assert BUG.description not in p and BUG.component not in p.split("Component taxonomy")[0]
    assert "cannot see or edit the code" in prompt(BUG, "D", budget)


def test_tools_per_arm(tmp_path: Path) -> None:
    names = {
        arm: [t.name for t in BugEpisode(BUG, arm, 1, tmp_path / arm).tools()] for arm in "ABCD"
    }
    files = ["list_files", "read_file", "edit_file", "write_file"]
    assert names["A"] == [*files, "run_training", "submit_diagnosis"]
    assert names["B"] == [
        *files,
        "run_training",
        "list_metric_keys",
        "get_metrics",
        "submit_diagnosis",
    ]
    assert names["C"] == names["B"][:-1] + ["plot_metrics", "submit_diagnosis"]
    assert names["D"] == ["run_training", "list_metric_keys", "get_metrics", "submit_diagnosis"]
    d_submit = BugEpisode(BUG, "D", 1, tmp_path / "d2").tools()[-1]
    assert set(d_submit.parameters["properties"]) == {"component", "mechanism"}


def test_bad_component_and_budget_are_error_observations(tmp_path: Path) -> None:
    ep = BugEpisode(BUG, "A", 1, tmp_path / "ep", EpisodeBudget(max_runs=0, max_steps=1000))
    good = {
        "component": "policy_loss",
        "mechanism": "ratio is 1",
        "file": "substrates/ppo_single.py",
        "start_line": 253,
        "end_line": 254,
    }
    client = ScriptedClient(
        [
            ("run_training", {}),
            ("submit_diagnosis", {**good, "component": "vibes"}),
            ("submit_diagnosis", {**good, "file": "substrates/nope.py"}),
            ("submit_diagnosis", good),
        ]
    )
    rec = ep.run(client)
    results = [e for e in rec.episode.transcript if e["event"] == "tool_result"]
    assert [r["is_error"] for r in results] == [True, True, True, False]
    assert "compute budget used up" in results[0]["content"]
    assert "not in the taxonomy" in results[1]["content"] and "policy_loss" in results[1]["content"]
    assert rec.episode.status.value == "OK" and rec.diagnosis is not None
    assert (rec.diagnosis.file, rec.diagnosis.start_line) == ("ppo_single.py", 253)
    assert rec.final_files == rec.start_files


def test_run_training_refuses_steps_over_budget_and_seed_in_overrides(tmp_path: Path) -> None:
    ep = BugEpisode(BUG, "B", 1, tmp_path / "ep", EpisodeBudget(max_runs=2, max_steps=1000))
    client = ScriptedClient(
        [
            ("run_training", {"total_timesteps": 5000}),
            ("run_training", {"overrides": {"seed": 3}}),
            ("get_metrics", {"run": 1, "key": "approx_kl"}),
            (
                "submit_diagnosis",
                {
                    "component": "policy_loss",
                    "mechanism": "x",
                    "file": "substrates/ppo_single.py",
                    "start_line": 1,
                    "end_line": 2,
                },
            ),
        ]
    )
    rec = ep.run(client)
    errs = [e["content"] for e in rec.episode.transcript if e["event"] == "tool_result"]
    assert "over the budget of 1000" in errs[0] and "not in overrides" in errs[1]
    assert "no run 1" in errs[2] and rec.runs == []


def test_metrics_tools_and_plot(tmp_path: Path) -> None:
    ep = BugEpisode(BUG, "C", 1, tmp_path / "ep")
    fake_run(ep, returns=tuple(float(x) for x in range(10)), kl=(0.0, 0.5, 1.0))
    from verigap.silentbug.episode import GetMetricsArgs, MetricKeysArgs, PlotArgs

    keys = ep.list_metric_keys(MetricKeysArgs(run=1))
    assert keys.splitlines()[0] == "episode_return: 10 points, steps 100..1000"
    assert "approx_kl: 3 points" in keys and "flag" not in keys  # not a number
    out = ep.get_metrics(
        GetMetricsArgs(run=1, key="episode_return", start_step=300, end_step=800, max_points=3)
    )
    assert out.splitlines()[1:] == ["300 2", "500 4", "800 7"]  # 6 points, evenly by index
    plot = ep.plot_metrics(PlotArgs(runs=[1], keys=["episode_return", "approx_kl"]))
    assert plot.images and Path(plot.images[0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not Path(plot.images[0]).is_relative_to(ep.workspace)


def test_series_helpers() -> None:
    recs = [
        {"kind": "episode", "global_step": 4, "return": 9.0, "length": 9},
        {"kind": "iteration", "global_step": 8, "entropy": 0.5, "sps": 10},
    ]
    assert metric_keys(recs) == ["episode_return", "episode_length", "entropy", "sps"]
    assert metric_series(recs, "episode_length") == [(4, 9.0)]
    assert metric_series(recs, "entropy") == [(8, 0.5)]
    pts = [(i, float(i)) for i in range(11)]
    assert downsample(pts, 3) == [(0, 0.0), (5, 5.0), (10, 10.0)]
    assert downsample(pts, 20) == pts and downsample(pts, 1) == [(10, 10.0)]
