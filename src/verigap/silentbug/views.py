"""Views of the silent-bug results files, for docs markers and the site (``docs/results.md``).

``silentbug_controls`` shows the hack detectors' verdicts on honest edits and hacks, before
(the regexes) and after (what the scored runs did); ``silentbug_curves`` shows the clean
learning curves; ``silentbug_eval`` shows an ``analyze --out`` file as one row per agent x arm over all bugs;
``silentbug_references`` shows the clean and broken references the scorer re-ran on the
scoring machine beside the committed calibration's means (machine-specific numbers: the
verdicts must agree, the returns need not); ``silentbug_ppo_speed`` shows a
``benchmarks/silentbug_ppo.py`` results file, every row against both baselines;
``silentbug_variant_calibration`` the bank calibrated on a substrates variant beside the
committed calibration; ``silentbug_adversaries`` the scripted adversaries' verdicts at the full
budget (``benchmarks/silentbug_adversaries.py``), ``silentbug_bug_line_adversary`` the code
written on the bug's lines before and after the toward-clean and additions rules;
``silentbug_local_model`` and ``silentbug_local_beside`` the local language model's episodes and
its analysis beside the scripted controls (``benchmarks/silentbug_local_model.py``).
"""

from __future__ import annotations

from typing import Any

from verigap.report.views import markdown_table, view

EVAL_COLUMNS = (
    "reward",
    "outcome",
    "localized",
    "component_strict",
    "component_set",
    "correct",
    "invalid",
    "hacked",
)


def _cell(x: dict[str, Any]) -> str:
    if x["mean"] is None:
        return "-"
    return f"{x['mean']:.3f}" + (f" ± {x['se']:.3f}" if x["se"] is not None else "")


@view("silentbug_eval")
def eval_table(data: dict[str, Any]) -> str:
    """Mean ± SE (n episodes) per agent x arm over every bug of the eval."""
    rows = [
        [
            r["agent"].removeprefix("scripted:"),
            r["arm"],
            str(r["n"]),
            *(_cell(r[c]) for c in EVAL_COLUMNS),
        ]
        for r in data["rows"]
        if r["class"] == "all"
    ]
    return markdown_table(["agent", "arm", "n", *EVAL_COLUMNS], rows)


@view("silentbug_references")
def references_table(data: dict[str, Any]) -> str:
    """Per bug: the scorer's clean and broken references on the scoring machine (mean over
    the calibration seeds) beside the committed calibration's means."""
    from verigap.silentbug.calibrate import read_baselines

    committed = read_baselines()["bugs"]
    seen: dict[str, dict[str, Any]] = {}
    for e in data["per_episode"]:
        if e["returns"].get("clean") is not None and e["bug"] not in seen:
            seen[e["bug"]] = e["returns"]
    rows = []
    for bug, ret in seen.items():
        c = committed.get(bug, {})
        rows.append(
            [
                f"`{bug}`",
                f"{ret['clean']:.1f}",
                f"{ret['broken']:.1f}",
                _f(c.get("clean", {}).get("mean")),
                _f(c.get("broken", {}).get("mean")),
                c.get("verdict", "-"),
            ]
        )
    return markdown_table(
        [
            "bug",
            "clean (scorer)",
            "broken (scorer)",
            "clean (calibration)",
            "broken (calibration)",
            "calibration verdict",
        ],
        rows,
    )


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


@view("silentbug_eval_summary")
def summary_table(data: dict[str, Any]) -> str:
    """Per agent over all its episodes: reward (mean, largest), correct, INVALID, wall time."""
    s, wall = data["summary"], data["wall_s"]["by_agent"]
    rows = [
        [
            a,
            str(x["episodes"]),
            str(x["bugs"]),
            f"{x['mean_reward']:.3f}",
            f"{x['max_reward']:.3f}",
            f"{x['correct']:.3f}",
            f"{x['invalid']:.3f}",
            f"{wall[a]:.0f}",
        ]
        for a, x in s.items()
    ]
    return markdown_table(
        [
            "agent",
            "episodes",
            "bugs",
            "mean reward",
            "largest reward",
            "correct",
            "INVALID",
            "wall s (summed)",
        ],
        rows,
    )


# ---- the calibration and the ablation (src/verigap/silentbug/bugs/*.json, one copy: the
# scorer reads them at runtime, so they ship in the package and the docs read them there)


def _ms(arm: dict[str, Any]) -> str:
    if arm.get("mean") is None:
        return "-"
    return (
        f"{arm['mean']:.1f} ± {arm['std']:.1f}"
        if arm.get("std") is not None
        else f"{arm['mean']:.1f}"
    )


@view("silentbug_calibration")
def calibration_table(data: dict[str, Any]) -> str:
    """Every bug: clean and broken (mean ± sample std over seeds), margin, threshold, verdict,
    and when it was calibrated (a merged file holds entries from several invocations)."""
    rows = []
    for bug_id, b in data["bugs"].items():
        ran = bool(b["broken"]["scores"])
        rows.append(
            [
                f"`{bug_id}`",
                b["substrate"],
                b["class"],
                b.get("mechanism") or "-",
                _ms(b["clean"]),
                _ms(b["broken"]) if ran else "not run",
                _f(b["margin"]) if ran else "-",
                _f(b["threshold"]) if ran else "-",
                b["verdict"],
                calibrated_when(b),
            ]
        )
    return markdown_table(
        [
            "bug",
            "substrate",
            "class",
            "mechanism",
            "clean",
            "broken",
            "margin",
            "threshold",
            "verdict",
            "calibrated",
        ],
        rows,
    )


def calibrated_when(entry: dict[str, Any]) -> str:
    """The day of the invocation that produced a merged entry; "first run" for entries from
    the calibration written before files carried provenance; "-" in an unmerged file."""
    by = entry.get("calibrated_by")
    if by is None:
        return "-"
    return by["written_at"][:10] if "written_at" in by else "first run"


@view("silentbug_clean")
def clean_table(data: dict[str, Any]) -> str:
    """Clean runs per substrate: the score of each seed, mean ± std."""
    seeds = ", ".join(map(str, data["seeds"]))
    rows = [
        [
            name,
            ", ".join(f"{x:.1f}" for x in s["clean"]["scores"]),
            _ms(s["clean"]),
            calibrated_when(s),
        ]
        for name, s in data["substrates"].items()
    ]
    return markdown_table(
        ["substrate", f"clean scores (seeds {seeds})", "mean ± std", "calibrated"], rows
    )


@view("silentbug_ablation")
def ablation_table(data: dict[str, Any]) -> str:
    """Clean vs one mechanism removed: per-seed ablated scores, drop, threshold, verdict."""
    rows = [
        [
            r["substrate"],
            r["mechanism"],
            _ms(r["clean"]),
            f"{_ms(r['ablated'])} ({', '.join(f'{x:.1f}' for x in r['ablated']['scores'])})",
            _f(r["margin"]),
            _f(r["threshold"]),
            "yes" if r["load_bearing"] else "no",
            calibrated_when(r),
        ]
        for r in data["rows"]
    ]
    return markdown_table(
        [
            "substrate",
            "removed",
            "clean",
            "ablated (per seed)",
            "drop",
            "3 x max std",
            "load-bearing",
            "calibrated",
        ],
        rows,
    )


def bank_counts(data: dict[str, Any]) -> dict[str, Any]:
    """Accepted bugs by class and substrate, and the mechanisms of the accepted omissions."""
    accepted = [b for b in data["bugs"].values() if b["verdict"] == "accepted"]
    by: dict[str, dict[str, int]] = {}
    for b in accepted:
        row = by.setdefault(b["class"], {})
        row[b["substrate"]] = row.get(b["substrate"], 0) + 1
    return {
        "accepted": len(accepted),
        "total": len(data["bugs"]),
        "by_class": by,
        "substrates": sorted({b["substrate"] for b in accepted}),
        "omission_mechanisms": sorted(
            {b["mechanism"] for b in accepted if b["class"] == "omission"}
        ),
    }


@view("silentbug_bank")
def bank_table(data: dict[str, Any]) -> str:
    """Accepted bugs: class x substrate counts, with totals."""
    counts = bank_counts(data)
    subs = sorted({b["substrate"] for b in data["bugs"].values()})
    rows = []
    for cls in ("wrong_line", "omission", "interaction", "statistical"):
        row = counts["by_class"].get(cls, {})
        rows.append([cls, *(str(row.get(s, 0)) for s in subs), str(sum(row.values()))])
    per_sub = [
        sum(counts["by_class"].get(c, {}).get(s, 0) for c in counts["by_class"]) for s in subs
    ]
    rows.append(["all", *map(str, per_sub), f"{counts['accepted']} of {counts['total']}"])
    return markdown_table(["class (accepted)", *subs, "total"], rows)


def _omissions(data: dict[str, Any], prefix: str) -> str:
    """``n/m accepted (bug: verdict, ...)`` over the omission bugs of one environment, accepted
    first: the comparison with the write-up's omission-bug finding."""
    bugs = sorted(
        (
            (k, b["verdict"])
            for k, b in data["bugs"].items()
            if b["class"] == "omission" and k.startswith(prefix)
        ),
        key=lambda kv: (kv[1] != "accepted", kv[0]),
    )
    n_ok = sum(v == "accepted" for _, v in bugs)
    return f"{n_ok}/{len(bugs)} accepted ({', '.join(f'{k}: {v}' for k, v in bugs)})"


@view("silentbug_omissions_cartpole")
def omissions_cartpole(data: dict[str, Any]) -> str:
    """The CartPole omission bugs' verdicts, on one line."""
    return _omissions(data, "cartpole_")


@view("silentbug_omissions_acrobot")
def omissions_acrobot(data: dict[str, Any]) -> str:
    """The Acrobot omission bugs' verdicts, on one line."""
    return _omissions(data, "acrobot_")


@view("silentbug_accepted_spread")
def accepted_spread(data: dict[str, Any]) -> str:
    """How many bug classes and substrates the accepted bugs span, on one line."""
    counts = bank_counts(data)
    return f"{len(counts['by_class'])} classes, {len(counts['substrates'])} substrates"


@view("silentbug_controls")
def controls_table(data: dict[str, Any]) -> str:
    """One row per control: the bug, honest or hacker, the verdict before and after."""
    rows = [
        [
            f"`{r['control']}`",
            f"`{r['bug']}`",
            r["kind"],
            r["what"],
            r["before"],
            r["after"],
            "yes" if r["ok"] else "**no**",
        ]
        for r in data["rows"]
    ]
    return markdown_table(
        ["control", "bug", "kind", "edit", "before (regexes)", "after (behaviour)", "as expected"],
        rows,
    )


@view("silentbug_curves")
def curves_table(data: dict[str, Any]) -> str:
    """Mean episode return per slice of the budget, one row per substrate and seed."""
    bins = data["bins"]
    head = [f"{100 * i // bins}-{100 * (i + 1) // bins}%" for i in range(bins)]
    rows = [[r["substrate"], str(r["seed"]), *(_f(x) for x in r["curve"])] for r in data["rows"]]
    return markdown_table(["substrate", "seed", *head], rows)


@view("silentbug_ppo_speed")
def ppo_speed_table(data: dict[str, Any]) -> str:
    """A ``benchmarks/silentbug_ppo.py`` results file: CPU seconds per 40k-step run of each
    implementation, its speed-up over the fresh baseline and (for the preloaded rows) over the
    preloaded one, and its score on each seed (a variant's scores beside the pristine row's
    show whether it moved the numbers)."""
    rows = []
    for name, row in data["implementations"].items():
        like = row.get("speedup_cpu_vs_preloaded_baseline")
        same = row.get("same_scores_as_pristine")
        rows.append(
            [
                name,
                f"{row['cpu_s']:.1f}",
                f"{row['speedup_cpu']:.2f}x",
                "-" if like is None else f"{like:.2f}x",
                ", ".join(f"{r['score']:.1f}" for r in row["runs"]),
                "-" if same is None else ("yes" if same else "no"),
            ]
        )
    return markdown_table(
        [
            "implementation",
            "CPU-s per run",
            "x fresh baseline (CPU)",
            "x preloaded baseline (CPU)",
            "score per seed",
            "same scores as pristine",
        ],
        rows,
    )


@view("silentbug_variant_calibration")
def variant_calibration_table(data: dict[str, Any]) -> str:
    """``benchmarks/silentbug_variant_calibration.py``: each bug's verdict and gap (clean minus
    broken, against 3 x the larger seed std) on a substrates variant beside the committed ones."""

    def gap(margin: float | None, threshold: float | None) -> str:
        return "-" if margin is None else f"{margin:.1f} / {threshold:.1f}"

    rows = [
        [
            r["id"],
            r["committed_verdict"],
            r["variant_verdict"],
            gap(r["committed_margin"], r["committed_threshold"]),
            gap(r["variant_margin"], r["variant_threshold"]),
            "" if r["same_verdict"] else "changed",
        ]
        for r in data["rows"]
    ]
    return markdown_table(
        [
            "bug",
            "committed",
            "variant",
            "gap / threshold, committed",
            "gap / threshold, variant",
            "",
        ],
        rows,
    )


def _num(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


@view("silentbug_adversaries")
def adversaries_table(data: dict[str, Any]) -> str:
    """Each scripted agent's verdict at the full budget: the scorer's evaluated returns of the
    submission and its references, and the environment's returns late in its training."""
    rows = [
        [
            r["agent"],
            f"`{r['bug']}`",
            r["arm"],
            _num(r["training_mean"]),
            _num(r["patched"]),
            _num(r["counterfactual_broken"]),
            _num(r["counterfactual_clean"]),
            _num(r["outcome"], ".3f"),
            _num(r["reward"], ".3f"),
            "yes" if r["correct"] else "no",
            ", ".join(r["hacks"]) or "none",
        ]
        for r in data["rows"]
    ]
    return markdown_table(
        [
            "agent",
            "bug",
            "arm",
            "training return (late)",
            "evaluated policy",
            "broken'",
            "clean'",
            "outcome",
            "reward",
            "correct",
            "hacks",
        ],
        rows,
    )


@view("silentbug_bug_line_adversary")
def bug_line_adversary_table(data: dict[str, Any]) -> str:
    """Code written on the bug's lines, before and after: the outcome the plain references pay
    (the edit counted as the fix, as before) beside the outcome against references that carry
    the edit's additions, the toward-clean check and the verdict."""
    rows = [
        [
            r["agent"],
            f"`{r['bug']}`",
            _num(r["patched"]),
            _num(r["broken"]),
            _num(r["clean"]),
            _num(r.get("outcome_plain"), ".3f"),
            _num(r["counterfactual_broken"]),
            _num(r["counterfactual_clean"]),
            _num(r["outcome"], ".3f"),
            "yes" if r.get("fix_toward_clean") else "no",
            "yes" if r["correct"] else "no",
            _num(r["reward"], ".3f"),
        ]
        for r in data["rows"]
    ]
    return markdown_table(
        [
            "agent",
            "bug",
            "evaluated policy",
            "broken",
            "clean",
            "outcome before (plain references)",
            "broken'",
            "clean'",
            "outcome now",
            "toward clean",
            "correct",
            "reward",
        ],
        rows,
    )


@view("silentbug_local_model")
def local_model_table(data: dict[str, Any]) -> str:
    """The local model's episodes: how each ended, tool calls written and accepted, generated
    tokens per second, and the verdict."""
    rows = [
        [
            f"`{r['bug']}`",
            r["arm"],
            str(r["turns"]),
            str(r["tool_calls_written"]),
            str(r["tool_calls_accepted"]),
            "yes" if r["diagnosed"] else "no",
            str(r["new_tokens"]),
            _num(r["tokens_per_s"], ".2f"),
            _num(r["reward"], ".3f"),
            "yes" if r["correct"] else "no",
            r["status"] or "-",
        ]
        for r in data["episodes"]
    ]
    return markdown_table(
        [
            "bug",
            "arm",
            "turns",
            "tool calls written",
            "accepted",
            "diagnosis submitted",
            "new tokens",
            "tokens/s",
            "reward",
            "correct",
            "ended",
        ],
        rows,
    )


@view("silentbug_local_beside")
def local_beside_table(data: dict[str, Any]) -> str:
    """Every agent of the file's analysis per arm (mean ± SE over its episodes), then arm D
    against the best constant answer and chance on the bugs each agent was given."""
    a = data["analysis"]
    out = eval_table(a)
    rows = [
        [
            r["agent"].removeprefix("scripted:"),
            str(r["n"]),
            _num(r["strict"], ".3f"),
            _num(r["set"], ".3f"),
            f"{r['best_constant_strict']['score']:.3f} ({r['best_constant_strict']['component']})",
            f"{r['best_constant_set']['score']:.3f} ({r['best_constant_set']['component']})",
            f"{r['chance_strict']:.3f}",
            f"{r['chance_set']:.3f}",
        ]
        for r in a["diagnosis_only"]
    ]
    return (
        out
        + "\n\n"
        + markdown_table(
            [
                "agent (arm D)",
                "bugs",
                "strict",
                "set",
                "best constant, strict",
                "best constant, set",
                "chance, strict",
                "chance, set",
            ],
            rows,
        )
    )
