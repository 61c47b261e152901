"""The language-model report views render hand-built results."""

from __future__ import annotations

from verigap.report.views import get_view

DATA = {
    "model": "local:smollm2",
    "load_s": 20.0,
    "load_avg_1min_at_start": 3.2,
    "patchworld": {
        "episodes": 6,
        "solve_rate": 0.0,
        "false_success": 0.0,
        "answer_parse_rate": 0.5,
        "steps_mean": 1.0,
        "tokens_per_s": 4.0,
    },
    "repo": {
        "episodes": 1,
        "solve_rate": 0.0,
        "false_success": 0.0,
        "tool_call_validity": None,
        "steps_mean": 3.0,
        "tokens_per_s": 2.5,
    },
}


def test_local_model_view_has_a_row_per_loop() -> None:
    out = get_view("local_model")(DATA)
    assert "| Patch World as text | 6 | 0% | 0% | 50% | 1.0 | 4.00 |" in out
    assert "| repo task (fixture library) | 1 | 0% | 0% | n/a | 3.0 | 2.50 |" in out
    assert "| silent bug, arm A | not measured |" in out


def test_grpo_speed_view_shows_each_phase_with_and_without_checkpointing() -> None:
    def step(gen: float, back: float) -> dict:
        parts = {
            "generate": gen,
            "reference_forward": 10.0,
            "loss_forward": 12.0,
            "backward_and_rest": back,
        }
        parts["step"] = sum(parts.values())
        return {k: {"cpu_s": v, "wall_s": 3 * v} for k, v in parts.items()}

    run = {
        "prompts_per_step": 1,
        "group": 4,
        "max_completion_length": 32,
        "lora_r": 16,
        "beta": 0.04,
        "threads": 1,
        "numerics": "pinned",
        "load_avg_1min": 20.0,
    }
    out = get_view("lm_grpo_speed")(
        {
            "runs": {
                "checkpointing": {**run, "steps": [step(15.0, 40.0)]},
                "no_checkpointing": {**run, "steps": [step(14.0, 25.0)]},
            }
        }
    )
    assert "| backward and optimizer | 40.0 | 120 | 25.0 | 75 |" in out
    assert "| whole step | 77.0 | 231 | 61.0 | 183 |" in out
    assert "1 thread(s), pinned" in out


def test_start_probe_view_counts_groups_with_reward_variance() -> None:
    rates = {
        "answer_parsed": 0.95,
        "tested_branch_exact": 0.1,
        "visible_pass": 0.25,
        "false_success": 0.05,
        "groups_with_reward_variance": 0.2,
        "groups": 20,
    }
    data = {
        "probes": {
            "k1": {
                "config": {"k": 1, "prompt": "compact"},
                "prompt_tokens_mean": 204.7,
                "greedy": rates,
                "sampled": {"temperature 1.0 top_p 1.0": rates},
            }
        }
    }
    out = get_view("lm_start_probe")(data)
    rows = [ln for ln in out.splitlines() if ln.startswith("| k1 ")]
    assert len(rows) == 2 and "| 205 | greedy |" in rows[0]
    assert rows[0].endswith("| n/a |") and rows[1].endswith("| 4 of 20 |")


def test_run_means_view_lists_language_model_runs_with_logged_steps_only() -> None:
    means = {"reward": 0.5, "answer_parsed": 1.0, "visible_pass": 0.5}
    means |= {"true_success": 0.25, "false_success": 0.25}
    run = {
        "steps": 50,
        "steps_done": 12,
        "steps_with_reward_variance": 3,
        "curve_mean": {"all_steps": means, "last_10_steps": {**means, "reward": 0.75}},
        "grpo_cost": {"cpu_s_per_step": 30.2, "wall_s_per_step": 35.5},
    }
    data = {
        "settings": {
            "lm_visible": {"trainer": "language_model", "seeds": {"0": run, "1": {}}},
            "mlp": {"trainer": "numpy_mlp", "seeds": {"0": run}},
        }
    }
    rows = [ln for ln in get_view("lm_run_means")(data).splitlines() if ln.startswith("| lm")]
    assert rows == [
        "| lm_visible | 0 | 12/50 | 3 | 50% (75%) | 100% (100%) | 50% (50%) | 25% (25%) | 25% (25%) "
        "| 30 / 36 |"
    ]
