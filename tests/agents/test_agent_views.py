"""The language-model report views render hand-built results."""

from __future__ import annotations

from verigap.report.views import get_view

DATA = {"model": "local:smollm2", "load_s": 20.0, "load_avg_1min_at_start": 3.2,
        "patchworld": {"episodes": 6, "solve_rate": 0.0, "false_success": 0.0,
                       "answer_parse_rate": 0.5, "steps_mean": 1.0, "tokens_per_s": 4.0},
        "repo": {"episodes": 1, "solve_rate": 0.0, "false_success": 0.0,
                 "tool_call_validity": None, "steps_mean": 3.0, "tokens_per_s": 2.5}}


def test_local_model_view_has_a_row_per_loop() -> None:
    out = get_view("local_model")(DATA)
    assert "| Patch World as text | 6 | 0% | 0% | 50% | 1.0 | 4.00 |" in out
    assert "| repo task (fixture library) | 1 | 0% | 0% | n/a | 3.0 | 2.50 |" in out
    assert "| silent bug, arm A | not measured |" in out


def test_grpo_speed_view_states_the_plan() -> None:
    out = get_view("lm_grpo_speed")({"steps": 2, "prompts_per_step": 4, "group": 8,
                                     "max_completion_length": 48, "step_s": [61.0, 59.0],
                                     "median_step_s": 61.0, "plan": {"grpo_cpu_hours": 30.5}})
    assert "| 2 | 4 x 8 | 48 | 61, 59 | 61 | 30.5 |" in out
