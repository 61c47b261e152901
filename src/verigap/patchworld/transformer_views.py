"""Doc views of the transformer part: tables drawn from its results files.

``transformer_pilot`` and ``transformer_probes`` read ``results/patchworld/probes.json`` (written
by ``verigap patchworld probes``), ``transformer_speed`` reads
``results/patchworld/transformer_speed.json`` (``benchmarks/patchworld_transformer.py``) and
``transformer_verdicts`` reads ``results/experiments/verdicts_transformer.json``. No torch here.
"""

from __future__ import annotations

from typing import Any

from verigap.experiments.verdicts import entry_label, first_rule_verdict
from verigap.report.views import markdown_table, view

TARGET_LABELS = {
    "tested": "branch is tested",
    "broken": "branch is broken",
    "hack": "trained policy will delete or stub it",
}


def _ms(cell: dict[str, Any]) -> str:
    return f"{cell['mean']:.3f} ± {cell['std']:.3f}"


@view("transformer_pilot")
def pilot_table(data: dict[str, Any]) -> str:
    """Every setting of the transformer log: start and final rates, mean ± std over seeds."""
    rows = [
        [
            name,
            s["policy"],
            s["reward"],
            str(s["steps"]),
            _ms(s["start_true_success"]),
            _ms(s["final_visible_pass"]),
            _ms(s["final_true_success"]),
            _ms(s["final_false_success"]),
            _ms(s["kl_final"]),
            f"{s['cpu_s']['mean']:.0f}",
        ]
        for name, s in data["settings"].items()
    ]
    return markdown_table(
        [
            "setting",
            "policy",
            "reward",
            "GRPO steps",
            "start true success",
            "final visible pass",
            "final true success",
            "final false success",
            "KL to SFT",
            "CPU s / run",
        ],
        rows,
    )


@view("transformer_probes")
def probes_table(data: dict[str, Any]) -> str:
    """Last-layer probes before (SFT start) and after GRPO, with their controls."""
    rows = []
    for target, label in TARGET_LABELS.items():
        for when, name in (("start", "SFT start"), ("final", "after GRPO")):
            p = data["probes"][when][target]
            rows.append(
                [
                    label,
                    name,
                    _ms(p["bacc"]),
                    _ms(p["shuffled"]),
                    _ms(p["control"]),
                    _ms(p["input"]),
                    _ms(p["selectivity"]),
                    f"{p['positive_rate']['mean']:.3f}",
                ]
            )
    return markdown_table(
        [
            "probe label",
            "hidden states of",
            "probe",
            "shuffled labels",
            "control task",
            "input only",
            "selectivity",
            "positive rate",
        ],
        rows,
    )


@view("transformer_speed")
def speed_table(data: dict[str, Any]) -> str:
    """CPU milliseconds per GRPO step, medians of interleaved blocks, and the ratio."""
    cpu, wall = data["cpu_ms_per_step_median"], data["wall_ms_per_step_median"]
    return markdown_table(
        ["policy", "CPU ms / GRPO step", "wall ms / GRPO step"],
        [
            ["NumPy MLP", f"{cpu['mlp']:.2f}", f"{wall['mlp']:.2f}"],
            ["PyTorch transformer", f"{cpu['transformer']:.2f}", f"{wall['transformer']:.2f}"],
            [
                "ratio transformer / MLP",
                f"{data['ratio_cpu_transformer_over_mlp']:.2f}x",
                f"{data['ratio_wall_transformer_over_mlp']:.2f}x",
            ],
        ],
    )


@view("transformer_verdicts")
def verdicts_table(data: dict[str, Any]) -> str:
    """Each pre-registered prediction with its statistic, 90% interval and verdict (and the
    first rule's verdict beside it)."""

    def num(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"

    rows = []
    for pid, e in sorted(data["predictions"].items()):
        iv = e.get("interval")
        rows.append(
            [
                pid,
                e["prediction"],
                f"`{e['criterion_text']}`",
                num(e.get("statistic")),
                "—" if iv is None else f"[{num(iv[0])}, {num(iv[1])}]",
                entry_label(e),
                first_rule_verdict(e) or "—",
            ]
        )
    return markdown_table(
        ["id", "prediction", "criterion", "statistic", "90% interval", "verdict", "first rule"],
        rows,
    )
