"""The language-model log loads in the experiment log's registry, resolves each setting to its
trainer's config, runs (on a tiny random model) and is judged as the MLP log is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verigap.errors import ConfigError
from verigap.experiments.language_model import (
    LMSetting,
    curve_summary,
    run_curves,
    run_language_model,
)
from verigap.experiments.registry import load_registry, parse_registry
from verigap.experiments.runner import plan, run_experiment
from verigap.patchworld.grpo import GRPOConfig

REGISTRY = Path(__file__).parents[2] / "src/verigap/experiments/predictions_language_model.yaml"


def test_registry_loads_and_each_setting_resolves_to_its_trainer() -> None:
    reg = load_registry(REGISTRY)
    assert reg.trainer == "language_model" and len(reg.predictions) == 5
    lm = reg.config("lm_audit_25", 2)
    assert isinstance(lm, LMSetting) and lm.steps == reg.defaults["grpo"]["steps"]
    cfg = lm.experiment_config()
    assert cfg.seed == 2 and cfg.reward == {"kind": "audit", "rate": 0.25}
    assert cfg.lora_targets == ("q_proj", "k_proj", "v_proj", "o_proj")
    mlp = reg.config("mlp_visible_50", 0)
    # the MLP setting takes the MLP trainer's own defaults, not the language model's
    assert isinstance(mlp, GRPOConfig) and mlp.steps == lm.steps
    assert mlp.programs == GRPOConfig().programs
    jobs, where = plan(reg, None, Path("runs"))
    fns = {j.name.split("/")[0]: j.fn for j in jobs}
    assert fns["lm_visible"] is run_language_model and fns["mlp_visible_50"] is run_experiment
    assert len(jobs) == 12 and where[("lm_visible", 0)] != where[("lm_audit_25", 0)]


def test_setting_and_trainer_errors_are_one_line_and_name_the_fix() -> None:
    data = {
        "trainer": "language_model",
        "seeds": [0],
        "settings": {"a": {"grpo": {"group": 1}}},
        "predictions": [
            {
                "id": "X",
                "question": "q",
                "prediction": "p",
                "criterion": {
                    "kind": "threshold",
                    "setting": "a",
                    "metric": "final_false_success",
                    "compare": "<",
                    "value": 0.1,
                    "min_seeds": 1,
                },
            }
        ],
    }
    with pytest.raises(ConfigError, match="setting a, field grpo.group"):
        parse_registry(data)
    data["settings"] = {"a": {"trainer": "xgboost"}}
    with pytest.raises(ConfigError, match="unknown trainer 'xgboost'; use numpy_mlp or"):
        parse_registry(data)


@pytest.mark.slow
def test_language_model_log_runs_and_is_judged_on_a_tiny_model(tmp_path, monkeypatch) -> None:
    """`run_log` runs an LM setting through verigap.trl (SFT, GRPO, evaluations) and computes
    the verdict from the runs' held-out rates; the curves file labels every run's status."""
    from verigap.agents import _local
    from verigap.agents._tiny import tiny_chat_model
    from verigap.experiments.runner import run_log

    monkeypatch.setattr(_local, "resolve_weights", lambda name: Path(name))
    monkeypatch.setattr(_local, "load_model", lambda path: tiny_chat_model(seed=0))
    reg = parse_registry(
        {
            "trainer": "language_model",
            "seeds": [0],
            "defaults": {
                "model": "local:tiny",
                "sft": {"programs": 8},
                "grpo": {"steps": 2, "group": 2, "max_completion_length": 8},
                "lora": {"r": 4, "alpha": 8},
                "eval_programs": 2,
            },
            "settings": {
                "vis": {"reward": {"kind": "visible"}},
                "later": {"reward": {"kind": "visible"}, "grpo": {"steps": 3}},
            },
            "predictions": [
                {
                    "id": "T1",
                    "question": "q",
                    "prediction": "p",
                    "criterion": {
                        "kind": "threshold",
                        "setting": "vis",
                        "metric": "final_false_success",
                        "compare": "<",
                        "value": 0.5,
                        "min_seeds": 1,
                    },
                }
            ],
        }
    )
    data = run_log(
        reg,
        ["T1"],
        runs_dir=tmp_path / "runs",
        results_path=tmp_path / "v.json",
        executor="serial",
        progress=False,
    )
    entry = data["predictions"]["T1"]
    # a random model parses no answer, so it has no false success; one seed gives no interval,
    # so the rule calls it inconclusive
    assert entry["values"] == {"vis": {"final_false_success": [0.0]}}
    assert entry["verdict"] == "inconclusive" and "too few seeds" in entry["reason"]
    curves = run_curves(reg, tmp_path / "runs")
    vis, later = curves["vis"]["seeds"]["0"], curves["later"]["seeds"]["0"]
    assert vis["status"] == "finished" and [r["step"] for r in vis["curve"]] == [1, 2]
    assert later["status"] == "not started" and later["steps"] == 3
    assert later["start"] == vis["start"]  # one SFT per seed: its start is known already
    stored = json.loads((tmp_path / "v.json").read_text())["data"]
    assert stored["runs"]["vis/seed0"]["steps"] == 2
    # a second call reads the finished run back (its stored config is the trainer's form, not
    # the registry's) instead of refusing it as a different config
    again = run_log(
        reg,
        ["T1"],
        runs_dir=tmp_path / "runs",
        results_path=tmp_path / "v2.json",
        executor="serial",
        progress=False,
    )
    assert again["predictions"]["T1"]["values"] == entry["values"]


def test_curve_summary_means_every_field_over_all_and_the_last_steps() -> None:
    curve = [
        {"step": i + 1, "reward": r, "visible_pass": r, "answer_parsed": 1.0}
        for i, r in enumerate([0.0, 0.5, 1.0, 0.25])
    ]
    out = curve_summary(curve, last=2)
    assert out["all_steps"] == {"reward": 0.4375, "visible_pass": 0.4375, "answer_parsed": 1.0}
    assert out["last_2_steps"]["reward"] == 0.625
    assert curve_summary([]) == {}


def test_steps_with_reward_variance_come_from_the_trl_log_or_the_newest_checkpoint(
    tmp_path,
) -> None:
    from verigap.experiments.language_model import _steps_with_reward_variance

    log = [{"frac_reward_zero_std": f, "loss": 0.0} for f in (1.0, 0.0, 1.0, 0.5)]
    assert _steps_with_reward_variance(tmp_path) is None  # nothing ran yet
    ckpt = tmp_path / "grpo" / "checkpoint-3"
    ckpt.mkdir(parents=True)
    state = {"global_step": 3, "log_history": log[:3]}
    (ckpt / "trainer_state.json").write_text(json.dumps(state))
    assert _steps_with_reward_variance(tmp_path) == 1
    (tmp_path / "result.json").write_text(json.dumps({"trl_log": log}))
    assert _steps_with_reward_variance(tmp_path) == 2
