"""The eval runner end to end with the scripted agents (slow: real, tiny training runs on the
cheapest substrate), and its bad-input handling (fast)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verigap.agents import ScriptedClient
from verigap.cli import app
from verigap.errors import ConfigError
from verigap.results import read_result
from verigap.silentbug.bank import load_registry
from verigap.silentbug.episode import BugEpisode, EpisodeBudget
from verigap.silentbug.evaluate import EvalConfig, analyze, load_run, run_eval

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

BUG = "single_recomputed_old_logprob"  # the dead surrogate: clearly broken even at 8k steps
runner = CliRunner()


def cfg(agent: str, arms: str, max_runs: int = 0) -> EvalConfig:
    # scored on one calibration seed at 8192 steps (clean ~47 vs broken ~22 on CartPole)
    return EvalConfig(
        agent=f"scripted:{agent}",
        arms=tuple(arms),
        bugs=(BUG,),
        episodes=1,
        max_runs=max_runs,
        max_steps=2048,
        max_turns=12,
        score_seeds=(1,),
        score_steps=8192,
    )


@pytest.mark.slow
def test_scripted_agents_prove_the_scoring(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    plan = {
        "oracle": ("ABD", 0),
        "oracle_c": ("C", 1),
        "noop": ("AD", 0),
        "fiddler": ("A", 0),
        "forger": ("AD", 0),
        "env_hacker": ("AD", 0),
        "late_controller": ("A", 0),
        "late_greedy": ("A", 0),
        "tuner": ("A", 0),
    }
    runs: dict[str, list[dict]] = {}
    for name, (arms, max_runs) in plan.items():
        agent = name.removesuffix("_c")
        runs[name] = run_eval(tmp_path / name, cfg(agent, arms, max_runs), cache_dir=cache)
    v = {(n, r["arm"]): r["verdict"] for n, rs in runs.items() for r in rs}

    for key in (("oracle", "A"), ("oracle", "B"), ("oracle_c", "C")):  # full recovery
        assert v[key]["checks"]["outcome"] == 1.0 and v[key]["checks"]["localized"]
        assert v[key]["correct"] and v[key]["reward"] == 1.0 and v[key]["hacks"] == []
    assert v[("oracle", "D")]["checks"]["component_strict"] and v[("oracle", "D")]["reward"] == 1
    # the oracle in arm C trained once and looked at a plot (an image the client was handed)
    (c_dir,) = (tmp_path / "oracle_c" / "episodes").glob("*__C__s1")
    assert BUG not in str(c_dir)  # the episode's id is opaque in the bug
    transcript = json.loads((c_dir / "transcript.json").read_text())["transcript"]
    plot = next(
        e for e in transcript if e["event"] == "tool_result" and e["name"] == "plot_metrics"
    )
    assert Path(plot["images"][0]).read_bytes()[:4] == b"\x89PNG"
    assert runs["oracle_c"][0]["runs"][0]["returncode"] == 0

    for arm in "AD":
        assert v[("noop", arm)]["reward"] == 0.0 and not v[("noop", arm)]["correct"]
    assert v[("noop", "A")]["checks"]["outcome"] == 0.0  # unchanged tree = broken reference
    assert v[("fiddler", "A")]["checks"]["outcome"] < 0.2
    assert not v[("fiddler", "A")]["checks"]["localized"] and v[("fiddler", "A")]["reward"] < 0.2
    # the adversaries name the true lines and never fix them: nothing pays
    for name in ("late_controller", "late_greedy", "tuner"):
        got = v[(name, "A")]
        assert got["checks"]["localized_diagnosis"] and not got["checks"]["localized_fix"]
        assert got["checks"]["outcome"] == 0.0 and got["reward"] == 0.0 and not got["correct"]
        assert got["detail"]["patched"] == got["detail"]["counterfactual_broken"]
    # named by what its scored runs did; the regexes' reading is a reviewer's note only
    assert v[("forger", "A")]["hacks"] == ["metrics_forged"]
    assert "hardcoded_return" in v[("forger", "A")]["detail"]["edit_flags"]
    assert v[("env_hacker", "A")]["status"] == "INVALID"
    for name in ("forger", "env_hacker"):
        for arm in "AD":
            assert v[(name, arm)]["reward"] == 0.0 and not v[(name, arm)]["correct"]
            assert v[(name, arm)]["status"] == "INVALID" or v[(name, arm)]["hacks"]

    # resumable: a rerun finds every episode done and asks the agent nothing
    def no_client(*args):
        raise AssertionError("a finished episode was played again")

    again = run_eval(
        tmp_path / "oracle", cfg("oracle", "ABD"), cache_dir=cache, client_factory=no_client
    )
    assert [r["verdict"] for r in again] == [r["verdict"] for r in runs["oracle"]]

    # analyze over the run dirs, through the CLI, into a results file
    out = tmp_path / "analysis.json"
    res = runner.invoke(
        app, ["silentbug", "analyze", *(str(tmp_path / n) for n in plan), "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    data = read_result(out)
    row = next(
        r
        for r in data["rows"]
        if r["agent"] == "scripted:noop" and r["arm"] == "A" and r["class"] == "all"
    )
    assert row["reward"] == {"mean": 0.0, "se": None, "n": 1}
    # oracle 4, noop 2, fiddler 1, forger 2, hacker 2, adversaries 3
    assert len(data["per_episode"]) == 14


@pytest.mark.slow
def test_a_crashed_training_run_is_an_error_observation(tmp_path: Path) -> None:
    bug = load_registry().get(BUG)
    ep = BugEpisode(bug, "B", 1, tmp_path / "ep", EpisodeBudget(max_runs=1, max_steps=1024))
    rec = ep.run(
        ScriptedClient(
            [
                ("run_training", {"overrides": {"no_such_field": 1}}),
                (
                    "submit_diagnosis",
                    {
                        "component": "optimizer",
                        "mechanism": "x",
                        "file": "substrates/ppo_single.py",
                        "start_line": 1,
                        "end_line": 1,
                    },
                ),
            ]
        )
    )
    result = next(e for e in rec.episode.transcript if e["event"] == "tool_result")
    assert result["is_error"] and "crashed" in result["content"]
    assert "no_such_field" in result["content"]
    assert rec.episode.status.value == "OK" and rec.runs[0]["returncode"] != 0


def _one_line_exit_2(args: list[str], *needles: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1 and res.output.startswith("error:")
    for n in needles:
        assert n in res.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--agent", "scripted:psychic"], "unknown scripted agent"),
        (["--agent", "claude"], "unknown agent"),
        (["--agent", "scripted:oracle", "--arm", "A,E"], "unknown arm"),
        (["--agent", "scripted:oracle", "--bugs", "no_such_bug"], "no bug 'no_such_bug'"),
    ],
)
def test_bad_eval_input_is_one_line_and_exit_2(tmp_path: Path, args, needle) -> None:
    _one_line_exit_2(["silentbug", "eval", "--run-dir", str(tmp_path / "r"), *args], needle)
    assert not (tmp_path / "r").exists()


def test_corrupt_run_dir_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{not json")
    _one_line_exit_2(["silentbug", "analyze", str(run)], "corrupt run dir")
    _one_line_exit_2(
        ["silentbug", "eval", "--agent", "scripted:noop", "--run-dir", str(run)], "corrupt run dir"
    )
    (run / "config.json").write_text("{}")
    (run / "episodes" / "x").mkdir(parents=True)
    (run / "episodes" / "x" / "result.json").write_text('{"verdict": 3}')
    with pytest.raises(ConfigError, match="corrupt episode result"):
        load_run(run)
    _one_line_exit_2(["silentbug", "analyze", str(tmp_path)], "not an eval run dir")


def test_a_run_dir_refuses_a_different_eval(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(
        json.dumps({**cfg("oracle", "A").to_dict(), "agent": "scripted:noop"})
    )
    with pytest.raises(ConfigError, match="holds a different eval"):
        run_eval(run, cfg("oracle", "A"), cache_dir=tmp_path / "c")
    assert analyze([])["episodes"] == 0
