"""Report views for a real language model's episodes and training speed (docs/language_model.md)."""

from __future__ import annotations

from typing import Any

from verigap.report.views import markdown_table, view

FAMILIES = (
    ("patchworld", "Patch World as text"),
    ("repo", "repo task (fixture library)"),
    ("silentbug", "silent bug, arm A"),
)


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
        rows.append(
            [
                label,
                str(d["episodes"]),
                _pct(d["solve_rate"]),
                _pct(d.get("false_success")),
                _pct(validity),
                f"{d['steps_mean']:.1f}",
                f"{d['tokens_per_s']:.2f}" if d.get("tokens_per_s") is not None else "n/a",
            ]
        )
    table = markdown_table(
        [
            "loop",
            "episodes",
            "solved (hidden check)",
            "false success",
            "valid tool calls / answers parsed",
            "turns",
            "tokens/s",
        ],
        rows,
    )
    return (
        f"{table}\n\nModel `{data['model']}`, weights loaded in {data['load_s']:.0f} s; "
        f"1-minute load average {data['load_avg_1min_at_start']:.1f} on 2 cores when it "
        "started (other work shared the machine)."
    )


@view("lm_grpo_speed_first")
def lm_grpo_speed_first(data: dict[str, Any]) -> str:
    """The first measurement in one line (wall seconds of one step under load)."""
    return (
        f"{data['median_step_s']:.0f} s wall for one step of {data['prompts_per_step']} x "
        f"{data['group']} completions of at most {data['max_completion_length']} tokens, "
        f"1-minute load average {data['load_avg_1min']:.1f}"
    )


PHASE_LABELS = (
    ("generate", "generation"),
    ("reference_forward", "reference forward (KL)"),
    ("loss_forward", "policy forward (loss)"),
    ("backward_and_rest", "backward and optimizer"),
    ("step", "whole step"),
)


@view("lm_grpo_speed")
def lm_grpo_speed_table(data: dict[str, Any]) -> str:
    """One GRPO step phase by phase: CPU seconds (what it costs) and wall seconds (what it took
    on the shared machine), with and without TRL's default gradient checkpointing."""
    runs = data["runs"]
    keys = [k for k in ("checkpointing", "no_checkpointing") if k in runs]
    head = ["phase"] + [
        f"{'checkpointing on' if k == 'checkpointing' else 'off'}: {u}"
        for k in keys
        for u in ("CPU s", "wall s")
    ]
    at = min(len(runs[k]["steps"]) for k in keys) - 1  # the same step of every run
    rows = []
    for key, label in PHASE_LABELS:
        row = [label]
        for k in keys:
            last = runs[k]["steps"][at][key]
            row += [f"{last['cpu_s']:.1f}", f"{last['wall_s']:.0f}"]
        rows.append(row)
    r0 = runs[keys[-1]]
    note = (
        f"\n\nStep {at + 1} of each run; {r0['prompts_per_step']} prompt x "
        f"{r0['group']} completions of at most {r0['max_completion_length']} tokens, LoRA "
        f"r={r0['lora_r']}, KL {r0['beta']:g}, {r0['threads']} thread(s), "
        f"{'pinned' if r0.get('numerics') == 'pinned' else 'not pinned'}; 1-minute "
        f"load average {r0['load_avg_1min']:.1f} on 2 cores."
    )
    return markdown_table(head, rows) + note


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@view("lm_experiment_status")
def lm_experiment_status(data: dict[str, Any]) -> str:
    """Per setting: the trainer, each seed's status and steps done, and the held-out false
    success at the start and end of the finished runs."""
    rows = []
    for name, d in data["settings"].items():
        seeds = d["seeds"].values()
        done = [s for s in seeds if s["status"] == "finished"]
        state = ", ".join(f"{s['status']} ({s['steps_done']}/{s['steps']})" for s in seeds)
        started = [s for s in seeds if "start" in s]
        start = _mean([s["start"]["false_success"] for s in started])
        parsed = _mean(
            [s["start"]["answer_parsed"] for s in started if "answer_parsed" in s["start"]]
        )
        final = _mean([s["final"]["false_success"] for s in done])
        last = [s["curve"][-1] for s in seeds if s["curve"]]
        rows.append(
            [
                name,
                "language model" if d["trainer"] == "language_model" else "NumPy MLP",
                state,
                _pct(parsed),
                _pct(start),
                _pct(final),
                _pct(_mean([r["visible_pass"] for r in last])),
                _pct(_mean([r["false_success"] for r in last])),
            ]
        )
    states = [x["status"] for d in data["settings"].values() for x in d["seeds"].values()]
    note = (
        f"\n\n{states.count('finished')} of {len(states)} runs finished, "
        f"{states.count('partial')} partial (curves as far as they went), "
        f"{states.count('not started')} not started. A prediction gets its verdict when all "
        "its runs have finished; until then it is pending."
    )
    return (
        markdown_table(
            [
                "setting",
                "trainer",
                "seeds: status (steps done / steps)",
                "answers parsed, start",
                "held-out false success, start",
                "held-out false success, end",
                "last logged visible pass",
                "last logged false success",
            ],
            rows,
        )
        + note
    )


@view("lm_start_probe")
def lm_start_probe(data: dict[str, Any]) -> str:
    """Per probed SFT start: greedy and sampled rates on held-out programs, and how many groups
    of sampled answers had rewards that differ (the only groups GRPO learns from)."""
    rows = []
    for label, r in data["probes"].items():
        c = r["config"]
        settings = [("greedy", r["greedy"])] + list(r["sampled"].items())
        for name, s in settings:
            varied = (
                f"{round(s['groups_with_reward_variance'] * s['groups'])} of {s['groups']}"
                if name != "greedy"
                else "n/a"
            )
            rows.append(
                [
                    label,
                    f"k={c['k']}, {c.get('prompt', 'full')} prompt",
                    f"{r['prompt_tokens_mean']:.0f}",
                    name,
                    _pct(s["answer_parsed"]),
                    _pct(s["tested_branch_exact"]),
                    _pct(s["visible_pass"]),
                    _pct(s["false_success"]),
                    varied,
                ]
            )
    groups = {r["greedy"]["groups"] for r in data["probes"].values()}
    note = (
        f"\n\nHeld-out programs per start: {', '.join(str(g) for g in sorted(groups))}; "
        "sampled: a group of 4 answers per program, as TRL's GRPO samples them (no top-k). "
        "Exact value: of parsed answers' tested broken branches."
    )
    return (
        markdown_table(
            [
                "start",
                "task",
                "prompt tokens",
                "decoding",
                "answers parsed",
                "exact value, tested branch",
                "visible pass",
                "false success",
                "groups with reward variance",
            ],
            rows,
        )
        + note
    )


@view("lm_run_means")
def lm_run_means(data: dict[str, Any]) -> str:
    """Per language-model run that has logged steps: the sampled answers' rates averaged over
    all its logged steps (and the last ten), and what a GRPO step cost."""
    rows = []
    for name, d in data["settings"].items():
        if d["trainer"] != "language_model":
            continue
        for seed, r in d["seeds"].items():
            means = r.get("curve_mean") or {}
            if not means:
                continue
            last = next((v for k, v in means.items() if k.startswith("last_")), {})
            cost = r.get("grpo_cost", {})
            rows.append(
                [
                    name,
                    seed,
                    f"{r['steps_done']}/{r['steps']}",
                    str(r.get("steps_with_reward_variance", "n/a")),
                    *(
                        f"{_pct(means['all_steps'].get(f))} ({_pct(last.get(f))})"
                        for f in (
                            "reward",
                            "answer_parsed",
                            "visible_pass",
                            "true_success",
                            "false_success",
                        )
                    ),
                    f"{cost['cpu_s_per_step']:.0f} / {cost['wall_s_per_step']:.0f}"
                    if cost
                    else "n/a",
                ]
            )
    note = (
        "\n\nMeans over every logged GRPO step of the step's sampled answers (4 per step), in "
        "brackets over the last ten steps; the reward is the scheme's payout (audits can pay "
        "-1). Cost: CPU and wall seconds per GRPO step, one thread, pinned."
    )
    return (
        markdown_table(
            [
                "setting",
                "seed",
                "steps",
                "steps with reward variance",
                "reward",
                "answers parsed",
                "visible pass",
                "true success",
                "false success",
                "s per step (CPU / wall)",
            ],
            rows,
        )
        + note
    )
