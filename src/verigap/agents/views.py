"""Report views for a real language model's episodes and training speed (docs/language_model.md)."""

from __future__ import annotations

from typing import Any

from verigap.report.views import markdown_table, view

FAMILIES = (("patchworld", "Patch World as text"), ("repo", "repo task (fixture library)"),
            ("silentbug", "silent bug, arm A"))


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{x:.0%}"


@view("local_model")
def local_model_table(data: dict[str, Any]) -> str:
    """Per family: episodes, solve rate, tool-call validity, steps, tokens/s."""
    rows = []
    for key, label in FAMILIES:
        d = data.get(key)
        if d is None:
            rows.append([label, "not measured", "", "", "", "", ""])
            continue
        validity = d.get("tool_call_validity", d.get("answer_parse_rate"))
        rows.append([label, str(d["episodes"]), _pct(d["solve_rate"]),
                     _pct(d.get("false_success")), _pct(validity),
                     f"{d['steps_mean']:.1f}", f"{d['tokens_per_s']:.2f}"
                     if d.get("tokens_per_s") is not None else "n/a"])
    table = markdown_table(["loop", "episodes", "solved (hidden check)", "false success",
                            "valid tool calls / answers parsed", "turns", "tokens/s"], rows)
    return (f"{table}\n\nModel `{data['model']}`, weights loaded in {data['load_s']:.0f} s; "
            f"1-minute load average {data['load_avg_1min_at_start']:.1f} on 2 cores when it "
            "started (other work shared the machine).")


@view("lm_grpo_speed")
def lm_grpo_speed_table(data: dict[str, Any]) -> str:
    """Seconds per GRPO step and what the pre-registered sweep would cost."""
    rows = [[str(data["steps"]), f"{data['prompts_per_step']} x {data['group']}",
             str(data["max_completion_length"]), ", ".join(f"{s:.0f}" for s in data["step_s"]),
             f"{data['median_step_s']:.0f}", f"{data['plan']['grpo_cpu_hours']:.1f}"]]
    scale = data["plan"].get("scale_to_registered_step", 1)
    note = ("" if scale == 1 else f"\n\nThe registered step (4 x 8) is {scale:g} times this "
            "one's completions; the hours scale the measured step by that factor (wall time on the loaded machine, not an idle one).")
    return markdown_table(["steps", "prompts x group", "max tokens", "seconds per step",
                           "median s/step", "wall hours for 9 runs x 200 steps at this load"], rows) + note
